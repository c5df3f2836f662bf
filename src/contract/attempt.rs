//! What one attempt is asked to do and what came of it, whatever runs it (the
//! cgroup isolator or a batch scheduler): the types `isolate` and `backend`
//! produce and `sched` and `evidence` consume.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use super::end::{cancelled, CancelReason, Termination};
use super::job::JobFacts;

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

/// One attempt to run.
#[derive(Debug, Clone)]
pub struct AttemptSpec {
    /// Unique name, used for the cgroup: `orchestrate-<run>-<step>-<attempt>`.
    pub name: String,
    /// Value of `ORCHESTRATE_ATTEMPT` in the attempt's environment.
    pub canary: String,
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The complete environment of the attempt (nothing is inherited implicitly);
    /// `ORCHESTRATE_ATTEMPT` is added by isolate.
    pub env: Vec<(String, String)>,
    pub memory: Option<u64>,
    /// Allow swap beyond `memory` (default false: swap off).
    pub swap: bool,
    pub pids: Option<u64>,
    /// cpuset list, e.g. "0-3".
    pub cpus: Option<String>,
    /// Device nodes the attempt may open (cgroup v1 devices controller); `None` means
    /// no device restriction.
    pub device_nodes: Option<Vec<PathBuf>>,
    pub timeout: Option<Duration>,
    /// Between SIGTERM and the cgroup kill.
    pub grace: Duration,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// Also copy output to the orchestrator's terminal.
    pub tee: bool,
    /// Secret values to mask in the logs as they are written (then output goes
    /// through pipes, as with `tee`).
    pub mask: Option<std::sync::Arc<crate::mask::Masker>>,
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

/// The measured result of an attempt. Figures the system did not measure are `None`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttemptOutcome {
    pub termination: Termination,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub wall: Duration,
    pub cpu_user: Option<Duration>,
    pub cpu_system: Option<Duration>,
    pub peak_memory_bytes: Option<u64>,
    pub oom_kills: Option<u64>,
    pub pids_limit_hit: Option<bool>,
    /// Time from the kill decision until the attempt was empty.
    pub kill_duration: Option<Duration>,
    pub cancel_reason: Option<CancelReason>,
    pub enforcement: Enforcement,
    /// Anything the attempt left that could not be cleaned (should be empty).
    pub leftovers: Vec<String>,
    /// The batch job it ran as (a Slurm attempt), else `None`.
    pub job: Option<JobFacts>,
    /// Logs the attempt was left without, before its job had opened them: the job
    /// may still create and write them, so they are not the record's to hash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unopened_logs: Vec<PathBuf>,
}

impl AttemptOutcome {
    pub fn succeeded(&self) -> bool {
        self.termination == Termination::Exited && self.exit_code == Some(0)
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

#[cfg(test)]
mod tests {
    use super::Mode;

    /// The record's word for a mode is serde's, never a variant's Debug name.
    #[test]
    fn a_modes_word_is_its_serde_name() {
        for m in [Mode::Auto, Mode::Cgroup, Mode::None] {
            assert_eq!(
                serde_json::to_string(&m).unwrap(),
                format!("\"{}\"", m.as_str())
            );
        }
    }
}
