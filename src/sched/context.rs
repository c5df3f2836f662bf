//! What a step's executor and its attempts share: the run's read-only context, the
//! messages to the dispatcher, how a step ends, and the seams to devices and checks.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

use super::durable::Durable;
use crate::backend::Backend;
use crate::evidence::journal::Event;
use crate::evidence::record::{Allocation, CheckRecord, StepStatus};
use crate::plan::{Check, Plan, Step, StepId, VarSource};
use crate::sys::Stop;

/// Devices held by a step while its attempts run.
pub struct DeviceLease {
    /// Variables that tell the step which devices are its own.
    pub env: Vec<(String, String)>,
    /// Device nodes the attempts may open.
    pub dev_nodes: Vec<PathBuf>,
    /// The real GPUs (or MIG instances) granted, to watch while attempts run.
    pub gpus: Vec<crate::contract::GpuWatch>,
    /// The real NPU cards granted (or cores of them), to read while attempts run.
    pub npus: Vec<crate::contract::NpuWatch>,
    /// What was granted, for the record.
    pub allocations: Vec<Allocation>,
    /// Release everything; returns the allocations with their release times.
    pub release: Box<dyn FnOnce() -> Vec<Allocation> + Send>,
}

/// Why a step got no devices.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("step `{step}` names unknown device request `{name}`")]
    UnknownRequest { step: String, name: String },
    /// The inventory cannot serve it, another run holds it past the wait, or the
    /// wait was cancelled.
    #[error("{0}")]
    Devices(#[from] crate::devices::DeviceError),
}

/// Leases devices for steps. Blocking: called on a blocking thread.
pub trait DeviceBroker: Send + Sync {
    /// Acquire every device the step names, all or none, waiting as configured and
    /// giving up soon after `stop` is set (a cancel arrived while waiting).
    fn acquire(&self, run_id: &str, step: &Step, stop: &Stop) -> Result<DeviceLease, LeaseError>;
}

/// Inputs of one check with every template rendered to a path.
#[derive(Debug, Clone, Default)]
pub struct ResolvedCheck {
    pub actual: Option<String>,
    pub expected: Option<String>,
    pub actual_logits: Option<String>,
    pub expected_logits: Option<String>,
    /// For `across`: the file in every measured attempt's `${out}`, in attempt order.
    pub across: Vec<String>,
}

/// Runs the built-in checks of compare steps. Blocking: called on a blocking thread.
pub trait CheckRunner: Send + Sync {
    fn run(&self, step: &str, check: &Check, inputs: &ResolvedCheck) -> CheckRecord;
}

/// One finished attempt's output folder, as later steps see it.
#[derive(Debug, Clone)]
pub(crate) struct AttemptOut {
    pub warmup: bool,
    pub out: PathBuf,
    /// A try that failed (and was retried): checks across repeats skip it.
    pub failed: bool,
    /// Digests of its declared outputs, by the path as written (`${out}/kv.npy`):
    /// what a cached step that reads them keys on.
    pub digests: Vec<(String, Option<String>)>,
}

/// Output folders of finished steps, by step.
pub(crate) type Upstream = BTreeMap<StepId, Vec<AttemptOut>>;

/// What an executor tells the dispatcher.
pub(crate) enum StepMsg {
    /// Write to the journal.
    Event(Event),
    /// Live view only.
    Progress {
        step: StepId,
        attempt: u32,
        of: u32,
        warmup: bool,
    },
    Done {
        step: StepId,
        end: StepEnd,
    },
    /// A line for the terminal ("rerun compile: input ... changed").
    Note(String),
}

impl StepMsg {
    /// Attempt `n` of `of` of `step` started (a warm-up or not).
    pub(crate) fn progress(step: &crate::plan::Step, (n, of, warmup): (u32, u32, bool)) -> StepMsg {
        StepMsg::Progress {
            step: step.id.clone(),
            attempt: n,
            of,
            warmup,
        }
    }
}

/// How a step ended.
#[derive(Debug, Default)]
pub(crate) struct StepEnd {
    pub status: StepStatus,
    pub reason: Option<String>,
    /// Its attempts' output folders, for the steps that read them.
    pub outs: Vec<AttemptOut>,
    /// Declared outputs of its last attempt, rendered.
    pub outputs: Vec<String>,
    /// Its attempts were submitted for a detached run, not run: `outs` are where
    /// they will write.
    pub detached: bool,
}

impl StepEnd {
    pub(crate) fn failed(reason: String) -> StepEnd {
        StepEnd {
            status: StepStatus::Failed,
            reason: Some(reason),
            ..StepEnd::default()
        }
    }
}

/// Shared, read-only context of every executor.
pub(crate) struct ExecCtx {
    /// How far the journal is on disk (a step's first attempt waits for its barrier).
    pub durable: watch::Receiver<Durable>,
    pub plan: Arc<Plan>,
    pub opts: super::SchedOptions,
    pub backend: Arc<dyn Backend>,
    pub base_env: Vec<(String, String)>,
    pub devices: Option<Arc<dyn DeviceBroker>>,
    pub checks: Option<Arc<dyn CheckRunner>>,
    /// The step cache, when the run uses one.
    pub reuse: Option<Arc<crate::cache::Reuse>>,
    /// Who runs beside whom on this host (steps that run alone).
    pub seats: super::alone::Seats,
    /// A detached run's jobs so far, by step.
    pub submitted: super::detach::Submitted,
}

pub(crate) struct Vars<'a> {
    pub run_id: &'a str,
    pub work: String,
    pub out: Option<String>,
    pub repeat: Option<u32>,
    pub upstream: &'a Upstream,
    pub revisions: &'a std::collections::BTreeMap<String, String>,
}

impl VarSource for Vars<'_> {
    fn run_id(&self) -> &str {
        self.run_id
    }
    fn work(&self) -> &str {
        &self.work
    }
    fn out(&self) -> Option<&str> {
        self.out.as_deref()
    }
    fn repeat(&self) -> Option<u32> {
        self.repeat
    }
    fn step_out(&self, step: &StepId) -> Option<String> {
        let outs = self.upstream.get(step)?;
        let last = outs
            .iter()
            .rev()
            .find(|a| !a.warmup && !a.failed)
            .or(outs.last())?;
        Some(last.out.display().to_string())
    }
    fn revision_commit(&self, name: &str) -> Option<String> {
        self.revisions.get(name).cloned()
    }
}
