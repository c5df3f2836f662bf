//! The record as one typed contract: `record.json` (`run`), the journal's events
//! (`journal`), the run header, an attempt's outcome with its one `Termination`
//! (`end`), checks by their metric (`check`), and every type those embed (pins,
//! results files, devices, timings, the plan's words). What makes these (`pins`,
//! `results`, `compare`, `isolate`, `backend`, `evidence`) and what reads them
//! (`report`, `verify`, `track`, `resume`, `recover`) use these types; they
//! re-export them where they were first defined.
//!
//! A leaf of the layers: serde, schemars, chrono and the leaf modules only; no I/O,
//! no async runtime, no system calls, no command line (`tests/it/layers.rs` holds
//! it to that), so a reader of records needs nothing else of the crate.

pub mod attempt;
pub mod check;
pub mod check_record;
pub mod contract;
pub mod devices;
pub mod digest;
pub mod end;
pub mod gpu;
pub mod job;
pub mod journal;
pub mod pins;
pub mod plan;
pub mod results;
pub mod run;
pub mod timing;

pub use check::CheckDetail;
pub use check_record::{Bounds, CheckValue};
pub use end::Termination;
pub use journal::{Event, JournalLine};
pub use plan::{Metric, StepKind};
pub use run::{AttemptRecord, CheckRecord, Record, RunHeader, StepRecord};
