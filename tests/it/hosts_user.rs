//! A researcher who is not root, on this cgroup v1 host, as `nobody` (or
//! `ORCHESTRATE_TEST_USER`): with a parent cgroup an administrator delegated
//! (`--cgroup-parent`), every limit holds, figures are measured and `recover` cleans a
//! killed run; without one, `cgroup` refuses naming what to do and `auto` says that
//! limits are not enforced before the first step, atop the summary and the PR body.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::support::{cli, shown, skip_or_fail, Need};

/// The hierarchies an administrator delegates (docs/hosts.md, "A delegated parent").
const HIERARCHIES: &[&str] = &["memory", "pids", "cpuacct", "freezer", "cpuset"];

struct User {
    uid: u32,
    gid: u32,
    /// A folder the user owns: plans, records, work, cache and HOME.
    dir: tempfile::TempDir,
}

/// The user, or why this host cannot run the test (root on cgroup v1 is needed to
/// make the delegated parent).
fn user() -> Option<User> {
    if !crate::support::is_root() {
        skip_or_fail(
            Need::Cgroups,
            "not root: cannot delegate a cgroup to a user",
        );
        return None;
    }
    if !Path::new("/sys/fs/cgroup/memory/tasks").exists()
        || !Path::new("/sys/fs/cgroup/pids/tasks").exists()
    {
        skip_or_fail(Need::Cgroups, "no cgroup v1 memory and pids hierarchies");
        return None;
    }
    let name = std::env::var("ORCHESTRATE_TEST_USER").unwrap_or_else(|_| "nobody".into());
    let u = nix::unistd::User::from_name(&name)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("no user {name} on this host"));
    let dir = tempfile::tempdir().unwrap();
    chown_tree(dir.path(), u.uid.as_raw(), u.gid.as_raw());
    Some(User {
        uid: u.uid.as_raw(),
        gid: u.gid.as_raw(),
        dir,
    })
}

fn chown_tree(p: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap().flatten() {
            chown_tree(&e.path(), uid, gid);
        }
    }
}

impl User {
    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `orchestrate ARGS` as the user, with a HOME, cache and state of their own.
    fn cmd(&self) -> Command {
        let mut c = cli();
        c.uid(self.uid)
            .gid(self.gid)
            .current_dir(self.path())
            .env("HOME", self.path())
            .env("ORCHESTRATE_CACHE", self.path().join("cache"))
            .env("XDG_CACHE_HOME", self.path().join("cache"))
            .env("XDG_RUNTIME_DIR", "")
            .env_remove("ORCHESTRATE_CGROUP_PARENT");
        c
    }

    fn plan(&self, name: &str, body: &str) -> PathBuf {
        let p = self.path().join(name);
        std::fs::write(
            &p,
            format!("schema = \"orchestrate/plan/v1\"\nname = \"{name}\"\n{body}"),
        )
        .unwrap();
        std::os::unix::fs::chown(&p, Some(self.uid), Some(self.gid)).unwrap();
        p
    }

    fn run(&self, plan: &Path, extra: &[&str]) -> Output {
        self.cmd()
            .arg("run")
            .arg(plan)
            .arg("--records")
            .arg(self.path().join("records"))
            .args(["--progress", "plain", "--grace", "1s"])
            .args(extra)
            .output()
            .unwrap()
    }
}

/// A parent cgroup in each hierarchy, given to the user as an administrator would
/// (mkdir, cpuset's cpus and mems copied from above, chown -R); removed on drop.
struct Delegated {
    name: String,
}

impl Delegated {
    /// `tag` keeps two tests of one process off each other's parent.
    fn new(u: &User, tag: &str) -> Delegated {
        let name = format!("orchestrate-test-user-{tag}-{}", std::process::id());
        for h in HIERARCHIES {
            let d = Path::new("/sys/fs/cgroup").join(h).join(&name);
            if !d.parent().is_some_and(|p| p.join("tasks").exists()) {
                continue;
            }
            std::fs::create_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
            if *h == "cpuset" {
                for f in ["cpuset.cpus", "cpuset.mems"] {
                    let v = std::fs::read_to_string(Path::new("/sys/fs/cgroup/cpuset").join(f))
                        .unwrap();
                    std::fs::write(d.join(f), v.trim()).unwrap();
                }
            }
            chown_tree(&d, u.uid, u.gid);
        }
        Delegated { name }
    }

    fn dir(&self, h: &str) -> PathBuf {
        Path::new("/sys/fs/cgroup").join(h).join(&self.name)
    }

    /// Cgroups below the parent, in every hierarchy.
    fn children(&self) -> Vec<PathBuf> {
        HIERARCHIES
            .iter()
            .flat_map(|h| {
                std::fs::read_dir(self.dir(h))
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect()
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        for h in HIERARCHIES {
            let _ = std::fs::remove_dir(self.dir(h));
        }
    }
}

fn record(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("record.json")).unwrap()).unwrap()
}

fn record_dir(u: &User, out: &Output) -> PathBuf {
    let last = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    assert!(
        last.starts_with(u.path().to_str().unwrap()),
        "{}",
        shown(out)
    );
    PathBuf::from(last)
}

use crate::support::first_attempt as attempt;

fn processes_of(run_id: &str) -> Vec<i32> {
    let prefix = format!("{run_id}/");
    orchestrate::isolate::processes_with_canary(&|c| c.starts_with(&prefix))
        .into_iter()
        .map(|(pid, _)| pid)
        .collect()
}

#[test]
fn a_user_with_a_delegated_v1_parent_gets_every_limit_and_recover() {
    let _host = crate::support::host_shared();
    let Some(u) = user() else { return };
    let parent = Delegated::new(&u, "limits");
    let plan = u.plan(
        "limits.toml",
        r#"
[limits]
host_memory = "64MiB"
pids = 24
cpus = "0"
isolation = "cgroup"
[steps.fits]
shell = "head -c 8000000 /dev/zero | tail -c 1 > /dev/null; echo fits"
[steps.hog]
shell = "exec python3 -c 'b = bytearray(400 << 20); print(len(b))'"
[steps.forks]
shell = "for i in $(seq 60); do sleep 3 & done; wait"
[steps.cpus]
shell = "grep Cpus_allowed_list /proc/self/status"
"#,
    );
    let given = format!("/{}", parent.name);
    let out = u.run(&plan, &["--keep-going", "--cgroup-parent", &given]);
    let dir = record_dir(&u, &out);
    let rec = record(&dir);
    let info = &rec["run"]["isolation"]["info"];
    assert_eq!(info["mode"], "cgroup", "{}", shown(&out));
    assert_eq!(info["cgroup_version"], 1);
    assert_eq!(info["cgroup_parent"], given.as_str());
    let parents: Vec<&str> = info["parents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    assert!(
        parents.contains(&parent.dir("memory").to_str().unwrap()),
        "{parents:?}"
    );

    let fits = attempt(&rec, "fits");
    assert_eq!(fits["exit_code"], 0, "{fits}");
    let e = &fits["enforcement"];
    assert_eq!(
        (&e["mode"], &e["memory"], &e["pids"]),
        (&"cgroup".into(), &true.into(), &true.into()),
        "{e}"
    );
    assert!(
        fits["peak_memory_bytes"].as_u64().unwrap_or(0) > 0,
        "{fits}"
    );
    assert!(fits["cpu_user_ms"].is_number(), "{fits}");

    let hog = attempt(&rec, "hog");
    assert_eq!(hog["termination"], "oom_killed", "{hog}");
    assert!(hog["oom_kills"].as_u64().unwrap_or(0) >= 1, "{hog}");
    assert!(hog["peak_memory_bytes"].as_u64().unwrap_or(u64::MAX) <= 64 << 20);

    let forks = attempt(&rec, "forks");
    assert_eq!(forks["pids_limit_hit"], true, "{forks}");

    let cpus = attempt(&rec, "cpus");
    assert_eq!(cpus["enforcement"]["cpus"], true, "{cpus}");
    let said = std::fs::read_to_string(dir.join("steps/cpus/1/stdout.log")).unwrap();
    assert!(said.contains("Cpus_allowed_list:\t0\n"), "{said}");
    assert!(parent.children().is_empty(), "{:?}", parent.children());

    // A killed run: recover, as the user, finds its attempt below the parent the
    // journal names and ends it.
    let plan = u.plan(
        "kill.toml",
        "[limits]\nisolation = \"cgroup\"\n[steps.long]\nshell = \"echo started; sleep 120\"\n",
    );
    let mut child = u
        .cmd()
        .arg("run")
        .arg(&plan)
        .arg("--records")
        .arg(u.path().join("records2"))
        .args(["--progress", "plain", "--cgroup-parent", &given])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let run_id = crate::support::wait_for(
        "the attempt below the parent",
        Duration::from_secs(30),
        || {
            parent
                .children()
                .iter()
                .find_map(|c| {
                    let name = c.file_name()?.to_string_lossy().into_owned();
                    name.strip_prefix("orchestrate-").map(|r| r.to_string())
                })
                .and_then(|name| {
                    let dir = std::fs::read_dir(u.path().join("records2"))
                        .ok()?
                        .flatten()
                        .next()?;
                    let id = dir.file_name().to_string_lossy().into_owned();
                    name.starts_with(&id).then_some(id)
                })
        },
    );
    crate::support::wait_for("the step's process", Duration::from_secs(20), || {
        (!processes_of(&run_id).is_empty()).then_some(())
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !processes_of(&run_id).is_empty(),
        "the attempt outlives its orchestrator"
    );
    let out = u
        .cmd()
        .arg("recover")
        .arg("--records")
        .arg(u.path().join("records2"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    assert!(processes_of(&run_id).is_empty(), "{}", shown(&out));
    assert!(parent.children().is_empty(), "{:?}", parent.children());
}

#[test]
fn a_user_without_a_delegated_parent_is_told_before_anything_runs() {
    let _host = crate::support::host_shared();
    let Some(u) = user() else { return };
    let plan = u.plan(
        "plain.toml",
        "[limits]\nhost_memory = \"64MiB\"\n[steps.a]\nshell = \"echo a\"\n",
    );
    let out = u.run(&plan, &["--isolation", "cgroup"]);
    assert_eq!(out.status.code(), Some(3), "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not root"), "{err}");
    assert!(err.contains("--cgroup-parent"), "{err}");
    assert!(err.contains("docs/hosts.md"), "{err}");
    assert!(
        !u.path().join("records").exists()
            || u.path()
                .join("records")
                .read_dir()
                .unwrap()
                .next()
                .is_none()
    );

    let out = u.run(&plan, &[]);
    assert!(out.status.success(), "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let warned = err.find("limits are not enforced").expect("the warning");
    let started = err.find("start  a").expect("the step");
    assert!(warned < started, "said before the first step:\n{err}");
    let summary = String::from_utf8_lossy(&out.stdout);
    let first = summary.lines().next().unwrap_or_default();
    assert!(first.starts_with("LIMITS NOT ENFORCED: "), "{summary}");
    assert_eq!(
        summary.matches("limits are not enforced").count(),
        1,
        "once, atop the summary:\n{summary}"
    );
    let dir = record_dir(&u, &out);
    let rec = record(&dir);
    assert_eq!(rec["run"]["isolation"]["info"]["mode"], "none");
    assert!(rec["run"]["isolation"]["warnings"][0]
        .as_str()
        .unwrap()
        .contains("limits are not enforced"));
    let body = cli()
        .args(["report", "-t", "pr"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(body.status.success(), "{}", shown(&body));
    let body = String::from_utf8_lossy(&body.stdout);
    let head: Vec<&str> = body.lines().take(3).collect();
    assert!(
        head.iter().any(|l| l.contains("**Limits not enforced:**")),
        "{body}"
    );
}

#[test]
fn root_refuses_a_cgroup_parent_another_user_can_write() {
    let _host = crate::support::host_shared();
    let Some(u) = user() else { return };
    // The user's delegated parent: theirs to freeze, so not root's to run in.
    let parent = Delegated::new(&u, "foreign");
    let t = tempfile::tempdir().unwrap();
    let plan = t.path().join("plan.toml");
    std::fs::write(
        &plan,
        "schema = \"orchestrate/plan/v1\"\nname = \"p\"\n[limits]\nisolation = \"cgroup\"\n[steps.a]\nshell = \"echo a\"\n",
    )
    .unwrap();
    let given = format!("/{}", parent.name);
    let run_under = || {
        cli()
            .arg("run")
            .arg(&plan)
            .arg("--records")
            .arg(t.path().join("records"))
            .args(["--progress", "plain", "--cgroup-parent", &given])
            .output()
            .unwrap()
    };
    let out = run_under();
    assert_eq!(out.status.code(), Some(3), "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cgroup parent refused"), "{err}");
    assert!(err.contains(&format!("owned by uid {}", u.uid)), "{err}");
    assert!(parent.children().is_empty(), "{:?}", parent.children());
    assert!(!t.path().join("records").exists() || record_dirs_empty(&t.path().join("records")));

    // Writable by its group is refused too, though root owns it.
    for h in HIERARCHIES {
        let d = parent.dir(h);
        if d.exists() {
            std::os::unix::fs::chown(&d, Some(0), Some(0)).unwrap();
        }
    }
    let mem = parent.dir("memory");
    std::fs::set_permissions(&mem, std::os::unix::fs::PermissionsExt::from_mode(0o775)).unwrap();
    let out = run_under();
    assert_eq!(out.status.code(), Some(3), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("writable by its group"),
        "{}",
        shown(&out)
    );
}

fn record_dirs_empty(p: &Path) -> bool {
    p.read_dir().map_or(true, |mut d| d.next().is_none())
}
