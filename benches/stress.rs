//! The 100 000-step stress: plans of 1000 trivial isolated steps (memory and pids
//! limits, `--jobs 2`) run one after another until the total is reached; prints how
//! many attempts failed, per million. Every failure here is spurious: `true` cannot
//! fail. `cargo bench --bench stress` (`ORCHESTRATE_STRESS_STEPS=N` for another
//! total, `ORCHESTRATE_BENCH_DIR` for where records go).

use std::fmt::Write as _;
use std::process::Command;
use std::time::Instant;

const PER_RUN: usize = 1000;

fn wide_plan() -> String {
    let mut s = String::from(
        "schema = \"orchestrate/plan/v1\"\nname = \"stress\"\n[limits]\nhost_memory = \"64MiB\"\npids = 64\ntimeout = \"30s\"\n",
    );
    for i in 0..PER_RUN {
        let _ = write!(s, "[steps.s{i}]\nrun = [\"true\"]\n");
    }
    s
}

fn main() {
    let total: usize = std::env::var("ORCHESTRATE_STRESS_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let dir = match std::env::var_os("ORCHESTRATE_BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base),
        None => tempfile::tempdir(),
    }
    .expect("tempdir");
    let plan = dir.path().join("stress.toml");
    std::fs::write(&plan, wide_plan()).expect("write plan");
    let bin = env!("CARGO_BIN_EXE_orchestrate");
    let runs = total.div_ceil(PER_RUN);
    let (mut steps, mut failed, mut failed_runs) = (0usize, 0usize, 0usize);
    let mut first_failure = None;
    let start = Instant::now();
    for _ in 0..runs {
        let records = dir.path().join("records");
        let out = Command::new(bin)
            .arg("run")
            .arg(&plan)
            .args(["--jobs", "2", "--progress", "quiet", "--records"])
            .arg(&records)
            .output()
            .expect("orchestrate");
        let record = std::fs::read_dir(&records)
            .ok()
            .and_then(|mut r| r.find_map(|e| e.ok().map(|e| e.path().join("record.json"))))
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
        let ok = record
            .as_ref()
            .and_then(|r| r["steps"].as_array())
            .map_or(0, |s| {
                s.iter().filter(|x| x["status"] == "succeeded").count()
            });
        steps += PER_RUN;
        failed += PER_RUN - ok;
        if !out.status.success() {
            failed_runs += 1;
            if first_failure.is_none() {
                first_failure = record
                    .as_ref()
                    .and_then(|r| r["failures"].get(0).map(|f| f["what"].to_string()))
                    .or_else(|| Some(String::from_utf8_lossy(&out.stderr).into_owned()));
            }
        }
        let _ = std::fs::remove_dir_all(&records);
        let _ = std::fs::remove_dir_all(dir.path().join("work"));
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{steps} steps in {runs} runs of {PER_RUN}: {failed} failed steps ({:.1} per million), {failed_runs} failed runs, {:.2} ms per step",
        failed as f64 * 1e6 / steps as f64,
        secs * 1000.0 / steps as f64
    );
    if let Some(f) = first_failure {
        println!("first failure: {f}");
    }
}
