//! Baseline and implementation in one run: a real git repository with three commits,
//! real pytest JUnit reports and real ruff SARIF logs on both revisions, classified
//! into new and pre-existing; timings across revisions; tensors across revisions;
//! the user's checkout left as it was.

use std::path::{Path, PathBuf};

use crate::support::{
    assert_verifies, git, has_program, record_json, record_step, run_plan_in, shown, skip_or_fail,
    Need,
};

/// c1 (baseline): `test_b` fails; an unused import. c2: `test_c` fails too (new), a
/// second unused import (new finding), slower. c3: `test_c` fixed again.
fn repository(root: &Path) -> (PathBuf, [String; 3]) {
    let r = crate::support::GitRepo::init(root.join("repo"));
    let (write, commit) = (
        |rel: &str, text: &str| r.write(rel, text),
        |msg: &str| r.commit(msg),
    );
    write(".gitignore", "__pycache__/\n");
    write("lib.py", "import os\n\n\ndef answer():\n    return 42\n");
    write("latency.txt", "10.0 10.4 10.2 10.1 10.3\n");
    write(
        "tests/test_lib.py",
        "import lib\n\n\ndef test_a():\n    assert lib.answer() == 42\n\n\ndef test_b():\n    assert lib.answer() == 41, 'known bug'\n\n\ndef test_c():\n    assert lib.answer() > 0\n",
    );
    let c1 = commit("baseline");
    write(
        "lib.py",
        "import os\nimport sys\n\n\ndef answer():\n    return -42\n",
    );
    write("latency.txt", "20.0 20.4 20.2 20.1 20.3\n");
    write(
        "tests/test_lib.py",
        "import lib\n\n\ndef test_a():\n    assert abs(lib.answer()) == 42\n\n\ndef test_b():\n    assert lib.answer() == 41, 'known bug'\n\n\ndef test_c():\n    assert lib.answer() > 0\n",
    );
    let c2 = commit("regress");
    write(
        "lib.py",
        "import os\nimport sys\n\n\ndef answer():\n    return 42\n",
    );
    let c3 = commit("fix");
    (r.dir.clone(), [c1, c2, c3])
}

const PLAN: &str = r#"schema = "orchestrate/plan/v1"
name = "revisions"
allow_simulated = true
[limits]
timeout = "60s"
[devices]
gpu = { kind = "gpu", count = 1 }

[revisions]
baseline = { repo = "repo", commit = "HEAD~2" }
implementation = { repo = "repo", commit = "HEAD~1" }

[steps.tests]
revisions = ["baseline", "implementation"]
cwd = "${revision.dir}"
shell = "python3 -m pytest -q -p no:cacheprovider --junitxml=\"${out}/junit.xml\" tests"
results = { junit = "${out}/junit.xml" }
gate = "new"

[steps.scan]
revisions = ["baseline", "implementation"]
shell = "ruff check --no-cache --exit-zero --output-format sarif -o \"${out}/scan.sarif\" \"${revision.dir}\""
results = { sarif = "${out}/scan.sarif" }

[steps.bench]
revisions = ["baseline", "implementation"]
devices = ["gpu"]
repeats = 5
shell = '''
set -- $(cat "${revision.dir}/latency.txt")
shift $((${repeat} - 1))
printf '{"latency_ms": %s, "commit": "%s"}' "$1" "${revision.commit}" > "$ORCHESTRATE_METRICS"
'''
[steps.bench.report]
metric = "latency_ms"

[steps.answer]
revisions = ["baseline", "implementation"]
shell = '''python3 -c "
import struct, sys
sys.path.insert(0, '${revision.dir}')
import lib
v = [float(lib.answer())] * 4
h = \"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\"
h = h + ' ' * (63 - (10 + len(h)) % 64) + '\n'
open('${out}/answer.npy', 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() + struct.pack('<4f', *v))
"'''
outputs = ["${out}/answer.npy"]

[steps.same]
kind = "compare"
needs = ["answer"]
matrix = []
checks = [
  { name = "implementation answer bit-identical to baseline", metric = "bit_exact", actual = "${steps.answer[revision=implementation].out}/answer.npy", expected = "${steps.answer[revision=baseline].out}/answer.npy" },
]

[report]
templates = ["pr"]
"#;

/// What a run must leave of the user's repository: status, HEAD, branches, worktrees.
fn repo_state(dir: &Path) -> Vec<String> {
    [
        vec!["status", "--porcelain=v1", "--untracked-files=all"],
        vec!["rev-parse", "HEAD"],
        vec!["branch", "-a"],
        vec!["worktree", "list", "--porcelain"],
        vec!["stash", "list"],
    ]
    .iter()
    .map(|a| git(dir, a))
    .collect()
}

#[test]
fn one_run_tells_new_failures_from_pre_existing_ones() {
    if !(has_program("ruff")
        && std::process::Command::new("python3")
            .args(["-c", "import pytest"])
            .output()
            .is_ok_and(|o| o.status.success()))
    {
        return skip_or_fail(Need::PyTools, "pytest or ruff is not installed");
    }
    let t = tempfile::tempdir().unwrap();
    let (repo, [c1, c2, c3]) = repository(t.path());
    let plan = t.path().join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let before = repo_state(&repo);

    let (dir, out) = run_plan_in(t.path(), &plan, &t.path().join("records"), &[]);
    // A new failure on the implementation fails the run.
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    let rec = record_json(&dir);
    // The verdict names what fails the run, apart from the baseline cell that fails
    // as it always did; the steps table says so too.
    let reason = rec["reason"].as_str().unwrap();
    let (gating, rest) = reason.split_once(" (1 more ").expect(reason);
    assert!(gating.starts_with("failed steps: "), "{reason}");
    assert!(
        gating.contains("tests[revision=implementation]"),
        "{reason}"
    );
    assert!(!gating.contains("tests[revision=baseline]"), "{reason}");
    assert!(
        rest.contains("failed only as the baseline does: not gating"),
        "{reason}"
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary
            .lines()
            .any(|l| l.starts_with("tests[revision=baseline] ")
                && l.contains("baseline failures (not gating)")),
        "{summary}"
    );
    assert_eq!(
        repo_state(&repo),
        before,
        "the user's checkout is as it was"
    );

    // Each revision resolved, checked out under the work folder, on the record.
    let revs = rec["run"]["revisions"].as_array().unwrap();
    assert_eq!(revs[0]["name"], "baseline");
    assert_eq!(revs[0]["commit"], c1.as_str());
    assert_eq!(revs[0]["baseline"], true);
    assert_eq!(revs[1]["commit"], c2.as_str());
    assert_eq!(revs[1]["mode"], "checkout");
    let checkout = PathBuf::from(revs[1]["dir"].as_str().unwrap());
    assert!(checkout.starts_with(rec["run"]["options"]["work"].as_str().unwrap()));
    assert_eq!(git(&checkout, &["rev-parse", "HEAD"]), c2);
    // `${revision.commit}` reached the step.
    let bench = record_step(&rec, "bench[revision=implementation]");
    assert_eq!(bench["attempts"][0]["metrics"]["commit"], c2.as_str());

    // Tests: classified case by case.
    let cmp = |step: &str| {
        rec["revisions_compared"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["step"] == step)
            .unwrap_or_else(|| panic!("no comparison of {step}: {rec}"))
            .clone()
    };
    let tests = cmp("tests");
    assert_eq!(tests["implementation"], "tests[revision=implementation]");
    assert_eq!(
        tests["tests"]["new"],
        serde_json::json!(["tests.test_lib::test_c"])
    );
    assert_eq!(
        tests["tests"]["pre_existing"],
        serde_json::json!(["tests.test_lib::test_b"])
    );
    assert_eq!(tests["tests"]["implementation"]["failed"], 2);
    assert_eq!(tests["tests"]["baseline"]["passed"], 2);
    let cases =
        &record_step(&rec, "tests[revision=baseline]")["attempts"][0]["results"]["junit"]["cases"];
    assert_eq!(cases.as_array().unwrap().len(), 3, "{cases}");
    // Findings: the unused `os` is on both, `sys` is new, matched across checkouts.
    let scan = cmp("scan");
    assert_eq!(
        scan["findings"]["totals"],
        serde_json::json!({ "new": 1, "pre_existing": 1, "fixed": 0 })
    );
    assert_eq!(scan["findings"]["new"][0]["rule"], "F401");
    assert_eq!(scan["findings"]["new"][0]["file"], "lib.py");
    // Timings: the headline metric moved from about 10 to about 20 ms.
    let bench = cmp("bench");
    let latency = bench["timings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["metric"] == "latency_ms")
        .unwrap();
    assert_eq!(latency["mark"], "worse", "{latency}");
    assert!((latency["ratio"].as_f64().unwrap() - 20.2 / 10.2).abs() < 1e-9);
    // The two revisions' attempts interleaved (ABAB) on one lease of the device.
    let starts = |id: &str| -> Vec<String> {
        record_step(&rec, id)["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["started_at"].as_str().unwrap().to_string())
            .collect()
    };
    let (b, i) = (
        starts("bench[revision=baseline]"),
        starts("bench[revision=implementation]"),
    );
    for k in 0..5 {
        assert!(b[k] < i[k], "baseline attempt {k} first: {b:?} {i:?}");
        if k + 1 < 5 {
            assert!(i[k] < b[k + 1], "then the implementation's: {b:?} {i:?}");
        }
    }
    let leases: Vec<&serde_json::Value> = rec["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["step"].as_str().is_some_and(|s| s.starts_with("bench")))
        .collect();
    assert_eq!(leases.len(), 1, "one lease for the group: {leases:?}");
    // Tensors across revisions: the answer's sign changed.
    let same = rec["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["step"] == "same")
        .unwrap();
    assert_eq!(same["passed"], false, "{same}");

    let pr = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let short = |c: &str| c[..7].to_string();
    assert!(
        pr.contains(&format!(
            "Baseline {}; implementation {}",
            short(&c1),
            short(&c2)
        )),
        "{pr}"
    );
    assert!(
        pr.contains(&format!("**1 new** against baseline {} (`tests/test_lib.py::test_c`), 1 reproduces on it (`tests/test_lib.py::test_b`)", short(&c1))),
        "{pr}"
    );
    assert!(
        pr.contains("- `scan`: 2 findings: **1 new** against baseline"),
        "{pr}"
    );
    assert!(
        pr.contains("`latency_ms`: median 20.2 ms against 10.2 ms"),
        "{pr}"
    );
    assert!(pr.contains("**worse**"), "{pr}");
    assert_verifies(&dir);

    // The fix: only the pre-existing failure is left, and gate = "new" passes the run.
    let first = dir.clone();
    let (dir, out) = run_plan_in(
        t.path(),
        &plan,
        &t.path().join("records"),
        &["--set", "revisions.implementation.commit=\"HEAD\""],
    );
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let rec = record_json(&dir);
    assert_eq!(rec["run"]["revisions"][1]["commit"], c3.as_str());
    assert_eq!(rec["status"], "succeeded");
    assert!(
        rec["reason"]
            .as_str()
            .unwrap()
            .contains("nothing new fails against the baseline"),
        "{rec}"
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary
            .lines()
            .any(|l| l.starts_with("tests[revision=implementation] ")
                && l.contains("pre-existing failures (not gating)")),
        "{summary}"
    );
    let pr = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        pr.contains(&format!(
            "the failure reproduces on baseline {} (`tests/test_lib.py::test_b`)",
            short(&c1)
        )),
        "{pr}"
    );
    assert_eq!(repo_state(&repo), before);
    assert_verifies(&dir);
    // diff of the two runs classifies the same way, the first run as the baseline.
    let d = crate::support::cli()
        .arg("diff")
        .arg(&first)
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&d.stdout);
    assert!(
        text.contains("## Tests and findings (B against A)"),
        "{}",
        shown(&d)
    );
    assert!(
        text.contains("- `tests[revision=implementation]`: 2 passed, 1 failed; the failure reproduces on baseline A (`tests.test_lib::test_b`); 1 fixed (`tests.test_lib::test_c`)"),
        "{}",
        shown(&d)
    );
    assert!(
        text.contains(
            "- `scan[revision=implementation]`: 2 findings, all pre-existing on baseline A"
        ),
        "{}",
        shown(&d)
    );
}

#[test]
fn a_revision_that_does_not_exist_refuses_the_run() {
    let t = tempfile::tempdir().unwrap();
    let (repo, _) = repository(t.path());
    let plan = t.path().join("plan.toml");
    // A plan with these two revisions is refused before anything runs, saying `why`.
    let refused = |baseline: &str, implementation: &str, why: &str| {
        std::fs::write(
            &plan,
            format!("schema = \"orchestrate/plan/v1\"\nname = \"r\"\n[revisions]\nbaseline = {{ {baseline} }}\nimplementation = {{ {implementation} }}\n[steps.a]\nrevisions = [\"baseline\", \"implementation\"]\nshell = \"true\"\n"),
        )
        .unwrap();
        let out = crate::support::cli()
            .arg("run")
            .arg(&plan)
            .arg("--records")
            .arg(t.path().join("records"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{}", shown(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(why),
            "{}",
            shown(&out)
        );
        assert!(crate::support::record_dirs(&t.path().join("records")).is_empty());
    };
    refused(
        "repo = \"repo\", commit = \"no-such-branch\"",
        "repo = \"repo\"",
        "`no-such-branch` names no commit",
    );
    // The working tree as a revision: dirty = "refuse" on a dirty tree refuses.
    std::fs::write(repo.join("lib.py"), "# edited\n").unwrap();
    refused(
        "repo = \"repo\", commit = \"HEAD~1\"",
        "repo = \"repo\", dirty = \"refuse\"",
        "tracked changes",
    );
    // `dirty` runs the working tree, so it must be at the commit asked for.
    refused(
        "repo = \"repo\", commit = \"HEAD~1\"",
        "repo = \"repo\", commit = \"HEAD~1\", dirty = \"allow\"",
        "`dirty` runs the working tree",
    );
}
