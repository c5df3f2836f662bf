//! Why an attempt ended, and why it was cancelled.

use serde::{Deserialize, Serialize};

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
    /// The job's own record of its end was not the job's (no valid seal: its
    /// command wrote it), Slurm contradicted it, or the job sat in the queue past
    /// its `queue_timeout`: `job.evidence` says which (never a success).
    Forged,
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

/// Wait until a cancel reason is set (at once when one already is); a sender that
/// is gone can cancel nothing any more, so this then never returns.
pub async fn cancelled(
    rx: &mut tokio::sync::watch::Receiver<Option<CancelReason>>,
) -> CancelReason {
    loop {
        if let Some(r) = *rx.borrow_and_update() {
            return r;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
