//! Reports that tell the whole truth, on records made by real runs of the plan a
//! researcher writes: split compile stages, a prefill with repeats and a metric, two
//! handoffs that share one device in turn, two test suites that fail on purpose,
//! `--keep-going`, records outside the working folder. Each class of fact is stated
//! once, in its place, with the figure a researcher would quote.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use crate::support::{record_json, shown};

/// A float32 `.npy` of `values`, written by a step (python3 without numpy).
fn npy_step(path: &str, values: &str) -> String {
    format!(
        r#"python3 -c "
import struct
v=[{values}]
h=\"{{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }}\" % len(v)
h=h+' '*(63-(10+len(h))%64)+'\n'
open('{path}','wb').write(b'\x93NUMPY\x01\x00'+struct.pack('<H',len(h))+h.encode()+struct.pack('<%df'%len(v),*v))
""#
    )
}

fn research_plan() -> String {
    format!(
        r#"schema = "orchestrate/plan/v1"
name = "research"
description = "A researcher's plan"
allow_simulated = true
[limits]
timeout = "30s"
[devices]
gpu = {{ kind = "gpu", count = 1 }}
[steps.compile-a]
shell = "mkdir -p ${{work}}/model && echo a > ${{work}}/model/a"
outputs = ["${{work}}/model/a"]
[steps.compile-b]
needs = ["compile-a"]
shell = "echo b > ${{work}}/model/b"
outputs = ["${{work}}/model/b"]
[steps.prefill]
kind = "prefill"
needs = ["compile-b"]
devices = ["gpu"]
repeats = 3
warmup = 1
shell = '''
{npy}
case ${{repeat}} in 1) ms=769.52;; 2) ms=769.15;; *) ms=769.30;; esac
printf '{{"prefill_ms": %s, "tokens": 8192}}' "$ms" > "$ORCHESTRATE_METRICS"
'''
outputs = ["${{out}}/logits.npy"]
[steps.prefill.report]
metric = "prefill_ms"
[steps.handoff-1]
kind = "handoff"
needs = ["prefill"]
devices = ["gpu"]
shell = '''{npy1}'''
[steps.handoff-2]
kind = "handoff"
needs = ["prefill"]
devices = ["gpu"]
shell = '''{npy2}'''
[steps.suite-a]
shell = "echo 2 failed; sleep 0.05; exit 2"
[steps.suite-b]
shell = "exit 3"
[steps.compare]
kind = "compare"
needs = ["prefill", "handoff-1", "handoff-2"]
checks = [
  {{ name = "logits repeats bit-exact", metric = "bit_exact", across = "prefill", file = "logits.npy" }},
  {{ name = "handoff-1 logits rel RMS", metric = "rel_rms", actual = "${{steps.handoff-1.out}}/logits.npy", expected = "${{steps.prefill.out}}/logits.npy", max = 0.05 }},
]
[report]
templates = ["pr", "html"]
"#,
        npy = npy_step("${out}/logits.npy", "1.0, 2.0, 3.0, 4.0"),
        npy1 = npy_step("${out}/logits.npy", "1.001, 2.003, 2.998, 4.006"),
        npy2 = npy_step("${out}/logits.npy", "1.0, 2.0, 3.0, 4.0"),
    )
}

/// Run `plan` from `cwd` with records in `records`; the record folder.
fn run(cwd: &Path, plan: &Path, records: &Path, extra: &[&str]) -> PathBuf {
    crate::support::run_plan_in(cwd, plan, records, extra).0
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn a_researchers_plan_renders_every_fact_once_and_true() {
    let t = tempfile::tempdir().unwrap();
    let cwd = t.path().join("project");
    std::fs::create_dir_all(&cwd).unwrap();
    let plan = cwd.join("research.toml");
    std::fs::write(&plan, research_plan()).unwrap();
    // Records outside the project, as `--records DIR` puts them.
    let records = t.path().join("elsewhere/records");
    let dir = run(&cwd, &plan, &records, &[]);
    let rec = record_json(&dir);

    // Allocations: one per step that held the device, each released, none twice.
    let allocs = rec["allocations"].as_array().unwrap();
    let steps: Vec<&str> = allocs.iter().map(|a| a["step"].as_str().unwrap()).collect();
    assert_eq!(steps, ["prefill", "handoff-1", "handoff-2"], "{allocs:?}");
    assert!(
        allocs.iter().all(|a| a["released_at"].is_string()),
        "{allocs:?}"
    );
    // verify checks the allocation invariants (no overlap on one core) and passes.
    let v = crate::support::cli()
        .arg("verify")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", shown(&v));

    // Failures: each failed attempt once.
    let failures = rec["failures"].as_array().unwrap();
    for s in ["suite-a", "suite-b"] {
        let n = failures.iter().filter(|f| f["step"] == s).count();
        assert_eq!(n, 1, "{s}: {failures:?}");
    }

    let pr = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();

    // The footer's command works as printed, from where the run was started.
    let line = pr.lines().find(|l| l.contains("Verify with")).unwrap();
    let cmd = line
        .split("Verify with `")
        .nth(1)
        .unwrap()
        .split('`')
        .next()
        .unwrap();
    let args: Vec<&str> = cmd.split(' ').collect();
    assert_eq!(args[..2], ["orchestrate", "verify"], "{line}");
    let v = crate::support::cli()
        .args(&args[1..])
        .current_dir(&cwd)
        .output()
        .unwrap();
    assert!(
        v.status.success(),
        "`{cmd}` from {}: {}",
        cwd.display(),
        shown(&v)
    );

    // Numbers: relative RMS as a percentage in the checks table, never a raw float.
    let row = pr
        .lines()
        .find(|l| l.contains("| handoff-1 logits rel RMS |"))
        .unwrap();
    assert!(row.contains("%"), "{row}");
    assert!(!row.contains("0.00"), "no raw fraction: {row}");
    // A failed attempt's wall time is shown: it ran and was timed.
    let row = pr.lines().find(|l| l.starts_with("| `suite-a` |")).unwrap();
    assert!(row.contains("ms (attempt 1 exited)"), "{row}");

    // Step metrics: the headline metric replaces wall time in the prose, and its
    // row in the table gives the median too.
    assert!(
        pr.contains("warm prefill 769.15–769.52 ms (`prefill_ms`, n=3)"),
        "{pr}"
    );
    assert!(
        pr.contains("| `prefill` | **`prefill_ms`** | 769.15–769.52 ms (median 769.30 ms, n=3) |"),
        "{pr}"
    );
    // A metric the same in every repeat is a parameter, said once, not a row.
    assert!(
        pr.contains("- **Parameters**: `tokens` 8192 (the same in every repeat of `prefill`)"),
        "{pr}"
    );
    assert!(!pr.contains("| `prefill` | tokens |"), "{pr}");
    assert!(
        html.contains("Metric <code>prefill_ms</code>"),
        "a chart per metric"
    );

    // Every device, failure and step exactly once where it belongs.
    for (step, n) in [
        ("prefill", 1),
        ("handoff-1", 1),
        ("handoff-2", 1),
        ("compile-a", 0),
    ] {
        let line = format!("- `sim-gpu0` (gpu) for `{step}` (simulated)");
        assert_eq!(count(&pr, &line), n, "{line}\n{pr}");
    }
    assert_eq!(
        count(&pr, "devices were simulated: `sim-gpu0`\n"),
        1,
        "{pr}"
    );
    assert_eq!(count(&html, "simulated devices: <code>sim-gpu0</code>."), 1);
    for f in failures {
        let text = format!(
            "- `{}`: {}",
            f["step"].as_str().unwrap(),
            f["what"].as_str().unwrap()
        );
        assert_eq!(count(&pr, &text), 1, "{text}\n{pr}");
    }
    for s in rec["steps"].as_array().unwrap() {
        let id = s["id"].as_str().unwrap();
        // The steps table, plus the metrics table's row for `prefill`.
        assert_eq!(
            count(&pr, &format!("| `{id}` | ")),
            1 + usize::from(id == "prefill"),
            "{id}"
        );
        let kind = s["kind"].as_str().unwrap();
        assert_eq!(
            count(&html, &format!("<tr><td><code>{id}</code></td><td>{kind}")),
            1,
            "{id}"
        );
    }
}

#[test]
fn dispersion_past_the_threshold_is_said_in_words() {
    let t = tempfile::tempdir().unwrap();
    let plan = t.path().join("p.toml");
    std::fs::write(
        &plan,
        r#"schema = "orchestrate/plan/v1"
name = "noisy"
[steps.bench]
repeats = 3
shell = 'printf "{\"step_ms\": %s}" $((90 + ${repeat} * 10)) > "$ORCHESTRATE_METRICS"'
[report]
templates = ["pr"]
"#,
    )
    .unwrap();
    let dir = run(t.path(), &plan, &t.path().join("records"), &[]);
    let pr = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        pr.contains("100–120 ms (median 110 ms, n=3); timing dispersion remains: max − min is 18.18% of the median"),
        "{pr}"
    );
}

#[test]
fn a_large_plan_gets_counts_not_a_thousand_rows() {
    let t = tempfile::tempdir().unwrap();
    let mut body = String::from(
        "schema = \"orchestrate/plan/v1\"\nname = \"wide\"\n[report]\ntemplates = [\"pr\"]\n",
    );
    for i in 0..60 {
        let cmd = if i % 25 == 7 { "exit 1" } else { "true" };
        body.push_str(&format!("[steps.s{i:02}]\nshell = \"{cmd}\"\n"));
    }
    let plan = t.path().join("wide.toml");
    std::fs::write(&plan, body).unwrap();
    let dir = run(t.path(), &plan, &t.path().join("records"), &["--jobs", "2"]);
    let pr = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(pr.contains("60 steps: "), "{pr}");
    assert!(
        pr.contains("57 succeeded") && pr.contains("3 failed"),
        "{pr}"
    );
    for failed in ["s07", "s32", "s57"] {
        assert_eq!(count(&pr, &format!("| `{failed}` | ")), 1, "{pr}");
    }
    assert_eq!(
        count(&pr, "| `s00` | command | succeeded"),
        0,
        "no row per succeeded step"
    );
    assert!(pr.contains("Slowest: "), "{pr}");
    let summary = crate::support::cli()
        .args(["report", "--template", "summary"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&summary.stdout);
    assert!(text.contains("60 steps: 57 succeeded, 3 failed"), "{text}");
    assert!(text.lines().count() < 30, "{text}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random small plans (steps that fail or not, that share the one device or
    /// not): every device use, failure and step appears exactly once where it
    /// belongs in the PR body and the HTML report.
    #[test]
    fn every_fact_appears_once_where_it_belongs(
        steps in proptest::collection::vec((any::<bool>(), any::<bool>()), 2..6)
    ) {
        let t = tempfile::tempdir().unwrap();
        let mut body = String::from(
            "schema = \"orchestrate/plan/v1\"\nname = \"prop\"\nallow_simulated = true\n\
             [devices]\ngpu = { kind = \"gpu\", count = 1 }\n[report]\ntemplates = [\"pr\", \"html\"]\n",
        );
        for (i, (fails, device)) in steps.iter().enumerate() {
            body.push_str(&format!(
                "[steps.s{i}]\nshell = \"{}\"\n{}",
                if *fails { "exit 4" } else { "true" },
                if *device { "devices = [\"gpu\"]\n" } else { "" }
            ));
        }
        let plan = t.path().join("p.toml");
        std::fs::write(&plan, body).unwrap();
        let dir = run(t.path(), &plan, &t.path().join("records"), &[]);
        let rec = record_json(&dir);
        let pr = std::fs::read_to_string(dir.join("report.md")).unwrap();
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        for (i, (fails, device)) in steps.iter().enumerate() {
            let id = format!("s{i}");
            let line = format!("- `sim-gpu0` (gpu) for `{id}` (simulated)");
            prop_assert_eq!(count(&pr, &line), usize::from(*device), "{}", line);
            prop_assert_eq!(count(&pr, &format!("| `{id}` | ")), 1);
            prop_assert_eq!(count(&html, &format!("<tr><td><code>{id}</code></td>")), 1);
            let failure = format!("- `{id}`: attempt 1 exited with code 4");
            prop_assert_eq!(count(&pr, &failure), usize::from(*fails), "{}", failure);
            prop_assert_eq!(count(&html, &format!("<li>{id}: attempt 1 exited with code 4</li>")), usize::from(*fails));
        }
        prop_assert_eq!(rec["failures"].as_array().unwrap().len(), steps.iter().filter(|s| s.0).count());
        let any_device = steps.iter().any(|s| s.1);
        prop_assert_eq!(count(&html, "simulated devices: <code>sim-gpu0</code>."), usize::from(any_device));
    }
}
