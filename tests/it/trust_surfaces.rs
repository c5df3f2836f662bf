//! The surfaces wave 3 added, held to the trust promise (issue 39): the CI outputs
//! never hold a run, the record's path stays the last line, and a second interrupt
//! ends the process at every stage after the steps.

use std::io::{BufRead as _, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::{self, cli, host_exclusive, shown};

const PLAN: &str = r#"schema = "orchestrate/plan/v1"
name = "surfaces"

[limits]
timeout = "60s"
isolation = "auto"

[report]
templates = ["pr"]

[steps.repeat]
repeats = 2
shell = "echo ${repeat} > ${out}/v.txt"
outputs = ["${out}/v.txt"]

[steps.compare]
kind = "compare"
needs = ["repeat"]
checks = [{ name = "repeats bit-exact", metric = "bit_exact", across = "repeat", file = "v.txt" }]
"#;

fn plan_in(dir: &std::path::Path) -> std::path::PathBuf {
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    plan
}

/// `plan.toml` in `dir` run as a GitHub Actions job would, its step summary an
/// empty `summary.md` there.
fn run_on_github(dir: &std::path::Path, progress: &str) -> std::process::Output {
    let summary = dir.join("summary.md");
    std::fs::write(&summary, "").unwrap();
    cli()
        .args(["run", "plan.toml", "--progress", progress])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_WORKSPACE", dir)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn a_step_summary_that_is_a_fifo_is_refused_and_the_run_ends() {
    let dir = tempfile::tempdir().unwrap();
    plan_in(dir.path());
    let fifo = dir.path().join("summary.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let _host = support::host_shared();
    let mut child = cli()
        .args(["run", "plan.toml", "--progress", "quiet"])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &fifo)
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > support::patient(Duration::from_secs(120)) {
            let _ = child.kill();
            panic!("the run did not end with GITHUB_STEP_SUMMARY a FIFO");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    // The failed check fails the run; the summary is a warning that says why.
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot append to GITHUB_STEP_SUMMARY")
            && err.contains("it is a FIFO, not a regular file"),
        "{}",
        shown(&out)
    );
}

#[test]
fn the_record_path_is_the_last_line_when_checks_fail_on_github() {
    let dir = tempfile::tempdir().unwrap();
    plan_in(dir.path());
    let _host = support::host_shared();
    let out = run_on_github(dir.path(), "quiet");
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.iter().any(|l| l.starts_with("::error ")), "{stdout}");
    let last = std::path::Path::new(lines.last().unwrap());
    assert!(
        last.join("record.json").is_file(),
        "last line {last:?} of:\n{stdout}"
    );
    assert!(!std::fs::read_to_string(dir.path().join("summary.md"))
        .unwrap()
        .is_empty());
}

/// The stages after the steps where a run may hang: the release audit (an await,
/// and a blocked thread), the record, the reports, and the CI step summary.
const LATE_STALLS: &[&str] = &["audit", "audit:block", "record", "reports", "summary"];

#[test]
fn a_second_interrupt_ends_every_stage_after_the_steps() {
    let _host = host_exclusive();
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let plan = plan_in(root);
    let summary = root.join("summary.md");
    std::fs::write(&summary, "").unwrap();
    for stall in LATE_STALLS {
        let records = root.join(format!("records-{}", stall.replace(':', "-")));
        let mut child = cli()
            .arg("run")
            .arg(&plan)
            .arg("--records")
            .arg(&records)
            .args(["--progress", "quiet"])
            .env("ORCHESTRATE_TEST_STALL", stall)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_STEP_SUMMARY", &summary)
            .current_dir(root)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The run says when it reached the stall; everything before it ran.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut said = String::new();
        loop {
            let mut line = String::new();
            if err.read_line(&mut line).unwrap() == 0 {
                panic!("{stall}: the run ended without reaching its stall:\n{said}");
            }
            said.push_str(&line);
            if line.contains("stalled at") {
                break;
            }
        }
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        std::thread::sleep(Duration::from_millis(200));
        let status = crate::trust_plan::interrupt_twice(&mut child, stall);
        assert_eq!(status.code(), Some(130), "{stall}");
        let folder = std::fs::read_dir(&records)
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .path();
        let run_id = folder.file_name().unwrap().to_string_lossy().into_owned();
        let left = crate::trust_plan::leftovers(&run_id);
        assert!(left.is_empty(), "{stall}: left behind: {left:?}");
        // Whatever stage it stopped in, `recover` leaves a record that verifies.
        let r = cli()
            .args(["recover", "--records"])
            .arg(&records)
            .current_dir(root)
            .output()
            .unwrap();
        assert!(r.status.success(), "{stall}: {}", shown(&r));
        support::assert_verifies(&folder);
    }
}

/// The lines of `text` a GitHub runner would act on: `::` at a line's start (its
/// blanks trimmed) or `##[` anywhere, outside a `::stop-commands::` fence.
fn commands_acted_on(text: &str) -> Vec<String> {
    let mut fence: Option<String> = None;
    let mut acted = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(token) = &fence {
            if t == format!("::{token}::") {
                fence = None;
            }
            continue;
        }
        if let Some(token) = t.strip_prefix("::stop-commands::") {
            fence = Some(token.to_string());
        } else if t.starts_with("::") || line.contains("##[") {
            acted.push(line.to_string());
        }
    }
    acted
}

#[test]
fn newlines_in_supplied_text_inject_no_workflow_command() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    let inject = "two\\n::error title=INJECT::x\\n##[add-mask]hidden";
    std::fs::write(&plan, PLAN.replace("repeats bit-exact", inject)).unwrap();
    let _host = support::host_shared();
    let run = run_on_github(dir.path(), "plain");
    // A quoted key with a newline, checked: an error that quotes it.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "schema = \"orchestrate/plan/v1\"\nname = \"t\"\n[steps.s]\nshell = \"true\"\n\"two\\n::error title=INJECT::k\" = 1\n",
    )
    .unwrap();
    let check = cli()
        .args(["check", "bad.toml"])
        .env("GITHUB_ACTIONS", "true")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(2), "{}", shown(&check));
    for out in [&run, &check] {
        for text in [&out.stdout, &out.stderr] {
            let text = String::from_utf8_lossy(text);
            for line in commands_acted_on(&text) {
                // The tool's own annotations, their fields escaped, and nothing else.
                assert!(
                    line.starts_with("::error file="),
                    "{line:?} in:\n{}",
                    shown(out)
                );
                assert!(!line.contains("\n"), "{line:?}");
            }
        }
    }
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("::error file="),
        "{}",
        shown(&run)
    );
}

#[test]
fn a_folder_name_with_controls_forges_no_row_in_runs() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(&plan, PLAN.replace("${repeat}", "same")).unwrap();
    let records = dir.path().join("records");
    let (record, out) = support::run_plan_in(dir.path(), &plan, &records, &[]);
    assert!(out.status.success(), "{}", shown(&out));
    let forged = records.join("a\u{1b}[31mred\nfake-line  succeeded");
    std::fs::rename(&record, &forged).unwrap();
    let out = cli()
        .args(["runs", "--records"])
        .arg(&records)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(!text.lines().any(|l| l.starts_with("fake-line")), "{text}");
    assert!(text.contains("a\\u{1b}[31mred\\nfake-line"), "{text}");
}

#[test]
fn a_results_file_outside_the_read_folders_is_said_not_counted_as_zero() {
    let dir = tempfile::tempdir().unwrap();
    // Relative to the plan's folder: known at check time.
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        "schema = \"orchestrate/plan/v1\"\nname = \"r\"\n[steps.t]\nshell = \"true\"\nresults = { junit = \"junit.xml\" }\n",
    )
    .unwrap();
    let out = cli().arg("check").arg(&plan).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("plan.toml:5:21"), "{err}");
    assert!(err.contains("where results files are not read"), "{err}");
    assert!(err.contains("${out}/junit.xml"), "{err}");

    // Elsewhere: known when the run reads it, and said in the terminal, the
    // summary and the PR body.
    let elsewhere = dir.path().join("elsewhere.xml");
    std::fs::write(
        &elsewhere,
        "<testsuite tests=\"1\"><testcase name=\"a\"/></testsuite>",
    )
    .unwrap();
    std::fs::write(
        &plan,
        format!(
            "schema = \"orchestrate/plan/v1\"\nname = \"r\"\n[report]\ntemplates = [\"pr\"]\n[steps.t]\nshell = \"true\"\nresults = {{ junit = \"{}\" }}\n",
            elsewhere.display()
        ),
    )
    .unwrap();
    let (record, out) = support::run_plan_in(dir.path(), &plan, &dir.path().join("records"), &[]);
    let said = "JUnit results file";
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(said),
        "{}",
        shown(&out)
    );
    let body = std::fs::read_to_string(record.join("report.md")).unwrap();
    assert!(body.contains(said) && body.contains("not read"), "{body}");
}

#[test]
fn plans_are_read_up_to_a_cap_and_step_instances_are_capped() {
    let out = cli().args(["check", "/dev/zero"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("more than 8388608 bytes"),
        "{}",
        shown(&out)
    );
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    let values: Vec<String> = (0..60_000).map(|i| i.to_string()).collect();
    std::fs::write(
        &plan,
        format!(
            "schema = \"orchestrate/plan/v1\"\nname = \"wide\"\n[matrix]\nx = [{}]\n[steps.a]\nshell = \"echo ${{matrix.x}}\"\n[steps.b]\nshell = \"echo ${{matrix.x}}\"\n",
            values.join(",")
        ),
    )
    .unwrap();
    let out = cli().arg("check").arg(&plan).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("expands to 120000 step instances over its matrix, more than 100000"),
        "{}",
        shown(&out)
    );
}

#[test]
fn the_pr_body_of_a_wide_failing_sweep_fits_githubs_limit() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(300);
    let cells: Vec<String> = (0..150).map(|i| i.to_string()).collect();
    std::fs::write(
        dir.path().join("plan.toml"),
        format!(
            r#"schema = "orchestrate/plan/v1"
name = "wide"
[report]
templates = ["pr"]
[matrix]
cell = [{}]
[steps.repeat]
repeats = 2
shell = "echo ${{repeat}} ${{matrix.cell}} > ${{out}}/v.txt"
outputs = ["${{out}}/v.txt"]
[steps.compare]
kind = "compare"
needs = ["repeat"]
checks = [
  {{ name = "first {long}", metric = "bit_exact", across = "repeat", file = "v.txt" }},
  {{ name = "second {long}", metric = "bit_exact", across = "repeat", file = "v.txt" }},
]
"#,
            cells.join(", ")
        ),
    )
    .unwrap();
    let (record, out) = support::run_plan_in(
        dir.path(),
        &dir.path().join("plan.toml"),
        &dir.path().join("records"),
        &["--jobs", "2"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    let body = std::fs::read_to_string(record.join("report.md")).unwrap();
    assert!(
        body.chars().count() <= 65_536,
        "{} characters",
        body.chars().count()
    );
    assert!(
        body.contains("This body was cut to fit GitHub's limit of 65536 characters"),
        "no note at the end of the body"
    );
    assert_eq!(
        body.matches("<details").count(),
        body.matches("</details>").count()
    );
    // What `report` renders again is cut the same way.
    let again = cli()
        .args(["report", "-t", "pr"])
        .arg(&record)
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", shown(&again));
    let again = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.chars().count() <= 65_536,
        "{} characters",
        again.chars().count()
    );
    assert!(again.contains("This body was cut to fit GitHub's limit"));
}
