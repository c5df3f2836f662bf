//! Why an attempt ended, and why it was cancelled.

use serde::{Deserialize, Serialize};

/// Why an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// The main process exited (see `exit_code`).
    Exited,
    /// The main process was killed by a signal (see `signal`).
    Signaled,
    /// The kernel's OOM killer ended it at its memory limit.
    OomKilled,
    /// It ran past its timeout.
    TimedOut,
    /// A cancel ended it (see `cancel_reason`).
    Cancelled,
    /// It never started (see `error`).
    NotStarted,
    /// It was running when the orchestrator died; written by `recover`.
    OrchestratorLost,
    /// The machine its job ran on failed (Slurm `NODE_FAIL`, `BOOT_FAIL`).
    NodeFailed,
    /// Its job was preempted (Slurm `PREEMPTED`).
    Preempted,
    /// Its job vanished from the scheduler: the outcome is unknown, never success.
    Lost,
    /// Its job's own end record was not the job's (no valid seal), Slurm's word
    /// contradicted it, or it waited past its `queue_timeout` (`job.evidence`).
    Forged,
}

impl Termination {
    pub fn as_str(&self) -> &'static str {
        match self {
            Termination::Exited => "exited",
            Termination::Signaled => "signaled",
            Termination::OomKilled => "oom_killed",
            Termination::TimedOut => "timed_out",
            Termination::Cancelled => "cancelled",
            Termination::NotStarted => "not_started",
            Termination::OrchestratorLost => "orchestrator_lost",
            Termination::NodeFailed => "node_failed",
            Termination::Preempted => "preempted",
            Termination::Lost => "lost",
            Termination::Forged => "forged",
        }
    }
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
