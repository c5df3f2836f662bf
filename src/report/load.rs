//! Reading a record folder: the digest line is checked against the bytes of
//! `record.json` before anything is parsed, so a report never shows a changed record
//! as if it were the run's evidence.

use std::path::Path;

use super::error::ReportError;
use crate::record::run::Record;

/// A record read from its folder, with the digest of its bytes.
#[derive(Debug, Clone)]
pub struct LoadedRecord {
    pub record: Record,
    /// sha256 of `record.json` as read (hex).
    pub digest: String,
    /// The plan copy kept beside the record, when present and matching the record's
    /// plan digest.
    pub plan_toml: Option<String>,
}

/// The most `record.json` may hold (a 100 000-step record is well under it).
const MAX_RECORD: u64 = 1 << 30;

/// A regular file of the record folder (a link or FIFO put there is refused, not
/// followed or waited on), at most `max` bytes.
fn read(path: &Path, max: u64) -> Result<Vec<u8>, ReportError> {
    crate::digest::read_regular(path, crate::digest::Follow::No, max).map_err(|e| {
        ReportError::Read {
            path: path.to_path_buf(),
            error: e.to_string(),
        }
    })
}

/// Read `record.json` from `dir`; unless `no_verify`, refuse it when its sha256 is not
/// the one in `record.sha256`.
pub fn load(dir: &Path, no_verify: bool) -> Result<LoadedRecord, ReportError> {
    load_with_bytes(dir, no_verify).map(|(loaded, _)| loaded)
}

/// [`load`], with the bytes of `record.json` as read (what a copy of the record
/// must hold to keep its digest).
pub fn load_with_bytes(
    dir: &Path,
    no_verify: bool,
) -> Result<(LoadedRecord, Vec<u8>), ReportError> {
    let bytes = read(&dir.join("record.json"), MAX_RECORD)?;
    let found = crate::digest::sha256_bytes(&bytes).hex();
    if !no_verify {
        let sha_path = dir.join("record.sha256");
        let line = String::from_utf8_lossy(&read(&sha_path, 4096)?).into_owned();
        let expected = parse_digest_line(&line).ok_or(ReportError::BadDigestFile {
            path: sha_path.clone(),
        })?;
        if expected != found {
            return Err(ReportError::DigestMismatch { expected, found });
        }
    }
    let record: Record =
        serde_json::from_slice(&bytes).map_err(|e| ReportError::Parse(e.to_string()))?;
    // The plan copy only counts when it is the plan the record names.
    let plan_toml = read(&dir.join("plan.toml"), 64 << 20)
        .ok()
        .filter(|p| crate::digest::sha256_bytes(p).hex() == record.run.plan.sha256)
        .and_then(|p| String::from_utf8(p).ok());
    Ok((
        LoadedRecord {
            record,
            digest: found,
            plan_toml,
        },
        bytes,
    ))
}

/// `<64 hex>  record.json` -> the hex digest, lowercased.
fn parse_digest_line(s: &str) -> Option<String> {
    let mut parts = s.split_whitespace();
    let hex = parts.next()?.to_ascii_lowercase();
    let name = parts.next()?.trim_start_matches('*');
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) && name == "record.json")
        .then_some(hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_line() {
        let h = "a".repeat(64);
        assert_eq!(
            parse_digest_line(&format!("{h}  record.json\n")),
            Some(h.clone())
        );
        assert_eq!(parse_digest_line(&format!("{h}  other.json")), None);
        assert_eq!(parse_digest_line("abc  record.json"), None);
    }
}
