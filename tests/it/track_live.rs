//! Runs without a record yet, as `runs` and the site show them: a real run held at
//! its second step (it waits for a file the test writes) is `running 1/3` with its
//! progress from its journal, on the site too; a run whose orchestrator was killed
//! is `DEAD 1/3`, told apart by the liveness registry, until `recover` writes its
//! record.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{cli, shown};

fn plan(root: &Path, gate: &str) -> String {
    let gate = root.join(gate);
    format!(
        r#"schema = "orchestrate/plan/v1"
name = "live"
[steps.a]
shell = "true"
[steps.b]
needs = ["a"]
shell = "while [ ! -e '{}' ]; do sleep 0.05; done"
[steps.c]
needs = ["b"]
shell = "true"
"#,
        gate.display()
    )
}

fn runs_json(root: &Path) -> Vec<serde_json::Value> {
    let out = cli()
        .args(["runs", "--records", "records", "--json"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).unwrap()
}

/// The first row `pick` accepts, waiting up to a minute for it.
fn wait_for(
    root: &Path,
    what: &str,
    pick: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = runs_json(root);
        if let Some(r) = rows.iter().find(|r| pick(r)) {
            return r.clone();
        }
        assert!(Instant::now() < deadline, "no run {what}: {rows:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A run held at its step `b` until its gate file is written; dropped (the test
/// done or failed), the gate is opened and the orchestrator ended, so nothing of it
/// outlives the test.
struct Held {
    child: std::process::Child,
    gate: std::path::PathBuf,
}

impl Held {
    fn open(&self) {
        std::fs::write(&self.gate, "").unwrap();
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.gate, "");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(root: &Path, plan: &str) -> Held {
    std::fs::write(root.join(plan), self::plan(root, &format!("{plan}.go"))).unwrap();
    std::fs::create_dir_all(root.join("records")).unwrap();
    let child = cli()
        .args(["run", plan, "--records", "records", "--progress", "quiet"])
        .current_dir(root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    Held {
        child,
        gate: root.join(format!("{plan}.go")),
    }
}

/// The cgroups of `run_id` still in the hierarchy (v1's controllers or v2's).
fn cgroups_of(run_id: &str) -> Vec<std::path::PathBuf> {
    let prefix = format!("orchestrate-{run_id}");
    let mut found = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from("/sys/fs/cgroup")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    found.push(e.path());
                }
                dirs.push(e.path());
            }
        }
    }
    found
}

fn table(root: &Path) -> String {
    let out = cli()
        .args(["runs", "--records", "records"])
        .current_dir(root)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_run_in_progress_and_a_dead_one_are_told_from_their_journals() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let mut live = start(root, "live.toml");
    let at_b = |r: &serde_json::Value| r["progress"]["running"] == serde_json::json!(["b"]);
    let row = wait_for(root, "held at b", at_b);
    assert_eq!(row["status"], "running", "{row:#}");
    assert_eq!(row["running"], true);
    assert_eq!(row["verified"], false);
    assert_eq!(row["plan"], "live");
    let p = &row["progress"];
    assert_eq!(
        (&p["steps"], &p["done"], &p["waiting"], &p["failed"]),
        (&3.into(), &1.into(), &1.into(), &0.into()),
        "{p:#}"
    );
    assert_eq!(p["timeline"].as_array().unwrap().len(), 1, "{p:#}");
    crate::track_schema::validate("runs", &serde_json::Value::Array(runs_json(root)));
    let only = |status: &str| {
        let out = cli()
            .args(["runs", "--records", "records", "--json", "--status", status])
            .current_dir(root)
            .output()
            .unwrap();
        serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout)
            .unwrap()
            .len()
    };
    assert_eq!(
        (only("running"), only("succeeded")),
        (1, 0),
        "--status judges it"
    );
    let listed = table(root);
    assert!(listed.contains("running 1/3"), "{listed}");
    assert!(
        listed.contains("1 of 3 steps done, 1 running (b), 1 waiting"),
        "{listed}"
    );

    // The site lists it in progress, with its progress over time.
    crate::support::git(root, &["init", "-q", "repo"]);
    let out = cli()
        .args([
            "site",
            "--records",
            "records",
            "--repo",
            "repo",
            "--no-reports",
            "-o",
            "site",
        ])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("(1 runs, 0 unverified, 1 in progress;"),
        "{}",
        shown(&out)
    );
    let index = root.join("site/index.html");
    let html = std::fs::read_to_string(&index).unwrap();
    assert!(
        !html.contains("http-equiv=\"refresh\""),
        "no --watch, no reload"
    );
    if let Some(page) =
        crate::support::browser::render(&format!("file://{}", index.display()), root)
    {
        assert!(page.errors.is_empty(), "{:#?}", page.errors);
        let dom = page.dom;
        assert!(
            dom.contains("<td class=\"st-running\">running</td>"),
            "{dom}"
        );
        assert!(dom.contains("1 in progress"), "{dom}");
        assert!(
            dom.contains("1 of 3 steps done, 1 running (b), 1 waiting"),
            "{dom}"
        );
        assert!(dom.contains("steps done over time (UTC): 1 at "), "{dom}");
    }

    // Let it go on: it ends, and its record replaces its progress.
    live.open();
    assert!(live.child.wait().unwrap().success());
    let done = wait_for(root, "succeeded", |r| r["status"] == "succeeded");
    assert!(
        done.get("progress").is_none() && done["verified"] == true,
        "{done:#}"
    );

    // A run whose orchestrator is killed at b: dead once it is gone, with how far
    // it got, until `recover` writes its record.
    let mut dead = start(root, "dead.toml");
    let held = wait_for(root, "held at b", |r| {
        at_b(r) && r["folder"] != done["folder"]
    });
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();
    let folder = held["folder"].clone();
    let row = wait_for(root, "dead", |r| {
        r["folder"] == folder && r["status"] == "dead"
    });
    assert_eq!(row["running"], serde_json::Value::Null, "{row:#}");
    assert!(
        row["problem"]
            .as_str()
            .unwrap()
            .contains("`orchestrate recover`"),
        "{row:#}"
    );
    assert_eq!(row["progress"]["done"], 1);
    assert!(table(root).contains("DEAD 1/3"), "{}", table(root));
    crate::track_schema::validate("runs", &serde_json::Value::Array(runs_json(root)));
    dead.open();
    let out = cli()
        .args(["recover", "--records", "records"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    let recovered = wait_for(root, "recovered", |r| {
        r["folder"] == folder && r["verified"] == true
    });
    assert_eq!(recovered["status"], "interrupted", "{recovered:#}");
    // Recover ended what the dead run left: none of its cgroups remain.
    let id = recovered["run_id"].as_str().unwrap();
    assert_eq!(cgroups_of(id), Vec::<std::path::PathBuf>::new());
}
