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
use crate::contract::cancelled;

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
    let Started {
        enforcement,
        mut child,
        mut tree,
        tee_tasks,
        t_begin,
        setup_time,
        started_at,
        t0,
    } = start(iso, &spec, &mut cancel, gate).await?;

    // Phase 1: the first of main exit, timeout, cancel; the memory sampled meanwhile
    // where the kernel keeps no peak.
    let sampled = PeakSampler::start(&tree);
    let gpus = super::gpu::GpuSampler::start(spec.gpus.clone(), tree_pids(&tree, &spec.canary));
    let npus = super::npu::NpuSampler::start(spec.npus.clone());
    let First {
        mut status,
        mut cancel_reason,
        timed_out,
        wait_error,
    } = first_end(&mut child, spec.timeout, &mut cancel).await;
    let sampled_peak = sampled.stop().await;
    let gpu_found = gpus.stop().await;
    let npu_found = npus.stop().await;

    // When the main process exited and the tree proves empty, the attempt ended here.
    let exit_seen = (t0.elapsed(), Utc::now());

    // Phase 2: end the tree unless the main process exited alone.
    let mut kill_duration = None;
    let mut seen: Vec<i32> = Vec::new();
    let mut main_waitable = wait_error.is_none();
    let mut leftovers: Vec<String> = wait_error.into_iter().collect();
    let (quick, mut emptied) = quick_end(&mut tree, status.is_some());
    let finished = matches!(quick, Some(Ok(_)));
    if !emptied {
        let decision = Instant::now();
        let mut ending = Ending {
            status: &mut status,
            main_waitable: &mut main_waitable,
            cancel_reason: &mut cancel_reason,
        };
        emptied = end_tree(
            &mut tree,
            &mut child,
            &mut cancel,
            spec.grace,
            &mut ending,
            &mut seen,
        )
        .await;
        if !emptied {
            leftovers.push(format!(
                "processes still alive after {KILL_BOUND:?} of killing"
            ));
        }
        kill_duration = Some(decision.elapsed());
    }
    if status.is_none() {
        status = reap_main(&mut child, &mut leftovers).await;
    }
    let (wall, ended_at) = if finished {
        exit_seen
    } else {
        (t0.elapsed(), Utc::now())
    };
    settle(&seen).await;

    // Phase 3: measure and remove.
    let mut measures = measure_and_remove(quick, tree, emptied, &mut leftovers).await;
    if measures.peak_memory_bytes.is_none() {
        measures.peak_memory_bytes = sampled_peak;
    }
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
    Ok(AttemptOutcome {
        termination: termination(cancel_reason, timed_out, &measures, signal),
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
        gpus: gpu_found.uses,
        gpu_misuse: gpu_found.misuse,
        npus: npu_found,
    })
}

/// A way to list the attempt's processes from another thread: its cgroups', or
/// (without cgroups) those carrying its canary.
fn tree_pids(tree: &Tree, canary: &str) -> Box<dyn Fn() -> Vec<i32> + Send> {
    match tree {
        Tree::Cgroup(g) => {
            let g = g.clone();
            Box::new(move || g.pids())
        }
        Tree::Group(_) => {
            let canary = canary.to_string();
            Box::new(move || {
                super::procs::processes_with_canary(&|c| c == canary)
                    .into_iter()
                    .map(|(p, _)| p)
                    .collect()
            })
        }
    }
}

/// The highest `memory.current` seen every [`PEAK_SAMPLE`] while the main process
/// runs, on kernels without `memory.peak` (a peak between samples is missed: the
/// figure is a lower bound, and the docs say so).
struct PeakSampler {
    task: Option<(
        tokio::task::JoinHandle<()>,
        std::sync::Arc<std::sync::atomic::AtomicU64>,
    )>,
}

/// How often memory is sampled where the kernel keeps no peak.
const PEAK_SAMPLE: Duration = Duration::from_millis(50);

impl PeakSampler {
    fn start(tree: &Tree) -> PeakSampler {
        use std::sync::atomic::{AtomicU64, Ordering};
        let Tree::Cgroup(g) = tree else {
            return PeakSampler { task: None };
        };
        let Some(first) = g.memory_now() else {
            return PeakSampler { task: None };
        };
        let peak = std::sync::Arc::new(AtomicU64::new(first));
        let (g, p) = (g.clone(), peak.clone());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(PEAK_SAMPLE);
            loop {
                tick.tick().await;
                if let Some(now) = g.memory_now() {
                    p.fetch_max(now, Ordering::Relaxed);
                }
            }
        });
        PeakSampler {
            task: Some((task, peak)),
        }
    }

    async fn stop(self) -> Option<u64> {
        let (task, peak) = self.task?;
        task.abort();
        let _ = task.await;
        Some(peak.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// An attempt whose main process runs: its cgroups, output copies and clocks.
struct Started {
    enforcement: Enforcement,
    child: spawn::Child,
    tree: Tree,
    tee_tasks: Vec<tokio::task::JoinHandle<()>>,
    t_begin: Instant,
    setup_time: Duration,
    started_at: chrono::DateTime<Utc>,
    t0: Instant,
}

/// Make the attempt's cgroups and streams, wait for the start gate, and spawn its
/// main process into them; what was made is removed again when it cannot start.
async fn start(
    iso: &Isolator,
    spec: &AttemptSpec,
    cancel: &mut watch::Receiver<Option<CancelReason>>,
    gate: impl std::future::Future<Output = Result<(), String>>,
) -> Result<Started, IsolateError> {
    reaper::init_subreaper()?;
    let Some(program) = spec.argv.first() else {
        return Err(IsolateError::InvalidSpec("empty argv".into()));
    };
    let t_begin = Instant::now();
    let (group, enforcement) = attempt_cgroups(iso, spec)?;
    let cleanup_err = |e: IsolateError| {
        if let Some(g) = &group {
            g.remove();
        }
        e
    };

    let spawn_err = |source: std::io::Error| IsolateError::Spawn {
        program: program.clone(),
        source,
    };
    let Io {
        stdout,
        stderr,
        procs,
        stdin,
        pipe_out,
        pipe_err,
    } = Io::open(spec, group.as_ref(), &spawn_err).map_err(cleanup_err)?;
    let fds: Vec<i32> = procs.iter().map(|f| f.as_raw_fd()).collect();
    let mask = spec.mask.clone().filter(|m| !m.is_empty());
    let env = child_env(spec);
    let child_fd = |pipe: &Option<(_, OwnedFd)>, file: &File| {
        pipe.as_ref()
            .map_or(file.as_raw_fd(), |(_, w)| w.as_raw_fd())
    };
    let stdio = [
        stdin.as_raw_fd(),
        child_fd(&pipe_out, &stdout),
        child_fd(&pipe_err, &stderr),
    ];
    let request = spawn::Request {
        argv: &spec.argv,
        env: &env,
        cwd: &spec.cwd,
        stdio,
        join: &fds,
    };
    let sigchld = spawn::Child::listener()
        .map_err(spawn_err)
        .map_err(cleanup_err)?;

    opened(cancel, gate).await.map_err(cleanup_err)?;

    let setup_time = t_begin.elapsed();
    let started_at = Utc::now();
    let t0 = Instant::now();
    let spawned = reaper::spawn_registered(|| spawn::spawn(&request));
    drop(procs);
    drop(stdin);
    let pid = spawned.map_err(spawn_err).map_err(cleanup_err)?;
    let child = spawn::Child::new(pid, sigchld);
    let tree = match group {
        Some(g) => Tree::Cgroup(g),
        None => Tree::Group(pid),
    };

    let tee_tasks = start_copies([(pipe_out, stdout), (pipe_err, stderr)], spec.tee, &mask);
    Ok(Started {
        enforcement,
        child,
        tree,
        tee_tasks,
        t_begin,
        setup_time,
        started_at,
        t0,
    })
}

/// The quick end: the main process exited, so measure and remove the cgroups; the
/// kernel's refusal (Err, with what was measured first) means something lives on.
/// And whether the tree was seen empty: then nothing of the attempt can come back
/// (no process is left to fork), and the cgroups need no second look.
fn quick_end(tree: &mut Tree, main_exited: bool) -> (Option<Result<Measures, Measures>>, bool) {
    let quick = match tree {
        Tree::Cgroup(g) if main_exited => Some(g.try_finish()),
        _ => None,
    };
    let emptied = match &quick {
        Some(r) => r.is_ok(),
        None => main_exited && tree.is_empty(),
    };
    (quick, emptied)
}

/// The main process's status after the kill, waited for at most [`KILL_BOUND`].
async fn reap_main(child: &mut spawn::Child, leftovers: &mut Vec<String>) -> Option<ExitStatus> {
    let pid = child.pid();
    match tokio::time::timeout(KILL_BOUND, child.wait()).await {
        Ok(Ok(st)) => Some(st),
        Ok(Err(e)) => {
            leftovers.push(format!("waiting for main pid {pid}: {e}"));
            None
        }
        Err(_) => {
            leftovers.push(format!("main pid {pid} did not exit after the kill"));
            None
        }
    }
}

/// The attempt's cgroups (when the isolator has them) and what they enforce, with
/// the isolator's own warnings.
fn attempt_cgroups(
    iso: &Isolator,
    spec: &AttemptSpec,
) -> Result<(Option<AttemptCgroups>, Enforcement), IsolateError> {
    let (group, mut enforcement) = match &iso.cgroups {
        Some(b) => {
            let (g, e) = AttemptCgroups::create(b, iso.fs.clone(), spec)?;
            (Some(g), e)
        }
        None => (None, none_enforcement(spec)),
    };
    enforcement.notes.extend(iso.warnings.iter().cloned());
    Ok((group, enforcement))
}

/// Wait for the start gate; a cancel first means nothing starts.
async fn opened(
    cancel: &mut watch::Receiver<Option<CancelReason>>,
    gate: impl std::future::Future<Output = Result<(), String>>,
) -> Result<(), IsolateError> {
    tokio::select! {
        biased;
        reason = cancelled(cancel) => Err(IsolateError::CancelledBeforeStart(reason)),
        opened = gate => opened.map_err(IsolateError::GateRefused),
    }
}

/// Copy piped output to its file (and the terminal with tee, masking secrets).
/// Our copy of each write end closes here, so the reader sees EOF when the
/// attempt's last writer is gone.
fn start_copies(
    pipes: [(Option<(tokio::net::unix::pipe::Receiver, OwnedFd)>, File); 2],
    tee: bool,
    mask: &Option<std::sync::Arc<crate::mask::Masker>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    for (to_stderr, (pipe, file)) in [false, true].into_iter().zip(pipes) {
        if let Some((rx, _w)) = pipe {
            let f = tokio::fs::File::from_std(file);
            let tee = tee.then_some(to_stderr);
            tasks.push(tokio::spawn(copy_out(rx, f, tee, mask.clone())));
        }
    }
    tasks
}

/// What ended the attempt's first phase: the main process's exit (or why it
/// cannot be waited for), its timeout, or a cancel.
struct First {
    status: Option<ExitStatus>,
    cancel_reason: Option<CancelReason>,
    timed_out: bool,
    wait_error: Option<String>,
}

async fn first_end(
    child: &mut spawn::Child,
    timeout: Option<Duration>,
    cancel: &mut watch::Receiver<Option<CancelReason>>,
) -> First {
    let mut first = First {
        status: None,
        cancel_reason: None,
        timed_out: false,
        wait_error: None,
    };
    let timeout = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    let pid = child.pid();
    tokio::select! {
        st = child.wait() => match st {
            Ok(st) => first.status = Some(st),
            // Never return early: the tree is still ended and cleaned below.
            Err(e) => first.wait_error = Some(format!("waiting for main pid {pid}: {e}")),
        },
        _ = timeout => first.timed_out = true,
        r = cancelled(cancel) => first.cancel_reason = Some(r),
    }
    first
}

/// The attempt's standard streams and the cgroup files it joins at exec. With tee
/// or masking, the child writes into pipes that we copy to the files (and the
/// terminal); otherwise straight into the files.
struct Io {
    stdout: File,
    stderr: File,
    procs: Vec<File>,
    stdin: File,
    pipe_out: Option<(tokio::net::unix::pipe::Receiver, OwnedFd)>,
    pipe_err: Option<(tokio::net::unix::pipe::Receiver, OwnedFd)>,
}

impl Io {
    fn open(
        spec: &AttemptSpec,
        group: Option<&AttemptCgroups>,
        spawn_err: &dyn Fn(std::io::Error) -> IsolateError,
    ) -> Result<Io, IsolateError> {
        let stdout = open_output(&spec.stdout)?;
        let stderr = open_output(&spec.stderr)?;
        let procs = match group {
            Some(g) => g.open_join()?,
            None => Vec::new(),
        };
        let stdin = File::open("/dev/null").map_err(spawn_err)?;
        let tee_pipe = || -> std::io::Result<(tokio::net::unix::pipe::Receiver, OwnedFd)> {
            let (r, w) = pipe()?;
            Ok((tokio::net::unix::pipe::Receiver::from_owned_fd(r)?, w))
        };
        let piped = spec.tee || spec.mask.as_ref().is_some_and(|m| !m.is_empty());
        let (pipe_out, pipe_err) = if piped {
            (
                Some(tee_pipe().map_err(spawn_err)?),
                Some(tee_pipe().map_err(spawn_err)?),
            )
        } else {
            (None, None)
        };
        Ok(Io {
            stdout,
            stderr,
            procs,
            stdin,
            pipe_out,
            pipe_err,
        })
    }
}

/// How the attempt ended: a cancel first, then its timeout, an OOM kill its
/// cgroup counted, a signal, else its exit.
fn termination(
    cancel: Option<CancelReason>,
    timed_out: bool,
    measures: &Measures,
    signal: Option<i32>,
) -> Termination {
    if cancel.is_some() {
        Termination::Cancelled
    } else if timed_out {
        Termination::TimedOut
    } else if measures.oom_kills.is_some_and(|n| n > 0) {
        Termination::OomKilled
    } else if signal.is_some() {
        Termination::Signaled
    } else {
        Termination::Exited
    }
}

/// End what is left of the tree: SIGTERM and the grace (unless a second Ctrl-C
/// or a zero grace says kill now), then the kill. The pids seen in it go to
/// `seen`; whether it proved empty.
async fn end_tree(
    tree: &mut Tree,
    child: &mut spawn::Child,
    cancel: &mut watch::Receiver<Option<CancelReason>>,
    grace_for: Duration,
    e: &mut Ending<'_>,
    seen: &mut Vec<i32>,
) -> bool {
    seen.extend(tree.pids());
    let kill_now = *e.cancel_reason == Some(CancelReason::Kill) || grace_for.is_zero();
    if !kill_now {
        tree.term();
        grace(tree, child, cancel, grace_for, e).await;
    }
    seen.extend(tree.pids());
    tree.kill(child, e.status).await
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
