//! Results files cannot turn a verdict (the trust issue, items 3, 18, 19): `gate =
//! "new"` excuses a failure only when every declared results file was read whole and
//! the exit is what failing tests explain, results are read only inside the
//! attempt's folders, and a huge SARIF log costs the orchestrator little memory.

use std::path::{Path, PathBuf};

use crate::support::{cli, git, record_json, record_step, shown};

fn repo(root: &Path) {
    let dir = root.join("repo");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    for n in ["one", "two"] {
        std::fs::write(dir.join("f.txt"), n).unwrap();
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-qm", n]);
    }
}

/// The baseline fails `t::a` (exit 1, complete reports); the implementation runs
/// `implementation`.
fn gated_plan(implementation: &str) -> String {
    format!(
        r#"schema = "orchestrate/plan/v1"
name = "trust-gate"
[revisions]
baseline = {{ repo = "repo", commit = "HEAD~1" }}
implementation = {{ repo = "repo", commit = "HEAD" }}
[steps.suite]
revisions = ["baseline", "implementation"]
results = {{ junit = "${{out}}/junit.xml", sarif = "${{out}}/scan.sarif" }}
gate = "new"
shell = '''
cd "${{out}}"
if [ "${{revision.name}}" = baseline ]; then
  printf '%s' '<testsuites><testsuite name="s"><testcase classname="t" name="a"><failure message="known"/></testcase><testcase classname="t" name="b"/></testsuite></testsuites>' > junit.xml
  printf '%s' '{{"runs":[]}}' > scan.sarif
  exit 1
fi
{implementation}
'''
"#
    )
}

fn run_gated(implementation: &str) -> (serde_json::Value, std::process::Output) {
    let t = tempfile::tempdir().unwrap();
    repo(t.path());
    std::fs::write(t.path().join("plan.toml"), gated_plan(implementation)).unwrap();
    let (dir, out) = crate::support::run_plan_in(
        t.path(),
        &t.path().join("plan.toml"),
        &t.path().join("records"),
        &[],
    );
    (record_json(&dir), out)
}

const SAME_FAILURE: &str = r#"printf '%s' '<testsuites><testsuite name="s"><testcase classname="t" name="a"><failure message="known"/></testcase><testcase classname="t" name="b"/></testsuite></testsuites>' > junit.xml"#;
const CLEAN_SARIF: &str =
    r#"printf '%s' '{"runs":[{"tool":{"driver":{"name":"x"}},"results":[]}]}' > scan.sarif"#;

#[test]
fn gate_new_excuses_a_failure_that_reproduces_on_the_baseline() {
    let (rec, out) = run_gated(&format!("{SAME_FAILURE}\n{CLEAN_SARIF}\nexit 1"));
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert_eq!(rec["status"], "succeeded");
    assert!(rec["reason"]
        .as_str()
        .unwrap()
        .contains("nothing new fails against the baseline"));
}

#[test]
fn gate_new_does_not_excuse_a_crash_with_a_clean_sarif_and_no_junit() {
    let (rec, out) = run_gated(&format!("{CLEAN_SARIF}\nexit 139"));
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert_eq!(rec["status"], "failed");
}

#[test]
fn gate_new_does_not_excuse_a_truncated_junit_file() {
    let cut = r#"printf '%s' '<testsuites><testsuite name="s"><testcase classname="t" name="a"><failure message="known"/></testcase>' > junit.xml"#;
    let (rec, out) = run_gated(&format!("{cut}\n{CLEAN_SARIF}\nexit 1"));
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    let cell = record_step(&rec, "suite[revision=implementation]");
    let err = cell["attempts"][0]["results"]["junit"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(err.contains("incomplete"), "{err}");
}

#[test]
fn gate_new_does_not_excuse_exit_1_with_an_all_passing_junit_report() {
    let pass = r#"printf '%s' '<testsuites><testsuite name="s"><testcase classname="t" name="a"/><testcase classname="t" name="b"/></testsuite></testsuites>' > junit.xml"#;
    let (rec, out) = run_gated(&format!("{pass}\n{CLEAN_SARIF}\nexit 1"));
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert_eq!(rec["status"], "failed");
}

#[test]
fn results_files_outside_the_attempts_folders_are_not_read() {
    let t = tempfile::tempdir().unwrap();
    let outside = t.path().join("secret.xml");
    std::fs::write(
        &outside,
        "<testsuites><testsuite name=\"s\"><testcase classname=\"t\" name=\"private\"/></testsuite></testsuites>",
    )
    .unwrap();
    let mut files = vec![outside.display().to_string()];
    if Path::new("/etc/shadow").exists() {
        files.push("/etc/shadow".into());
    }
    for f in files {
        std::fs::write(
            t.path().join("plan.toml"),
            format!(
                "schema = \"orchestrate/plan/v1\"\nname = \"trust-results\"\n[steps.s]\nshell = \"true\"\nresults = {{ junit = \"{f}\" }}\n"
            ),
        )
        .unwrap();
        let (dir, out) = crate::support::run_plan_in(
            t.path(),
            &t.path().join("plan.toml"),
            &t.path().join("records"),
            &[],
        );
        let rec = record_json(&dir);
        let j = &record_step(&rec, "s")["attempts"][0]["results"]["junit"];
        assert!(j["sha256"].is_null(), "{f}: no digest of it: {j}");
        assert!(
            j["error"]
                .as_str()
                .unwrap_or_default()
                .contains("outside the attempt's folders"),
            "{f}: {j} {}",
            shown(&out)
        );
        assert!(!std::fs::read_to_string(dir.join("record.json"))
            .unwrap()
            .contains("private"));
    }
}

/// Run `cmd` and its peak resident memory: what the orchestrator itself took,
/// outside any cgroup. Measured from a small python parent, because a child's
/// ru_maxrss starts at the high-water mark of whoever spawned it (the kernel carries
/// it over at exec), and this test binary's own may be far above the limit when other
/// tests run beside it.
fn peak_rss(cmd: &std::process::Command) -> (i32, u64) {
    let mut py = std::process::Command::new("python3");
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => py.env(k, v),
            None => py.env_remove(k),
        };
    }
    let out = py
        .arg("-c")
        .arg(
            "import resource, subprocess, sys\n\
             r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n\
             print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n",
        )
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .current_dir(cmd.get_current_dir().unwrap_or(std::path::Path::new(".")))
        .output()
        .expect("python3 runs");
    let line = String::from_utf8_lossy(&out.stdout);
    let mut it = line.split_whitespace();
    let code: i32 = it
        .next()
        .and_then(|c| c.parse().ok())
        .expect("an exit code");
    let kib: u64 = it.next().and_then(|c| c.parse().ok()).expect("a peak");
    (code, kib * 1024)
}

#[test]
fn a_sarif_log_of_millions_of_results_costs_the_orchestrator_under_256_mb() {
    let t = tempfile::tempdir().unwrap();
    let big: PathBuf = t.path().join("big.sarif");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
        f.write_all(b"{\"version\":\"2.1.0\",\"runs\":[{\"tool\":{\"driver\":{\"name\":\"x\"}},\"results\":[").unwrap();
        let n = 7_400_000;
        for i in 0..n {
            f.write_all(if i + 1 < n {
                b"{\"a\":1},"
            } else {
                b"{\"a\":1}"
            })
            .unwrap();
        }
        f.write_all(b"]}]}").unwrap();
    }
    let size = std::fs::metadata(&big).unwrap().len();
    assert!(size > 55 << 20 && size < 64 << 20, "{size}");
    std::fs::write(
        t.path().join("plan.toml"),
        "schema = \"orchestrate/plan/v1\"\nname = \"trust-sarif\"\n[steps.scan]\nshell = \"cp ${plan_dir}/big.sarif ${out}/scan.sarif\"\nresults = { sarif = \"${out}/scan.sarif\" }\n",
    )
    .unwrap();
    let _host = crate::support::host_shared();
    let (code, rss) = peak_rss(
        cli()
            .arg("run")
            .arg(t.path().join("plan.toml"))
            .arg("--records")
            .arg(t.path().join("records"))
            .args(["--progress", "quiet"])
            .current_dir(t.path()),
    );
    assert_eq!(code, 0);
    let dirs = crate::support::record_dirs(&t.path().join("records"));
    let rec = record_json(&dirs[0]);
    let sarif = &record_step(&rec, "scan")["attempts"][0]["results"]["sarif"];
    assert_eq!(sarif["count"], 7_400_000, "every result counted");
    let kept = sarif["findings"].as_array().unwrap().len() as u64;
    assert!(kept > 10_000 && kept < 100_000, "kept {kept}");
    assert_eq!(kept + sarif["left_out"].as_u64().unwrap(), 7_400_000);
    assert!(sarif["sha256"].is_string());
    assert!(
        rss < 256 << 20,
        "the orchestrator peaked at {} MB",
        rss >> 20
    );
    eprintln!("orchestrator peak RSS: {} MB", rss >> 20);
}

/// A SARIF log of `n` findings, each with a message of `len` characters.
fn long_findings(path: &Path, n: usize, len: usize) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(
        b"{\"version\":\"2.1.0\",\"runs\":[{\"tool\":{\"driver\":{\"name\":\"x\"}},\"results\":[",
    )
    .unwrap();
    let text = "m".repeat(len);
    for i in 0..n {
        let sep = if i + 1 < n { "," } else { "" };
        write!(
            f,
            "{{\"ruleId\":\"R{}\",\"level\":\"warning\",\"message\":{{\"text\":\"{i} {text}\"}},\"locations\":[{{\"physicalLocation\":{{\"artifactLocation\":{{\"uri\":\"src/f{i}.py\"}},\"region\":{{\"startLine\":{i}}}}}}}]}}{sep}",
            i % 50
        )
        .unwrap();
    }
    f.write_all(b"]}]}").unwrap();
}

#[test]
fn findings_beyond_a_bound_stay_out_of_the_record_and_every_reader_stays_small() {
    let t = tempfile::tempdir().unwrap();
    let big = t.path().join("big.sarif");
    long_findings(&big, 100_000, 440);
    let size = std::fs::metadata(&big).unwrap().len();
    assert!(size > 55 << 20 && size < 64 << 20, "{size}");
    // Four cells, each reading the whole log: the record holds four bounded lists.
    std::fs::write(
        t.path().join("plan.toml"),
        "schema = \"orchestrate/plan/v1\"\nname = \"trust-sarif-long\"\n[matrix]\ncell = [\"a\", \"b\", \"c\", \"d\"]\n[steps.scan]\nshell = \"echo ${matrix.cell}; ln ${plan_dir}/big.sarif ${out}/scan.sarif 2>/dev/null || cp ${plan_dir}/big.sarif ${out}/scan.sarif\"\nresults = { sarif = \"${out}/scan.sarif\" }\n",
    )
    .unwrap();
    let _host = crate::support::host_shared();
    let records = t.path().join("records");
    let cmd = |args: &[&str]| {
        let mut c = cli();
        c.args(args).current_dir(t.path());
        c
    };
    let (code, run_rss) = peak_rss(&cmd(&[
        "run",
        "plan.toml",
        "--records",
        "records",
        "--progress",
        "quiet",
    ]));
    assert_eq!(code, 0);
    let dirs = crate::support::record_dirs(&records);
    let dir = dirs[0].clone();
    let record_bytes = std::fs::metadata(dir.join("record.json")).unwrap().len();
    let rec = record_json(&dir);
    let steps = rec["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4);
    for s in steps {
        let sarif = &s["attempts"][0]["results"]["sarif"];
        assert_eq!(sarif["count"], 100_000, "every finding counted");
        let kept = sarif["findings"].as_array().unwrap().len() as u64;
        assert!(kept > 1000 && kept < 100_000, "kept {kept}");
        assert_eq!(kept + sarif["left_out"].as_u64().unwrap(), 100_000);
        // The whole log is kept beside the attempt's logs, byte for byte.
        let copy = dir.join(sarif["kept"].as_str().expect("the whole file kept"));
        assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&big).unwrap());
    }
    assert!(
        record_bytes < 32 << 20,
        "record.json holds {record_bytes} bytes"
    );
    let dir_s = dir.display().to_string();
    let (vcode, verify_rss) = peak_rss(&cmd(&["verify", &dir_s]));
    assert_eq!(vcode, 0, "verify accepts the record");
    let (rcode, runs_rss) = peak_rss(&cmd(&["runs", "--records", "records"]));
    assert_eq!(rcode, 0);
    git(t.path(), &["init", "-q"]);
    let (scode, site_rss) = peak_rss(&cmd(&["site", "--records", "records", "-o", "site"]));
    assert_eq!(scode, 0);
    eprintln!(
        "record.json {} MB; peak RSS: run {} MB, verify {} MB, runs {} MB, site {} MB",
        record_bytes >> 20,
        run_rss >> 20,
        verify_rss >> 20,
        runs_rss >> 20,
        site_rss >> 20
    );
    for (what, rss) in [
        ("run", run_rss),
        ("verify", verify_rss),
        ("runs", runs_rss),
        ("site", site_rss),
    ] {
        assert!(rss < 256 << 20, "{what} peaked at {} MB", rss >> 20);
    }
}
