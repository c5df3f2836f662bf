//! What canonical JSON refuses: `serde_json` turns NaN and infinities into `null`
//! without a word, so the canonical writer (`jcs_stream`) refuses them, and
//! integers beyond ±(2^53-1), with these errors.

use serde::ser;

/// Largest integer that an IEEE 754 double holds exactly (2^53 - 1): JCS numbers
/// are doubles, so larger integers would not survive a round trip through them.
pub const MAX_SAFE_INTEGER: i128 = (1 << 53) - 1;

/// Why a value cannot be canonicalized.
#[derive(Debug, thiserror::Error)]
pub enum JcsError {
    /// A float was NaN or infinite: JSON has no such number (write it with
    /// `evidence::float`, which stores it as a string).
    #[error("non-finite number {0} cannot be written as JSON (use evidence::float to store it as a string)")]
    NonFinite(f64),
    /// An integer outside ±(2^53-1) would lose digits as a double.
    #[error("integer {0} is outside ±(2^53-1) and would lose precision in canonical JSON")]
    IntegerTooLarge(i128),
    /// The value could not be serialized at all (a map with non-string keys, a
    /// failing `Serialize` impl).
    #[error("cannot serialize to JSON: {0}")]
    Serialize(String),
}

impl ser::Error for JcsError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        JcsError::Serialize(msg.to_string())
    }
}
