//! Rendering a committed real record (`plans/smoke.toml`): goldens, byte-identical
//! re-rendering, digest refusal, and the PR body's simulated / release sentences.

use std::path::{Path, PathBuf};

use orchestrate::evidence::record::{Record, ReleaseAudit};
use orchestrate::report::{self, RenderOptions, ReportError, TemplateChoice};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/smoke")
}

fn render(t: TemplateChoice) -> String {
    report::render(&fixture(), t, &RenderOptions::default()).unwrap()
}

#[test]
fn pr_body_matches_golden() {
    let pr = render(TemplateChoice::Pr);
    assert!(pr.contains("## Background"));
    assert!(pr.contains("## Changes"));
    assert!(pr.contains("## Verification"));
    assert!(pr.contains("## Compatibility and limits"));
    assert!(pr.contains("All owned experiment allocations released."));
    // The footer's command works as printed from where the reader stands.
    assert!(
        pr.contains("Verify with `orchestrate verify tests/fixtures/report/smoke`"),
        "{pr}"
    );
    crate::support::golden("smoke.pr.md", &pr);
}

#[test]
fn html_matches_golden() {
    let html = render(TemplateChoice::Html);
    for id in ["timeline", "repeats", "memory", "comparisons"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "no #{id}");
    }
    crate::support::golden("smoke.report.html", &html);
}

#[test]
fn json_summary_matches_golden() {
    let json = render(TemplateChoice::Json);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["status"], "succeeded");
    assert_eq!(v["release"]["passed"], true);
    crate::support::golden("smoke.summary.json", &json);
}

#[test]
fn rendering_twice_is_byte_identical() {
    for t in [
        TemplateChoice::Pr,
        TemplateChoice::Html,
        TemplateChoice::Json,
        TemplateChoice::Summary,
    ] {
        assert_eq!(render(t.clone()), render(t.clone()), "{t:?}");
    }
}

#[test]
fn tampered_record_is_refused_unless_no_verify() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(fixture().join("record.json")).unwrap();
    std::fs::copy(
        fixture().join("record.sha256"),
        dir.path().join("record.sha256"),
    )
    .unwrap();
    // Flip a byte inside a string value so the record still parses.
    let at = bytes
        .windows(5)
        .position(|w| w == b"smoke")
        .expect("fixture names its plan");
    bytes[at] = b'S';
    std::fs::write(dir.path().join("record.json"), &bytes).unwrap();
    let err = report::render(dir.path(), TemplateChoice::Pr, &RenderOptions::default());
    match err {
        Err(ReportError::DigestMismatch { expected, found }) => assert_ne!(expected, found),
        other => panic!("expected DigestMismatch, got {other:?}"),
    }
    let opts = RenderOptions {
        no_verify: true,
        plan_dir: None,
    };
    let pr = report::render(dir.path(), TemplateChoice::Pr, &opts).unwrap();
    assert!(pr.contains("## Verification"));
}

fn fixture_record() -> Record {
    serde_json::from_slice(&std::fs::read(fixture().join("record.json")).unwrap()).unwrap()
}

#[test]
fn simulated_devices_are_marked_and_release_needs_a_passed_audit() {
    let mut rec = fixture_record();
    rec.allocations
        .push(orchestrate::evidence::record::Allocation {
            lease: "rngd-sim-0:0,1,2,3".into(),
            request: "rngd".into(),
            step: "right".into(),
            device: "rngd-sim-0".into(),
            kind: "rngd".into(),
            uuid: None,
            cores: vec![0, 1, 2, 3],
            whole_device: false,
            simulated: true,
            granted_at: rec.started_at.clone(),
            released_at: rec.ended_at.clone(),
            release_error: None,
        });
    rec.release_audit = Some(ReleaseAudit {
        passed: false,
        checked: vec!["cgroups".into()],
        leftovers: vec!["cgroup orchestrate-x-right-2".into()],
    });
    let pr = report::render_record(&rec, "00", None, TemplateChoice::Pr, None).unwrap();
    assert!(
        pr.contains("`rngd-sim-0` (rngd, cores 0-3) for `right` (simulated)"),
        "{pr}"
    );
    assert!(
        !pr.contains("All owned experiment allocations released."),
        "{pr}"
    );
    assert!(pr.contains("cgroup orchestrate-x-right-2"));
    rec.release_audit = None;
    let pr = report::render_record(&rec, "00", None, TemplateChoice::Pr, None).unwrap();
    assert!(!pr.contains("All owned experiment allocations released."));
}

#[test]
fn a_template_beside_the_plan_overrides_the_built_in() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    std::fs::write(
        dir.path().join("templates/pr.md.tera"),
        "run {{ f.run_id }} took {{ 1536 | bytes }}",
    )
    .unwrap();
    let opts = RenderOptions {
        no_verify: false,
        plan_dir: Some(dir.path().to_path_buf()),
    };
    let out = report::render(&fixture(), TemplateChoice::Pr, &opts).unwrap();
    assert_eq!(out, format!("run {} took 1.5 KiB", fixture_record().run_id));
}

/// A record folder given with a trailing slash is named without one: no
/// `…/smoke//record.json` in the footer.
#[test]
fn a_trailing_slash_leaves_no_double_slash_in_the_footer() {
    let out = crate::support::cli()
        .args(["report", "--template", "pr"])
        .arg(format!(
            "{}/",
            crate::support::project("tests/fixtures/report/smoke").display()
        ))
        .current_dir(crate::support::project(""))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::support::shown(&out));
    let pr = String::from_utf8_lossy(&out.stdout);
    assert!(
        pr.contains("Record `tests/fixtures/report/smoke/record.json`"),
        "{pr}"
    );
    assert!(!pr.contains("//record.json"), "{pr}");
}
