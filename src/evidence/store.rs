//! Writing a record folder's files: `record.json` in canonical form (RFC 8785) and
//! `record.sha256` with the digest of exactly those bytes, each written atomically.

use std::path::Path;

use super::record::Record;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot serialize the record: {0}")]
    Serialize(String),
    #[error("cannot write {path}: {error}")]
    Write { path: String, error: String },
}

/// Write `record.json` and `record.sha256` into `dir`.
pub fn write_record(dir: &Path, rec: &Record) -> Result<crate::digest::Sha256Digest, StoreError> {
    let bytes = super::jcs::to_canonical(rec).map_err(|e| StoreError::Serialize(e.to_string()))?;
    let digest = crate::digest::sha256_bytes(&bytes);
    for (name, data) in [
        ("record.json", bytes),
        (
            "record.sha256",
            format!("{}  record.json\n", digest.hex()).into_bytes(),
        ),
    ] {
        let path = dir.join(name);
        super::atomic::write_atomic(&path, &data).map_err(|e| StoreError::Write {
            path: path.display().to_string(),
            error: e.to_string(),
        })?;
    }
    Ok(digest)
}
