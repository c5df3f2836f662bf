//! cgroup v2: one unified tree, the attempt one directory below our (delegated)
//! cgroup. Joined through `cgroup.procs`, limits through `memory.max` and
//! `memory.swap.max`, one OOM kill ends the group (`memory.oom.group`), killed with
//! `cgroup.kill`; device access would need an eBPF program and is not restricted.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{keyed, probe, AttemptCgroups, CgroupVersion, Measures, SELF_LEAF};
use crate::isolate::cgfs::CgroupFs;
use crate::isolate::types::{AttemptSpec, Enforcement, IsolateError};

pub(super) const V2_REQUIRED: &[&str] = &["memory", "pids"];
const V2_OPTIONAL: &[&str] = &["cpu", "cpuset"];

#[derive(Debug, Clone)]
pub(crate) struct V2 {
    parent: PathBuf,
    controllers: Vec<String>,
}

/// Enable the controllers attempts need in our cgroup's `subtree_control`, moving
/// ourselves into a leaf first when our cgroup holds only us ("no internal
/// processes").
pub(super) fn setup(
    fs: &dyn CgroupFs,
    dir: &Path,
    offered: &[&str],
    notes: &mut Vec<String>,
) -> Result<V2, String> {
    probe(fs, dir, true)?;
    let wanted: Vec<&str> = V2_REQUIRED
        .iter()
        .chain(V2_OPTIONAL.iter())
        .copied()
        .filter(|c| offered.contains(c))
        .collect();
    let enabled = fs
        .read(&dir.join("cgroup.subtree_control"))
        .map_err(|e| format!("cannot read {}/cgroup.subtree_control: {e}", dir.display()))?;
    let enabled: Vec<&str> = enabled.split_whitespace().collect();
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|c| !enabled.contains(c))
        .collect();
    if !missing.is_empty() {
        let me = std::process::id() as i32;
        let procs: Vec<i32> = fs
            .read(&dir.join("cgroup.procs"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        let others: Vec<i32> = procs.iter().copied().filter(|&p| p != me).collect();
        if !others.is_empty() {
            return Err(format!(
                "no delegation: {} holds other processes ({:?}), so it cannot enable [{}] \
                 for child cgroups; start the orchestrator in a cgroup of its own",
                dir.display(),
                others,
                missing.join(" ")
            ));
        }
        if procs.contains(&me) {
            let leaf = dir.join(SELF_LEAF);
            if !fs.exists(&leaf) {
                fs.mkdir(&leaf)
                    .map_err(|e| format!("not writable: creating {}: {e}", leaf.display()))?;
            }
            fs.write(&leaf.join("cgroup.procs"), &me.to_string())
                .map_err(|e| {
                    format!("no delegation: moving ourselves to {}: {e}", leaf.display())
                })?;
            notes.push(format!(
                "moved the orchestrator into {} so that {} can enable controllers",
                leaf.display(),
                dir.display()
            ));
        }
        let value: Vec<String> = missing.iter().map(|c| format!("+{c}")).collect();
        fs.write(&dir.join("cgroup.subtree_control"), &value.join(" "))
            .map_err(|e| {
                format!(
                    "no delegation: enabling [{}] in {}/cgroup.subtree_control: {e}",
                    missing.join(" "),
                    dir.display()
                )
            })?;
    }
    Ok(V2 {
        parent: dir.to_path_buf(),
        controllers: wanted.iter().map(|c| c.to_string()).collect(),
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
        if spec.device_nodes.is_some() {
            enf.notes
                .push("device access not restricted: cgroup v2 needs an eBPF program".into());
        }
        Ok(())
    }

    /// `populated` of `cgroup.events` says at once whether anything lives below.
    fn populated(&self, g: &AttemptCgroups) -> Option<bool> {
        g.read_first("cgroup.events")
            .and_then(|t| keyed(&t, "populated"))
            .map(|p| p > 0)
    }

    /// `cgroup.kill` (5.14+) kills the subtree, frozen cgroups included; a SIGKILL to
    /// every pid covers older kernels.
    fn start_kill(&self, g: &AttemptCgroups) {
        if let Some(d) = g.dirs.first() {
            let _ = g.fs.write(&d.path.join("cgroup.kill"), "1");
        }
    }

    fn kill_pass(&self, g: &AttemptCgroups, _deadline: Instant) {
        g.signal_all(libc::SIGKILL);
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
