//! DSSE: the spec's PAE vector, sign/verify round trips, tampering, wrong keys, and
//! keys made by OpenSSL when it is on PATH.

use std::process::Command;

use orchestrate::evidence::attest::{statement, Subject, PREDICATE_TYPE};
use orchestrate::evidence::dsse::{
    key_id, load_signing_key, load_verifying_key, pae, sign, signing_key_to_pem, verify,
    verifying_key_to_pem, DsseError, Envelope, KeyError, SigningKey,
};
use orchestrate::evidence::jcs::to_canonical;

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn statement_bytes() -> Vec<u8> {
    let s = statement(
        vec![Subject::sha256(
            "record.json",
            &orchestrate::digest::sha256_bytes(b"record"),
        )],
        PREDICATE_TYPE,
        serde_json::json!({"run_id": "2024-01-01T00-00-00Z-abc", "status": "succeeded"}),
    );
    to_canonical(&s).unwrap()
}

#[test]
fn pae_matches_the_spec_vector() {
    assert_eq!(
        pae("http://example.com/HelloWorld", b"hello world"),
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    );
    assert_eq!(pae("", b""), b"DSSEv1 0  0 ");
}

#[test]
fn sign_verify_round_trip_through_json() {
    let k = key(7);
    let body = statement_bytes();
    let env = sign(&body, &k);
    assert_eq!(env.payload_type, "application/vnd.in-toto+json");
    assert_eq!(env.signatures.len(), 1);
    assert_eq!(env.signatures[0].keyid, key_id(&k.verifying_key()));
    assert_eq!(env.signatures[0].keyid.len(), 64);
    let line = serde_json::to_string(&env).unwrap();
    assert!(line.contains("\"payloadType\""));
    let back: Envelope = serde_json::from_str(&line).unwrap();
    assert_eq!(verify(&back, &k.verifying_key()).unwrap(), body);
}

#[test]
fn any_changed_payload_byte_fails() {
    use base64ct::{Base64, Encoding};
    let k = key(7);
    let body = statement_bytes();
    let env = sign(&body, &k);
    for i in 0..body.len() {
        let mut changed = body.clone();
        changed[i] ^= 0x01;
        let mut bad = env.clone();
        bad.payload = Base64::encode_string(&changed);
        assert!(
            matches!(
                verify(&bad, &k.verifying_key()),
                Err(DsseError::BadSignature { .. })
            ),
            "byte {i} changed but verified"
        );
    }
    let mut bad = env.clone();
    bad.payload.push('!');
    assert!(matches!(
        verify(&bad, &k.verifying_key()),
        Err(DsseError::BadBase64 { field: "payload" })
    ));
    let mut bad = env.clone();
    bad.signatures[0].sig = Base64::encode_string(&[0u8; 64]);
    assert!(matches!(
        verify(&bad, &k.verifying_key()),
        Err(DsseError::BadSignature { .. })
    ));
    let mut bad = env;
    bad.payload_type = "application/json".into();
    assert!(matches!(
        verify(&bad, &k.verifying_key()),
        Err(DsseError::WrongPayloadType { .. })
    ));
}

#[test]
fn another_key_fails() {
    let env = sign(&statement_bytes(), &key(7));
    let other = key(8).verifying_key();
    assert!(matches!(
        verify(&env, &other),
        Err(DsseError::WrongKeyId { .. })
    ));
    // Even when the keyid is forged to the other key's, the signature does not match.
    let mut forged = env;
    forged.signatures[0].keyid = key_id(&other);
    assert!(matches!(
        verify(&forged, &other),
        Err(DsseError::BadSignature { .. })
    ));
}

#[test]
fn pem_keys_round_trip_and_private_key_verifies() {
    let t = tempfile::tempdir().unwrap();
    let k = key(42);
    let priv_path = t.path().join("key.pem");
    let pub_path = t.path().join("key.pub.pem");
    let priv_pem = signing_key_to_pem(&k).unwrap();
    assert!(priv_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    std::fs::write(&priv_path, priv_pem).unwrap();
    std::fs::write(&pub_path, verifying_key_to_pem(&k.verifying_key()).unwrap()).unwrap();

    let loaded = load_signing_key(&priv_path).unwrap();
    assert_eq!(loaded.to_bytes(), k.to_bytes());
    let env = sign(&statement_bytes(), &loaded);
    verify(&env, &load_verifying_key(&pub_path).unwrap()).unwrap();
    verify(&env, &load_verifying_key(&priv_path).unwrap()).unwrap();

    // A public key is no signing key; garbage is an error naming the file.
    assert!(matches!(
        load_signing_key(&pub_path),
        Err(KeyError::Parse { .. })
    ));
    let junk = t.path().join("junk.pem");
    std::fs::write(&junk, "not a key").unwrap();
    let e = load_verifying_key(&junk).unwrap_err();
    assert!(e.to_string().contains("junk.pem"), "{e}");
    assert!(matches!(
        load_verifying_key(&t.path().join("missing.pem")),
        Err(KeyError::Io { .. })
    ));
}

#[test]
fn openssl_keys_load_and_verify_when_available() {
    if Command::new("openssl").arg("version").output().is_err() {
        crate::support::skip_or_fail(crate::support::Need::Tools, "openssl is not on PATH");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let priv_path = t.path().join("ossl.pem");
    let pub_path = t.path().join("ossl.pub.pem");
    let ok = Command::new("openssl")
        .args(["genpkey", "-algorithm", "ed25519", "-out"])
        .arg(&priv_path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "openssl genpkey failed");
    let ok = Command::new("openssl")
        .args(["pkey", "-pubout", "-in"])
        .arg(&priv_path)
        .arg("-out")
        .arg(&pub_path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "openssl pkey -pubout failed");

    let k = load_signing_key(&priv_path).unwrap();
    let vk = load_verifying_key(&pub_path).unwrap();
    assert_eq!(vk, k.verifying_key());
    let env = sign(&statement_bytes(), &k);
    verify(&env, &vk).unwrap();

    // And OpenSSL agrees with our signature over the PAE.
    use base64ct::{Base64, Encoding};
    let msg = t.path().join("pae.bin");
    let sig = t.path().join("sig.bin");
    std::fs::write(&msg, pae(&env.payload_type, &statement_bytes())).unwrap();
    std::fs::write(&sig, Base64::decode_vec(&env.signatures[0].sig).unwrap()).unwrap();
    let out = Command::new("openssl")
        .args(["pkeyutl", "-verify", "-rawin", "-pubin", "-inkey"])
        .arg(&pub_path)
        .arg("-in")
        .arg(&msg)
        .arg("-sigfile")
        .arg(&sig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl rejected our signature: {out:?}"
    );
}
