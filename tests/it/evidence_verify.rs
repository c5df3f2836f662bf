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
    // record.json, the record rebuilt from its journal, 2 logs x 7 attempts,
    // plan.toml, journal.jsonl, 7 artifacts, the attestation and the report it names
    // (summary.txt).
    assert_eq!(
        rep.checked,
        1 + 1 + 14 + 1 + 1 + 7 + 1 + 1,
        "{}",
        show(&rep)
    );
    assert!(rep.ok(true));
    let text = show(&rep);
    assert!(
        text.starts_with(&format!(
            "ok: {} files checked\nintegrity: holds: every digest",
            rep.checked
        )),
        "{text}"
    );
    // Unsigned evidence has integrity, not authenticity, and verify says so.
    assert!(
        text.contains("authenticity: not established: the attestation is unsigned"),
        "{text}"
    );
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

/// Rewrite the record (a forgery: digest recomputed) after `edit`.
fn forge(dir: &Path, edit: impl FnOnce(&mut Record)) {
    let mut rec = load(dir);
    edit(&mut rec);
    write_record(dir, &rec).unwrap();
}

/// A secret outside any record: verify must never show its digest or size.
struct Secret {
    _dir: tempfile::TempDir,
    path: PathBuf,
    sha: String,
    size: String,
}

fn secret() -> Secret {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("shadow");
    let body = b"root:$6$not-for-verify-to-read$:19000:0:99999:7:::\n";
    std::fs::write(&path, body).unwrap();
    Secret {
        sha: orchestrate::digest::sha256_bytes(body).hex(),
        size: body.len().to_string(),
        path,
        _dir: d,
    }
}

fn leaks(rep: &VerifyReport, s: &Secret) -> bool {
    let text = show(rep);
    text.contains(&s.sha) || text.contains(&format!("found {} bytes", s.size))
}

#[test]
fn verify_reads_nothing_through_links_that_leave_the_record_folder() {
    let s = secret();
    let r = smoke();
    // A log replaced by a link to the secret.
    let log = r.dir.join("steps/left/1/stdout.log");
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink(&s.path, &log).unwrap();
    let rep = verify(&r.dir);
    assert!(
        has(
            &rep,
            FindingKind::Missing,
            "steps/left/1/stdout.log",
            "symbolic link"
        ),
        "{}",
        show(&rep)
    );
    assert!(!leaks(&rep, &s), "{}", show(&rep));
    // A folder of the record replaced by a link out.
    let r2 = smoke();
    let steps = r2.dir.join("steps/join");
    std::fs::remove_dir_all(&steps).unwrap();
    std::os::unix::fs::symlink(s.path.parent().unwrap(), &steps).unwrap();
    std::fs::create_dir_all(s.path.parent().unwrap().join("1")).unwrap();
    std::fs::copy(&s.path, s.path.parent().unwrap().join("1/stdout.log")).unwrap();
    let rep = verify(&r2.dir);
    assert!(
        has(
            &rep,
            FindingKind::Malformed,
            "steps/join/1/stdout.log",
            "leads out"
        ),
        "{}",
        show(&rep)
    );
    assert!(!leaks(&rep, &s), "{}", show(&rep));
}

#[test]
fn verify_reads_no_artifact_outside_the_runs_work_folder() {
    let s = secret();
    let r = smoke();
    // An output path forged to name the secret, and one forged to name /root.
    forge(&r.dir, |rec| {
        let o = &mut rec.steps[1].attempts[0].outputs[0];
        o.path = s.path.display().to_string();
        rec.steps[1].outputs = rec.steps[1].attempts[0].outputs.clone();
        let o = &mut rec.steps[0].attempts[0].outputs[0];
        o.path = "/root".into();
        o.kind = orchestrate::evidence::record::OutputKind::Dir;
        rec.steps[0].outputs = rec.steps[0].attempts[0].outputs.clone();
    });
    write_attestation(&r.dir, &load(&r.dir), None).unwrap();
    let start = std::time::Instant::now();
    let rep = verify(&r.dir);
    let path = s.path.display().to_string();
    assert!(
        has(
            &rep,
            FindingKind::NotChecked,
            &path,
            "outside the run's work folder"
        ),
        "{}",
        show(&rep)
    );
    assert!(
        has(&rep, FindingKind::NotChecked, "/root", "outside"),
        "{}",
        show(&rep)
    );
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
    assert!(!leaks(&rep, &s), "{}", show(&rep));
    // The forged paths are not what the run's journal says either.
    assert!(
        has(
            &rep,
            FindingKind::Mismatch,
            "record.json",
            "not what its journal says"
        ),
        "{}",
        show(&rep)
    );
    // Not read is not proven: with --require-artifacts it fails.
    assert!(!rep.ok(true));

    // A work folder forged to be the secret's folder is refused as a whole.
    let r2 = smoke();
    forge(&r2.dir, |rec| {
        rec.run.options.work = s.path.parent().unwrap().display().to_string();
        let o = &mut rec.steps[1].attempts[0].outputs[0];
        o.path = "shadow".into();
        rec.steps[1].outputs = rec.steps[1].attempts[0].outputs.clone();
    });
    let rep = verify(&r2.dir);
    assert!(
        has(
            &rep,
            FindingKind::NotChecked,
            "shadow",
            "not named for the run id"
        ),
        "{}",
        show(&rep)
    );
    assert!(!leaks(&rep, &s), "{}", show(&rep));

    // An artifact inside the work folder replaced by a link out is not followed.
    let r3 = smoke();
    let upper = load(&r3.dir).steps[1].outputs[0].path.clone();
    std::fs::remove_file(&upper).unwrap();
    std::os::unix::fs::symlink(&s.path, &upper).unwrap();
    let rep = verify(&r3.dir);
    assert!(
        has(
            &rep,
            FindingKind::Mismatch,
            &upper,
            "recorded as a regular file, found a symbolic link"
        ),
        "{}",
        show(&rep)
    );
    assert!(!leaks(&rep, &s), "{}", show(&rep));
    assert_eq!(r3.work, PathBuf::from(load(&r3.dir).run.options.work));
}

#[test]
fn editing_the_journal_or_a_report_is_caught() {
    let r = smoke();
    let journal = r.dir.join("journal.jsonl");
    let mut text = std::fs::read_to_string(&journal).unwrap();
    text = text.replacen("\"seq\":2", "\"seq\":2 ", 1);
    std::fs::write(&journal, text).unwrap();
    let report = r.dir.join("summary.txt");
    let mut s = std::fs::read_to_string(&report).unwrap();
    s.push_str("all good, trust me\n");
    std::fs::write(&report, s).unwrap();
    let rep = verify(&r.dir);
    assert!(
        has(&rep, FindingKind::Mismatch, "journal.jsonl", "size"),
        "{}",
        show(&rep)
    );
    assert!(
        has(
            &rep,
            FindingKind::Mismatch,
            "summary.txt",
            "edited after the run"
        ),
        "{}",
        show(&rep)
    );
    // A report added afterwards is named too.
    std::fs::write(r.dir.join("report.md"), "# Looks fine\n").unwrap();
    let rep = verify(&r.dir);
    assert!(
        has(&rep, FindingKind::Mismatch, "report.md", "does not cover"),
        "{}",
        show(&rep)
    );
}

#[test]
fn verify_says_a_signature_it_did_not_check_was_not_checked() {
    let r = smoke();
    let key = SigningKey::from_bytes(&[9u8; 32]);
    write_attestation(&r.dir, &load(&r.dir), Some(&key)).unwrap();
    let rep = verify(&r.dir);
    assert!(rep.ok(true), "{}", show(&rep));
    let text = show(&rep);
    assert!(
        text.contains("authenticity: not checked: the attestation is signed"),
        "{text}"
    );
    // A signature that does not match, without a key: still "not checked", never
    // "holds"; with the key it fails.
    let path = r.dir.join(ATTESTATION_FILE);
    let mut env: Envelope = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut sig = env.signatures[0].sig.clone().into_bytes();
    sig[3] = if sig[3] == b'A' { b'B' } else { b'A' };
    env.signatures[0].sig = String::from_utf8(sig).unwrap();
    std::fs::write(&path, serde_json::to_vec(&env).unwrap()).unwrap();
    let text = show(&verify(&r.dir));
    assert!(text.contains("authenticity: not checked"), "{text}");
    assert!(!text.contains("authenticity: holds"), "{text}");
    let with_key = VerifyOptions {
        key: Some(key.verifying_key()),
        require_artifacts: false,
    };
    let rep = verify_run(&r.dir, &with_key);
    assert!(!rep.ok(false));
    assert!(render_report(&rep, false).contains("authenticity: does not hold"));
}

#[test]
fn a_record_with_an_integer_json_cannot_hold_is_still_written() {
    let r = smoke();
    let mut rec = load(&r.dir);
    rec.steps[0].attempts[0].peak_memory_bytes = Some(u64::MAX);
    write_record(&r.dir, &rec).unwrap();
    let back = load(&r.dir);
    assert_eq!(
        back.steps[0].attempts[0].peak_memory_bytes,
        Some((1 << 53) - 1)
    );
    assert!(
        back.warnings
            .iter()
            .any(|w| w.contains("peak_memory_bytes: 18446744073709551615")),
        "{:?}",
        back.warnings
    );
}

#[test]
fn verify_checks_the_allocation_invariants() {
    use orchestrate::evidence::record::Allocation;
    let r = smoke();
    let alloc = |step: &str, from: &str, to: Option<&str>| Allocation {
        lease: "sim-gpu0:0".into(),
        request: "gpu".into(),
        step: step.into(),
        device: "sim-gpu0".into(),
        kind: "gpu".into(),
        uuid: None,
        cores: vec![0],
        whole_device: true,
        simulated: true,
        granted_at: from.into(),
        released_at: to.map(String::from),
        release_error: None,
    };
    forge(&r.dir, |rec| {
        rec.allocations = vec![
            alloc("left", "2026-12-01T10:00:00Z", Some("2026-12-01T10:00:05Z")),
            // Granted before the first was released: two owners of one core.
            alloc(
                "right",
                "2026-12-01T10:00:04Z",
                Some("2026-12-01T10:00:06Z"),
            ),
            // Never released, yet the audit passed.
            alloc("join", "2026-12-01T10:00:07Z", None),
            alloc(
                "nowhere",
                "2026-12-01T10:00:09Z",
                Some("2026-12-01T10:00:10Z"),
            ),
        ];
    });
    write_attestation(&r.dir, &load(&r.dir), None).unwrap();
    let rep = verify(&r.dir);
    for text in [
        "core 0 is held by steps `left` and `right` at once",
        "allocation sim-gpu0:0 of step `join`: never released, yet the release audit passed",
        "allocation sim-gpu0:0 of step `nowhere`: the step is not recorded",
    ] {
        assert!(
            has(&rep, FindingKind::Malformed, "record.json", text),
            "{text}\n{}",
            show(&rep)
        );
    }
}
