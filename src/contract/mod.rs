//! The types that cross layers: what an attempt is asked and what came of it
//! (`attempt`), why it ended (`end`), what a scheduler says of its job (`job`). `isolate` and `backend`
//! make them, `sched` and `evidence` read them; this module uses nothing above
//! `mask`.

pub mod attempt;
pub mod end;
pub mod job;

pub use crate::fsx::cgroup_parent_path;
pub use attempt::{
    cancelled, AttemptOutcome, AttemptSpec, CancelReason, Enforcement, Enforcer, IsolationInfo,
    Mode, SystemdScope, Termination,
};
pub use job::{Confirmation, JobAccounting, JobFacts, JobFile, UNCONFIRMED};
