//! The types that cross layers: what an attempt is asked and what came of it
//! (`attempt`). `isolate` and `backend` make them, `sched` and `evidence` read
//! them; why an attempt ended (`end`) and what a scheduler says of its job (`job`)
//! are the record's (`crate::record`), re-exported here for the code that makes
//! them. This module uses nothing above `mask`.

pub mod attempt;
pub use crate::record::{end, job};

pub use crate::fsx::cgroup_parent_path;
pub use attempt::{
    cancelled, AttemptOutcome, AttemptSpec, CancelReason, Enforcement, Enforcer, GpuWatch,
    IsolationInfo, Mode, NpuWatch, SystemdScope, Termination,
};
pub use job::{Confirmation, JobAccounting, JobFacts, JobFile, UNCONFIRMED};
