//! cgroup v2 logic against a fake cgroupfs tree (the machines we test on have no v2
//! memory controller): setup and its error reasons, limit writing, measurements,
//! kill and removal, sweep. Also layout discovery from sample /proc texts.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orchestrate::isolate::{
    AttemptOutcome, AttemptSpec, CgroupFs, CgroupLayout, FakeV2Fs, IsolateError, Isolator, Mode,
    Termination,
};
use tokio::sync::watch;

fn layout(dir: &Path) -> CgroupLayout {
    CgroupLayout {
        unified: Some(dir.to_path_buf()),
        ..Default::default()
    }
}

/// Our cgroup at `dir`, attempts asked below the delegated `parent`.
fn delegated(dir: &Path, parent: &Path) -> CgroupLayout {
    CgroupLayout {
        delegated: Some(Box::new(layout(parent))),
        ..layout(dir)
    }
}

fn spec(dir: &Path, name: &str, argv: &[&str]) -> AttemptSpec {
    AttemptSpec {
        name: name.into(),
        canary: format!("{name}-{}", std::process::id()),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: dir.to_path_buf(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        memory: Some(64 << 20),
        swap: false,
        pids: Some(20),
        cpus: Some("0-1".into()),
        device_nodes: Some(vec![]),
        timeout: Some(Duration::from_secs(20)),
        grace: Duration::from_millis(100),
        stdout: dir.join("out"),
        stderr: dir.join("err"),
        tee: false,
        mask: None,
        gpus: Vec::new(),
        npus: Vec::new(),
    }
}

/// One attempt to its end, on a runtime of its own.
fn run(iso: &Isolator, s: AttemptSpec) -> AttemptOutcome {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(iso.run(s, watch::channel(None).1))
        .unwrap()
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(p).unwrap()
}

fn words(p: PathBuf) -> Vec<String> {
    read(p).split_whitespace().map(str::to_string).collect()
}

/// Every cgroup directory below `root`, relative, sorted (to prove nothing is left).
fn tree(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                out.push(e.path().strip_prefix(root).unwrap().display().to_string());
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// The homes are per process: tests that move "us" run one at a time.
static HOME_TESTS: Mutex<()> = Mutex::new(());

#[test]
fn a_process_still_exiting_delays_the_controllers_and_one_that_stays_is_an_error() {
    let _g = HOME_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    let me = std::process::id() as i32;
    let fake = FakeV2Fs::create(&root, &["cpu", "memory", "pids"], &[me]).unwrap();
    // Three refused writes: a child reaped a moment ago is still leaving.
    fake.exiting_process(&root, 3).unwrap();
    let iso =
        Isolator::with_layout_fs(Mode::Cgroup, layout(&root), Arc::new(fake.clone())).unwrap();
    let enabled = words(root.join("cgroup.subtree_control"));
    for c in ["memory", "pids", "cpu"] {
        assert!(enabled.iter().any(|e| e == c), "{enabled:?}");
    }
    drop(iso);
    // One that stays past a second of tries is the error it was.
    fake.exiting_process(&root, 1000).unwrap();
    let Err(err) = Isolator::with_layout_fs(Mode::Cgroup, layout(&root), Arc::new(fake.clone()))
    else {
        panic!("a cgroup that stays busy refuses the controllers");
    };
    assert!(err.to_string().contains("busy"), "{err}");
}

#[test]
fn alone_in_our_cgroup_we_move_into_a_leaf_and_back() {
    let _g = HOME_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    let me = std::process::id() as i32;
    let fake = FakeV2Fs::create(&root, &["cpuset", "cpu", "io", "memory", "pids"], &[me]).unwrap();
    let iso =
        Isolator::with_layout_fs(Mode::Cgroup, layout(&root), Arc::new(fake.clone())).unwrap();
    let leaf = root.join(format!("orchestrate.self-{me}"));
    assert_eq!(words(leaf.join("cgroup.procs")), vec![me.to_string()]);
    assert!(words(root.join("cgroup.procs")).is_empty());
    let enabled = words(root.join("cgroup.subtree_control"));
    for c in ["memory", "pids", "cpu", "cpuset"] {
        assert!(enabled.iter().any(|e| e == c), "{enabled:?}");
    }
    assert!(!enabled.iter().any(|e| e == "io"));
    let info = iso.describe();
    assert_eq!(info.cgroup_version, Some(2));
    assert_eq!(info.parents, vec![root.clone()]);
    assert!(info.notes.iter().any(|n| n.contains("orchestrate.self-")));
    // The leaf is ours but is no attempt: never listed, never swept.
    assert!(iso.list().is_empty());
    assert!(iso.sweep(&|_| true).is_empty());
    // A second isolator from inside the leaf shares the home.
    let iso2 =
        Isolator::with_layout_fs(Mode::Cgroup, layout(&leaf), Arc::new(fake.clone())).unwrap();
    assert_eq!(iso2.describe().parents, vec![root.clone()]);
    let out = run(
        &iso2,
        spec(tmp.path(), "orchestrate-in-home", &["/bin/true"]),
    );
    assert_eq!(out.exit_code, Some(0));
    drop(iso);
    assert!(leaf.exists(), "the second isolator still uses the home");
    drop(iso2);
    // The last one put everything back as it was found.
    assert_eq!(tree(&root), Vec::<String>::new());
    assert_eq!(words(root.join("cgroup.procs")), vec![me.to_string()]);
    assert!(words(root.join("cgroup.subtree_control")).is_empty());
}

#[test]
fn in_the_root_cgroup_attempts_go_right_below_it() {
    let _g = HOME_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    let me = std::process::id() as i32;
    let fake = FakeV2Fs::create(&root, &["memory", "pids"], &[1, me])
        .unwrap()
        .as_hierarchy_root()
        .unwrap();
    let iso = Isolator::with_layout_fs(Mode::Cgroup, layout(&root), Arc::new(fake)).unwrap();
    assert_eq!(iso.describe().parents, vec![root.clone()]);
    assert_eq!(
        words(root.join("cgroup.procs")),
        vec!["1".to_string(), me.to_string()],
        "nobody moves"
    );
    let out = run(
        &iso,
        spec(tmp.path(), "orchestrate-at-root", &["/bin/true"]),
    );
    assert_eq!(out.exit_code, Some(0));
    drop(iso);
    assert_eq!(tree(&root), Vec::<String>::new());
    assert!(words(root.join("cgroup.subtree_control")).is_empty());
}

#[test]
fn sharing_our_cgroup_we_move_into_a_home_beside_it_and_back() {
    let _g = HOME_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    let me = std::process::id() as i32;
    let fake = FakeV2Fs::create(&root, &["memory", "pids", "cpu"], &[]).unwrap();
    fake.write(&root.join("cgroup.subtree_control"), "+memory +pids +cpu")
        .unwrap();
    // A login session: our shell (pid 1 stands in) and us.
    let session = root.join("session-3.scope");
    fake.mkdir(&session).unwrap();
    fake.write(&session.join("cgroup.procs"), "1").unwrap();
    fake.write(&session.join("cgroup.procs"), &me.to_string())
        .unwrap();
    // What a crashed orchestrator left: an empty leaf of a pid that is gone.
    let home = root.join("orchestrate.home");
    fake.mkdir(&home).unwrap();
    fake.mkdir(&home.join("orchestrate.self-2147483646"))
        .unwrap();
    let iso = Isolator::with_layout_fs(Mode::Cgroup, layout(&session), Arc::new(fake)).unwrap();
    assert_eq!(iso.describe().parents, vec![home.clone()]);
    let leaf = home.join(format!("orchestrate.self-{me}"));
    assert_eq!(words(leaf.join("cgroup.procs")), vec![me.to_string()]);
    assert_eq!(words(session.join("cgroup.procs")), vec!["1".to_string()]);
    assert!(!home.join("orchestrate.self-2147483646").exists());
    let notes = iso.describe().notes.join("\n");
    assert!(notes.contains("shared with other processes"), "{notes}");
    let out = run(&iso, spec(tmp.path(), "orchestrate-beside", &["/bin/true"]));
    assert_eq!(out.exit_code, Some(0));
    drop(iso);
    assert_eq!(tree(&root), vec!["session-3.scope".to_string()]);
    assert_eq!(
        words(session.join("cgroup.procs")),
        vec!["1".to_string(), me.to_string()]
    );
}

/// A parent an administrator delegated (`cgroup_parent`) that does not hold our
/// cgroup: we move into a leaf of it, attempts go beside the leaf, and at the end we
/// move back and leave the parent as the administrator made it.
#[test]
fn a_delegated_parent_takes_the_attempts_and_is_left_as_made() {
    let _g = HOME_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    let me = std::process::id() as i32;
    let fake = FakeV2Fs::create(&root, &["memory", "pids", "cpu"], &[]).unwrap();
    fake.write(&root.join("cgroup.subtree_control"), "+memory +pids")
        .unwrap();
    let session = root.join("session-3.scope");
    fake.mkdir(&session).unwrap();
    fake.write(&session.join("cgroup.procs"), "1").unwrap();
    fake.write(&session.join("cgroup.procs"), &me.to_string())
        .unwrap();
    let given = root.join("orchestrate").join("alice");
    fake.mkdir(&root.join("orchestrate")).unwrap();
    fake.write(
        &root.join("orchestrate/cgroup.subtree_control"),
        "+memory +pids",
    )
    .unwrap();
    fake.mkdir(&given).unwrap();
    let iso = Isolator::with_layout_fs(
        Mode::Cgroup,
        delegated(&session, &given),
        Arc::new(fake.clone()),
    )
    .unwrap();
    assert_eq!(iso.describe().parents, vec![given.clone()]);
    let leaf = given.join(format!("orchestrate.self-{me}"));
    assert_eq!(words(leaf.join("cgroup.procs")), vec![me.to_string()]);
    let notes = iso.describe().notes.join("\n");
    assert!(notes.contains("delegated parent"), "{notes}");
    let out = run(&iso, spec(tmp.path(), "orchestrate-given", &["/bin/true"]));
    assert_eq!(out.exit_code, Some(0));
    assert!(
        !root.join("orchestrate.home").exists(),
        "nothing beside the session"
    );
    drop(iso);
    assert_eq!(
        tree(&root),
        vec![
            "orchestrate".to_string(),
            "orchestrate/alice".to_string(),
            "session-3.scope".to_string()
        ]
    );
    assert_eq!(
        words(session.join("cgroup.procs")),
        vec!["1".to_string(), me.to_string()]
    );
    assert!(words(given.join("cgroup.subtree_control")).is_empty());

    // Started inside it, the parent only bounds where a home goes: alone in a scope
    // below it, attempts go beside our leaf in the scope.
    let scope = given.join("run.scope");
    fake.write(&given.join("cgroup.subtree_control"), "+memory +pids")
        .unwrap();
    fake.mkdir(&scope).unwrap();
    fake.write(&scope.join("cgroup.procs"), &me.to_string())
        .unwrap();
    let iso = Isolator::with_layout_fs(
        Mode::Cgroup,
        delegated(&scope, &given),
        Arc::new(fake.clone()),
    )
    .unwrap();
    assert_eq!(iso.describe().parents, vec![scope.clone()]);
    drop(iso);
    assert_eq!(words(scope.join("cgroup.procs")), vec![me.to_string()]);
    fake.write(&session.join("cgroup.procs"), &me.to_string())
        .unwrap();
    fake.rmdir(&scope).unwrap();
    fake.write(&given.join("cgroup.subtree_control"), "-memory -pids")
        .unwrap();

    // The parent itself, shared with a shell: v2 cannot delegate from it, and nothing
    // is made beside it (that would be outside what was delegated).
    fake.write(&given.join("cgroup.procs"), "1").unwrap();
    fake.write(&given.join("cgroup.procs"), &me.to_string())
        .unwrap();
    let e = Isolator::with_layout_fs(Mode::Cgroup, delegated(&given, &given), Arc::new(fake))
        .unwrap_err()
        .to_string();
    assert!(e.contains("it is the delegated parent"), "{e}");
    assert!(!root.join("orchestrate/orchestrate.home").exists());
}

/// A delegated parent that does not exist is named, with where to read how an
/// administrator makes one.
#[test]
fn a_missing_delegated_parent_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    let fake = FakeV2Fs::create(&root, &["memory", "pids"], &[]).unwrap();
    let e = Isolator::with_layout_fs(
        Mode::Cgroup,
        delegated(&root, &root.join("nobody-made-this")),
        Arc::new(fake),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("cgroup parent"), "{e}");
    assert!(e.contains("nobody-made-this"), "{e}");
    assert!(e.contains("docs/hosts.md"), "{e}");
}

#[test]
fn errors_name_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    // Controller missing (like the unified mount here: hugetlb only).
    let fake = FakeV2Fs::create(&root, &["hugetlb"], &[]).unwrap();
    let err =
        Isolator::with_layout_fs(Mode::Cgroup, layout(&root), Arc::new(fake.clone())).unwrap_err();
    let IsolateError::Unavailable(reason) = &err else {
        panic!("{err}")
    };
    assert!(
        reason.contains("controller missing") && reason.contains("memory pids"),
        "{reason}"
    );
    // Auto falls back to none, with the reason in warnings and enforcement notes.
    let iso = Isolator::with_layout_fs(Mode::Auto, layout(&root), Arc::new(fake)).unwrap();
    assert_eq!(iso.describe().mode, orchestrate::contract::Enforcer::None);
    assert!(iso
        .warnings()
        .iter()
        .any(|w| w.contains("controller missing")));

    // Other processes in the top cgroup of the tree: nowhere beside it to go.
    let root2 = tmp.path().join("cg2");
    // (pid 1 stands in for the others: a fake tree lists living processes only.)
    let fake = FakeV2Fs::create(&root2, &["memory", "pids"], &[1]).unwrap();
    let err = Isolator::with_layout_fs(Mode::Cgroup, layout(&root2), Arc::new(fake)).unwrap_err();
    assert!(
        err.to_string().contains("no delegation") && err.to_string().contains("(1)"),
        "{err}"
    );

    // Nothing mounted at all.
    let err = Isolator::with_layout_fs(
        Mode::Cgroup,
        CgroupLayout::default(),
        Arc::new(FakeV2Fs::create(&root, &[], &[]).unwrap()),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("no cgroup v1 memory or pids hierarchy"),
        "{err}"
    );

    // Not writable (a read-only tree stands in for a missing delegation).
    if unsafe { libc::geteuid() } != 0 {
        return; // as non-root the probe below is what is tested already
    }
    let root3 = tmp.path().join("cg3");
    let fake = FakeV2Fs::create(&root3, &["memory", "pids"], &[]).unwrap();
    // A path whose parent is a file cannot take a cgroup: the reason says where.
    let err = Isolator::with_layout_fs(
        Mode::Cgroup,
        layout(&root3.join("cgroup.procs")),
        Arc::new(fake),
    )
    .unwrap_err();
    assert!(err.to_string().contains("cgroup.procs"), "{err}");
}

#[test]
fn attempt_writes_limits_measures_and_removes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    let fake = FakeV2Fs::create(&root, &["cpuset", "cpu", "memory", "pids"], &[]).unwrap();
    let fs: Arc<dyn CgroupFs> = Arc::new(fake);
    let iso = Isolator::with_layout_fs(Mode::Cgroup, layout(&root), fs.clone()).unwrap();
    let name = format!("orchestrate-fake-{}-limits", std::process::id());
    let cg = root.join(&name);
    // The attempt checks its limits, then stands in for the kernel's accounting.
    let script = format!(
        "test \"$(cat {cg}/memory.max)\" = {mem} && test \"$(cat {cg}/memory.swap.max)\" = 0 \
         && test \"$(cat {cg}/memory.oom.group)\" = 1 && test \"$(cat {cg}/pids.max)\" = 20 \
         && test \"$(cat {cg}/cpuset.cpus)\" = 0-1 || exit 9; \
         printf 'usage_usec 3500\\nuser_usec 2500\\nsystem_usec 1000\\n' > {cg}/cpu.stat; \
         printf '1048576\\n' > {cg}/memory.peak; \
         printf 'low 0\\nhigh 0\\nmax 4\\noom 1\\noom_kill 1\\noom_group_kill 1\\n' > {cg}/memory.events; \
         printf 'max 2\\n' > {cg}/pids.events",
        cg = cg.display(),
        mem = 64 << 20
    );
    let s = spec(tmp.path(), &name, &["/bin/sh", "-c", &script]);
    let out = run(&iso, s);
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.cpu_user, Some(Duration::from_micros(2500)));
    assert_eq!(out.cpu_system, Some(Duration::from_micros(1000)));
    assert_eq!(out.peak_memory_bytes, Some(1 << 20));
    assert_eq!(out.oom_kills, Some(1));
    assert_eq!(out.termination, Termination::OomKilled);
    assert_eq!(out.pids_limit_hit, Some(true));
    let e = &out.enforcement;
    assert_eq!(e.cgroup_version, Some(2));
    assert!(e.memory && e.swap_off && e.pids && e.cpus && !e.devices);
    // A fake tree is no cgroup: the device program cannot be attached, and says so.
    assert!(
        e.notes
            .iter()
            .any(|n| n.contains("device program could not be attached")),
        "{:?}",
        e.notes
    );
    assert!(!cg.exists(), "attempt cgroup removed");
    assert!(out.leftovers.is_empty(), "{:?}", out.leftovers);
}

#[test]
fn busy_cgroup_is_reported_as_leftover_and_swept_later() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    let fake = FakeV2Fs::create(&root, &["memory", "pids"], &[]).unwrap();
    let logged = Arc::new(WriteLog {
        inner: fake,
        writes: Mutex::new(Vec::new()),
    });
    let iso = Isolator::with_layout_fs(Mode::Cgroup, layout(&root), logged.clone()).unwrap();
    // A stale attempt cgroup with a child cgroup, and an unrelated one.
    let fs = FakeV2Fs::create(&tmp.path().join("scratch"), &[], &[]).unwrap();
    fs.mkdir(&root.join("orchestrate-old-run-a-1")).unwrap();
    fs.mkdir(&root.join("orchestrate-old-run-a-1/inner"))
        .unwrap();
    fs.mkdir(&root.join("orchestrate-live-run-b-1")).unwrap();
    fs.mkdir(&root.join("someone-else")).unwrap();
    assert_eq!(
        iso.list(),
        vec![
            "orchestrate-live-run-b-1".to_string(),
            "orchestrate-old-run-a-1".to_string()
        ]
    );
    let removed = iso.sweep(&|n| n.starts_with("orchestrate-old-"));
    assert_eq!(removed, vec!["orchestrate-old-run-a-1".to_string()]);
    assert!(!root.join("orchestrate-old-run-a-1").exists());
    assert!(root.join("orchestrate-live-run-b-1").exists());
    assert!(root.join("someone-else").exists());
    // The stale tree was killed through cgroup.kill before removal; nothing was
    // written into the live run's cgroup.
    let writes = logged.writes.lock().unwrap().clone();
    assert!(
        writes.contains(&(root.join("orchestrate-old-run-a-1/cgroup.kill"), "1".into())),
        "{writes:?}"
    );
    assert!(
        !writes
            .iter()
            .any(|(p, _)| p.starts_with(root.join("orchestrate-live-run-b-1"))),
        "{writes:?}"
    );
}

#[test]
fn without_memory_peak_the_peak_is_sampled() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    let fake = FakeV2Fs::create(&root, &["memory", "pids"], &[])
        .unwrap()
        .without(&["memory.peak"]);
    let iso = Isolator::with_layout_fs(Mode::Cgroup, layout(&root), Arc::new(fake)).unwrap();
    let name = format!("orchestrate-fake-{}-sampled", std::process::id());
    let cg = root.join(&name);
    // What the kernel would show: 7 MiB in use for half a second, then 4 KiB.
    let script = format!(
        "printf '7340032\\n' > {cg}/memory.current; sleep 0.5; \
         printf '4096\\n' > {cg}/memory.current; sleep 0.2",
        cg = cg.display()
    );
    let out = run(&iso, spec(tmp.path(), &name, &["/bin/sh", "-c", &script]));
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.peak_memory_bytes, Some(7 << 20), "{out:?}");
    assert!(!cg.exists());
}

#[test]
fn without_cgroup_kill_the_tree_is_frozen_killed_and_thawed() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    let fake = FakeV2Fs::create(&root, &["memory", "pids"], &[])
        .unwrap()
        .without(&["cgroup.kill"]);
    let logged = Arc::new(WriteLog {
        inner: fake.clone(),
        writes: Mutex::new(Vec::new()),
    });
    let iso = Isolator::with_layout_fs(Mode::Cgroup, layout(&root), logged.clone()).unwrap();
    // A stale attempt holding a real process that ignores SIGTERM.
    let stale = root.join("orchestrate-old-run-a-1");
    fake.mkdir(&stale).unwrap();
    let mut child = std::process::Command::new("/bin/sh")
        .args(["-c", "trap '' TERM; sleep 30"])
        .spawn()
        .unwrap();
    fake.write(&stale.join("cgroup.procs"), &child.id().to_string())
        .unwrap();
    let removed = iso.sweep(&|n| n.starts_with("orchestrate-old-"));
    assert_eq!(removed, vec!["orchestrate-old-run-a-1".to_string()]);
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    let freeze = stale.join("cgroup.freeze");
    let writes: Vec<String> = logged
        .writes
        .lock()
        .unwrap()
        .iter()
        .filter(|(p, _)| *p == freeze)
        .map(|(_, v)| v.clone())
        .collect();
    assert_eq!(writes.first().map(String::as_str), Some("1"), "{writes:?}");
    assert_eq!(writes.last().map(String::as_str), Some("0"), "{writes:?}");
}

/// A cgroup filesystem that records every write it passes on.
#[derive(Debug)]
struct WriteLog {
    inner: FakeV2Fs,
    writes: Mutex<Vec<(PathBuf, String)>>,
}

impl CgroupFs for WriteLog {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        self.inner.read(path)
    }
    fn write(&self, path: &Path, value: &str) -> std::io::Result<()> {
        self.writes
            .lock()
            .unwrap()
            .push((path.to_path_buf(), value.to_string()));
        self.inner.write(path, value)
    }
    fn mkdir(&self, path: &Path) -> std::io::Result<()> {
        self.inner.mkdir(path)
    }
    fn rmdir(&self, path: &Path) -> std::io::Result<()> {
        self.inner.rmdir(path)
    }
    fn subdirs(&self, path: &Path) -> std::io::Result<Vec<String>> {
        self.inner.subdirs(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
}

#[test]
fn invalid_names_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    let fake = FakeV2Fs::create(&root, &["memory", "pids"], &[]).unwrap();
    let iso = Isolator::with_layout_fs(Mode::Cgroup, layout(&root), Arc::new(fake)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for bad in ["plain", "orchestrate-a/../../x", "orchestrate.home"] {
        let s = spec(tmp.path(), bad, &["/bin/true"]);
        let r = rt.block_on(iso.run(s, watch::channel(None).1));
        assert!(
            matches!(r, Err(IsolateError::InvalidSpec(_))),
            "{bad}: {r:?}"
        );
    }
}

#[test]
fn layout_from_proc_texts() {
    let mi = "\
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    let cg = "8:pids:/\n4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n";
    let l = CgroupLayout::parse(mi, cg);
    assert_eq!(
        l.v1["memory"],
        PathBuf::from("/sys/fs/cgroup/memory/process_api/abc")
    );
    assert_eq!(l.v1["cpuacct"], PathBuf::from("/sys/fs/cgroup/cpuacct"));
    assert_eq!(l.unified, Some(PathBuf::from("/sys/fs/cgroup/unified")));
    let l = CgroupLayout::parse(
        "30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        "0::/system.slice/orch.service\n",
    );
    assert_eq!(
        l.unified,
        Some(PathBuf::from("/sys/fs/cgroup/system.slice/orch.service"))
    );
    assert!(l.v1.is_empty());
    // A delegated parent is the same path in every hierarchy, from its root.
    let parent = orchestrate::isolate::cgroup_parent_path("/orchestrate/alice/").unwrap();
    let l = CgroupLayout::parse_in(mi, cg, Some(&parent));
    let d = l.delegated.as_deref().unwrap();
    assert_eq!(
        d.v1["memory"],
        PathBuf::from("/sys/fs/cgroup/memory/orchestrate/alice")
    );
    assert_eq!(
        d.unified,
        Some(PathBuf::from("/sys/fs/cgroup/unified/orchestrate/alice"))
    );
    assert_eq!(
        l.v1["memory"],
        PathBuf::from("/sys/fs/cgroup/memory/process_api/abc"),
        "our own cgroups are still known"
    );
    for bad in ["/", "", "a/../b", "a//b", "./a", "a\nb"] {
        assert!(
            orchestrate::isolate::cgroup_parent_path(bad).is_err(),
            "{bad:?}"
        );
    }
}

#[test]
fn a_process_left_in_the_cgroup_refuses_the_quick_end_and_is_ended() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cg");
    let fake = FakeV2Fs::create(&root, &["memory", "pids"], &[]).unwrap();
    let iso = Isolator::with_layout_fs(Mode::Cgroup, layout(&root), Arc::new(fake)).unwrap();
    let name = format!("orchestrate-fake-{}-linger", std::process::id());
    let cg = root.join(&name);
    // The main process exits while a child lives on, listed in the fake cgroup.procs
    // as the kernel would list it; on SIGTERM the child leaves the list and exits.
    // The child lists itself once its trap is set, and the main process waits for that
    // (the join already wrote "0" to the fake file). Nothing real kills the child if
    // the test fails, so it gives up by itself after 10 s.
    let script = format!(
        "( trap ': > {procs}; exit 0' TERM; sh -c 'echo $PPID' > {procs}; \
           for i in $(seq 200); do sleep 0.05; done ) & \
         until grep -q '[1-9]' {procs}; do sleep 0.01; done",
        procs = cg.join("cgroup.procs").display()
    );
    let s = spec(tmp.path(), &name, &["/bin/sh", "-c", &script]);
    let out = run(&iso, s);
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.termination, Termination::Exited);
    // The tree was not empty at exit, so it was ended the full way, then removed.
    assert!(out.kill_duration.is_some(), "{out:?}");
    assert!(!cg.exists(), "attempt cgroup removed");
    assert!(out.leftovers.is_empty(), "{:?}", out.leftovers);
}
