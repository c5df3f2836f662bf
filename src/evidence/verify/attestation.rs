//! The attestation: its envelope, signature and statement against the record.

use super::*;

/// (f) the attestation: signature, statement shape, subjects and predicate against
/// what the record says.
pub(super) fn check_attestation(
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
            Some(key) => match crate::evidence::dsse::verify(&env, key) {
                Ok(p) => {
                    rep.authenticity = Authenticity::Verified {
                        key_id: crate::evidence::dsse::key_id(key),
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
                    crate::evidence::dsse::key_id(key)
                ),
            );
        }
        line.to_vec()
    };
    check_statement(dir, &payload, rec, record_digest, rep);
}

/// The statement inside the attestation: its form, its subjects against the record
/// and the disk, its predicate against the record.
pub(super) fn check_statement(
    dir: &Path,
    payload: &[u8],
    rec: &Record,
    record_digest: &Sha256Digest,
    rep: &mut VerifyReport,
) {
    let Some(stmt) = statement(payload, rep) else {
        return;
    };
    let Some(found) = found_subjects(&stmt, rep) else {
        return;
    };
    let found_map = found_digests(&found, rep);
    let expected = subjects(rec, record_digest);
    let mut expected_map: BTreeMap<&str, &str> = BTreeMap::new();
    for s in &expected {
        if let Some(d) = s.digest.get("sha256") {
            expected_map.insert(s.name.as_str(), d.as_str());
        }
    }
    let covered = check_reports(dir, &found_map, &expected_map, rep);
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
    check_subjects(&found_map, &expected_map, &covered, rep);
    check_predicate(&stmt, rec, rep);
}

/// The statement parsed; bad form is reported, only non-JSON stops the checks.
fn statement(payload: &[u8], rep: &mut VerifyReport) -> Option<serde_json::Value> {
    let stmt: serde_json::Value = match serde_json::from_slice(payload) {
        Ok(v) => v,
        Err(e) => {
            rep.add(
                FindingKind::Malformed,
                ATTESTATION_FILE,
                format!("the statement is not JSON: {e}"),
            );
            return None;
        }
    };
    if crate::evidence::jcs::to_canonical_vec(&stmt) != payload {
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
    Some(stmt)
}

/// The subject list; without one there is nothing to hold against the record.
fn found_subjects(stmt: &serde_json::Value, rep: &mut VerifyReport) -> Option<Vec<Subject>> {
    match stmt
        .get("subject")
        .cloned()
        .map(serde_json::from_value::<Vec<Subject>>)
    {
        Some(Ok(s)) => Some(s),
        _ => {
            rep.add(
                FindingKind::Malformed,
                ATTESTATION_FILE,
                "the statement has no readable subject list",
            );
            None
        }
    }
}

/// Each subject's sha256 by name; a name given twice could vouch for two digests.
fn found_digests<'a>(
    found: &'a [Subject],
    rep: &mut VerifyReport,
) -> BTreeMap<&'a str, Option<&'a str>> {
    let mut found_map: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    for s in found {
        let d = s.digest.get("sha256").map(String::as_str);
        if found_map.insert(s.name.as_str(), d).is_some() {
            rep.add(
                FindingKind::Malformed,
                s.name.clone(),
                "attestation names this subject twice",
            );
        }
    }
    found_map
}

/// Reports only the attestation names, re-hashed from disk; returns their names.
fn check_reports<'a>(
    dir: &Path,
    found_map: &BTreeMap<&'a str, Option<&str>>,
    expected_map: &BTreeMap<&str, &str>,
    rep: &mut VerifyReport,
) -> BTreeSet<&'a str> {
    // Files rendered into the record folder after the record (its reports) are named
    // by the attestation alone: check them against the disk.
    let mut covered: BTreeSet<&str> = BTreeSet::new();
    for (name, got) in found_map {
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
    covered
}

/// Subjects against the record's: none dropped, changed, or added beyond `covered`.
fn check_subjects(
    found_map: &BTreeMap<&str, Option<&str>>,
    expected_map: &BTreeMap<&str, &str>,
    covered: &BTreeSet<&str>,
    rep: &mut VerifyReport,
) {
    for (name, want) in expected_map {
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
    for (name, got) in found_map {
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
}

/// The predicate against the record's, naming the fields that were changed.
fn check_predicate(stmt: &serde_json::Value, rec: &Record, rep: &mut VerifyReport) {
    // A predicate that cannot be a value is told apart below as a disagreement.
    let want = serde_json::to_value(predicate(rec)).unwrap_or_default();
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
