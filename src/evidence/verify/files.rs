//! Every file the record names, re-hashed inside the record folder.

use super::*;

/// The most `record.json` may hold (a 100 000-step record is well under it).
pub(super) const MAX_RECORD: u64 = 1 << 30;

/// The most the attestation or a report may hold.
pub(super) const MAX_SIDE_FILE: u64 = 256 << 20;

/// `rel` below `root`, only if it stays there (see [`crate::digest::contained`]).
pub(super) fn contained(root: &Path, rel: &str) -> Result<PathBuf, crate::digest::Escape> {
    crate::digest::contained(root, rel)
}

/// The bytes of a regular file inside `dir` (see [`contained`]), at most `max`.
pub(super) fn read_inside(dir: &Path, rel: &str, max: u64) -> std::io::Result<Vec<u8>> {
    let p = contained(dir, rel).map_err(std::io::Error::other)?;
    crate::digest::read_regular(&p, crate::digest::Follow::No, max)
}

/// The report files present in a record folder, sorted.
pub(super) fn report_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .filter_map(|e| e.file_name().to_str().map(String::from))
                .filter(|n| is_report_name(n))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// (c) logs and (e) `plan.toml`: the record folder's own files, hashed in parallel.
pub(super) fn check_files(dir: &Path, rec: &Record, rep: &mut VerifyReport) {
    // (path as named, expected digest, expected size)
    let mut wanted: Vec<(String, String, Option<u64>)> = Vec::new();
    let mut noted = 0usize;
    for s in &rec.steps {
        for a in &s.attempts {
            for log in [&a.stdout, &a.stderr] {
                // A log the run could not hash (the step replaced it) has no digest
                // to hold it to; the record says why.
                if log.sha256.is_empty() && log.note.is_some() {
                    noted += 1;
                    continue;
                }
                wanted.push((log.path.clone(), log.sha256.clone(), Some(log.bytes)));
            }
            // A batch job's own files: its script and the records it wrote.
            for f in a.job.iter().flat_map(|j| j.files.iter()) {
                wanted.push((f.path.clone(), f.sha256.clone(), Some(f.bytes)));
            }
        }
    }
    if noted > 0 {
        rep.notes.push(format!(
            "{noted} log{} not hashed at run time (the record says why): not checked",
            if noted == 1 { " was" } else { "s were" }
        ));
    }
    wanted.push(("plan.toml".into(), rec.run.plan.sha256.clone(), None));
    match &rec.journal {
        Some(j) => wanted.push((j.path.clone(), j.sha256.clone(), Some(j.bytes))),
        None => rep
            .notes
            .push("this record predates journal hashing: journal.jsonl is not covered".into()),
    }
    let mut paths = Vec::new();
    let mut todo = Vec::new();
    for (name, sha, size) in wanted {
        let p = match contained(dir, &name) {
            Ok(p) => p,
            Err(why) => {
                rep.add(
                    FindingKind::Malformed,
                    name,
                    format!("the record names a file it cannot hold: {why}"),
                );
                continue;
            }
        };
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_file() => {
                if let Some(n) = size.filter(|&n| n != m.len()) {
                    rep.add(
                        FindingKind::Mismatch,
                        name.clone(),
                        format!("size: expected {n} bytes, found {}", m.len()),
                    );
                }
                paths.push(p);
                todo.push((name, sha));
            }
            Ok(m) => rep.add(
                FindingKind::Missing,
                name,
                format!(
                    "not a regular file ({}): not read",
                    crate::digest::kind_of(&m.file_type())
                ),
            ),
            Err(e) => rep.add(FindingKind::Missing, name, format!("cannot read: {e}")),
        }
    }
    let stop = crate::sys::Stop::new();
    let hashed: Vec<_> = {
        use rayon::prelude::*;
        paths
            .par_iter()
            .map(|p| crate::digest::sha256_regular(p, &stop).map(|(d, _)| d))
            .collect()
    };
    for ((name, expected), got) in todo.into_iter().zip(hashed) {
        match got {
            Ok(d) => {
                rep.checked += 1;
                if !same_digest(&expected, &d) {
                    rep.add(
                        FindingKind::Mismatch,
                        name,
                        format!("sha256: expected {expected}, found {}", d.hex()),
                    );
                }
            }
            Err(e) => rep.add(FindingKind::Missing, name, format!("cannot read: {e}")),
        }
    }
}

pub(super) fn same_digest(expected_hex: &str, found: &Sha256Digest) -> bool {
    Sha256Digest::parse(expected_hex) == Some(*found)
}
