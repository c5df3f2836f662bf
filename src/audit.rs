//! `orchestrate audit`: what runs left behind on this host, found without changing
//! anything a live run owns.
//!
//! Four sources, each judged by run liveness (`sched::Judge`: the kernel's
//! flock on `<state>/runs/<run-id>.lock`):
//! - lease files in the default lease folder that are unlocked but still name a
//!   holder (`devices::audit_leases`, `Stale`);
//! - `orchestrate-<run-id>-*` cgroups whose run is gone;
//! - processes carrying the canary `ORCHESTRATE_ATTEMPT=<run-id>/<step>/<n>` of a run
//!   that is gone;
//! - with a records folder: run folders with a journal but no `record.json` whose run
//!   is gone (`recover` finishes them).
//!
//! Live runs are listed for information, read from `/proc/locks` rather than by
//! probing their lock files: a probe could take the lock of a run that is just
//! registering and make it fail.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::devices::{self, Holder, LeaseStatus, StaleReason};
use crate::isolate::{self, Isolator, Mode};
use crate::sched;

/// A lock file that no process holds but whose body still names a holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaleLease {
    pub file: PathBuf,
    pub device: String,
    pub core: u32,
    /// `None` when the body is not a lease record.
    pub holder: Option<Holder>,
    pub reason: StaleReason,
}

/// A process still carrying the canary of a run that is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftProcess {
    pub pid: i32,
    /// `<run-id>/<step>/<n>`.
    pub canary: String,
    pub run_id: String,
    /// `/proc/<pid>/comm`, empty if it vanished.
    pub command: String,
}

/// A run that is alive now (its liveness lock is held).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LiveRun {
    pub run_id: String,
    /// The orchestrator holding the run's lock.
    pub pid: Option<u32>,
    /// Its attempt cgroups.
    pub cgroups: Vec<String>,
    /// Lease files it holds (`device core N`).
    pub leases: Vec<String>,
}

/// What `audit_host` found. Clean when nothing was left and everything was checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AuditReport {
    pub host: String,
    /// RFC 3339, UTC.
    pub time: String,
    pub lease_dir: PathBuf,
    pub stale_leases: Vec<StaleLease>,
    /// `orchestrate-*` cgroups of runs that are gone.
    pub dead_cgroups: Vec<String>,
    pub left_processes: Vec<LeftProcess>,
    /// Record folders of gone runs with a journal and no `record.json` (only when a
    /// records folder was given).
    pub unfinished_records: Vec<PathBuf>,
    /// For information: runs alive now.
    pub live_runs: Vec<LiveRun>,
    /// Runs neither proven alive nor dead, with what they have here: left alone.
    pub unsure_runs: Vec<UnsureRun>,
    /// For information: isolation fallbacks (then no cgroups could be listed).
    pub notes: Vec<String>,
    /// What could not be checked; an audit with errors is not clean.
    pub errors: Vec<String>,
}

impl AuditReport {
    /// Nothing left behind and nothing unchecked (a run that cannot be judged may
    /// have left something: not clean).
    pub fn clean(&self) -> bool {
        self.stale_leases.is_empty()
            && self.dead_cgroups.is_empty()
            && self.left_processes.is_empty()
            && self.unfinished_records.is_empty()
            && self.unsure_runs.is_empty()
            && self.errors.is_empty()
    }
}

/// A run seen on this host that is neither proven alive nor proven dead: what it
/// has here is listed and left alone (`recover` does not touch it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UnsureRun {
    pub run_id: String,
    pub why: String,
    pub cgroups: Vec<String>,
    /// Pids carrying one of its canaries.
    pub processes: Vec<i32>,
}

/// The entry of a live run, made on first sight; `None` when the run is not proven
/// alive.
fn live_entry<'a>(
    runs: &'a mut BTreeMap<String, LiveRun>,
    judge: &sched::Judge,
    id: &str,
) -> Option<&'a mut LiveRun> {
    if !judge.of(id).is_alive() {
        return None;
    }
    Some(runs.entry(id.to_string()).or_insert_with(|| LiveRun {
        run_id: id.to_string(),
        ..LiveRun::default()
    }))
}

/// The entry of a run neither proven alive nor dead; `None` otherwise.
fn unsure_entry<'a>(
    runs: &'a mut BTreeMap<String, UnsureRun>,
    judge: &sched::Judge,
    id: &str,
) -> Option<&'a mut UnsureRun> {
    let sched::Liveness::Unknown { why } = judge.of(id) else {
        return None;
    };
    Some(runs.entry(id.to_string()).or_insert_with(|| UnsureRun {
        run_id: id.to_string(),
        why,
        ..UnsureRun::default()
    }))
}

/// The run id at the start of a canary `<run-id>/<step>/<n>`.
pub(crate) fn run_id_of_canary(canary: &str) -> Option<&str> {
    canary
        .split('/')
        .next()
        .filter(|id| id.len() == sched::RUN_ID_LEN)
}

/// Audits this host; `records` adds the unfinished-record check.
pub fn audit_host(records: Option<&Path>) -> AuditReport {
    let live = sched::Judge::new();
    let lease_dir = devices::default_lease_dir();
    let mut report = AuditReport {
        host: devices::holder::host_name(),
        time: crate::time::rfc3339(&chrono::Utc::now()),
        lease_dir: lease_dir.clone(),
        ..AuditReport::default()
    };
    let mut unsure: BTreeMap<String, UnsureRun> = BTreeMap::new();
    let mut live_runs: BTreeMap<String, LiveRun> = sched::live_runs()
        .into_iter()
        .map(|(id, pid)| {
            let run = LiveRun {
                run_id: id.clone(),
                pid: Some(pid),
                ..LiveRun::default()
            };
            (id, run)
        })
        .collect();

    match devices::audit_leases(&lease_dir) {
        Ok(states) => {
            for st in states {
                match st.status {
                    LeaseStatus::Free => {}
                    LeaseStatus::Held { holder } => {
                        if let Some(run) = holder
                            .as_ref()
                            .and_then(|h| live_entry(&mut live_runs, &live, &h.run_id))
                        {
                            run.leases.push(format!("{} core {}", st.device, st.core));
                        }
                    }
                    LeaseStatus::Stale { holder, reason } => report.stale_leases.push(StaleLease {
                        file: st.file,
                        device: st.device,
                        core: st.core,
                        holder,
                        reason,
                    }),
                }
            }
        }
        Err(e) => report
            .errors
            .push(format!("cannot audit the lease folder: {e}")),
    }

    match Isolator::new(Mode::Auto) {
        Ok(isolator) => {
            report.notes.extend(isolator.warnings().iter().cloned());
            for name in isolator.list() {
                let Some(id) = sched::run_id_of_cgroup(&name) else {
                    continue;
                };
                if let Some(run) = live_entry(&mut live_runs, &live, id) {
                    run.cgroups.push(name);
                } else if let Some(run) = unsure_entry(&mut unsure, &live, id) {
                    run.cgroups.push(name);
                } else {
                    report.dead_cgroups.push(name);
                }
            }
        }
        Err(e) => report.errors.push(format!("cannot list cgroups: {e}")),
    }

    let not_alive = |c: &str| run_id_of_canary(c).is_some_and(|id| !live.of(id).is_alive());
    for (pid, canary) in isolate::processes_with_canary(&not_alive) {
        let run_id = run_id_of_canary(&canary).unwrap_or_default().to_string();
        if let Some(run) = unsure_entry(&mut unsure, &live, &run_id) {
            run.processes.push(pid);
            continue;
        }
        report.left_processes.push(LeftProcess {
            pid,
            command: std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            canary,
            run_id,
        });
    }

    if let Some(records) = records {
        report.unfinished_records = unfinished_records(records, &|id| live.of(id).is_dead());
    }
    report.live_runs = live_runs.into_values().collect();
    report.unsure_runs = unsure.into_values().collect();
    report
}

/// Record folders in `records` with a journal, a run proven dead, and no
/// `record.json` or no attestation (written last: a run killed between the two
/// left a record nobody can verify), sorted.
pub(crate) fn unfinished_records(records: &Path, dead: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(records) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|dir| {
            // An empty journal: killed before its first event, nothing ran, nothing
            // to finish (`never_started`).
            std::fs::symlink_metadata(dir.join("journal.jsonl"))
                .is_ok_and(|m| m.is_file() && m.len() > 0)
                && (!dir.join("record.json").is_file()
                    || !dir
                        .join(crate::evidence::attestation::ATTESTATION_FILE)
                        .is_file())
                && dir.file_name().and_then(|n| n.to_str()).is_some_and(dead)
                && !is_detached(dir)
        })
        .collect();
    dirs.sort();
    dirs
}

/// Whether the run of a record folder was detached (`run --detach`) and not yet
/// collected: no orchestrator holds it, by design, and its jobs are its own.
pub(crate) fn is_detached(dir: &Path) -> bool {
    let Ok(b) = crate::digest::read_regular(
        &dir.join("journal.jsonl"),
        crate::digest::Follow::No,
        256 << 20,
    ) else {
        return false;
    };
    let has = |w: &[u8]| b.windows(w.len()).any(|x| x == w);
    has(b"\"event\":\"run_detached\"") && !has(b"\"event\":\"run_ended\"")
}

/// Record folders of detached runs waiting to be collected.
pub(crate) fn detached_records(records: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(records) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| is_detached(&e.path()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    out.sort();
    out
}

/// Record folders of dead runs killed before their journal's first event (it is
/// empty): nothing ran and nothing was owned; their folders keep the plan as given.
pub(crate) fn never_started(records: &Path, dead: &dyn Fn(&str) -> bool) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(records) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            std::fs::symlink_metadata(e.path().join("journal.jsonl"))
                .is_ok_and(|m| m.is_file() && m.len() == 0)
                && !e.path().join("record.json").exists()
        })
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| dead(n))
        .collect()
}

/// The report for a person.
pub fn render_text(r: &AuditReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "audit of {} at {}", r.host, r.time);
    let _ = writeln!(out, "leases in {}:", r.lease_dir.display());
    if r.stale_leases.is_empty() {
        out.push_str("  no stale lease\n");
    }
    for l in &r.stale_leases {
        let who = l
            .holder
            .as_ref()
            .map_or("an unreadable body".to_string(), Holder::describe);
        let _ = writeln!(
            out,
            "  stale: {} core {} ({}) held by {who}: {:?}",
            l.device,
            l.core,
            l.file.display(),
            l.reason
        );
    }
    out.push_str("cgroups:\n");
    if r.dead_cgroups.is_empty() {
        out.push_str("  none left by a dead run\n");
    }
    for c in &r.dead_cgroups {
        let _ = writeln!(out, "  left by a dead run: {c}");
    }
    out.push_str("processes:\n");
    if r.left_processes.is_empty() {
        out.push_str("  none left by a dead run\n");
    }
    for p in &r.left_processes {
        let _ = writeln!(
            out,
            "  left by a dead run: pid {} ({}) attempt {}",
            p.pid, p.command, p.canary
        );
    }
    for d in &r.unfinished_records {
        let _ = writeln!(out, "unfinished record of a dead run: {}", d.display());
    }
    for u in &r.unsure_runs {
        let _ = writeln!(
            out,
            "UNSURE: run {} ({}): {} cgroup(s), processes {:?}; recover leaves it alone",
            u.run_id,
            u.why,
            u.cgroups.len(),
            u.processes
        );
    }
    if !r.live_runs.is_empty() {
        out.push_str("live runs:\n");
    }
    for run in &r.live_runs {
        let pid = run.pid.map(|p| format!(" pid {p}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {}{pid}: {} cgroup(s), leases [{}]",
            run.run_id,
            run.cgroups.len(),
            run.leases.join(", ")
        );
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    for e in &r.errors {
        let _ = writeln!(out, "error: {e}");
    }
    out.push_str(if r.clean() {
        "clean: nothing left behind\n"
    } else {
        "NOT clean: run `orchestrate recover` to release what dead runs left\n"
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> AuditReport {
        AuditReport {
            host: "h".into(),
            time: "t".into(),
            lease_dir: PathBuf::from("/x"),
            ..AuditReport::default()
        }
    }

    #[test]
    fn clean_means_nothing_left_and_nothing_unchecked() {
        let mut r = empty();
        r.live_runs.push(LiveRun {
            run_id: "20990101T000000Z-abcdef".into(),
            pid: Some(1),
            cgroups: vec!["orchestrate-x".into()],
            leases: Vec::new(),
        });
        r.notes.push("isolation none".into());
        assert!(r.clean(), "live runs and notes are information only");
        assert!(render_text(&r).contains("clean: nothing left behind"));
        let mut dirty = r.clone();
        dirty
            .dead_cgroups
            .push("orchestrate-20990101T000000Z-abcdef-a-1".into());
        assert!(!dirty.clean());
        assert!(render_text(&dirty).contains("NOT clean"));
        let mut unchecked = r.clone();
        unchecked.errors.push("lease folder unreadable".into());
        assert!(!unchecked.clean());
        let mut stale = r;
        stale.stale_leases.push(StaleLease {
            file: PathBuf::from("/x/sim-gpu0.core0.lock"),
            device: "sim-gpu0".into(),
            core: 0,
            holder: None,
            reason: StaleReason::Unreadable,
        });
        assert!(!stale.clean());
        assert!(render_text(&stale).contains("stale: sim-gpu0 core 0"));
    }

    #[test]
    fn own_flock_shows_in_proc_locks() {
        use std::os::unix::fs::MetadataExt;
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("x.lock");
        let f = std::fs::File::create(&path).unwrap();
        let lock = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| e)
            .unwrap();
        let m = std::fs::metadata(&path).unwrap();
        let locks = crate::sched::liveness::parse_proc_locks(
            &std::fs::read_to_string("/proc/locks").unwrap(),
        );
        assert!(locks.contains(&(std::process::id(), m.dev(), m.ino())));
        drop(lock);
    }

    #[test]
    fn a_run_killed_before_its_first_event_is_not_unfinished_but_never_started() {
        let t = tempfile::tempdir().unwrap();
        for (name, journal) in [("a", ""), ("b", "{}\n")] {
            std::fs::create_dir_all(t.path().join(name)).unwrap();
            std::fs::write(t.path().join(name).join("journal.jsonl"), journal).unwrap();
        }
        let dead = |_: &str| true;
        assert_eq!(unfinished_records(t.path(), &dead), [t.path().join("b")]);
        assert_eq!(never_started(t.path(), &dead), ["a"]);
        assert!(never_started(t.path(), &|_: &str| false).is_empty());
    }

    #[test]
    fn canary_run_ids() {
        assert_eq!(
            run_id_of_canary("20990101T000000Z-abcdef/step/1"),
            Some("20990101T000000Z-abcdef")
        );
        assert_eq!(run_id_of_canary("procs-unit-test"), None);
    }
}
