//! A repository with a history to track: a latency that steps up at one commit and a
//! JUnit test that starts failing at another (trend and bisect tests).

use std::path::Path;

use super::git;

/// A JUnit report where `suite::test_a` passes and `suite::test_b` fails or passes.
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

/// A SARIF log with one finding (rule `R1` in `src/a.rs`) or none.
fn sarif(found: bool) -> String {
    let results = if found {
        r#"{"ruleId": "R1", "level": "warning", "message": {"text": "unused value"},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": "src/a.rs"},
            "region": {"startLine": 3}}}]}"#
    } else {
        ""
    };
    format!(
        r#"{{"version": "2.1.0", "runs": [{{"tool": {{"driver": {{"name": "lint"}}}}, "results": [{results}]}}]}}"#
    )
}

/// `<root>/repo` with `commits` commits, oldest first: `latency.txt` holds five values
/// near 10, near 13 from `regression_at`; `junit.xml` has test_b failing from
/// `failing_from`. The commits' full ids.
pub fn repository(
    root: &Path,
    commits: usize,
    regression_at: usize,
    failing_from: usize,
) -> Vec<String> {
    repository_with(root, commits, regression_at, failing_from, None)
}

/// [`repository`], and `findings.sarif` with one finding from `finding_from` on.
pub fn repository_with(
    root: &Path,
    commits: usize,
    regression_at: usize,
    failing_from: usize,
    finding_from: Option<usize>,
) -> Vec<String> {
    let dir = root.join("repo");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    (0..commits)
        .map(|i| {
            let level = if i >= regression_at { 13.0 } else { 10.0 };
            let values: Vec<String> = (0..5)
                .map(|k| format!("{:.2}", level + 0.05 * ((i * 7 + k * 3) % 5) as f64))
                .collect();
            std::fs::write(dir.join("latency.txt"), values.join(" ")).unwrap();
            std::fs::write(dir.join("junit.xml"), junit(i >= failing_from)).unwrap();
            if let Some(from) = finding_from {
                std::fs::write(dir.join("findings.sarif"), sarif(i >= from)).unwrap();
            }
            git(&dir, &["add", "-A"]);
            git(&dir, &["commit", "-qm", &format!("c{i}")]);
            git(&dir, &["rev-parse", "HEAD"])
        })
        .collect()
}
