//! How an attempt was isolated: the mode asked, what the system enforced.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How attempts are isolated (mirrors the plan's `limits.isolation`, but owned here so
/// isolate does not depend on plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Cgroups when usable, else none (with a warning).
    Auto,
    /// Cgroups, or the run is refused.
    Cgroup,
    /// No cgroups: nothing is enforced or measured.
    None,
}

impl Mode {
    /// The word the plan and the record use (as serde writes it).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Cgroup => "cgroup",
            Mode::None => "none",
        }
    }
}

/// What enforced an attempt's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Enforcer {
    /// The attempt's own cgroups on this host.
    Cgroup,
    /// Nothing: process-group kill only.
    None,
    /// The Slurm job's allocation (its cgroups are the cluster's).
    Slurm,
}

impl Enforcer {
    /// The word the record uses (as serde writes it).
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcer::Cgroup => "cgroup",
            Enforcer::None => "none",
            Enforcer::Slurm => "slurm",
        }
    }
}

impl std::fmt::Display for Enforcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the system actually enforced for an attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Enforcement {
    /// `cgroup`, `none` or `slurm`.
    pub mode: Enforcer,
    /// 1 or 2 when cgroups were used.
    pub cgroup_version: Option<u8>,
    /// Whether the memory limit was set on the attempt's cgroup.
    pub memory: bool,
    /// Whether swap beyond the memory limit was turned off.
    pub swap_off: bool,
    /// Whether the pids limit was set on the attempt's cgroup.
    pub pids: bool,
    /// Whether the attempt was confined to the asked cpuset (`limits.cpus`).
    pub cpus: bool,
    /// Whether device access was restricted to the granted device nodes.
    pub devices: bool,
    /// Human-readable reasons for anything asked for but not enforced.
    pub notes: Vec<String>,
}

impl Enforcement {
    /// Nothing enforced yet under `mode`: each limit that gets set says so.
    pub fn nothing(mode: Enforcer) -> Enforcement {
        Enforcement {
            mode,
            cgroup_version: None,
            memory: false,
            swap_off: false,
            pids: false,
            cpus: false,
            devices: false,
            notes: Vec::new(),
        }
    }
}

/// What isolation this orchestrator uses, for the evidence record and audits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IsolationInfo {
    /// The mode asked for.
    pub requested: Mode,
    /// `cgroup` or `none`: what is actually used.
    pub mode: Enforcer,
    /// 1 or 2 when cgroups are used.
    pub cgroup_version: Option<u8>,
    /// Controllers the attempts' cgroups use.
    pub controllers: Vec<String>,
    /// Directories below which attempt cgroups are created (one per hierarchy).
    pub parents: Vec<PathBuf>,
    /// Anything worth knowing: fallbacks, missing swap accounting, moves done at setup.
    pub notes: Vec<String>,
    /// The cgroup an administrator delegated that attempts were created below
    /// (`[limits] cgroup_parent` or `--cgroup-parent`), as a path from each
    /// hierarchy's root; `recover` sweeps below it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_parent: Option<String>,
    /// The transient scope the user's systemd manager made for the run (cgroup v2, a
    /// user whose starting cgroup could not delegate), and what it delegated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub systemd_scope: Option<SystemdScope>,
}

/// A transient `Delegate=yes` scope asked of the user's systemd manager over D-Bus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SystemdScope {
    /// The unit, `orchestrate.run-<pid>.scope`.
    pub unit: String,
    /// Its cgroup, from the hierarchy's root.
    pub cgroup: String,
    /// The controllers it was given (a user manager gives memory, pids and cpu by
    /// default; cpuset only where an administrator allows it).
    pub delegated: Vec<String>,
    /// Each wanted controller it was not given, with what that means for the limits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_delegated: Vec<String>,
}
