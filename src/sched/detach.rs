//! Detached runs (docs/slurm.md, "Detached runs"): `run --detach` submits every
//! step a batch scheduler runs at once, each attempt's job chained to the jobs it
//! must follow by `afterok`, journals them and returns; `resume` runs the same DAG
//! again, where an attempt the journal names a job for waits on that job instead
//! of submitting one, so the record is made exactly as an attached run makes it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use crate::backend::Reattach;
use crate::evidence::journal::{Event, JournalLine};
use crate::plan::StepId;

/// Whether the run waits on its jobs.
#[derive(Debug, Clone, Default)]
pub enum Detach {
    /// Attached: every attempt is waited on.
    #[default]
    No,
    /// Submit and return: nothing is waited on.
    Submit,
    /// Finish a detached run: its journaled jobs are waited on, never submitted again.
    Collect(std::sync::Arc<Collected>),
}

impl Detach {
    pub fn submits_only(&self) -> bool {
        matches!(self, Detach::Submit)
    }

    pub fn collecting(&self) -> Option<std::sync::Arc<Collected>> {
        match self {
            Detach::Collect(c) => Some(std::sync::Arc::clone(c)),
            _ => None,
        }
    }

    pub fn collected(&self) -> Option<&Collected> {
        match self {
            Detach::Collect(c) => Some(c),
            _ => None,
        }
    }
}

/// What the detached run left in its journal.
#[derive(Debug, Default)]
pub struct Collected {
    /// The job of each (step, attempt) it submitted.
    pub jobs: BTreeMap<(String, u32), Reattach>,
    /// Steps whose start is journaled already.
    pub started: BTreeSet<String>,
    /// Steps that ended before it detached (a cache hit): run again for what they
    /// give later steps, but journaled once.
    pub ended: BTreeSet<String>,
    /// Attempts whose start, and whose end, a collection that was stopped
    /// journaled already: journaled once, whatever collects them again.
    pub begun: BTreeSet<(String, u32)>,
    pub finished: BTreeSet<(String, u32)>,
    /// Jobs waited on by this collection.
    pub waited: Mutex<BTreeSet<String>>,
}

impl Collected {
    /// Read from the detached run's journal.
    pub fn from_journal(lines: &[JournalLine]) -> Collected {
        let mut c = Collected::default();
        for l in lines {
            match &l.event {
                Event::StepStarted { step } => {
                    c.started.insert(step.clone());
                }
                Event::StepEnded { step, .. } => {
                    c.ended.insert(step.clone());
                }
                Event::AttemptStarted { step, attempt, .. } => {
                    c.begun.insert((step.clone(), *attempt));
                }
                Event::AttemptEnded { step, attempt } => {
                    c.finished.insert((step.clone(), attempt.attempt));
                }
                Event::JobSubmitted {
                    step,
                    attempt,
                    job_id,
                    resume: Some(info),
                    ..
                } => {
                    c.jobs.insert(
                        (step.clone(), *attempt),
                        Reattach {
                            job_id: job_id.clone(),
                            script: info.script.clone(),
                            gres: info.gres.clone(),
                            submitted: l.time,
                            array: info.array.clone(),
                        },
                    );
                }
                _ => {}
            }
        }
        c
    }

    /// The job to wait on for `step`'s attempt `n`, marked waited.
    pub fn take(&self, step: &str, n: u32) -> Option<Reattach> {
        let found = self.jobs.get(&(step.to_string(), n)).cloned()?;
        self.waited
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(found.job_id.clone());
        Some(found)
    }

    /// Whether `ev` is in the journal already (a step or an attempt a stopped
    /// collection, or the detaching run, ended).
    pub fn journaled(&self, ev: &Event) -> bool {
        match ev {
            Event::AttemptStarted { step, attempt, .. } => {
                self.begun.contains(&(step.clone(), *attempt))
            }
            Event::AttemptEnded { step, attempt } => {
                self.finished.contains(&(step.clone(), attempt.attempt))
            }
            _ => false,
        }
    }

    pub fn has_jobs(&self, step: &str) -> bool {
        self.jobs.keys().any(|(s, _)| s == step)
    }

    /// Jobs nobody waited on (their step was skipped: an upstream failed), as
    /// (job, step, attempt).
    pub fn unwaited(&self) -> Vec<(String, String, u32)> {
        let waited = self.waited.lock().unwrap_or_else(|p| p.into_inner());
        self.jobs
            .iter()
            .filter(|(_, r)| !waited.contains(&r.job_id))
            .map(|((s, n), r)| (r.job_id.clone(), s.clone(), *n))
            .collect()
    }
}

/// The jobs a detached run submitted so far, by step: what later attempts wait for.
#[derive(Debug, Default)]
pub(crate) struct Submitted(Mutex<BTreeMap<StepId, Vec<String>>>);

impl Submitted {
    pub(crate) fn add(&self, step: &StepId, job: String) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(step.clone())
            .or_default()
            .push(job);
    }

    pub(crate) fn has(&self, step: &StepId) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(step)
    }

    /// Every job of `steps` (those submitted; a step that ended here has none).
    pub(crate) fn of<'a>(&self, steps: impl Iterator<Item = &'a StepId>) -> Vec<String> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        steps
            .filter_map(|s| map.get(s))
            .flatten()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_not_waited_on_are_named_with_their_attempts() {
        let mut c = Collected::default();
        for (s, n, id) in [("a", 1, "10"), ("b", 1, "11"), ("b", 2, "12")] {
            c.jobs.insert(
                (s.into(), n),
                Reattach {
                    job_id: id.into(),
                    script: String::new(),
                    gres: None,
                    submitted: chrono::Utc::now(),
                    array: None,
                },
            );
        }
        assert_eq!(c.take("a", 1).map(|r| r.job_id), Some("10".into()));
        assert!(c.take("a", 2).is_none());
        assert_eq!(
            c.unwaited(),
            vec![("11".into(), "b".into(), 1), ("12".into(), "b".into(), 2)]
        );
    }
}
