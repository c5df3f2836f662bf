//! What an attempt's main process starts with, and how a failed start is reported.
//! Attempts are started with clone(CLONE_VM | CLONE_VFORK) rather than fork, so these
//! pin down what fork + exec gave: stdio, working directory, environment, its own
//! session, default signal dispositions and an empty signal mask, a PATH search in
//! the attempt's environment, and errors that name the cause, with no zombie left.
//! Mode none: no root needed.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use orchestrate::isolate::{
    zombie_children, AttemptOutcome, AttemptSpec, CancelReason, IsolateError, Isolator, Mode,
};
use tokio::sync::watch;

static COUNTER: AtomicU32 = AtomicU32::new(0);
/// Tests run one at a time: each checks for zombie children of the whole process.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn spec(dir: &Path, argv: &[&str]) -> AttemptSpec {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = format!("orchestrate-spawn{}-{n}", std::process::id());
    AttemptSpec {
        canary: format!("{name}-canary"),
        name,
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: dir.to_path_buf(),
        env: vec![
            ("PATH".into(), "/nonexistent:/usr/bin:/bin".into()),
            ("SPAWN_TEST".into(), "a value with spaces".into()),
        ],
        memory: None,
        swap: false,
        pids: None,
        cpus: None,
        device_nodes: None,
        gpus: Vec::new(),
        npus: Vec::new(),
        timeout: Some(Duration::from_secs(20)),
        grace: Duration::from_millis(200),
        stdout: dir.join(format!("out{n}")),
        stderr: dir.join(format!("err{n}")),
        tee: false,
        mask: None,
    }
}

fn run(spec: &AttemptSpec) -> Result<AttemptOutcome, IsolateError> {
    let iso = Isolator::new(Mode::None).unwrap();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            // A SIGINT handler in the orchestrator must not reach the child.
            let _ctrl_c = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
            iso.run(spec.clone(), watch::channel(None).1).await
        })
}

fn status_field(status: &str, key: &str) -> u64 {
    let line = status
        .lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_else(|| panic!("no {key} in {status}"));
    u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
}

#[test]
fn child_starts_with_a_clean_process_state() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("sub")).unwrap();
    let s = spec(
        &tmp.path().join("sub"),
        &[
            "sh",
            "-c",
            // Session id and pid, cwd, env, then the kernel's view of signals.
            "read -r line < /proc/self/stat; set -- $line; echo \"sid=$6 pid=$1\"; \
             pwd; echo \"env=$SPAWN_TEST canary=$ORCHESTRATE_ATTEMPT\"; \
             cat /proc/self/status; echo to-stderr >&2; read -r x || echo stdin-eof",
        ],
    );
    let out = run(&s).unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let text = std::fs::read_to_string(&s.stdout).unwrap();
    let first = text.lines().next().unwrap();
    let (sid, pid) = first
        .strip_prefix("sid=")
        .and_then(|r| r.split_once(" pid="))
        .unwrap();
    assert_eq!(sid, pid, "the attempt leads its own session: {first}");
    assert_eq!(
        text.lines().nth(1).unwrap(),
        tmp.path()
            .join("sub")
            .canonicalize()
            .unwrap()
            .to_str()
            .unwrap()
    );
    assert_eq!(
        text.lines().nth(2).unwrap(),
        format!("env=a value with spaces canary={}", s.canary)
    );
    // cat's own status: what it inherited through exec.
    assert_eq!(status_field(&text, "SigBlk:"), 0, "signal mask is empty");
    let ignored = status_field(&text, "SigIgn:");
    assert_eq!(
        ignored & (1 << (libc::SIGPIPE - 1)),
        0,
        "SIGPIPE is back to default: {ignored:x}"
    );
    assert!(text.trim_end().ends_with("stdin-eof"), "stdin is /dev/null");
    assert_eq!(std::fs::read_to_string(&s.stderr).unwrap(), "to-stderr\n");
    assert!(zombie_children().is_empty());
}

#[test]
fn failed_starts_name_the_cause_and_leave_no_zombie() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    let cases: Vec<(Vec<String>, std::path::PathBuf, std::io::ErrorKind, &str)> = vec![
        (
            vec!["no-such-program-xyz".into()],
            tmp.path().to_path_buf(),
            std::io::ErrorKind::NotFound,
            "",
        ),
        (
            vec![script.display().to_string()],
            tmp.path().to_path_buf(),
            std::io::ErrorKind::PermissionDenied,
            "",
        ),
        (
            vec!["true".into()],
            tmp.path().join("missing-dir"),
            std::io::ErrorKind::NotFound,
            "working directory",
        ),
        (
            vec!["echo".into(), "nul\0byte".into()],
            tmp.path().to_path_buf(),
            std::io::ErrorKind::InvalidInput,
            "NUL",
        ),
    ];
    for (argv, cwd, kind, says) in cases {
        let argv_ref: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut s = spec(tmp.path(), &argv_ref);
        s.cwd = cwd;
        match run(&s) {
            Err(IsolateError::Spawn { program, source }) => {
                assert_eq!(program, argv[0]);
                assert_eq!(source.kind(), kind, "{argv:?}: {source}");
                assert!(source.to_string().contains(says), "{argv:?}: {source}");
            }
            other => panic!("{argv:?}: expected a spawn error, got {other:?}"),
        }
    }
    assert!(zombie_children().is_empty(), "{:?}", zombie_children());
}

#[test]
fn path_is_searched_in_the_attempt_environment() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let tool = bin.join("my-tool");
    std::fs::write(&tool, "#!/bin/sh\necho \"ran $0 $1\"\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut s = spec(tmp.path(), &["my-tool", "arg"]);
    s.env = vec![(
        "PATH".into(),
        format!("/nonexistent:{}:/bin", bin.display()),
    )];
    let out = run(&s).unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&s.stdout).unwrap(),
        format!("ran {} arg\n", tool.display())
    );
}

#[test]
fn scripts_without_an_interpreter_line_run_through_sh() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("plain-script");
    std::fs::write(&script, "echo \"plain $1\"\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let s = spec(tmp.path(), &[script.to_str().unwrap(), "arg"]);
    let out = run(&s).unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(std::fs::read_to_string(&s.stdout).unwrap(), "plain arg\n");
}

#[test]
fn environment_has_one_value_per_name_and_our_canary() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut s = spec(tmp.path(), &["sh", "-c", "env | sort"]);
    s.env.push(("SPAWN_TEST".into(), "second".into()));
    s.env.push(("ORCHESTRATE_ATTEMPT".into(), "forged".into()));
    let out = run(&s).unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let text = std::fs::read_to_string(&s.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("SPAWN_TEST="))
            .count(),
        1,
        "{text}"
    );
    assert!(lines.contains(&"SPAWN_TEST=second"), "{text}");
    assert!(
        lines.contains(&format!("ORCHESTRATE_ATTEMPT={}", s.canary).as_str()),
        "{text}"
    );
}

#[test]
fn an_abandoned_attempt_leaves_no_zombie() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let s = spec(tmp.path(), &["sleep", "0.3"]);
    let iso = Isolator::new(Mode::None).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The caller gives up on the attempt while its process still runs.
    let gave_up = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_millis(100),
            iso.run(s.clone(), watch::channel(None).1),
        )
        .await
    });
    assert!(gave_up.is_err(), "the attempt was still running");
    // By now it has exited; the orphan reaper (a pass every 100 ms) collects it.
    std::thread::sleep(Duration::from_millis(600));
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while !zombie_children().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "zombies left: {:?}",
            zombie_children()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_process_starts_only_when_the_gate_opens() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let s = spec(tmp.path(), &["true"]);
    let iso = Isolator::new(Mode::None).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let opened_at = std::sync::Arc::new(std::sync::Mutex::new(None));
    let mark = opened_at.clone();
    let gate = async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        *mark.lock().unwrap() = Some(chrono::Utc::now());
        Ok(())
    };
    let out = rt
        .block_on(iso.run_gated(s.clone(), watch::channel(None).1, gate))
        .unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let opened = opened_at.lock().unwrap().expect("the gate ran");
    assert!(
        out.started_at >= opened,
        "started {} before the gate opened {opened}",
        out.started_at
    );
}

#[test]
fn a_cancel_while_waiting_at_the_gate_starts_nothing() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let s = spec(tmp.path(), &["sh", "-c", "echo started"]);
    let iso = Isolator::new(Mode::None).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (tx, rx) = watch::channel(None);
    let r = rt.block_on(async {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = tx.send(Some(CancelReason::Interrupt));
            tokio::time::sleep(Duration::from_secs(5)).await;
        });
        iso.run_gated(s.clone(), rx, std::future::pending()).await
    });
    assert!(
        matches!(
            r,
            Err(IsolateError::CancelledBeforeStart(CancelReason::Interrupt))
        ),
        "{r:?}"
    );
    assert_eq!(std::fs::read_to_string(&s.stdout).unwrap_or_default(), "");
}
