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
    /// run's progress over time, thinned to 200 evenly spaced points ending at the
    /// last.
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

/// The most points a timeline keeps: a sweep of thousands of cells is thinned to
/// evenly spaced ends, its last one kept.
const TIMELINE: usize = 200;

/// The progress in `dir/journal.jsonl`; None when it names no run, why when it
/// cannot be read.
pub fn read(dir: &Path) -> Result<Option<(Progress, Started)>, String> {
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
    .map_err(|e| e.to_string())?;
    if s.run_id.is_none() {
        return Ok(None);
    }
    p.running = running.into_iter().collect();
    let started = u32::try_from(p.running.len()).unwrap_or(u32::MAX);
    p.waiting = p.steps.saturating_sub(p.done).saturating_sub(started);
    p.timeline = thin(std::mem::take(&mut p.timeline));
    Ok(Some((p, s)))
}

/// At most [`TIMELINE`] points, evenly spaced, the last one always kept.
fn thin(points: Vec<(String, u32)>) -> Vec<(String, u32)> {
    let n = points.len();
    if n <= TIMELINE {
        return points;
    }
    let keep: std::collections::BTreeSet<usize> =
        (1..=TIMELINE).map(|k| k * n / TIMELINE - 1).collect();
    points
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep.contains(i))
        .map(|(_, p)| p)
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_timeline_is_thinned_to_evenly_spaced_points_ending_at_the_last() {
        let points: Vec<(String, u32)> = (1..=5000).map(|i| (format!("t{i}"), i)).collect();
        let kept = thin(points);
        assert_eq!(kept.len(), TIMELINE);
        assert_eq!(kept.last().map(|p| p.1), Some(5000));
        assert_eq!(kept[0].1, 25);
        assert!(kept.windows(2).all(|w| w[1].1 - w[0].1 == 25));
        let short: Vec<(String, u32)> = (1..=3).map(|i| (String::new(), i)).collect();
        assert_eq!(thin(short.clone()), short);
    }

    /// A journal of 3000 steps (2999 ended, one failed, one still running) read
    /// in one pass: every count right, the timeline bounded.
    #[test]
    fn a_journal_of_thousands_of_steps_is_counted_whole() {
        let fixture = include_str!("../../tests/fixtures/report/smoke/record.json");
        let rec: serde_json::Value = serde_json::from_str(fixture).unwrap();
        let mut header = rec["run"].clone();
        let declared = header["steps"][0].clone();
        let steps: Vec<serde_json::Value> = (0..3000)
            .map(|i| {
                let mut s = declared.clone();
                s["id"] = format!("cell{i}").into();
                s
            })
            .collect();
        header["steps"] = steps.into();
        let line = |seq: usize, event: serde_json::Value| {
            let mut l = event;
            l["seq"] = seq.into();
            l["time"] = format!("2026-12-07T10:{:02}:{:02}Z", seq / 60 % 60, seq % 60).into();
            format!("{l}\n")
        };
        let mut text = line(
            1,
            serde_json::json!({"event": "run_started", "run_id": "r1", "header": header}),
        );
        let mut seq = 1;
        for i in 0..3000 {
            seq += 1;
            text += &line(
                seq,
                serde_json::json!({"event": "step_started", "step": format!("cell{i}")}),
            );
            if i < 2999 {
                seq += 1;
                let status = if i == 7 { "failed" } else { "succeeded" };
                text += &line(
                    seq,
                    serde_json::json!({"event": "step_ended", "step": format!("cell{i}"), "status": status}),
                );
            }
        }
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("journal.jsonl"), text).unwrap();
        let (p, s) = read(t.path()).unwrap().unwrap();
        assert_eq!(s.run_id.as_deref(), Some("r1"));
        assert_eq!((p.steps, p.done, p.failed, p.waiting), (3000, 2999, 1, 0));
        assert_eq!(p.running, ["cell2999"]);
        assert_eq!(p.timeline.len(), TIMELINE);
        assert_eq!(p.timeline.last().map(|t| t.1), Some(2999));
    }
}
