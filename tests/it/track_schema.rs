//! The `--json` of `runs`, `trend STEP METRIC` and `trend tests` is covered by the
//! committed schemas: they are what the code generates, and real output of real
//! runs validates against them (Python's `jsonschema`, Draft 2020-12; every object
//! denies fields the schema lacks).

use std::path::Path;

use crate::support::{cli, shown, skip_or_fail, Need};

const KINDS: [&str; 3] = ["runs", "trend", "trend-tests"];

/// Validate `value` against `schemas/<kind>.schema.json`; false when Python's
/// jsonschema is missing (after `skip_or_fail`).
pub fn validate(kind: &str, value: &serde_json::Value) -> bool {
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("schemas/{kind}.schema.json"));
    let t = tempfile::tempdir().unwrap();
    let doc = t.path().join("doc.json");
    std::fs::write(&doc, serde_json::to_vec(value).unwrap()).unwrap();
    let check = "import json, sys, jsonschema\n\
        schema = json.load(open(sys.argv[1]))\n\
        jsonschema.validators.validator_for(schema).check_schema(schema)\n\
        jsonschema.validate(json.load(open(sys.argv[2])), schema)\n";
    let have = std::process::Command::new("python3")
        .args(["-c", "import jsonschema"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        skip_or_fail(Need::PyTools, "python3 has no jsonschema");
        return false;
    }
    let out = std::process::Command::new("python3")
        .args(["-c", check])
        .arg(&schema)
        .arg(&doc)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{kind} output does not validate: {}\n{value:#}",
        shown(&out)
    );
    true
}

#[test]
fn the_committed_schemas_are_current() {
    for kind in KINDS {
        let out = cli().args(["schema", kind]).output().unwrap();
        assert!(out.status.success(), "{}", shown(&out));
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("schemas/{kind}.schema.json"));
        assert!(
            std::fs::read_to_string(&path).unwrap_or_default() == String::from_utf8_lossy(&out.stdout),
            "schemas/{kind}.schema.json is stale; regenerate it with\n  cargo run -- schema {kind} > schemas/{kind}.schema.json"
        );
    }
}

const PLAN: &str = r#"schema = "orchestrate/plan/v1"
name = "shaped"
[steps.bench]
repeats = 3
shell = '''printf '{"latency_ms": %s}' "1${repeat}" > "$ORCHESTRATE_METRICS"'''
[steps.bench.report]
metric = "latency_ms"
[steps.tests]
shell = '''cat > ${out}/junit.xml <<'X'
<testsuite name="s" tests="2" failures="1"><testcase classname="s" name="a"/><testcase classname="s" name="b"><failure message="no"/></testcase></testsuite>
X'''
results = { junit = "${out}/junit.xml" }
"#;

#[test]
fn real_output_of_runs_and_trend_validates_against_its_schema() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let plan = root.join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    for _ in 0..2 {
        let (_, out) = crate::support::run_plan_in(root, &plan, &root.join("records"), &[]);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{}", shown(&out));
    }
    // A folder that does not verify is listed too, with fewer fields.
    std::fs::create_dir_all(root.join("records/broken")).unwrap();
    std::fs::write(root.join("records/broken/record.json"), "{").unwrap();
    let json = |args: &[&str]| -> serde_json::Value {
        let out = cli()
            .args(args)
            .args(["--records", "records", "--json"])
            .current_dir(root)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", shown(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let runs = json(&["runs"]);
    assert_eq!(runs.as_array().unwrap().len(), 3, "{runs:#}");
    assert!(runs
        .as_array()
        .unwrap()
        .iter()
        .any(|r| !r["headline"].as_array().unwrap().is_empty()));
    let trend = json(&["trend", "bench", "latency_ms"]);
    assert_eq!(trend["points"].as_array().unwrap().len(), 2, "{trend:#}");
    let tests = json(&["trend", "tests"]);
    assert!(
        tests["tests"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["id"] == "s::b"),
        "{tests:#}"
    );
    if !validate("runs", &runs) {
        return;
    }
    validate("trend", &trend);
    validate("trend-tests", &tests);
    // And a field the schema lacks is refused: the check can fail.
    let mut extra = runs.clone();
    extra[0]["surprise"] = 1.into();
    let caught = std::panic::catch_unwind(|| validate("runs", &extra));
    assert!(caught.is_err(), "an unknown field passed the schema");
}
