//! Real runs of a matrix plan and of steps with retries: per-cell steps and checks
//! in one record, reports grouped by cell, `diff` pairing cells, every try of a
//! retried step on the record, and what `retry_on` narrows.

use std::path::{Path, PathBuf};

use crate::support::{assert_verifies, record, run_plan_in, shown, step};
use orchestrate::evidence::record::StepStatus;

/// A float32 `.npy` of `n` values `1.0 * k` (python3 without numpy).
fn npy(path: &str, n: &str, scale: &str) -> String {
    format!(
        r#"python3 -c "
import struct
n={n}; v=[float(i)*{scale} for i in range(n)]
h=\"{{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }}\" % n
h=h+' '*(63-(10+len(h))%64)+'\n'
open('{path}','wb').write(b'\x93NUMPY\x01\x00'+struct.pack('<H',len(h))+h.encode()+struct.pack('<%df'%n,*v))
""#
    )
}

fn sweep_plan() -> String {
    format!(
        r#"schema = "orchestrate/plan/v1"
name = "sweep"
allow_simulated = true
[limits]
timeout = "30s"
[params]
scale = 1.0
[matrix]
tokens = [4, 8]
[devices]
gpu = {{ kind = "gpu", count = 1 }}
[steps.prefill]
kind = "prefill"
devices = ["gpu"]
repeats = 2
shell = '''
{prefill}
printf '{{"tokens": ${{matrix.tokens}}, "prefill_ms": 5}}' > "$ORCHESTRATE_METRICS"
'''
outputs = ["${{out}}/logits.npy"]
[steps.handoff]
kind = "handoff"
needs = ["prefill"]
devices = ["gpu"]
shell = '''{handoff}'''
outputs = ["${{out}}/logits.npy"]
[steps.compare]
kind = "compare"
needs = ["prefill", "handoff"]
checks = [
  {{ name = "repeats bit-exact", metric = "bit_exact", across = "prefill", file = "logits.npy" }},
  {{ name = "handoff rel RMS", metric = "rel_rms", actual = "${{steps.handoff.out}}/logits.npy", expected = "${{steps.prefill.out}}/logits.npy", max = 0.5 }},
  {{ name = "logits shape", metric = "shape", actual = "${{steps.prefill.out}}/logits.npy", shape = ["${{matrix.tokens}}"] }},
]
[steps.flaky]
retries = 3
retry_on = ["exit:75"]
shell = 'n=$(cat "${{work}}/tries" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "${{work}}/tries"; [ $n -ge 3 ] || exit 75'
[steps.wrong-code]
retries = 2
retry_on = ["exit:75"]
shell = "exit 1"
[steps.always]
retries = 2
shell = "echo try; exit 3"
[report]
templates = ["pr"]
cell_title = "Full {{tokens}}"
"#,
        prefill = npy("${out}/logits.npy", "${matrix.tokens}", "1.0"),
        handoff = npy("${out}/logits.npy", "${matrix.tokens}", "${params.scale}"),
    )
}

fn run(cwd: &Path, plan: &Path, extra: &[&str]) -> (PathBuf, std::process::Output) {
    run_plan_in(cwd, plan, &cwd.join("records"), extra)
}

#[test]
fn one_record_holds_every_cell_and_every_try() {
    let t = tempfile::tempdir().unwrap();
    let plan = t.path().join("sweep.toml");
    std::fs::write(&plan, sweep_plan()).unwrap();
    let (dir, out) = run(t.path(), &plan, &["--set", "params.scale=1.1"]);
    // Two steps fail on purpose: the run fails, with the evidence kept.
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    let rec = record(&dir);

    // Cells: one step per cell, ids with the cell, the template and cell recorded.
    let ids: Vec<&str> = rec.steps.iter().map(|s| s.id.as_str()).collect();
    for id in [
        "prefill[tokens=4]",
        "prefill[tokens=8]",
        "handoff[tokens=8]",
        "compare[tokens=4]",
        "flaky",
    ] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    let declared = rec
        .run
        .steps
        .iter()
        .find(|s| s.id == "handoff[tokens=8]")
        .unwrap();
    assert_eq!(declared.template.as_deref(), Some("handoff"));
    let cell: Vec<(&str, &str)> = declared
        .cell
        .iter()
        .map(|c| (c.axis.as_str(), c.value.as_str()))
        .collect();
    assert_eq!(cell, [("tokens", "8")]);
    assert_eq!(declared.needs, ["prefill[tokens=8]"]);
    assert_eq!(rec.run.plan.matrix.as_ref().map(|m| m.cells), Some(2));
    assert_eq!(rec.run.options.overrides, ["params.scale=1.1"]);
    // The recorded plan text is the one that ran, with the override in it.
    let copy = std::fs::read_to_string(dir.join("plan.toml")).unwrap();
    assert!(copy.contains("scale = 1.1"), "{copy}");

    // Checks ran per cell, each against its own cell's files.
    let checks: Vec<(String, String, bool)> = rec
        .comparisons
        .iter()
        .map(|c| (c.step.clone(), c.name.clone(), c.passed))
        .collect();
    for cell in ["4", "8"] {
        for name in ["repeats bit-exact", "handoff rel RMS", "logits shape"] {
            let want = (
                format!("compare[tokens={cell}]"),
                format!("{name} [tokens={cell}]"),
                true,
            );
            assert!(checks.contains(&want), "{want:?} in {checks:?}");
        }
    }
    let shape = rec
        .comparisons
        .iter()
        .find(|c| c.name == "logits shape [tokens=8]")
        .unwrap();
    assert_eq!(shape.value, orchestrate::record::CheckValue::Shape(vec![8]));

    // Retries: every try on the record, numbered; the step says it needed them.
    let flaky = step(&rec, "flaky");
    assert_eq!(flaky.status, StepStatus::Succeeded);
    let tries: Vec<(u32, u32, Option<i32>)> = flaky
        .attempts
        .iter()
        .map(|a| (a.attempt, a.retry, a.exit_code))
        .collect();
    assert_eq!(tries, [(1, 0, Some(75)), (2, 1, Some(75)), (3, 2, Some(0))]);
    // `retry_on` narrows: exit 1 is not exit 75, so one try.
    let wrong = step(&rec, "wrong-code");
    assert_eq!(wrong.status, StepStatus::Failed);
    assert_eq!(wrong.attempts.len(), 1);
    // No `retry_on`: any failure is retried, up to `retries`, and every try kept.
    let always = step(&rec, "always");
    assert_eq!(always.status, StepStatus::Failed);
    assert_eq!(always.attempts.len(), 3);
    for a in &always.attempts {
        let log = dir.join(&a.stdout.path);
        assert_eq!(
            std::fs::read_to_string(&log).unwrap_or_default(),
            "try\n",
            "{log:?}"
        );
    }

    // The PR body: a block per cell, the retry said in words.
    let pr = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let i4 = pr.find("- **Full 4**: ").expect("a Full 4 bullet");
    let i8 = pr.find("- **Full 8**: ").expect("a Full 8 bullet");
    assert!(i4 < i8, "cells in plan order");
    let block4 = &pr[i4..i8];
    assert!(block4.contains("2 bit-exact"), "{block4}");
    assert!(block4.contains("\n  - `handoff`"), "{block4}");
    assert!(!block4.contains("tokens=8"), "{block4}");
    assert!(pr.contains("succeeded on retry 2 of 3"), "{pr}");
    assert!(pr.contains("failed on retry 2 of 2"), "{pr}");
    assert!(
        pr.contains("  - `flaky`: attempt 2 exited with code 75 (tried again)\n  - `wrong-code`"),
        "{pr}"
    );
    assert!(
        always
            .reason
            .as_deref()
            .is_some_and(|r| r.ends_with("(after 2 retries)")),
        "{:?}",
        always.reason
    );

    // verify accepts the record as made.
    assert_verifies(&dir);

    // diff pairs cells by id: run only the 8-token cell and compare.
    let (dir8, _) = run(t.path(), &plan, &["--only", "tokens=8"]);
    let rec8 = record(&dir8);
    assert_eq!(rec8.run.options.only, ["tokens=8"]);
    assert!(
        step_ids(&rec8).iter().all(|id| !id.contains("tokens=4")),
        "{:?}",
        step_ids(&rec8)
    );
    let d = crate::support::cli()
        .arg("diff")
        .arg(&dir)
        .arg(&dir8)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&d.stdout);
    assert!(text.contains("prefill[tokens=8]"), "{}", shown(&d));
    assert!(
        text.contains("prefill[tokens=4]"),
        "the cell only one side ran is named: {}",
        shown(&d)
    );
}

fn step_ids(rec: &orchestrate::evidence::record::Record) -> Vec<String> {
    rec.steps.iter().map(|s| s.id.clone()).collect()
}
