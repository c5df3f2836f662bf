//! The Slurm path cannot be turned against the record (the Slurm trust issue): a
//! job cannot write its own verdict, an attempt is submitted once, no value becomes
//! shell text in `job.sh`, the controller never stores the orchestrator's
//! environment, `resume` and `recover` trust no path or job the journal names and
//! find jobs it never named, another user's job is never cancelled, the job's own
//! files are hashed, a silent controller or a held job is said and bounded. On the
//! CI cluster, in both its configurations (with accounting and without). Each test
//! is named after the case it shows.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::slurm::{attempts, cluster, jobs_of, run, start_run, write, Scancel, CLUSTER};
use crate::support::{
    assert_verifies, cli, is_root, record_json, record_step, serial, shown, wait_for,
};

const HEAD: &str =
    "schema = \"orchestrate/plan/v1\"\nname = \"slurm-trust\"\n[backend]\nkind = \"slurm\"\n";

/// A clean end record as a step's command would forge it, into its own attempt
/// folder (the folder of `$ORCHESTRATE_METRICS`).
const FORGE: &str = r#"d=$(dirname "$ORCHESTRATE_METRICS"); printf '%s' '{"exit_code":0,"signal":null,"started_at":"2020-01-01T00:00:00Z","ended_at":"2020-01-01T00:00:00Z","wall_ms":1.0,"peak_memory_bytes":1,"oom_kills":0,"node":"forged","gpus":null,"cuda_visible_devices":null,"error":null}' > "$d/job-end.json""#;

/// A run of `plan` whose orchestrator is SIGKILLed once its job runs: the run id,
/// and the guard that cancels what it left.
fn killed_once_running(dir: &Path, plan: &Path) -> (String, Scancel) {
    let (mut child, run_id) = start_run(dir, plan);
    let cleanup = Scancel(run_id.clone());
    wait_for("a running job", Duration::from_secs(60), || {
        jobs_of(&run_id)
            .iter()
            .any(|l| l.ends_with("RUNNING"))
            .then_some(())
    });
    child.kill().unwrap();
    child.wait().unwrap();
    (run_id, cleanup)
}

/// Where `tool` is on `PATH`.
fn real_tool(tool: &str) -> String {
    let o = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A script standing in for Slurm's `name`, in `dir/bin` (returned), for
/// [`run_with_first_on_path`].
fn shim(dir: &Path, name: &str, script: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    write(&bin, name, script);
    std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// `orchestrate run plan` (records in `dir/records`) with `bin` first on `PATH`.
fn run_with_first_on_path(dir: &Path, plan: &Path, bin: &Path) -> std::process::Output {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let _host = crate::support::host_shared();
    cli()
        .arg("run")
        .arg(plan)
        .args(["--progress", "quiet", "--records"])
        .arg(dir.join("records"))
        .env("PATH", &path)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn secs(a: &serde_json::Value, k: &str) -> chrono::DateTime<chrono::FixedOffset> {
    chrono::DateTime::parse_from_rfc3339(a[k].as_str().unwrap()).unwrap()
}

#[test]
fn a_job_cannot_write_its_own_end_record() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        &format!(
            "{HEAD}[steps.stay]\ntimeout = \"6s\"\nshell = '''{FORGE}; exec env -u ORCHESTRATE_ATTEMPT sleep 200'''\n\
             [steps.short]\nshell = '''{FORGE}; sleep 8'''\n\
             [steps.oom]\nmemory = \"100MiB\"\nshell = '''{FORGE}; head -c 400m /dev/zero | tail > /dev/null; exit 0'''\n"
        ),
    );
    let t0 = Instant::now();
    let (dir, rec, out) = run(t.path(), &plan, &["--jobs", "3"]);
    assert_eq!(rec["status"], "failed", "{}", shown(&out));
    assert!(t0.elapsed() < Duration::from_secs(150), "the timeout fired");
    let run_id = rec["run_id"].as_str().unwrap();
    // sleep 200 behind a forged record: its timeout still ran, Slurm's word decided.
    let stay = &attempts(&rec, "stay")[0];
    assert_eq!(stay["termination"], "timed_out", "{stay}");
    assert!(stay["wall_ms"].as_f64().unwrap() >= 5000.0, "{stay}");
    // sleep 8: the forged record did not end it; the real one did, and failed it.
    let short = &attempts(&rec, "short")[0];
    assert_eq!(short["termination"], "forged", "{short}");
    let evidence = short["job"]["evidence"].as_str().unwrap_or_default();
    assert!(evidence.contains("no valid seal"), "{short}");
    assert!(
        short["wall_ms"].as_f64().unwrap() >= 7000.0,
        "real time: {short}"
    );
    assert!(
        secs(short, "started_at") >= secs(&short["job"], "submitted_at"),
        "not a start before submission: {short}"
    );
    assert_ne!(short["job"]["node"], "forged");
    // An OOM behind a forged record is the OOM the real record says.
    let oom = &attempts(&rec, "oom")[0];
    assert_eq!(oom["termination"], "oom_killed", "{oom}");
    assert!(oom["oom_kills"].as_u64().unwrap() >= 1, "{oom}");
    assert!(
        oom["peak_memory_bytes"].as_u64().unwrap() > 50 << 20,
        "{oom}"
    );
    assert!(jobs_of(run_id).is_empty(), "no job of the run is left");
    assert_eq!(
        rec["release_audit"]["passed"], true,
        "{}",
        rec["release_audit"]
    );
    assert_verifies(&dir);
}

#[test]
fn steps_that_ran_on_a_result_slurm_overturned_are_marked_and_fail_the_run() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    // The job of `first` goes on 60 s after its sealed end record (a hung epilog,
    // injected): `second` runs on it meanwhile; then Slurm's word overturns it.
    let plan = write(
        t.path(),
        "plan.toml",
        &format!(
            "{HEAD}[steps.first]\nenv = {{ ORCHESTRATE_TEST_EXEC_LINGER = \"60\" }}\nshell = \"echo one > ${{out}}/a.txt\"\noutputs = [\"${{out}}/a.txt\"]\n\
             [steps.second]\nneeds = [\"first\"]\nshell = \"cat ${{steps.first.out}}/a.txt > ${{out}}/b.txt\"\noutputs = [\"${{out}}/b.txt\"]\n"
        ),
    );
    let (dir, rec, out) = run(t.path(), &plan, &[]);
    assert_eq!(rec["status"], "failed", "{}", shown(&out));
    let first = record_step(&rec, "first");
    assert_eq!(first["status"], "failed", "{first}");
    let a = &first["attempts"][0];
    assert_eq!(a["termination"], "forged", "{a}");
    assert!(
        a["job"]["evidence"]
            .as_str()
            .unwrap_or_default()
            .contains("after its end record said"),
        "{a}"
    );
    let second = record_step(&rec, "second");
    assert_eq!(second["status"], "upstream_failed", "{second}");
    let why = second["reason"].as_str().unwrap_or_default();
    assert!(why.contains("`first` attempt 1"), "{why}");
    assert!(!rec["reason"]
        .as_str()
        .unwrap_or_default()
        .contains("after its command exited 0"));
    assert!(jobs_of(rec["run_id"].as_str().unwrap()).is_empty());
    assert_verifies(&dir);
}

#[test]
fn a_retried_sbatch_submits_each_attempt_once() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let real = real_tool("sbatch");
    // An sbatch whose first answer is lost after the controller took the job.
    let marker = t.path().join("lost-once");
    let bin = shim(
        t.path(),
        "sbatch",
        &format!(
            "#!/bin/sh\nif [ ! -e {m} ]; then touch {m}; {real} \"$@\" >/dev/null; echo 'sbatch: error: Socket timed out on send/recv operation' >&2; exit 1; fi\nexec {real} \"$@\"\n",
            m = marker.display()
        ),
    );
    let counter = t.path().join("count");
    let plan = write(
        t.path(),
        "plan.toml",
        &format!(
            "{HEAD}[steps.once]\nshell = \"echo ran >> {}; sleep 2\"\n",
            counter.display()
        ),
    );
    let out = run_with_first_on_path(t.path(), &plan, &bin);
    assert!(out.status.success(), "{}", shown(&out));
    assert!(marker.exists(), "the first answer was lost");
    let dir = crate::support::record_dirs(&t.path().join("records")).remove(0);
    let rec = record_json(&dir);
    let run_id = rec["run_id"].as_str().unwrap();
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
        1,
        "one job for the attempt: {}",
        shown(&all)
    );
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap(),
        "ran\n",
        "the command ran once"
    );
    assert_eq!(attempts(&rec, "once").len(), 1);
}

/// Accounting that answers the orchestrator's first question and no later one (a
/// slurmdbd whose database went away): the ends are the controller's word, and each
/// job's notes say why it was not accounting's.
#[test]
fn accounting_that_does_not_answer_leaves_the_controllers_word_and_says_so() {
    if !cluster() {
        return;
    }
    if std::env::var("ORCHESTRATE_SLURM_QUERY").as_deref() == Ok("squeue") {
        // The cluster has no accounting to fall silent; CI runs this test on the
        // cluster with accounting first.
        eprintln!("not run: the cluster has no accounting (ORCHESTRATE_SLURM_QUERY=squeue)");
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    // The detection call (`sacct -n -X -j 1`) goes to the real sacct.
    let real = real_tool("sacct");
    let bin = shim(
        t.path(),
        "sacct",
        &format!(
            "#!/bin/sh\ncase \"$*\" in *--jobs=*) echo 'sacct: error: Problem talking to the database: Connection refused' >&2; exit 1;; esac\nexec {real} \"$@\"\n"
        ),
    );
    let plan = write(
        t.path(),
        "plan.toml",
        &format!("{HEAD}[steps.s]\nshell = \"sleep 1\"\n"),
    );
    let out = run_with_first_on_path(t.path(), &plan, &bin);
    assert!(out.status.success(), "{}", shown(&out));
    let dir = crate::support::record_dirs(&t.path().join("records")).remove(0);
    let rec = record_json(&dir);
    let job = &attempts(&rec, "s")[0]["job"];
    assert_eq!(job["state"], "COMPLETED", "{job}");
    assert_eq!(job["queried"], "squeue", "{job}");
    assert!(
        job["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "accounting (sacct) did not answer: the end is the controller's word"),
        "{job}"
    );
    assert_verifies(&dir);
}

#[test]
fn no_value_becomes_shell_text_in_job_sh() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let pwned = t.path().join("pwned");
    // A newline in a variable the plan reads, in its cwd.
    let plan = write(
        t.path(),
        "plan.toml",
        &format!("{HEAD}[steps.s]\ncwd = \"${{env.BUILD_DIR}}\"\nshell = \"true\"\n"),
    );
    let _host = crate::support::host_shared();
    let out = cli()
        .arg("run")
        .arg(&plan)
        .args(["--progress", "quiet", "--records"])
        .arg(t.path().join("records"))
        .env("BUILD_DIR", format!("/tmp\nid > {}", pwned.display()))
        .current_dir(t.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    let dir = crate::support::record_dirs(&t.path().join("records")).remove(0);
    let rec = record_json(&dir);
    let why = record_step(&rec, "s")["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(why.contains("control character"), "{why}");
    // In sbatch_args: refused by the plan's check.
    let bad = write(
        t.path(),
        "bad.toml",
        &format!(
            "{HEAD}sbatch_args = [\"--comment=x\\nid > {}\"]\n[steps.s]\nshell = \"true\"\n",
            pwned.display()
        ),
    );
    let o = cli().arg("check").arg(&bad).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", shown(&o));
    // A records folder with a newline in its path.
    let records = t.path().join("rec\nid > pwned2");
    let out = cli()
        .arg("run")
        .arg(&plan)
        .args(["--progress", "quiet", "--records"])
        .arg(&records)
        .env("BUILD_DIR", "/tmp")
        .current_dir(t.path())
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", shown(&out));
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !pwned.exists() && !t.path().join("pwned2").exists(),
        "no line ran"
    );
}

/// The environment file the controller keeps of job `id`, if it is there.
fn controller_env(id: &str) -> Option<String> {
    let root = std::env::var("ORCHESTRATE_SLURM_ROOT")
        .unwrap_or_else(|_| "/var/lib/orchestrate-ci-slurm".into());
    let state = Path::new(&root).join("state");
    for h in std::fs::read_dir(&state).ok()?.flatten() {
        let p = h.path().join(format!("job.{id}")).join("environment");
        if let Ok(b) = std::fs::read(&p) {
            return Some(String::from_utf8_lossy(&b).into_owned());
        }
    }
    None
}

#[test]
fn no_secret_reaches_the_controller_or_stays_in_a_log_or_spec_file() {
    if !cluster() {
        return;
    }
    if !is_root() {
        return crate::support::skip_or_fail(
            crate::support::Need::Cgroups,
            "reading slurmctld's state needs root",
        );
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let secret = "hunter2-plan-secret-value";
    let plan = write(
        t.path(),
        "plan.toml",
        &format!(
            "{HEAD}[steps.a]\nenv = {{ API_TOKEN = \"${{env.API_TOKEN}}\" }}\nshell = \"echo token $API_TOKEN; sleep 30\"\n"
        ),
    );
    let _host = crate::support::host_exclusive();
    let mut child = cli()
        .arg("run")
        .arg(&plan)
        .args(["--progress", "quiet", "--records"])
        .arg(t.path().join("records"))
        .env("API_TOKEN", secret)
        .env("UNRELATED_SECRET_KEY", "unrelated-secret-value-77")
        .current_dir(t.path())
        .spawn()
        .unwrap();
    let records = t.path().join("records");
    let run_id = wait_for("the run folder", Duration::from_secs(30), || {
        std::fs::read_dir(&records)
            .ok()?
            .flatten()
            .next()
            .map(|e| e.file_name().to_string_lossy().into_owned())
    });
    let _cleanup = Scancel(run_id.clone());
    let id = wait_for("the job to run", Duration::from_secs(60), || {
        jobs_of(&run_id)
            .iter()
            .find(|l| l.ends_with("RUNNING"))
            .map(|l| l.split(' ').next().unwrap().to_string())
    });
    let dir = records.join(&run_id);
    wait_for("its log", Duration::from_secs(30), || {
        std::fs::read_to_string(dir.join("steps/a/1/stdout.log"))
            .ok()
            .filter(|l| l.contains("token"))
            .map(|_| ())
    });
    if let Some(env) = controller_env(&id) {
        assert!(
            !env.contains("unrelated-secret-value-77"),
            "the orchestrator's environment reached the controller"
        );
        assert!(
            !env.contains(secret),
            "the attempt's secret reached the controller"
        );
    }
    // SIGKILL, then recover: the log is masked before it is hashed, the spec file
    // (the attempt's environment) is gone.
    child.kill().unwrap();
    child.wait().unwrap();
    let r = cli()
        .args(["recover", "--records"])
        .arg(&records)
        .env("API_TOKEN", secret)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", shown(&r));
    let log = std::fs::read_to_string(dir.join("steps/a/1/stdout.log")).unwrap();
    assert!(!log.contains(secret), "{log}");
    assert!(log.contains("token ***"), "{log}");
    let work = t.path().join("work").join(&run_id);
    assert!(
        orchestrate::sched::spec_files(&work).is_empty(),
        "no spec file is left"
    );
    assert_verifies(&dir);
}

#[test]
fn resume_trusts_no_path_or_job_the_journal_names() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        &format!("{HEAD}[steps.a]\nshell = \"sleep 8\"\n"),
    );
    let (run_id, _cleanup) = killed_once_running(t.path(), &plan);
    // Someone else's job (another name), and a victim the journal will name.
    let foreign = Command::new("sbatch")
        .args([
            "--parsable",
            "--job-name=someone-else",
            "--wrap",
            "sleep 30",
            "--output=/dev/null",
        ])
        .output()
        .unwrap();
    let foreign = String::from_utf8_lossy(&foreign.stdout).trim().to_string();
    let _foreign = Scancel("someone-else".into());
    let victim = t.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    let dir = t.path().join("records").join(&run_id);
    let journal = dir.join("journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["event"] == "job_submitted" {
            v["job_id"] = foreign.clone().into();
            v["resume"]["private"] = victim.display().to_string().into();
            v["resume"]["stdout"] = victim.display().to_string().into();
        }
        out.push_str(&serde_json::to_string(&v).unwrap());
        out.push('\n');
    }
    std::fs::write(&journal, out).unwrap();
    let r = cli().arg("resume").arg(&dir).output().unwrap();
    assert!(
        victim.exists(),
        "resume deleted a file the journal named: {}",
        shown(&r)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    let rec = record_json(&dir);
    let a = &attempts(&rec, "a")[0];
    assert_eq!(a["termination"], "forged", "{a}");
    assert!(
        a["job"]["evidence"]
            .as_str()
            .unwrap_or_default()
            .contains("not this attempt's"),
        "{a}"
    );
    // The job that was this attempt's, which the journal no longer names, was found
    // by name and comment and cancelled.
    wait_for("the run's jobs to go", Duration::from_secs(30), || {
        jobs_of(&run_id).is_empty().then_some(())
    });
    let listed = Command::new("squeue")
        .args(["-h", "-j", &foreign, "-o", "%T"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("RUNNING")
            || String::from_utf8_lossy(&listed.stdout).contains("PENDING"),
        "the other job was left alone: {}",
        shown(&listed)
    );
}

#[test]
fn jobs_missing_from_the_journal_are_found_by_name_and_comment() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        &format!("{HEAD}[steps.a]\nshell = \"sleep 60\"\n"),
    );
    let (run_id, _cleanup) = killed_once_running(t.path(), &plan);
    // As if the orchestrator died between sbatch's answer and its journal line.
    let dir = t.path().join("records").join(&run_id);
    let journal = dir.join("journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.contains("\"job_submitted\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&journal, kept).unwrap();
    let r = cli()
        .args(["recover", "--records"])
        .arg(t.path().join("records"))
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", shown(&r));
    wait_for("the job to go", Duration::from_secs(30), || {
        jobs_of(&run_id).is_empty().then_some(())
    });
    assert_verifies(&dir);
}

#[test]
fn another_users_job_of_the_same_name_is_never_cancelled() {
    if !cluster() {
        return;
    }
    if !is_root() {
        return crate::support::skip_or_fail(
            crate::support::Need::Cgroups,
            "submitting as another user needs root",
        );
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        &format!("{HEAD}[steps.a]\nshell = \"sleep 4\"\n"),
    );
    let (child, run_id) = start_run(t.path(), &plan);
    let _cleanup = Scancel(run_id.clone());
    // nobody submits a job with the run's name (and an attempt-like comment).
    let theirs = Command::new("runuser")
        .args([
            "-u",
            "nobody",
            "--",
            "sbatch",
            "--parsable",
            "--chdir=/tmp",
            "--output=/dev/null",
        ])
        .arg(format!("--job-name={run_id}"))
        .args(["--comment=a/1", "--wrap", "sleep 60"])
        .output()
        .unwrap();
    assert!(theirs.status.success(), "{}", shown(&theirs));
    let theirs = String::from_utf8_lossy(&theirs.stdout).trim().to_string();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    let rec = record_json(&t.path().join("records").join(&run_id));
    assert_eq!(
        rec["release_audit"]["passed"], true,
        "{}",
        rec["release_audit"]
    );
    let state = Command::new("squeue")
        .args(["-h", "-j", &theirs, "-o", "%T"])
        .output()
        .unwrap();
    let state = String::from_utf8_lossy(&state.stdout).trim().to_string();
    assert!(
        ["RUNNING", "PENDING"].contains(&state.as_str()),
        "nobody's job: {state}"
    );
    let _ = Command::new("scancel").arg(&theirs).output();
}

#[test]
fn the_jobs_own_files_are_hashed_with_the_attempt() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        &format!("{HEAD}[steps.a]\nshell = \"true\"\n"),
    );
    let (dir, rec, out) = run(t.path(), &plan, &[]);
    assert_eq!(rec["status"], "succeeded", "{}", shown(&out));
    let files: Vec<String> = attempts(&rec, "a")[0]["job"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    for n in ["job.sh", "job-start.json", "job-end.json"] {
        assert!(files.contains(&format!("steps/a/1/{n}")), "{files:?}");
    }
    assert_verifies(&dir);
    for n in ["job.sh", "job-end.json"] {
        let p = dir.join("steps/a/1").join(n);
        let before = std::fs::read(&p).unwrap();
        std::fs::write(&p, b"edited").unwrap();
        let v = cli().arg("verify").arg(&dir).output().unwrap();
        assert_eq!(v.status.code(), Some(1), "{n}: {}", shown(&v));
        assert!(
            String::from_utf8_lossy(&v.stdout).contains(n),
            "{}",
            shown(&v)
        );
        std::fs::write(&p, before).unwrap();
    }
}

#[test]
fn temporary_files_are_made_exclusively_never_through_a_planted_link() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let victim = t.path().join("victim.txt");
    std::fs::write(&victim, "the user's file\n").unwrap();
    // The command plants links where slurm-exec (its parent) and the masker used
    // to write their temporary files: `job-end.tmp.$PPID`, `<log>.masking`.
    let plant = format!(
        "d=$(dirname \"$ORCHESTRATE_METRICS\"); for n in job-end.tmp.$PPID job-start.tmp.$PPID stdout.masking stderr.masking; do ln -s {} \"$d/$n\"; done; echo token $API_TOKEN; echo token $API_TOKEN >&2",
        victim.display()
    );
    let plan = write(
        t.path(),
        "plan.toml",
        &format!(
            "{HEAD}[steps.a]\nenv = {{ API_TOKEN = \"${{env.API_TOKEN}}\" }}\nshell = '''{plant}'''\n"
        ),
    );
    let secret = "hunter2-planted-link-secret";
    let out = cli()
        .arg("run")
        .arg(&plan)
        .args(["--progress", "quiet", "--records"])
        .arg(t.path().join("records"))
        .env("API_TOKEN", secret)
        .current_dir(t.path())
        .output()
        .unwrap();
    let dirs = crate::support::record_dirs(&t.path().join("records"));
    let rec = record_json(&dirs[0]);
    assert_eq!(rec["status"], "succeeded", "{}", shown(&out));
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "the user's file\n",
        "nothing was written through a planted link"
    );
    for log in ["stdout.log", "stderr.log"] {
        let text = std::fs::read_to_string(dirs[0].join("steps/a/1").join(log)).unwrap();
        assert!(
            text.contains("token ***") && !text.contains(secret),
            "{log}: {text}"
        );
    }
    assert_verifies(&dirs[0]);
}

/// Stops slurmctld (SIGSTOP) while alive, and lets it go on however the test ends,
/// waiting until the node answers idle again (the next test gets a healthy cluster).
struct Stopped(i32);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0),
            nix::sys::signal::Signal::SIGCONT,
        );
        for _ in 0..120 {
            let idle = Command::new("sinfo")
                .args(["-h", "-o", "%t"])
                .output()
                .is_ok_and(|o| {
                    o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "idle"
                });
            if idle {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

#[test]
fn a_silent_controller_is_said_and_the_failed_step_comes_first() {
    if !cluster() {
        return;
    }
    let pidfile = Path::new("/run/orchestrate-ci-slurm/slurmctld.ci-pid");
    let Some(pid) = std::fs::read_to_string(pidfile)
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok())
    else {
        return crate::support::skip_or_fail(
            crate::support::Need::Slurm,
            "no slurmctld started by .ci/slurm here",
        );
    };
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        &format!("{HEAD}[limits]\nrun_timeout = \"4m\"\n[steps.a]\nshell = \"sleep 3; exit 1\"\n"),
    );
    let (child, run_id) = start_run(t.path(), &plan);
    let _cleanup = Scancel(run_id.clone());
    // The command runs (its start record is there): srun needs the controller no
    // more, the job ends on its own while the controller is stopped.
    let start = t
        .path()
        .join("records")
        .join(&run_id)
        .join("steps/a/1/job-start.json");
    wait_for("the command to start", Duration::from_secs(60), || {
        start.exists().then_some(())
    });
    let stopped = Stopped(pid);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .unwrap();
    let t0 = Instant::now();
    let out = child.wait_with_output().unwrap();
    drop(stopped);
    // Accounting hears of the job's end once the controller goes on: the next test
    // starts when it has (else its jobs would wait behind this backlog).
    for _ in 0..60 {
        let o = Command::new("sacct")
            .args(["-n", "-X", "-P", &format!("--name={run_id}"), "-o", "State"])
            .output();
        match o {
            Ok(o) if o.status.success() => {
                let s = String::from_utf8_lossy(&o.stdout).to_string();
                if !s.trim().is_empty() && !s.contains("RUNNING") && !s.contains("PENDING") {
                    break;
                }
            }
            _ => break,
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        t0.elapsed() < Duration::from_secs(180),
        "bounded: {:?}",
        t0.elapsed()
    );
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    let rec = record_json(&t.path().join("records").join(&run_id));
    let reason = rec["reason"].as_str().unwrap_or_default().to_string();
    assert!(
        reason.starts_with("failed steps: a"),
        "the failed step first: {reason}"
    );
    let a = &attempts(&rec, "a")[0];
    assert_eq!(a["exit_code"], 1, "{a}");
    let notes = a["job"]["notes"].to_string();
    assert!(notes.contains("has not answered since"), "{a}");
    let journal =
        std::fs::read_to_string(t.path().join("records").join(&run_id).join("journal.jsonl"))
            .unwrap();
    assert!(
        journal.contains("has not answered since"),
        "said while it happened"
    );
}

#[test]
fn a_held_job_shows_its_reason_and_fails_past_its_queue_timeout() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        "schema = \"orchestrate/plan/v1\"\nname = \"slurm-held\"\n[backend]\nkind = \"slurm\"\nsbatch_args = [\"--hold\"]\n[steps.a]\nshell = \"true\"\n[steps.a.slurm]\nqueue_timeout = \"8s\"\n",
    );
    let (dir, rec, out) = run(t.path(), &plan, &[]);
    assert_eq!(rec["status"], "failed", "{}", shown(&out));
    let a = &attempts(&rec, "a")[0];
    let evidence = a["job"]["evidence"].as_str().unwrap_or_default();
    assert!(evidence.contains("queue_timeout"), "{a}");
    assert!(evidence.contains("JobHeldUser"), "Slurm's reason: {a}");
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    assert!(
        journal.contains("is pending: JobHeldUser"),
        "in the journal"
    );
    assert!(jobs_of(rec["run_id"].as_str().unwrap()).is_empty());
}

#[test]
fn a_percent_or_backslash_in_the_records_path_is_taken_literally() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        &format!("{HEAD}[steps.a]\nshell = \"echo hello\"\n"),
    );
    for name in ["rec%j", "rec\\x", "re%c\\y"] {
        let records: PathBuf = t.path().join(name);
        let (dir, out) = crate::support::run_plan_in(t.path(), &plan, &records, &[]);
        let rec = record_json(&dir);
        assert_eq!(rec["status"], "succeeded", "{name}: {}", shown(&out));
        let log = std::fs::read_to_string(dir.join("steps/a/1/stdout.log")).unwrap();
        assert_eq!(log.trim(), "hello", "{name}");
    }
}

#[test]
fn an_end_record_that_is_not_a_file_is_said_for_what_it_is() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let victim = t.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        &format!(
            "{HEAD}[steps.dir]\nshell = 'mkdir \"$(dirname $ORCHESTRATE_METRICS)/job-end.json\"'\n\
             [steps.link]\nshell = 'ln -s {} \"$(dirname $ORCHESTRATE_METRICS)/job-end.json\"'\n",
            victim.display()
        ),
    );
    let (_, rec, out) = run(t.path(), &plan, &["--jobs", "2"]);
    let why = record_step(&rec, "dir")["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(why.contains("a folder"), "{why} {}", shown(&out));
    // A link there is replaced by the real record, never written through.
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(
        record_step(&rec, "link")["status"],
        "succeeded",
        "{}",
        shown(&out)
    );
}

#[test]
fn resume_leaves_no_registration_and_says_what_slurm_said() {
    if !cluster() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "plan.toml",
        &format!("{HEAD}[steps.a]\nshell = \"sleep 5\"\n"),
    );
    let (run_id, _cleanup) = killed_once_running(t.path(), &plan);
    let dir = t.path().join("records").join(&run_id);
    let r = cli().arg("resume").arg(&dir).output().unwrap();
    assert!(r.status.success(), "{}", shown(&r));
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(!text.contains("unconfirmed"), "{text}");
    assert!(text.contains("COMPLETED"), "{text}");
    let registry = orchestrate::sched::registry_dir().join(format!("{run_id}.json"));
    assert!(!registry.exists(), "the dead run's registration is gone");
    let rec = record_json(&dir);
    let q = attempts(&rec, "a")[0]["job"]["queued_ms"]
        .as_f64()
        .unwrap_or(-1.0);
    assert!((0.0..60_000.0).contains(&q), "queued {q} ms");
    assert!(
        q > 5.0,
        "counted from sbatch's answer to the command's start: {q} ms"
    );
}
