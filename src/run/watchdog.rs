//! The run always ends. A thread of its own, outside the run's async runtime,
//! counts SIGINT and SIGTERM: once a second one came and the run has not ended
//! [`HARD_EXIT_AFTER`] later (a stuck await, a blocked thread, a controller that
//! does not answer), it kills every process and cgroup of the run, ends its jobs
//! on remote backends, and exits 130. A run with a timeout gets the same past its timeout,
//! the grace and the abandon bound. The journal then ends where the run stopped
//! writing: `orchestrate recover` finishes the record from it; leases are `flock`s
//! the kernel drops with the process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::isolate::Isolator;

/// How long after a second interrupt the run may still take to end by itself.
pub const HARD_EXIT_AFTER: Duration = Duration::from_secs(5);
/// Beyond the run timeout, its grace and the abandon bound, before the run is ended
/// the hard way.
const DEADLINE_MARGIN: Duration = Duration::from_secs(30);

/// What the watchdog ends when the run does not.
pub(crate) struct Cleanup {
    pub run_id: String,
    /// Weak: a run that returned drops its isolator, which puts the orchestrator's
    /// cgroup back as it was found (cgroup v2).
    pub isolator: Weak<Isolator>,
    /// Where the run's attempts may outlive it (its remote backends), to end
    /// through them.
    pub remotes: Vec<Arc<dyn crate::backend::Backend>>,
}

/// Armed while the run goes on and while its caller renders what it returned;
/// dropping it disarms it.
#[derive(Debug)]
pub struct Watchdog {
    done: Arc<AtomicBool>,
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
    }
}

impl Watchdog {
    /// Start watching; `deadline` is the run's own bound (timeout + grace + abandon).
    pub(crate) fn start(cleanup: Cleanup, deadline: Option<Duration>) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let d = Arc::clone(&done);
        let spawned = std::thread::Builder::new()
            .name("orchestrate-watchdog".into())
            .spawn(move || watch(cleanup, deadline, d));
        if let Err(e) = spawned {
            tracing::warn!("no watchdog thread ({e}): a stuck run needs SIGKILL");
        }
        Watchdog { done }
    }
}

fn watch(cleanup: Cleanup, deadline: Option<Duration>, done: Arc<AtomicBool>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let code = rt.block_on(async {
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return None;
        };
        let far = Duration::from_secs(10 * 365 * 24 * 3600);
        let deadline = tokio::time::sleep(deadline.map_or(far, |d| d + DEADLINE_MARGIN));
        tokio::pin!(deadline);
        let mut signals = 0u32;
        loop {
            tokio::select! {
                _ = int.recv() => signals += 1,
                _ = term.recv() => signals += 1,
                _ = &mut deadline => {
                    return Some((1, "it ran past its timeout, grace and abandon bound"));
                }
            }
            if signals >= 2 {
                tokio::time::sleep(HARD_EXIT_AFTER).await;
                return Some((130, "it did not end within 5 s of the second interrupt"));
            }
        }
    });
    let Some((code, why)) = code else {
        return;
    };
    if done.load(Ordering::SeqCst) {
        return;
    }
    eprintln!(
        "orchestrate: run {}: {why}; killing everything it started and leaving (its journal is kept: `orchestrate recover` finishes the record)",
        cleanup.run_id
    );
    end_everything(&cleanup);
    // process::exit runs no destructor: leave our cgroup v2 homes first.
    crate::isolate::leave_homes();
    std::process::exit(code);
}

/// Kill the run's cgroups (and what is in them), its canary-marked processes, and
/// end what it has on its remote backends.
fn end_everything(c: &Cleanup) {
    let prefix = format!("orchestrate-{}-", c.run_id);
    if let Some(isolator) = c.isolator.upgrade() {
        for r in isolator.sweep(&|n| n.starts_with(&prefix)) {
            tracing::debug!("watchdog removed cgroup {r}");
        }
    }
    let canary = format!("{}/", c.run_id);
    for (pid, _) in crate::isolate::processes_with_canary(&|v| v.starts_with(&canary)) {
        let p = nix::unistd::Pid::from_raw(pid);
        let _ = nix::sys::signal::killpg(p, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGKILL);
    }
    for backend in &c.remotes {
        backend.end_now(&c.run_id);
    }
}
