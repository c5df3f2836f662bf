//! The run summary an attestation carries as its predicate, typed and borrowed
//! from the record: written straight to canonical JSON, where a value tree of a
//! 100 000-cell run's steps would cost more than the record.

use serde::Serialize;

use crate::record::pins::{PinEntry, PinKind, PinStatus};
use crate::record::{Metric, Record, StepKind, StepRecord, Termination};

/// The predicate of one record (its JSON form is fixed: verify compares it).
#[derive(Serialize)]
pub struct Predicate<'a> {
    run_id: &'a str,
    status: &'static str,
    started_at: &'a str,
    ended_at: Option<&'a str>,
    orchestrator: Orchestrator<'a>,
    plan: Plan<'a>,
    pins: Vec<Pin<'a>>,
    devices: Vec<Device<'a>>,
    steps: Vec<Step<'a>>,
    comparisons: Vec<Comparison<'a>>,
    release_audit_passed: Option<bool>,
}

#[derive(Serialize)]
struct Orchestrator<'a> {
    version: &'a str,
    binary_sha256: Option<&'a str>,
}

#[derive(Serialize)]
struct Plan<'a> {
    name: &'a str,
    sha256: &'a str,
}

#[derive(Serialize)]
struct Pin<'a> {
    kind: &'a PinKind,
    name: &'a str,
    declared: Option<&'a str>,
    observed: Option<&'a str>,
    status: &'a PinStatus,
}

#[derive(Serialize)]
struct Device<'a> {
    device: &'a str,
    kind: &'a str,
    simulated: bool,
    step: &'a str,
}

#[derive(Serialize)]
struct Step<'a> {
    id: &'a str,
    kind: &'a StepKind,
    status: &'static str,
    attempts: Vec<Attempt<'a>>,
}

#[derive(Serialize)]
struct Attempt<'a> {
    attempt: u32,
    warmup: bool,
    termination: &'a Termination,
    exit_code: Option<i32>,
    signal: Option<i32>,
}

#[derive(Serialize)]
struct Comparison<'a> {
    step: &'a str,
    name: &'a str,
    metric: &'a Metric,
    value: serde_json::Value,
    passed: bool,
}

/// The run summary carried as the statement's predicate: enough to judge the run
/// without the record (the record itself is a subject for everything else).
pub fn predicate(rec: &Record) -> Predicate<'_> {
    Predicate {
        run_id: &rec.run_id,
        status: rec.status.as_str(),
        started_at: &rec.started_at,
        ended_at: rec.ended_at.as_deref(),
        orchestrator: Orchestrator {
            version: &rec.run.orchestrator.version,
            binary_sha256: rec.run.orchestrator.binary_sha256.as_deref(),
        },
        plan: Plan {
            name: &rec.run.plan.name,
            sha256: &rec.run.plan.sha256,
        },
        pins: rec.run.pins.entries.iter().map(pin).collect(),
        devices: rec
            .allocations
            .iter()
            .map(|a| Device {
                device: &a.device,
                kind: &a.kind,
                simulated: a.simulated,
                step: &a.step,
            })
            .collect(),
        steps: rec.steps.iter().map(step).collect(),
        comparisons: rec
            .comparisons
            .iter()
            .map(|c| Comparison {
                step: &c.step,
                name: &c.name,
                metric: &c.metric,
                value: c.value.to_json(),
                passed: c.passed,
            })
            .collect(),
        release_audit_passed: rec.release_audit.as_ref().map(|a| a.passed),
    }
}

fn pin(e: &PinEntry) -> Pin<'_> {
    Pin {
        kind: &e.kind,
        name: &e.name,
        declared: e.declared.as_deref(),
        observed: e.observed.as_deref(),
        status: &e.status,
    }
}

fn step(s: &StepRecord) -> Step<'_> {
    Step {
        id: &s.id,
        kind: &s.kind,
        status: s.status.as_str(),
        attempts: s
            .attempts
            .iter()
            .map(|a| Attempt {
                attempt: a.attempt,
                warmup: a.warmup,
                termination: &a.termination,
                exit_code: a.exit_code,
                signal: a.signal,
            })
            .collect(),
    }
}
