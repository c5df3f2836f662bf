//! The scheduler's check runner over `compare`: a plan check with its inputs resolved
//! to paths becomes a `CheckSpec`, and its result a record entry.

use crate::compare::{self, CheckInputs, CheckSpec};
use crate::evidence::record::CheckRecord;
use crate::plan::{Check, Metric};
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

impl CheckRunner for CompareChecks {
    fn run(&self, step: &str, check: &Check, inputs: &ResolvedCheck) -> CheckRecord {
        let metric = serde_json::to_value(check.metric)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        match spec(check, inputs) {
            Ok(spec) => {
                let r = compare::run_check(&spec);
                CheckRecord {
                    step: step.to_string(),
                    name: r.name,
                    metric,
                    value: r.value,
                    threshold: r.threshold.unwrap_or(serde_json::Value::Null),
                    passed: r.passed,
                    detail: r.detail,
                    error: r.error,
                }
            }
            Err(e) => CheckRecord {
                step: step.to_string(),
                name: check.name.clone(),
                metric,
                value: serde_json::Value::Null,
                threshold: serde_json::Value::Null,
                passed: false,
                detail: serde_json::Value::Null,
                error: Some(e),
            },
        }
    }
}
