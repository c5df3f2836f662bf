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

/// (a) and (b): `record.sha256` against the bytes, and the bytes canonical. Returns the
/// parsed record and the digest of its bytes as they are.
fn check_record(dir: &Path, rep: &mut VerifyReport) -> Option<(Record, Sha256Digest)> {
    let bytes = match read_inside(dir, "record.json", MAX_RECORD) {
        Ok(b) => b,
        Err(e) => {
            rep.add(
                FindingKind::Missing,
                "record.json",
                format!("cannot read the record: {e}"),
            );
            return None;
        }
    };
    rep.checked += 1;
    let found = sha256_bytes(&bytes);
    let digest_file = read_inside(dir, "record.sha256", 4096)
        .and_then(|b| String::from_utf8(b).map_err(std::io::Error::other));
    match digest_file {
        Err(e) => rep.add(
            FindingKind::Missing,
            "record.sha256",
            format!("cannot read the record digest: {e}"),
        ),
        Ok(text) => match parse_digest_line(&text) {
            None => rep.add(
                FindingKind::Malformed,
                "record.sha256",
                "expected one line `<64 hex digits>  record.json`",
            ),
            Some(expected) if expected != found => rep.add(
                FindingKind::Mismatch,
                "record.json",
                format!(
                    "record digest: record.sha256 says {}, record.json hashes to {}",
                    expected.hex(),
                    found.hex()
                ),
            ),
            Some(_) => {}
        },
    }
    let rec: Record = match serde_json::from_slice(&bytes) {
        Ok(r) => r,
        Err(e) => {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("not a record: {e}"),
            );
            return None;
        }
    };
    match super::jcs::to_canonical(&rec) {
        Err(e) => rep.add(
            FindingKind::Malformed,
            "record.json",
            format!("cannot be canonicalized: {e}"),
        ),
        Ok(canon) if canon != bytes => {
            let at = canon
                .iter()
                .zip(&bytes)
                .position(|(a, b)| a != b)
                .unwrap_or(canon.len().min(bytes.len()));
            // Tell "reformatted" from "fields the record type does not have".
            let why = match serde_json::from_slice::<serde_json::Value>(&bytes) {
                Ok(v) if super::jcs::to_canonical_vec(&v) == bytes => {
                    "canonical JSON, but with fields or values a record does not hold"
                }
                _ => "not in canonical (RFC 8785) form",
            };
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("{why}: re-canonicalized bytes differ from byte {at} on"),
            );
        }
        Ok(_) => {}
    }
    Some((rec, found))
}

/// The most differences between a record and its journal that are listed.
const MAX_DIFFERENCES: usize = 20;

/// (c) the record is what its journal says: rebuilt from `journal.jsonl` as the run
/// built it, every field that differs is named with both values. An unsigned record
/// whose digests were recomputed after an edit (its status, its comparisons) is
/// caught here, because the journal it is built from is itself hashed (and an edit
/// there is caught by its digest). What the run adds after building (the journal's
/// own digest, the logs of attempts the orchestrator lost, which `recover` hashes)
/// is taken from the record and checked against the files instead.
fn check_rebuild(dir: &Path, rec: &Record, rep: &mut VerifyReport) {
    let Some(j) = &rec.journal else {
        return;
    };
    let path = match contained(dir, &j.path) {
        Ok(p) => p,
        Err(_) => return,
    };
    let lines = match super::journal::read(&path) {
        Ok((lines, _)) => lines,
        // A journal that cannot be read is reported by the file checks.
        Err(_) => return,
    };
    let mut again = match super::build::build(&lines) {
        Ok(r) => r,
        Err(e) => {
            rep.add(
                FindingKind::Mismatch,
                "record.json",
                format!("its journal does not build into a record: {e}"),
            );
            return;
        }
    };
    again.journal = rec.journal.clone();
    for (s, mine) in again.steps.iter_mut().zip(&rec.steps) {
        for (a, m) in s.attempts.iter_mut().zip(&mine.attempts) {
            if a.termination == super::record::Termination::OrchestratorLost {
                a.stdout = m.stdout.clone();
                a.stderr = m.stderr.clone();
            }
        }
    }
    let (Ok(want), Ok(have)) = (serde_json::to_value(&again), serde_json::to_value(rec)) else {
        return;
    };
    let mut diffs = Vec::new();
    json_diff("", &want, &have, &mut diffs);
    rep.checked += 1;
    let n = diffs.len();
    for d in diffs.into_iter().take(MAX_DIFFERENCES) {
        rep.add(
            FindingKind::Mismatch,
            "record.json",
            format!("not what its journal says: {d}"),
        );
    }
    if n > MAX_DIFFERENCES {
        rep.add(
            FindingKind::Mismatch,
            "record.json",
            format!(
                "and {} more fields differ from its journal",
                n - MAX_DIFFERENCES
            ),
        );
    }
}

/// Where two JSON values differ, as `path: journal X, record Y`.
fn json_diff(at: &str, want: &serde_json::Value, have: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    if out.len() > MAX_DIFFERENCES {
        return;
    }
    let short = |v: &Value| {
        let s = v.to_string();
        if s.chars().count() > 80 {
            format!("{}…", s.chars().take(80).collect::<String>())
        } else {
            s
        }
    };
    let here = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match (want, have) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                match b.get(k) {
                    Some(vb) => json_diff(&here(k), va, vb, out),
                    None => out.push(format!("`{}` is missing (journal: {})", here(k), short(va))),
                }
            }
            for (k, vb) in b {
                if !a.contains_key(k) {
                    out.push(format!(
                        "`{}` is not in the journal (record: {})",
                        here(k),
                        short(vb)
                    ));
                }
            }
        }
        // Canonical JSON writes 64.0 as 64: a number is its value.
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                json_diff(&format!("{at}[{i}]"), va, vb, out);
            }
        }
        _ if want != have => out.push(format!(
            "`{at}`: journal {}, record {}",
            short(want),
            short(have)
        )),
        _ => {}
    }
}

/// `<hex>  record.json` (the `sha256sum` format; `*` marks binary mode).
fn parse_digest_line(text: &str) -> Option<Sha256Digest> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let line = lines.next()?;
    if lines.next().is_some() {
        return None;
    }
    let (hex, name) = line.split_once(char::is_whitespace)?;
    let name = name.trim_start().trim_start_matches('*').trim_end();
    if name != "record.json" {
        return None;
    }
    Sha256Digest::parse(hex)
}

/// (g) the record against itself: steps declared vs recorded, references to steps.
fn check_structure(rec: &Record, rep: &mut VerifyReport) {
    let declared: Vec<&str> = rec.run.steps.iter().map(|d| d.id.as_str()).collect();
    let declared_set: BTreeSet<&str> = declared.iter().copied().collect();
    let mut recorded: BTreeSet<&str> = BTreeSet::new();
    for s in &rec.steps {
        if !recorded.insert(s.id.as_str()) {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("step `{}` is recorded twice", s.id),
            );
        }
        if !declared_set.contains(s.id.as_str()) {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!(
                    "step `{}` is recorded but not declared in run.steps (added)",
                    s.id
                ),
            );
        }
    }
    for d in &declared {
        if !recorded.contains(d) {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("step `{d}` is declared in run.steps but has no record (dropped)"),
            );
        }
    }
    for c in &rec.comparisons {
        if !recorded.contains(c.step.as_str()) {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!(
                    "comparison `{}` names step `{}`, which is not recorded",
                    c.name, c.step
                ),
            );
        }
    }
    for f in &rec.failures {
        if !recorded.contains(f.step.as_str()) {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("a failure names step `{}`, which is not recorded", f.step),
            );
        }
    }
    check_allocations(rec, &recorded, rep);
    for s in &rec.steps {
        // A reused step ran no attempt: its outputs are the restored ones.
        if s.status == crate::evidence::record::StepStatus::Reused {
            if !s.attempts.is_empty() || s.cache.as_ref().is_none_or(|c| c.reused_from.is_none()) {
                rep.add(
                    FindingKind::Malformed,
                    "record.json",
                    format!(
                        "step `{}` is reused but has attempts, or no entry it came from",
                        s.id
                    ),
                );
            }
            continue;
        }
        // A step's outputs are a copy of its last measured attempt's.
        let last = s.attempts.iter().rev().find(|a| !a.warmup);
        let expected: &[OutputRecord] = last.map(|a| a.outputs.as_slice()).unwrap_or(&[]);
        if s.outputs != expected {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!(
                    "step `{}`: its outputs differ from those of its last measured attempt",
                    s.id
                ),
            );
        }
    }
}

/// The most `record.json` may hold (a 100 000-step record is well under it).
const MAX_RECORD: u64 = 1 << 30;
/// The most the attestation or a report may hold.
const MAX_SIDE_FILE: u64 = 256 << 20;

/// The allocation invariants a reviewer relies on: each names a recorded step and a
/// grant time; when the release audit passed, each has a release time; and no two
/// allocations of one device core overlap in time (two runs, or two steps, never
/// owned one core at once).
fn check_allocations(rec: &Record, recorded: &BTreeSet<&str>, rep: &mut VerifyReport) {
    use chrono::{DateTime, Utc};
    let time = |s: &str| {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    };
    let audit_passed = rec.release_audit.as_ref().is_some_and(|a| a.passed);
    /// (device, core, granted, released, step).
    type Held<'a> = (&'a str, u32, DateTime<Utc>, Option<DateTime<Utc>>, &'a str);
    let mut held: Vec<Held<'_>> = Vec::new();
    for a in &rec.allocations {
        let what = format!("allocation {} of step `{}`", a.lease, a.step);
        if !recorded.contains(a.step.as_str()) {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("{what}: the step is not recorded"),
            );
        }
        let Some(granted) = time(&a.granted_at) else {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("{what}: no readable grant time ({:?})", a.granted_at),
            );
            continue;
        };
        let released = a.released_at.as_deref().and_then(time);
        if audit_passed && released.is_none() {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("{what}: never released, yet the release audit passed"),
            );
        }
        for &core in &a.cores {
            held.push((a.device.as_str(), core, granted, released, a.step.as_str()));
        }
    }
    held.sort_by(|x, y| (x.0, x.1, x.2).cmp(&(y.0, y.1, y.2)));
    for w in held.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let overlap = a.0 == b.0 && a.1 == b.1 && a.3.is_none_or(|end| b.2 < end);
        if overlap {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!(
                    "device {} core {} is held by steps `{}` and `{}` at once",
                    a.0, a.1, a.4, b.4
                ),
            );
        }
    }
}

/// `rel` below `root`, only if it stays there (see [`crate::digest::contained`]).
fn contained(root: &Path, rel: &str) -> Result<PathBuf, String> {
    crate::digest::contained(root, rel)
}

/// The bytes of a regular file inside `dir` (see [`contained`]), at most `max`.
fn read_inside(dir: &Path, rel: &str, max: u64) -> std::io::Result<Vec<u8>> {
    let p = contained(dir, rel).map_err(std::io::Error::other)?;
    crate::digest::read_regular(&p, crate::digest::Follow::No, max)
}

/// The report files present in a record folder, sorted.
fn report_files(dir: &Path) -> Vec<String> {
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
fn check_files(dir: &Path, rec: &Record, rep: &mut VerifyReport) {
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
            // A Slurm job's own files: its script and the records it wrote.
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

fn same_digest(expected_hex: &str, found: &Sha256Digest) -> bool {
    Sha256Digest::parse(expected_hex) == Some(*found)
}

/// Whether `id` has the shape of a run id (`YYYYMMDDTHHMMSSZ-xxxxxx`).
fn is_run_id(id: &str) -> bool {
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
fn work_folder(rec: &Record) -> Result<PathBuf, String> {
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
fn check_outputs(rec: &Record, rep: &mut VerifyReport) {
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
        let expected = o.sha256.as_deref().unwrap_or("");
        let p = work.join(&o.path); // an absolute path replaces `work`
        let rel = match p.strip_prefix(&work) {
            Ok(r) => r.to_string_lossy().into_owned(),
            Err(_) => {
                rep.add(
                    FindingKind::NotChecked,
                    o.path.clone(),
                    "outside the run's work folder: not read",
                );
                continue;
            }
        };
        let p = match contained(&work, &rel) {
            Ok(p) => p,
            Err(why) if work.exists() => {
                rep.add(
                    FindingKind::NotChecked,
                    o.path.clone(),
                    format!("not read: {why}"),
                );
                continue;
            }
            Err(_) => p,
        };
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                rep.add(
                    FindingKind::AbsentArtifact,
                    o.path.clone(),
                    format!("artifact is gone (recorded sha256 {expected})"),
                );
                continue;
            }
            Err(e) => {
                rep.add(
                    FindingKind::Mismatch,
                    o.path.clone(),
                    format!("cannot read the artifact: {e}"),
                );
                continue;
            }
        };
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
                files.push((o, p));
            }
            OutputKind::Dir if ft.is_dir() => match sha256_dir(&p) {
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
            },
            // A link is checked as the link: its target text, never what it names.
            OutputKind::Symlink if ft.is_symlink() => {
                rep.checked += 1;
                let target = std::fs::read_link(&p)
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
    }
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

/// (f) the attestation: signature, statement shape, subjects and predicate against
/// what the record says.
fn check_attestation(
    dir: &Path,
    rec: &Record,
    record_digest: &Sha256Digest,
    opts: &VerifyOptions,
    rep: &mut VerifyReport,
) {
    let text = match read_inside(dir, ATTESTATION_FILE, MAX_SIDE_FILE) {
        Ok(t) => t,
        Err(e) => {
            rep.add(
                FindingKind::Missing,
                ATTESTATION_FILE,
                format!("cannot read the attestation: {e}"),
            );
            return;
        }
    };
    rep.checked += 1;
    let lines: Vec<&[u8]> = text
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .collect();
    let [line] = lines.as_slice() else {
        rep.add(
            FindingKind::Malformed,
            ATTESTATION_FILE,
            format!("expected exactly one JSON line, found {}", lines.len()),
        );
        return;
    };
    let value: serde_json::Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            rep.add(
                FindingKind::Malformed,
                ATTESTATION_FILE,
                format!("not JSON: {e}"),
            );
            return;
        }
    };
    let payload: Vec<u8> = if value.get("payloadType").is_some() {
        let env: Envelope = match serde_json::from_value::<Envelope>(value) {
            Ok(e) => {
                rep.authenticity = Authenticity::SignedUnchecked {
                    key_ids: e.signatures.iter().map(|s| s.keyid.clone()).collect(),
                };
                e
            }
            Err(e) => {
                rep.add(
                    FindingKind::Malformed,
                    ATTESTATION_FILE,
                    format!("not a DSSE envelope: {e}"),
                );
                return;
            }
        };
        match &opts.key {
            Some(key) => match super::dsse::verify(&env, key) {
                Ok(p) => {
                    rep.authenticity = Authenticity::Verified {
                        key_id: super::dsse::key_id(key),
                    };
                    p
                }
                Err(e) => {
                    rep.authenticity = Authenticity::Failed;
                    rep.add(FindingKind::Signature, ATTESTATION_FILE, e.to_string());
                    return;
                }
            },
            // Without a key the signature cannot be judged (and is said to be
            // unchecked); the content still can.
            None => match Base64::decode_vec(&env.payload) {
                Ok(p) => p,
                Err(_) => {
                    rep.add(
                        FindingKind::Malformed,
                        ATTESTATION_FILE,
                        "the envelope payload is not valid base64",
                    );
                    return;
                }
            },
        }
    } else {
        if let Some(key) = &opts.key {
            rep.authenticity = Authenticity::Failed;
            rep.add(
                FindingKind::Signature,
                ATTESTATION_FILE,
                format!(
                    "a key was given (id {}) but the attestation is an unsigned statement",
                    super::dsse::key_id(key)
                ),
            );
        }
        line.to_vec()
    };
    check_statement(dir, &payload, rec, record_digest, rep);
}

fn check_statement(
    dir: &Path,
    payload: &[u8],
    rec: &Record,
    record_digest: &Sha256Digest,
    rep: &mut VerifyReport,
) {
    let stmt: serde_json::Value = match serde_json::from_slice(payload) {
        Ok(v) => v,
        Err(e) => {
            rep.add(
                FindingKind::Malformed,
                ATTESTATION_FILE,
                format!("the statement is not JSON: {e}"),
            );
            return;
        }
    };
    if super::jcs::to_canonical_vec(&stmt) != payload {
        rep.add(
            FindingKind::Malformed,
            ATTESTATION_FILE,
            "the statement is not in canonical (RFC 8785) form",
        );
    }
    for (field, want) in [("_type", STATEMENT_TYPE), ("predicateType", PREDICATE_TYPE)] {
        let got = stmt.get(field).and_then(|v| v.as_str());
        if got != Some(want) {
            rep.add(
                FindingKind::Malformed,
                ATTESTATION_FILE,
                format!("{field} is {got:?}, expected {want:?}"),
            );
        }
    }
    let found: Vec<Subject> = match stmt
        .get("subject")
        .cloned()
        .map(serde_json::from_value::<Vec<Subject>>)
    {
        Some(Ok(s)) => s,
        _ => {
            rep.add(
                FindingKind::Malformed,
                ATTESTATION_FILE,
                "the statement has no readable subject list",
            );
            return;
        }
    };
    let mut found_map: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    for s in &found {
        let d = s.digest.get("sha256").map(String::as_str);
        if found_map.insert(s.name.as_str(), d).is_some() {
            rep.add(
                FindingKind::Malformed,
                s.name.clone(),
                "attestation names this subject twice",
            );
        }
    }
    let expected = subjects(rec, record_digest);
    let mut expected_map: BTreeMap<&str, &str> = BTreeMap::new();
    for s in &expected {
        if let Some(d) = s.digest.get("sha256") {
            expected_map.insert(s.name.as_str(), d.as_str());
        }
    }
    // Files rendered into the record folder after the record (its reports) are named
    // by the attestation alone: check them against the disk.
    let mut covered: BTreeSet<&str> = BTreeSet::new();
    for (name, got) in &found_map {
        if expected_map.contains_key(name) || !is_report_name(name) {
            continue;
        }
        covered.insert(name);
        let want = got.unwrap_or("");
        match read_inside(dir, name, MAX_SIDE_FILE) {
            Ok(bytes) => {
                rep.checked += 1;
                let d = sha256_bytes(&bytes);
                if !same_digest(want, &d) {
                    rep.add(
                        FindingKind::Mismatch,
                        *name,
                        format!(
                            "sha256: the attestation says {want}, found {} (edited after the run)",
                            d.hex()
                        ),
                    );
                }
            }
            Err(e) => rep.add(FindingKind::Missing, *name, format!("cannot read: {e}")),
        }
    }
    // Records that hash their journal came with reports attested: a report there
    // that the attestation does not name was written or replaced afterwards.
    if rec.journal.is_some() {
        for name in report_files(dir) {
            if !covered.contains(name.as_str()) {
                rep.add(
                    FindingKind::Mismatch,
                    name,
                    "a report the attestation does not cover (written or replaced after the run)",
                );
            }
        }
    }
    for (name, want) in &expected_map {
        match found_map.get(name) {
            None => rep.add(
                FindingKind::Mismatch,
                *name,
                format!("attestation subject dropped: the record names it with sha256 {want}"),
            ),
            Some(got) if *got != Some(*want) => {
                let what = if *name == "record.json" {
                    "record digest"
                } else {
                    "sha256"
                };
                rep.add(
                    FindingKind::Mismatch,
                    *name,
                    format!(
                        "attestation subject {what}: the record says {want}, the attestation {}",
                        got.unwrap_or("(no sha256)")
                    ),
                );
            }
            Some(_) => {}
        }
    }
    for (name, got) in &found_map {
        if !expected_map.contains_key(name) && !covered.contains(name) {
            rep.add(
                FindingKind::Mismatch,
                *name,
                format!(
                    "attestation subject added: sha256 {}, not named by the record",
                    got.unwrap_or("(none)")
                ),
            );
        }
    }
    let want = predicate(rec);
    match stmt.get("predicate") {
        Some(got) if *got == want => {}
        Some(got) => {
            let keys: BTreeSet<&String> = want
                .as_object()
                .into_iter()
                .flat_map(|o| o.keys())
                .chain(got.as_object().into_iter().flat_map(|o| o.keys()))
                .collect();
            let differ: Vec<&str> = keys
                .into_iter()
                .filter(|k| want.get(k.as_str()) != got.get(k.as_str()))
                .map(String::as_str)
                .collect();
            rep.add(
                FindingKind::Mismatch,
                ATTESTATION_FILE,
                format!(
                    "the predicate disagrees with the record in: {}",
                    differ.join(", ")
                ),
            );
        }
        None => rep.add(
            FindingKind::Malformed,
            ATTESTATION_FILE,
            "the statement has no predicate",
        ),
    }
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
            contained(d, "steps/a/1/stdout.log"),
            Ok(d.join("steps/a/1/stdout.log"))
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
