//! cgroup v1: one hierarchy per controller (some co-mounted, like `cpu,cpuacct`), the
//! attempt a directory in each. Joined through `tasks`, limits through
//! `memory.limit_in_bytes` then `memory.memsw.limit_in_bytes` (swap off), devices
//! through the devices controller, killed through the freezer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{
    device_rule, keyed, probe, tree, AttemptCgroups, CgroupVersion, Measures, HARMLESS_DEVICES,
};
use crate::isolate::cgfs::CgroupFs;
use crate::isolate::layout::CgroupLayout;
use crate::isolate::types::{AttemptSpec, Enforcement, IsolateError};

/// v1 controllers attempts always use when mounted (cpuset and devices on demand).
const V1_ALWAYS: &[&str] = &["memory", "pids", "cpuacct", "freezer"];
pub(super) const V1_REQUIRED: &[&str] = &["memory", "pids"];

#[derive(Debug, Clone)]
pub(crate) struct V1 {
    /// controller -> our cgroup dir in its hierarchy.
    dirs: BTreeMap<String, PathBuf>,
    swap_accounting: bool,
}

/// Check the hierarchies, probe that we may create cgroups in each, and note what
/// cannot be enforced.
///
/// `delegated`: `layout` is a parent an administrator made for us in each hierarchy;
/// a hierarchy where it was not made is left out (memory and pids must be there).
pub(super) fn setup(
    fs: &dyn CgroupFs,
    layout: &CgroupLayout,
    delegated: bool,
    notes: &mut Vec<String>,
) -> Result<V1, String> {
    for c in V1_REQUIRED {
        if !layout.v1.contains_key(*c) {
            return Err(format!(
                "controller missing: no cgroup v1 {c} hierarchy is mounted"
            ));
        }
    }
    let mut dirs = BTreeMap::new();
    for c in V1_ALWAYS.iter().chain(["cpuset", "devices"].iter()) {
        match layout.v1.get(*c) {
            Some(d) if delegated && !fs.exists(&d.join("tasks")) => {
                if V1_REQUIRED.contains(c) {
                    return Err(format!(
                        "cgroup parent {} does not exist in the {c} hierarchy (an \
                         administrator creates it and gives it to you: docs/hosts.md, \
                         \"A delegated parent\")",
                        d.display()
                    ));
                }
                notes.push(format!(
                    "cgroup v1 {c}: the delegated parent {} does not exist, so {c} is not used",
                    d.display()
                ));
            }
            Some(d) => {
                dirs.insert(c.to_string(), d.clone());
            }
            None => notes.push(format!("cgroup v1 {c} hierarchy not mounted")),
        }
    }
    let mut probed: Vec<&PathBuf> = Vec::new();
    for d in dirs.values() {
        if !probed.contains(&d) {
            probe(fs, d, delegated)?;
            probed.push(d);
        }
    }
    let swap_accounting = dirs
        .get("memory")
        .is_some_and(|d| fs.exists(&d.join("memory.memsw.limit_in_bytes")));
    if !swap_accounting {
        notes.push("no swap accounting (memory.memsw.* missing): swap cannot be limited".into());
    }
    if !dirs.contains_key("freezer") {
        notes.push("no freezer: the tree is killed by repeated SIGKILL of cgroup.procs".into());
    }
    Ok(V1 {
        dirs,
        swap_accounting,
    })
}

impl CgroupVersion for V1 {
    fn version(&self) -> u8 {
        1
    }

    fn parents(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.dirs.values().cloned().collect();
        v.sort();
        v.dedup();
        v
    }

    fn controllers(&self) -> Vec<String> {
        self.dirs.keys().cloned().collect()
    }

    fn placements(&self, name: &str, spec: Option<&AttemptSpec>) -> Vec<(String, PathBuf)> {
        let wanted = |c: &str| match (c, spec) {
            ("cpuset", Some(s)) => s.cpus.is_some(),
            ("devices", Some(s)) => s.device_nodes.is_some(),
            _ => true,
        };
        self.dirs
            .iter()
            .filter(|(c, _)| wanted(c))
            .map(|(c, p)| (c.clone(), p.join(name)))
            .collect()
    }

    /// The cloned child is one thread, so moving the thread moves the process, and
    /// a "0" written to `tasks` moves only the writer, which lets the kernel skip the
    /// global threadgroup lock (a percpu rwsem taken for writing, an RCU grace
    /// period) that every `cgroup.procs` write takes. That was about 0.45 ms of each
    /// attempt here.
    fn join_file(&self) -> &'static str {
        "tasks"
    }

    fn configure(
        &self,
        g: &AttemptCgroups,
        spec: &AttemptSpec,
        enf: &mut Enforcement,
    ) -> Result<(), IsolateError> {
        if let Some(m) = spec.memory {
            enf.memory = g.write("memory", "memory.limit_in_bytes", &m.to_string())?;
            // memsw must not go below the memory limit: write it after.
            if !spec.swap && self.swap_accounting {
                enf.swap_off = g.write("memory", "memory.memsw.limit_in_bytes", &m.to_string())?;
            } else if !spec.swap {
                enf.notes
                    .push("swap not limited: no swap accounting".into());
            }
        }
        if let Some(p) = spec.pids {
            enf.pids = g.write("pids", "pids.max", &p.to_string())?;
        }
        if let Some(cpus) = &spec.cpus {
            if let Some(dir) = g.dir_of("cpuset") {
                // A new v1 cpuset has no mems: joining it would fail with ENOSPC.
                if let Some(pm) = dir.parent().map(|p| p.join("cpuset.mems")) {
                    let mems = g.read(&pm)?;
                    g.write("cpuset", "cpuset.mems", mems.trim())?;
                }
                enf.cpus = g.write("cpuset", "cpuset.cpus", cpus)?;
            } else {
                enf.notes
                    .push(format!("cpus {cpus} not enforced: no cpuset hierarchy"));
            }
        }
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if let Some(nodes) = &spec.device_nodes {
            if !root {
                enf.notes.push(
                    "device access not restricted: writing devices.deny needs root \
                     (CAP_SYS_ADMIN)"
                        .into(),
                );
            } else if g.dir_of("devices").is_some() {
                g.write("devices", "devices.deny", "a")?;
                for node in HARMLESS_DEVICES {
                    if let Some(rule) = device_rule(Path::new(node)) {
                        g.write("devices", "devices.allow", &rule)?;
                    }
                }
                for node in nodes {
                    let rule = device_rule(node).ok_or_else(|| {
                        IsolateError::InvalidSpec(format!(
                            "{} is not a character or block device",
                            node.display()
                        ))
                    })?;
                    g.write("devices", "devices.allow", &rule)?;
                }
                enf.devices = true;
            } else {
                enf.notes
                    .push("device access not restricted: no devices hierarchy".into());
            }
        }
        Ok(())
    }

    /// Thaw frozen descendants (a frozen child makes kills hang), freeze the attempt,
    /// SIGKILL every pid, thaw.
    fn kill_pass(&self, g: &AttemptCgroups, deadline: Instant) {
        let fs = g.fs.as_ref();
        let freezer = g.dir_of("freezer").map(Path::to_path_buf);
        if let Some(fz) = &freezer {
            for t in tree(fs, fz) {
                if &t != fz {
                    let _ = fs.write(&t.join("freezer.state"), "THAWED");
                }
            }
            let _ = fs.write(&fz.join("freezer.state"), "FROZEN");
            while Instant::now() < deadline {
                match fs.read(&fz.join("freezer.state")) {
                    Ok(s) if s.trim() == "FREEZING" => {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    _ => break,
                }
            }
        }
        g.signal_all(libc::SIGKILL);
        if let Some(fz) = &freezer {
            let _ = fs.write(&fz.join("freezer.state"), "THAWED");
        }
    }

    fn measure(&self, g: &AttemptCgroups) -> Measures {
        let read = |c: &str, f: &str| g.read_of(c, f);
        let mut m = Measures::default();
        if let Some(stat) = read("cpuacct", "cpuacct.stat") {
            let tck = clock_ticks();
            let ticks = |k| keyed(&stat, k).map(|t| Duration::from_nanos(t * 1_000_000_000 / tck));
            m.cpu_user = ticks("user");
            m.cpu_system = ticks("system");
        }
        m.peak_memory_bytes = read("memory", "memory.memsw.max_usage_in_bytes")
            .or_else(|| read("memory", "memory.max_usage_in_bytes"))
            .and_then(|t| t.trim().parse().ok());
        m.oom_kills = read("memory", "memory.oom_control").and_then(|t| keyed(&t, "oom_kill"));
        if m.oom_kills.is_none() {
            // Older kernels: no counter; reaching the limit is the best evidence.
            if let (Some(peak), Some(limit)) = (m.peak_memory_bytes, g.memory_limit) {
                m.oom_kills = Some(u64::from(peak >= limit));
            }
        }
        m
    }
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}
