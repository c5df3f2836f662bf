//! `pin_plan_text`: a commented plan gets its observed pins written in, nothing else
//! changes, and verifying the rewritten plan shows no drift.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use orchestrate::digest::sha256_bytes;
use orchestrate::pins::{pin_plan_text, pin_table, verify, PinError, PinReport, PinStatus};
use orchestrate::plan::model::{GitPin, ModelPin, Pins, PythonPin, ToolPin};

const REV: &str = "0172bf7e73977ae213613529f3d2d5400a33f678";

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The plan's folder: a clean repository, a hub cache, lock files.
fn workspace(root: &Path) -> String {
    let repo = root.join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "one"]);

    let cache = root.join("models--ORG--NAME");
    let snap = cache.join("snapshots").join(REV);
    std::fs::create_dir_all(cache.join("blobs")).unwrap();
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(cache.join("refs")).unwrap();
    let blob = sha256_bytes(b"weights").hex();
    std::fs::write(cache.join("blobs").join(&blob), b"weights").unwrap();
    symlink(format!("../../blobs/{blob}"), snap.join("model.bin")).unwrap();
    std::fs::write(cache.join("refs/main"), format!("{REV}\n")).unwrap();

    std::fs::write(root.join("uv.lock"), "lock\n").unwrap();
    std::fs::create_dir(root.join("locks")).unwrap();
    std::fs::write(root.join("locks/a.txt"), "a").unwrap();
    git(&repo, &["rev-parse", "HEAD"])
}

const PLAN: &str = r#"# Flagship plan: pins are filled by `orchestrate pin`.
schema = "orchestrate/plan/v1"
name   = "pin-test"     # aligned on purpose

[pins.git.implementation]   # the code under test
path = "repo"
commit = "0000000"          # stale: pin rewrites it
allow_dirty = false

[pins.git.baseline]
path = "repo"

[pins.model.koni]
id = "ORG/NAME"
path = "models--ORG--NAME"
revision = "main"   # a ref; pin writes the sha

[pins.tools.kept]
command = ["sh", "-c", "echo tool 2026.4"]
expect = "2026.4"   # matches: kept as written

[pins.tools.stale]
command = ["sh", "-c", "echo rebel 0.11"]
expect = "0.10"     # stale

[pins.python.env]
python = "python3"
packages = [
  "pip",            # the one we surely have
]

[pins.files]
"uv.lock" = ""      # filled by pin
"locks/*.txt" = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

# Steps are not touched.
[steps.a]
run = ["true"]   # unrelated
"#;

/// A test-only reading of `[pins]` (the real loader lives in `plan`).
fn pins_from(text: &str) -> Pins {
    let doc: toml::Table = toml::from_str(text).unwrap();
    let pins = doc["pins"].as_table().unwrap();
    let s = |v: &toml::Value| v.as_str().unwrap().to_string();
    let mut out = Pins::default();
    for (name, p) in pins["git"].as_table().unwrap() {
        out.git.insert(
            name.clone(),
            GitPin {
                path: PathBuf::from(s(&p["path"])),
                commit: p.get("commit").map(s),
                allow_dirty: p
                    .get("allow_dirty")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false),
                refuse_untracked: false,
            },
        );
    }
    for (name, p) in pins["model"].as_table().unwrap() {
        out.model.insert(
            name.clone(),
            ModelPin {
                id: p.get("id").map(s),
                revision: p.get("revision").map(s),
                path: PathBuf::from(s(&p["path"])),
                digest: p.get("digest").map(s),
            },
        );
    }
    for (name, p) in pins["tools"].as_table().unwrap() {
        out.tools.insert(
            name.clone(),
            ToolPin {
                command: p["command"].as_array().unwrap().iter().map(s).collect(),
                expect: p.get("expect").map(s),
                timeout: Some(Duration::from_secs(10)),
            },
        );
    }
    for (name, p) in pins["python"].as_table().unwrap() {
        out.python.insert(
            name.clone(),
            PythonPin {
                python: s(&p["python"]),
                packages: p["packages"].as_array().unwrap().iter().map(s).collect(),
            },
        );
    }
    for (k, v) in pins["files"].as_table().unwrap() {
        out.files.insert(k.clone(), s(v));
    }
    out
}

fn check(root: &Path, text: &str) -> PinReport {
    verify(&pins_from(text), root)
}

fn pip_version() -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('pip'))",
        ])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn pinning_round_trips_a_commented_plan() {
    let t = tempfile::tempdir().unwrap();
    let head = workspace(t.path());
    let before = check(t.path(), PLAN);
    assert!(before.has_drift(), "{}", pin_table(&before));

    let pinned = pin_plan_text(PLAN, &before).unwrap();

    let model_digest =
        sha256_bytes(format!("{}  model.bin\n", sha256_bytes(b"weights").hex()).as_bytes());
    let uv = sha256_bytes(b"lock\n");
    let locks = sha256_bytes(format!("{}  locks/a.txt\n", sha256_bytes(b"a").hex()).as_bytes());
    let pip = pip_version();
    let expected = format!(
        r#"# Flagship plan: pins are filled by `orchestrate pin`.
schema = "orchestrate/plan/v1"
name   = "pin-test"     # aligned on purpose

[pins.git.implementation]   # the code under test
path = "repo"
commit = "{head}"          # stale: pin rewrites it
allow_dirty = false

[pins.git.baseline]
path = "repo"
commit = "{head}"

[pins.model.koni]
id = "ORG/NAME"
path = "models--ORG--NAME"
revision = "{REV}"   # a ref; pin writes the sha
digest = "sha256:{model_digest}"

[pins.tools.kept]
command = ["sh", "-c", "echo tool 2026.4"]
expect = "2026.4"   # matches: kept as written

[pins.tools.stale]
command = ["sh", "-c", "echo rebel 0.11"]
expect = "rebel 0.11"     # stale

[pins.python.env]
python = "python3"
packages = [
  "pip=={pip}",            # the one we surely have
]

[pins.files]
"uv.lock" = "sha256:{uv}"      # filled by pin
"locks/*.txt" = "sha256:{locks}"

# Steps are not touched.
[steps.a]
run = ["true"]   # unrelated
"#
    );
    assert_eq!(pinned, expected);

    let after = check(t.path(), &pinned);
    assert!(!after.has_drift(), "{}", pin_table(&after));
    for e in &after.entries {
        assert_eq!(e.status, PinStatus::Ok, "{e:?}");
    }
    // The report is the record's "pins" section: it survives JSON.
    let json = serde_json::to_string(&after).unwrap();
    assert_eq!(serde_json::from_str::<PinReport>(&json).unwrap(), after);
    assert!(json.contains("\"status\":\"ok\""), "{json}");
    // Pinning a pinned plan changes nothing.
    assert_eq!(pin_plan_text(&pinned, &after).unwrap(), pinned);
}

#[test]
fn unobservable_pins_are_left_as_written() {
    let t = tempfile::tempdir().unwrap();
    workspace(t.path());
    let text = PLAN.replace("path = \"repo\"\ncommit", "path = \"gone\"\ncommit");
    let report = check(t.path(), &text);
    let pinned = pin_plan_text(&text, &report).unwrap();
    assert!(pinned.contains("commit = \"0000000\"          # stale: pin rewrites it"));
}

#[test]
fn a_report_from_another_plan_is_refused() {
    let t = tempfile::tempdir().unwrap();
    workspace(t.path());
    let report = check(t.path(), PLAN);
    let other = "schema = \"orchestrate/plan/v1\"\n[pins.files]\n";
    assert!(matches!(
        pin_plan_text(other, &report),
        Err(PinError::Missing(_))
    ));
    assert!(matches!(
        pin_plan_text("not = [toml", &report),
        Err(PinError::Toml(_))
    ));
}
