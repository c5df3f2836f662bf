//! DSSE (Dead Simple Signing Envelope) around an in-toto statement, signed with
//! ed25519.
//!
//! What is signed is never the JSON envelope but the PAE (pre-authentication
//! encoding) of payload type and payload bytes, so a signature cannot be moved to a
//! payload of another type. Keys are the files OpenSSL writes: private keys as
//! PKCS#8 PEM (`openssl genpkey -algorithm ed25519`), public keys as SPKI PEM
//! (`openssl pkey -pubout`). A key's id is the hex SHA-256 of its canonical (JCS)
//! key document `{"keytype":"ed25519","scheme":"ed25519","keyval":{"public":HEX}}`,
//! the securesystemslib convention in-toto tools use.

use std::path::{Path, PathBuf};

use base64ct::{Base64, Encoding};
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signature, Signer};
use serde::{Deserialize, Serialize};

pub use ed25519_dalek::{SigningKey, VerifyingKey};

use crate::digest::sha256_bytes;
use crate::evidence::jcs::to_canonical_vec;

/// Payload type of an in-toto statement.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// A DSSE envelope, serialized with the spec's field names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// Standard base64 (padded) of the payload bytes.
    pub payload: String,
    /// Media type of the payload.
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// One entry per signing key.
    pub signatures: Vec<EnvelopeSignature>,
}

/// One signature of an envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeSignature {
    /// [`key_id`] of the signing key.
    pub keyid: String,
    /// Standard base64 of the 64-byte ed25519 signature over the PAE.
    pub sig: String,
}

/// Why an envelope did not verify.
#[derive(Debug, thiserror::Error)]
pub enum DsseError {
    /// The payload type is not the one expected.
    #[error("payload type is {found:?}, expected {expected:?}")]
    WrongPayloadType {
        /// What the envelope says.
        found: String,
        /// What we verify.
        expected: &'static str,
    },
    /// A field that must be base64 is not.
    #[error("{field} is not valid base64")]
    BadBase64 {
        /// `payload` or `sig`.
        field: &'static str,
    },
    /// No signature was made by the given key.
    #[error("no signature by key {expected} (envelope has: {})", found.join(", "))]
    WrongKeyId {
        /// Id of the key we verify with.
        expected: String,
        /// Key ids present in the envelope.
        found: Vec<String>,
    },
    /// A signature by the key is there but does not match the payload: the payload
    /// or the signature was changed.
    #[error(
        "signature by key {keyid} does not match the payload (payload or signature was altered)"
    )]
    BadSignature {
        /// Id of the key.
        keyid: String,
    },
}

/// Why a key file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file could not be read.
    #[error("cannot read key {}: {source}", path.display())]
    Io {
        /// Key file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not an ed25519 key in the expected PEM form.
    #[error("{} is not an ed25519 {expected} PEM key ({reason}); make one with `openssl genpkey -algorithm ed25519 -out key.pem`", path.display())]
    Parse {
        /// Key file.
        path: PathBuf,
        /// "private (PKCS#8)" or "public (SPKI) or private".
        expected: &'static str,
        /// The decoder's reason (never key material).
        reason: String,
    },
    /// A key could not be written as PEM.
    #[error("cannot encode key as PEM: {reason}")]
    Encode {
        /// The encoder's reason.
        reason: String,
    },
}

/// DSSE pre-authentication encoding:
/// `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, lengths in ASCII decimal.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + payload_type.len() + 32);
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(payload_type.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload);
    out
}

/// Key id: hex SHA-256 of the canonical key document (see the module docs).
pub fn key_id(key: &VerifyingKey) -> String {
    let public: String = key.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
    let doc = serde_json::json!({
        "keytype": "ed25519",
        "scheme": "ed25519",
        "keyval": { "public": public },
    });
    sha256_bytes(&to_canonical_vec(&doc)).hex()
}

/// Sign statement bytes (canonical JSON of an in-toto statement) into an envelope.
pub fn sign(statement_json_bytes: &[u8], key: &SigningKey) -> Envelope {
    sign_typed(IN_TOTO_PAYLOAD_TYPE, statement_json_bytes, key)
}

/// Sign `payload` of `payload_type` into an envelope.
pub fn sign_typed(payload_type: &str, payload: &[u8], key: &SigningKey) -> Envelope {
    let sig: Signature = key.sign(&pae(payload_type, payload));
    Envelope {
        payload: Base64::encode_string(payload),
        payload_type: payload_type.to_string(),
        signatures: vec![EnvelopeSignature {
            keyid: key_id(&key.verifying_key()),
            sig: Base64::encode_string(&sig.to_bytes()),
        }],
    }
}

/// Check the envelope's signature by `key` and return the payload bytes.
///
/// Only signatures whose keyid is this key's are tried; uses ed25519's strict
/// verification (no malleable or small-order signatures).
pub fn verify(envelope: &Envelope, key: &VerifyingKey) -> Result<Vec<u8>, DsseError> {
    verify_typed(envelope, IN_TOTO_PAYLOAD_TYPE, key)
}

/// [`verify`] for an envelope that must carry `expected` as its payload type.
pub fn verify_typed(
    envelope: &Envelope,
    expected: &'static str,
    key: &VerifyingKey,
) -> Result<Vec<u8>, DsseError> {
    if envelope.payload_type != expected {
        return Err(DsseError::WrongPayloadType {
            found: envelope.payload_type.clone(),
            expected,
        });
    }
    let payload = Base64::decode_vec(&envelope.payload)
        .map_err(|_| DsseError::BadBase64 { field: "payload" })?;
    let keyid = key_id(key);
    let mine: Vec<&EnvelopeSignature> = envelope
        .signatures
        .iter()
        .filter(|s| s.keyid == keyid)
        .collect();
    if mine.is_empty() {
        return Err(DsseError::WrongKeyId {
            expected: keyid,
            found: envelope
                .signatures
                .iter()
                .map(|s| s.keyid.clone())
                .collect(),
        });
    }
    let message = pae(&envelope.payload_type, &payload);
    for s in mine {
        let raw = Base64::decode_vec(&s.sig).map_err(|_| DsseError::BadBase64 { field: "sig" })?;
        let Ok(sig) = Signature::from_slice(&raw) else {
            continue;
        };
        if key.verify_strict(&message, &sig).is_ok() {
            return Ok(payload);
        }
    }
    Err(DsseError::BadSignature { keyid })
}

fn read_key(path: &Path) -> Result<String, KeyError> {
    std::fs::read_to_string(path).map_err(|source| KeyError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Load an ed25519 private key from a PKCS#8 PEM file.
pub fn load_signing_key(path: &Path) -> Result<SigningKey, KeyError> {
    let pem = read_key(path)?;
    SigningKey::from_pkcs8_pem(&pem).map_err(|e| KeyError::Parse {
        path: path.to_path_buf(),
        expected: "private (PKCS#8)",
        reason: e.to_string(),
    })
}

/// Load an ed25519 public key from an SPKI PEM file, or derive it from a private
/// key file (so a signer can verify with the key it signed with).
pub fn load_verifying_key(path: &Path) -> Result<VerifyingKey, KeyError> {
    let pem = read_key(path)?;
    if pem.contains("PRIVATE KEY") {
        return load_signing_key(path).map(|k| k.verifying_key());
    }
    VerifyingKey::from_public_key_pem(&pem).map_err(|e| KeyError::Parse {
        path: path.to_path_buf(),
        expected: "public (SPKI) or private",
        reason: e.to_string(),
    })
}

/// PKCS#8 PEM text of a private key (what `openssl genpkey` writes).
pub fn signing_key_to_pem(key: &SigningKey) -> Result<String, KeyError> {
    key.to_pkcs8_pem(LineEnding::LF)
        .map(|z| z.to_string())
        .map_err(|e| KeyError::Encode {
            reason: e.to_string(),
        })
}

/// SPKI PEM text of a public key (what `openssl pkey -pubout` writes).
pub fn verifying_key_to_pem(key: &VerifyingKey) -> Result<String, KeyError> {
    key.to_public_key_pem(LineEnding::LF)
        .map_err(|e| KeyError::Encode {
            reason: e.to_string(),
        })
}
