//! NVIDIA GPUs through NVML, against a fake NVML (`tests/fixtures/nvml/fake_nvml.c`,
//! built here with the system C compiler) loaded through the same path as the
//! real `libnvidia-ml.so.1`: `ORCHESTRATE_NVML_LIB`.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

/// The fake library, built once per test binary.
pub(crate) fn fake_nvml() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvml/fake_nvml.c");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("fake-nvml-{}", std::process::id()))
            .join("libnvidia-ml.so.1");
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let built = std::process::Command::new(&cc)
            .args(["-shared", "-fPIC", "-Wall", "-Werror", "-o"])
            .arg(&out)
            .arg(&src)
            .output()
            .unwrap_or_else(|e| panic!("{cc}: {e} (a C compiler builds the fake NVML)"));
        assert!(
            built.status.success(),
            "{}",
            String::from_utf8_lossy(&built.stderr)
        );
        out
    })
}

const TWO_GPUS: &str = "driver 550.54.15
cuda 12040
gpu GPU-00000000-0000-4000-8000-0000000000a0 150754820096 00000000:19:00.0 0 NVIDIA H200
gpu GPU-00000000-0000-4000-8000-0000000000a1 85899345920 00000000:3B:00.0 1 NVIDIA A100-SXM4-80GB
gpu GPU-00000000-0000-4000-8000-0000000000a2 25769803776 00000000:5E:00.0 - NVIDIA A10
";

/// `orchestrate devices --json` with the fake NVML answering from `config`
/// (`None`: no driver loaded), an empty inventory and a lease folder of its own.
fn devices(config: Option<&str>, lib: &Path) -> (serde_json::Value, Output) {
    let t = tempfile::tempdir().unwrap();
    let inv = t.path().join("inventory.toml");
    std::fs::write(&inv, "").unwrap();
    let mut cmd = crate::support::cli();
    cmd.args(["devices", "--json", "--inventory"])
        .arg(&inv)
        .env("ORCHESTRATE_LEASE_DIR", t.path().join("leases"))
        .env("ORCHESTRATE_NVML_LIB", lib)
        .env_remove("FAKE_NVML_CONFIG");
    if let Some(c) = config {
        let path = t.path().join("nvml.conf");
        std::fs::write(&path, c).unwrap();
        cmd.env("FAKE_NVML_CONFIG", path);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).unwrap(), out)
}

#[test]
fn nvml_lists_each_gpu_with_uuid_memory_versions_bus_and_mig_mode() {
    let (v, _) = devices(Some(TWO_GPUS), fake_nvml());
    let gpus = v["devices"].as_array().unwrap();
    assert_eq!(gpus.len(), 3, "{v:#}");
    let h200 = &gpus[0];
    assert_eq!(h200["id"], "gpu0");
    assert_eq!(h200["uuid"], "GPU-00000000-0000-4000-8000-0000000000a0");
    assert_eq!(h200["name"], "NVIDIA H200");
    assert_eq!(h200["memory_bytes"], 150754820096u64);
    assert_eq!(h200["driver"], "550.54.15");
    assert_eq!(h200["source"], "NVML");
    assert_eq!(
        h200["gpu"],
        serde_json::json!({
            "pci_bus_id": "00000000:19:00.0",
            "cuda_driver_version": "12.4",
            "mig": "disabled"
        })
    );
    assert_eq!(gpus[1]["gpu"]["mig"], "enabled");
    assert_eq!(gpus[2]["gpu"]["mig"], "not_supported");
    assert_eq!(gpus[2]["index"], 2);
    assert_eq!(v["warnings"], serde_json::json!([]));
}

#[test]
fn the_text_listing_names_uuid_and_mig_mode() {
    let t = tempfile::tempdir().unwrap();
    let conf = t.path().join("nvml.conf");
    std::fs::write(&conf, TWO_GPUS).unwrap();
    std::fs::write(t.path().join("inv.toml"), "").unwrap();
    let out = crate::support::cli()
        .args(["devices", "--inventory"])
        .arg(t.path().join("inv.toml"))
        .env("ORCHESTRATE_LEASE_DIR", t.path().join("leases"))
        .env("ORCHESTRATE_NVML_LIB", fake_nvml())
        .env("FAKE_NVML_CONFIG", &conf)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "gpu1 (gpu, index 1, 1 core(s)) GPU-00000000-0000-4000-8000-0000000000a1 MIG enabled"
        ),
        "{text}"
    );
    assert!(text.contains("from NVML: free"), "{text}");
}

#[test]
fn a_host_without_the_driver_has_no_nvidia_devices_and_no_error() {
    let (v, out) = devices(None, fake_nvml());
    assert_eq!(v["devices"], serde_json::json!([]), "{v:#}");
    assert_eq!(v["warnings"], serde_json::json!([]), "{v:#}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_named_library_that_will_not_load_is_a_warning_not_a_failure() {
    let t = tempfile::tempdir().unwrap();
    let (v, _) = devices(Some(TWO_GPUS), &t.path().join("missing.so"));
    assert_eq!(v["devices"], serde_json::json!([]), "{v:#}");
    let w = v["warnings"].to_string();
    assert!(
        w.contains("ORCHESTRATE_NVML_LIB") && w.contains("missing.so"),
        "{w}"
    );
}

#[test]
fn an_inventory_entry_keeps_its_words_and_gains_what_nvml_says() {
    let t = tempfile::tempdir().unwrap();
    let inv = t.path().join("inv.toml");
    std::fs::write(
        &inv,
        "[[device]]\nid = \"gpu0\"\nkind = \"gpu\"\nname = \"the H200 in rack 3\"\n",
    )
    .unwrap();
    let conf = t.path().join("nvml.conf");
    std::fs::write(&conf, TWO_GPUS).unwrap();
    let out = crate::support::cli()
        .args(["devices", "--json", "--inventory"])
        .arg(&inv)
        .env("ORCHESTRATE_LEASE_DIR", t.path().join("leases"))
        .env("ORCHESTRATE_NVML_LIB", fake_nvml())
        .env("FAKE_NVML_CONFIG", &conf)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpu0 = v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == "gpu0")
        .unwrap();
    assert_eq!(gpu0["name"], "the H200 in rack 3");
    assert_eq!(gpu0["uuid"], "GPU-00000000-0000-4000-8000-0000000000a0");
    assert_eq!(gpu0["gpu"]["mig"], "disabled", "{gpu0:#}");
}
