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
//! - Reserved keys (refused with "not supported yet"): none in this version (the
//!   walkers' `RESERVED_TOP` and `RESERVED_STEP` are empty).
//! - `include = "other.toml"` (a plan in the same folder): that plan with this one's
//!   keys put in (tables merge key by key); `--set KEY=VALUE` then edits the text and
//!   `--only AXIS=VALUE` keeps matrix cells. The record keeps the text that ran.
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
pub mod matrix;
pub mod overrides;
pub mod remote;
pub mod schema;
mod units;
mod walk;

pub use diag::{Diagnostic, PlanErrors};
pub use model::*;

use std::path::{Path, PathBuf};

/// How a plan is loaded beyond its file: what the command line changes.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `--only AXIS=VALUE` (repeatable): the cells to run.
    pub only: Vec<(String, String)>,
    /// `--set KEY=VALUE` (VALUE in TOML), applied to the plan's text first.
    pub set: Vec<(String, String)>,
}

/// The largest plan file read (a plan, or the plan it includes): a plan is
/// written by hand or generated from a sweep, and a few hundred kilobytes at most;
/// the cap keeps `check /dev/zero` from reading for ever.
pub const MAX_PLAN_BYTES: u64 = 8 << 20;

/// Read and load a plan file, with `${env.X}` taken from the process environment.
pub fn load(path: &Path) -> Result<Plan, PlanErrors> {
    load_with(path, &LoadOptions::default())
}

/// Any file the user names as a plan (a pipe, `<(…)` too), read up to the cap.
fn read_capped(p: &Path) -> Result<Vec<u8>, PlanErrors> {
    let e = |reason: String| PlanErrors::Read {
        path: p.display().to_string(),
        reason,
    };
    let mut bytes = Vec::new();
    std::fs::File::open(p)
        .and_then(|f| {
            std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_PLAN_BYTES + 1), &mut bytes)
        })
        .map_err(|x| e(x.to_string()))?;
    if bytes.len() as u64 > MAX_PLAN_BYTES {
        return Err(e(format!(
            "the plan holds more than {MAX_PLAN_BYTES} bytes: not read (a plan is text written by hand or generated, far smaller)"
        )));
    }
    Ok(bytes)
}

/// [`load`] with the command line's overrides: the plan's `include`, then `--set`,
/// then `--only` on the matrix's cells. `Plan::source` is the text that ran.
pub fn load_with(path: &Path, opts: &LoadOptions) -> Result<Plan, PlanErrors> {
    let bytes = read_capped(path)?;
    let env = |k: &str| std::env::var(k).ok();
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return load_bytes(&bytes, path, &env);
    };
    // Only a plan that includes another, or a command line that changes it, is
    // edited (parsing a large plan twice costs more than reading it once). Whether
    // it includes is decided by parsing it as TOML, not by scanning its lines.
    let include = text
        .contains("include")
        .then(|| overrides::include_of(text))
        .flatten();
    if include.is_none() && opts.set.is_empty() && opts.only.is_empty() {
        return load_bytes(&bytes, path, &env);
    }
    let refuse = |e: overrides::OverrideError| PlanErrors::Read {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let mut text = text.to_string();
    if let Some(inc) = include {
        let here = path.display().to_string();
        let refused = |reason: String| PlanErrors::Read {
            path: here.clone(),
            reason,
        };
        // The included plan sits beside this one, so relative paths in it (pins,
        // templates) mean the same in both.
        if inc.is_empty() || inc.contains('/') || inc.starts_with('.') {
            return Err(refused(format!(
                "include = \"{inc}\": name a plan in the same folder, e.g. include = \"full.toml\""
            )));
        }
        if path.file_name().and_then(|n| n.to_str()) == Some(inc.as_str()) {
            return Err(refused(format!(
                "include = \"{inc}\": the plan includes itself; name the plan this one builds on"
            )));
        }
        let base_path = path.parent().unwrap_or(Path::new(".")).join(&inc);
        // Not through a link: an include must not make the loader read (and quote
        // in its errors) a file the plan's folder does not hold.
        let raw =
            crate::digest::read_regular(&base_path, crate::digest::Follow::No, MAX_PLAN_BYTES)
                .map_err(|e| PlanErrors::Read {
                    path: base_path.display().to_string(),
                    reason: format!("include = \"{inc}\": {e}"),
                })?;
        let base = String::from_utf8(raw).map_err(|_| PlanErrors::Read {
            path: base_path.display().to_string(),
            reason: "not UTF-8".into(),
        })?;
        if let Some(next) = base
            .contains("include")
            .then(|| overrides::include_of(&base))
            .flatten()
        {
            return Err(refused(format!(
                "include = \"{inc}\": `{inc}` includes `{next}` in turn; an included plan cannot include another (merge them into one plan to build on)"
            )));
        }
        // The included plan must stand on its own: its errors are its own, in its file.
        load_str(&base, &base_path, &env)?;
        let own = text.clone();
        text = overrides::merge_include(&base, &text).map_err(refuse)?;
        let merged = overrides::apply(&text, &opts.set).map_err(refuse)?;
        return load_str_with(&merged, path, &env, &opts.only).map_err(|e| {
            e.relocated(
                &merged,
                &[(path, own.as_str()), (base_path.as_path(), base.as_str())],
                path,
            )
        });
    }
    let text = overrides::apply(&text, &opts.set).map_err(refuse)?;
    load_str_with(&text, path, &env, &opts.only)
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
    load_str_with(source, path, env, &[])
}

/// [`load_str`] running only the matrix cells `only` keeps.
pub fn load_str_with(
    source: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    only: &[(String, String)],
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
    let plan = walked.map(|mut wk| {
        let ordered = graph::order(&mut w, wk.steps, &wk.devices, &all_ids);
        wk.matrix.declared = wk.matrix.cells.len();
        wk.matrix.only = only.to_vec();
        match matrix::keep_only(&wk.matrix, only) {
            Ok(cells) => wk.matrix.cells = cells,
            Err(e) => w.err(0..0, e, "see the plan's [matrix] for its axes and values"),
        }
        let steps = if w.diags.is_empty() {
            matrix::expand(&mut w, ordered, &wk.matrix, &wk.matrix.cells, &wk.revisions)
        } else {
            ordered.into_iter().map(|(s, _)| s).collect()
        };
        let secrets = |k: &str, v: &str| crate::mask::secrets_in(k, v, &wk.secret_env);
        let mut secret_values: Vec<String> = reads
            .borrow()
            .iter()
            .flat_map(|(k, v)| secrets(k, v))
            .collect();
        for s in &steps {
            for (k, t) in &s.env {
                if let Some(v) = t.as_literal() {
                    secret_values.extend(secrets(k, &v));
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
            matrix: wk.matrix,
            revisions: wk.revisions,
            secret_env: wk.secret_env,
            report: wk.report,
            backend: wk.backend,
            cache: wk.cache,
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

/// `path` with `.` and `..` folded away without touching the filesystem, so two
/// spellings of one folder compare equal.
pub(crate) fn lexical_clean(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
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
pub fn parse_duration(s: &str) -> Result<std::time::Duration, ValueError> {
    units::parse_duration(s)
        .and_then(|d| units::check_duration(d, true))
        .map_err(ValueError::from)
}

/// A value written as plans write it (a duration, a size) that does not parse:
/// what is wrong, and how to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({help})")]
pub struct ValueError {
    pub message: String,
    pub help: String,
}

impl From<(String, String)> for ValueError {
    fn from((message, help): (String, String)) -> Self {
        ValueError { message, help }
    }
}

/// [`parse_duration`] for a timeout: above zero.
pub fn parse_timeout(s: &str) -> Result<std::time::Duration, ValueError> {
    units::parse_duration(s)
        .and_then(|d| units::check_duration(d, false))
        .map_err(ValueError::from)
}

/// Parse a memory size as plans write it (`4GiB`, `512MB`, bytes with `B`), within
/// the limits a plan's `memory` has.
pub fn parse_size(s: &str) -> Result<ByteSize, ValueError> {
    units::parse_size(s)
        .and_then(units::check_memory)
        .map_err(ValueError::from)
}

/// Parse a size as plans write it, any amount from `0B` (a cache's `--max-size`).
pub fn parse_bytes(s: &str) -> Result<ByteSize, ValueError> {
    units::parse_size(s).map_err(ValueError::from)
}
