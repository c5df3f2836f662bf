//! The record's digests: a SHA-256 as 64 hex digits, a folder manifest's entry.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A SHA-256 digest, shown and stored as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256Digest(pub [u8; 32]);

impl Sha256Digest {
    pub fn hex(&self) -> String {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(char::from_digit((b >> 4) as u32, 16).unwrap_or('0'));
            s.push(char::from_digit((b & 15) as u32, 16).unwrap_or('0'));
        }
        s
    }

    /// Parse 64 hex digits, optionally prefixed with `sha256:`.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.strip_prefix("sha256:").unwrap_or(s);
        if s.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, chunk) in s.as_bytes().chunks(2).enumerate() {
            let hi = (chunk[0] as char).to_digit(16)?;
            let lo = (chunk[1] as char).to_digit(16)?;
            out[i] = (hi * 16 + lo) as u8;
        }
        Some(Sha256Digest(out))
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl schemars::JsonSchema for Sha256Digest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Sha256Digest".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A SHA-256 digest: 64 lowercase hex digits.",
            "type": "string",
            "pattern": "^[0-9a-f]{64}$"
        })
    }
}

impl Serialize for Sha256Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.hex())
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Sha256Digest::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("not a sha256 hex digest: {s:?}")))
    }
}

/// One entry of a folder manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ManifestEntry {
    /// Path relative to the folder, `/`-separated.
    pub path: String,
    /// sha256 of the file's contents (of its target text, for a symbolic link).
    pub sha256: Sha256Digest,
    /// Size in bytes (of the target text, for a symbolic link).
    pub size: u64,
    /// True for a symbolic link (digest of its target text, size of that text).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub symlink: bool,
}
