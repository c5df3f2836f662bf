//! The one error type of the devices module.

use std::path::PathBuf;

use super::holder::Holder;

/// What went wrong while loading an inventory, selecting devices or leasing them.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The inventory file is not valid; `line` and `col` are 1-based.
    #[error("{}:{line}:{col}: {message}", file.display())]
    Inventory {
        file: PathBuf,
        line: usize,
        col: usize,
        message: String,
    },
    /// A file or folder could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The host has fewer devices of a kind than a request wants, and the request may
    /// not be simulated. The CLI maps this to exit code 3.
    #[error(
        "request needs {wanted} `{kind}` device(s) but the host has {found}; {how_to_declare}"
    )]
    Missing {
        kind: String,
        wanted: u32,
        found: u32,
        how_to_declare: String,
    },
    /// No GPU in MIG mode has enough instances of the profile a request names (a
    /// MIG instance is never simulated). The CLI maps this to exit code 3.
    #[error(
        "request needs MIG instances of profile `{profile}` on {wanted} GPU(s) but {found} \
         GPU(s) in MIG mode have one; a MIG instance is never simulated: put a GPU in MIG mode and \
         make instances of that profile (nvidia-smi mig -cgi)"
    )]
    MissingMig {
        profile: String,
        wanted: u32,
        found: u32,
    },
    /// Every candidate was held by someone else for the whole wait.
    #[error("devices for request `{request}` are busy: {}", holders_text(holders))]
    Busy {
        request: String,
        holders: Vec<Holder>,
    },
    /// The wait was given up because the run is ending.
    #[error("stopped waiting for devices of request `{request}`: the run is ending")]
    Stopped { request: String },
    /// The request cannot be satisfied by any inventory, whatever it holds.
    #[error("invalid device request `{request}`: {reason}")]
    InvalidRequest { request: String, reason: String },
}

impl DeviceError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DeviceError::Io {
            path: path.into(),
            source,
        }
    }
}

fn holders_text(holders: &[Holder]) -> String {
    if holders.is_empty() {
        return "holder unknown".to_string();
    }
    holders
        .iter()
        .map(Holder::describe)
        .collect::<Vec<_>>()
        .join("; ")
}
