//! Every cgroup file operation goes through [`CgroupFs`], so the cgroup logic can be
//! exercised against a fake cgroupfs tree (cgroup v2 has no memory controller on the
//! machines we test on).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::sys::retry;

/// The few operations isolate performs on a cgroup filesystem.
pub trait CgroupFs: Send + Sync + std::fmt::Debug {
    /// Read a control file.
    fn read(&self, path: &Path) -> io::Result<String>;
    /// Write a value to an existing control file in one write.
    fn write(&self, path: &Path, value: &str) -> io::Result<()>;
    /// Create a cgroup (the kernel fills in its control files).
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    /// Remove an empty cgroup.
    fn rmdir(&self, path: &Path) -> io::Result<()>;
    /// Names of the child cgroups of a cgroup.
    fn subdirs(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Whether a path exists.
    fn exists(&self, path: &Path) -> bool;
    /// Whether `path` is a non-root cgroup directory reached through no link (a path
    /// read from a journal is checked with it before anything below it is touched).
    fn is_cgroup_dir(&self, path: &Path) -> bool {
        path.is_absolute()
            && std::fs::canonicalize(path).is_ok_and(|c| c == path)
            && self.exists(&path.join("cgroup.events"))
    }
    /// Open a cgroup's join file (`tasks` or `cgroup.procs`) for writing, to be written
    /// by the new child before it execs (the file must stay open across the clone).
    fn open_join(&self, file: &Path) -> io::Result<File> {
        retry(|| OpenOptions::new().write(true).open(file))
    }
}

/// The real cgroup filesystem.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

/// Every call retries `EINTR` (`crate::sys`): the memory controller's limit writes
/// fail with it whenever a signal is pending, SIGCHLD arrives constantly, and one
/// failed write would fail an attempt.
impl CgroupFs for RealFs {
    fn read(&self, path: &Path) -> io::Result<String> {
        retry(|| std::fs::read_to_string(path))
    }
    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        let mut f = retry(|| OpenOptions::new().write(true).open(path))?;
        // cgroupfs takes one value per write(2): never split it (an interrupted write
        // wrote nothing, so the same value is written again).
        let n = retry(|| f.write(value.as_bytes()))?;
        if n != value.len() {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
        }
        Ok(())
    }
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        retry(|| std::fs::create_dir(path))
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        retry(|| std::fs::remove_dir(path))
    }
    fn subdirs(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in retry(|| std::fs::read_dir(path))? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                out.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        out.sort();
        Ok(out)
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn is_cgroup_dir(&self, path: &Path) -> bool {
        use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC};
        path.is_absolute()
            && std::fs::canonicalize(path).is_ok_and(|c| c == path)
            && statfs(path).is_ok_and(|s| s.filesystem_type() == CGROUP2_SUPER_MAGIC)
            && self.exists(&path.join("cgroup.events"))
    }
}

/// A faithful stand-in for a cgroup v2 tree in an ordinary directory (for tests): `mkdir`
/// creates the control files the kernel would, with kernel formats; `rmdir` refuses a
/// cgroup whose `cgroup.procs` lists a process (EBUSY) and then removes the directory
/// with its files; writes go to existing files only (ENOENT otherwise, like the kernel).
#[derive(Debug, Clone)]
pub struct FakeV2Fs {
    root: PathBuf,
    /// Control files new cgroups lack, as on an older kernel.
    absent: Vec<&'static str>,
}

/// The fake's own file: how many more `subtree_control` writes a process that is
/// still exiting makes fail.
const BUSY: &str = "fake.exiting";

impl FakeV2Fs {
    /// Files of a fresh cgroup, with the values a kernel shows.
    pub const CHILD_FILES: &'static [(&'static str, &'static str)] = &[
        ("cgroup.procs", ""),
        ("cgroup.events", "populated 0\nfrozen 0\n"),
        ("cgroup.kill", ""),
        ("cgroup.freeze", "0\n"),
        ("cgroup.subtree_control", "\n"),
        ("memory.max", "max\n"),
        ("memory.swap.max", "max\n"),
        ("memory.oom.group", "0\n"),
        ("memory.peak", "0\n"),
        ("memory.current", "0\n"),
        (
            "memory.events",
            "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
        ),
        (
            "cpu.stat",
            "usage_usec 0\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
        ),
        ("pids.max", "max\n"),
        ("pids.current", "0\n"),
        ("pids.events", "max 0\n"),
        ("cpuset.cpus", "\n"),
        ("cpuset.mems", "\n"),
    ];

    /// Build a fake tree at `root`, whose top cgroup offers `controllers` and holds
    /// the processes `procs` (e.g. the test process, to exercise the leaf move).
    pub fn create(root: &Path, controllers: &[&str], procs: &[i32]) -> io::Result<FakeV2Fs> {
        std::fs::create_dir_all(root)?;
        let fake = FakeV2Fs {
            root: root.to_path_buf(),
            absent: Vec::new(),
        };
        fake.populate(root)?;
        std::fs::write(
            root.join("cgroup.controllers"),
            controllers.join(" ") + "\n",
        )?;
        let listed: String = procs.iter().map(|p| format!("{p}\n")).collect();
        std::fs::write(root.join("cgroup.procs"), listed)?;
        Ok(fake)
    }

    /// The top of the fake tree.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Make the top the root cgroup of a hierarchy, as the kernel shows it: no
    /// `cgroup.events`, `cgroup.kill` or `cgroup.freeze`, and exempt from the
    /// no-internal-processes rule.
    pub fn as_hierarchy_root(self) -> io::Result<FakeV2Fs> {
        for f in ["cgroup.events", "cgroup.kill", "cgroup.freeze"] {
            std::fs::remove_file(self.root.join(f))?;
        }
        Ok(self)
    }

    /// The kernel's rule: only the root cgroup may hold processes while it enables
    /// controllers for its children.
    fn is_root(dir: &Path) -> bool {
        !dir.join("cgroup.events").exists()
    }

    /// A process that exited leaves its cgroup (a zombie too, as in the kernel): the
    /// pids of `cgroup.procs` that are gone are not listed.
    fn living(procs: &str) -> String {
        procs
            .split_whitespace()
            .filter(|p| match p.parse::<i32>() {
                Ok(pid) if pid > 0 => std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|st| {
                        st.rsplit_once(')')
                            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
                    }),
                _ => true,
            })
            .map(|p| format!("{p}\n"))
            .collect()
    }

    /// A write of a pid to `cgroup.procs` moves it out of every other cgroup.
    fn migrate(&self, dir: &Path, value: &str) -> io::Result<()> {
        let pid: i32 = value
            .trim()
            .parse()
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control"))?;
        if !enabled.trim().is_empty() && !Self::is_root(dir) {
            return Err(io::Error::from_raw_os_error(libc::EBUSY));
        }
        let mut stack = vec![self.root.clone()];
        while let Some(d) = stack.pop() {
            let file = d.join("cgroup.procs");
            let listed = std::fs::read_to_string(&file)?;
            let kept: String = listed
                .split_whitespace()
                .filter(|p| p.parse::<i32>().ok() != Some(pid))
                .map(|p| format!("{p}\n"))
                .collect();
            if kept.len() != listed.len() {
                std::fs::write(&file, kept)?;
            }
            for name in RealFs.subdirs(&d)? {
                stack.push(d.join(name));
            }
        }
        let mut listed = std::fs::read_to_string(dir.join("cgroup.procs"))?;
        listed.push_str(&format!("{pid}\n"));
        std::fs::write(dir.join("cgroup.procs"), listed)
    }

    /// A process of `dir` that is still exiting: listed nowhere, yet the kernel
    /// refuses the next `writes` writes to its `subtree_control` (EBUSY).
    pub fn exiting_process(&self, dir: &Path, writes: u32) -> io::Result<()> {
        std::fs::write(dir.join(BUSY), writes.to_string())
    }

    /// `+c`/`-c` tokens enable and disable controllers the cgroup is offered; enabling
    /// in a non-root cgroup that holds processes is refused.
    fn control(&self, dir: &Path, value: &str) -> io::Result<()> {
        if let Ok(n) = std::fs::read_to_string(dir.join(BUSY)) {
            let n: u32 = n.trim().parse().unwrap_or(0);
            if n > 0 {
                std::fs::write(dir.join(BUSY), (n - 1).to_string())?;
                return Err(io::Error::from_raw_os_error(libc::EBUSY));
            }
        }
        let offered = std::fs::read_to_string(dir.join("cgroup.controllers"))?;
        let file = dir.join("cgroup.subtree_control");
        let mut on: Vec<String> = std::fs::read_to_string(&file)?
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let holds = !std::fs::read_to_string(dir.join("cgroup.procs"))?
            .trim()
            .is_empty();
        for token in value.split_whitespace() {
            let (add, c) = match (token.strip_prefix('+'), token.strip_prefix('-')) {
                (Some(c), _) => (true, c),
                (_, Some(c)) => (false, c),
                _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
            };
            if !offered.split_whitespace().any(|o| o == c) {
                return Err(io::Error::from_raw_os_error(libc::ENOENT));
            }
            if add && holds && !Self::is_root(dir) {
                return Err(io::Error::from_raw_os_error(libc::EBUSY));
            }
            on.retain(|o| o != c);
            if add {
                on.push(c.to_string());
            }
        }
        std::fs::write(file, on.join(" ") + "\n")
    }

    /// Cgroups made from now on lack `files`, as on a kernel older than them
    /// (`memory.peak` came in 5.19, `cgroup.kill` in 5.14).
    pub fn without(mut self, files: &[&'static str]) -> FakeV2Fs {
        self.absent.extend_from_slice(files);
        self
    }

    fn populate(&self, dir: &Path) -> io::Result<()> {
        for (name, value) in Self::CHILD_FILES {
            if !self.absent.contains(name) {
                std::fs::write(dir.join(name), value)?;
            }
        }
        // A child may use what its parent enables in subtree_control.
        let parent_enabled = dir
            .parent()
            .and_then(|p| std::fs::read_to_string(p.join("cgroup.subtree_control")).ok())
            .unwrap_or_default();
        let enabled: Vec<&str> = parent_enabled
            .split_whitespace()
            .map(|c| c.trim_start_matches('+'))
            .collect();
        std::fs::write(dir.join("cgroup.controllers"), enabled.join(" ") + "\n")
    }
}

impl CgroupFs for FakeV2Fs {
    fn read(&self, path: &Path) -> io::Result<String> {
        // What a child is offered is what its parent enables now.
        if path.file_name().is_some_and(|n| n == "cgroup.controllers") {
            if let Some(parent) = path
                .parent()
                .filter(|d| *d != self.root)
                .and_then(Path::parent)
            {
                let on = std::fs::read_to_string(parent.join("cgroup.subtree_control"))?;
                let on: Vec<&str> = on.split_whitespace().collect();
                return Ok(on.join(" ") + "\n");
            }
        }
        let text = std::fs::read_to_string(path)?;
        if path.file_name().is_some_and(|n| n == "cgroup.procs") {
            return Ok(Self::living(&text));
        }
        Ok(text)
    }
    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        if !path.exists() {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        match name.to_str() {
            Some("cgroup.procs") => self.migrate(dir, value),
            Some("cgroup.subtree_control") => self.control(dir, value),
            _ => {
                let mut f = OpenOptions::new().write(true).truncate(true).open(path)?;
                f.write_all(value.as_bytes())
            }
        }
    }
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(path)?;
        self.populate(path)
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        if !self.subdirs(path)?.is_empty() {
            return Err(io::Error::from_raw_os_error(libc::EBUSY));
        }
        let procs = self.read(&path.join("cgroup.procs"))?;
        if procs
            .split_whitespace()
            .any(|p| p.parse::<i32>().is_ok_and(|p| p > 0))
        {
            return Err(io::Error::from_raw_os_error(libc::EBUSY));
        }
        std::fs::remove_dir_all(path)
    }
    fn subdirs(&self, path: &Path) -> io::Result<Vec<String>> {
        RealFs.subdirs(path)
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
}
