//! The inventory file (`devices.toml`) and merging it with discovery.
//!
//! Format:
//! ```toml
//! [[device]]
//! id = "npu0"                 # required; letters, digits, - _ .
//! kind = "rngd"               # required
//! cores = 8                   # default per kind (rngd 8, warboy 2, others 1)
//! index = 0                   # default: the id's trailing digits, else 0
//! uuid = "..."                # optional
//! name = "..."                # optional
//! dev = ["/dev/rngd/npu0"]    # optional device nodes
//! memory_bytes = 51539607552  # optional
//! driver = "..."              # optional
//! simulated = false           # default false
//!
//! [simulate]                  # adds sim-rngd0, sim-rngd1, sim-gpu0, ...
//! rngd = 2
//! gpu = 2
//! ```

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::error::DeviceError;
use super::model::{default_cores, simulated_device, valid_id, Device, Inventory};

/// The system-wide inventory file.
pub const SYSTEM_INVENTORY: &str = "/etc/orchestrate/devices.toml";
/// Environment variable naming an inventory file.
pub const INVENTORY_ENV: &str = "ORCHESTRATE_INVENTORY";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileFormat {
    #[serde(default)]
    device: Vec<DeviceEntry>,
    #[serde(default)]
    simulate: BTreeMap<String, Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceEntry {
    id: Spanned<String>,
    kind: Spanned<String>,
    cores: Option<Spanned<u32>>,
    index: Option<u32>,
    uuid: Option<String>,
    name: Option<String>,
    #[serde(default)]
    dev: Vec<PathBuf>,
    memory_bytes: Option<u64>,
    driver: Option<String>,
    #[serde(default)]
    simulated: bool,
}

/// Loads the inventory: `explicit` (from `--inventory`), else the file named by
/// `ORCHESTRATE_INVENTORY`, else `/etc/orchestrate/devices.toml`. Only the system file
/// may be absent (an empty inventory); a named file must exist.
pub fn load_inventory(explicit: Option<&Path>) -> Result<Inventory, DeviceError> {
    if let Some(path) = explicit {
        return load_file(path);
    }
    if let Some(path) = std::env::var_os(INVENTORY_ENV).filter(|v| !v.is_empty()) {
        return load_file(Path::new(&path));
    }
    let system = Path::new(SYSTEM_INVENTORY);
    match std::fs::read_to_string(system) {
        Ok(text) => parse_inventory(&text, system),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Inventory::default()),
        Err(e) => Err(DeviceError::io(system, e)),
    }
}

fn load_file(path: &Path) -> Result<Inventory, DeviceError> {
    let text = std::fs::read_to_string(path).map_err(|e| DeviceError::io(path, e))?;
    parse_inventory(&text, path)
}

/// Parses inventory text; `file` names it in errors and sources.
pub fn parse_inventory(text: &str, file: &Path) -> Result<Inventory, DeviceError> {
    let err = |span: Option<Range<usize>>, message: String| {
        let (line, col) = span.map_or((1, 1), |s| line_col(text, s.start));
        DeviceError::Inventory {
            file: file.to_path_buf(),
            line,
            col,
            message,
        }
    };
    let parsed: FileFormat =
        toml::from_str(text).map_err(|e| err(e.span(), e.message().trim().to_string()))?;

    let mut inv = Inventory::default();
    for entry in parsed.device {
        // The line of `id = ...`: a table's own span is not reliably its header.
        let (line, _) = line_col(text, entry.id.span().start);
        let id = entry.id.get_ref().clone();
        if !valid_id(&id) {
            return Err(err(
                Some(entry.id.span()),
                format!("device id `{id}` may only hold letters, digits, `-`, `_` and `.`"),
            ));
        }
        if inv.find(&id).is_some() {
            return Err(err(
                Some(entry.id.span()),
                format!("duplicate device id `{id}`"),
            ));
        }
        let kind = entry.kind.get_ref().trim().to_ascii_lowercase();
        if kind.is_empty() || !valid_id(&kind) {
            return Err(err(
                Some(entry.kind.span()),
                format!("device kind `{}` is not a plain word", entry.kind.get_ref()),
            ));
        }
        let cores = match entry.cores {
            Some(c) if *c.get_ref() == 0 => {
                return Err(err(Some(c.span()), "cores must be at least 1".into()))
            }
            Some(c) => c.into_inner(),
            None => default_cores(&kind),
        };
        inv.push(
            Device {
                index: entry
                    .index
                    .unwrap_or_else(|| trailing_number(&id).unwrap_or(0)),
                id,
                kind,
                uuid: entry.uuid,
                name: entry.name,
                cores,
                dev_nodes: entry.dev,
                simulated: entry.simulated,
                memory_bytes: entry.memory_bytes,
                driver: entry.driver,
                gpu: None,
            },
            format!("{}:{line}", file.display()),
        );
    }
    for (kind, count) in parsed.simulate {
        let kind_lc = kind.to_ascii_lowercase();
        if !valid_id(&kind_lc) {
            return Err(err(
                Some(count.span()),
                format!("simulated kind `{kind}` is not a plain word"),
            ));
        }
        let (line, _) = line_col(text, count.span().start);
        let mut n = 0;
        let mut added = 0;
        while added < *count.get_ref() {
            let device = simulated_device(&kind_lc, n);
            n += 1;
            if inv.find(&device.id).is_some() {
                continue;
            }
            inv.push(device, format!("{}:{line} [simulate]", file.display()));
            added += 1;
        }
    }
    Ok(inv)
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The number at the end of an id (`npu12` -> 12).
pub(crate) fn trailing_number(id: &str) -> Option<u32> {
    let digits = id.len() - id.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    id.get(id.len() - digits..)?.parse().ok()
}

/// Merges a file inventory with a discovered one. A file entry describes the same
/// device as a discovered one when its id or UUID matches; its given fields win and
/// the discovered ones fill the rest. Discovered devices the file does not name are
/// added; declared real devices discovery did not see are kept, with a warning when
/// discovery found other devices of that kind (a missing tool is not suspicious, a
/// missing card among found ones is).
pub fn merged(file: Inventory, discovered: Inventory) -> Inventory {
    let mut out = Inventory {
        warnings: file.warnings.clone(),
        ..Inventory::default()
    };
    out.warnings.extend(discovered.warnings.iter().cloned());
    let mut used = vec![false; discovered.devices.len()];
    for (dev, source) in file.with_sources() {
        let hit = discovered
            .devices
            .iter()
            .position(|d| d.id == dev.id || (dev.uuid.is_some() && d.uuid == dev.uuid));
        match hit {
            Some(i) if !dev.simulated => {
                if let Some(slot) = used.get_mut(i) {
                    *slot = true;
                }
                let found = discovered.devices.get(i);
                let mut d = dev.clone();
                if let Some(f) = found {
                    d.uuid = d.uuid.or_else(|| f.uuid.clone());
                    d.name = d.name.or_else(|| f.name.clone());
                    d.memory_bytes = d.memory_bytes.or(f.memory_bytes);
                    d.driver = d.driver.or_else(|| f.driver.clone());
                    d.gpu = d.gpu.or_else(|| f.gpu.clone());
                    if d.dev_nodes.is_empty() {
                        d.dev_nodes = f.dev_nodes.clone();
                    }
                }
                let from = discovered
                    .sources
                    .get(i)
                    .map_or("discovery", String::as_str);
                out.push(d, format!("{source} + {from}"));
            }
            _ => {
                if !dev.simulated && discovered.devices.iter().any(|d| d.kind == dev.kind) {
                    out.warnings.push(format!(
                        "device `{}` ({}) is declared in {source} but discovery did not find it",
                        dev.id, dev.kind
                    ));
                }
                out.push(dev.clone(), source);
            }
        }
    }
    for (i, (dev, source)) in discovered.with_sources().enumerate() {
        if !used.get(i).copied().unwrap_or(false) && out.find(&dev.id).is_none() {
            out.push(dev.clone(), source);
        }
    }
    out
}
