//! The comparison metrics over opened tensors. Each returns a typed outcome; turning
//! outcomes into pass/fail and JSON is the check runner's job (`check.rs`).

use rayon::prelude::*;

use super::dtype::Order;
use super::error::{CompareError, Result};
use super::reduce::{byte_diff, pair_bits, pair_f64, single_f64, sq_sums_f32};
use super::tensor::{open_all, OpenOptions, TensorRef, TensorView};

fn same_shape(a: &TensorView, b: &TensorView) -> Result<()> {
    if a.shape() != b.shape() {
        return Err(CompareError::ShapeMismatch {
            actual: a.shape().to_vec(),
            expected: b.shape().to_vec(),
        });
    }
    Ok(())
}

/// Outcome of comparing two tensors bit for bit.
#[derive(Debug, Clone, PartialEq)]
pub struct BitExactOutcome {
    pub identical: bool,
    /// Why they differ when it is not a matter of values (dtype, shape, names).
    pub reason: Option<String>,
    pub elements: u64,
    pub differing_elements: u64,
    pub first_difference: Option<u64>,
}

/// Identical dtype, shape and element bits. Same-layout tensors are compared as raw
/// bytes; tensors stored with different byte or storage orders element by element.
pub fn bit_exact(a: &TensorView, b: &TensorView) -> BitExactOutcome {
    let mismatch = |reason: String| BitExactOutcome {
        identical: false,
        reason: Some(reason),
        elements: a.len() as u64,
        differing_elements: 0,
        first_difference: None,
    };
    if a.dtype() != b.dtype() {
        return mismatch(format!("dtype {} vs {}", a.dtype(), b.dtype()));
    }
    if a.shape() != b.shape() {
        return mismatch(format!("shape {:?} vs {:?}", a.shape(), b.shape()));
    }
    let parts = if a.same_layout(b) {
        byte_diff(a, b)
    } else {
        pair_bits(a, b, |acc: &mut (u64, Option<usize>), s, x, y| {
            for (k, (p, q)) in x.iter().zip(y).enumerate() {
                if p != q {
                    acc.0 += 1;
                    acc.1.get_or_insert(s + k);
                }
            }
        })
    };
    let differing: u64 = parts.iter().map(|p| p.0).sum();
    let first = parts.iter().find_map(|p| p.1).map(|i| i as u64);
    BitExactOutcome {
        identical: differing == 0,
        reason: None,
        elements: a.len() as u64,
        differing_elements: differing,
        first_difference: first,
    }
}

/// Outcome of comparing two files (all their tensors, or one named tensor).
#[derive(Debug, Clone, PartialEq)]
pub struct FileBitExact {
    pub identical: bool,
    /// Per tensor name (`""` for npy and raw files).
    pub tensors: Vec<(String, BitExactOutcome)>,
    /// Tensor names present in only one of the two files.
    pub unmatched: Vec<String>,
}

/// [`bit_exact`] over every tensor two references cover, matched by name.
pub fn bit_exact_files(a: &TensorRef, b: &TensorRef, opts: &OpenOptions) -> Result<FileBitExact> {
    Ok(bit_exact_opened(&open_all(a, opts)?, &open_all(b, opts)?))
}

/// [`bit_exact_files`] over tensors already opened.
fn bit_exact_opened(ta: &[(String, TensorView)], tb: &[(String, TensorView)]) -> FileBitExact {
    let mut tensors = Vec::new();
    let mut unmatched = Vec::new();
    for (name, va) in ta {
        match tb.iter().find(|(n, _)| n == name) {
            Some((_, vb)) => tensors.push((name.clone(), bit_exact(va, vb))),
            None => unmatched.push(name.clone()),
        }
    }
    for (name, _) in tb {
        if !ta.iter().any(|(n, _)| n == name) {
            unmatched.push(name.clone());
        }
    }
    let identical = unmatched.is_empty() && tensors.iter().all(|(_, o)| o.identical);
    FileBitExact {
        identical,
        tensors,
        unmatched,
    }
}

/// Outcome of `bit_exact` of several files against the first.
#[derive(Debug, Clone, PartialEq)]
pub struct AcrossOutcome {
    pub files: usize,
    /// How many files (the first included) are identical to the first.
    pub identical: usize,
    /// Files that differ from the first, with why (or the error reading them).
    pub differing: Vec<(String, String)>,
}

/// Every file against the first. The first must be readable; a later file that
/// cannot be read counts as differing, with its error as the reason.
pub fn bit_exact_across(files: &[TensorRef], opts: &OpenOptions) -> Result<AcrossOutcome> {
    let Some(first) = files.first() else {
        return Err(CompareError::Invalid(
            "bit_exact across needs at least one file".into(),
        ));
    };
    // The first is opened once; its errors are the check's error.
    let ta = open_all(first, opts)?;
    let mut identical = 1;
    let mut differing = Vec::new();
    for f in files.iter().skip(1) {
        match open_all(f, opts).map(|tb| bit_exact_opened(&ta, &tb)) {
            Ok(o) if o.identical => identical += 1,
            Ok(o) => differing.push((f.display(), describe_file_diff(&o))),
            Err(e) => differing.push((f.display(), format!("unreadable: {e}"))),
        }
    }
    Ok(AcrossOutcome {
        files: files.len(),
        identical,
        differing,
    })
}

fn describe_file_diff(o: &FileBitExact) -> String {
    let mut parts = Vec::new();
    if !o.unmatched.is_empty() {
        parts.push(format!(
            "tensors in only one file: {}",
            o.unmatched.join(", ")
        ));
    }
    for (name, t) in &o.tensors {
        if t.identical {
            continue;
        }
        let label = if name.is_empty() {
            "data".to_string()
        } else {
            name.clone()
        };
        match &t.reason {
            Some(r) => parts.push(format!("{label}: {r}")),
            None => parts.push(format!(
                "{label}: {} of {} elements differ, first at {}",
                t.differing_elements,
                t.elements,
                t.first_difference.unwrap_or(0)
            )),
        }
    }
    parts.join("; ")
}

/// Outcome of [`rel_rms`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RelRmsOutcome {
    /// `sqrt(sum((a-b)^2) / sum(b^2))`; NaN when both sums are 0, infinite when only
    /// the expected sum is.
    pub value: f64,
    pub sum_sq_diff: f64,
    pub sum_sq_expected: f64,
    pub elements: u64,
}

fn storage_ok(a: &TensorView, b: &TensorView) -> bool {
    a.order() == b.order() || a.shape().iter().filter(|&&d| d > 1).count() <= 1
}

/// Relative RMS error of `actual` against `expected`; dtypes may differ.
pub fn rel_rms(actual: &TensorView, expected: &TensorView) -> Result<RelRmsOutcome> {
    same_shape(actual, expected)?;
    let (d, e) = match (actual.as_f32_slice(), expected.as_f32_slice()) {
        (Some(x), Some(y)) if actual.order() == expected.order() => sq_sums_f32(x, y),
        _ => pair_f64(
            actual,
            expected,
            storage_ok(actual, expected),
            |acc: &mut (f64, f64), _, x, y| {
                for (&p, &q) in x.iter().zip(y) {
                    acc.0 += (p - q) * (p - q);
                    acc.1 += q * q;
                }
            },
        )
        .into_iter()
        .fold((0.0, 0.0), |(d, e), (x, y)| (d + x, e + y)),
    };
    Ok(RelRmsOutcome {
        value: (d / e).sqrt(),
        sum_sq_diff: d,
        sum_sq_expected: e,
        elements: actual.len() as u64,
    })
}

/// Outcome of [`max_abs`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaxAbsOutcome {
    /// Largest `|a-b|`; NaN when any pair's difference is NaN; 0 for empty tensors.
    pub value: f64,
    /// Logical index of the first largest difference (or first NaN difference).
    pub index: Option<u64>,
    /// Number of pairs whose difference is NaN.
    pub nan_pairs: u64,
    pub elements: u64,
}

#[derive(Default)]
struct MaxAcc {
    max: f64,
    at: Option<usize>,
    nan: u64,
    first_nan: Option<usize>,
}

/// Largest absolute difference of `actual` and `expected`; dtypes may differ.
pub fn max_abs(actual: &TensorView, expected: &TensorView) -> Result<MaxAbsOutcome> {
    same_shape(actual, expected)?;
    let storage = storage_ok(actual, expected);
    let parts = pair_f64(actual, expected, storage, |acc: &mut MaxAcc, s, x, y| {
        for (k, (&p, &q)) in x.iter().zip(y).enumerate() {
            let d = (p - q).abs();
            if d.is_nan() {
                acc.nan += 1;
                acc.first_nan.get_or_insert(s + k);
            } else if d > acc.max || acc.at.is_none() {
                acc.max = d;
                acc.at = Some(s + k);
            }
        }
    });
    let mut total = MaxAcc::default();
    for p in parts {
        total.nan += p.nan;
        if total.first_nan.is_none() {
            total.first_nan = p.first_nan;
        }
        if p.at.is_some() && (total.at.is_none() || p.max > total.max) {
            total.max = p.max;
            total.at = p.at;
        }
    }
    // Indices were gathered in storage order; report them as logical indices.
    let to_logical = |i: usize| -> u64 {
        if storage && actual.order() == Order::Fortran {
            fortran_to_logical(actual.shape(), i)
        } else {
            i as u64
        }
    };
    let (value, index) = if total.nan > 0 {
        (f64::NAN, total.first_nan.map(to_logical))
    } else {
        (total.max, total.at.map(to_logical))
    };
    Ok(MaxAbsOutcome {
        value,
        index,
        nan_pairs: total.nan,
        elements: actual.len() as u64,
    })
}

/// C-order index of the element at Fortran storage index `i`.
fn fortran_to_logical(shape: &[u64], i: usize) -> u64 {
    let mut rem = i as u64;
    let mut idx = vec![0u64; shape.len()];
    for (k, &d) in shape.iter().enumerate() {
        if d > 0 {
            idx[k] = rem % d;
            rem /= d;
        }
    }
    idx.iter()
        .zip(shape)
        .fold(0u64, |acc, (&x, &d)| acc * d + x)
}

/// Outcome of [`finite`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FiniteOutcome {
    pub nan: u64,
    pub inf: u64,
    pub elements: u64,
}

/// Counts NaN and infinite elements (always 0 for integer dtypes).
pub fn finite(x: &TensorView) -> FiniteOutcome {
    let (nan, inf) = if x.dtype().is_float() {
        single_f64(x, |acc: &mut (u64, u64), _, v| {
            for &e in v {
                acc.0 += u64::from(e.is_nan());
                acc.1 += u64::from(e.is_infinite());
            }
        })
        .into_iter()
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
    } else {
        (0, 0)
    };
    FiniteOutcome {
        nan,
        inf,
        elements: x.len() as u64,
    }
}

/// Outcome of [`first_divergence`].
#[derive(Debug, Clone, PartialEq)]
pub struct DivergenceOutcome {
    /// First position where the sequences differ; also the shorter length when one
    /// is a strict prefix of the other. `None` when identical.
    pub index: Option<u64>,
    /// Positions compared (the shorter length).
    pub compared: u64,
    pub actual_len: u64,
    pub expected_len: u64,
    pub actual_token: Option<i128>,
    pub expected_token: Option<i128>,
    /// Top-1 minus top-2 logit at the divergence in each run (0 means a tie).
    pub actual_margin: Option<f64>,
    pub expected_margin: Option<f64>,
}

fn read_token(t: &TensorView, i: u64) -> Option<i128> {
    if i >= t.len() as u64 {
        return None;
    }
    let mut one = [0i128];
    t.read_i128_logical(i as usize, &mut one);
    Some(one[0])
}

/// Top-1 minus top-2 of row `row` of logits shaped `[tokens, vocab]` (leading dims
/// flattened). `None` when the row does not exist or the vocabulary has < 2 entries;
/// NaN when the row holds a NaN.
pub fn top_margin(logits: &TensorView, row: u64) -> Option<f64> {
    let vocab = *logits.shape().last()? as usize;
    if vocab < 2 {
        return None;
    }
    let rows = logits.len() / vocab;
    let row = usize::try_from(row).ok().filter(|&r| r < rows)?;
    let (mut top1, mut top2) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    let mut buf = vec![0f64; vocab.min(4096)];
    let mut i = 0;
    while i < vocab {
        let n = (vocab - i).min(buf.len());
        logits.read_f64_logical(row * vocab + i, &mut buf[..n]);
        for &v in &buf[..n] {
            if v.is_nan() {
                return Some(f64::NAN);
            }
            if v > top1 {
                top2 = top1;
                top1 = v;
            } else if v > top2 {
                top2 = v;
            }
        }
        i += n;
    }
    Some(top1 - top2)
}

/// First position where two token sequences (flattened) differ, with the logit
/// margins there when logits are given.
pub fn first_divergence(
    actual: &TensorView,
    expected: &TensorView,
    actual_logits: Option<&TensorView>,
    expected_logits: Option<&TensorView>,
) -> DivergenceOutcome {
    let (la, lb) = (actual.len(), expected.len());
    let compared = la.min(lb);
    let mut index = None;
    let (mut xa, mut xb) = (vec![0i128; 4096], vec![0i128; 4096]);
    let mut i = 0;
    while i < compared {
        let n = (compared - i).min(xa.len());
        actual.read_i128_logical(i, &mut xa[..n]);
        expected.read_i128_logical(i, &mut xb[..n]);
        if let Some(k) = xa[..n].iter().zip(&xb[..n]).position(|(p, q)| p != q) {
            index = Some((i + k) as u64);
            break;
        }
        i += n;
    }
    if index.is_none() && la != lb {
        index = Some(compared as u64);
    }
    let at = |t: &TensorView| index.and_then(|i| read_token(t, i));
    let margin = |l: Option<&TensorView>| l.and_then(|l| index.and_then(|i| top_margin(l, i)));
    DivergenceOutcome {
        index,
        compared: compared as u64,
        actual_len: la as u64,
        expected_len: lb as u64,
        actual_token: at(actual),
        expected_token: at(expected),
        actual_margin: margin(actual_logits),
        expected_margin: margin(expected_logits),
    }
}

/// Outcome of [`slots_exact`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotsOutcome {
    pub axis: usize,
    pub slots: u64,
    pub identical: u64,
    /// Indices of the slots that differ, ascending.
    pub differing: Vec<u64>,
}

/// How many slots along `axis` are bit-identical (dtype and shape must match, except
/// that `a` may hold fewer slots along `axis` than `b`: then its slots are compared
/// with the first ones of `b`, as for a cache read back in part).
pub fn slots_exact(a: &TensorView, b: &TensorView, axis: usize) -> Result<SlotsOutcome> {
    if a.shape() != b.shape() && is_slot_prefix(a.shape(), b.shape(), axis) {
        if a.dtype() != b.dtype() {
            return Err(CompareError::DtypeMismatch {
                actual: a.dtype().to_string(),
                expected: b.dtype().to_string(),
            });
        }
        return slots_prefix(a, b, axis);
    }
    same_shape(a, b)?;
    if a.dtype() != b.dtype() {
        return Err(CompareError::DtypeMismatch {
            actual: a.dtype().to_string(),
            expected: b.dtype().to_string(),
        });
    }
    let shape = a.shape();
    if axis >= shape.len() {
        return Err(CompareError::Invalid(format!(
            "axis {axis} out of range for shape {shape:?}"
        )));
    }
    let n = shape[axis] as usize;
    let differ: Vec<bool> = if a.same_layout(b) {
        // Fortran storage is C storage of the reversed shape.
        let (sshape, sax): (Vec<u64>, usize) = match a.order() {
            Order::C => (shape.to_vec(), axis),
            Order::Fortran => (
                shape.iter().rev().copied().collect(),
                shape.len() - 1 - axis,
            ),
        };
        let outer: usize = sshape[..sax].iter().product::<u64>() as usize;
        let inner = sshape[sax + 1..].iter().product::<u64>() as usize * a.dtype().size();
        let (da, db) = (a.data(), b.data());
        (0..n)
            .into_par_iter()
            .map(|j| {
                (0..outer).any(|o| {
                    let s = (o * n + j) * inner;
                    da.get(s..s + inner) != db.get(s..s + inner)
                })
            })
            .collect()
    } else {
        let inner: usize = shape[axis + 1..].iter().product::<u64>() as usize;
        let parts = pair_bits(a, b, |acc: &mut Vec<u64>, s, x, y| {
            for (k, (p, q)) in x.iter().zip(y).enumerate() {
                if p != q {
                    let slot = ((s + k) / inner.max(1)) % n.max(1);
                    if acc.last() != Some(&(slot as u64)) {
                        acc.push(slot as u64);
                    }
                }
            }
        });
        let mut d = vec![false; n];
        for slot in parts.into_iter().flatten() {
            if let Some(x) = d.get_mut(slot as usize) {
                *x = true;
            }
        }
        d
    };
    Ok(SlotsOutcome::from_flags(axis, &differ))
}

/// `a` equals `b` except for fewer slots along `axis`.
fn is_slot_prefix(a: &[u64], b: &[u64], axis: usize) -> bool {
    a.len() == b.len()
        && axis < a.len()
        && a[axis] <= b[axis]
        && a.iter()
            .zip(b)
            .enumerate()
            .all(|(i, (x, y))| i == axis || x == y)
}

/// Compare the slots of `a` with the first `a.shape()[axis]` slots of `b`, reading
/// both in logical (C) order one slot block at a time.
fn slots_prefix(a: &TensorView, b: &TensorView, axis: usize) -> Result<SlotsOutcome> {
    let shape = a.shape();
    let (na, nb) = (shape[axis] as usize, b.shape()[axis] as usize);
    let outer: usize = shape[..axis].iter().product::<u64>() as usize;
    let inner: usize = shape[axis + 1..].iter().product::<u64>() as usize;
    let differ: Vec<bool> = (0..na)
        .into_par_iter()
        .map(|j| {
            let mut x = vec![0u64; inner];
            let mut y = vec![0u64; inner];
            (0..outer).any(|o| {
                a.read_bits_logical((o * na + j) * inner, &mut x);
                b.read_bits_logical((o * nb + j) * inner, &mut y);
                x != y
            })
        })
        .collect();
    Ok(SlotsOutcome::from_flags(axis, &differ))
}

impl SlotsOutcome {
    /// From one "differs" flag per slot.
    fn from_flags(axis: usize, differ: &[bool]) -> SlotsOutcome {
        let differing: Vec<u64> = differ
            .iter()
            .enumerate()
            .filter(|(_, &d)| d)
            .map(|(j, _)| j as u64)
            .collect();
        SlotsOutcome {
            axis,
            slots: differ.len() as u64,
            identical: (differ.len() - differing.len()) as u64,
            differing,
        }
    }
}
