//! The Slurm backend against `sbatch` + `squeue` by hand, on the same cluster, in one
//! run (`cargo bench --bench slurm`; needs a cluster: `.ci/slurm start`). For N
//! trivial steps (`ORCHESTRATE_BENCH_STEPS`, default 50), independent and as a
//! chain: wall time per step, submit throughput, and how many queries each sent
//! to the controller and accounting (counted by shims on `PATH` in front of
//! sbatch, squeue, sacct, scontrol and scancel; sbatch and srun are submissions,
//! counted apart). Targets: per-step overhead within 1.5x of the shell loop, and at
//! least 5x fewer queries than Snakemake's Slurm plugin for the same plan.
//!
//! With `ORCHESTRATE_BENCH_SNAKEMAKE=/path/to/venv`, the same plans also run
//! through Snakemake's Slurm executor plugin (`snakemake --executor slurm`) with
//! the same shims; its chain on `ORCHESTRATE_BENCH_SNAKEMAKE_CHAIN` steps (10),
//! as it waits a status interval per step.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const TOOLS: &[&str] = &["sbatch", "squeue", "sacct", "scontrol", "scancel", "srun"];

/// Shims that log each call to `log` and run the real tool.
fn shims(dir: &Path, log: &Path) -> PathBuf {
    let bin = dir.join("shims");
    std::fs::create_dir_all(&bin).expect("shim dir");
    for t in TOOLS {
        let real = Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .expect("which");
        let real = String::from_utf8_lossy(&real.stdout).trim().to_string();
        let p = bin.join(t);
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\necho {t} >> '{}'\nexec '{real}' \"$@\"\n",
                log.display()
            ),
        )
        .expect("shim");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    bin
}

fn counts(log: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for l in std::fs::read_to_string(log).unwrap_or_default().lines() {
        *m.entry(l.to_string()).or_insert(0) += 1;
    }
    let _ = std::fs::remove_file(log);
    m
}

/// One row: a tool's wall time against the hand loop's, and the controller
/// queries the shims counted for it (sbatch and srun are submissions, not queries).
fn row(shape: &str, tool: &str, n: usize, secs: f64, base: f64, log: &Path) {
    let c = counts(log);
    let q: usize = c
        .iter()
        .filter(|(k, _)| *k != "sbatch" && *k != "srun")
        .map(|(_, v)| v)
        .sum();
    println!(
        "{shape:<12} {tool:<11} {n:>5} {secs:>9.2} {:>9.1} {:>7.2} {q:>8} {:>7.3} {:>8.1}  {c:?}",
        secs * 1000.0 / n as f64,
        secs / base,
        q as f64 / n as f64,
        q as f64 / (secs / 60.0)
    );
}

fn path_with(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn plan(n: usize, chain: bool) -> String {
    let mut s = String::from(
        "schema = \"orchestrate/plan/v1\"\nname = \"slurm-bench\"\n[backend]\nkind = \"slurm\"\n",
    );
    for i in 0..n {
        let _ = write!(s, "[steps.s{i}]\nrun = [\"true\"]\n");
        if chain && i > 0 {
            let _ = writeln!(s, "needs = [\"s{}\"]", i - 1);
        }
    }
    s
}

fn snakefile(n: usize, chain: bool) -> String {
    let mut s = format!(
        "rule all:\n    input: {}\n",
        if chain {
            format!("\"s{}.done\"", n - 1)
        } else {
            format!("expand(\"s{{i}}.done\", i=range({n}))")
        }
    );
    if chain {
        let _ = write!(
            s,
            "rule s0:\n    output: \"s0.done\"\n    shell: \"true; touch {{output}}\"\n"
        );
        for i in 1..n {
            let _ = write!(
                s,
                "rule s{i}:\n    input: \"s{}.done\"\n    output: \"s{i}.done\"\n    shell: \"true; touch {{output}}\"\n",
                i - 1
            );
        }
    } else {
        s.push_str("rule s:\n    output: \"s{i}.done\"\n    shell: \"true; touch {output}\"\n");
    }
    s
}

/// Jobs submitted per second by the loop (it writes when its sbatch loop began
/// and ended).
fn loop_submit_rate(dir: &Path, name: &str, n: usize) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join(format!("{name}.submits"))).ok()?;
    let t: Vec<f64> = text
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    Some(n as f64 / (t.get(1)? - t.first()?))
}

/// Jobs submitted per second by orchestrate: over its first `window` submissions
/// (`--jobs` caps how many are in flight), from the record's `job.submitted_at`
/// (when `sbatch` answered).
fn record_submit_rate(records: &Path, window: usize) -> Option<f64> {
    let dir = std::fs::read_dir(records).ok()?.flatten().next()?.path();
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("record.json")).ok()?).ok()?;
    let mut t: Vec<f64> = rec["steps"]
        .as_array()?
        .iter()
        .flat_map(|s| s["attempts"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| {
            chrono::DateTime::parse_from_rfc3339(a["job"]["submitted_at"].as_str()?)
                .ok()
                .map(|d| d.timestamp_micros() as f64 / 1e6)
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t.truncate(window);
    let span = t.last()? - t.first()?;
    (t.len() > 1 && span > 0.0).then(|| (t.len() - 1) as f64 / span)
}

fn shell_loop(n: usize, chain: bool, name: &str) -> String {
    // sbatch + squeue by hand, polling every 0.2 s (the backend's floor).
    if chain {
        format!(
            "for i in $(seq {n}); do id=$(sbatch --parsable --job-name={name} --ntasks=1 -o /dev/null --wrap 'srun true'); \
             while [ -n \"$(squeue -h -j $id -o %i)\" ]; do sleep 0.2; done; done"
        )
    } else {
        format!(
            "t0=$(date +%s.%N); for i in $(seq {n}); do sbatch --parsable --job-name={name} --ntasks=1 -o /dev/null --wrap 'srun true' >/dev/null; done; \
             echo $t0 $(date +%s.%N) > {name}.submits; \
             while [ -n \"$(squeue -h --name={name} -o %i)\" ]; do sleep 0.2; done"
        )
    }
}

fn main() {
    if Command::new("sinfo")
        .arg("-h")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        println!("no Slurm cluster answers here (.ci/slurm start): nothing measured");
        return;
    }
    let n: usize = std::env::var("ORCHESTRATE_BENCH_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("calls.log");
    let bin = shims(dir.path(), &log);
    let path = path_with(&bin);
    let orch = env!("CARGO_BIN_EXE_orchestrate");
    let smk = std::env::var_os("ORCHESTRATE_BENCH_SNAKEMAKE").map(PathBuf::from);
    println!("{n} trivial steps on the one-node cluster; queries counted by shims");
    println!(
        "{:<12} {:<11} {:>5} {:>9} {:>9} {:>7} {:>8} {:>7} {:>8}  calls",
        "shape", "tool", "steps", "wall s", "ms/step", "ratio", "queries", "q/step", "q/min"
    );
    for chain in [false, true] {
        let shape = if chain { "chain" } else { "independent" };
        let t = Instant::now();
        let name = format!("bench-loop-{}", std::process::id());
        let st = Command::new("sh")
            .args(["-c", &shell_loop(n, chain, &name)])
            .env("PATH", &path)
            .current_dir(dir.path())
            .status()
            .expect("shell loop");
        assert!(st.success());
        let base = t.elapsed().as_secs_f64();
        row(shape, "sh loop", n, base, base, &log);
        let loop_rate = loop_submit_rate(dir.path(), &name, n);

        let p = dir.path().join(format!("{shape}.toml"));
        std::fs::write(&p, plan(n, chain)).expect("plan");
        let t = Instant::now();
        let out = Command::new(orch)
            .args([
                "run",
                p.to_str().unwrap_or_default(),
                "--progress",
                "quiet",
                "--jobs",
                "64",
                "--records",
            ])
            .arg(dir.path().join(format!("records-{shape}")))
            .env("PATH", &path)
            .current_dir(dir.path())
            .output()
            .expect("orchestrate");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let secs = t.elapsed().as_secs_f64();
        row(shape, "orchestrate", n, secs, base, &log);
        if !chain {
            let ours = record_submit_rate(&dir.path().join(format!("records-{shape}")), 64);
            let f = |r: Option<f64>| r.map_or("?".to_string(), |r| format!("{r:.1}"));
            println!(
                "{shape:<12} submit throughput, jobs/s: sh loop {} (sbatch one after another), orchestrate {} (first 64, --jobs 64)",
                f(loop_rate),
                f(ours)
            );
        }

        if let Some(venv) = &smk {
            // Snakemake's chain waits a status interval (about 40 s) per step: it
            // runs fewer steps (`ORCHESTRATE_BENCH_SNAKEMAKE_CHAIN`, default 10),
            // compared per step.
            let sn = if chain {
                std::env::var("ORCHESTRATE_BENCH_SNAKEMAKE_CHAIN")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(10)
                    .min(n)
            } else {
                n
            };
            let w = dir.path().join(format!("smk-{shape}"));
            std::fs::create_dir_all(&w).expect("smk dir");
            std::fs::write(w.join("Snakefile"), snakefile(sn, chain)).expect("snakefile");
            let t = Instant::now();
            let out = Command::new(venv.join("bin/snakemake"))
                .args([
                    "--executor",
                    "slurm",
                    "--jobs",
                    "64",
                    "--latency-wait",
                    "5",
                    "--default-resources",
                    "slurm_partition=debug",
                    "mem_mb=1000",
                    "runtime=5",
                    "--quiet",
                ])
                .env("PATH", format!("{}:{}", venv.join("bin").display(), path))
                .current_dir(&w)
                .output()
                .expect("snakemake");
            let secs = t.elapsed().as_secs_f64();
            if !out.status.success() {
                let keep = std::env::temp_dir().join(format!("bench-smk-{shape}.log"));
                let _ = std::fs::write(&keep, &out.stderr);
                println!("{shape:<12} snakemake's stderr kept in {}", keep.display());
                println!(
                    "{shape:<12} snakemake failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                        .lines()
                        .rev()
                        .take(5)
                        .collect::<Vec<_>>()
                        .join(" | ")
                );
            }
            // Against the hand loop's time for as many steps.
            row(
                shape,
                "snakemake",
                sn,
                secs,
                base * sn as f64 / n as f64,
                &log,
            );
        }
    }
}
