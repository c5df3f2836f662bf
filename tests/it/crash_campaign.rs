//! Crash at every point: the orchestrator is SIGKILLed at random moments across a
//! plan with devices, repeats, outputs and a compare step. After each kill, `audit`
//! names everything that was left (counted here independently: cgroups, canary
//! processes, held leases, an unfinished record), and `recover` leaves no process,
//! cgroup or lease behind and writes a record that verifies.
//!
//! 30 kills with `ORCHESTRATE_LOAD=1` (CI), 6 otherwise. The kill times come from a
//! seeded generator (the seed is printed, `ORCHESTRATE_CRASH_SEED` replays one).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{host_exclusive, shown, Need};

const PLAN: &str = r#"schema = "orchestrate/plan/v1"
name = "crash"
allow_simulated = true
[limits]
host_memory = "256MiB"
timeout = "30s"
[devices]
gpu = { kind = "gpu", count = 1 }
[steps.compile]
shell = "mkdir -p ${work}/model && sleep 0.1 && echo weights > ${work}/model/w.bin"
outputs = ["${work}/model"]
[steps.prefill]
needs = ["compile"]
devices = ["gpu"]
repeats = 3
warmup = 1
shell = "sleep 0.15; cat ${work}/model/w.bin > ${out}/kv.bin; (sleep 30 &) ; echo done"
outputs = ["${out}/kv.bin"]
[steps.handoff]
needs = ["prefill"]
devices = ["gpu"]
shell = "sleep 0.1; cp ${steps.prefill.out}/kv.bin ${out}/kv.bin"
outputs = ["${out}/kv.bin"]
[steps.compare]
kind = "compare"
needs = ["prefill", "handoff"]
checks = [{ name = "repeats identical", metric = "bit_exact", across = "prefill", file = "kv.bin" }]
"#;

/// xorshift64*: deterministic kill times from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

struct Host {
    dir: PathBuf,
}

impl Host {
    fn cmd(&self) -> Command {
        let mut c = crate::support::cli();
        c.env("ORCHESTRATE_LEASE_DIR", self.dir.join("leases"))
            .env_remove("ORCHESTRATE_INVENTORY")
            .env_remove("ORCHESTRATE_STATE_DIR")
            .current_dir(&self.dir);
        c
    }
    fn records(&self) -> PathBuf {
        self.dir.join("records")
    }
    fn audit(&self) -> serde_json::Value {
        let out = self
            .cmd()
            .args(["audit", "--json", "--records"])
            .arg(self.records())
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", shown(&out)))
    }
}

/// What the run left, counted without the tool: cgroups, processes, held lease
/// bodies naming it, and whether its record is unfinished.
#[derive(Debug, Default)]
struct Left {
    cgroups: Vec<String>,
    processes: Vec<i32>,
    leases: Vec<PathBuf>,
    unfinished: bool,
}

fn left_by(host: &Host, run_id: &str, record_dir: Option<&Path>) -> Left {
    let iso = orchestrate::isolate::Isolator::new(orchestrate::isolate::Mode::Auto).unwrap();
    let prefix = format!("orchestrate-{run_id}-");
    let canary = format!("{run_id}/");
    let leases = std::fs::read_dir(host.dir.join("leases"))
        .map(|r| {
            r.flatten()
                .map(|e| e.path())
                .filter(|p| std::fs::read_to_string(p).is_ok_and(|b| b.contains(run_id)))
                .collect()
        })
        .unwrap_or_default();
    Left {
        cgroups: iso
            .list()
            .into_iter()
            .filter(|n| n.starts_with(&prefix))
            .collect(),
        processes: orchestrate::isolate::processes_with_canary(&|c| c.starts_with(&canary))
            .into_iter()
            .map(|(p, _)| p)
            .collect(),
        leases,
        // A record without its attestation (killed between the two) is unfinished
        // too: nobody could verify it.
        unfinished: record_dir.is_some_and(|d| {
            d.join("journal.jsonl").is_file()
                && (!d.join("record.json").is_file()
                    || !d.join("attestation.intoto.jsonl").is_file())
        }),
    }
}

fn mentions(audit: &serde_json::Value, key: &str, what: &str) -> bool {
    audit[key]
        .as_array()
        .is_some_and(|a| a.iter().any(|v| v.to_string().contains(what)))
}

#[test]
fn sigkill_at_random_moments_leaves_nothing_recover_cannot_clean() {
    let _host = host_exclusive();
    let kills = if Need::Load.required() { 30 } else { 6 };
    let seed = std::env::var("ORCHESTRATE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64 | 1)
        });
    eprintln!("crash campaign: {kills} kills, ORCHESTRATE_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let t = tempfile::tempdir().unwrap();
    let host = Host {
        dir: t.path().to_path_buf(),
    };
    std::fs::write(t.path().join("plan.toml"), PLAN).unwrap();
    std::fs::write(t.path().join("inventory.toml"), "[simulate]\ngpu = 1\n").unwrap();
    // How long an undisturbed run takes: kills land anywhere in it.
    let start = Instant::now();
    let out = host
        .cmd()
        .args([
            "run",
            "plan.toml",
            "--progress",
            "quiet",
            "--inventory",
            "inventory.toml",
        ])
        .arg("--records")
        .arg(host.records())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    let span = start.elapsed().as_millis() as u64;
    let mut seen_left = 0;
    for k in 0..kills {
        let at = Duration::from_millis(rng.next() % (span + 50));
        let mut child = host
            .cmd()
            .args([
                "run",
                "plan.toml",
                "--progress",
                "quiet",
                "--inventory",
                "inventory.toml",
            ])
            .arg("--records")
            .arg(host.records())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at);
        let _ = child.kill();
        let _ = child.wait();
        // The newest folder is this run's (run ids sort by time), if it got that far.
        let newest = std::fs::read_dir(host.records())
            .ok()
            .and_then(|r| r.flatten().map(|e| e.path()).filter(|p| p.is_dir()).max());
        let Some(run_id) = newest
            .as_ref()
            .and_then(|d| d.file_name())
            .map(|n| n.to_string_lossy().into_owned())
        else {
            continue;
        };
        let dir = host.records().join(&run_id);
        let left = left_by(&host, &run_id, Some(&dir));
        let audit = host.audit();
        // The dead run's attempts go on running (that is what recover is for), so
        // their processes come and go: those alive before and after the audit must
        // be named.
        let again = left_by(&host, &run_id, Some(&dir));
        let ctx = format!("kill {k} at {at:?} (seed {seed}): {left:?}\naudit: {audit}");
        for c in &left.cgroups {
            assert!(
                mentions(&audit, "dead_cgroups", c),
                "cgroup not named: {ctx}"
            );
        }
        for p in left
            .processes
            .iter()
            .filter(|p| again.processes.contains(p))
        {
            assert!(
                audit["left_processes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x["pid"] == *p),
                "process not named: {ctx}"
            );
        }
        for l in &left.leases {
            let name = l.file_name().unwrap().to_string_lossy().into_owned();
            // Its holder died, so the kernel dropped the lock: a stale lease.
            assert!(
                mentions(&audit, "stale_leases", &name),
                "lease not named: {ctx}"
            );
        }
        if left.unfinished {
            assert!(
                mentions(&audit, "unfinished_records", &run_id),
                "record not named: {ctx}"
            );
        }
        let something = !left.cgroups.is_empty() || !left.processes.is_empty() || left.unfinished;
        if something {
            seen_left += 1;
            assert_ne!(
                audit["unsure_runs"].as_array().map(Vec::len),
                Some(1),
                "{ctx}"
            );
        }

        let out = host
            .cmd()
            .arg("recover")
            .arg("--records")
            .arg(host.records())
            .output()
            .unwrap();
        assert!(out.status.success(), "recover: {}\n{ctx}", shown(&out));
        let after = left_by(&host, &run_id, Some(&dir));
        assert!(
            after.cgroups.is_empty() && after.processes.is_empty() && !after.unfinished,
            "recover left {after:?}\n{ctx}"
        );
        let audit = host.audit();
        for key in [
            "dead_cgroups",
            "left_processes",
            "unfinished_records",
            "stale_leases",
            "unsure_runs",
        ] {
            assert!(
                !mentions(&audit, key, &run_id),
                "after recover, {key}: {ctx}"
            );
        }
        if dir.join("journal.jsonl").is_file() {
            let v = crate::support::cli()
                .arg("verify")
                .arg(&dir)
                .output()
                .unwrap();
            assert!(
                v.status.success(),
                "the recovered record does not verify: {}\n{ctx}",
                shown(&v)
            );
        }
    }
    eprintln!("crash campaign: {seen_left} of {kills} kills left something to recover");
}
