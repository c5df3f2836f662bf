//! Steps that attack the orchestrator through what they leave behind: outputs that
//! are FIFOs or links to `/dev/zero` or `/etc/passwd`, a log replaced by such a link,
//! a metrics file that never ends, an output too large to hash. Each run must end
//! within a bound, record what each file is, and still verify.

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::support::{host_shared, record_dirs, record_json, wait_for};

fn plan(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("plan.toml");
    std::fs::write(
        &p,
        format!("schema = \"orchestrate/plan/v1\"\nname = \"hostile\"\n{body}"),
    )
    .unwrap();
    p
}

fn start(dir: &Path, plan: &Path, extra: &[&str]) -> Child {
    crate::support::cli()
        .arg("run")
        .arg(plan)
        .arg("--records")
        .arg(dir.join("records"))
        .args(["--progress", "plain", "--grace", "1s"])
        .args(extra)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The exit of `child`, which must come within `limit` (else it is killed and the
/// test fails: the orchestrator hung).
fn exit_within(child: &mut Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the orchestrator did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

use crate::support::record_step as step;

#[test]
fn fifos_and_links_a_step_leaves_are_recorded_as_what_they_are() {
    let _host = host_shared();
    let t = tempfile::tempdir().unwrap();
    let p = plan(
        t.path(),
        r#"
[limits]
timeout = "20s"
[steps.fifo]
shell = "mkfifo ${out}/pipe"
outputs = ["${out}/pipe"]
[steps.links]
shell = "ln -s /dev/zero ${out}/zero && ln -s /etc/passwd ${out}/passwd"
outputs = ["${out}/zero", "${out}/passwd"]
[steps.log]
shell = 'echo hi >&2; d=$(dirname "$ORCHESTRATE_METRICS"); rm "$d/stderr.log"; ln -s /dev/zero "$d/stderr.log"'
[steps.metrics-link]
shell = 'ln -s /dev/zero "$ORCHESTRATE_METRICS"'
[steps.metrics-fifo]
shell = 'mkfifo "$ORCHESTRATE_METRICS"'
[steps.metrics-big]
shell = 'head -c 2000000 /dev/zero | tr "\\0" " " > "$ORCHESTRATE_METRICS"'
"#,
    );
    let mut child = start(t.path(), &p, &["--keep-going"]);
    let st = exit_within(&mut child, Duration::from_secs(60));
    assert_eq!(st.code(), Some(1), "the FIFO output fails its step");
    let dir = record_dirs(&t.path().join("records")).pop().unwrap();
    let rec = record_json(&dir);

    let fifo = step(&rec, "fifo");
    assert_eq!(fifo["status"], "failed");
    assert_eq!(fifo["outputs"][0]["kind"], "refused", "{fifo}");
    assert!(fifo["reason"].as_str().unwrap().contains("FIFO"), "{fifo}");

    let links = step(&rec, "links");
    assert_eq!(links["status"], "succeeded", "{links}");
    for (o, target) in links["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .zip(["/dev/zero", "/etc/passwd"])
    {
        assert_eq!(o["kind"], "symlink", "{o}");
        assert_eq!(o["target"], target);
        // The digest is of the link's text, never of the file it names.
        assert_eq!(o["bytes"], target.len());
    }

    let log = step(&rec, "log");
    let stderr = &log["attempts"][0]["stderr"];
    assert_eq!(stderr["sha256"], "", "{stderr}");
    assert!(
        stderr["note"].as_str().unwrap().contains("symbolic link"),
        "{stderr}"
    );

    for (id, what) in [
        ("metrics-link", "symbolic link"),
        ("metrics-fifo", "FIFO"),
        ("metrics-big", "over the limit"),
    ] {
        let a = &step(&rec, id)["attempts"][0];
        let e = a["metrics_error"].as_str().unwrap_or_default();
        assert!(e.contains(what), "{id}: {a}");
    }

    // verify reads none of them either, and agrees with the record.
    let out = crate::support::cli()
        .arg("verify")
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
}

const HUGE: &str = r#"
[steps.huge]
shell = "truncate -s 1T ${out}/huge && echo written"
outputs = ["${out}/huge"]
"#;

#[test]
fn the_run_timeout_ends_a_run_whose_output_takes_forever_to_hash() {
    let _host = host_shared();
    let t = tempfile::tempdir().unwrap();
    let p = plan(t.path(), &format!("[limits]\nrun_timeout = \"3s\"\n{HUGE}"));
    let started = Instant::now();
    let mut child = start(t.path(), &p, &[]);
    // Hashing 1 TiB would take minutes; the run ends soon after its timeout.
    let st = exit_within(&mut child, Duration::from_secs(30));
    assert_eq!(st.code(), Some(1));
    assert!(started.elapsed() < Duration::from_secs(30));
    let rec = record_json(&record_dirs(&t.path().join("records")).pop().unwrap());
    assert!(
        rec["reason"].as_str().unwrap().contains("timed out"),
        "{}",
        rec["reason"]
    );
    let a = &step(&rec, "huge")["attempts"][0];
    assert_eq!(a["outputs"][0]["kind"], "unhashed", "{a}");
}

#[test]
fn a_second_interrupt_ends_a_run_whose_output_takes_forever_to_hash() {
    let _host = host_shared();
    let t = tempfile::tempdir().unwrap();
    let p = plan(t.path(), HUGE);
    let mut child = start(t.path(), &p, &[]);
    let records = t.path().join("records");
    wait_for(
        "the step to write its output",
        Duration::from_secs(30),
        || {
            let dir = std::fs::read_dir(&records).ok()?.flatten().next()?.path();
            let log = std::fs::read_to_string(dir.join("steps/huge/1/stdout.log")).ok()?;
            log.contains("written").then_some(())
        },
    );
    std::thread::sleep(Duration::from_millis(700));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    for _ in 0..2 {
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    let st = exit_within(&mut child, Duration::from_secs(30));
    assert_eq!(st.code(), Some(130));
    let rec = record_json(&record_dirs(&records).pop().unwrap());
    assert_eq!(rec["status"], "interrupted");
    let a = &step(&rec, "huge")["attempts"][0];
    assert_eq!(a["outputs"][0]["kind"], "unhashed", "{a}");
}
