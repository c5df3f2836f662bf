//! What the integration tests share: the binaries, the project's files, the
//! skip-or-fail rule for tests that need root, cgroups or outside tools, a serial
//! guard, and runs of real plans through the real binary.
//!
//! `tests/it/` is one test crate (one link on 2 cores instead of one per file); the
//! isolate tests that count the processes of the test binary stay in binaries of
//! their own and include this module by path.

#![allow(dead_code)]

pub mod browser;
pub mod history;
pub mod textkit;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// The `orchestrate` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_orchestrate")
}

/// A command for the binary under test with a cache folder of its own
/// (`ORCHESTRATE_CACHE`): every run starts with an empty step cache, as a test
/// expects, unless it passes `--cache DIR`. The folders live under the target's
/// temporary folder, one per test process; those of dead processes are removed.
pub fn cli() -> Command {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    static SWEPT: std::sync::Once = std::sync::Once::new();
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("orchestrate-caches");
    SWEPT.call_once(|| {
        for e in std::fs::read_dir(&base).into_iter().flatten().flatten() {
            let pid = e.file_name().to_string_lossy().parse::<i32>().ok();
            if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    });
    let dir = base
        .join(std::process::id().to_string())
        .join(N.fetch_add(1, Ordering::Relaxed).to_string());
    let mut c = Command::new(bin());
    c.env("ORCHESTRATE_CACHE", dir);
    if let Some(pool) = std::env::var_os("ORCHESTRATE_TEST_SCOPES") {
        in_scope_of(&mut c, Path::new(&pool));
    }
    c
}

/// Start the command in a cgroup of its own below `pool`, a cgroup delegated to the
/// test's user that holds no process: what `systemd-run --user --scope -p
/// Delegate=yes` gives each command on a systemd host (the cgroup v2 guest of
/// `.ci/v2guest` has no systemd). Empty scopes of earlier commands are removed.
fn in_scope_of(c: &mut Command, pool: &Path) {
    use std::io::Write;
    use std::os::unix::process::CommandExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    for e in std::fs::read_dir(pool).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with("scope-") {
            let _ = std::fs::remove_dir(e.path());
        }
    }
    let scope = pool.join(format!(
        "scope-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&scope).unwrap_or_else(|e| panic!("{}: {e}", scope.display()));
    let procs = std::fs::OpenOptions::new()
        .write(true)
        .open(scope.join("cgroup.procs"))
        .unwrap_or_else(|e| panic!("{}: {e}", scope.display()));
    // SAFETY: the hook only calls write(2) on a descriptor opened before the fork.
    unsafe {
        c.pre_exec(move || {
            let mut f = &procs;
            f.write_all(b"0")
        });
    }
}

/// The `kvsim` reference workload binary.
pub fn kvsim_bin() -> &'static str {
    env!("CARGO_BIN_EXE_kvsim")
}

/// A path in the project (plans, schemas, fixtures, records).
pub fn project(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A file of `tests/fixtures`, read as text.
pub fn fixture_text(rel: &str) -> String {
    let p = project("tests/fixtures").join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("fixture {}: {e}", p.display()))
}

/// What `ORCHESTRATE_REQUIRE_<what>=1` (set by `.ci/run`) makes mandatory.
#[derive(Debug, Clone, Copy)]
pub enum Need {
    /// Root and usable cgroups (and what needs root: tmpfs mounts, other uids).
    Cgroups,
    /// python3 with numpy.
    Numpy,
    /// Chromium.
    Browser,
    /// node and openssl.
    Tools,
    /// python3 with pytest and scipy, and ruff.
    PyTools,
    /// The long load campaign (about a minute).
    Load,
    /// A Slurm cluster this host can submit to (`.ci/slurm start`).
    Slurm,
    /// python3 with torch, transformers, safetensors and numpy (in the folder
    /// `ORCHESTRATE_TORCH_BIN` names, else on `PATH`).
    Torch,
    /// moto's S3 server (`moto_server` on `PATH`, from PyPI's `moto[server]`).
    S3,
}

impl Need {
    fn var(self) -> &'static str {
        match self {
            Need::Cgroups => "ORCHESTRATE_REQUIRE_CGROUPS",
            Need::Numpy => "ORCHESTRATE_REQUIRE_NUMPY",
            Need::Browser => "ORCHESTRATE_REQUIRE_BROWSER",
            Need::Tools => "ORCHESTRATE_REQUIRE_TOOLS",
            Need::PyTools => "ORCHESTRATE_REQUIRE_PYTOOLS",
            Need::Load => "ORCHESTRATE_LOAD",
            Need::Slurm => "ORCHESTRATE_REQUIRE_SLURM",
            Need::Torch => "ORCHESTRATE_REQUIRE_TORCH",
            Need::S3 => "ORCHESTRATE_REQUIRE_S3",
        }
    }

    /// Whether CI made this mandatory.
    pub fn required(self) -> bool {
        std::env::var(self.var()).as_deref() == Ok("1")
    }
}

/// A test that cannot run here: fails when `need` is required, else says why it
/// skips. Returns so the caller can `return` right after.
pub fn skip_or_fail(need: Need, why: &str) {
    assert!(!need.required(), "{}=1 but {why}", need.var());
    eprintln!("skipping: {why}");
}

/// Whether we run as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Tests of one module that must not overlap (they share host state, such as the
/// default lease folder or the cgroup tree).
pub fn serial(lock: &'static Mutex<()>) -> MutexGuard<'static, ()> {
    lock.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs on this host share its cgroup tree, canary processes and run registry, and
/// every run starting sweeps what dead runs left. Tests that start runs hold this
/// shared; tests that kill an orchestrator and inspect what it left hold it alone.
static HOST: RwLock<()> = RwLock::new(());

/// Held while a test starts ordinary runs.
pub fn host_shared() -> RwLockReadGuard<'static, ()> {
    HOST.read().unwrap_or_else(|e| e.into_inner())
}

/// Held by a test that leaves a dead run on purpose and inspects it.
pub fn host_exclusive() -> RwLockWriteGuard<'static, ()> {
    HOST.write().unwrap_or_else(|e| e.into_inner())
}

/// Poll `cond` until it gives a value, failing after `limit`.
pub fn wait_for<T>(what: &str, limit: Duration, mut cond: impl FnMut() -> Option<T>) -> T {
    let limit = patient(limit);
    let start = Instant::now();
    loop {
        if let Some(v) = cond() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A wait bound stretched by `ORCHESTRATE_TEST_PATIENCE` (a factor, default 1): the
/// cgroup v2 guest of `.ci/v2guest` emulates its CPU and runs about ten times slower.
/// Only waits for something to happen are stretched, never a bound a test proves.
pub fn patient(limit: Duration) -> Duration {
    let factor = std::env::var("ORCHESTRATE_TEST_PATIENCE")
        .ok()
        .and_then(|f| f.parse::<u32>().ok())
        .filter(|f| (1..=100).contains(f))
        .unwrap_or(1);
    limit * factor
}

/// Record folders below `records` that hold a `record.json`, sorted (oldest first).
pub fn record_dirs(records: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(records)
        .map(|r| {
            r.flatten()
                .map(|e| e.path())
                .filter(|p| p.join("record.json").is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `record.json` of a record folder, as JSON.
pub fn record_json(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("record.json")).unwrap()).unwrap()
}

/// `record.json` of a record folder, read as the record's own types: what any
/// reader of the record (a report, `verify`, another tool through the schema) sees.
/// Tests that are about the JSON itself (its field names, its bytes) use
/// [`record_json`].
pub fn record(dir: &Path) -> orchestrate::evidence::record::Record {
    let bytes = std::fs::read(dir.join("record.json")).unwrap();
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{} is not a record: {e}", dir.display()))
}

/// The typed record's entry for step `id`.
pub fn step<'a>(
    rec: &'a orchestrate::evidence::record::Record,
    id: &str,
) -> &'a orchestrate::evidence::record::StepRecord {
    rec.steps
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("no step {id} in the record"))
}

/// The output of a command, with both streams, for assertion messages.
pub fn shown(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Run `plan` through the binary with records in `<root>/records` and the working
/// folder `root`; asserts success and returns the run's record folder.
pub fn run_plan_ok(root: &Path, plan: &Path, extra: &[&str]) -> PathBuf {
    let _host = host_shared();
    let before = record_dirs(&root.join("records"));
    let out = cli()
        .arg("run")
        .arg(plan)
        .arg("--records")
        .arg(root.join("records"))
        .arg("--progress")
        .arg("quiet")
        .args(extra)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "run failed: {}", shown(&out));
    let mut after = record_dirs(&root.join("records"));
    after.retain(|d| !before.contains(d));
    assert_eq!(after.len(), 1, "one new record folder expected: {after:?}");
    after.remove(0)
}

/// Run `plans/smoke.toml` into `<root>/records`; the record folder.
pub fn run_smoke(root: &Path) -> PathBuf {
    run_plan_ok(root, &project("plans/smoke.toml"), &[])
}

/// Run `plan` from `cwd` with records in `records` (`--keep-going`, quiet), whatever
/// its outcome; the new record folder and the command's output.
pub fn run_plan_in(cwd: &Path, plan: &Path, records: &Path, extra: &[&str]) -> (PathBuf, Output) {
    let _host = host_shared();
    let before = record_dirs(records);
    let out = cli()
        .arg("run")
        .arg(plan)
        .arg("--records")
        .arg(records)
        .args(["--progress", "quiet", "--keep-going"])
        .args(extra)
        .current_dir(cwd)
        .output()
        .unwrap();
    assert!(out.status.code().is_some(), "{}", shown(&out));
    // Run ids sort by second, then by a random suffix: the new folder is the one
    // that was not there before.
    let mut after = record_dirs(records);
    after.retain(|d| !before.contains(d));
    let dir = after
        .pop()
        .unwrap_or_else(|| panic!("no record: {}", shown(&out)));
    (dir, out)
}

/// The record's entry for step `id`.
pub fn record_step<'a>(rec: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    rec["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["id"] == id))
        .unwrap_or_else(|| panic!("no step {id} in the record"))
}

/// The first attempt of step `id` in a record read as JSON.
pub fn first_attempt<'a>(rec: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    &record_step(rec, id)["attempts"][0]
}

/// `orchestrate verify DIR` passes.
pub fn assert_verifies(dir: &Path) {
    let v = cli().arg("verify").arg(dir).output().unwrap();
    assert!(v.status.success(), "{}", shown(&v));
}

/// Each (plan body after `head`, line, column, message part) is refused with an
/// error there, and every error says how to fix it.
pub fn assert_located(
    head: &str,
    cases: &[(&str, usize, usize, &str)],
    errors: impl Fn(&str) -> orchestrate::plan::PlanErrors,
) {
    let mut failures = Vec::new();
    for (body, line, col, msg) in cases {
        let src = format!("{head}{body}");
        let e = errors(&src);
        let found = e
            .diagnostics()
            .iter()
            .any(|d| d.line == *line && d.column == *col && d.message.contains(msg));
        if !found {
            failures.push(format!("expected {line}:{col} `{msg}` for\n{src}got:\n{e}"));
        }
        for d in e.diagnostics() {
            assert!(!d.help.is_empty(), "every error says how to fix it: {d:?}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n----\n"));
}

/// A git repository a test writes and commits to, one commit at a time.
pub struct GitRepo {
    pub dir: PathBuf,
}

impl GitRepo {
    /// `git init` in `dir` (made first).
    pub fn init(dir: PathBuf) -> GitRepo {
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q"]);
        GitRepo { dir }
    }

    /// Write `rel` (its folders made).
    pub fn write(&self, rel: &str, text: &str) {
        let p = self.dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(p, text).unwrap();
    }

    /// Commit everything; the new commit's sha.
    pub fn commit(&self, msg: &str) -> String {
        git(&self.dir, &["add", "-A"]);
        git(&self.dir, &["commit", "-qm", msg]);
        git(&self.dir, &["rev-parse", "HEAD"])
    }
}

/// Run the real `git` in `dir` with a clean configuration; its stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    String::from_utf8_lossy(&git_bytes(dir, args))
        .trim()
        .to_string()
}

/// The same, its stdout as it came (a binary diff).
pub fn git_bytes(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", shown(&out));
    out.stdout
}

/// Whether `program --version` runs.
pub fn has_program(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A copy of the folder `from` at `to`, every file in it (a record folder moved).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        let t = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

/// Compare a rendered report with its golden in `tests/fixtures/report/`;
/// `UPDATE_GOLDEN=1` writes it instead.
pub fn golden(name: &str, got: &str) {
    let path = project("tests/fixtures/report").join(name);
    if std::env::var("UPDATE_GOLDEN").as_deref() == Ok("1") {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        want == got,
        "{} differs from the rendered output; if the change is intended, regenerate with \
         UPDATE_GOLDEN=1 cargo test --test it report_\n--- rendered ---\n{got}",
        path.display()
    );
}
