//! The run's header in the record: what was asked (plan, options, devices,
//! matrix), on what (host, isolation, pins, revisions), and the steps as declared.

use std::path::Path;
use std::time::Duration;

use super::RunArgs;
use crate::evidence::record::{
    self, DeclaredStep, HostInfo, OrchestratorInfo, PlanInfo, RunHeader, RunOptionsInfo,
};
use crate::isolate::{Isolator, Mode};
use crate::pins::{PinReport, SourceRole};
use crate::plan::Plan;

/// What the header is made of.
pub(super) struct Inputs<'a> {
    pub plan: &'a Plan,
    pub args: &'a RunArgs,
    pub pins: &'a PinReport,
    pub inventory: &'a crate::devices::Inventory,
    pub host: HostInfo,
    pub jobs: u32,
    pub mode: Mode,
    pub budget: u64,
    pub work_dir: &'a Path,
    pub run_timeout: Option<Duration>,
    pub isolator: &'a Isolator,
    pub revisions: Vec<crate::pins::revisions::RevisionRecord>,
}

pub(super) fn run_header(h: &Inputs<'_>) -> RunHeader {
    RunHeader {
        orchestrator: OrchestratorInfo {
            version: env!("CARGO_PKG_VERSION").to_string(),
            // Hashed once, by pins (the record's source hashes).
            binary_sha256: source_sha256(h.pins, SourceRole::Binary),
        },
        plan: plan_info(h),
        host: h.host.clone(),
        options: options(h),
        isolation: record::IsolationRecord {
            info: h.isolator.describe(),
            warnings: h.isolator.warnings().to_vec(),
        },
        pins: h.pins.clone(),
        revisions: h.revisions.clone(),
        steps: declared_steps(h.plan),
    }
}

fn source_sha256(pins: &PinReport, role: SourceRole) -> Option<String> {
    pins.sources
        .iter()
        .find(|s| s.role == role)
        .map(|s| s.digest.trim_start_matches("sha256:").to_string())
}

fn plan_info(h: &Inputs<'_>) -> PlanInfo {
    let (plan, args, inventory) = (h.plan, h.args, h.inventory);
    PlanInfo {
        name: plan.name.clone(),
        description: plan.description.clone(),
        changes: plan.changes.clone(),
        path: args.plan.display().to_string(),
        sha256: source_sha256(h.pins, SourceRole::Plan).unwrap_or_default(),
        limits: super::plan_limits(plan),
        devices: record::PlanDevices {
            requests: plan
                .devices
                .iter()
                .map(|(k, r)| {
                    let req = record::DeviceRequestRecord {
                        kind: r.kind.clone(),
                        count: r.count,
                        cores: r.cores,
                        ids: r.ids.clone(),
                        simulate: r.simulate || plan.allow_simulated,
                        mig: r.mig.clone(),
                    };
                    (k.clone(), req)
                })
                .collect(),
            inventory: inventory.devices.clone(),
        },
        matrix: (!plan.matrix.is_empty()).then(|| record::MatrixInfo {
            axes: plan
                .matrix
                .axes
                .iter()
                .map(|a| record::MatrixAxisInfo {
                    name: a.name.clone(),
                    values: a
                        .values
                        .iter()
                        .map(crate::plan::matrix::value_text)
                        .collect(),
                })
                .collect(),
            cells: plan.matrix.cells.len() as u32,
        }),
        cell_title: plan.report.cell_title.clone(),
        noise: plan.report.noise,
    }
}

fn options(h: &Inputs<'_>) -> RunOptionsInfo {
    let (args, jobs, mode, budget, work_dir) = (h.args, h.jobs, h.mode, h.budget, h.work_dir);
    RunOptionsInfo {
        jobs,
        keep_going: args.keep_going,
        isolation: mode.as_str().to_string(),
        records: args.records.display().to_string(),
        work: work_dir.display().to_string(),
        memory_budget_bytes: budget,
        run_timeout_ms: h.run_timeout.map(|d| d.as_millis() as u64),
        overrides: args
            .load
            .set
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        only: args
            .load
            .only
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
    }
}

fn declared_steps(plan: &Plan) -> Vec<DeclaredStep> {
    let groups = crate::sched::interleave_groups(plan);
    plan.steps
        .iter()
        .enumerate()
        .map(|(i, s)| DeclaredStep {
            id: s.id.0.clone(),
            kind: s.kind,
            needs: s.needs.iter().map(|n| n.0.clone()).collect(),
            devices: s.devices.clone(),
            repeats: s.repeats,
            warmup: s.warmup,
            memory_bytes: plan.memory_of(s).map(|b| b.0),
            timeout_ms: plan.timeout_of(s).map(|d| d.as_millis() as u64),
            report_metric: s.report.metric.clone(),
            dispersion: s.report.dispersion,
            better: s.report.better,
            threshold: s.report.threshold,
            template: s.cell.as_ref().map(|(t, _)| t.0.clone()),
            cell: s
                .cell
                .iter()
                .flat_map(|(_, c)| c.iter())
                .map(|(axis, value)| record::CellValue {
                    axis: axis.clone(),
                    value: value.clone(),
                })
                .collect(),
            retries: s.retries,
            gate_new: s.gate == crate::plan::GateMode::New,
            interleaved_with: groups
                .iter()
                .find(|g| g[1..].contains(&i))
                .map(|g| plan.steps[g[0]].id.0.clone()),
            exclusive: s.runs_alone(),
        })
        .collect()
}
