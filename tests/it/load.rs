//! The load campaign: a mechanism that runs once per step must hold on thousands of
//! steps, since a rare failure per step is a certain failure per sweep. Runs only
//! with `ORCHESTRATE_LOAD=1` (`.ci/run` sets it; about a minute on 2 cores); the
//! 100 000-step stress is `cargo bench --bench stress`.

use std::path::Path;

use crate::support::{host_shared, record_json, shown, Need};

/// 1000 trivial steps, independent or as one chain, each with a memory and pids
/// limit (the limit writes are what a pending SIGCHLD used to interrupt); every
/// `measured`-th step (0: none) repeats twice, so its attempts run alone.
fn plan(chain: bool, measured: usize) -> String {
    let mut s = String::from(
        "schema = \"orchestrate/plan/v1\"\nname = \"load\"\n[limits]\nhost_memory = \"64MiB\"\npids = 64\ntimeout = \"30s\"\n",
    );
    for i in 0..1000 {
        s.push_str(&format!("[steps.s{i}]\nrun = [\"true\"]\n"));
        if measured > 0 && i % measured == 0 {
            s.push_str("repeats = 2\n");
        }
        if chain && i > 0 {
            s.push_str(&format!("needs = [\"s{}\"]\n", i - 1));
        }
    }
    s
}

/// Runs `plan` once; the failures it recorded (empty when all 1000 steps succeeded,
/// the release audit passed, nothing of the run was left behind and `more` found
/// nothing wrong in the record).
fn run_once(
    root: &Path,
    plan: &Path,
    jobs: &str,
    more: &dyn Fn(&serde_json::Value) -> Vec<String>,
) -> Vec<String> {
    run_with(root, plan, jobs, &[], more)
}

/// [`run_once`] with more variables in the orchestrator's environment.
fn run_with(
    root: &Path,
    plan: &Path,
    jobs: &str,
    env: &[(&str, &std::ffi::OsStr)],
    more: &dyn Fn(&serde_json::Value) -> Vec<String>,
) -> Vec<String> {
    let records = root.join("records");
    let out = crate::support::cli()
        .envs(env.iter().copied())
        .arg("run")
        .arg(plan)
        .args(["--jobs", jobs, "--progress", "quiet", "--records"])
        .arg(&records)
        .arg("--work")
        .arg(root.join("work"))
        .output()
        .unwrap();
    let Some(dir) = crate::support::record_dirs(&records).pop() else {
        return vec![format!("no record: {}", shown(&out))];
    };
    let rec = record_json(&dir);
    let mut problems: Vec<String> = rec["failures"]
        .as_array()
        .map(|f| f.iter().map(|x| x["what"].to_string()).collect())
        .unwrap_or_default();
    let ok_steps = rec["steps"]
        .as_array()
        .map(|s| s.iter().filter(|x| x["status"] == "succeeded").count())
        .unwrap_or(0);
    if ok_steps != 1000 {
        problems.push(format!("{ok_steps} of 1000 steps succeeded"));
    }
    if rec["release_audit"]["passed"] != true {
        problems.push(format!("release audit: {}", rec["release_audit"]));
    }
    problems.extend(more(&rec));
    let run_id = dir.file_name().unwrap().to_string_lossy().into_owned();
    problems.extend(
        crate::trust_plan::leftovers(&run_id)
            .into_iter()
            .map(|l| format!("left behind: {l}")),
    );
    if !out.status.success() && problems.is_empty() {
        problems.push(shown(&out));
    }
    // Keep the disk small: 25 runs make 150 000 inodes otherwise.
    let _ = std::fs::remove_dir_all(&records);
    let _ = std::fs::remove_dir_all(root.join("work"));
    problems
}

#[test]
fn thousand_step_plans_have_no_spurious_failure() {
    if !Need::Load.required() {
        eprintln!("skipping: the load campaign runs with ORCHESTRATE_LOAD=1");
        return;
    }
    let _host = host_shared();
    let t = tempfile::tempdir().unwrap();
    let (wide, chain) = (t.path().join("wide.toml"), t.path().join("chain.toml"));
    std::fs::write(&wide, plan(false, 0)).unwrap();
    std::fs::write(&chain, plan(true, 0)).unwrap();
    let nothing = |_: &serde_json::Value| Vec::new();
    let mut failures = Vec::new();
    for i in 0..20 {
        for p in run_once(t.path(), &wide, "2", &nothing) {
            failures.push(format!("independent run {i}: {p}"));
        }
    }
    for i in 0..5 {
        for p in run_once(t.path(), &chain, "2", &nothing) {
            failures.push(format!("chain run {i}: {p}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} spurious failures in 25 000 steps:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Measured attempts of a run that did not run alone.
fn shared_measured_attempts(rec: &serde_json::Value) -> Vec<String> {
    let mut bad = Vec::new();
    for s in rec["steps"].as_array().into_iter().flatten() {
        let measured = s["attempts"].as_array().is_some_and(|a| a.len() > 1);
        for (n, a) in s["attempts"].as_array().into_iter().flatten().enumerate() {
            if measured && a["alone"] != true {
                bad.push(format!(
                    "{} attempt {}: alone = {}",
                    s["id"],
                    n + 1,
                    a["alone"]
                ));
            }
        }
    }
    bad
}

#[test]
fn exclusive_seats_hold_on_a_thousand_steps() {
    if !Need::Load.required() {
        eprintln!("skipping: the load campaign runs with ORCHESTRATE_LOAD=1");
        return;
    }
    let _host = host_shared();
    let t = tempfile::tempdir().unwrap();
    // 250 measured steps (500 attempts that each take the host alone) among 750
    // that share it, three times.
    let mixed = t.path().join("mixed.toml");
    std::fs::write(&mixed, plan(false, 4)).unwrap();
    let mut failures = Vec::new();
    for i in 0..3 {
        for p in run_once(t.path(), &mixed, "2", &shared_measured_attempts) {
            failures.push(format!("mixed run {i}: {p}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures in 3 000 steps:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// What the GPU watch got wrong on a run: an attempt that owned a GPU with no
/// sample of it, a misuse reported, or a release audit that did not look at GPUs.
fn gpu_watch_problems(rec: &serde_json::Value) -> Vec<String> {
    let mut bad = Vec::new();
    for s in rec["steps"].as_array().into_iter().flatten() {
        for a in s["attempts"].as_array().into_iter().flatten() {
            let g = &a["gpus"][0];
            if g["samples"].as_u64().unwrap_or(0) == 0 || g["peak_memory_bytes"] != 0 {
                bad.push(format!("{}: gpus {}", s["id"], a["gpus"]));
            }
            if a.get("gpu_misuse").is_some() {
                bad.push(format!("{}: misuse {}", s["id"], a["gpu_misuse"]));
            }
        }
    }
    if !rec["release_audit"]["checked"]
        .to_string()
        .contains("GPU contexts")
    {
        bad.push(format!("release audit: {}", rec["release_audit"]));
    }
    bad
}

/// The per-attempt GPU watch (a sampling thread, NVML handles, a lease) on a
/// thousand steps, against the fake NVML: half lease a MIG instance, half the
/// other GPU, two at a time.
#[test]
fn the_gpu_watch_holds_on_a_thousand_steps() {
    if !Need::Load.required() {
        eprintln!("skipping: the load campaign runs with ORCHESTRATE_LOAD=1");
        return;
    }
    let _host = host_shared();
    let t = tempfile::tempdir().unwrap();
    let conf = t.path().join("nvml.conf");
    std::fs::write(
        &conf,
        "gpu GPU-00000000-0000-4000-8000-0000000000e0 85899345920 00000000:19:00.0 0 NVIDIA A100\n\
         gpu GPU-00000000-0000-4000-8000-0000000000e1 85899345920 00000000:3B:00.0 1 NVIDIA A100\n\
         mig 1 MIG-00000000-0000-4000-8000-0000000000f0 10737418240 NVIDIA A100 MIG 1g.10gb\n\
         mig 1 MIG-00000000-0000-4000-8000-0000000000f1 10737418240 NVIDIA A100 MIG 1g.10gb\n\
         sense 0 250000 50 60 0\n",
    )
    .unwrap();
    std::fs::write(t.path().join("inventory.toml"), "").unwrap();
    let mut plan = String::from(
        "schema = \"orchestrate/plan/v1\"\nname = \"gpu-load\"\n[limits]\nhost_memory = \"64MiB\"\n\
         pids = 64\ntimeout = \"30s\"\n[devices]\nslice = { kind = \"gpu\", mig = \"any\" }\n\
         whole = { kind = \"gpu\", ids = [\"gpu0\"] }\n",
    );
    for i in 0..1000 {
        let d = if i % 2 == 0 { "slice" } else { "whole" };
        plan.push_str(&format!(
            "[steps.s{i}]\nrun = [\"true\"]\ndevices = [\"{d}\"]\n"
        ));
    }
    let path = t.path().join("gpu-load.toml");
    std::fs::write(&path, plan).unwrap();
    let (inventory, leases) = (t.path().join("inventory.toml"), t.path().join("leases"));
    let env = [
        (
            "ORCHESTRATE_NVML_LIB",
            crate::devices_nvml::fake_nvml().as_os_str(),
        ),
        ("FAKE_NVML_CONFIG", conf.as_os_str()),
        ("ORCHESTRATE_INVENTORY", inventory.as_os_str()),
        ("ORCHESTRATE_LEASE_DIR", leases.as_os_str()),
    ];
    let failures = run_with(t.path(), &path, "2", &env, &gpu_watch_problems);
    assert!(
        failures.is_empty(),
        "{} failures in 1 000 steps:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
