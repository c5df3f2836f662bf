//! cgroup v2: one unified tree, the attempt one directory below our (delegated)
//! cgroup. Joined through `cgroup.procs`, limits through `memory.max` and
//! `memory.swap.max`, one OOM kill ends the group (`memory.oom.group`), killed with
//! `cgroup.kill`; device access through a cgroup device program (bpf_devices.rs).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bpf_devices::{self, DeviceId};
use super::home::{self, HomeRef};
use super::{keyed, probe, AttemptCgroups, CgroupVersion, Measures, HARMLESS_DEVICES};
use crate::isolate::cgfs::CgroupFs;
use crate::isolate::types::{AttemptSpec, Enforcement, IsolateError};

pub(super) const V2_REQUIRED: &[&str] = &["memory", "pids"];
const V2_OPTIONAL: &[&str] = &["cpu", "cpuset"];

#[derive(Debug, Clone)]
pub(crate) struct V2 {
    parent: PathBuf,
    controllers: Vec<String>,
    /// Held while any isolator of the process uses the home; the last drop restores
    /// the starting cgroup. None for a parent a dead run recorded.
    _home: Option<Arc<HomeRef>>,
}

/// The attempts a dead run left below `parent`, its home, for sweeping.
pub(super) fn recorded(parent: &Path, controllers: Vec<String>) -> V2 {
    V2 {
        parent: parent.to_path_buf(),
        controllers,
        _home: None,
    }
}

/// Find or make a home from our starting cgroup `dir` (home.rs) and check that
/// attempts can be created in it.
pub(super) fn setup(
    fs: &Arc<dyn CgroupFs>,
    dir: &Path,
    parent: Option<&Path>,
    offered: &[&str],
    notes: &mut Vec<String>,
) -> Result<V2, String> {
    let wanted: Vec<&str> = V2_REQUIRED
        .iter()
        .chain(V2_OPTIONAL.iter())
        .copied()
        .filter(|c| offered.contains(c))
        .collect();
    let home = home::acquire(fs, dir, parent, &wanted, notes)?;
    probe(fs.as_ref(), &home.base, true)?;
    Ok(V2 {
        parent: home.base,
        controllers: home.controllers,
        _home: Some(Arc::new(home.held)),
    })
}

impl CgroupVersion for V2 {
    fn version(&self) -> u8 {
        2
    }

    fn parents(&self) -> Vec<PathBuf> {
        vec![self.parent.clone()]
    }

    fn controllers(&self) -> Vec<String> {
        self.controllers.clone()
    }

    fn placements(&self, name: &str, _spec: Option<&AttemptSpec>) -> Vec<(String, PathBuf)> {
        self.controllers
            .iter()
            .map(|c| (c.clone(), self.parent.join(name)))
            .collect()
    }

    fn join_file(&self) -> &'static str {
        "cgroup.procs"
    }

    fn configure(
        &self,
        g: &AttemptCgroups,
        spec: &AttemptSpec,
        enf: &mut Enforcement,
    ) -> Result<(), IsolateError> {
        if let Some(m) = spec.memory {
            enf.memory = g.write("memory", "memory.max", &m.to_string())?;
            if !spec.swap {
                enf.swap_off = g.write("memory", "memory.swap.max", "0")?;
            }
        }
        // One OOM kill ends the whole attempt, not one task of it.
        g.write("memory", "memory.oom.group", "1")?;
        if let Some(p) = spec.pids {
            enf.pids = g.write("pids", "pids.max", &p.to_string())?;
        }
        if let Some(cpus) = &spec.cpus {
            if self.controllers.iter().any(|c| c == "cpuset") {
                enf.cpus = g.write("cpuset", "cpuset.cpus", cpus)?;
            } else {
                enf.notes
                    .push(format!("cpus {cpus} not enforced: no cpuset controller"));
            }
        }
        if let Some(nodes) = &spec.device_nodes {
            let mut allowed: Vec<DeviceId> = HARMLESS_DEVICES
                .iter()
                .filter_map(|n| DeviceId::of(Path::new(n)))
                .collect();
            for node in nodes {
                allowed.push(DeviceId::of(node).ok_or_else(|| {
                    IsolateError::InvalidSpec(format!(
                        "{} is not a character or block device",
                        node.display()
                    ))
                })?);
            }
            let dir = g.dir_of("memory").unwrap_or(&self.parent);
            match bpf_devices::restrict(dir, &allowed) {
                Ok(()) => enf.devices = true,
                Err(e) => {
                    let why = match e.raw_os_error() {
                        Some(libc::EPERM) | Some(libc::EACCES) => {
                            " (loading a cgroup device program needs root: CAP_BPF and \
                             CAP_SYS_ADMIN)"
                        }
                        _ => "",
                    };
                    enf.notes.push(format!(
                        "device access not restricted: the cgroup v2 device program \
                         could not be attached: {e}{why}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// `populated` of `cgroup.events` says at once whether anything lives below.
    fn populated(&self, g: &AttemptCgroups) -> Option<bool> {
        g.read_first("cgroup.events")
            .and_then(|t| keyed(&t, "populated"))
            .map(|p| p > 0)
    }

    /// `cgroup.kill` (5.14+) kills the subtree, frozen cgroups included. Older kernels
    /// get what v1 gets: freeze (nothing forks while the pids are read), SIGKILL every
    /// pid, thaw; on v2 a fatal signal ends a frozen task, so no pass waits on a thaw.
    fn start_kill(&self, g: &AttemptCgroups) {
        if let Some(d) = g.dirs.first() {
            let kill = d.path.join("cgroup.kill");
            if g.fs.exists(&kill) {
                let _ = g.fs.write(&kill, "1");
            }
        }
    }

    fn kill_pass(&self, g: &AttemptCgroups, _deadline: Instant) {
        let Some(d) = g.dirs.first() else { return };
        let freeze = d.path.join("cgroup.freeze");
        let frozen = !g.fs.exists(&d.path.join("cgroup.kill"))
            && g.fs.exists(&freeze)
            && g.fs.write(&freeze, "1").is_ok();
        g.signal_all(libc::SIGKILL);
        if frozen {
            let _ = g.fs.write(&freeze, "0");
        }
    }

    fn memory_now(&self, g: &AttemptCgroups) -> Option<u64> {
        if g.read_of("memory", "memory.peak").is_some() {
            return None;
        }
        g.read_of("memory", "memory.current")
            .and_then(|t| t.trim().parse().ok())
    }

    fn measure(&self, g: &AttemptCgroups) -> Measures {
        let read = |c: &str, f: &str| g.read_of(c, f);
        let mut m = Measures::default();
        if let Some(stat) = read("memory", "cpu.stat").or_else(|| read("pids", "cpu.stat")) {
            let usec = |k| keyed(&stat, k).map(Duration::from_micros);
            m.cpu_user = usec("user_usec");
            m.cpu_system = usec("system_usec");
        }
        m.peak_memory_bytes = read("memory", "memory.peak").and_then(|t| t.trim().parse().ok());
        m.oom_kills = read("memory", "memory.events").and_then(|t| keyed(&t, "oom_kill"));
        m
    }
}
