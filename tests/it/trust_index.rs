//! The run index and the site as someone else's input (issue 39): an index another
//! user planted or can write is not believed, a planted trigger is rebuilt away,
//! records `verify` rejects are never believed, copies count once, readers never
//! fail for a writer, and a site folder keeps what its user added.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{self, cli, shown};

const INDEX: &str = ".orchestrate-index.sqlite";

fn plan(dir: &Path, shell: &str) -> PathBuf {
    let p = dir.join("plan.toml");
    std::fs::write(
        &p,
        format!(
            "schema = \"orchestrate/plan/v1\"\nname = \"idx\"\n[steps.t]\nrepeats = 2\nshell = \"{shell}\"\n"
        ),
    )
    .unwrap();
    p
}

fn runs_json(records: &Path) -> (Vec<serde_json::Value>, std::process::Output) {
    let out = cli()
        .args(["runs", "--json", "--records"])
        .arg(records)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    let v: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    (v, out)
}

fn sqlite(db: &Path, sql: &str) {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()",
        ])
        .arg(db)
        .arg(sql)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
}

fn objects(db: &Path) -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys; print(sorted(r for r in sqlite3.connect(sys.argv[1]).execute('select type, name from sqlite_master')))",
        ])
        .arg(db)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_planted_or_foreign_index_is_not_believed() {
    if !support::is_root() {
        return support::skip_or_fail(support::Need::Cgroups, "not root: cannot chown");
    }
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records");
    let p = plan(dir.path(), "exit 1");
    let (_, out) = support::run_plan_in(dir.path(), &p, &records, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    std::fs::set_permissions(
        &records,
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    runs_json(&records);
    let db = records.join(INDEX);
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();

    // A trigger that rewrites every row: the index is rebuilt without it.
    sqlite(
        &db,
        "CREATE TRIGGER forge AFTER INSERT ON runs BEGIN UPDATE runs SET status = 'succeeded', host = 'planted-by-nobody'; END; DELETE FROM runs;",
    );
    let (rows, _) = runs_json(&records);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["status"], "failed", "{rows:?}");
    assert_ne!(rows[0]["host"], "planted-by-nobody");
    assert!(!objects(&db).contains("forge"), "{}", objects(&db));

    // Another user's index, and one anyone can write: a private one is used, and
    // said, whatever their rows say.
    sqlite(
        &db,
        "UPDATE runs SET status = 'succeeded', host = 'edited';",
    );
    for (owner, mode) in [(nobody.uid.as_raw(), 0o644), (0, 0o666)] {
        std::os::unix::fs::chown(&db, Some(owner), None).unwrap();
        std::fs::set_permissions(&db, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
        let (rows, out) = runs_json(&records);
        assert_eq!(rows[0]["status"], "failed", "{rows:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("its rows are not believed; a private index in memory was used"),
            "{err}"
        );
    }
}

/// Edit a record's timing and recompute only `record.sha256`, as a forger would;
/// a record already cut short is no JSON to edit, and is left as it is.
fn forge(run: &Path) {
    let text = std::fs::read_to_string(run.join("record.json")).unwrap();
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return;
    };
    let a = &mut v["steps"][0]["attempts"][0];
    let wall = a["wall_ms"].as_f64().unwrap();
    a["wall_ms"] = serde_json::json!(wall * 4.95);
    let edited = serde_json::to_string_pretty(&v).unwrap();
    std::fs::write(run.join("record.json"), &edited).unwrap();
    let digest = orchestrate::digest::sha256_bytes(edited.as_bytes()).hex();
    std::fs::write(
        run.join("record.sha256"),
        format!("{digest}  record.json\n"),
    )
    .unwrap();
}

#[test]
fn records_verify_rejects_are_unverified_everywhere_and_copies_count_once() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records");
    let p = plan(dir.path(), "true");
    let (run, out) = support::run_plan_in(dir.path(), &p, &records, &[]);
    assert!(out.status.success(), "{}", shown(&out));
    let (forged, out) = support::run_plan_in(dir.path(), &p, &records, &[]);
    assert!(out.status.success(), "{}", shown(&out));
    forge(&forged);
    let v = cli().arg("verify").arg(&forged).output().unwrap();
    assert!(!v.status.success(), "verify must reject the forged record");

    // Two copies of the good run.
    for c in ["copy-1", "copy-2"] {
        let st = Command::new("cp")
            .arg("-a")
            .arg(&run)
            .arg(records.join(c))
            .status()
            .unwrap();
        assert!(st.success());
    }
    let (rows, _) = runs_json(&records);
    assert_eq!(rows.len(), 4, "{rows:?}");
    let by = |f: &str| rows.iter().find(|r| r["folder"] == f).unwrap().clone();
    let bad = by(forged.file_name().unwrap().to_str().unwrap());
    assert_eq!(bad["verified"], false, "{bad}");
    let good = by(run.file_name().unwrap().to_str().unwrap());
    assert_eq!(good["verified"], true, "{good}");
    assert!(good.get("duplicate_of").is_none(), "{good}");
    for c in ["copy-1", "copy-2"] {
        let r = by(c);
        assert!(
            r["duplicate_of"]
                .as_str()
                .unwrap()
                .ends_with(good["folder"].as_str().unwrap()),
            "{r}"
        );
    }
    let table = cli()
        .args(["runs", "--records"])
        .arg(&records)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert_eq!(text.matches("UNVERIFIED").count(), 1, "{text}");
    assert_eq!(text.matches("COPY").count(), 2, "{text}");

    // The site says so too, and draws only what verifies.
    let st = Command::new("git")
        .args(["init", "-q", "repo"])
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    let out = cli()
        .args([
            "site",
            "--records",
            "records",
            "--repo",
            "repo",
            "-o",
            "site",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("(4 runs, 1 unverified;"), "{said}");
    assert!(
        said.contains("1 reports") || said.contains("1 report"),
        "{said}"
    );
}

#[test]
fn readers_never_fail_while_runs_write() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records");
    let p = plan(dir.path(), "sleep 0.2");
    let writers: Vec<_> = (0..3)
        .map(|_| {
            let (p, records, cwd) = (p.clone(), records.clone(), dir.path().to_path_buf());
            std::thread::spawn(move || {
                for _ in 0..3 {
                    let (_, out) = support::run_plan_in(&cwd, &p, &records, &[]);
                    assert!(out.status.success(), "{}", shown(&out));
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let records = records.clone();
            std::thread::spawn(move || {
                let mut calls = 0;
                for _ in 0..25 {
                    if !records.exists() {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        continue;
                    }
                    let (rows, _) = runs_json(&records);
                    calls += 1;
                    for r in rows {
                        assert!(
                            r["verified"] == true || r["running"] == true,
                            "a run read as unverified while it wrote: {r}"
                        );
                    }
                }
                calls
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let calls: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(calls > 0);
    let (rows, _) = runs_json(&records);
    assert_eq!(rows.len(), 9);
    assert!(rows.iter().all(|r| r["verified"] == true), "{rows:?}");
}

#[test]
fn the_site_keeps_what_its_user_added() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records");
    let p = plan(dir.path(), "true");
    let (_, out) = support::run_plan_in(dir.path(), &p, &records, &[]);
    assert!(out.status.success(), "{}", shown(&out));
    let st = Command::new("git")
        .args(["init", "-q", "repo"])
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    let site = || {
        cli()
            .args([
                "site",
                "--records",
                "records",
                "--repo",
                "repo",
                "-o",
                "pages",
            ])
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = site();
    assert!(out.status.success(), "{}", shown(&out));
    let pages = dir.path().join("pages");
    let st = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&pages)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(pages.join("CNAME"), "bench.example.org\n").unwrap();
    std::fs::write(pages.join("NOTES.md"), "mine\n").unwrap();
    let out = site();
    assert!(out.status.success(), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("kept what was added to the site folder"),
        "{}",
        shown(&out)
    );
    assert_eq!(
        std::fs::read_to_string(pages.join("CNAME")).unwrap(),
        "bench.example.org\n"
    );
    assert_eq!(
        std::fs::read_to_string(pages.join("NOTES.md")).unwrap(),
        "mine\n"
    );
    assert!(pages.join(".git/HEAD").is_file());
    assert!(pages.join("index.html").is_file());
}

/// Two good runs of one plan, made once and copied for every case.
fn pristine() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let records = dir.path().join("records");
        let p = plan(dir.path(), "true");
        for _ in 0..2 {
            let (_, out) = support::run_plan_in(dir.path(), &p, &records, &[]);
            assert!(out.status.success(), "{}", shown(&out));
        }
        dir
    })
    .path()
}

/// What a hostile or careless hand does to a records folder.
#[derive(Debug, Clone)]
enum Damage {
    /// Edit a timing and recompute `record.sha256`.
    Forge(usize),
    /// Remove the attestation.
    DropAttestation(usize),
    /// Copy a run's folder under another name.
    Copy(usize),
    /// Cut the record short.
    Truncate(usize),
    /// Plant a trigger in the index that marks every row succeeded.
    Trigger,
}

fn damage() -> impl proptest::strategy::Strategy<Value = Damage> {
    use proptest::prelude::*;
    prop_oneof![
        (0..2usize).prop_map(Damage::Forge),
        (0..2usize).prop_map(Damage::DropAttestation),
        (0..2usize).prop_map(Damage::Copy),
        (0..2usize).prop_map(Damage::Truncate),
        Just(Damage::Trigger),
    ]
}

fn apply(records: &Path, runs: &[PathBuf], d: &Damage, n: usize) {
    match d {
        Damage::Forge(i) => forge(&runs[*i]),
        Damage::DropAttestation(i) => {
            let _ = std::fs::remove_file(runs[*i].join("attestation.intoto.jsonl"));
        }
        Damage::Copy(i) => {
            let st = Command::new("cp")
                .arg("-a")
                .arg(&runs[*i])
                .arg(records.join(format!("copy-{n}")))
                .status()
                .unwrap();
            assert!(st.success());
        }
        Damage::Truncate(i) => {
            let p = runs[*i].join("record.json");
            let text = std::fs::read(&p).unwrap();
            std::fs::write(&p, &text[..text.len() / 2]).unwrap();
        }
        Damage::Trigger => {
            let db = records.join(INDEX);
            if db.exists() {
                sqlite(
                    &db,
                    "CREATE TRIGGER IF NOT EXISTS forge AFTER INSERT ON runs BEGIN UPDATE runs SET verified = 1, status = 'succeeded'; END; DELETE FROM runs;",
                );
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 12, failure_persistence: None, ..Default::default() })]

    /// Whatever was done to the folder, `runs` and `site` believe a run exactly
    /// when `verify` does, and count each run once.
    #[test]
    fn no_reader_believes_what_verify_rejects(damages in proptest::collection::vec(damage(), 1..4)) {
        let t = tempfile::tempdir().unwrap();
        let st = Command::new("cp").arg("-a").arg(pristine().join("records")).arg(t.path()).status().unwrap();
        proptest::prop_assert!(st.success());
        let records = t.path().join("records");
        runs_json(&records);
        let mut runs: Vec<PathBuf> = std::fs::read_dir(&records).unwrap().flatten()
            .map(|e| e.path()).filter(|p| p.is_dir()).collect();
        runs.sort();
        for (n, d) in damages.iter().enumerate() {
            apply(&records, &runs, d, n);
        }
        let (rows, _) = runs_json(&records);
        let mut believed = std::collections::BTreeSet::new();
        for r in &rows {
            let folder = records.join(r["folder"].as_str().unwrap());
            let ok = cli().arg("verify").arg(&folder).output().unwrap().status.success();
            proptest::prop_assert_eq!(r["verified"] == true, ok, "{} after {:?}", r, damages);
            if r["verified"] == true && r.get("duplicate_of").is_none() {
                proptest::prop_assert!(believed.insert(r["run_id"].to_string()), "{:?} counted twice", r["run_id"]);
            }
        }
        let unverified = rows.iter().filter(|r| r["verified"] != true).count();
        let st = Command::new("git").args(["init", "-q", "repo"]).current_dir(t.path()).status().unwrap();
        proptest::prop_assert!(st.success());
        let out = cli().args(["site", "--records", "records", "--repo", "repo", "-o", "site"])
            .current_dir(t.path()).output().unwrap();
        proptest::prop_assert!(out.status.success(), "{}", shown(&out));
        let said = format!("({} runs, {unverified} unverified;", rows.len());
        proptest::prop_assert!(String::from_utf8_lossy(&out.stdout).contains(&said), "{}", shown(&out));
    }
}
