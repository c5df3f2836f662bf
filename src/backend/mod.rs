//! Where an attempt runs: the seam between the scheduler and what starts, watches
//! and ends the attempt's processes.
//!
//! ```text
//! sched::executor ── AttemptSpec, cancel, start gate ──> Backend::run
//!                 <── AttemptOutcome | AttemptError ───  local (isolate: cgroups)
//!                                                        (slurm: sbatch/sacct, to come)
//! ```
//!
//! Every backend returns the same [`AttemptOutcome`]: exit or signal, termination
//! reason, wall and CPU time, peak memory, OOM kills, leftovers and what was
//! enforced; the record is built from it alone.

mod local;

use std::future::Future;
use std::pin::Pin;

use tokio::sync::watch;

pub use crate::isolate::{AttemptOutcome, AttemptSpec, CancelReason};
pub use local::Local;

/// A boxed future a backend returns (backends are used as trait objects).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Resolves when the attempt may start its process (Ok) or must not (Err, why).
pub type Gate = BoxFuture<'static, Result<(), String>>;

/// Why an attempt did not run to an outcome.
#[derive(Debug, thiserror::Error)]
pub enum AttemptError {
    /// Cancelled while waiting at the start gate: nothing was started.
    #[error("cancelled before its start ({0:?})")]
    CancelledBeforeStart(CancelReason),
    /// It could not be started (the text says why).
    #[error("{0}")]
    NotStarted(String),
}

/// Runs attempts.
pub trait Backend: Send + Sync {
    /// `local`, `slurm`, ...
    fn name(&self) -> &'static str;

    /// Run one attempt to its end: start it once `gate` opens, end it (and all it
    /// started) on `cancel`, and measure it. Never returns while a process of the
    /// attempt lives, unless it survived a bounded kill (then its leftovers say so).
    fn run(
        &self,
        spec: AttemptSpec,
        cancel: watch::Receiver<Option<CancelReason>>,
        gate: Gate,
    ) -> BoxFuture<'_, Result<AttemptOutcome, AttemptError>>;
}
