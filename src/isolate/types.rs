//! The isolate API's errors; what an attempt is asked and what came of it are the
//! backend-neutral types of `contract`, re-exported here.

use std::path::PathBuf;

pub use crate::contract::{
    cgroup_parent_path, AttemptOutcome, AttemptSpec, CancelReason, Enforcement, IsolationInfo,
    JobFacts, JobFile, Mode, Termination,
};

/// Why isolation could not be set up or an attempt could not be started.
#[derive(Debug, thiserror::Error)]
pub enum IsolateError {
    /// cgroups were required but no usable place exists; the text says exactly why
    /// (not root, no delegation, controller missing, not writable, not mounted).
    #[error("cgroup isolation impossible: {0}")]
    Unavailable(String),
    /// A cgroup file operation failed.
    #[error("cgroup operation failed on {path}: {source}")]
    Cgroup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The attempt's cgroup already exists (names must be unique per attempt).
    #[error("cgroup {0} already exists")]
    Exists(PathBuf),
    /// The attempt spec cannot be run as given.
    #[error("invalid attempt: {0}")]
    InvalidSpec(String),
    /// Opening the attempt's output files failed.
    #[error("cannot open output file {path}: {source}")]
    Output {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The caller's start gate refused; nothing was started.
    #[error("not started: {0}")]
    GateRefused(String),
    /// Cancelled while waiting at the start gate; nothing was started.
    #[error("cancelled before its start ({0:?})")]
    CancelledBeforeStart(CancelReason),
    /// Spawning the attempt's main process failed.
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// The delegated cgroup parent, or a cgroup above it, is another user's to
    /// change: they could freeze, kill or move what runs there.
    #[error("cgroup parent refused: {0}")]
    ForeignParent(String),
    /// A system call needed by the isolation machinery failed.
    #[error("{what}: {source}")]
    Os {
        what: String,
        #[source]
        source: std::io::Error,
    },
}
