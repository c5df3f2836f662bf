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
