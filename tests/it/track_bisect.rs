//! `orchestrate bisect`: real runs of a plan over the commits of a real repository,
//! a latency regression at one commit and a test that starts failing at another;
//! each is found within ceil(log2(n)) + 2 measured commits, every probe's record
//! verifies, and the bisect record ties them.

use std::path::Path;

use crate::support::{cli, git, shown};

const COMMITS: usize = 9;
const REGRESSION_AT: usize = 6;
const FAILING_FROM: usize = 4;

const PLAN: &str = r#"
schema = "orchestrate/plan/v1"
name = "bisected"
[revisions]
baseline = { repo = "repo", commit = "HEAD" }
implementation = { repo = "repo", commit = "HEAD" }
[steps.bench]
revisions = ["implementation"]
repeats = 5
shell = '''
set -- $(cat "${revision.dir}/latency.txt")
shift $((${repeat} - 1))
printf '{"latency_ms": %s}' "$1" > "$ORCHESTRATE_METRICS"
'''
[steps.tests]
revisions = ["implementation"]
shell = "cp ${revision.dir}/junit.xml ${out}/junit.xml"
results = { junit = "${out}/junit.xml" }
"#;

fn bisect(root: &Path, args: &[&str]) -> serde_json::Value {
    let out = cli()
        .arg("bisect")
        .arg("plan.toml")
        .args(args)
        .args(["--records", "records", "--json"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn check(root: &Path, b: &serde_json::Value, commits: &[String], first_bad: usize) {
    assert_eq!(b["first_bad"], commits[first_bad].as_str(), "{b}");
    let n = COMMITS - 1;
    let bound = (n as f64).log2().ceil() as u64 + 2;
    assert_eq!(b["bound"], bound);
    assert!(b["measured"].as_u64().unwrap() <= bound, "{b}");
    for p in b["probes"].as_array().unwrap() {
        let dir = root.join(p["record"].as_str().unwrap());
        let v = cli().arg("verify").arg(&dir).output().unwrap();
        assert!(v.status.success(), "{}", shown(&v));
        let sha = std::fs::read_to_string(dir.join("record.sha256")).unwrap();
        assert!(sha.starts_with(p["record_sha256"].as_str().unwrap()), "{p}");
        let rec: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("record.json")).unwrap()).unwrap();
        let imp = rec["run"]["revisions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "implementation")
            .unwrap()
            .clone();
        assert_eq!(
            imp["commit"], p["commit"],
            "the probe ran the commit it names"
        );
    }
}

#[test]
fn bisect_finds_a_regression_and_a_failing_test_within_the_bound() {
    let _host = crate::support::host_shared();
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let commits = crate::support::history::repository(root, COMMITS, REGRESSION_AT, FAILING_FROM);
    std::fs::write(root.join("plan.toml"), PLAN).unwrap();
    let user_head = git(&root.join("repo"), &["rev-parse", "HEAD"]);

    let b = bisect(
        root,
        &[
            "--good",
            &commits[0],
            "--bad",
            "HEAD",
            "--metric",
            "bench[revision=implementation].latency_ms",
        ],
    );
    eprintln!(
        "metric: {} ({} runs)",
        b["outcome"],
        b["probes"].as_array().unwrap().len()
    );
    check(root, &b, &commits, REGRESSION_AT);
    assert!(b["outcome"]
        .as_str()
        .unwrap()
        .starts_with("the first bad commit is"));

    let b = bisect(
        root,
        &[
            "--good",
            &commits[0],
            "--bad",
            &commits[COMMITS - 1],
            "--test",
            "suite::test_b",
        ],
    );
    eprintln!(
        "test: {} ({} runs)",
        b["outcome"],
        b["probes"].as_array().unwrap().len()
    );
    check(root, &b, &commits, FAILING_FROM);

    // The bisect records verify by their digest; the user's checkout is untouched.
    let mut found = 0;
    for e in std::fs::read_dir(root.join("records")).unwrap().flatten() {
        if !e.file_name().to_string_lossy().starts_with("bisect-") {
            continue;
        }
        found += 1;
        let bytes = std::fs::read(e.path().join("bisect.json")).unwrap();
        let sha = std::fs::read_to_string(e.path().join("bisect.sha256")).unwrap();
        assert!(sha.starts_with(&orchestrate::digest::sha256_bytes(&bytes).hex()));
    }
    assert_eq!(found, 2);
    assert_eq!(git(&root.join("repo"), &["rev-parse", "HEAD"]), user_head);
    assert_eq!(git(&root.join("repo"), &["status", "--porcelain"]), "");

    // A test that never fails: the bad end is not bad, said, exit 1.
    let out = cli()
        .args([
            "bisect",
            "plan.toml",
            "--good",
            &commits[0],
            "--bad",
            "HEAD",
            "--test",
            "suite::test_a",
        ])
        .args(["--records", "records"])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("is not bad: nothing to bisect"));
    // A bad end that is not after the good one is a usage error.
    let out = cli()
        .args([
            "bisect",
            "plan.toml",
            "--good",
            "HEAD",
            "--bad",
            &commits[0],
            "--test",
            "x",
        ])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
}
