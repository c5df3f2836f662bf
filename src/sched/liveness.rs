//! Which runs are alive on this host: a live orchestrator holds an `flock` on
//! `<state>/runs/<run-id>.lock` for its whole life, and the kernel drops it when the
//! process dies, however it dies. Cleanup of what a run left (cgroups, canary
//! processes, leases) only ever touches runs whose lock is free.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// The host-wide state folder: `/run/orchestrate` as root, else under
/// `$XDG_RUNTIME_DIR`; `ORCHESTRATE_STATE_DIR` overrides both.
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("ORCHESTRATE_STATE_DIR") {
        return PathBuf::from(d);
    }
    if nix::unistd::geteuid().is_root() {
        return PathBuf::from("/run/orchestrate");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => PathBuf::from(d).join("orchestrate"),
        None => {
            std::env::temp_dir().join(format!("orchestrate-{}", nix::unistd::geteuid().as_raw()))
        }
    }
}

fn runs_dir() -> PathBuf {
    state_dir().join("runs")
}

/// Held for as long as the run lives.
pub struct RunLock {
    _file: File,
    path: PathBuf,
}

impl RunLock {
    pub fn acquire(run_id: &str) -> io::Result<RunLock> {
        let dir = runs_dir();
        std::fs::create_dir_all(&dir)?;
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
        Ok(RunLock { _file: file, path })
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Removed while still locked, so no other process can be holding it.
        let _ = std::fs::remove_file(&self.path);
    }
}

fn try_flock(f: &File) -> io::Result<bool> {
    // SAFETY: flock on a valid open fd has no memory effects.
    match crate::sys::cvt(|| unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Is this `orchestrate-<run-id>-...` cgroup left by a run that is gone?
pub fn is_stale_cgroup(name: &str) -> bool {
    super::run_id_of_cgroup(name).is_some_and(|id| !is_run_alive(id))
}

/// Is the run with this id alive on this host? A run without a lock file, or whose
/// lock nobody holds, is gone.
pub fn is_run_alive(run_id: &str) -> bool {
    let path = runs_dir().join(format!("{run_id}.lock"));
    let Ok(f) = OpenOptions::new().read(true).open(&path) else {
        return false;
    };
    match try_flock(&f) {
        // We got it: nobody holds it. Clean the stale file while we hold the lock.
        Ok(true) => {
            let _ = std::fs::remove_file(&path);
            false
        }
        Ok(false) => true,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_marks_alive_until_dropped() {
        let t = tempfile::tempdir().unwrap();
        // Tests share one process: set the state dir for this test only through a
        // unique run id under a private folder.
        std::env::set_var("ORCHESTRATE_STATE_DIR", t.path());
        let id = "20990101T000000Z-abcdef";
        assert!(!is_run_alive(id));
        let lock = RunLock::acquire(id).unwrap();
        assert!(is_run_alive(id));
        assert!(RunLock::acquire(id).is_err());
        drop(lock);
        assert!(!is_run_alive(id));
    }
}
