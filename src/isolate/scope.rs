//! A cgroup of our own from the user's systemd manager, for a user whose starting
//! cgroup cannot delegate (a login session's scope is root's): a transient scope with
//! `Delegate=yes` holding the orchestrator, asked for over D-Bus as
//! `systemd-run --user --scope -p Delegate=yes` does (and BenchExec, podman and crun).
//! The manager moves us in (through the system manager when our starting cgroup is
//! outside its tree) and removes the scope once we exit and it is empty.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use zbus::zvariant::{OwnedObjectPath, Value};

/// What the manager gave: the unit and the cgroup path (from the hierarchy's root)
/// we are in now.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    pub unit: String,
    pub cgroup: String,
}

/// How long the manager may take to start the scope (under emulation, seconds).
const START_BOUND: Duration = Duration::from_secs(30);

/// The session bus when it is the user's own: `DBUS_SESSION_BUS_ADDRESS`, else the
/// socket `$XDG_RUNTIME_DIR/bus` when it is a socket we own (a link or another
/// user's socket is not asked).
fn bus_address() -> Result<String, String> {
    if let Some(a) = std::env::var_os("DBUS_SESSION_BUS_ADDRESS").filter(|a| !a.is_empty()) {
        return a
            .into_string()
            .map_err(|_| "DBUS_SESSION_BUS_ADDRESS is not UTF-8".to_string());
    }
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .ok_or(
            "no user session bus (neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set)",
        )?;
    bus_at(Path::new(&dir))
}

fn bus_at(dir: &Path) -> Result<String, String> {
    let bus = dir.join("bus");
    let meta = std::fs::symlink_metadata(&bus)
        .map_err(|e| format!("no user session bus at {}: {e}", bus.display()))?;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if !meta.file_type().is_socket() || meta.uid() != euid {
        return Err(format!(
            "{} is not a socket owned by uid {euid}; not asked",
            bus.display()
        ));
    }
    let path = bus
        .to_str()
        .ok_or_else(|| format!("{} is not UTF-8", bus.display()))?;
    Ok(format!("unix:path={path}"))
}

/// Ask the user's manager for `orchestrate.run-<pid>.scope` holding this process
/// and wait until we are in it. Runs on a thread of its own: callers may be inside
/// a runtime already.
pub(crate) fn enter() -> Result<Scope, String> {
    let address = bus_address()?;
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("starting a runtime for D-Bus: {e}"))?;
        rt.block_on(async {
            tokio::time::timeout(START_BOUND, start(&address))
                .await
                .map_err(|_| {
                    format!(
                        "the user's systemd manager did not start the scope within {} s",
                        START_BOUND.as_secs()
                    )
                })?
        })
    })
    .join()
    .map_err(|_| "the D-Bus thread panicked".to_string())?
}

async fn start(address: &str) -> Result<Scope, String> {
    let bus_err = |what: &str| {
        let what = what.to_string();
        move |e: zbus::Error| format!("{what}: {e}")
    };
    let conn = zbus::connection::Builder::address(address)
        .map_err(bus_err("the session bus address"))?
        .build()
        .await
        .map_err(bus_err(&format!("connecting to the session bus {address}")))?;
    let manager = zbus::Proxy::new(
        &conn,
        "org.freedesktop.systemd1",
        "/org/freedesktop/systemd1",
        "org.freedesktop.systemd1.Manager",
    )
    .await
    .map_err(bus_err("the user's systemd manager"))?;
    // Subscribed before the call, so that a JobRemoved sent before the reply is seen.
    let mut removed = manager
        .receive_signal("JobRemoved")
        .await
        .map_err(bus_err("subscribing to JobRemoved"))?;
    let _: Result<(), _> = manager.call("Subscribe", &()).await;
    let pid = std::process::id();
    let unit = format!("orchestrate.run-{pid}.scope");
    let props: Vec<(&str, Value)> = vec![
        (
            "Description",
            Value::from("orchestrate: the run's attempts are cgroups below this scope"),
        ),
        ("PIDs", Value::from(vec![pid])),
        ("Delegate", Value::from(true)),
        ("CollectMode", Value::from("inactive-or-failed")),
    ];
    let aux: Vec<(&str, Vec<(&str, Value)>)> = Vec::new();
    let job: OwnedObjectPath = manager
        .call("StartTransientUnit", &(unit.as_str(), "fail", props, aux))
        .await
        .map_err(bus_err(&format!(
            "the user's systemd manager refused StartTransientUnit({unit}, Delegate=yes)"
        )))?;
    while let Some(msg) = removed.next().await {
        let Ok((_, path, _, result)) = msg
            .body()
            .deserialize::<(u32, OwnedObjectPath, String, String)>()
        else {
            continue;
        };
        if path != job {
            continue;
        }
        if result != "done" {
            return Err(format!(
                "the user's systemd manager's job for {unit} ended {result}"
            ));
        }
        let cgroup = own_cgroup().ok_or("cannot read /proc/self/cgroup")?;
        if !cgroup.ends_with(&format!("/{unit}")) {
            return Err(format!(
                "{unit} started, but this process is in {cgroup}, not in it"
            ));
        }
        return Ok(Scope { unit, cgroup });
    }
    Err(format!("the session bus closed before {unit} started"))
}

/// Our cgroup v2 path from its hierarchy's root.
fn own_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

/// Whether this user can delegate from `dir` (it is theirs: they may make cgroups
/// there), so that no scope need be asked for.
pub(crate) fn writable(dir: &Path) -> bool {
    nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_ok()
}

/// What a controller the manager did not delegate means for the limits.
pub(crate) fn missing_means(controller: &str) -> &'static str {
    match controller {
        "memory" => "memory limits, swap off, peak memory and OOM kills are not available",
        "pids" => "the pids limit is not available",
        "cpuset" => {
            "a step's `cpus` is not pinned (an administrator delegates cpuset with a \
             drop-in for user@.service: Delegate=pids memory cpu cpuset)"
        }
        "cpu" => "nothing is lost (CPU time comes from cpu.stat, there without it)",
        _ => "not used",
    }
}

/// The scope's controllers (read in `dir`, our cgroup now), one line saying what
/// each wanted one not delegated means when any is missing, and those lines.
pub(crate) fn delegation(
    dir: Option<&Path>,
    scope: &Scope,
) -> (Vec<String>, Option<String>, Vec<String>) {
    let have: Vec<String> = dir
        .and_then(|d| std::fs::read_to_string(d.join("cgroup.controllers")).ok())
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let missing: Vec<String> = ["memory", "pids", "cpu", "cpuset"]
        .iter()
        .filter(|c| !have.iter().any(|h| h == *c))
        .map(|c| format!("{c}: {}", missing_means(c)))
        .collect();
    let warning = (!missing.is_empty()).then(|| {
        format!(
            "the user's systemd manager delegated [{}] to {}; not delegated: {}",
            have.join(" "),
            scope.unit,
            missing.join("; ")
        )
    });
    (have, warning, missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_socket_of_our_own_is_taken_for_the_bus() {
        let t = tempfile::tempdir().unwrap();
        assert!(bus_at(t.path())
            .unwrap_err()
            .contains("no user session bus"));
        std::fs::write(t.path().join("bus"), "").unwrap();
        assert!(bus_at(t.path()).unwrap_err().contains("not a socket"));
        std::fs::remove_file(t.path().join("bus")).unwrap();
        let real = t.path().join("real");
        let _l = std::os::unix::net::UnixListener::bind(&real).unwrap();
        std::os::unix::fs::symlink(&real, t.path().join("bus")).unwrap();
        assert!(
            bus_at(t.path()).unwrap_err().contains("not a socket"),
            "a link is not followed"
        );
        std::fs::remove_file(t.path().join("bus")).unwrap();
        std::fs::rename(&real, t.path().join("bus")).unwrap();
        let ok = bus_at(t.path()).unwrap();
        assert_eq!(ok, format!("unix:path={}", t.path().join("bus").display()));
    }

    #[test]
    fn what_was_not_delegated_is_named_with_its_meaning() {
        let t = tempfile::tempdir().unwrap();
        let scope = Scope {
            unit: "orchestrate.run-7.scope".into(),
            cgroup: "/user.slice/x".into(),
        };
        std::fs::write(t.path().join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        let (have, warning, missing) = delegation(Some(t.path()), &scope);
        assert_eq!(have, ["cpu", "memory", "pids"]);
        assert_eq!(missing.len(), 1);
        assert!(
            missing[0].starts_with("cpuset: a step's `cpus` is not pinned"),
            "{missing:?}"
        );
        let w = warning.unwrap();
        assert!(
            w.contains("delegated [cpu memory pids] to orchestrate.run-7.scope"),
            "{w}"
        );
        std::fs::write(
            t.path().join("cgroup.controllers"),
            "cpuset cpu memory pids",
        )
        .unwrap();
        let (_, warning, missing) = delegation(Some(t.path()), &scope);
        assert!(warning.is_none() && missing.is_empty());
    }
}
