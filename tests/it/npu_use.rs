//! NPU cards read per attempt by their vendors' tools, through the real binary:
//! stand-ins for `rbln-stat` and `furiosa-smi` on `PATH` print the recorded real
//! outputs (the shared fixtures), so discovery finds real ATOM and RNGD cards and
//! each attempt's record holds what the tools said of the cards it owned.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::devices_parsers::{fixtures, read_fixture};
use crate::support::host_shared;

/// `bin/rbln-stat` and `bin/furiosa-smi` printing the recorded outputs.
fn tools(bin: &Path) {
    std::fs::create_dir_all(bin).unwrap();
    let f = fixtures();
    let script = |name: &str, body: String| {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    script(
        "rbln-stat",
        format!(
            "case \"$1\" in -j) exec cat '{}';; *) exec cat '{}';; esac\n",
            f.join("rbln-stat-json.ca22.json").display(),
            f.join("rbln-stat.ca22-x2-table-only.txt").display()
        ),
    );
    script(
        "furiosa-smi",
        format!(
            "case \"$1\" in info) exec cat '{}';; status) exec cat '{}';; *) exit 2;; esac\n",
            f.join("furiosa-smi-info.rngd.txt").display(),
            f.join("furiosa-smi-status.rngd.txt").display()
        ),
    );
}

#[test]
fn each_attempt_records_what_the_vendor_tools_read_of_its_cards() {
    if read_fixture("SOURCES.md").is_none() {
        return;
    }
    let _host = host_shared();
    let t = tempfile::tempdir().unwrap();
    let bin = t.path().join("bin");
    tools(&bin);
    std::fs::write(t.path().join("inventory.toml"), "").unwrap();
    let plan = t.path().join("plan.toml");
    std::fs::write(
        &plan,
        "schema = \"orchestrate/plan/v1\"\nname = \"npu-use\"\n\
         [devices]\natom = { kind = \"atom\" }\nrngd = { kind = \"rngd\", cores = 4 }\n\
         [steps.a]\nshell = \"sleep 1.2\"\ndevices = [\"atom\"]\n\
         [steps.n]\nshell = \"sleep 1.2\"\ndevices = [\"rngd\"]\n",
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = crate::support::cli()
        .arg("run")
        .arg(&plan)
        .args(["--progress", "quiet", "--inventory"])
        .arg(t.path().join("inventory.toml"))
        .arg("--records")
        .arg(t.path().join("records"))
        .env("ORCHESTRATE_LEASE_DIR", t.path().join("leases"))
        .env("PATH", &path)
        .env_remove("ORCHESTRATE_NVML_LIB")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = std::path::PathBuf::from(text.lines().last().unwrap().trim());
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("record.json")).unwrap()).unwrap();
    let step = |id: &str| {
        rec["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .unwrap()["attempts"][0]["npus"][0]
            .clone()
    };
    let atom = step("a");
    assert_eq!(atom["device"], "rbln0", "{atom:#}");
    assert_eq!(atom["source"], "rbln-stat -j");
    assert_eq!(atom["power_mean_w"], 17.5218);
    assert_eq!(atom["power_max_w"], 17.5218);
    assert_eq!(atom["temperature_max_c"], 31.0);
    assert_eq!(atom["peak_memory_bytes"], 0);
    assert!(atom["samples"].as_u64().unwrap() >= 1);
    assert!(atom.get("not_supported").is_none(), "{atom:#}");
    let rngd = step("n");
    assert_eq!(
        (rngd["device"].as_str(), rngd["source"].as_str()),
        (Some("npu0"), Some("furiosa-smi status"))
    );
    assert_eq!(rngd["utilization_mean_percent"], 0.0);
    assert_eq!(
        rngd["not_supported"],
        serde_json::json!(["power", "temperature"]),
        "{rngd:#}"
    );
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap_or_else(|_| {
        let o = crate::support::cli()
            .arg("report")
            .arg(&dir)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).to_string()
    });
    assert!(
        md.contains(
            "`a` on `rbln0`: card memory in use up to 0 B, 17.52 W mean, 17.52 W max, 31 °C max"
        ),
        "{md}"
    );
    assert!(md.contains("power not reported by its tool"), "{md}");
}
