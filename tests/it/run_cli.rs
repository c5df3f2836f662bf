//! `orchestrate run` as a user runs it: a real binary, real plans, real processes,
//! signals sent to the real orchestrator.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Env {
    dir: tempfile::TempDir,
    _host: HostGuard,
}

enum HostGuard {
    Shared(#[allow(dead_code)] std::sync::RwLockReadGuard<'static, ()>),
    Exclusive(#[allow(dead_code)] std::sync::RwLockWriteGuard<'static, ()>),
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
            _host: HostGuard::Shared(crate::support::host_shared()),
        }
    }
    /// For a test that leaves a dead run and inspects it.
    fn exclusive() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
            _host: HostGuard::Exclusive(crate::support::host_exclusive()),
        }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn plan(&self, name: &str, body: &str) -> PathBuf {
        let p = self.path().join(name);
        std::fs::write(
            &p,
            format!("schema = \"orchestrate/plan/v1\"\nname = \"{name}\"\n{body}"),
        )
        .unwrap();
        p
    }
    fn cmd(&self, plan: &Path) -> Command {
        let mut c = crate::support::cli();
        c.arg("run")
            .arg(plan)
            .arg("--records")
            .arg(self.path().join("records"))
            .arg("--progress")
            .arg("plain")
            .arg("--grace")
            .arg("1s")
            .current_dir(self.path());
        c
    }
    fn record_dirs(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.path().join("records"))
            .map(|r| {
                r.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

use crate::support::record;
use orchestrate::evidence::record::{RunStatus, StepStatus, Termination};

fn journal(dir: &Path) -> Vec<serde_json::Value> {
    // The record folder appears a moment before its journal.
    std::fs::read_to_string(dir.join("journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn canaries_of(run_id: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) {
            let needle = format!("ORCHESTRATE_ATTEMPT={run_id}/");
            if env
                .split(|b| *b == 0)
                .any(|kv| kv.starts_with(needle.as_bytes()))
            {
                found.push(pid);
            }
        }
    }
    found
}

fn cgroups_of(run_id: &str) -> Vec<String> {
    let mut found = Vec::new();
    let needle = format!("orchestrate-{run_id}");
    let mut stack = vec![PathBuf::from("/sys/fs/cgroup")];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(&needle) {
                    found.push(e.path().display().to_string());
                }
                if d.components().count() < 12 {
                    stack.push(e.path());
                }
            }
        }
    }
    found
}

#[test]
fn smoke_plan_runs_and_last_line_is_the_record() {
    let env = Env::new();
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/smoke.toml");
    let out = env.cmd(&plan).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap();
    let dir = PathBuf::from(last);
    assert!(
        dir.join("record.json").is_file(),
        "last line {last} is not a record"
    );
    assert!(dir.join("journal.jsonl").is_file());
    let rec = record(&dir);
    assert_eq!(rec.status, RunStatus::Succeeded);
    assert!(
        stdout.contains("median"),
        "summary table missing:\n{stdout}"
    );
}

#[test]
fn secrets_are_redacted_and_metrics_land_in_the_record() {
    let env = Env::new();
    let plan = env.plan(
        "secret.toml",
        r#"
secret_env = ["PLAIN_LOOKING"]
[steps.s]
shell = 'echo "$API_TOKEN" > /dev/null; printf "{\"prefill_ms\": 769.2}" > "$ORCHESTRATE_METRICS"'
env = { API_TOKEN = "hunter2", PLAIN_LOOKING = "also-secret", VISIBLE = "yes" }
"#,
    );
    let out = env.cmd(&plan).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = env.record_dirs().pop().unwrap();
    let text = std::fs::read_to_string(dir.join("record.json")).unwrap();
    assert!(!text.contains("hunter2") && !text.contains("also-secret"));
    let journal_text = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    assert!(!journal_text.contains("hunter2"));
    let rec = record(&dir);
    let a = &rec.steps[0].attempts[0];
    assert_eq!(a.env["API_TOKEN"], "<redacted>");
    assert_eq!(a.env["PLAIN_LOOKING"], "<redacted>");
    assert_eq!(a.env["VISIBLE"], "yes");
    assert_eq!(a.metrics.as_ref().unwrap()["prefill_ms"], 769.2);
}

#[test]
fn failed_step_keeps_its_evidence_and_exits_1() {
    let env = Env::new();
    let plan = env.plan(
        "fail.toml",
        r#"
[steps.a]
shell = "echo doomed >&2; exit 7"
[steps.b]
needs = ["a"]
shell = "true"
"#,
    );
    let out = env.cmd(&plan).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let dir = env.record_dirs().pop().unwrap();
    let rec = record(&dir);
    assert_eq!(rec.status, RunStatus::Failed);
    assert_eq!(rec.steps[0].attempts[0].exit_code, Some(7));
    assert_eq!(rec.steps[1].status, StepStatus::Skipped);
    let stderr = std::fs::read_to_string(dir.join("steps/a/1/stderr.log")).unwrap();
    assert_eq!(stderr, "doomed\n");
    assert!(!rec.failures.is_empty());
}

#[test]
fn run_timeout_ends_the_run() {
    let env = Env::new();
    let plan = env.plan("slow.toml", "[steps.a]\nshell = \"sleep 60\"\n");
    let started = Instant::now();
    let out = env
        .cmd(&plan)
        .args(["--timeout", "500ms"])
        .output()
        .unwrap();
    assert!(started.elapsed() < crate::support::patient(Duration::from_secs(20)));
    assert_eq!(out.status.code(), Some(1));
    let rec = record(&env.record_dirs().pop().unwrap());
    assert_eq!(rec.status, RunStatus::Failed);
    let reason = rec.reason.unwrap_or_default();
    assert!(reason.contains("timed out"), "{reason}");
}

/// Wait until the newest run has started an attempt (of `step`, when given).
fn wait_for_attempt(env: &Env, step: Option<&str>, timeout: Duration) -> PathBuf {
    let timeout = crate::support::patient(timeout);
    let started = Instant::now();
    loop {
        if let Some(dir) = env.record_dirs().pop() {
            if journal(&dir)
                .iter()
                .any(|e| e["event"] == "attempt_started" && step.is_none_or(|s| e["step"] == s))
            {
                return dir;
            }
        }
        assert!(started.elapsed() < timeout, "no attempt started in time");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigint_mid_run_interrupts_cleanly() {
    let env = Env::new();
    // A step with a setsid daemon that ignores TERM: only a cgroup kill ends it. Its
    // retries must not outlive the cancel.
    let plan = env.plan(
        "int.toml",
        r#"
[steps.a]
retries = 3
shell = "setsid sh -c 'trap \"\" TERM HUP; sleep 120' & sleep 120"
[steps.b]
needs = ["a"]
shell = "true"
"#,
    );
    let mut child = env.cmd(&plan).stdout(Stdio::piped()).spawn().unwrap();
    let dir = wait_for_attempt(&env, None, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    let run_id = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        !canaries_of(&run_id).is_empty(),
        "the attempt should be running"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let rec = record(&dir);
    assert_eq!(rec.status, RunStatus::Interrupted);
    assert_eq!(rec.steps[0].status, StepStatus::Cancelled);
    assert_eq!(rec.steps[0].attempts.len(), 1, "a cancel is not retried");
    assert_eq!(rec.steps[1].status, StepStatus::Skipped);
    let isolated = rec.steps[0].attempts[0]
        .enforcement
        .as_ref()
        .is_some_and(|e| e.mode == orchestrate::contract::Enforcer::Cgroup);
    if crate::support::Need::Cgroups.required() {
        assert!(
            isolated,
            "cgroups are required here but the attempt ran unisolated"
        );
    }
    if isolated {
        assert!(
            canaries_of(&run_id).is_empty(),
            "a process of the run survived"
        );
        assert!(
            cgroups_of(&run_id).is_empty(),
            "a cgroup of the run survived"
        );
        assert!(rec.release_audit.as_ref().unwrap().passed);
    }
}

#[test]
fn sigkill_leaves_a_journal_and_recover_cleans_up() {
    let env = Env::exclusive();
    let plan = env.plan(
        "kill.toml",
        r#"
[steps.first]
shell = "true"
[steps.second]
needs = ["first"]
shell = "echo started; sleep 120"
"#,
    );
    let mut child = env.cmd(&plan).stdout(Stdio::null()).spawn().unwrap();
    let dir = wait_for_attempt(&env, Some("second"), Duration::from_secs(20));
    crate::support::wait_for("the step's output", Duration::from_secs(20), || {
        std::fs::read_to_string(dir.join("steps/second/1/stdout.log"))
            .ok()
            .filter(|s| s.contains("started"))
    });
    let run_id = dir.file_name().unwrap().to_string_lossy().into_owned();
    if crate::support::Need::Cgroups.required() {
        // Otherwise "no cgroup left" below would hold trivially.
        assert!(!cgroups_of(&run_id).is_empty(), "the run was not isolated");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The journal holds everything that finished.
    let events = journal(&dir);
    assert!(events
        .iter()
        .any(|e| e["event"] == "step_ended" && e["step"] == "first" && e["status"] == "succeeded"));
    assert!(!dir.join("record.json").exists());

    let out = crate::support::cli()
        .arg("recover")
        .arg("--records")
        .arg(env.path().join("records"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec = record(&dir);
    assert_eq!(rec.status, RunStatus::Interrupted);
    assert_eq!(rec.steps[0].status, StepStatus::Succeeded);
    // What was running when the orchestrator died stays on the record, logs hashed.
    let second = &rec.steps[1];
    assert_eq!(second.status, StepStatus::Cancelled, "{second:?}");
    let a = &second.attempts[0];
    assert_eq!(a.termination, Termination::OrchestratorLost, "{a:?}");
    assert_eq!(
        a.stdout.sha256,
        orchestrate::digest::sha256_bytes(b"started\n").hex(),
        "{a:?}"
    );
    assert!(rec
        .failures
        .iter()
        .any(|f| f.step == "second" && f.attempt == Some(1)));
    let verify = crate::support::cli()
        .arg("verify")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        crate::support::shown(&verify)
    );
    assert!(
        canaries_of(&run_id).is_empty(),
        "recover left a process of the dead run"
    );
    assert!(
        cgroups_of(&run_id).is_empty(),
        "recover left a cgroup of the dead run"
    );
}

#[test]
fn a_record_killed_before_its_attestation_is_unfinished_and_recover_finishes_it() {
    let env = Env::exclusive();
    let plan = env.plan("att.toml", "[steps.a]\nshell = \"echo hi\"\n");
    let out = env.cmd(&plan).output().unwrap();
    assert!(out.status.success(), "{}", crate::support::shown(&out));
    let dir = std::fs::read_dir(env.path().join("records"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("journal.jsonl").is_file())
        .unwrap();
    // As if the orchestrator died after record.json and before the attestation:
    // no attestation, and its run lock left behind with nobody holding it.
    std::fs::remove_file(dir.join("attestation.intoto.jsonl")).unwrap();
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let locks = orchestrate::sched::state_dir().join("runs");
    std::fs::create_dir_all(&locks).unwrap();
    std::fs::write(locks.join(format!("{name}.lock")), b"").unwrap();
    let audit = crate::support::cli()
        .args(["audit", "--json", "--records"])
        .arg(env.path().join("records"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&audit.stdout).contains(&name),
        "audit names it unfinished: {}",
        crate::support::shown(&audit)
    );
    let out = crate::support::cli()
        .arg("recover")
        .arg("--records")
        .arg(env.path().join("records"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::support::shown(&out));
    assert_eq!(record(&dir).status, RunStatus::Succeeded);
    crate::support::assert_verifies(&dir);
}

#[test]
fn drift_refuses_with_exit_3_unless_allowed_and_then_shows_first() {
    let env = Env::new();
    std::fs::write(env.path().join("uv.lock"), "locked\n").unwrap();
    let wrong = "sha256:".to_string() + &"0".repeat(64);
    let plan = env.plan(
        "drift.toml",
        &format!("[pins.files]\n\"uv.lock\" = \"{wrong}\"\n[steps.a]\nshell = \"true\"\n"),
    );
    let out = env.cmd(&plan).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("uv.lock") && stderr.contains(&wrong[..20]),
        "{stderr}"
    );
    assert!(env.record_dirs().is_empty(), "nothing may run on drift");

    let out = env.cmd(&plan).arg("--allow-drift").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("DRIFT"),
        "drift must come first:\n{stdout}"
    );
    let rec = record(&env.record_dirs().pop().unwrap());
    assert_eq!(rec.run.pins.drift[0].name, "uv.lock");
}

/// Running out of disk mid-run: a clear error, an intact journal, no half record.
#[test]
fn disk_full_keeps_the_journal_and_writes_no_half_record() {
    if !nix::unistd::geteuid().is_root() {
        assert!(
            !crate::support::Need::Cgroups.required(),
            "root is required here to mount a small tmpfs"
        );
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let env = Env::new();
    let records = env.path().join("records");
    std::fs::create_dir_all(&records).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&records)
        .status()
        .unwrap();
    assert!(st.success(), "mount tmpfs");
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(records.clone());
    // The step's log fills the disk; the run must still end cleanly.
    let plan = env.plan(
        "full.toml",
        "[steps.a]\nshell = \"head -c 200000 /dev/zero | tr '\\\\0' x; echo\"\n[steps.b]\nneeds = [\"a\"]\nshell = \"true\"\n",
    );
    let out = env
        .cmd(&plan)
        .arg("--work")
        .arg(env.path().join("work"))
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.to_lowercase().contains("no space left"),
        "the error must say the disk is full:\n{stderr}"
    );
    let dir = env.record_dirs().pop().unwrap();
    // The journal parses line by line (a torn last line at most).
    let text = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(!lines.is_empty());
    for l in &lines[..lines.len() - 1] {
        serde_json::from_str::<serde_json::Value>(l).expect("an intact journal line");
    }
    // Either no record at all, or a complete one that matches its digest.
    if dir.join("record.json").exists() {
        let out = crate::support::cli()
            .arg("verify")
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "a record on a full disk must be whole"
        );
    }
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}
