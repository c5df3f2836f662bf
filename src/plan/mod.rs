//! The plan: TOML loaded with spans, validated (every error at once), resolved.

pub mod model;

pub use model::*;

// Placeholders until the loader lands (issue 2); they refuse rather than pretend.
use std::path::Path;

/// Every error found in a plan, rendered with file:line:col and a snippet.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PlanErrors(pub String);

pub fn load(path: &Path) -> Result<Plan, PlanErrors> {
    Err(PlanErrors(format!(
        "{}: plan loading is not built yet\n",
        path.display()
    )))
}

pub fn describe(plan: &Plan) -> String {
    format!("{}\n", plan.name)
}

pub fn schema_string() -> String {
    "{}\n".to_string()
}

pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let (n, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        return Err(format!("bad duration {s}"));
    };
    n.parse::<f64>()
        .map(|x| std::time::Duration::from_secs_f64(x * mult))
        .map_err(|e| e.to_string())
}

pub fn parse_size(s: &str) -> Result<ByteSize, String> {
    let (n, m) = if let Some(n) = s.strip_suffix("GiB") {
        (n, 1u64 << 30)
    } else if let Some(n) = s.strip_suffix("MiB") {
        (n, 1 << 20)
    } else {
        (s, 1)
    };
    n.parse::<u64>()
        .map(|x| ByteSize(x * m))
        .map_err(|e| e.to_string())
}
