//! Metrics and the check runner on small arrays with hand-computed expectations.

use std::path::{Path, PathBuf};

use orchestrate::compare::{
    open, rel_rms, run_check, CheckInputs, CheckSpec, OpenOptions, TensorRef, TensorView,
};
use orchestrate::plan::Metric;
use serde_json::{json, Value};

/// A check's detail as the record keeps it (the JSON its typed shape writes).
fn detail(r: &orchestrate::compare::CheckResult) -> serde_json::Value {
    r.detail.as_ref().map_or(
        serde_json::Value::Null,
        orchestrate::compare::CheckDetail::to_value,
    )
}

/// Writes a version 1.0 npy file by hand (little-endian unless `descr` says otherwise).
fn npy(path: &Path, descr: &str, shape: &[usize], fortran: bool, data: &[u8]) -> String {
    let shape_s = match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let fo = if fortran { "True" } else { "False" };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': {fo}, 'shape': {shape_s}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    b.extend_from_slice(data);
    std::fs::write(path, b).unwrap();
    path.display().to_string()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn spec(name: &str, metric: Metric, inputs: CheckInputs) -> CheckSpec {
    CheckSpec {
        name: name.into(),
        metric,
        inputs,
        axis: None,
        dtype: None,
        shape: None,
        max: None,
        min: None,
        equals: None,
    }
}

fn pair(a: &str, b: &str) -> CheckInputs {
    CheckInputs::Pair {
        actual: a.into(),
        expected: b.into(),
        actual_logits: None,
        expected_logits: None,
    }
}

fn view(p: &str) -> TensorView {
    open(&TensorRef::parse(p), &OpenOptions::default()).unwrap()
}

#[test]
fn rel_rms_matches_hand_computed_value() {
    let d = tempfile::tempdir().unwrap();
    let a = npy(
        &d.path().join("a.npy"),
        "<f4",
        &[4],
        false,
        &f32s(&[1.0, 2.0, 3.0, 4.0]),
    );
    let b = npy(
        &d.path().join("b.npy"),
        "<f4",
        &[4],
        false,
        &f32s(&[1.0, 2.0, 3.0, 5.0]),
    );
    // sum (a-b)^2 = 1; sum b^2 = 1 + 4 + 9 + 25 = 39.
    let want = (1.0f64 / 39.0).sqrt();
    let mut s = spec("rr", Metric::RelRms, pair(&a, &b));
    let r = run_check(&s);
    assert_eq!(r.error, None);
    assert_eq!(r.value.to_json(), json!(want));
    assert!(r.passed, "information only without a threshold");
    assert_eq!(r.threshold, None);
    assert_eq!(detail(&r)["elements"], json!(4));
    s.max = Some(0.1);
    assert!(!run_check(&s).passed, "{want} > 0.1");
    s.max = Some(0.2);
    let r = run_check(&s);
    assert!(r.passed);
    assert_eq!(r.threshold.map(|b| b.to_json()), Some(json!({"max": 0.2})));

    // Mixed dtypes: expected stored as big-endian f64 takes the generic path.
    let be: Vec<u8> = [1.0f64, 2.0, 3.0, 5.0]
        .iter()
        .flat_map(|x| x.to_be_bytes())
        .collect();
    let b64 = npy(&d.path().join("b64.npy"), ">f8", &[4], false, &be);
    assert_eq!(
        run_check(&spec("rr", Metric::RelRms, pair(&a, &b64)))
            .value
            .to_json(),
        json!(want)
    );
}

#[test]
fn rel_rms_of_all_zero_expected_is_nan_or_infinity() {
    let d = tempfile::tempdir().unwrap();
    let z = npy(
        &d.path().join("z.npy"),
        "<f4",
        &[3],
        false,
        &f32s(&[0.0; 3]),
    );
    let a = npy(
        &d.path().join("a.npy"),
        "<f4",
        &[3],
        false,
        &f32s(&[0.0, 1.0, 0.0]),
    );
    let r = run_check(&spec("z", Metric::RelRms, pair(&z, &z)));
    assert_eq!(r.value.to_json(), json!("NaN"));
    assert!(detail(&r)["note"].as_str().unwrap().contains("all zeros"));
    let mut s = spec("z", Metric::RelRms, pair(&a, &z));
    let r = run_check(&s);
    assert_eq!(r.value.to_json(), json!("Infinity"));
    s.max = Some(1.0);
    assert!(!run_check(&s).passed, "infinity fails a max");
    let mut s = spec("z", Metric::RelRms, pair(&z, &z));
    s.max = Some(1.0);
    assert!(!run_check(&s).passed, "NaN fails a max");
    // The result serialises: no non-finite JSON numbers.
    serde_json::to_string(&run_check(&s)).unwrap();
}

#[test]
fn rel_rms_fast_f32_path_agrees_and_is_thread_count_independent() {
    let d = tempfile::tempdir().unwrap();
    let n = 300_001; // several chunks plus a ragged tail
    let mut x = 0x2545f4914f6cdd1du64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let a: Vec<f32> = (0..n).map(|_| rnd()).collect();
    let b: Vec<f32> = a.iter().map(|v| v + rnd() * 1e-3).collect();
    let pa = npy(&d.path().join("a.npy"), "<f4", &[n], false, &f32s(&a));
    let pb = npy(&d.path().join("b.npy"), "<f4", &[n], false, &f32s(&b));
    let b64: Vec<f64> = b.iter().map(|&v| f64::from(v)).collect();
    let pb64 = npy(&d.path().join("b64.npy"), "<f8", &[n], false, &f64s(&b64));
    let (va, vb, vb64) = (view(&pa), view(&pb), view(&pb64));
    assert!(va.as_f32_slice().is_some() && vb.as_f32_slice().is_some());

    let (mut d2, mut e2) = (0f64, 0f64);
    for (&p, &q) in a.iter().zip(&b) {
        let (p, q) = (f64::from(p), f64::from(q));
        d2 += (p - q) * (p - q);
        e2 += q * q;
    }
    let naive = (d2 / e2).sqrt();
    let fast = rel_rms(&va, &vb).unwrap().value;
    let generic = rel_rms(&va, &vb64).unwrap().value;
    assert!((fast - naive).abs() <= 1e-12 * naive, "{fast} vs {naive}");
    assert!(
        (generic - naive).abs() <= 1e-12 * naive,
        "{generic} vs {naive}"
    );

    let in_pool = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                let f = rel_rms(&va, &vb).unwrap().value;
                let g = rel_rms(&va, &vb64).unwrap().value;
                (f.to_bits(), g.to_bits())
            })
    };
    assert_eq!(in_pool(1), in_pool(3));
    assert_eq!(in_pool(1), in_pool(8));
}

#[test]
fn max_abs_and_finite_count_what_they_should() {
    let d = tempfile::tempdir().unwrap();
    let a = npy(
        &d.path().join("a.npy"),
        "<f4",
        &[2, 2],
        false,
        &f32s(&[1.0, -2.0, 3.0, 4.0]),
    );
    let b = npy(
        &d.path().join("b.npy"),
        "<f4",
        &[2, 2],
        false,
        &f32s(&[1.5, -2.0, 0.5, 4.0]),
    );
    let r = run_check(&spec("m", Metric::MaxAbs, pair(&a, &b)));
    assert_eq!(r.value.to_json(), json!(2.5));
    assert_eq!(detail(&r)["index"], json!(2));

    let bad = npy(
        &d.path().join("bad.npy"),
        "<f4",
        &[5],
        false,
        &f32s(&[1.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]),
    );
    let mut s = spec(
        "f",
        Metric::Finite,
        CheckInputs::Single {
            actual: bad.clone(),
        },
    );
    let r = run_check(&s);
    assert_eq!(r.value.to_json(), json!(4));
    assert_eq!(detail(&r)["nan"], json!(2));
    assert_eq!(detail(&r)["inf"], json!(2));
    assert!(!r.passed);
    s.max = Some(4.0);
    assert!(run_check(&s).passed, "a threshold overrides the default");
    let r = run_check(&spec(
        "f",
        Metric::Finite,
        CheckInputs::Single { actual: a.clone() },
    ));
    assert_eq!(r.value.to_json(), json!(0));
    assert!(r.passed);
    // NaN in a difference makes max_abs NaN.
    let five = npy(
        &d.path().join("five.npy"),
        "<f4",
        &[5],
        false,
        &f32s(&[0.0; 5]),
    );
    let r = run_check(&spec("m", Metric::MaxAbs, pair(&bad, &five)));
    assert_eq!(r.value.to_json(), json!("NaN"));
    assert_eq!(detail(&r)["nan_pairs"], json!(2));
    assert_eq!(detail(&r)["index"], json!(1));
}

#[test]
fn shape_equals_compares_arrays() {
    let d = tempfile::tempdir().unwrap();
    let a = npy(
        &d.path().join("a.npy"),
        "<f4",
        &[2, 3],
        false,
        &f32s(&[0.0; 6]),
    );
    let mut s = spec("s", Metric::Shape, CheckInputs::Single { actual: a });
    let r = run_check(&s);
    assert_eq!(r.value.to_json(), json!([2, 3]));
    assert!(r.passed);
    s.equals = Some(json!([2, 3]));
    assert!(run_check(&s).passed);
    s.equals = Some(json!([3, 2]));
    assert!(!run_check(&s).passed);
}

fn logits_row(top: f32, second: f32, vocab: usize) -> Vec<f32> {
    let mut r = vec![-10.0f32; vocab];
    r[1] = second;
    r[3] = top;
    r
}

#[test]
fn first_divergence_reports_index_and_tie_margin() {
    let d = tempfile::tempdir().unwrap();
    let ta = npy(
        &d.path().join("ta.npy"),
        "<i8",
        &[5],
        false,
        &i64s(&[7, 8, 9, 10, 11]),
    );
    // Expected tokens as i32: dtypes may differ, values compare.
    let tb: Vec<u8> = [7i32, 8, 4, 10, 11]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let tb = npy(&d.path().join("tb.npy"), "<i4", &[5], false, &tb);
    let vocab = 6;
    let mut la = Vec::new();
    let mut lb = Vec::new();
    for row in 0..5 {
        if row == 2 {
            la.extend(logits_row(1.25, 1.25, vocab)); // a tie
            lb.extend(logits_row(2.0, 1.5, vocab)); // margin 0.5
        } else {
            la.extend(logits_row(3.0, 1.0, vocab));
            lb.extend(logits_row(3.0, 1.0, vocab));
        }
    }
    let la = npy(
        &d.path().join("la.npy"),
        "<f4",
        &[5, vocab],
        false,
        &f32s(&la),
    );
    let lb = npy(
        &d.path().join("lb.npy"),
        "<f4",
        &[5, vocab],
        false,
        &f32s(&lb),
    );
    let mut s = spec(
        "fd",
        Metric::FirstDivergence,
        CheckInputs::Pair {
            actual: ta.clone(),
            expected: tb.clone(),
            actual_logits: Some(la),
            expected_logits: Some(lb),
        },
    );
    let r = run_check(&s);
    assert_eq!(r.error, None);
    assert_eq!(r.value.to_json(), json!(2));
    assert!(r.passed, "information by default");
    assert_eq!(detail(&r)["actual_margin"], json!(0.0));
    assert_eq!(detail(&r)["expected_margin"], json!(0.5));
    assert_eq!(detail(&r)["actual_token"], json!(9));
    assert_eq!(detail(&r)["expected_token"], json!(4));
    assert_eq!(detail(&r)["compared"], json!(5));
    s.min = Some(3.0);
    assert!(!run_check(&s).passed, "diverged at 2 < 3");

    let same = run_check(&spec("fd", Metric::FirstDivergence, pair(&ta, &ta)));
    assert_eq!(same.value.to_json(), Value::Null);
    assert_eq!(detail(&same)["compared"], json!(5));
    let mut s = spec("fd", Metric::FirstDivergence, pair(&ta, &ta));
    s.min = Some(32.0);
    assert!(run_check(&s).passed, "never diverging satisfies any min");

    // A strict prefix diverges where the shorter one ends.
    let short = npy(
        &d.path().join("short.npy"),
        "<i8",
        &[3],
        false,
        &i64s(&[7, 8, 9]),
    );
    let r = run_check(&spec("fd", Metric::FirstDivergence, pair(&short, &ta)));
    assert_eq!(r.value.to_json(), json!(3));
    assert_eq!(detail(&r)["compared"], json!(3));
}

fn kv(n_tokens: usize, flip: Option<usize>) -> Vec<f32> {
    // [layers=2, heads=2, tokens, dim=4]
    let mut v = Vec::new();
    for l in 0..2 {
        for h in 0..2 {
            for t in 0..n_tokens {
                for e in 0..4 {
                    let mut x = (l * 1000 + h * 100 + t) as f32 + e as f32 * 0.25;
                    if flip == Some(t) && l == 1 && h == 0 && e == 3 {
                        x = -x;
                    }
                    v.push(x);
                }
            }
        }
    }
    v
}

#[test]
fn slots_exact_counts_63_of_64_after_one_flip() {
    let d = tempfile::tempdir().unwrap();
    let shape = [2usize, 2, 64, 4];
    let a = npy(
        &d.path().join("a.npy"),
        "<f4",
        &shape,
        false,
        &f32s(&kv(64, None)),
    );
    let b = npy(
        &d.path().join("b.npy"),
        "<f4",
        &shape,
        false,
        &f32s(&kv(64, Some(17))),
    );
    let mut s = spec("slots", Metric::SlotsExact, pair(&b, &a));
    s.axis = Some(2);
    let r = run_check(&s);
    assert_eq!(r.error, None);
    assert_eq!(r.value.to_json(), json!(63));
    assert_eq!(detail(&r)["slots"], json!(64));
    assert_eq!(detail(&r)["differing"], json!([17]));
    assert!(!r.passed, "all slots must match by default");
    s.min = Some(63.0);
    assert!(run_check(&s).passed);
    let mut same = spec("slots", Metric::SlotsExact, pair(&a, &a));
    same.axis = Some(2);
    let r = run_check(&same);
    assert_eq!(r.value.to_json(), json!(64));
    assert!(r.passed);

    // A big-endian copy of b: layouts differ, values' bits are compared instead.
    let be: Vec<u8> = kv(64, Some(17))
        .iter()
        .flat_map(|x| x.to_be_bytes())
        .collect();
    let bbe = npy(&d.path().join("bbe.npy"), ">f4", &shape, false, &be);
    let mut s = spec("slots", Metric::SlotsExact, pair(&bbe, &a));
    s.axis = Some(2);
    let r = run_check(&s);
    assert_eq!(r.value.to_json(), json!(63));
    assert_eq!(detail(&r)["differing"], json!([17]));

    let mut s = spec("slots", Metric::SlotsExact, pair(&a, &b));
    let r = run_check(&s);
    assert!(r.error.unwrap().contains("axis"));
    s.axis = Some(4);
    assert!(run_check(&s).error.unwrap().contains("out of range"));
}

fn fortran_bytes(c: &[f32], shape: [usize; 3]) -> Vec<u8> {
    let [d0, d1, d2] = shape;
    let mut out = Vec::new();
    for k in 0..d2 {
        for j in 0..d1 {
            for i in 0..d0 {
                out.extend_from_slice(&c[(i * d1 + j) * d2 + k].to_le_bytes());
            }
        }
    }
    out
}

#[test]
fn fortran_and_c_copies_compare_equal() {
    let d = tempfile::tempdir().unwrap();
    let c: Vec<f32> = (0..24).map(|i| i as f32 * 0.5).collect();
    let pc = npy(&d.path().join("c.npy"), "<f4", &[2, 3, 4], false, &f32s(&c));
    let pf = npy(
        &d.path().join("f.npy"),
        "<f4",
        &[2, 3, 4],
        true,
        &fortran_bytes(&c, [2, 3, 4]),
    );
    for m in [Metric::BitExact, Metric::RelRms, Metric::MaxAbs] {
        let r = run_check(&spec("cf", m, pair(&pf, &pc)));
        assert_eq!(r.error, None, "{m:?}");
        assert!(r.passed, "{m:?}");
        if m != Metric::BitExact {
            assert_eq!(r.value.finite(), Some(0.0), "{m:?}");
        }
    }
    let mut s = spec("cf", Metric::SlotsExact, pair(&pf, &pc));
    s.axis = Some(1);
    assert_eq!(run_check(&s).value.to_json(), json!(3));
    // Both Fortran: the fast byte path with a reversed axis.
    let mut c2 = c.clone();
    c2[(3 + 2) * 4 + 1] = 99.0; // element [1, 2, 1] of shape [2, 3, 4]
    let pf2 = npy(
        &d.path().join("f2.npy"),
        "<f4",
        &[2, 3, 4],
        true,
        &fortran_bytes(&c2, [2, 3, 4]),
    );
    s.inputs = pair(&pf2, &pf);
    let r = run_check(&s);
    assert_eq!(r.value.to_json(), json!(2));
    assert_eq!(detail(&r)["differing"], json!([2]));
    let r = run_check(&spec("m", Metric::MaxAbs, pair(&pf2, &pf)));
    assert_eq!(r.value.to_json(), json!(99.0 - 10.5));
    assert_eq!(detail(&r)["index"], json!(21), "logical index of [1, 2, 1]");
}

fn st_file(path: &Path, k: &[f32], v: &[f32]) -> PathBuf {
    let kb = f32s(k);
    let vb = f32s(v);
    let views = vec![
        (
            "k".to_string(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![k.len()], &kb)
                .unwrap(),
        ),
        (
            "v".to_string(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![v.len()], &vb)
                .unwrap(),
        ),
    ];
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
    path.to_path_buf()
}

#[test]
fn bit_exact_pairs_and_across_repeats() {
    let d = tempfile::tempdir().unwrap();
    let r0 = st_file(&d.path().join("r0.safetensors"), &[1.0, 2.0], &[3.0, 4.0]);
    let r1 = st_file(&d.path().join("r1.safetensors"), &[1.0, 2.0], &[3.0, 4.0]);
    let r2 = st_file(&d.path().join("r2.safetensors"), &[1.0, 2.0], &[3.0, 4.5]);
    let s = |p: &PathBuf| p.display().to_string();

    let r = run_check(&spec("be", Metric::BitExact, pair(&s(&r0), &s(&r1))));
    assert_eq!(r.value.to_json(), json!(true));
    assert!(r.passed);
    let r = run_check(&spec("be", Metric::BitExact, pair(&s(&r0), &s(&r2))));
    assert_eq!(r.value.to_json(), json!(false));
    assert!(!r.passed);
    assert_eq!(detail(&r)["tensors"]["v"]["differing_elements"], json!(1));
    assert_eq!(detail(&r)["tensors"]["v"]["first_difference"], json!(1));
    assert_eq!(detail(&r)["tensors"]["k"]["identical"], json!(true));
    // Naming one tensor compares only it.
    let r = run_check(&spec(
        "be",
        Metric::BitExact,
        pair(&format!("{}:k", s(&r0)), &format!("{}:k", s(&r2))),
    ));
    assert!(r.passed);

    let across = CheckInputs::Across {
        files: vec![s(&r0), s(&r1), s(&r2)],
    };
    let r = run_check(&spec("across", Metric::BitExact, across));
    assert_eq!(r.value.to_json(), json!(2));
    assert_eq!(detail(&r)["files"], json!(3));
    assert!(!r.passed);
    let found = detail(&r);
    let differ = found["differing"].as_array().unwrap();
    assert_eq!(differ.len(), 1);
    assert_eq!(differ[0]["file"], json!(s(&r2)));
    assert!(differ[0]["reason"].as_str().unwrap().contains("v: 1 of 2"));

    let r = run_check(&spec(
        "across",
        Metric::BitExact,
        CheckInputs::Across {
            files: vec![s(&r0), s(&r1)],
        },
    ));
    assert_eq!(r.value.to_json(), json!(2));
    assert!(r.passed);

    // An unreadable repeat counts as differing, with why.
    let r = run_check(&spec(
        "across",
        Metric::BitExact,
        CheckInputs::Across {
            files: vec![s(&r0), "/nowhere/r3.safetensors".into()],
        },
    ));
    assert!(!r.passed);
    assert!(detail(&r)["differing"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("not found"));

    // Different dtypes are never bit-exact, whatever the values.
    let a = npy(
        &d.path().join("a.npy"),
        "<f4",
        &[2],
        false,
        &f32s(&[1.0, 2.0]),
    );
    let b = npy(
        &d.path().join("b.npy"),
        "<f8",
        &[2],
        false,
        &f64s(&[1.0, 2.0]),
    );
    let r = run_check(&spec("be", Metric::BitExact, pair(&a, &b)));
    assert!(!r.passed);
    assert!(detail(&r)["tensors"][""]["reason"]
        .as_str()
        .unwrap()
        .contains("dtype"));
}

#[test]
fn unreadable_inputs_and_wrong_arity_fail_with_an_error() {
    let d = tempfile::tempdir().unwrap();
    let a = npy(
        &d.path().join("a.npy"),
        "<f4",
        &[2],
        false,
        &f32s(&[1.0, 2.0]),
    );
    let b = npy(
        &d.path().join("b.npy"),
        "<f4",
        &[3],
        false,
        &f32s(&[1.0, 2.0, 3.0]),
    );
    let r = run_check(&spec("x", Metric::RelRms, pair(&a, "/nowhere/b.npy")));
    assert!(!r.passed);
    assert!(r.error.unwrap().contains("not found"));
    let r = run_check(&spec("x", Metric::RelRms, pair(&a, &b)));
    assert!(!r.passed);
    assert!(r.error.unwrap().contains("shape mismatch"));
    let r = run_check(&spec("x", Metric::Finite, pair(&a, &b)));
    assert!(r.error.unwrap().contains("one input"));
    let r = run_check(&spec(
        "x",
        Metric::MaxAbs,
        CheckInputs::Single { actual: a.clone() },
    ));
    assert!(r.error.unwrap().contains("two inputs"));
    let mut s = spec("x", Metric::Finite, CheckInputs::Single { actual: a });
    s.dtype = Some("complex64".into());
    assert!(run_check(&s).error.unwrap().contains("unknown dtype"));
}

#[test]
fn raw_inputs_use_the_declared_dtype_and_shape() {
    let d = tempfile::tempdir().unwrap();
    let bf = |v: &[f32]| -> Vec<u8> {
        v.iter()
            .flat_map(|x| half::bf16::from_f32(*x).to_le_bytes())
            .collect()
    };
    let pa = d.path().join("a.bin");
    let pb = d.path().join("b.bin");
    std::fs::write(&pa, bf(&[1.0, 2.0, 3.0, 4.0])).unwrap();
    std::fs::write(&pb, bf(&[1.0, 2.0, 3.0, 5.0])).unwrap();
    let mut s = spec(
        "raw",
        Metric::RelRms,
        pair(pa.to_str().unwrap(), pb.to_str().unwrap()),
    );
    s.dtype = Some("bf16".into());
    s.shape = Some(vec![2, 2]);
    let r = run_check(&s);
    assert_eq!(r.error, None);
    assert_eq!(r.value.to_json(), json!((1.0f64 / 39.0).sqrt()));
    assert_eq!(detail(&r)["actual"]["shape"], json!([2, 2]));
}
