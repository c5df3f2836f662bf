//! Every record committed under `records/` verifies: its digest, logs, plan copy and
//! attestation match (its large artifacts are not committed and show as absent).

use std::path::PathBuf;
use std::process::Command;

fn committed_records() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("records");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    dirs.retain(|d| d.join("record.json").is_file());
    dirs.sort();
    dirs
}

#[test]
fn reviewed_records_verify() {
    let dirs = committed_records();
    assert!(!dirs.is_empty(), "no reviewed record under records/");
    for dir in dirs {
        let out = Command::new(env!("CARGO_BIN_EXE_orchestrate"))
            .arg("verify")
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} does not verify:\n{}{}",
            dir.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_reviewed_full2k_record_shows_the_experiment() {
    let dir = committed_records()
        .into_iter()
        .find(|d| {
            std::fs::read_to_string(d.join("plan.toml"))
                .is_ok_and(|p| p.contains("name = \"kvsim-full2k\""))
        })
        .expect("a reviewed record of plans/full2k.toml");
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("record.json")).unwrap()).unwrap();
    assert_eq!(rec["status"], "succeeded");
    assert_eq!(rec["release_audit"]["passed"], true);
    let checks = rec["comparisons"].as_array().unwrap();
    let value = |name: &str| {
        checks
            .iter()
            .find(|c| c["name"].as_str().is_some_and(|n| n.starts_with(name)))
            .unwrap_or_else(|| panic!("no check {name}"))["value"]
            .clone()
    };
    assert_eq!(value("KV repeats bit-exact"), 3, "3 bit-exact repeats");
    let k = value("GPU K relative RMS").as_f64().unwrap();
    assert!(k > 0.0 && k < 0.01, "small, non-zero K relative RMS: {k}");
    assert_eq!(value("reference slots read back exactly"), 64);
    // Simulated devices are marked as such in the record and the PR body.
    assert!(rec["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .all(|a| a["simulated"] == true));
    let pr = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(pr.contains("(simulated)"));
    assert!(pr.contains("All owned experiment allocations released."));
}

#[test]
fn the_reviewed_sweep_record_holds_2k_and_8k() {
    let dir = committed_records()
        .into_iter()
        .find(|d| {
            std::fs::read_to_string(d.join("plan.toml"))
                .is_ok_and(|p| p.contains("name = \"kvsim-full\""))
        })
        .expect("a reviewed record of plans/full.toml");
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("record.json")).unwrap()).unwrap();
    assert_eq!(rec["status"], "succeeded");
    assert_eq!(rec["release_audit"]["passed"], true);
    assert_eq!(rec["run"]["plan"]["matrix"]["cells"], 2);
    let checks = rec["comparisons"].as_array().unwrap();
    let check = |name: &str| {
        checks
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no check {name}"))
    };
    let pr = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for tokens in [2048, 8192] {
        let cell = format!("[tokens={tokens}]");
        assert_eq!(check(&format!("KV repeats bit-exact {cell}"))["value"], 3);
        assert_eq!(
            check(&format!(
                "KV shape [layers, kv_heads, tokens, head_dim] {cell}"
            ))["value"],
            serde_json::json!([32, 8, tokens, 8])
        );
        let k = check(&format!("GPU K relative RMS {cell}"))["value"]
            .as_f64()
            .unwrap();
        assert!(
            k > 0.0 && k < 0.01,
            "{cell}: small, non-zero K relative RMS: {k}"
        );
        // Each cell's block in the PR body: its repeats, shape and handoffs.
        let at = pr
            .find(&format!("### Full {tokens}"))
            .expect("a block per cell");
        let block = &pr[at..];
        let block = &block[..block[4..].find("###").map_or(block.len(), |e| e + 4)];
        assert!(
            block.contains(&format!("**Prefill `prefill{cell}`**")),
            "{block}"
        );
        assert!(
            block.contains("3 of 3 repeats bit-exact for `kv.safetensors`"),
            "{block}"
        );
        assert!(block.contains(&format!("[32,8,{tokens},8] f32")), "{block}");
        assert!(
            block.contains(&format!("**Handoff `handoff-gpu{cell}`**")),
            "{block}"
        );
    }
}
