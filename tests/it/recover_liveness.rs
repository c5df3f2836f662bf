//! `audit` and `recover` judge runs they cannot see by their state folder: a run
//! with its own `ORCHESTRATE_STATE_DIR`, a run of another user, and a cgroup of a run
//! nobody can account for. Only a run proven dead is cleaned; an unsure one is
//! named and left alone.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::{host_exclusive, is_root, skip_or_fail, wait_for, Need};

const SLEEPER: &str =
    "schema = \"orchestrate/plan/v1\"\nname = \"sleeper\"\n[steps.nap]\nshell = \"sleep 60\"\n";

/// Started in `dir`; returns the child and the run's record folder once its step
/// runs.
fn start(dir: &Path, cmd: &mut Command) -> (Child, PathBuf) {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let records = dir.join("records");
    let rec = wait_for("the step to start", Duration::from_secs(30), || {
        let d = std::fs::read_dir(&records).ok()?.flatten().next()?.path();
        let j = std::fs::read_to_string(d.join("journal.jsonl")).ok()?;
        j.contains("attempt_started").then_some(d)
    });
    (child, rec)
}

fn run_cmd(dir: &Path, extra: &[&str]) -> Command {
    let plan = dir.join("sleeper.toml");
    std::fs::write(&plan, SLEEPER).unwrap();
    let mut c = crate::support::cli();
    c.arg("run")
        .arg(&plan)
        .arg("--records")
        .arg(dir.join("records"))
        .args(["--progress", "plain", "--grace", "1s"])
        .args(extra)
        .current_dir(dir);
    c
}

/// `audit --json` and `recover` as root sees them (no state folder override).
fn audit_json(dir: &Path) -> serde_json::Value {
    let out = crate::support::cli()
        .args(["audit", "--json"])
        .env_remove("ORCHESTRATE_STATE_DIR")
        .current_dir(dir)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

fn recover(dir: &Path) -> String {
    let out = crate::support::cli()
        .arg("recover")
        .arg("--records")
        .arg(dir.join("other-records"))
        .env_remove("ORCHESTRATE_STATE_DIR")
        .current_dir(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn mentions(audit: &serde_json::Value, key: &str, id: &str) -> bool {
    audit[key]
        .as_array()
        .is_some_and(|a| a.iter().any(|v| v.to_string().contains(id)))
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The run's attempt processes (by canary).
fn attempt_pids(run_id: &str) -> Vec<i32> {
    let prefix = format!("{run_id}/");
    orchestrate::isolate::processes_with_canary(&|c| c.starts_with(&prefix))
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

fn end(mut child: Child) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
    let _ = child.wait();
}

fn assert_left_alone(dir: &Path, run_id: &str, orchestrator: u32) {
    let audit = audit_json(dir);
    for key in ["dead_cgroups", "left_processes", "unsure_runs"] {
        assert!(
            !mentions(&audit, key, run_id),
            "{key} names a live run: {audit}"
        );
    }
    assert!(mentions(&audit, "live_runs", run_id), "{audit}");
    let before = attempt_pids(run_id);
    assert!(!before.is_empty(), "the attempt should be running");
    let text = recover(dir);
    assert!(!text.contains(run_id), "recover touched a live run: {text}");
    assert!(alive(orchestrator));
    assert_eq!(
        attempt_pids(run_id),
        before,
        "recover killed a live run's attempt"
    );
}

#[test]
fn a_run_with_its_own_state_folder_is_alive_to_root() {
    let _host = host_exclusive();
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("private-state");
    let mut cmd = run_cmd(t.path(), &[]);
    cmd.env("ORCHESTRATE_STATE_DIR", &state);
    let (child, rec) = start(t.path(), &mut cmd);
    let run_id = rec.file_name().unwrap().to_string_lossy().into_owned();
    assert!(state.join("runs").join(format!("{run_id}.lock")).exists());
    // Without the registry the judge would not know where to look: it is there.
    assert!(orchestrate::sched::registry_dir()
        .join(format!("{run_id}.json"))
        .exists());
    assert_left_alone(t.path(), &run_id, child.id());
    end(child);
}

#[test]
fn a_run_of_another_user_is_alive_to_root() {
    if !is_root() {
        skip_or_fail(
            Need::Cgroups,
            "not root: cannot start a run as another user",
        );
        return;
    }
    let _host = host_exclusive();
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut cmd = run_cmd(t.path(), &["--isolation", "none"]);
    // nobody, with nothing of root's environment that names a state folder.
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", t.path())
        .uid(65534)
        .gid(65534);
    let (child, rec) = start(t.path(), &mut cmd);
    let run_id = rec.file_name().unwrap().to_string_lossy().into_owned();
    assert!(Path::new(&format!("/tmp/orchestrate-65534/runs/{run_id}.lock")).exists());
    assert_left_alone(t.path(), &run_id, child.id());
    end(child);
}

#[test]
fn a_cgroup_no_run_accounts_for_is_named_unsure_and_left_alone() {
    let _host = host_exclusive();
    let iso = match orchestrate::isolate::Isolator::new(orchestrate::isolate::Mode::Cgroup) {
        Ok(i) => i,
        Err(e) => {
            skip_or_fail(Need::Cgroups, &format!("no cgroups: {e}"));
            return;
        }
    };
    let t = tempfile::tempdir().unwrap();
    // A run id no lock, registration or state folder knows of.
    let id = "20990101T000000Z-0d0d0d";
    let name = format!("orchestrate-{id}-ghost-1");
    let dirs = iso.cgroup_paths(&name);
    for d in &dirs {
        std::fs::create_dir(d).unwrap();
    }
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    std::fs::write(dirs[0].join("cgroup.procs"), sleeper.id().to_string()).unwrap();

    let audit = audit_json(t.path());
    assert!(mentions(&audit, "unsure_runs", id), "{audit}");
    assert!(!mentions(&audit, "dead_cgroups", id), "{audit}");
    let text = crate::support::cli().arg("audit").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("UNSURE") && text.contains("NOT clean"),
        "{text}"
    );
    let r = recover(t.path());
    assert!(!r.contains(id), "recover touched an unsure run: {r}");
    assert!(dirs.iter().all(|d| d.exists()), "its cgroups were removed");
    assert!(alive(sleeper.id()), "its process was killed");

    let _ = sleeper.kill();
    let _ = sleeper.wait();
    for d in &dirs {
        let _ = std::fs::remove_dir(d);
    }
}
