//! The shared cache (docs/cache.md, "A cache the team shares") through the real
//! binary: "hosts" are cache and record folders of their own sharing one folder;
//! what is reused is only what a trusted key signed, a tampered blob is refused,
//! removed and rebuilt, an entry signed by a key nobody trusts is a miss that says
//! whose it is, and `root` and `nobody` write the same folder.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use orchestrate::cache::remote::{Remote, SharedFolder};
use orchestrate::evidence::dsse::{self, SigningKey};

use crate::support::{assert_verifies, cli, record_json, record_step, shown};

/// One cached step whose output depends only on the plan's parameter.
fn plan(shared: &Path, trust: &[&str], value: &str) -> String {
    plan_for(&shared.display().to_string(), trust, value)
}

/// [`plan`] with any remote (a folder's path, an `s3://` URL).
pub(crate) fn plan_for(remote: &str, trust: &[&str], value: &str) -> String {
    let trust: Vec<String> = trust.iter().map(|t| format!("\"{t}\"")).collect();
    format!(
        r#"schema = "orchestrate/plan/v1"
name = "shared-cache"
[params]
value = "{value}"
[cache]
remote = "{remote}"
trust = [{}]
[steps.compile]
kind = "compile"
cache = true
shell = "mkdir -p ${{work}}/model && printf '%s' ${{params.value}} > ${{work}}/model/w.bin && head -c 200000 /dev/zero >> ${{work}}/model/w.bin"
outputs = ["${{work}}/model"]
"#,
        trust.join(", ")
    )
}

/// 16 threads write different entries for one key and signer at once: exactly
/// one call says it wrote, and what is stored is that writer's, whole.
pub(crate) fn one_of_16_writers_wins(f: std::sync::Arc<dyn Remote>) {
    let key = "ab".repeat(32);
    let signer = "cd".repeat(32);
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let (f, key, signer) = (f.clone(), key.clone(), signer.clone());
            std::thread::spawn(move || {
                let body = format!("{i:0>4}").repeat(10_000);
                (
                    i,
                    f.put_entry_if_absent(&key, &signer, body.as_bytes())
                        .unwrap(),
                )
            })
        })
        .collect();
    let won: Vec<usize> = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|(_, w)| *w)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(won.len(), 1, "exactly one writer wins: {won:?}");
    let stored = f.entry(&key, &signer, 1 << 20).unwrap().unwrap();
    assert_eq!(
        stored,
        format!("{:0>4}", won[0]).repeat(10_000).into_bytes()
    );
    assert_eq!(f.signers(&key).unwrap(), vec![signer]);
}

/// Write `name.key` and `name.pub` into `dir`.
pub(crate) fn keys(dir: &Path, name: &str, seed: u8) -> SigningKey {
    let k = SigningKey::from_bytes(&[seed; 32]);
    std::fs::write(
        dir.join(format!("{name}.key")),
        dsse::signing_key_to_pem(&k).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join(format!("{name}.pub")),
        dsse::verifying_key_to_pem(&k.verifying_key()).unwrap(),
    )
    .unwrap();
    k
}

/// A host: its own cache and records, the plan folder shared.
struct Host {
    root: PathBuf,
}

impl Host {
    fn new(t: &Path, name: &str) -> Host {
        let root = t.join(name);
        std::fs::create_dir_all(&root).unwrap();
        Host { root }
    }

    /// Run `plan` here; the record as JSON, and what the run printed.
    fn run(&self, plan: &Path, extra: &[&str]) -> (serde_json::Value, PathBuf, Output) {
        let records = self.root.join("records");
        let before = crate::support::record_dirs(&records);
        let out = cli()
            .arg("run")
            .arg(plan)
            .arg("--records")
            .arg(&records)
            .arg("--cache")
            .arg(self.root.join("cache"))
            .args(["--progress", "plain"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", shown(&out));
        let mut after = crate::support::record_dirs(&records);
        after.retain(|d| !before.contains(d));
        let dir = after.pop().expect("a record");
        (record_json(&dir), dir, out)
    }
}

fn cache_of(rec: &serde_json::Value) -> &serde_json::Value {
    &record_step(rec, "compile")["cache"]
}

fn blobs(shared: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in std::fs::read_dir(shared.join("blobs/sha256"))
        .unwrap()
        .flatten()
    {
        for f in std::fs::read_dir(d.path()).unwrap().flatten() {
            out.push(f.path());
        }
    }
    out
}

#[test]
fn a_team_reuses_only_what_a_trusted_key_signed_and_a_tampered_blob_is_rebuilt() {
    let t = tempfile::tempdir().unwrap();
    let shared = t.path().join("shared");
    keys(t.path(), "ci", 7);
    keys(t.path(), "alice", 9);
    let p = t.path().join("plan.toml");
    std::fs::write(&p, plan(&shared, &["ci.pub"], "one")).unwrap();
    let ci_key = t.path().join("ci.key");
    let ci_key = ci_key.to_str().unwrap();

    // CI builds and pushes.
    let (rec, dir, _) = Host::new(t.path(), "ci").run(&p, &["--sign-key", ci_key]);
    let c = cache_of(&rec);
    assert_eq!(c["status"], "stored", "{c}");
    let pushed = c["remote"].as_str().unwrap_or_default();
    assert!(pushed.starts_with("pushed to "), "{c}");
    assert!(pushed.contains("(1 blobs, 200003 bytes sent)"), "{c}");
    assert_verifies(&dir);

    // `why` says where it would come from, without fetching a blob.
    let why = cli()
        .arg("why")
        .arg(&p)
        .arg("--cache")
        .arg(t.path().join("bob/cache"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&why.stdout);
    assert!(
        said.contains(&format!(
            "in {} signed by ci, stored by root@",
            shared.display()
        )),
        "{}",
        shown(&why)
    );
    // A colleague without a key reuses it from the shared folder.
    let (rec, dir, out) = Host::new(t.path(), "bob").run(&p, &[]);
    let c = cache_of(&rec);
    assert_eq!(c["status"], "reused", "{c}\n{}", shown(&out));
    let from = &c["reused_from"];
    assert_eq!(from["remote"], shared.display().to_string(), "{from}");
    assert_eq!(from["signed_by"], "ci", "{from}");
    assert!(
        from["stored_by"].as_str().unwrap().starts_with("root@"),
        "{from}"
    );
    assert!(shown(&out).contains("hit in "), "{}", shown(&out));
    let work = rec["run"]["options"]["work"].as_str().unwrap();
    let w = std::fs::read(Path::new(work).join("model/w.bin")).unwrap();
    assert_eq!(&w[..3], b"one");
    assert_eq!(w.len(), 200_003);
    assert_verifies(&dir);

    // Alice builds another value and pushes it signed with her key: the team
    // trusts only CI, so it is a miss that says whose entry it is.
    std::fs::write(&p, plan(&shared, &["ci.pub"], "two")).unwrap();
    let alice_key = t.path().join("alice.key");
    let (rec, _, _) =
        Host::new(t.path(), "alice").run(&p, &["--sign-key", alice_key.to_str().unwrap()]);
    assert!(cache_of(&rec)["remote"]
        .as_str()
        .unwrap()
        .starts_with("pushed to "));
    let (rec, _, _) = Host::new(t.path(), "carol").run(&p, &[]);
    let c = cache_of(&rec);
    assert_eq!(c["status"], "stored", "{c}");
    let why = c["why"].to_string();
    assert!(why.contains("entry signed by root@"), "{why}");
    assert!(why.contains("not trusted"), "{why}");
    let said = cli()
        .arg("why")
        .arg(&p)
        .arg("--cache")
        .arg(t.path().join("frank/cache"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&said.stdout).into_owned();
    assert!(
        said.contains("compile: runs: ") && said.contains("no shared entry: entry signed by root@"),
        "{said}"
    );

    // Someone overwrites CI's blob in the shared folder: refused and removed;
    // the step runs; CI's next push puts it back; the next colleague hits again.
    std::fs::write(&p, plan(&shared, &["ci.pub"], "one")).unwrap();
    let ones: Vec<PathBuf> = blobs(&shared)
        .into_iter()
        .filter(|b| std::fs::read(b).unwrap().starts_with(b"one"))
        .collect();
    assert_eq!(ones.len(), 1);
    let mut bytes = std::fs::read(&ones[0]).unwrap();
    bytes[100] = b'X';
    std::fs::remove_file(&ones[0]).unwrap();
    std::fs::write(&ones[0], &bytes).unwrap();
    let (rec, _, _) = Host::new(t.path(), "dave").run(&p, &[]);
    let c = cache_of(&rec);
    assert_eq!(c["status"], "stored", "{c}");
    let why = c["why"].to_string();
    assert!(
        why.contains("does not match its digest: refused, removed from the remote"),
        "{why}"
    );
    assert!(!ones[0].exists(), "the tampered blob is removed");
    let (rec, _, _) = Host::new(t.path(), "ci2").run(&p, &["--sign-key", ci_key]);
    let c = cache_of(&rec);
    assert_eq!(
        c["status"], "stored",
        "a blob missing from the remote is a miss: {c}"
    );
    assert!(
        c["remote"].as_str().unwrap().starts_with("already in "),
        "{c}"
    );
    assert_eq!(std::fs::read(&ones[0]).unwrap()[100], 0, "the blob is back");
    let (rec, _, _) = Host::new(t.path(), "erin").run(&p, &[]);
    assert_eq!(cache_of(&rec)["status"], "reused");
}

#[test]
fn two_trusted_writers_with_different_results_are_reported_nondeterministic() {
    let t = tempfile::tempdir().unwrap();
    let shared = t.path().join("shared");
    keys(t.path(), "ci", 7);
    keys(t.path(), "gpu", 8);
    let p = t.path().join("plan.toml");
    let nondeterministic = plan(&shared, &["ci.pub", "gpu.pub"], "one")
        .replace("printf '%s' ${params.value}", "date +%N");
    std::fs::write(&p, nondeterministic).unwrap();
    let key = |n: &str| t.path().join(format!("{n}.key")).display().to_string();
    let (rec, _, _) = Host::new(t.path(), "ci").run(&p, &["--sign-key", &key("ci")]);
    assert!(cache_of(&rec)["remote"]
        .as_str()
        .unwrap()
        .starts_with("pushed to "));
    let (rec, _, _) =
        Host::new(t.path(), "gpu").run(&p, &["--sign-key", &key("gpu"), "--no-cache"]);
    let c = cache_of(&rec);
    assert!(
        c["remote"].as_str().unwrap().starts_with("pushed to "),
        "{c}"
    );
    let nd = c["nondeterministic"].to_string();
    assert!(nd.contains("in the entry signed by `ci`"), "{c}");
    // Each key keeps its own entry: CI's was not overwritten.
    let entries: Vec<_> = walk(&shared.join("entries"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert_eq!(entries.len(), 2, "{entries:?}");
}

fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn concurrent_writers_of_one_entry_one_wins_and_nothing_is_half_written() {
    let t = tempfile::tempdir().unwrap();
    let f = std::sync::Arc::new(SharedFolder::open(&t.path().join("s")).unwrap());
    let signer = "cd".repeat(32);
    one_of_16_writers_wins(f.clone());
    let tmp: Vec<_> = std::fs::read_dir(t.path().join("s/tmp")).unwrap().collect();
    assert!(tmp.is_empty(), "nothing left in tmp/: {tmp:?}");
    // A link planted where an entry's folder goes is not followed.
    let other = "ef".repeat(32);
    std::fs::create_dir_all(t.path().join("s/entries/ef")).unwrap();
    std::os::unix::fs::symlink(t.path(), t.path().join("s/entries/ef").join(&other)).unwrap();
    assert!(f.put_entry_if_absent(&other, &signer, b"x").is_err());
    assert!(f.entry(&other, &signer, 10).is_err());
}

#[test]
fn root_and_nobody_write_one_shared_folder() {
    if !crate::support::is_root() {
        crate::support::skip_or_fail(
            crate::support::Need::Cgroups,
            "not root: cannot act as nobody",
        );
        return;
    }
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("a user nobody");
    let (uid, gid) = (nobody.uid.as_raw(), nobody.gid.as_raw());
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        t.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    // The administrator makes the folder the group's (setgid, group-writable).
    let shared = t.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::os::unix::fs::chown(&shared, None, Some(gid)).unwrap();
    std::fs::set_permissions(
        &shared,
        std::os::unix::fs::PermissionsExt::from_mode(0o2770),
    )
    .unwrap();
    let home = t.path().join("nobody");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(uid), Some(gid)).unwrap();
    keys(t.path(), "team", 5);
    for f in ["team.key", "team.pub"] {
        std::os::unix::fs::chown(t.path().join(f), Some(uid), Some(gid)).unwrap();
    }
    let key = t.path().join("team.key").display().to_string();
    let p = t.path().join("plan.toml");
    std::fs::write(&p, plan(&shared, &["team.pub"], "one")).unwrap();
    // root makes the folders and pushes first.
    let (rec, _, _) = Host::new(t.path(), "root").run(&p, &["--sign-key", &key]);
    assert!(cache_of(&rec)["remote"]
        .as_str()
        .unwrap()
        .starts_with("pushed to "));
    // nobody pushes another result into root's folders, then reuses root's.
    std::fs::write(&p, plan(&shared, &["team.pub"], "two")).unwrap();
    let run_as_nobody = || {
        let before = crate::support::record_dirs(&home.join("records"));
        let out = cli()
            .uid(uid)
            .gid(gid)
            .current_dir(&home)
            .env("HOME", &home)
            .arg("run")
            .arg(&p)
            .arg("--records")
            .arg(home.join("records"))
            .arg("--cache")
            .arg(home.join("cache"))
            .args(["--progress", "plain", "--sign-key", &key])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", shown(&out));
        // Run ids sort by second, then at random: the new one is the one not there before.
        let mut dirs = crate::support::record_dirs(&home.join("records"));
        dirs.retain(|d| !before.contains(d));
        record_json(&dirs.pop().expect("a new record"))
    };
    let rec = run_as_nobody();
    let c = cache_of(&rec);
    assert!(
        c["remote"]
            .as_str()
            .unwrap_or_default()
            .starts_with("pushed to "),
        "{c}"
    );
    std::fs::write(&p, plan(&shared, &["team.pub"], "one")).unwrap();
    let rec = run_as_nobody();
    assert_eq!(cache_of(&rec)["status"], "reused", "{}", cache_of(&rec));
    // And root reuses nobody's.
    std::fs::write(&p, plan(&shared, &["team.pub"], "two")).unwrap();
    let (rec, _, _) = Host::new(t.path(), "root2").run(&p, &[]);
    assert_eq!(cache_of(&rec)["status"], "reused", "{}", cache_of(&rec));
    for f in walk(&shared) {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(&f).unwrap();
        assert_eq!(m.gid(), gid, "{} keeps the folder's group", f.display());
    }
}

#[test]
fn push_pull_and_list_by_hand() {
    let t = tempfile::tempdir().unwrap();
    let shared = t.path().join("shared");
    keys(t.path(), "ci", 7);
    keys(t.path(), "alice", 9);
    // The plan names no shared cache: entries move by hand.
    let p = t.path().join("plan.toml");
    let local_only =
        plan(&shared, &[], "one").replace(&format!("remote = \"{}\"\n", shared.display()), "");
    std::fs::write(&p, local_only).unwrap();
    let a = Host::new(t.path(), "a");
    let (rec, _, _) = a.run(&p, &[]);
    let key = cache_of(&rec)["key"].as_str().unwrap().to_string();
    let cache = |h: &str, args: &[&str]| {
        let out = cli()
            .arg("cache")
            .args(args)
            .arg("--cache")
            .arg(t.path().join(h).join("cache"))
            .arg("--cache-remote")
            .arg(&shared)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            shown(&out),
        )
    };
    let ci = t.path().join("ci.key").display().to_string();
    let (code, said, all) = cache("a", &["push", "--sign-key", &ci]);
    assert_eq!(code, Some(0), "{all}");
    assert!(
        said.contains("compile: pushed (1 blobs, 200003 bytes sent)"),
        "{said}"
    );
    let (_, said, _) = cache("a", &["push", "--sign-key", &ci]);
    assert!(said.contains("already there"), "{said}");
    let ci_pub = t.path().join("ci.pub").display().to_string();
    let alice_pub = t.path().join("alice.pub").display().to_string();
    let (code, said, all) = cache("b", &["remote", "--trust", &ci_pub]);
    assert_eq!(code, Some(0), "{all}");
    assert!(
        said.contains(&key[..12]) && said.contains(" ci ") && said.contains("1 entries"),
        "{said}"
    );
    let (code, said, _) = cache("b", &["pull", "--trust", &alice_pub, &key]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("no entry a trusted key signed"), "{said}");
    let (code, said, all) = cache("b", &["pull", "--trust", &ci_pub, &key]);
    assert_eq!(code, Some(0), "{all}");
    assert!(
        said.contains("pulled (compile, signed by ci, stored by root@"),
        "{said}"
    );
    let (rec, _, _) = Host::new(t.path(), "b").run(&p, &[]);
    let c = cache_of(&rec);
    assert_eq!(c["status"], "reused", "{c}");
    assert!(
        c["reused_from"].get("remote").is_none(),
        "from the local cache: {c}"
    );
    let (code, _, all) = cli_no_remote(&["cache", "pull", "--trust", &ci_pub, &key]);
    assert_eq!(code, Some(2), "{all}");
    assert!(all.contains("--cache-remote"), "{all}");
}

fn cli_no_remote(args: &[&str]) -> (Option<i32>, String, String) {
    let out = cli()
        .args(args)
        .env_remove("ORCHESTRATE_CACHE_REMOTE")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        shown(&out),
    )
}

#[test]
fn junk_in_a_keys_place_is_a_miss_and_that_keys_next_push_replaces_it() {
    let t = tempfile::tempdir().unwrap();
    let shared = t.path().join("shared");
    keys(t.path(), "ci", 7);
    let p = t.path().join("plan.toml");
    std::fs::write(&p, plan(&shared, &["ci.pub"], "one")).unwrap();
    let ci = t.path().join("ci.key").display().to_string();
    let (rec, _, _) = Host::new(t.path(), "ci").run(&p, &["--sign-key", &ci]);
    assert!(cache_of(&rec)["remote"]
        .as_str()
        .unwrap()
        .starts_with("pushed to "));
    let entries: Vec<PathBuf> = walk(&shared.join("entries"));
    assert_eq!(entries.len(), 1);
    // A member of the group puts junk with control characters in CI's place.
    std::fs::remove_file(&entries[0]).unwrap();
    std::fs::write(&entries[0], "{\"payload\":\"\\u001b[2J\",\"payloadType\":\"x\",\"signatures\":[{\"keyid\":\"\\n\\u001b]0;owned\",\"sig\":\"\"}]}").unwrap();
    let (rec, _, out) = Host::new(t.path(), "bob").run(&p, &[]);
    let c = cache_of(&rec);
    assert_eq!(c["status"], "stored", "{c}");
    let why = c["why"].to_string();
    assert!(why.contains("does not verify with key `ci`"), "{why}");
    assert!(!shown(&out).contains('\u{1b}'), "{}", shown(&out));
    let (rec, _, _) = Host::new(t.path(), "ci2").run(&p, &["--sign-key", &ci]);
    let c = cache_of(&rec);
    assert!(
        c["remote"]
            .as_str()
            .unwrap()
            .contains("replacing what stood in this key's place"),
        "{c}"
    );
    let (rec, _, _) = Host::new(t.path(), "carol").run(&p, &[]);
    assert_eq!(cache_of(&rec)["status"], "reused");
}

#[test]
fn gc_of_the_shared_folder_removes_old_entries_and_orphaned_blobs_only() {
    let t = tempfile::tempdir().unwrap();
    let shared = t.path().join("shared");
    let folder = SharedFolder::open(&shared).unwrap();
    collect_round(t.path(), &shared.display().to_string(), &folder, &|_| {});
}

/// `cache gc --remote` on the store `spec` names (reached here as `store` too),
/// `with` giving each command what it needs to reach it: a dry run removes
/// nothing; a blob no entry names is kept within `--grace` and removed after; an
/// entry goes with `--older-than`, and then its blobs.
pub(crate) fn collect_round(
    t: &Path,
    spec: &str,
    store: &dyn Remote,
    with: &dyn Fn(&mut std::process::Command),
) {
    keys(t, "ci", 7);
    let p = t.join("gc-plan.toml");
    std::fs::write(&p, plan_for(spec, &["ci.pub"], "one")).unwrap();
    let mut run = cli();
    run.arg("run")
        .arg(&p)
        .arg("--records")
        .arg(t.join("gc-records"))
        .arg("--cache")
        .arg(t.join("gc-cache"))
        .arg("--sign-key")
        .arg(t.join("ci.key"))
        .args(["--progress", "plain"]);
    with(&mut run);
    let out = run.output().unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    // What a push cut off before its entry leaves behind.
    let orphan = t.join("orphan.bin");
    std::fs::write(&orphan, b"orphan blob").unwrap();
    let hex = orchestrate::digest::sha256_bytes(b"orphan blob").hex();
    let mut f = std::fs::File::open(&orphan).unwrap();
    store.put_blob(&hex, &mut f, 11).unwrap();
    assert_eq!(store.stored().unwrap().len(), 3, "an entry and two blobs");
    let gc = |args: &[&str]| {
        let mut c = cli();
        c.args(["cache", "gc", "--remote"])
            .args(args)
            .arg("--cache-remote")
            .arg(spec);
        with(&mut c);
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", shown(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let said = gc(&["--dry-run", "--grace", "0s"]);
    assert!(
        said.contains("would remove 0 entries and 1 blobs (11 bytes); kept 1 entries and 1 blobs"),
        "{said}"
    );
    assert_eq!(
        store.stored().unwrap().len(),
        3,
        "a dry run removes nothing"
    );
    let said = gc(&[]);
    assert!(
        said.contains("removed 0 entries and 0 blobs (0 bytes); kept 1 entries and 1 blobs, and 1 blobs no entry names yet"),
        "{said}"
    );
    let said = gc(&["--grace", "0s"]);
    assert!(
        said.contains("removed 0 entries and 1 blobs (11 bytes)"),
        "{said}"
    );
    assert!(!store.has_blob(&hex, 11).unwrap());
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let said = gc(&["--older-than", "1s", "--grace", "0s"]);
    assert!(
        said.contains("removed 1 entries and 1 blobs (")
            && said.contains("kept 0 entries and 0 blobs"),
        "{said}"
    );
    assert!(store.stored().unwrap().is_empty(), "nothing is left");
}
