//! `orchestrate runs`: every run of records folders from an index kept beside them,
//! refreshed with only what changed; a record that does not verify is listed as
//! such; filters; a link in place of the index is never written through.

use std::path::Path;

use crate::support::{cli, run_plan_ok, shown};

const PLAN: &str = r#"
schema = "orchestrate/plan/v1"
name = "tracked"
[steps.bench]
repeats = 3
shell = "echo '{\"latency_ms\": 12.5}' > \"$ORCHESTRATE_METRICS\""
[steps.bench.report]
metric = "latency_ms"
"#;

fn runs_json(args: &[&str]) -> Vec<serde_json::Value> {
    let out = cli().arg("runs").args(args).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn runs_lists_every_run_once_flags_what_does_not_verify_and_refreshes_incrementally() {
    let t = tempfile::tempdir().unwrap();
    let plan = t.path().join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let a = run_plan_ok(t.path(), &plan, &[]);
    let b = run_plan_ok(t.path(), &plan, &[]);
    let records = a.parent().unwrap().to_path_buf();
    let r = records.display().to_string();

    let rows = runs_json(&["--records", &r]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in &rows {
        assert_eq!(row["verified"], true, "{row}");
        assert_eq!(row["plan"], "tracked");
        assert_eq!(row["status"], "succeeded");
        assert_eq!(row["headline"][0]["step"], "bench");
        assert_eq!(row["headline"][0]["metric"], "latency_ms");
        assert_eq!(row["headline"][0]["median"], 12.5);
        assert_eq!(row["headline"][0]["n"], 3);
        assert!(row["duration_ms"].as_f64().unwrap() > 0.0);
    }
    assert!(records.join(orchestrate::track::INDEX_FILE).is_file());

    // Only what changed is read again; a record edited without its digest is listed,
    // unverified, with why; a folder removed leaves the index.
    let (_, done) =
        orchestrate::track::runs(std::slice::from_ref(&records), &Default::default()).unwrap();
    assert_eq!((done[0].read, done[0].unchanged), (0, 2));
    let text = std::fs::read_to_string(b.join("record.json")).unwrap();
    std::fs::write(b.join("record.json"), text.replace("succeeded", "failed")).unwrap();
    let (rows, done) =
        orchestrate::track::runs(std::slice::from_ref(&records), &Default::default()).unwrap();
    assert_eq!((done[0].read, done[0].unchanged), (1, 1));
    let bad = rows.iter().find(|r| b.ends_with(&r.folder)).unwrap();
    assert!(!bad.verified);
    assert!(
        bad.problem.as_deref().unwrap_or("").contains("sha256"),
        "{bad:?}"
    );
    // Listed as unverified, it is not read (and hashed) again until it changes.
    let (_, done) =
        orchestrate::track::runs(std::slice::from_ref(&records), &Default::default()).unwrap();
    assert_eq!((done[0].read, done[0].unchanged), (0, 2));
    let out = cli().args(["runs", "--records", &r]).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.lines().any(|l| l.contains("UNVERIFIED")), "{table}");
    assert!(
        table.lines().any(|l| l.contains("bench latency_ms 12.5")),
        "{table}"
    );

    // Filters: a record that does not verify is never hidden by what it claims.
    assert_eq!(runs_json(&["--records", &r, "--plan", "other"]).len(), 0);
    assert_eq!(runs_json(&["--records", &r, "--status", "failed"]).len(), 1);
    assert_eq!(
        runs_json(&["--records", &r, "--status", "succeeded"]).len(),
        2
    );
    assert_eq!(
        runs_json(&["--records", &r, "--since", "2999-01-01"]).len(),
        1
    );
    assert_eq!(
        runs_json(&["--records", &r, "--since", "2000-01-01"]).len(),
        2
    );
    let bad_date = cli()
        .args(["runs", "--records", &r, "--since", "yesterday"])
        .output()
        .unwrap();
    assert_eq!(bad_date.status.code(), Some(2), "{}", shown(&bad_date));

    std::fs::remove_dir_all(&b).unwrap();
    let (rows, done) =
        orchestrate::track::runs(std::slice::from_ref(&records), &Default::default()).unwrap();
    assert_eq!((rows.len(), done[0].dropped), (1, 1));
}

#[test]
fn a_link_in_place_of_the_index_is_never_written_through() {
    let t = tempfile::tempdir().unwrap();
    let plan = t.path().join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let a = run_plan_ok(t.path(), &plan, &[]);
    let records = a.parent().unwrap().to_path_buf();
    let elsewhere = t.path().join("elsewhere.sqlite");
    std::os::unix::fs::symlink(&elsewhere, records.join(orchestrate::track::INDEX_FILE)).unwrap();
    let rows = runs_json(&["--records", &records.display().to_string()]);
    assert_eq!(rows.len(), 1);
    assert!(!Path::new(&elsewhere).exists(), "the link was followed");
}

#[test]
fn a_damaged_index_is_rebuilt_from_the_records() {
    let t = tempfile::tempdir().unwrap();
    let plan = t.path().join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let a = run_plan_ok(t.path(), &plan, &[]);
    let records = a.parent().unwrap().to_path_buf();
    let index = records.join(orchestrate::track::INDEX_FILE);
    std::fs::write(&index, vec![0x5a; 8192]).unwrap();
    let rows = runs_json(&["--records", &records.display().to_string()]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["verified"], true);
    assert_ne!(
        std::fs::read(&index).unwrap(),
        vec![0x5a; 8192],
        "rebuilt in place"
    );
}

#[test]
fn a_record_folder_moved_elsewhere_verifies_renders_and_is_listed() {
    let t = tempfile::tempdir().unwrap();
    let plan = t.path().join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let dir = run_plan_ok(t.path(), &plan, &[]);
    let elsewhere = tempfile::tempdir().unwrap();
    let moved = elsewhere.path().join(dir.file_name().unwrap());
    let out = std::process::Command::new("cp")
        .arg("-r")
        .arg(&dir)
        .arg(&moved)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    // Nothing of where it ran is left to read back.
    drop(t);
    let verify = cli().arg("verify").arg(&moved).output().unwrap();
    assert!(verify.status.success(), "{}", shown(&verify));
    let text = String::from_utf8_lossy(&verify.stdout);
    assert!(text.contains("integrity: holds"), "{text}");
    for template in ["pr", "html"] {
        let out = cli()
            .args(["report", "-t", template])
            .arg(&moved)
            .output()
            .unwrap();
        assert!(out.status.success(), "{template}: {}", shown(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("bench"),
            "{template}"
        );
    }
    let rows = runs_json(&["--records", &elsewhere.path().display().to_string()]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["verified"], true, "{:?}", rows[0]);
    assert_eq!(rows[0]["headline"][0]["median"], 12.5);
}
