//! MIG instances leased as devices, through the real binary against the fake
//! NVML: two runs share a GPU in MIG mode, one instance each, and neither they
//! nor anyone else can then take the whole GPU; the whole GPU held keeps MIG
//! requests out; a profile names the instance kind.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::devices_nvml::fake_nvml;
use crate::support::{host_shared, wait_for};

const MIG_GPU: &str =
    "gpu GPU-00000000-0000-4000-8000-0000000000a0 150754820096 00000000:19:00.0 0 NVIDIA H200
gpu GPU-00000000-0000-4000-8000-0000000000a1 150754820096 00000000:3B:00.0 1 NVIDIA H200
mig 1 MIG-00000000-0000-4000-8000-0000000000b0 19327352832 NVIDIA H200 MIG 1g.18gb
mig 1 MIG-00000000-0000-4000-8000-0000000000b1 19327352832 NVIDIA H200 MIG 1g.18gb
mig 1 MIG-00000000-0000-4000-8000-0000000000b2 76235669504 NVIDIA H200 MIG 3g.71gb
";

struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    fn new() -> Host {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("nvml.conf"), MIG_GPU).unwrap();
        std::fs::write(dir.path().join("inventory.toml"), "").unwrap();
        Host { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A plan of one step holding `request` (a `[devices.g]` body) for `hold`
    /// seconds, printing what it was given.
    fn plan(&self, name: &str, request: &str, hold: u32) -> PathBuf {
        let p = self.path(&format!("{name}.toml"));
        std::fs::write(
            &p,
            format!(
                "schema = \"orchestrate/plan/v1\"\nname = \"{name}\"\n[devices.g]\n{request}\n\
                 [steps.use]\nshell = \"echo $CUDA_VISIBLE_DEVICES; sleep {hold}\"\ndevices = [\"g\"]\n"
            ),
        )
        .unwrap();
        p
    }

    fn cmd(&self, plan: &Path) -> Command {
        let mut c = crate::support::cli();
        c.arg("run")
            .arg(plan)
            .args(["--progress", "quiet", "--device-wait", "0s", "--inventory"])
            .arg(self.path("inventory.toml"))
            .arg("--records")
            .arg(self.path("records"))
            .env("ORCHESTRATE_LEASE_DIR", self.path("leases"))
            .env("ORCHESTRATE_NVML_LIB", fake_nvml())
            .env("FAKE_NVML_CONFIG", self.path("nvml.conf"));
        c
    }

    fn start(&self, plan: &Path) -> Child {
        self.cmd(plan)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn run(&self, plan: &Path) -> Output {
        self.cmd(plan).output().unwrap()
    }

    /// Cores of `gpu1` held now.
    fn held(&self) -> usize {
        let out = crate::support::cli()
            .args(["devices", "--json", "--inventory"])
            .arg(self.path("inventory.toml"))
            .env("ORCHESTRATE_LEASE_DIR", self.path("leases"))
            .env("ORCHESTRATE_NVML_LIB", fake_nvml())
            .env("FAKE_NVML_CONFIG", self.path("nvml.conf"))
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["devices"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["id"] == "gpu1")
            .map(|d| d["leases"].as_array().map_or(0, Vec::len))
            .sum()
    }
}

/// What the run's step printed: its `CUDA_VISIBLE_DEVICES`.
fn given(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    let dir = text.lines().last().unwrap_or_default().trim();
    std::fs::read_to_string(Path::new(dir).join("steps/use/1/stdout.log"))
        .unwrap_or_else(|e| panic!("{e}: {text}\n{}", String::from_utf8_lossy(&out.stderr)))
        .trim()
        .to_string()
}

fn shown(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn two_runs_hold_two_instances_of_one_gpu_and_nobody_takes_the_whole_gpu_meanwhile() {
    let _host = host_shared();
    let h = Host::new();
    let slice = h.plan("slice", "kind = \"gpu\"\nmig = \"1g.18gb\"", 4);
    let (a, b) = (h.start(&slice), h.start(&slice));
    wait_for("both instances held", Duration::from_secs(60), || {
        (h.held() == 2).then_some(())
    });
    let whole = h.plan("whole", "kind = \"gpu\"\nids = [\"gpu1\"]", 0);
    let refused = h.run(&whole);
    assert!(!refused.status.success(), "{}", shown(&refused));
    assert!(shown(&refused).contains("busy"), "{}", shown(&refused));
    // The 3g instance is still free for a third run.
    let big = h.run(&h.plan("big", "kind = \"gpu\"\nmig = \"3g.71gb\"", 0));
    assert!(big.status.success(), "{}", shown(&big));
    assert_eq!(given(&big), "MIG-00000000-0000-4000-8000-0000000000b2");
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(
        a.status.success() && b.status.success(),
        "{}\n{}",
        shown(&a),
        shown(&b)
    );
    let mut got = [given(&a), given(&b)];
    got.sort();
    assert_eq!(
        got,
        [
            "MIG-00000000-0000-4000-8000-0000000000b0",
            "MIG-00000000-0000-4000-8000-0000000000b1"
        ]
    );
    // Released: the whole GPU is free again, and a whole grant names every instance.
    let out = h.run(&whole);
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(
        given(&out),
        "MIG-00000000-0000-4000-8000-0000000000b0,MIG-00000000-0000-4000-8000-0000000000b1,MIG-00000000-0000-4000-8000-0000000000b2"
    );
}

#[test]
fn the_whole_gpu_held_keeps_instance_requests_out() {
    let _host = host_shared();
    let h = Host::new();
    let whole = h.start(&h.plan("whole", "kind = \"gpu\"\nids = [\"gpu1\"]", 3));
    wait_for("the whole GPU held", Duration::from_secs(60), || {
        (h.held() == 3).then_some(())
    });
    let slice = h.run(&h.plan("slice", "kind = \"gpu\"\nmig = \"any\"", 0));
    assert!(!slice.status.success(), "{}", shown(&slice));
    assert!(shown(&slice).contains("busy"), "{}", shown(&slice));
    assert!(whole.wait_with_output().unwrap().status.success());
}

#[test]
fn a_profile_no_gpu_has_is_refused_before_anything_runs() {
    let h = Host::new();
    let out = h.run(&h.plan("odd", "kind = \"gpu\"\nmig = \"7g.141gb\"", 0));
    assert!(!out.status.success());
    let text = shown(&out);
    assert!(text.contains("MIG") && text.contains("7g.141gb"), "{text}");
}

#[test]
fn mig_is_checked_where_the_plan_says_it() {
    let h = Host::new();
    for (body, says) in [
        (
            "kind = \"gpu\"\nmig = \"1g.18gb\"\ncores = 1",
            "both `mig` and `cores`",
        ),
        ("kind = \"rngd\"\nmig = \"1g.18gb\"", "non-GPU device"),
        ("kind = \"gpu\"\nmig = \"1g 18gb\"", "not a MIG profile"),
    ] {
        let plan = h.plan("bad", body, 0);
        let out = crate::support::cli()
            .arg("check")
            .arg(&plan)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{body}");
        let text = shown(&out);
        assert!(
            text.contains(says) && text.contains("bad.toml:"),
            "{body}: {text}"
        );
    }
}
