//! Which runs are alive on this host. A live orchestrator holds an `flock` on
//! `<state>/runs/<run-id>.lock` for its whole life, and the kernel drops it when the
//! process dies, however it dies. Cleanup of what a run left (cgroups, canary
//! processes, leases, records) only ever touches runs proven dead.
//!
//! The state folder depends on who runs (`/run/orchestrate` for root, under
//! `$XDG_RUNTIME_DIR` or `/tmp/orchestrate-<uid>` otherwise) and on
//! `ORCHESTRATE_STATE_DIR`, so a run's lock is not always where the judge looks. Every
//! run therefore also registers in a folder every user shares
//! (`/dev/shm/orchestrate-runs/<run-id>.json`, sticky and world-writable like
//! `/tmp`), flocked as well and naming its lock, pid, process start time and boot id.
//! The verdict ([`Liveness`]):
//! - **alive**: any of its lock files is flocked now (read from `/proc/locks`, never
//!   by probing: a probe could take the lock of a run that is just registering), or
//!   its registered orchestrator still runs;
//! - **dead**: its registered orchestrator is gone (pid gone or reused, or another
//!   boot), or a lock file of it exists and nobody holds it;
//! - **unknown**: nothing of it was found (another user's run with an unreadable
//!   state folder, or a registry that could not be written): left alone.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::devices::holder::{boot_id, process_start_time};

/// The host-wide state folder: `/run/orchestrate` as root, else under
/// `$XDG_RUNTIME_DIR`; `ORCHESTRATE_STATE_DIR` overrides both.
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("ORCHESTRATE_STATE_DIR") {
        return PathBuf::from(d);
    }
    if nix::unistd::geteuid().is_root() {
        return PathBuf::from("/run/orchestrate");
    }
    // An empty value is unset (as the XDG spec reads it), never the current folder.
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("orchestrate"),
        None => {
            std::env::temp_dir().join(format!("orchestrate-{}", nix::unistd::geteuid().as_raw()))
        }
    }
}

/// The registry every user's runs share; `ORCHESTRATE_REGISTRY_DIR` overrides it.
pub fn registry_dir() -> PathBuf {
    std::env::var_os("ORCHESTRATE_REGISTRY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/shm/orchestrate-runs"))
}

fn runs_dir() -> PathBuf {
    state_dir().join("runs")
}

/// What a run writes into the shared registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    pub run_id: String,
    pub pid: u32,
    /// Start time of `pid` in clock ticks after boot (tells a reused pid apart).
    pub start_time: Option<u64>,
    pub boot_id: Option<String>,
    pub uid: u32,
    /// The run's lock file in its state folder.
    pub lock: PathBuf,
}

/// Held for as long as the run lives.
pub struct RunLock {
    _file: File,
    path: PathBuf,
    registry: Option<(File, PathBuf)>,
}

impl RunLock {
    pub fn acquire(run_id: &str) -> io::Result<RunLock> {
        let dir = runs_dir();
        crate::sys::retry(|| std::fs::create_dir_all(&dir))?;
        let path = dir.join(format!("{run_id}.lock"));
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        if !try_flock(&file)? {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("run {run_id} is already running"),
            ));
        }
        file.set_len(0)?;
        writeln!(file, "{}", std::process::id())?;
        let registry = register(run_id, &path).ok();
        Ok(RunLock {
            _file: file,
            path,
            registry,
        })
    }

    /// Whether the run could register where every user's runs are judged; without
    /// it, a judge that cannot see this run's state folder calls it unknown (and
    /// leaves it alone).
    pub fn registered(&self) -> bool {
        self.registry.is_some()
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Removed while still locked, so no other process can be holding them.
        if let Some((_, p)) = &self.registry {
            let _ = std::fs::remove_file(p);
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Create `<registry>/<run-id>.json` (the folder sticky and world-writable), lock
/// it and write the registration.
fn register(run_id: &str, lock: &Path) -> io::Result<(File, PathBuf)> {
    let dir = registry_dir();
    if !dir.is_dir() {
        match std::fs::create_dir(&dir) {
            Ok(()) => std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777))?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    let path = dir.join(format!("{run_id}.json"));
    let mut file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o644)
        .open(&path)?;
    if !try_flock(&file)? {
        return Err(io::Error::other("registry entry locked by another process"));
    }
    let pid = std::process::id();
    let reg = Registration {
        run_id: run_id.to_string(),
        pid,
        start_time: process_start_time(pid),
        boot_id: boot_id(),
        uid: nix::unistd::geteuid().as_raw(),
        lock: std::path::absolute(lock).unwrap_or_else(|_| lock.to_path_buf()),
    };
    let body = serde_json::to_vec(&reg).map_err(io::Error::other)?;
    file.write_all(&body)?;
    Ok((file, path))
}

fn try_flock(f: &File) -> io::Result<bool> {
    // SAFETY: flock on a valid open fd has no memory effects.
    match crate::sys::cvt(|| unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether a run is alive, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Liveness {
    /// Its lock is held (by `pid`, when known).
    Alive { pid: Option<u32> },
    /// Proven dead: its leftovers may be cleaned.
    Dead { why: String },
    /// Neither proven alive nor dead: left alone.
    Unknown { why: String },
}

impl Liveness {
    pub fn is_dead(&self) -> bool {
        matches!(self, Liveness::Dead { .. })
    }
    pub fn is_alive(&self) -> bool {
        matches!(self, Liveness::Alive { .. })
    }
}

/// Judges runs against one snapshot of `/proc/locks`, each run once.
pub struct Judge {
    /// (st_dev, inode) of every flocked file -> the pid holding it.
    held: BTreeMap<(u64, u64), u32>,
    verdicts: std::cell::RefCell<BTreeMap<String, Liveness>>,
}

impl Default for Judge {
    fn default() -> Self {
        Self::new()
    }
}

impl Judge {
    pub fn new() -> Judge {
        let text = std::fs::read_to_string("/proc/locks").unwrap_or_default();
        Judge {
            held: parse_proc_locks(&text)
                .into_iter()
                .map(|(pid, dev, ino)| ((dev, ino), pid))
                .collect(),
            verdicts: Default::default(),
        }
    }

    /// The verdict on `run_id`.
    pub fn of(&self, run_id: &str) -> Liveness {
        if let Some(v) = self.verdicts.borrow().get(run_id) {
            return v.clone();
        }
        let v = self.judge(run_id);
        self.verdicts
            .borrow_mut()
            .insert(run_id.to_string(), v.clone());
        v
    }

    fn holder(&self, path: &Path) -> Option<Option<u32>> {
        let m = std::fs::metadata(path).ok()?;
        Some(self.held.get(&(m.dev(), m.ino())).copied())
    }

    fn judge(&self, run_id: &str) -> Liveness {
        if !is_plain_id(run_id) {
            return Liveness::Unknown {
                why: format!("{run_id:?} is not a run id"),
            };
        }
        let entry = registry_dir().join(format!("{run_id}.json"));
        let reg: Option<Registration> =
            crate::digest::read_regular(&entry, crate::digest::Follow::No, 64 << 10)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
        let mut locks = lock_candidates(run_id);
        if let Some(r) = &reg {
            locks.insert(r.lock.clone());
        }
        let mut free_lock = None;
        // `/proc/locks` names the process that took a lock, not those that hold it
        // now: a child forked by the run and not yet exec'd (its descriptors not yet
        // closed on exec) keeps the lock held after the run is killed. Held by the
        // registered orchestrator that is gone, the lock proves nothing.
        let orphaned = |pid: u32| {
            reg.as_ref().is_some_and(|r| {
                r.pid == pid
                    && match process_start_time(pid) {
                        None => true,
                        Some(t) => r.start_time.is_some_and(|s| s != t),
                    }
            })
        };
        for path in std::iter::once(&entry).chain(&locks) {
            match self.holder(path) {
                Some(Some(pid)) if orphaned(pid) => {}
                Some(Some(pid)) => return Liveness::Alive { pid: Some(pid) },
                Some(None) => {
                    free_lock.get_or_insert_with(|| path.clone());
                }
                None => {}
            }
        }
        if let Some(r) = &reg {
            if r.boot_id.is_some() && r.boot_id != boot_id() {
                return Liveness::Dead {
                    why: "it ran before this host last booted".into(),
                };
            }
            match process_start_time(r.pid) {
                None => {
                    return Liveness::Dead {
                        why: format!("its orchestrator (pid {}) is gone", r.pid),
                    }
                }
                Some(t) if r.start_time.is_some_and(|s| s != t) => {
                    return Liveness::Dead {
                        why: format!("its orchestrator (pid {}) is gone (pid reused)", r.pid),
                    }
                }
                Some(_) => return Liveness::Alive { pid: Some(r.pid) },
            }
        }
        match free_lock {
            Some(p) => Liveness::Dead {
                why: format!("nobody holds its lock {}", p.display()),
            },
            None => Liveness::Unknown {
                why: "no lock or registration of it was found (it may belong to another \
                      user or state folder): left alone"
                    .into(),
            },
        }
    }
}

/// A run id is used in paths: letters, digits and `-` only.
fn is_plain_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Where a run's lock may be: this process's state folder, and the default state
/// folders of every user (root's, `$XDG_RUNTIME_DIR` ones, `/tmp/orchestrate-<uid>`).
fn lock_candidates(run_id: &str) -> BTreeSet<PathBuf> {
    let name = format!("{run_id}.lock");
    let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
    dirs.insert(runs_dir());
    dirs.insert(PathBuf::from("/run/orchestrate/runs"));
    let tmp = std::env::temp_dir();
    for (parent, prefix, tail) in [
        (Path::new("/run/user"), "", "orchestrate/runs"),
        (tmp.as_path(), "orchestrate-", "runs"),
        (Path::new("/tmp"), "orchestrate-", "runs"),
    ] {
        if let Ok(entries) = std::fs::read_dir(parent) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(prefix) {
                    dirs.insert(e.path().join(tail));
                }
            }
        }
    }
    dirs.into_iter().map(|d| d.join(&name)).collect()
}

/// Remove the lock files and registration of a run proven dead (after what it left
/// was cleaned), so later judges find no trace of it.
pub fn forget_dead_run(run_id: &str) {
    if !is_plain_id(run_id) || !Judge::new().of(run_id).is_dead() {
        return;
    }
    let _ = std::fs::remove_file(registry_dir().join(format!("{run_id}.json")));
    for p in lock_candidates(run_id) {
        let _ = std::fs::remove_file(p);
    }
}

/// Runs whose lock this judge sees held, with the holder: every registration and
/// every lock file in the known state folders.
pub fn live_runs() -> Vec<(String, u32)> {
    let judge = Judge::new();
    let mut ids: BTreeSet<String> = BTreeSet::new();
    let mut scan = |dir: &Path, ext: &str| {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if let Some(id) = e.file_name().to_str().and_then(|n| n.strip_suffix(ext)) {
                    ids.insert(id.to_string());
                }
            }
        }
    };
    scan(&registry_dir(), ".json");
    scan(&runs_dir(), ".lock");
    ids.into_iter()
        .filter_map(|id| match judge.of(&id) {
            Liveness::Alive { pid } => Some((id, pid.unwrap_or(0))),
            _ => None,
        })
        .collect()
}

/// `(pid, st_dev, inode)` of every FLOCK line of `/proc/locks`
/// (`1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`; major and minor in hex).
pub(crate) fn parse_proc_locks(text: &str) -> Vec<(u32, u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // Blocked waiters are shown as `1: -> FLOCK ...`: skip them.
            if f.get(1) != Some(&"FLOCK") {
                return None;
            }
            let pid = f.get(4)?.parse().ok()?;
            let mut parts = f.get(5)?.split(':');
            let major = u32::from_str_radix(parts.next()?, 16).ok()?;
            let minor = u32::from_str_radix(parts.next()?, 16).ok()?;
            let ino = parts.next()?.parse().ok()?;
            Some((pid, libc::makedev(major, minor), ino))
        })
        .collect()
}

/// Is this `orchestrate-<run-id>-...` cgroup left by a run proven dead?
pub fn is_stale_cgroup(name: &str) -> bool {
    super::run_id_of_cgroup(name).is_some_and(|id| Judge::new().of(id).is_dead())
}

/// Is the run with this id alive on this host (proven alive)?
pub fn is_run_alive(run_id: &str) -> bool {
    Judge::new().of(run_id).is_alive()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_locks_lines() {
        let text = "1: FLOCK  ADVISORY  WRITE 1234 00:19:5678 0 EOF\n\
                    1: -> FLOCK  ADVISORY  WRITE 99 00:19:5678 0 EOF\n\
                    2: POSIX  ADVISORY  WRITE 77 fd:01:42 0 EOF\n\
                    3: FLOCK  ADVISORY  WRITE 55 fd:01:42 0 EOF\n";
        assert_eq!(
            parse_proc_locks(text),
            vec![
                (1234, libc::makedev(0, 0x19), 5678),
                (55, libc::makedev(0xfd, 1), 42)
            ]
        );
    }

    #[test]
    fn lock_and_registration_mark_alive_until_dropped() {
        let t = tempfile::tempdir().unwrap();
        // Tests share one process: the state and registry folders are private here
        // through variables only this test sets.
        std::env::set_var("ORCHESTRATE_STATE_DIR", t.path().join("state"));
        std::env::set_var("ORCHESTRATE_REGISTRY_DIR", t.path().join("registry"));
        let id = "20990101T000000Z-abcdef";
        assert!(matches!(Judge::new().of(id), Liveness::Unknown { .. }));
        let lock = RunLock::acquire(id).unwrap();
        assert!(lock.registered());
        assert_eq!(
            Judge::new().of(id),
            Liveness::Alive {
                pid: Some(std::process::id())
            }
        );
        assert!(RunLock::acquire(id).is_err());
        assert!(live_runs().iter().any(|(r, _)| r == id));
        drop(lock);
        assert!(!is_run_alive(id));
        // A registration whose orchestrator is gone proves the run dead.
        let reg = Registration {
            run_id: id.into(),
            pid: u32::MAX - 1,
            start_time: Some(1),
            boot_id: boot_id(),
            uid: 0,
            lock: t.path().join("elsewhere/x.lock"),
        };
        std::fs::write(
            registry_dir().join(format!("{id}.json")),
            serde_json::to_vec(&reg).unwrap(),
        )
        .unwrap();
        let v = Judge::new().of(id);
        assert!(v.is_dead(), "{v:?}");
        forget_dead_run(id);
        assert!(matches!(Judge::new().of(id), Liveness::Unknown { .. }));
        std::env::remove_var("ORCHESTRATE_STATE_DIR");
        std::env::remove_var("ORCHESTRATE_REGISTRY_DIR");
    }
}
