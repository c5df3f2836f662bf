//! The DAG scheduler: runs a validated plan's steps as attempts through a backend.
//!
//! ```text
//!             signals, run timeout
//!                    |
//!   +----------------v-----------------+   StepMsg (typed, mpsc)   +------------------+
//!   | dispatcher.rs: the select! loop  |<--------------------------| executor.rs (a   |
//!   |  dag.rs: readiness, memory,      |                           |  task per step): |
//!   |    device turns, skips           |--- cancel (watch) ------->|  devices, then   |
//!   |  stopper.rs: why and how hard    |                           |  attempt.rs per  |
//!   |  the journal, the progress view  |                           |  attempt         |
//!   +----------------------------------+                           +--------+---------+
//!                                      prepare -> run (backend::Backend) -> | hash
//!                                      (collect.rs) -> record -> StepEnd    v
//! ```
//!
//! A step is *ready* when every step it needs has succeeded; it *starts* when a job
//! slot (`--jobs`) is free, its memory limit fits the budget beside the running steps'
//! limits, and no running step of the run holds a device request it names
//! ([`dag::Dag`]). Its executor then leases its devices (all or none, through the
//! [`DeviceBroker`]), runs `warmup` then `repeats` attempts one after another (each
//! with its own `${out}`), hashes what they left, and reports every event to the
//! dispatcher, which is the journal's only writer. No shared mutable state: the
//! dispatcher hands each executor a snapshot of the upstream outputs it may read.
//!
//! Per-step latency (a chain of short steps waits for each of these): a syncer task
//! fdatasyncs the journal, and a step started because another ended sets up its first
//! attempt meanwhile and starts its process only once that end is durable
//! (`durable.rs`, the backend's start gate); a thread makes the folders of steps that
//! may come next ahead of time (`prefetch.rs`).
//!
//! Failure: fail-fast by default (start nothing new; running steps get a `FailFast`
//! cancel, i.e. SIGTERM, grace, kill); `keep_going` lets everything that does not
//! depend on the failure run. Steps downstream of a failure are `skipped` with the
//! reason. Cancel reasons are ordered (`FailFast < RunTimeout < Interrupt < Kill`) in
//! [`stopper::Stopper`]: a stronger one replaces a weaker one, so a second Ctrl-C
//! escalates to an immediate kill, and steps that still do not end are abandoned.

mod alone;
mod attempt;
pub(crate) mod collect;
mod context;
mod dag;
mod detach;
mod resume;
mod reuse;
pub use dag::interleave_groups;
pub use resume::{confirm_jobs, recovered_masker, resume_jobs, spec_files, Resumed};
pub use reuse::{why, WhyError};
mod dispatcher;
mod durable;
mod env;
mod executor;
pub(crate) mod liveness;
mod prefetch;
mod progress;
mod runid;
mod stopper;
pub use stopper::ABANDON_MARGIN;

pub use detach::{Collected, Detach};
pub use dispatcher::{run_dag, DagOutcome, DagRun};
pub use env::{base_env, tool_dir};
pub use executor::{CheckRunner, DeviceBroker, DeviceLease, LeaseError, ResolvedCheck};
pub use liveness::{
    forget_dead_run, is_run_alive, is_stale_cgroup, live_runs, registry_dir, state_dir, Judge,
    Liveness, Registration, RunLock,
};
pub use progress::{warn_before_start, ProgressMode};
pub use runid::{new_run_id, run_id_of_cgroup, RUN_ID_LEN};

use std::path::PathBuf;
use std::time::Duration;

/// How the scheduler runs a plan.
#[derive(Debug, Clone)]
pub struct SchedOptions {
    pub run_id: String,
    /// `records/<run-id>/`.
    pub record_dir: PathBuf,
    /// `${work}`: `<work>/<run-id>/`.
    pub work_dir: PathBuf,
    pub jobs: u32,
    pub keep_going: bool,
    /// The sum of running steps' memory limits stays within this.
    pub memory_budget: u64,
    pub run_timeout: Option<Duration>,
    /// SIGTERM-to-kill grace for attempts.
    pub grace: Duration,
    pub progress: ProgressMode,
    /// Copy step output to the terminal.
    pub tee: bool,
    /// Names whose values are redacted, besides the built-in patterns.
    pub secret_env: Vec<String>,
    /// Secret values, masked in the logs, metrics and (through the journal) the record.
    pub masker: std::sync::Arc<crate::mask::Masker>,
    /// `${revision.commit}`: each revision's full sha.
    pub revisions: std::collections::BTreeMap<String, String>,
    /// The step cache (`cache = true` steps), unless the run has none.
    pub reuse: Option<std::sync::Arc<crate::cache::Reuse>>,
    /// Attached, submitting a detached run, or collecting one.
    pub detach: Detach,
}

#[cfg(test)]
mod fake_tests;
#[cfg(test)]
mod tests;
