//! One check of a compare step as the record keeps it: its metric, the value it
//! measured, the bounds it was held to and what it found, each typed. The JSON is
//! the one records have always had (`value` and `threshold` plain JSON, `detail`
//! the metric's shape beside the `metric` that tags it); reading it checks that
//! the detail is the shape its metric gives.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::check::{CheckDetail, Num};
use super::plan::Metric;

/// What a check measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum CheckValue {
    /// No value: the check could not run, or (`first_divergence`) nothing diverged.
    Null,
    /// Whether the inputs were identical (`bit_exact` of two files).
    Verdict(bool),
    /// A count or an index: identical files or slots, non-finite elements, the
    /// first divergent token.
    Count(u64),
    /// A measured ratio or difference (`rel_rms`, `max_abs`).
    Real(Num),
    /// A tensor's shape (`shape`).
    Shape(Vec<u64>),
}

impl CheckValue {
    /// The value as a finite number (NaN and the infinities are not numbers in
    /// the record either).
    pub fn finite(&self) -> Option<f64> {
        match self {
            CheckValue::Count(n) => Some(*n as f64),
            CheckValue::Real(Num(x)) if x.is_finite() => Some(*x),
            CheckValue::Null
            | CheckValue::Verdict(_)
            | CheckValue::Real(_)
            | CheckValue::Shape(_) => None,
        }
    }

    /// A count or index.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            CheckValue::Count(n) => Some(*n),
            _ => None,
        }
    }

    /// The value as the record on disk holds it (whole reals as integers, as the
    /// canonical form writes them), so a fresh record and a re-read one read alike.
    pub fn to_json(&self) -> Value {
        match self {
            CheckValue::Real(Num(x)) => on_disk(*x),
            other => serde_json::to_value(other).unwrap_or(Value::Null),
        }
    }
}

/// A float as the canonical record (RFC 8785) writes it: a whole number below
/// 2^53 as an integer, NaN and the infinities as strings.
fn on_disk(x: f64) -> Value {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
        Value::from(x as i64)
    } else {
        super::check::json_f64(x)
    }
}

/// The value as the record writes it (JSON).
impl std::fmt::Display for CheckValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_json())
    }
}

/// The bounds a check was held to (each absent when not given).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bounds {
    /// The value must equal this (numbers compare by value: 2 == 2.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Value>,
    /// The value must be at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Num>,
    /// The value must be at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Num>,
}

impl Bounds {
    /// Bounds when any is given.
    pub fn given(self) -> Option<Bounds> {
        (self != Bounds::default()).then_some(self)
    }

    /// The bounds as the record on disk holds them (see [`CheckValue::to_json`]).
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        if let Some(v) = &self.equals {
            m.insert("equals".into(), v.clone());
        }
        if let Some(Num(x)) = self.max {
            m.insert("max".into(), on_disk(x));
        }
        if let Some(Num(x)) = self.min {
            m.insert("min".into(), on_disk(x));
        }
        Value::Object(m)
    }
}

/// One check of a compare step.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CheckRecord {
    /// Id of the compare step the check belongs to.
    pub step: String,
    /// The check's name in the plan.
    pub name: String,
    /// The check's metric, as the plan spells it.
    pub metric: Metric,
    /// The measured value; non-finite numbers are the strings "NaN", "Infinity".
    pub value: CheckValue,
    /// The bounds given; null when none was given.
    #[serde(default)]
    pub threshold: Option<Bounds>,
    /// Whether the value met every given bound (without bounds, the metric's own
    /// verdict); false when the check could not run.
    pub passed: bool,
    /// Supporting facts (element counts, shapes, margins, differing files, ...), in
    /// the shape the metric gives; null when the check could not run.
    #[serde(default)]
    #[schemars(with = "Value")]
    pub detail: Option<CheckDetail>,
    /// Why the check could not run (an input unreadable, ...); absent when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The steps (cells) the check read, by role; absent in records made before
    /// it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<CheckInputsRecord>,
}

impl CheckRecord {
    /// What it found beyond its value; `None` when the check could not run.
    pub fn found(&self) -> Option<&CheckDetail> {
        self.detail.as_ref()
    }

    /// Its detail as the record writes it (null when the check could not run).
    pub fn detail_json(&self) -> Value {
        self.detail
            .as_ref()
            .map_or(Value::Null, CheckDetail::to_value)
    }

    /// Its bounds as the record writes them (null when none was given).
    pub fn threshold_json(&self) -> Value {
        self.threshold.as_ref().map_or(Value::Null, Bounds::to_json)
    }
}

impl<'de> Deserialize<'de> for CheckRecord {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CheckRecord, D::Error> {
        CheckRecord::try_from(RawCheck::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// A check as JSON holds it, before its detail is read by its metric.
#[derive(Deserialize)]
struct RawCheck {
    step: String,
    name: String,
    metric: Metric,
    value: CheckValue,
    #[serde(default)]
    threshold: Option<Bounds>,
    passed: bool,
    #[serde(default)]
    detail: Value,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    inputs: Option<CheckInputsRecord>,
}

impl TryFrom<RawCheck> for CheckRecord {
    type Error = String;

    fn try_from(r: RawCheck) -> Result<CheckRecord, String> {
        let detail = match &r.detail {
            Value::Null => None,
            d => Some(CheckDetail::parse(r.metric, d).ok_or_else(|| {
                format!(
                    "check `{}`: its detail is not a {} check's detail",
                    r.name,
                    r.metric.as_str()
                )
            })?),
        };
        // The canonical form writes a whole real as an integer: a measured
        // difference read back is a real all the same.
        let value = match (r.metric, r.value) {
            (Metric::RelRms | Metric::MaxAbs, CheckValue::Count(n)) => {
                CheckValue::Real(Num(n as f64))
            }
            (_, v) => v,
        };
        Ok(CheckRecord {
            step: r.step,
            name: r.name,
            metric: r.metric,
            value,
            threshold: r.threshold,
            passed: r.passed,
            detail,
            error: r.error,
            inputs: r.inputs,
        })
    }
}

/// Which steps a check read, and in which role.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckInputsRecord {
    /// The step whose measured repeats `bit_exact` compared (`across`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub across: Vec<String>,
    /// Steps the `actual` (and `actual_logits`) inputs name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actual: Vec<String>,
    /// Steps the `expected` (and `expected_logits`) inputs name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected: Vec<String>,
    /// The file (or `file:tensor`) the `across` or `actual` input reads in its step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<CheckRecord, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn a_detail_of_another_metric_is_refused_by_name() {
        let err = read(
            r#"{"step":"c","name":"K","metric":"rel_rms","value":0.5,"threshold":null,
                "passed":true,"detail":{"nan":0,"inf":0,"elements":4,"dtype":"f32"}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("check `K`: its detail is not a rel_rms check's detail"),
            "{err}"
        );
    }

    #[test]
    fn the_canonical_forms_whole_numbers_read_as_the_metric_means_them() {
        let c = read(
            r#"{"step":"c","name":"K","metric":"max_abs","value":0,"threshold":{"min":64,"max":0.5},
                "passed":true,"detail":null}"#,
        )
        .unwrap();
        assert_eq!(c.value, CheckValue::Real(Num(0.0)));
        assert_eq!(c.value.to_json(), serde_json::json!(0));
        assert_eq!(
            c.threshold_json(),
            serde_json::json!({"max": 0.5, "min": 64})
        );
        let c = read(r#"{"step":"c","name":"s","metric":"slots_exact","value":3,"passed":false}"#)
            .unwrap();
        assert_eq!(
            (c.value, c.threshold, c.detail),
            (CheckValue::Count(3), None, None)
        );
    }

    #[test]
    fn a_value_of_no_known_shape_is_refused() {
        assert!(
            read(r#"{"step":"c","name":"K","metric":"shape","value":"x","passed":true}"#).is_err()
        );
    }
}
