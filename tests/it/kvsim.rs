//! Integration tests of the `kvsim` workload binary at small sizes: determinism of
//! every subcommand, file formats, handoff numerics and metrics.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kvsim");
const LAYERS: usize = 2;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = 8;
const VOCAB: usize = 96;
const TOKENS: usize = 64;

fn kvsim(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().expect("run kvsim");
    assert!(
        out.status.success(),
        "kvsim {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

fn compile(dir: &Path) -> String {
    kvsim(&[
        "compile",
        "--out",
        s(dir),
        "--layers",
        "2",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--head-dim",
        "8",
        "--hidden",
        "32",
        "--ffn",
        "64",
        "--vocab",
        "96",
        "--seed",
        "3",
    ])
}

fn prefill(model: &Path, out: &Path, numerics: &str) -> String {
    kvsim(&[
        "prefill",
        "--model",
        s(model),
        "--tokens",
        "64",
        "--out",
        s(out),
        "--seed",
        "5",
        "--numerics",
        numerics,
    ])
}

fn decode(model: &Path, pre: &Path, out: &Path, extra: &[&str]) {
    let kv = pre.join("kv.safetensors");
    let prompt = pre.join("prompt.npy");
    let mut args = vec![
        "decode",
        "--model",
        s(model),
        "--kv",
        s(&kv),
        "--prompt",
        s(&prompt),
        "--steps",
        "6",
        "--out",
        s(out),
        "--slots",
        "16",
    ];
    args.extend_from_slice(extra);
    kvsim(&args);
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Parses an .npy v1 header by hand: (descr, shape, payload).
fn npy(p: &Path) -> (String, Vec<usize>, Vec<u8>) {
    let b = read(p);
    assert_eq!(&b[..8], b"\x93NUMPY\x01\x00", "magic of {}", p.display());
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    assert_eq!((10 + hlen) % 64, 0, "header alignment");
    let h = std::str::from_utf8(&b[10..10 + hlen]).expect("ascii header");
    assert!(h.ends_with('\n'));
    assert!(h.contains("'fortran_order': False"));
    let descr = h
        .split("'descr': '")
        .nth(1)
        .expect("descr")
        .split('\'')
        .next()
        .expect("descr");
    let shape_txt = h
        .split("'shape': (")
        .nth(1)
        .expect("shape")
        .split(')')
        .next()
        .expect("shape");
    let shape = shape_txt
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse().expect("dim"))
        .collect();
    (descr.to_string(), shape, b[10 + hlen..].to_vec())
}

fn npy_f32(p: &Path) -> Vec<f32> {
    let (d, shape, body) = npy(p);
    assert_eq!(d, "<f4");
    assert_eq!(body.len(), shape.iter().product::<usize>() * 4);
    body.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn npy_i64(p: &Path) -> Vec<i64> {
    let (d, shape, body) = npy(p);
    assert_eq!(d, "<i8");
    assert_eq!(shape.len(), 1);
    assert_eq!(body.len(), shape[0] * 8);
    body.chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// (shape, values) of an F32 tensor in a safetensors file.
fn st_tensor(p: &Path, name: &str) -> (Vec<usize>, Vec<f32>) {
    let bytes = read(p);
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("valid safetensors");
    let t = st.tensor(name).expect("tensor present");
    assert_eq!(t.dtype(), safetensors::Dtype::F32);
    let vals = t
        .data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (t.shape().to_vec(), vals)
}

fn rel_rms(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - *y as f64).powi(2))
        .sum();
    let den: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (num / den).sqrt()
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

fn model(dir: &Path) -> PathBuf {
    let m = dir.join("model");
    compile(&m);
    m
}

#[test]
fn compile_is_deterministic_and_skips_up_to_date_stages() {
    let d = tmp();
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    let first = compile(&a);
    assert_eq!(first.matches("built").count(), 3, "{first}");
    compile(&b);
    for f in [
        "config.json",
        "weights.safetensors",
        "packed.bin",
        "manifest.json",
    ] {
        assert_eq!(read(&a.join(f)), read(&b.join(f)), "{f} differs");
    }
    let again = compile(&a);
    assert_eq!(again.matches("skipped").count(), 3, "{again}");
    // A changed config invalidates weights and pack, which then rebuild.
    let changed = kvsim(&[
        "compile",
        "--out",
        s(&a),
        "--layers",
        "2",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--head-dim",
        "8",
        "--hidden",
        "32",
        "--ffn",
        "64",
        "--vocab",
        "96",
        "--seed",
        "4",
    ]);
    assert_eq!(changed.matches("built").count(), 3, "{changed}");
    assert_ne!(
        read(&a.join("weights.safetensors")),
        read(&b.join("weights.safetensors"))
    );
    // Single stages: only the one asked for runs.
    let only = kvsim(&["compile", "--out", s(&b), "--stage", "pack"]);
    assert!(
        only.contains("pack: skipped") && !only.contains("config"),
        "{only}"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&read(&b.join("manifest.json"))).expect("manifest json");
    assert!(manifest["parts"]
        .as_array()
        .is_some_and(|p| p.len() == 2 + 6 * LAYERS + 1));
}

#[test]
fn prefill_repeats_are_bit_exact_and_files_have_the_documented_shapes() {
    let d = tmp();
    let m = model(d.path());
    let (p1, p2) = (d.path().join("p1"), d.path().join("p2"));
    let metrics = d.path().join("metrics.json");
    let out = Command::new(BIN)
        .args([
            "prefill",
            "--model",
            s(&m),
            "--tokens",
            "64",
            "--out",
            s(&p1),
            "--seed",
            "5",
        ])
        .env("ORCHESTRATE_METRICS", &metrics)
        .output()
        .expect("run");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    prefill(&m, &p2, "f32");
    for f in ["kv.safetensors", "logits.npy", "tokens.npy", "prompt.npy"] {
        assert_eq!(
            read(&p1.join(f)),
            read(&p2.join(f)),
            "{f} differs between repeats"
        );
    }
    let (kshape, k) = st_tensor(&p1.join("kv.safetensors"), "k");
    assert_eq!(kshape, vec![LAYERS, KV_HEADS, TOKENS, HEAD_DIM]);
    assert_eq!(st_tensor(&p1.join("kv.safetensors"), "v").0, kshape);
    assert!(k.iter().all(|x| x.is_finite()) && k.iter().any(|x| *x != 0.0));
    let logits = npy_f32(&p1.join("logits.npy"));
    assert_eq!(npy(&p1.join("logits.npy")).1, vec![TOKENS, VOCAB]);
    assert!(logits.iter().all(|x| x.is_finite()));
    let tokens = npy_i64(&p1.join("tokens.npy"));
    assert_eq!(tokens.len(), TOKENS);
    // tokens.npy is the argmax of each logits row.
    for (row, &t) in logits.chunks_exact(VOCAB).zip(&tokens) {
        let best = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        assert_eq!(row[t as usize], best);
    }
    let prompt = npy_i64(&p1.join("prompt.npy"));
    assert_eq!(prompt.len(), TOKENS);
    assert!(prompt.iter().all(|&t| (0..VOCAB as i64).contains(&t)));
    let mj: serde_json::Value = serde_json::from_slice(&read(&metrics)).expect("metrics json");
    assert_eq!(mj["tokens"], 64);
    assert_eq!(mj["layers"], LAYERS);
    assert!(mj["prefill_ms"].as_f64().is_some_and(|v| v >= 0.0));
    assert!(mj["tokens_per_s"].as_f64().is_some());
}

#[test]
fn reference_decode_is_bit_exact_and_continues_the_prefill() {
    let d = tmp();
    let m = model(d.path());
    let pre = d.path().join("pre");
    prefill(&m, &pre, "f32");
    let (r1, r2) = (d.path().join("r1"), d.path().join("r2"));
    let metrics = d.path().join("dm.json");
    let st = Command::new(BIN)
        .args([
            "decode",
            "--model",
            s(&m),
            "--kv",
            s(&pre.join("kv.safetensors")),
        ])
        .args([
            "--prompt",
            s(&pre.join("prompt.npy")),
            "--steps",
            "6",
            "--out",
            s(&r1),
            "--slots",
            "16",
        ])
        .env("ORCHESTRATE_METRICS", &metrics)
        .status()
        .expect("run");
    assert!(st.success());
    decode(&m, &pre, &r2, &[]);
    for f in ["tokens.npy", "logits.npy", "kv_readback.safetensors"] {
        assert_eq!(
            read(&r1.join(f)),
            read(&r2.join(f)),
            "{f} differs between runs"
        );
    }
    // The first decoded step recomputes the last prompt position against the imported
    // cache: with f32 numerics it equals the prefill's last logits row bit for bit.
    let pl = npy_f32(&pre.join("logits.npy"));
    let dl = npy_f32(&r1.join("logits.npy"));
    assert_eq!(npy(&r1.join("logits.npy")).1, vec![6, VOCAB]);
    assert_eq!(&dl[..VOCAB], &pl[(TOKENS - 1) * VOCAB..]);
    assert_eq!(
        npy_i64(&r1.join("tokens.npy"))[0],
        *npy_i64(&pre.join("tokens.npy")).last().unwrap()
    );
    // A token-major f32 import is lossless: same bits as the head-major one.
    let tm = d.path().join("tm");
    decode(&m, &pre, &tm, &["--layout", "token-major"]);
    assert_eq!(read(&tm.join("logits.npy")), read(&r2.join("logits.npy")));
    let mj: serde_json::Value = serde_json::from_slice(&read(&metrics)).expect("metrics json");
    assert!(mj["decode_ms"].as_f64().is_some() && mj["tokens_per_s"].as_f64().is_some());
}

#[test]
fn bf16_handoffs_differ_from_the_reference_by_a_small_nonzero_rms() {
    let d = tmp();
    let m = model(d.path());
    let pre = d.path().join("pre");
    prefill(&m, &pre, "f32");
    let (r, gpu, atom) = (
        d.path().join("ref"),
        d.path().join("gpu"),
        d.path().join("atom"),
    );
    decode(&m, &pre, &r, &[]);
    decode(&m, &pre, &gpu, &["--cast", "bf16"]);
    decode(
        &m,
        &pre,
        &atom,
        &["--numerics", "bf16", "--layout", "token-major"],
    );

    let (shape, k_pre) = st_tensor(&pre.join("kv.safetensors"), "k");
    let (rb_shape, k_gpu) = st_tensor(&gpu.join("kv_readback.safetensors"), "k");
    assert_eq!(rb_shape, vec![shape[0], shape[1], 16, shape[3]]);
    let (_, k_ref) = st_tensor(&r.join("kv_readback.safetensors"), "k");
    let (_, k_atom) = st_tensor(&atom.join("kv_readback.safetensors"), "k");
    // Readback: exact for the reference and the uncast token-major import.
    assert_eq!(k_ref, k_atom);
    assert_eq!(&k_ref[..16 * HEAD_DIM], &k_pre[..16 * HEAD_DIM]);
    let kr = rel_rms(&k_gpu, &k_ref);
    assert!(kr > 1e-4 && kr < 1e-2, "bf16 cast K rel rms {kr}");

    let lr = npy_f32(&r.join("logits.npy"));
    for (name, dir) in [("gpu", &gpu), ("atom", &atom)] {
        let l = npy_f32(&dir.join("logits.npy"));
        let e = rel_rms(&l, &lr);
        assert!(e > 1e-4 && e < 0.1, "{name} logits rel rms {e}");
    }
    // bf16 prefill differs from the f32 one by a small amount too.
    let pb = d.path().join("pre_bf16");
    prefill(&m, &pb, "bf16");
    let (_, k_bf) = st_tensor(&pb.join("kv.safetensors"), "k");
    let e = rel_rms(&k_bf, &k_pre);
    assert!(e > 1e-4 && e < 0.05, "bf16 prefill K rel rms {e}");
}

#[test]
fn bad_arguments_exit_with_usage_code() {
    let out = Command::new(BIN)
        .args(["prefill", "--tokens", "x"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(BIN)
        .args([
            "compile",
            "--out",
            "/tmp/x",
            "--heads",
            "3",
            "--kv-heads",
            "2",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
}
