//! Repositories a plan names cannot run code as the user (the trust issue, items 16
//! and 17): git's ownership check stays on, so another user's repository config
//! (`core.fsmonitor`) never runs, and a dirty tree's diff is hashed through a pipe,
//! so no predictable temporary file can be planted.

use std::path::Path;

use crate::support::{cli, git, is_root, shown, skip_or_fail, Need};

fn plan_with(dir: &Path, body: &str) -> std::path::PathBuf {
    let p = dir.join("plan.toml");
    std::fs::write(
        &p,
        format!("schema = \"orchestrate/plan/v1\"\nname = \"trust-git\"\n{body}[steps.s]\nshell = \"true\"\n"),
    )
    .unwrap();
    p
}

fn repo(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("a.txt"), "one").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "one"]);
    std::fs::write(dir.join("a.txt"), "two").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "two"]);
}

#[test]
fn another_users_repository_config_never_runs() {
    if !is_root() {
        return skip_or_fail(Need::Cgroups, "chown to another user needs root");
    }
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("theirs");
    repo(&r);
    let marker = t.path().join("PWNED");
    git(
        &r,
        &[
            "config",
            "core.fsmonitor",
            &format!("touch {}", marker.display()),
        ],
    );
    // Dirty, so `git status` would consult the monitor.
    std::fs::write(r.join("a.txt"), "edited").unwrap();
    let chown = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&r)
        .status()
        .unwrap();
    assert!(chown.success());
    let plan = plan_with(
        t.path(),
        "[pins.git.theirs]\npath = \"theirs\"\nallow_dirty = true\n[revisions]\nbaseline = { repo = \"theirs\", commit = \"HEAD~1\" }\nimplementation = { repo = \"theirs\" }\n",
    );
    let o = cli()
        .arg("check")
        .arg(&plan)
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(
        !marker.exists(),
        "the repository's fsmonitor ran: {}",
        shown(&o)
    );
    let text = shown(&o);
    assert!(text.contains("dubious ownership"), "{text}");
    assert!(
        text.contains("safe.directory"),
        "git's own advice is passed on: {text}"
    );
    let run = cli()
        .arg("run")
        .arg(&plan)
        .args(["--progress", "quiet", "--records"])
        .arg(t.path().join("records"))
        .current_dir(t.path())
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(3), "refused: {}", shown(&run));
    assert!(
        !marker.exists(),
        "the repository's fsmonitor ran: {}",
        shown(&run)
    );
}

#[test]
fn a_dirty_trees_diff_is_hashed_without_a_temporary_file() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("mine");
    repo(&r);
    std::fs::write(r.join("a.txt"), "edited").unwrap();
    let tmp = t.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let victim = t.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    // Links at the names the old code used, for the pids the command will likely get.
    let me = std::process::id();
    for pid in me..me + 400 {
        for n in 0..2 {
            let _ = std::os::unix::fs::symlink(
                &victim,
                tmp.join(format!("orchestrate-pin-diff-{pid}-{n}.patch")),
            );
        }
    }
    let before = std::fs::read_dir(&tmp).unwrap().count();
    let plan = plan_with(
        t.path(),
        "[pins.git.mine]\npath = \"mine\"\nallow_dirty = true\n",
    );
    let o = cli()
        .arg("check")
        .arg(&plan)
        .env("TMPDIR", &tmp)
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", shown(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("diff sha256"), "the diff was hashed: {out}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        before,
        "nothing written to TMPDIR"
    );
    // The digest is the diff's own.
    let diff = crate::support::git_bytes(
        &r,
        &["diff", "HEAD", "--binary", "--no-color", "--no-ext-diff"],
    );
    let want = orchestrate::digest::sha256_bytes(&diff).hex();
    assert!(out.contains(&want), "{want} in {out}");
}
