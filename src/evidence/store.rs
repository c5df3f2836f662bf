//! Writing a record folder's files: `record.json` in canonical form (RFC 8785) and
//! `record.sha256` with the digest of exactly those bytes, each written atomically.

use std::path::Path;

use super::jcs::MAX_SAFE_INTEGER;
use super::record::Record;

/// The canonical bytes of `rec` with every out-of-range integer clamped and named in
/// its warnings.
fn clamped(rec: &Record) -> Result<Vec<u8>, StoreError> {
    fn walk(v: &mut serde_json::Value, at: &str, found: &mut Vec<String>) {
        match v {
            serde_json::Value::Number(n) => {
                let wide = n
                    .as_i64()
                    .map(i128::from)
                    .or_else(|| n.as_u64().map(i128::from));
                if let Some(i) = wide.filter(|i| i.abs() > MAX_SAFE_INTEGER) {
                    let c = i.clamp(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER) as i64;
                    found.push(format!(
                        "{at}: {i} is beyond what canonical JSON holds exactly; recorded as {c}"
                    ));
                    *v = serde_json::Value::from(c);
                }
            }
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter_mut().enumerate() {
                    walk(x, &format!("{at}/{i}"), found);
                }
            }
            serde_json::Value::Object(o) => {
                for (k, x) in o.iter_mut() {
                    walk(x, &format!("{at}/{k}"), found);
                }
            }
            _ => {}
        }
    }
    let mut v = serde_json::to_value(rec).map_err(|e| StoreError::Serialize(e.to_string()))?;
    let mut found = Vec::new();
    walk(&mut v, "", &mut found);
    if let Some(w) = v.get_mut("warnings").and_then(|w| w.as_array_mut()) {
        w.extend(found.into_iter().map(serde_json::Value::from));
    }
    Ok(super::jcs::to_canonical_vec(&v))
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot serialize the record: {0}")]
    Serialize(String),
    #[error("cannot write {path}: {error}")]
    Write { path: String, error: String },
}

/// Write `record.json` and `record.sha256` into `dir`. A record is always written:
/// an integer canonical JSON cannot hold exactly (beyond ±(2^53 - 1)) is clamped to
/// the nearest one it can, and the record's warnings say where and what it was.
pub fn write_record(dir: &Path, rec: &Record) -> Result<crate::digest::Sha256Digest, StoreError> {
    // In pieces, straight from the record: a 100 000-cell record is never joined
    // into one buffer, nor built as a value tree.
    let pieces = match super::jcs::to_canonical_pieces(rec) {
        Ok(p) => p,
        Err(super::jcs::JcsError::IntegerTooLarge(_)) => vec![clamped(rec)?],
        Err(e) => return Err(StoreError::Serialize(e.to_string())),
    };
    let digest = crate::digest::sha256_pieces(&pieces);
    let sums = format!("{}  record.json\n", digest.hex()).into_bytes();
    for (name, data) in [("record.json", pieces), ("record.sha256", vec![sums])] {
        let path = dir.join(name);
        super::atomic::write_atomic_pieces(&path, &data, 0o666).map_err(|e| StoreError::Write {
            path: path.display().to_string(),
            error: e.to_string(),
        })?;
    }
    Ok(digest)
}
