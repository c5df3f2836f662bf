//! Cgroups for attempts, one version per file behind [`CgroupVersion`] (the way
//! BenchExec splits `cgroups.py` into `cgroupsv1.py` and `cgroupsv2.py`): `v1.rs`
//! (a directory per hierarchy, `tasks`, memsw, devices, freezer) and `v2.rs` (one
//! unified directory, `cgroup.procs`, `memory.max`, `cgroup.kill`). What every
//! version shares lives here: choosing one, creating, measuring, killing and
//! removing an attempt's cgroups. All file access goes through [`CgroupFs`].

mod bpf_devices;
mod home;
mod v1;
mod v2;

use std::fmt::Debug;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cgfs::CgroupFs;
use super::layout::CgroupLayout;
use super::types::{AttemptSpec, Enforcement, IsolateError};

/// Prefix of every attempt cgroup.
pub(crate) const PREFIX: &str = "orchestrate-";

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

/// What differs between cgroup versions; everything else is [`AttemptCgroups`].
pub(crate) trait CgroupVersion: Send + Sync + Debug {
    /// 1 or 2.
    fn version(&self) -> u8;
    /// Directories below which attempt cgroups live (one per used hierarchy).
    fn parents(&self) -> Vec<PathBuf>;
    /// Controllers the attempts' cgroups use.
    fn controllers(&self) -> Vec<String>;
    /// (controller, directory) of an attempt named `name`: the ones `spec` needs, or
    /// every one when sweeping an existing attempt (`spec` None).
    fn placements(&self, name: &str, spec: Option<&AttemptSpec>) -> Vec<(String, PathBuf)>;
    /// The file a new child writes "0" to, to join.
    fn join_file(&self) -> &'static str;
    /// Write the limits `spec` asks for; say what was enforced.
    fn configure(
        &self,
        g: &AttemptCgroups,
        spec: &AttemptSpec,
        enf: &mut Enforcement,
    ) -> Result<(), IsolateError>;
    /// Whether anything lives in the attempt, when the version can tell at once.
    fn populated(&self, _g: &AttemptCgroups) -> Option<bool> {
        None
    }
    /// Once, before the kill passes.
    fn start_kill(&self, _g: &AttemptCgroups) {}
    /// One pass of killing everything in the attempt.
    fn kill_pass(&self, g: &AttemptCgroups, deadline: Instant);
    /// The attempt's figures (read once it is empty).
    fn measure(&self, g: &AttemptCgroups) -> Measures;
    /// The memory in use now, where the kernel keeps no peak of its own (v2 before
    /// 5.19: no `memory.peak`), so that the attempt samples it; None: no need.
    fn memory_now(&self, _g: &AttemptCgroups) -> Option<u64> {
        None
    }
}

/// The same version of cgroups, below a parent a dead run of this host recorded
/// (cgroup v2 only: each orchestrator may have a home of its own there; v1 parents
/// are the same for every orchestrator started alike). Empty leaves of dead
/// orchestrators there are removed too.
pub(crate) fn at_recorded(cg: &Cgroups, fs: &dyn CgroupFs, parent: &Path) -> Option<Cgroups> {
    if cg.version() != 2 || !fs.is_cgroup_dir(parent) {
        return None;
    }
    home::sweep_dead_leaves(fs, parent);
    Some(Arc::new(v2::recorded(parent, cg.controllers())))
}

/// See [`crate::isolate::leave_homes`].
pub(crate) fn leave_homes() {
    home::leave_all();
}

/// The usable cgroup version chosen at startup.
pub(crate) type Cgroups = Arc<dyn CgroupVersion>;

/// Choose and prepare a version, or say exactly why none is usable.
pub(crate) fn setup(
    fs: &Arc<dyn CgroupFs>,
    layout: &CgroupLayout,
    notes: &mut Vec<String>,
) -> Result<Cgroups, String> {
    let delegated = layout.delegated.as_deref();
    let mut v2_reason = String::from("no cgroup2 filesystem holds our cgroup");
    let has_v1 = v1::V1_REQUIRED.iter().any(|c| layout.v1.contains_key(*c));
    if let Some(dir) = &layout.unified {
        // What the delegated parent offers, when there is one: attempts go there.
        let parent = delegated.and_then(|d| d.unified.as_deref());
        let at = parent.unwrap_or(dir);
        if parent.is_some() && !fs.exists(&at.join("cgroup.controllers")) {
            v2_reason = format!(
                "cgroup parent {} does not exist (an administrator creates it and gives \
                 it to you: docs/hosts.md, \"A delegated parent\")",
                at.display()
            );
            // A hybrid host's v2 mount may lack it while its v1 hierarchies hold it.
            if !has_v1 {
                return Err(v2_reason);
            }
        } else {
            let offered = fs
                .read(&at.join("cgroup.controllers"))
                .map_err(|e| format!("cannot read {}/cgroup.controllers: {e}", at.display()))?;
            let offered: Vec<&str> = offered.split_whitespace().collect();
            let missing: Vec<&str> = v2::V2_REQUIRED
                .iter()
                .copied()
                .filter(|c| !offered.contains(c))
                .collect();
            if missing.is_empty() {
                return Ok(Arc::new(v2::setup(fs, dir, parent, &offered, notes)?));
            }
            v2_reason = format!(
                "controller missing: cgroup v2 at {} offers [{}] but not [{}]",
                at.display(),
                offered.join(" "),
                missing.join(" ")
            );
        }
    }
    if has_v1 {
        return v1::setup(
            fs.as_ref(),
            delegated.unwrap_or(layout),
            delegated.is_some(),
            notes,
        )
        .map(|v| Arc::new(v) as Cgroups)
        .map_err(|e| format!("{e} ({v2_reason})"));
    }
    Err(format!(
        "{v2_reason}, and no cgroup v1 memory or pids hierarchy is mounted"
    ))
}

/// Whether we may create cgroups in `dir`, or exactly why not.
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
                    "no delegation: {} is not writable by uid {euid} (run as root, in a \
                     delegated cgroup such as systemd-run --user --scope -p Delegate=yes \
                     gives, or ask its owner for it: chown -R {euid} {}; docs/hosts.md)",
                    dir.display(),
                    dir.display()
                ),
                Some(libc::EACCES) | Some(libc::EPERM) if euid != 0 => format!(
                    "not root: cannot create cgroups in {} as uid {euid} (run as root, or \
                     in a cgroup an administrator delegated to you: --cgroup-parent, \
                     docs/hosts.md)",
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
    cg: Cgroups,
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
        cg: &Cgroups,
        fs: Arc<dyn CgroupFs>,
        spec: &AttemptSpec,
    ) -> Result<(AttemptCgroups, Enforcement), IsolateError> {
        if !spec.name.starts_with(PREFIX) || spec.name.contains('/') {
            return Err(IsolateError::InvalidSpec(format!(
                "attempt name {:?} must start with {PREFIX:?} and hold no '/'",
                spec.name
            )));
        }
        let mut dirs: Vec<Dir> = Vec::new();
        for (c, path) in cg.placements(&spec.name, Some(spec)) {
            add_dir(&mut dirs, c, path);
        }
        let mut group = AttemptCgroups {
            cg: cg.clone(),
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
        let mut enf = Enforcement {
            cgroup_version: Some(cg.version()),
            ..Enforcement::nothing(crate::contract::Enforcer::Cgroup)
        };
        match cg.configure(&group, spec, &mut enf) {
            Ok(()) => {
                if spec.memory.is_some() && spec.swap {
                    enf.notes
                        .push("swap allowed beyond the memory limit (asked for)".into());
                }
                Ok((group, enf))
            }
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

    /// Write `value` to `file` of the controller's cgroup; false when the attempt
    /// has no cgroup of that controller.
    fn write(&self, controller: &str, file: &str, value: &str) -> Result<bool, IsolateError> {
        let Some(dir) = self.dir_of(controller) else {
            return Ok(false);
        };
        let path = dir.join(file);
        self.fs.write(&path, value).map_err(io_err(&path))?;
        Ok(true)
    }

    fn read(&self, path: &Path) -> Result<String, IsolateError> {
        self.fs.read(path).map_err(io_err(path))
    }

    /// A file of the controller's cgroup, if readable.
    fn read_of(&self, controller: &str, file: &str) -> Option<String> {
        self.dir_of(controller)
            .and_then(|d| self.fs.read(&d.join(file)).ok())
    }

    /// A file of the attempt's first cgroup, if readable.
    fn read_first(&self, file: &str) -> Option<String> {
        self.dirs
            .first()
            .and_then(|d| self.fs.read(&d.path.join(file)).ok())
    }

    /// Open the join file of every attempt cgroup, for the new child to join before
    /// it execs.
    pub(crate) fn open_join(&self) -> Result<Vec<std::fs::File>, IsolateError> {
        let file = self.cg.join_file();
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
        if self.cg.populated(self) == Some(true) {
            return false;
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
        let mut pause = Duration::from_micros(200);
        self.cg.start_kill(self);
        loop {
            self.cg.kill_pass(self, start + bound);
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

    /// The memory in use now when the kernel keeps no peak (see
    /// [`CgroupVersion::memory_now`]).
    pub(crate) fn memory_now(&self) -> Option<u64> {
        self.cg.memory_now(self)
    }

    /// Read the attempt's figures (call once it is empty).
    pub(crate) fn measure(&self) -> Measures {
        let mut m = self.cg.measure(self);
        m.pids_limit_hit = self
            .read_of("pids", "pids.events")
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
    pub(crate) fn existing(cg: &Cgroups, fs: Arc<dyn CgroupFs>, name: &str) -> AttemptCgroups {
        let mut dirs: Vec<Dir> = Vec::new();
        for (c, path) in cg.placements(name, None) {
            if fs.exists(&path) {
                add_dir(&mut dirs, c, path);
            }
        }
        AttemptCgroups {
            cg: cg.clone(),
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

/// `c 1:3 rwm` for a device node, from stat.
fn device_rule(node: &Path) -> Option<String> {
    let d = bpf_devices::DeviceId::of(node)?;
    let kind = if d.block { 'b' } else { 'c' };
    Some(format!("{kind} {}:{} rwm", d.major, d.minor))
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
