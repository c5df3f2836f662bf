//! Git pins against real repositories made with the real `git`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use orchestrate::digest::sha256_bytes;
use orchestrate::pins::{
    drift_table, hash_sources, pin_table, verify, Details, GitDetails, PinKind, PinReport,
    PinStatus, SourceRole,
};
use orchestrate::plan::model::{GitPin, Pins};

use crate::support::{git as git_line, git_bytes as git};

/// A repository with two commits; returns its path and both full shas.
fn repo(root: &Path, name: &str) -> (PathBuf, String, String) {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    git(&dir, &["init", "-q"]);
    std::fs::write(dir.join("src/a.rs"), format!("// {name} one\n")).unwrap();
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-qm", "one"]);
    let first = git_line(&dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("src/a.rs"), format!("// {name} two\n")).unwrap();
    git(&dir, &["commit", "-qam", "two"]);
    let second = git_line(&dir, &["rev-parse", "HEAD"]);
    (dir, first, second)
}

fn pins_of(list: &[(&str, &Path, Option<&str>, bool)]) -> Pins {
    let mut git = BTreeMap::new();
    for (name, path, commit, allow_dirty) in list {
        git.insert(
            name.to_string(),
            GitPin {
                path: path.to_path_buf(),
                commit: commit.map(str::to_string),
                allow_dirty: *allow_dirty,
                refuse_untracked: false,
            },
        );
    }
    Pins {
        git,
        ..Pins::default()
    }
}

fn run(root: &Path, pins: &Pins) -> PinReport {
    let plan = root.join("plan.toml");
    std::fs::write(&plan, "schema = \"orchestrate/plan/v1\"\n").unwrap();
    let mut r = verify(pins, root);
    hash_sources(&mut r, &plan, "schema = \"orchestrate/plan/v1\"\n");
    r
}

fn details(r: &PinReport, name: &str) -> GitDetails {
    match &r.entry(PinKind::Git, name).unwrap().details {
        Some(Details::Git(g)) => g.clone(),
        other => panic!("no git details: {other:?}"),
    }
}

#[test]
fn clean_repo_at_short_and_full_sha_is_ok() {
    let t = tempfile::tempdir().unwrap();
    let (dir, _, head) = repo(t.path(), "impl");
    for declared in [&head[..7], &head[..12], head.as_str(), &head.to_uppercase()] {
        let r = run(t.path(), &pins_of(&[("impl", &dir, Some(declared), false)]));
        let e = r.entry(PinKind::Git, "impl").unwrap();
        assert_eq!(e.status, PinStatus::Ok, "{declared}: {e:?}");
        assert_eq!(e.observed.as_deref(), Some(head.as_str()));
        assert!(!r.has_drift());
    }
    let r = run(
        t.path(),
        &pins_of(&[("impl", Path::new("impl"), Some(&head[..7]), false)]),
    );
    let d = details(&r, "impl");
    assert_eq!(d.head, head);
    assert_eq!(d.tree, git_line(&dir, &["rev-parse", "HEAD^{tree}"]));
    assert!(!d.dirty);
    assert_eq!(d.diff_sha256, None);
    // Source hashes: plan, binary, the repository tree.
    let roles: Vec<SourceRole> = r.sources.iter().map(|s| s.role).collect();
    assert!(roles.contains(&SourceRole::Plan));
    assert!(roles.contains(&SourceRole::Binary), "{:?}", r.source_errors);
    let tree = r
        .sources
        .iter()
        .find(|s| s.role == SourceRole::RepoTree)
        .unwrap();
    assert_eq!(tree.digest, format!("git-tree:{}", d.tree));
    let plan = r
        .sources
        .iter()
        .find(|s| s.role == SourceRole::Plan)
        .unwrap();
    assert_eq!(
        plan.digest,
        format!(
            "sha256:{}",
            sha256_bytes(b"schema = \"orchestrate/plan/v1\"\n")
        )
    );
}

#[test]
fn wrong_commit_is_drift_and_the_table_shows_both() {
    let t = tempfile::tempdir().unwrap();
    let (dir, first, head) = repo(t.path(), "impl");
    let r = run(
        t.path(),
        &pins_of(&[("impl", &dir, Some(&first[..7]), false)]),
    );
    let e = r.entry(PinKind::Git, "impl").unwrap();
    assert_eq!(e.status, PinStatus::Drift);
    assert!(r.has_drift());
    assert_eq!(r.drift.len(), 1);
    let table = drift_table(&r);
    assert!(table.contains(&first[..7]), "{table}");
    assert!(table.contains(&head), "{table}");
    assert!(table.contains("drift"), "{table}");
    assert!(table.starts_with("KIND"), "{table}");
}

#[test]
fn too_short_sha_is_an_error() {
    let t = tempfile::tempdir().unwrap();
    let (dir, _, head) = repo(t.path(), "impl");
    let r = run(
        t.path(),
        &pins_of(&[("impl", &dir, Some(&head[..6]), false)]),
    );
    assert_eq!(
        r.entry(PinKind::Git, "impl").unwrap().status,
        PinStatus::Error
    );
    assert!(r.has_drift());
}

#[test]
fn dirty_tree_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let (dir, _, head) = repo(t.path(), "impl");
    std::fs::write(dir.join("src/a.rs"), "// edited\n").unwrap();
    let r = run(t.path(), &pins_of(&[("impl", &dir, Some(&head), false)]));
    let e = r.entry(PinKind::Git, "impl").unwrap();
    assert_eq!(e.status, PinStatus::Drift, "{e:?}");
    assert!(e.message.as_deref().unwrap().contains("allow_dirty"));
    assert_eq!(
        e.observed.as_deref(),
        Some(format!("{head} (dirty)").as_str())
    );
    assert!(r.has_drift());
}

#[test]
fn untracked_files_are_recorded_not_drift_unless_refused() {
    let t = tempfile::tempdir().unwrap();
    let (dir, _, head) = repo(t.path(), "impl");
    // What a test run leaves behind in the repository it tests.
    std::fs::create_dir(dir.join("__pycache__")).unwrap();
    std::fs::write(dir.join("__pycache__/t.pyc"), "bytecode").unwrap();
    let r = run(t.path(), &pins_of(&[("impl", &dir, Some(&head), false)]));
    let e = r.entry(PinKind::Git, "impl").unwrap();
    assert_eq!(e.status, PinStatus::Ok, "{e:?}");
    assert!(!r.has_drift());
    let d = details(&r, "impl");
    assert!(
        !d.dirty,
        "untracked files alone are not dirty (git describe --dirty)"
    );
    assert_eq!(d.untracked, vec!["__pycache__/t.pyc".to_string()]);
    assert_eq!(d.untracked_files.len(), 1);
    assert_eq!(d.untracked_files[0].sha256, Some(sha256_bytes(b"bytecode")));
    assert_eq!(e.observed.as_deref(), Some(head.as_str()));
    // `untracked = "refuse"` makes them drift.
    let mut pins = pins_of(&[("impl", &dir, Some(&head), false)]);
    pins.git.get_mut("impl").unwrap().refuse_untracked = true;
    let r = run(t.path(), &pins);
    let e = r.entry(PinKind::Git, "impl").unwrap();
    assert_eq!(e.status, PinStatus::Drift, "{e:?}");
    assert!(
        e.message
            .as_deref()
            .unwrap()
            .contains("untracked = \"refuse\""),
        "{e:?}"
    );
}

#[test]
fn allowed_dirty_tree_records_diff_and_untracked() {
    let t = tempfile::tempdir().unwrap();
    let (dir, _, head) = repo(t.path(), "impl");
    std::fs::write(dir.join("src/a.rs"), "// edited\n").unwrap();
    std::fs::write(dir.join("src/bin.dat"), [0u8, 1, 2, 255]).unwrap();
    git(&dir, &["add", "src/bin.dat"]);
    std::fs::create_dir(dir.join("new")).unwrap();
    std::fs::write(dir.join("new/u.txt"), "u").unwrap();
    std::fs::write(dir.join("top.txt"), "t").unwrap();
    let r = run(
        t.path(),
        &pins_of(&[("impl", &dir, Some(&head[..7]), true)]),
    );
    let e = r.entry(PinKind::Git, "impl").unwrap();
    assert_eq!(e.status, PinStatus::Allowed, "{e:?}");
    assert!(!r.has_drift());
    let d = details(&r, "impl");
    assert!(d.dirty);
    let diff = git(&dir, &["diff", "HEAD", "--binary"]);
    assert!(!diff.is_empty());
    assert_eq!(d.diff_sha256, Some(sha256_bytes(&diff)));
    let mut untracked = d.untracked.clone();
    untracked.sort();
    assert_eq!(
        untracked,
        vec!["new/u.txt".to_string(), "top.txt".to_string()]
    );
    assert!(pin_table(&r).contains("allowed"));
}

#[test]
fn verify_never_writes_to_the_repository() {
    let t = tempfile::tempdir().unwrap();
    let (dir, _, head) = repo(t.path(), "impl");
    // Same content, new mtime: a plain `git status` would refresh and rewrite the index.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(dir.join("src/a.rs"), "// impl two\n").unwrap();
    let index = dir.join(".git/index");
    let before = std::fs::read(&index).unwrap();
    let mtime = std::fs::metadata(&index).unwrap().modified().unwrap();
    let r = run(t.path(), &pins_of(&[("impl", &dir, Some(&head), false)]));
    assert_eq!(r.entry(PinKind::Git, "impl").unwrap().status, PinStatus::Ok);
    assert_eq!(std::fs::read(&index).unwrap(), before);
    assert_eq!(
        std::fs::metadata(&index).unwrap().modified().unwrap(),
        mtime
    );
    assert!(!dir.join(".git/index.lock").exists());
}

#[test]
fn several_repositories_and_an_unpinned_one() {
    let t = tempfile::tempdir().unwrap();
    let (base, _, base_head) = repo(t.path(), "baseline");
    let (imp, _, imp_head) = repo(t.path(), "impl");
    let r = run(
        t.path(),
        &pins_of(&[
            ("baseline", &base, Some(&base_head[..7]), false),
            ("implementation", &imp, None, false),
        ]),
    );
    assert_eq!(
        r.entry(PinKind::Git, "baseline").unwrap().status,
        PinStatus::Ok
    );
    let e = r.entry(PinKind::Git, "implementation").unwrap();
    assert_eq!(e.status, PinStatus::Unpinned);
    assert_eq!(e.observed.as_deref(), Some(imp_head.as_str()));
    assert!(!r.has_drift());
    let trees = r
        .sources
        .iter()
        .filter(|s| s.role == SourceRole::RepoTree)
        .count();
    assert_eq!(trees, 2);
}

#[test]
fn missing_repository_is_an_error_not_a_panic() {
    let t = tempfile::tempdir().unwrap();
    let not_repo = t.path().join("plain");
    std::fs::create_dir(&not_repo).unwrap();
    let r = run(
        t.path(),
        &pins_of(&[
            ("gone", &t.path().join("nope"), Some("720e8dc"), false),
            ("plain", &not_repo, Some("720e8dc"), false),
        ]),
    );
    for name in ["gone", "plain"] {
        let e = r.entry(PinKind::Git, name).unwrap();
        assert_eq!(e.status, PinStatus::Error, "{e:?}");
        assert!(e.message.is_some());
    }
    assert_eq!(r.drift.len(), 2);
    assert!(drift_table(&r).contains("error"));
}
