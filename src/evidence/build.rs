//! Building `record.json` from the journal: at the end of a run, or by `recover`
//! after the orchestrator died (then what was running stays on the record as
//! `orchestrator_lost`).

use std::collections::BTreeMap;

use super::journal::{Event, JournalLine};
use super::record::*;

/// Build the record from journal lines. A journal without `run_ended` (the orchestrator
/// died) gives status `interrupted` with a reason saying so.
pub fn build(lines: &[JournalLine]) -> Result<Record, BuildError> {
    let first = lines.first().ok_or(BuildError::Empty)?;
    let mut b = Builder::start(first)?;
    for line in &lines[1..] {
        b.apply(line)?;
    }
    Ok(b.finish(lines.last()))
}

/// [`build`] from the journal file, one line at a time: the journal of a
/// 100 000-cell run is never held beside the record it makes.
pub fn build_from_journal(path: &std::path::Path) -> Result<Record, BuildError> {
    let mut builder: Option<Builder> = None;
    let mut last: Option<JournalLine> = None;
    let mut failed: Option<BuildError> = None;
    let read = super::journal::read_each(path, |line| {
        let applied = match builder.as_mut() {
            None => Builder::start(&line).map(|b| builder = Some(b)),
            Some(b) => b.apply(&line),
        };
        match applied {
            Ok(()) => {
                last = Some(line);
                Ok(())
            }
            Err(e) => {
                failed = Some(e);
                Err(std::io::Error::other("stopped"))
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    read.map_err(|e| BuildError::Read(e.to_string()))?;
    let b = builder.ok_or(BuildError::Empty)?;
    Ok(b.finish(last.as_ref()))
}

/// The record as the journal's lines make it, one event at a time.
struct Builder {
    rec: Record,
    steps: Vec<StepRecord>,
    index: BTreeMap<String, usize>,
    ended: bool,
    /// Started attempts whose end never came (the orchestrator was lost).
    open: BTreeMap<(String, u32), AttemptRecord>,
    started_steps: Vec<String>,
    /// Attempts Slurm overturned after they ended: (step, attempt, why).
    overturned: Vec<(usize, u32, String)>,
}

impl Builder {
    /// A builder from the journal's first line, which must be `run_started`.
    fn start(first: &JournalLine) -> Result<Builder, BuildError> {
        match &first.event {
            Event::RunStarted { run_id, header } => Ok(Builder::new(
                run_id.clone(),
                (**header).clone(),
                &first.time,
            )),
            _ => Err(BuildError::NoStart),
        }
    }

    fn new(run_id: String, run: RunHeader, started: &chrono::DateTime<chrono::Utc>) -> Builder {
        let steps: Vec<StepRecord> = run
            .steps
            .iter()
            .map(|d| StepRecord {
                id: d.id.clone(),
                kind: d.kind,
                status: StepStatus::NotRun,
                reason: None,
                attempts: Vec::new(),
                outputs: Vec::new(),
                wall_ms: None,
                cache: None,
            })
            .collect();
        let index = steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect();
        Builder {
            rec: Record {
                schema: RECORD_SCHEMA.to_string(),
                run_id,
                status: RunStatus::Interrupted,
                reason: Some("the orchestrator ended without finishing the run".to_string()),
                started_at: rfc3339(started),
                ended_at: None,
                run,
                steps: Vec::new(),
                allocations: Vec::new(),
                comparisons: Vec::new(),
                failures: Vec::new(),
                warnings: Vec::new(),
                release_audit: None,
                journal: None,
                revisions_compared: Vec::new(),
            },
            steps,
            index,
            ended: false,
            open: BTreeMap::new(),
            started_steps: Vec::new(),
            overturned: Vec::new(),
        }
    }

    fn step(&mut self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    fn apply(&mut self, line: &JournalLine) -> Result<(), BuildError> {
        match &line.event {
            Event::RunStarted { .. } => return Err(BuildError::TwoStarts),
            Event::StepStarted { step } => self.started_steps.push(step.clone()),
            Event::AttemptStarted {
                step,
                attempt,
                warmup,
                cgroup,
                canary,
                argv,
                cwd,
                out,
                logs,
            } => {
                let logs = logs
                    .clone()
                    .unwrap_or_else(|| format!("steps/{step}/{attempt}"));
                let mut a = AttemptRecord::lost(*attempt, &logs);
                a.warmup = *warmup;
                a.argv = argv.clone();
                a.cwd = cwd.clone();
                a.out = out.clone();
                a.cgroup = cgroup.clone();
                a.canary = canary.clone();
                a.started_at = rfc3339(&line.time);
                self.open.insert((step.clone(), *attempt), a);
            }
            Event::DevicesGranted { allocations, .. } => {
                self.rec.allocations.extend(allocations.iter().cloned());
            }
            Event::DevicesReleased { allocations, .. } => self.released(allocations),
            Event::AttemptEnded { step, attempt } => {
                self.open.remove(&(step.clone(), attempt.attempt));
                if let Some(i) = self.step(step) {
                    if !attempt.succeeded() {
                        self.rec.failures.push(Failure {
                            step: step.clone(),
                            attempt: Some(attempt.attempt),
                            check: None,
                            what: describe_attempt_failure(attempt),
                        });
                    }
                    for m in &attempt.gpu_misuse {
                        self.rec
                            .warnings
                            .push(misuse_words(step, attempt.attempt, m));
                    }
                    self.steps[i].attempts.push((**attempt).clone());
                }
            }
            Event::CheckEnded { step, check } => self.check_ended(step, check),
            // The attempt's record carries its job at the end; the event is for
            // `recover`, which cancels the jobs of a dead run.
            Event::JobSubmitted { .. } => {}
            // `resume` collects it; until then the run reads as unfinished.
            Event::RunDetached { .. } => {}
            Event::JobConfirmed { confirmation: c } => {
                if let Some(i) = self.step(&c.step) {
                    if confirm_attempt(&mut self.steps[i], &mut self.rec.failures, c) {
                        let why = c.disagreement().unwrap_or_default();
                        self.overturned.push((i, c.attempt, why));
                    }
                }
            }
            Event::StepCache {
                step,
                cache,
                outputs,
            } => {
                if let Some(i) = self.step(step) {
                    if cache.status == CacheStatus::Reused {
                        self.steps[i].outputs = outputs.clone();
                    }
                    self.steps[i].cache = Some(cache.clone());
                }
            }
            Event::StepEnded {
                step,
                status,
                reason,
                ..
            } => self.step_ended(step, *status, reason),
            Event::Warning { message } => self.rec.warnings.push(message.clone()),
            Event::RunEnded {
                status,
                reason,
                footer,
            } => {
                self.ended = true;
                self.rec.status = *status;
                self.rec.reason = reason.clone();
                self.rec.ended_at = Some(rfc3339(&line.time));
                self.rec.release_audit = footer.release_audit.clone();
            }
        }
        Ok(())
    }

    /// Released allocations carry their release time: each replaces the grant of
    /// the same lease to the same step that is still open (one device serves
    /// several steps in turn).
    fn released(&mut self, allocations: &[Allocation]) {
        for released in allocations {
            match self.rec.allocations.iter_mut().find(|g| {
                g.lease == released.lease && g.step == released.step && g.released_at.is_none()
            }) {
                Some(g) => *g = released.clone(),
                None => self.rec.allocations.push(released.clone()),
            }
        }
    }

    fn check_ended(&mut self, step: &str, check: &CheckRecord) {
        if !check.passed {
            self.rec.failures.push(Failure {
                step: step.to_string(),
                attempt: None,
                check: Some(check.name.clone()),
                what: match &check.error {
                    Some(e) => format!("check `{}` could not run: {e}", check.name),
                    None => format!(
                        "check `{}` failed: value {} against {}",
                        check.name,
                        check.value,
                        check.threshold_json()
                    ),
                },
            });
        }
        self.rec.comparisons.push(check.clone());
    }

    fn step_ended(&mut self, step: &str, status: StepStatus, reason: &Option<String>) {
        self.started_steps.retain(|s| s != step);
        let Some(i) = self.step(step) else { return };
        self.steps[i].status = status;
        self.steps[i].reason = reason.clone();
        // A step that failed because an attempt or a check did is on the record
        // once, as that attempt or check.
        let told = self.rec.failures.iter().any(|f| f.step == step);
        if status == StepStatus::Failed && !told {
            self.rec.failures.push(Failure {
                step: step.to_string(),
                attempt: None,
                check: None,
                what: reason.clone().unwrap_or_else(|| "step failed".into()),
            });
        }
    }

    fn finish(mut self, last_line: Option<&JournalLine>) -> Record {
        if !self.ended {
            self.rec.ended_at = last_line.map(|l| rfc3339(&l.time));
        }
        // What was running when the orchestrator was lost stays on the record.
        let last = self.rec.ended_at.clone().unwrap_or_default();
        for ((step, _), mut a) in std::mem::take(&mut self.open) {
            let Some(i) = self.step(&step) else { continue };
            a.ended_at = last.clone();
            self.rec.failures.push(Failure {
                step: step.clone(),
                attempt: Some(a.attempt),
                check: None,
                what: describe_attempt_failure(&a),
            });
            self.steps[i].attempts.push(a);
            self.steps[i].attempts.sort_by_key(|a| a.attempt);
        }
        for step in std::mem::take(&mut self.started_steps) {
            if let Some(i) = self.step(&step) {
                self.steps[i].status = StepStatus::Cancelled;
                self.steps[i].reason = Some("the orchestrator was lost while this step ran".into());
            }
        }
        for s in &mut self.steps {
            settle_step(s);
        }
        let mut rec = self.rec;
        let mut steps = self.steps;
        mark_consumers(&rec.run.steps, &mut steps, &self.index, &self.overturned);
        rec.steps = steps;
        rec.revisions_compared = super::revisions::compare(&rec);
        rec
    }
}

/// A step's outputs (its last measured attempt's), status (reused when its outputs
/// came from the cache: it ran nothing) and wall-time statistics.
fn settle_step(s: &mut StepRecord) {
    if let Some(last) = s.attempts.iter().rev().find(|a| !a.warmup) {
        s.outputs = last.outputs.clone();
    }
    if s.status == StepStatus::Succeeded
        && s.cache
            .as_ref()
            .is_some_and(|c| c.status == CacheStatus::Reused)
    {
        s.status = StepStatus::Reused;
    }
    let walls: Vec<f64> = s
        .attempts
        .iter()
        .filter(|a| !a.warmup && a.succeeded())
        .map(|a| a.wall_ms)
        .collect();
    s.wall_ms = Stats::of(&walls);
}

/// Every step downstream of an attempt Slurm overturned after it had been used ran
/// on a failed result: `upstream_failed`, with which and why.
fn mark_consumers(
    desc: &[super::record::DeclaredStep],
    steps: &mut [StepRecord],
    index: &BTreeMap<String, usize>,
    overturned: &[(usize, u32, String)],
) {
    for (i, attempt, why) in overturned {
        let root = steps[*i].id.clone();
        let mut seen: std::collections::BTreeSet<String> = Default::default();
        let mut frontier = vec![root.clone()];
        while let Some(up) = frontier.pop() {
            for d in desc.iter().filter(|d| d.needs.contains(&up)) {
                if !seen.insert(d.id.clone()) {
                    continue;
                }
                frontier.push(d.id.clone());
                let Some(&j) = index.get(&d.id) else { continue };
                if steps[j].status.is_success() {
                    steps[j].status = StepStatus::UpstreamFailed;
                    steps[j].reason = Some(format!(
                        "it ran on `{root}` attempt {attempt}, which failed after it was used: {why}"
                    ));
                }
            }
        }
    }
}

fn describe_attempt_failure(a: &AttemptRecord) -> String {
    let how = match (a.termination, a.exit_code, a.signal) {
        (Termination::Exited, Some(c), _) => format!("exited with code {c}"),
        (Termination::Signaled, _, Some(s)) => format!("killed by signal {s}"),
        (Termination::OomKilled, _, _) => format!(
            "killed by the OOM killer at its memory limit ({} bytes)",
            a.memory_limit_bytes.unwrap_or(0)
        ),
        (Termination::TimedOut, _, _) => "timed out".to_string(),
        (Termination::Cancelled, _, _) => format!(
            "cancelled ({})",
            a.cancel_reason.as_deref().unwrap_or("cancel")
        ),
        (Termination::OrchestratorLost, _, _) => {
            "was running when the orchestrator was lost".to_string()
        }
        (t, _, _) => t.as_str().to_string(),
    };
    format!(
        "attempt {}{} {how}",
        a.attempt,
        if a.warmup { " (warm-up)" } else { "" }
    )
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("cannot read the journal: {0}")]
    Read(String),
    #[error("the journal is empty")]
    Empty,
    #[error("the journal does not start with run_started")]
    NoStart,
    #[error("the journal has two run_started events")]
    TwoStarts,
}

/// Slurm's later word on an attempt that ended on its job's clean end record: the
/// job's facts, and when Slurm ended the job otherwise, the attempt and its step
/// fail after all (Slurm's state first), once on the record.
/// Whether it overturned the attempt.
fn confirm_attempt(
    step: &mut StepRecord,
    failures: &mut Vec<Failure>,
    c: &crate::contract::Confirmation,
) -> bool {
    let Some(a) = step.attempts.iter_mut().find(|a| a.attempt == c.attempt) else {
        return false;
    };
    if let Some(job) = a.job.as_mut().filter(|j| j.job_id == c.job_id) {
        // The scheduler's word replaces what was known at the attempt's end, save
        // an exit code and node it does not give.
        let mut word = c.accounting.clone();
        word.exit_code = word.exit_code.or(job.accounting.exit_code.take());
        word.node = job.accounting.node.take().or(word.node);
        job.accounting = word;
        job.notes.extend(c.queried_why.clone());
        if c.accounting.state != "UNKNOWN" {
            job.source = "end record and scheduler".into();
        }
    }
    let (Some(t), Some(what)) = (c.termination, c.disagreement()) else {
        return false;
    };
    a.termination = t;
    if t == crate::contract::Termination::Exited {
        a.exit_code = c.exit_code_number();
    }
    failures.push(Failure {
        step: step.id.clone(),
        attempt: Some(c.attempt),
        check: None,
        what: what.clone(),
    });
    if let Some(j) = a.job.as_mut() {
        j.evidence.get_or_insert_with(|| what.clone());
    }
    if step.status.is_success() {
        step.status = StepStatus::Failed;
        step.reason = Some(what);
    }
    true
}

/// A process of an attempt seen on a GPU it did not own, in one line.
pub fn misuse_words(step: &str, attempt: u32, m: &crate::record::gpu::GpuMisuse) -> String {
    let name = m
        .device
        .as_deref()
        .map(|d| format!("{d} "))
        .unwrap_or_default();
    format!(
        "step `{step}` attempt {attempt}: its process {} ran on {name}({}), a GPU it did not own",
        m.pid, m.uuid
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Confirmation, UNCONFIRMED};

    fn step_with_unconfirmed_job() -> StepRecord {
        let attempt: AttemptRecord = serde_json::from_value(serde_json::json!({
            "attempt": 1, "warmup": false, "argv": ["true"], "cwd": "/", "env": {},
            "out": "/o", "cgroup": "c", "canary": "r/s/1",
            "started_at": "2026-12-01T00:00:00Z", "ended_at": "2026-12-01T00:00:01Z",
            "termination": "exited", "exit_code": 0, "signal": null, "wall_ms": 1.0,
            "cpu_user_ms": null, "cpu_system_ms": null, "peak_memory_bytes": null,
            "memory_limit_bytes": null, "oom_kills": 0, "pids_limit_hit": null,
            "kill_ms": null, "enforcement": null,
            "stdout": {"path": "steps/s/1/stdout.log", "sha256": "", "bytes": 0},
            "stderr": {"path": "steps/s/1/stderr.log", "sha256": "", "bytes": 0},
            "outputs": [], "leftovers": [],
            "job": {"backend": "slurm", "job_id": "7", "state": UNCONFIRMED,
                    "node": "n1", "script": "steps/s/1/job.sh",
                    "submitted_at": "2026-12-01T00:00:00Z", "source": "end record"}
        }))
        .expect("attempt");
        StepRecord {
            id: "s".into(),
            kind: crate::plan::StepKind::Command,
            status: StepStatus::Succeeded,
            reason: None,
            attempts: vec![attempt],
            outputs: Vec::new(),
            wall_ms: None,
            cache: None,
        }
    }

    fn confirmation(state: &str) -> Confirmation {
        serde_json::from_value(serde_json::json!({
            "step": "s", "attempt": 1, "job_id": "7", "state": state,
            "exit_code": "0:0", "elapsed": "00:00:01", "max_rss_bytes": 1024,
            "queried": "sacct",
            "termination": match state {
                "PREEMPTED" => serde_json::json!("preempted"),
                _ => serde_json::Value::Null,
            }
        }))
        .expect("confirmation")
    }

    #[test]
    fn slurm_s_later_word_fills_the_job_and_agrees() {
        let mut step = step_with_unconfirmed_job();
        let mut failures = Vec::new();
        confirm_attempt(&mut step, &mut failures, &confirmation("COMPLETED"));
        let job = step.attempts[0].job.as_ref().expect("job");
        assert_eq!(job.accounting.state, "COMPLETED");
        assert_eq!(job.accounting.queried, "sacct");
        assert_eq!(job.source, "end record and scheduler");
        assert_eq!(job.accounting.max_rss_bytes, Some(1024));
        assert_eq!(job.accounting.node.as_deref(), Some("n1"));
        assert!(failures.is_empty());
        assert_eq!(step.status, StepStatus::Succeeded);
        assert!(step.attempts[0].succeeded());
    }

    #[test]
    fn a_job_slurm_ended_otherwise_fails_its_attempt_and_step_once() {
        let mut step = step_with_unconfirmed_job();
        let mut failures = Vec::new();
        confirm_attempt(&mut step, &mut failures, &confirmation("PREEMPTED"));
        let a = &step.attempts[0];
        assert_eq!(a.termination, Termination::Preempted);
        assert!(!a.succeeded());
        assert_eq!(
            a.job.as_ref().map(|j| j.accounting.state.as_str()),
            Some("PREEMPTED")
        );
        assert_eq!(step.status, StepStatus::Failed);
        assert_eq!(failures.len(), 1);
        assert!(
            failures[0].what.contains("PREEMPTED") && failures[0].what.contains("exited 0"),
            "{}",
            failures[0].what
        );
    }

    #[test]
    fn steps_that_ran_on_an_overturned_attempt_are_marked() {
        let decl = |id: &str, needs: &[&str]| -> super::super::record::DeclaredStep {
            serde_json::from_value(serde_json::json!({
                "id": id, "kind": "command", "needs": needs, "devices": [],
                "repeats": 1, "warmup": 0
            }))
            .expect("declared step")
        };
        let desc = vec![
            decl("s", &[]),
            decl("t", &["s"]),
            decl("u", &["t"]),
            decl("v", &[]),
        ];
        let mut steps: Vec<StepRecord> = ["s", "t", "u", "v"]
            .iter()
            .map(|id| StepRecord {
                id: id.to_string(),
                ..step_with_unconfirmed_job()
            })
            .collect();
        let index: BTreeMap<String, usize> = steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect();
        let mut failures = Vec::new();
        let c = confirmation("PREEMPTED");
        assert!(confirm_attempt(&mut steps[0], &mut failures, &c));
        mark_consumers(
            &desc,
            &mut steps,
            &index,
            &[(0, 1, c.disagreement().unwrap())],
        );
        assert_eq!(steps[0].status, StepStatus::Failed);
        for i in [1, 2] {
            assert_eq!(
                steps[i].status,
                StepStatus::UpstreamFailed,
                "{}",
                steps[i].id
            );
            let why = steps[i].reason.clone().unwrap_or_default();
            assert!(
                why.contains("`s` attempt 1") && why.contains("PREEMPTED"),
                "{why}"
            );
        }
        assert_eq!(steps[3].status, StepStatus::Succeeded, "not downstream");
    }
}
