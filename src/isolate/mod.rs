//! One command as one isolated attempt: its own cgroup, measured, ended with nothing
//! left behind. Knows nothing about plans.
//!
//! ```text
//! Isolator::new(mode) ── layout.rs (mountinfo + /proc/self/cgroup -> CgroupLayout)
//!        │               cgroup/ (setup: v2.rs delegated subtree or v1.rs dirs,
//!        │                          or an exact reason why not -> error / auto: none)
//!        ▼
//! Isolator::run(spec, cancel)  attempt.rs
//!    create cgroups (cgroup/) ─ open join fds (v1 `tasks`, v2 `cgroup.procs`) ─
//!    spawn (spawn.rs: vfork-style clone; the child writes "0" to each fd, setsid,
//!    exec; under the reaper's lock, pid registered) ─ select{exit, timeout, cancel} ─ main exited: measure, rmdir
//!    (done when the kernel removes every cgroup) ─ otherwise end: TERM all, grace,
//!    kill all via cgroup ─ reap orphans ─ measure ─ rmdir
//! ```
//!
//! - `cgfs.rs`: every cgroup file operation goes through the `CgroupFs` trait; tests
//!   use `FakeV2Fs`, a fake cgroup v2 tree in a temp dir with kernel file formats.
//! - `reaper.rs`: subreaper + orphan reaper that never steals tokio's children
//!   (design note there). `run` calls `init_subreaper` itself (idempotent).
//! - Ending: when the main process exits and nothing else is left, no grace is spent;
//!   otherwise SIGTERM to every pid of the cgroups (mode none: the process group),
//!   the grace (cut short when the tree empties or a `Kill` cancel arrives), the kill,
//!   a bounded wait for empty, then orphans are reaped, figures read, cgroups removed
//!   (descendants first, EBUSY retried with backoff); what remains is `leftovers`.
//! - Killing: v2 writes `cgroup.kill`; v1 loops {thaw child freezer cgroups, FROZEN,
//!   SIGKILL every pid of the attempt and its descendant cgroups, THAWED} until every
//!   hierarchy is empty, within a bound. Mode none kills the process group only.
//! - v2 setup: when our own cgroup must enable controllers in `subtree_control` but
//!   holds our process, we move ourselves into the leaf `orchestrate-self` first;
//!   attempts are created as its siblings. The leaf is never swept.

mod attempt;
pub mod cgfs;
mod cgroup;
mod gpu;
pub mod layout;
mod npu;
mod parent_check;
mod procs;
mod reaper;
mod scope;
mod spawn;
pub mod types;

use std::sync::Arc;

pub use cgfs::{CgroupFs, FakeV2Fs, RealFs};
pub use gpu::gpu_processes;
pub use layout::CgroupLayout;
pub use procs::{processes_with_canary, zombie_children};
pub use reaper::init_subreaper;
pub use types::*;

use cgroup::{AttemptCgroups, Cgroups, PREFIX};

/// Put the orchestrator back into the cgroup it started in and remove the cgroups it
/// made for itself (cgroup v2), now: for an exit that runs no destructor.
pub fn leave_homes() {
    cgroup::leave_homes();
}

/// Runs attempts with the isolation chosen at construction.
#[derive(Debug)]
pub struct Isolator {
    requested: Mode,
    cgroups: Option<Cgroups>,
    fs: Arc<dyn CgroupFs>,
    warnings: Vec<String>,
    notes: Vec<String>,
    cgroup_parent: Option<String>,
    systemd_scope: Option<crate::contract::SystemdScope>,
}

impl Isolator {
    /// Discover the cgroup layout and choose the mode. `Mode::Cgroup` errors with the
    /// exact reason when cgroups are impossible; `Mode::Auto` then falls back to none
    /// with a warning.
    pub fn new(mode: Mode) -> Result<Isolator, IsolateError> {
        Self::new_in(mode, None)
    }

    /// Like [`Isolator::new`], with attempts below a cgroup an administrator delegated
    /// (`parent` as [`cgroup_parent_path`] returns it) instead of below our own.
    pub fn new_in(mode: Mode, parent: Option<&std::path::Path>) -> Result<Isolator, IsolateError> {
        if mode == Mode::None {
            return Self::with_layout(mode, CgroupLayout::default());
        }
        let asked = if parent.is_none() {
            Self::ask_for_scope()
        } else {
            None
        };
        let (scope, refused) = match asked {
            Some(Ok(s)) => (Some(s), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, None),
        };
        let built = match CgroupLayout::discover_in(parent) {
            Ok(layout) => {
                if let (Some(p), Some(d)) = (parent, layout.delegated.as_deref()) {
                    parent_check::owned_by_us(d, p)?;
                }
                Self::with_layout(mode, layout)
            }
            Err(e) => Self::fallback(mode, Arc::new(RealFs), e.to_string(), Vec::new()),
        };
        let why_no_scope = |r: &str| {
            format!(
                "{r}; no transient systemd scope either: {}",
                refused.as_deref().unwrap_or("")
            )
        };
        let mut iso = match built {
            Err(IsolateError::Unavailable(r)) if refused.is_some() => {
                return Err(IsolateError::Unavailable(why_no_scope(&r)))
            }
            other => other?,
        };
        if iso.cgroups.is_none() && refused.is_some() {
            for w in iso.warnings.iter_mut().chain(iso.notes.iter_mut()).take(1) {
                *w = why_no_scope(w);
            }
        }
        if iso.cgroups.is_some() {
            iso.cgroup_parent = parent.map(|p| format!("/{}", p.display()));
        }
        if let Some((s, warning)) = scope {
            iso.notes.insert(
                0,
                format!(
                    "the user's systemd manager made the transient scope {} (Delegate=yes) \
                     and moved the orchestrator into it; it delegated [{}]",
                    s.unit,
                    s.delegated.join(" ")
                ),
            );
            if let Some(w) = warning.filter(|_| iso.cgroups.is_some()) {
                iso.notes.push(w.clone());
                iso.warnings.push(w);
            }
            iso.systemd_scope = Some(s);
        }
        Ok(iso)
    }

    /// A user on cgroup v2 whose cgroup is not theirs to delegate from (a login
    /// session's scope) asks their systemd manager for a scope of their own
    /// (scope.rs): None when there is no need, else what came of asking.
    #[allow(clippy::type_complexity)]
    fn ask_for_scope() -> Option<Result<(crate::contract::SystemdScope, Option<String>), String>> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            return None;
        }
        let layout = CgroupLayout::discover().ok()?;
        let dir = layout.unified.as_deref()?;
        if layout.v1.contains_key("memory") || scope::writable(dir) {
            return None;
        }
        Some(scope::enter().map(|s| {
            let now = CgroupLayout::discover().ok().and_then(|l| l.unified);
            let (delegated, warning, not_delegated) = scope::delegation(now.as_deref(), &s);
            (
                crate::contract::SystemdScope {
                    unit: s.unit,
                    cgroup: s.cgroup,
                    delegated,
                    not_delegated,
                },
                warning,
            )
        }))
    }

    /// Like `new`, with explicit cgroup directories.
    pub fn with_layout(mode: Mode, layout: CgroupLayout) -> Result<Isolator, IsolateError> {
        Self::with_layout_fs(mode, layout, Arc::new(RealFs))
    }

    /// Like `with_layout`, with the cgroup filesystem given (tests pass a `FakeV2Fs`).
    pub fn with_layout_fs(
        mode: Mode,
        layout: CgroupLayout,
        fs: Arc<dyn CgroupFs>,
    ) -> Result<Isolator, IsolateError> {
        if mode == Mode::None {
            return Ok(Isolator {
                requested: mode,
                cgroups: None,
                fs,
                warnings: Vec::new(),
                notes: vec!["isolation none asked for: limits are not enforced".into()],
                cgroup_parent: None,
                systemd_scope: None,
            });
        }
        let mut notes = Vec::new();
        match cgroup::setup(&fs, &layout, &mut notes) {
            Ok(backend) => Ok(Isolator {
                requested: mode,
                cgroups: Some(backend),
                fs,
                warnings: Vec::new(),
                notes,
                cgroup_parent: None,
                systemd_scope: None,
            }),
            Err(reason) => Self::fallback(mode, fs, reason, notes),
        }
    }

    fn fallback(
        mode: Mode,
        fs: Arc<dyn CgroupFs>,
        reason: String,
        mut notes: Vec<String>,
    ) -> Result<Isolator, IsolateError> {
        if mode == Mode::Cgroup {
            return Err(IsolateError::Unavailable(reason));
        }
        let warning = format!(
            "cgroup isolation unavailable ({reason}); attempts run without isolation: \
             limits are not enforced"
        );
        notes.push(warning.clone());
        Ok(Isolator {
            requested: mode,
            cgroups: None,
            fs,
            warnings: vec![warning],
            notes,
            cgroup_parent: None,
            systemd_scope: None,
        })
    }

    /// Warnings from setup, e.g. that auto fell back to none, and why.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// What isolation is in use, for the evidence record.
    pub fn describe(&self) -> IsolationInfo {
        IsolationInfo {
            requested: self.requested,
            mode: if self.cgroups.is_some() {
                crate::contract::Enforcer::Cgroup
            } else {
                crate::contract::Enforcer::None
            },
            cgroup_version: self.cgroups.as_ref().map(|b| b.version()),
            controllers: self
                .cgroups
                .as_ref()
                .map(|b| b.controllers())
                .unwrap_or_default(),
            parents: self
                .cgroups
                .as_ref()
                .map(|b| b.parents())
                .unwrap_or_default(),
            notes: self.notes.clone(),
            cgroup_parent: self.cgroup_parent.clone(),
            systemd_scope: self.systemd_scope.clone(),
        }
    }

    /// Run one attempt to its end. Never returns while a process of the attempt lives
    /// (unless it survived a bounded kill; then `leftovers` says so).
    pub async fn run(
        &self,
        spec: AttemptSpec,
        cancel: tokio::sync::watch::Receiver<Option<CancelReason>>,
    ) -> Result<AttemptOutcome, IsolateError> {
        attempt::run(self, spec, cancel, std::future::ready(Ok(()))).await
    }

    /// Like [`Isolator::run`], but the process is started only once `gate` resolves to
    /// Ok; cgroups, files and descriptors are set up meanwhile, so the caller's wait
    /// overlaps with them. A refusal or a cancel at the gate removes what was set up
    /// and starts nothing.
    pub async fn run_gated<G>(
        &self,
        spec: AttemptSpec,
        cancel: tokio::sync::watch::Receiver<Option<CancelReason>>,
        gate: G,
    ) -> Result<AttemptOutcome, IsolateError>
    where
        G: std::future::Future<Output = Result<(), String>>,
    {
        attempt::run(self, spec, cancel, gate).await
    }

    /// Remove `orchestrate-*` cgroups below our parents for which `is_stale(name)`
    /// holds, killing what is inside first; returns the names removed.
    pub fn sweep(&self, is_stale: &dyn Fn(&str) -> bool) -> Vec<String> {
        match &self.cgroups {
            Some(backend) => self.sweep_names(backend, self.list(), is_stale),
            None => Vec::new(),
        }
    }

    /// Like [`Isolator::sweep`], below parents a dead run of this host recorded in its
    /// journal (on cgroup v2 every orchestrator may have a home of its own). A path that
    /// is not a cgroup directory reached through no link is skipped.
    pub fn sweep_recorded(
        &self,
        parents: &[std::path::PathBuf],
        is_stale: &dyn Fn(&str) -> bool,
    ) -> Vec<String> {
        let Some(backend) = &self.cgroups else {
            return Vec::new();
        };
        let mut removed = Vec::new();
        for parent in parents {
            if backend.parents().contains(parent) {
                continue;
            }
            let Some(there) = cgroup::at_recorded(backend, self.fs.as_ref(), parent) else {
                continue;
            };
            let names = self.fs.subdirs(parent).unwrap_or_default();
            let names = names.into_iter().filter(|n| n.starts_with(PREFIX));
            removed.extend(self.sweep_names(&there, names.collect(), is_stale));
        }
        removed
    }

    /// Kill what is inside each stale attempt of `names` and remove its cgroups.
    fn sweep_names(
        &self,
        cg: &Cgroups,
        names: Vec<String>,
        is_stale: &dyn Fn(&str) -> bool,
    ) -> Vec<String> {
        let mut removed = Vec::new();
        for name in names.into_iter().filter(|n| is_stale(n)) {
            let group = AttemptCgroups::existing(cg, self.fs.clone(), &name);
            group.kill_all(std::time::Duration::from_secs(5));
            reaper::reap_orphans();
            if group.remove().is_empty() {
                removed.push(name);
            }
        }
        removed
    }

    /// `orchestrate-*` cgroups below our parents, sorted, each name once.
    pub fn list(&self) -> Vec<String> {
        let Some(backend) = &self.cgroups else {
            return Vec::new();
        };
        let mut names: Vec<String> = backend
            .parents()
            .iter()
            .flat_map(|p| self.fs.subdirs(p).unwrap_or_default())
            .filter(|n| n.starts_with(PREFIX))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The cgroup directories an attempt named `name` has or would have (for audits
    /// and tests).
    pub fn cgroup_paths(&self, name: &str) -> Vec<std::path::PathBuf> {
        match &self.cgroups {
            Some(b) => b.parents().iter().map(|p| p.join(name)).collect(),
            None => Vec::new(),
        }
    }
}
