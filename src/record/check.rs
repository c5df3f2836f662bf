//! What a check found beyond its value, one shape per metric. The check runner
//! builds these, the record keeps them as the JSON they serialise to (its `detail`,
//! beside the `metric` that tags it), and reports read them back with
//! [`CheckDetail::parse`] rather than by string keys. A new metric is a variant
//! here, a `measure` arm in `check.rs`, and its lines in the report.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::plan::Metric;

/// A float that JSON cannot always hold: NaN and the infinities are the strings
/// `"NaN"`, `"Infinity"` and `"-Infinity"`, as everywhere in the record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Num(pub f64);

impl Serialize for Num {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        json_f64(self.0).serialize(s)
    }
}

impl schemars::JsonSchema for Num {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Num".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A number; NaN and the infinities as strings.",
            "anyOf": [{ "type": "number" }, { "enum": ["NaN", "Infinity", "-Infinity"] }]
        })
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => n
                .as_f64()
                .map(Num)
                .ok_or_else(|| serde::de::Error::custom("not a float")),
            Value::String(s) => match s.as_str() {
                "NaN" => Ok(Num(f64::NAN)),
                "Infinity" => Ok(Num(f64::INFINITY)),
                "-Infinity" => Ok(Num(f64::NEG_INFINITY)),
                _ => Err(serde::de::Error::custom(format!("`{s}` is not a number"))),
            },
            _ => Err(serde::de::Error::custom("not a number")),
        }
    }
}

/// A token id: a JSON integer, or its digits as a string when it does not fit
/// an i64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Token {
    Id(i64),
    Big(String),
}

impl Token {
    pub fn of(t: i128) -> Token {
        i64::try_from(t).map_or_else(|_| Token::Big(t.to_string()), Token::Id)
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Id(i) => write!(f, "{i}"),
            Token::Big(s) => f.write_str(s),
        }
    }
}

/// One input as the check read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Described {
    pub source: String,
    pub dtype: String,
    pub shape: Vec<u64>,
}

/// One tensor of a file-against-file `bit_exact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorDiff {
    pub identical: bool,
    pub reason: Option<String>,
    pub elements: u64,
    pub differing_elements: u64,
    pub first_difference: Option<u64>,
}

/// A file that differs from the first, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Differing {
    pub file: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcrossDetail {
    pub files: u64,
    pub identical_to_first: u64,
    pub first: Option<String>,
    pub differing: Vec<Differing>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilesDetail {
    pub tensors: std::collections::BTreeMap<String, TensorDiff>,
    pub unmatched: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelRmsDetail {
    pub elements: u64,
    pub sum_sq_diff: Num,
    pub sum_sq_expected: Num,
    pub actual: Described,
    pub expected: Described,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MaxAbsDetail {
    pub elements: u64,
    pub index: Option<u64>,
    pub nan_pairs: u64,
    pub actual: Described,
    pub expected: Described,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FiniteDetail {
    pub nan: u64,
    pub inf: u64,
    pub elements: u64,
    pub dtype: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeDetail {
    pub dtype: String,
    pub elements: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DivergenceDetail {
    pub compared: u64,
    pub actual_len: u64,
    pub expected_len: u64,
    pub actual_token: Option<Token>,
    pub expected_token: Option<Token>,
    pub actual_margin: Option<Num>,
    pub expected_margin: Option<Num>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotsDetail {
    pub axis: u64,
    pub slots: u64,
    pub identical: u64,
    /// The first 256 differing slots.
    pub differing: Vec<u64>,
    pub shape: Vec<u64>,
}

/// What a check found, by metric (`bit_exact` has a shape for each of its two
/// forms).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum CheckDetail {
    BitExactAcross(AcrossDetail),
    BitExactFiles(FilesDetail),
    RelRms(RelRmsDetail),
    MaxAbs(MaxAbsDetail),
    Finite(FiniteDetail),
    Shape(ShapeDetail),
    FirstDivergence(DivergenceDetail),
    SlotsExact(SlotsDetail),
}

impl CheckDetail {
    /// The JSON the record keeps.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// A record's `detail` read back as the shape its `metric` (the record's own
    /// word for it) gives; `None` for a check that could not run, a metric this
    /// build does not know, or a detail that is not that metric's shape.
    pub fn parse(metric: Metric, detail: &Value) -> Option<CheckDetail> {
        fn read<'a, T: Deserialize<'a>>(v: &'a Value) -> Option<T> {
            T::deserialize(v).ok()
        }
        Some(match metric {
            Metric::BitExact if detail.get("tensors").is_some() => {
                CheckDetail::BitExactFiles(read(detail)?)
            }
            Metric::BitExact => CheckDetail::BitExactAcross(read(detail)?),
            Metric::RelRms => CheckDetail::RelRms(read(detail)?),
            Metric::MaxAbs => CheckDetail::MaxAbs(read(detail)?),
            Metric::Finite => CheckDetail::Finite(read(detail)?),
            Metric::Shape => CheckDetail::Shape(read(detail)?),
            Metric::FirstDivergence => CheckDetail::FirstDivergence(read(detail)?),
            Metric::SlotsExact => CheckDetail::SlotsExact(read(detail)?),
        })
    }
}

/// A JSON number, or a string for values JSON cannot hold.
pub fn json_f64(v: f64) -> Value {
    if v.is_nan() {
        Value::from("NaN")
    } else if v == f64::INFINITY {
        Value::from("Infinity")
    } else if v == f64::NEG_INFINITY {
        Value::from("-Infinity")
    } else {
        serde_json::json!(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_reads_back_as_its_metric_says() {
        let d = |source: &str| Described {
            source: source.into(),
            dtype: "f32".into(),
            shape: vec![2, 3],
        };
        let cases = [
            (
                Metric::BitExact,
                CheckDetail::BitExactAcross(AcrossDetail {
                    files: 3,
                    identical_to_first: 2,
                    first: Some("a/1/kv.npy".into()),
                    differing: vec![Differing {
                        file: "a/3/kv.npy".into(),
                        reason: "bytes differ".into(),
                    }],
                }),
            ),
            (
                Metric::BitExact,
                CheckDetail::BitExactFiles(FilesDetail {
                    tensors: [(
                        "k".to_string(),
                        TensorDiff {
                            identical: false,
                            reason: None,
                            elements: 6,
                            differing_elements: 1,
                            first_difference: Some(4),
                        },
                    )]
                    .into(),
                    unmatched: vec![],
                }),
            ),
            (
                Metric::RelRms,
                CheckDetail::RelRms(RelRmsDetail {
                    elements: 6,
                    sum_sq_diff: Num(f64::NAN),
                    sum_sq_expected: Num(0.0),
                    actual: d("a"),
                    expected: d("b"),
                    note: Some("expected is all zeros".into()),
                }),
            ),
            (
                Metric::FirstDivergence,
                CheckDetail::FirstDivergence(DivergenceDetail {
                    compared: 32,
                    actual_len: 32,
                    expected_len: 32,
                    actual_token: Some(Token::of(i128::from(i64::MAX) + 1)),
                    expected_token: Some(Token::of(7)),
                    actual_margin: Some(Num(0.0042)),
                    expected_margin: None,
                }),
            ),
            (
                Metric::Finite,
                CheckDetail::Finite(FiniteDetail {
                    nan: 1,
                    inf: 0,
                    elements: 6,
                    dtype: "f32".into(),
                }),
            ),
        ];
        for (metric, detail) in cases {
            let v = detail.to_value();
            let back = CheckDetail::parse(metric, &v).unwrap_or_else(|| panic!("{metric}"));
            // NaN is not equal to itself: compare what they serialise to.
            assert_eq!(back.to_value(), v, "{metric}");
        }
        let v = CheckDetail::Shape(ShapeDetail {
            dtype: "f32".into(),
            elements: 6,
        })
        .to_value();
        assert_eq!(v, serde_json::json!({"dtype": "f32", "elements": 6}));
        assert!(
            CheckDetail::parse(Metric::Finite, &v).is_none(),
            "not finite's shape"
        );
        assert!(CheckDetail::parse(Metric::Shape, &Value::Null).is_none());
    }
}
