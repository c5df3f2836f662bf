//! Detached runs on the CI cluster: `run --detach` submits the whole DAG chained by
//! `afterok` and returns; the jobs run on without it; `resume` collects them into
//! a record that states what an attached run states; a failed upstream cancels
//! what follows; `recover` leaves a detached run alone.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use super::slurm::{cluster, jobs_of, run, write, CLUSTER};
use crate::support::{assert_verifies, cli, project, record_json, serial, shown, wait_for};

/// Detach `plan` from a shell that exits once it has: the shell's output, the
/// seconds it took, and the record folder it named last.
fn detach_from_shell(dir: &Path, plan: &Path, extra: &[&str]) -> (Output, f64, PathBuf) {
    let records = dir.join("records");
    let mut words = vec![
        "run".to_string(),
        plan.display().to_string(),
        "--records".into(),
        records.display().to_string(),
        "--progress".into(),
        "quiet".into(),
        "--detach".into(),
    ];
    words.extend(extra.iter().map(|s| s.to_string()));
    let bin = cli().get_program().to_owned();
    let started = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg("exec \"$@\"")
        .arg("sh")
        .arg(bin)
        .args(&words)
        .envs(
            cli()
                .get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .current_dir(dir)
        .output()
        .unwrap();
    let took = started.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let last = text.lines().last().unwrap_or_default().to_string();
    (out, took, PathBuf::from(last))
}

/// Wait until Slurm holds no job of the run (all ended), then collect it.
fn collect(dir: &Path, record: &Path) -> Output {
    let run_id = record.file_name().unwrap().to_string_lossy().to_string();
    wait_for("the detached jobs to end", Duration::from_secs(240), || {
        let live: Vec<String> = jobs_of(&run_id)
            .into_iter()
            .filter(|l| !l.ends_with("COMPLETED") && !l.ends_with("FAILED"))
            .collect();
        live.is_empty().then_some(())
    });
    cli()
        .arg("resume")
        .arg(record)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Per step: status, attempts, and each declared output's digest of the last
/// attempt; and every comparison's name, verdict and value.
fn what_it_states(rec: &serde_json::Value) -> (Vec<String>, Vec<String>) {
    let steps = rec["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let attempts = s["attempts"].as_array().unwrap();
            let outs: Vec<String> = attempts
                .last()
                .map(|a| {
                    a["outputs"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|o| o["sha256"].to_string())
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "{} {} {} {}",
                s["id"],
                s["status"],
                attempts.len(),
                outs.join(",")
            )
        })
        .collect();
    let checks = rec["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{} {} {}", c["name"], c["passed"], c["value"]))
        .collect();
    (steps, checks)
}

#[test]
fn a_detached_full_plan_returns_at_once_and_resume_states_what_an_attached_run_states() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let extra = [
        "--backend",
        "slurm",
        "--only",
        "tokens=2048",
        "--set",
        "params.layers=1",
    ];
    let plan = project("plans/full.toml");
    let (att_dir, attached, out) = run(t.path(), &plan, &extra);
    assert_eq!(attached["status"], "succeeded", "{}", shown(&out));

    let d = tempfile::tempdir().unwrap();
    let (out, took, record) = detach_from_shell(d.path(), &plan, &extra);
    assert!(out.status.success(), "{}", shown(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("detached: 8 jobs submitted"), "{said}");
    assert!(said.contains("orchestrate resume"), "{said}");
    assert!(said.contains("compare[tokens=2048]"), "{said}");
    assert!(took < 20.0, "--detach returned after {took:.1} s");
    assert!(
        !record.join("record.json").exists(),
        "no record before resume"
    );

    let status = cli().arg("status").arg(&record).output().unwrap();
    assert!(status.status.success(), "{}", shown(&status));
    let st = String::from_utf8_lossy(&status.stdout);
    assert!(
        st.contains("detached") && st.contains("prefill[tokens=2048]"),
        "{st}"
    );

    let out = collect(d.path(), &record);
    assert!(out.status.success(), "{}", shown(&out));
    assert_verifies(&record);
    let detached = record_json(&record);
    assert_eq!(detached["status"], "succeeded");
    assert_eq!(what_it_states(&detached), what_it_states(&attached));
    // Every attempt ran as its own job, none the attached run's.
    let ids = |r: &serde_json::Value| -> Vec<String> {
        r["steps"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["attempts"].as_array().unwrap().clone())
            .map(|a| a["job"]["job_id"].to_string())
            .collect()
    };
    let (a, b) = (ids(&attached), ids(&detached));
    assert_eq!(a.len(), b.len());
    assert!(a.iter().all(|j| !b.contains(j)), "{a:?} {b:?}");
    // Collected once: a second resume finds nothing to collect.
    let again = cli().arg("resume").arg(&record).output().unwrap();
    assert!(!again.status.success(), "{}", shown(&again));
    drop(att_dir);
}

#[test]
fn a_failed_upstream_cancels_what_follows_and_recover_leaves_the_run_alone() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        "schema = \"orchestrate/plan/v1\"\nname = \"detach-fail\"\n[backend]\nkind = \"slurm\"\n\
         [steps.a]\nshell = \"sleep 8; exit 3\"\n\
         [steps.b]\nneeds = [\"a\"]\nrepeats = 2\nshell = \"echo b\"\n",
    );
    let (out, _, record) = detach_from_shell(t.path(), &plan, &[]);
    assert!(out.status.success(), "{}", shown(&out));
    let run_id = record.file_name().unwrap().to_string_lossy().to_string();
    // While its jobs run, recover knows the run for detached, not dead.
    let rec = cli()
        .args(["recover", "--records"])
        .arg(t.path().join("records"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&rec.stdout);
    assert!(
        said.contains(&format!("left alone: run {run_id} is detached")),
        "{}",
        shown(&rec)
    );
    assert_eq!(jobs_of(&run_id).len(), 3, "recover cancelled nothing");
    let out = collect(t.path(), &record);
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert_verifies(&record);
    let r = record_json(&record);
    let step = |id: &str| {
        r["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(step("a")["status"], "failed");
    assert_eq!(step("b")["status"], "skipped", "{}", step("b"));
    assert!(step("b")["attempts"].as_array().unwrap().is_empty());
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("(b/1) did not run") && warnings.contains("(b/2) did not run"),
        "{warnings}"
    );
    let live: Vec<String> = jobs_of(&run_id)
        .into_iter()
        .filter(|l| l.contains("PENDING") || l.contains("RUNNING"))
        .collect();
    assert!(live.is_empty(), "{live:?}");
}

#[test]
fn detach_refuses_steps_that_need_this_host_naming_them() {
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        "schema = \"orchestrate/plan/v1\"\nname = \"detach-local\"\n\
         [steps.here]\nshell = \"true\"\n\
         [steps.flaky]\nretries = 2\nshell = \"true\"\n",
    );
    let out = cli()
        .arg("run")
        .arg(&plan)
        .arg("--records")
        .arg(t.path().join("records"))
        .arg("--detach")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot be detached") && err.contains("`here`") && err.contains("`flaky`"),
        "{err}"
    );
    assert!(!t.path().join("records").exists(), "nothing was started");
}

/// The attempts the journal says ended, as (step, attempt), in order.
fn ended_in_journal(record: &Path) -> Vec<(String, u64)> {
    std::fs::read_to_string(record.join("journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "attempt_ended")
        .map(|v| {
            (
                v["step"].as_str().unwrap_or_default().to_string(),
                v["attempt"]["attempt"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn a_collection_killed_midway_is_collected_again_with_each_attempt_once() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        "schema = \"orchestrate/plan/v1\"\nname = \"detach-kill\"\n[backend]\nkind = \"slurm\"\n\
         [steps.a]\nrepeats = 3\nshell = \"sleep 3; echo a\"\n\
         [steps.b]\nneeds = [\"a\"]\nshell = \"echo b\"\n",
    );
    let (out, _, record) = detach_from_shell(t.path(), &plan, &[]);
    assert!(out.status.success(), "{}", shown(&out));
    // Collect at once, and kill the collection once it journaled a's first end.
    let mut first = cli()
        .arg("resume")
        .arg(&record)
        .current_dir(t.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for(
        "a's first attempt to be collected",
        Duration::from_secs(120),
        || {
            ended_in_journal(&record)
                .contains(&("a".to_string(), 1))
                .then_some(())
        },
    );
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(!record.join("record.json").exists());
    let out = collect(t.path(), &record);
    assert!(out.status.success(), "{}", shown(&out));
    let ended = ended_in_journal(&record);
    let mut once = ended.clone();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), ended.len(), "journaled twice: {ended:?}");
    let rec = record_json(&record);
    assert_eq!(rec["status"], "succeeded", "{rec}");
    let (steps, _) = what_it_states(&rec);
    assert!(steps[0].starts_with("\"a\" \"succeeded\" 3 "), "{steps:?}");
    assert!(steps[1].starts_with("\"b\" \"succeeded\" 1 "), "{steps:?}");
    assert_verifies(&record);
}

/// Cancels the user's held jobs however the test ends.
struct Held(Vec<String>);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = Command::new("scancel").args(&self.0).status();
    }
}

/// A detached run stops watching a job once it is submitted, so when the user's
/// other jobs fill `MaxSubmitJobs` (300 on the CI cluster) nothing of its own ends
/// to make room: it counts the queue again until there is, and submits the rest.
#[test]
fn a_detached_run_at_the_submit_limit_waits_for_room_and_submits_the_rest() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    // 297 held tasks of the user's own (arrays of at most MaxArraySize = 100).
    let _ = Command::new("scancel")
        .args(["--name=held-by-test"])
        .status();
    let mut held = Held(Vec::new());
    for _ in 0..3 {
        let out = Command::new("sbatch")
            .args(["--parsable", "--hold", "--array=0-98", "--partition=sweep"])
            .args(["--job-name=held-by-test", "--wrap=true"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", shown(&out));
        let id = String::from_utf8_lossy(&out.stdout);
        held.0
            .push(id.trim().split(';').next().unwrap().to_string());
    }
    let t = tempfile::tempdir().unwrap();
    let cells: Vec<String> = (0..6).map(|i| i.to_string()).collect();
    let plan = write(
        t.path(),
        "plan.toml",
        &format!(
            "schema = \"orchestrate/plan/v1\"\nname = \"detach-limit\"\n\
             [backend]\nkind = \"slurm\"\npartition = \"sweep\"\n\
             [matrix]\ncell = [{}]\n[steps.cell]\nmemory = \"64MB\"\nshell = \"sleep 12; echo ${{matrix.cell}}\"\n",
            cells.join(", ")
        ),
    );
    // Room comes when the held jobs go, a few seconds after the run started.
    let ids = held.0.clone();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(8));
        Command::new("scancel").args(&ids).status().unwrap()
    });
    // Its first three jobs run 12 s, past the first recount after Slurm refuses
    // the rest: only counting again later finds the room the held jobs leave.
    // A run that never counts again would wait for ever: `timeout` ends it.
    let started = Instant::now();
    let out = Command::new("timeout")
        .arg("120")
        .args(cli().get_program().to_str())
        .arg("run")
        .arg(&plan)
        .args(["--progress", "quiet", "--detach", "--records"])
        .arg(t.path().join("records"))
        .envs(
            cli()
                .get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .current_dir(t.path())
        .output()
        .unwrap();
    let took = started.elapsed().as_secs_f64();
    let record = PathBuf::from(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default(),
    );
    assert!(release.join().unwrap().success());
    assert!(out.status.success(), "{}", shown(&out));
    assert!(
        took >= 8.0,
        "it returned after {took:.1} s, before there was room"
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("detached: 6 jobs submitted"), "{said}");
    let out = collect(t.path(), &record);
    assert!(out.status.success(), "{}", shown(&out));
    let rec = record_json(&record);
    assert_eq!(rec["status"], "succeeded", "{}", shown(&out));
    assert_verifies(&record);
}
