//! The typed parts of the record contract that other modules fill in: device
//! allocations, isolation, the plan's limits and device requests, attempt
//! terminations, the run's footer. Reports and `diff` read these types, so a renamed
//! field breaks the build, not a report line; `schemas/record.schema.json` is
//! generated from them. Optional facts serialize as `null` (not omitted) where
//! records written before this contract did, so those records keep their bytes and
//! still verify.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One device (or core set of one) a step held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Allocation {
    /// `<device>:<cores>`, e.g. `sim-rngd0:0,1,2,3`: what the lease locked.
    pub lease: String,
    /// The plan's device request this serves.
    pub request: String,
    /// The step that held it.
    pub step: String,
    /// Device id from the inventory.
    pub device: String,
    /// Device kind (`gpu`, `rngd`, `atom`, ...).
    pub kind: String,
    /// Vendor UUID, when the device has one.
    pub uuid: Option<String>,
    /// The cores (PEs) held.
    pub cores: Vec<u32>,
    /// Whether every core of the device was held.
    pub whole_device: bool,
    /// A simulated stand-in, not hardware.
    pub simulated: bool,
    /// RFC 3339, when the lease was taken.
    pub granted_at: String,
    /// RFC 3339, when it was released; null while held (or if the run died).
    pub released_at: Option<String>,
    /// Why releasing failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_error: Option<String>,
}

/// How attempts were isolated, as the run saw it at its start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IsolationRecord {
    /// Mode, cgroup version, controllers and parents in use.
    pub info: super::attempt::IsolationInfo,
    /// Fallbacks worth a warning (e.g. `auto` found no usable cgroup).
    pub warnings: Vec<String>,
}

/// The plan-wide limits as declared (sizes in bytes, durations in ms); null where
/// the plan sets none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlanLimits {
    /// Memory per attempt.
    pub host_memory_bytes: Option<u64>,
    /// Whether swap is allowed beyond the memory limit.
    pub swap: bool,
    /// Process count per attempt.
    pub pids: Option<u64>,
    /// cpuset list, e.g. `0-3`.
    pub cpus: Option<String>,
    /// Per-attempt timeout.
    pub timeout_ms: Option<u64>,
    /// Whole-run timeout.
    pub run_timeout_ms: Option<u64>,
    /// SIGTERM-to-kill grace.
    pub grace_ms: Option<u64>,
    /// `auto`, `cgroup` or `none`, as the plan asks.
    pub isolation: String,
}

/// One of the plan's device requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceRequestRecord {
    /// Device kind asked for.
    pub kind: String,
    /// How many devices.
    pub count: u32,
    /// Cores of each (null: whole devices).
    pub cores: Option<u32>,
    /// Specific device ids asked for (empty: any).
    pub ids: Vec<String>,
    /// Whether a simulated device may serve it.
    pub simulate: bool,
    /// A MIG instance of this profile (or `any`) instead of a whole device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<String>,
}

/// The plan's device requests and the inventory they were matched against.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlanDevices {
    /// By request name.
    pub requests: BTreeMap<String, DeviceRequestRecord>,
    /// What the host offered (inventory file plus discovery).
    pub inventory: Vec<super::devices::Device>,
}

/// Why an attempt ended: one type from the backend that saw it to the record.
pub use super::end::Termination;

/// Facts known only when the run ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunFooter {
    /// The run's own audit of what it owned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_audit: Option<ReleaseAudit>,
}

/// The run's own audit of what it owned, at its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReleaseAudit {
    /// True when `leftovers` is empty; when false the run's status is `failed`.
    pub passed: bool,
    /// What was checked (cgroups, processes, leases).
    pub checked: Vec<String>,
    /// What the run left: `cgroup <name>`, `process <pid> (attempt <canary>)`,
    /// `lease <file> (device <id> core <n>)`, or why the lease folder was unreadable.
    pub leftovers: Vec<String>,
}

/// One step on the baseline against one other revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RevisionComparison {
    /// The step with its other axes (`tests`, `prefill[tokens=2048]`).
    pub step: String,
    /// The baseline cell's id.
    pub baseline: String,
    /// The other revision's cell id.
    pub implementation: String,
    /// The other revision's name.
    pub revision: String,
    /// Test cases, when both sides wrote a JUnit report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<super::results::TestsComparison>,
    /// Findings, when both sides wrote a SARIF log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub findings: Option<super::results::FindingsComparison>,
    /// Wall time (and the step's headline metric) over measured attempts, when both
    /// sides have at least two.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timings: Vec<super::timing::TimingComparison>,
}
