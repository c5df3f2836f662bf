//! Slurm at scale, on the CI cluster (`.ci/slurm start`: `MaxArraySize=100`, root's
//! `MaxSubmitJobs=300`, a `sweep` partition that shares each core among 16 jobs):
//! a sweep's cells go as job arrays split to the cluster's limits and never past
//! them, every task's end as trusted as a job's own; a submission refused for a
//! submit limit is waited out, never a step's failure.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::slurm::{cluster, run, write, CLUSTER};
use crate::support::{assert_verifies, serial, shown};

/// A plan of `n` cells of one step, each echoing its cell, on the sweep partition.
fn sweep_plan(dir: &Path, n: usize) -> std::path::PathBuf {
    let cells: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    write(
        dir,
        "sweep.toml",
        &format!(
            "schema = \"orchestrate/plan/v1\"\nname = \"sweep\"\n[backend]\nkind = \"slurm\"\npartition = \"sweep\"\n[matrix]\ncell = [{}]\n[steps.cell]\nmemory = \"64MB\"\nshell = \"echo cell ${{matrix.cell}}\"\n",
            cells.join(", ")
        ),
    )
}

/// The user's jobs the controller holds against MaxSubmitJobs, every array task
/// counted, sampled every 200 ms until `stop`: the most seen. A job that ended
/// and is still COMPLETING (its epilog) is listed by squeue but no longer counted
/// by Slurm, which takes the next submission beside it: counted here it made 301
/// of 300 under CI load.
fn watch_queue(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let most = AtomicUsize::new(0);
        while !stop.load(Ordering::Relaxed) {
            if let Ok(o) = Command::new("squeue")
                .args([
                    "-h",
                    "-r",
                    "-u",
                    "root",
                    "-t",
                    "PENDING,RUNNING,SUSPENDED,CONFIGURING",
                    "-o",
                    "%i",
                ])
                .output()
            {
                let n = String::from_utf8_lossy(&o.stdout).lines().count();
                most.fetch_max(n, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        most.load(Ordering::Relaxed)
    })
}

/// The audit's count of `sbatch` calls, and of those refused for a submit limit.
fn submissions(rec: &serde_json::Value) -> (u64, u64) {
    let line = rec["release_audit"]["checked"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str())
        .find(|c| c.starts_with("slurm jobs named"))
        .unwrap_or_else(|| panic!("no Slurm audit line: {}", rec["release_audit"]))
        .to_string();
    let before = |what: &str| -> u64 {
        line.split(what)
            .next()
            .and_then(|h| h.rsplit([' ', '(', ':']).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (before(" submitted"), before(" refused for a submit limit"))
}

#[test]
fn a_sweep_of_two_thousand_cells_runs_as_arrays_within_the_cluster_s_limits() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let n: usize = std::env::var("ORCHESTRATE_SWEEP_CELLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let t = tempfile::tempdir().unwrap();
    let plan = sweep_plan(t.path(), n);
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch_queue(Arc::clone(&stop));
    let (dir, rec, out) = run(t.path(), &plan, &["--jobs", "32"]);
    stop.store(true, Ordering::Relaxed);
    let most_queued = watcher.join().unwrap();
    assert_eq!(rec["status"], "succeeded", "{}", shown(&out));
    assert_verifies(&dir);
    // The user's MaxSubmitJobs (300) was never passed: Slurm would have refused,
    // and the run kept under it.
    assert!(most_queued <= 300, "{most_queued} jobs queued at once");
    assert!(
        most_queued > 32,
        "arrays queue ahead of the throttle: {most_queued}"
    );
    // Nothing lost: every cell ran once, as a task of an array of at most 100.
    let mut ids = BTreeSet::new();
    let mut arrays = BTreeSet::new();
    let steps = rec["steps"].as_array().unwrap();
    assert_eq!(steps.len(), n);
    for s in steps {
        let a = s["attempts"].as_array().unwrap();
        assert_eq!(a.len(), 1, "{}", s["id"]);
        let job = &a[0]["job"];
        assert_eq!(job["state"], "COMPLETED", "{job}");
        let id = job["job_id"].as_str().unwrap();
        let (array, task) = id
            .split_once('_')
            .unwrap_or_else(|| panic!("not a task: {id}"));
        assert!(
            task.parse::<u32>().unwrap() < 100,
            "{id}: MaxArraySize is 100"
        );
        assert!(ids.insert(id.to_string()), "{id} twice");
        arrays.insert(array.to_string());
        // The array's script is on the record, hashed with the attempt.
        assert!(
            job["files"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["path"].as_str().unwrap().starts_with("slurm/array-")),
            "{job}"
        );
        let cell = s["id"]
            .as_str()
            .unwrap()
            .trim_start_matches("cell[cell=")
            .trim_end_matches(']');
        let log =
            std::fs::read_to_string(dir.join(a[0]["stdout"]["path"].as_str().unwrap())).unwrap();
        assert_eq!(log, format!("cell {cell}\n"));
    }
    let (submitted, refused) = submissions(&rec);
    let least = n.div_ceil(100) as u64;
    assert_eq!(
        arrays.len() as u64,
        least,
        "arrays of 100 at most, and full"
    );
    assert_eq!(
        submitted,
        least + refused,
        "one sbatch per array, and one per refusal tried again"
    );
}

#[test]
fn a_submission_refused_for_a_submit_limit_waits_and_is_tried_again() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    // An sbatch that refuses the first two submissions as a cluster at its
    // QOS's MaxSubmitJobsPerUser does, then hands over to Slurm's own.
    let bin = t.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v sbatch"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let count = t.path().join("refused");
    write(
        &bin,
        "sbatch",
        &format!(
            "#!/bin/sh\nn=$(cat '{c}' 2>/dev/null || echo 0)\nif [ \"$n\" -lt 2 ]; then\n  echo $((n + 1)) > '{c}'\n  echo 'sbatch: error: QOSMaxSubmitJobPerUserLimit' >&2\n  echo 'sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user'\"'\"'s size and/or time limits)' >&2\n  exit 1\nfi\nexec {real} \"$@\"\n",
            c = count.display(),
            real = real.trim()
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("sbatch"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let plan = sweep_plan(t.path(), 3);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = crate::support::cli()
        .args(["run"])
        .arg(&plan)
        .arg("--records")
        .arg(t.path().join("records"))
        .args(["--progress", "quiet"])
        .env("PATH", path)
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(std::fs::read_to_string(&count).unwrap().trim(), "2");
    let dir = std::fs::read_dir(t.path().join("records"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("record.json").is_file())
        .unwrap();
    assert_verifies(&dir);
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("record.json")).unwrap()).unwrap();
    assert_eq!(rec["status"], "succeeded");
    assert_eq!(submissions(&rec), (3, 2), "two refused, then one array");
    // Said where a person watching sees it (the progress line and the journal),
    // never as a failure.
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    assert!(
        journal.contains(
            "waiting: Slurm refused the submission for a submit limit (QOSMaxSubmitJobPerUserLimit"
        ),
        "{journal}"
    );
    for s in rec["steps"].as_array().unwrap() {
        assert_eq!(s["status"], "succeeded", "{s}");
    }
}
