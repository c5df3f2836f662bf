//! What reuse costs. `cargo bench --bench cache`.
//!
//! 1. Step cache: a chain of N cached steps, each writing a folder of 8 files
//!    (1 MiB), run once to fill the cache and again to reuse every step. Per reused
//!    step, the time from its start to its end in the journal (lookup, digest
//!    checks, restore by hard link, record): target under 50 ms. The whole second
//!    run per step is shown beside it (it includes the orchestrator's own per-step
//!    work).
//! 2. Pins: a model folder (`ORCHESTRATE_BENCH_MODEL_GIB`, default 1; the issue's
//!    figure is 16) pinned by digest, verified cold (every byte hashed) and again
//!    with the stat cache (nothing changed: no byte read). Target under 50 ms.
//!
//! Work goes under `ORCHESTRATE_BENCH_DIR` (default: the system temp dir).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn chain_plan(n: usize) -> String {
    let mut s = String::from("schema = \"orchestrate/plan/v1\"\nname = \"cache-bench\"\n");
    for i in 0..n {
        let _ = write!(
            s,
            "[steps.s{i}]\nkind = \"compile\"\ncache = true\noutputs = [\"${{out}}/o\"]\n\
             shell = \"mkdir ${{out}}/o && for f in 1 2 3 4 5 6 7 8; do head -c 131072 /dev/urandom > ${{out}}/o/$f; done\"\n"
        );
        if i > 0 {
            let _ = writeln!(s, "needs = [\"s{}\"]", i - 1);
        }
    }
    s
}

fn run(bin: &str, dir: &Path, plan: &Path) -> (f64, std::path::PathBuf) {
    let records = dir.join("records");
    let before: Vec<_> = std::fs::read_dir(&records)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    let t = Instant::now();
    let out = Command::new(bin)
        .arg("run")
        .arg(plan)
        .args(["--progress", "quiet", "--records"])
        .arg(&records)
        .arg("--cache")
        .arg(dir.join("cache"))
        .current_dir(dir)
        .output()
        .expect("run orchestrate");
    let secs = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let new = std::fs::read_dir(&records)
        .expect("records")
        .flatten()
        .map(|e| e.path())
        .find(|p| !before.contains(p))
        .expect("a new record");
    (secs, new)
}

/// Start-to-end times (ms) of the steps the journal says were reused.
fn reused_step_ms(record: &Path) -> Vec<f64> {
    let text = std::fs::read_to_string(record.join("journal.jsonl")).expect("journal");
    let mut started = std::collections::HashMap::new();
    let mut reused = std::collections::HashSet::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("journal line");
        let step = v["step"].as_str().unwrap_or_default().to_string();
        let t = chrono::DateTime::parse_from_rfc3339(v["time"].as_str().unwrap_or_default())
            .map(|t| t.timestamp_nanos_opt().unwrap_or(0) as f64 / 1e6);
        match v["event"].as_str() {
            Some("step_started") => {
                started.insert(step, t.unwrap_or(0.0));
            }
            Some("step_cache") if v["cache"]["status"] == "reused" => {
                reused.insert(step);
            }
            Some("step_ended") if reused.contains(&step) => {
                if let (Some(s), Ok(e)) = (started.get(&step), t) {
                    out.push(e - s);
                }
            }
            _ => {}
        }
    }
    out
}

fn stats(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

fn step_cache(base: &Path, bin: &str) {
    println!("step cache: a chain of cached steps, each a folder of 8 files (1 MiB)");
    println!(
        "{:>6} {:>10} {:>10} {:>16} {:>16}",
        "steps", "fill s", "reuse s", "reuse run ms/step", "step ms min/med/max"
    );
    for n in [50usize, 200] {
        let dir = tempfile::tempdir_in(base).expect("tempdir");
        let plan = dir.path().join("plan.toml");
        std::fs::write(&plan, chain_plan(n)).expect("plan");
        let (fill, _) = run(bin, dir.path(), &plan);
        let (reuse, rec) = run(bin, dir.path(), &plan);
        let mut ms = reused_step_ms(&rec);
        assert_eq!(ms.len(), n, "every step is reused");
        let (lo, med, hi) = stats(&mut ms);
        println!(
            "{n:>6} {fill:>10.2} {reuse:>10.2} {:>16.2} {:>16}",
            reuse * 1000.0 / n as f64,
            format!("{lo:.2}/{med:.2}/{hi:.2}")
        );
    }
}

fn pins(base: &Path) {
    let gib: u64 = std::env::var("ORCHESTRATE_BENCH_MODEL_GIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let dir = tempfile::tempdir_in(base).expect("tempdir");
    let model = dir.path().join("model");
    std::fs::create_dir(&model).expect("model dir");
    // Shards of at most 2 GiB, as checkpoints are written, and the small files.
    let shards = gib.div_ceil(2).max(1);
    let per = (gib << 30) / shards;
    let chunk = vec![0x5au8; 1 << 20];
    for s in 0..shards {
        let mut f =
            std::fs::File::create(model.join(format!("model-{s:05}.safetensors"))).expect("shard");
        let mut left = per;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n]).expect("write");
            left -= n as u64;
        }
    }
    for name in ["config.json", "tokenizer.json", "generation_config.json"] {
        std::fs::write(model.join(name), format!("{{\"name\": \"{name}\"}}")).expect("small file");
    }
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        "schema = \"orchestrate/plan/v1\"\nname = \"pins-bench\"\n[pins.model.m]\npath = \"model\"\n\
         [steps.a]\nrun = [\"true\"]\n",
    )
    .expect("plan");
    let plan = orchestrate::plan::load(&plan).expect("load plan");
    // Past the racy window: the first digests are trusted on the next run.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let cache_dir = dir.path().join("cache");
    let verify = || {
        let stat = orchestrate::digest::stat::StatCache::install_at(&cache_dir);
        let t = Instant::now();
        let r = orchestrate::pins::verify(&plan.pins, &plan.dir);
        let secs = t.elapsed().as_secs_f64();
        stat.save().expect("save the stat cache");
        assert!(!r.has_drift());
        (secs, stat.counts())
    };
    let (cold, c1) = verify();
    let (warm, c2) = verify();
    let (warm2, _) = verify();
    println!(
        "\npins: a {gib} GiB model folder ({} files) pinned by digest",
        shards + 3
    );
    println!(
        "  first run {cold:.2} s ({:.2} GiB/s, {} hashed); unchanged: {:.2} ms and {:.2} ms ({} from the stat cache, {} hashed)",
        gib as f64 / cold,
        c1.hashed,
        warm * 1000.0,
        warm2 * 1000.0,
        c2.hits,
        c2.hashed
    );
}

fn main() {
    let base = std::env::var_os("ORCHESTRATE_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let bin = env!("CARGO_BIN_EXE_orchestrate");
    step_cache(&base, bin);
    pins(&base);
}
