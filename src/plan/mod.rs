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
