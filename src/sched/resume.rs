//! `orchestrate resume`: finish the attempts a killed orchestrator left in flight
//! on a batch scheduler. Their jobs are found in the journal (`job_submitted`), never submitted
//! again: each is watched to its end (or, if it ended meanwhile, read from its own
//! end record and the scheduler), its files hashed as the orchestrator would have,
//! and its attempt (and, when it was the step's last, the step) written to the
//! journal. The caller then finishes the record.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::attempt::{record_made, Made, Ran};
use super::collect::AttemptFiles;
use crate::backend::{AttemptJob, AttemptSpec, Backend};
use crate::evidence::journal::{Event, Journal, JournalLine, ResumeInfo};
use crate::evidence::record::{AttemptRecord, StepStatus};

/// What resume did.
#[derive(Debug, Default)]
pub struct Resumed {
    /// `step/attempt: job N STATE` for each attempt finished.
    pub finished: Vec<String>,
    /// Attempts whose job was already on the record (kept as they were).
    pub kept: usize,
    /// Jobs the scheduler ended otherwise than their commands' clean end records said.
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
}

struct InFlight {
    step: String,
    attempt: u32,
    job_id: String,
    /// The backend it was submitted to.
    backend: String,
    info: ResumeInfo,
    submitted: chrono::DateTime<chrono::Utc>,
    started: Option<StartedAs>,
}

/// What the journal says of the run: what ran, what ended, what is in flight.
#[derive(Default)]
struct Said {
    ended: BTreeSet<(String, u32)>,
    steps_ended: BTreeSet<String>,
    flights: Vec<InFlight>,
    started: BTreeMap<(String, u32), StartedAs>,
    /// Results files are read only inside the run's work folder.
    work: Option<PathBuf>,
    declared: BTreeMap<String, u32>,
    done_ok: BTreeMap<String, u32>,
    /// Attempts that ended on their jobs' clean end records, not yet confirmed.
    unconfirmed: BTreeMap<(String, u32), String>,
}

fn read_journal(lines: &[JournalLine]) -> Said {
    let mut r = Said::default();
    for l in lines {
        match &l.event {
            e @ Event::RunStarted { .. } => {
                let Some(header) = e.run_header() else {
                    continue;
                };
                r.work = Some(PathBuf::from(&header.options.work));
                for s in &header.steps {
                    r.declared.insert(s.id.clone(), s.repeats + s.warmup);
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
                ..
            } => {
                r.started.insert(
                    (step.clone(), *attempt),
                    StartedAs {
                        argv: argv.clone(),
                        cwd: cwd.clone(),
                        out: out.clone(),
                        cgroup: cgroup.clone(),
                        canary: canary.clone(),
                        warmup: *warmup,
                    },
                );
            }
            Event::JobSubmitted {
                step,
                attempt,
                job_id,
                backend,
                resume: Some(info),
            } => {
                r.flights.push(InFlight {
                    step: step.clone(),
                    attempt: *attempt,
                    job_id: job_id.clone(),
                    backend: backend.clone(),
                    info: (**info).clone(),
                    submitted: l.time,
                    started: None,
                });
            }
            Event::AttemptEnded { step, attempt } => {
                r.ended.insert((step.clone(), attempt.attempt));
                if attempt.succeeded() {
                    *r.done_ok.entry(step.clone()).or_default() += 1;
                }
                if let Some(j) = attempt
                    .job
                    .as_ref()
                    .filter(|j| j.accounting.state == crate::contract::UNCONFIRMED)
                {
                    r.unconfirmed
                        .insert((step.clone(), attempt.attempt), j.job_id.clone());
                }
            }
            Event::JobConfirmed { confirmation: c } => {
                r.unconfirmed.remove(&(c.step.clone(), c.attempt));
            }
            Event::StepEnded { step, .. } => {
                r.steps_ended.insert(step.clone());
            }
            _ => {}
        }
    }
    r
}

/// The journal is input: the work folder it names must be the run's (absolute,
/// named for the run id); every path is derived from it and the record folder.
fn run_work_folder(work: Option<PathBuf>, run_id: &str) -> Result<PathBuf, String> {
    match work {
        Some(w) if w.is_absolute() && w.file_name().and_then(|n| n.to_str()) == Some(run_id) => {
            Ok(w)
        }
        Some(w) => Err(format!(
            "the journal names {} as the run's work folder, which is not named for run {run_id}: refused",
            w.display()
        )),
        None => Err("the journal names no work folder".into()),
    }
}

/// Jobs of the run the journal never heard of (the orchestrator died between
/// submitting and its journal line): they would write into the record later.
/// Found by the backend (by name, user and comment), cancelled, and said.
async fn cancel_strays(
    backend: &dyn Backend,
    known: &BTreeSet<String>,
    journal: &mut Journal,
    out: &mut Resumed,
) -> Result<(), String> {
    let Some(strays) = backend.strays(known).await else {
        return Ok(());
    };
    if strays.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = strays.iter().map(|s| s.job_id.clone()).collect();
    let gone = backend
        .cancel_jobs(&ids, std::time::Duration::from_secs(60))
        .await;
    for crate::backend::Stray {
        job_id: id,
        step,
        attempt: n,
    } in &strays
    {
        let message = format!(
            "slurm job {id} ({step}/{n}) was not in the journal (the orchestrator died before it wrote it down): cancelled{}",
            if gone { "" } else { ", and still listed 60 s later" }
        );
        out.finished.push(message.clone());
        journal
            .append(Event::Warning { message })
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// What finishing one attempt gives: its step, job, record and how its step ends.
type Finished = (
    String,
    String,
    AttemptRecord,
    Option<super::context::StepEnd>,
);

/// Wait again for one in-flight job, and make its attempt's record as the lost
/// orchestrator would have.
async fn finish_flight(
    f: InFlight,
    backend: std::sync::Arc<crate::backend::Router>,
    record_dir: PathBuf,
    work: PathBuf,
    masker: std::sync::Arc<crate::mask::Masker>,
) -> Result<Finished, String> {
    crate::fsx::name(&f.step).map_err(|e| format!("the journal names step `{}`: {e}", f.step))?;
    let StartedAs {
        argv,
        cwd,
        out,
        cgroup,
        canary,
        warmup,
    } = f.started.clone().unwrap_or_default();
    let (out_dir, logs_dir) = super::prefetch::attempt_dirs(&work, &record_dir, &f.step, f.attempt);
    let private = out_dir.with_file_name(format!("{}.job.json", f.attempt));
    let inside = |p: &str| {
        let clean = crate::plan::lexical_clean(std::path::Path::new(p));
        clean.starts_with(&work).then_some(p.to_string())
    };
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
        gpus: Vec::new(),
        npus: Vec::new(),
        timeout: None,
        grace: std::time::Duration::from_secs(2),
        stdout: logs_dir.join("stdout.log"),
        stderr: logs_dir.join("stderr.log"),
        tee: false,
        mask: (!masker.is_empty()).then(|| std::sync::Arc::clone(&masker)),
    };
    let job = AttemptJob {
        run_id: String::new(),
        step: f.step.clone(),
        attempt: f.attempt,
        logs: logs_dir.clone(),
        record_dir: record_dir.clone(),
        private: private.clone(),
        // What the job asked for was settled when it was submitted.
        placement: backend
            .kind_of(&f.backend)
            .map(|kind| crate::backend::Placement::new(kind, ())),
        on_submit: None,
        on_note: None,
        after: Vec::new(),
        detach: false,
    };
    let script = logs_dir
        .join("job.sh")
        .strip_prefix(&record_dir)
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let found = crate::backend::Reattach {
        job_id: f.job_id.clone(),
        script,
        gres: f.info.gres.clone(),
        submitted: f.submitted,
        array: f.info.array.clone(),
    };
    let outcome = backend.reattach(spec, job, found).await;
    // The spec file (the attempt's environment, secrets included) goes
    // whatever became of the job.
    let _ = std::fs::remove_file(&private);
    let files = AttemptFiles {
        record_dir,
        stdout: logs_dir.join("stdout.log"),
        stderr: logs_dir.join("stderr.log"),
        metrics: logs_dir.join("metrics.json"),
        outputs: f.info.outputs.iter().filter_map(|o| inside(o)).collect(),
        junit: f.info.junit.clone().map(|(w, a)| (w, PathBuf::from(a))),
        sarif: f.info.sarif.clone().map(|(w, a)| (w, PathBuf::from(a))),
        roots: vec![work.clone()],
        cwd: PathBuf::from(&cwd),
    };
    let collected = tokio::task::spawn_blocking(move || files.collect(&crate::sys::Stop::new()))
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
        strict_gpus: false,
    };
    let ran = Ran {
        result: Ok(outcome),
        asked_at: f.submitted,
    };
    let (rec, verdict) = record_made(made, &ran, collected);
    Ok((f.step, f.job_id, rec, verdict))
}

/// One finished attempt into the journal, and its step's end when this attempt
/// ends it.
fn journal_finished(
    journal: &mut Journal,
    r: &mut Said,
    out: &mut Resumed,
    (step, job_id, rec, verdict): Finished,
) -> Result<(), String> {
    let state = rec
        .job
        .as_ref()
        .map(|j| j.accounting.state.clone())
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
    if r.steps_ended.contains(&step) {
        return Ok(());
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
        let n = r.done_ok.entry(step.clone()).or_default();
        *n += 1;
        if *n >= r.declared.get(&step).copied().unwrap_or(1) {
            journal
                .append(Event::StepEnded {
                    step: step.clone(),
                    status: StepStatus::Succeeded,
                    reason: Some(
                        "finished by `orchestrate resume` after the orchestrator was lost".into(),
                    ),
                    outputs,
                })
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Finish the in-flight batch attempts of `lines` (the run's journal), appending
/// to `journal`.
pub async fn resume_jobs(
    run_id: &str,
    record_dir: &std::path::Path,
    lines: &[JournalLine],
    journal: &mut Journal,
) -> Result<Resumed, String> {
    let mut r = read_journal(lines);
    let mut out = Resumed::default();
    let work = run_work_folder(r.work.take(), run_id)?;
    let journal_jobs: BTreeSet<String> = r.flights.iter().map(|f| f.job_id.clone()).collect();
    let (kept, mut open): (Vec<InFlight>, Vec<InFlight>) = std::mem::take(&mut r.flights)
        .into_iter()
        .partition(|f| r.ended.contains(&(f.step.clone(), f.attempt)));
    out.kept = kept.len();
    let backend = std::sync::Arc::new(
        crate::backend::Router::remotes_only(run_id).map_err(|e| e.to_string())?,
    );
    cancel_strays(backend.as_ref(), &journal_jobs, journal, &mut out).await?;
    if open.is_empty() && r.unconfirmed.is_empty() {
        return Ok(out);
    }
    for f in &mut open {
        f.started = r.started.get(&(f.step.clone(), f.attempt)).cloned();
    }
    for ((step, attempt), job_id) in &r.unconfirmed {
        backend.expect(job_id, step, *attempt);
    }
    // Secrets the lost orchestrator masked: what the attempts' spec files and the
    // plan (read again, with this environment) say.
    let masker = std::sync::Arc::new(recovered_masker(record_dir, Some(&work)));
    let tasks: Vec<_> = open
        .into_iter()
        .map(|f| {
            tokio::spawn(finish_flight(
                f,
                std::sync::Arc::clone(&backend),
                record_dir.to_path_buf(),
                work.clone(),
                std::sync::Arc::clone(&masker),
            ))
        })
        .collect();
    for t in tasks {
        let finished = t.await.map_err(|e| e.to_string())??;
        journal_finished(journal, &mut r, &mut out, finished)?;
    }
    let (disagreed, confirmed) = confirm_all(
        backend.as_ref(),
        journal,
        std::time::Duration::from_secs(60),
    )
    .await
    .map_err(|e| e.to_string())?;
    out.disagreed = disagreed;
    // No spec file (environments, secrets) outlives the run.
    for spec in spec_files(&work) {
        let _ = std::fs::remove_file(spec);
    }
    // What the user is told is what the scheduler said in the end, not "unconfirmed".
    for (step, attempt, job_id, state) in confirmed {
        let was = format!(
            "{step}/{attempt}: job {job_id} {}",
            crate::contract::UNCONFIRMED
        );
        match out.finished.iter_mut().find(|l| **l == was) {
            Some(l) => *l = format!("{step}/{attempt}: job {job_id} {state}"),
            None => out
                .finished
                .push(format!("{step}/{attempt}: job {job_id} {state}")),
        }
    }
    Ok(out)
}

/// The remote backends' word on every attempt of the run that ended on its job's
/// clean end record, into the journal; what they disagreed with.
pub async fn confirm_jobs(
    remote: &dyn crate::backend::Backend,
    journal: &mut Journal,
    limit: std::time::Duration,
) -> std::io::Result<Vec<String>> {
    confirm_all(remote, journal, limit).await.map(|(d, _)| d)
}

/// [`confirm_jobs`], and each job confirmed: (step, attempt, job, state).
async fn confirm_all(
    remote: &dyn crate::backend::Backend,
    journal: &mut Journal,
    limit: std::time::Duration,
) -> std::io::Result<(Vec<String>, Vec<(String, u32, String, String)>)> {
    let mut disagreed = Vec::new();
    let mut confirmed = Vec::new();
    for c in remote.confirm(limit).await {
        if let Some(why) = c.disagreement() {
            disagreed.push(why);
        }
        confirmed.push((
            c.step.clone(),
            c.attempt,
            c.job_id.clone(),
            c.accounting.state.clone(),
        ));
        journal.append(Event::JobConfirmed {
            confirmation: Box::new(c),
        })?;
    }
    Ok((disagreed, confirmed))
}

/// The secret values a lost orchestrator masked, as well as they can be known
/// again: the values of secret-named variables in the attempts' spec files still
/// in the work folder, and what the record's plan reads from secret variables in
/// this environment (the same values when resumed from the same shell).
pub fn recovered_masker(
    record_dir: &std::path::Path,
    work: Option<&std::path::Path>,
) -> crate::mask::Masker {
    let plan = std::fs::read_to_string(record_dir.join("plan.toml"))
        .ok()
        .and_then(|text| {
            let env = |k: &str| std::env::var(k).ok();
            crate::plan::load_str(&text, &record_dir.join("plan.toml"), &env).ok()
        });
    let extra: Vec<String> = plan
        .as_ref()
        .map(|p| p.secret_env.clone())
        .unwrap_or_default();
    let mut values: Vec<String> = plan.map(|p| p.secret_values.0.clone()).unwrap_or_default();
    values.extend(std::env::vars().flat_map(|(k, v)| crate::mask::secrets_in(&k, &v, &extra)));
    if let Some(w) = work {
        for spec in spec_files(w) {
            let Ok(b) = crate::digest::read_regular(&spec, crate::digest::Follow::No, 64 << 20)
            else {
                continue;
            };
            let Some(env) = crate::backend::spec_env(&b) else {
                continue;
            };
            values.extend(
                env.iter()
                    .flat_map(|(k, v)| crate::mask::secrets_in(k, v, &extra)),
            );
        }
    }
    crate::mask::Masker::new(values)
}

/// The attempts' spec files in a run's work folder (`<step>/<n>.job.json`, one
/// level down, regular files only).
pub fn spec_files(work: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(steps) = std::fs::read_dir(work) else {
        return out;
    };
    for s in steps.flatten() {
        if !s.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(files) = std::fs::read_dir(s.path()) else {
            continue;
        };
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            let is_spec = name
                .strip_suffix(".job.json")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if is_spec && f.file_type().is_ok_and(|t| t.is_file()) {
                out.push(f.path());
            }
        }
    }
    out
}
