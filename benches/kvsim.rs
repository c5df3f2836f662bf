//! Prefill figures of the `kvsim` workload at the flagship sizes (32 layers, 16 query
//! heads, 8 KV heads, head size 8). Prints wall and CPU-side figures; asserts nothing.
//!
//! `cargo bench --bench kvsim` runs 2048 tokens; set `KVSIM_BENCH_TOKENS=2048,8192`
//! for more. The plans need an 8K prefill of at most ~20 s on 2 cores.

use std::process::Command;
use std::time::Instant;

fn main() {
    let bin = env!("CARGO_BIN_EXE_kvsim");
    let dir = tempfile::tempdir().expect("temp dir");
    let model = dir.path().join("model");
    let model = model.to_str().expect("utf-8 path");
    let st = Command::new(bin)
        .args(["compile", "--out", model])
        .output()
        .expect("run kvsim compile");
    assert!(st.status.success(), "compile failed");
    let sizes = std::env::var("KVSIM_BENCH_TOKENS").unwrap_or_else(|_| "2048".into());
    for tokens in sizes.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let out = dir.path().join(format!("p{tokens}"));
        let metrics = dir.path().join(format!("m{tokens}.json"));
        let t0 = Instant::now();
        let st = Command::new(bin)
            .args(["prefill", "--model", model, "--tokens", tokens, "--out"])
            .arg(&out)
            .env("ORCHESTRATE_METRICS", &metrics)
            .output()
            .expect("run kvsim prefill");
        let wall = t0.elapsed().as_secs_f64();
        assert!(st.status.success(), "prefill failed");
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&metrics).expect("metrics")).expect("json");
        println!(
            "kvsim prefill {tokens} tokens: prefill_ms {} ({} tokens/s, {} threads), process wall {wall:.2} s",
            m["prefill_ms"], m["tokens_per_s"], m["threads"]
        );
    }
}
