//! Model pins: a Hugging Face hub cache folder at a pinned revision, or a plain folder
//! pinned by digest.
//!
//! Hub cache layout (what `huggingface_hub` writes):
//! ```text
//! models--ORG--NAME/
//!   refs/main                 text: the revision sha a ref points at
//!   snapshots/<revision>/...  the files, usually symlinks into ../../blobs/
//!   blobs/<etag>              contents; LFS blobs are named by their sha256
//! ```
//! Files are hashed through their symlinks (the content is what the model is), and
//! the folder digest is `digest::manifest_digest` over those followed entries. A blob
//! named by a 64-hex sha256 that does not hash to its own name is reported as drift:
//! the cache is corrupt.

use std::path::{Path, PathBuf};

use super::report::{Details, ModelDetails, PinEntry, PinKind, PinStatus};
use crate::digest::{manifest_digest, rel_path, sha256_files, ManifestEntry, Sha256Digest};
use crate::plan::model::ModelPin;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ModelError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}: a symlink to a folder is not followed (possible cycle)")]
    DirLink(String),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ModelError + '_ {
    move |source| ModelError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Files of a folder, symlinks to files followed: (relative path, absolute path,
/// symlink target name when it was a link).
fn list_files(root: &Path) -> Result<Vec<(String, PathBuf, Option<String>)>, ModelError> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(io_err(&dir))? {
            let entry = entry.map_err(io_err(&dir))?;
            let path = entry.path();
            let ft = entry.file_type().map_err(io_err(&path))?;
            let rel = rel_path(root, &path);
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_symlink() {
                let meta = std::fs::metadata(&path).map_err(io_err(&path))?;
                if meta.is_dir() {
                    return Err(ModelError::DirLink(path.display().to_string()));
                }
                let target = std::fs::read_link(&path).map_err(io_err(&path))?;
                let blob = target.file_name().map(|n| n.to_string_lossy().into_owned());
                out.push((rel, path, blob));
            } else if ft.is_file() {
                out.push((rel, path, None));
            }
        }
    }
    out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(out)
}

/// Hash a folder with symlinks followed: (digest, entries, corrupt blobs).
pub(crate) fn hash_followed(
    root: &Path,
) -> Result<(Sha256Digest, Vec<ManifestEntry>, Vec<String>), ModelError> {
    let files = list_files(root)?;
    let paths: Vec<PathBuf> = files.iter().map(|f| f.1.clone()).collect();
    let digests = sha256_files(&paths);
    let mut entries = Vec::with_capacity(files.len());
    let mut corrupt = Vec::new();
    for ((rel, path, blob), digest) in files.into_iter().zip(digests) {
        let sha256 = digest.map_err(io_err(&path))?;
        let size = std::fs::metadata(&path).map_err(io_err(&path))?.len();
        if let Some(expected) = blob.as_deref().and_then(Sha256Digest::parse) {
            if expected != sha256 {
                corrupt.push(rel.clone());
            }
        }
        entries.push(ManifestEntry {
            path: rel,
            sha256,
            size,
            symlink: false,
        });
    }
    Ok((manifest_digest(&entries), entries, corrupt))
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Resolve a declared revision (ref name, full sha or a unique prefix of 7+ digits) to
/// a snapshot present in the cache. `Err` says why it is absent.
fn resolve_revision(cache: &Path, revision: &str) -> Result<String, String> {
    let snapshots = cache.join("snapshots");
    let rev = revision.trim();
    if is_hex(rev) && rev.len() == 40 {
        let rev = rev.to_ascii_lowercase();
        return if snapshots.join(&rev).is_dir() {
            Ok(rev)
        } else {
            Err(format!("revision {rev} is not in {}", snapshots.display()))
        };
    }
    if is_hex(rev) && rev.len() >= 7 {
        let rev = rev.to_ascii_lowercase();
        let names: Vec<String> = std::fs::read_dir(&snapshots)
            .map_err(|e| format!("{}: {e}", snapshots.display()))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&rev))
            .collect();
        return match names.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(format!("no revision {rev}* in {}", snapshots.display())),
            _ => Err(format!("revision prefix {rev} is ambiguous")),
        };
    }
    // A ref name: refs/<name> holds the sha; a ref may not climb out of refs/.
    if rev.is_empty() || rev.split('/').any(|c| c.is_empty() || c == "..") {
        return Err(format!("{rev:?} is not a revision"));
    }
    let ref_file = cache.join("refs").join(rev);
    let sha = std::fs::read_to_string(&ref_file)
        .map_err(|e| format!("ref {rev} ({}): {e}", ref_file.display()))?;
    let sha = sha.trim().to_ascii_lowercase();
    if snapshots.join(&sha).is_dir() {
        Ok(sha)
    } else {
        Err(format!(
            "ref {rev} points at {sha}, which is not in snapshots/"
        ))
    }
}

/// The cache folder name `huggingface_hub` uses for a model id.
pub fn cache_folder_name(id: &str) -> String {
    format!("models--{}", id.replace('/', "--"))
}

/// Verify one model pin. `path` is already resolved against the plan folder.
pub(crate) fn verify_model(name: &str, pin: &ModelPin, path: &Path) -> PinEntry {
    // Empty strings read as "not pinned yet", like an empty file digest.
    let pin = &ModelPin {
        revision: pin.revision.clone().filter(|r| !r.trim().is_empty()),
        digest: pin.digest.clone().filter(|d| !d.trim().is_empty()),
        ..pin.clone()
    };
    let mut entry = PinEntry {
        kind: PinKind::Model,
        name: name.to_string(),
        declared: declared(pin),
        observed: None,
        status: PinStatus::Error,
        message: None,
        details: None,
    };
    if !path.is_dir() {
        entry.message = Some(format!("{} is not a folder", path.display()));
        return entry;
    }
    let mut problems = Vec::new();
    let mut status = PinStatus::Ok;

    let (root, revision) = match &pin.id {
        Some(id) => match hub_snapshot(id, pin, path, &mut entry, &mut status, &mut problems) {
            Some(found) => found,
            None => return entry,
        },
        None => {
            if pin.revision.is_some() {
                problems.push("revision ignored: no hub id".to_string());
            }
            (path.to_path_buf(), None)
        }
    };

    let (digest, files, corrupt) = match hash_followed(&root) {
        Ok(v) => v,
        Err(e) => {
            entry.message = Some(e.to_string());
            return entry;
        }
    };
    check_digest(pin, &digest, &mut status, &mut problems);
    if !corrupt.is_empty() {
        status = status.max(PinStatus::Drift);
        problems.push(format!(
            "blob content does not match its sha256 name: {}",
            corrupt.join(", ")
        ));
    }
    entry.observed = Some(match &revision {
        Some(r) => format!("{r} sha256:{digest}"),
        None => format!("sha256:{digest}"),
    });
    entry.status = status;
    if !problems.is_empty() {
        entry.message = Some(problems.join("; "));
    }
    entry.details = Some(Details::Model(ModelDetails {
        path: path.to_string_lossy().into_owned(),
        id: pin.id.clone(),
        revision,
        digest,
        files,
    }));
    entry
}

/// What the pin declares, revision then digest, as one text (`None`: nothing pinned).
fn declared(pin: &ModelPin) -> Option<String> {
    match (&pin.revision, &pin.digest) {
        (None, None) => None,
        (r, d) => Some(
            [r.as_deref(), d.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" "),
        ),
    }
}

/// A hub cache's snapshot at the pinned revision (`main` when none is), and its sha.
/// `None` when `entry` already says why there is none to hash: another model's cache,
/// or a revision the cache does not hold.
fn hub_snapshot(
    id: &str,
    pin: &ModelPin,
    path: &Path,
    entry: &mut PinEntry,
    status: &mut PinStatus,
    problems: &mut Vec<String>,
) -> Option<(PathBuf, Option<String>)> {
    let want = cache_folder_name(id);
    let have = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if have.starts_with("models--") && have != want {
        entry.message = Some(format!(
            "{} is the cache of another model (expected a folder named {want})",
            path.display()
        ));
        return None;
    }
    let wanted = pin.revision.as_deref().unwrap_or("main");
    match resolve_revision(path, wanted) {
        Ok(sha) => {
            if pin.revision.is_none() {
                *status = PinStatus::Unpinned;
                problems.push("no revision declared (observed refs/main)".to_string());
            }
            Some((path.join("snapshots").join(&sha), Some(sha)))
        }
        Err(why) => {
            // The pinned revision is absent: show what the cache has instead.
            // Without a declared revision "main" was the lookup that failed.
            if pin.revision.is_some() {
                entry.status = PinStatus::Drift;
                entry.observed = resolve_revision(path, "main").ok();
            } else {
                entry.status = PinStatus::Error;
            }
            entry.message = Some(why);
            None
        }
    }
}

/// The folder digest against the declared one: unpinned, drift, or a digest that is
/// not one.
fn check_digest(
    pin: &ModelPin,
    digest: &Sha256Digest,
    status: &mut PinStatus,
    problems: &mut Vec<String>,
) {
    match pin.digest.as_deref() {
        None => {
            if *status == PinStatus::Ok {
                *status = PinStatus::Unpinned;
            }
            problems.push("no digest declared".to_string());
        }
        Some(d) => match Sha256Digest::parse(d.trim()) {
            Some(want) if want == *digest => {}
            Some(_) => {
                *status = PinStatus::Drift;
                problems.push(format!("folder digest is sha256:{digest}"));
            }
            None => {
                *status = PinStatus::Error;
                problems.push(format!("digest {d:?} is not sha256:<64 hex>"));
            }
        },
    }
}
