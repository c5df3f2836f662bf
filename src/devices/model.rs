//! The device model shared by inventory, discovery, selection and leases.

pub use crate::record::devices::Device;
use serde::{Deserialize, Serialize};

/// Known kinds and their core counts.
pub const KNOWN_KINDS: &[(&str, u32)] = &[
    ("gpu", 1),
    ("rngd", 8),
    ("atom", 1),
    // Warboy has two PEs that can be fused (`npu0pe0-1`).
    ("warboy", 2),
    ("other", 1),
];

/// Cores of a device of `kind` when nothing more precise is known.
pub fn default_cores(kind: &str) -> u32 {
    KNOWN_KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or(1, |(_, c)| *c)
}

/// The id of the `n`-th simulated device of `kind`.
pub fn simulated_id(kind: &str, n: u32) -> String {
    format!("sim-{kind}{n}")
}

/// A simulated device of `kind` with index `n`: no device nodes, default cores.
pub fn simulated_device(kind: &str, n: u32) -> Device {
    Device {
        id: simulated_id(kind, n),
        kind: kind.to_string(),
        uuid: None,
        name: Some(format!("simulated {kind}")),
        cores: default_cores(kind),
        dev_nodes: Vec::new(),
        index: n,
        simulated: true,
        memory_bytes: None,
        driver: None,
        gpu: None,
    }
}

/// Whether `id` is usable as a lease file prefix: ASCII letters, digits, `-`, `_`,
/// `.`, not starting with `.`.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The devices a host offers, with where each came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inventory {
    pub devices: Vec<Device>,
    /// Parallel to `devices`: where each device came from (`nvidia-smi`,
    /// `/etc/orchestrate/devices.toml:12`, `simulate`, `/dev`).
    pub sources: Vec<String>,
    /// Things a user should know (a tool that failed, a MIG-mode GPU, ...).
    pub warnings: Vec<String>,
}

impl Inventory {
    /// Adds a device with its source, keeping `devices` and `sources` parallel.
    pub fn push(&mut self, device: Device, source: impl Into<String>) {
        self.devices.push(device);
        self.sources.push(source.into());
    }

    /// The device with this id, or whose UUID is this.
    pub fn find(&self, id_or_uuid: &str) -> Option<&Device> {
        self.devices
            .iter()
            .find(|d| d.id == id_or_uuid || d.uuid.as_deref() == Some(id_or_uuid))
    }

    /// Each device with its source.
    pub fn with_sources(&self) -> impl Iterator<Item = (&Device, &str)> {
        self.devices
            .iter()
            .enumerate()
            .map(|(i, d)| (d, self.sources.get(i).map_or("unknown", String::as_str)))
    }
}

/// A named request for devices, as the plan states it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The plan's request name (`rngd`, `gpu`).
    pub name: String,
    pub kind: String,
    /// How many distinct devices.
    pub count: u32,
    /// Cores per device; `None` takes whole devices.
    pub cores: Option<u32>,
    /// Device ids or UUIDs the choice is restricted to.
    pub ids: Vec<String>,
    /// Simulated devices may serve this request when the host lacks real ones.
    pub simulate: bool,
    /// A MIG instance of a GPU in MIG mode instead of a whole device: its profile
    /// (`1g.18gb`), or `any`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<String>,
}

impl Request {
    /// The request named `name` of a plan; `allow_simulated` is the plan's switch,
    /// which lets every request fall back to simulated devices.
    pub fn from_plan(name: &str, r: &crate::plan::DeviceRequest, allow_simulated: bool) -> Self {
        Request {
            name: name.to_string(),
            kind: r.kind.clone(),
            count: r.count,
            cores: r.cores,
            ids: r.ids.clone(),
            simulate: r.simulate || allow_simulated,
            mig: r.mig.clone(),
        }
    }
}
