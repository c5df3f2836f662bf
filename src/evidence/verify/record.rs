//! The record against its digest, and against what its journal rebuilds.

use super::*;

/// (a) and (b): `record.sha256` against the bytes, and the bytes canonical. Returns the
/// parsed record and the digest of its bytes as they are.
pub(super) fn check_record(dir: &Path, rep: &mut VerifyReport) -> Option<(Record, Sha256Digest)> {
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
    check_canonical(&rec, &bytes, rep);
    Some((rec, found))
}

/// (b): the bytes of `record.json` are `rec` in canonical (RFC 8785) form.
pub(super) fn check_canonical(rec: &Record, bytes: &[u8], rep: &mut VerifyReport) {
    match crate::evidence::jcs::to_canonical(rec) {
        Err(e) => rep.add(
            FindingKind::Malformed,
            "record.json",
            format!("cannot be canonicalized: {e}"),
        ),
        Ok(canon) if canon != bytes => {
            let at = canon
                .iter()
                .zip(bytes)
                .position(|(a, b)| a != b)
                .unwrap_or(canon.len().min(bytes.len()));
            // Tell "reformatted" from "fields the record type does not have".
            let why = match serde_json::from_slice::<serde_json::Value>(bytes) {
                Ok(v) if crate::evidence::jcs::to_canonical_vec(&v) == bytes => {
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
}

/// The most differences between a record and its journal that are listed.
pub(super) const MAX_DIFFERENCES: usize = 20;

/// (c) the record is what its journal says: rebuilt from `journal.jsonl` as the run
/// built it, every field that differs is named with both values. An unsigned record
/// whose digests were recomputed after an edit (its status, its comparisons) is
/// caught here, because the journal it is built from is itself hashed (and an edit
/// there is caught by its digest). What the run adds after building (the journal's
/// own digest, the logs of attempts the orchestrator lost, which `recover` hashes)
/// is taken from the record and checked against the files instead.
pub(super) fn check_rebuild(dir: &Path, rec: &Record, rep: &mut VerifyReport) {
    let Some(j) = &rec.journal else {
        return;
    };
    let path = match contained(dir, &j.path) {
        Ok(p) => p,
        Err(_) => return,
    };
    let mut again = match crate::evidence::build::build_from_journal(&path) {
        Ok(r) => r,
        // A journal that cannot be read is reported by the file checks.
        Err(crate::evidence::build::BuildError::Read(_)) => return,
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
            if a.termination == crate::evidence::record::Termination::OrchestratorLost {
                a.stdout = m.stdout.clone();
                a.stderr = m.stderr.clone();
            }
        }
    }
    // Equal canonical bytes are equal records: the value trees (ten times the
    // record) are built only to name what differs.
    let canon = crate::evidence::jcs::to_canonical;
    if let (Ok(a), Ok(b)) = (canon(&again), canon(rec)) {
        if a == b {
            rep.checked += 1;
            return;
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
pub(super) fn json_diff(
    at: &str,
    want: &serde_json::Value,
    have: &serde_json::Value,
    out: &mut Vec<String>,
) {
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
pub(super) fn parse_digest_line(text: &str) -> Option<Sha256Digest> {
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
