//! What running measured steps alone costs and buys, in one run so the ratios
//! compare (these machines are shared and noisy): prints figures, asserts nothing.
//!
//! 1. **Cost**: a sweep's wall time with its measured steps alone (the default)
//!    against the same plan with `exclusive = false`, alternating, `--jobs 2`. The
//!    sweep is `plans/full.toml` at 2K (`ORCHESTRATE_BENCH_TOKENS=2048`, the
//!    default; `2048,8192` for the flagship sweep), run with `--no-cache`.
//! 2. **What it buys**: a timed step (random lookups in a 400 000-entry dict,
//!    repeats 7) beside a busy step of the same run (copying 256 MiB over and over
//!    on both cores), alone and not, alternating: its median and dispersion
//!    ((max − min) / median) each way. A CPU-bound neighbour alone barely moves it:
//!    each attempt's cgroup gets an equal CPU share. What a neighbour takes is the
//!    memory bandwidth and the caches, which no cgroup on these hosts divides.
//!
//! `cargo bench --bench alone` (ORCHESTRATE_BENCH_ROUNDS, default 3).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn orchestrate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_orchestrate"))
}

/// One run of `plan`; its wall time in seconds and its record folder.
fn run(plan: &Path, records: &Path, extra: &[&str]) -> (f64, std::path::PathBuf) {
    let t0 = Instant::now();
    let out = orchestrate()
        .arg("run")
        .arg(plan)
        .arg("--records")
        .arg(records)
        .args(["--progress", "quiet", "--jobs", "2", "--no-cache"])
        .args(extra)
        .output()
        .expect("run orchestrate");
    let wall = t0.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string();
    (wall, last.into())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

const TIMED: &str = r#"schema = "orchestrate/plan/v1"
name = "timed-beside-busy"
[steps.timed]
repeats = 7
shell = '''python3 -c "
import json, os, random, time
random.seed(1)
d = {i: random.random() for i in range(400_000)}
keys = list(d)
random.shuffle(keys)
t = time.perf_counter()
s = 0.0
for k in keys: s += d[k]
json.dump({'loop_ms': (time.perf_counter() - t) * 1000}, open(os.environ['ORCHESTRATE_METRICS'], 'w'))
"'''
[steps.timed.report]
metric = "loop_ms"
[steps.busy]
shell = '''python3 -c "
import multiprocessing as m, time
def copy(_):
    b = bytearray(256 << 20)
    t = time.time()
    while time.time() - t < 15: bytes(b)
m.Pool(2).map(copy, range(2))
"'''
"#;

/// The timed step's loop_ms samples in the record at `dir`.
fn samples(dir: &Path) -> Vec<f64> {
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("record.json")).expect("record"))
            .expect("json");
    rec["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter(|s| s["id"] == "timed")
        .flat_map(|s| s["attempts"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a["metrics"]["loop_ms"].as_f64())
        .collect()
}

fn main() {
    let rounds: usize = std::env::var("ORCHESTRATE_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let tokens = std::env::var("ORCHESTRATE_BENCH_TOKENS").unwrap_or_else(|_| "2048".into());
    let dir = tempfile::tempdir().expect("temp dir");
    let records = dir.path().join("records");
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/full.toml");
    let matrix = format!("matrix.tokens=[{tokens}]");
    let shared = ["--set", &matrix, "--set", "steps.prefill.exclusive=false"];
    let alone = ["--set", &matrix];
    let (mut a, mut s) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.push(run(&full, &records, &alone).0);
        s.push(run(&full, &records, &shared).0);
    }
    let (ma, ms) = (median(&mut a), median(&mut s));
    println!(
        "sweep plans/full.toml tokens=[{tokens}], --jobs 2, {rounds} rounds: measured steps alone {ma:.2} s (median; {a:.2?}), shared {ms:.2} s ({s:.2?}): alone takes {:.3}× the wall time",
        ma / ms
    );

    let timed = dir.path().join("timed.toml");
    std::fs::write(&timed, TIMED).expect("plan");
    let timed_shared = dir.path().join("timed-shared.toml");
    std::fs::write(
        &timed_shared,
        TIMED.replace("repeats = 7\n", "repeats = 7\nexclusive = false\n"),
    )
    .expect("plan");
    for round in 1..=rounds {
        for (what, plan) in [("alone", &timed), ("beside the busy step", &timed_shared)] {
            let (wall, rec) = run(plan, &records, &[]);
            let mut v = samples(&rec);
            let (lo, hi) = (
                v.iter().copied().fold(f64::INFINITY, f64::min),
                v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            );
            let m = median(&mut v);
            println!(
                "round {round}: timed loop {what}: median {m:.1} ms, dispersion {:.1}% (n={}), run {wall:.2} s",
                (hi - lo) / m * 100.0,
                v.len()
            );
        }
    }
}
