//! Detached runs (docs/slurm.md, "Detached runs"): `run --detach` submits every
//! job and returns; `status` says where each step is; `resume` collects the run by
//! running the same command again over the same record folder, waiting on the
//! journaled jobs instead of submitting them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{begin, conclude, Folders, RunArgs, RunError, RunMode};
use crate::evidence::journal::{read, Event, Journal, JournalLine};
use crate::evidence::record::RunStatus;
use crate::plan::Plan;
use crate::sched;

/// A run that returned with its jobs submitted.
#[derive(Debug)]
pub struct DetachedRun {
    pub run_id: String,
    pub record_dir: PathBuf,
    /// Jobs submitted.
    pub jobs: usize,
    /// Steps left to `resume` (compare steps, and what reads them).
    pub deferred: Vec<String>,
}

/// Submit every job of the run, chained by `afterok`, and return. A step that
/// fails to submit ends the run here: its other jobs are cancelled and the record
/// is written, as for any failed run.
pub async fn detach(args: RunArgs) -> Result<DetachedRun, RunError> {
    let RunMode::Detach { command, cwd } = args.mode.clone() else {
        return Err(RunError::Refused("not a detached run".into()));
    };
    let mut u = begin(&args).await?;
    let jerr = |e: std::io::Error| RunError::Io(format!("cannot write the journal: {e}"));
    let outcome = sched::run_dag(u.dag, &mut u.journal).await.map_err(jerr)?;
    let path = u.record_dir.join("journal.jsonl");
    let (lines, _) = read(&path).map_err(|e| RunError::Io(format!("{}: {e}", path.display())))?;
    let jobs: Vec<String> = lines
        .iter()
        .filter_map(|l| match &l.event {
            Event::JobSubmitted { job_id, .. } => Some(job_id.clone()),
            _ => None,
        })
        .collect();
    if outcome.status != RunStatus::Succeeded {
        // Nothing is left queued behind a run that could not detach.
        crate::backend::Backend::cancel_jobs(
            u.backend.as_ref(),
            &jobs,
            std::time::Duration::from_secs(60),
        )
        .await;
        let why = outcome.reason.clone().unwrap_or_default();
        conclude(
            &u.plan,
            &u.isolator,
            u.backend.as_ref(),
            &u.run_id,
            &u.record_dir,
            outcome,
            &mut u.journal,
        )
        .await?;
        drop(u.journal);
        let _ = super::record_and_reports(&u.plan, u.record_dir.clone(), None).await;
        return Err(RunError::Refused(format!(
            "run {} could not be detached ({why}): its jobs were cancelled; its record is {}",
            u.run_id,
            u.record_dir.display()
        )));
    }
    u.journal
        .append(Event::RunDetached {
            command,
            cwd: cwd.display().to_string(),
            jobs: jobs.len(),
        })
        .map_err(jerr)?;
    let deferred = deferred_steps(&lines);
    Ok(DetachedRun {
        run_id: u.run_id,
        record_dir: u.record_dir,
        jobs: jobs.len(),
        deferred,
    })
}

/// Declared steps the journal neither started nor ended: what `resume` runs.
fn deferred_steps(lines: &[JournalLine]) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut declared = Vec::new();
    for l in lines {
        match &l.event {
            e @ Event::RunStarted { .. } => {
                if let Some(h) = e.run_header() {
                    declared = h.steps.iter().map(|s| s.id.clone()).collect();
                }
            }
            Event::StepStarted { step } | Event::StepEnded { step, .. } => {
                seen.insert(step.clone());
            }
            _ => {}
        }
    }
    declared.retain(|s| !seen.contains(s));
    declared
}

/// The command that detached the run of `record_dir` and the folder it ran in;
/// `None` when the run was not detached (or has ended).
pub fn detached_command(record_dir: &Path) -> Result<Option<(Vec<String>, PathBuf)>, RunError> {
    let path = record_dir.join("journal.jsonl");
    let (lines, _) = read(&path).map_err(|e| RunError::Io(format!("{}: {e}", path.display())))?;
    if lines
        .iter()
        .any(|l| matches!(l.event, Event::RunEnded { .. }))
    {
        return Ok(None);
    }
    Ok(lines.iter().rev().find_map(|l| match &l.event {
        Event::RunDetached { command, cwd, .. } => Some((command.clone(), PathBuf::from(cwd))),
        _ => None,
    }))
}

/// A detached run reopened for collection.
pub(super) struct Reopened {
    pub run_id: String,
    pub folders: Folders,
    pub collected: sched::Collected,
}

/// Reopen the detached run of `record_dir`: its journal names it detached and not
/// ended, no orchestrator holds it, its plan is the one its jobs ran, and its work
/// folder is its own.
pub(super) fn reopen(record_dir: &Path, plan: &Plan) -> Result<Reopened, RunError> {
    let record_dir = super::absolute(record_dir);
    let path = record_dir.join("journal.jsonl");
    let (lines, _) = read(&path).map_err(|e| RunError::Io(format!("{}: {e}", path.display())))?;
    let (run_id, work) = lines
        .iter()
        .find_map(|l| match &l.event {
            e @ Event::RunStarted { run_id, .. } => e
                .run_header()
                .map(|h| (run_id.clone(), PathBuf::from(&h.options.work))),
            _ => None,
        })
        .ok_or_else(|| {
            RunError::Refused(format!("{} has no run in its journal", path.display()))
        })?;
    let detached = lines
        .iter()
        .any(|l| matches!(l.event, Event::RunDetached { .. }));
    let ended = lines
        .iter()
        .any(|l| matches!(l.event, Event::RunEnded { .. }));
    if !detached || ended {
        return Err(RunError::Refused(format!(
            "run {run_id} is not a detached run waiting to be collected"
        )));
    }
    // A detached run left no lock: one held is another `resume` collecting it.
    if sched::Judge::new().of(&run_id).is_alive() {
        return Err(RunError::Refused(format!(
            "run {run_id} is held by another orchestrator (its lock is taken)"
        )));
    }
    let recorded = std::fs::read(record_dir.join("plan.toml")).unwrap_or_default();
    if recorded != plan.source.as_bytes() {
        return Err(RunError::Refused(format!(
            "the plan changed since run {run_id} was detached: its record must state the plan its jobs ran"
        )));
    }
    if !(work.is_absolute() && work.file_name().and_then(|n| n.to_str()) == Some(run_id.as_str())) {
        return Err(RunError::Refused(format!(
            "the journal names {} as the run's work folder, which is not named for run {run_id}: refused",
            work.display()
        )));
    }
    sched::forget_dead_run(&run_id);
    let last = lines.last().map_or(0, |l| l.seq);
    let journal = Journal::reopen(&path, last)
        .map_err(|e| RunError::Io(format!("{}: {e}", path.display())))?;
    Ok(Reopened {
        collected: sched::Collected::from_journal(&lines),
        run_id,
        folders: Folders {
            work_dir: work,
            record_dir,
            revisions: Vec::new(),
            journal,
        },
    })
}

/// Jobs of the detached run nobody waited on (their steps were skipped: an
/// upstream failed, so Slurm ends them as `DependencyNeverSatisfied`): cancelled,
/// and said.
pub(super) async fn cancel_unwaited(
    c: &sched::Collected,
    backend: &dyn crate::backend::Backend,
    journal: &mut Journal,
) -> std::io::Result<()> {
    let left = c.unwaited();
    if left.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = left.iter().map(|(id, _, _)| id.clone()).collect();
    let gone = backend
        .cancel_jobs(&ids, std::time::Duration::from_secs(60))
        .await;
    for (id, step, n) in left {
        journal.append(Event::Warning {
            message: format!(
                "job {id} ({step}/{n}) did not run: a step it follows failed, so its dependency was never satisfied; cancelled{}",
                if gone { "" } else { ", and still listed 60 s later" }
            ),
        })?;
    }
    Ok(())
}

/// Where one step of a run is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepNow {
    pub step: String,
    pub state: String,
}

/// Where each step of the run of `record_dir` is, from its journal and the
/// batch scheduler; nothing is written.
pub async fn status(record_dir: &Path) -> Result<(String, Vec<StepNow>), RunError> {
    let path = record_dir.join("journal.jsonl");
    let (lines, _) = read(&path).map_err(|e| RunError::Io(format!("{}: {e}", path.display())))?;
    let said = Said::of(&lines);
    let run_id = said.run_id.clone().ok_or_else(|| {
        RunError::Refused(format!("{} has no run in its journal", path.display()))
    })?;
    let queue = if said.in_flight.is_empty() {
        BTreeMap::new()
    } else {
        match crate::backend::Router::remotes_only(&run_id) {
            Ok(r) => crate::backend::Backend::jobs_now(&r)
                .await
                .unwrap_or_default(),
            Err(_) => BTreeMap::new(),
        }
    };
    let head = if said.ended {
        format!("run {run_id}: ended")
    } else if said.detached {
        format!(
            "run {run_id}: detached (collect it with `orchestrate resume {}`)",
            record_dir.display()
        )
    } else {
        format!("run {run_id}: running or lost (see `orchestrate recover`)")
    };
    Ok((head, said.steps(&queue)))
}

/// What a journal says of a run's steps.
#[derive(Default)]
struct Said {
    run_id: Option<String>,
    detached: bool,
    ended: bool,
    /// (id, attempts declared, runs in the orchestrator)
    declared: Vec<(String, u32, bool)>,
    step_ended: BTreeMap<String, String>,
    attempts_ended: BTreeMap<String, u32>,
    /// (step, attempt) -> job, for jobs whose attempt has not ended.
    in_flight: BTreeMap<(String, u32), String>,
}

impl Said {
    fn of(lines: &[JournalLine]) -> Said {
        let mut s = Said::default();
        for l in lines {
            match &l.event {
                e @ Event::RunStarted { run_id, .. } => {
                    s.run_id = Some(run_id.clone());
                    if let Some(h) = e.run_header() {
                        s.declared = h
                            .steps
                            .iter()
                            .map(|d| {
                                let here = d.kind == crate::plan::StepKind::Compare;
                                (d.id.clone(), d.repeats + d.warmup, here)
                            })
                            .collect();
                    }
                }
                Event::RunDetached { .. } => s.detached = true,
                Event::RunEnded { .. } => s.ended = true,
                Event::JobSubmitted {
                    step,
                    attempt,
                    job_id,
                    ..
                } => {
                    s.in_flight.insert((step.clone(), *attempt), job_id.clone());
                }
                Event::AttemptEnded { step, attempt } => {
                    s.in_flight.remove(&(step.clone(), attempt.attempt));
                    *s.attempts_ended.entry(step.clone()).or_default() += 1;
                }
                Event::StepEnded {
                    step,
                    status,
                    reason,
                    ..
                } => {
                    let words = match reason {
                        Some(r) => format!("{}: {r}", status.as_str()),
                        None => status.as_str().to_string(),
                    };
                    s.step_ended.insert(step.clone(), words);
                }
                _ => {}
            }
        }
        s
    }

    fn steps(&self, queue: &BTreeMap<String, String>) -> Vec<StepNow> {
        self.declared
            .iter()
            .map(|(id, of, here)| {
                let state = if let Some(e) = self.step_ended.get(id) {
                    e.clone()
                } else if let Some(((_, n), job)) =
                    self.in_flight.iter().find(|((s, _), _)| s == id)
                {
                    let done = self.attempts_ended.get(id).copied().unwrap_or(0);
                    let there = queue
                        .get(job)
                        .cloned()
                        .unwrap_or_else(|| "not in the queue: ended".into());
                    format!("attempt {n} of {of} ({done} ended): job {job} {there}")
                } else if *here && self.detached {
                    "runs in the orchestrator when the run is collected".into()
                } else {
                    "waiting".into()
                };
                StepNow {
                    step: id.clone(),
                    state,
                }
            })
            .collect()
    }
}
