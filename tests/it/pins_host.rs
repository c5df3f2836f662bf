//! Tool, Python and file pins against real commands, the real python3 and real files.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use orchestrate::digest::sha256_bytes;
use orchestrate::pins::{
    drift_table, hash_sources, pin_table, verify, Details, PinKind, PinReport, PinStatus,
    SourceRole,
};
use orchestrate::plan::model::{Pins, PythonPin, ToolPin};

fn run(root: &Path, pins: &Pins) -> PinReport {
    let plan = root.join("plan.toml");
    std::fs::write(&plan, "").unwrap();
    let mut r = verify(pins, root);
    hash_sources(&mut r, &plan, "");
    r
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

/// (name, command, expect, timeout)
type ToolRow<'a> = (&'a str, Vec<String>, Option<&'a str>, Option<Duration>);

fn tools(list: &[ToolRow<'_>]) -> Pins {
    let mut tools = BTreeMap::new();
    for (name, command, expect, timeout) in list {
        tools.insert(
            name.to_string(),
            ToolPin {
                command: command.clone(),
                expect: expect.map(str::to_string),
                timeout: *timeout,
            },
        );
    }
    Pins {
        tools,
        ..Pins::default()
    }
}

#[test]
fn tool_output_contains_or_matches_the_expected_text() {
    let t = tempfile::tempdir().unwrap();
    let pins = tools(&[
        (
            "contains",
            sh("echo banner; echo tool 2026.4"),
            Some("2026.4"),
            None,
        ),
        (
            "regex",
            sh("echo tool 2026.4"),
            Some(r"/^tool 20\d\d\.4$/"),
            None,
        ),
        ("stderr", sh("echo rebel 0.11 >&2"), Some("0.11"), None),
        ("mismatch", sh("echo tool 2026.4"), Some("2025.1"), None),
        (
            "unpinned",
            sh("echo; echo first line; echo second"),
            None,
            None,
        ),
    ]);
    let r = run(t.path(), &pins);
    let get = |n: &str| r.entry(PinKind::Tool, n).unwrap().clone();
    assert_eq!(get("contains").status, PinStatus::Ok);
    assert_eq!(get("contains").observed.as_deref(), Some("tool 2026.4"));
    assert_eq!(get("regex").status, PinStatus::Ok);
    assert_eq!(get("stderr").status, PinStatus::Ok);
    assert_eq!(get("stderr").observed.as_deref(), Some("rebel 0.11"));
    assert_eq!(get("mismatch").status, PinStatus::Drift);
    assert_eq!(get("mismatch").observed.as_deref(), Some("tool 2026.4"));
    assert_eq!(get("unpinned").status, PinStatus::Unpinned);
    assert_eq!(get("unpinned").observed.as_deref(), Some("first line"));
    let Some(Details::Tool(d)) = get("contains").details else {
        panic!()
    };
    assert_eq!(d.exit_code, Some(0));
    assert_eq!(d.output, "banner\ntool 2026.4\n");

    assert_eq!(r.drift.len(), 1);
    let table = drift_table(&r);
    assert!(
        table.contains("mismatch") && table.contains("2025.1"),
        "{table}"
    );
    assert!(table.contains("tool 2026.4"), "{table}");
    assert!(!table.contains("contains"), "{table}");
    let all = pin_table(&r);
    for name in ["contains", "regex", "stderr", "mismatch", "unpinned"] {
        assert!(all.contains(name), "{all}");
    }
}

#[test]
fn tool_environment_is_clean() {
    let t = tempfile::tempdir().unwrap();
    std::env::set_var("ORCHESTRATE_PINS_SECRET", "leak");
    let pins = tools(&[(
        "env",
        sh("echo \"lang=$LANG secret=${ORCHESTRATE_PINS_SECRET:-none}\""),
        Some("lang=C secret=none"),
        None,
    )]);
    let r = run(t.path(), &pins);
    let e = r.entry(PinKind::Tool, "env").unwrap();
    assert_eq!(e.status, PinStatus::Ok, "{e:?}");
}

#[test]
fn hung_missing_and_failing_tools_are_errors() {
    let t = tempfile::tempdir().unwrap();
    let pins = tools(&[
        (
            "hangs",
            sh("sleep 30"),
            Some("x"),
            Some(Duration::from_millis(300)),
        ),
        (
            "missing",
            vec!["orchestrate-no-such-tool-xyz".into()],
            Some("1"),
            None,
        ),
        ("fails", sh("echo oops; exit 2"), Some("1.0"), None),
        ("empty", vec![], Some("1"), None),
        ("badregex", sh("echo 1"), Some("/(/"), None),
    ]);
    let r = run(t.path(), &pins);
    for name in ["hangs", "missing", "fails", "empty", "badregex"] {
        let e = r.entry(PinKind::Tool, name).unwrap();
        assert_eq!(e.status, PinStatus::Error, "{name}: {e:?}");
        assert!(e.message.is_some(), "{name}");
    }
    let hang = r.entry(PinKind::Tool, "hangs").unwrap();
    assert!(hang.message.as_deref().unwrap().contains("did not finish"));
    assert_eq!(r.drift.len(), 5);
}

fn pip_version() -> String {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('pip'))",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn python(python: &str, packages: &[&str]) -> Pins {
    let mut map = BTreeMap::new();
    map.insert(
        "env".to_string(),
        PythonPin {
            python: python.to_string(),
            packages: packages.iter().map(|p| p.to_string()).collect(),
        },
    );
    Pins {
        python: map,
        ..Pins::default()
    }
}

#[test]
fn python_packages_are_read_through_the_interpreter() {
    let t = tempfile::tempdir().unwrap();
    let v = pip_version();
    let right = format!("PIP=={v}");
    let r = run(
        t.path(),
        &python(
            "python3",
            &[
                &right,
                "setuptools==0.0.1",
                "orchestrate-surely-absent==1.0",
                "pip",
            ],
        ),
    );
    // Entries are per requirement: `PIP==v` and a bare `pip` name one package.
    let pinned: Vec<_> = r
        .entries
        .iter()
        .filter(|e| e.name == "env/pip")
        .map(|e| (e.status, e.observed.clone()))
        .collect();
    assert!(
        pinned.contains(&(PinStatus::Ok, Some(v.clone()))),
        "{pinned:?}"
    );
    assert!(
        pinned.contains(&(PinStatus::Unpinned, Some(v.clone()))),
        "{pinned:?}"
    );
    let absent = r
        .entry(PinKind::Python, "env/orchestrate-surely-absent")
        .unwrap();
    assert_eq!(absent.status, PinStatus::Drift);
    assert_eq!(absent.observed, None);
    let Some(Details::Python(d)) = &absent.details else {
        panic!()
    };
    assert!(d.executable.is_some() && d.python_version.is_some());
}

#[test]
fn python_wrong_version_is_drift_and_a_missing_interpreter_an_error() {
    let t = tempfile::tempdir().unwrap();
    let v = pip_version();
    let r = run(t.path(), &python("python3", &["pip==0.0.1"]));
    let e = r.entry(PinKind::Python, "env/pip").unwrap();
    assert_eq!(e.status, PinStatus::Drift);
    assert_eq!(e.declared.as_deref(), Some("0.0.1"));
    assert_eq!(e.observed.as_deref(), Some(v.as_str()));
    assert!(drift_table(&r).contains(&v));

    let r = run(t.path(), &python("./no-such-python", &["pip==1"]));
    assert_eq!(
        r.entry(PinKind::Python, "env/pip").unwrap().status,
        PinStatus::Error
    );
    let r = run(t.path(), &python("python3", &["pip>=1"]));
    assert_eq!(
        r.entry(PinKind::Python, "env/pip").unwrap().status,
        PinStatus::Error
    );
}

fn files(list: &[(&str, String)]) -> Pins {
    Pins {
        files: list
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ..Pins::default()
    }
}

#[test]
fn file_pins_exact_and_glob() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    std::fs::write(root.join("uv.lock"), b"lock v1\n").unwrap();
    std::fs::create_dir(root.join("locks")).unwrap();
    std::fs::write(root.join("locks/b.txt"), b"b").unwrap();
    std::fs::write(root.join("locks/a.txt"), b"a").unwrap();
    std::fs::write(root.join("locks/skip.md"), b"x").unwrap();
    let lock = format!("sha256:{}", sha256_bytes(b"lock v1\n"));
    let manifest = format!(
        "{}  locks/a.txt\n{}  locks/b.txt\n",
        sha256_bytes(b"a").hex(),
        sha256_bytes(b"b").hex()
    );
    let glob = format!("sha256:{}", sha256_bytes(manifest.as_bytes()));
    let r = run(
        root,
        &files(&[
            ("uv.lock", lock.clone()),
            ("locks/*.txt", glob.clone()),
            ("fresh.lock", String::new()),
        ]),
    );
    // fresh.lock does not exist: an error, the others are ok.
    assert_eq!(
        r.entry(PinKind::File, "uv.lock").unwrap().status,
        PinStatus::Ok
    );
    let g = r.entry(PinKind::File, "locks/*.txt").unwrap();
    assert_eq!(g.status, PinStatus::Ok, "{g:?}");
    let Some(Details::File(d)) = &g.details else {
        panic!()
    };
    assert!(d.glob);
    assert_eq!(d.files.len(), 2);
    assert_eq!(
        r.entry(PinKind::File, "fresh.lock").unwrap().status,
        PinStatus::Error
    );
    let srcs: Vec<_> = r
        .sources
        .iter()
        .filter(|s| s.role == SourceRole::File)
        .map(|s| (s.name.as_str(), s.digest.as_str()))
        .collect();
    assert_eq!(
        srcs,
        vec![("locks/*.txt", glob.as_str()), ("uv.lock", lock.as_str())]
    );

    std::fs::write(root.join("fresh.lock"), b"new").unwrap();
    std::fs::write(root.join("locks/c.txt"), b"c").unwrap();
    std::fs::write(root.join("bad.lock"), b"x").unwrap();
    let wrong = format!("sha256:{}", sha256_bytes(b"lock v0\n"));
    let r = run(
        root,
        &files(&[
            ("uv.lock", wrong.clone()),
            ("locks/*.txt", glob),
            ("fresh.lock", String::new()),
            ("none/*.lock", String::new()),
            ("bad.lock", "sha256:xyz".into()),
        ]),
    );
    let get = |n: &str| r.entry(PinKind::File, n).unwrap().status;
    assert_eq!(get("uv.lock"), PinStatus::Drift);
    assert_eq!(get("locks/*.txt"), PinStatus::Drift, "a new matching file");
    assert_eq!(get("fresh.lock"), PinStatus::Unpinned);
    assert_eq!(get("none/*.lock"), PinStatus::Error);
    assert_eq!(get("bad.lock"), PinStatus::Error);
    let table = drift_table(&r);
    assert!(table.contains(&wrong) && table.contains(&lock), "{table}");
}
