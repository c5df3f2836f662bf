//! Evidence: the journal written while a run lives, the record built from it,
//! canonical JSON, hashing, attestations and verification.
//!
//! - [`journal`]: events written as they happen, fdatasynced in groups; the source of
//!   truth while the run lives.
//! - [`record`]: `record.json` built from the journal.
//! - [`jcs`]: RFC 8785 canonical JSON; a record's digest is the SHA-256 of these bytes.
//! - [`float`]: serde helpers so non-finite floats and durations survive canonical JSON.
//! - [`atomic`]: crash-safe file replacement.
//! - [`attest`]: in-toto Statement v1 naming what a run produced.
//! - [`dsse`]: DSSE envelopes signed with ed25519 around such a statement.
//! - [`attestation`]: `attestation.intoto.jsonl`, the statement of a record (signed or not).
//! - [`verify`]: re-hash a record folder and report, per path, what changed.
//!
//! ```text
//! events --append--> journal.jsonl --build--> Record
//! Record --jcs--> record.json --write_atomic--> disk, sha256 -> record.sha256
//! subjects + record digest --attest--> Statement --dsse::sign--> attestation.intoto.jsonl
//! record folder + disk --verify--> findings (mismatch, missing, absent, malformed, signature)
//! ```

pub mod atomic;
pub mod attest;
pub mod attestation;
pub mod build;
pub mod dsse;
pub mod float;
pub mod jcs;
mod jcs_error;
mod jcs_key;
mod jcs_scalar;
mod jcs_stream;
pub mod journal;
mod predicate;
pub mod revisions;
mod store;
pub mod verify;

pub use crate::record::contract;
pub use crate::record::run as record;

pub use attestation::{write_attestation, write_attestation_for, AttestError, ATTESTATION_FILE};
pub use store::{write_record, StoreError};
pub use verify::{render_report, verify_run, Finding, FindingKind, VerifyOptions, VerifyReport};
