//! The plan: TOML loaded with spans, validated (every error at once), resolved.
//!
//! ```text
//! bytes --utf8--> &str --DeTable::parse_recoverable--> spanned tree
//!       --walk.rs (types, units, ${..}, unknown keys)--> steps + sections
//!       --graph.rs (needs, devices, cycles, upstream refs, topo order)--> Plan
//! any problem -> Diagnostic (span, line:col, message, help) -> PlanErrors (rendered)
//! ```
//!
//! Format decisions (v1):
//! - TOML syntax errors are reported alone: the recovered tree would only add noise.
//! - Sizes: an integer of bytes, or `<number><unit>` with units `B KB MB GB TB` (decimal)
//!   and `KiB MiB GiB TiB` (binary), case-sensitive, fraction allowed (`1.5GiB`). A space
//!   before the unit (`128 GB`) is refused with "write 128GB".
//! - Durations: strings of `<integer><unit>` parts, units `ms s m h` (`90s`, `1h30m`); a
//!   bare integer is refused (no unit is ambiguous).
//! - `${...}`: `params.X`, `env.X`, `env.X:-default`, `plan_dir` are substituted at load;
//!   `run_id work out repeat steps.ID.out` stay run-time variables. `$$` is a literal `$`,
//!   and a `$` not followed by `{` stays as written (shell `$HOME` works; shell `${HOME}`
//!   must be written `$${HOME}`). Params and `env` defaults are not themselves expanded.
//! - Interpolated fields: run, shell, env values, cwd, outputs, inputs, check tensor refs,
//!   pin paths (also `pins.files` keys, tool commands, python interpreter); pins accept
//!   load-time variables only.
//! - Reserved, refused with "not supported yet": top-level `backend slurm include`,
//!   step `cache retries backend`.
//! - `devices.X.count` defaults to the number of `ids`, else 1; `pins.python.X.python`
//!   defaults to `python3`; `pins.files` values may be `""` (not pinned yet).
//! - Step ids are `[A-Za-z0-9_][A-Za-z0-9_.-]*`; `${steps.a.b.out}` names step `a.b`.
//! - Nesting depth is capped by the TOML parser (80); any byte input yields errors, not
//!   panics.

pub mod model;

mod describe;
mod diag;
mod graph;
mod interp;
pub mod schema;
mod units;
mod walk;

pub use diag::{Diagnostic, PlanErrors};
pub use model::*;

use std::path::{Path, PathBuf};

/// Read and load a plan file, with `${env.X}` taken from the process environment.
pub fn load(path: &Path) -> Result<Plan, PlanErrors> {
    let bytes = std::fs::read(path).map_err(|e| PlanErrors::Read {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    load_bytes(&bytes, path, &|k| std::env::var(k).ok())
}

/// Load a plan from raw bytes (invalid UTF-8 is an error at its position).
pub fn load_bytes(
    bytes: &[u8],
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Plan, PlanErrors> {
    match std::str::from_utf8(bytes) {
        Ok(s) => load_str(s, path, env),
        Err(e) => {
            let valid = &bytes[..e.valid_up_to()];
            // The valid prefix is UTF-8 by construction; shown lines stop there.
            let prefix = String::from_utf8_lossy(valid).into_owned();
            let idx = diag::LineIndex::new(&prefix);
            let d = idx.diag(
                prefix.len()..prefix.len(),
                "the plan is not valid UTF-8".to_string(),
                "save the file as UTF-8".to_string(),
            );
            Err(PlanErrors::from_diagnostics(path, &prefix, vec![d]))
        }
    }
}

/// Load a plan from text. `path` names the file in messages and sets `${plan_dir}`;
/// `env` answers `${env.X}`.
pub fn load_str(
    source: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Plan, PlanErrors> {
    let abs = absolute(path);
    let dir = abs
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    // Every variable the plan reads, so that the values of secret ones are masked.
    let reads = std::cell::RefCell::new(std::collections::BTreeMap::<String, String>::new());
    let recording = |k: &str| {
        let v = env(k);
        if let Some(v) = &v {
            reads.borrow_mut().insert(k.to_string(), v.clone());
        }
        v
    };
    let mut w = walk::Walker::new(source, &recording, dir.display().to_string());
    let (root, syntax) = toml::de::DeTable::parse_recoverable(source);
    if !syntax.is_empty() {
        for e in &syntax {
            let span = e.span().unwrap_or(0..0);
            let msg = e.message().trim().replace('\n', "; ");
            let help = if msg.contains("duplicate key") {
                "each key and [table] may appear once: merge or rename the two"
            } else {
                "fix the TOML syntax here (see https://toml.io); other checks run once it parses"
            };
            w.err(span, format!("TOML syntax: {msg}"), help);
        }
        return Err(PlanErrors::from_diagnostics(path, source, w.diags));
    }
    let root = root.get_ref();
    let walked = w.document(root);
    let all_ids: Vec<String> = match root.get("steps").map(|v| v.get_ref()) {
        Some(toml::de::DeValue::Table(t)) => t.keys().map(|k| k.get_ref().to_string()).collect(),
        _ => Vec::new(),
    };
    let plan = walked.map(|wk| {
        let steps = graph::order(&mut w, wk.steps, &wk.devices, &all_ids);
        let secret = |k: &str| crate::mask::looks_secret(k, &wk.secret_env);
        let mut secret_values: Vec<String> = reads
            .borrow()
            .iter()
            .filter(|(k, _)| secret(k))
            .map(|(_, v)| v.clone())
            .collect();
        for s in &steps {
            for (k, t) in &s.env {
                if let Some(v) = t.as_literal().filter(|_| secret(k)) {
                    secret_values.push(v);
                }
            }
        }
        Plan {
            secret_values: SecretValues(secret_values),
            path: abs.clone(),
            dir: dir.clone(),
            source: source.to_string(),
            name: wk.name,
            description: wk.description,
            changes: wk.changes,
            params: wk.params,
            pins: wk.pins,
            limits: wk.limits,
            devices: wk.devices,
            allow_simulated: wk.allow_simulated,
            steps,
            secret_env: wk.secret_env,
            report: wk.report,
        }
    });
    match plan {
        Some(p) if w.diags.is_empty() => Ok(p),
        _ => {
            if w.diags.is_empty() {
                // Defensive: never return an empty error list.
                w.err(
                    0..0,
                    "the plan is invalid".to_string(),
                    "see the messages above",
                );
            }
            Err(PlanErrors::from_diagnostics(path, source, w.diags))
        }
    }
}

fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

/// The `check` output: plan, limits, devices, steps in dependency order.
pub fn describe(plan: &Plan) -> String {
    describe::describe(plan)
}

/// The JSON Schema of the plan input format, pretty-printed with a trailing newline.
pub fn schema_string() -> String {
    let schema = schemars::schema_for!(schema::PlanInput);
    let mut s = serde_json::to_string_pretty(&schema).unwrap_or_else(|_| "{}".to_string());
    s.push('\n');
    s
}

/// Parse a duration as plans write it (`90s`, `15m`, `1h30m`, `250ms`); the error
/// says how to fix it. The CLI uses this for its duration flags.
/// Zero is allowed; at most 366 days.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    units::parse_duration(s)
        .and_then(|d| units::check_duration(d, true))
        .map_err(|(msg, help)| format!("{msg} ({help})"))
}

/// [`parse_duration`] for a timeout: above zero.
pub fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    units::parse_duration(s)
        .and_then(|d| units::check_duration(d, false))
        .map_err(|(msg, help)| format!("{msg} ({help})"))
}

/// Parse a memory size as plans write it (`4GiB`, `512MB`, bytes with `B`), within
/// the limits a plan's `memory` has.
pub fn parse_size(s: &str) -> Result<ByteSize, String> {
    units::parse_size(s)
        .and_then(units::check_memory)
        .map_err(|(msg, help)| format!("{msg} ({help})"))
}
