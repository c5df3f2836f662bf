//! The one place a check's value and bounds become words. It matches on
//! [`Metric`], never on the metric's name, so a new metric is a compile error
//! here until it says how it reads.

use serde_json::Value;

use crate::record::check::CheckDetail;
use crate::record::check_record::{Bounds, CheckValue};
use crate::record::plan::Metric;
use crate::record::run::CheckRecord;
use crate::report::format::{json_value, number, percent};

/// Where a value is read: `Bare` in the checks table and in bounds (the number
/// alone), `Worded` in the summary ("none", "N of M slots", "N non-finite").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Words {
    Bare,
    Worded,
}

/// A check's measured value as every report states it.
pub fn of(c: &CheckRecord, words: Words) -> String {
    match words {
        Words::Bare => value(c.metric, &c.value, None, words),
        Words::Worded => value(c.metric, &c.value, c.found(), words),
    }
}

/// A value of `metric`; `found` is the check's detail, read for the counts a
/// worded value names.
pub fn value(metric: Metric, v: &CheckValue, found: Option<&CheckDetail>, words: Words) -> String {
    if words == Words::Bare {
        return bare(metric, &v.to_json());
    }
    match metric {
        Metric::RelRms => v.finite().map_or_else(|| v.to_string(), percent),
        Metric::FirstDivergence => match v {
            CheckValue::Null => "none".to_string(),
            _ => format!("at index {v}"),
        },
        Metric::SlotsExact => match found {
            Some(CheckDetail::SlotsExact(d)) => format!("{v} of {} slots", d.slots),
            _ => v.to_string(),
        },
        Metric::BitExact => match (v, found) {
            (CheckValue::Count(n), Some(CheckDetail::BitExactAcross(d))) => {
                format!("{n} of {} identical", d.files)
            }
            _ => v.to_string(),
        },
        Metric::Finite => format!("{v} non-finite"),
        Metric::MaxAbs | Metric::Shape => v.finite().map_or_else(|| v.to_string(), number),
    }
}

/// A value as JSON holds it (a bound's too), the number alone.
fn bare(metric: Metric, v: &Value) -> String {
    match v.as_f64() {
        Some(x) if is_ratio(metric) => percent(x),
        Some(x) => number(x),
        None => json_value(v),
    }
}

/// Whether the metric's values are fractions, stated as percentages.
fn is_ratio(metric: Metric) -> bool {
    match metric {
        Metric::RelRms => true,
        Metric::BitExact
        | Metric::MaxAbs
        | Metric::Finite
        | Metric::Shape
        | Metric::FirstDivergence
        | Metric::SlotsExact => false,
    }
}

/// A check's bounds in the units of its value: `{"max": 0.01}` -> `≤ 1.00%` for a
/// ratio; `-` without bounds.
pub fn threshold(metric: Metric, bounds: Option<&Bounds>) -> String {
    let Some(b) = bounds else {
        return "-".to_string();
    };
    let mut parts = Vec::new();
    let json = b.to_json();
    for (key, sign) in [("equals", "="), ("max", "≤"), ("min", "≥")] {
        if let Some(x) = json.get(key) {
            parts.push(format!("{sign} {}", bare(metric, x)));
        }
    }
    if parts.is_empty() {
        return "-".to_string();
    }
    parts.join(", ")
}
