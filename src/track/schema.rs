//! JSON Schemas of what the tracking commands print with `--json`: `runs`, `trend
//! STEP METRIC` and `trend tests`. Committed under `schemas/` and checked current by
//! the tests, which validate real output against them; a field is added there
//! before it is printed (every object denies unknown fields).

fn pretty(mut schema: schemars::Schema, title: &str, what: &str) -> String {
    schema.insert("title".into(), title.into());
    schema.insert("description".into(), what.into());
    let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
    s.push('\n');
    s
}

/// `runs --json`: every run, oldest first.
pub fn runs() -> String {
    pretty(
        schemars::schema_for!(Vec<super::RunRow>),
        "orchestrate runs --json",
        "Every run of the records folders, oldest first (docs/tracking.md).",
    )
}

/// `trend STEP METRIC --json`.
pub fn trend() -> String {
    pretty(
        schemars::schema_for!(super::trend::Trend),
        "orchestrate trend STEP METRIC --json",
        "A step metric over commits (or runs) and the changes found in it.",
    )
}

/// `trend tests --json`.
pub fn trend_tests() -> String {
    pretty(
        schemars::schema_for!(super::trend::TestsTrend),
        "orchestrate trend tests --json",
        "Each test case that failed somewhere and each finding, over commits.",
    )
}
