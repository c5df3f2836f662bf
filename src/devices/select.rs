//! Which units (device, core) may serve a request.
//!
//! A request for `count` devices with `cores = k` may take, on each of `count`
//! distinct devices, one aligned range of `k` cores (`0..k`, `k..2k`, ...); without
//! `cores` it takes whole devices. Instead of listing every combination (C(8,4)·8⁴
//! sets for four single cores of eight RNGDs), [`Candidates`] lists per device its
//! slots; the lease manager walks them in the global order and takes the first free
//! slot of the first `count` devices that have one, which finds a free set whenever
//! one exists.

use serde::Serialize;

use super::error::DeviceError;
use super::model::{default_cores, simulated_device, Device, Inventory, Request};

/// What to write in `Missing::how_to_declare`.
pub const HOW_TO_DECLARE: &str = "add `allow_simulated = true` to the plan or declare the \
     device in /etc/orchestrate/devices.toml";

/// One eligible device and the core ranges (slots) it could give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceOption {
    pub device: Device,
    /// Each slot is a contiguous, aligned, ascending list of core indices.
    pub slots: Vec<Vec<u32>>,
}

/// The candidate sets for one request: any `count` distinct options, one slot each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidates {
    pub request: String,
    pub count: u32,
    /// Sorted by device id: the global lock order.
    pub options: Vec<DeviceOption>,
    /// The options are simulated devices (the host lacks real ones).
    pub simulated: bool,
}

/// Core slots of `device` for `req`: `cores` per device (`None`: whole), or for a
/// MIG request each instance (one core) of the profile asked, or of the one the
/// request's ids name.
fn slots(device: &Device, req: &Request) -> Vec<Vec<u32>> {
    if let Some(profile) = &req.mig {
        let named_whole = req.ids.is_empty()
            || req
                .ids
                .iter()
                .any(|i| *i == device.id || device.uuid.as_deref() == Some(i.as_str()));
        return device
            .mig_instances()
            .iter()
            .enumerate()
            .filter(|(_, m)| profile == MIG_ANY || m.profile == *profile)
            .filter(|(_, m)| named_whole || req.ids.contains(&m.uuid))
            .map(|(i, _)| vec![i as u32])
            .collect();
    }
    match req.cores {
        None => vec![(0..device.cores).collect()],
        Some(k) => (0..device.cores / k)
            .map(|s| (s * k..(s + 1) * k).collect())
            .collect(),
    }
}

/// What a MIG request names to take an instance of any profile.
pub const MIG_ANY: &str = "any";

fn eligible(d: &Device, req: &Request, kind: &str, ids: &[String]) -> bool {
    let instances = d.mig_instances();
    d.kind == kind
        && req.cores.is_none_or(|k| k <= d.cores)
        && (req.mig.is_none() || !instances.is_empty())
        && (ids.is_empty()
            || ids.iter().any(|i| {
                *i == d.id
                    || d.uuid.as_deref() == Some(i.as_str())
                    || instances.iter().any(|m| m.uuid == *i)
            }))
}

/// The candidates for `req` in `inv`. Real devices are used when enough of them
/// match; otherwise, if the request may be simulated, simulated devices of the
/// inventory (restricted to `ids` when some name them) topped up with new ones
/// (`sim-<kind><n>`, default cores, at least `cores`); otherwise `Missing`. A request
/// is never served by a mix of real and simulated devices, so a grant is either
/// wholly real or wholly simulated.
pub fn units_for(inv: &Inventory, req: &Request) -> Result<Candidates, DeviceError> {
    let invalid = |reason: String| DeviceError::InvalidRequest {
        request: req.name.clone(),
        reason,
    };
    if req.cores == Some(0) {
        return Err(invalid("cores must be at least 1".into()));
    }
    if !req.ids.is_empty() && (req.ids.len() as u64) < u64::from(req.count) {
        return Err(invalid(format!(
            "it names {} device id(s) but wants {} devices",
            req.ids.len(),
            req.count
        )));
    }
    let kind = req.kind.trim().to_ascii_lowercase();
    let mut real: Vec<&Device> = inv
        .devices
        .iter()
        .filter(|d| !d.simulated && eligible(d, req, &kind, &req.ids))
        .collect();
    real.sort_by(|a, b| a.id.cmp(&b.id));
    let build = |devs: Vec<Device>, simulated: bool| Candidates {
        request: req.name.clone(),
        count: req.count,
        options: devs
            .into_iter()
            .map(|d| DeviceOption {
                slots: slots(&d, req),
                device: d,
            })
            .filter(|o| !o.slots.is_empty())
            .collect(),
        simulated,
    };
    if req.mig.is_some() {
        // Only GPUs with an instance of that profile can serve it.
        real.retain(|d| !slots(d, req).is_empty());
    }
    if real.len() as u64 >= u64::from(req.count) {
        return Ok(build(real.into_iter().cloned().collect(), false));
    }
    if let Some(profile) = &req.mig {
        return Err(DeviceError::MissingMig {
            profile: profile.clone(),
            wanted: req.count,
            found: real.len() as u32,
        });
    }
    if !req.simulate {
        return Err(DeviceError::Missing {
            kind,
            wanted: req.count,
            found: real.len() as u32,
            how_to_declare: HOW_TO_DECLARE.to_string(),
        });
    }
    // Ids that name simulated devices restrict the choice; ids naming real devices
    // the host lacks cannot, so they are ignored for the simulated fallback.
    let sim_ids: Vec<String> = req
        .ids
        .iter()
        .filter(|i| inv.devices.iter().any(|d| d.simulated && d.id == **i))
        .cloned()
        .collect();
    let mut sims: Vec<Device> = inv
        .devices
        .iter()
        .filter(|d| d.simulated && eligible(d, req, &kind, &sim_ids))
        .cloned()
        .collect();
    let mut n = 0u32;
    while (sims.len() as u64) < u64::from(req.count) {
        let mut d = simulated_device(&kind, n);
        n += 1;
        if inv.find(&d.id).is_some() {
            continue;
        }
        d.cores = req.cores.unwrap_or(0).max(default_cores(&kind));
        sims.push(d);
    }
    sims.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(build(sims, true))
}
