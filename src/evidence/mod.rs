//! Evidence: canonical JSON, hashing, records, attestations, verification.
