//! plans/torch.toml for real: transformers' Llama (random weights from a fixed
//! seed) prefilled by PyTorch, its KV cache handed off in bf16 token-major and
//! compared with a reference decode, on the CPU here (a simulated GPU), as a new
//! user runs it. Needs python3 with torch and transformers: the folder
//! `ORCHESTRATE_TORCH_BIN` names goes first on `PATH` (`.ci/run` makes that venv).

use std::path::{Path, PathBuf};

use crate::support::{host_shared, skip_or_fail, Need};

/// `PATH` with the torch venv first, when python3 there has torch and transformers.
fn torch_path() -> Option<String> {
    let bin = std::env::var_os("ORCHESTRATE_TORCH_BIN").map(PathBuf::from);
    let path = std::env::var("PATH").unwrap_or_default();
    let path = match &bin {
        Some(b) => format!("{}:{path}", b.display()),
        None => path,
    };
    let ok = std::process::Command::new("python3")
        .args(["-c", "import torch, transformers, safetensors, numpy"])
        .env("PATH", &path)
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(path)
}

#[test]
fn the_torch_plan_runs_verifies_and_states_the_seeds_facts() {
    let Some(path) = torch_path() else {
        skip_or_fail(Need::Torch, "python3 has no torch and transformers");
        return;
    };
    let _host = host_shared();
    let t = tempfile::tempdir().unwrap();
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/torch.toml");
    let out = crate::support::cli()
        .arg(&plan)
        .args(["--progress", "quiet", "--records"])
        .arg(t.path().join("records"))
        .arg("--work")
        .arg(t.path().join("work"))
        .env("PATH", &path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("checks: 10 of 10 checks passed"), "{text}");
    let dir = PathBuf::from(text.lines().last().unwrap().trim());
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("record.json")).unwrap()).unwrap();
    // The stack it ran is pinned on the record.
    let pins = rec["run"]["pins"]["entries"].to_string();
    assert!(
        pins.contains("stack/torch") && pins.contains("2.15.0"),
        "{pins}"
    );
    assert!(
        pins.contains("stack/transformers") && pins.contains("5.23.0"),
        "{pins}"
    );
    // It ran on the CPU, as the prefill's metrics say, with every repeat measured.
    let prefill = rec["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "prefill[tokens=1024]")
        .unwrap();
    let attempts = prefill["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 4);
    assert!(attempts.iter().all(|a| a["metrics"]["device"] == "cpu"));
    let v = crate::support::cli()
        .arg("verify")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    // The PR body states the seed's facts for the real model.
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for fact in [
        "bit-exact KV/logits repeats",
        "KV shape `[4,4,1024,32]`",
        "64 of 64 slots read back exactly",
        "relative RMS K/V/first_logits",
        "10 of 10 checks passed",
    ] {
        assert!(md.contains(fact), "{fact}:\n{md}");
    }
}
