//! orchestrate: a declarative experiment orchestrator for accelerator research.
//!
//! Data flows one way and the modules follow it:
//! `plan -> pins -> devices -> sched -> isolate -> compare -> evidence -> report`.
//! Nothing downstream reaches back upstream: `report` reads records only, `evidence`
//! knows nothing of templates, `isolate` knows nothing of plans.

pub mod audit;
pub mod backend;
pub mod cache;
pub mod compare;
pub mod devices;
pub mod digest;
pub mod evidence;
pub mod exit;
pub mod fsx;
pub mod isolate;
pub mod mask;
pub mod pins;
pub mod plan;
pub mod recover;
pub mod report;
pub mod results;
pub mod run;
pub mod sched;
pub mod sys;
pub mod units;
