//! A record and its verdict can be believed (the trust issue, items 5, 6, 22, 23):
//! reused outputs are verified and attested like any other, `verify` rebuilds the
//! record from its hashed journal and names every field that differs, an export
//! writes nothing through a link and never into the record itself, and a test id
//! with backticks stays inside its code span.

use std::path::{Path, PathBuf};

use crate::support::{cli, git, record_json, record_step, run_plan_in, shown};

const CACHED: &str = r#"schema = "orchestrate/plan/v1"
name = "trust-evidence"
[steps.make]
cache = true
shell = "mkdir -p ${work}/model && printf weights > ${work}/model/w.bin"
outputs = ["${work}/model"]
[steps.file]
cache = true
shell = "printf data > ${out}/d.txt"
outputs = ["${out}/d.txt"]
"#;

fn run(root: &Path, plan: &str, extra: &[&str]) -> (PathBuf, serde_json::Value) {
    std::fs::write(root.join("plan.toml"), plan).unwrap();
    let cache = root.join("cache").display().to_string();
    let mut args = vec!["--cache", cache.as_str()];
    args.extend_from_slice(extra);
    let (dir, out) = run_plan_in(root, &root.join("plan.toml"), &root.join("records"), &args);
    assert!(out.status.code().is_some(), "{}", shown(&out));
    let rec = record_json(&dir);
    (dir, rec)
}

fn verify(dir: &Path, artifacts: bool) -> std::process::Output {
    let mut c = cli();
    c.arg("verify").arg(dir);
    if artifacts {
        c.arg("--require-artifacts");
    }
    c.output().unwrap()
}

#[test]
fn reused_outputs_are_attested_and_verified_like_any_other() {
    let t = tempfile::tempdir().unwrap();
    run(t.path(), CACHED, &[]);
    let (dir, rec) = run(t.path(), CACHED, &[]);
    for s in ["make", "file"] {
        assert_eq!(record_step(&rec, s)["status"], "reused");
    }
    let v = verify(&dir, true);
    assert!(v.status.success(), "{}", shown(&v));
    let att = std::fs::read_to_string(dir.join("attestation.intoto.jsonl")).unwrap();
    let work = t.path().join("work").join(rec["run_id"].as_str().unwrap());
    let model = work.join("model").display().to_string();
    let d = work.join("file/1/d.txt").display().to_string();
    assert!(
        att.contains(&model) && att.contains(&d),
        "reused outputs are subjects: {att}"
    );
    // Change one and remove the other: both are caught.
    std::fs::write(work.join("model/w.bin"), "WEIGHTS").unwrap();
    std::fs::remove_file(work.join("file/1/d.txt")).unwrap();
    let v = verify(&dir, true);
    assert_eq!(v.status.code(), Some(1), "{}", shown(&v));
    let text = String::from_utf8_lossy(&v.stdout);
    assert!(
        text.contains(&format!("MISMATCH {model}")) || text.contains("model"),
        "{text}"
    );
    assert!(text.contains("ABSENT"), "{text}");
    assert!(text.contains("integrity: does not hold"), "{text}");
}

#[test]
fn verify_rebuilds_the_record_from_its_journal_and_names_every_difference() {
    let t = tempfile::tempdir().unwrap();
    let plan = "schema = \"orchestrate/plan/v1\"\nname = \"trust-rebuild\"\n[steps.ok]\nshell = \"true\"\n[steps.bad]\nshell = \"exit 1\"\n";
    let (dir, _) = run(t.path(), plan, &[]);
    let v = verify(&dir, false);
    assert!(
        v.status.success(),
        "an honest record verifies: {}",
        shown(&v)
    );
    // Edit the verdict, then recompute every digest (unsigned evidence allows it).
    let mut rec: orchestrate::evidence::record::Record =
        serde_json::from_slice(&std::fs::read(dir.join("record.json")).unwrap()).unwrap();
    assert_eq!(rec.status.as_str(), "failed");
    rec.status = orchestrate::evidence::record::RunStatus::Succeeded;
    rec.reason = None;
    for s in rec.steps.iter_mut().filter(|s| s.id == "bad") {
        s.status = orchestrate::evidence::record::StepStatus::Succeeded;
    }
    let digest = orchestrate::evidence::write_record(&dir, &rec).unwrap();
    orchestrate::evidence::write_attestation_for(&dir, &rec, &digest, None).unwrap();
    let v = verify(&dir, false);
    assert_eq!(v.status.code(), Some(1), "{}", shown(&v));
    let text = String::from_utf8_lossy(&v.stdout);
    assert!(
        text.contains(
            "not what its journal says: `status`: journal \"failed\", record \"succeeded\""
        ),
        "{text}"
    );
    assert!(
        text.contains("].status`: journal \"failed\", record \"succeeded\""),
        "the step's status too: {text}"
    );
    assert!(text.contains("`reason` is missing"), "{text}");
}

#[test]
fn export_writes_nothing_through_a_link_and_never_into_the_record() {
    let t = tempfile::tempdir().unwrap();
    let plan = "schema = \"orchestrate/plan/v1\"\nname = \"trust-export\"\n[steps.s]\nshell = \"echo hi\"\n";
    let (dir, _) = run(t.path(), plan, &[]);
    let victim = t.path().join("victim");
    std::fs::create_dir_all(victim.join("d")).unwrap();
    std::fs::write(victim.join("file"), "precious").unwrap();
    let out = t.path().join("crate");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(victim.join("file"), out.join("record.json")).unwrap();
    std::os::unix::fs::symlink(victim.join("file"), out.join("plan.toml")).unwrap();
    let o = cli()
        .arg("export")
        .arg(&dir)
        .args(["--ro-crate", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", shown(&o));
    assert_eq!(
        std::fs::read_to_string(victim.join("file")).unwrap(),
        "precious"
    );
    assert!(std::fs::symlink_metadata(out.join("record.json"))
        .unwrap()
        .is_file());
    // A link where a folder goes is refused, not written through.
    let out2 = t.path().join("crate2");
    std::fs::create_dir(&out2).unwrap();
    std::os::unix::fs::symlink(victim.join("d"), out2.join("steps")).unwrap();
    let o = cli()
        .arg("export")
        .arg(&dir)
        .args(["--ro-crate", "-o"])
        .arg(&out2)
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", shown(&o));
    assert_eq!(std::fs::read_dir(victim.join("d")).unwrap().count(), 0);
    // Into the record folder itself: refused before anything is copied.
    let o = cli()
        .arg("export")
        .arg(&dir)
        .args(["--ro-crate", "-o"])
        .arg(dir.join("sub"))
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", shown(&o));
    assert!(
        shown(&o).contains("inside the record folder"),
        "{}",
        shown(&o)
    );
    assert!(!dir.join("sub").exists());
}

#[test]
fn a_test_id_with_backticks_stays_in_its_code_span() {
    let t = tempfile::tempdir().unwrap();
    let repo = t.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    for n in ["one", "two"] {
        std::fs::write(repo.join("f.txt"), n).unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", n]);
    }
    let junit = r#"<testsuites><testsuite name="s"><testcase classname="t" name="we`ird` | id"><failure message="known"/></testcase></testsuite></testsuites>"#;
    std::fs::write(t.path().join("junit.xml"), junit).unwrap();
    let plan = r#"schema = "orchestrate/plan/v1"
name = "trust-code"
[revisions]
baseline = { repo = "repo", commit = "HEAD~1" }
implementation = { repo = "repo", commit = "HEAD" }
[steps.suite]
revisions = ["baseline", "implementation"]
results = { junit = "${out}/junit.xml" }
gate = "new"
shell = "cp ${plan_dir}/junit.xml ${out}/junit.xml; exit 1"
"#;
    let (dir, rec) = run(t.path(), plan, &[]);
    assert_eq!(rec["status"], "succeeded", "only pre-existing failures");
    let o = cli()
        .arg("report")
        .arg(&dir)
        .args(["--template", "pr"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", shown(&o));
    let body = String::from_utf8_lossy(&o.stdout);
    let span = orchestrate::report::format::code("t::we`ird` | id");
    assert_eq!(span, "``t::we`ird` | id``");
    assert!(body.contains(&span), "{span} in:\n{body}");
}
