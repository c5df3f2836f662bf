//! Setting up cgroups for attempts (v1 and v2), measuring them, killing everything in
//! them and removing them. All file access goes through [`CgroupFs`].

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cgfs::CgroupFs;
use super::layout::CgroupLayout;
use super::types::{AttemptSpec, Enforcement, IsolateError};

/// Name of the leaf a v2 orchestrator moves itself into so its own cgroup may enable
/// controllers for its children ("no internal processes" rule).
pub(crate) const SELF_LEAF: &str = "orchestrate-self";
/// Prefix of every attempt cgroup.
pub(crate) const PREFIX: &str = "orchestrate-";

/// v1 controllers attempts always use when mounted (cpuset and devices on demand).
const V1_ALWAYS: &[&str] = &["memory", "pids", "cpuacct", "freezer"];
const V1_REQUIRED: &[&str] = &["memory", "pids"];
const V2_REQUIRED: &[&str] = &["memory", "pids"];
const V2_OPTIONAL: &[&str] = &["cpu", "cpuset"];

/// Device nodes every attempt may use even under a device restriction.
const HARMLESS_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/pts/ptmx",
];

/// The usable cgroup setup chosen at startup.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    V1 {
        /// controller -> our cgroup dir in its hierarchy.
        dirs: BTreeMap<String, PathBuf>,
        swap_accounting: bool,
    },
    V2 {
        parent: PathBuf,
        controllers: Vec<String>,
    },
}

impl Backend {
    /// Directories below which attempt cgroups live (one per used hierarchy).
    pub(crate) fn parents(&self) -> Vec<PathBuf> {
        match self {
            Backend::V1 { dirs, .. } => {
                let mut v: Vec<PathBuf> = dirs.values().cloned().collect();
                v.sort();
                v.dedup();
                v
            }
            Backend::V2 { parent, .. } => vec![parent.clone()],
        }
    }

    pub(crate) fn version(&self) -> u8 {
        match self {
            Backend::V1 { .. } => 1,
            Backend::V2 { .. } => 2,
        }
    }

    pub(crate) fn controllers(&self) -> Vec<String> {
        match self {
            Backend::V1 { dirs, .. } => dirs.keys().cloned().collect(),
            Backend::V2 { controllers, .. } => controllers.clone(),
        }
    }

    /// Choose and prepare a backend, or say exactly why none is usable.
    pub(crate) fn setup(
        fs: &dyn CgroupFs,
        layout: &CgroupLayout,
        notes: &mut Vec<String>,
    ) -> Result<Backend, String> {
        let mut v2_reason = String::from("no cgroup2 filesystem holds our cgroup");
        if let Some(dir) = &layout.unified {
            // A second isolator in a process that already moved into its leaf.
            let dir = if dir.file_name().is_some_and(|n| n == SELF_LEAF) {
                dir.parent().unwrap_or(dir).to_path_buf()
            } else {
                dir.clone()
            };
            let offered = fs
                .read(&dir.join("cgroup.controllers"))
                .map_err(|e| format!("cannot read {}/cgroup.controllers: {e}", dir.display()))?;
            let offered: Vec<&str> = offered.split_whitespace().collect();
            let missing: Vec<&str> = V2_REQUIRED
                .iter()
                .copied()
                .filter(|c| !offered.contains(c))
                .collect();
            if missing.is_empty() {
                return setup_v2(fs, &dir, &offered, notes);
            }
            v2_reason = format!(
                "controller missing: cgroup v2 at {} offers [{}] but not [{}]",
                dir.display(),
                offered.join(" "),
                missing.join(" ")
            );
        }
        if V1_REQUIRED.iter().any(|c| layout.v1.contains_key(*c)) {
            return setup_v1(fs, layout, notes).map_err(|e| format!("{e} ({v2_reason})"));
        }
        Err(format!(
            "{v2_reason}, and no cgroup v1 memory or pids hierarchy is mounted"
        ))
    }
}

fn probe(fs: &dyn CgroupFs, dir: &Path, delegated_hint: bool) -> Result<(), String> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Underscore, not dash: a probe is never mistaken for an attempt cgroup.
    let probe = dir.join(format!("orchestrate_probe_{}_{n}", std::process::id()));
    match fs.mkdir(&probe) {
        Ok(()) => {
            let _ = fs.rmdir(&probe);
            Ok(())
        }
        Err(e) => {
            // SAFETY: geteuid has no preconditions.
            let euid = unsafe { libc::geteuid() };
            Err(match e.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EPERM) if euid != 0 && delegated_hint => format!(
                    "no delegation: {} is not writable by uid {euid} (run as root or in a \
                     delegated cgroup, e.g. systemd-run --user --scope -p Delegate=yes)",
                    dir.display()
                ),
                Some(libc::EACCES) | Some(libc::EPERM) if euid != 0 => format!(
                    "not root: cannot create cgroups in {} as uid {euid}",
                    dir.display()
                ),
                Some(libc::EROFS) => {
                    format!("not writable: {} is mounted read-only", dir.display())
                }
                _ => format!(
                    "not writable: cannot create a cgroup in {}: {e}",
                    dir.display()
                ),
            })
        }
    }
}

fn setup_v1(
    fs: &dyn CgroupFs,
    layout: &CgroupLayout,
    notes: &mut Vec<String>,
) -> Result<Backend, String> {
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
            Some(d) => {
                dirs.insert(c.to_string(), d.clone());
            }
            None => notes.push(format!("cgroup v1 {c} hierarchy not mounted")),
        }
    }
    let mut probed: Vec<&PathBuf> = Vec::new();
    for d in dirs.values() {
        if !probed.contains(&d) {
            probe(fs, d, false)?;
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
    Ok(Backend::V1 {
        dirs,
        swap_accounting,
    })
}

fn setup_v2(
    fs: &dyn CgroupFs,
    dir: &Path,
    offered: &[&str],
    notes: &mut Vec<String>,
) -> Result<Backend, String> {
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
    Ok(Backend::V2 {
        parent: dir.to_path_buf(),
        controllers: wanted.iter().map(|c| c.to_string()).collect(),
    })
}

/// Pids listed in `cgroup.procs` of one cgroup (never 0, 1 or ourselves).
pub(crate) fn read_pids(fs: &dyn CgroupFs, dir: &Path) -> Vec<i32> {
    let me = std::process::id() as i32;
    fs.read(&dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
        .filter(|&p| p > 1 && p != me)
        .collect()
}

/// A cgroup directory and the dirs below it, deepest first.
fn tree(fs: &dyn CgroupFs, dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for name in fs.subdirs(dir).unwrap_or_default() {
        out.extend(tree(fs, &dir.join(name)));
    }
    out.push(dir.to_path_buf());
    out
}

/// One hierarchy's cgroup of an attempt.
#[derive(Debug, Clone)]
struct Dir {
    controllers: Vec<String>,
    path: PathBuf,
}

/// Add a controller's cgroup: to the `Dir` of its path when another controller shares
/// the hierarchy (`cpu,cpuacct`), else as a new one.
fn add_dir(dirs: &mut Vec<Dir>, controller: String, path: PathBuf) {
    match dirs.iter_mut().find(|d| d.path == path) {
        Some(d) => d.controllers.push(controller),
        None => dirs.push(Dir {
            controllers: vec![controller],
            path,
        }),
    }
}

/// Figures read from an attempt's cgroups once its tree is empty.
#[derive(Debug, Clone, Default)]
pub(crate) struct Measures {
    pub cpu_user: Option<Duration>,
    pub cpu_system: Option<Duration>,
    pub peak_memory_bytes: Option<u64>,
    pub oom_kills: Option<u64>,
    pub pids_limit_hit: Option<bool>,
}

impl Measures {
    /// These figures, each missing one taken from `earlier` (read before some of the
    /// cgroups were removed).
    pub(crate) fn or(self, earlier: Option<Measures>) -> Measures {
        let Some(e) = earlier else { return self };
        Measures {
            cpu_user: self.cpu_user.or(e.cpu_user),
            cpu_system: self.cpu_system.or(e.cpu_system),
            peak_memory_bytes: self.peak_memory_bytes.or(e.peak_memory_bytes),
            oom_kills: self.oom_kills.or(e.oom_kills),
            pids_limit_hit: self.pids_limit_hit.or(e.pids_limit_hit),
        }
    }
}

/// The cgroups of one attempt, in every used hierarchy.
#[derive(Debug, Clone)]
pub(crate) struct AttemptCgroups {
    version: u8,
    dirs: Vec<Dir>,
    memory_limit: Option<u64>,
    fs: Arc<dyn CgroupFs>,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> IsolateError + '_ {
    move |source| IsolateError::Cgroup {
        path: path.to_path_buf(),
        source,
    }
}

impl AttemptCgroups {
    /// Create and configure the attempt's cgroups; on error nothing created remains.
    pub(crate) fn create(
        backend: &Backend,
        fs: Arc<dyn CgroupFs>,
        spec: &AttemptSpec,
    ) -> Result<(AttemptCgroups, Enforcement), IsolateError> {
        if !spec.name.starts_with(PREFIX) || spec.name.contains('/') || spec.name == SELF_LEAF {
            return Err(IsolateError::InvalidSpec(format!(
                "attempt name {:?} must start with {PREFIX:?} and hold no '/'",
                spec.name
            )));
        }
        let mut dirs: Vec<Dir> = Vec::new();
        let wanted = |c: &str| match c {
            "cpuset" => spec.cpus.is_some(),
            "devices" => spec.device_nodes.is_some(),
            _ => true,
        };
        match backend {
            Backend::V1 { dirs: parents, .. } => {
                for (c, parent) in parents {
                    if !wanted(c) {
                        continue;
                    }
                    add_dir(&mut dirs, c.clone(), parent.join(&spec.name));
                }
            }
            Backend::V2 {
                parent,
                controllers,
            } => dirs.push(Dir {
                controllers: controllers.clone(),
                path: parent.join(&spec.name),
            }),
        }
        let mut group = AttemptCgroups {
            version: backend.version(),
            dirs: Vec::new(),
            memory_limit: spec.memory,
            fs,
        };
        for d in dirs {
            if group.fs.exists(&d.path) {
                let _ = group.remove();
                return Err(IsolateError::Exists(d.path));
            }
            if let Err(e) = group.fs.mkdir(&d.path) {
                let _ = group.remove();
                return Err(io_err(&d.path)(e));
            }
            group.dirs.push(d);
        }
        match group.configure(backend, spec) {
            Ok(enf) => Ok((group, enf)),
            Err(e) => {
                let _ = group.remove();
                Err(e)
            }
        }
    }

    fn dir_of(&self, controller: &str) -> Option<&Path> {
        self.dirs
            .iter()
            .find(|d| d.controllers.iter().any(|c| c == controller))
            .map(|d| d.path.as_path())
    }

    fn write(&self, controller: &str, file: &str, value: &str) -> Result<bool, IsolateError> {
        let Some(dir) = self.dir_of(controller) else {
            return Ok(false);
        };
        let path = dir.join(file);
        self.fs.write(&path, value).map_err(io_err(&path))?;
        Ok(true)
    }

    fn configure(
        &self,
        backend: &Backend,
        spec: &AttemptSpec,
    ) -> Result<Enforcement, IsolateError> {
        let mut enf = Enforcement {
            mode: "cgroup".into(),
            cgroup_version: Some(self.version),
            memory: false,
            swap_off: false,
            pids: false,
            cpus: false,
            devices: false,
            notes: Vec::new(),
        };
        match backend {
            Backend::V1 {
                swap_accounting, ..
            } => {
                if let Some(m) = spec.memory {
                    enf.memory = self.write("memory", "memory.limit_in_bytes", &m.to_string())?;
                    // memsw must not go below the memory limit: write it after.
                    if !spec.swap && *swap_accounting {
                        enf.swap_off =
                            self.write("memory", "memory.memsw.limit_in_bytes", &m.to_string())?;
                    } else if !spec.swap {
                        enf.notes
                            .push("swap not limited: no swap accounting".into());
                    }
                }
                if let Some(p) = spec.pids {
                    enf.pids = self.write("pids", "pids.max", &p.to_string())?;
                }
                if let Some(cpus) = &spec.cpus {
                    if let Some(dir) = self.dir_of("cpuset") {
                        // A new v1 cpuset has no mems: joining it would fail with ENOSPC.
                        let parent_mems = dir.parent().map(|p| p.join("cpuset.mems"));
                        if let Some(pm) = parent_mems {
                            let mems = self.fs.read(&pm).map_err(io_err(&pm))?;
                            self.write("cpuset", "cpuset.mems", mems.trim())?;
                        }
                        enf.cpus = self.write("cpuset", "cpuset.cpus", cpus)?;
                    } else {
                        enf.notes
                            .push(format!("cpus {cpus} not enforced: no cpuset hierarchy"));
                    }
                }
                if let Some(nodes) = &spec.device_nodes {
                    if self.dir_of("devices").is_some() {
                        self.write("devices", "devices.deny", "a")?;
                        for node in HARMLESS_DEVICES {
                            if let Some(rule) = device_rule(Path::new(node)) {
                                self.write("devices", "devices.allow", &rule)?;
                            }
                        }
                        for node in nodes {
                            let rule = device_rule(node).ok_or_else(|| {
                                IsolateError::InvalidSpec(format!(
                                    "{} is not a character or block device",
                                    node.display()
                                ))
                            })?;
                            self.write("devices", "devices.allow", &rule)?;
                        }
                        enf.devices = true;
                    } else {
                        enf.notes
                            .push("device access not restricted: no devices hierarchy".into());
                    }
                }
            }
            Backend::V2 { controllers, .. } => {
                if let Some(m) = spec.memory {
                    enf.memory = self.write("memory", "memory.max", &m.to_string())?;
                    if !spec.swap {
                        enf.swap_off = self.write("memory", "memory.swap.max", "0")?;
                    }
                }
                // One OOM kill ends the whole attempt, not one task of it.
                self.write("memory", "memory.oom.group", "1")?;
                if let Some(p) = spec.pids {
                    enf.pids = self.write("pids", "pids.max", &p.to_string())?;
                }
                if let Some(cpus) = &spec.cpus {
                    if controllers.iter().any(|c| c == "cpuset") {
                        enf.cpus = self.write("cpuset", "cpuset.cpus", cpus)?;
                    } else {
                        enf.notes
                            .push(format!("cpus {cpus} not enforced: no cpuset controller"));
                    }
                }
                if spec.device_nodes.is_some() {
                    enf.notes.push(
                        "device access not restricted: cgroup v2 needs an eBPF program".into(),
                    );
                }
            }
        }
        if spec.memory.is_some() && spec.swap {
            enf.notes
                .push("swap allowed beyond the memory limit (asked for)".into());
        }
        Ok(enf)
    }

    /// Open the join file of every attempt cgroup, for the new child to join before
    /// it execs.
    ///
    /// v1 joins through `tasks`, not `cgroup.procs`: the cloned child is one thread, so
    /// moving the thread moves the process, and a "0" written to `tasks` moves only the
    /// writer, which lets the kernel skip the global threadgroup lock (a percpu rwsem
    /// taken for writing, an RCU grace period) that every `cgroup.procs` write takes.
    /// That was about 0.45 ms of each attempt here.
    pub(crate) fn open_join(&self) -> Result<Vec<std::fs::File>, IsolateError> {
        let file = if self.version == 1 {
            "tasks"
        } else {
            "cgroup.procs"
        };
        self.dirs
            .iter()
            .map(|d| {
                let path = d.path.join(file);
                self.fs.open_join(&path).map_err(io_err(&path))
            })
            .collect()
    }

    /// Every pid in the attempt's cgroups and their descendants.
    pub(crate) fn pids(&self) -> Vec<i32> {
        let mut out = Vec::new();
        for d in &self.dirs {
            for t in tree(self.fs.as_ref(), &d.path) {
                out.extend(read_pids(self.fs.as_ref(), &t));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Nothing of the attempt is alive.
    pub(crate) fn is_empty(&self) -> bool {
        if self.version == 2 {
            if let Some(d) = self.dirs.first() {
                let populated = self
                    .fs
                    .read(&d.path.join("cgroup.events"))
                    .ok()
                    .and_then(|t| keyed(&t, "populated"));
                if populated.is_some_and(|p| p > 0) {
                    return false;
                }
            }
        }
        self.pids().is_empty()
    }

    /// Send a signal to every process of the attempt.
    pub(crate) fn signal_all(&self, sig: i32) {
        for pid in self.pids() {
            // SAFETY: kill with a positive pid (read_pids never yields <= 1 or us).
            unsafe { libc::kill(pid, sig) };
        }
    }

    /// Kill everything in the attempt, until empty or `bound` passes; true when empty.
    /// Blocking (sleeps in small steps): async callers use spawn_blocking.
    pub(crate) fn kill_all(&self, bound: Duration) -> bool {
        let start = Instant::now();
        let fs = self.fs.as_ref();
        let mut pause = Duration::from_micros(200);
        if self.version == 2 {
            if let Some(d) = self.dirs.first() {
                // cgroup.kill (5.14+) kills the subtree, frozen cgroups included.
                let _ = fs.write(&d.path.join("cgroup.kill"), "1");
            }
        }
        loop {
            if self.version == 1 {
                self.v1_kill_pass(start + bound);
            } else {
                self.signal_all(libc::SIGKILL);
            }
            if self.is_empty() {
                return true;
            }
            if start.elapsed() >= bound {
                return false;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        }
    }

    /// v1: thaw frozen descendants (a frozen child makes kills hang), freeze the
    /// attempt, SIGKILL every pid, thaw.
    fn v1_kill_pass(&self, deadline: Instant) {
        let fs = self.fs.as_ref();
        let freezer = self.dir_of("freezer").map(Path::to_path_buf);
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
        self.signal_all(libc::SIGKILL);
        if let Some(fz) = &freezer {
            let _ = fs.write(&fz.join("freezer.state"), "THAWED");
        }
    }

    /// Read the attempt's figures (call once it is empty).
    pub(crate) fn measure(&self) -> Measures {
        let fs = self.fs.as_ref();
        let read = |c: &str, f: &str| self.dir_of(c).and_then(|d| fs.read(&d.join(f)).ok());
        let mut m = Measures::default();
        if self.version == 1 {
            if let Some(stat) = read("cpuacct", "cpuacct.stat") {
                let tck = clock_ticks();
                let ticks =
                    |k| keyed(&stat, k).map(|t| Duration::from_nanos(t * 1_000_000_000 / tck));
                m.cpu_user = ticks("user");
                m.cpu_system = ticks("system");
            }
            m.peak_memory_bytes = read("memory", "memory.memsw.max_usage_in_bytes")
                .or_else(|| read("memory", "memory.max_usage_in_bytes"))
                .and_then(|t| t.trim().parse().ok());
            m.oom_kills = read("memory", "memory.oom_control").and_then(|t| keyed(&t, "oom_kill"));
            if m.oom_kills.is_none() {
                // Older kernels: no counter; reaching the limit is the best evidence.
                if let (Some(peak), Some(limit)) = (m.peak_memory_bytes, self.memory_limit) {
                    m.oom_kills = Some(u64::from(peak >= limit));
                }
            }
        } else {
            if let Some(stat) = read("memory", "cpu.stat").or_else(|| read("pids", "cpu.stat")) {
                let usec = |k| keyed(&stat, k).map(Duration::from_micros);
                m.cpu_user = usec("user_usec");
                m.cpu_system = usec("system_usec");
            }
            m.peak_memory_bytes = read("memory", "memory.peak").and_then(|t| t.trim().parse().ok());
            m.oom_kills = read("memory", "memory.events").and_then(|t| keyed(&t, "oom_kill"));
        }
        m.pids_limit_hit = read("pids", "pids.events")
            .and_then(|t| keyed(&t, "max"))
            .map(|n| n > 0);
        m
    }

    /// Remove the attempt's cgroups, descendants first, retrying EBUSY with backoff.
    /// Returns what could not be removed.
    pub(crate) fn remove(&self) -> Vec<String> {
        let fs = self.fs.as_ref();
        let mut leftovers = Vec::new();
        for d in &self.dirs {
            for t in tree(fs, &d.path) {
                let mut pause = Duration::from_millis(1);
                let mut result = fs.rmdir(&t);
                while let Err(e) = &result {
                    if e.raw_os_error() != Some(libc::EBUSY) || pause > Duration::from_millis(256) {
                        break;
                    }
                    std::thread::sleep(pause);
                    pause *= 2;
                    result = fs.rmdir(&t);
                }
                match result {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => leftovers.push(format!("cgroup {}: {e}", t.display())),
                }
            }
        }
        leftovers
    }

    /// The common end after the main process exited: measure, then remove every
    /// cgroup once. The kernel refuses to remove a cgroup that still holds a process
    /// or a child cgroup (EBUSY), so success proves the attempt empty without reading
    /// any pid list. On the first refusal it stops and returns the figures as Err;
    /// cgroups removed until then leave the group, and the caller ends the tree the
    /// slow way.
    pub(crate) fn try_finish(&mut self) -> Result<Measures, Measures> {
        let m = self.measure();
        while let Some(d) = self.dirs.first() {
            match self.fs.rmdir(&d.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(_) => return Err(m),
            }
            self.dirs.remove(0);
        }
        Ok(m)
    }

    /// An existing attempt's cgroups (for sweeping), in whatever hierarchies hold it.
    pub(crate) fn existing(backend: &Backend, fs: Arc<dyn CgroupFs>, name: &str) -> AttemptCgroups {
        let mut dirs: Vec<Dir> = Vec::new();
        let pairs: Vec<(String, PathBuf)> = match backend {
            Backend::V1 { dirs, .. } => dirs
                .iter()
                .map(|(c, p)| (c.clone(), p.join(name)))
                .collect(),
            Backend::V2 {
                parent,
                controllers,
            } => controllers
                .iter()
                .map(|c| (c.clone(), parent.join(name)))
                .collect(),
        };
        for (c, path) in pairs {
            if !fs.exists(&path) {
                continue;
            }
            add_dir(&mut dirs, c, path);
        }
        AttemptCgroups {
            version: backend.version(),
            dirs,
            memory_limit: None,
            fs,
        }
    }
}

/// `key N` from a flat-keyed cgroup file.
pub(crate) fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        (f.next()? == key).then(|| f.next()?.parse().ok())?
    })
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

/// `c 1:3 rwm` for a device node, from stat.
fn device_rule(node: &Path) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let md = std::fs::metadata(node).ok()?;
    let kind = if md.file_type().is_char_device() {
        'c'
    } else if md.file_type().is_block_device() {
        'b'
    } else {
        return None;
    };
    let rdev = md.rdev();
    Some(format!(
        "{kind} {}:{} rwm",
        libc::major(rdev),
        libc::minor(rdev)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_files() {
        assert_eq!(
            keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill"),
            Some(3)
        );
        assert_eq!(keyed("max 0\n", "max"), Some(0));
        assert_eq!(keyed("user 5\n", "system"), None);
        assert_eq!(keyed("populated x\n", "populated"), None);
    }

    #[test]
    fn later_figures_win_and_missing_ones_come_from_earlier() {
        let later = Measures {
            cpu_user: Some(Duration::from_millis(5)),
            oom_kills: None,
            ..Measures::default()
        };
        let earlier = Measures {
            cpu_user: Some(Duration::from_millis(1)),
            oom_kills: Some(1),
            peak_memory_bytes: Some(4096),
            ..Measures::default()
        };
        let m = later.clone().or(Some(earlier));
        assert_eq!(m.cpu_user, Some(Duration::from_millis(5)));
        assert_eq!(m.oom_kills, Some(1));
        assert_eq!(m.peak_memory_bytes, Some(4096));
        assert_eq!(m.cpu_system, None);
        assert_eq!(later.or(None).oom_kills, None);
    }

    #[test]
    fn device_rules_from_stat() {
        assert_eq!(
            device_rule(Path::new("/dev/null")).as_deref(),
            Some("c 1:3 rwm")
        );
        assert_eq!(device_rule(Path::new("/etc/hostname")), None);
    }
}
