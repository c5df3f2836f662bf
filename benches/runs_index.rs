//! `orchestrate runs`' index: 1,000 record folders (copies of the committed smoke
//! record, each with its own run id, start time and `record.sha256`) indexed once,
//! then listed again with nothing changed, then with one record changed. Targets
//! (#28): indexed once in under 10 s, listed in under 100 ms after. Run with
//! `cargo bench --bench runs_index`. Prints figures; asserts nothing.

use std::path::Path;
use std::time::Instant;

use orchestrate::track::{runs, RunFilter};

fn write_record(dir: &Path, rec: &serde_json::Value) {
    std::fs::create_dir_all(dir).unwrap();
    let bytes = serde_json::to_vec(rec).unwrap();
    let digest = orchestrate::digest::sha256_bytes(&bytes).hex();
    std::fs::write(dir.join("record.json"), &bytes).unwrap();
    std::fs::write(
        dir.join("record.sha256"),
        format!("{digest}  record.json\n"),
    )
    .unwrap();
}

fn main() {
    let n: usize = std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/smoke/record.json");
    let base: serde_json::Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let records = tmp.path().join("records");
    for i in 0..n {
        let mut rec = base.clone();
        let id = format!(
            "20261201T{:02}{:02}{:02}Z-{i:06x}",
            i / 3600 % 24,
            i / 60 % 60,
            i % 60
        );
        rec["run_id"] = serde_json::Value::String(id.clone());
        rec["started_at"] = serde_json::Value::String(format!(
            "2026-12-01T{:02}:{:02}:{:02}Z",
            i / 3600 % 24,
            i / 60 % 60,
            i % 60
        ));
        write_record(&records.join(&id), &rec);
    }
    let folders = vec![records.clone()];
    let t = Instant::now();
    let (rows, done) = runs(&folders, &RunFilter::default()).unwrap();
    let first = t.elapsed();
    assert_eq!(rows.len(), n);
    println!(
        "index {n} records once: {:.2} s ({} read)",
        first.as_secs_f64(),
        done[0].read
    );
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        let (rows, done) = runs(&folders, &RunFilter::default()).unwrap();
        best = best.min(t.elapsed().as_secs_f64());
        assert_eq!((rows.len(), done[0].read), (n, 0));
    }
    println!(
        "list {n} runs, nothing changed: {:.1} ms (best of 5)",
        best * 1e3
    );
    let one = std::fs::read_dir(&records)
        .unwrap()
        .flatten()
        .find(|e| e.path().is_dir())
        .unwrap()
        .path();
    let mut rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(one.join("record.json")).unwrap()).unwrap();
    rec["warnings"] = serde_json::json!(["touched"]);
    write_record(&one, &rec);
    let t = Instant::now();
    let (_, done) = runs(&folders, &RunFilter::default()).unwrap();
    println!(
        "list {n} runs, one changed: {:.1} ms ({} read)",
        t.elapsed().as_secs_f64() * 1e3,
        done[0].read
    );
}
