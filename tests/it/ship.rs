//! What the command-line tool ships beside itself: `--version` with the commit, the
//! man pages and completions the wheel installs (kept current in docs/wheel), and
//! the shipped plans `init --example` writes, runnable outside the repository.
//! The wheel itself is built, installed and run by `.ci/wheel-check` (docs/install.md).

use std::path::Path;
use std::process::Command;

use crate::support;

fn stdout_of(c: &mut Command) -> String {
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", support::shown(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// HEAD of the repository the tests were built in, when they were built in one.
fn head() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(support::project(""))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn version_names_the_commit_built_from_in_both_binaries() {
    let v = stdout_of(support::cli().arg("--version"));
    let re = regex_lite::Regex::new(r"^orchestrate (\S+) \(([0-9a-f]{40}) (\d{4}-\d\d-\d\d)\)\n$")
        .unwrap();
    let caps = re
        .captures(&v)
        .unwrap_or_else(|| panic!("--version said {v:?}"));
    assert_eq!(&caps[1], env!("CARGO_PKG_VERSION"));
    if let Some(head) = head() {
        assert_eq!(&caps[2], head, "--version names HEAD");
    }
    let k = stdout_of(Command::new(support::kvsim_bin()).arg("--version"));
    assert_eq!(k, v.replacen("orchestrate", "kvsim", 1));
}

fn read_dir_sorted(dir: &Path) -> Vec<(String, String)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let e = e.unwrap();
            let text = std::fs::read_to_string(e.path()).unwrap();
            (e.file_name().to_string_lossy().into_owned(), text)
        })
        .collect();
    v.sort();
    v
}

const REGENERATE: &str = "regenerate them with\n  \
    cargo run -- man --out docs/wheel/data/share/man/man1\n  \
    cargo run -- completions bash > docs/wheel/data/share/bash-completion/completions/orchestrate\n  \
    cargo run -- completions zsh > docs/wheel/data/share/zsh/site-functions/_orchestrate\n  \
    cargo run -- completions fish > docs/wheel/data/share/fish/vendor_completions.d/orchestrate.fish";

#[test]
fn the_wheels_man_pages_and_completions_are_current() {
    let dir = tempfile::tempdir().unwrap();
    let out = stdout_of(support::cli().args(["man", "--out"]).arg(dir.path()));
    let fresh = read_dir_sorted(dir.path());
    assert!(
        out.contains(&format!("wrote {} man pages", fresh.len())),
        "{out}"
    );
    let names: Vec<&str> = fresh.iter().map(|(n, _)| n.as_str()).collect();
    for want in ["orchestrate.1", "orchestrate-run.1", "orchestrate-verify.1"] {
        assert!(names.contains(&want), "{names:?}");
    }
    // A page per subcommand, each named in the top page's SUBCOMMANDS section.
    let top = &fresh.iter().find(|(n, _)| n == "orchestrate.1").unwrap().1;
    assert!(top.contains(".SH SUBCOMMANDS") && top.contains("orchestrate\\-run(1)"));
    let committed = read_dir_sorted(&support::project("docs/wheel/data/share/man/man1"));
    assert!(
        committed == fresh,
        "the man pages in docs/wheel are stale; {REGENERATE}"
    );
    // `man run` prints the page `--out` writes.
    let run = stdout_of(support::cli().args(["man", "run"]));
    assert_eq!(
        run,
        fresh
            .iter()
            .find(|(n, _)| n == "orchestrate-run.1")
            .unwrap()
            .1
    );
    let share = support::project("docs/wheel/data/share");
    for (shell, file, marker) in [
        (
            "bash",
            "bash-completion/completions/orchestrate",
            "complete -F _orchestrate",
        ),
        (
            "zsh",
            "zsh/site-functions/_orchestrate",
            "#compdef orchestrate",
        ),
        (
            "fish",
            "fish/vendor_completions.d/orchestrate.fish",
            "complete -c orchestrate",
        ),
    ] {
        let fresh = stdout_of(support::cli().args(["completions", shell]));
        assert!(fresh.contains(marker), "{shell}: {marker:?} missing");
        // Subcommands and their flags are completed, not only the top level.
        assert!(
            fresh.contains("verify") && fresh.contains("only"),
            "{shell}"
        );
        let committed = std::fs::read_to_string(share.join(file)).unwrap_or_default();
        assert!(committed == fresh, "{file} is stale; {REGENERATE}");
    }
}

#[test]
fn bash_completes_a_subcommand_and_its_flags() {
    let script = support::project("docs/wheel/data/share/bash-completion/completions/orchestrate");
    let complete = |line: &str| {
        let words: Vec<&str> = line.split(' ').collect();
        let cmd = format!(
            "source {}; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; \
             _orchestrate orchestrate '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" "),
            words.len() - 1,
            words[words.len() - 1],
            words[words.len() - 2],
        );
        stdout_of(Command::new("bash").args(["--norc", "-c", &cmd]))
    };
    let subs = complete("orchestrate ver");
    assert_eq!(subs.trim(), "verify", "{subs}");
    let flags = complete("orchestrate run --ke");
    assert_eq!(flags.trim(), "--keep-going", "{flags}");
}

#[test]
fn init_example_writes_a_shipped_plan_that_runs_outside_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let out = stdout_of(
        support::cli()
            .args(["init", "--example", "full8k", "exp"])
            .current_dir(dir.path()),
    );
    assert!(out.contains("orchestrate exp/full8k.toml"), "{out}");
    let exp = dir.path().join("exp");
    let mut names: Vec<_> = read_dir_sorted(&exp).into_iter().map(|(n, _)| n).collect();
    names.sort();
    assert_eq!(names, ["full.toml", "full8k.toml", "plan.schema.json"]);
    // full8k.toml as shipped; full.toml with its repository pins replaced.
    let shipped = std::fs::read_to_string(support::project("plans/full8k.toml")).unwrap();
    let full8k = std::fs::read_to_string(exp.join("full8k.toml")).unwrap();
    assert_eq!(
        full8k,
        shipped.replacen("../schemas/plan.schema.json", "./plan.schema.json", 1)
    );
    let full = std::fs::read_to_string(exp.join("full.toml")).unwrap();
    assert!(full.starts_with("#:schema ./plan.schema.json\n"));
    for gone in ["path = \"..\"", "../Cargo.lock", "[pins.tools.rustc]"] {
        assert!(!full.contains(gone), "{gone} is still in the copy");
    }
    assert!(full.contains("[pins.tools.kvsim]\ncommand = [\"kvsim\", \"--version\"]"));
    // Everything else of the plan is the shipped one: the steps and checks.
    let plan = |p: &Path| orchestrate::plan::load(p).unwrap_or_else(|e| panic!("{e}"));
    let ours = plan(&exp.join("full8k.toml"));
    let theirs = plan(&support::project("plans/full8k.toml"));
    // Checks carry the line they are written on, which the new pins moved.
    let lines = regex_lite::Regex::new(r"line: \d+").unwrap();
    let same = |p: &orchestrate::plan::Plan| {
        let all = format!(
            "{:?}",
            (&p.steps, &p.params, &p.matrix, &p.limits, &p.devices)
        );
        lines.replace_all(&all, "line: _").into_owned()
    };
    assert_eq!(same(&ours), same(&theirs));

    // It runs from a folder that is not the repository's, kvsim found beside the
    // orchestrator (not on PATH), and the kvsim pin observed through the same PATH.
    // Smaller than the README's job: the tests' kvsim is a debug build.
    let record = support::run_plan_ok(
        dir.path(),
        &exp.join("full8k.toml"),
        &[
            "--set",
            "matrix.tokens=[256]",
            "--set",
            "params.layers=2",
            "--set",
            "params.decode_steps=4",
        ],
    );
    let rec = support::record_json(&record);
    assert_eq!(rec["status"], "succeeded");
    let pins = &rec["run"]["pins"]["entries"];
    let kvsim = pins
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "kvsim")
        .unwrap_or_else(|| panic!("no kvsim pin in {pins}"));
    let version = stdout_of(Command::new(support::kvsim_bin()).arg("--version"));
    assert!(
        kvsim.to_string().contains(version.trim()),
        "the kvsim pin observed {kvsim}, kvsim says {version}"
    );
    support::assert_verifies(&record);
}

#[test]
fn every_example_checks_and_never_writes_over_a_file() {
    for (name, plan, others) in [
        ("starter", "plan.toml", 0),
        ("smoke", "smoke.toml", 0),
        ("full", "full.toml", 0),
        ("torch", "torch.toml", 4),
    ] {
        let dir = tempfile::tempdir().unwrap();
        stdout_of(
            support::cli()
                .args(["init", "--example", name])
                .arg(dir.path()),
        );
        let files = walk(dir.path());
        assert_eq!(files.len(), others + 2, "{name}: {files:?}");
        let path = dir.path().join(plan);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains("\"..\"") && !text.contains("\"../"),
            "{name}: {text}"
        );
        let out = support::cli().arg("check").arg(&path).output().unwrap();
        assert!(out.status.success(), "{name}: {}", support::shown(&out));
        // A second init into the same folder changes nothing.
        let before = walk(dir.path());
        let out = support::cli()
            .args(["init", "--example", name])
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{name}: {}",
            support::shown(&out)
        );
        assert_eq!(walk(dir.path()), before, "{name}");
    }
    // The torch example's scripts are the shipped ones.
    let dir = tempfile::tempdir().unwrap();
    stdout_of(
        support::cli()
            .args(["init", "--example", "torch"])
            .arg(dir.path()),
    );
    for f in ["build.py", "common.py", "prefill.py", "decode.py"] {
        assert_eq!(
            std::fs::read(dir.path().join("torch").join(f)).unwrap(),
            std::fs::read(support::project("plans/torch").join(f)).unwrap(),
            "{f}"
        );
    }
}

/// Every file below `dir`, with its contents.
fn walk(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}
