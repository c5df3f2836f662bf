//! A device as the inventory found it and the record names it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One accelerator the orchestrator can lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Device {
    /// Stable identifier, also the lease file prefix: `gpu0`, `npu0`, `rbln0`,
    /// `sim-rngd0`, or what the inventory file says.
    pub id: String,
    /// `gpu`, `rngd`, `atom`, `warboy`, or another kind named by the inventory.
    pub kind: String,
    /// Vendor UUID (`GPU-...` for NVIDIA) when the tool reports one.
    pub uuid: Option<String>,
    /// Marketing name as the tool prints it (`NVIDIA H200`, `RBLN-CA22`).
    pub name: Option<String>,
    /// Leasable cores (PEs): 1 for a GPU, 8 for an RNGD card.
    pub cores: u32,
    /// Device nodes a step needs to use it (shared nodes such as `/dev/nvidiactl`
    /// included).
    pub dev_nodes: Vec<PathBuf>,
    /// The vendor's index, as used in `CUDA_VISIBLE_DEVICES`, `FURIOSA_DEVICES`,
    /// `RBLN_DEVICES`.
    pub index: u32,
    /// A stand-in for hardware the host lacks; records made on it say so.
    pub simulated: bool,
    /// Device memory in bytes when the tool reports it.
    pub memory_bytes: Option<u64>,
    /// Driver (NVIDIA, Rebellions KMD) or firmware (Furiosa) version as reported.
    pub driver: Option<String>,
    /// What NVML tells of an NVIDIA GPU besides; absent for other devices, and for
    /// a GPU only `nvidia-smi` or `/dev` showed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuFacts>,
}

impl Device {
    /// Its MIG instances (core `i` is instance `i`); none unless a GPU in MIG mode.
    pub fn mig_instances(&self) -> &[MigInstance] {
        self.gpu.as_ref().map_or(&[], |g| g.instances.as_slice())
    }
}

/// An NVIDIA GPU as NVML describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GpuFacts {
    /// PCI bus id (`00000000:19:00.0`).
    pub pci_bus_id: Option<String>,
    /// The CUDA version the driver supports (`12.4`).
    pub cuda_driver_version: Option<String>,
    /// Whether the GPU is in MIG mode.
    pub mig: MigMode,
    /// Its MIG instances, in NVML's order: core `i` of a GPU in MIG mode is
    /// instance `i`, so leasing an instance is leasing that core and leasing the
    /// whole GPU takes every instance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<MigInstance>,
}

/// One MIG instance of a GPU: a device a step may own alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MigInstance {
    /// `MIG-...`, what `CUDA_VISIBLE_DEVICES` takes.
    pub uuid: String,
    /// The profile (`1g.18gb`, `3g.71gb`).
    pub profile: String,
    /// Its memory in bytes, where NVML says.
    pub memory_bytes: Option<u64>,
}

/// A GPU's MIG mode as NVML reports it (the current one; a pending change takes
/// effect at the GPU's next reset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MigMode {
    Enabled,
    Disabled,
    /// The GPU has no MIG (before Ampere, or a consumer part).
    NotSupported,
    /// NVML could not say.
    Unknown,
}

impl MigMode {
    pub fn as_str(self) -> &'static str {
        match self {
            MigMode::Enabled => "enabled",
            MigMode::Disabled => "disabled",
            MigMode::NotSupported => "not supported",
            MigMode::Unknown => "unknown",
        }
    }
}
