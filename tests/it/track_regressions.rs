//! `orchestrate regressions`, the gate for CI: on a generated history with a
//! regression, an improvement, a new failing test and a noisy metric, it exits 1
//! naming exactly the regression and the new failure; on the same history without
//! them it exits 0. JUnit and the GitHub step summary say the same.

use std::path::Path;

use crate::support;

/// A step of three metrics, 5 repeats each with a jitter of ±2% that differs per
/// repeat and per run (`k`): latency (lower is better, the default), throughput
/// (the headline, higher is better, threshold 5%), and one that jitters ±60%.
/// A second step writes a JUnit report whose case `b` fails when `fail = 1`.
const PLAN: &str = r#"schema = "orchestrate/plan/v1"
name = "gate"

[params]
lat = 10.0
tok = 100.0
noisy = 50.0
fail = 0
k = 0

[steps.bench]
repeats = 5
shell = '''
awk -v l=${params.lat} -v t=${params.tok} -v n=${params.noisy} -v r=${repeat} -v k=${params.k} 'BEGIN {
  j = ((r * 7 + k * 3) % 5 - 2) / 100; w = ((r * 5 + k * 11) % 7 - 3) / 3;
  printf "{\"latency_ms\": %.4f, \"tok_s\": %.4f, \"noisy_ms\": %.4f}", l * (1 + j), t * (1 + j), n * (1 + 0.6 * w)
}' > "$ORCHESTRATE_METRICS"
'''

[steps.bench.report]
metric = "tok_s"
better = "higher"
threshold = "5%"

[steps.tests]
shell = '''
if [ ${params.fail} = 1 ]; then b='<failure message="x"/>'; else b=''; fi
printf '<testsuite name="s" tests="2"><testcase classname="s" name="a"/><testcase classname="s" name="b">%s</testcase></testsuite>' "$b" > ${out}/junit.xml
'''
results = { junit = "${out}/junit.xml" }
"#;

fn run(root: &Path, records: &Path, set: &[&str]) {
    let plan = root.join("gate.toml");
    let mut extra = Vec::new();
    for s in set {
        extra.extend(["--set", s]);
    }
    let (_, out) = support::run_plan_in(root, &plan, records, &extra);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        support::shown(&out)
    );
}

fn gate(root: &Path, records: &Path, extra: &[&str]) -> std::process::Output {
    // GitHub makes the file before the step starts.
    let summary = root.join("summary.md");
    if !summary.exists() {
        std::fs::write(&summary, "").unwrap();
    }
    support::cli()
        .arg("regressions")
        .arg("--records")
        .arg(records)
        .args(extra)
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .current_dir(root)
        .output()
        .unwrap()
}

#[test]
fn the_gate_names_exactly_the_regression_and_the_new_failure() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    std::fs::write(root.join("gate.toml"), PLAN).unwrap();
    let with = root.join("with");
    for k in 0..4 {
        run(root, &with, &[&format!("params.k={k}")]);
    }
    // The same history, a second folder; the newest runs differ.
    let without = root.join("without");
    support::copy_dir(&with, &without);
    run(
        root,
        &with,
        &[
            "params.k=4",
            "params.lat=13.0",
            "params.tok=120.0",
            "params.fail=1",
        ],
    );
    run(root, &without, &["params.k=4"]);

    let junit = root.join("gate.junit.xml");
    let out = gate(root, &with, &["--junit", junit.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{}", support::shown(&out));
    let verdict = text.lines().last().unwrap();
    assert_eq!(
        verdict, "2 regression(s): bench latency_ms; tests test s::b",
        "{text}"
    );
    let line = |what: &str| {
        text.lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what} in\n{text}"))
            .to_string()
    };
    assert!(line("bench latency_ms")
        .trim_start()
        .starts_with("regression"));
    assert!(line("bench tok_s").trim_start().starts_with("improvement"));
    assert!(
        line("bench tok_s").contains("higher is better, threshold 5.00% (plan)"),
        "{text}"
    );
    assert!(line("bench noisy_ms")
        .trim_start()
        .starts_with("not enough evidence"));
    assert!(line("tests s::b").trim_start().starts_with("new failure"));
    // The tests step's wall time has one sample a run: never enough to judge.
    assert!(line("tests wall_ms")
        .trim_start()
        .starts_with("not enough evidence"));
    // A step's wall time beside metrics of its own is not judged.
    assert!(!text.contains("bench wall_ms"), "{text}");

    // JUnit: failures exactly where the terminal says regression.
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"2\""), "{xml}");
    for (class, name) in [("bench", "latency_ms"), ("tests", "s::b")] {
        let case = format!("<testcase classname=\"{class}\" name=\"{name}\"><failure");
        assert!(xml.contains(&case), "{case} in {xml}");
    }
    // The step summary states the same verdict and figures as the terminal.
    let md = std::fs::read_to_string(root.join("summary.md")).unwrap();
    assert!(md.contains(&format!("**{verdict}**")), "{md}");
    let figures = line("bench latency_ms");
    let figures = figures.split_once(": ").unwrap().1;
    assert!(md.contains(figures), "{figures} in {md}");

    // The same history without the changes passes.
    let out = gate(root, &without, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", support::shown(&out));
    assert!(text.ends_with("no regression: the gate passes\n"), "{text}");
    for m in ["bench latency_ms", "bench tok_s"] {
        let l = text.lines().find(|l| l.contains(m)).unwrap();
        assert!(l.trim_start().starts_with("no change"), "{l}");
    }

    // Judging an earlier run: the one before the regression, against its own past.
    let json = gate(root, &with, &["--json", "--history", "2"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["history"].as_array().unwrap().len(), 2);
    let first = v["history"][0].as_str().unwrap().to_string();
    let out = gate(root, &with, &["--run", &first]);
    assert_eq!(out.status.code(), Some(0), "{}", support::shown(&out));
    let out = gate(root, &with, &["--run", "no-such-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", support::shown(&out));
}
