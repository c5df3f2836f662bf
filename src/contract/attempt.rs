//! What one attempt is asked to do and what came of it, whatever runs it (the
//! cgroup isolator or a batch scheduler): the types `isolate` and `backend`
//! produce and `sched` and `evidence` consume.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use crate::record::attempt::{Enforcement, Enforcer, IsolationInfo, Mode, SystemdScope};
pub use crate::record::end::{CancelReason, Termination};
use crate::record::job::JobFacts;

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
    /// The GPUs (or MIG instances) the attempt owns, to watch while it runs.
    pub gpus: Vec<GpuWatch>,
    /// The NPU cards the attempt owns (or owns cores of), to read while it runs.
    pub npus: Vec<NpuWatch>,
}

/// An NPU card an attempt owns cores of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NpuWatch {
    /// The inventory's device (`npu0`).
    pub device: String,
    /// `rngd`, `warboy` or `atom`: which tool reads it.
    pub kind: String,
    /// The vendor's index of the card.
    pub index: u32,
}

/// A GPU or MIG instance an attempt owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuWatch {
    /// The inventory's device (`gpu1`).
    pub device: String,
    /// Its `GPU-...` or `MIG-...` UUID.
    pub uuid: String,
    /// The physical GPU's `GPU-...` UUID (itself for a whole GPU).
    pub gpu_uuid: String,
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
    /// Logs the attempt was left without, before its job had opened them: the job
    /// may still create and write them, so they are not the record's to hash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unopened_logs: Vec<PathBuf>,
    /// The GPUs it owned, as NVML saw them while it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<crate::record::gpu::GpuUse>,
    /// Its processes seen on GPUs it did not own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_misuse: Vec<crate::record::gpu::GpuMisuse>,
    /// The NPU cards it owned, as their tools read them while it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub npus: Vec<crate::record::gpu::NpuUse>,
}

impl AttemptOutcome {
    pub fn succeeded(&self) -> bool {
        self.termination == Termination::Exited && self.exit_code == Some(0)
    }
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

#[cfg(test)]
mod tests {
    use super::Mode;

    /// The record's word for a mode is serde's, never a variant's Debug name.
    #[test]
    fn a_modes_word_is_its_serde_name() {
        for m in [Mode::Auto, Mode::Cgroup, Mode::None] {
            assert_eq!(
                serde_json::to_string(&m).unwrap(),
                format!("\"{}\"", m.as_str())
            );
        }
    }
}
