//! What a run checks and gathers before it takes anything: the plan loaded and
//! fitted to its backends, pins observed (drift refuses), devices this host
//! serves, isolation, and the memory budget.

use std::sync::Arc;
use std::time::Duration;

use super::{check_budget, host_info, isolator_for, local_devices, pins, RunArgs, RunError};
use crate::evidence::record::HostInfo;
use crate::isolate::{Isolator, Mode};
use crate::plan::Plan;

/// What [`preflight`] found; nothing of the host is taken yet.
pub(super) struct Preflight {
    pub plan: Arc<Plan>,
    pub pins: crate::pins::PinReport,
    pub gres_warnings: Vec<String>,
    pub inventory: crate::devices::Inventory,
    pub lease_manager: Option<crate::devices::LeaseManager>,
    pub mode: Mode,
    pub isolator: Arc<Isolator>,
    pub host: HostInfo,
    pub budget: u64,
}

/// Load, fit and check what the run needs before it starts.
pub(super) fn preflight(args: &RunArgs) -> Result<Preflight, RunError> {
    let mut loaded = crate::plan::load_with(&args.plan, &args.load)?;
    let gres_warnings = fit_remote_devices(&mut loaded, args.backend)?;
    if !matches!(args.mode, super::RunMode::Attached) {
        detachable(&loaded, args.backend)?;
    }
    let plan = Arc::new(loaded);
    // Pins and inputs that did not change are not hashed again.
    let pins = pins::observe(&plan, &super::cache_root(args), true);
    if pins.has_drift() && !args.allow_drift {
        return Err(RunError::Refused(format!(
            "pins drifted; nothing was run (use --allow-drift to run and record the drift):\n{}",
            crate::pins::drift_table(&pins)
        )));
    }
    use crate::plan::model::BackendKind;
    let elsewhere = |s: &crate::plan::Step| plan.backend_of(s, args.backend) != BackendKind::Local;
    let (inventory, lease_manager) = local_devices(&plan, args, &elsewhere)?;
    let (mode, isolator) = isolator_for(args, &plan)?;
    let host = host_info();
    let budget = args.memory_budget.unwrap_or(host.memory_bytes);
    check_budget(&plan, budget, &elsewhere)?;
    // Clean what dead runs left before taking anything ourselves.
    for r in &isolator.sweep(&crate::sched::is_stale_cgroup) {
        tracing::warn!("removed a cgroup left by a dead run: {r}");
    }
    Ok(Preflight {
        plan,
        pins,
        gres_warnings,
        inventory,
        lease_manager,
        mode,
        isolator,
        host,
        budget,
    })
}

/// What a detached run cannot do, named before anything is taken: a step that
/// runs on this host (but a compare step, which runs when the run is collected),
/// a retry, a comparison of revisions (each needs this orchestrator alive).
fn detachable(plan: &Plan, cli: Option<crate::plan::model::BackendKind>) -> Result<(), RunError> {
    use crate::plan::model::BackendKind;
    let named = |f: &dyn Fn(&crate::plan::Step) -> bool| {
        plan.steps
            .iter()
            .filter(|s| f(s))
            .map(|s| format!("`{}`", s.id))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let here = named(&|s| {
        s.kind != crate::plan::StepKind::Compare && plan.backend_of(s, cli) == BackendKind::Local
    });
    let retried = named(&|s| s.retries > 0);
    let mut why = Vec::new();
    if !here.is_empty() {
        why.push(format!(
            "steps that run on this host cannot be detached (they need the orchestrator while they run): {here}"
        ));
    }
    if !retried.is_empty() {
        why.push(format!(
            "steps with `retries` cannot be detached (a retry is submitted by the orchestrator): {retried}"
        ));
    }
    if !plan.revisions.is_empty() {
        why.push("a plan that compares revisions cannot be detached (its checkouts are made and removed by the orchestrator)".into());
    }
    match why.is_empty() {
        true => Ok(()),
        false => Err(RunError::Refused(format!("--detach: {}", why.join("; ")))),
    }
}

/// Each remote backend fits the device kinds of the steps sent to it to what it
/// offers (in its own options); the warnings to say.
fn fit_remote_devices(
    plan: &mut Plan,
    cli: Option<crate::plan::model::BackendKind>,
) -> Result<Vec<String>, RunError> {
    let mut warnings = Vec::new();
    for kind in crate::plan::model::BackendKind::ALL {
        let wanted: std::collections::BTreeSet<String> = plan
            .steps
            .iter()
            .filter(|s| plan.backend_of(s, cli) == kind)
            .flat_map(|s| s.devices.iter())
            .filter_map(|d| plan.devices.get(d).map(|r| r.kind.clone()))
            .collect();
        let allow = plan.allow_simulated;
        warnings.extend(
            crate::backend::fit_devices(kind, &wanted, &mut plan.backend, allow)
                .map_err(RunError::Refused)?,
        );
    }
    Ok(warnings)
}

/// The lease broker of a run that leases devices on this host.
pub(super) fn broker(
    manager: Option<crate::devices::LeaseManager>,
    inventory: crate::devices::Inventory,
    plan: &Arc<Plan>,
    wait: Duration,
) -> Option<Arc<dyn crate::sched::DeviceBroker>> {
    manager.map(|manager| {
        Arc::new(super::leases::LeaseBroker {
            manager,
            inventory,
            plan: Arc::clone(plan),
            wait,
        }) as Arc<dyn crate::sched::DeviceBroker>
    })
}
