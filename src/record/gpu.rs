//! What an attempt did on the accelerators it owned: a GPU as NVML saw it, an NPU
//! card as its vendor's tool read it, while the attempt ran.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One GPU (or MIG instance) an attempt owned, sampled while it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuUse {
    /// The inventory's device (`gpu1`).
    pub device: String,
    /// The GPU's `GPU-...` or the MIG instance's `MIG-...` UUID.
    pub uuid: String,
    /// Where the figures come from (`NVML`).
    pub source: String,
    /// How many samples were taken (one every 50 ms while the main process ran).
    pub samples: u64,
    /// The highest device memory the attempt's own processes held at once, in
    /// bytes (the sum over its processes NVML listed on this device); 0 when
    /// none of them ever used it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    /// Energy the GPU used while the attempt ran, in joules: the delta of its
    /// total-energy counter (the whole GPU's, whoever used it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// Mean of the GPU utilization samples, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_mean_percent: Option<f64>,
    /// Highest GPU utilization sampled, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_max_percent: Option<u32>,
    /// Highest GPU temperature sampled, in degrees Celsius.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_max_c: Option<u32>,
    /// Every clock throttle reason seen in any sample (NVML's names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttle_reasons: Vec<String>,
    /// Readings the device does not support (`memory`, `energy`, `utilization`,
    /// `temperature`, `throttle`): absent above, never recorded as 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_supported: Vec<String>,
    /// Readings that failed otherwise, with NVML's words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// A process of an attempt found on a GPU the attempt did not own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GpuMisuse {
    /// The process's pid when it was seen.
    pub pid: u32,
    /// The GPU's UUID.
    pub uuid: String,
    /// The inventory's name for it, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Device memory it held when seen, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

/// One NPU card an attempt owned, as its vendor's tool read it while the attempt
/// ran. The tools read whole cards: memory in use and power are the card's,
/// whoever used it (a step owning some cores of an RNGD shares its card).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NpuUse {
    /// The inventory's device (`npu0`, `rbln1`).
    pub device: String,
    /// The tool and arguments read (`rbln-stat -j`, `furiosa-smi status`).
    pub source: String,
    /// How many readings were taken (one a second while the main process ran).
    pub samples: u64,
    /// The highest memory in use on the card, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    /// Mean of the card's power readings, in watts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_mean_w: Option<f64>,
    /// Highest power reading, in watts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_max_w: Option<f64>,
    /// Highest temperature read, in degrees Celsius.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_max_c: Option<f64>,
    /// Mean of the utilization readings, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_mean_percent: Option<f64>,
    /// Readings the tool does not print for this card (`power` for an RNGD):
    /// absent above, never recorded as 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_supported: Vec<String>,
    /// Why readings failed (the tool missing, timing out, printing nothing usable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}
