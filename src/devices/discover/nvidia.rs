//! NVIDIA: `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]` and
//! `nvidia-smi -L`.

use std::path::PathBuf;

use super::super::model::Device;
use super::table::parse_size;

/// The query discovery runs; without a header line, columns are read in this order.
pub const QUERY_FIELDS: &[&str] = &["index", "uuid", "name", "memory.total", "driver_version"];

/// Device nodes every NVIDIA GPU needs besides its own `/dev/nvidia<N>`.
pub const SHARED_NODES: &[&str] = &[
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
];

/// A GPU as `nvidia-smi` describes it: id `gpu<index>`, kind `gpu`, one core, its
/// nominal device nodes (discovery later keeps those that exist).
pub fn gpu(index: u32, uuid: Option<String>, name: Option<String>) -> Device {
    let mut dev_nodes = vec![PathBuf::from(format!("/dev/nvidia{index}"))];
    dev_nodes.extend(SHARED_NODES.iter().map(PathBuf::from));
    Device {
        id: format!("gpu{index}"),
        kind: "gpu".into(),
        uuid,
        name,
        cores: 1,
        dev_nodes,
        index,
        simulated: false,
        memory_bytes: None,
        driver: None,
        gpu: None,
    }
}

/// Parses CSV output of `nvidia-smi --query-gpu`. A header line (as without
/// `noheader`) names the columns, units in brackets ignored; without one the columns
/// are [`QUERY_FIELDS`]. Memory with or without ` MiB` (`nounits`) is MiB. Rows
/// without an index column are numbered in order. Returns devices and warnings.
pub fn parse_query_csv(text: &str) -> (Vec<Device>, Vec<String>) {
    let mut devices = Vec::new();
    let mut warnings = Vec::new();
    let mut columns: Vec<String> = QUERY_FIELDS.iter().map(|s| s.to_string()).collect();
    let mut first = true;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if first {
            first = false;
            let is_header = fields
                .iter()
                .any(|f| matches!(column_name(f).as_str(), "index" | "uuid" | "name"));
            if is_header {
                columns = fields.iter().map(|f| column_name(f)).collect();
                continue;
            }
        }
        let get = |name: &str| {
            columns
                .iter()
                .position(|c| c == name)
                .and_then(|i| fields.get(i))
                .copied()
                .filter(|v| !v.is_empty() && !v.contains("N/A"))
        };
        let index = match get("index") {
            Some(v) => match v.parse::<u32>() {
                Ok(i) => i,
                Err(_) => {
                    warnings.push(format!(
                        "nvidia-smi: unreadable GPU index `{v}` in `{line}`"
                    ));
                    continue;
                }
            },
            None => devices.len() as u32,
        };
        let mut d = gpu(
            index,
            get("uuid").map(str::to_string),
            get("name").map(str::to_string),
        );
        d.memory_bytes = get("memory.total").and_then(|m| {
            let m = m.trim();
            if m.chars().all(|c| c.is_ascii_digit() || c == '.') {
                parse_size(&format!("{m}MiB"))
            } else {
                parse_size(m)
            }
        });
        d.driver = get("driver_version").map(str::to_string);
        devices.push(d);
    }
    (devices, warnings)
}

fn column_name(field: &str) -> String {
    field
        .split(" [")
        .next()
        .unwrap_or(field)
        .trim()
        .to_ascii_lowercase()
}

/// A GPU line of `nvidia-smi -L`, with the MIG instances listed under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGpu {
    pub index: u32,
    pub name: String,
    pub uuid: Option<String>,
    /// UUIDs (`MIG-...`) of its MIG instances; empty when MIG is off.
    pub mig: Vec<String>,
}

/// Parses `nvidia-smi -L` (`GPU 0: NAME (UUID: GPU-...)`, MIG lines indented).
pub fn parse_list(text: &str) -> Vec<ListedGpu> {
    let mut out: Vec<ListedGpu> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("GPU ") {
            let Some((idx, rest)) = rest.split_once(':') else {
                continue;
            };
            let Ok(index) = idx.trim().parse() else {
                continue;
            };
            let (name, uuid) = match rest.rsplit_once("(UUID:") {
                Some((name, u)) => (name.trim(), Some(u.trim().trim_end_matches(')').trim())),
                None => (rest.trim(), None),
            };
            out.push(ListedGpu {
                index,
                name: name.to_string(),
                uuid: uuid.map(str::to_string),
                mig: Vec::new(),
            });
        } else if t.starts_with("MIG ") {
            if let (Some(gpu), Some((_, u))) = (out.last_mut(), t.rsplit_once("(UUID:")) {
                gpu.mig
                    .push(u.trim().trim_end_matches(')').trim().to_string());
            }
        }
    }
    out
}

/// Devices from a `-L` listing (used when the CSV query fails) and a warning for
/// every GPU in MIG mode: it is leased whole, its instances are not split.
pub fn from_list(listed: &[ListedGpu]) -> (Vec<Device>, Vec<String>) {
    let devices = listed
        .iter()
        .map(|g| gpu(g.index, g.uuid.clone(), Some(g.name.clone())))
        .collect();
    let warnings = listed
        .iter()
        .filter(|g| !g.mig.is_empty())
        .map(|g| {
            format!(
                "gpu{} is in MIG mode with {} instance(s); orchestrate leases it whole",
                g.index,
                g.mig.len()
            )
        })
        .collect();
    (devices, warnings)
}
