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
}
