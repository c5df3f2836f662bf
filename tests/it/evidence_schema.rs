//! The committed record schema is what the code generates, and a record the binary
//! really writes fits the Rust types exactly (parse, then re-canonicalize to the same
//! bytes), so schema, types and writer cannot drift apart.

use std::path::{Path, PathBuf};

use orchestrate::evidence::jcs::to_canonical;
use orchestrate::evidence::record::{schema_string, Record, RECORD_SCHEMA};

fn manifest(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

#[test]
fn committed_record_schema_is_up_to_date() {
    let committed =
        std::fs::read_to_string(manifest("schemas/record.schema.json")).unwrap_or_default();
    assert!(
        committed == schema_string(),
        "schemas/record.schema.json is stale; regenerate it with\n  cargo run -- schema record > schemas/record.schema.json"
    );
}

#[test]
fn a_real_record_round_trips_through_the_types() {
    let t = tempfile::tempdir().unwrap();
    let dir = crate::support::run_smoke(t.path());
    let bytes = std::fs::read(dir.join("record.json")).unwrap();
    let rec: Record = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(rec.schema, RECORD_SCHEMA);
    assert_eq!(rec.steps.len(), 5);
    assert!(rec
        .steps
        .iter()
        .all(|s| !s.attempts.is_empty() || s.kind == orchestrate::plan::StepKind::Compare));
    let again = to_canonical(&rec).unwrap();
    assert!(
        again == bytes,
        "record.json does not survive parse + canonicalize unchanged"
    );

    // The record's top-level keys are exactly what the schema allows and requires.
    let schema: serde_json::Value = serde_json::from_str(&schema_string()).unwrap();
    let props = schema["properties"].as_object().unwrap();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let obj = value.as_object().unwrap();
    for k in obj.keys() {
        assert!(
            props.contains_key(k),
            "record key `{k}` is not in the schema"
        );
    }
    for k in required {
        assert!(
            obj.contains_key(k),
            "schema requires `{k}`, the record lacks it"
        );
    }
}

/// Every field of the record is documented in its schema: a reviewer reading
/// `schemas/record.schema.json` learns what each one means.
#[test]
fn every_record_field_is_documented() {
    let schema: serde_json::Value = serde_json::from_str(&schema_string()).unwrap();
    let mut undocumented = Vec::new();
    let mut visit = |name: &str, def: &serde_json::Value| {
        if let Some(props) = def["properties"].as_object() {
            for (field, p) in props {
                let has = p
                    .get("description")
                    .is_some_and(|d| d.as_str().is_some_and(|s| !s.is_empty()));
                if !has {
                    undocumented.push(format!("{name}.{field}"));
                }
            }
        }
    };
    visit("Record", &schema);
    for (name, def) in schema["$defs"].as_object().into_iter().flatten() {
        visit(name, def);
    }
    assert!(
        undocumented.is_empty(),
        "{} undocumented fields: {}",
        undocumented.len(),
        undocumented.join(", ")
    );
}
