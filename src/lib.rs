//! orchestrate: a declarative experiment orchestrator for accelerator research.
//!
//! Data flows one way and the modules follow it:
//! `plan -> pins -> devices -> sched -> isolate/backend -> compare -> evidence ->
//! report`. As code, the modules stand in [`LAYERS`]: each uses only modules of
//! lower layers, so `report` reads records only, `evidence` knows nothing of
//! templates or backends, `isolate` knows nothing of plans, and no two modules use
//! each other (`tests/it/layers.rs` checks every `crate::` path).

pub mod audit;
pub mod backend;
pub mod cache;
pub mod compare;
pub mod contract;
pub mod devices;
pub mod digest;
pub mod evidence;
pub mod exit;
pub mod fsx;
pub mod isolate;
pub mod mask;
pub mod pins;
pub mod plan;
pub mod record;
pub mod recover;
pub mod report;
pub mod results;
pub mod run;
pub mod sched;
pub mod sys;
pub mod term;
pub mod time;
pub mod track;
pub mod units;

/// What `--version` says after the program's name: the package version and the
/// commit the binary was built from, with that commit's date (`build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("ORCHESTRATE_COMMIT"),
    ")"
);

/// The modules by layer, lowest first. A module uses only modules of lower layers
/// (not its own layer's): leaves; the record's types (`record`, serde only, no I/O);
/// more leaves; the plan; what the plan names (pins, devices,
/// results files, tensor comparisons); the types that cross layers (`contract`);
/// the cgroup isolator; the evidence record and the backends beside each other;
/// the step cache; the scheduler; what reads a finished run (audit, reports); the
/// run; and what acts on runs (recover, exit codes).
pub const LAYERS: &[&[&str]] = &[
    &["units", "sys", "time", "term"],
    &["record"],
    &["fsx"],
    &["digest"],
    &["mask"],
    &["plan"],
    &["pins", "devices", "results", "compare"],
    &["contract"],
    &["isolate"],
    &["evidence", "backend"],
    &["cache"],
    &["sched"],
    &["audit", "report"],
    &["run", "track"],
    &["recover", "exit"],
];
