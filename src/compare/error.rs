//! Typed errors for reading tensors and running comparisons.

use std::path::PathBuf;

/// Why a tensor could not be read or a comparison could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// The file does not exist.
    #[error("{path}: file not found")]
    NotFound { path: PathBuf },
    /// The file exists but could not be opened or mapped.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the magic bytes of its format.
    #[error("{path}: not a {format} file (bad magic bytes)")]
    BadMagic { path: PathBuf, format: &'static str },
    /// The file is shorter than its header says.
    #[error("{path}: truncated: needs {needed} bytes, has {actual}")]
    Truncated {
        path: PathBuf,
        needed: u64,
        actual: u64,
    },
    /// The header could be read but makes no sense.
    #[error("{path}: bad header: {reason}")]
    BadHeader { path: PathBuf, reason: String },
    /// The element type is not one we convert.
    #[error("{path}: unsupported dtype {dtype:?}")]
    UnsupportedDtype { path: PathBuf, dtype: String },
    /// A raw file's size does not match its declared dtype and shape.
    #[error("{path}: file has {actual} bytes but dtype and shape need {needed}")]
    SizeMismatch {
        path: PathBuf,
        needed: u64,
        actual: u64,
    },
    /// The named tensor is not in the safetensors file.
    #[error("{path}: no tensor {name:?} (has: {available})")]
    NoSuchTensor {
        path: PathBuf,
        name: String,
        available: String,
    },
    /// A safetensors file holds several tensors and none was named.
    #[error("{path}: holds several tensors ({available}); name one as FILE:TENSOR")]
    AmbiguousTensor { path: PathBuf, available: String },
    /// A file's format is not known and no raw dtype was declared.
    #[error("{path}: unknown format: use .npy, .safetensors, or declare dtype (and shape) for a raw file")]
    UnknownFormat { path: PathBuf },
    /// Two tensors that must have the same shape do not.
    #[error("shape mismatch: actual {actual:?}, expected {expected:?}")]
    ShapeMismatch {
        actual: Vec<u64>,
        expected: Vec<u64>,
    },
    /// Two tensors that must have the same dtype do not.
    #[error("dtype mismatch: actual {actual}, expected {expected}")]
    DtypeMismatch { actual: String, expected: String },
    /// The check itself is malformed (wrong inputs for its metric, bad axis...).
    #[error("{0}")]
    Invalid(String),
}

/// Result alias for this module.
pub type Result<T> = std::result::Result<T, CompareError>;
