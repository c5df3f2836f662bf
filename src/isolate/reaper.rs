//! The orchestrator as child subreaper, and the orphan reaper.
//!
//! Design: with PR_SET_CHILD_SUBREAPER, processes of an attempt whose parent dies are
//! re-parented to us instead of PID 1, so they must be reaped here. tokio::process and
//! std::process wait for *specific* pids; reaping one of those would steal its exit
//! status. So the reaper only reaps a zombie child that is
//! - not in the registry of pids isolate spawned (an attempt's main process, waited
//!   for by its `spawn::Child`, which unregisters it when dropped), and
//! - in another session than ours: every attempt runs in its own session (`setsid`
//!   before exec), so its orphans do too, while children other code spawns with
//!   std/tokio stay in our session and are never touched.
//!
//! Spawning and registering happen under the registry lock, and a reaping pass holds
//! the same lock, so a main process that exits at once can never be reaped before it
//! is registered. A background thread makes a pass every 100 ms; `run` also makes one
//! when an attempt ends. An orphan whose dying parent had already left the cgroups
//! when the attempt was removed may be handed to us just after that pass; the next
//! background pass reaps it.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use super::procs;
use super::types::IsolateError;

static REGISTRY: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());
static STARTED: OnceLock<Result<(), String>> = OnceLock::new();

const PASS_INTERVAL: Duration = Duration::from_millis(100);

fn registry() -> MutexGuard<'static, BTreeSet<i32>> {
    // A panic while holding the lock leaves a set of pids that is still valid.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Make this process a child subreaper and start the orphan reaper (idempotent).
pub fn init_subreaper() -> Result<(), IsolateError> {
    let started = STARTED.get_or_init(|| {
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        if rc != 0 {
            return Err(format!(
                "prctl(PR_SET_CHILD_SUBREAPER): {}",
                std::io::Error::last_os_error()
            ));
        }
        std::thread::Builder::new()
            .name("orchestrate-reaper".into())
            .spawn(|| loop {
                std::thread::sleep(PASS_INTERVAL);
                reap_orphans();
            })
            .map(|_| ())
            .map_err(|e| format!("starting the orphan reaper thread: {e}"))
    });
    started.clone().map_err(|what| IsolateError::Os {
        what,
        source: std::io::Error::other("subreaper setup failed"),
    })
}

/// Spawn under the registry lock and register the new pid (`spawn` returns it).
pub(crate) fn spawn_registered(
    spawn: impl FnOnce() -> std::io::Result<i32>,
) -> std::io::Result<i32> {
    let mut reg = registry();
    let pid = spawn()?;
    reg.insert(pid);
    Ok(pid)
}

/// Forget a pid once its waiter has reaped it.
pub(crate) fn unregister(pid: i32) {
    registry().remove(&pid);
}

/// One reaping pass; returns the pids reaped.
pub(crate) fn reap_orphans() -> Vec<i32> {
    if !any_zombie_child() {
        return Vec::new();
    }
    let reg = registry();
    // SAFETY: getsid(0) only reads our own session id.
    let our_session = unsafe { libc::getsid(0) };
    let mut reaped = Vec::new();
    for pid in procs::children() {
        if reg.contains(&pid) {
            continue;
        }
        let Some(st) = procs::stat(pid) else { continue };
        if st.state != 'Z' || st.session == our_session {
            continue;
        }
        let mut status = 0;
        // SAFETY: waitpid on one specific pid that is our zombie child, WNOHANG.
        let rc = crate::sys::cvt(|| unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) });
        if rc.ok() == Some(pid) {
            reaped.push(pid);
        }
    }
    reaped
}

/// Whether any child of ours has exited and waits to be reaped: one waitid that
/// leaves it waitable (WNOWAIT), instead of reading every thread's children file.
fn any_zombie_child() -> bool {
    // SAFETY: a zeroed siginfo_t is a valid out-parameter; WNOWAIT reaps nothing.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let rc = crate::sys::cvt(|| unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    });
    match rc {
        // SAFETY: waitid filled in the siginfo (si_pid 0: nothing waits).
        Ok(_) => unsafe { info.si_pid() != 0 },
        // ECHILD: no children at all. Any other error: look the slow way.
        Err(e) => e.raw_os_error() != Some(libc::ECHILD),
    }
}
