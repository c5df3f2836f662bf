//! An instrument that reads true (issue 38), each case tried as a new user meets it:
//! a real project's bug fix against its parent (pytest with subtests, ruff's SARIF,
//! a timed benchmark), timed repeats alone on the CPU, numbers unrounded, one
//! verdict in every output, names as users type them, TOML 1.0 everywhere.

use std::path::Path;

use crate::support::textkit::{self, fix_run, tools};
use crate::support::{cli, git, record_json, run_plan_in, shown};

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn render(dir: &Path, template: &str) -> String {
    let out = cli()
        .args(["report", "--template", template])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every attempt's (start, end, alone) of `step`, times as RFC 3339 strings.
fn intervals(rec: &serde_json::Value, step: &str) -> Vec<(String, String, Option<bool>)> {
    crate::support::record_step(rec, step)["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["started_at"].as_str().unwrap().to_string(),
                a["ended_at"].as_str().unwrap().to_string(),
                a["alone"].as_bool(),
            )
        })
        .collect()
}

const MEASURED: &str = r#"schema = "orchestrate/plan/v1"
name = "alone"
[steps.bench]
repeats = 3
warmup = 1
shell = '''sleep 0.3; printf '{"x_ms": %s}' "$((10 + ${repeat}))" > "$ORCHESTRATE_METRICS"'''
[steps.bench.report]
metric = "x_ms"
dispersion = 0.0
[steps.other1]
shell = "sleep 0.4"
[steps.other2]
shell = "sleep 0.4"
[steps.other3]
needs = ["other1"]
shell = "sleep 0.4"
[report]
templates = ["pr"]
"#;

#[test]
fn timed_repeats_run_alone_by_default() {
    let t = tempfile::tempdir().unwrap();
    let plan = t.path().join("plan.toml");
    std::fs::write(&plan, MEASURED).unwrap();
    let (dir, out) = run_plan_in(t.path(), &plan, &t.path().join("records"), &["--jobs", "4"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let rec = record_json(&dir);
    let declared = rec["run"]["steps"].as_array().unwrap();
    assert_eq!(declared[0]["exclusive"], true, "a measured step runs alone");
    assert!(declared[1].get("exclusive").is_none());
    let bench = intervals(&rec, "bench");
    assert_eq!(bench.len(), 4, "the warm-up and three repeats");
    let others: Vec<_> = ["other1", "other2", "other3"]
        .iter()
        .flat_map(|s| intervals(&rec, s))
        .collect();
    // No other attempt overlaps any attempt of the measured step, warm-up included.
    for (s, e, alone) in &bench {
        assert_eq!(*alone, Some(true), "{bench:?}");
        for (os, oe, _) in &others {
            assert!(oe <= s || os >= e, "{s}..{e} overlaps {os}..{oe}");
        }
    }
    // Beside each other the others did run at once (jobs 4): the rule is the
    // measured step's, not a global one.
    assert!(
        others.iter().any(|(_, _, a)| *a == Some(false)),
        "{others:?}"
    );

    // `exclusive = false` lets it share the host, and the dispersion sentence says so.
    let shared = MEASURED.replace("repeats = 3\n", "repeats = 3\nexclusive = false\n");
    std::fs::write(&plan, shared).unwrap();
    let (dir, out) = run_plan_in(t.path(), &plan, &t.path().join("records"), &["--jobs", "4"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let rec = record_json(&dir);
    let bench = intervals(&rec, "bench");
    assert!(bench.iter().any(|b| b.2 == Some(false)), "{bench:?}");
    let pr = read(&dir, "report.md");
    assert!(
        pr.contains("repeats ran beside other steps of the run (the step has exclusive = false)"),
        "{pr}"
    );
}

const PRECISE: &str = r#"schema = "orchestrate/plan/v1"
name = "precise"
[steps.fit]
repeats = 3
shell = '''case ${repeat} in 1) v=0.0014;; 2) v=0.0024;; *) v=0.0034;; esac; printf '{"loss": %s}' "$v" > "$ORCHESTRATE_METRICS"'''
[report]
templates = ["pr", "html"]
"#;

#[test]
fn metric_values_keep_full_precision() {
    let t = tempfile::tempdir().unwrap();
    let plan = t.path().join("plan.toml");
    std::fs::write(&plan, PRECISE).unwrap();
    let (dir, out) = run_plan_in(t.path(), &plan, &t.path().join("records"), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let rec = record_json(&dir);
    // The record's own statistics are unrounded.
    let walls: Vec<f64> = crate::support::record_step(&rec, "fit")["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["wall_ms"].as_f64().unwrap())
        .collect();
    let mut sorted = walls.clone();
    sorted.sort_by(f64::total_cmp);
    let median = crate::support::record_step(&rec, "fit")["wall_ms"]["median"]
        .as_f64()
        .unwrap();
    assert_eq!(median, sorted[1], "{walls:?}");
    // Every renderer states the true median and dispersion: 0.0024 and 83.33%.
    let summary = String::from_utf8_lossy(&out.stdout).into_owned();
    for (what, text) in [
        ("summary", summary),
        ("pr", read(&dir, "report.md")),
        ("html", read(&dir, "report.html")),
    ] {
        assert!(text.contains("median 0.00240"), "{what}: {text}");
        assert!(text.contains("83.33% of the median"), "{what}: {text}");
        assert!(!text.contains("0.0020"), "{what}: {text}");
    }
}

#[test]
fn junit_agrees_with_the_gate() {
    if !tools() {
        return;
    }
    let run = fix_run();
    assert_eq!(run.code, Some(0), "{}", run.stdout);
    let junit = read(&run.record, "report.junit.xml");
    // A green run: no failure anywhere; each explained exit skipped, with why.
    assert!(!junit.contains("<failure"), "{junit}");
    assert!(junit.contains("<testsuites name=\"textkit-fix\" tests=\""));
    assert!(junit.contains(" failures=\"0\" errors=\"0\""), "{junit}");
    assert_eq!(
        junit
            .matches("<skipped message=\"exited with code 1: not a failure")
            .count(),
        4,
        "{junit}"
    );
    assert!(junit.contains("<property name=\"verdict\" value=\"succeeded: nothing new fails"));

    // A red run (the break: a test that passed fails now): failures, and only the
    // step that made it red.
    let t = tempfile::tempdir().unwrap();
    let repo = textkit::repo(t.path());
    let plan = t.path().join("plan.toml");
    std::fs::write(&plan, textkit::plan(&repo.fix, &repo.broken)).unwrap();
    let (dir, out) = run_plan_in(t.path(), &plan, &t.path().join("records"), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    let junit = read(&dir, "report.junit.xml");
    let failing: Vec<&str> = junit
        .split("<testsuite name=\"")
        .skip(1)
        .filter(|s| s.contains("<failure"))
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    assert_eq!(failing, ["tests[revision=implementation]"], "{junit}");
}

#[test]
fn the_html_report_states_every_fact_of_the_body() {
    if !tools() {
        return;
    }
    let run = fix_run();
    let pr = read(&run.record, "report.md");
    // As a browser shows it: tera escapes `/`, quotes and ampersands.
    let html = read(&run.record, "report.html")
        .replace("&#x2F;", "/")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let summary = render(&run.record, "summary");
    let junit = read(&run.record, "report.junit.xml");
    let github = &run.github;
    // Each class of fact, as each renderer words it: (class, Markdown, plain text).
    let facts = [
        (
            "verdict",
            "nothing new fails against baseline",
            "nothing new fails against baseline",
        ),
        (
            "tests",
            "3 passed, 1 failed (2 counting each failed subtest",
            "3 passed, 1 failed (2 counting each failed subtest",
        ),
        (
            "removed",
            "**1 failing test removed**: `tests/test_textkit.py::SomeTests::test_unicode`",
            "1 failing test removed: tests/test_textkit.py::SomeTests::test_unicode",
        ),
        (
            "fixed",
            "1 fixed (`tests/test_textkit.py::SomeTests::test_basic`)",
            "1 fixed (tests/test_textkit.py::SomeTests::test_basic)",
        ),
        (
            "findings",
            "1 finding, all pre-existing on baseline",
            "1 finding, all pre-existing on baseline",
        ),
        ("timings", "`func_ms`: median", "func_ms: median"),
        ("p-value", "Mann–Whitney p = ", "Mann–Whitney p = "),
        (
            "explained",
            "4 steps exited non-zero as their results files explain",
            "4 steps exited non-zero as their results files explain",
        ),
    ];
    for (class, md, plain) in facts {
        assert!(pr.contains(md), "{class} not in the PR body:\n{pr}");
        assert!(
            github.contains(md) || class == "explained",
            "{class} not in the GitHub summary:\n{github}"
        );
        assert!(html.contains(plain), "{class} not in the HTML:\n{html}");
        assert!(
            summary.contains(plain),
            "{class} not in the summary:\n{summary}"
        );
        let xml = plain.replace('"', "&quot;").replace('\'', "&apos;");
        assert!(junit.contains(&xml), "{class} not in JUnit:\n{junit}");
    }
    assert!(!html.contains("no comparisons"), "{html}");
}

#[test]
fn a_failing_test_deleted_in_the_implementation_is_removed() {
    if !tools() {
        return;
    }
    let run = fix_run();
    let rec = record_json(&run.record);
    assert_eq!(rec["status"], "succeeded", "gate = \"new\" still passes");
    let tests = rec["revisions_compared"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["step"] == "tests")
        .unwrap()["tests"]
        .clone();
    let id = "tests.test_textkit.SomeTests::test_unicode";
    assert_eq!(tests["removed_failing"], serde_json::json!([id]));
    assert_eq!(tests["totals"]["removed_failing"], 1);
    assert!(!tests["fixed"].as_array().unwrap().iter().any(|f| f == id));
    let pr = read(&run.record, "report.md");
    assert!(
        pr.contains("**succeeded**: nothing new fails against baseline")
            && pr.contains("; **1 failing test removed**."),
        "{pr}"
    );
}

#[test]
fn subtests_are_counted_as_pytest_counts_them() {
    if !tools() {
        return;
    }
    let run = fix_run();
    // pytest's own line on the parent commit.
    let wt = run.root.join("wt-parent");
    git(
        &run.repo.dir,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            wt.to_str().unwrap(),
            &run.repo.parent,
        ],
    );
    let out = std::process::Command::new("python3")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .current_dir(&wt)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    let failed: u32 = line
        .split(", ")
        .find_map(|p| p.trim().strip_suffix(" failed"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("pytest said: {line}"));
    let rec = record_json(&run.record);
    let counts = &crate::support::record_step(&rec, "tests[revision=baseline]")["attempts"][0]
        ["results"]["junit"]["counts"];
    let ours = counts["failed"].as_u64().unwrap() + counts["subtest_failures"].as_u64().unwrap();
    assert_eq!(ours, u64::from(failed), "pytest: {line}; record: {counts}");
    assert_eq!(
        counts["failed"], 3,
        "cases: test_basic, test_subtests, test_unicode"
    );
    let pr = read(&run.record, "report.md");
    assert!(
        pr.contains(&format!("on the baseline 2 passed, 3 failed ({failed} counting each failed subtest, as pytest does)")),
        "{pr}"
    );
}

#[test]
fn explained_exits_are_not_failures() {
    if !tools() {
        return;
    }
    let run = fix_run();
    let rec = record_json(&run.record);
    // The record keeps every non-zero exit...
    assert_eq!(
        rec["failures"].as_array().unwrap().len(),
        4,
        "{}",
        rec["failures"]
    );
    // ...and the body calls none of them a failure: one short verdict sentence.
    let pr = read(&run.record, "report.md");
    let line = pr.lines().find(|l| l.starts_with("Run `")).unwrap();
    let verdict = &line[..line.find(". Baseline").unwrap_or(line.len())];
    assert_eq!(verdict.matches(';').count(), 1, "{verdict}");
    assert!(!verdict.contains("reported, not gating"), "{verdict}");
    assert!(!pr.contains("Failures kept on the record"), "{pr}");
    let steps = pr.lines().find(|l| l.starts_with("- **Steps**")).unwrap();
    assert!(
        !steps.contains("**2") && !steps.contains("failed"),
        "{steps}"
    );
    assert!(
        steps.contains("4 exited as their results explain (not gating)"),
        "{steps}"
    );
}

#[test]
fn findings_are_keyed_by_their_path_in_the_repository() {
    if !tools() {
        return;
    }
    let run = fix_run();
    let rec = record_json(&run.record);
    let raw = crate::support::record_step(&rec, "lint[revision=implementation]")["attempts"][0]
        ["results"]["sarif"]["findings"][0]["file"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        raw.starts_with("file:///"),
        "ruff writes absolute URIs: {raw}"
    );
    // A second run of the same commits: the same finding, at the same key.
    let (second, out) = run_plan_in(
        &run.root,
        &run.root.join("plan.toml"),
        &run.root.join("records-2"),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let _ = second;
    let out = cli()
        .args(["trend", "tests", "--json", "--records"])
        .arg(run.root.join("records"))
        .arg("--records")
        .arg(run.root.join("records-2"))
        .args(["--by", "time"])
        .current_dir(&run.root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("F401 in textkit.py"), "{text}");
    assert!(!text.contains("file://"), "{text}");
}

#[test]
fn targets_are_named_as_users_type_them() {
    if !tools() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let repo = textkit::repo(t.path());
    // A plan of the implementation alone, as trend and bisect plans are.
    let plan = t.path().join("history.toml");
    let text = textkit::plan(&repo.parent, &repo.fix);
    let text = text
        .replace("baseline = { repo = \"textkit\", commit = \"", "# ")
        .replace(
            "revisions = [\"baseline\", \"implementation\"]",
            "revisions = [\"implementation\"]",
        )
        .replace("gate = \"new\"\n", "");
    std::fs::write(&plan, text).unwrap();
    let bisect = |args: &[&str]| {
        let _host = crate::support::host_shared();
        cli()
            .arg("bisect")
            .arg(&plan)
            .args(["--good", &repo.fix, "--bad", &repo.broken, "--records"])
            .arg(t.path().join("records"))
            .args(args)
            .current_dir(t.path())
            .output()
            .unwrap()
    };
    // A pytest node id, and the step's own name: both resolve.
    let out = bisect(&["--test", "tests/test_textkit.py::SomeTests::test_lower"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("the first bad commit is"), "{said}");
    assert!(said.ends_with('\n'), "{said:?}");
    // A case that never ran: exit 2 after the first probe, naming the forms.
    let probes_before = crate::support::record_dirs(&t.path().join("records")).len();
    let out = bisect(&["--test", "tests/test_textkit.py::SomeTests::test_nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no test case `tests.test_textkit.SomeTests::test_nope` ran"),
        "{err}"
    );
    let probes = crate::support::record_dirs(&t.path().join("records")).len() - probes_before;
    assert_eq!(probes, 1, "stopped after the first probe");
    // A metric the step does not write: exit 2, naming those it does.
    let out = bisect(&["--metric", "bench.func"]);
    assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("writes no metric `func`") && err.contains("`func_ms`"),
        "{err}"
    );
    // A step that is not there: exit 2 before any probe.
    let before = crate::support::record_dirs(&t.path().join("records")).len();
    let out = bisect(&["--metric", "benchh.func_ms"]);
    assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no step `benchh`"));
    assert_eq!(
        crate::support::record_dirs(&t.path().join("records")).len(),
        before
    );
    // trend takes the step's own name too.
    let out = cli()
        .args(["trend", "bench", "func_ms", "--by", "time", "--records"])
        .arg(t.path().join("records"))
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("`bench` is `bench[revision=implementation]`"),
        "{}",
        shown(&out)
    );
    // The site's last line ends as a line does.
    let out = cli()
        .args(["site", "--records"])
        .arg(t.path().join("records"))
        .arg("-o")
        .arg(t.path().join("site"))
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).ends_with('\n'),
        "{}",
        shown(&out)
    );
}

#[test]
fn an_implementation_alone_needs_no_baseline() {
    let alone = r#"schema = "orchestrate/plan/v1"
name = "alone"
[revisions]
implementation = { repo = "r", commit = "HEAD" }
[steps.a]
revisions = ["implementation"]
shell = "true"
"#;
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("r");
    std::fs::create_dir_all(&r).unwrap();
    git(&r, &["init", "-q"]);
    std::fs::write(r.join("f"), "x").unwrap();
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "-qm", "one"]);
    let plan = t.path().join("plan.toml");
    std::fs::write(&plan, alone).unwrap();
    let (dir, out) = run_plan_in(t.path(), &plan, &t.path().join("records"), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let rec = record_json(&dir);
    assert_eq!(rec["run"]["revisions"][0]["name"], "implementation");
    assert_eq!(rec["run"]["revisions"][0]["baseline"], false);
    // A gate on new failures has nothing to compare with: a plan error, located.
    let gated = alone.replace(
        "shell = \"true\"\n",
        "shell = \"true\"\nresults = { junit = \"j.xml\" }\ngate = \"new\"\n",
    );
    std::fs::write(&plan, gated).unwrap();
    let out = cli().arg("check").arg(&plan).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("plan.toml:9:8"), "{err}");
    assert!(
        err.contains("[revisions] declares only `implementation`"),
        "{err}"
    );
}

/// Every TOML text the project ships or writes, read by a TOML 1.0 parser
/// (Python's `tomllib`): `plans/`, what `init` writes, what `pin` writes, and the
/// docs' examples.
#[test]
fn everything_shipped_as_toml_is_toml_1_0() {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import tomllib"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        return crate::support::skip_or_fail(
            crate::support::Need::PyTools,
            "python3 has no tomllib",
        );
    }
    let t = tempfile::tempdir().unwrap();
    let mut texts: Vec<(String, String)> = Vec::new();
    for e in std::fs::read_dir(crate::support::project("plans")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            texts.push((
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            ));
        }
    }
    let out = cli()
        .arg("init")
        .arg(t.path().join("exp"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    texts.push((
        "init".into(),
        std::fs::read_to_string(t.path().join("exp/plan.toml")).unwrap(),
    ));
    // `init --example` rewrites the pins of the shipped plans it copies out.
    for (example, plan) in [("full8k", "full.toml"), ("torch", "torch.toml")] {
        let dir = t.path().join(example);
        let out = cli()
            .args(["init", "--example", example])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", shown(&out));
        texts.push((
            format!("init --example {example}"),
            std::fs::read_to_string(dir.join(plan)).unwrap(),
        ));
    }
    // `pin` rewrites a plan with what it observed.
    let pinned = t.path().join("pinned.toml");
    std::fs::write(t.path().join("data.txt"), "x").unwrap();
    std::fs::write(
        &pinned,
        "schema = \"orchestrate/plan/v1\"\nname = \"p\"\n[pins.tools.sh]\ncommand = [\"sh\", \"-c\", \"echo tool 1.0\"]\n[pins.files]\n\"data.txt\" = \"\"\n[steps.a]\nshell = \"true\"\n",
    )
    .unwrap();
    let out = cli().arg("pin").arg(&pinned).output().unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    texts.push(("pin".into(), std::fs::read_to_string(&pinned).unwrap()));
    for doc in [
        "README.md",
        "docs/plan.md",
        "docs/cache.md",
        "docs/slurm.md",
        "docs/tracking.md",
    ] {
        let text = std::fs::read_to_string(crate::support::project(doc)).unwrap();
        for (i, block) in text.split("```toml\n").skip(1).enumerate() {
            let body = &block[..block.find("```").unwrap()];
            texts.push((format!("{doc} example {}", i + 1), body.to_string()));
        }
    }
    assert!(texts.len() > 8, "{}", texts.len());
    for (what, text) in texts {
        let f = t.path().join("t.toml");
        std::fs::write(&f, &text).unwrap();
        let out = std::process::Command::new("python3")
            .args([
                "-c",
                "import sys, tomllib; tomllib.load(open(sys.argv[1], 'rb'))",
            ])
            .arg(&f)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{what} is not TOML 1.0: {}\n{text}",
            shown(&out)
        );
    }
}

#[test]
fn markdown_escapes_only_what_a_reader_needs() {
    if !tools() {
        return;
    }
    let run = fix_run();
    let pr = read(&run.record, "report.md");
    let verification = &pr[pr.find("## Verification").unwrap()..pr.find("<details>").unwrap()];
    // Identifiers are code spans; nothing in the raw text is escaped for nothing.
    for needless in ["\\_", "\\[", "\\]", "\\`", "&lt;", "&amp;"] {
        assert!(
            !verification.contains(needless),
            "{needless} in:\n{verification}"
        );
    }
    assert!(
        verification.contains("under `gate = \"new\"`"),
        "{verification}"
    );
    // As GitHub renders it, the gate sentence is a code span, not literal backticks.
    let html = comrak::markdown_to_html(&pr, &comrak::Options::default());
    assert!(
        html.contains("<code>gate = &quot;new&quot;</code>"),
        "{html}"
    );
    assert!(!html.contains('`'), "literal backticks in:\n{html}");
    // The terminal's step table keeps its columns on long statuses.
    let summary = render(&run.record, "summary");
    let rows: Vec<&str> = summary.lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(rows.len(), 7, "{summary}");
    let width = rows[0].chars().count();
    assert!(
        rows.iter().all(|r| r.chars().count() == width),
        "every row as wide as the header:\n{summary}"
    );
    assert!(rows
        .iter()
        .any(|r| r.contains("pre-existing failures (not gating)")));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 400, failure_persistence: None, ..Default::default() })]

    /// Whatever a name holds, `md_text` makes Markdown that GitHub shows as exactly
    /// that text: no emphasis, strike, code, image or raw HTML of its own (an
    /// address GitHub links still reads as itself).
    #[test]
    fn escaped_text_renders_as_itself(s in "[a-z _*`\\[\\]()!<>&#@$~|\\\\.:-]{0,24}") {
        let mut o = comrak::Options::default();
        o.extension.strikethrough = true;
        o.extension.autolink = true;
        o.extension.table = true;
        let md = format!("- x {} y\n", orchestrate::report::format::md_text(&s));
        let html = comrak::markdown_to_html(&md, &o);
        for tag in ["<em>", "<strong>", "<del>", "<code>", "<img", "<p>"] {
            proptest::prop_assert!(!html.contains(tag), "{} in {} from {}", tag, html, md);
        }
        // The text, tags stripped.
        let mut text = String::new();
        let mut in_tag = false;
        for c in html.chars() {
            match c {
                '<' => in_tag = true,
                '>' if in_tag => in_tag = false,
                c if !in_tag => text.push(c),
                _ => {}
            }
        }
        let text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&amp;", "&");
        let got = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let want = format!("x {} y", s).split_whitespace().collect::<Vec<_>>().join(" ");
        proptest::prop_assert_eq!(got, want, "md: {}", md);
    }
}
