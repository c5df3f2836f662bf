//! The check runner: one [`CheckSpec`] (metric, resolved input paths, thresholds) in,
//! one [`CheckResult`] (value, threshold, pass/fail, detail) out. It never panics and
//! never returns an error: a failure to read becomes `passed: false` with `error` set.

use serde_json::Value;

use super::detail::{
    AcrossDetail, CheckDetail, Described, Differing, DivergenceDetail, FilesDetail, FiniteDetail,
    MaxAbsDetail, Num, RelRmsDetail, ShapeDetail, SlotsDetail, TensorDiff, Token,
};
use super::dtype::DType;
use super::error::{CompareError, Result};
use super::metrics::{
    bit_exact_across, bit_exact_files, finite, first_divergence, max_abs, rel_rms, slots_exact,
    BitExactOutcome,
};
use super::tensor::{open, OpenOptions, TensorRef, TensorView};
use crate::plan::Metric;
pub use crate::record::check::json_f64;
use crate::record::check_record::{Bounds, CheckValue};

/// One check with its inputs resolved to plain references (`path` or `path:tensor`).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckSpec {
    pub name: String,
    pub metric: Metric,
    pub inputs: CheckInputs,
    /// Axis for `slots_exact`.
    pub axis: Option<usize>,
    /// Element type of raw inputs (`f32`, `bf16`...).
    pub dtype: Option<String>,
    /// Shape of raw inputs.
    pub shape: Option<Vec<u64>>,
    pub max: Option<f64>,
    pub min: Option<f64>,
    pub equals: Option<Value>,
}

/// The inputs of a check, by arity.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckInputs {
    /// Two tensors (and, for `first_divergence`, optional logits of each).
    Pair {
        actual: String,
        expected: String,
        actual_logits: Option<String>,
        expected_logits: Option<String>,
    },
    /// The same file from several runs, each against the first (`bit_exact`).
    Across { files: Vec<String> },
    /// One tensor (`finite`, `shape`).
    Single { actual: String },
}

/// What a check found.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CheckResult {
    pub name: String,
    pub metric: Metric,
    /// The measured value; non-finite numbers appear as `"NaN"`, `"Infinity"`,
    /// `"-Infinity"`.
    pub value: CheckValue,
    /// The bounds that were given.
    pub threshold: Option<Bounds>,
    pub passed: bool,
    /// Supporting facts: element counts, shapes, margins, differing files...;
    /// `None` when the check could not run.
    pub detail: Option<CheckDetail>,
    pub error: Option<String>,
}

/// Exact equality, except that numbers compare by value (`2 == 2.0`).
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(p), Some(q)) => p == q,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        _ => a == b,
    }
}

struct Measured {
    value: CheckValue,
    /// The value as a number for `max`/`min` (None when it is not numeric).
    numeric: Option<f64>,
    /// Pass when no threshold is given.
    default_pass: bool,
    detail: CheckDetail,
}

/// Runs one check. Never panics on bad input; unreadable inputs give
/// `passed: false` and `error`.
pub fn run_check(spec: &CheckSpec) -> CheckResult {
    let threshold = threshold_json(spec);
    match measure(spec) {
        Ok(m) => {
            let passed = judge(spec, &m);
            CheckResult {
                name: spec.name.clone(),
                metric: spec.metric,
                value: m.value,
                threshold,
                passed,
                detail: Some(m.detail),
                error: None,
            }
        }
        Err(e) => CheckResult {
            name: spec.name.clone(),
            metric: spec.metric,
            value: CheckValue::Null,
            threshold,
            passed: false,
            detail: None,
            error: Some(e.to_string()),
        },
    }
}

fn threshold_json(spec: &CheckSpec) -> Option<Bounds> {
    Bounds {
        equals: spec.equals.clone(),
        max: spec.max.map(Num),
        min: spec.min.map(Num),
    }
    .given()
}

fn judge(spec: &CheckSpec, m: &Measured) -> bool {
    if spec.max.is_none() && spec.min.is_none() && spec.equals.is_none() {
        return m.default_pass;
    }
    let mut ok = true;
    if let Some(eq) = &spec.equals {
        ok &= json_equal(&m.value.to_json(), eq);
    }
    if spec.max.is_some() || spec.min.is_some() {
        // NaN or a non-numeric value never satisfies a bound.
        match m.numeric {
            Some(v) if !v.is_nan() => {
                ok &= spec.max.is_none_or(|max| v <= max);
                ok &= spec.min.is_none_or(|min| v >= min);
            }
            _ => ok = false,
        }
    }
    ok
}

fn options(spec: &CheckSpec) -> Result<OpenOptions> {
    let raw_dtype = match &spec.dtype {
        Some(d) => Some(DType::from_name(d).ok_or_else(|| {
            CompareError::Invalid(format!(
                "unknown dtype {d:?} (use f64 f32 f16 bf16 i64 i32 i16 i8 u8 bool)"
            ))
        })?),
        None => None,
    };
    Ok(OpenOptions {
        raw_dtype,
        raw_shape: spec.shape.clone(),
    })
}

fn open_ref(s: &str, opts: &OpenOptions) -> Result<TensorView> {
    open(&TensorRef::parse(s), opts)
}

fn pair(spec: &CheckSpec) -> Result<(&str, &str)> {
    match &spec.inputs {
        CheckInputs::Pair {
            actual, expected, ..
        } => Ok((actual, expected)),
        _ => Err(CompareError::Invalid(format!(
            "{} needs two inputs: actual and expected",
            spec.metric.as_str()
        ))),
    }
}

fn single(spec: &CheckSpec) -> Result<&str> {
    match &spec.inputs {
        CheckInputs::Single { actual } => Ok(actual),
        _ => Err(CompareError::Invalid(format!(
            "{} takes one input: actual",
            spec.metric.as_str()
        ))),
    }
}

fn tensor_diff(t: &BitExactOutcome) -> TensorDiff {
    TensorDiff {
        identical: t.identical,
        reason: t.reason.clone(),
        elements: t.elements,
        differing_elements: t.differing_elements,
        first_difference: t.first_difference,
    }
}

fn describe(v: &TensorView) -> Described {
    Described {
        source: v.source().to_string(),
        dtype: v.dtype().name().to_string(),
        shape: v.shape().to_vec(),
    }
}

/// Measure what `spec` asks for, with the input options its metric needs.
fn measure(spec: &CheckSpec) -> Result<Measured> {
    let mut opts = options(spec)?;
    if spec.metric == Metric::BitExact && opts.raw_dtype.is_none() {
        // Bit-exactness is defined for any file: what is not a tensor is its bytes.
        opts.raw_dtype = Some(DType::U8);
    }
    match spec.metric {
        Metric::BitExact => match &spec.inputs {
            CheckInputs::Across { files } => bit_exact_across_runs(files, &opts),
            _ => bit_exact_pair(spec, &opts),
        },
        Metric::RelRms => measure_rel_rms(spec, &opts),
        Metric::MaxAbs => measure_max_abs(spec, &opts),
        Metric::Finite => measure_finite(spec, &opts),
        Metric::Shape => measure_shape(spec, &opts),
        Metric::FirstDivergence => measure_first_divergence(spec, &opts),
        Metric::SlotsExact => measure_slots_exact(spec, &opts),
    }
}

/// `bit_exact` over the same file from several runs: how many match the first.
fn bit_exact_across_runs(files: &[String], opts: &OpenOptions) -> Result<Measured> {
    let refs: Vec<TensorRef> = files.iter().map(|f| TensorRef::parse(f)).collect();
    let o = bit_exact_across(&refs, opts)?;
    let differing = o
        .differing
        .iter()
        .map(|(f, why)| Differing {
            file: f.clone(),
            reason: why.clone(),
        })
        .collect();
    Ok(Measured {
        value: CheckValue::Count(o.identical as u64),
        numeric: Some(o.identical as f64),
        default_pass: o.identical == o.files,
        detail: CheckDetail::BitExactAcross(AcrossDetail {
            files: o.files as u64,
            identical_to_first: o.identical as u64,
            first: refs.first().map(TensorRef::display),
            differing,
        }),
    })
}

/// `bit_exact` of two files, tensor by tensor where they hold tensors.
fn bit_exact_pair(spec: &CheckSpec, opts: &OpenOptions) -> Result<Measured> {
    let (a, b) = pair(spec)?;
    let o = bit_exact_files(&TensorRef::parse(a), &TensorRef::parse(b), opts)?;
    let tensors = o
        .tensors
        .iter()
        .map(|(n, t)| (n.clone(), tensor_diff(t)))
        .collect();
    Ok(Measured {
        value: CheckValue::Verdict(o.identical),
        numeric: Some(if o.identical { 1.0 } else { 0.0 }),
        default_pass: o.identical,
        detail: CheckDetail::BitExactFiles(FilesDetail {
            tensors,
            unmatched: o.unmatched,
        }),
    })
}

/// `rel_rms`, noting an all-zero expected tensor, where the ratio has no meaning.
fn measure_rel_rms(spec: &CheckSpec, opts: &OpenOptions) -> Result<Measured> {
    let (a, b) = pair(spec)?;
    let (va, vb) = (open_ref(a, opts)?, open_ref(b, opts)?);
    let o = rel_rms(&va, &vb)?;
    let note = (o.sum_sq_expected == 0.0).then(|| {
        "expected is all zeros: relative RMS is undefined (NaN when actual is also all zeros, Infinity otherwise)".to_string()
    });
    Ok(Measured {
        value: CheckValue::Real(Num(o.value)),
        numeric: Some(o.value),
        default_pass: true,
        detail: CheckDetail::RelRms(RelRmsDetail {
            elements: o.elements,
            sum_sq_diff: Num(o.sum_sq_diff),
            sum_sq_expected: Num(o.sum_sq_expected),
            actual: describe(&va),
            expected: describe(&vb),
            note,
        }),
    })
}

/// `max_abs`, with where the largest difference sits and how many pairs were NaN.
fn measure_max_abs(spec: &CheckSpec, opts: &OpenOptions) -> Result<Measured> {
    let (a, b) = pair(spec)?;
    let (va, vb) = (open_ref(a, opts)?, open_ref(b, opts)?);
    let o = max_abs(&va, &vb)?;
    Ok(Measured {
        value: CheckValue::Real(Num(o.value)),
        numeric: Some(o.value),
        default_pass: true,
        detail: CheckDetail::MaxAbs(MaxAbsDetail {
            elements: o.elements,
            index: o.index,
            nan_pairs: o.nan_pairs,
            actual: describe(&va),
            expected: describe(&vb),
        }),
    })
}

/// `finite`: the count of NaN and infinite elements, which passes at zero.
fn measure_finite(spec: &CheckSpec, opts: &OpenOptions) -> Result<Measured> {
    let v = open_ref(single(spec)?, opts)?;
    let o = finite(&v);
    let bad = o.nan + o.inf;
    Ok(Measured {
        value: CheckValue::Count(bad as u64),
        numeric: Some(bad as f64),
        default_pass: bad == 0,
        detail: CheckDetail::Finite(FiniteDetail {
            nan: o.nan,
            inf: o.inf,
            elements: o.elements,
            dtype: v.dtype().name().to_string(),
        }),
    })
}

/// `shape`: a value for `equals` to judge, not a number.
fn measure_shape(spec: &CheckSpec, opts: &OpenOptions) -> Result<Measured> {
    let v = open_ref(single(spec)?, opts)?;
    Ok(Measured {
        value: CheckValue::Shape(v.shape().to_vec()),
        numeric: None,
        default_pass: true,
        detail: CheckDetail::Shape(ShapeDetail {
            dtype: v.dtype().name().to_string(),
            elements: v.len() as u64,
        }),
    })
}

/// `first_divergence` of two token files, with the logits' margins where given.
fn measure_first_divergence(spec: &CheckSpec, opts: &OpenOptions) -> Result<Measured> {
    let CheckInputs::Pair {
        actual,
        expected,
        actual_logits,
        expected_logits,
    } = &spec.inputs
    else {
        return Err(CompareError::Invalid(
            "first_divergence needs actual and expected token files".into(),
        ));
    };
    let (va, vb) = (open_ref(actual, opts)?, open_ref(expected, opts)?);
    // Logits carry their own headers: raw options apply to tokens only.
    let none = OpenOptions::default();
    let la = actual_logits
        .as_deref()
        .map(|p| open_ref(p, &none))
        .transpose()?;
    let lb = expected_logits
        .as_deref()
        .map(|p| open_ref(p, &none))
        .transpose()?;
    let o = first_divergence(&va, &vb, la.as_ref(), lb.as_ref());
    Ok(Measured {
        value: o.index.map_or(CheckValue::Null, CheckValue::Count),
        // Never diverging is as late as it gets.
        numeric: Some(o.index.map_or(f64::INFINITY, |i| i as f64)),
        default_pass: true,
        detail: CheckDetail::FirstDivergence(DivergenceDetail {
            compared: o.compared,
            actual_len: o.actual_len,
            expected_len: o.expected_len,
            actual_token: o.actual_token.map(Token::of),
            expected_token: o.expected_token.map(Token::of),
            actual_margin: o.actual_margin.map(Num),
            expected_margin: o.expected_margin.map(Num),
        }),
    })
}

/// `slots_exact` along the axis: identical slots, and the first 256 that differ.
fn measure_slots_exact(spec: &CheckSpec, opts: &OpenOptions) -> Result<Measured> {
    let (a, b) = pair(spec)?;
    let axis = spec
        .axis
        .ok_or_else(|| CompareError::Invalid("slots_exact needs an axis".into()))?;
    let (va, vb) = (open_ref(a, opts)?, open_ref(b, opts)?);
    let o = slots_exact(&va, &vb, axis)?;
    Ok(Measured {
        value: CheckValue::Count(o.identical as u64),
        numeric: Some(o.identical as f64),
        default_pass: o.identical == o.slots,
        detail: CheckDetail::SlotsExact(SlotsDetail {
            axis: o.axis as u64,
            slots: o.slots,
            identical: o.identical,
            differing: o.differing.iter().take(256).copied().collect(),
            shape: va.shape().to_vec(),
        }),
    })
}
