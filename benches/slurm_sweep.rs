//! A sweep of one-second cells on the CI cluster (`.ci/slurm start`: `MaxArraySize
//! = 100`, `MaxSubmitJobs = 300`, the `sweep` partition), attached and then
//! detached and collected (`cargo bench --bench slurm_sweep`). Cells from
//! `ORCHESTRATE_BENCH_CELLS` (default 2000), `--jobs` from `ORCHESTRATE_BENCH_JOBS`
//! (default 64); `ORCHESTRATE_BENCH_WAYS` (a comma list of `attached`, `detached`,
//! `local`; default `attached,detached`) picks the ways (a detached run stays until
//! all of its jobs are submitted, so past the submit limit it takes as long as an
//! attached one; `local` runs the same cells on this host without the sleep, for
//! the orchestrator's memory at 100 000 cells). With
//! `ORCHESTRATE_BENCH_SNAKEMAKE=/path/to/venv`, Snakemake's Slurm executor plugin
//! runs the same sweep as the peer figure. Per way: wall time, time to the last
//! `sbatch`, `sbatch` calls and controller/accounting queries (counted by shims on
//! `PATH` that log each call with its time), and the tool's peak RSS (the child's
//! `ru_maxrss` from wait4), per cell.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const TOOLS: &[&str] = &[
    "sbatch", "squeue", "sacct", "scontrol", "scancel", "sacctmgr",
];

/// Shims that log each call (`tool seconds`) to `log` and run the real tool.
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
                "#!/bin/sh\necho {t} $(date +%s.%N) >> '{}'\nexec '{real}' \"$@\"\n",
                log.display()
            ),
        )
        .expect("shim");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    bin
}

/// (sbatch calls, other queries, time of the last sbatch).
fn calls(log: &Path) -> (usize, usize, f64) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let (mut submits, mut queries, mut last) = (0, 0, 0.0f64);
    for l in text.lines() {
        let mut w = l.split_whitespace();
        let (tool, at) = (w.next().unwrap_or(""), w.next().unwrap_or("0"));
        if tool == "sbatch" {
            submits += 1;
            last = last.max(at.parse().unwrap_or(0.0));
        } else {
            queries += 1;
        }
    }
    (submits, queries, last)
}

/// Run `orchestrate args` with the shims first on PATH: wall seconds, peak RSS
/// (bytes), stdout.
fn orchestrate(dir: &Path, bin: &Path, args: &[&str]) -> (f64, u64, String) {
    measured(
        Path::new(env!("CARGO_BIN_EXE_orchestrate")),
        dir,
        &[bin],
        args,
    )
}

/// Run `program args` in `dir` with `first` ahead of PATH: wall seconds, peak
/// RSS (bytes), stdout.
fn measured(program: &Path, dir: &Path, first: &[&Path], args: &[&str]) -> (f64, u64, String) {
    let mut path: Vec<String> = first.iter().map(|p| p.display().to_string()).collect();
    path.push(std::env::var("PATH").unwrap_or_default());
    let path = path.join(":");
    let said = dir.join("stdout.txt");
    let started = Instant::now();
    // Reaped below by wait4, which gives this child's own usage.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(program)
        .args(args)
        .env("PATH", path)
        .current_dir(dir)
        .stdout(std::fs::File::create(&said).expect("stdout file"))
        .spawn()
        .expect("orchestrate");
    // This child's own peak (wait4), not the largest of every child so far.
    let (status, rss) = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        let mut status = 0;
        // SAFETY: wait4 fills the status and usage it is given.
        libc::wait4(child.id() as i32, &mut status, 0, &mut u);
        (status, u.ru_maxrss as u64 * 1024)
    };
    let secs = started.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&said).unwrap_or_default();
    assert!(status == 0, "exit status {status}: {text}");
    (secs, rss, text)
}

/// The sweep on Slurm, or (`local`) the same cells on this host with no sleep:
/// the orchestrator's own memory at a scale the cluster would take hours over.
fn plan(dir: &Path, n: usize, local: bool) -> PathBuf {
    let cells: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    let (name, backend, body) = if local {
        ("local.toml", "", "shell = \"echo cell ${matrix.cell}\"")
    } else {
        (
            "sweep.toml",
            "[backend]\nkind = \"slurm\"\npartition = \"sweep\"\n",
            "memory = \"64MB\"\nshell = \"sleep 1; echo cell ${matrix.cell}\"",
        )
    };
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            "schema = \"orchestrate/plan/v1\"\nname = \"sweep-bench\"\n{backend}[matrix]\ncell = [{}]\n[steps.cell]\n{body}\n",
            cells.join(", ")
        ),
    )
    .expect("plan");
    p
}

/// The cells on this host: wall time and the orchestrator's peak RSS.
fn local(dir: &Path, jobs: &str, n: usize) {
    let plan = plan(dir, n, true);
    let plan = plan.to_str().expect("utf-8");
    let args = [
        "run",
        plan,
        "--records",
        "rec-l",
        "--jobs",
        jobs,
        "--progress",
        "quiet",
    ];
    let (secs, rss, _) = measured(
        Path::new(env!("CARGO_BIN_EXE_orchestrate")),
        dir,
        &[],
        &args,
    );
    row("local", secs, 0.0, 0, 0, rss, n);
}

fn main() {
    let n: usize = std::env::var("ORCHESTRATE_BENCH_CELLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let jobs = std::env::var("ORCHESTRATE_BENCH_JOBS").unwrap_or_else(|_| "64".into());
    let t = tempfile::tempdir().expect("tmp");
    let plan = plan(t.path(), n, false);
    let plan = plan.to_str().expect("utf-8");
    println!("{n} cells (on Slurm: one second each, partition sweep, MaxArraySize 100, MaxSubmitJobs 300), --jobs {jobs}");
    println!("way       wall s  last sbatch s  sbatch  queries  peak RSS MiB  RSS/cell KiB");

    let ways =
        std::env::var("ORCHESTRATE_BENCH_WAYS").unwrap_or_else(|_| "attached,detached".into());
    // Whole names: "detached" holds "attached".
    let ways: Vec<&str> = ways.split(',').map(str::trim).collect();
    if ways.contains(&"attached") {
        attached(t.path(), plan, &jobs, n);
    }
    if ways.contains(&"detached") {
        detached(t.path(), plan, &jobs, n);
    }
    if ways.contains(&"local") {
        local(t.path(), &jobs, n);
    }
    if let Some(venv) = std::env::var_os("ORCHESTRATE_BENCH_SNAKEMAKE") {
        snakemake(t.path(), Path::new(&venv), &jobs, n);
    }
}

/// The same sweep through Snakemake's Slurm executor plugin (a job per cell),
/// with the same shims counting its calls.
fn snakemake(dir: &Path, venv: &Path, jobs: &str, n: usize) {
    let w = dir.join("smk");
    std::fs::create_dir_all(&w).expect("smk dir");
    std::fs::write(
        w.join("Snakefile"),
        format!(
            "rule all:\n    input: expand(\"c{{i}}.done\", i=range({n}))\nrule c:\n    output: \"c{{i}}.done\"\n    shell: \"sleep 1; touch {{output}}\"\n"
        ),
    )
    .expect("Snakefile");
    let log = dir.join("snakemake.log");
    let bin = shims(dir, &log);
    let venv_bin = venv.join("bin");
    let t0 = now();
    let (secs, rss, _) = measured(
        &venv_bin.join("snakemake"),
        &w,
        &[&bin, &venv_bin],
        &[
            "--executor",
            "slurm",
            "--jobs",
            jobs,
            "--latency-wait",
            "5",
            "--default-resources",
            "slurm_partition=sweep",
            "mem_mb=400",
            "runtime=5",
            "--quiet",
        ],
    );
    let (s, q, last) = calls(&log);
    row("snakemake", secs, last - t0, s, q, rss, n);
}

fn attached(dir: &Path, plan: &str, jobs: &str, n: usize) {
    let log = dir.join("attached.log");
    let bin = shims(dir, &log);
    let t0 = now();
    let (secs, rss, _) = orchestrate(
        dir,
        &bin,
        &[
            "run",
            plan,
            "--records",
            "rec-a",
            "--jobs",
            jobs,
            "--progress",
            "quiet",
        ],
    );
    let (s, q, last) = calls(&log);
    row("attached", secs, last - t0, s, q, rss, n);
}

fn detached(dir: &Path, plan: &str, jobs: &str, n: usize) {
    let log = dir.join("detached.log");
    let bin = shims(dir, &log);
    let t0 = now();
    let (secs, rss_d, out) = orchestrate(
        dir,
        &bin,
        &[
            "run",
            plan,
            "--records",
            "rec-d",
            "--jobs",
            jobs,
            "--progress",
            "quiet",
            "--detach",
        ],
    );
    let (s, q, last) = calls(&log);
    row("detach", secs, last - t0, s, q, rss_d, n);
    let record = out.lines().last().unwrap_or_default().to_string();
    let log = dir.join("collect.log");
    let bin = shims(dir, &log);
    let (secs, rss_c, _) = orchestrate(dir, &bin, &["resume", &record]);
    let (s, q, _) = calls(&log);
    row("resume", secs, 0.0, s, q, rss_c, n);
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn row(way: &str, secs: f64, last: f64, submits: usize, queries: usize, rss: u64, n: usize) {
    println!(
        "{way:9} {secs:6.1}  {last:13.1}  {submits:6}  {queries:7}  {:12.1}  {:12.1}",
        rss as f64 / (1 << 20) as f64,
        rss as f64 / 1024.0 / n as f64
    );
}
