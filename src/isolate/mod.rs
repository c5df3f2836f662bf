//! One command as one isolated attempt: its own cgroup, measured, ended with nothing
//! left behind. Knows nothing about plans.

pub mod types;

pub use types::*;

// TEMPORARY local stub (not committed): lets the scheduler compile before isolate lands.
mod stub;
pub use stub::*;
