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

/// Every check with value and threshold in the same words, for the checks table.
pub(super) fn check_lines(rec: &Record) -> Vec<CheckLine> {
    rec.comparisons
        .iter()
        .map(|c| CheckLine {
            step: c.step.clone(),
            name: c.name.clone(),
            metric: c.metric,
            value: check_value::of(c, Words::Bare),
            threshold: check_value::threshold(c.metric, c.threshold.as_ref()),
            passed: c.passed,
            error: c.error.clone(),
        })
        .collect()
}
