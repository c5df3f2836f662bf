//! `orchestrate init [DIR]`: the starter plan checks and runs as it is, with its
//! reports, and init never writes over a plan that is there.

use crate::support;

#[test]
fn the_starter_plan_checks_and_runs_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let out = support::cli()
        .args(["init", "exp"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", support::shown(&out));
    let plan = dir.path().join("exp/plan.toml");
    // plans/starter.toml, its schema line pointing at the copy beside it.
    let starter = std::fs::read_to_string(support::project("plans/starter.toml")).unwrap();
    assert_eq!(
        std::fs::read_to_string(&plan).unwrap(),
        starter.replacen("../schemas/plan.schema.json", "./plan.schema.json", 1),
        "init writes plans/starter.toml"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("exp/plan.schema.json")).unwrap(),
        std::fs::read_to_string(support::project("schemas/plan.schema.json")).unwrap()
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("orchestrate check exp/plan.toml"));

    let out = support::cli()
        .args(["check", "exp/plan.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", support::shown(&out));

    let record = support::run_plan_ok(dir.path(), &plan, &[]);
    let rec = support::record_json(&record);
    assert_eq!(rec["status"], "succeeded");
    let checks = rec["comparisons"].as_array().unwrap();
    assert_eq!(checks.len(), 2);
    assert!(checks.iter().all(|c| c["passed"] == true), "{checks:?}");
    // Its metric is measured in every repeat and quoted as the step's figure.
    let transform = support::record_step(&rec, "transform");
    let measured: Vec<&serde_json::Value> = transform["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["warmup"] == false)
        .collect();
    assert_eq!(measured.len(), 3);
    assert!(measured.iter().all(|a| a["metrics"]["transform_ms"]
        .as_f64()
        .is_some_and(|x| x >= 0.0)));
    for f in ["report.md", "report.html", "report.junit.xml"] {
        assert!(record.join(f).is_file(), "{f} in the record folder");
    }
    let pr = std::fs::read_to_string(record.join("report.md")).unwrap();
    assert!(pr.contains("2 of 2 checks passed"), "{pr}");
    support::assert_verifies(&record);
}

#[test]
fn init_never_writes_over_a_plan() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plan.toml"), "mine").unwrap();
    let out = support::cli()
        .arg("init")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", support::shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("plan.toml exists"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("plan.toml")).unwrap(),
        "mine"
    );
    // A link in its place is not followed either.
    let other = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(dir.path().join("target"), other.path().join("plan.toml")).unwrap();
    let out = support::cli()
        .arg("init")
        .arg(other.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", support::shown(&out));
    assert!(!dir.path().join("target").exists());
}
