//! Tensor readers: npy files written by real numpy (every dtype, v1/v2/v3 headers,
//! both byte orders, Fortran order), safetensors written by the `safetensors` crate,
//! raw files, reference parsing, and malformed files (typed errors, never a panic).

use std::path::{Path, PathBuf};
use std::process::Command;

use orchestrate::compare::{
    open, open_all, parse_npy_header, parse_safetensors_header, ByteOrder, CompareError, DType,
    OpenOptions, Order, TensorRef, TensorView,
};
use proptest::prelude::*;

/// Runs a numpy script with `OUT` set to `dir`. Without numpy the test is skipped
/// unless `ORCHESTRATE_REQUIRE_NUMPY=1`, in which case it fails.
fn numpy(dir: &Path, script: &str) -> bool {
    let ok = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import numpy as np, os\nOUT = {:?}\n{script}",
            dir.to_str().unwrap()
        ))
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        crate::support::skip_or_fail(
            crate::support::Need::Numpy,
            "python3 with numpy is not available",
        );
    }
    ok
}

fn values(v: &TensorView) -> Vec<f64> {
    let mut out = vec![0f64; v.len()];
    v.read_f64_logical(0, &mut out);
    out
}

fn open_path(p: PathBuf) -> Result<TensorView, CompareError> {
    open(
        &TensorRef {
            path: p,
            tensor: None,
        },
        &OpenOptions::default(),
    )
}

const NPY_CODES: &[(&str, DType)] = &[
    ("f8", DType::F64),
    ("f4", DType::F32),
    ("f2", DType::F16),
    ("i8", DType::I64),
    ("i4", DType::I32),
    ("i2", DType::I16),
    ("i1", DType::I8),
    ("u1", DType::U8),
    ("b1", DType::Bool),
];

#[test]
fn npy_every_dtype_every_header_version_and_byte_order() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
codes = ['f8','f4','f2','i8','i4','i2','i1','u1','b1']
for c in codes:
    a = np.array([[0, 1, 2], [3, 4, 5]])
    if c == 'b1':
        a = a % 2
    for bo in ['<', '>']:
        arr = a.astype(bo + c)
        for ver in [(1, 0), (2, 0), (3, 0)]:
            with open(os.path.join(OUT, f"{c}_{'le' if bo == '<' else 'be'}_v{ver[0]}.npy"), 'wb') as f:
                np.lib.format.write_array(f, arr, version=ver)
"#;
    if !numpy(dir.path(), script) {
        return;
    }
    for (code, dtype) in NPY_CODES {
        for bo in ["le", "be"] {
            for ver in [1, 2, 3] {
                let p = dir.path().join(format!("{code}_{bo}_v{ver}.npy"));
                let v = open_path(p.clone()).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                assert_eq!(v.dtype(), *dtype, "{}", p.display());
                assert_eq!(v.shape(), &[2, 3]);
                assert_eq!(v.order(), Order::C);
                let want_bo = if dtype.size() == 1 {
                    ByteOrder::NotApplicable
                } else if bo == "le" {
                    ByteOrder::Little
                } else {
                    ByteOrder::Big
                };
                assert_eq!(v.byte_order(), want_bo, "{}", p.display());
                let want: Vec<f64> = if *dtype == DType::Bool {
                    vec![0., 1., 0., 1., 0., 1.]
                } else {
                    vec![0., 1., 2., 3., 4., 5.]
                };
                assert_eq!(values(&v), want, "{}", p.display());
                let bytes = std::fs::read(&p).unwrap();
                let h = parse_npy_header(&bytes).unwrap();
                assert_eq!(h.major, ver as u8);
            }
        }
    }
}

#[test]
fn npy_fortran_order_reads_in_logical_order() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
a = np.arange(24, dtype='<f4').reshape(2, 3, 4)
np.save(os.path.join(OUT, 'c.npy'), a)
np.save(os.path.join(OUT, 'f.npy'), np.asfortranarray(a))
np.save(os.path.join(OUT, 'fbe.npy'), np.asfortranarray(a.astype('>f8')))
"#;
    if !numpy(dir.path(), script) {
        return;
    }
    let c = open_path(dir.path().join("c.npy")).unwrap();
    let f = open_path(dir.path().join("f.npy")).unwrap();
    let fbe = open_path(dir.path().join("fbe.npy")).unwrap();
    assert_eq!(f.order(), Order::Fortran);
    assert_eq!(f.shape(), &[2, 3, 4]);
    let want: Vec<f64> = (0..24).map(f64::from).collect();
    assert_eq!(values(&c), want);
    assert_eq!(values(&f), want);
    assert_eq!(values(&fbe), want);
    // Storage really is column-major: the second stored element is a[1,0,0] = 12.
    let mut two = [0f64; 2];
    f.read_f64(0, &mut two);
    assert_eq!(two, [0.0, 12.0]);
}

#[test]
fn npy_unsupported_dtypes_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
np.save(os.path.join(OUT, 'c8.npy'), np.zeros(3, dtype='<c8'))
np.save(os.path.join(OUT, 'rec.npy'), np.zeros(3, dtype=[('a', '<f4'), ('b', '<i4')]))
np.save(os.path.join(OUT, 'str.npy'), np.array(['ab', 'cd']))
"#;
    if !numpy(dir.path(), script) {
        return;
    }
    for name in ["c8.npy", "rec.npy", "str.npy"] {
        match open_path(dir.path().join(name)) {
            Err(CompareError::UnsupportedDtype { .. }) => {}
            other => panic!("{name}: expected UnsupportedDtype, got {other:?}"),
        }
    }
}

fn st_bytes(tensors: &[(&str, safetensors::Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(n, d, s, b)| {
            (
                n.to_string(),
                safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap(),
            )
        })
        .collect();
    safetensors::serialize(views, None).unwrap()
}

#[test]
fn safetensors_every_dtype_by_name() {
    use safetensors::Dtype as D;
    let dir = tempfile::tempdir().unwrap();
    let vals = [0.0f64, 1.0, 2.0, 3.0, 4.0, 5.0];
    let mk = |f: &dyn Fn(f64) -> Vec<u8>| vals.iter().flat_map(|&v| f(v)).collect::<Vec<u8>>();
    let tensors = vec![
        ("f64", D::F64, vec![2, 3], mk(&|v| v.to_le_bytes().to_vec())),
        (
            "f32",
            D::F32,
            vec![2, 3],
            mk(&|v| (v as f32).to_le_bytes().to_vec()),
        ),
        (
            "f16",
            D::F16,
            vec![2, 3],
            mk(&|v| half::f16::from_f64(v).to_le_bytes().to_vec()),
        ),
        (
            "bf16",
            D::BF16,
            vec![2, 3],
            mk(&|v| half::bf16::from_f64(v).to_le_bytes().to_vec()),
        ),
        (
            "i64",
            D::I64,
            vec![2, 3],
            mk(&|v| (v as i64).to_le_bytes().to_vec()),
        ),
        (
            "i32",
            D::I32,
            vec![2, 3],
            mk(&|v| (v as i32).to_le_bytes().to_vec()),
        ),
        (
            "i16",
            D::I16,
            vec![2, 3],
            mk(&|v| (v as i16).to_le_bytes().to_vec()),
        ),
        (
            "i8",
            D::I8,
            vec![2, 3],
            mk(&|v| (v as i8).to_le_bytes().to_vec()),
        ),
        ("u8", D::U8, vec![2, 3], mk(&|v| vec![v as u8])),
        ("bool", D::BOOL, vec![2, 3], mk(&|v| vec![(v as u8) % 2])),
    ];
    let path = dir.path().join("all.safetensors");
    std::fs::write(&path, st_bytes(&tensors)).unwrap();
    for (name, _, _, _) in &tensors {
        let r = TensorRef::parse(&format!("{}:{name}", path.display()));
        assert_eq!(r.tensor.as_deref(), Some(*name));
        let v = open(&r, &OpenOptions::default()).unwrap();
        assert_eq!(v.dtype().name(), *name);
        assert_eq!(v.shape(), &[2, 3]);
        let want: Vec<f64> = if *name == "bool" {
            vec![0., 1., 0., 1., 0., 1.]
        } else {
            vals.to_vec()
        };
        assert_eq!(values(&v), want, "{name}");
    }
    let all = open_all(
        &TensorRef::parse(&path.display().to_string()),
        &OpenOptions::default(),
    )
    .unwrap();
    assert_eq!(all.len(), tensors.len());
    // No tensor named in a file with several: a clear error naming them.
    let err = open(
        &TensorRef::parse(&path.display().to_string()),
        &OpenOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, CompareError::AmbiguousTensor { .. }), "{err}");
    let err = open(
        &TensorRef::parse(&format!("{}:nope", path.display())),
        &OpenOptions::default(),
    )
    .unwrap_err();
    match err {
        CompareError::NoSuchTensor { available, .. } => assert!(available.contains("bf16")),
        other => panic!("{other}"),
    }
}

#[test]
fn safetensors_kv_layout_from_crate() {
    let dir = tempfile::tempdir().unwrap();
    let shape = vec![2usize, 2, 8, 4];
    let n: usize = shape.iter().product();
    let k: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let v: Vec<u8> = (0..n).flat_map(|i| (-(i as f32)).to_le_bytes()).collect();
    let path = dir.path().join("kv.safetensors");
    std::fs::write(
        &path,
        st_bytes(&[
            ("k", safetensors::Dtype::F32, shape.clone(), k),
            ("v", safetensors::Dtype::F32, shape.clone(), v),
        ]),
    )
    .unwrap();
    let kv = open(
        &TensorRef::parse(&format!("{}:v", path.display())),
        &OpenOptions::default(),
    )
    .unwrap();
    assert_eq!(kv.shape(), &[2, 2, 8, 4]);
    assert!(
        kv.as_f32_slice().is_some(),
        "aligned f32 takes the fast path"
    );
    assert_eq!(values(&kv)[5], -5.0);
}

#[test]
fn raw_files_need_a_dtype_and_matching_size() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.bin");
    let data: Vec<u8> = [1.5f32, -2.0, 3.25, 4.0, 5.0, 6.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(&p, &data).unwrap();
    let r = TensorRef::parse(p.to_str().unwrap());
    assert!(matches!(
        open(&r, &OpenOptions::default()),
        Err(CompareError::UnknownFormat { .. })
    ));
    let flat = open(
        &r,
        &OpenOptions {
            raw_dtype: Some(DType::F32),
            raw_shape: None,
        },
    )
    .unwrap();
    assert_eq!(flat.shape(), &[6]);
    assert_eq!(values(&flat), vec![1.5, -2.0, 3.25, 4.0, 5.0, 6.0]);
    let shaped = open(
        &r,
        &OpenOptions {
            raw_dtype: Some(DType::F32),
            raw_shape: Some(vec![2, 3]),
        },
    )
    .unwrap();
    assert_eq!(shaped.shape(), &[2, 3]);
    let bf = open(
        &r,
        &OpenOptions {
            raw_dtype: Some(DType::BF16),
            raw_shape: Some(vec![12]),
        },
    )
    .unwrap();
    assert_eq!(bf.dtype(), DType::BF16);
    // bf16 is the upper half of an f32: element 1 (high half of 1.5f32) is 1.5.
    let mut two = [0f64; 2];
    bf.read_f64(0, &mut two);
    assert_eq!(two[1], 1.5);
    let err = open(
        &r,
        &OpenOptions {
            raw_dtype: Some(DType::F32),
            raw_shape: Some(vec![2, 4]),
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            CompareError::SizeMismatch {
                needed: 32,
                actual: 24,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn reference_parser_splits_only_at_a_safetensors_file() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("a:b");
    std::fs::create_dir(&odd).unwrap();
    let npy = odd.join("x:y.npy");
    std::fs::write(&npy, b"").unwrap();
    let r = TensorRef::parse(npy.to_str().unwrap());
    assert_eq!(r.path, npy);
    assert_eq!(r.tensor, None);

    let st = odd.join("kv.safetensors");
    std::fs::write(&st, b"").unwrap();
    let r = TensorRef::parse(&format!("{}:k", st.display()));
    assert_eq!(r.path, st);
    assert_eq!(r.tensor.as_deref(), Some("k"));
    // A safetensors file that does not exist yet still splits (so the error is
    // "file not found" for the file, not for "file:k").
    let r = TensorRef::parse("/nowhere/kv.safetensors:k");
    assert_eq!(r.path, PathBuf::from("/nowhere/kv.safetensors"));
    assert_eq!(r.tensor.as_deref(), Some("k"));
    let r = TensorRef::parse("/nowhere/logits.npy");
    assert_eq!(r.tensor, None);
    // A file whose own name ends in ":k" is taken whole.
    let weird = odd.join("w.safetensors:k");
    std::fs::write(&weird, b"").unwrap();
    let r = TensorRef::parse(weird.to_str().unwrap());
    assert_eq!(r.path, weird);
    assert_eq!(r.tensor, None);
}

fn write_npy(path: &Path, header: &str, data: &[u8], version: u8) {
    let mut h = header.to_string();
    let pre = if version == 1 { 10 } else { 12 };
    while (pre + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY".to_vec();
    b.push(version);
    b.push(0);
    if version == 1 {
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    } else {
        b.extend_from_slice(&(h.len() as u32).to_le_bytes());
    }
    b.extend_from_slice(h.as_bytes());
    b.extend_from_slice(data);
    std::fs::write(path, b).unwrap();
}

#[test]
fn malformed_files_give_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(matches!(
        open_path(d.join("missing.npy")),
        Err(CompareError::NotFound { .. })
    ));

    std::fs::write(d.join("magic.npy"), b"PK\x03\x04 not numpy at all").unwrap();
    assert!(matches!(
        open_path(d.join("magic.npy")),
        Err(CompareError::BadMagic { .. })
    ));

    std::fs::write(d.join("empty.npy"), b"").unwrap();
    assert!(matches!(
        open_path(d.join("empty.npy")),
        Err(CompareError::Truncated { .. })
    ));

    let hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
    write_npy(&d.join("short.npy"), hdr, &[0u8; 12], 1);
    match open_path(d.join("short.npy")) {
        Err(CompareError::Truncated { needed, actual, .. }) => assert_eq!(needed, actual + 4),
        other => panic!("{other:?}"),
    }
    // Header cut in the middle.
    let full = std::fs::read(d.join("short.npy")).unwrap();
    std::fs::write(d.join("cut.npy"), &full[..30]).unwrap();
    assert!(matches!(
        open_path(d.join("cut.npy")),
        Err(CompareError::Truncated { .. })
    ));

    write_npy(&d.join("v9.npy"), hdr, &[0u8; 16], 1);
    let mut b = std::fs::read(d.join("v9.npy")).unwrap();
    b[6] = 9;
    std::fs::write(d.join("v9.npy"), b).unwrap();
    assert!(matches!(
        open_path(d.join("v9.npy")),
        Err(CompareError::BadHeader { .. })
    ));

    write_npy(
        &d.join("nodescr.npy"),
        "{'fortran_order': False, 'shape': (4,), }",
        &[0u8; 16],
        2,
    );
    assert!(matches!(
        open_path(d.join("nodescr.npy")),
        Err(CompareError::BadHeader { .. })
    ));

    let huge = "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }";
    write_npy(&d.join("huge.npy"), huge, &[], 1);
    assert!(matches!(
        open_path(d.join("huge.npy")),
        Err(CompareError::BadHeader { .. })
    ));

    // bf16 has no npy code: unsupported, not misread.
    write_npy(
        &d.join("bf.npy"),
        "{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }",
        &[0u8; 4],
        1,
    );
    assert!(matches!(
        open_path(d.join("bf.npy")),
        Err(CompareError::UnsupportedDtype { .. })
    ));

    // safetensors: header longer than the file, bad JSON, offsets past the end.
    let st = |name: &str, bytes: &[u8]| {
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        open(
            &TensorRef {
                path: p,
                tensor: Some("k".into()),
            },
            &OpenOptions::default(),
        )
    };
    let mut b = 1000u64.to_le_bytes().to_vec();
    b.extend_from_slice(b"{}");
    assert!(matches!(
        st("long.safetensors", &b),
        Err(CompareError::Truncated { .. })
    ));
    let json = br#"{"k": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]"#;
    let mut b = (json.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(json);
    assert!(matches!(
        st("json.safetensors", &b),
        Err(CompareError::BadHeader { .. })
    ));
    let json = br#"{"k": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}"#;
    let mut b = (json.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(json);
    b.extend_from_slice(&[0u8; 4]);
    assert!(matches!(
        st("data.safetensors", &b),
        Err(CompareError::Truncated { .. })
    ));
    let json = br#"{"k": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}"#;
    let mut b = (json.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(json);
    b.extend_from_slice(&[0u8; 8]);
    assert!(matches!(
        st("c64.safetensors", &b),
        Err(CompareError::UnsupportedDtype { .. })
    ));
    // Offsets near u64::MAX must not overflow while computing the needed length.
    let json = format!(
        r#"{{"k": {{"dtype": "F32", "shape": [2], "data_offsets": [{}, {}]}}}}"#,
        u64::MAX - 8,
        u64::MAX
    );
    let mut b = (json.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(json.as_bytes());
    assert!(matches!(
        st("far.safetensors", &b),
        Err(CompareError::Truncated { .. })
    ));
    assert!(matches!(
        st("tiny.safetensors", b"\x01\x02"),
        Err(CompareError::Truncated { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn npy_header_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_npy_header(&bytes);
        let mut with_magic = b"\x93NUMPY\x01\x00".to_vec();
        with_magic.extend_from_slice(&bytes);
        let _ = parse_npy_header(&with_magic);
    }

    #[test]
    fn npy_header_parser_survives_mutated_headers(
        pos in 0usize..80, byte in any::<u8>(), cut in 0usize..90,
    ) {
        let mut b = b"\x93NUMPY\x01\x00F\x00{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }      \n".to_vec();
        if let Some(x) = b.get_mut(pos) { *x = byte; }
        b.truncate(cut.max(1));
        let _ = parse_npy_header(&b);
    }

    #[test]
    fn safetensors_header_parser_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..200), n in 0u64..300,
    ) {
        let _ = parse_safetensors_header(&bytes);
        let mut b = n.to_le_bytes().to_vec();
        b.push(b'{');
        b.extend_from_slice(&bytes);
        let _ = parse_safetensors_header(&b);
    }

    #[test]
    fn safetensors_header_parser_survives_odd_entries(
        dtype in "[A-Z0-9]{0,5}", s0 in any::<u64>(), s1 in 0u64..5, b in any::<u64>(), e in 0u64..64,
    ) {
        let json = format!(r#"{{"k": {{"dtype": "{dtype}", "shape": [{s0}, {s1}], "data_offsets": [{b}, {e}]}}}}"#);
        let mut bytes = (json.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(json.as_bytes());
        bytes.extend_from_slice(&[0u8; 32]);
        let _ = parse_safetensors_header(&bytes);
    }
}

#[test]
fn opening_random_files_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..300 {
        let len = (next() % 300) as usize;
        let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if i % 3 == 0 {
            b.splice(0..0, b"\x93NUMPY\x02\x00".iter().copied());
        }
        for ext in ["npy", "safetensors"] {
            let p = dir.path().join(format!("r{i}.{ext}"));
            std::fs::write(&p, &b).unwrap();
            let _ = open(
                &TensorRef {
                    path: p,
                    tensor: None,
                },
                &OpenOptions::default(),
            );
        }
    }
}
