//! File pins: `"uv.lock" = "sha256:..."` for one file, or a glob
//! (`"locks/*.txt" = "sha256:..."`) whose digest is `digest::manifest_digest` over the
//! matched regular files, each listed by its path relative to the plan folder (or its
//! absolute path when outside it), sorted by bytes: the same `sha256sum`-style
//! manifest a reviewer can rebuild with
//! `cd PLAN_DIR && sha256sum locks/*.txt | LC_ALL=C sort -k2 | sha256sum`.

use std::path::Path;

use super::report::{Details, FileDetails, PinEntry, PinKind, PinStatus};
use crate::digest::{manifest_digest, rel_path, sha256_file, ManifestEntry, Sha256Digest};

/// Whether a file pin key is a glob.
pub fn is_glob(key: &str) -> bool {
    key.contains(['*', '?', '['])
}

/// A manifest path: relative to the plan folder (`/`-separated), else absolute.
fn display_path(plan_dir: &Path, path: &Path) -> String {
    if path.starts_with(plan_dir) {
        rel_path(plan_dir, path)
    } else {
        path.to_string_lossy().into_owned()
    }
}

/// One manifest entry: the file's digest and size (one stat, after hashing).
fn entry(plan_dir: &Path, path: &Path) -> Result<ManifestEntry, String> {
    let sha256 = sha256_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    Ok(ManifestEntry {
        path: display_path(plan_dir, path),
        sha256,
        size,
        symlink: false,
    })
}

/// The digest of a file pin key and what it covered.
pub(crate) fn observe_file(
    key: &str,
    plan_dir: &Path,
) -> Result<(Sha256Digest, Vec<ManifestEntry>), String> {
    if !is_glob(key) {
        let e = entry(plan_dir, &super::resolve(plan_dir, Path::new(key)))?;
        return Ok((e.sha256, vec![e]));
    }
    // The plan folder's own name may hold glob characters: escape it.
    let pattern = if Path::new(key).is_absolute() {
        key.to_string()
    } else {
        format!(
            "{}/{}",
            glob::Pattern::escape(&plan_dir.to_string_lossy()),
            key
        )
    };
    let paths = glob::glob(&pattern).map_err(|e| format!("glob {key:?}: {e}"))?;
    let mut entries = Vec::new();
    for p in paths {
        let p = p.map_err(|e| format!("glob {key:?}: {e}"))?;
        if p.is_file() {
            entries.push(entry(plan_dir, &p)?);
        }
    }
    if entries.is_empty() {
        return Err(format!("glob {key:?} matches no file"));
    }
    entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    Ok((manifest_digest(&entries), entries))
}

/// Verify one file pin; an empty declared value means "not pinned yet".
pub(crate) fn verify_file(key: &str, declared: &str, plan_dir: &Path) -> PinEntry {
    let declared = declared.trim();
    let mut entry = PinEntry {
        kind: PinKind::File,
        name: key.to_string(),
        declared: (!declared.is_empty()).then(|| declared.to_string()),
        observed: None,
        status: PinStatus::Error,
        message: None,
        details: None,
    };
    let (digest, files) = match observe_file(key, plan_dir) {
        Ok(v) => v,
        Err(why) => {
            entry.message = Some(why);
            return entry;
        }
    };
    entry.observed = Some(format!("sha256:{digest}"));
    (entry.status, entry.message) = if declared.is_empty() {
        (PinStatus::Unpinned, Some("no digest declared".to_string()))
    } else {
        match Sha256Digest::parse(declared) {
            Some(want) if want == digest => (PinStatus::Ok, None),
            Some(_) => (PinStatus::Drift, Some("content changed".to_string())),
            None => (
                PinStatus::Error,
                Some(format!("{declared:?} is not sha256:<64 hex>")),
            ),
        }
    };
    entry.details = Some(Details::File(FileDetails {
        glob: is_glob(key),
        files,
        digest,
    }));
    entry
}
