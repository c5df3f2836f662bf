//! in-toto Statement v1: the list of things a run produced (subjects, each named by
//! its SHA-256) plus a typed predicate saying what the run was. `dsse` signs it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::Sha256Digest;

/// `_type` of every in-toto Statement v1.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";

/// Predicate type of an orchestrate experiment run.
pub const PREDICATE_TYPE: &str = "https://orchestrate.dev/experiment-run/v1";

/// One artifact named by the statement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    /// Path of the artifact relative to the record folder, `/`-separated.
    pub name: String,
    /// Algorithm -> lowercase hex digest; we always write `sha256`.
    pub digest: BTreeMap<String, String>,
}

impl Subject {
    /// A subject with its SHA-256.
    pub fn sha256(name: impl Into<String>, digest: &Sha256Digest) -> Self {
        Subject {
            name: name.into(),
            digest: BTreeMap::from([("sha256".to_string(), digest.hex())]),
        }
    }
}

/// An in-toto Statement v1 (canonicalize it with `jcs::to_canonical` before signing).
#[derive(Debug, Serialize)]
pub struct Statement<'a, P> {
    #[serde(rename = "_type")]
    type_: &'static str,
    subject: Vec<Subject>,
    #[serde(rename = "predicateType")]
    predicate_type: &'a str,
    predicate: P,
}

/// Build a Statement v1 around `predicate`.
pub fn statement<P: Serialize>(
    subjects: Vec<Subject>,
    predicate_type: &str,
    predicate: P,
) -> Statement<'_, P> {
    Statement {
        type_: STATEMENT_TYPE,
        subject: subjects,
        predicate_type,
        predicate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::sha256_bytes;

    #[test]
    fn statement_has_the_v1_shape() {
        let s = statement(
            vec![Subject::sha256("record.json", &sha256_bytes(b"abc"))],
            PREDICATE_TYPE,
            serde_json::json!({"run_id": "r1"}),
        );
        let text = String::from_utf8(crate::evidence::jcs::to_canonical(&s).unwrap()).unwrap();
        assert_eq!(
            text,
            "{\"_type\":\"https://in-toto.io/Statement/v1\",\"predicate\":{\"run_id\":\"r1\"},\
             \"predicateType\":\"https://orchestrate.dev/experiment-run/v1\",\"subject\":[{\"digest\":\
             {\"sha256\":\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\"},\
             \"name\":\"record.json\"}]}"
        );
    }
}
