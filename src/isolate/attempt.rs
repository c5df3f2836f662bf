//! Running one attempt: spawn into its cgroups, wait for the first of exit, timeout or
//! cancel, end the whole tree (TERM, grace, kill), measure, remove, report.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::cgroup::{AttemptCgroups, Measures};
use super::types::{
    AttemptOutcome, AttemptSpec, CancelReason, Enforcement, IsolateError, Termination,
};
use super::Isolator;
use super::{reaper, spawn};

/// How long the kill may take before what is left is reported as leftovers.
const KILL_BOUND: Duration = Duration::from_secs(5);
/// How often the grace period checks whether the tree is already gone.
const GRACE_POLL: Duration = Duration::from_millis(5);

/// Where the attempt's processes are: its cgroups, or (mode none) its process group.
enum Tree {
    Cgroup(AttemptCgroups),
    Group(i32),
}

impl Tree {
    fn is_empty(&self) -> bool {
        match self {
            Tree::Cgroup(g) => g.is_empty(),
            Tree::Group(pgid) => {
                reaper::reap_orphans();
                // SAFETY: signal 0 only checks for existence.
                let rc = unsafe { libc::kill(-pgid, 0) };
                rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
            }
        }
    }

    /// Processes of the tree now (none mode: unknown, empty).
    fn pids(&self) -> Vec<i32> {
        match self {
            Tree::Cgroup(g) => g.pids(),
            Tree::Group(_) => Vec::new(),
        }
    }

    fn term(&self) {
        match self {
            Tree::Cgroup(g) => g.signal_all(libc::SIGTERM),
            // SAFETY: a negative pid signals our attempt's process group only.
            Tree::Group(pgid) => unsafe {
                libc::kill(-pgid, libc::SIGTERM);
            },
        }
    }

    /// Kill everything; true when empty within the bound. The main process is reaped
    /// here when it dies (a zombie still counts as a member of its process group).
    async fn kill(&self, child: &mut spawn::Child, status: &mut Option<ExitStatus>) -> bool {
        match self {
            Tree::Cgroup(g) => {
                let g = g.clone();
                tokio::task::spawn_blocking(move || g.kill_all(KILL_BOUND))
                    .await
                    .unwrap_or(false)
            }
            Tree::Group(pgid) => {
                let start = Instant::now();
                loop {
                    // SAFETY: as in term.
                    unsafe { libc::kill(-pgid, libc::SIGKILL) };
                    if status.is_none() {
                        if let Ok(Some(st)) = child.try_wait() {
                            *status = Some(st);
                        }
                    }
                    if status.is_some() && self.is_empty() {
                        return true;
                    }
                    if start.elapsed() > KILL_BOUND {
                        return false;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        }
    }
}

fn open_output(path: &Path) -> Result<File, IsolateError> {
    File::create(path).map_err(|source| IsolateError::Output {
        path: path.to_path_buf(),
        source,
    })
}

/// A pipe whose ends are closed on exec (the child gets a dup of the write end).
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(std::io::Error::from)
}

/// Wait until a cancel reason is set (returns at once when one already is).
async fn cancelled(rx: &mut watch::Receiver<Option<CancelReason>>) -> CancelReason {
    loop {
        if let Some(r) = *rx.borrow_and_update() {
            return r;
        }
        if rx.changed().await.is_err() {
            // Sender gone: nobody can cancel any more.
            std::future::pending::<()>().await;
        }
    }
}

/// Copy a pipe to the output file (masking secrets as they pass) and, with `tee`, to
/// the orchestrator's terminal, chunk by chunk.
async fn copy_out<R>(
    mut from: R,
    mut file: tokio::fs::File,
    tee: Option<bool>,
    mask: Option<std::sync::Arc<crate::mask::Masker>>,
) where
    R: AsyncRead + Unpin,
{
    use std::io::Write;
    let mut masking = mask.map(crate::mask::StreamMask::new);
    let mut buf = vec![0u8; 16 * 1024];
    let write = |chunk: &[u8]| {
        // Terminal writes are small and rare enough to do in place.
        let _ = match tee {
            Some(true) => std::io::stderr().lock().write_all(chunk),
            Some(false) => std::io::stdout().lock().write_all(chunk),
            None => Ok(()),
        };
    };
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = buf.get(..n).unwrap_or_default();
        let masked;
        let chunk = match &mut masking {
            Some(m) => {
                masked = m.push(chunk);
                &masked[..]
            }
            None => chunk,
        };
        let _ = file.write_all(chunk).await;
        write(chunk);
    }
    if let Some(m) = &mut masking {
        let rest = m.finish();
        let _ = file.write_all(&rest).await;
        write(&rest);
    }
    let _ = file.flush().await;
}

pub(crate) async fn run(
    iso: &Isolator,
    spec: AttemptSpec,
    mut cancel: watch::Receiver<Option<CancelReason>>,
    gate: impl std::future::Future<Output = Result<(), String>>,
) -> Result<AttemptOutcome, IsolateError> {
    reaper::init_subreaper()?;
    let Some(program) = spec.argv.first() else {
        return Err(IsolateError::InvalidSpec("empty argv".into()));
    };
    let t_begin = Instant::now();
    let (group, mut enforcement) = match &iso.cgroups {
        Some(b) => {
            let (g, e) = AttemptCgroups::create(b, iso.fs.clone(), &spec)?;
            (Some(g), e)
        }
        None => (None, none_enforcement(&spec)),
    };
    enforcement.notes.extend(iso.warnings.iter().cloned());
    let cleanup_err = |e: IsolateError| {
        if let Some(g) = &group {
            g.remove();
        }
        e
    };

    let stdout = open_output(&spec.stdout).map_err(cleanup_err)?;
    let stderr = open_output(&spec.stderr).map_err(cleanup_err)?;
    let procs = match &group {
        Some(g) => g.open_join().map_err(cleanup_err)?,
        None => Vec::new(),
    };
    let fds: Vec<i32> = procs.iter().map(|f| f.as_raw_fd()).collect();

    let spawn_err = |source: std::io::Error| IsolateError::Spawn {
        program: program.clone(),
        source,
    };
    let stdin = File::open("/dev/null")
        .map_err(spawn_err)
        .map_err(cleanup_err)?;
    // With tee, the child writes into pipes and we copy them to the files and the
    // terminal; otherwise straight into the files.
    let tee_pipe = || -> std::io::Result<(tokio::net::unix::pipe::Receiver, OwnedFd)> {
        let (r, w) = pipe()?;
        Ok((tokio::net::unix::pipe::Receiver::from_owned_fd(r)?, w))
    };
    let mask = spec.mask.clone().filter(|m| !m.is_empty());
    let (pipe_out, pipe_err) = if spec.tee || mask.is_some() {
        let a = tee_pipe().map_err(spawn_err).map_err(cleanup_err)?;
        let b = tee_pipe().map_err(spawn_err).map_err(cleanup_err)?;
        (Some(a), Some(b))
    } else {
        (None, None)
    };
    let child_fd = |pipe: &Option<(_, OwnedFd)>, file: &File| {
        pipe.as_ref()
            .map_or(file.as_raw_fd(), |(_, w)| w.as_raw_fd())
    };
    let env = child_env(&spec);
    let request = spawn::Request {
        argv: &spec.argv,
        env: &env,
        cwd: &spec.cwd,
        stdio: [
            stdin.as_raw_fd(),
            child_fd(&pipe_out, &stdout),
            child_fd(&pipe_err, &stderr),
        ],
        join: &fds,
    };
    let sigchld = spawn::Child::listener()
        .map_err(spawn_err)
        .map_err(cleanup_err)?;

    tokio::select! {
        biased;
        reason = cancelled(&mut cancel) => {
            return Err(cleanup_err(IsolateError::CancelledBeforeStart(reason)));
        }
        opened = gate => {
            if let Err(why) = opened {
                return Err(cleanup_err(IsolateError::GateRefused(why)));
            }
        }
    }

    let setup_time = t_begin.elapsed();
    let started_at = Utc::now();
    let t0 = Instant::now();
    let spawned = reaper::spawn_registered(|| spawn::spawn(&request));
    drop(procs);
    drop(stdin);
    let pid = spawned.map_err(spawn_err).map_err(cleanup_err)?;
    let mut child = spawn::Child::new(pid, sigchld);
    let mut tree = match group {
        Some(g) => Tree::Cgroup(g),
        None => Tree::Group(pid),
    };

    let mut tee_tasks = Vec::new();
    for (pipe, file, to_stderr) in [(pipe_out, stdout, false), (pipe_err, stderr, true)] {
        // Our copy of the write end closes here, so the reader sees EOF when the
        // attempt's last writer is gone.
        if let Some((rx, _w)) = pipe {
            let f = tokio::fs::File::from_std(file);
            let tee = spec.tee.then_some(to_stderr);
            tee_tasks.push(tokio::spawn(copy_out(rx, f, tee, mask.clone())));
        }
    }

    // Phase 1: the first of main exit, timeout, cancel.
    let mut status: Option<ExitStatus> = None;
    let mut cancel_reason: Option<CancelReason> = None;
    let mut timed_out = false;
    let mut wait_error: Option<String> = None;
    let timeout = async {
        match spec.timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        st = child.wait() => match st {
            Ok(st) => status = Some(st),
            // Never return early: the tree is still ended and cleaned below.
            Err(e) => wait_error = Some(format!("waiting for main pid {pid}: {e}")),
        },
        _ = timeout => timed_out = true,
        r = cancelled(&mut cancel) => cancel_reason = Some(r),
    }

    // When the main process exited and the tree proves empty, the attempt ended here.
    let exit_seen = (t0.elapsed(), Utc::now());

    // Phase 2: end the tree unless the main process exited alone.
    let mut kill_duration = None;
    let mut seen: Vec<i32> = Vec::new();
    let mut main_waitable = wait_error.is_none();
    let mut leftovers: Vec<String> = wait_error.into_iter().collect();
    // The quick end: the main process exited, so measure and remove the cgroups; the
    // kernel's refusal (Err, with what was measured first) means something lives on.
    let quick = match &mut tree {
        Tree::Cgroup(g) if status.is_some() => Some(g.try_finish()),
        _ => None,
    };
    let finished = matches!(quick, Some(Ok(_)));
    // Whether the tree was seen empty: then nothing of the attempt can come back
    // (no process is left to fork), and the cgroups need no second look.
    let mut emptied = match &quick {
        Some(r) => r.is_ok(),
        None => status.is_some() && tree.is_empty(),
    };
    if !emptied {
        let decision = Instant::now();
        seen.extend(tree.pids());
        let kill_now = cancel_reason == Some(CancelReason::Kill) || spec.grace.is_zero();
        if !kill_now {
            tree.term();
            let mut ending = Ending {
                status: &mut status,
                main_waitable: &mut main_waitable,
                cancel_reason: &mut cancel_reason,
            };
            grace(&tree, &mut child, &mut cancel, spec.grace, &mut ending).await;
        }
        seen.extend(tree.pids());
        emptied = tree.kill(&mut child, &mut status).await;
        if !emptied {
            leftovers.push(format!(
                "processes still alive after {KILL_BOUND:?} of killing"
            ));
        }
        kill_duration = Some(decision.elapsed());
    }
    if status.is_none() {
        match tokio::time::timeout(KILL_BOUND, child.wait()).await {
            Ok(Ok(st)) => status = Some(st),
            Ok(Err(e)) => leftovers.push(format!("waiting for main pid {pid}: {e}")),
            Err(_) => leftovers.push(format!("main pid {pid} did not exit after the kill")),
        }
    }
    let (wall, ended_at) = if finished {
        exit_seen
    } else {
        (t0.elapsed(), Utc::now())
    };
    settle(&seen).await;

    // Phase 3: measure and remove.
    let measures = measure_and_remove(quick, tree, emptied, &mut leftovers).await;
    tracing::debug!(
        attempt = %spec.name,
        setup_us = setup_time.as_micros() as u64,
        total_us = t_begin.elapsed().as_micros() as u64,
        wall_us = wall.as_micros() as u64,
        "attempt isolation timings"
    );
    join_tee(tee_tasks).await;

    let exit_code = status.and_then(|s| s.code());
    let signal = status.and_then(|s| s.signal());
    let termination = if cancel_reason.is_some() {
        Termination::Cancelled
    } else if timed_out {
        Termination::TimedOut
    } else if measures.oom_kills.is_some_and(|n| n > 0) {
        Termination::OomKilled
    } else if signal.is_some() {
        Termination::Signaled
    } else {
        Termination::Exited
    };
    Ok(AttemptOutcome {
        termination,
        exit_code,
        signal,
        started_at,
        ended_at,
        wall,
        cpu_user: measures.cpu_user,
        cpu_system: measures.cpu_system,
        peak_memory_bytes: measures.peak_memory_bytes,
        oom_kills: measures.oom_kills,
        pids_limit_hit: measures.pids_limit_hit,
        kill_duration,
        cancel_reason,
        enforcement,
        leftovers,
        job: None,
        unopened_logs: Vec::new(),
    })
}

/// One value per name, the last one winning (as std's Command does), and the
/// canary always ours.
fn child_env(spec: &AttemptSpec) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::with_capacity(spec.env.len() + 1);
    let canary = ("ORCHESTRATE_ATTEMPT".to_string(), spec.canary.clone());
    for (k, v) in spec.env.iter().chain(std::iter::once(&canary)) {
        env.retain(|(a, _)| a != k);
        env.push((k.clone(), v.clone()));
    }
    env
}

/// What the grace after SIGTERM may learn: the main process's exit, that it
/// cannot be waited for, and a cancel that escalates.
struct Ending<'a> {
    status: &'a mut Option<ExitStatus>,
    main_waitable: &'a mut bool,
    cancel_reason: &'a mut Option<CancelReason>,
}

/// The grace after SIGTERM: until the tree is empty, the grace is over, or a
/// second Ctrl-C (Kill) cuts it short.
async fn grace(
    tree: &Tree,
    child: &mut spawn::Child,
    cancel: &mut watch::Receiver<Option<CancelReason>>,
    grace: Duration,
    e: &mut Ending<'_>,
) {
    let grace_end = tokio::time::Instant::now() + grace;
    let mut cancel_open = true;
    loop {
        if e.status.is_some() && tree.is_empty() {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(grace_end) => break,
            _ = tokio::time::sleep(GRACE_POLL) => {}
            st = child.wait(), if e.status.is_none() && *e.main_waitable => match st {
                Ok(st) => *e.status = Some(st),
                Err(_) => *e.main_waitable = false,
            },
            changed = cancel.changed(), if cancel_open => {
                if changed.is_err() {
                    cancel_open = false;
                    continue;
                }
                let r = *cancel.borrow_and_update();
                if r == Some(CancelReason::Kill) {
                    // Kill cuts the grace short whatever ended the attempt; it
                    // only becomes the reason when a cancel did.
                    if e.cancel_reason.is_some() {
                        *e.cancel_reason = r;
                    }
                    break;
                }
                if let (Some(r), Some(c)) = (r, *e.cancel_reason) {
                    *e.cancel_reason = Some(r.max(c));
                }
            }
        }
    }
}

/// The attempt's figures, and its cgroups removed (what could not be is a
/// leftover); a quick end that already measured keeps its figures.
async fn measure_and_remove(
    quick: Option<Result<Measures, Measures>>,
    tree: Tree,
    emptied: bool,
    leftovers: &mut Vec<String>,
) -> Measures {
    match (quick, tree) {
        (Some(Ok(m)), _) => m,
        (first, Tree::Cgroup(g)) => {
            let (m, left) = tokio::task::spawn_blocking(move || {
                let m = g.measure();
                let mut left: Vec<String> = if emptied {
                    Vec::new()
                } else {
                    g.pids()
                        .iter()
                        .map(|p| format!("pid {p} still in the attempt's cgroup"))
                        .collect()
                };
                left.extend(g.remove());
                (m, left)
            })
            .await
            .unwrap_or_else(|e| {
                (
                    Measures::default(),
                    vec![format!("cleanup task failed: {e}")],
                )
            });
            leftovers.extend(left);
            // Hierarchies the quick end already removed keep their first figures.
            m.or(first.and_then(Result::err))
        }
        (_, Tree::Group(_)) => Measures::default(),
    }
}

/// The copies of a tee'd attempt's output end with its last writer; one that
/// does not within 2 s is given up.
async fn join_tee(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for t in tasks {
        let abort = t.abort_handle();
        if tokio::time::timeout(Duration::from_secs(2), t)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
}

/// Reap the attempt's orphans: a killed process leaves the cgroup before its own
/// children are re-parented to us, so wait (bounded) until every pid seen in the tree
/// is gone from /proc, reaping as they turn into our zombies.
async fn settle(seen: &[i32]) {
    let start = Instant::now();
    loop {
        reaper::reap_orphans();
        let alive = seen
            .iter()
            .any(|&p| Path::new("/proc").join(p.to_string()).exists());
        if !alive || start.elapsed() > Duration::from_secs(1) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The enforcement record of an attempt run without cgroups.
pub(crate) fn none_enforcement(spec: &AttemptSpec) -> Enforcement {
    let mut notes = vec![
        "isolation none: no limit is enforced and no usage is measured; the tree is ended \
         through its process group, which processes that call setsid escape"
            .to_string(),
    ];
    let mut asked = Vec::new();
    if spec.memory.is_some() {
        asked.push("memory");
    }
    if spec.pids.is_some() {
        asked.push("pids");
    }
    if spec.cpus.is_some() {
        asked.push("cpus");
    }
    if spec.device_nodes.is_some() {
        asked.push("devices");
    }
    if !asked.is_empty() {
        notes.push(format!("not enforced: {}", asked.join(", ")));
    }
    Enforcement {
        notes,
        ..Enforcement::nothing(crate::contract::Enforcer::None)
    }
}
