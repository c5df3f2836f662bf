//! Rebellions ATOM: `rbln-smi` / `rbln-stat`, table and `-j` JSON output.
//!
//! Written against vendor documentation examples and third-party captures (see
//! SOURCES.md of the shared device fixtures): no output recorded by us on real hardware.

use std::path::PathBuf;

use serde_json::Value;

use super::super::inventory::trailing_number;
use super::super::model::Device;
use super::table::{parse_size, tables};

/// An ATOM device `rbln<index>` with its node `/dev/<device>`.
pub fn atom(index: u32, device: &str) -> Device {
    Device {
        id: device.to_string(),
        kind: "atom".into(),
        uuid: None,
        name: None,
        cores: 1,
        dev_nodes: vec![PathBuf::from(format!("/dev/{device}"))],
        index,
        simulated: false,
        memory_bytes: None,
        driver: None,
        gpu: None,
    }
}

fn kmd_version(text: &str) -> Option<String> {
    let (_, rest) = text.split_once("KMD ver:")?;
    let v = rest.split(['|', '\n']).next()?.trim();
    (!v.is_empty() && v != "N/A").then(|| v.to_string())
}

/// Parses the table output: the Device Information table (with or without the Perf
/// column, with a blank Name on the 2nd..4th device of a CA25 card, which inherits
/// the card's name), ignoring the Context Information table.
pub fn parse_table(text: &str) -> (Vec<Device>, Vec<String>) {
    let driver = kmd_version(text);
    let mut devices = Vec::new();
    let mut warnings = Vec::new();
    for table in tables(text) {
        let (Some(npu_col), Some(dev_col)) = (table.column("NPU"), table.column("Device")) else {
            continue;
        };
        let name_col = table.column("Name");
        let mem_col = table
            .header
            .iter()
            .position(|h| h.to_ascii_lowercase().starts_with("memory"));
        let mut last_name: Option<String> = None;
        for row in &table.rows {
            let cell = |c: Option<usize>| {
                c.and_then(|i| row.get(i))
                    .map(String::as_str)
                    .filter(|v| !v.is_empty() && *v != "N/A")
            };
            let (Some(npu), Some(dev)) = (cell(Some(npu_col)), cell(Some(dev_col))) else {
                continue;
            };
            let Ok(index) = npu.parse::<u32>() else {
                warnings.push(format!("rbln-smi: unreadable NPU index `{npu}`"));
                continue;
            };
            if !dev.starts_with("rbln") || trailing_number(dev).is_none() {
                warnings.push(format!("rbln-smi: unrecognised device `{dev}`"));
                continue;
            }
            if let Some(n) = cell(name_col) {
                last_name = Some(n.to_string());
            }
            let mut d = atom(index, dev);
            d.name = last_name.clone();
            d.driver = driver.clone();
            d.memory_bytes = cell(mem_col)
                .and_then(|m| m.rsplit('/').next())
                .and_then(parse_size);
            devices.push(d);
        }
    }
    (devices, warnings)
}

/// Parses `rbln-smi -j` / `rbln-stat -j`: `devices[]` with `npu` (an integer, or a
/// string in SDK 1.x), `name`, `uuid`, `device`, `memory.total` in bytes.
pub fn parse_json(text: &str) -> Result<(Vec<Device>, Vec<String>), String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let driver = v
        .get("KMD_version")
        .and_then(Value::as_str)
        .filter(|s| *s != "N/A")
        .map(str::to_string);
    let list = v
        .get("devices")
        .and_then(Value::as_array)
        .ok_or("no `devices` array")?;
    let mut devices = Vec::new();
    let mut warnings = Vec::new();
    for entry in list {
        let index = match entry.get("npu") {
            Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
            Some(Value::String(s)) => s.trim().parse().ok(),
            _ => None,
        };
        let dev = entry.get("device").and_then(Value::as_str);
        let (Some(index), Some(dev)) = (index, dev) else {
            warnings.push(format!(
                "rbln-smi: device entry without npu/device: {entry}"
            ));
            continue;
        };
        let mut d = atom(index, dev);
        d.name = entry
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string);
        d.uuid = entry
            .get("uuid")
            .and_then(Value::as_str)
            .map(str::to_string);
        d.driver = driver.clone();
        d.memory_bytes = entry
            .get("memory")
            .and_then(|m| m.get("total"))
            .and_then(|t| match t {
                Value::String(s) => s.trim().parse().ok(),
                Value::Number(n) => n.as_u64(),
                _ => None,
            });
        devices.push(d);
    }
    Ok((devices, warnings))
}
