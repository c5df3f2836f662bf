//! System calls that a signal may interrupt, retried.
//!
//! The orchestrator gets SIGCHLD for every attempt that ends, and tokio's signal
//! handlers are installed, so any interruptible call can fail with `EINTR`. Some
//! kernel paths return `EINTR` even under `SA_RESTART`: a cgroup v1 memory limit
//! write checks for a pending signal before it starts (measured here: 29 of 20 000
//! writes under a signal storm, and one attempt in a few thousand of a 1000-step
//! run). Every raw call that can be interrupted goes through these helpers.

use std::io;

/// Run `f` again while it fails with `EINTR`.
pub fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// A libc call returning -1 and `errno` on failure, retried on `EINTR`; the
/// non-negative result otherwise.
pub fn cvt<T>(mut f: impl FnMut() -> T) -> io::Result<T>
where
    T: Copy + PartialOrd + From<i8>,
{
    retry(|| {
        let r = f();
        if r < T::from(0) {
            Err(io::Error::last_os_error())
        } else {
            Ok(r)
        }
    })
}

/// A flag that tells blocking work (hashing, waiting for devices) to give up; set
/// when the run must end at once, whatever a blocking thread is doing.
#[derive(Debug, Clone, Default)]
pub struct Stop(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }
    /// Ask every holder of a clone to stop.
    pub fn stop(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    pub fn is_stopped(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A fault the tests inject: `ORCHESTRATE_TEST_STALL=<point>` makes the await point
/// named `point` never finish (`<point>:block` blocks its thread instead), so a test
/// can show that the run still ends on a second interrupt whatever is stuck. Unset
/// (always, outside those tests) it costs one load of a cached value.
pub async fn stall_point(point: &str) {
    match stall_wanted(point) {
        Some(true) => stall_thread(),
        Some(false) => std::future::pending::<()>().await,
        None => {}
    }
}

/// [`stall_point`] for code outside the run's runtime: it blocks its thread.
pub fn stall_point_blocking(point: &str) {
    if stall_wanted(point).is_some() {
        stall_thread();
    }
}

/// Whether `point` is the injected stall, and then whether it blocks its thread;
/// said on standard error, so a test knows the run reached it.
fn stall_wanted(point: &str) -> Option<bool> {
    static STALL: std::sync::OnceLock<Option<(String, bool)>> = std::sync::OnceLock::new();
    let wanted = STALL.get_or_init(|| {
        let v = std::env::var("ORCHESTRATE_TEST_STALL").ok()?;
        Some(match v.strip_suffix(":block") {
            Some(p) => (p.to_string(), true),
            None => (v, false),
        })
    });
    let (p, block) = wanted.as_ref().filter(|(p, _)| p == point)?;
    eprintln!("orchestrate: stalled at {p} (ORCHESTRATE_TEST_STALL)");
    Some(*block)
}

fn stall_thread() -> ! {
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// The orchestrator's own folder: the steps' `PATH` and the pins' start with it, so
/// `kvsim` beside `orchestrate` (a wheel's scripts, `target/release`) is found
/// without anyone putting that folder on `PATH`. Read once: every cached step's
/// key asks for it.
pub fn tool_dir() -> Option<std::path::PathBuf> {
    static DIR: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(std::path::Path::to_path_buf))
    })
    .clone()
}

/// `PATH` with the orchestrator's own folder first (as the steps see it).
pub fn path_with_tool_dir() -> Option<std::ffi::OsString> {
    let rest = std::env::var_os("PATH");
    let Some(dir) = tool_dir() else {
        return rest;
    };
    let mut parts = vec![dir];
    parts.extend(rest.iter().flat_map(std::env::split_paths));
    std::env::join_paths(parts).ok().or(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupted_calls_are_retried_and_other_errors_returned() {
        let mut n = 0;
        let r = retry(|| {
            n += 1;
            if n < 3 {
                Err(io::Error::from_raw_os_error(libc::EINTR))
            } else {
                Ok(n)
            }
        });
        assert_eq!(r.unwrap(), 3);
        let mut calls = 0;
        let e = retry(|| -> io::Result<()> {
            calls += 1;
            Err(io::Error::from_raw_os_error(libc::EBUSY))
        })
        .unwrap_err();
        assert_eq!((e.raw_os_error(), calls), (Some(libc::EBUSY), 1));
        // SAFETY: close(-1) only sets errno (EBADF).
        let e = cvt(|| unsafe { libc::close(-1) }).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        assert_eq!(cvt(|| 7i32).unwrap(), 7);
    }
}
