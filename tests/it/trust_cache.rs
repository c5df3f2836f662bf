//! The step cache cannot be turned against the user (the trust issue, items 1, 2,
//! 7–15): its key holds what a step reads of a revision, a restore shares no inode
//! unless the plan asks, and the store is input: entries, blobs, links and modes
//! planted in it are refused, never followed, and nothing outside the store and the
//! run's declared outputs is touched. Each test is named after the case it shows.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{cli, git, is_root, record_json, record_step, shown};

struct Case {
    _t: tempfile::TempDir,
    root: PathBuf,
}

impl Case {
    fn new(plan: &str) -> Case {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().to_path_buf();
        std::fs::write(root.join("plan.toml"), plan).unwrap();
        Case { _t: t, root }
    }

    fn cache(&self) -> PathBuf {
        self.root.join("cache")
    }

    /// A run with this case's cache, whatever its outcome.
    fn run_env(
        &self,
        env: &[(&str, &str)],
        extra: &[&str],
    ) -> (PathBuf, serde_json::Value, Output) {
        let _host = crate::support::host_shared();
        let records = self.root.join("records");
        let before = crate::support::record_dirs(&records);
        let out = cli()
            .arg("run")
            .arg(self.root.join("plan.toml"))
            .arg("--records")
            .arg(&records)
            .arg("--cache")
            .arg(self.cache())
            .args(["--progress", "quiet"])
            .args(extra)
            .envs(env.iter().copied())
            .current_dir(&self.root)
            .output()
            .unwrap();
        let mut after = crate::support::record_dirs(&records);
        after.retain(|d| !before.contains(d));
        let dir = after
            .pop()
            .unwrap_or_else(|| panic!("no record: {}", shown(&out)));
        let rec = record_json(&dir);
        (dir, rec, out)
    }

    fn run(&self) -> (PathBuf, serde_json::Value, Output) {
        let r = self.run_env(&[], &[]);
        assert!(r.2.status.success(), "run failed: {}", shown(&r.2));
        r
    }

    fn work(&self, rec: &serde_json::Value) -> PathBuf {
        self.root.join("work").join(rec["run_id"].as_str().unwrap())
    }
}

fn status(rec: &serde_json::Value, step: &str) -> String {
    record_step(rec, step)["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn cache_status(rec: &serde_json::Value, step: &str) -> String {
    record_step(rec, step)["cache"]["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn why(rec: &serde_json::Value, step: &str) -> String {
    record_step(rec, step)["cache"]["why"].to_string()
}

/// Every file below `dir` with its bytes (link texts for links), for "untouched".
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    fn walk(base: &Path, d: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        let mut es: Vec<_> = std::fs::read_dir(d).unwrap().flatten().collect();
        es.sort_by_key(|e| e.file_name());
        for e in es {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.file_type().is_symlink() {
                out.push((
                    rel,
                    std::fs::read_link(&p)
                        .unwrap()
                        .display()
                        .to_string()
                        .into_bytes(),
                ));
            } else if m.is_dir() {
                out.push((format!("{rel}/"), Vec::new()));
                walk(base, &p, out);
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

/// The one entry folder of the store for `key`.
fn entry_dir(c: &Case, key: &str) -> PathBuf {
    c.cache().join("entries").join(&key[..2]).join(key)
}

fn key_of(rec: &serde_json::Value, step: &str) -> String {
    record_step(rec, step)["cache"]["key"]
        .as_str()
        .unwrap()
        .to_string()
}

const ONE_STEP: &str = r#"schema = "orchestrate/plan/v1"
name = "trust-cache"
[steps.make]
cache = true
shell = "mkdir -p ${work}/model && printf weights > ${work}/model/w.bin && printf cfg > ${work}/model/c.txt"
outputs = ["${work}/model"]
[steps.use]
needs = ["make"]
shell = "cat ${work}/model/w.bin > ${out}/seen.txt"
outputs = ["${out}/seen.txt"]
"#;

#[test]
fn the_cache_key_holds_the_revision() {
    let c = Case::new(
        r#"schema = "orchestrate/plan/v1"
name = "trust-revision"
[revisions]
baseline = { repo = "repo", commit = "HEAD~1" }
implementation = { repo = "repo", commit = "HEAD", dirty = "allow" }
[steps.read]
revisions = ["baseline", "implementation"]
cache = true
cwd = "${revision.dir}"
shell = "cat data.txt > ${out}/seen.txt"
outputs = ["${out}/seen.txt"]
"#,
    );
    let repo = c.root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let commit = |text: &str| {
        std::fs::write(repo.join("data.txt"), text).unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", text]);
    };
    commit("one\n");
    commit("two\n");
    let seen = |c: &Case, rec: &serde_json::Value, cell: &str| {
        std::fs::read_to_string(c.work(rec).join(cell).join("1/seen.txt")).unwrap()
    };
    let (b, i) = ("read[revision=baseline]", "read[revision=implementation]");
    let (_, first, _) = c.run();
    assert_eq!(seen(&c, &first, b), "one\n");
    assert_eq!(seen(&c, &first, i), "two\n");
    let (_, again, _) = c.run();
    assert_eq!(status(&again, b), "reused", "nothing changed: reused");
    assert_eq!(status(&again, i), "reused");
    // A new commit: both revisions move, both cells must read what they now are.
    commit("three\n");
    let (_, moved, out) = c.run();
    assert_eq!(cache_status(&moved, b), "stored", "{}", shown(&out));
    assert_eq!(cache_status(&moved, i), "stored", "{}", shown(&out));
    assert_eq!(seen(&c, &moved, b), "two\n");
    assert_eq!(seen(&c, &moved, i), "three\n");
    assert!(
        why(&moved, i).contains("revision `implementation` changed (commit "),
        "{}",
        why(&moved, i)
    );
    // The working tree edited (dirty = "allow" runs it as it is): a miss, with the
    // change named.
    std::fs::write(repo.join("data.txt"), "edited\n").unwrap();
    let (_, dirty, _) = c.run();
    assert_eq!(status(&dirty, b), "reused", "the baseline did not change");
    assert_eq!(cache_status(&dirty, i), "stored");
    assert_eq!(seen(&c, &dirty, i), "edited\n");
    assert!(
        why(&dirty, i).contains("uncommitted changes"),
        "{}",
        why(&dirty, i)
    );
    std::fs::write(repo.join("data.txt"), "edited again\n").unwrap();
    let (_, dirty2, _) = c.run();
    assert_eq!(
        seen(&c, &dirty2, i),
        "edited again\n",
        "another edit misses too"
    );
}

#[test]
fn a_hard_link_restore_shares_no_inode_between_cells_steps_and_runs() {
    let c = Case::new(
        r#"schema = "orchestrate/plan/v1"
name = "trust-inode"
[matrix]
x = ["one", "two"]
[steps.make]
cache = true
shell = "printf base > ${out}/f.txt # ${matrix.x}"
outputs = ["${out}/f.txt"]
[steps.annotate]
needs = ["make"]
shell = "echo ' annotated by ${matrix.x}' >> ${steps.make.out}/f.txt && cat ${steps.make.out}/f.txt > ${out}/seen.txt"
outputs = ["${out}/seen.txt"]
"#,
    );
    c.run();
    let (_, second, out) = c.run();
    let mut inodes = Vec::new();
    for x in ["one", "two"] {
        let cell = format!("make[x={x}]");
        assert_eq!(status(&second, &cell), "reused", "{}", shown(&out));
        let restore = record_step(&second, &cell)["cache"]["restore"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(["reflink", "copy"].contains(&restore.as_str()), "{restore}");
        let seen =
            std::fs::read_to_string(c.work(&second).join(format!("annotate[x={x}]/1/seen.txt")))
                .unwrap();
        assert_eq!(
            seen,
            format!("base annotated by {x}\n"),
            "each cell sees its own file"
        );
        inodes.push(
            std::fs::metadata(c.work(&second).join(&cell).join("1/f.txt"))
                .unwrap()
                .ino(),
        );
    }
    // And neither shares the store's inode, which still holds what was made.
    let blobs = c.cache().join("blobs/sha256");
    for d in std::fs::read_dir(&blobs).unwrap().flatten() {
        for b in std::fs::read_dir(d.path()).unwrap().flatten() {
            assert!(!inodes.contains(&b.metadata().unwrap().ino()));
            assert_eq!(std::fs::read(b.path()).unwrap(), b"base");
        }
    }
    let (_, third, _) = c.run();
    let seen = std::fs::read_to_string(c.work(&third).join("annotate[x=two]/1/seen.txt")).unwrap();
    assert_eq!(
        seen, "base annotated by two\n",
        "a later run sees what was made"
    );
}

#[test]
fn a_hard_link_restore_is_opt_in_and_a_write_with_its_mtime_set_back_is_caught() {
    let c = Case::new(&ONE_STEP.replace(
        "[steps.make]\ncache = true\n",
        "[steps.make]\ncache = true\ncache_restore = \"link\"\n",
    ));
    c.run();
    let (_, second, _) = c.run();
    assert_eq!(status(&second, "make"), "reused");
    let restore = record_step(&second, "make")["cache"]["restore"]
        .as_str()
        .unwrap()
        .to_string();
    let w = c.work(&second).join("model/w.bin");
    if restore == "reflink" {
        eprintln!("skipping the hard-link half: this filesystem makes reflinks");
        return;
    }
    assert_eq!(restore, "hardlink");
    assert!(
        std::fs::metadata(&w).unwrap().nlink() > 1,
        "opted in: a hard link"
    );
    // Write through the link, then set its mtime back as `touch -d` would: only
    // ctime tells, and it cannot be set back.
    let before = std::fs::metadata(&w).unwrap();
    let mut p = before.permissions();
    p.set_mode(0o644);
    std::fs::set_permissions(&w, p).unwrap();
    std::fs::write(&w, b"WEIGHTS").unwrap();
    let status_ok = std::process::Command::new("touch")
        .arg("-d")
        .arg(format!("@{}.{:09}", before.mtime(), before.mtime_nsec()))
        .arg(&w)
        .status()
        .unwrap();
    assert!(status_ok.success());
    assert_eq!(std::fs::metadata(&w).unwrap().mtime(), before.mtime());
    let (_, third, out) = c.run();
    assert_eq!(
        status(&third, "make"),
        "succeeded",
        "not reused: {}",
        shown(&out)
    );
    assert!(
        why(&third, "make").contains("no longer matches its digest"),
        "{}",
        why(&third, "make")
    );
    assert_eq!(
        std::fs::read(c.work(&third).join("model/w.bin")).unwrap(),
        b"weights"
    );
}

/// Edit the entry of `make` with `f`, run again, and check that nothing outside the
/// store and the run's outputs changed and the entry was refused and rebuilt.
fn tamper(c: &Case, key: &str, f: impl FnOnce(&mut serde_json::Value)) -> serde_json::Value {
    let p = entry_dir(c, key).join("entry.json");
    let mut e: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    f(&mut e);
    std::fs::write(&p, serde_json::to_vec(&e).unwrap()).unwrap();
    let (_, rec, out) = c.run();
    assert_eq!(
        status(&rec, "make"),
        "succeeded",
        "refused, run again: {}",
        shown(&out)
    );
    assert!(
        why(&rec, "make").contains("refused"),
        "{}",
        why(&rec, "make")
    );
    let (_, again, _) = c.run();
    assert_eq!(status(&again, "make"), "reused", "and rebuilt");
    again
}

#[test]
fn an_entry_naming_paths_outside_its_outputs_is_refused_and_nothing_outside_is_touched() {
    let c = Case::new(ONE_STEP);
    let victim = c.root.join("victim");
    std::fs::create_dir_all(victim.join("dir")).unwrap();
    std::fs::write(victim.join("dir/keep.txt"), "keep").unwrap();
    let before = snapshot(&victim);
    let (_, first, _) = c.run();
    let key = key_of(&first, "make");
    let abs = victim.join("dir").display().to_string();
    tamper(&c, &key, |e| e["outputs"][0]["path"] = abs.clone().into());
    tamper(&c, &key, |e| {
        e["outputs"][0]["files"][0]["rel"] = "../../../victim/dir/keep.txt".into()
    });
    let abs_file = victim.join("dir/keep.txt").display().to_string();
    tamper(&c, &key, |e| {
        e["outputs"][0]["files"][0]["rel"] = abs_file.clone().into()
    });
    tamper(&c, &key, |e| {
        e["outputs"][0]["files"][0]["link"] = "../../victim".into()
    });
    assert_eq!(
        snapshot(&victim),
        before,
        "nothing outside the store was touched"
    );
    assert!(!c.root.join("x").exists());
}

#[test]
fn a_link_planted_in_the_store_is_never_followed() {
    let c = Case::new(ONE_STEP);
    let victim = c.root.join("victim");
    std::fs::create_dir_all(victim.join("d")).unwrap();
    std::fs::write(victim.join("file"), "precious").unwrap();
    std::fs::write(victim.join("d/inner"), "precious too").unwrap();
    let before = snapshot(&victim);
    let (_, first, _) = c.run();
    let key = key_of(&first, "make");
    let e = entry_dir(&c, &key);
    // `used` is rewritten on every reuse: a link there must not truncate its target.
    std::fs::remove_file(e.join("used")).unwrap();
    std::os::unix::fs::symlink(victim.join("file"), e.join("used")).unwrap();
    let lock = c.cache().join("locks").join(format!("{key}.lock"));
    let _ = std::fs::remove_file(&lock);
    std::os::unix::fs::symlink(victim.join("lockvictim"), &lock).unwrap();
    let (_, second, out) = c.run();
    assert_eq!(status(&second, "make"), "reused", "{}", shown(&out));
    assert!(
        std::fs::symlink_metadata(e.join("used")).unwrap().is_file(),
        "the link was replaced"
    );
    // The entry folder itself a link to a folder elsewhere: refused, the link removed.
    let moved = c.root.join("victim-entry");
    std::fs::rename(&e, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &e).unwrap();
    let (_, third, _) = c.run();
    assert_eq!(
        status(&third, "make"),
        "succeeded",
        "a linked entry is not used"
    );
    assert!(
        moved.join("entry.json").exists(),
        "and what it pointed to is left alone"
    );
    // A blob replaced by a link to a file with the same bytes: refused too.
    let (_, fourth, _) = c.run();
    assert_eq!(status(&fourth, "make"), "reused");
    let blobs = c.cache().join("blobs/sha256");
    let mut linked = 0;
    for d in std::fs::read_dir(&blobs).unwrap().flatten() {
        for b in std::fs::read_dir(d.path()).unwrap().flatten() {
            if std::fs::read(b.path()).unwrap() == b"weights" {
                let copy = victim.join("weights-copy");
                std::fs::copy(b.path(), &copy).unwrap();
                std::fs::remove_file(b.path()).unwrap();
                std::os::unix::fs::symlink(&copy, b.path()).unwrap();
                linked += 1;
            }
        }
    }
    assert_eq!(linked, 1);
    let (_, fifth, _) = c.run();
    assert_eq!(
        status(&fifth, "make"),
        "succeeded",
        "a linked blob is not used"
    );
    assert!(
        why(&fifth, "make").contains("refused"),
        "{}",
        why(&fifth, "make")
    );
    let mut after = snapshot(&victim);
    after.retain(|(p, _)| p != "weights-copy");
    assert_eq!(after, before, "nothing a link named was written");
    assert!(
        !victim.join("lockvictim").exists(),
        "no file was made through the lock link"
    );
}

#[test]
fn a_planted_blob_with_the_right_name_and_size_is_replaced_when_storing() {
    let c = Case::new(ONE_STEP);
    // The blob the step will store for `weights`, planted first with other bytes.
    std::fs::create_dir_all(c.cache()).unwrap();
    std::fs::set_permissions(c.cache(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let hex = orchestrate::digest::sha256_bytes(b"weights").hex();
    let dir = c.cache().join("blobs/sha256").join(&hex[..2]);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(&hex), b"FAKE-ou").unwrap();
    assert_eq!(b"FAKE-ou".len(), b"weights".len());
    c.run();
    assert_eq!(
        std::fs::read(dir.join(&hex)).unwrap(),
        b"weights",
        "replaced when stored"
    );
    let (_, second, _) = c.run();
    assert_eq!(status(&second, "make"), "reused");
    assert_eq!(
        std::fs::read(c.work(&second).join("model/w.bin")).unwrap(),
        b"weights"
    );
}

#[test]
fn a_store_others_can_write_is_refused() {
    let c = Case::new(ONE_STEP);
    c.run();
    std::fs::set_permissions(c.cache(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let (_, rec, out) = c.run();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("writable by everyone"), "{}", shown(&out));
    assert_eq!(status(&rec, "make"), "succeeded", "the store is not used");
    assert!(record_step(&rec, "make")["cache"].is_null());
    let o = cli()
        .args(["cache", "du", "--cache"])
        .arg(c.cache())
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "cache commands refuse it too: {}",
        shown(&o)
    );
    std::fs::set_permissions(c.cache(), std::fs::Permissions::from_mode(0o700)).unwrap();
    if is_root() {
        // Owned by someone else (nobody): refused though nobody else may write it.
        nix::unistd::chown(&c.cache(), Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        let (_, rec, out) = c.run();
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("owned by uid 65534"),
            "{}",
            shown(&out)
        );
        assert!(record_step(&rec, "make")["cache"].is_null());
        nix::unistd::chown(&c.cache(), Some(nix::unistd::Uid::from_raw(0)), None).unwrap();
    }
    // Without HOME, the default is the user's home from the password database, not
    // a predictable folder in /tmp.
    let o = cli()
        .args(["cache", "du"])
        .env_remove("HOME")
        .env_remove("ORCHESTRATE_CACHE")
        .env_remove("XDG_CACHE_HOME")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", shown(&o));
    assert!(!text.contains("/tmp/orchestrate-cache "), "{text}");
    let home = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .unwrap()
        .dir;
    assert!(
        text.contains(&home.join(".cache/orchestrate").display().to_string()),
        "{text}"
    );
}

#[test]
fn gc_never_follows_a_link_and_collects_what_killed_writers_left() {
    let c = Case::new(ONE_STEP);
    c.run();
    let victim = c.root.join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("a"), "precious").unwrap();
    let before = snapshot(&victim);
    let blobs = c.cache().join("blobs/sha256");
    std::os::unix::fs::symlink(&victim, blobs.join("zz")).unwrap();
    std::os::unix::fs::symlink(victim.join("a"), blobs.join("ab-file-link")).unwrap();
    // A partial blob a SIGKILLed run left, older than any writer takes.
    let partial = c.cache().join("tmp/.tmp-999-0-partial");
    std::fs::write(&partial, vec![7u8; 4096]).unwrap();
    let old = std::process::Command::new("touch")
        .args(["-d", "2 hours ago"])
        .arg(&partial)
        .status()
        .unwrap();
    assert!(old.success());
    let du = cli()
        .args(["cache", "du", "--cache"])
        .arg(c.cache())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&du.stdout).contains("4.0 KiB in temporary files"),
        "{}",
        shown(&du)
    );
    let gc = cli()
        .args(["cache", "gc", "--max-size", "0B", "--cache"])
        .arg(c.cache())
        .output()
        .unwrap();
    assert!(gc.status.success(), "{}", shown(&gc));
    assert_eq!(
        snapshot(&victim),
        before,
        "nothing a link named was removed"
    );
    assert!(
        std::fs::symlink_metadata(blobs.join("zz")).is_err(),
        "the link itself went"
    );
    assert!(!partial.exists(), "stale temporary files are collected");
    let left: usize = std::fs::read_dir(&blobs)
        .unwrap()
        .flatten()
        .map(|d| std::fs::read_dir(d.path()).unwrap().count())
        .sum();
    assert_eq!(left, 0, "{}", shown(&gc));
}

#[test]
fn secrets_never_reach_the_store_or_the_terminal() {
    let c = Case::new(
        r#"schema = "orchestrate/plan/v1"
name = "trust-secret"
[steps.make]
cache = true
env = { API_TOKEN = "${env.API_TOKEN}" }
shell = "printf made > ${out}/o.txt"
outputs = ["${out}/o.txt"]
"#,
    );
    let (one, two) = ("first-secret-value-1234", "second-secret-value-5678");
    let (d1, _, o1) = c.run_env(&[("API_TOKEN", one)], &[]);
    let (d2, rec, o2) = c.run_env(&[("API_TOKEN", two)], &[]);
    assert!(o2.status.success(), "{}", shown(&o2));
    assert_eq!(
        status(&rec, "make"),
        "succeeded",
        "a changed secret reruns the step"
    );
    assert_eq!(
        record_step(&rec, "make")["cache"]["why"][0],
        "secret `API_TOKEN` changed"
    );
    let w = cli()
        .args(["why"])
        .arg(c.root.join("plan.toml"))
        .arg("--cache")
        .arg(c.cache())
        .env("API_TOKEN", "third-secret-value-9012")
        .output()
        .unwrap();
    let wtext = String::from_utf8_lossy(&w.stdout).to_string();
    assert!(
        wtext.contains("secret `API_TOKEN` changed"),
        "{}",
        shown(&w)
    );
    let mut texts = vec![shown(&o1), shown(&o2), shown(&w)];
    for d in [&d1, &d2] {
        for f in ["journal.jsonl", "record.json"] {
            texts.push(std::fs::read_to_string(d.join(f)).unwrap());
        }
    }
    for (p, bytes) in snapshot(&c.cache()) {
        texts.push(format!("{p}: {}", String::from_utf8_lossy(&bytes)));
    }
    for t in &texts {
        for s in [one, two, "third-secret-value-9012"] {
            assert!(!t.contains(s), "secret value in {t}");
        }
    }
    // Every file of the store is its owner's alone.
    fn modes(d: &Path) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            assert_eq!(
                m.mode() & 0o077,
                0,
                "{} is mode {:o}",
                e.path().display(),
                m.mode()
            );
            if m.is_dir() {
                modes(&e.path());
            }
        }
    }
    modes(&c.cache());
}

#[test]
fn the_program_is_digested_after_interpolation() {
    let c = Case::new(
        r#"schema = "orchestrate/plan/v1"
name = "trust-program"
[params]
tool = "./other.sh"
[steps.direct]
cache = true
run = ["${plan_dir}/tool.sh", "${out}/o.txt"]
outputs = ["${out}/o.txt"]
[steps.param]
cache = true
run = ["${params.tool}", "${out}/o.txt"]
outputs = ["${out}/o.txt"]
"#,
    );
    let script = |name: &str, text: &str| {
        let p = c.root.join(name);
        std::fs::write(&p, format!("#!/bin/sh\nprintf '{text}' > \"$1\"\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    script("tool.sh", "v1");
    script("other.sh", "v1");
    c.run();
    let (_, same, _) = c.run();
    assert_eq!(status(&same, "direct"), "reused");
    assert_eq!(status(&same, "param"), "reused");
    script("tool.sh", "v2");
    script("other.sh", "v2");
    let (_, changed, _) = c.run();
    for s in ["direct", "param"] {
        assert_eq!(
            status(&changed, s),
            "succeeded",
            "{s}: a changed program reruns"
        );
        assert!(
            why(&changed, s).contains("program `"),
            "{}",
            why(&changed, s)
        );
        let o = std::fs::read_to_string(c.work(&changed).join(s).join("1/o.txt")).unwrap();
        assert_eq!(o, "v2");
    }
}

#[test]
fn an_output_that_climbs_out_of_the_work_folder_is_never_stored_or_removed() {
    let c = Case::new(
        r#"schema = "orchestrate/plan/v1"
name = "trust-climb"
[steps.make]
cache = true
shell = "mkdir -p ${work}/../shared && printf out > ${work}/../shared/o.txt"
outputs = ["${work}/../shared"]
"#,
    );
    let shared = c.root.join("work/shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(shared.join("notes.txt"), "the user's notes").unwrap();
    let (_, first, _) = c.run();
    let note = record_step(&first, "make")["cache"]["note"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(note.contains("outside the run's folders"), "{note}");
    let (_, second, _) = c.run();
    assert_eq!(
        status(&second, "make"),
        "succeeded",
        "never stored, so never reused"
    );
    assert_eq!(
        std::fs::read_to_string(shared.join("notes.txt")).unwrap(),
        "the user's notes"
    );
}

/// One store, one entry of a folder output (files, a nested folder, a link), then a
/// random damage: bytes of the entry changed, a blob cut, grown or rewritten, a
/// file or folder replaced by a link out of the store (to the victim area), modes
/// changed, files removed. Whatever the damage, nothing outside the store and the
/// restore target changes, and the entry is either refused (and a store makes it
/// good again) or restores exactly what was stored.
mod store_damage {
    use super::snapshot;
    use orchestrate::cache::{Cache, Lookup, Preimage, Target};
    use proptest::prelude::*;
    use std::path::{Path, PathBuf};

    #[derive(Debug, Clone)]
    enum Damage {
        /// Replace one byte of entry.json.
        EntryByte(usize, u8),
        /// Set a JSON field of the first output or file.
        Field(usize, String),
        BlobCut(usize),
        BlobGrow(usize),
        BlobFlip(usize, usize),
        /// Replace the `i`-th store path by a link to the victim area.
        LinkOut(usize, bool),
        Chmod(usize, u32),
        Remove(usize),
    }

    fn damage() -> impl Strategy<Value = Damage> {
        let fields = prop::sample::select(vec![
            "path", "rel", "link", "sha256", "size", "kind", "exec", "bytes", "blob_ino",
        ]);
        prop_oneof![
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Damage::EntryByte(i, b)),
            (any::<usize>(), fields).prop_map(|(i, f)| Damage::Field(i, f.to_string())),
            any::<usize>().prop_map(Damage::BlobCut),
            any::<usize>().prop_map(Damage::BlobGrow),
            (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Damage::BlobFlip(i, j)),
            (any::<usize>(), any::<bool>()).prop_map(|(i, d)| Damage::LinkOut(i, d)),
            (
                any::<usize>(),
                prop::sample::select(vec![0o000u32, 0o644, 0o777])
            )
                .prop_map(|(i, m)| Damage::Chmod(i, m)),
            any::<usize>().prop_map(Damage::Remove),
        ]
    }

    fn files_under(d: &Path) -> Vec<PathBuf> {
        let mut v = Vec::new();
        for e in walk(d) {
            if std::fs::symlink_metadata(&e)
                .map(|m| m.is_file())
                .unwrap_or(false)
            {
                v.push(e);
            }
        }
        v
    }

    fn walk(d: &Path) -> Vec<PathBuf> {
        let mut v = Vec::new();
        let Ok(rd) = std::fs::read_dir(d) else {
            return v;
        };
        let mut es: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        es.sort();
        for p in es {
            v.push(p.clone());
            if std::fs::symlink_metadata(&p)
                .map(|m| m.is_dir())
                .unwrap_or(false)
            {
                v.extend(walk(&p));
            }
        }
        v
    }

    fn apply(store: &Path, key: &str, victim: &Path, d: &Damage) {
        use std::os::unix::fs::PermissionsExt;
        let entry = store
            .join("entries")
            .join(&key[..2])
            .join(key)
            .join("entry.json");
        let blobs = files_under(&store.join("blobs"));
        let pick = |v: &[PathBuf], i: usize| v.get(i % v.len().max(1)).cloned();
        match d {
            Damage::EntryByte(i, b) => {
                let mut bytes = std::fs::read(&entry).unwrap();
                let n = bytes.len();
                bytes[i % n] = *b;
                std::fs::write(&entry, bytes).unwrap();
            }
            Damage::Field(i, f) => {
                let mut e: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&entry).unwrap()).unwrap();
                let files = e["outputs"][0]["files"].as_array().map_or(0, |a| a.len());
                let values = [
                    "/etc",
                    "../../../x",
                    "a/../../b",
                    "",
                    "zz",
                    "0000000000000000000000000000000000000000000000000000000000000000",
                ];
                let v = serde_json::Value::from(values[i % values.len()]);
                match f.as_str() {
                    "path" | "kind" | "bytes" => e["outputs"][0][f.as_str()] = v,
                    "size" | "blob_ino" => {
                        e["outputs"][0]["files"][i % files.max(1)][f.as_str()] =
                            (*i as u64 % 1000).into()
                    }
                    "exec" => e["outputs"][0]["files"][i % files.max(1)]["exec"] = true.into(),
                    _ => e["outputs"][0]["files"][i % files.max(1)][f.as_str()] = v,
                }
                std::fs::write(&entry, serde_json::to_vec(&e).unwrap()).unwrap();
            }
            Damage::BlobCut(i) | Damage::BlobGrow(i) | Damage::BlobFlip(i, _) => {
                let Some(b) = pick(&blobs, *i) else { return };
                let mut p = std::fs::metadata(&b).unwrap().permissions();
                p.set_mode(0o600);
                std::fs::set_permissions(&b, p).unwrap();
                let mut bytes = std::fs::read(&b).unwrap();
                match d {
                    Damage::BlobCut(_) => {
                        bytes.pop();
                    }
                    Damage::BlobGrow(_) => bytes.push(b'!'),
                    Damage::BlobFlip(_, j) => {
                        let n = bytes.len().max(1);
                        if bytes.is_empty() {
                            bytes.push(1);
                        }
                        bytes[j % n] ^= 0x20;
                    }
                    _ => {}
                }
                std::fs::write(&b, bytes).unwrap();
            }
            Damage::LinkOut(i, dir) => {
                let all = walk(store);
                let Some(p) = pick(&all, *i) else { return };
                let target = if *dir {
                    victim.to_path_buf()
                } else {
                    victim.join("file")
                };
                if std::fs::symlink_metadata(&p)
                    .map(|m| m.is_dir())
                    .unwrap_or(false)
                {
                    std::fs::remove_dir_all(&p).unwrap();
                } else {
                    std::fs::remove_file(&p).unwrap();
                }
                std::os::unix::fs::symlink(target, &p).unwrap();
            }
            Damage::Chmod(i, m) => {
                let all = files_under(store);
                let Some(p) = pick(&all, *i) else { return };
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*m)).unwrap();
            }
            Damage::Remove(i) => {
                let all = files_under(store);
                let Some(p) = pick(&all, *i) else { return };
                std::fs::remove_file(&p).unwrap();
            }
        }
    }

    fn make_output(dir: &Path) {
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("w.bin"), b"weights of the model").unwrap();
        std::fs::write(dir.join("sub/config.json"), b"{\"layers\": 2}").unwrap();
        std::fs::write(dir.join("empty"), b"").unwrap();
        std::os::unix::fs::symlink("w.bin", dir.join("link")).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn a_damaged_store_touches_nothing_outside_and_is_refused_or_restores_exactly(d in damage()) {
            let t = tempfile::tempdir().unwrap();
            let root = t.path();
            let victim = root.join("victim");
            std::fs::create_dir_all(victim.join("inner")).unwrap();
            std::fs::write(victim.join("file"), b"precious").unwrap();
            std::fs::write(victim.join("inner/more"), b"precious too").unwrap();
            let src = root.join("made/model");
            make_output(&src);
            let (digest, _) = orchestrate::digest::sha256_dir(&src).unwrap();
            let store = root.join("store");
            let cache = Cache::open(&store).unwrap();
            let pre = Preimage { schema: "t".into(), outputs: vec!["${work}/model".into()], ..Preimage::default() };
            let key = pre.key();
            let outputs = vec![("${work}/model".to_string(), src.clone(), digest.hex())];
            cache.store(&key, &pre, ("p", "s", "r", 1), &outputs).unwrap();
            apply(&store, &key, &victim, &d);
            let victim_before = snapshot(&victim);
            let work = root.join("work");
            std::fs::create_dir_all(&work).unwrap();
            std::fs::write(work.join("other.txt"), b"not an output").unwrap();
            let target = Target { root: work.clone(), rel: "model".into() };
            let written = vec!["${work}/model".to_string()];
            // Opening may refuse the whole store (a link where its folders go).
            if let Ok(cache) = Cache::open(&store) {
                match cache.lookup(&key, &written) {
                    Lookup::Hit(e) => {
                        if cache.restore(&e, std::slice::from_ref(&target), false).is_ok() {
                            let (got, _) = orchestrate::digest::sha256_dir(&work.join("model")).unwrap();
                            prop_assert_eq!(got, digest, "a used entry restores exactly what was stored");
                            prop_assert_eq!(snapshot(&work.join("model")), snapshot(&src));
                        }
                    }
                    Lookup::Miss | Lookup::Corrupt(_) => {
                        // Rebuilt by the next store.
                        cache.store(&key, &pre, ("p", "s", "r", 2), &outputs).unwrap();
                        match cache.lookup(&key, &written) {
                            Lookup::Hit(e) => {
                                cache.restore(&e, std::slice::from_ref(&target), false).unwrap();
                                let (got, _) = orchestrate::digest::sha256_dir(&work.join("model")).unwrap();
                                prop_assert_eq!(got, digest);
                            }
                            other => prop_assert!(false, "not rebuilt: {:?}", other),
                        }
                    }
                }
                let _ = orchestrate::cache::admin::gc(&cache, Some(0), None);
            }
            prop_assert_eq!(snapshot(&victim), victim_before, "nothing outside was touched");
            prop_assert_eq!(std::fs::read(work.join("other.txt")).unwrap(), b"not an output".to_vec());
        }
    }
}
