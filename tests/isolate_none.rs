//! Isolation `none` (and `auto` falling back to it): the tree is ended through its
//! process group only; a setsid daemon escapes, and the outcome says nothing was
//! enforced.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orchestrate::isolate::{
    processes_with_canary, zombie_children, AttemptOutcome, AttemptSpec, CgroupLayout, FakeV2Fs,
    Isolator, Mode, Termination,
};
use tokio::sync::watch;

static SERIAL: Mutex<()> = Mutex::new(());
static COUNTER: AtomicU32 = AtomicU32::new(0);

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/isolate")
        .join(name)
        .display()
        .to_string()
}

fn spec(dir: &std::path::Path, argv: &[&str]) -> AttemptSpec {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = format!("orchestrate-none{}-{n}", std::process::id());
    AttemptSpec {
        canary: format!("{name}-canary"),
        name,
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: dir.to_path_buf(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        memory: Some(64 << 20),
        swap: false,
        pids: None,
        cpus: None,
        device_nodes: None,
        gpus: Vec::new(),
        npus: Vec::new(),
        timeout: Some(Duration::from_secs(20)),
        grace: Duration::from_millis(200),
        stdout: dir.join("out"),
        stderr: dir.join("err"),
        tee: false,
        mask: None,
    }
}

fn run(iso: &Isolator, spec: &AttemptSpec) -> AttemptOutcome {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(iso.run(spec.clone(), watch::channel(None).1))
        .unwrap()
}

fn canaries(spec: &AttemptSpec) -> Vec<(i32, String)> {
    let c = spec.canary.clone();
    processes_with_canary(&move |v| v == c)
}

fn no_zombies() {
    for _ in 0..50 {
        if zombie_children().is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("zombie children: {:?}", zombie_children());
}

#[test]
fn tree_in_its_process_group_is_ended() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let iso = Isolator::new(Mode::None).unwrap();
    assert_eq!(iso.describe().mode, orchestrate::contract::Enforcer::None);
    let s = spec(tmp.path(), &[&fixture("tree.sh")]);
    let out = run(&iso, &s);
    assert_eq!(out.termination, Termination::Exited);
    assert!(canaries(&s).is_empty(), "{:?}", canaries(&s));
    no_zombies();
    assert_eq!(out.enforcement.mode, orchestrate::contract::Enforcer::None);
    assert!(!out.enforcement.memory);
    assert!(out
        .enforcement
        .notes
        .iter()
        .any(|n| n.contains("not enforced: memory")));
    assert_eq!(out.cpu_user, None, "not measured means None, not zero");
    assert_eq!(out.peak_memory_bytes, None);
    assert_eq!(out.pids_limit_hit, None);
    assert!(out.leftovers.is_empty());
}

#[test]
fn setsid_daemon_escapes_the_process_group() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let iso = Isolator::new(Mode::None).unwrap();
    let s = spec(tmp.path(), &[&fixture("daemon.sh")]);
    let out = run(&iso, &s);
    assert_eq!(out.termination, Termination::Exited);
    // Documented limitation of mode none: the daemon lives on.
    let escaped = canaries(&s);
    assert!(
        !escaped.is_empty(),
        "the setsid daemon was expected to escape"
    );
    assert!(out.enforcement.notes.iter().any(|n| n.contains("setsid")));
    for (pid, _) in &escaped {
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    for _ in 0..100 {
        if canaries(&s).is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(canaries(&s).is_empty());
    // The killed daemon was re-parented to us (subreaper) and reaped.
    no_zombies();
}

#[test]
fn timeout_in_none_mode() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let iso = Isolator::new(Mode::None).unwrap();
    let mut s = spec(tmp.path(), &[&fixture("ignore_term.sh")]);
    s.timeout = Some(Duration::from_millis(300));
    let out = run(&iso, &s);
    assert_eq!(out.termination, Termination::TimedOut);
    assert_eq!(out.signal, Some(libc::SIGKILL));
    assert!(out.leftovers.is_empty(), "{:?}", out.leftovers);
    assert!(canaries(&s).is_empty());
    no_zombies();
}

#[test]
fn auto_falls_back_with_a_warning_in_every_outcome() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    let fake = FakeV2Fs::create(&root, &["hugetlb"], &[]).unwrap();
    let layout = CgroupLayout {
        unified: Some(root),
        ..Default::default()
    };
    let iso = Isolator::with_layout_fs(Mode::Auto, layout, Arc::new(fake)).unwrap();
    assert_eq!(iso.warnings().len(), 1);
    let info = iso.describe();
    assert_eq!((info.requested, info.mode.as_str()), (Mode::Auto, "none"));
    let s = spec(tmp.path(), &["/bin/true"]);
    let out = run(&iso, &s);
    assert!(out.succeeded());
    assert!(out
        .enforcement
        .notes
        .iter()
        .any(|n| n.contains("cgroup isolation unavailable")));
}
