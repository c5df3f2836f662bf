//! `verify_run` on real record folders: each test runs `plans/smoke.toml` through the
//! binary into its own temp folder, writes the attestation, tampers with a copy of
//! one thing, and checks that the finding names the changed path.

use std::path::{Path, PathBuf};

use orchestrate::evidence::dsse::{
    load_signing_key, load_verifying_key, signing_key_to_pem, verifying_key_to_pem, Envelope,
    SigningKey,
};
use orchestrate::evidence::record::Record;
use orchestrate::evidence::{
    render_report, verify_run, write_attestation, write_record, FindingKind, VerifyOptions,
    VerifyReport, ATTESTATION_FILE,
};

struct Run {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    work: PathBuf,
}

/// Run the smoke plan into a fresh temp folder and attest it (unsigned).
fn smoke() -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let dir = crate::support::run_smoke(tmp.path());
    let rec = load(&dir);
    write_attestation(&dir, &rec, None).unwrap();
    Run {
        work: PathBuf::from(&rec.run.options.work),
        _tmp: tmp,
        dir,
    }
}

fn load(dir: &Path) -> Record {
    serde_json::from_slice(&std::fs::read(dir.join("record.json")).unwrap()).unwrap()
}

fn verify(dir: &Path) -> VerifyReport {
    verify_run(dir, &VerifyOptions::default())
}

fn flip_byte(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    b[at] ^= 0x01;
    std::fs::write(path, b).unwrap();
}

/// The report has a finding of `kind` on `path` whose message contains `text`.
fn has(rep: &VerifyReport, kind: FindingKind, path: &str, text: &str) -> bool {
    rep.findings
        .iter()
        .any(|f| f.kind == kind && f.path == path && f.message.contains(text))
}

fn show(rep: &VerifyReport) -> String {
    render_report(rep, true)
}

#[test]
fn a_clean_record_verifies_with_no_findings() {
    let r = smoke();
    let rep = verify(&r.dir);
    assert!(rep.findings.is_empty(), "{}", show(&rep));
    // record.json, 2 logs x 7 attempts, plan.toml, 7 artifacts, the attestation.
    assert_eq!(rep.checked, 1 + 14 + 1 + 7 + 1, "{}", show(&rep));
    assert!(rep.ok(true));
    assert_eq!(show(&rep), format!("ok: {} files checked\n", rep.checked));
}

#[test]
fn a_flipped_byte_in_record_json_is_a_record_digest_mismatch() {
    let r = smoke();
    let path = r.dir.join("record.json");
    let len = std::fs::metadata(&path).unwrap().len() as usize;
    flip_byte(&path, len / 2);
    let rep = verify(&r.dir);
    assert!(
        has(&rep, FindingKind::Mismatch, "record.json", "record digest"),
        "{}",
        show(&rep)
    );
    assert!(!rep.ok(false));
}

#[test]
fn a_flipped_byte_in_a_log_names_the_log() {
    let r = smoke();
    let log = "steps/right/2/stdout.log";
    let rec = load(&r.dir);
    let expected = rec.steps[2].attempts[1].stdout.sha256.clone();
    assert_eq!(rec.steps[2].attempts[1].stdout.path, log);
    flip_byte(&r.dir.join(log), 0);
    let rep = verify(&r.dir);
    assert!(
        has(
            &rep,
            FindingKind::Mismatch,
            log,
            &format!("expected {expected}")
        ),
        "{}",
        show(&rep)
    );
    assert_eq!(rep.findings.len(), 1, "{}", show(&rep));
}

#[test]
fn a_flipped_byte_in_an_artifact_names_the_artifact() {
    let r = smoke();
    let upper = load(&r.dir).steps[1].outputs[0].path.clone();
    assert!(Path::new(&upper).is_absolute() && upper.ends_with("upper.txt"));
    flip_byte(Path::new(&upper), 0);
    let rep = verify(&r.dir);
    assert!(
        has(&rep, FindingKind::Mismatch, &upper, "sha256: expected"),
        "{}",
        show(&rep)
    );
    assert_eq!(rep.findings.len(), 1, "{}", show(&rep));
}

#[test]
fn a_deleted_log_is_missing() {
    let r = smoke();
    let log = "steps/left/1/stderr.log";
    std::fs::remove_file(r.dir.join(log)).unwrap();
    let rep = verify(&r.dir);
    assert!(has(&rep, FindingKind::Missing, log, ""), "{}", show(&rep));
    assert!(!rep.ok(false));
}

#[test]
fn an_added_step_with_a_matching_digest_is_caught() {
    let r = smoke();
    let mut rec = load(&r.dir);
    let mut extra = rec.steps[3].clone();
    extra.id = "extra".into();
    rec.steps.push(extra);
    write_record(&r.dir, &rec).unwrap(); // record.sha256 agrees with the edit
    let rep = verify(&r.dir);
    assert!(
        !rep.findings
            .iter()
            .any(|f| f.message.contains("record.sha256 says")),
        "{}",
        show(&rep)
    );
    assert!(
        has(&rep, FindingKind::Malformed, "record.json", "step `extra`"),
        "{}",
        show(&rep)
    );
    assert!(
        has(
            &rep,
            FindingKind::Mismatch,
            "record.json",
            "attestation subject record digest"
        ),
        "{}",
        show(&rep)
    );
}

#[test]
fn a_dropped_step_with_a_matching_digest_is_caught() {
    let r = smoke();
    let mut rec = load(&r.dir);
    let upper = rec.steps[1].outputs[0].path.clone();
    rec.steps.retain(|s| s.id != "left");
    write_record(&r.dir, &rec).unwrap();
    let rep = verify(&r.dir);
    assert!(
        has(&rep, FindingKind::Malformed, "record.json", "step `left`"),
        "{}",
        show(&rep)
    );
    assert!(
        has(
            &rep,
            FindingKind::Mismatch,
            "record.json",
            "attestation subject record digest"
        ),
        "{}",
        show(&rep)
    );
    // What the attestation still names but the record no longer does.
    for name in ["steps/left/1/stdout.log", upper.as_str()] {
        assert!(
            has(
                &rep,
                FindingKind::Mismatch,
                name,
                "attestation subject added"
            ),
            "{name}: {}",
            show(&rep)
        );
    }
}

#[test]
fn swapped_output_digests_are_caught_by_rehashing() {
    let r = smoke();
    let mut rec = load(&r.dir);
    let a = rec.steps[0].outputs[0].clone();
    let b = rec.steps[1].outputs[0].clone();
    assert_ne!(a.sha256, b.sha256);
    for (i, d) in [(0, b.sha256.clone()), (1, a.sha256.clone())] {
        rec.steps[i].outputs[0].sha256 = d.clone();
        rec.steps[i].attempts[0].outputs[0].sha256 = d;
    }
    write_record(&r.dir, &rec).unwrap();
    let rep = verify(&r.dir);
    for o in [&a, &b] {
        assert!(
            has(&rep, FindingKind::Mismatch, &o.path, "sha256: expected"),
            "{}: {}",
            o.path,
            show(&rep)
        );
    }
}

#[test]
fn a_reformatted_record_is_not_canonical() {
    let r = smoke();
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.dir.join("record.json")).unwrap()).unwrap();
    let pretty = serde_json::to_vec_pretty(&v).unwrap();
    let hex = orchestrate::digest::sha256_bytes(&pretty).hex();
    std::fs::write(r.dir.join("record.json"), &pretty).unwrap();
    std::fs::write(r.dir.join("record.sha256"), format!("{hex}  record.json\n")).unwrap();
    let rep = verify(&r.dir);
    assert!(
        has(&rep, FindingKind::Malformed, "record.json", "canonical"),
        "{}",
        show(&rep)
    );
}

#[test]
fn a_dropped_attestation_subject_is_named() {
    let r = smoke();
    let path = r.dir.join(ATTESTATION_FILE);
    let mut stmt: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let subjects = stmt["subject"].as_array_mut().unwrap();
    let i = subjects
        .iter()
        .position(|s| s["name"] == "plan.toml")
        .unwrap();
    subjects.remove(i);
    let mut line = orchestrate::evidence::jcs::to_canonical_vec(&stmt);
    line.push(b'\n');
    std::fs::write(&path, line).unwrap();
    let rep = verify(&r.dir);
    assert!(
        has(
            &rep,
            FindingKind::Mismatch,
            "plan.toml",
            "attestation subject dropped"
        ),
        "{}",
        show(&rep)
    );
    assert_eq!(rep.findings.len(), 1, "{}", show(&rep));
}

#[test]
fn absent_artifacts_fail_only_when_required() {
    let r = smoke();
    std::fs::remove_dir_all(&r.work).unwrap();
    let rep = verify(&r.dir);
    assert!(!rep.findings.is_empty());
    assert!(
        rep.findings
            .iter()
            .all(|f| f.kind == FindingKind::AbsentArtifact
                && f.path.starts_with(&*r.work.to_string_lossy())),
        "{}",
        show(&rep)
    );
    // greeting, upper, 4 x count (warm-up included), joined.
    assert_eq!(rep.findings.len(), 7, "{}", show(&rep));
    assert!(rep.ok(false));
    assert!(!rep.ok(true));
}

#[test]
fn a_signed_attestation_verifies_with_its_key_only() {
    let r = smoke();
    let keys = tempfile::tempdir().unwrap();
    let key_path = keys.path().join("key.pem");
    let pem = signing_key_to_pem(&SigningKey::from_bytes(&[7u8; 32])).unwrap();
    std::fs::write(&key_path, pem).unwrap();
    let pub_path = keys.path().join("key.pub.pem");
    let key = load_signing_key(&key_path).unwrap();
    std::fs::write(
        &pub_path,
        verifying_key_to_pem(&key.verifying_key()).unwrap(),
    )
    .unwrap();
    let rec = load(&r.dir);
    write_attestation(&r.dir, &rec, Some(&key)).unwrap();

    let right = VerifyOptions {
        key: Some(load_verifying_key(&pub_path).unwrap()),
        require_artifacts: true,
    };
    let rep = verify_run(&r.dir, &right);
    assert!(rep.findings.is_empty(), "{}", show(&rep));
    // Without a key the content is still checked, the signature is not judged.
    assert!(verify(&r.dir).findings.is_empty());

    let other = VerifyOptions {
        key: Some(SigningKey::from_bytes(&[8u8; 32]).verifying_key()),
        require_artifacts: true,
    };
    let rep = verify_run(&r.dir, &other);
    assert!(
        has(
            &rep,
            FindingKind::Signature,
            ATTESTATION_FILE,
            "no signature by key"
        ),
        "{}",
        show(&rep)
    );
    assert!(!rep.ok(false));

    // One byte of the payload changed: the signature no longer matches.
    use base64ct::{Base64, Encoding};
    let path = r.dir.join(ATTESTATION_FILE);
    let mut env: Envelope = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut payload = Base64::decode_vec(&env.payload).unwrap();
    let at = payload.len() / 2;
    payload[at] ^= 0x01;
    env.payload = Base64::encode_string(&payload);
    std::fs::write(&path, serde_json::to_vec(&env).unwrap()).unwrap();
    let rep = verify_run(&r.dir, &right);
    assert!(
        has(
            &rep,
            FindingKind::Signature,
            ATTESTATION_FILE,
            "does not match"
        ),
        "{}",
        show(&rep)
    );
}

#[test]
fn an_unsigned_attestation_fails_when_a_key_is_given() {
    let r = smoke();
    let opts = VerifyOptions {
        key: Some(SigningKey::from_bytes(&[7u8; 32]).verifying_key()),
        require_artifacts: false,
    };
    let rep = verify_run(&r.dir, &opts);
    assert!(
        has(&rep, FindingKind::Signature, ATTESTATION_FILE, "unsigned"),
        "{}",
        show(&rep)
    );
    assert_eq!(rep.findings.len(), 1, "{}", show(&rep));
}
