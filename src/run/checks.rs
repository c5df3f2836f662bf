//! The scheduler's check runner over `compare`: a plan check with its inputs resolved
//! to paths becomes a `CheckSpec`, and its result a record entry.

use crate::compare::{self, CheckInputs, CheckSpec};
use crate::evidence::record::{CheckInputsRecord, CheckRecord, CheckValue};
use crate::plan::{Check, Metric, Template};
use crate::sched::{CheckRunner, ResolvedCheck};

pub(crate) struct CompareChecks;

fn spec(check: &Check, r: &ResolvedCheck) -> Result<CheckSpec, String> {
    let inputs = if check.across.is_some() {
        CheckInputs::Across {
            files: r.across.clone(),
        }
    } else {
        match (&r.actual, &r.expected) {
            (Some(a), Some(e)) => CheckInputs::Pair {
                actual: a.clone(),
                expected: e.clone(),
                actual_logits: r.actual_logits.clone(),
                expected_logits: r.expected_logits.clone(),
            },
            (Some(a), None) => CheckInputs::Single { actual: a.clone() },
            _ => return Err(format!("check `{}` has no input to read", check.name)),
        }
    };
    // For `shape`, a declared `shape` (without `equals`) is the expected shape.
    let (shape, equals) = match (check.metric, &check.equals, &check.shape) {
        (Metric::Shape, None, Some(s)) => (None, Some(serde_json::json!(s))),
        _ => (check.shape.clone(), check.equals.clone()),
    };
    Ok(CheckSpec {
        name: check.name.clone(),
        metric: check.metric,
        inputs,
        axis: check.axis,
        dtype: check.dtype.clone(),
        shape,
        max: check.max,
        min: check.min,
        equals,
    })
}

/// The steps a check reads, from its (expanded) templates.
fn inputs_of(check: &Check) -> CheckInputsRecord {
    let ids = |ts: [&Option<Template>; 2]| -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for id in ts.into_iter().flatten().flat_map(|t| t.step_refs()) {
            if !v.contains(&id.0) {
                v.push(id.0.clone());
            }
        }
        v
    };
    let file = check.file.clone().or_else(|| {
        let raw = &check.actual.as_ref()?.raw;
        raw.find("}/").map(|i| raw[i + 2..].to_string())
    });
    CheckInputsRecord {
        across: check.across.iter().map(|a| a.0.clone()).collect(),
        actual: ids([&check.actual, &check.actual_logits]),
        expected: ids([&check.expected, &check.expected_logits]),
        file,
    }
}

impl CheckRunner for CompareChecks {
    fn run(&self, step: &str, check: &Check, inputs: &ResolvedCheck) -> CheckRecord {
        let metric = check.metric;
        match spec(check, inputs) {
            Ok(spec) => {
                let r = compare::run_check(&spec);
                CheckRecord {
                    step: step.to_string(),
                    name: r.name,
                    metric,
                    value: r.value,
                    threshold: r.threshold,
                    passed: r.passed,
                    detail: r.detail,
                    error: r.error,
                    inputs: Some(inputs_of(check)),
                }
            }
            Err(e) => CheckRecord {
                step: step.to_string(),
                name: check.name.clone(),
                metric,
                value: CheckValue::Null,
                threshold: None,
                passed: false,
                detail: None,
                error: Some(e),
                inputs: Some(inputs_of(check)),
            },
        }
    }
}
