//! The JSON summary: what a dashboard or a script needs from a run, in a stable shape.

use serde::Serialize;

use super::{error::ReportError, facts, Input, Renderer};
use crate::record::run::Stats;

/// Renders the JSON summary (pretty, newline-terminated).
pub struct JsonRenderer;

#[derive(Serialize)]
struct Summary<'a> {
    run_id: &'a str,
    status: &'a str,
    reason: Option<&'a str>,
    plan: &'a str,
    record_sha256: &'a str,
    steps: Vec<StepSummary<'a>>,
    comparisons: Vec<CheckSummary<'a>>,
    drift: Vec<facts::PinLine>,
    simulated_devices: Vec<String>,
    failures: usize,
    release: facts::Release,
}

#[derive(Serialize)]
struct StepSummary<'a> {
    id: &'a str,
    kind: &'a str,
    status: &'a str,
    attempts: usize,
    warmups: usize,
    wall_ms: Option<Stats>,
}

#[derive(Serialize)]
struct CheckSummary<'a> {
    step: &'a str,
    name: &'a str,
    metric: &'a str,
    value: serde_json::Value,
    threshold: serde_json::Value,
    passed: bool,
    error: Option<&'a str>,
}

impl Renderer for JsonRenderer {
    fn render(&self, input: &Input<'_>) -> Result<String, ReportError> {
        let rec = input.record;
        let f = facts::facts(rec, input.digest, input.attribution);
        let s = Summary {
            run_id: &rec.run_id,
            status: rec.status.as_str(),
            reason: rec.reason.as_deref(),
            plan: &rec.run.plan.name,
            record_sha256: input.digest,
            steps: rec
                .steps
                .iter()
                .map(|s| StepSummary {
                    id: &s.id,
                    kind: s.kind.as_str(),
                    status: s.status.as_str(),
                    attempts: s.attempts.iter().filter(|a| !a.warmup).count(),
                    warmups: s.attempts.iter().filter(|a| a.warmup).count(),
                    wall_ms: s.wall_ms,
                })
                .collect(),
            comparisons: rec
                .comparisons
                .iter()
                .map(|c| CheckSummary {
                    step: &c.step,
                    name: &c.name,
                    metric: c.metric.as_str(),
                    value: c.value.to_json(),
                    threshold: c.threshold_json(),
                    passed: c.passed,
                    error: c.error.as_deref(),
                })
                .collect(),
            drift: f.drift,
            simulated_devices: f
                .devices
                .iter()
                .filter(|d| d.simulated)
                .map(|d| d.device.clone())
                .collect(),
            failures: rec.failures.len(),
            release: f.release,
        };
        let mut out =
            serde_json::to_string_pretty(&s).map_err(|e| ReportError::Serialize(e.to_string()))?;
        out.push('\n');
        Ok(out)
    }
}
