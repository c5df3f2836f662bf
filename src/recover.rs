//! `orchestrate recover`: clean what dead runs left on this host, finish their
//! records from their journals, and keep a record of it. Only runs whose liveness
//! lock is free are touched.
//!
//! Order matters: cgroups of dead runs are killed and removed first, then stray
//! processes carrying a dead run's canary are killed, and only then are stale lease
//! bodies cleared, so a device is never shown free while a dead run's attempt may
//! still be using it. The recovery record (`<records>/recovery-<UTC>.json`,
//! canonical JSON, written atomically) lists what was found and removed; it is
//! written whenever anything was found.

use crate::backend::DeadRunJobs;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::isolate::{self, Isolator, Mode};
use crate::sched;

/// A process recover killed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KilledProcess {
    pub pid: i32,
    /// `<run-id>/<step>/<n>`.
    pub canary: String,
}

/// A dead run's record rebuilt from its journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FinishedRecord {
    pub run_id: String,
    /// `succeeded`, `failed` or `interrupted`.
    pub status: String,
}

/// What recover found and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RecoveryReport {
    pub host: String,
    /// RFC 3339, UTC: when recover started.
    pub time: String,
    pub lease_dir: PathBuf,
    /// Cgroups of dead runs, killed and removed.
    pub cgroups_removed: Vec<String>,
    pub processes_killed: Vec<KilledProcess>,
    /// One line per stale lease body cleared.
    pub leases_cleared: Vec<String>,
    pub records_finished: Vec<FinishedRecord>,
    /// Dead runs whose Slurm jobs were cancelled (`scancel --name <run-id>`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slurm_cancelled: Vec<String>,
    /// Detached runs (`run --detach`), left alone: their jobs run on without an
    /// orchestrator by design, and `resume` collects them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub detached: Vec<String>,
    /// What could not be done.
    pub errors: Vec<String>,
    /// Where this report was written (absent from the file itself).
    #[serde(skip)]
    pub written_to: Option<PathBuf>,
}

impl RecoveryReport {
    /// Whether anything was found.
    pub fn found_anything(&self) -> bool {
        !(self.cgroups_removed.is_empty()
            && self.processes_killed.is_empty()
            && self.leases_cleared.is_empty()
            && self.records_finished.is_empty()
            && self.slurm_cancelled.is_empty()
            && self.errors.is_empty())
    }
}

/// Why recover could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    /// The cgroup layout could not be read.
    #[error("cannot set up cgroup access: {0}")]
    Isolate(#[from] isolate::IsolateError),
    /// The recovery record could not be written (the cleanup itself was done).
    #[error("cleanup done but the recovery record could not be written: {0}")]
    Record(String),
}

/// Cleans what dead runs left and writes the recovery record into `records` when
/// anything was found.
pub fn recover_host(records: &Path) -> Result<RecoveryReport, RecoverError> {
    let now = chrono::Utc::now();
    let lease_dir = crate::devices::default_lease_dir();
    let mut report = RecoveryReport {
        host: crate::devices::holder::host_name(),
        time: crate::time::rfc3339(&now),
        lease_dir: lease_dir.clone(),
        ..RecoveryReport::default()
    };
    let isolator = Isolator::new(Mode::Auto)?;
    // Only runs proven dead are touched; one judgement per run for the whole pass.
    let judge = sched::Judge::new();
    let is_dead = |id: &str| judge.of(id).is_dead();
    let mut cleaned: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    // Jobs on remote backends outlive a dead run: they are ended first, all of a
    // run's at once, so the backend ends them (and writes their last words to their
    // logs) before anything here kills a process or hashes a log. The backend looks
    // a run's jobs up itself, not only in the journal: a job the orchestrator died
    // before writing down is found too.
    // Read once: the records of dead runs that never finished.
    let unfinished = crate::audit::unfinished_records(records, &is_dead);
    report.detached = crate::audit::detached_records(records);
    end_remote_jobs(&unfinished, &mut report);
    let stale = |name: &str| sched::run_id_of_cgroup(name).is_some_and(is_dead);
    report.cgroups_removed = isolator.sweep(&stale);
    // A dead run's own home (cgroup v2), as its journal recorded it, and the parent
    // an administrator delegated to it.
    let mut delegated: Vec<PathBuf> = Vec::new();
    for dir in &unfinished {
        let (parents, given) = recorded_cgroups(&dir.join("journal.jsonl"));
        report
            .cgroups_removed
            .extend(isolator.sweep_recorded(&parents, &stale));
        if let Some(p) = given.filter(|p| !delegated.contains(p)) {
            delegated.push(p);
        }
    }
    for p in &delegated {
        match Isolator::new_in(Mode::Auto, Some(p)) {
            Ok(there) => report.cgroups_removed.extend(there.sweep(&stale)),
            Err(e) => report
                .errors
                .push(format!("the delegated cgroup /{}: {e}", p.display())),
        }
    }
    for c in &report.cgroups_removed {
        cleaned.extend(sched::run_id_of_cgroup(c).map(String::from));
    }
    let dead = |c: &str| crate::audit::run_id_of_canary(c).is_some_and(is_dead);
    for (pid, canary) in isolate::processes_with_canary(&dead) {
        match nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        ) {
            Ok(()) => {
                cleaned.extend(crate::audit::run_id_of_canary(&canary).map(String::from));
                report.processes_killed.push(KilledProcess { pid, canary });
            }
            Err(nix::errno::Errno::ESRCH) => {} // ended on its own meanwhile
            Err(e) => report
                .errors
                .push(format!("cannot kill process {pid} (attempt {canary}): {e}")),
        }
    }
    match crate::devices::recover_leases(&lease_dir) {
        Ok(cleared) => report.leases_cleared = cleared,
        Err(e) => report.errors.push(format!(
            "cannot recover leases in {}: {e}",
            lease_dir.display()
        )),
    }
    for dir in &unfinished {
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match crate::run::finish_record(dir, None) {
            Ok(rec) => {
                cleaned.insert(id.clone());
                report.records_finished.push(FinishedRecord {
                    run_id: id,
                    status: rec.status.as_str().to_string(),
                })
            }
            Err(e) => report
                .errors
                .push(format!("could not finish the record of {id}: {e}")),
        }
    }
    // Killed before its first event: nothing to finish, only its registration to drop.
    cleaned.extend(crate::audit::never_started(records, &is_dead));
    // What a dead run left is gone: so is its lock and registration.
    for id in &cleaned {
        sched::forget_dead_run(id);
    }
    if report.found_anything() {
        let path = records.join(format!(
            "recovery-{}.json",
            now.format("%Y%m%dT%H%M%S%.6fZ")
        ));
        let bytes = crate::evidence::jcs::to_canonical(&report)
            .map_err(|e| RecoverError::Record(e.to_string()))?;
        std::fs::create_dir_all(records)
            .map_err(|e| RecoverError::Record(format!("{}: {e}", records.display())))?;
        crate::evidence::atomic::write_atomic(&path, &bytes)
            .map_err(|e| RecoverError::Record(e.to_string()))?;
        report.written_to = Some(path);
    }
    Ok(report)
}

/// Every attempt log of a record folder.
fn glob_logs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let steps = dir.join("steps");
    for s in std::fs::read_dir(&steps).into_iter().flatten().flatten() {
        for a in std::fs::read_dir(s.path()).into_iter().flatten().flatten() {
            for log in ["stdout.log", "stderr.log"] {
                out.push(a.path().join(log));
            }
        }
    }
    out
}

/// Whether the run's journal says it submitted batch jobs.
fn submitted_jobs(record_dir: &Path) -> bool {
    crate::digest::read_regular(
        &record_dir.join("journal.jsonl"),
        crate::digest::Follow::No,
        256 << 20,
    )
    .is_ok_and(|b| b.windows(15).any(|w| w == b"\"job_submitted\"".as_slice()))
}

/// End what each dead run left on the remote backends, and say what came of it.
fn end_remote_jobs(unfinished: &[PathBuf], report: &mut RecoveryReport) {
    for dir in unfinished {
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match crate::backend::end_jobs_of_dead_run(&id, &glob_logs(dir)) {
            DeadRunJobs::None => {}
            DeadRunJobs::Unknown if submitted_jobs(dir) => report.errors.push(format!(
                "the Slurm controller did not answer: the jobs of {id} may still run"
            )),
            DeadRunJobs::Unknown => {}
            DeadRunJobs::Cancelled { gone } => {
                if !gone {
                    report.errors.push(format!(
                        "the Slurm jobs of {id} did not end within 60 s of scancel"
                    ));
                }
                report.slurm_cancelled.push(id);
            }
            DeadRunJobs::Failed(e) => report
                .errors
                .push(format!("scancel of the jobs of {id}: {e}")),
        }
    }
}

/// The report for a person.
pub fn render_text(r: &RecoveryReport) -> String {
    let mut out = String::new();
    for c in &r.cgroups_removed {
        let _ = writeln!(out, "removed cgroup {c}");
    }
    for p in &r.processes_killed {
        let _ = writeln!(out, "killed process {} left by attempt {}", p.pid, p.canary);
    }
    for l in &r.leases_cleared {
        let _ = writeln!(out, "{l}");
    }
    for f in &r.records_finished {
        let _ = writeln!(
            out,
            "finished the record of dead run {} from its journal: {}",
            f.run_id, f.status
        );
    }
    for id in &r.slurm_cancelled {
        let _ = writeln!(out, "cancelled the Slurm jobs of dead run {id}");
    }
    for id in &r.detached {
        let _ = writeln!(
            out,
            "left alone: run {id} is detached, not dead (collect it with `orchestrate resume`)"
        );
    }
    for e in &r.errors {
        let _ = writeln!(out, "error: {e}");
    }
    match &r.written_to {
        Some(p) => {
            let _ = writeln!(out, "recovery record: {}", p.display());
        }
        None => out.push_str("nothing to recover\n"),
    }
    out
}

/// Why `recover` did not leave the host clean.
#[derive(Debug, thiserror::Error)]
pub enum RecoverFailed {
    #[error("error: {0}\n")]
    Host(#[from] RecoverError),
    /// It ran, and some of what dead runs left could not be ended or removed: the
    /// whole report, its `error:` lines saying what.
    #[error("{0}")]
    Incomplete(String),
}

/// What recover did, as text for the terminal (`recover_host` + `render_text`).
pub fn recover(records: &Path) -> Result<String, RecoverFailed> {
    let r = recover_host(records)?;
    let text = render_text(&r);
    if r.errors.is_empty() {
        Ok(text)
    } else {
        Err(RecoverFailed::Incomplete(text))
    }
}

/// The cgroup parents a run's journal header names (`run.isolation.info.parents`); none
/// when the journal is unreadable.
/// The parents a run's journal says its attempts were created below, and the
/// delegated cgroup it was given (checked as a plan's would be: a journal is input).
fn recorded_cgroups(journal: &Path) -> (Vec<PathBuf>, Option<PathBuf>) {
    let Ok((lines, _)) = crate::evidence::journal::read(journal) else {
        return (Vec::new(), None);
    };
    lines
        .iter()
        .find_map(|l| match &l.event {
            e @ crate::evidence::journal::Event::RunStarted { .. } => {
                let info = e.run_header()?.isolation.info.clone();
                let given = info
                    .cgroup_parent
                    .as_deref()
                    .and_then(|s| crate::contract::cgroup_parent_path(s).ok());
                let parents = info.parents;
                Some((parents, given))
            }
            _ => None,
        })
        .unwrap_or_default()
}
