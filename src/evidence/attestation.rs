//! `attestation.intoto.jsonl`: one line naming everything a run produced, so a third
//! party can check artifacts against it without trusting the record folder.
//!
//! The line is an in-toto Statement v1 (bare), or with a signing key a DSSE envelope
//! around it. Both the statement and the envelope are written as RFC 8785 canonical
//! JSON: the payload bytes inside the envelope are exactly `jcs(statement)`, so a
//! verifier can rebuild the statement from the record and compare bytes, and the
//! signature covers one well-defined byte string whatever produced it.
//!
//! Subjects come from the record itself, never from a fresh look at the disk: the
//! attestation says what the record says, and `verify` separately checks the disk
//! against the record. Subjects, in this order:
//! - every log of every attempt (`steps/<id>/<n>/stdout.log`, relative to the record);
//! - every declared output that exists, named by its path as in the record; when
//!   several attempts name the same path, the one that ended last wins (it overwrote
//!   the others on disk);
//! - `plan.toml` (digest from `run.plan.sha256`);
//! - `record.json` (digest = the record's digest, as in `record.sha256`).

use std::collections::BTreeMap;

use base64ct::Encoding;
use std::path::Path;

use ed25519_dalek::SigningKey;

use super::attest::{statement, Subject, PREDICATE_TYPE};
pub use super::predicate::predicate;
use super::record::{OutputKind, OutputRecord, Record};
use crate::digest::Sha256Digest;

/// File name of the attestation in a record folder.
pub const ATTESTATION_FILE: &str = "attestation.intoto.jsonl";

/// Why the attestation could not be written.
#[derive(Debug, thiserror::Error)]
pub enum AttestError {
    /// The record could not be canonicalized (so it has no digest).
    #[error("cannot canonicalize the record: {0}")]
    Record(String),
    /// An envelope could not be turned into JSON.
    #[error("cannot serialize the attestation: {0}")]
    Serialize(String),
    /// The file could not be written.
    #[error("cannot write {path}: {error}")]
    Write {
        /// The attestation file.
        path: String,
        /// The OS error.
        error: String,
    },
}

/// Write `attestation.intoto.jsonl` into `record_dir` atomically: the statement for
/// `rec`, wrapped in a DSSE envelope signed by `key` when one is given.
pub fn write_attestation(
    record_dir: &Path,
    rec: &Record,
    key: Option<&SigningKey>,
) -> Result<(), AttestError> {
    let record_bytes =
        super::jcs::to_canonical(rec).map_err(|e| AttestError::Record(e.to_string()))?;
    let record_digest = crate::digest::sha256_bytes(&record_bytes);
    // Re-attesting (to sign, say) keeps the reports the run attested, with the
    // digests they had then: a report edited since stays caught.
    let reports = attested_reports(record_dir);
    write_attestation_with(record_dir, rec, &record_digest, key, &reports)
}

/// A file name reports are rendered to in the record folder (`report.md`,
/// `report.html`, `summary.txt`, `summary.json`, `report-<template>`).
pub(crate) fn is_report_name(name: &str) -> bool {
    !name.contains('/')
        && (name.starts_with("report.")
            || name.starts_with("report-")
            || name.starts_with("summary."))
}

/// The report subjects of the attestation now in `record_dir` (none if absent or
/// unreadable).
fn attested_reports(record_dir: &Path) -> Vec<Subject> {
    let Ok(bytes) = crate::digest::read_regular(
        &record_dir.join(ATTESTATION_FILE),
        crate::digest::Follow::No,
        256 << 20,
    ) else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Vec::new();
    };
    let stmt = match serde_json::from_value::<super::dsse::Envelope>(v.clone()) {
        Ok(env) => base64ct::Base64::decode_vec(&env.payload)
            .ok()
            .and_then(|p| serde_json::from_slice::<serde_json::Value>(&p).ok()),
        Err(_) => Some(v),
    };
    stmt.and_then(|s| serde_json::from_value::<Vec<Subject>>(s.get("subject")?.clone()).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|s| is_report_name(&s.name))
        .collect()
}

/// [`write_attestation`] for a record whose digest is known (the one `write_record`
/// returned), so the record is not canonicalised and hashed again.
pub fn write_attestation_for(
    record_dir: &Path,
    rec: &Record,
    record_digest: &Sha256Digest,
    key: Option<&SigningKey>,
) -> Result<(), AttestError> {
    write_attestation_with(record_dir, rec, record_digest, key, &[])
}

/// [`write_attestation_for`] naming also `extra` files of the record folder (the
/// reports rendered from the record, which the record cannot name itself).
pub fn write_attestation_with(
    record_dir: &Path,
    rec: &Record,
    record_digest: &Sha256Digest,
    key: Option<&SigningKey>,
    extra: &[Subject],
) -> Result<(), AttestError> {
    let line = attestation_line_with(rec, record_digest, key, extra)?;
    let path = record_dir.join(ATTESTATION_FILE);
    super::atomic::write_atomic(&path, &line).map_err(|e| AttestError::Write {
        path: path.display().to_string(),
        error: e.to_string(),
    })
}

/// The bytes of the attestation file (one line, newline-terminated).
pub fn attestation_line(
    rec: &Record,
    record_digest: &Sha256Digest,
    key: Option<&SigningKey>,
) -> Result<Vec<u8>, AttestError> {
    attestation_line_with(rec, record_digest, key, &[])
}

fn attestation_line_with(
    rec: &Record,
    record_digest: &Sha256Digest,
    key: Option<&SigningKey>,
    extra: &[Subject],
) -> Result<Vec<u8>, AttestError> {
    let mut subjects = subjects(rec, record_digest);
    subjects.extend(extra.iter().cloned());
    let stmt = super::jcs::to_canonical(&statement(subjects, PREDICATE_TYPE, predicate(rec)))
        .map_err(|e| AttestError::Serialize(e.to_string()))?;
    let mut line = match key {
        None => stmt,
        Some(k) => {
            let env = super::dsse::sign(&stmt, k);
            super::jcs::to_canonical(&env).map_err(|e| AttestError::Serialize(e.to_string()))?
        }
    };
    line.push(b'\n');
    Ok(line)
}

/// The subjects the statement of `rec` names (see the module docs for the order).
pub fn subjects(rec: &Record, record_digest: &Sha256Digest) -> Vec<Subject> {
    let mut out = Vec::new();
    // A file several attempts name alike (the script of the array their jobs
    // were tasks of) is one subject.
    let mut shared: std::collections::HashSet<(&str, &str)> = Default::default();
    for step in &rec.steps {
        for a in &step.attempts {
            for log in [&a.stdout, &a.stderr] {
                if !log.sha256.is_empty() {
                    out.push(subject_hex(&log.path, &log.sha256));
                }
            }
            for f in a.job.iter().flat_map(|j| j.files.iter()) {
                if shared.insert((f.path.as_str(), f.sha256.as_str())) {
                    out.push(subject_hex(&f.path, &f.sha256));
                }
            }
        }
    }
    for o in current_outputs(rec) {
        if let (OutputKind::File | OutputKind::Dir, Some(d)) = (&o.kind, &o.sha256) {
            out.push(subject_hex(&o.path, d));
        }
    }
    out.push(subject_hex("plan.toml", &rec.run.plan.sha256));
    if let Some(j) = &rec.journal {
        out.push(subject_hex(&j.path, &j.sha256));
    }
    out.push(Subject::sha256("record.json", record_digest));
    out
}

fn subject_hex(name: &str, hex: &str) -> Subject {
    Subject {
        name: name.to_string(),
        digest: BTreeMap::from([("sha256".to_string(), hex.to_string())]),
    }
}

/// The declared outputs as the disk should hold them now: one per path, from the
/// attempt that ended last (ties: the later one in the record), in record order of
/// their first mention, the outputs a reused step restored included. Includes
/// outputs recorded as absent.
pub fn current_outputs(rec: &Record) -> Vec<&OutputRecord> {
    // path -> (ended_at, sequence number, output); RFC 3339 UTC strings sort by time.
    let mut latest: BTreeMap<&str, (&str, usize, &OutputRecord)> = BTreeMap::new();
    let mut first_seen: Vec<&str> = Vec::new();
    let mut seq = 0usize;
    for step in &rec.steps {
        // A step reused from the cache ran no attempt: its restored outputs are the
        // step's own (earlier than any attempt that writes the same path after it).
        let reused = step
            .cache
            .as_ref()
            .is_some_and(|c| c.status == crate::evidence::record::CacheStatus::Reused)
            .then_some(&step.outputs);
        let attempts = step
            .attempts
            .iter()
            .flat_map(|a| a.outputs.iter().map(move |o| (a.ended_at.as_str(), o)));
        for (ended, o) in reused
            .into_iter()
            .flatten()
            .map(|o| ("", o))
            .chain(attempts)
        {
            {
                seq += 1;
                let cand = (ended, seq, o);
                match latest.get(o.path.as_str()) {
                    None => {
                        first_seen.push(o.path.as_str());
                        latest.insert(o.path.as_str(), cand);
                    }
                    Some(prev) if (prev.0, prev.1) <= (cand.0, cand.1) => {
                        latest.insert(o.path.as_str(), cand);
                    }
                    Some(_) => {}
                }
            }
        }
    }
    first_seen
        .into_iter()
        .filter_map(|p| latest.get(p).map(|x| x.2))
        .collect()
}
