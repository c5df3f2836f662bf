//! The side of a Slurm attempt that runs inside the job: `orchestrate slurm-exec
//! SPEC` (started by the job script under `srun`). It runs the command with exactly
//! the attempt's environment (plus what Slurm tells the job: `SLURM_*`, the GPUs it
//! was given), then writes the attempt's own end record (exit, signal, times, peak
//! memory and OOM kills read from the job's cgroup) atomically beside its logs. It
//! hashes nothing: the orchestrator does, as for local attempts.
//!
//! Both records are sealed: an HMAC under a per-attempt key that only the spec file
//! holds, and `slurm-exec` removes the spec file before the command starts, so the
//! command's environment never holds the key. A record the command wrote itself
//! has no valid seal and is taken for what it is: a forgery. (A command that reads
//! this process's memory could still learn the key; what holds against that is the
//! orchestrator's check of every end against Slurm's own accounting.)

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What the job runs, written by the orchestrator before it submits (in the work
/// folder, mode 0600: it holds the environment, secrets included).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobSpec {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    /// `ORCHESTRATE_ATTEMPT` (the canary).
    pub canary: String,
    /// Where the end record goes.
    pub end: PathBuf,
    /// Where the start record goes (the orchestrator's clock for the attempt's
    /// timeout starts when it appears).
    #[serde(default)]
    pub start: Option<PathBuf>,
    /// The attempt's logs, which the command writes straight into (appending, as
    /// Slurm's own messages do) so that everything it wrote is in them before its
    /// end record appears: through `srun` its last words could still be on the way.
    #[serde(default)]
    pub stdout: Option<PathBuf>,
    #[serde(default)]
    pub stderr: Option<PathBuf>,
    /// The key the job's records are sealed with (hex; never in the command's
    /// environment).
    #[serde(default)]
    pub seal: Option<String>,
    /// A multi-node step's: the command runs as one task on each of the job's
    /// nodes, started by `srun` from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fan_out: Option<FanOut>,
}

/// How a multi-node step's command is fanned out over its job's nodes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FanOut {
    pub nodes: u32,
    /// The `srun` that starts the tasks.
    pub srun: PathBuf,
}

impl FanOut {
    /// The command line that runs `argv` once on each node: a failed task ends
    /// them all, as one process would have failed; every task gets the attempt's
    /// environment (the job's own `SLURM_EXPORT_ENV=NONE` would strip it).
    pub fn argv(&self, argv: &[String]) -> Vec<String> {
        let n = self.nodes;
        let mut a = vec![
            self.srun.to_string_lossy().into_owned(),
            format!("--nodes={n}"),
            format!("--ntasks={n}"),
            "--ntasks-per-node=1".to_string(),
            "--kill-on-bad-exit=1".to_string(),
            "--export=ALL".to_string(),
            "--".to_string(),
        ];
        a.extend(argv.iter().cloned());
        a
    }
}

/// What a job writes when its command starts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct JobStart {
    /// RFC 3339.
    pub started_at: String,
    pub node: Option<String>,
    pub gpus: Option<String>,
    /// HMAC of the record (without this field) under the spec's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<String>,
}

/// The end record a job writes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct JobEnd {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// RFC 3339.
    pub started_at: String,
    pub ended_at: String,
    pub wall_ms: f64,
    pub peak_memory_bytes: Option<u64>,
    pub oom_kills: Option<u64>,
    pub node: Option<String>,
    pub gpus: Option<String>,
    pub cuda_visible_devices: Option<String>,
    /// Why the command could not be started, if it could not.
    pub error: Option<String>,
    /// Signals the job was sent (by Slurm: a cancel, a time limit, a preemption)
    /// and passed on to the command. An end after one is never taken as clean
    /// before Slurm has said why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<i32>,
    /// HMAC of the record (without this field) under the spec's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<String>,
}

/// A record that carries a seal.
pub trait Sealed: Serialize + Clone {
    fn seal_mut(&mut self) -> &mut Option<String>;

    /// The seal of this record under `key` (hex): the HMAC of its JSON without one.
    fn seal_with(&self, key: &str) -> String {
        let mut bare = self.clone();
        *bare.seal_mut() = None;
        let bytes = serde_json::to_vec(&bare).unwrap_or_default();
        crate::digest::hmac_sha256(key.as_bytes(), &bytes).hex()
    }

    /// Whether it carries the seal `key` makes.
    fn sealed_by(&self, key: &str) -> bool {
        let mut me = self.clone();
        let seal = me.seal_mut().take();
        seal.is_some_and(|s| s == me.seal_with(key))
    }
}

impl Sealed for JobEnd {
    fn seal_mut(&mut self) -> &mut Option<String> {
        &mut self.seal
    }
}

impl Sealed for JobStart {
    fn seal_mut(&mut self) -> &mut Option<String> {
        &mut self.seal
    }
}

impl JobEnd {
    /// The command ran and exited 0 on its own: no signal sent or taken, no OOM
    /// kill in the job's cgroup.
    pub fn clean(&self) -> bool {
        self.exit_code == Some(0)
            && self.signal.is_none()
            && self.error.is_none()
            && self.signals.is_empty()
            && self.oom_kills.unwrap_or(0) == 0
    }
}

/// Variables the scheduler gives a job that its command must see.
fn passed_through(k: &str) -> bool {
    k.starts_with("SLURM_")
        || matches!(
            k,
            "CUDA_VISIBLE_DEVICES"
                | "GPU_DEVICE_ORDINAL"
                | "ROCR_VISIBLE_DEVICES"
                | "SLURMD_NODENAME"
        )
}

/// The memory cgroup this process is in: (version, folder).
fn memory_cgroup() -> Option<(u8, PathBuf)> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut v2 = None;
    for line in text.lines() {
        let mut it = line.splitn(3, ':');
        let (_, ctrls, path) = (it.next()?, it.next()?, it.next()?);
        let rel = path.trim_start_matches('/');
        if ctrls.split(',').any(|c| c == "memory") {
            return Some((1, Path::new("/sys/fs/cgroup/memory").join(rel)));
        }
        if ctrls.is_empty() {
            v2 = Some((2, Path::new("/sys/fs/cgroup").join(rel)));
        }
    }
    v2
}

fn read_u64(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

fn oom_kill_count(p: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(p).ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix("oom_kill ")
            .and_then(|n| n.trim().parse().ok())
    })
}

/// The job's own cgroup on this node (`…/job_12`), above the step's this process
/// is in: a fanned-out command runs in a step of its own.
fn job_cgroup((v, mut d): (u8, PathBuf)) -> Option<(u8, PathBuf)> {
    for _ in 0..4 {
        if d.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("job_"))
        {
            return Some((v, d));
        }
        d = d.parent()?.to_path_buf();
    }
    None
}

/// Peak memory and OOM kills of the job step's cgroup, or of the job's on this
/// node when `job_wide`.
fn measure(job_wide: bool) -> (Option<u64>, Option<u64>) {
    let cg = memory_cgroup();
    let cg = if job_wide {
        cg.and_then(job_cgroup)
    } else {
        cg
    };
    match cg {
        Some((1, d)) => (
            read_u64(&d.join("memory.max_usage_in_bytes")),
            oom_kill_count(&d.join("memory.oom_control")),
        ),
        Some((_, d)) => (
            read_u64(&d.join("memory.peak")),
            oom_kill_count(&d.join("memory.events")),
        ),
        None => (None, None),
    }
}

/// Write `rec` to `path` atomically: an exclusive temporary file of an unguessable
/// name in the same folder (never through a link planted there), renamed over it.
fn write_json<T: Serialize>(path: &Path, rec: &T) -> io::Result<()> {
    let bytes = serde_json::to_vec_pretty(rec).map_err(io::Error::other)?;
    let (dir, name) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(d), Some(n)) => (d, n),
        _ => return Err(io::Error::other("not a file path")),
    };
    let d = crate::fsx::Dir::open(dir)?;
    d.write_atomic(&d, name, &bytes, 0o644)
}

/// `rec` sealed with `key`, when there is one.
fn sealed<T: Sealed>(mut rec: T, key: Option<&str>) -> T {
    if let Some(k) = key {
        let s = rec.seal_with(k);
        *rec.seal_mut() = Some(s);
    }
    rec
}

/// Run the job's command; the process exit code (the command's, or 128 + signal).
pub fn exec_main(spec_path: &Path) -> i32 {
    let Some(spec) = take_spec(spec_path) else {
        return 125;
    };
    let key = spec.seal.clone();
    let key = key.as_deref();
    let var = |k: &str| std::env::var(k).ok();
    let started = chrono::Utc::now();
    let t0 = std::time::Instant::now();
    // A multi-node command ran on every node of the job: its record names them all.
    let node = match spec.fan_out {
        Some(_) => var("SLURM_JOB_NODELIST").or_else(|| var("SLURMD_NODENAME")),
        None => var("SLURMD_NODENAME"),
    };
    let mut rec = JobEnd {
        node,
        gpus: var("SLURM_JOB_GPUS").or_else(|| var("SLURM_STEP_GPUS")),
        cuda_visible_devices: var("CUDA_VISIBLE_DEVICES"),
        started_at: crate::time::rfc3339(&started),
        ..JobEnd::default()
    };
    let argv = match &spec.fan_out {
        Some(f) => f.argv(&spec.argv),
        None => spec.argv.clone(),
    };
    let Some((program, args)) = argv.split_first().filter(|_| !spec.argv.is_empty()) else {
        rec.error = Some("the attempt has no command".into());
        rec.ended_at = rec.started_at.clone();
        let _ = write_json(&spec.end, &sealed(rec, key));
        return 125;
    };
    let forwarded = block_forwarded();
    let (mut cmd, logs) = command(&spec, program, args, forwarded);
    let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let status = cmd.spawn().and_then(|mut child| {
        if let Some(start) = &spec.start {
            let s = JobStart {
                started_at: rec.started_at.clone(),
                node: rec.node.clone(),
                gpus: rec.gpus.clone(),
                seal: None,
            };
            if let Err(e) = write_json(start, &sealed(s, key)) {
                eprintln!(
                    "orchestrate slurm-exec: cannot write {}: {e}",
                    start.display()
                );
            }
        }
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let sent = std::sync::Arc::clone(&sent);
        std::thread::spawn(move || loop {
            match forwarded.wait() {
                Ok(sig) => {
                    if let Ok(mut v) = sent.lock() {
                        v.push(sig as i32);
                    }
                    let _ = nix::sys::signal::kill(pid, sig);
                }
                Err(_) => return,
            }
        });
        crate::sys::retry(|| child.wait())
    });
    let code = match status {
        Ok(st) => {
            use std::os::unix::process::ExitStatusExt;
            rec.exit_code = st.code();
            rec.signal = st.signal();
            st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
        }
        Err(e) => {
            rec.error = Some(format!("cannot start `{program}`: {e}"));
            127
        }
    };
    rec.wall_ms = crate::time::round_us(t0.elapsed().as_secs_f64() * 1000.0);
    // On a shared filesystem the logs are whole on the orchestrator's host once
    // they are synced, before the end record says the command ended.
    for f in logs.iter().flatten() {
        let _ = f.sync_all();
    }
    rec.ended_at = crate::time::rfc3339(&chrono::Utc::now());
    let (peak, ooms) = measure(spec.fan_out.is_some());
    rec.peak_memory_bytes = peak;
    rec.oom_kills = ooms;
    rec.signals = sent.lock().map(|v| v.clone()).unwrap_or_default();
    if let Err(e) = write_json(&spec.end, &sealed(rec, key)) {
        eprintln!(
            "orchestrate slurm-exec: cannot write {}: {e}",
            spec.end.display()
        );
    }
    linger_if_asked(&spec);
    code
}

/// The job's spec, read and removed: it holds the environment (secrets) and the
/// seal key, gone before the command starts, so the command can read neither.
fn take_spec(spec_path: &Path) -> Option<JobSpec> {
    let spec: JobSpec =
        match crate::digest::read_regular(spec_path, crate::digest::Follow::No, 64 << 20)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!(
                    "orchestrate slurm-exec: cannot read {}: {e}",
                    spec_path.display()
                );
                return None;
            }
        };
    if let Err(e) = std::fs::remove_file(spec_path) {
        eprintln!(
            "orchestrate slurm-exec: cannot remove {}: {e}",
            spec_path.display()
        );
    }
    Some(spec)
}

/// Slurm ends a job with SIGTERM (then SIGKILL after KillWait): those signals are
/// blocked here and passed on to the command, so the end record is still written.
fn block_forwarded() -> nix::sys::signal::SigSet {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal};
    let mut forwarded = SigSet::empty();
    for s in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
    ] {
        forwarded.add(s);
    }
    let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&forwarded), None);
    forwarded
}

/// The attempt's command as the job runs it: the attempt's environment (not the
/// job's, but for Slurm's own variables), its canary, its folder, the signals it
/// would have had, and its logs appended to.
fn command(
    spec: &JobSpec,
    program: &str,
    args: &[String],
    forwarded: nix::sys::signal::SigSet,
) -> (std::process::Command, [Option<std::fs::File>; 2]) {
    use nix::sys::signal::SigmaskHow;
    let mut cmd = std::process::Command::new(program);
    {
        use std::os::unix::process::CommandExt;
        let unblock = forwarded;
        // SAFETY: sigprocmask is async-signal-safe; the child starts with the
        // signals it would have had.
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::signal::sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&unblock), None)
                    .map_err(std::io::Error::from)
            });
        }
    }
    cmd.args(args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .envs(std::env::vars().filter(|(k, _)| passed_through(k)))
        .env("ORCHESTRATE_ATTEMPT", &spec.canary)
        .stdin(std::process::Stdio::null());
    let append = |p: &Option<PathBuf>| {
        p.as_ref().and_then(|p| {
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(p)
                .map_err(|e| eprintln!("orchestrate slurm-exec: cannot open {}: {e}", p.display()))
                .ok()
        })
    };
    let logs = [append(&spec.stdout), append(&spec.stderr)];
    if let [Some(out), Some(err)] = &logs {
        if let (Ok(o), Ok(e)) = (out.try_clone(), err.try_clone()) {
            cmd.stdout(o).stderr(e);
        }
    }
    (cmd, logs)
}

/// A fault the tests inject: a job that goes on after its end record said its
/// command ended (as a hung epilog would), so the orchestrator's check of Slurm's
/// word against that record is shown on a real cluster.
fn linger_if_asked(spec: &JobSpec) {
    if let Some(secs) = spec
        .env
        .iter()
        .find(|(k, _)| k == "ORCHESTRATE_TEST_EXEC_LINGER")
        .and_then(|(_, v)| v.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_secs(secs.min(600)));
    }
}
