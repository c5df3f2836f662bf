//! Where the cgroup hierarchies are mounted and where this process sits in each, read
//! from `/proc/self/mountinfo` and `/proc/self/cgroup`. Nothing is hard-coded: `cpu`
//! and `cpuacct` may be separate mounts or one `cpu,cpuacct` mount.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::types::IsolateError;

/// cgroup v1 controllers isolate knows of (named hierarchies such as `name=systemd`
/// are not controllers and are ignored).
const V1_CONTROLLERS: &[&str] = &[
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "blkio",
    "perf_event",
    "net_prio",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
];

/// The cgroups this process is in, as directories on mounted cgroup filesystems.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupLayout {
    /// Our own cgroup directory on the cgroup2 mount, if one is mounted and our cgroup
    /// is visible below it.
    pub unified: Option<PathBuf>,
    /// v1 controller -> our own cgroup directory in the hierarchy holding it (co-mounted
    /// controllers share a directory).
    pub v1: BTreeMap<String, PathBuf>,
    /// The same hierarchies at a cgroup an administrator delegated (`cgroup_parent`),
    /// where attempts go instead of below our own cgroups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegated: Option<Box<CgroupLayout>>,
}

impl CgroupLayout {
    /// Read this process's layout from /proc.
    pub fn discover() -> Result<CgroupLayout, IsolateError> {
        Self::discover_in(None)
    }

    /// Like [`CgroupLayout::discover`], with the hierarchies at a delegated parent
    /// (a path below each hierarchy's root, see [`super::cgroup_parent_path`]).
    pub fn discover_in(parent: Option<&std::path::Path>) -> Result<CgroupLayout, IsolateError> {
        let read = |p: &str| {
            std::fs::read_to_string(p).map_err(|source| IsolateError::Os {
                what: format!("reading {p}"),
                source,
            })
        };
        Ok(Self::parse_in(
            &read("/proc/self/mountinfo")?,
            &read("/proc/self/cgroup")?,
            parent,
        ))
    }

    /// [`CgroupLayout::parse`], and the same mounts at `parent` when one is given.
    pub fn parse_in(
        mountinfo: &str,
        proc_cgroup: &str,
        parent: Option<&std::path::Path>,
    ) -> CgroupLayout {
        let mut own = Self::parse(mountinfo, proc_cgroup);
        if let Some(parent) = parent {
            // Every hierarchy as if we sat at the parent: the mounts decide where that is.
            let at: String = proc_cgroup
                .lines()
                .filter_map(|l| {
                    let mut parts = l.splitn(3, ':');
                    Some(format!(
                        "{}:{}:/{}\n",
                        parts.next()?,
                        parts.next()?,
                        parent.display()
                    ))
                })
                .collect();
            own.delegated = Some(Box::new(Self::parse(mountinfo, &at)));
        }
        own
    }

    /// Build a layout from the texts of `/proc/self/mountinfo` and `/proc/self/cgroup`.
    pub fn parse(mountinfo: &str, proc_cgroup: &str) -> CgroupLayout {
        // Our path per hierarchy: "" for v2, else the controller list of the line.
        let mut v1_paths: Vec<(Vec<String>, String)> = Vec::new();
        let mut v2_path: Option<String> = None;
        for line in proc_cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if ctrls.is_empty() {
                v2_path = Some(path.to_string());
            } else {
                let list = ctrls.split(',').map(str::to_string).collect();
                v1_paths.push((list, path.to_string()));
            }
        }

        let mut layout = CgroupLayout::default();
        for line in mountinfo.lines() {
            let Some((pre, post)) = line.split_once(" - ") else {
                continue;
            };
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            let (Some(root), Some(mountpoint), Some(fstype)) =
                (pre.get(3), pre.get(4), post.first())
            else {
                continue;
            };
            let mountpoint = unescape(mountpoint);
            let root = unescape(root);
            match *fstype {
                "cgroup2" => {
                    if layout.unified.is_some() {
                        continue;
                    }
                    if let Some(dir) = v2_path
                        .as_deref()
                        .and_then(|p| below(&mountpoint, &root, p))
                    {
                        layout.unified = Some(dir);
                    }
                }
                "cgroup" => {
                    let superopts = post.get(2).copied().unwrap_or("");
                    let ctrls: Vec<&str> = superopts
                        .split(',')
                        .filter(|o| V1_CONTROLLERS.contains(o))
                        .collect();
                    let Some(first) = ctrls.first() else {
                        continue;
                    };
                    if layout.v1.contains_key(*first) {
                        continue;
                    }
                    let Some((_, path)) = v1_paths
                        .iter()
                        .find(|(list, _)| list.iter().any(|c| c == first))
                    else {
                        continue;
                    };
                    if let Some(dir) = below(&mountpoint, &root, path) {
                        for c in ctrls {
                            layout.v1.insert(c.to_string(), dir.clone());
                        }
                    }
                }
                _ => {}
            }
        }
        layout
    }
}

/// The directory of cgroup `path` on a mount of `root` at `mountpoint`, when visible.
fn below(mountpoint: &str, root: &str, path: &str) -> Option<PathBuf> {
    let rel = if root == "/" {
        path
    } else if path == root {
        ""
    } else {
        path.strip_prefix(root)?
            .strip_prefix('/')
            .map(|r| r.trim_start_matches('/'))?
    };
    let rel = rel.trim_start_matches('/');
    let mut dir = PathBuf::from(mountpoint);
    if !rel.is_empty() {
        dir.push(rel);
    }
    Some(dir)
}

/// mountinfo escapes space, tab, newline and backslash as octal (`\040`).
fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            if let Some(v) = std::str::from_utf8(&bytes[i + 1..i + 4])
                .ok()
                .and_then(|o| u8::from_str_radix(o, 8).ok())
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const HYBRID_CGROUP: &str = "\
9:name=systemd:/
8:pids:/
6:freezer:/
5:devices:/
4:memory:/process_api/4939
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
";

    #[test]
    fn hybrid_with_separate_cpu_and_nested_memory() {
        let l = CgroupLayout::parse(HYBRID_MOUNTINFO, HYBRID_CGROUP);
        assert_eq!(
            l.v1.get("memory"),
            Some(&PathBuf::from("/sys/fs/cgroup/memory/process_api/4939"))
        );
        assert_eq!(l.v1.get("cpu"), Some(&PathBuf::from("/sys/fs/cgroup/cpu")));
        assert_eq!(
            l.v1.get("cpuacct"),
            Some(&PathBuf::from("/sys/fs/cgroup/cpuacct"))
        );
        assert!(!l.v1.contains_key("name=systemd"));
        assert_eq!(l.unified, Some(PathBuf::from("/sys/fs/cgroup/unified")));
    }

    #[test]
    fn pure_v1_with_comounted_cpu_cpuacct() {
        let mi = "\
25 20 0:22 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
26 20 0:23 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
27 20 0:24 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
";
        let cg = "4:pids:/slurm/job1\n3:memory:/slurm/job1\n2:cpu,cpuacct:/slurm/job1\n";
        let l = CgroupLayout::parse(mi, cg);
        let want = PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/slurm/job1");
        assert_eq!(l.v1.get("cpu"), Some(&want));
        assert_eq!(l.v1.get("cpuacct"), Some(&want));
        assert_eq!(
            l.v1.get("pids"),
            Some(&PathBuf::from("/sys/fs/cgroup/pids/slurm/job1"))
        );
        assert_eq!(l.unified, None);
    }

    #[test]
    fn pure_v2_and_mount_root_below_hierarchy_root() {
        let mi = "30 24 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let cg = "0::/user.slice/user-1000.slice/session-3.scope\n";
        let l = CgroupLayout::parse(mi, cg);
        assert_eq!(
            l.unified,
            Some(PathBuf::from(
                "/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope"
            ))
        );
        assert!(l.v1.is_empty());
        // A container mount whose root is our own cgroup.
        let mi = "30 24 0:26 /kube/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let l = CgroupLayout::parse(mi, "0::/kube/pod1/app\n");
        assert_eq!(l.unified, Some(PathBuf::from("/sys/fs/cgroup/app")));
        // Our cgroup outside the mounted subtree: not usable.
        let l = CgroupLayout::parse(mi, "0::/other\n");
        assert_eq!(l.unified, None);
    }

    #[test]
    fn escaped_mountpoint() {
        let mi = "30 24 0:26 / /mnt/cg\\040two rw - cgroup2 cgroup2 rw\n";
        let l = CgroupLayout::parse(mi, "0::/a\n");
        assert_eq!(l.unified, Some(PathBuf::from("/mnt/cg two/a")));
    }
}
