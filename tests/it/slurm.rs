//! The Slurm backend against a real one-node cluster (`.ci/slurm start`, which CI
//! runs; `ORCHESTRATE_REQUIRE_SLURM=1` makes these fail instead of skip without
//! one): a plan end to end, OOM, timeout, GRES contention, Ctrl-C, the smoke plan's
//! record shape against a local run, and `recover` after the orchestrator was
//! killed. The tests share the cluster's two cores, so they run one at a time.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::support::{
    assert_verifies, cli, has_program, project, record_json, record_step, run_plan_in, serial,
    shown, skip_or_fail, wait_for, Need,
};

pub(super) static CLUSTER: Mutex<()> = Mutex::new(());

/// The cluster the tests were pointed at: `ORCHESTRATE_TEST_SLURM_CLUSTER` names
/// it (`orchtest`, the one `.ci/slurm start` runs). Never the ambient one: on a
/// login node of a real cluster the tests would submit their jobs to it.
fn pointed_at() -> Option<String> {
    std::env::var("ORCHESTRATE_TEST_SLURM_CLUSTER")
        .ok()
        .filter(|c| !c.is_empty())
}

/// Whether the cluster the tests were pointed at is the one answering: asked once
/// per test process (a machine with `sbatch` and no controller pays for it once),
/// with the reason when not.
fn identified() -> &'static Result<(), String> {
    static ONCE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let Some(want) = pointed_at() else {
            return Err("no cluster was named for the tests (ORCHESTRATE_TEST_SLURM_CLUSTER=orchtest after .ci/slurm start)".into());
        };
        if !has_program("sbatch") {
            return Err("sbatch is not installed (.ci/slurm install)".into());
        }
        // The controller of a cluster just started takes a moment to answer.
        let mut said = String::new();
        for i in 0..30 {
            if i > 0 {
                std::thread::sleep(Duration::from_secs(1));
            }
            let Ok(o) = Command::new("scontrol").args(["show", "config"]).output() else {
                break;
            };
            said = String::from_utf8_lossy(&o.stdout).into_owned();
            if o.status.success() {
                break;
            }
        }
        let name = said
            .lines()
            .find_map(|l| l.trim().strip_prefix("ClusterName"))
            .map(|r| r.trim_start().trim_start_matches('=').trim().to_string());
        match name {
            Some(n) if n == want => Ok(()),
            Some(n) => Err(format!("the cluster answering is `{n}`, not `{want}`, the one the tests were pointed at")),
            None => Err(format!("no Slurm controller answers here (cluster `{want}`: run .ci/slurm start)")),
        }
    })
}

/// Whether the cluster the tests were pointed at answers (else skipped, or failed
/// where required).
pub(super) fn cluster() -> bool {
    // Not while another test has the cluster (one stops its controller on purpose).
    drop(serial(&CLUSTER));
    if let Err(why) = identified() {
        skip_or_fail(Need::Slurm, why);
        return false;
    }
    let up = || {
        Command::new("sinfo")
            .args(["-h", "-o", "%t"])
            .output()
            .is_ok_and(|o| {
                // Up, whether idle or running another test's jobs.
                let state = String::from_utf8_lossy(&o.stdout).trim().to_string();
                o.status.success()
                    && ["idle", "mix", "alloc", "comp"]
                        .iter()
                        .any(|s| state.starts_with(s))
            })
    };
    // A controller that another test stopped and resumed takes a moment to answer.
    let answers = (0..30).any(|i| {
        if i > 0 {
            std::thread::sleep(Duration::from_secs(1));
        }
        up()
    });
    if !answers {
        skip_or_fail(
            Need::Slurm,
            "the cluster the tests were pointed at no longer answers",
        );
    }
    answers
}

/// Jobs named `run_id` that squeue still lists.
pub(super) fn jobs_of(run_id: &str) -> Vec<String> {
    let o = Command::new("squeue")
        .args(["-h", &format!("--name={run_id}"), "-o", "%i %T"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", shown(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(String::from)
        .collect()
}

pub(super) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

pub(super) fn attempts(rec: &serde_json::Value, step: &str) -> Vec<serde_json::Value> {
    record_step(rec, step)["attempts"]
        .as_array()
        .unwrap()
        .clone()
}

pub(super) fn run(dir: &Path, plan: &Path, extra: &[&str]) -> (PathBuf, serde_json::Value, Output) {
    let (d, out) = run_plan_in(dir, plan, &dir.join("records"), extra);
    let rec = record_json(&d);
    (d, rec, out)
}

/// A measured step runs alone on Slurm too: its job asks for the node alone
/// (`--exclusive`), and the record takes Slurm's word for it.
#[test]
fn a_measured_step_asks_for_its_node_alone() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        r#"schema = "orchestrate/plan/v1"
name = "slurm-alone"
[backend]
kind = "slurm"
[limits]
timeout = "2m"
[steps.bench]
repeats = 2
shell = "echo measured"
[steps.other]
shell = "echo once"
"#,
    );
    let (dir, rec, out) = run(t.path(), &plan, &[]);
    assert_eq!(rec["status"], "succeeded", "{}", shown(&out));
    for (step, alone) in [("bench", true), ("other", false)] {
        for a in attempts(&rec, step) {
            let script =
                std::fs::read_to_string(dir.join(a["job"]["script"].as_str().unwrap())).unwrap();
            assert_eq!(script.contains("--exclusive"), alone, "{step}: {script}");
            assert_eq!(a["alone"].as_bool(), alone.then_some(true), "{step}: {a}");
        }
    }
}

#[test]
fn a_two_step_plan_runs_as_jobs_with_the_same_evidence() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        r#"schema = "orchestrate/plan/v1"
name = "slurm-two"
[backend]
kind = "slurm"
[steps.make]
memory = "64MiB"
timeout = "2m"
env = { GREETING = "hello" }
shell = "echo $GREETING > ${out}/a.txt; echo job $SLURM_JOB_ID; env | sort > ${out}/env.txt"
outputs = ["${out}/a.txt", "${out}/env.txt"]
[steps.use]
needs = ["make"]
shell = "cat ${steps.make.out}/a.txt > ${out}/b.txt"
outputs = ["${out}/b.txt"]
"#,
    );
    let (dir, rec, out) = run(t.path(), &plan, &[]);
    assert_eq!(rec["status"], "succeeded", "{}", shown(&out));
    assert_verifies(&dir);
    let run_id = rec["run_id"].as_str().unwrap();
    for step in ["make", "use"] {
        let a = &attempts(&rec, step)[0];
        let job = &a["job"];
        assert_eq!(job["backend"], "slurm");
        assert_eq!(job["state"], "COMPLETED");
        assert_eq!(job["node"], "localhost");
        assert_eq!(job["source"], "end record and scheduler");
        assert_eq!(a["termination"], "exited");
        assert_eq!(a["exit_code"], 0);
        assert!(
            a["peak_memory_bytes"].as_u64().unwrap() > 0,
            "peak memory from the job's cgroup"
        );
        // The job script is kept in the record, and names the run and the attempt.
        let script = std::fs::read_to_string(dir.join(job["script"].as_str().unwrap())).unwrap();
        assert!(
            script.contains(&format!("--job-name={run_id}"))
                && script.contains(&format!("--comment={step}/1")),
            "{script}"
        );
        assert!(script.contains("srun"), "{script}");
    }
    assert!(attempts(&rec, "make")[0]["job"]["gres"].is_null());
    // With accounting the end is read from sacct, without it from the controller;
    // CI runs these tests in both configurations and says which it expects.
    let queried = attempts(&rec, "make")[0]["job"]["queried"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    match std::env::var("ORCHESTRATE_SLURM_QUERY") {
        // Accounting may lag behind a loaded host (past 10 s the controller is
        // asked instead) or fail to answer: the controller's word then, and the
        // job's notes say why.
        Ok(expected) if expected == "sacct" && queried != "sacct" => {
            let job = &attempts(&rec, "make")[0]["job"];
            let why = job["notes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n.as_str())
                .find(|n| n.ends_with("the end is the controller's word"));
            let lag = confirmation_lag(&dir, "make");
            assert!(
                ["squeue", "scontrol"].contains(&queried.as_str())
                    && why.is_some_and(|w| {
                        !w.starts_with("accounting still had")
                            || lag.is_some_and(|l| l >= Duration::from_secs(9))
                    }),
                "{queried} after {lag:?}: {job}"
            );
        }
        Ok(expected) => assert_eq!(queried, expected),
        Err(_) => assert!(["sacct", "squeue"].contains(&queried.as_str()), "{queried}"),
    }
    let script = std::fs::read_to_string(dir.join("steps/make/1/job.sh")).unwrap();
    assert!(
        script.contains("--mem=64M") && script.contains("--time=3"),
        "{script}"
    );
    // The command saw the attempt's environment, not the orchestrator's, plus the job's.
    let env =
        std::fs::read_to_string(t.path().join("work").join(run_id).join("make/1/env.txt")).unwrap();
    assert!(
        env.contains("GREETING=hello")
            && env.contains("SLURM_JOB_ID=")
            && env.contains("ORCHESTRATE_ATTEMPT="),
        "{env}"
    );
    assert!(
        !env.contains("CARGO_"),
        "the caller's environment does not leak in: {env}"
    );
    let job_id = attempts(&rec, "make")[0]["job"]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let log = std::fs::read_to_string(dir.join("steps/make/1/stdout.log")).unwrap();
    assert_eq!(log.trim(), format!("job {job_id}"));
    // Job ids reach the journal before the attempt ends.
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    let sub = journal
        .find("\"job_submitted\"")
        .expect("job_submitted in the journal");
    let end = journal.find("\"attempt_ended\"").unwrap();
    assert!(sub < end);
    assert_eq!(rec["release_audit"]["passed"], true);
    assert!(rec["release_audit"]["checked"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c.as_str().unwrap().starts_with("slurm jobs named")));
    assert!(jobs_of(run_id).is_empty());
    // Reports and diff read it like a local record.
    let pr = cli()
        .args(["report", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(pr.status.success(), "{}", shown(&pr));
    let (local, _, _) = run(t.path(), &plan, &["--backend", "local"]);
    let d = cli()
        .args(["diff", local.to_str().unwrap(), dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(d.status.success(), "{}", shown(&d));
}

#[test]
fn oom_and_timeout_are_failures_whatever_the_exit_code() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        r#"schema = "orchestrate/plan/v1"
name = "slurm-faults"
[backend]
kind = "slurm"
[steps.oom]
memory = "100MiB"
shell = "head -c 400m /dev/zero | tail > /dev/null; exit 0"
[steps.slow]
timeout = "2s"
shell = "sleep 60"
"#,
    );
    let (dir, rec, out) = run(t.path(), &plan, &[]);
    assert_eq!(rec["status"], "failed", "{}", shown(&out));
    assert_verifies(&dir);
    let oom = &attempts(&rec, "oom")[0];
    assert_eq!(oom["termination"], "oom_killed", "{oom}");
    assert!(oom["oom_kills"].as_u64().unwrap() >= 1, "{oom}");
    assert_eq!(record_step(&rec, "oom")["status"], "failed");
    let slow = &attempts(&rec, "slow")[0];
    assert_eq!(slow["termination"], "timed_out", "{slow}");
    let wall = slow["wall_ms"].as_f64().unwrap();
    assert!(
        (1900.0..20_000.0).contains(&wall),
        "ended at its timeout, not Slurm's minute: {wall}"
    );
    assert!(jobs_of(rec["run_id"].as_str().unwrap()).is_empty());
}

#[test]
fn gres_contention_gives_each_job_its_own_gpu_and_queues_the_third() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        r#"schema = "orchestrate/plan/v1"
name = "slurm-gres"
[backend]
kind = "slurm"
[devices]
gpu = { kind = "gpu", count = 1 }
[steps.g1]
devices = ["gpu"]
shell = "sleep 2"
[steps.g2]
devices = ["gpu"]
shell = "sleep 2"
[steps.g3]
devices = ["gpu"]
shell = "sleep 2"
"#,
    );
    let (_, rec, out) = run(t.path(), &plan, &["--jobs", "3"]);
    assert_eq!(rec["status"], "succeeded", "{}", shown(&out));
    let mut spans = Vec::new();
    for s in ["g1", "g2", "g3"] {
        let a = &attempts(&rec, s)[0];
        let job = &a["job"];
        assert_eq!(job["gres"], "gpu:1");
        let gpu = job["cuda_visible_devices"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(["0", "1"].contains(&gpu.as_str()), "{job}");
        let at = |k: &str| chrono::DateTime::parse_from_rfc3339(a[k].as_str().unwrap()).unwrap();
        spans.push((
            at("started_at"),
            at("ended_at"),
            job["gpus"].as_str().unwrap_or_default().to_string(),
        ));
    }
    // Two GPUs: no two overlapping jobs share one, and one job waited for another.
    let mut overlapping = 0;
    for i in 0..3 {
        for j in i + 1..3 {
            let (a, b) = (&spans[i], &spans[j]);
            if a.0 < b.1 && b.0 < a.1 {
                overlapping += 1;
                assert_ne!(a.2, b.2, "overlapping jobs got the same GPU: {spans:?}");
            }
        }
    }
    assert!(
        overlapping < 3,
        "three 1-GPU jobs cannot all overlap on two GPUs: {spans:?}"
    );
    assert!(
        rec["allocations"].as_array().unwrap().is_empty(),
        "a job's devices are its GRES, not host leases"
    );
}

/// Cancels a run's jobs however the test ends (a failed assertion must not leave
/// jobs holding the cluster's cores).
pub(super) struct Scancel(pub(super) String);

impl Drop for Scancel {
    fn drop(&mut self) {
        let _ = Command::new("scancel")
            .arg(format!("--name={}", self.0))
            .output();
    }
}

/// Start `plan` in the background; its record folder once its two jobs run.
/// A run started in the background, and its run id once its record folder exists.
pub(super) fn start_run(dir: &Path, plan: &Path) -> (std::process::Child, String) {
    let child = cli()
        .args(["run", plan.to_str().unwrap(), "--records"])
        .arg(dir.join("records"))
        .args(["--progress", "quiet", "--jobs", "2"])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let records = dir.join("records");
    // The folder exists from the start (record_dirs lists finished records only).
    let run_id = wait_for("the run's record folder", Duration::from_secs(30), || {
        std::fs::read_dir(&records)
            .ok()?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.contains('T') && n.contains('-'))
    });
    (child, run_id)
}

pub(super) fn start_and_wait_for_jobs(dir: &Path, plan: &Path) -> (std::process::Child, String) {
    let (child, run_id) = start_run(dir, plan);
    wait_for("two running jobs", Duration::from_secs(60), || {
        (jobs_of(&run_id)
            .iter()
            .filter(|l| l.ends_with("RUNNING"))
            .count()
            == 2)
            .then_some(())
    });
    (child, run_id)
}

const LONG: &str = r#"schema = "orchestrate/plan/v1"
name = "slurm-long"
[backend]
kind = "slurm"
[steps.a]
shell = "sleep 120"
[steps.b]
shell = "sleep 120"
"#;

#[test]
fn ctrl_c_cancels_every_job_of_the_run() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(t.path(), "plan.toml", LONG);
    let (child, run_id) = start_and_wait_for_jobs(t.path(), &plan);
    let _cleanup = Scancel(run_id.clone());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", shown(&out));
    assert!(
        jobs_of(&run_id).is_empty(),
        "no job of the run is left queued or running"
    );
    let dir = t.path().join("records").join(&run_id);
    let rec = record_json(&dir);
    assert_eq!(rec["status"], "interrupted");
    for s in ["a", "b"] {
        let a = &attempts(&rec, s)[0];
        assert_eq!(a["termination"], "cancelled", "{a}");
        assert_eq!(a["cancel_reason"], "interrupt");
        assert_eq!(a["job"]["state"], "CANCELLED");
    }
    assert_eq!(rec["release_audit"]["passed"], true);
    assert_verifies(&dir);
}

#[test]
fn recover_cancels_the_jobs_of_a_killed_orchestrator() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(t.path(), "plan.toml", LONG);
    let (mut child, run_id) = start_and_wait_for_jobs(t.path(), &plan);
    let _cleanup = Scancel(run_id.clone());
    child.kill().unwrap();
    child.wait().unwrap();
    // The jobs outlive the orchestrator; their ids are in the journal.
    assert_eq!(jobs_of(&run_id).len(), 2);
    let dir = t.path().join("records").join(&run_id);
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    assert_eq!(journal.matches("\"job_submitted\"").count(), 2);
    let r = cli()
        .args(["recover", "--records"])
        .arg(t.path().join("records"))
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", shown(&r));
    assert!(
        String::from_utf8_lossy(&r.stdout)
            .contains(&format!("cancelled the Slurm jobs of dead run {run_id}")),
        "{}",
        shown(&r)
    );
    wait_for("the jobs to end", Duration::from_secs(30), || {
        jobs_of(&run_id).is_empty().then_some(())
    });
    assert_verifies(&dir);
}

#[test]
fn the_smoke_plan_on_slurm_has_the_shape_of_a_local_run() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = project("plans/smoke.toml");
    let (ld, local, lo) = run(t.path(), &plan, &["--backend", "local"]);
    let (sd, slurm, so) = run(t.path(), &plan, &["--backend", "slurm"]);
    assert_eq!(local["status"], "succeeded", "{}", shown(&lo));
    assert_eq!(slurm["status"], "succeeded", "{}", shown(&so));
    assert_verifies(&ld);
    assert_verifies(&sd);
    let shape = |r: &serde_json::Value| {
        r["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let outs: Vec<String> = s["outputs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| o["sha256"].as_str().unwrap_or("-").to_string())
                    .collect();
                (
                    s["id"].as_str().unwrap().to_string(),
                    s["status"].as_str().unwrap().to_string(),
                    s["attempts"].as_array().unwrap().len(),
                    outs,
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        shape(&local),
        shape(&slurm),
        "same steps, statuses, attempts and output digests"
    );
    let checks = |r: &serde_json::Value| {
        r["comparisons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["name"].to_string(), c["passed"].to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(checks(&local), checks(&slurm));
    let mut job_steps: Vec<&str> = slurm["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["attempts"]
                .as_array()
                .unwrap()
                .iter()
                .all(|a| a["job"]["backend"] == "slurm")
        })
        .filter(|s| !s["attempts"].as_array().unwrap().is_empty())
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    job_steps.sort();
    assert_eq!(
        job_steps,
        ["join", "left", "prepare", "right"],
        "every command step ran as a job"
    );
}

#[test]
fn resume_after_sigkill_finishes_the_run_without_resubmitting() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        r#"schema = "orchestrate/plan/v1"
name = "slurm-resume"
[backend]
kind = "slurm"
[steps.quick]
shell = "sleep 1; echo quick > ${out}/q.txt"
outputs = ["${out}/q.txt"]
[steps.long]
shell = "sleep 6; echo long > ${out}/l.txt"
outputs = ["${out}/l.txt"]
"#,
    );
    let (mut child, run_id) = start_and_wait_for_jobs(t.path(), &plan);
    let _cleanup = Scancel(run_id.clone());
    child.kill().unwrap();
    child.wait().unwrap();
    let dir = t.path().join("records").join(&run_id);
    let submitted = |d: &Path| {
        std::fs::read_to_string(d.join("journal.jsonl"))
            .unwrap()
            .matches("\"job_submitted\"")
            .count()
    };
    assert_eq!(submitted(&dir), 2);
    // Let the quick one finish while nobody watches.
    std::thread::sleep(Duration::from_secs(2));
    let r = cli().arg("resume").arg(&dir).output().unwrap();
    assert!(r.status.success(), "{}", shown(&r));
    assert!(
        String::from_utf8_lossy(&r.stdout).contains("finished long/1: job "),
        "{}",
        shown(&r)
    );
    assert_eq!(submitted(&dir), 2, "no job is submitted again");
    let all = Command::new("squeue")
        .args([
            "-h",
            "--states=all",
            &format!("--name={run_id}"),
            "-o",
            "%i",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&all.stdout).lines().count(),
        2,
        "the cluster saw two jobs in all"
    );
    let rec = record_json(&dir);
    assert_eq!(rec["status"], "succeeded", "{rec:#}");
    for s in ["quick", "long"] {
        assert_eq!(record_step(&rec, s)["status"], "succeeded");
        let a = &attempts(&rec, s)[0];
        assert_eq!(a["job"]["state"], "COMPLETED");
        assert!(record_step(&rec, s)["outputs"][0]["sha256"].is_string());
    }
    assert_eq!(rec["release_audit"]["passed"], true);
    assert_verifies(&dir);
    // A finished run is not resumed again.
    let again = cli().arg("resume").arg(&dir).output().unwrap();
    assert_eq!(again.status.code(), Some(3), "{}", shown(&again));
}

#[test]
fn resume_confirms_the_clean_ends_a_killed_orchestrator_left_unconfirmed() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        r#"schema = "orchestrate/plan/v1"
name = "slurm-unconfirmed"
[backend]
kind = "slurm"
[steps.quick]
shell = "echo quick"
[steps.long]
shell = "sleep 8"
"#,
    );
    let (mut child, run_id) = start_run(t.path(), &plan);
    let _cleanup = Scancel(run_id.clone());
    let dir = t.path().join("records").join(&run_id);
    let journal = || std::fs::read_to_string(dir.join("journal.jsonl")).unwrap_or_default();
    // Confirmations reach the journal at the run's end: kill it once `quick` ended
    // on its own end record, while `long` still runs.
    wait_for(
        "quick's end in the journal",
        Duration::from_secs(60),
        || {
            journal()
                .lines()
                .any(|l| l.contains("\"attempt_ended\"") && l.contains("\"quick\""))
                .then_some(())
        },
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let before = journal();
    let quick_end = before
        .lines()
        .find(|l| l.contains("\"attempt_ended\"") && l.contains("\"quick\""))
        .unwrap()
        .to_string();
    assert!(quick_end.contains("\"unconfirmed\""), "{quick_end}");
    assert!(!before.contains("\"job_confirmed\""), "{before}");
    let r = cli().arg("resume").arg(&dir).output().unwrap();
    assert!(r.status.success(), "{}", shown(&r));
    let after = journal();
    assert_eq!(
        after.matches("\"job_submitted\"").count(),
        2,
        "nothing resubmitted"
    );
    assert!(
        after
            .lines()
            .any(|l| l.contains("\"job_confirmed\"") && l.contains("\"quick\"")),
        "{after}"
    );
    let rec = record_json(&dir);
    assert_eq!(rec["status"], "succeeded", "{rec:#}");
    let q = &attempts(&rec, "quick")[0];
    assert_eq!(q["job"]["state"], "COMPLETED", "{q}");
    assert_eq!(q["job"]["source"], "end record and scheduler", "{q}");
    assert!(
        ["sacct", "squeue"].contains(&q["job"]["queried"].as_str().unwrap_or("")),
        "{q}"
    );
    assert_verifies(&dir);
}

#[test]
fn the_full_plan_runs_on_slurm_and_verifies_reports_and_diffs() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    // One cell of a one-layer model keeps CI short with the debug kvsim; both
    // cells of the 32-layer plan were run by hand (README, Slurm).
    let (dir, rec, out) = run(
        t.path(),
        &project("plans/full.toml"),
        &[
            "--backend",
            "slurm",
            "--only",
            "tokens=2048",
            "--set",
            "params.layers=1",
        ],
    );
    assert_eq!(rec["status"], "succeeded", "{}", shown(&out));
    assert_verifies(&dir);
    let mut jobs = 0;
    for s in rec["steps"].as_array().unwrap() {
        for a in s["attempts"].as_array().unwrap() {
            assert_eq!(a["job"]["backend"], "slurm", "{}", s["id"]);
            jobs += 1;
        }
    }
    assert!(
        jobs >= 6,
        "compile, prefill repeats and handoffs ran as jobs: {jobs}"
    );
    let gpu = &attempts(&rec, "handoff-gpu[tokens=2048]")[0]["job"];
    assert_eq!(gpu["gres"], "gpu:1", "the gpu device is the cluster's GRES");
    let warnings = rec["warnings"].to_string();
    assert!(
        warnings.contains("device kind `rngd`") && warnings.contains("simulated"),
        "{warnings}"
    );
    assert!(rec["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["passed"] == true));
    let pr = cli()
        .args(["report", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(pr.status.success(), "{}", shown(&pr));
    // The cell's bullet: its repeats, timing and shape, as on the host.
    assert!(
        String::from_utf8_lossy(&pr.stdout)
            .contains("- **Full 2048**: 3 finite, bit-exact KV/logits repeats; warm prefill "),
        "{}",
        shown(&pr)
    );
    let d = cli()
        .args(["diff", dir.to_str().unwrap(), dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(d.status.success(), "{}", shown(&d));
}

#[test]
fn a_second_ctrl_c_leaves_at_once_naming_the_jobs_that_may_still_run() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(t.path(), "plan.toml", LONG);
    let (child, run_id) = start_and_wait_for_jobs(t.path(), &plan);
    let _cleanup = Scancel(run_id.clone());
    let (out, _) = interrupt_twice_once_started(t.path(), child, &run_id);
    let dir = t.path().join("records").join(&run_id);
    let rec = record_json(&dir);
    // The audit cancelled every job at once; whether the controller had them
    // gone within the 3 s a second Ctrl-C leaves is the cluster's speed: a job
    // still there is a leftover it names (and the run failed), never one that
    // outlives the cancel.
    let audit = &rec["release_audit"];
    let leftovers: Vec<String> = audit["leftovers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|l| l.as_str().unwrap_or_default().to_string())
        .collect();
    if audit["passed"] == true {
        assert_eq!(out.status.code(), Some(130), "{}", shown(&out));
        assert_eq!(rec["status"], "interrupted");
    } else {
        assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
        assert!(
            leftovers.iter().all(|l| l.starts_with("slurm job ")),
            "{leftovers:?}"
        );
        let reason = rec["reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with("interrupted; release audit failed: slurm job "),
            "{reason}"
        );
    }
    let left: Vec<String> = ["a", "b"]
        .iter()
        .flat_map(|s| attempts(&rec, s))
        .flat_map(|a| a["leftovers"].as_array().cloned().unwrap_or_default())
        .map(|l| l.as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        left.iter()
            .any(|l| l.starts_with("slurm job ") && l.contains("may still be running")),
        "the attempts name the jobs left behind: {left:?}"
    );
    wait_for(
        "the cancelled jobs to leave the queue",
        Duration::from_secs(60),
        || jobs_of(&run_id).is_empty().then_some(()),
    );
    assert_verifies(&dir);
}

/// Once both steps' commands started (their start records), two Ctrl-Cs 50 ms
/// apart: what the run printed, and how long it took to leave after the second.
fn interrupt_twice_once_started(
    dir: &Path,
    child: std::process::Child,
    run_id: &str,
) -> (std::process::Output, Duration) {
    let steps = dir.join("records").join(run_id).join("steps");
    wait_for("both commands started", Duration::from_secs(30), || {
        ["a", "b"]
            .iter()
            .all(|s| steps.join(s).join("1/job-start.json").is_file())
            .then_some(())
    });
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let second = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    (out, second.elapsed())
}

/// Jobs that ignore the cancel (SIGTERM, until Slurm's KillWait): a second Ctrl-C
/// still leaves a record within the watchdog's 5 s, and its release audit says
/// what was still in the queue instead of waiting for it.
#[test]
fn a_second_ctrl_c_writes_the_record_even_when_jobs_ignore_the_cancel() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        &LONG.replace("sleep 120", "trap '' TERM INT; sleep 120"),
    );
    let (child, run_id) = start_and_wait_for_jobs(t.path(), &plan);
    let _cleanup = Scancel(run_id.clone());
    let (out, took) = interrupt_twice_once_started(t.path(), child, &run_id);
    assert!(
        took < Duration::from_secs(5),
        "left {took:?} after the second interrupt"
    );
    let dir = t.path().join("records").join(&run_id);
    assert!(
        dir.join("record.json").is_file(),
        "no record: {}",
        shown(&out)
    );
    let rec = record_json(&dir);
    assert!(
        rec["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("interrupted"),
        "{}",
        rec["reason"]
    );
    for s in ["a", "b"] {
        assert!(
            attempts(&rec, s)[0]["leftovers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l
                    .as_str()
                    .unwrap_or_default()
                    .contains("may still be running")),
            "{s}"
        );
    }
    let audit = &rec["release_audit"];
    if audit["passed"] != true {
        assert_eq!(rec["status"], "failed");
        assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
        assert!(
            audit["leftovers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l.as_str().unwrap_or_default().starts_with("slurm job ")),
            "{audit}"
        );
    }
    assert_verifies(&dir);
}

/// How long after `step`'s attempt ended on its end record Slurm's word on it was
/// journaled; `None` when the journal has no such confirmation.
fn confirmation_lag(dir: &Path, step: &str) -> Option<Duration> {
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).ok()?;
    let time =
        |v: &serde_json::Value| chrono::DateTime::parse_from_rfc3339(v["time"].as_str()?).ok();
    let lines: Vec<serde_json::Value> = journal
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let ended = lines
        .iter()
        .find(|v| v["event"] == "attempt_ended" && v["step"] == step)
        .and_then(time)?;
    let confirmed = lines
        .iter()
        .find(|v| v["event"] == "job_confirmed" && v["confirmation"]["step"] == step)
        .and_then(time)?;
    (confirmed - ended).to_std().ok()
}

/// "N submitted, M queries" from the record's release audit.
fn submitted_and_queries(rec: &serde_json::Value) -> (u64, u64) {
    let line = rec["release_audit"]["checked"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c.as_str())
        .find(|c| c.starts_with("slurm jobs named"))
        .expect("the slurm audit line")
        .to_string();
    let num_before = |word: &str| -> u64 {
        let head = &line[..line
            .find(word)
            .unwrap_or_else(|| panic!("{word} in {line}"))];
        head.split_whitespace()
            .last()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("a number before {word} in {line}"))
    };
    (num_before(" submitted"), num_before(" queries"))
}

#[test]
fn many_jobs_cost_the_controller_a_few_queries_and_every_end_is_confirmed() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let mut text = String::from(
        "schema = \"orchestrate/plan/v1\"\nname = \"slurm-budget\"\n[backend]\nkind = \"slurm\"\n",
    );
    for i in 0..24 {
        text.push_str(&format!("[steps.s{i}]\nrun = [\"true\"]\n"));
    }
    // A command that writes much just before it exits: its log is whole on the
    // record although the attempt ends on the job's end record, not Slurm's word.
    text.push_str(
        "[steps.loud]\nshell = \"seq 200000; seq 1000 >&2\"\n[steps.after]\nneeds = [\"loud\"]\nrun = [\"true\"]\n",
    );
    let plan = write(t.path(), "plan.toml", &text);
    let (dir, rec, out) = run(t.path(), &plan, &["--jobs", "32"]);
    assert_eq!(rec["status"], "succeeded", "{}", shown(&out));
    assert_verifies(&dir);
    let log = std::fs::read_to_string(dir.join("steps/loud/1/stdout.log")).unwrap();
    assert_eq!(log.lines().count(), 200_000);
    assert_eq!(log.lines().last(), Some("200000"));
    let err = std::fs::read_to_string(dir.join("steps/loud/1/stderr.log")).unwrap();
    assert_eq!(err.lines().count(), 1000, "{err}");
    // Every job's end is Slurm's word on the record, read in batches.
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    let confirmed = journal.matches("\"job_confirmed\"").count();
    let mut jobs = 0;
    for s in rec["steps"].as_array().unwrap() {
        for a in s["attempts"].as_array().unwrap() {
            jobs += 1;
            assert_eq!(a["job"]["state"], "COMPLETED", "{a}");
            assert_eq!(a["job"]["source"], "end record and scheduler", "{a}");
            assert!(
                ["sacct", "squeue"].contains(&a["job"]["queried"].as_str().unwrap_or("")),
                "{a}"
            );
        }
    }
    assert_eq!(jobs, 26);
    // Each attempt that ended on its clean end record is confirmed once; one whose
    // end Slurm told first (a round that came before the end record was seen)
    // needs no confirmation.
    let unconfirmed = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "attempt_ended" && v["attempt"]["job"]["state"] == "unconfirmed")
        .count();
    assert!(
        unconfirmed * 2 >= jobs,
        "most ends come from the end records: {unconfirmed}"
    );
    assert_eq!(confirmed, unconfirmed, "each clean end confirmed once");
    let (submitted, queries) = submitted_and_queries(&rec);
    assert_eq!(submitted, 26);
    // One query per round for all jobs, rounds at a heartbeat: far fewer than one
    // per job (the per-job polling of other tools sends several per job).
    assert!(
        queries * 2 <= submitted,
        "{queries} queries for {submitted} jobs"
    );
}

/// Sets the node back up when dropped, whatever the test did.
struct NodeBack;

impl Drop for NodeBack {
    fn drop(&mut self) {
        let _ = Command::new("scontrol")
            .args(["update", "nodename=localhost", "state=resume"])
            .output();
        for _ in 0..120 {
            let o = Command::new("sinfo").args(["-h", "-o", "%t"]).output();
            if o.is_ok_and(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .starts_with("idle")
            }) {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

#[test]
fn a_job_whose_node_fails_is_node_failed_and_not_run_again() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        r#"schema = "orchestrate/plan/v1"
name = "slurm-node-fail"
[backend]
kind = "slurm"
[steps.a]
shell = "echo started; sleep 120"
"#,
    );
    let (child, run_id) = start_run(t.path(), &plan);
    let dir = t.path().join("records").join(&run_id);
    wait_for("the command to start", Duration::from_secs(60), || {
        std::fs::read_to_string(dir.join("steps/a/1/stdout.log"))
            .ok()
            .filter(|l| l.contains("started"))
    });
    // The node goes down under the running job, as a failed host would.
    let _back = NodeBack;
    let down = Command::new("scontrol")
        .args([
            "update",
            "nodename=localhost",
            "state=down",
            "reason=orchestrate-node-fail-test",
        ])
        .output()
        .unwrap();
    assert!(down.status.success(), "{}", shown(&down));
    let out = child.wait_with_output().unwrap();
    let rec = record_json(&dir);
    assert_eq!(rec["status"], "failed", "{}", shown(&out));
    assert_verifies(&dir);
    let a = attempts(&rec, "a");
    assert_eq!(a.len(), 1, "one attempt");
    assert_eq!(a[0]["termination"], "node_failed", "{}", a[0]);
    assert_eq!(a[0]["job"]["state"], "NODE_FAIL", "{}", a[0]);
    // --no-requeue: Slurm does not run the command again behind the record's back.
    drop(_back);
    std::thread::sleep(Duration::from_secs(3));
    assert!(jobs_of(&run_id).is_empty(), "{:?}", jobs_of(&run_id));
    let log = std::fs::read_to_string(dir.join("steps/a/1/stdout.log")).unwrap();
    assert_eq!(log.matches("started").count(), 1, "{log}");
}
