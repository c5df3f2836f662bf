//! Devices through the real binary: concurrent runs competing for simulated devices,
//! a SIGKILLed holder, `orchestrate audit`, `recover` and `devices`.
//!
//! Every test uses its own lease folder (`ORCHESTRATE_LEASE_DIR`), so tests never
//! share a device with each other or with the host; the run registry stays the
//! host's because cgroups are host-wide. Tests hold the host alone (`support::host_exclusive`): a run
//! starting sweeps dead runs' cgroups, which would race with a test inspecting what
//! a killed run left.

use crate::support::wait_for;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// A lease held from grant to release.
type Interval = (DateTime<Utc>, DateTime<Utc>);

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    /// A temp folder with `leases/` and an inventory of `gpus` simulated GPUs.
    fn new(gpus: u32) -> Env {
        let env = Env {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::write(env.inventory(), format!("[simulate]\ngpu = {gpus}\n")).unwrap();
        env
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn leases(&self) -> PathBuf {
        self.path().join("leases")
    }
    fn inventory(&self) -> PathBuf {
        self.path().join("inventory.toml")
    }
    fn records(&self) -> PathBuf {
        self.path().join("records")
    }
    fn plan(&self, name: &str, body: &str) -> PathBuf {
        let p = self.path().join(format!("{name}.toml"));
        std::fs::write(
            &p,
            format!("schema = \"orchestrate/plan/v1\"\nname = \"{name}\"\n{body}"),
        )
        .unwrap();
        p
    }
    /// The binary with this test's lease folder and no inherited inventory.
    fn command(&self) -> Command {
        let mut c = crate::support::cli();
        c.env("ORCHESTRATE_LEASE_DIR", self.leases())
            .env_remove("ORCHESTRATE_INVENTORY")
            .env_remove("ORCHESTRATE_STATE_DIR")
            .current_dir(self.path());
        c
    }
    fn run(&self, plan: &Path) -> Command {
        let mut c = self.command();
        c.arg("run")
            .arg(plan)
            .arg("--records")
            .arg(self.records())
            .arg("--inventory")
            .arg(self.inventory())
            .arg("--progress")
            .arg("quiet")
            .arg("--grace")
            .arg("1s")
            .arg("--device-wait")
            .arg("5m");
        c
    }
    fn audit(&self) -> (Output, serde_json::Value) {
        let out = self.command().args(["audit", "--json"]).output().unwrap();
        let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "audit --json is not JSON ({e}): {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out, json)
    }
    fn record_dirs(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.records())
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
use orchestrate::evidence::record::RunStatus;

fn time(v: Option<&str>) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.unwrap_or_else(|| panic!("no time")))
        .unwrap()
        .with_timezone(&Utc)
}

/// Pids whose environment carries a canary of `run_id`.
fn canaries_of(run_id: &str) -> Vec<i32> {
    let needle = format!("ORCHESTRATE_ATTEMPT={run_id}/");
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) {
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

/// The run id in the body of a lease file, once it is held.
fn lease_holder(file: &Path) -> Option<String> {
    let body = std::fs::read_to_string(file).ok()?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["run_id"].as_str().map(str::to_string)
}

/// Whether any item of the audit's `key` array mentions `run_id`.
fn audit_mentions(audit: &serde_json::Value, key: &str, run_id: &str) -> bool {
    audit[key]
        .as_array()
        .unwrap_or_else(|| panic!("audit has no `{key}` array: {audit}"))
        .iter()
        .any(|v| v.to_string().contains(run_id))
}

/// Whether an audit found nothing at all.
fn audit_clean(audit: &serde_json::Value) -> bool {
    [
        "stale_leases",
        "dead_cgroups",
        "left_processes",
        "unfinished_records",
        "errors",
    ]
    .iter()
    .all(|k| audit[*k].as_array().is_some_and(|a| a.is_empty()))
}

fn kill_and_reap(child: &mut Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn sixteen_runs_share_two_devices_without_overlap() {
    let _host = crate::support::host_exclusive();
    let env = Env::new(2);
    let log = env.path().join("intervals.log");
    let plan = env.plan(
        "share",
        &format!(
            r#"allow_simulated = true
[devices]
acc = {{ kind = "gpu", count = 1 }}
[steps.use]
devices = ["acc"]
shell = 's=$(date +%s.%N); sleep 0.2; e=$(date +%s.%N); echo "$CUDA_VISIBLE_DEVICES $s $e $ORCHESTRATE_ATTEMPT" >> {}'
"#,
            log.display()
        ),
    );
    let children: Vec<Child> = (0..16)
        .map(|_| {
            env.run(&plan)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "a competing run failed: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // From the steps' own log: per device, intervals are disjoint.
    let text = std::fs::read_to_string(&log).unwrap();
    let mut by_device: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut by_run: BTreeMap<String, (String, f64, f64)> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 4, "odd log line {line:?}");
        let (s, e): (f64, f64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        by_device.entry(f[0].to_string()).or_default().push((s, e));
        let run_id = f[3].split('/').next().unwrap().to_string();
        by_run.insert(run_id, (f[0].to_string(), s, e));
    }
    assert_eq!(by_run.len(), 16, "every run logged once:\n{text}");
    assert!(
        by_device.keys().all(|d| d == "0" || d == "1"),
        "only the 2 simulated GPUs exist: {:?}",
        by_device.keys()
    );
    for (dev, iv) in &mut by_device {
        iv.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in iv.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "device {dev}: step intervals overlap: {:?} and {:?}",
                w[0],
                w[1]
            );
        }
    }

    // From the records: per device, lease intervals are disjoint, and each step ran
    // inside its own run's lease.
    let dirs = env.record_dirs();
    assert_eq!(dirs.len(), 16);
    let mut leases: BTreeMap<String, Vec<Interval>> = BTreeMap::new();
    for dir in &dirs {
        let rec = record(dir);
        assert_eq!(rec.status, RunStatus::Succeeded, "{}", dir.display());
        assert_eq!(rec.allocations.len(), 1, "{}", dir.display());
        let a = &rec.allocations[0];
        assert!(a.simulated);
        let device = a.device.clone();
        let (granted, released) = (time(Some(&a.granted_at)), time(a.released_at.as_deref()));
        assert!(granted <= released);
        let run_id = dir.file_name().unwrap().to_string_lossy().into_owned();
        let (visible, s, e) = by_run
            .get(&run_id)
            .unwrap_or_else(|| panic!("run {run_id} did not log"));
        assert_eq!(
            format!("sim-gpu{visible}"),
            device,
            "the step saw the device its record names"
        );
        let micros = |t: DateTime<Utc>| t.timestamp_micros() as f64 / 1e6;
        assert!(
            micros(granted) <= *s && *e <= micros(released),
            "run {run_id}: step ran outside its lease"
        );
        leases.entry(device).or_default().push((granted, released));
    }
    for (dev, iv) in &mut leases {
        iv.sort();
        for w in iv.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "device {dev}: recorded leases overlap: {:?} and {:?}",
                w[0],
                w[1]
            );
        }
    }
    // Nothing is left held or stale in this test's lease folder.
    let (_, audit) = env.audit();
    assert!(audit["stale_leases"].as_array().unwrap().is_empty());
}

#[test]
fn sigkilled_holder_frees_its_device_and_recover_clears_the_stale_lease() {
    let _host = crate::support::host_exclusive();
    let env = Env::new(1);
    let lease_file = env.leases().join("sim-gpu0.core0.lock");
    let hold = env.plan(
        "hold",
        "allow_simulated = true\n[devices]\nacc = { kind = \"gpu\", count = 1 }\n\
         [steps.hold]\ndevices = [\"acc\"]\nshell = \"sleep 60\"\n",
    );
    let quick = env.plan(
        "quick",
        "allow_simulated = true\n[devices]\nacc = { kind = \"gpu\", count = 1 }\n\
         [steps.use]\ndevices = [\"acc\"]\nshell = \"echo got $CUDA_VISIBLE_DEVICES\"\n",
    );

    // A holds the only device; its attempt runs.
    let mut a = env.run(&hold).stdout(Stdio::null()).spawn().unwrap();
    let a_id = wait_for("run A to hold the device", Duration::from_secs(30), || {
        lease_holder(&lease_file).filter(|id| !canaries_of(id).is_empty())
    });
    // `devices` shows who holds it.
    let out = env
        .command()
        .args(["devices", "--json", "--inventory"])
        .arg(env.inventory())
        .output()
        .unwrap();
    assert!(out.status.success());
    let view: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lease = &view["devices"][0]["leases"][0];
    assert_eq!(view["devices"][0]["id"], "sim-gpu0");
    assert_eq!(lease["state"], "held");
    assert_eq!(lease["holder"]["run_id"], a_id.as_str());
    // The lease and run-lock fds are close-on-exec: no attempt process has them.
    let lease_ino = std::fs::metadata(&lease_file).unwrap();
    for pid in canaries_of(&a_id) {
        for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .flatten()
        {
            if let Ok(m) = std::fs::metadata(fd.path()) {
                use std::os::unix::fs::MetadataExt;
                assert!(
                    !(m.ino() == lease_ino.ino() && m.dev() == lease_ino.dev()),
                    "attempt process {pid} inherited the lease fd"
                );
            }
            let target = std::fs::read_link(fd.path()).unwrap_or_default();
            assert!(
                !target.to_string_lossy().contains(&format!("{a_id}.lock")),
                "attempt process {pid} inherited the run lock fd"
            );
        }
    }

    // B waits for the device A holds.
    let b_err = env.path().join("b.stderr");
    let b = env
        .run(&quick)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&b_err).unwrap())
        .spawn()
        .unwrap();
    wait_for("run B to wait for A", Duration::from_secs(30), || {
        let s = std::fs::read_to_string(&b_err).ok()?;
        (s.contains("waiting for devices") && s.contains(&a_id)).then_some(())
    });
    kill_and_reap(&mut a);
    // A's attempt outlives A (until a sweep or recover), but the device is free.
    let b_out = b.wait_with_output().unwrap();
    assert!(
        b_out.status.success(),
        "B did not get the device after A died: {}",
        std::fs::read_to_string(&b_err).unwrap_or_default()
    );
    let b_dir = env
        .record_dirs()
        .into_iter()
        .find(|d| d.join("record.json").is_file())
        .unwrap();
    let b_rec = record(&b_dir);
    assert_eq!(b_rec.status, RunStatus::Succeeded);
    assert_eq!(b_rec.allocations[0].device, "sim-gpu0");
    assert!(b_rec.allocations[0].released_at.is_some());

    // C holds the device and is killed with nobody waiting: its lease goes stale.
    let mut c = env.run(&hold).stdout(Stdio::null()).spawn().unwrap();
    let c_id = wait_for("run C to hold the device", Duration::from_secs(30), || {
        lease_holder(&lease_file).filter(|id| *id != a_id && !canaries_of(id).is_empty())
    });
    kill_and_reap(&mut c);
    assert!(
        !canaries_of(&c_id).is_empty(),
        "C's attempt should outlive C until recover"
    );
    let (out, audit) = env.audit();
    assert_eq!(out.status.code(), Some(1), "{audit}");
    let stale = &audit["stale_leases"][0];
    assert_eq!(stale["device"], "sim-gpu0");
    assert_eq!(stale["holder"]["run_id"], c_id.as_str());
    assert_eq!(stale["reason"], "process_gone");
    assert!(audit_mentions(&audit, "dead_cgroups", &c_id), "{audit}");
    assert!(audit_mentions(&audit, "left_processes", &c_id), "{audit}");
    // The text form says the same.
    let text = env.command().arg("audit").output().unwrap();
    assert_eq!(text.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&text.stdout).contains("stale: sim-gpu0 core 0"));

    let out = env
        .command()
        .arg("recover")
        .arg("--records")
        .arg(env.records())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("cleared stale lease"), "{said}");
    // The recovery record lists what was found and removed.
    let recovery: Vec<PathBuf> = std::fs::read_dir(env.records())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("recovery-"))
        })
        .collect();
    assert_eq!(recovery.len(), 1, "{recovery:?}");
    let rr: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&recovery[0]).unwrap()).unwrap();
    assert!(rr["host"].is_string() && rr["time"].is_string());
    assert!(rr["leases_cleared"].to_string().contains(&c_id), "{rr}");
    assert!(rr["cgroups_removed"].to_string().contains(&c_id), "{rr}");
    assert!(rr["records_finished"].to_string().contains(&c_id), "{rr}");
    assert!(canaries_of(&c_id).is_empty() && canaries_of(&a_id).is_empty());

    let (out, audit) = env.audit();
    assert!(
        audit["stale_leases"].as_array().unwrap().is_empty(),
        "{audit}"
    );
    for id in [&a_id, &c_id] {
        for key in ["dead_cgroups", "left_processes"] {
            assert!(!audit_mentions(&audit, key, id), "{key} still has {id}");
        }
    }
    assert_eq!(
        out.status.code(),
        Some(if audit_clean(&audit) { 0 } else { 1 }),
        "{audit}"
    );
}

#[test]
fn audit_is_clean_after_a_clean_run_and_devices_lists_the_inventory() {
    let _host = crate::support::host_exclusive();
    let env = Env::new(2);
    let plan = env.plan(
        "clean",
        "allow_simulated = true\n[devices]\nacc = { kind = \"gpu\", count = 1 }\n\
         [steps.use]\ndevices = [\"acc\"]\nshell = \"true\"\n",
    );
    let out = env.run(&plan).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run_id = env.record_dirs()[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let (out, audit) = env.audit();
    for key in [
        "stale_leases",
        "dead_cgroups",
        "left_processes",
        "live_runs",
    ] {
        assert!(!audit_mentions(&audit, key, &run_id), "{key}: {audit}");
    }
    assert!(audit["stale_leases"].as_array().unwrap().is_empty());
    // Other users of this host may have left something; only then may it be unclean.
    let clean = audit_clean(&audit);
    if !clean {
        eprintln!("note: the host has leftovers not made by this test: {audit}");
    }
    assert_eq!(out.status.code(), Some(if clean { 0 } else { 1 }));

    let out = env
        .command()
        .args(["devices", "--json", "--inventory"])
        .arg(env.inventory())
        .output()
        .unwrap();
    assert!(out.status.success());
    let view: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let devices = view["devices"].as_array().unwrap();
    let sims: Vec<&serde_json::Value> = devices.iter().filter(|d| d["simulated"] == true).collect();
    let ids: Vec<&str> = sims.iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["sim-gpu0", "sim-gpu1"]);
    for d in sims {
        assert_eq!(d["kind"], "gpu");
        assert_eq!(d["cores"], 1);
        assert!(d["leases"].as_array().unwrap().is_empty(), "released: {d}");
        assert!(d["source"]
            .as_str()
            .unwrap()
            .contains(&*env.inventory().to_string_lossy()));
    }
    let text = env
        .command()
        .args(["devices", "--inventory"])
        .arg(env.inventory())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("sim-gpu1 (gpu simulated"));
}

#[test]
fn missing_device_kind_without_simulation_is_refused_with_exit_3() {
    let env = Env::new(0);
    std::fs::write(env.inventory(), "").unwrap();
    let plan = env.plan(
        "needs-npu",
        "[devices]\nnpu = { kind = \"rngd\", count = 1 }\n[steps.use]\ndevices = [\"npu\"]\nshell = \"true\"\n",
    );
    let out = env.run(&plan).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("`rngd`"), "names the missing kind: {err}");
    assert!(
        err.contains("allow_simulated = true") && err.contains("devices.toml"),
        "says how to declare it: {err}"
    );
    assert!(env.record_dirs().is_empty(), "nothing was run");
}

/// A device a run simulates for itself is in no inventory: `devices` names it as that
/// run's simulated device, not as a stray lease.
#[test]
fn a_runs_simulated_device_is_named_as_such_by_devices() {
    let _host = crate::support::host_shared();
    let env = Env::new(0);
    let go = env.path().join("go");
    let plan = env.plan(
        "sim",
        &format!(
            "allow_simulated = true\n[devices]\nnpu = {{ kind = \"rngd\", count = 1 }}\n\
             [steps.use]\ndevices = [\"npu\"]\n\
             shell = \"while [ ! -e {} ]; do sleep 0.05; done\"\n",
            go.display()
        ),
    );
    let mut child = env.run(&plan).spawn().unwrap();
    let text = crate::support::wait_for("the run's lease", Duration::from_secs(30), || {
        let out = env
            .command()
            .args(["devices", "--inventory"])
            .arg(env.inventory())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // The lock is taken before the run writes its name into the lease: wait
        // for the name, as a person reading it again would.
        text.contains("sim-rngd0")
            .then_some(text)
            .filter(|t| !t.contains("not named yet"))
    });
    std::fs::write(&go, "").unwrap();
    assert!(child.wait().unwrap().success());
    let run_id = env.record_dirs()[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let line = text
        .lines()
        .find(|l| l.contains("sim-rngd0"))
        .unwrap_or_default();
    assert!(
        line.starts_with("lease on simulated device sim-rngd0 core ")
            && line.contains(": held by run ")
            && line.contains(&run_id)
            && line.ends_with("which simulates it"),
        "{text}"
    );
    assert!(!text.contains("not in the inventory"), "{text}");
}
