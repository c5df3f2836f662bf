//! What can go wrong while reading a record folder or rendering it.

use std::path::PathBuf;

/// An error of `render` or `diff`, with what the user can do about it in its message.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot read {path}: {error}")]
    Read { path: PathBuf, error: String },
    #[error("{path} is not a `<hex>  record.json` digest line")]
    BadDigestFile { path: PathBuf },
    #[error(
        "record.json does not match record.sha256 (expected {expected}, found {found}): \
         the record was changed after the run; `orchestrate verify` shows what, \
         `--no-verify` renders it anyway"
    )]
    DigestMismatch { expected: String, found: String },
    #[error("record.json is not a record this build can read: {0}")]
    Parse(String),
    #[error("template {name}: {error}")]
    Template { name: String, error: String },
    #[error("cannot serialize the report: {0}")]
    Serialize(String),
}
