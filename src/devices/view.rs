//! `orchestrate devices`: the inventory and who holds what, per device and core.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::audit::{audit_leases, LeaseStatus};
use super::holder::{Holder, StaleReason};
use super::model::Inventory;

/// One core's lease as the lock file shows it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CoreLease {
    pub core: u32,
    /// `held` or `stale` (free cores are not listed).
    pub state: String,
    pub holder: Option<Holder>,
    /// Why a stale lease is stale.
    pub reason: Option<StaleReason>,
}

impl CoreLease {
    /// Who holds it, in words. The lock is taken before its holder writes its
    /// name, so a held lease seen in between is held by someone not named yet; a
    /// stale one without a readable name has an unknown holder.
    pub fn holder_words(&self) -> String {
        match &self.holder {
            Some(h) => h.describe(),
            None if self.state == "held" => "a holder not named yet".into(),
            None => "an unknown holder".into(),
        }
    }
}

/// One device of the inventory and its leases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceView {
    pub id: String,
    pub kind: String,
    pub index: u32,
    pub cores: u32,
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub dev_nodes: Vec<PathBuf>,
    pub simulated: bool,
    /// Memory in bytes, where known.
    pub memory_bytes: Option<u64>,
    /// Driver version, where known.
    pub driver: Option<String>,
    /// What NVML tells of an NVIDIA GPU (bus id, CUDA version, MIG mode).
    pub gpu: Option<crate::record::devices::GpuFacts>,
    /// Where the inventory got it (a file and line, a vendor tool, `/dev`).
    pub source: String,
    /// Held or stale cores, ascending.
    pub leases: Vec<CoreLease>,
}

/// The inventory with current holders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DevicesView {
    pub lease_dir: PathBuf,
    pub devices: Vec<DeviceView>,
    /// Lock files naming devices the inventory lacks (simulated devices of the runs
    /// holding them, or devices gone from it), one line each.
    pub other_leases: Vec<String>,
    /// Inventory warnings.
    pub warnings: Vec<String>,
    /// What could not be read (the lease folder).
    pub errors: Vec<String>,
}

/// The devices of `inv` and the leases in `lease_dir` on them.
pub fn describe_devices(inv: &Inventory, lease_dir: &Path) -> DevicesView {
    let mut view = DevicesView {
        lease_dir: lease_dir.to_path_buf(),
        devices: inv
            .with_sources()
            .map(|(d, source)| DeviceView {
                id: d.id.clone(),
                kind: d.kind.clone(),
                index: d.index,
                cores: d.cores,
                uuid: d.uuid.clone(),
                name: d.name.clone(),
                dev_nodes: d.dev_nodes.clone(),
                simulated: d.simulated,
                memory_bytes: d.memory_bytes,
                driver: d.driver.clone(),
                gpu: d.gpu.clone(),
                source: source.to_string(),
                leases: Vec::new(),
            })
            .collect(),
        other_leases: Vec::new(),
        warnings: inv.warnings.clone(),
        errors: Vec::new(),
    };
    let states = match audit_leases(lease_dir) {
        Ok(s) => s,
        Err(e) => {
            view.errors.push(format!("cannot read leases: {e}"));
            return view;
        }
    };
    for st in states {
        let lease = match st.status {
            LeaseStatus::Free => continue,
            LeaseStatus::Held { holder } => CoreLease {
                core: st.core,
                state: "held".into(),
                holder,
                reason: None,
            },
            LeaseStatus::Stale { holder, reason } => CoreLease {
                core: st.core,
                state: "stale".into(),
                holder,
                reason: Some(reason),
            },
        };
        match view.devices.iter_mut().find(|d| d.id == st.device) {
            Some(d) => d.leases.push(lease),
            None => {
                // Simulated devices live only in the runs that made them.
                let (what, tail) = if st.device.starts_with("sim-") {
                    ("simulated device", ", which simulates it")
                } else {
                    ("not in the inventory:", "")
                };
                view.other_leases.push(format!(
                    "{what} {} core {}: {} by {}{}",
                    st.device,
                    st.core,
                    lease.state,
                    lease.holder_words(),
                    if lease.holder.is_some() { tail } else { "" }
                ));
            }
        }
    }
    for d in &mut view.devices {
        d.leases.sort_by_key(|l| l.core);
    }
    view
}

/// The view for a person: one line per device, then one per held or stale core.
pub fn render_text(v: &DevicesView) -> String {
    let mut out = String::new();
    if v.devices.is_empty() {
        out.push_str("no devices (declare them in /etc/orchestrate/devices.toml or --inventory)\n");
    }
    for d in &v.devices {
        let uuid = d
            .uuid
            .as_deref()
            .map(|u| format!(" {u}"))
            .unwrap_or_default();
        let sim = if d.simulated { " simulated" } else { "" };
        let nodes = if d.dev_nodes.is_empty() {
            String::new()
        } else {
            let n: Vec<String> = d
                .dev_nodes
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            format!(" [{}]", n.join(" "))
        };
        let busy = if d.leases.is_empty() {
            "free".to_string()
        } else {
            format!("{} of {} core(s) leased", d.leases.len(), d.cores)
        };
        let gpu = d
            .gpu
            .as_ref()
            .map(|g| format!(" MIG {}", g.mig.as_str()))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{} ({}{sim}, index {}, {} core(s)){uuid}{gpu}{nodes} from {}: {busy}",
            d.id, d.kind, d.index, d.cores, d.source
        );
        for (i, m) in d.gpu.iter().flat_map(|g| &g.instances).enumerate() {
            let _ = writeln!(out, "  core {i}: MIG instance {} ({})", m.uuid, m.profile);
        }
        for l in &d.leases {
            let who = l.holder_words();
            let why = l.reason.map(|r| format!(" ({r:?})")).unwrap_or_default();
            let _ = writeln!(out, "  core {}: {} by {who}{why}", l.core, l.state);
        }
    }
    for o in &v.other_leases {
        let _ = writeln!(out, "lease on {o}");
    }
    for w in &v.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    for e in &v.errors {
        let _ = writeln!(out, "error: {e}");
    }
    let _ = writeln!(out, "leases in {}", v.lease_dir.display());
    out
}
