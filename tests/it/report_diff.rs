//! `diff` of two real runs of `plans/smoke.toml`, made by the orchestrate binary.

use orchestrate::report::{diff, DiffFormat};

#[test]
fn diff_of_two_real_smoke_runs() {
    let (ta, tb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (
        crate::support::run_smoke(ta.path()),
        crate::support::run_smoke(tb.path()),
    );

    let json = diff(&a, &b, DiffFormat::Json).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 5);
    let right = steps.iter().find(|s| s["step"] == "right").unwrap();
    assert!(right["ratio"].as_f64().unwrap() > 0.0);
    assert!(right["dispersion_a"].is_number());
    // One attempt has no spread: none, a dash in the text, never "0.00%".
    let left = steps.iter().find(|s| s["step"] == "left").unwrap();
    assert!(left["dispersion_a"].is_null(), "{left}");
    assert_eq!(right["changed"], false, "same plan, same status");
    // Same plan, same host: the environment did not change.
    let env = v["environment"].as_array().unwrap();
    assert!(env.iter().all(|r| r["changed"] == false), "{env:?}");
    let plan = v["pins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "plan sha256")
        .unwrap();
    assert_eq!(plan["changed"], false);
    // bit_exact counts 3 identical repeats in both runs.
    let check = &v["checks"][0];
    assert_eq!(check["value_a"], 3);
    assert_eq!(check["changed"], false);

    let md = diff(&a, &b, DiffFormat::Md).unwrap();
    assert!(md.contains("| step | status A | status B | median A | median B | B/A |"));
    assert!(
        !md.contains("**"),
        "nothing differs, nothing is marked:\n{md}"
    );
    let text = diff(&a, &b, DiffFormat::Text).unwrap();
    assert!(text.contains("right: succeeded -> succeeded"));
    let left = text.lines().find(|l| l.contains(" left: ")).unwrap();
    assert!(left.ends_with(", - / -"), "{left}");
}

#[test]
fn differences_are_marked() {
    let t = tempfile::tempdir().unwrap();
    let a = crate::support::run_smoke(t.path());
    // A changed copy: the same record with a failed check, re-hashed so it verifies.
    let b = t.path().join("b");
    std::fs::create_dir(&b).unwrap();
    let mut rec: orchestrate::evidence::record::Record =
        serde_json::from_slice(&std::fs::read(a.join("record.json")).unwrap()).unwrap();
    rec.comparisons[0].passed = false;
    rec.comparisons[0].value = orchestrate::record::CheckValue::Count(2);
    orchestrate::evidence::write_record(&b, &rec).unwrap();
    let md = diff(&a, &b, DiffFormat::Md).unwrap();
    assert!(
        md.contains("| **right repeats identical** | bit_exact | **3** | **2** | pass | FAIL |"),
        "{md}"
    );
    let text = diff(&a, &b, DiffFormat::Text).unwrap();
    assert!(
        text.contains("* right repeats identical [bit_exact]: 3 -> 2, pass / FAIL"),
        "{text}"
    );
    let json = diff(&a, &b, DiffFormat::Json).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["checks"][0]["changed"], true);
}
