//! How far a run without a record has got, from its journal: the steps it declared,
//! those done (and failed), running and waiting, and when each one ended, so `runs`
//! and the site show a run in progress, and what a dead one had done.

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::record::journal::Event;

/// A run's progress as its journal tells it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Progress {
    /// Steps the run declared (every matrix cell and revision its own).
    pub steps: u32,
    /// Steps ended, and how many of those did not succeed.
    pub done: u32,
    pub failed: u32,
    /// Steps started and not ended, by id.
    pub running: Vec<String>,
    /// Steps not started yet.
    pub waiting: u32,
    /// When the journal's last line was written (RFC 3339).
    pub last_event_at: Option<String>,
    /// When each step ended, in order: (RFC 3339 time, steps done by then). The
    /// run's progress over time.
    pub timeline: Vec<(String, u32)>,
    /// `run --detach` returned: its jobs run on without an orchestrator, and
    /// `orchestrate resume` collects them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub detached: bool,
    /// The run ended (its record is being written).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ended: bool,
}

/// What the journal's header names, for the run's row.
#[derive(Debug, Clone, Default)]
pub struct Started {
    pub run_id: Option<String>,
    pub plan: Option<String>,
    pub host: Option<String>,
    pub started_at: Option<String>,
}

fn stamp(t: &chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The progress in `dir/journal.jsonl`; None when there is no journal to read.
pub fn read(dir: &Path) -> Option<(Progress, Started)> {
    let mut p = Progress::default();
    let mut s = Started::default();
    let mut running: BTreeSet<String> = BTreeSet::new();
    let mut ended: BTreeSet<String> = BTreeSet::new();
    crate::evidence::journal::read_each(&dir.join("journal.jsonl"), |l| {
        p.last_event_at = Some(stamp(&l.time));
        match l.event {
            Event::RunStarted { run_id, header } => {
                p.steps = u32::try_from(header.steps.len()).unwrap_or(u32::MAX);
                s = Started {
                    run_id: Some(run_id),
                    plan: Some(header.plan.name.clone()),
                    host: Some(header.host.hostname.clone()),
                    started_at: Some(stamp(&l.time)),
                };
            }
            Event::StepStarted { step } => {
                running.insert(step);
            }
            Event::StepEnded { step, status, .. } => {
                running.remove(&step);
                if ended.insert(step) {
                    p.done += 1;
                    if !status.is_success() {
                        p.failed += 1;
                    }
                    p.timeline.push((stamp(&l.time), p.done));
                }
            }
            Event::RunDetached { .. } => p.detached = true,
            Event::RunEnded { .. } => p.ended = true,
            _ => {}
        }
        Ok(())
    })
    .ok()?;
    s.run_id.as_ref()?;
    p.running = running.into_iter().collect();
    let started = u32::try_from(p.running.len()).unwrap_or(u32::MAX);
    p.waiting = p.steps.saturating_sub(p.done).saturating_sub(started);
    Some((p, s))
}

impl Progress {
    /// `3 of 9 steps done (1 failed), 1 running (prefill), 5 waiting`.
    pub fn summary(&self) -> String {
        let failed = if self.failed > 0 {
            format!(" ({} failed)", self.failed)
        } else {
            String::new()
        };
        let running = if self.running.is_empty() {
            "none running".to_string()
        } else {
            format!(
                "{} running ({})",
                self.running.len(),
                self.running.join(", ")
            )
        };
        let mut s = format!(
            "{} of {} steps done{failed}, {running}, {} waiting",
            self.done, self.steps, self.waiting
        );
        if let Some(t) = &self.last_event_at {
            s.push_str(&format!("; last event {t}"));
        }
        if self.detached {
            s.push_str("; detached (`orchestrate resume` collects it)");
        }
        s
    }
}
