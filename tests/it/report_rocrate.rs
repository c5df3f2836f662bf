//! `orchestrate export RUN --ro-crate` on records of real runs: one `CreateAction`
//! per attempt (failures with `FailedActionStatus`), the plan as the crate's
//! `ComputationalWorkflow`, files with the record's digests; and the crate passes
//! the reference validator (roc-validator, profile workflow-run-crate-0.5, level
//! required), run with `--offline` from an HTTP cache that `tests/tools/rocv_context_cache.py`
//! seeds with the RO-Crate context the `rocrate` package ships, in the venv whose
//! Python `ORCHESTRATE_ROCV_PYTHON` names (`.ci/run` makes one).

use std::path::Path;
use std::process::Command;

use crate::support::{project, record_json, shown, skip_or_fail, Need};

fn export(dir: &Path, out: Option<&Path>) -> serde_json::Value {
    let mut c = crate::support::cli();
    c.arg("export").arg(dir).arg("--ro-crate");
    if let Some(o) = out {
        c.arg("-o").arg(o);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", shown(&o));
    let root = out.unwrap_or(dir);
    serde_json::from_slice(&std::fs::read(root.join("ro-crate-metadata.json")).unwrap()).unwrap()
}

fn entity<'a>(crate_: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    crate_["@graph"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["@id"] == id)
        .unwrap_or_else(|| panic!("no entity {id}"))
}

/// roc-validator's report on a crate, offline: its HTTP cache is seeded with the
/// RO-Crate context (`tests/tools/rocv_context_cache.py`) and it runs with
/// `--offline`, so any other remote fetch is an error. None when the validator's
/// venv is not there (required in CI).
fn validator_report(root: &Path, seed: bool) -> Option<serde_json::Value> {
    let Ok(python) = std::env::var("ORCHESTRATE_ROCV_PYTHON") else {
        skip_or_fail(
            Need::Tools,
            "ORCHESTRATE_ROCV_PYTHON (a venv with roc-validator) is not set",
        );
        return None;
    };
    let cache = tempfile::tempdir().unwrap();
    let cache_path = cache.path().join("http");
    if seed {
        let out = Command::new(&python)
            .arg(project("tests/tools/rocv_context_cache.py"))
            .arg(&cache_path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", shown(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("https://w3id.org/ro/crate/1.1/context")
        );
    }
    let validator = Path::new(&python).with_file_name("rocrate-validator");
    let out = Command::new(validator)
        .args(["-y", "validate", "--offline", "--cache-path"])
        .arg(&cache_path)
        .args([
            "-p",
            "workflow-run-crate-0.5",
            "-l",
            "required",
            "-f",
            "json",
        ])
        .arg(root)
        .output()
        .unwrap();
    match serde_json::from_slice(&out.stdout) {
        Ok(report) => Some(report),
        // Offline cache misses end the validator before it writes a report.
        Err(_) if !seed => Some(serde_json::json!({"passed": false, "output": shown(&out)})),
        Err(e) => panic!("validator output is not JSON ({e}): {}", shown(&out)),
    }
}

fn validate(root: &Path) {
    if let Some(report) = validator_report(root, true) {
        assert_eq!(
            report["passed"],
            true,
            "{}",
            serde_json::to_string_pretty(&report["issues"]).unwrap()
        );
    }
}

#[test]
fn a_run_exports_as_a_valid_workflow_run_crate() {
    let t = tempfile::tempdir().unwrap();
    let plan = t.path().join("p.toml");
    std::fs::write(
        &plan,
        "schema = \"orchestrate/plan/v1\"\nname = \"crate\"\n[steps.ok]\nrepeats = 2\nshell = \"echo x > ${out}/x.txt\"\noutputs = [\"${out}/x.txt\"]\n[steps.bad]\nshell = \"exit 5\"\n[report]\ntemplates = [\"pr\"]\n",
    )
    .unwrap();
    let dir = {
        let _host = crate::support::host_shared();
        let out = crate::support::cli()
            .arg("run")
            .arg(&plan)
            .arg("--records")
            .arg(t.path().join("records"))
            .args(["--progress", "quiet", "--keep-going"])
            .current_dir(t.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
        crate::support::record_dirs(&t.path().join("records"))
            .pop()
            .unwrap()
    };
    let rec = record_json(&dir);
    let c = export(&dir, None);
    let root = entity(&c, "./");
    assert_eq!(root["mainEntity"]["@id"], "plan.toml");
    let wf = entity(&c, "plan.toml");
    let types: Vec<&str> = wf["@type"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["File", "SoftwareSourceCode", "ComputationalWorkflow"]
    );
    assert_eq!(wf["sha256"], rec["run"]["plan"]["sha256"]);
    // The run, and one action per attempt.
    let run = entity(&c, &format!("#run-{}", rec["run_id"].as_str().unwrap()));
    assert_eq!(run["instrument"]["@id"], "plan.toml");
    assert_eq!(
        run["actionStatus"]["@id"],
        "http://schema.org/FailedActionStatus"
    );
    for (id, status) in [
        ("#attempt-ok-1", "CompletedActionStatus"),
        ("#attempt-ok-2", "CompletedActionStatus"),
        ("#attempt-bad-1", "FailedActionStatus"),
    ] {
        let a = entity(&c, id);
        assert_eq!(a["@type"], "CreateAction");
        assert_eq!(
            a["actionStatus"]["@id"],
            format!("http://schema.org/{status}")
        );
    }
    assert!(entity(&c, "#attempt-bad-1")["error"]
        .as_str()
        .unwrap()
        .contains("exit code 5"));
    // Logs and outputs with their recorded digests.
    let ok = rec["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "ok")
        .unwrap();
    let log = &ok["attempts"][0]["stdout"];
    assert_eq!(
        entity(&c, log["path"].as_str().unwrap())["sha256"],
        log["sha256"]
    );
    let out = &ok["attempts"][1]["outputs"][0];
    let uri = format!("file://{}", out["path"].as_str().unwrap());
    assert_eq!(entity(&c, &uri)["sha256"], out["sha256"]);
    assert!(root["hasPart"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["@id"] == "report.md"));
    validate(&dir);

    // Elsewhere: the record folder's files are copied beside the crate.
    let other = t.path().join("crate");
    let c2 = export(&dir, Some(&other));
    assert!(other.join("record.json").is_file() && other.join("plan.toml").is_file());
    assert_eq!(
        c2["@graph"].as_array().unwrap().len(),
        c["@graph"].as_array().unwrap().len()
    );
    validate(&other);
}

/// The offline validator is a real check: the same crate with an action that names
/// no instrument fails, and with nothing seeded the context cannot be had at all.
#[test]
fn the_offline_validator_fails_a_broken_crate_and_an_unseeded_cache() {
    let t = tempfile::tempdir().unwrap();
    let plan = t.path().join("p.toml");
    std::fs::write(
        &plan,
        "schema = \"orchestrate/plan/v1\"\nname = \"broken\"\n[steps.ok]\nshell = \"true\"\n",
    )
    .unwrap();
    let out = crate::support::cli()
        .arg("run")
        .arg(&plan)
        .arg("--records")
        .arg(t.path().join("records"))
        .args(["--progress", "quiet"])
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    let dir = crate::support::record_dirs(&t.path().join("records"))
        .pop()
        .unwrap();
    let mut c = export(&dir, None);
    let Some(good) = validator_report(&dir, true) else {
        return;
    };
    assert_eq!(good["passed"], true, "{good}");
    let unseeded = validator_report(&dir, false).unwrap();
    assert_eq!(unseeded["passed"], false, "{unseeded}");

    for e in c["@graph"].as_array_mut().unwrap() {
        if e["@type"] == "CreateAction" {
            e.as_object_mut().unwrap().remove("instrument");
        }
    }
    std::fs::write(
        dir.join("ro-crate-metadata.json"),
        serde_json::to_vec(&c).unwrap(),
    )
    .unwrap();
    let bad = validator_report(&dir, true).unwrap();
    assert_eq!(bad["passed"], false, "{bad}");
    assert!(
        bad["issues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["violatingProperty"] == "http://schema.org/instrument"),
        "{bad}"
    );
}
