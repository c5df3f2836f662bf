//! Declared outputs (artifacts) in the work folder, re-hashed.

use super::*;

/// Whether `id` has the shape of a run id (`YYYYMMDDTHHMMSSZ-xxxxxx`).
pub(super) fn is_run_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() == 23
        && b[8] == b'T'
        && b[15] == b'Z'
        && b[16] == b'-'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit)
        && b[17..].iter().all(u8::is_ascii_hexdigit)
}

/// The run's work folder, if the record names one verify may read: absolute, named
/// for the run id (a crafted record cannot point verify at `/root`).
pub(super) fn work_folder(rec: &Record) -> Result<PathBuf, String> {
    let work = Path::new(&rec.run.options.work);
    if !work.is_absolute() {
        return Err(format!(
            "the work folder {} is not absolute",
            work.display()
        ));
    }
    if !is_run_id(&rec.run_id) || work.file_name().and_then(|n| n.to_str()) != Some(&rec.run_id) {
        return Err(format!(
            "the work folder {} is not named for the run id {:?}",
            work.display(),
            rec.run_id
        ));
    }
    Ok(work.to_path_buf())
}

/// (d) declared outputs with a digest: re-hash what is there, report what is gone.
/// Only inside the run's work folder, never through a link that leaves it.
pub(super) fn check_outputs(rec: &Record, rep: &mut VerifyReport) {
    let outputs: Vec<&OutputRecord> = current_outputs(rec)
        .into_iter()
        .filter(|o| o.sha256.is_some())
        .collect();
    if outputs.is_empty() {
        return;
    }
    let work = match work_folder(rec) {
        Ok(w) => w,
        Err(why) => {
            for o in outputs {
                rep.add(
                    FindingKind::NotChecked,
                    o.path.clone(),
                    format!("not read: {why}"),
                );
            }
            return;
        }
    };
    let mut files: Vec<(&OutputRecord, PathBuf)> = Vec::new();
    for o in outputs {
        let Some(p) = locate(&work, o, rep) else {
            continue;
        };
        let Some(meta) = artifact_meta(&p, o, rep) else {
            continue;
        };
        if check_kind(o, &p, &meta, rep) {
            files.push((o, p));
        }
    }
    hash_files(&files, rep);
}

/// Where `o` lies in `work`, or `None` (reported) where reading would leave it.
fn locate(work: &Path, o: &OutputRecord, rep: &mut VerifyReport) -> Option<PathBuf> {
    let p = work.join(&o.path); // an absolute path replaces `work`
    let rel = match p.strip_prefix(work) {
        Ok(r) => r.to_string_lossy().into_owned(),
        Err(_) => {
            rep.add(
                FindingKind::NotChecked,
                o.path.clone(),
                "outside the run's work folder: not read",
            );
            return None;
        }
    };
    match contained(work, &rel) {
        Ok(p) => Some(p),
        Err(why) if work.exists() => {
            rep.add(
                FindingKind::NotChecked,
                o.path.clone(),
                format!("not read: {why}"),
            );
            None
        }
        // No work folder left to escape: the path as is, to be found absent.
        Err(_) => Some(p),
    }
}

/// The artifact's own metadata (no link followed), or `None` with it reported.
fn artifact_meta(p: &Path, o: &OutputRecord, rep: &mut VerifyReport) -> Option<std::fs::Metadata> {
    let expected = o.sha256.as_deref().unwrap_or("");
    match std::fs::symlink_metadata(p) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            rep.add(
                FindingKind::AbsentArtifact,
                o.path.clone(),
                format!("artifact is gone (recorded sha256 {expected})"),
            );
            None
        }
        Err(e) => {
            rep.add(
                FindingKind::Mismatch,
                o.path.clone(),
                format!("cannot read the artifact: {e}"),
            );
            None
        }
    }
}

/// The recorded kind against the disk; true for a file, left to hash in parallel.
fn check_kind(
    o: &OutputRecord,
    p: &Path,
    meta: &std::fs::Metadata,
    rep: &mut VerifyReport,
) -> bool {
    let ft = meta.file_type();
    match &o.kind {
        OutputKind::File if ft.is_file() => {
            if let Some(n) = o.bytes.filter(|&n| n != meta.len()) {
                rep.add(
                    FindingKind::Mismatch,
                    o.path.clone(),
                    format!("size: expected {n} bytes, found {}", meta.len()),
                );
            }
            return true;
        }
        OutputKind::Dir if ft.is_dir() => check_dir(o, p, rep),
        // A link is checked as the link: its target text, never what it names.
        OutputKind::Symlink if ft.is_symlink() => check_link(o, p, rep),
        kind => rep.add(
            FindingKind::Mismatch,
            o.path.clone(),
            format!(
                "recorded as {}, found {}",
                match kind {
                    OutputKind::Dir => "a folder",
                    OutputKind::Symlink => "a symbolic link",
                    _ => "a regular file",
                },
                crate::digest::kind_of(&ft)
            ),
        ),
    }
    false
}

/// A folder by its manifest digest, file counts said where they differ.
fn check_dir(o: &OutputRecord, p: &Path, rep: &mut VerifyReport) {
    let expected = o.sha256.as_deref().unwrap_or("");
    match sha256_dir(p) {
        Ok((d, entries)) => {
            rep.checked += 1;
            if !same_digest(expected, &d) {
                let n = entries.len() as u64;
                let count = match o.files {
                    Some(f) if f != n => format!(" ({f} files recorded, {n} found)"),
                    _ => String::new(),
                };
                rep.add(
                    FindingKind::Mismatch,
                    o.path.clone(),
                    format!(
                        "folder manifest sha256: expected {expected}, found {}{count}",
                        d.hex()
                    ),
                );
            }
        }
        Err(e) => rep.add(
            FindingKind::Mismatch,
            o.path.clone(),
            format!("cannot hash the folder: {e}"),
        ),
    }
}

/// A link output by the digest of its target text.
fn check_link(o: &OutputRecord, p: &Path, rep: &mut VerifyReport) {
    let expected = o.sha256.as_deref().unwrap_or("");
    rep.checked += 1;
    let target = std::fs::read_link(p)
        .map(|t| t.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !same_digest(expected, &sha256_bytes(target.as_bytes())) {
        rep.add(
            FindingKind::Mismatch,
            o.path.clone(),
            format!(
                "link target: recorded {:?}, found {target:?}",
                o.target.as_deref().unwrap_or("")
            ),
        );
    }
}

/// Regular files hashed in parallel (models are large), findings in record order.
fn hash_files(files: &[(&OutputRecord, PathBuf)], rep: &mut VerifyReport) {
    let stop = crate::sys::Stop::new();
    let hashed: Vec<_> = {
        use rayon::prelude::*;
        files
            .par_iter()
            .map(|(_, p)| crate::digest::sha256_regular(p, &stop).map(|(d, _)| d))
            .collect()
    };
    for ((o, _), got) in files.iter().zip(hashed) {
        let expected = o.sha256.as_deref().unwrap_or("");
        match got {
            Ok(d) => {
                rep.checked += 1;
                if !same_digest(expected, &d) {
                    rep.add(
                        FindingKind::Mismatch,
                        o.path.clone(),
                        format!("sha256: expected {expected}, found {}", d.hex()),
                    );
                }
            }
            Err(e) => rep.add(
                FindingKind::Mismatch,
                o.path.clone(),
                format!("cannot read the artifact: {e}"),
            ),
        }
    }
}
