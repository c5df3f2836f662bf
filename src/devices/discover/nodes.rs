//! Device nodes under `/dev`: which accelerator each belongs to.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Device nodes grouped by the device they serve.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NodeMap {
    /// `/dev/nvidia<N>` by N.
    pub gpus: BTreeMap<u32, PathBuf>,
    /// `/dev/nvidiactl`, `/dev/nvidia-uvm`, `-uvm-tools`, `-modeset`,
    /// `/dev/nvidia-caps/*`: needed by every GPU.
    pub nvidia_shared: Vec<PathBuf>,
    /// `/dev/rngd/npu<N>*` by N.
    pub rngd: BTreeMap<u32, Vec<PathBuf>>,
    /// `/dev/rbln<N>` by N.
    pub rbln: BTreeMap<u32, PathBuf>,
}

fn digits_prefix(s: &str) -> Option<(u32, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n = s.get(..end)?.parse().ok()?;
    Some((n, s.get(end..)?))
}

/// Sorts paths into a [`NodeMap`] by their file and parent folder names; paths that
/// belong to no known accelerator (`/dev/nvram`) are ignored.
pub fn classify<P: AsRef<Path>>(paths: &[P]) -> NodeMap {
    let mut map = NodeMap::default();
    for p in paths {
        let p = p.as_ref();
        let Some(file) = p.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        let parent = p
            .parent()
            .and_then(|d| d.file_name())
            .and_then(|d| d.to_str())
            .unwrap_or("");
        match parent {
            "rngd" => {
                if let Some((n, _)) = file.strip_prefix("npu").and_then(digits_prefix) {
                    map.rngd.entry(n).or_default().push(p.to_path_buf());
                }
                continue;
            }
            "nvidia-caps" => {
                if file.starts_with("nvidia-cap") {
                    map.nvidia_shared.push(p.to_path_buf());
                }
                continue;
            }
            _ => {}
        }
        if let Some(rest) = file.strip_prefix("nvidia") {
            match digits_prefix(rest) {
                Some((n, "")) => {
                    map.gpus.insert(n, p.to_path_buf());
                }
                _ if matches!(rest, "ctl" | "-uvm" | "-uvm-tools" | "-modeset") => {
                    map.nvidia_shared.push(p.to_path_buf())
                }
                _ => {}
            }
        } else if let Some((n, "")) = file.strip_prefix("rbln").and_then(digits_prefix) {
            map.rbln.insert(n, p.to_path_buf());
        }
    }
    map.nvidia_shared.sort();
    for nodes in map.rngd.values_mut() {
        nodes.sort();
    }
    map
}

/// Lists the accelerator nodes present under `dev_root` (normally `/dev`): its
/// `nvidia*` and `rbln*` entries, and `nvidia-caps/*` and `rngd/*`.
pub fn scan(dev_root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let list = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    };
    for p in list(dev_root) {
        let name = p.file_name().and_then(|f| f.to_str()).unwrap_or("");
        if (name.starts_with("nvidia") || name.starts_with("rbln")) && !p.is_dir() {
            out.push(p);
        }
    }
    out.extend(list(&dev_root.join("nvidia-caps")));
    out.extend(list(&dev_root.join("rngd")));
    out.sort();
    out
}
