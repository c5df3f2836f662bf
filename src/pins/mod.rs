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
pub(crate) mod git;
mod model;
mod pin;
mod report;
pub mod revisions;
mod tool;

use std::path::{Path, PathBuf};

pub use files::is_glob;
pub use model::cache_folder_name;
pub use pin::{pin_plan_text, PinError};
pub use report::{
    drift_table, pin_table, Details, Drift, FileDetails, GitDetails, ModelDetails, PinEntry,
    PinKind, PinReport, PinStatus, PythonDetails, SourceHash, SourceRole, ToolDetails,
    UntrackedFile,
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

/// Verify every declared pin against the host. Relative paths are taken from
/// `plan_dir`. Never fails as a whole. A run adds its source hashes with
/// [`hash_sources`].
pub fn verify(pins: &Pins, plan_dir: &Path) -> PinReport {
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
    PinReport::from_entries(entries)
}

/// Hash the run's sources into `report`: the plan as loaded (`plan_source`, the text
/// of `plan_path`), the running binary, each pinned repository's tree and each pinned
/// file (the last two from the verified entries, not read again).
pub fn hash_sources(report: &mut PinReport, plan_path: &Path, plan_source: &str) {
    let mut sources = vec![SourceHash {
        role: SourceRole::Plan,
        name: plan_path.to_string_lossy().into_owned(),
        digest: format!(
            "sha256:{}",
            crate::digest::sha256_bytes(plan_source.as_bytes())
        ),
    }];
    let mut errors = Vec::new();
    let mut hash = |role: SourceRole, path: &Path| match sha256_file(path) {
        Ok(d) => sources.push(SourceHash {
            role,
            name: path.to_string_lossy().into_owned(),
            digest: format!("sha256:{d}"),
        }),
        Err(e) => errors.push(format!("{}: {e}", path.display())),
    };
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
