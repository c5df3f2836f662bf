//! Leases: exclusivity across threads and processes, all-or-none, waiting, crash
//! recovery and the audit. Child processes are this test binary re-run with
//! `ORCH_DEV_TEST_ROLE` set (see `child_role`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use orchestrate::devices::{
    audit_leases, holders, parse_inventory, recover_leases, DeviceError, Holder, Inventory,
    LeaseManager, LeaseStatus, Owner, Request, StaleReason,
};

const ROLE: &str = "ORCH_DEV_TEST_ROLE";
const DIR: &str = "ORCH_DEV_TEST_DIR";
const LOG: &str = "ORCH_DEV_TEST_LOG";
/// Generous bound on waits so a slow, shared machine never fails a test by timing.
const PATIENCE: Duration = Duration::from_secs(120);

fn sim_inventory(spec: &str) -> Inventory {
    parse_inventory(&format!("[simulate]\n{spec}\n"), Path::new("test.toml")).unwrap()
}

fn request(kind: &str, count: u32, cores: Option<u32>) -> Request {
    Request {
        name: kind.into(),
        kind: kind.into(),
        count,
        cores,
        ids: Vec::new(),
        simulate: true,
        mig: None,
    }
}

fn owner(run: &str) -> Owner {
    Owner {
        run_id: run.into(),
        step: Some("s".into()),
    }
}

fn no_wait(_: &[Holder]) {}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Entry point of child processes; does nothing in a normal test run.
#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let dir = PathBuf::from(std::env::var(DIR).unwrap());
    let leases = LeaseManager::open(&dir)
        .unwrap()
        .with_poll(Duration::from_millis(5));
    match role.as_str() {
        "contend" => {
            let inv = sim_inventory("gpu = 2");
            let run = format!("child-{}", std::process::id());
            let g = leases
                .acquire(
                    &request("gpu", 1, None),
                    &inv,
                    &owner(&run),
                    PATIENCE,
                    &mut no_wait,
                )
                .unwrap();
            let start = now_ns();
            std::thread::sleep(Duration::from_millis(50));
            let end = now_ns();
            let line = format!("{} {start} {end}\n", g.units[0].device.id);
            let mut log = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(std::env::var(LOG).unwrap())
                .unwrap();
            // One small O_APPEND write per line: lines from children never interleave.
            log.write_all(line.as_bytes()).unwrap();
            g.release().unwrap();
        }
        "hold" => {
            let inv = sim_inventory("rngd = 1");
            let _g = leases
                .acquire(
                    &request("rngd", 1, None),
                    &inv,
                    &owner("doomed"),
                    PATIENCE,
                    &mut no_wait,
                )
                .unwrap();
            // Held until killed; bounded so a failed test never leaves it behind.
            std::thread::sleep(PATIENCE);
        }
        other => panic!("unknown role {other}"),
    }
}

/// A child process killed when the test ends, even by a panic.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_child(role: &str, dir: &Path, log: Option<&Path>) -> Kid {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "devices_leases::child_role",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(ROLE, role)
    .env(DIR, dir)
    .stdout(Stdio::null())
    .stderr(Stdio::inherit());
    if let Some(log) = log {
        cmd.env(LOG, log);
    }
    Kid(cmd.spawn().unwrap())
}

/// Waits until every core of `device` is held by `pid`.
fn wait_held_by(dir: &Path, device: &str, cores: usize, pid: u32) {
    let start = Instant::now();
    loop {
        let held = audit_leases(dir)
            .unwrap()
            .into_iter()
            .filter(|s| s.device == device)
            .filter(|s| matches!(&s.status, LeaseStatus::Held { holder: Some(h) } if h.pid == pid))
            .count();
        if held == cores {
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "child {pid} never took {device}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn status_of(dir: &Path, device: &str, core: u32) -> LeaseStatus {
    audit_leases(dir)
        .unwrap()
        .into_iter()
        .find(|s| s.device == device && s.core == core)
        .map(|s| s.status)
        .unwrap_or(LeaseStatus::Free)
}

#[test]
fn grant_writes_body_env_and_release_clears_it_without_deleting() {
    let dir = tempfile::tempdir().unwrap();
    let leases = LeaseManager::open(dir.path()).unwrap();
    let inv = sim_inventory("rngd = 1");
    let g = leases
        .acquire(
            &request("rngd", 1, Some(4)),
            &inv,
            &owner("run-1"),
            Duration::ZERO,
            &mut no_wait,
        )
        .unwrap();
    assert!(g.simulated);
    assert_eq!(g.units.len(), 1);
    assert_eq!(g.units[0].device.id, "sim-rngd0");
    assert_eq!(g.units[0].cores, vec![0, 1, 2, 3]);
    assert!(g
        .env
        .contains(&("FURIOSA_DEVICES".into(), "npu:0:0-3".into())));
    assert_eq!(g.lease_files.len(), 4);
    assert!(g.lease_files[0].ends_with("sim-rngd0.core0.lock"));

    // This process's own leases show as held (probed on a fresh file description).
    let held = holders(dir.path()).unwrap();
    assert_eq!(held.len(), 4);
    let h = &held[0];
    assert_eq!(h.run_id, "run-1");
    assert_eq!(h.step.as_deref(), Some("s"));
    assert_eq!(h.pid, std::process::id());
    assert!(h.start_time.is_some() && h.boot_id.is_some());
    assert!(chrono::DateTime::parse_from_rfc3339(&h.since).is_ok());
    assert_eq!(status_of(dir.path(), "sim-rngd0", 5), LeaseStatus::Free);

    g.release().unwrap();
    let states = audit_leases(dir.path()).unwrap();
    assert_eq!(states.len(), 4, "lock files are kept");
    assert!(
        states.iter().all(|s| s.status == LeaseStatus::Free),
        "{states:?}"
    );
}

#[test]
fn drop_releases_too() {
    let dir = tempfile::tempdir().unwrap();
    let leases = LeaseManager::open(dir.path()).unwrap();
    let inv = sim_inventory("gpu = 1");
    {
        let _g = leases
            .acquire(
                &request("gpu", 1, None),
                &inv,
                &owner("r"),
                Duration::ZERO,
                &mut no_wait,
            )
            .unwrap();
        assert_eq!(holders(dir.path()).unwrap().len(), 1);
    }
    assert!(holders(dir.path()).unwrap().is_empty());
    assert_eq!(status_of(dir.path(), "sim-gpu0", 0), LeaseStatus::Free);
}

#[test]
fn acquisition_is_all_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let leases = LeaseManager::open(dir.path()).unwrap();
    let inv = sim_inventory("rngd = 1\ngpu = 2");

    // Another holder owns cores 4-5: slot 4-7 cannot be had, and 6-7 must not stay
    // taken.
    let first = leases
        .acquire(
            &request("rngd", 1, Some(4)),
            &inv,
            &owner("a"),
            Duration::ZERO,
            &mut no_wait,
        )
        .unwrap();
    assert_eq!(first.units[0].cores, vec![0, 1, 2, 3]);
    let by_core = leases
        .acquire(
            &request("rngd", 1, Some(2)),
            &inv,
            &owner("b"),
            Duration::ZERO,
            &mut no_wait,
        )
        .unwrap();
    assert_eq!(by_core.units[0].cores, vec![4, 5]);
    let err = leases
        .acquire(
            &request("rngd", 1, Some(4)),
            &inv,
            &owner("c"),
            Duration::ZERO,
            &mut no_wait,
        )
        .unwrap_err();
    assert!(matches!(err, DeviceError::Busy { .. }), "{err}");
    assert_eq!(status_of(dir.path(), "sim-rngd0", 6), LeaseStatus::Free);
    assert_eq!(status_of(dir.path(), "sim-rngd0", 7), LeaseStatus::Free);

    // Two whole GPUs wanted, one held: the free one is not kept.
    let mut one = request("gpu", 1, None);
    one.ids = vec!["sim-gpu1".into()];
    let g1 = leases
        .acquire(&one, &inv, &owner("d"), Duration::ZERO, &mut no_wait)
        .unwrap();
    assert_eq!(g1.units[0].device.id, "sim-gpu1");
    let err = leases
        .acquire(
            &request("gpu", 2, None),
            &inv,
            &owner("e"),
            Duration::ZERO,
            &mut no_wait,
        )
        .unwrap_err();
    assert!(matches!(err, DeviceError::Busy { .. }));
    assert_eq!(status_of(dir.path(), "sim-gpu0", 0), LeaseStatus::Free);
    drop(g1);
    let both = leases
        .acquire(
            &request("gpu", 2, None),
            &inv,
            &owner("e"),
            Duration::ZERO,
            &mut no_wait,
        )
        .unwrap();
    assert_eq!(both.units.len(), 2);
}

#[test]
fn opposite_order_requests_never_deadlock_and_never_share() {
    let dir = tempfile::tempdir().unwrap();
    let inv = Arc::new(sim_inventory("gpu = 2"));
    let in_use = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    let threads: Vec<_> = [["sim-gpu0", "sim-gpu1"], ["sim-gpu1", "sim-gpu0"]]
        .into_iter()
        .enumerate()
        .map(|(t, ids)| {
            let leases = LeaseManager::open(dir.path())
                .unwrap()
                .with_poll(Duration::from_millis(1));
            let inv = Arc::clone(&inv);
            let in_use = Arc::clone(&in_use);
            std::thread::spawn(move || {
                let mut r = request("gpu", 2, None);
                r.ids = ids.iter().map(|s| s.to_string()).collect();
                for _ in 0..100 {
                    let g = leases
                        .acquire(&r, &inv, &owner(&format!("t{t}")), PATIENCE, &mut no_wait)
                        .unwrap();
                    for flag in in_use.iter() {
                        assert!(!flag.swap(true, Ordering::SeqCst), "device shared");
                    }
                    std::thread::yield_now();
                    for flag in in_use.iter() {
                        flag.store(false, Ordering::SeqCst);
                    }
                    g.release().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn sixteen_processes_on_two_devices_never_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("intervals.log");
    let leases = dir.path().join("leases");
    let mut children: Vec<Kid> = (0..16)
        .map(|_| spawn_child("contend", &leases, Some(&log)))
        .collect();
    for c in &mut children {
        assert!(c.0.wait().unwrap().success());
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let mut per_device: BTreeMap<String, Vec<(u128, u128)>> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 3, "{line}");
        per_device
            .entry(f[0].to_string())
            .or_default()
            .push((f[1].parse().unwrap(), f[2].parse().unwrap()));
    }
    assert_eq!(per_device.values().map(Vec::len).sum::<usize>(), 16);
    assert!(per_device
        .keys()
        .all(|d| d == "sim-gpu0" || d == "sim-gpu1"));
    for (device, intervals) in &mut per_device {
        intervals.sort();
        for w in intervals.windows(2) {
            assert!(w[0].1 <= w[1].0, "{device}: {:?} overlaps {:?}", w[0], w[1]);
        }
    }
    assert!(audit_leases(&leases)
        .unwrap()
        .iter()
        .all(|s| s.status == LeaseStatus::Free));
}

#[test]
fn a_killed_holders_lease_goes_to_the_waiter() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_child("hold", dir.path(), None);
    let pid = child.0.id();
    wait_held_by(dir.path(), "sim-rngd0", 8, pid);

    let leases = LeaseManager::open(dir.path()).unwrap();
    let inv = sim_inventory("rngd = 1");
    let mut seen: Vec<Vec<Holder>> = Vec::new();
    let mut on_wait = |h: &[Holder]| {
        if seen.is_empty() {
            // Whoever the user is told about is the one that gets killed.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        seen.push(h.to_vec());
    };
    let g = leases
        .acquire(
            &request("rngd", 1, None),
            &inv,
            &owner("heir"),
            PATIENCE,
            &mut on_wait,
        )
        .unwrap();
    child.0.wait().unwrap();
    assert_eq!(seen[0].len(), 1, "{seen:?}");
    assert_eq!(seen[0][0].pid, pid);
    assert_eq!(seen[0][0].run_id, "doomed");
    assert_eq!(g.units[0].cores, (0..8).collect::<Vec<_>>());
    // The dead holder's bodies were found and replaced, and kept as evidence.
    assert_eq!(g.replaced_stale.len(), 8);
    assert!(g.replaced_stale.iter().all(|h| h.pid == pid));
    assert!(holders(dir.path())
        .unwrap()
        .iter()
        .all(|h| h.run_id == "heir"));
}

#[test]
fn a_killed_holder_is_stale_until_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_child("hold", dir.path(), None);
    let pid = child.0.id();
    wait_held_by(dir.path(), "sim-rngd0", 8, pid);
    child.0.kill().unwrap();
    child.0.wait().unwrap();

    let states = audit_leases(dir.path()).unwrap();
    assert_eq!(states.len(), 8);
    for s in &states {
        match &s.status {
            LeaseStatus::Stale {
                holder: Some(h),
                reason,
            } => {
                assert_eq!(h.pid, pid);
                assert_eq!(*reason, StaleReason::ProcessGone);
            }
            other => panic!("{}: {other:?}", s.file.display()),
        }
    }
    // Still stale on a second look: the audit only reads.
    assert_eq!(audit_leases(dir.path()).unwrap(), states);
    let cleared = recover_leases(dir.path()).unwrap();
    assert_eq!(cleared.len(), 8);
    assert!(cleared[0].contains("doomed"), "{cleared:?}");
    assert!(audit_leases(dir.path())
        .unwrap()
        .iter()
        .all(|s| s.status == LeaseStatus::Free));
    assert!(recover_leases(dir.path()).unwrap().is_empty());
}

#[test]
fn recover_leaves_live_leases_alone() {
    let dir = tempfile::tempdir().unwrap();
    let leases = LeaseManager::open(dir.path()).unwrap();
    let inv = sim_inventory("gpu = 1");
    let g = leases
        .acquire(
            &request("gpu", 1, None),
            &inv,
            &owner("live"),
            Duration::ZERO,
            &mut no_wait,
        )
        .unwrap();
    assert!(recover_leases(dir.path()).unwrap().is_empty());
    assert_eq!(holders(dir.path()).unwrap()[0].run_id, "live");
    drop(g);
}

#[test]
fn waiting_reports_the_holder_then_times_out_busy() {
    let dir = tempfile::tempdir().unwrap();
    let inv = sim_inventory("gpu = 1");
    let first = LeaseManager::open(dir.path()).unwrap();
    let second = LeaseManager::open(dir.path())
        .unwrap()
        .with_poll(Duration::from_millis(10));
    let _g = first
        .acquire(
            &request("gpu", 1, None),
            &inv,
            &owner("first"),
            Duration::ZERO,
            &mut no_wait,
        )
        .unwrap();
    let mut calls: Vec<Vec<Holder>> = Vec::new();
    let err = second
        .acquire(
            &request("gpu", 1, None),
            &inv,
            &owner("second"),
            Duration::from_millis(200),
            &mut |h| calls.push(h.to_vec()),
        )
        .unwrap_err();
    assert_eq!(calls.len(), 1, "called again only when the holders change");
    assert_eq!(calls[0][0].run_id, "first");
    match err {
        DeviceError::Busy { request, holders } => {
            assert_eq!(request, "gpu");
            assert_eq!(holders.len(), 1);
            assert_eq!(holders[0].run_id, "first");
            assert_eq!(holders[0].pid, std::process::id());
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_released_lease_passes_to_one_waiter_only() {
    // Lock files are never deleted, so a waiter that opened the file before the
    // release and a newcomer that opens it after still exclude each other.
    let dir = tempfile::tempdir().unwrap();
    let inv = Arc::new(sim_inventory("gpu = 1"));
    let leases = LeaseManager::open(dir.path())
        .unwrap()
        .with_poll(Duration::from_millis(5));
    let g = leases
        .acquire(
            &request("gpu", 1, None),
            &inv,
            &owner("a"),
            Duration::ZERO,
            &mut no_wait,
        )
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = {
        let leases = leases.clone();
        let inv = Arc::clone(&inv);
        std::thread::spawn(move || {
            let mut told = Some(tx);
            leases
                .acquire(
                    &request("gpu", 1, None),
                    &inv,
                    &owner("b"),
                    PATIENCE,
                    &mut |_| {
                        if let Some(tx) = told.take() {
                            let _ = tx.send(());
                        }
                    },
                )
                .unwrap()
        })
    };
    rx.recv().unwrap(); // the waiter is waiting
    g.release().unwrap();
    let held_by_b = waiter.join().unwrap();
    let err = leases
        .acquire(
            &request("gpu", 1, None),
            &inv,
            &owner("c"),
            Duration::ZERO,
            &mut no_wait,
        )
        .unwrap_err();
    assert!(matches!(err, DeviceError::Busy { ref holders, .. } if holders[0].run_id == "b"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    drop(held_by_b);
}

fn write_body(dir: &Path, device: &str, body: &str) {
    std::fs::write(dir.join(format!("{device}.core0.lock")), body).unwrap();
}

#[test]
fn audit_tells_why_a_body_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    let me = std::process::id();
    let start = orchestrate::devices::holder::process_start_time(me).unwrap();
    let boot = orchestrate::devices::holder::boot_id().unwrap();
    let body = |pid: u32, start: u64, boot: &str| {
        serde_json::to_string(&Holder {
            run_id: "r".into(),
            step: None,
            pid,
            start_time: Some(start),
            boot_id: Some(boot.into()),
            host: "h".into(),
            since: "2026-01-01T00:00:00Z".into(),
            device: "d".into(),
            core: 0,
        })
        .unwrap()
    };
    write_body(dir.path(), "a-reused", &body(me, start + 1, &boot));
    write_body(dir.path(), "b-reboot", &body(me, start, "another-boot"));
    write_body(dir.path(), "c-alive", &body(me, start, &boot));
    write_body(dir.path(), "d-garbage", "{not json");
    write_body(dir.path(), "e-free", "");
    std::fs::write(dir.path().join("not-a-lease.txt"), "x").unwrap();
    // pid_max is at most 2^22: this pid cannot exist.
    write_body(dir.path(), "f-gone", &body(4_194_305 + 7, start, &boot));

    let got: Vec<(String, LeaseStatus)> = audit_leases(dir.path())
        .unwrap()
        .into_iter()
        .map(|s| (s.device, s.status))
        .collect();
    let reason = |i: usize| match &got[i].1 {
        LeaseStatus::Stale { reason, .. } => Some(*reason),
        _ => None,
    };
    assert_eq!(got.len(), 6);
    assert_eq!(reason(0), Some(StaleReason::PidReused));
    assert_eq!(reason(1), Some(StaleReason::OtherBoot));
    assert_eq!(reason(2), Some(StaleReason::ProcessAliveUnlocked));
    assert_eq!(reason(3), Some(StaleReason::Unreadable));
    assert_eq!(got[4].1, LeaseStatus::Free);
    assert_eq!(reason(5), Some(StaleReason::ProcessGone));
    assert_eq!(recover_leases(dir.path()).unwrap().len(), 5);
    assert!(audit_leases(dir.path())
        .unwrap()
        .iter()
        .all(|s| s.status == LeaseStatus::Free));
}

/// A child forked by a holder that then died keeps the inherited lock until its
/// exec: the audit waits that out and calls the lease stale either way (an orphan
/// holding it, or the dead holder's once the child let go), never a live lease.
#[test]
fn a_lock_outliving_its_dead_holder_is_stale_not_held() {
    let dir = tempfile::tempdir().unwrap();
    let gone = Holder {
        run_id: "dead-run".into(),
        step: None,
        pid: 4_194_305 + 7,
        start_time: Some(1),
        boot_id: orchestrate::devices::holder::boot_id(),
        host: "h".into(),
        since: "2026-01-01T00:00:00Z".into(),
        device: "d".into(),
        core: 0,
    };
    write_body(dir.path(), "d", &serde_json::to_string(&gone).unwrap());
    let path = dir.path().join("d.core0.lock");
    let lock = |f| nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock);
    let orphan = lock(std::fs::File::open(&path).unwrap()).unwrap();
    let started = Instant::now();
    let status = status_of(dir.path(), "d", 0);
    assert!(started.elapsed() >= Duration::from_millis(400), "no grace");
    assert!(
        matches!(status, LeaseStatus::Stale { reason: StaleReason::HeldByOrphan, holder: Some(ref h) } if h.run_id == "dead-run"),
        "{status:?}"
    );
    // Let go during the grace, as an exec would: the dead holder's stale lease.
    let letgo = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        drop(orphan);
    });
    let status = status_of(dir.path(), "d", 0);
    letgo.join().unwrap();
    assert!(
        matches!(
            status,
            LeaseStatus::Stale {
                reason: StaleReason::ProcessGone,
                ..
            }
        ),
        "{status:?}"
    );
}

#[test]
fn audit_of_an_absent_folder_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    assert!(audit_leases(&dir.path().join("none")).unwrap().is_empty());
    assert!(recover_leases(&dir.path().join("none")).unwrap().is_empty());
}

#[test]
fn missing_devices_without_simulation_are_refused_before_any_lock() {
    let dir = tempfile::tempdir().unwrap();
    let leases = LeaseManager::open(dir.path()).unwrap();
    let mut r = request("atom", 1, None);
    r.simulate = false;
    let err = leases
        .acquire(
            &r,
            &Inventory::default(),
            &owner("x"),
            Duration::ZERO,
            &mut no_wait,
        )
        .unwrap_err();
    assert!(matches!(err, DeviceError::Missing { .. }), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // With simulation, devices are made up on the fly and leased like real ones.
    r.simulate = true;
    let g = leases
        .acquire(
            &r,
            &Inventory::default(),
            &owner("x"),
            Duration::ZERO,
            &mut no_wait,
        )
        .unwrap();
    assert!(g.simulated);
    assert_eq!(g.units[0].device.id, "sim-atom0");
    assert!(g.env.contains(&("RBLN_DEVICES".into(), "0".into())));
    assert!(g
        .env
        .contains(&("ORCHESTRATE_SIMULATED".into(), "1".into())));
}
