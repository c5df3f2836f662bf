//! Pins: git revisions, model revisions, tool versions, Python packages and file
//! hashes, verified against the host before anything runs.
//!
//! ```text
//! plan::Pins ──verify()──> PinReport { entries, drift, sources }
//!                              │            │
//!                              │            └─ drift_table() -> CLI refuses (exit 3)
//!                              ├─ pin_table()  -> `orchestrate check`
//!                              ├─ serde        -> record.json "pins"
//!                              └─ pin_plan_text(source) -> `orchestrate pin` rewrite
//! ```
//!
//! One file per kind of pin (`git`, `model`, `tool` (tools and Python), `files`), each
//! turning a declared pin into a [`PinEntry`]; `verify` never fails as a whole, a pin
//! that cannot be observed is an entry with status `error`. Commands (git, tools,
//! Python) run through `exec` with a deadline, a clean environment (PATH, HOME, and
//! LANG=C) and bounded output, so a hung tool cannot hang `verify`. Every hash goes
//! through `crate::digest`.

mod exec;
mod files;
mod git;
mod model;
mod pin;
mod report;
mod tool;

use std::path::{Path, PathBuf};

pub use files::is_glob;
pub use model::cache_folder_name;
pub use pin::{pin_plan_text, PinError};
pub use report::{
    drift_table, pin_table, Details, Drift, FileDetails, GitDetails, ModelDetails, PinEntry,
    PinKind, PinReport, PinStatus, PythonDetails, SourceHash, SourceRole, ToolDetails,
};
pub use tool::{normalize_package, DEFAULT_TOOL_TIMEOUT};

use crate::digest::sha256_file;
use crate::plan::model::Pins;

fn resolve(plan_dir: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        plan_dir.join(p)
    }
}

/// Verify every declared pin against the host and hash the run's sources (the plan
/// file at `plan_source_path`, the running binary, each pinned repository's tree and
/// each pinned file). Relative paths are taken from `plan_dir`. Never fails as a whole.
pub fn verify(pins: &Pins, plan_dir: &Path, plan_source_path: &Path) -> PinReport {
    let mut entries = Vec::new();
    for (name, pin) in &pins.git {
        entries.push(git::verify_git(name, pin, &resolve(plan_dir, &pin.path)));
    }
    for (name, pin) in &pins.model {
        entries.push(model::verify_model(
            name,
            pin,
            &resolve(plan_dir, &pin.path),
        ));
    }
    for (name, pin) in &pins.tools {
        entries.push(tool::verify_tool(name, pin, plan_dir));
    }
    for (name, pin) in &pins.python {
        entries.extend(tool::verify_python(name, pin, plan_dir));
    }
    for (key, declared) in &pins.files {
        entries.push(files::verify_file(key, declared, plan_dir));
    }
    let mut report = PinReport::from_entries(entries);
    collect_sources(&mut report, plan_source_path);
    report
}

fn collect_sources(report: &mut PinReport, plan_source_path: &Path) {
    let mut sources = Vec::new();
    let mut errors = Vec::new();
    let mut hash = |role: SourceRole, path: &Path| match sha256_file(path) {
        Ok(d) => sources.push(SourceHash {
            role,
            name: path.to_string_lossy().into_owned(),
            digest: format!("sha256:{d}"),
        }),
        Err(e) => errors.push(format!("{}: {e}", path.display())),
    };
    hash(SourceRole::Plan, plan_source_path);
    match std::env::current_exe() {
        Ok(exe) => hash(SourceRole::Binary, &exe),
        Err(e) => errors.push(format!("orchestrator binary: {e}")),
    }
    for e in &report.entries {
        match &e.details {
            Some(Details::Git(g)) => sources.push(SourceHash {
                role: SourceRole::RepoTree,
                name: e.name.clone(),
                digest: format!("git-tree:{}", g.tree),
            }),
            Some(Details::File(f)) => sources.push(SourceHash {
                role: SourceRole::File,
                name: e.name.clone(),
                digest: format!("sha256:{}", f.digest),
            }),
            _ => {}
        }
    }
    report.sources = sources;
    report.source_errors = errors;
}
