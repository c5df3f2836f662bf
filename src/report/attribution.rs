//! Which steps a check looked at, and in which role (`across`, `actual`, `expected`).
//!
//! The record's check results name their compare step, not their inputs, so the
//! inputs are read back from the plan copy kept in the record folder (only when its
//! digest is the record's plan digest). Without it, the paths the check's detail names
//! are mapped back to steps through the run's work folder (`<work>/<step>/<n>/...`).

use std::collections::BTreeMap;

use crate::record::run::{CheckRecord, Record};

/// The steps one check read, by role.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckInputs {
    pub across: Vec<String>,
    pub actual: Vec<String>,
    pub expected: Vec<String>,
    /// The file (or `file:tensor`) the `actual` or `across` input names, if known.
    pub actual_file: Option<String>,
}

/// Inputs of every check, keyed by (compare step, check name).
#[derive(Debug, Clone, Default)]
pub struct Attribution {
    by_check: BTreeMap<(String, String), CheckInputs>,
}

impl Attribution {
    /// Attribute the record's checks, from the plan copy when given.
    pub fn new(rec: &Record, plan_toml: Option<&str>) -> Attribution {
        let from_plan = plan_toml.map(parse_plan).unwrap_or_default();
        let mut by_check = BTreeMap::new();
        for c in &rec.comparisons {
            let key = (c.step.clone(), c.name.clone());
            // What the run recorded, else the plan copy, else the paths in the detail.
            let inputs = match (&c.inputs, from_plan.get(&key)) {
                (Some(r), _) => CheckInputs {
                    across: r.across.clone(),
                    actual: r.actual.clone(),
                    expected: r.expected.clone(),
                    actual_file: r.file.clone(),
                },
                (None, Some(i)) => i.clone(),
                (None, None) => from_detail(rec, c),
            };
            by_check.insert(key, inputs);
        }
        Attribution { by_check }
    }

    /// The inputs of one check (empty when nothing is known).
    pub fn of(&self, c: &CheckRecord) -> CheckInputs {
        self.by_check
            .get(&(c.step.clone(), c.name.clone()))
            .cloned()
            .unwrap_or_default()
    }
}

/// `${steps.X.` references in a string.
fn step_refs(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find("${steps.") {
        rest = &rest[i + "${steps.".len()..];
        if let Some(end) = rest.find(['.', '}']) {
            out.push(rest[..end].to_string());
        }
    }
    out
}

/// After `${steps.X.out}/`: the file part of a reference.
fn file_part(s: &str) -> Option<String> {
    let i = s.find("}/")?;
    Some(s[i + 2..].to_string())
}

fn parse_plan(text: &str) -> BTreeMap<(String, String), CheckInputs> {
    let mut out = BTreeMap::new();
    let Ok(doc) = toml::from_str::<toml::Table>(text) else {
        return out;
    };
    let Some(steps) = doc.get("steps").and_then(|s| s.as_table()) else {
        return out;
    };
    for (step, body) in steps {
        let Some(checks) = body.get("checks").and_then(|c| c.as_array()) else {
            continue;
        };
        for check in checks {
            let Some(t) = check.as_table() else { continue };
            let Some(name) = t.get("name").and_then(|n| n.as_str()) else {
                continue;
            };
            let s = |k: &str| t.get(k).and_then(|v| v.as_str()).unwrap_or("");
            let mut inputs = CheckInputs::default();
            if !s("across").is_empty() {
                inputs.across.push(s("across").to_string());
                if !s("file").is_empty() {
                    inputs.actual_file = Some(s("file").to_string());
                }
            }
            for k in ["actual", "actual_logits"] {
                inputs.actual.extend(step_refs(s(k)));
            }
            for k in ["expected", "expected_logits"] {
                inputs.expected.extend(step_refs(s(k)));
            }
            if inputs.actual_file.is_none() {
                inputs.actual_file = file_part(s("actual"));
            }
            inputs.actual.dedup();
            inputs.expected.dedup();
            out.insert((step.clone(), name.to_string()), inputs);
        }
    }
    out
}

/// The step a path under the run's work folder belongs to, and the rest of the path.
fn step_of_path(rec: &Record, path: &str) -> Option<(String, String)> {
    let work = rec.run.options.work.trim_end_matches('/');
    let rest = path.strip_prefix(work)?.strip_prefix('/')?;
    let mut parts = rest.splitn(3, '/');
    let step = parts.next()?;
    let _attempt = parts.next()?;
    let file = parts.next()?;
    rec.steps
        .iter()
        .any(|s| s.id == step)
        .then(|| (step.to_string(), file.to_string()))
}

fn from_detail(rec: &Record, c: &CheckRecord) -> CheckInputs {
    let mut inputs = CheckInputs::default();
    use crate::record::check::CheckDetail;
    let (first, sides) = match c.found() {
        Some(CheckDetail::BitExactAcross(d)) => (d.first.clone(), None),
        Some(CheckDetail::RelRms(d)) => (None, Some((&d.actual.source, &d.expected.source))),
        Some(CheckDetail::MaxAbs(d)) => (None, Some((&d.actual.source, &d.expected.source))),
        _ => (None, None),
    };
    if let Some((step, file)) = first.and_then(|f| step_of_path(rec, &f)) {
        inputs.across.push(step);
        inputs.actual_file = Some(file);
    }
    if let Some((actual, expected)) = sides {
        if let Some((step, file)) = step_of_path(rec, actual) {
            inputs.actual.push(step);
            inputs.actual_file = Some(file);
        }
        if let Some((step, _)) = step_of_path(rec, expected) {
            inputs.expected.push(step);
        }
    }
    inputs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_and_files() {
        assert_eq!(
            step_refs("${steps.handoff-gpu.out}/kv.safetensors:k"),
            vec!["handoff-gpu".to_string()]
        );
        assert_eq!(
            file_part("${steps.a.out}/kv.safetensors:k").as_deref(),
            Some("kv.safetensors:k")
        );
        assert!(step_refs("plain").is_empty());
    }

    #[test]
    fn plan_checks() {
        let plan = r#"
[steps.compare]
kind = "compare"
[[steps.compare.checks]]
name = "K"
metric = "rel_rms"
actual = "${steps.gpu.out}/kv.safetensors:k"
expected = "${steps.ref.out}/kv.safetensors:k"
[[steps.compare.checks]]
name = "rep"
metric = "bit_exact"
across = "prefill"
file = "kv.safetensors"
"#;
        let m = parse_plan(plan);
        let k = &m[&("compare".to_string(), "K".to_string())];
        assert_eq!(k.actual, vec!["gpu"]);
        assert_eq!(k.expected, vec!["ref"]);
        assert_eq!(k.actual_file.as_deref(), Some("kv.safetensors:k"));
        let r = &m[&("compare".to_string(), "rep".to_string())];
        assert_eq!(r.across, vec!["prefill"]);
    }
}
