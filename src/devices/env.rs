//! How a step is told which devices it owns.

use serde::Serialize;

use super::model::Device;

/// A device and the cores of it a grant holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrantedDevice {
    pub device: Device,
    /// Ascending core indices; all of them when the whole device is granted.
    pub cores: Vec<u32>,
}

impl GrantedDevice {
    /// The `MIG-...` UUIDs of the instances granted (every instance for a whole
    /// GPU in MIG mode); none for a device not in MIG mode.
    pub fn mig_uuids(&self) -> Vec<String> {
        let instances = self.device.mig_instances();
        self.cores
            .iter()
            .filter_map(|c| instances.get(*c as usize))
            .map(|m| m.uuid.clone())
            .collect()
    }

    /// Whether every core of the device is granted.
    pub fn whole(&self) -> bool {
        self.cores.len() as u64 == u64::from(self.device.cores)
    }
}

#[derive(Serialize)]
struct Described<'a> {
    id: &'a str,
    kind: &'a str,
    cores: &'a [u32],
    uuid: Option<&'a str>,
    /// The `MIG-...` UUIDs of the instances granted, for a GPU in MIG mode.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    mig: Vec<String>,
    simulated: bool,
}

/// What `CUDA_VISIBLE_DEVICES` names for a GPU grant: the `MIG-...` UUIDs of the
/// instances granted (all of them for a whole GPU in MIG mode), else the GPU's
/// UUID, else its index.
fn cuda_entries(g: &GrantedDevice) -> Vec<String> {
    let mig = g.mig_uuids();
    if !mig.is_empty() {
        return mig;
    }
    vec![g
        .device
        .uuid
        .clone()
        .unwrap_or_else(|| g.device.index.to_string())]
}

/// `npu:0` for a whole device, `npu:0:4-7` for a range, `npu:0:3` for one core.
fn furiosa_entry(g: &GrantedDevice) -> String {
    let index = g.device.index;
    match (g.cores.first(), g.cores.last()) {
        _ if g.whole() => format!("npu:{index}"),
        (Some(a), Some(b)) if a == b => format!("npu:{index}:{a}"),
        (Some(a), Some(b)) => format!("npu:{index}:{a}-{b}"),
        _ => format!("npu:{index}"),
    }
}

/// The environment for a step that owns `granted` (from one or several grants):
/// `CUDA_VISIBLE_DEVICES` (UUIDs, else indices) with `CUDA_DEVICE_ORDER=PCI_BUS_ID`
/// for GPUs, `FURIOSA_DEVICES` for RNGD, `RBLN_DEVICES` for ATOM, and always
/// `ORCHESTRATE_DEVICES` (a JSON array of `{id, kind, cores, uuid, simulated}`) plus
/// `ORCHESTRATE_SIMULATED=1` when any device is simulated. Simulated devices get the
/// vendor variables too, with their simulated indices.
pub fn step_env(granted: &[GrantedDevice]) -> Vec<(String, String)> {
    let of = |kind: &'static str| granted.iter().filter(move |g| g.device.kind == kind);
    let mut env = Vec::new();
    let gpus: Vec<String> = of("gpu").flat_map(cuda_entries).collect();
    if !gpus.is_empty() {
        env.push(("CUDA_VISIBLE_DEVICES".into(), gpus.join(",")));
        env.push(("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into()));
    }
    let npus: Vec<String> = of("rngd").map(furiosa_entry).collect();
    if !npus.is_empty() {
        env.push(("FURIOSA_DEVICES".into(), npus.join(",")));
    }
    let atoms: Vec<String> = of("atom").map(|g| g.device.index.to_string()).collect();
    if !atoms.is_empty() {
        env.push(("RBLN_DEVICES".into(), atoms.join(",")));
    }
    let described: Vec<Described> = granted
        .iter()
        .map(|g| Described {
            id: &g.device.id,
            kind: &g.device.kind,
            cores: &g.cores,
            uuid: g.device.uuid.as_deref(),
            mig: g.mig_uuids(),
            simulated: g.device.simulated,
        })
        .collect();
    let json = serde_json::to_string(&described).unwrap_or_else(|_| "[]".into());
    env.push(("ORCHESTRATE_DEVICES".into(), json));
    if granted.iter().any(|g| g.device.simulated) {
        env.push(("ORCHESTRATE_SIMULATED".into(), "1".into()));
    }
    env
}
