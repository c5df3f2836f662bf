//! FuriosaAI: `furiosa-smi info` (RNGD; 2024, 2025 and 2026 column sets, `rngd` or
//! `RNGD`, optional UUID/PERT columns) and `furiosactl info` (Warboy).

use std::path::PathBuf;

use super::super::inventory::trailing_number;
use super::super::model::{default_cores, Device};
use super::table::tables;

/// Per-card device node suffixes of an RNGD, from Furiosa's container docs.
const RNGD_NODE_SUFFIXES: &[&str] = &[
    "", "bar0", "bar2", "bar4", "ch0", "ch0r", "ch1", "ch1r", "ch2", "ch2r", "ch3", "ch3r", "ch4",
    "ch4r", "ch5", "ch5r", "ch6", "ch6r", "ch7", "ch7r", "dmar", "mgmt", "pe0", "pe0-1", "pe0-3",
    "pe1", "pe2", "pe2-3", "pe3", "pe4", "pe4-5", "pe4-7", "pe5", "pe6", "pe6-7", "pe7",
];

/// The documented device nodes of RNGD card `index` (`/dev/rngd/npu<index>...`).
pub fn rngd_nodes(index: u32) -> Vec<PathBuf> {
    RNGD_NODE_SUFFIXES
        .iter()
        .map(|s| PathBuf::from(format!("/dev/rngd/npu{index}{s}")))
        .collect()
}

/// An RNGD card `npu<index>` with its documented nodes and 8 cores.
pub fn rngd(index: u32) -> Device {
    Device {
        id: format!("npu{index}"),
        kind: "rngd".into(),
        uuid: None,
        name: Some("RNGD".into()),
        cores: default_cores("rngd"),
        dev_nodes: rngd_nodes(index),
        index,
        simulated: false,
        memory_bytes: None,
        driver: None,
        gpu: None,
    }
}

/// Parses `furiosa-smi info` (any `--format`) or `furiosactl info`. Returns devices
/// and warnings (rows that name no `npu<N>`).
pub fn parse_info(text: &str) -> (Vec<Device>, Vec<String>) {
    let mut devices = Vec::new();
    let mut warnings = Vec::new();
    for table in tables(text) {
        let device_col = table.column("Device").or_else(|| table.column("NPU"));
        let Some(device_col) = device_col else {
            continue;
        };
        let arch_col = table.column("Arch");
        let name_col = table.column("Name");
        let uuid_col = table.column("UUID");
        let fw_col = table.column("Firmware");
        for row in &table.rows {
            let cell = |c: Option<usize>| {
                c.and_then(|i| row.get(i))
                    .map(String::as_str)
                    .filter(|v| !v.is_empty() && *v != "N/A")
            };
            let Some(dev_name) = cell(Some(device_col)) else {
                continue; // continuation line of a multi-line cell
            };
            let Some(index) = dev_name
                .strip_prefix("npu")
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|_| trailing_number(dev_name))
            else {
                warnings.push(format!("furiosa: unrecognised device `{dev_name}`"));
                continue;
            };
            let arch = cell(arch_col).map(str::to_ascii_lowercase);
            let name = cell(name_col);
            let kind = match (arch.as_deref(), name) {
                (Some(a), _) => a.to_string(),
                (None, Some(n)) if n.to_ascii_lowercase().contains("warboy") => "warboy".into(),
                (None, Some(n)) if n.to_ascii_lowercase().contains("rngd") => "rngd".into(),
                _ => "other".into(),
            };
            let dev_nodes = match kind.as_str() {
                "rngd" => rngd_nodes(index),
                // Warboy nodes are `/dev/npu<N>` (an inference; see SOURCES.md).
                _ => vec![PathBuf::from(format!("/dev/{dev_name}"))],
            };
            devices.push(Device {
                id: dev_name.to_string(),
                cores: default_cores(&kind),
                name: Some(
                    name.map(str::to_string)
                        .unwrap_or_else(|| kind.to_ascii_uppercase()),
                ),
                kind,
                uuid: cell(uuid_col).map(str::to_string),
                dev_nodes,
                index,
                simulated: false,
                memory_bytes: None,
                driver: cell(fw_col).map(|f| format!("firmware {f}")),
                gpu: None,
            });
        }
    }
    (devices, warnings)
}
