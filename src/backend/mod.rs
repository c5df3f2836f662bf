//! Where an attempt runs: the seam between the scheduler and what starts, watches
//! and ends the attempt's processes.
//!
//! ```text
//! sched::executor ── AttemptSpec, cancel, start gate ──> Backend::run
//!                 <── AttemptOutcome | AttemptError ───  local (isolate: cgroups)
//!                                                        slurm (sbatch, squeue)
//! ```
//!
//! Every backend returns the same [`AttemptOutcome`]: exit or signal, termination
//! reason, wall and CPU time, peak memory, OOM kills, leftovers and what was
//! enforced; the record is built from it alone.

mod local;
pub mod slurm;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::watch;

pub use crate::contract::{AttemptOutcome, AttemptSpec, CancelReason};
pub use local::Local;
pub use slurm::Slurm;

/// Who an attempt is, for a backend that names and files its jobs.
#[derive(Clone, Default)]
pub struct AttemptJob {
    pub run_id: String,
    pub step: String,
    pub attempt: u32,
    /// The attempt's folder in the record (job script, end record).
    pub logs: PathBuf,
    pub record_dir: PathBuf,
    /// A private file for what the job runs (its environment holds secrets): in
    /// the work folder, never the record.
    pub private: PathBuf,
    /// Run it on Slurm, asking for this; `None`: on this host.
    pub slurm: Option<SlurmRequest>,
    /// Told the job id as soon as the job exists (the journal), before anything
    /// waits on it.
    pub on_submit: Option<OnSubmit>,
    /// Told what a person watching should know while the job lives (why it is
    /// pending, a controller that does not answer): the progress line and journal.
    pub on_note: Option<OnNote>,
}

/// What a backend calls the moment a job exists.
pub type OnSubmit = Arc<dyn Fn(&Submitted) + Send + Sync>;
/// What a backend calls to say something of a job while it lives.
pub type OnNote = Arc<dyn Fn(&str) + Send + Sync>;

/// A job just submitted.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub job_id: String,
    /// Its script, relative to the record folder.
    pub script: String,
    pub gres: Option<String>,
}

/// What a Slurm job asks for.
#[derive(Debug, Clone, Default)]
pub struct SlurmRequest {
    pub options: crate::plan::model::SlurmOptions,
    pub sbatch_args: Vec<String>,
    /// `--gres`, made from the step's devices (or as the step wrote it).
    pub gres: Option<String>,
}

/// Sends each attempt to the backend it asks for: Slurm when its job says so,
/// else this host.
pub struct Router {
    pub local: Local,
    pub slurm: Option<Arc<Slurm>>,
}

impl Backend for Router {
    fn name(&self) -> &'static str {
        "router"
    }

    fn run(
        &self,
        spec: AttemptSpec,
        job: AttemptJob,
        cancel: watch::Receiver<Option<CancelReason>>,
        gate: Gate,
    ) -> BoxFuture<'_, Result<AttemptOutcome, AttemptError>> {
        match (&job.slurm, &self.slurm) {
            (Some(_), Some(s)) => s.run(spec, job, cancel, gate),
            (Some(_), None) => Box::pin(async {
                Err(AttemptError::NotStarted(
                    "the step runs on Slurm but this run has no Slurm backend".into(),
                ))
            }),
            (None, _) => self.local.run(spec, job, cancel, gate),
        }
    }
}

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
        job: AttemptJob,
        cancel: watch::Receiver<Option<CancelReason>>,
        gate: Gate,
    ) -> BoxFuture<'_, Result<AttemptOutcome, AttemptError>>;
}
