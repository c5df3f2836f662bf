//! The step cache through the real binary: reuse of unchanged steps, the reason for
//! every rerun, early cutoff, corruption and concurrent runs, `--refresh` and
//! nondeterminism, `why`, and `cache list|du|gc`. Every test has a cache folder of
//! its own (`--cache`).

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{assert_verifies, cli, record_json, record_step, run_plan_in, shown};

/// compile -> prefill -> handoff -> report, the first three cached. compile reads
/// `config.txt` but its output does not depend on it (so a changed config reruns
/// compile and nothing after it: early cutoff); handoff's command has a parameter.
const PLAN: &str = r#"
schema = "orchestrate/plan/v1"
name = "cache-test"
[params]
scale = 1
[steps.compile]
kind = "compile"
cache = true
inputs = ["config.txt"]
shell = "mkdir -p ${work}/model/sub && printf weights > ${work}/model/w.bin && printf cfg > ${work}/model/sub/config.json && chmod +x ${work}/model/w.bin && ln -s w.bin ${work}/model/link"
outputs = ["${work}/model"]
[steps.prefill]
kind = "prefill"
needs = ["compile"]
cache = true
shell = "cat ${work}/model/w.bin ${work}/model/sub/config.json > ${out}/kv.bin"
outputs = ["${out}/kv.bin"]
[steps.handoff]
kind = "handoff"
needs = ["prefill"]
cache = true
shell = "cat ${steps.prefill.out}/kv.bin > ${out}/h.bin; echo ${params.scale} >> ${out}/h.bin"
outputs = ["${out}/h.bin"]
[steps.report]
kind = "command"
needs = ["handoff"]
shell = "cat ${steps.handoff.out}/h.bin"
"#;

struct Case {
    _t: tempfile::TempDir,
    root: PathBuf,
}

impl Case {
    fn new(plan: &str) -> Case {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().to_path_buf();
        std::fs::write(root.join("plan.toml"), plan).unwrap();
        std::fs::write(root.join("config.txt"), "a = 1\n").unwrap();
        Case { _t: t, root }
    }

    fn cache(&self) -> String {
        self.root.join("cache").display().to_string()
    }

    /// A run with this case's cache; its record folder, record and output.
    fn run(&self, extra: &[&str]) -> (PathBuf, serde_json::Value, Output) {
        let cache = self.cache();
        let mut args = vec!["--cache", cache.as_str()];
        args.extend_from_slice(extra);
        let (dir, out) = run_plan_in(
            &self.root,
            &self.root.join("plan.toml"),
            &self.root.join("records"),
            &args,
        );
        assert!(out.status.success(), "run failed: {}", shown(&out));
        let rec = record_json(&dir);
        (dir, rec, out)
    }

    fn orchestrate(&self, args: &[&str]) -> Output {
        cli().args(args).current_dir(&self.root).output().unwrap()
    }
}

fn status(rec: &serde_json::Value, step: &str) -> String {
    record_step(rec, step)["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn cache_of<'a>(rec: &'a serde_json::Value, step: &str) -> &'a serde_json::Value {
    &record_step(rec, step)["cache"]
}

fn sha256_hex(path: &Path) -> String {
    orchestrate::digest::sha256_bytes(&std::fs::read(path).unwrap()).hex()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn editing_only_the_handoff_reruns_only_the_handoff_and_what_follows() {
    let c = Case::new(PLAN);
    let (_, first, _) = c.run(&[]);
    let run1 = first["run_id"].as_str().unwrap().to_string();
    for s in ["compile", "prefill", "handoff"] {
        assert_eq!(status(&first, s), "succeeded");
        assert_eq!(cache_of(&first, s)["status"], "stored", "{s}");
        assert_eq!(
            cache_of(&first, s)["why"][0],
            "no earlier run of this step is in the cache"
        );
    }
    assert!(
        record_step(&first, "report")["cache"].is_null(),
        "an uncached step has no cache facts"
    );

    // The same plan again: every cached step is reused, from run 1, and the record
    // says so and still verifies.
    let (dir2, second, out2) = c.run(&[]);
    for s in ["compile", "prefill", "handoff"] {
        assert_eq!(status(&second, s), "reused", "{s}: {}", shown(&out2));
        let from = &cache_of(&second, s)["reused_from"];
        assert_eq!(from["run_id"], run1.as_str());
        assert_eq!(from["step"], s);
        assert!(record_step(&second, s)["attempts"]
            .as_array()
            .unwrap()
            .is_empty());
        assert_eq!(
            cache_of(&second, s)["key"],
            cache_of(&first, s)["key"],
            "{s}: the key is stable"
        );
        assert_eq!(
            record_step(&second, s)["outputs"][0]["sha256"],
            record_step(&first, s)["outputs"][0]["sha256"]
        );
    }
    assert_eq!(status(&second, "report"), "succeeded");
    assert_eq!(second["status"], "succeeded");
    assert_verifies(&dir2);
    // The restored outputs are where this run's folders say, byte for byte, with the
    // folder's executable bit and link.
    let work2 = c.root.join("work").join(second["run_id"].as_str().unwrap());
    let model = work2.join("model");
    assert_eq!(std::fs::read(model.join("w.bin")).unwrap(), b"weights");
    assert_eq!(
        std::fs::read(model.join("sub/config.json")).unwrap(),
        b"cfg"
    );
    assert_eq!(
        std::fs::read_link(model.join("link")).unwrap(),
        Path::new("w.bin")
    );
    use std::os::unix::fs::PermissionsExt;
    assert_ne!(
        std::fs::metadata(model.join("w.bin"))
            .unwrap()
            .permissions()
            .mode()
            & 0o111,
        0
    );
    let pr = c.orchestrate(&["report", dir2.to_str().unwrap()]);
    let pr = stdout(&pr);
    assert!(
        pr.contains(&format!("`compile`: reused from run {run1}")),
        "{pr}"
    );
    assert!(
        pr.contains(&format!("| reused | 0 | reused from run {run1} |")),
        "{pr}"
    );

    // Only the handoff's command changes: compile and prefill are reused, handoff and
    // the step after it run, and the output says why.
    let (_, third, out3) = c.run(&["--set", "params.scale=2"]);
    assert_eq!(status(&third, "compile"), "reused");
    assert_eq!(status(&third, "prefill"), "reused");
    assert_eq!(status(&third, "handoff"), "succeeded");
    assert_eq!(status(&third, "report"), "succeeded");
    let why = cache_of(&third, "handoff")["why"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(why.len(), 1, "{why:?}");
    let why = why[0].as_str().unwrap();
    assert!(why.starts_with("command changed at argument 2 ("), "{why}");
    assert!(
        why.contains("echo 1 >> ${out}/h.bin` → `") && why.contains("echo 2 >> ${out}/h.bin"),
        "{why}"
    );
    assert!(
        stdout(&out3).contains("  handoff: ran and was stored"),
        "{}",
        shown(&out3)
    );
    assert!(
        stdout(&out3).contains(why),
        "the summary says why: {}",
        shown(&out3)
    );
    // The journal has it too.
    let run3 = third["run_id"].as_str().unwrap();
    let journal =
        std::fs::read_to_string(c.root.join("records").join(run3).join("journal.jsonl")).unwrap();
    assert!(
        journal.contains("command changed at argument 2"),
        "{journal}"
    );
}

#[test]
fn a_changed_input_is_explained_by_digest_and_identical_outputs_cut_off_the_rerun() {
    let c = Case::new(PLAN);
    c.run(&[]);
    let old = sha256_hex(&c.root.join("config.txt"));
    std::fs::write(c.root.join("config.txt"), "a = 2\n").unwrap();
    let new = sha256_hex(&c.root.join("config.txt"));
    // `why` says it before anything runs.
    let w = c.orchestrate(&["why", "plan.toml", "compile", "--cache", &c.cache()]);
    assert!(w.status.success(), "{}", shown(&w));
    let expected = format!(
        "input `config.txt` changed (sha256 {}… → {}…)",
        &old[..12],
        &new[..12]
    );
    assert!(
        stdout(&w).contains(&format!("compile: runs: {expected}; command unchanged")),
        "{}",
        shown(&w)
    );
    let (_, rec, _) = c.run(&[]);
    assert_eq!(status(&rec, "compile"), "succeeded");
    assert_eq!(cache_of(&rec, "compile")["why"][0], expected.as_str());
    assert_eq!(cache_of(&rec, "compile")["why"][1], "command unchanged");
    // compile made the same model: what reads it is reused.
    assert_eq!(status(&rec, "prefill"), "reused");
    assert_eq!(status(&rec, "handoff"), "reused");
    // And `why` over the whole plan now reuses everything.
    let w = c.orchestrate(&["why", "plan.toml", "--cache", &c.cache()]);
    let w = stdout(&w);
    for s in ["compile", "prefill", "handoff"] {
        assert!(w.contains(&format!("{s}: reused from run ")), "{w}");
    }
}

#[test]
fn a_write_through_a_restored_file_never_reaches_a_later_run() {
    let c = Case::new(PLAN);
    c.run(&[]);
    let (_, second, _) = c.run(&[]);
    assert_eq!(status(&second, "compile"), "reused");
    let restore = cache_of(&second, "compile")["restore"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        ["reflink", "copy"].contains(&restore.as_str()),
        "by default a restore shares no inode with the store: {restore}"
    );
    // A user writes through the restored file: same size, other bytes.
    let w = c
        .root
        .join("work")
        .join(second["run_id"].as_str().unwrap())
        .join("model/w.bin");
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(&w, b"WEIGHTS").unwrap();
    let (dir3, third, out3) = c.run(&[]);
    assert_eq!(
        status(&third, "compile"),
        "reused",
        "the store never saw the write: {}",
        shown(&out3)
    );
    let work3 = c.root.join("work").join(third["run_id"].as_str().unwrap());
    assert_eq!(
        std::fs::read(work3.join("model/w.bin")).unwrap(),
        b"weights"
    );
    assert_eq!(status(&third, "prefill"), "reused");
    assert_verifies(&dir3);
    // A blob cut short in the store is found as well.
    let blobs = c.root.join("cache/blobs/sha256");
    let mut cut = 0;
    for d in std::fs::read_dir(&blobs).unwrap().flatten() {
        for b in std::fs::read_dir(d.path()).unwrap().flatten() {
            let p = b.path();
            if std::fs::read(&p).unwrap() == b"weightscfg" {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
                std::fs::write(&p, b"weights").unwrap();
                cut += 1;
            }
        }
    }
    assert_eq!(cut, 1, "prefill's output is one blob");
    let (_, fourth, _) = c.run(&[]);
    assert_eq!(status(&fourth, "prefill"), "succeeded");
    assert!(
        cache_of(&fourth, "prefill")["why"][0]
            .as_str()
            .unwrap()
            .contains("refused"),
        "{}",
        cache_of(&fourth, "prefill")
    );
    // A half-written entry (its entry.json cut) is refused and rebuilt.
    let key = cache_of(&fourth, "handoff")["key"]
        .as_str()
        .unwrap()
        .to_string();
    let entry = c
        .root
        .join("cache/entries")
        .join(&key[..2])
        .join(&key)
        .join("entry.json");
    std::fs::write(&entry, b"{\"key\":").unwrap();
    let (_, fifth, _) = c.run(&[]);
    assert_eq!(status(&fifth, "handoff"), "succeeded");
    let (_, sixth, _) = c.run(&[]);
    assert_eq!(status(&sixth, "handoff"), "reused");
}

#[test]
fn two_runs_filling_one_key_at_once_leave_one_good_entry() {
    let c = Case::new(PLAN);
    let cache = c.cache();
    let spawn = || {
        cli()
            .args([
                "run",
                "plan.toml",
                "--progress",
                "quiet",
                "--records",
                "records",
                "--cache",
                &cache,
            ])
            .current_dir(&c.root)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    for _ in 0..3 {
        let (a, b) = (spawn(), spawn());
        for p in [a, b] {
            let o = p.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", shown(&o));
        }
    }
    let list = c.orchestrate(&["cache", "list", "--json", "--cache", &cache]);
    assert!(list.status.success(), "{}", shown(&list));
    let entries: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let steps: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["step"].as_str().unwrap())
        .collect();
    assert_eq!(steps.len(), 3, "one entry per step: {steps:?}");
    let (_, rec, _) = c.run(&[]);
    for s in ["compile", "prefill", "handoff"] {
        assert_eq!(status(&rec, s), "reused", "{s}");
    }
    assert!(
        !c.root.join("cache/tmp").read_dir().unwrap().any(|_| true),
        "nothing half-written is left"
    );
}

#[test]
fn refresh_runs_a_step_again_and_flags_nondeterministic_output() {
    let plan = r#"
schema = "orchestrate/plan/v1"
name = "nondet"
[steps.stamp]
kind = "compile"
cache = true
shell = "date +%s%N > ${out}/stamp.txt"
outputs = ["${out}/stamp.txt"]
[steps.same]
kind = "compile"
cache = true
shell = "echo same > ${out}/same.txt"
outputs = ["${out}/same.txt"]
"#;
    let c = Case::new(plan);
    c.run(&[]);
    let (_, rec, _) = c.run(&["--no-cache"]);
    assert_eq!(status(&rec, "stamp"), "succeeded", "--no-cache runs it");
    assert_eq!(status(&rec, "same"), "succeeded");
    let (dir, rec, out) = c.run(&["--refresh", "stamp"]);
    assert_eq!(status(&rec, "stamp"), "succeeded");
    assert_eq!(
        status(&rec, "same"),
        "reused",
        "only the refreshed step runs"
    );
    let nd = cache_of(&rec, "stamp")["nondeterministic"]
        .as_array()
        .unwrap();
    assert_eq!(nd.len(), 1, "{}", cache_of(&rec, "stamp"));
    assert!(
        nd[0]
            .as_str()
            .unwrap()
            .starts_with("`${out}/stamp.txt`: sha256 "),
        "{nd:?}"
    );
    assert!(
        stdout(&out).contains("nondeterministic output"),
        "{}",
        shown(&out)
    );
    let pr = stdout(&c.orchestrate(&["report", dir.to_str().unwrap()]));
    assert!(
        pr.contains("`stamp`: **nondeterministic output** `${out}/stamp.txt`"),
        "{pr}"
    );
    let (_, rec, _) = c.run(&["--refresh", "same"]);
    assert!(
        cache_of(&rec, "same")["nondeterministic"].is_null(),
        "the same bytes again are not flagged"
    );
}

#[test]
fn cache_list_du_and_gc_manage_the_store() {
    let c = Case::new(PLAN);
    c.run(&[]);
    let cache = c.cache();
    let list = c.orchestrate(&["cache", "list", "--cache", &cache]);
    let l = stdout(&list);
    assert!(
        l.contains("cache-test: compile") && l.contains("3 entries in"),
        "{}",
        shown(&list)
    );
    let du = c.orchestrate(&["cache", "du", "--cache", &cache]);
    assert!(du.status.success(), "{}", shown(&du));
    assert!(stdout(&du).contains("3 entries"), "{}", shown(&du));
    // Nothing is old enough to go.
    let gc = c.orchestrate(&["cache", "gc", "--older-than", "30d", "--cache", &cache]);
    assert!(gc.status.success(), "{}", shown(&gc));
    assert!(stdout(&c.orchestrate(&["cache", "list", "--cache", &cache])).contains("3 entries in"));
    // Down to nothing: every entry and blob goes, and the next run runs everything.
    let gc = c.orchestrate(&["cache", "gc", "--max-size", "0B", "--cache", &cache]);
    assert!(gc.status.success(), "{}", shown(&gc));
    assert!(stdout(&c.orchestrate(&["cache", "list", "--cache", &cache])).contains("0 entries in"));
    let blobs = walk_files(&c.root.join("cache/blobs"));
    assert_eq!(blobs, 0, "gc removes unreferenced blobs");
    let (_, rec, _) = c.run(&[]);
    assert_eq!(status(&rec, "compile"), "succeeded");
    // Bad sizes and ages are usage errors, not panics.
    for bad in [["--max-size", "lots"], ["--older-than", "-3d"]] {
        let o = c.orchestrate(&["cache", "gc", bad[0], bad[1], "--cache", &cache]);
        assert_eq!(o.status.code(), Some(2), "{}", shown(&o));
    }
}

fn walk_files(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            n += walk_files(&p);
        } else {
            n += 1;
        }
    }
    n
}

#[test]
fn pins_served_from_the_stat_cache_still_catch_a_changed_file() {
    // A file pin whose digest is taken once, trusted the next time, and caught when
    // its bytes change with size and mtime kept.
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    std::fs::write(root.join("weights.bin"), b"0123456789").unwrap();
    let digest = sha256_hex(&root.join("weights.bin"));
    std::fs::write(
        root.join("plan.toml"),
        format!(
            "schema = \"orchestrate/plan/v1\"\nname = \"statpin\"\n[pins.files]\n\"weights.bin\" = \"sha256:{digest}\"\n[steps.a]\nkind = \"command\"\nrun = [\"true\"]\n"
        ),
    )
    .unwrap();
    let cache = root.join("cache");
    let run = |extra: &[&str]| {
        cli()
            .args([
                "run",
                "plan.toml",
                "--progress",
                "quiet",
                "--records",
                "records",
                "-v",
            ])
            .arg("--cache")
            .arg(&cache)
            .args(extra)
            .current_dir(root)
            .output()
            .unwrap()
    };
    // Past the racy window, so the next digest is trusted.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let o = run(&[]);
    assert!(o.status.success(), "{}", shown(&o));
    let o = run(&[]);
    assert!(o.status.success(), "{}", shown(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    // The pinned file and the orchestrator's own binary, neither read again.
    assert!(
        err.contains("pins: 2 file digests from the stat cache, 0 hashed"),
        "{}",
        shown(&o)
    );
    // Rewrite it in place, same size, and set its mtime back.
    let p = root.join("weights.bin");
    let before = std::fs::metadata(&p).unwrap();
    std::fs::write(&p, b"9876543210").unwrap();
    let times = [
        libc::timespec {
            tv_sec: before_atime(&before),
            tv_nsec: 0,
        },
        libc::timespec {
            tv_sec: before_mtime(&before).0,
            tv_nsec: before_mtime(&before).1,
        },
    ];
    use std::os::unix::ffi::OsStrExt;
    let cp = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid path and two timespecs.
    assert_eq!(
        unsafe { libc::utimensat(libc::AT_FDCWD, cp.as_ptr(), times.as_ptr(), 0) },
        0
    );
    let o = run(&[]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "the changed pin refuses the run: {}",
        shown(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("weights.bin"),
        "{}",
        shown(&o)
    );
}

fn before_atime(m: &std::fs::Metadata) -> libc::time_t {
    use std::os::unix::fs::MetadataExt;
    m.atime() as libc::time_t
}

fn before_mtime(m: &std::fs::Metadata) -> (libc::time_t, libc::c_long) {
    use std::os::unix::fs::MetadataExt;
    (m.mtime() as libc::time_t, m.mtime_nsec() as libc::c_long)
}

/// A plan run three ways, as a user would (a plain terminal; tmux with a virtualenv's
/// folder on `PATH`; a second copy of the same binaries), reuses every cached step;
/// what can change a result (the program's bytes, a declared input, an
/// `LD_LIBRARY_PATH` folder) still misses, each said in one line.
#[test]
fn a_new_terminal_a_longer_path_or_another_copy_of_the_binaries_reuses_everything() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    std::fs::write(root.join("input.txt"), "one\n").unwrap();
    std::fs::write(
        root.join("plan.toml"),
        r#"
schema = "orchestrate/plan/v1"
name = "env-rule"
[steps.tool]
kind = "compile"
cache = true
run = ["kvsim", "compile", "--out", "${work}/model", "--layers", "1", "--heads", "2",
       "--kv-heads", "1", "--head-dim", "4", "--hidden", "8", "--ffn", "8", "--vocab", "16"]
outputs = ["${work}/model"]
[steps.script]
cache = true
inputs = ["input.txt", "cat"]
shell = "cat input.txt > ${out}/copy.txt"
outputs = ["${out}/copy.txt"]
"#,
    )
    .unwrap();
    // A second copy of the orchestrator and its workload, as a second checkout or
    // `cargo install` would leave them.
    let copy = root.join("elsewhere");
    std::fs::create_dir(&copy).unwrap();
    for b in [crate::support::bin(), crate::support::kvsim_bin()] {
        let to = copy.join(Path::new(b).file_name().unwrap());
        std::fs::copy(b, &to).unwrap();
    }
    let venv = root.join("venv/bin");
    std::fs::create_dir_all(&venv).unwrap();
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    let run = |bin: &Path, term: &str, path: &str, ld: Option<&str>| -> serde_json::Value {
        let _host = crate::support::host_shared();
        let mut c = std::process::Command::new(bin);
        c.args([
            "run",
            "plan.toml",
            "--progress",
            "quiet",
            "--records",
            "records",
        ])
        .arg("--cache")
        .arg(root.join("cache"))
        .current_dir(root)
        .env("TERM", term)
        .env("PATH", path)
        .env_remove("TMUX")
        .env_remove("LD_LIBRARY_PATH");
        if term == "screen" {
            c.env("TMUX", "/tmp/tmux-0/default,1234,0");
        }
        if let Some(ld) = ld {
            c.env("LD_LIBRARY_PATH", ld);
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", shown(&out));
        let dir = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_string();
        record_json(Path::new(&dir))
    };
    let status = |rec: &serde_json::Value, id: &str| record_step(rec, id)["status"].clone();
    let why = |rec: &serde_json::Value, id: &str| {
        record_step(rec, id)["cache"]["why"]
            .as_array()
            .map(|w| {
                w.iter()
                    .filter_map(|l| l.as_str().map(String::from))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let here = Path::new(crate::support::bin());
    let first = run(here, "xterm", &path, None);
    assert_eq!(status(&first, "tool"), "succeeded");
    let longer = format!("{}:{path}", venv.display());
    let tmux = run(here, "screen", &longer, None);
    let moved = run(&copy.join("orchestrate"), "xterm", &path, None);
    for (how, rec) in [("tmux and a longer PATH", &tmux), ("another copy", &moved)] {
        for id in ["tool", "script"] {
            assert_eq!(status(rec, id), "reused", "{how}: {id} {:?}", why(rec, id));
        }
    }

    // What must miss still does, and says what changed on one line.
    let ld = run(here, "xterm", &path, Some("/opt/sdk/lib"));
    for id in ["tool", "script"] {
        assert_eq!(status(&ld, id), "succeeded", "{id}");
        assert!(
            why(&ld, id)
                .iter()
                .any(|w| w == "environment variable `LD_LIBRARY_PATH` is new"),
            "{:?}",
            why(&ld, id)
        );
    }
    let ld2 = run(here, "xterm", &path, Some("/opt/sdk/lib:/opt/extra/lib"));
    assert!(
        why(&ld2, "script")
            .iter()
            .any(|w| w == "environment variable `LD_LIBRARY_PATH`: added /opt/extra/lib at 1"),
        "{:?}",
        why(&ld2, "script")
    );
    std::fs::write(root.join("input.txt"), "two\n").unwrap();
    let input = run(here, "xterm", &path, Some("/opt/sdk/lib:/opt/extra/lib"));
    assert_eq!(status(&input, "tool"), "reused");
    assert_eq!(status(&input, "script"), "succeeded");
    assert!(
        why(&input, "script")[0].starts_with("input `input.txt` changed"),
        "{:?}",
        why(&input, "script")
    );
    // The copy's workload rebuilt (one more byte): the program's digest changed.
    let kv = copy.join("kvsim");
    let mut bytes = std::fs::read(&kv).unwrap();
    bytes.push(0);
    std::fs::write(&kv, bytes).unwrap();
    let rebuilt = run(
        &copy.join("orchestrate"),
        "xterm",
        &path,
        Some("/opt/sdk/lib:/opt/extra/lib"),
    );
    assert_eq!(status(&rebuilt, "tool"), "succeeded");
    assert!(
        why(&rebuilt, "tool")[0].starts_with("program `kvsim` changed"),
        "{:?}",
        why(&rebuilt, "tool")
    );
    assert_eq!(status(&rebuilt, "script"), "reused");
}
