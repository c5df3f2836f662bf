//! On GitHub Actions: plan errors and failed checks as `::error` annotations on the
//! plan's lines, and the run's short summary appended to `$GITHUB_STEP_SUMMARY`;
//! never through a link planted in the summary's place.

use crate::support;

const PLAN: &str = r#"schema = "orchestrate/plan/v1"
name = "gha"

[limits]
timeout = "30s"
isolation = "auto"

[steps.repeat]
repeats = 2
shell = "echo ${repeat} > ${out}/v.txt"
outputs = ["${out}/v.txt"]

[steps.compare]
kind = "compare"
needs = ["repeat"]

[[steps.compare.checks]]
name = "repeats bit-exact, 100%: sure"
metric = "bit_exact"
across = "repeat"
file = "v.txt"
"#;

#[test]
fn failed_checks_are_annotated_on_their_line_and_the_summary_is_appended() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let summary = dir.path().join("summary.md");
    std::fs::write(&summary, "# earlier step\n").unwrap();
    let _host = support::host_shared();
    let out = support::cli()
        .args(["run", "plan.toml", "--progress", "quiet"])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_WORKSPACE", dir.path())
        .env("GITHUB_STEP_SUMMARY", &summary)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", support::shown(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The check's table starts on line 21; the message cannot break the command.
    let line = PLAN
        .lines()
        .position(|l| l.starts_with("name = \"repeats"))
        .unwrap();
    let want = format!(
        "::error file=plan.toml,line={line},title=check failed%3A repeats bit-exact%2C 100%25%3A sure::bit_exact 1 against - (step compare)"
    );
    assert!(
        stdout.lines().any(|l| l == want),
        "no {want:?} in:\n{stdout}"
    );
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(
        text.starts_with("# earlier step\n### orchestrate: plan `gha`\n"),
        "{text}"
    );
    assert!(text.contains("**failed**"), "{text}");
    assert!(text.contains("**Checks**: 0 of 1 checks passed"), "{text}");
    assert!(
        text.contains("  - **FAIL** repeats bit-exact, 100%: sure: `bit_exact` 1 against -"),
        "{text}"
    );
    assert!(text.contains("<details><summary>Steps, metrics and checks</summary>"));
    assert!(!text.contains("## Compatibility"), "{text}");

    // Without GITHUB_ACTIONS nothing is annotated or appended.
    let before = std::fs::read_to_string(&summary).unwrap();
    let out = support::cli()
        .args(["run", "plan.toml", "--progress", "quiet"])
        .env_remove("GITHUB_ACTIONS")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("::error"));
    assert_eq!(std::fs::read_to_string(&summary).unwrap(), before);
}

#[test]
fn a_link_in_the_summarys_place_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(&plan, PLAN.replace("${repeat}", "same")).unwrap();
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "untouched").unwrap();
    let link = dir.path().join("summary.md");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let _host = support::host_shared();
    let out = support::cli()
        .args(["run", "plan.toml", "--progress", "quiet"])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &link)
        .current_dir(dir.path())
        .output()
        .unwrap();
    // The run stands; the summary is a warning.
    assert!(out.status.success(), "{}", support::shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("warning: cannot append to GITHUB_STEP_SUMMARY"),
        "{}",
        support::shown(&out)
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
}

#[test]
fn plan_errors_are_annotated_on_their_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("bad.toml");
    std::fs::write(
        &plan,
        "schema = \"orchestrate/plan/v1\"\nname = \"bad\"\n[steps.a]\nshell = \"true\"\nneeds = [\"nope\"]\nrepeats = \"x\"\n",
    )
    .unwrap();
    let out = support::cli()
        .args(["check", "bad.toml"])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_WORKSPACE", dir.path())
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", support::shown(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let errors: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("::error "))
        .collect();
    assert_eq!(errors.len(), 2, "every error at once:\n{stdout}");
    assert!(
        errors
            .iter()
            .any(|l| l.starts_with("::error file=bad.toml,line=5,col=10,title=plan error::")),
        "{stdout}"
    );
    assert!(
        errors
            .iter()
            .any(|l| l.starts_with("::error file=bad.toml,line=6,col=11,title=plan error::")),
        "{stdout}"
    );
    // The human report is still on stderr.
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.toml:5:10"));
}
