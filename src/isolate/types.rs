//! The isolate API: what one attempt is asked to do and what came of it.
//! This module knows nothing about plans.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// How attempts are isolated (mirrors the plan's `limits.isolation`, but owned here so
/// isolate does not depend on plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Cgroups when usable, else none (with a warning).
    Auto,
    /// Cgroups, or the run is refused.
    Cgroup,
    /// No cgroups: nothing is enforced or measured.
    None,
}

/// One attempt to run.
#[derive(Debug, Clone)]
pub struct AttemptSpec {
    /// Unique name, used for the cgroup: `orchestrate-<run>-<step>-<attempt>`.
    pub name: String,
    /// Value of `ORCHESTRATE_ATTEMPT` in the attempt's environment.
    pub canary: String,
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The complete environment of the attempt (nothing is inherited implicitly);
    /// `ORCHESTRATE_ATTEMPT` is added by isolate.
    pub env: Vec<(String, String)>,
    pub memory: Option<u64>,
    /// Allow swap beyond `memory` (default false: swap off).
    pub swap: bool,
    pub pids: Option<u64>,
    /// cpuset list, e.g. "0-3".
    pub cpus: Option<String>,
    /// Device nodes the attempt may open (cgroup v1 devices controller); `None` means
    /// no device restriction.
    pub device_nodes: Option<Vec<PathBuf>>,
    pub timeout: Option<Duration>,
    /// Between SIGTERM and the cgroup kill.
    pub grace: Duration,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// Also copy output to the orchestrator's terminal.
    pub tee: bool,
    /// Secret values to mask in the logs as they are written (then output goes
    /// through pipes, as with `tee`).
    pub mask: Option<std::sync::Arc<crate::mask::Masker>>,
}

/// Why an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    Exited,
    Signaled,
    OomKilled,
    TimedOut,
    Cancelled,
    /// The machine it ran on failed (Slurm `NODE_FAIL`, `BOOT_FAIL`).
    NodeFailed,
    /// Taken off its machine for other work (Slurm `PREEMPTED`).
    Preempted,
    /// Its job vanished: the scheduler no longer knows it (never a success).
    Lost,
}

/// Why an attempt was cancelled, ordered: a stronger reason replaces a weaker one.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CancelReason {
    /// Another step failed (fail-fast).
    FailFast,
    /// The whole run hit its timeout.
    RunTimeout,
    /// Ctrl-C / SIGTERM: graceful.
    Interrupt,
    /// Second Ctrl-C: kill now, no grace.
    Kill,
}

/// What the system actually enforced for an attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Enforcement {
    /// "cgroup" or "none".
    pub mode: String,
    /// 1 or 2 when cgroups were used.
    pub cgroup_version: Option<u8>,
    /// Whether the memory limit was set on the attempt's cgroup.
    pub memory: bool,
    /// Whether swap beyond the memory limit was turned off.
    pub swap_off: bool,
    /// Whether the pids limit was set on the attempt's cgroup.
    pub pids: bool,
    /// Whether the attempt was confined to the asked cpuset (`limits.cpus`).
    pub cpus: bool,
    /// Whether device access was restricted to the granted device nodes.
    pub devices: bool,
    /// Human-readable reasons for anything asked for but not enforced.
    pub notes: Vec<String>,
}

/// The measured result of an attempt. Figures the system did not measure are `None`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttemptOutcome {
    pub termination: Termination,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub wall: Duration,
    pub cpu_user: Option<Duration>,
    pub cpu_system: Option<Duration>,
    pub peak_memory_bytes: Option<u64>,
    pub oom_kills: Option<u64>,
    pub pids_limit_hit: Option<bool>,
    /// Time from the kill decision until the attempt was empty.
    pub kill_duration: Option<Duration>,
    pub cancel_reason: Option<CancelReason>,
    pub enforcement: Enforcement,
    /// Anything the attempt left that could not be cleaned (should be empty).
    pub leftovers: Vec<String>,
    /// The batch job it ran as (a Slurm attempt), else `None`.
    pub job: Option<JobFacts>,
}

/// What a batch scheduler says of the job an attempt ran as.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobFacts {
    /// The backend: "slurm".
    pub backend: String,
    /// The job id `sbatch --parsable` answered.
    pub job_id: String,
    /// The scheduler's final state (`COMPLETED`, `OUT_OF_MEMORY`, `TIMEOUT`, ...),
    /// which decides the outcome before the exit code does; `unconfirmed` while an
    /// attempt that ended on its own clean end record waits for the scheduler's
    /// word (read with other jobs' in a later round, at the latest at the run's end).
    pub state: String,
    /// The scheduler's exit code as it writes it (`0:125`: code, then signal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<String>,
    /// The largest exit code of the job's steps (`sacct DerivedExitCode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived_exit_code: Option<String>,
    /// The job's run time as the scheduler counted it (`sacct Elapsed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed: Option<String>,
    /// Where it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The GPUs the job was given (`SLURM_JOB_GPUS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<String>,
    /// `CUDA_VISIBLE_DEVICES` inside the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_visible_devices: Option<String>,
    /// `--gres` it asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gres: Option<String>,
    /// The job script, relative to the record folder.
    pub script: String,
    /// When Slurm had it: `sbatch` answered with its id (RFC 3339).
    pub submitted_at: String,
    /// How long it queued before it started (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<f64>,
    /// Where the outcome came from: "end record" (the job's own, written in the
    /// job), "scheduler" (its state only), or both.
    pub source: String,
    /// How the scheduler's end state was read: "sacct" (accounting), "squeue" or
    /// "scontrol" (the controller, without accounting); empty while unconfirmed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub queried: String,
    /// The job's largest resident set as Slurm's accounting measured it (`sacct
    /// MaxRSS`, sampled), beside the cgroup peak in `peak_memory_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rss_bytes: Option<u64>,
}

impl AttemptOutcome {
    pub fn succeeded(&self) -> bool {
        self.termination == Termination::Exited && self.exit_code == Some(0)
    }
}

/// Why isolation could not be set up or an attempt could not be started.
#[derive(Debug, thiserror::Error)]
pub enum IsolateError {
    /// cgroups were required but no usable place exists; the text says exactly why
    /// (not root, no delegation, controller missing, not writable, not mounted).
    #[error("cgroup isolation impossible: {0}")]
    Unavailable(String),
    /// A cgroup file operation failed.
    #[error("cgroup operation failed on {path}: {source}")]
    Cgroup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The attempt's cgroup already exists (names must be unique per attempt).
    #[error("cgroup {0} already exists")]
    Exists(PathBuf),
    /// The attempt spec cannot be run as given.
    #[error("invalid attempt: {0}")]
    InvalidSpec(String),
    /// Opening the attempt's output files failed.
    #[error("cannot open output file {path}: {source}")]
    Output {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The caller's start gate refused; nothing was started.
    #[error("not started: {0}")]
    GateRefused(String),
    /// Cancelled while waiting at the start gate; nothing was started.
    #[error("cancelled before its start ({0:?})")]
    CancelledBeforeStart(CancelReason),
    /// Spawning the attempt's main process failed.
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// A system call needed by the isolation machinery failed.
    #[error("{what}: {source}")]
    Os {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// What isolation this orchestrator uses, for the evidence record and audits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IsolationInfo {
    /// The mode asked for.
    pub requested: Mode,
    /// "cgroup" or "none": what is actually used.
    pub mode: String,
    /// 1 or 2 when cgroups are used.
    pub cgroup_version: Option<u8>,
    /// Controllers the attempts' cgroups use.
    pub controllers: Vec<String>,
    /// Directories below which attempt cgroups are created (one per hierarchy).
    pub parents: Vec<PathBuf>,
    /// Anything worth knowing: fallbacks, missing swap accounting, moves done at setup.
    pub notes: Vec<String>,
}
