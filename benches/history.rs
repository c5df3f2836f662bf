//! The research loop end to end over a generated history: a real repository of 50
//! commits, 200 real runs of a plan (4 per commit, 5 samples each), latency up 20%
//! from commit 31 and a test failing from commit 40. Then `runs`, `trend`, `trend
//! tests`, two `bisect`s (the regression, the test) and `site`, each timed; prints
//! where each change was found, the probes measured against the bound, the steps
//! the probes reused from the cache, and what the site holds.
//! Run with `cargo bench --bench history` (about five minutes on 2 cores).

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

const COMMITS: usize = 50;
const RUNS_PER_COMMIT: usize = 4;
const REGRESSION_AT: usize = 31;
const FAILING_FROM: usize = 40;

const PLAN: &str = r#"
schema = "orchestrate/plan/v1"
name = "history"
[revisions]
baseline = { repo = "repo", commit = "BASE" }
implementation = { repo = "repo", commit = "HEAD" }
# What no commit changes: made once, reused by every later run and probe.
[steps.data]
cache = true
shell = "seq 1 100000 > ${out}/data.txt"
outputs = ["${out}/data.txt"]
[steps.bench]
revisions = ["implementation"]
needs = ["data"]
repeats = 5
shell = '''
set -- $(cat "${revision.dir}/latency.txt")
turn=$(( $(od -An -N1 -tu1 /dev/urandom) % 4 ))
shift $(( turn * 5 + ${repeat} - 1 ))
printf '{"latency_ms": %s}' "$1" > "$ORCHESTRATE_METRICS"
'''
[steps.bench.report]
metric = "latency_ms"
[steps.tests]
revisions = ["implementation"]
shell = "cp ${revision.dir}/junit.xml ${out}/junit.xml"
results = { junit = "${out}/junit.xml" }
"#;

#[path = "support/jitter.rs"]
mod jitter;
use jitter::jitter;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn junit(b_fails: bool) -> String {
    let b = if b_fails {
        r#"<testcase classname="suite" name="test_b"><failure message="broken">broken</failure></testcase>"#
    } else {
        r#"<testcase classname="suite" name="test_b"/>"#
    };
    format!(
        r#"<?xml version="1.0"?><testsuite name="suite" tests="2"><testcase classname="suite" name="test_a"/>{b}</testsuite>"#
    )
}

/// Each commit's `latency.txt` holds 20 values (4 sets of 5 repeats) with 3% noise;
/// a run takes one set at random.
fn repository(dir: &Path) -> Vec<String> {
    std::fs::create_dir_all(dir).expect("repo");
    git(dir, &["init", "-q"]);
    (0..COMMITS)
        .map(|c| {
            let level = if c >= REGRESSION_AT { 12.0 } else { 10.0 };
            let values: Vec<String> = (0..RUNS_PER_COMMIT * 5)
                .map(|k| format!("{:.3}", level * (1.0 + 0.03 * jitter((c * 100 + k) as u64))))
                .collect();
            std::fs::write(dir.join("latency.txt"), values.join(" ")).expect("write");
            std::fs::write(dir.join("junit.xml"), junit(c >= FAILING_FROM)).expect("write");
            git(dir, &["add", "-A"]);
            git(dir, &["commit", "-qm", &format!("c{c}")]);
            git(dir, &["rev-parse", "HEAD"])
        })
        .collect()
}

fn orchestrate(root: &Path, args: &[&str]) -> (f64, Output) {
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_orchestrate"))
        .args(args)
        .env("ORCHESTRATE_CACHE", root.join("cache"))
        .current_dir(root)
        .output()
        .expect("run orchestrate");
    (t.elapsed().as_secs_f64(), out)
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn at(commits: &[String], sha: &str) -> String {
    commits.iter().position(|c| c == sha).map_or_else(
        || format!("{sha} (not a commit)"),
        |i| format!("commit {i}"),
    )
}

/// A bisection's first bad commit, measured probes, bound, and how many steps its
/// probes reused from the cache.
fn bisect(
    root: &Path,
    commits: &[String],
    target: &[&str],
) -> (f64, String, u64, u64, usize, usize) {
    let mut args = vec![
        "bisect",
        "plan.toml",
        "--good",
        &commits[0],
        "--bad",
        &commits[COMMITS - 1],
    ];
    args.extend_from_slice(target);
    args.extend(["--records", "probes", "--json"]);
    let (secs, out) = orchestrate(root, &args);
    let b = json(&out);
    let (mut reused, mut steps) = (0, 0);
    for p in b["probes"].as_array().into_iter().flatten() {
        let dir = root.join(p["record"].as_str().unwrap_or_default());
        let rec: serde_json::Value = std::fs::read(dir.join("record.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        for s in rec["steps"].as_array().into_iter().flatten() {
            steps += 1;
            if s["status"] == "reused" {
                reused += 1;
            }
        }
    }
    (
        secs,
        at(commits, b["first_bad"].as_str().unwrap_or("none")),
        b["measured"].as_u64().unwrap_or(0),
        b["bound"].as_u64().unwrap_or(0),
        reused,
        steps,
    )
}

fn main() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let commits = repository(&root.join("repo"));
    std::fs::write(root.join("plan.toml"), PLAN.replace("BASE", &commits[0])).expect("plan");

    let t = Instant::now();
    for _ in 0..RUNS_PER_COMMIT {
        for c in &commits {
            let set = format!("revisions.implementation.commit={c}");
            let (_, out) = orchestrate(
                root,
                &["run", "plan.toml", "--set", &set, "--records", "records"]
                    .into_iter()
                    .chain(["--progress", "quiet", "--keep-going"])
                    .collect::<Vec<_>>(),
            );
            assert!(
                matches!(out.status.code(), Some(0) | Some(1)),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let made = t.elapsed().as_secs_f64();
    println!(
        "history: {} runs on {COMMITS} commits in {made:.1} s ({:.0} ms a run)",
        COMMITS * RUNS_PER_COMMIT,
        made * 1000.0 / (COMMITS * RUNS_PER_COMMIT) as f64
    );

    let (secs, out) = orchestrate(root, &["runs", "--records", "records", "--json"]);
    println!(
        "runs (index built): {} runs listed in {:.0} ms",
        json(&out).as_array().map_or(0, Vec::len),
        secs * 1000.0
    );
    let (secs, _) = orchestrate(root, &["runs", "--records", "records", "--json"]);
    println!("runs (index warm): {:.0} ms", secs * 1000.0);

    let step = "bench[revision=implementation]";
    let (secs, out) = orchestrate(
        root,
        &["trend", step, "latency_ms", "--repo", "repo", "--json"],
    );
    let tr = json(&out);
    for c in tr["changes"].as_array().into_iter().flatten() {
        println!(
            "trend: {} at {} (x{:.3}) in {:.0} ms; injected at commit {REGRESSION_AT}",
            c["verdict"].as_str().unwrap_or("?"),
            at(&commits, c["at"].as_str().unwrap_or_default()),
            c["ratio"].as_f64().unwrap_or(f64::NAN),
            secs * 1000.0
        );
    }
    let (secs, out) = orchestrate(root, &["trend", "tests", "--repo", "repo", "--json"]);
    for h in json(&out)["tests"].as_array().into_iter().flatten() {
        for tr in h["transitions"].as_array().into_iter().flatten() {
            println!(
                "trend tests: {} {} at {} in {:.0} ms; injected at commit {FAILING_FROM}",
                h["id"].as_str().unwrap_or("?"),
                tr["what"].as_str().unwrap_or("?"),
                at(&commits, tr["at"].as_str().unwrap_or_default()),
                secs * 1000.0
            );
        }
    }

    let metric = format!("{step}.latency_ms");
    for (what, target) in [
        ("the regression", vec!["--metric", metric.as_str()]),
        ("the test", vec!["--test", "suite::test_b"]),
    ] {
        let (secs, first, measured, bound, reused, steps) = bisect(root, &commits, &target);
        println!(
            "bisect {what}: first bad {first}, {measured} commits measured (bound {bound}), \
             {reused} of {steps} probe steps reused from the cache, {secs:.1} s"
        );
    }

    let (secs, out) = orchestrate(
        root,
        &[
            "site",
            "--records",
            "records",
            "--repo",
            "repo",
            "-o",
            "site",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let index = std::fs::read_to_string(root.join("site/index.html")).unwrap_or_default();
    let size: u64 = walk(&root.join("site"));
    println!(
        "site: {} in {secs:.1} s; index.html {} KiB, {} KiB in all; {} chart points, {} change marks",
        String::from_utf8_lossy(&out.stdout).trim(),
        index.len() / 1024,
        size / 1024,
        index.matches("<circle class=\"pt\"").count(),
        index.matches("<line class=\"change ").count()
    );
}

fn walk(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => walk(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}
