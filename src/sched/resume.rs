//! `orchestrate resume`: finish the attempts a killed orchestrator left in flight
//! on Slurm. Their jobs are found in the journal (`job_submitted`), never submitted
//! again: each is watched to its end (or, if it ended meanwhile, read from its own
//! end record and the scheduler), its files hashed as the orchestrator would have,
//! and its attempt (and, when it was the step's last, the step) written to the
//! journal. The caller then finishes the record.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::attempt::{record_made, Made, Ran};
use super::collect::AttemptFiles;
use crate::backend::{AttemptJob, AttemptSpec};
use crate::evidence::journal::{Event, Journal, JournalLine, ResumeInfo};
use crate::evidence::record::StepStatus;

/// What resume did.
#[derive(Debug, Default)]
pub struct Resumed {
    /// `step/attempt: job N STATE` for each attempt finished.
    pub finished: Vec<String>,
    /// Attempts whose job was already on the record (kept as they were).
    pub kept: usize,
    /// Jobs Slurm ended otherwise than their commands' clean end records said.
    pub disagreed: Vec<String>,
}

/// What the journal's `attempt_started` said of an attempt.
#[derive(Debug, Clone, Default)]
struct StartedAs {
    argv: Vec<String>,
    cwd: String,
    out: String,
    cgroup: String,
    canary: String,
    warmup: bool,
    logs: Option<String>,
}

struct InFlight {
    step: String,
    attempt: u32,
    job_id: String,
    info: ResumeInfo,
    submitted: chrono::DateTime<chrono::Utc>,
    started: Option<StartedAs>,
}

/// Finish the in-flight Slurm attempts of `lines` (the run's journal), appending
/// to `journal`.
pub async fn resume_jobs(
    run_id: &str,
    record_dir: &std::path::Path,
    lines: &[JournalLine],
    journal: &mut Journal,
) -> Result<Resumed, String> {
    let mut ended: BTreeSet<(String, u32)> = BTreeSet::new();
    let mut steps_ended: BTreeSet<String> = BTreeSet::new();
    let mut flights: Vec<InFlight> = Vec::new();
    let mut started: BTreeMap<(String, u32), StartedAs> = BTreeMap::new();
    // Results files are read only inside the run's work folder.
    let mut work: Option<PathBuf> = None;
    let mut declared: BTreeMap<String, u32> = BTreeMap::new();
    let mut done_ok: BTreeMap<String, u32> = BTreeMap::new();
    // Attempts that ended on their jobs' clean end records, not yet confirmed.
    let mut unconfirmed: BTreeMap<(String, u32), String> = BTreeMap::new();
    for l in lines {
        match &l.event {
            Event::RunStarted { header, .. } => {
                if let Some(w) = header["options"]["work"].as_str() {
                    work = Some(PathBuf::from(w));
                }
                for s in header["steps"].as_array().into_iter().flatten() {
                    let n = s["repeats"].as_u64().unwrap_or(1) + s["warmup"].as_u64().unwrap_or(0);
                    declared.insert(s["id"].as_str().unwrap_or_default().to_string(), n as u32);
                }
            }
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
                started.insert(
                    (step.clone(), *attempt),
                    StartedAs {
                        argv: argv.clone(),
                        cwd: cwd.clone(),
                        out: out.clone(),
                        cgroup: cgroup.clone(),
                        canary: canary.clone(),
                        warmup: *warmup,
                        logs: logs.clone(),
                    },
                );
            }
            Event::JobSubmitted {
                step,
                attempt,
                job_id,
                resume: Some(info),
                ..
            } => {
                flights.push(InFlight {
                    step: step.clone(),
                    attempt: *attempt,
                    job_id: job_id.clone(),
                    info: (**info).clone(),
                    submitted: l.time,
                    started: None,
                });
            }
            Event::AttemptEnded { step, attempt } => {
                ended.insert((step.clone(), attempt.attempt));
                if attempt.succeeded() {
                    *done_ok.entry(step.clone()).or_default() += 1;
                }
                if let Some(j) = attempt
                    .job
                    .as_ref()
                    .filter(|j| j.state == crate::backend::slurm::UNCONFIRMED)
                {
                    unconfirmed.insert((step.clone(), attempt.attempt), j.job_id.clone());
                }
            }
            Event::JobConfirmed { confirmation: c } => {
                unconfirmed.remove(&(c.step.clone(), c.attempt));
            }
            Event::StepEnded { step, .. } => {
                steps_ended.insert(step.clone());
            }
            _ => {}
        }
    }
    let mut out = Resumed::default();
    let (kept, mut open): (Vec<InFlight>, Vec<InFlight>) = flights
        .into_iter()
        .partition(|f| ended.contains(&(f.step.clone(), f.attempt)));
    out.kept = kept.len();
    if open.is_empty() && unconfirmed.is_empty() {
        return Ok(out);
    }
    for f in &mut open {
        f.started = started.get(&(f.step.clone(), f.attempt)).cloned();
    }
    let slurm = std::sync::Arc::new(crate::backend::Slurm::new(run_id)?);
    for ((step, attempt), job_id) in &unconfirmed {
        slurm.expect(job_id, step, *attempt);
    }
    let mut tasks = Vec::new();
    for f in open {
        let slurm = std::sync::Arc::clone(&slurm);
        let record_dir = record_dir.to_path_buf();
        let work = work.clone();
        tasks.push(tokio::spawn(async move {
            let StartedAs {
                argv,
                cwd,
                out,
                cgroup,
                canary,
                warmup,
                logs,
            } = f.started.clone().unwrap_or_default();
            let logs_dir = logs.map(|l| record_dir.join(l)).unwrap_or_else(|| {
                record_dir
                    .join("steps")
                    .join(&f.step)
                    .join(f.attempt.to_string())
            });
            let spec = AttemptSpec {
                name: cgroup.clone(),
                canary: canary.clone(),
                argv: argv.clone(),
                cwd: PathBuf::from(&cwd),
                env: Vec::new(),
                memory: f.info.memory,
                swap: false,
                pids: None,
                cpus: None,
                device_nodes: None,
                timeout: None,
                grace: std::time::Duration::from_secs(2),
                stdout: PathBuf::from(&f.info.stdout),
                stderr: PathBuf::from(&f.info.stderr),
                tee: false,
                mask: None,
            };
            let job = AttemptJob {
                run_id: String::new(),
                step: f.step.clone(),
                attempt: f.attempt,
                logs: logs_dir,
                record_dir: record_dir.clone(),
                private: PathBuf::from(&f.info.private),
                slurm: Some(Default::default()),
                on_submit: None,
            };
            let outcome = slurm
                .reattach(
                    spec,
                    job,
                    f.job_id.clone(),
                    f.info.script.clone(),
                    f.info.gres.clone(),
                    f.submitted,
                )
                .await;
            let files = AttemptFiles {
                record_dir,
                stdout: PathBuf::from(&f.info.stdout),
                stderr: PathBuf::from(&f.info.stderr),
                metrics: PathBuf::from(&f.info.metrics),
                outputs: f.info.outputs.clone(),
                junit: f.info.junit.clone().map(|(w, a)| (w, PathBuf::from(a))),
                sarif: f.info.sarif.clone().map(|(w, a)| (w, PathBuf::from(a))),
                roots: work.iter().cloned().collect(),
            };
            let collected =
                tokio::task::spawn_blocking(move || files.collect(&crate::sys::Stop::new()))
                    .await
                    .map_err(|e| e.to_string())?;
            let made = Made {
                n: f.attempt,
                retry: f.info.retry,
                warmup,
                env: f.info.env.clone(),
                argv,
                cwd,
                out,
                cgroup,
                canary,
                memory: f.info.memory,
            };
            let ran = Ran {
                result: Ok(outcome),
                asked_at: f.submitted,
            };
            let (rec, verdict) = record_made(made, &ran, collected);
            Ok::<_, String>((f.step, f.job_id, rec, verdict))
        }));
    }
    for t in tasks {
        let (step, job_id, rec, verdict) = t.await.map_err(|e| e.to_string())??;
        let state = rec
            .job
            .as_ref()
            .map(|j| j.state.clone())
            .unwrap_or_default();
        out.finished
            .push(format!("{step}/{}: job {job_id} {state}", rec.attempt));
        let ok = rec.succeeded();
        let outputs: Vec<String> = rec.outputs.iter().map(|o| o.path.clone()).collect();
        journal
            .append(Event::AttemptEnded {
                step: step.clone(),
                attempt: Box::new(rec),
            })
            .map_err(|e| e.to_string())?;
        if steps_ended.contains(&step) {
            continue;
        }
        if let Some(v) = verdict {
            journal
                .append(Event::StepEnded {
                    step: step.clone(),
                    status: v.status,
                    reason: v.reason,
                    outputs,
                })
                .map_err(|e| e.to_string())?;
        } else if ok {
            let n = done_ok.entry(step.clone()).or_default();
            *n += 1;
            if *n >= declared.get(&step).copied().unwrap_or(1) {
                journal
                    .append(Event::StepEnded {
                        step: step.clone(),
                        status: StepStatus::Succeeded,
                        reason: Some(
                            "finished by `orchestrate resume` after the orchestrator was lost"
                                .into(),
                        ),
                        outputs,
                    })
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    out.disagreed = confirm_jobs(&slurm, journal, std::time::Duration::from_secs(60))
        .await
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// Slurm's word on every attempt of the run that ended on its job's clean end
/// record, into the journal; what Slurm disagreed with.
pub async fn confirm_jobs(
    slurm: &crate::backend::Slurm,
    journal: &mut Journal,
    limit: std::time::Duration,
) -> std::io::Result<Vec<String>> {
    let mut disagreed = Vec::new();
    for c in slurm.confirm(limit).await {
        if let Some(why) = c.disagreement() {
            disagreed.push(why);
        }
        journal.append(Event::JobConfirmed {
            confirmation: Box::new(c),
        })?;
    }
    Ok(disagreed)
}
