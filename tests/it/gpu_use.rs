//! GPU use per attempt through the real binary against the fake NVML: the
//! attempt's own device memory, the energy counter's delta, utilization,
//! temperature, "not supported" kept as such, a process on a GPU the attempt
//! does not own (a warning under `auto`, a failed step under `cgroup`), MIG
//! instances watched by their own UUID, and the release audit over GPU contexts.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::devices_nvml::fake_nvml;
use crate::support::host_shared;

const GPU0: &str = "GPU-00000000-0000-4000-8000-0000000000c0";
const GPU1: &str = "GPU-00000000-0000-4000-8000-0000000000c1";
const MIG0: &str = "MIG-00000000-0000-4000-8000-0000000000d0";

/// gpu0 reads 250 W, 87% busy, 61 °C, power-capped; gpu1 (MIG mode) reads
/// nothing at all; gpu2 is a plain GPU without readings.
const HOST: &str =
    "gpu GPU-00000000-0000-4000-8000-0000000000c0 150754820096 00000000:19:00.0 0 NVIDIA H200
gpu GPU-00000000-0000-4000-8000-0000000000c1 150754820096 00000000:3B:00.0 1 NVIDIA H200
mig 1 MIG-00000000-0000-4000-8000-0000000000d0 19327352832 NVIDIA H200 MIG 1g.18gb
gpu GPU-00000000-0000-4000-8000-0000000000c2 85899345920 00000000:5E:00.0 0 NVIDIA A100
sense 0 250000 87 61 4
";

struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    fn new() -> Host {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("nvml.conf"), HOST).unwrap();
        std::fs::write(dir.path().join("inventory.toml"), "").unwrap();
        std::fs::create_dir(dir.path().join("procs")).unwrap();
        Host { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs a one-step plan holding `request`, whose shell `script` may "use" a
    /// GPU by writing `$P/<uuid>.<pid>` (`$P` is the fake's process folder).
    fn run(&self, request: &str, isolation: &str, script: &str) -> (Output, Option<PathBuf>) {
        let plan = self.path("plan.toml");
        std::fs::write(
            &plan,
            format!(
                "schema = \"orchestrate/plan/v1\"\nname = \"gpu-use\"\n[limits]\nisolation = \"{isolation}\"\n\
                 [devices.g]\n{request}\n[steps.use]\nshell = '''{script}'''\ndevices = [\"g\"]\n\
                 [steps.use.env]\nP = \"{}\"\n",
                self.path("procs").display()
            ),
        )
        .unwrap();
        let out = crate::support::cli()
            .arg("run")
            .arg(&plan)
            .args(["--progress", "quiet", "--inventory"])
            .arg(self.path("inventory.toml"))
            .arg("--records")
            .arg(self.path("records"))
            .env("ORCHESTRATE_LEASE_DIR", self.path("leases"))
            .env("ORCHESTRATE_NVML_LIB", fake_nvml())
            .env("FAKE_NVML_CONFIG", self.path("nvml.conf"))
            .env("FAKE_NVML_PROCS", self.path("procs"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let dir = text
            .lines()
            .last()
            .map(|l| PathBuf::from(l.trim()))
            .filter(|d| d.join("record.json").is_file());
        (out, dir)
    }
}

fn record(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("record.json")).unwrap()).unwrap()
}

fn shown(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn pr_body(dir: &Path) -> String {
    let out = crate::support::cli()
        .arg("report")
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn an_attempts_gpu_memory_energy_and_readings_are_on_the_record_and_in_every_report() {
    let _host = host_shared();
    let h = Host::new();
    let (out, dir) = h.run(
        "kind = \"gpu\"\nids = [\"gpu0\"]",
        "auto",
        "echo 44236301926 > $$P/$$CUDA_VISIBLE_DEVICES.$$$$; sleep 1.2",
    );
    assert!(out.status.success(), "{}", shown(&out));
    let dir = dir.unwrap();
    let rec = record(&dir);
    let a = &rec["steps"][0]["attempts"][0];
    let g = &a["gpus"][0];
    assert_eq!(g["uuid"], GPU0, "{g:#}");
    assert_eq!(g["device"], "gpu0");
    assert_eq!(g["source"], "NVML");
    assert_eq!(g["peak_memory_bytes"], 44236301926u64, "{g:#}");
    assert_eq!(g["utilization_max_percent"], 87);
    assert_eq!(g["temperature_max_c"], 61);
    assert_eq!(g["throttle_reasons"], serde_json::json!(["sw_power_cap"]));
    assert!(g.get("not_supported").is_none(), "{g:#}");
    assert!(g["samples"].as_u64().unwrap() >= 10, "{g:#}");
    // 250 W over the attempt: its wall, give or take the sampler's start and stop.
    let wall_s = a["wall_ms"].as_f64().unwrap() / 1000.0;
    let j = g["energy_j"].as_f64().unwrap();
    assert!(
        j > 250.0 * (wall_s - 0.3) && j < 250.0 * (wall_s + 0.3),
        "{j} J in {wall_s} s"
    );
    let audit = &rec["release_audit"];
    assert!(
        audit["checked"].to_string().contains("GPU contexts (NVML)"),
        "{audit}"
    );
    assert_eq!(audit["passed"], true);
    // Every report says it, with the record's own figure.
    let line = format!(
        "peak GPU memory 41.2 GiB, {} J",
        orchestrate::report::format::number(j)
    );
    assert!(pr_body(&dir).contains(&line), "{line}\n{}", pr_body(&dir));
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains(&format!("device use: use on gpu0: {}", &line)));
    let v = crate::support::cli()
        .arg("verify")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", shown(&v));
}

#[test]
fn readings_a_device_does_not_support_are_said_so_never_zero() {
    let _host = host_shared();
    let h = Host::new();
    let (out, dir) = h.run("kind = \"gpu\"\nids = [\"gpu2\"]", "auto", "sleep 0.3");
    assert!(out.status.success(), "{}", shown(&out));
    let rec = record(&dir.unwrap());
    let g = &rec["steps"][0]["attempts"][0]["gpus"][0];
    assert_eq!(
        g["not_supported"],
        serde_json::json!(["energy", "temperature", "throttle", "utilization"]),
        "{g:#}"
    );
    for absent in ["energy_j", "utilization_mean_percent", "temperature_max_c"] {
        assert!(g.get(absent).is_none(), "{absent}: {g:#}");
    }
    // It never used the GPU: 0 bytes, which is measured, not unsupported.
    assert_eq!(g["peak_memory_bytes"], 0);
}

#[test]
fn a_mig_instance_is_watched_by_its_own_uuid() {
    let _host = host_shared();
    let h = Host::new();
    let (out, dir) = h.run(
        "kind = \"gpu\"\nmig = \"1g.18gb\"",
        "auto",
        "echo 1073741824 > $$P/$$CUDA_VISIBLE_DEVICES.$$$$; sleep 0.6",
    );
    assert!(out.status.success(), "{}", shown(&out));
    let rec = record(&dir.unwrap());
    let g = &rec["steps"][0]["attempts"][0]["gpus"][0];
    assert_eq!(
        (g["uuid"].as_str(), g["device"].as_str()),
        (Some(MIG0), Some("gpu1"))
    );
    assert_eq!(g["peak_memory_bytes"], 1073741824u64, "{g:#}");
    assert!(
        rec["warnings"].as_array().unwrap().is_empty(),
        "{}",
        rec["warnings"]
    );
}

#[test]
fn a_process_on_a_gpu_it_does_not_own_is_a_warning_under_auto() {
    let _host = host_shared();
    let h = Host::new();
    let (out, dir) = h.run(
        "kind = \"gpu\"\nids = [\"gpu0\"]",
        "auto",
        &format!("echo 4096 > $$P/{GPU1}.$$$$; sleep 0.6"),
    );
    assert!(out.status.success(), "{}", shown(&out));
    let rec = record(&dir.unwrap());
    let m = &rec["steps"][0]["attempts"][0]["gpu_misuse"][0];
    assert_eq!(
        (m["uuid"].as_str(), m["device"].as_str()),
        (Some(GPU1), Some("gpu1")),
        "{m}"
    );
    assert_eq!(m["memory_bytes"], 4096);
    let w = rec["warnings"].to_string();
    assert!(
        w.contains("a GPU it did not own") && w.contains(GPU1),
        "{w}"
    );
}

#[test]
fn a_process_on_a_gpu_it_does_not_own_fails_the_step_under_cgroup() {
    if orchestrate::isolate::Isolator::new(orchestrate::isolate::Mode::Cgroup).is_err() {
        crate::support::skip_or_fail(crate::support::Need::Cgroups, "no cgroup isolation here");
        return;
    }
    let _host = host_shared();
    let h = Host::new();
    let (out, dir) = h.run(
        "kind = \"gpu\"\nids = [\"gpu0\"]",
        "cgroup",
        &format!("echo 4096 > $$P/{GPU1}.$$$$; sleep 0.6"),
    );
    assert!(!out.status.success(), "{}", shown(&out));
    let rec = record(&dir.unwrap());
    assert_eq!(rec["steps"][0]["status"], "failed");
    assert!(
        rec["failures"]
            .to_string()
            .contains("used a GPU it did not own"),
        "{}",
        rec["failures"]
    );
}
