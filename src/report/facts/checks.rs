//! A check's verdict, value and threshold as words.

#[allow(unused_imports)]
use super::*;

pub(super) fn checks_for<'a>(
    rec: &'a Record,
    attr: &Attribution,
    pred: impl Fn(&CheckRecord, &crate::report::attribution::CheckInputs) -> bool,
) -> Vec<&'a CheckRecord> {
    rec.comparisons
        .iter()
        .filter(|c| pred(c, &attr.of(c)))
        .collect()
}

pub(super) fn pass(c: &CheckRecord) -> &'static str {
    if c.passed {
        "pass"
    } else {
        "FAIL"
    }
}

pub(super) fn num(v: &serde_json::Value) -> Option<f64> {
    v.as_f64()
}

/// A check's value as every report states it: relative RMS as a percentage, other
/// numbers with four significant digits, integers whole.
pub(super) fn check_value(metric: &str, v: &serde_json::Value) -> String {
    match v.as_f64() {
        Some(x) if metric == "rel_rms" => percent(x),
        Some(x) if v.is_number() => crate::report::format::number(x),
        _ => json_value(v),
    }
}

/// A check's threshold in the same units as its value.
pub(super) fn check_threshold(metric: &str, v: &serde_json::Value) -> String {
    match v.as_object() {
        Some(obj) if !obj.is_empty() => obj
            .iter()
            .map(|(k, x)| {
                let x = check_value(metric, x);
                match k.as_str() {
                    "max" => format!("≤ {x}"),
                    "min" => format!("≥ {x}"),
                    "equals" => format!("= {x}"),
                    other => format!("{other} {x}"),
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        _ => crate::report::format::threshold(v),
    }
}

/// Every check with value and threshold in the same words, for the checks table.
pub(super) fn check_lines(rec: &Record) -> Vec<CheckLine> {
    rec.comparisons
        .iter()
        .map(|c| CheckLine {
            step: c.step.clone(),
            name: c.name.clone(),
            metric: c.metric.clone(),
            value: check_value(&c.metric, &c.value),
            threshold: check_threshold(&c.metric, &c.threshold),
            passed: c.passed,
            error: c.error.clone(),
        })
        .collect()
}
