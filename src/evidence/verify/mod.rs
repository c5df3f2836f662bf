//! `orchestrate verify RUN`: re-hash everything a record folder names and say, per
//! path, what changed.
//!
//! Order of trust: `record.sha256` vouches for the bytes of `record.json`; the record
//! vouches for logs, artifacts and `plan.toml`; the attestation must name the same
//! things with the same digests (and, with a key, be signed). A check that cannot run
//! because an earlier one failed is skipped rather than reported twice, except that
//! a record that parses is always checked further even when its digest is wrong, so
//! one edit shows both "the record changed" and what it now disagrees with.
//!
//! Nothing here stops at the first problem: every finding names its path, and the
//! caller decides (absent artifacts fail only when artifacts are required).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use base64ct::{Base64, Encoding};
use ed25519_dalek::VerifyingKey;

use super::attest::{Subject, PREDICATE_TYPE, STATEMENT_TYPE};
use super::attestation::{current_outputs, is_report_name, predicate, subjects, ATTESTATION_FILE};
use super::dsse::Envelope;
use super::record::{OutputKind, OutputRecord, Record};
use crate::digest::{sha256_bytes, sha256_dir, Sha256Digest};

mod attestation;
mod files;
mod outputs;
mod record;
mod structure;

use attestation::*;
use files::*;
use outputs::*;
use record::*;
use structure::*;

/// What to check beyond the record folder's own consistency.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// The attestation must be a DSSE envelope signed by this key.
    pub key: Option<VerifyingKey>,
    /// Artifacts (declared outputs) that are gone count as failures.
    pub require_artifacts: bool,
}

/// What kind of problem a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FindingKind {
    /// The bytes differ from what the record (or `record.sha256`) says.
    Mismatch,
    /// A file the record folder must hold is not there.
    Missing,
    /// A declared output is gone from disk (a failure only when artifacts are required).
    AbsentArtifact,
    /// A file does not parse, is not canonical, or contradicts itself.
    Malformed,
    /// The attestation's signature is missing, by another key, or does not match.
    Signature,
    /// An artifact the record names outside the run's work folder (or through a link
    /// that leaves it): not read (a failure only when artifacts are required).
    NotChecked,
}

impl FindingKind {
    /// The upper-case tag a report line starts with.
    pub fn tag(&self) -> &'static str {
        match self {
            FindingKind::Mismatch => "MISMATCH",
            FindingKind::Missing => "MISSING",
            FindingKind::AbsentArtifact => "ABSENT",
            FindingKind::Malformed => "MALFORMED",
            FindingKind::Signature => "SIGNATURE",
            FindingKind::NotChecked => "UNCHECKED",
        }
    }
}

/// One problem, on one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The path concerned: relative to the record folder for its own files, as in the
    /// record (absolute) for artifacts.
    pub path: String,
    pub kind: FindingKind,
    /// What changed, with expected and found digests where there are some.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.kind.tag(), self.path, self.message)
    }
}

/// What `verify` could say about who made the evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Authenticity {
    /// The attestation is a bare statement: nothing vouches for its author.
    #[default]
    Unsigned,
    /// A signed envelope whose signature was not checked (no key given).
    SignedUnchecked { key_ids: Vec<String> },
    /// The signature was checked against the given key and holds.
    Verified { key_id: String },
    /// A key was given and the signature does not hold (see the findings).
    Failed,
}

/// The outcome of [`verify_run`].
#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    pub findings: Vec<Finding>,
    /// Files (and folders) whose digest was recomputed and compared.
    pub checked: usize,
    /// Whether the attestation's author was established.
    pub authenticity: Authenticity,
    /// Facts worth saying that are not findings (what was not covered, and why).
    pub notes: Vec<String>,
}

impl VerifyReport {
    /// True when no finding counts: absent artifacts count only if `require_artifacts`.
    pub fn ok(&self, require_artifacts: bool) -> bool {
        self.failures(require_artifacts) == 0
    }

    /// Number of findings that count as failures.
    pub fn failures(&self, require_artifacts: bool) -> usize {
        self.findings
            .iter()
            .filter(|f| {
                require_artifacts
                    || !matches!(
                        f.kind,
                        FindingKind::AbsentArtifact | FindingKind::NotChecked
                    )
            })
            .count()
    }

    /// Findings about `path` (exact match).
    pub fn about(&self, path: &str) -> Vec<&Finding> {
        self.findings.iter().filter(|f| f.path == path).collect()
    }

    fn add(&mut self, kind: FindingKind, path: impl Into<String>, message: impl Into<String>) {
        self.findings.push(Finding {
            path: path.into(),
            kind,
            message: message.into(),
        });
    }
}

/// The report as `verify` prints it: one line per finding (`MISMATCH path: message`),
/// then `ok: N files checked` or `FAILED: K findings, N files checked`, then what was
/// proven: `integrity:` (every digest recomputed and matching) and `authenticity:`
/// (who made it, which only a checked signature establishes).
pub fn render_report(report: &VerifyReport, require_artifacts: bool) -> String {
    let mut out = String::new();
    for f in &report.findings {
        out.push_str(&f.to_string());
        out.push('\n');
    }
    for n in &report.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    let failures = report.failures(require_artifacts);
    if failures == 0 {
        let absent = report.findings.len();
        if absent > 0 {
            out.push_str(&format!(
                "ok: {} checked ({absent} artifacts absent or outside the work folder; --require-artifacts makes that a failure)\n",
                files(report.checked)
            ));
        } else {
            out.push_str(&format!("ok: {} checked\n", files(report.checked)));
        }
        out.push_str(
            "integrity: holds: every digest the record and its attestation name was recomputed and matches\n",
        );
    } else {
        out.push_str(&format!(
            "FAILED: {failures} finding{}, {} checked\n",
            if failures == 1 { "" } else { "s" },
            files(report.checked)
        ));
        out.push_str("integrity: does not hold (see the findings above)\n");
    }
    out.push_str(&match &report.authenticity {
        Authenticity::Unsigned => "authenticity: not established: the attestation is unsigned, so \
             anyone who could write this folder could have recomputed every digest (sign with \
             `run --sign-key`, check with `verify --key`)\n"
            .to_string(),
        Authenticity::SignedUnchecked { key_ids } => format!(
            "authenticity: not checked: the attestation is signed (key id {}) but no --key was \
             given, so its signature was not checked\n",
            key_ids.join(", ")
        ),
        Authenticity::Verified { key_id } => {
            format!("authenticity: holds: signed by the given key (id {key_id})\n")
        }
        Authenticity::Failed => {
            "authenticity: does not hold: the signature does not match the given key\n".into()
        }
    });
    out
}

fn files(n: usize) -> String {
    format!("{n} file{}", if n == 1 { "" } else { "s" })
}

/// What every reader of a record (the index, and so `runs`, `trend`, `site`)
/// checks cheaply, given `rec` parsed from `bytes` (its `record.json`, already
/// checked against `record.sha256` as read, with `digest`): the bytes canonical,
/// its structure, the record rebuilt from its journal, and the attestation's
/// subjects. Logs and outputs are not hashed again (that is `verify`'s).
pub fn verify_on_read(
    record_dir: &Path,
    rec: &Record,
    bytes: &[u8],
    digest: &Sha256Digest,
) -> VerifyReport {
    let mut rep = VerifyReport {
        checked: 1,
        ..VerifyReport::default()
    };
    check_canonical(rec, bytes, &mut rep);
    check_structure(rec, &mut rep);
    check_rebuild(record_dir, rec, &mut rep);
    check_attestation(record_dir, rec, digest, &VerifyOptions::default(), &mut rep);
    rep
}

/// Check a record folder: see the module docs and [`FindingKind`].
pub fn verify_run(record_dir: &Path, opts: &VerifyOptions) -> VerifyReport {
    let mut rep = VerifyReport::default();
    let Some((rec, record_digest)) = check_record(record_dir, &mut rep) else {
        return rep;
    };
    check_structure(&rec, &mut rep);
    check_rebuild(record_dir, &rec, &mut rep);
    check_files(record_dir, &rec, &mut rep);
    check_outputs(&rec, &mut rep);
    check_attestation(record_dir, &rec, &record_digest, opts, &mut rep);
    rep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_line_forms() {
        let d = sha256_bytes(b"x");
        let hex = d.hex();
        assert_eq!(parse_digest_line(&format!("{hex}  record.json\n")), Some(d));
        assert_eq!(parse_digest_line(&format!("{hex} *record.json\n")), Some(d));
        assert_eq!(parse_digest_line(&format!("{hex}  other.json\n")), None);
        assert_eq!(parse_digest_line("zz  record.json\n"), None);
        assert_eq!(
            parse_digest_line(&format!("{hex}  record.json\n{hex}  record.json\n")),
            None
        );
    }

    #[test]
    fn paths_inside_the_record_only() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir(d.join("steps")).unwrap();
        std::os::unix::fs::symlink("/etc", d.join("out")).unwrap();
        assert_eq!(
            contained(d, "steps/a/1/stdout.log").unwrap(),
            d.join("steps/a/1/stdout.log")
        );
        for bad in ["../x", "/etc/passwd", "", "steps/../../x", "out/passwd"] {
            assert!(contained(d, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn absent_artifacts_fail_only_when_required() {
        let mut r = VerifyReport::default();
        r.add(FindingKind::AbsentArtifact, "/w/a", "gone");
        assert!(r.ok(false));
        assert!(!r.ok(true));
        assert!(render_report(&r, false).contains("--require-artifacts makes that a failure)\n"));
        assert!(render_report(&r, true).contains("FAILED: 1 finding, 0 files checked"));
        r.add(FindingKind::Mismatch, "record.json", "x");
        assert!(!r.ok(false));
        assert!(
            render_report(&r, false).starts_with("ABSENT /w/a: gone\nMISMATCH record.json: x\n")
        );
    }
}
