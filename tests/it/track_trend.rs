//! `orchestrate trend`: real runs of a plan over the commits of a real repository,
//! a regression injected at one commit and a test that starts failing at another;
//! the trend marks each at its commit, in git's order.

use std::path::{Path, PathBuf};

use crate::support::{cli, git, shown};

const COMMITS: usize = 8;
const REGRESSION_AT: usize = 5;
const FAILING_FROM: usize = 6;

const PLAN: &str = r#"
schema = "orchestrate/plan/v1"
name = "tracked"
[pins.git.implementation]
path = "repo"
[steps.bench]
repeats = 5
shell = '''
set -- $(cat repo/latency.txt)
shift $((${repeat} - 1))
printf '{"latency_ms": %s}' "$1" > "$ORCHESTRATE_METRICS"
'''
[steps.bench.report]
metric = "latency_ms"
[steps.tests]
shell = "cp repo/junit.xml ${out}/junit.xml"
results = { junit = "${out}/junit.xml" }
"#;

/// Run the plan at `commit` (checked out in the repository); the run may fail (a
/// failing test case fails its step), its record is what counts.
fn run_at(root: &Path, plan: &Path, commit: &str) {
    git(&root.join("repo"), &["checkout", "-q", commit]);
    let out = cli()
        .arg("run")
        .arg(plan)
        .args([
            "--records",
            "records",
            "--progress",
            "quiet",
            "--keep-going",
        ])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{}",
        shown(&out)
    );
}

fn trend(root: &Path, args: &[&str]) -> serde_json::Value {
    let out = cli()
        .arg("trend")
        .args(args)
        .args(["--records", "records", "--json"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_regression_and_a_test_that_starts_failing_are_marked_at_their_commits() {
    let _host = crate::support::host_shared();
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let commits = crate::support::history::repository(root, COMMITS, REGRESSION_AT, FAILING_FROM);
    let plan: PathBuf = root.join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    // Two runs per commit, the second pass in reverse: time order is not commit order.
    for c in commits.iter().chain(commits.iter().rev()) {
        run_at(root, &plan, c);
    }

    let by_commit = trend(root, &["bench", "latency_ms", "--repo", "repo"]);
    let keys: Vec<&str> = by_commit["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        commits.iter().map(String::as_str).collect::<Vec<_>>(),
        "git's order"
    );
    assert!(by_commit["points"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["runs"].as_array().unwrap().len() == 2 && p["n"] == 10));
    let changes = by_commit["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["at"], commits[REGRESSION_AT].as_str());
    assert_eq!(changes[0]["after"], commits[REGRESSION_AT - 1].as_str());
    assert_eq!(changes[0]["verdict"], "increase", "{changes:?}");
    let ratio = changes[0]["ratio"].as_f64().unwrap();
    assert!((1.25..1.35).contains(&ratio), "{ratio}");

    let tests = trend(root, &["tests", "--repo", "repo"]);
    let hist = tests["tests"].as_array().unwrap();
    assert_eq!(hist.len(), 1, "only test_b ever failed: {hist:?}");
    assert_eq!(hist[0]["id"], "suite::test_b");
    assert_eq!(hist[0]["now"], "failing");
    let tr = hist[0]["transitions"].as_array().unwrap();
    assert_eq!(tr.len(), 1, "{tr:?}");
    assert_eq!(tr[0]["what"], "started failing");
    assert_eq!(tr[0]["at"], commits[FAILING_FROM].as_str());

    // By time: a point per run, and the two passes make two changes (up, then down
    // where the reverse pass returns to the early commits).
    let by_time = trend(root, &["bench", "latency_ms", "--by", "time"]);
    assert_eq!(by_time["order"], "time");
    assert_eq!(by_time["points"].as_array().unwrap().len(), 2 * COMMITS);
    let verdicts: Vec<&str> = by_time["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["increase", "decrease"], "{by_time}");

    // Without the repository the commits go by their first run, and it says so.
    let no_repo = trend(root, &["bench", "latency_ms", "--repo", "elsewhere"]);
    assert!(
        no_repo["order_note"]
            .as_str()
            .unwrap()
            .contains("first run"),
        "{no_repo}"
    );
    assert_eq!(no_repo["changes"][0]["at"], commits[REGRESSION_AT].as_str());

    // A record changed after its run is not used, and said.
    let one = std::fs::read_dir(root.join("records"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("record.json").is_file())
        .unwrap();
    let text = std::fs::read_to_string(one.join("record.json")).unwrap();
    std::fs::write(one.join("record.json"), format!("{text} ")).unwrap();
    let after = trend(root, &["bench", "latency_ms", "--repo", "repo"]);
    assert_eq!(after["unverified"].as_array().unwrap().len(), 1, "{after}");

    // The terminal form marks the change; a metric no run has is a usage error.
    let out = cli()
        .args([
            "trend",
            "bench",
            "latency_ms",
            "--repo",
            "repo",
            "--records",
            "records",
        ])
        .current_dir(root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("<- change") && text.contains("increase: at"),
        "{text}"
    );
    let out = cli()
        .args(["trend", "bench", "nope", "--records", "records"])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no run has samples of `nope` for step `bench`")
            && err.contains("`latency_ms`"),
        "{err}"
    );
}
