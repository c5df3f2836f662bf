//! The scheduler's device broker over `devices`: a step's requests are leased all or
//! none, told to the step through its environment, and released when it ends.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::devices::{self, Grant, Inventory, LeaseManager, Owner, Request};
use crate::evidence::record::Allocation;
use crate::plan::{Plan, Step};
use crate::sched::{self, DeviceBroker, DeviceLease};

pub(crate) struct LeaseBroker {
    pub manager: LeaseManager,
    pub inventory: Inventory,
    pub plan: Arc<Plan>,
    pub wait: Duration,
}

/// The plan's request named `name`, as `devices` understands it.
pub(crate) fn request(plan: &Plan, name: &str) -> Option<Request> {
    plan.devices
        .get(name)
        .map(|r| Request::from_plan(name, r, plan.allow_simulated))
}

/// The real GPUs among `units`, by the UUID CUDA is given: each MIG instance
/// granted, else the whole GPU. Simulated GPUs and GPUs without a UUID have
/// nothing to watch.
fn gpu_watches(units: &[devices::GrantedDevice]) -> Vec<crate::contract::GpuWatch> {
    let mut out = Vec::new();
    for u in units
        .iter()
        .filter(|u| u.device.kind == "gpu" && !u.device.simulated)
    {
        let Some(gpu_uuid) = u.device.uuid.clone() else {
            continue;
        };
        let mut uuids = u.mig_uuids();
        if uuids.is_empty() {
            uuids.push(gpu_uuid.clone());
        }
        out.extend(uuids.into_iter().map(|uuid| crate::contract::GpuWatch {
            device: u.device.id.clone(),
            uuid,
            gpu_uuid: gpu_uuid.clone(),
        }));
    }
    out
}

/// One allocation per granted unit, `released_at` still unset (set on release).
fn allocations(g: &Grant, step: &str) -> Vec<Allocation> {
    g.units
        .iter()
        .map(|u| Allocation {
            lease: format!(
                "{}:{}",
                u.device.id,
                u.cores
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            request: g.request.clone(),
            step: step.to_string(),
            device: u.device.id.clone(),
            kind: u.device.kind.clone(),
            uuid: u.device.uuid.clone(),
            cores: u.cores.clone(),
            whole_device: u.whole(),
            simulated: u.device.simulated,
            granted_at: crate::time::rfc3339(&g.granted_at),
            released_at: None,
            release_error: None,
        })
        .collect()
}

impl DeviceBroker for LeaseBroker {
    fn acquire(
        &self,
        run_id: &str,
        step: &Step,
        stop: &crate::sys::Stop,
    ) -> Result<DeviceLease, sched::LeaseError> {
        let owner = Owner {
            run_id: run_id.to_string(),
            step: Some(step.id.0.clone()),
        };
        let mut names = step.devices.clone();
        names.sort();
        names.dedup();
        let mut grants: Vec<Grant> = Vec::new();
        for name in &names {
            let Some(req) = request(&self.plan, name) else {
                return Err(sched::LeaseError::UnknownRequest {
                    step: step.id.0.clone(),
                    name: name.clone(),
                });
            };
            let step_id = step.id.0.clone();
            let mut on_wait = |holders: &[devices::Holder]| {
                let who: Vec<String> = holders.iter().map(|h| h.describe()).collect();
                eprintln!(
                    "waiting for devices of `{name}` for step `{step_id}`: held by {}",
                    who.join("; ")
                );
            };
            match self.manager.acquire_until(
                &req,
                &self.inventory,
                &owner,
                self.wait,
                &mut on_wait,
                stop,
            ) {
                Ok(g) => grants.push(g),
                Err(e) => {
                    for g in grants {
                        let _ = g.release();
                    }
                    return Err(e.into());
                }
            }
        }
        let units: Vec<devices::GrantedDevice> = grants
            .iter()
            .flat_map(|g| g.units.iter().cloned())
            .collect();
        let env = devices::step_env(&units);
        let mut dev_nodes: Vec<PathBuf> = grants.iter().flat_map(|g| g.dev_nodes.clone()).collect();
        dev_nodes.sort();
        dev_nodes.dedup();
        let sid = step.id.0.clone();
        let per_grant: Vec<Vec<Allocation>> = grants.iter().map(|g| allocations(g, &sid)).collect();
        let granted: Vec<Allocation> = per_grant.iter().flatten().cloned().collect();
        let release = Box::new(move || {
            let mut out = Vec::new();
            for (g, before) in grants.into_iter().zip(per_grant) {
                let released = g.release();
                for mut a in before {
                    match &released {
                        Ok(t) => a.released_at = Some(crate::time::rfc3339(t)),
                        Err(e) => a.release_error = Some(e.to_string()),
                    }
                    out.push(a);
                }
            }
            out
        });
        Ok(DeviceLease {
            env,
            dev_nodes,
            gpus: gpu_watches(&units),
            npus: units
                .iter()
                .filter(|u| matches!(u.device.kind.as_str(), "rngd" | "warboy" | "atom"))
                .filter(|u| !u.device.simulated)
                .map(|u| crate::contract::NpuWatch {
                    device: u.device.id.clone(),
                    kind: u.device.kind.clone(),
                    index: u.device.index,
                })
                .collect(),
            allocations: granted,
            release,
        })
    }
}
