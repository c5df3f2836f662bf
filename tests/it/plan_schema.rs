//! The committed JSON Schema is what the code generates, and every committed plan fits
//! both the schema's input types and the hand walker, so the two cannot drift apart.

use std::path::Path;

use orchestrate::plan::{load_str, schema::PlanInput, schema_string};

#[test]
fn committed_schema_is_up_to_date() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/plan.schema.json");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == schema_string(),
        "schemas/plan.schema.json is stale; regenerate it with\n  cargo run -- schema plan > schemas/plan.schema.json"
    );
}

#[test]
fn every_plan_fits_the_schema_types_and_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans");
    let mut seen = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for path in entries {
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        seen += 1;
        let src = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            src.starts_with("#:schema ../schemas/plan.schema.json\n"),
            "{} must start with `#:schema ../schemas/plan.schema.json`",
            path.display()
        );
        if let Err(e) = toml::from_str::<PlanInput>(&src) {
            panic!("{} does not fit the schema types: {e}", path.display());
        }
        // Env vars a plan may use get a harmless value so only the format is tested;
        // a plan that includes another is loaded from its file.
        let loaded = if src.contains("\ninclude = ") {
            orchestrate::plan::load(&path)
        } else {
            load_str(&src, &path, &|_| Some("/tmp".to_string()))
        };
        if let Err(e) = loaded {
            panic!("{e}");
        }
    }
    assert!(seen > 0, "no plans found under plans/");
}

#[test]
fn schema_types_refuse_unknown_keys_like_the_walker() {
    let src =
        "schema = \"orchestrate/plan/v1\"\nname = \"x\"\n[steps.a]\nshell = \"x\"\nfrobnicate = true\n";
    assert!(toml::from_str::<PlanInput>(src).is_err());
    assert!(load_str(src, Path::new("x.toml"), &|_| None).is_err());
}
