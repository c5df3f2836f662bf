//! What `verify` observed of the plan's pins, and each `[revisions]` revision as the
//! run used it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::digest::{ManifestEntry, Sha256Digest};

/// What a pin pins.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PinKind {
    /// A git repository: HEAD, tree and dirty state.
    Git,
    /// A model folder (hub cache snapshot or plain folder), by digest.
    Model,
    /// A tool, by what its version command prints.
    Tool,
    /// A Python package, by the version an interpreter has installed.
    Python,
    /// A file or glob, by digest.
    File,
}

impl PinKind {
    /// The lowercase name used in tables and records.
    pub fn as_str(&self) -> &'static str {
        match self {
            PinKind::Git => "git",
            PinKind::Model => "model",
            PinKind::Tool => "tool",
            PinKind::Python => "python",
            PinKind::File => "file",
        }
    }
}

/// The verdict on one pin. Ordered by severity, weakest first, so checks can take
/// the maximum of several findings.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PinStatus {
    /// Declared and observed agree.
    Ok,
    /// Agrees, but only because the pin allows a dirty work tree.
    Allowed,
    /// Nothing declared yet: observed only (`orchestrate pin` fills it).
    Unpinned,
    /// Declared and observed differ.
    Drift,
    /// Could not be observed (repository missing, command failed, ...).
    Error,
}

impl PinStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            PinStatus::Ok => "ok",
            PinStatus::Allowed => "allowed",
            PinStatus::Unpinned => "unpinned",
            PinStatus::Drift => "drift",
            PinStatus::Error => "error",
        }
    }

    /// Whether this status refuses a run (unless drift is allowed).
    pub fn refuses(&self) -> bool {
        matches!(self, PinStatus::Drift | PinStatus::Error)
    }
}

/// One verified pin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PinEntry {
    /// What the pin pins.
    pub kind: PinKind,
    /// The pin's name in the plan; `PIN/PACKAGE` for Python packages, the path or glob
    /// for files.
    pub name: String,
    /// What the plan declares, in one line (`None` when unpinned).
    pub declared: Option<String>,
    /// What the host has, in one line (`None` when it could not be observed).
    pub observed: Option<String>,
    /// The verdict on the pin.
    pub status: PinStatus,
    /// Why the status is not `ok`, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Everything observed beyond the one-line summary, by kind; absent when nothing
    /// could be observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Details>,
}

/// Everything observed for a pin, beyond the one-line summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Details {
    /// What a git pin observed.
    Git(GitDetails),
    /// What a model pin observed.
    Model(ModelDetails),
    /// What a tool pin observed.
    Tool(ToolDetails),
    /// What one package of a Python pin observed.
    Python(PythonDetails),
    /// What a file pin observed.
    File(FileDetails),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitDetails {
    /// The repository path as used (absolute).
    pub path: String,
    /// `git rev-parse --show-toplevel`.
    pub toplevel: String,
    /// Full HEAD sha.
    pub head: String,
    /// `git rev-parse HEAD^{tree}`: the committed sources' hash.
    pub tree: String,
    /// Whether a tracked file differs from HEAD, staged or not (what
    /// `git describe --dirty` means; untracked files alone do not count).
    pub dirty: bool,
    /// sha256 of `git diff HEAD --binary`, when dirty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_sha256: Option<Sha256Digest>,
    /// Untracked (not ignored) files, relative to the top level.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untracked: Vec<String>,
    /// The untracked files with their digests (the first 10 000).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untracked_files: Vec<UntrackedFile>,
    /// The pin's `allow_dirty`: a dirty tree then gives `allowed`, not `drift`.
    pub allow_dirty: bool,
    /// The pin's `untracked = "refuse"`: untracked files are then drift.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untracked_refused: bool,
}

/// An untracked file of a git tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UntrackedFile {
    /// Its path relative to the top level.
    pub path: String,
    /// sha256 of its content; absent for what is not a regular file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<Sha256Digest>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelDetails {
    /// The model folder, resolved against the plan folder: a hub cache folder
    /// `models--ORG--NAME`, or a plain folder.
    pub path: String,
    /// Hub id, `ORG/NAME`; absent for a plain folder pinned by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The full snapshot revision the declared one resolved to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Manifest digest over the files' (followed) contents.
    pub digest: Sha256Digest,
    /// One entry per file, paths relative to the snapshot (or plain) folder.
    pub files: Vec<ManifestEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolDetails {
    /// The command run to observe the tool, as argv (no shell), in the plan folder.
    pub command: Vec<String>,
    /// Exit code (`None`: killed by a signal).
    pub exit_code: Option<i32>,
    /// stdout followed by stderr, lossily decoded and cut to a few KiB.
    pub output: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PythonDetails {
    /// The pin's name in the plan.
    pub pin: String,
    /// The requirement as written.
    pub requirement: String,
    /// The package name, PEP 503-normalized.
    pub package: String,
    /// The interpreter asked, as the pin names it (e.g. `python3`, `.venv/bin/python`).
    pub python: String,
    /// `sys.executable` as the interpreter reported it; absent when it could not be
    /// asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
    /// `sys.version` as the interpreter reported it; absent when it could not be asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileDetails {
    /// True when the key is a glob and the digest is a manifest digest.
    pub glob: bool,
    /// The matched files, paths relative to the plan folder.
    pub files: Vec<ManifestEntry>,
    /// The file's sha256, or for a glob the manifest digest of the matched files.
    pub digest: Sha256Digest,
}

/// A pin that refuses the run: a copy of the entry's summary, listed apart so the CLI
/// and the record can show it first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Drift {
    /// What the pin pins.
    pub kind: PinKind,
    /// The pin's name, as in its entry.
    pub name: String,
    /// What the plan declares, in one line (null when unpinned).
    pub declared: Option<String>,
    /// What the host has, in one line (null when it could not be observed).
    pub observed: Option<String>,
    /// `drift` or `error`.
    pub status: PinStatus,
    /// Why the pin refuses the run, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What a source hash is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceRole {
    /// The plan file as read.
    Plan,
    /// The orchestrator binary that ran.
    Binary,
    /// A pinned repository's committed tree (a git tree id, not a sha256).
    RepoTree,
    /// A pinned file (lock file) or glob.
    File,
}

/// One hash of something the run's result depends on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SourceHash {
    /// What the hash is of.
    pub role: SourceRole,
    /// Pin name, or the path for the plan and the binary.
    pub name: String,
    /// `sha256:<hex>`, or `git-tree:<hex>` for a repository.
    pub digest: String,
}

/// The outcome of [`crate::pins::verify`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PinReport {
    /// Every pin: git, model, tool, python, file; by name within a kind (Python
    /// packages in their declared order).
    pub entries: Vec<PinEntry>,
    /// The entries that refuse a run (`drift` or `error`).
    pub drift: Vec<Drift>,
    /// Plan, binary, repository trees and pinned files.
    pub sources: Vec<SourceHash>,
    /// Hashes that could not be taken (the binary unreadable, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_errors: Vec<String>,
}

impl PinReport {
    /// True when some pin refuses the run.
    pub fn has_drift(&self) -> bool {
        !self.drift.is_empty()
    }

    /// Build the report from entries; the drift list is derived, never set by hand.
    pub fn from_entries(entries: Vec<PinEntry>) -> Self {
        let drift = entries
            .iter()
            .filter(|e| e.status.refuses())
            .map(|e| Drift {
                kind: e.kind,
                name: e.name.clone(),
                declared: e.declared.clone(),
                observed: e.observed.clone(),
                status: e.status,
                message: e.message.clone(),
            })
            .collect();
        PinReport {
            entries,
            drift,
            sources: Vec::new(),
            source_errors: Vec::new(),
        }
    }

    /// The entry of a kind and name.
    pub fn entry(&self, kind: PinKind, name: &str) -> Option<&PinEntry> {
        self.entries
            .iter()
            .find(|e| e.kind == kind && e.name == name)
    }
}

/// One revision as the run used it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RevisionRecord {
    /// Its name in `[revisions]`.
    pub name: String,
    /// The repository's top level.
    pub repo: String,
    /// What the plan asked for (`HEAD~1`, a branch, a sha).
    pub requested: String,
    /// The full commit sha it resolved to.
    pub commit: String,
    /// `<commit>^{tree}`.
    pub tree: String,
    /// The folder its steps ran in (`${revision.dir}`).
    pub dir: String,
    /// "checkout": a clean shared clone under the work folder; "worktree": the
    /// user's working tree as it was.
    pub mode: String,
    /// Whether this is the revision the others are classified against.
    pub baseline: bool,
    /// For the working tree: whether a tracked file differed from the commit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dirty: bool,
    /// For a dirty working tree: sha256 of `git diff HEAD --binary`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_sha256: Option<Sha256Digest>,
    /// For the working tree: its untracked files, with digests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untracked: Vec<UntrackedFile>,
}
