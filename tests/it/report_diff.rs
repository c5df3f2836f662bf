//! `diff` of two real runs of `plans/smoke.toml`, made by the orchestrate binary.

use orchestrate::report::{diff, DiffFormat};

#[test]
fn diff_of_two_real_smoke_runs() {
    let (ta, tb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (
        crate::support::run_smoke(ta.path()),
        crate::support::run_smoke(tb.path()),
    );

    let ab = [a.clone(), b.clone()];
    let json = diff(&ab, DiffFormat::Json, false).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["labels"], serde_json::json!(["A", "B"]));
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 5);
    let right = steps.iter().find(|s| s["step"] == "right").unwrap();
    assert_eq!(right["ratio"].as_array().unwrap().len(), 1);
    assert!(right["ratio"][0].as_f64().unwrap() > 0.0);
    assert!(right["dispersion"][0].is_number());
    // One attempt has no spread: none, a dash in the text, never "0.00%".
    let left = steps.iter().find(|s| s["step"] == "left").unwrap();
    assert!(left["dispersion"][0].is_null(), "{left}");
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
    assert_eq!(check["value"], serde_json::json!([3, 3]));
    assert_eq!(check["changed"], false);

    let md = diff(&ab, DiffFormat::Md, false).unwrap();
    assert!(md.contains("| step | status A | status B | median A | median B | B/A |"));
    // Timings and metrics of two runs may differ (ranges apart); nothing else does.
    let measured = &md[md.find("## Steps").unwrap()..md.find("## Checks").unwrap()];
    assert!(
        md.lines()
            .filter(|l| l.contains("**"))
            .all(|l| measured.contains(l)),
        "only step timings and metrics may differ:\n{md}"
    );
    let text = diff(&ab, DiffFormat::Text, false).unwrap();
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
    let ab = [a.clone(), b.clone()];
    let md = diff(&ab, DiffFormat::Md, false).unwrap();
    assert!(
        md.contains("| **right repeats identical** | bit_exact | **3** | **2** | pass | FAIL |"),
        "{md}"
    );
    let text = diff(&ab, DiffFormat::Text, false).unwrap();
    assert!(
        text.contains("* right repeats identical [bit_exact]: 3 -> 2, pass / FAIL"),
        "{text}"
    );
    let json = diff(&ab, DiffFormat::Json, false).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["checks"][0]["changed"], true);
}

/// Three runs, a column each; `--diff-only` keeps exactly the rows that differ.
#[test]
fn three_runs_side_by_side_and_only_what_differs() {
    let t = tempfile::tempdir().unwrap();
    let a = crate::support::run_smoke(t.path());
    let copy = |name: &str, edit: &dyn Fn(&mut orchestrate::evidence::record::Record)| {
        let dir = t.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        let mut rec: orchestrate::evidence::record::Record =
            serde_json::from_slice(&std::fs::read(a.join("record.json")).unwrap()).unwrap();
        edit(&mut rec);
        orchestrate::evidence::write_record(&dir, &rec).unwrap();
        dir
    };
    // B: the same run under another host name; C: a failed check and a `--set` too.
    let b = copy("b", &|r| r.run.host.hostname = "other-host".into());
    let c = copy("c", &|r| {
        r.run.host.hostname = "other-host".into();
        r.comparisons[0].passed = false;
        r.comparisons[0].value = orchestrate::record::CheckValue::Count(2);
        r.run.options.overrides = vec!["tokens=8".into()];
    });
    let abc = [a.clone(), b, c];
    let md = diff(&abc, DiffFormat::Md, false).unwrap();
    assert!(md.contains("| | A | B | C |"), "{md}");
    assert!(
        md.contains("| step | status A | status B | status C | median A | median B | median C | B/A | C/A | dispersion A | dispersion B | dispersion C |"),
        "{md}"
    );
    assert!(
        md.contains("| **right repeats identical** | bit_exact | **3** | **3** | **2** | pass | pass | FAIL |"),
        "{md}"
    );
    let json = diff(&abc, DiffFormat::Json, true).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["only_changed"], true);
    // Every fact of the copies is A's but the host name and C's check: with the
    // same steps (timings copied) only those two rows are left.
    let names = |k: &str| -> Vec<String> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("pins"), Vec::<String>::new(), "{json}");
    assert_eq!(names("environment"), ["host"], "{json}");
    assert_eq!(names("parameters"), ["--set tokens"], "{json}");
    assert_eq!(
        v["parameters"][0]["values"],
        serde_json::json!(["(absent)", "(absent)", "8"])
    );
    assert_eq!(names("checks"), ["right repeats identical"], "{json}");
    assert_eq!(v["steps"].as_array().unwrap().len(), 0, "{json}");
    assert_eq!(v["environment"][0]["values"][1], "other-host", "{json}");
    let text = diff(&abc, DiffFormat::Text, true).unwrap();
    assert!(text.contains("only what differs is shown"), "{text}");
    assert!(!text.contains("kernel"), "{text}");
    assert!(
        text.contains("* right repeats identical [bit_exact]: 3 -> 3 -> 2, pass / pass / FAIL"),
        "{text}"
    );
    // The command line takes any number of runs; one is a usage error.
    let out = crate::support::cli()
        .arg("diff")
        .args(&abc)
        .args(["--diff-only", "--format", "text"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), text);
    let one = crate::support::cli().arg("diff").arg(&a).output().unwrap();
    assert_eq!(one.status.code(), Some(2));
}
