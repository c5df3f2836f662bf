//! The hand walker: a spanned TOML tree (`toml::de::DeTable`) into the typed model,
//! recording every problem as a [`Diagnostic`] and carrying on, so one load reports
//! all of them. Graph checks (needs, cycles, upstream references) live in `graph.rs`.

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::time::Duration;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::diag::{did_you_mean, Diagnostic, LineIndex};
use super::interp::{self, Ctx};
use super::model::*;
use super::units;

pub(crate) type Val<'i> = Spanned<DeValue<'i>>;

/// Where a step's references sit in the source, for the graph checks.
#[derive(Default)]
pub(crate) struct StepSrc {
    pub key_span: Range<usize>,
    pub needs: Vec<(String, Range<usize>)>,
    pub devices: Vec<(String, Range<usize>)>,
    /// `${steps.X.out}` uses and `across = "X"`.
    pub refs: Vec<(StepId, Range<usize>)>,
}

/// Keys reserved for features not built yet: refused, never ignored.
const RESERVED_TOP: &[&str] = &["backend", "slurm", "include"];
const RESERVED_STEP: &[&str] = &["cache", "retries", "backend"];

const TOP_KEYS: &[&str] = &[
    "schema",
    "name",
    "description",
    "changes",
    "params",
    "pins",
    "limits",
    "devices",
    "allow_simulated",
    "secret_env",
    "secrets",
    "steps",
    "report",
];
const STEP_KEYS: &[&str] = &[
    "kind", "needs", "devices", "run", "shell", "env", "cwd", "repeats", "warmup", "timeout",
    "memory", "pids", "outputs", "inputs", "checks",
];
const CHECK_KEYS: &[&str] = &[
    "name",
    "metric",
    "across",
    "file",
    "actual",
    "expected",
    "actual_logits",
    "expected_logits",
    "axis",
    "dtype",
    "shape",
    "max",
    "min",
    "equals",
];
const LIMIT_KEYS: &[&str] = &[
    "host_memory",
    "swap",
    "pids",
    "cpus",
    "timeout",
    "run_timeout",
    "grace",
    "isolation",
];

/// Everything the walker produced, before graph checks.
pub(crate) struct Walked {
    pub name: String,
    pub description: Option<String>,
    pub changes: Option<String>,
    pub params: BTreeMap<String, ParamValue>,
    pub pins: Pins,
    pub limits: Limits,
    pub devices: BTreeMap<String, DeviceRequest>,
    pub allow_simulated: bool,
    pub secret_env: Vec<String>,
    pub report: ReportSettings,
    /// Steps in id order, with their source positions.
    pub steps: Vec<(Step, StepSrc)>,
}

/// Walks one document, collecting diagnostics.
pub(crate) struct Walker<'s> {
    pub src: &'s str,
    pub idx: LineIndex<'s>,
    pub diags: Vec<Diagnostic>,
    env: &'s dyn Fn(&str) -> Option<String>,
    plan_dir: String,
}

fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

impl<'s> Walker<'s> {
    pub(crate) fn new(
        src: &'s str,
        env: &'s dyn Fn(&str) -> Option<String>,
        plan_dir: String,
    ) -> Self {
        Walker {
            src,
            idx: LineIndex::new(src),
            diags: Vec::new(),
            env,
            plan_dir,
        }
    }

    pub(crate) fn err(&mut self, span: Range<usize>, message: String, help: impl Into<String>) {
        let d = self.idx.diag(span, message, help.into());
        self.diags.push(d);
    }

    /// Refuse unknown and reserved keys of a table.
    fn keys(&mut self, t: &DeTable<'_>, allowed: &[&str], reserved: &[&str], ctx: &str) {
        for (k, _) in t.iter() {
            let key: &str = k.get_ref();
            if allowed.contains(&key) {
                continue;
            }
            if reserved.contains(&key) {
                self.err(
                    k.span(),
                    format!("`{key}` {ctx} is not supported yet"),
                    "remove it; this version of orchestrate reserves the key for a later feature",
                );
            } else {
                self.err(
                    k.span(),
                    format!("unknown key `{key}` {ctx}"),
                    did_you_mean(key, allowed),
                );
            }
        }
    }

    fn wrong_type(&mut self, v: &Val<'_>, what: &str, expected: &str, example: &str) {
        self.err(
            v.span(),
            format!(
                "{what} must be {expected}, found {}",
                type_name(v.get_ref())
            ),
            format!("write it as {expected}, e.g. {example}"),
        );
    }

    fn string(&mut self, v: &Val<'_>, what: &str) -> Option<String> {
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            _ => {
                self.wrong_type(v, what, "a string", "\"...\"");
                None
            }
        }
    }

    fn boolean(&mut self, v: &Val<'_>, what: &str) -> Option<bool> {
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong_type(v, what, "a boolean", "`true` or `false` (no quotes)");
                None
            }
        }
    }

    /// An integer the record can hold exactly (within ±(2^53 - 1)).
    fn integer(&mut self, v: &Val<'_>, what: &str) -> Option<i64> {
        let exact = units::MAX_EXACT as i64;
        self.bounded(v, what, -exact, exact)
    }

    /// An integer in `min..=max`, the range named in the error.
    fn bounded(&mut self, v: &Val<'_>, what: &str, min: i64, max: i64) -> Option<i64> {
        match v.get_ref() {
            DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) if (min..=max).contains(&n) => Some(n),
                Ok(n) => {
                    self.err(
                        v.span(),
                        format!("{what} must be between {min} and {max}, found {n}"),
                        format!("use a value from {min} to {max}"),
                    );
                    None
                }
                Err(_) => {
                    self.err(
                        v.span(),
                        format!("{what} is out of range"),
                        format!("use a value from {min} to {max}"),
                    );
                    None
                }
            },
            _ => {
                self.wrong_type(v, what, "an integer", "`3` (no quotes)");
                None
            }
        }
    }

    fn float(&mut self, v: &Val<'_>, what: &str) -> Option<f64> {
        match v.get_ref() {
            DeValue::Float(f) => {
                let t = f.as_str();
                t.parse::<f64>().ok().or_else(|| {
                    self.err(
                        v.span(),
                        format!("{what} is not a number"),
                        "write e.g. `0.05`",
                    );
                    None
                })
            }
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
                .ok()
                .map(|n| n as f64),
            _ => {
                self.wrong_type(v, what, "a number", "`0.05` (no quotes)");
                None
            }
        }
    }

    fn array<'a, 'i>(&mut self, v: &'a Val<'i>, what: &str) -> Option<&'a [Val<'i>]> {
        match v.get_ref() {
            DeValue::Array(a) => Some(a),
            _ => {
                self.wrong_type(v, what, "an array", "[\"a\", \"b\"]");
                None
            }
        }
    }

    pub(crate) fn table<'a, 'i>(&mut self, v: &'a Val<'i>, what: &str) -> Option<&'a DeTable<'i>> {
        match v.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => {
                self.wrong_type(v, what, "a table", "`{ key = \"value\" }` or a [section]");
                None
            }
        }
    }

    /// An array of strings with the span of each.
    fn strings(&mut self, v: &Val<'_>, what: &str) -> Option<Vec<(String, Range<usize>)>> {
        let items = self.array(v, what)?;
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in items {
            match self.string(item, &format!("each entry of {what}")) {
                Some(s) => out.push((s, item.span())),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// A memory limit: a size within `units::check_memory`.
    fn size(&mut self, v: &Val<'_>, what: &str) -> Option<ByteSize> {
        let b = self.any_size(v, what)?;
        match units::check_memory(b) {
            Ok(b) => Some(b),
            Err((m, h)) => {
                self.err(v.span(), format!("{what}: {m}"), h);
                None
            }
        }
    }

    fn any_size(&mut self, v: &Val<'_>, what: &str) -> Option<ByteSize> {
        match v.get_ref() {
            DeValue::Integer(_) => {
                let n = self.integer(v, what)?;
                match u64::try_from(n) {
                    Ok(b) => Some(ByteSize(b)),
                    Err(_) => {
                        self.err(
                            v.span(),
                            format!("{what} cannot be negative"),
                            "write e.g. \"4GiB\"",
                        );
                        None
                    }
                }
            }
            DeValue::String(s) => match units::parse_size(s) {
                Ok(b) => Some(b),
                Err((m, h)) => {
                    self.err(v.span(), format!("{what}: {m}"), h);
                    None
                }
            },
            _ => {
                self.wrong_type(v, what, "a size", "\"128GiB\" or an integer of bytes");
                None
            }
        }
    }

    /// A timeout: above zero, at most 366 days.
    fn duration(&mut self, v: &Val<'_>, what: &str) -> Option<Duration> {
        self.duration_from(v, what, false)
    }

    fn duration_from(&mut self, v: &Val<'_>, what: &str, zero_ok: bool) -> Option<Duration> {
        match v.get_ref() {
            DeValue::String(s) => {
                match units::parse_duration(s).and_then(|d| units::check_duration(d, zero_ok)) {
                    Ok(d) => Some(d),
                    Err((m, h)) => {
                        self.err(v.span(), format!("{what}: {m}"), h);
                        None
                    }
                }
            }
            DeValue::Integer(i) => {
                self.err(
                    v.span(),
                    format!("{what} needs a unit"),
                    format!("write it as a string with a unit, e.g. \"{}s\"", i.as_str()),
                );
                None
            }
            _ => {
                self.wrong_type(v, what, "a duration", "\"90s\", \"15m\" or \"2h\"");
                None
            }
        }
    }

    /// Map a byte range inside a string value to the source, when the string was
    /// written without escapes (else the whole value).
    fn sub_span(&self, v: &Val<'_>, decoded: &str, r: &Range<usize>) -> Range<usize> {
        let span = v.span();
        let raw = self.src.get(span.clone()).unwrap_or("");
        let delim = if raw.starts_with("\"\"\"") || raw.starts_with("'''") {
            3
        } else if raw.starts_with('"') || raw.starts_with('\'') {
            1
        } else {
            return span;
        };
        let inner = raw
            .get(delim..raw.len().saturating_sub(delim))
            .unwrap_or("");
        if inner == decoded {
            span.start + delim + r.start..span.start + delim + r.end
        } else {
            span
        }
    }

    /// A string value, interpolated.
    fn template(
        &mut self,
        v: &Val<'_>,
        what: &str,
        ctx: &Ctx<'_>,
        runtime: bool,
        refs: &mut Vec<(StepId, Range<usize>)>,
    ) -> Option<Template> {
        let s = self.string(v, what)?;
        self.interp(v, &s, ctx, runtime, refs)
    }

    fn interp(
        &mut self,
        v: &Val<'_>,
        s: &str,
        ctx: &Ctx<'_>,
        runtime: bool,
        refs: &mut Vec<(StepId, Range<usize>)>,
    ) -> Option<Template> {
        match interp::interpolate(s, ctx, runtime) {
            Ok((t, r)) => {
                refs.extend(r.into_iter().map(|(id, range)| {
                    let span = self.sub_span(v, s, &range);
                    (id, span)
                }));
                Some(t)
            }
            Err(errs) => {
                for e in errs {
                    let span = self.sub_span(v, s, &e.range);
                    self.err(span, e.message, e.help);
                }
                None
            }
        }
    }

    fn templates(
        &mut self,
        v: &Val<'_>,
        what: &str,
        ctx: &Ctx<'_>,
        refs: &mut Vec<(StepId, Range<usize>)>,
    ) -> Option<Vec<Template>> {
        let items = self.array(v, what)?;
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in items {
            match self.template(item, &format!("each entry of {what}"), ctx, true, refs) {
                Some(t) => out.push(t),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// Walk the whole document.
    pub(crate) fn document(&mut self, root: &DeTable<'_>) -> Option<Walked> {
        self.keys(root, TOP_KEYS, RESERVED_TOP, "at the top level");
        match root.get("schema") {
            None => self.err(
                0..0,
                "missing `schema`".to_string(),
                format!("add `schema = \"{PLAN_SCHEMA}\"` at the top"),
            ),
            Some(v) => {
                if let Some(s) = self.string(v, "`schema`") {
                    if s != PLAN_SCHEMA {
                        self.err(
                            v.span(),
                            format!("unsupported plan schema `{s}`"),
                            format!("this orchestrate reads `schema = \"{PLAN_SCHEMA}\"`"),
                        );
                    }
                }
            }
        }
        let name = match root.get("name") {
            None => {
                self.err(
                    0..0,
                    "missing `name`".to_string(),
                    "add `name = \"my-experiment\"` at the top",
                );
                None
            }
            Some(v) => self.string(v, "`name`").and_then(|s| {
                if s.trim().is_empty() {
                    self.err(
                        v.span(),
                        "`name` is empty".to_string(),
                        "give the plan a short name",
                    );
                    None
                } else {
                    Some(s)
                }
            }),
        };
        let description = root
            .get("description")
            .and_then(|v| self.string(v, "`description`"));
        let changes = root
            .get("changes")
            .and_then(|v| self.string(v, "`changes`"));
        let allow_simulated = root
            .get("allow_simulated")
            .and_then(|v| self.boolean(v, "`allow_simulated`"))
            .unwrap_or(false);
        let mut secret_env: Vec<String> = Vec::new();
        for key in ["secrets", "secret_env"] {
            let Some(v) = root.get(key) else { continue };
            let names = self.strings(v, &format!("`{key}`")).map(|v| {
                v.into_iter()
                    .filter_map(|(s, span)| {
                        if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        {
                            Some(s)
                        } else {
                            self.err(
                                span,
                                format!("`{s}` is not an environment variable name"),
                                "use letters, digits and `_`, e.g. \"HF_TOKEN\"",
                            );
                            None
                        }
                    })
                    .collect::<Vec<String>>()
            });
            secret_env.extend(names.unwrap_or_default());
        }
        let params = root
            .get("params")
            .map(|v| self.params(v))
            .unwrap_or_default();
        let plan_dir = self.plan_dir.clone();
        let env = self.env;
        let ctx = Ctx {
            params: &params,
            env,
            plan_dir: &plan_dir,
        };
        let pins = root
            .get("pins")
            .map(|v| self.pins(v, &ctx))
            .unwrap_or_default();
        let limits = root
            .get("limits")
            .map(|v| self.limits(v))
            .unwrap_or_default();
        let devices = root
            .get("devices")
            .map(|v| self.devices(v))
            .unwrap_or_default();
        let report = root
            .get("report")
            .map(|v| self.report(v))
            .unwrap_or_default();
        let steps = match root.get("steps") {
            None => {
                self.err(
                    0..0,
                    "missing `steps`".to_string(),
                    "add at least one step, e.g. [steps.hello] with shell = \"echo hello\"",
                );
                Vec::new()
            }
            Some(v) => self.steps(v, &ctx),
        };
        Some(Walked {
            name: name?,
            description,
            changes,
            params,
            pins,
            limits,
            devices,
            allow_simulated,
            secret_env,
            report,
            steps,
        })
    }

    fn params(&mut self, v: &Val<'_>) -> BTreeMap<String, ParamValue> {
        let mut out = BTreeMap::new();
        let Some(t) = self.table(v, "[params]") else {
            return out;
        };
        for (k, v) in t.iter() {
            let key = k.get_ref().to_string();
            let value = match v.get_ref() {
                DeValue::String(s) => Some(ParamValue::String(s.to_string())),
                DeValue::Boolean(b) => Some(ParamValue::Bool(*b)),
                DeValue::Integer(_) => self
                    .integer(v, &format!("param `{key}`"))
                    .map(ParamValue::Int),
                DeValue::Float(_) => self
                    .float(v, &format!("param `{key}`"))
                    .map(ParamValue::Float),
                _ => {
                    self.wrong_type(
                        v,
                        &format!("param `{key}`"),
                        "a string, integer, float or boolean",
                        "`tokens = 8192`",
                    );
                    None
                }
            };
            if let Some(value) = value {
                out.insert(key, value);
            }
        }
        out
    }

    fn pins(&mut self, v: &Val<'_>, ctx: &Ctx<'_>) -> Pins {
        let mut pins = Pins::default();
        let Some(t) = self.table(v, "[pins]") else {
            return pins;
        };
        self.keys(
            t,
            &["git", "model", "tools", "python", "files"],
            &[],
            "in [pins]",
        );
        let mut no_refs = Vec::new();
        if let Some(g) = t.get("git").and_then(|v| self.table(v, "[pins.git]")) {
            for (k, v) in g.iter() {
                let what = format!("pin `pins.git.{}`", k.get_ref());
                let Some(p) = self.table(v, &what) else {
                    continue;
                };
                self.keys(
                    p,
                    &["path", "commit", "allow_dirty"],
                    &[],
                    &format!("in {what}"),
                );
                let path = self.required(p, "path", &what, k.span(), "path = \".\"");
                let path = path.and_then(|v| {
                    self.template(v, &format!("`path` of {what}"), ctx, false, &mut no_refs)
                });
                let commit = p.get("commit").and_then(|v| {
                    let s = self.string(v, &format!("`commit` of {what}"))?;
                    if (4..=64).contains(&s.len()) && s.chars().all(|c| c.is_ascii_hexdigit()) {
                        Some(s)
                    } else {
                        self.err(
                            v.span(),
                            format!("`{s}` is not a git commit"),
                            "write a short or full hex sha, e.g. \"720e8dc\"",
                        );
                        None
                    }
                });
                let allow_dirty = p
                    .get("allow_dirty")
                    .and_then(|v| self.boolean(v, &format!("`allow_dirty` of {what}")))
                    .unwrap_or(false);
                if let Some(path) = path {
                    pins.git.insert(
                        k.get_ref().to_string(),
                        GitPin {
                            path: lit_path(&path),
                            commit,
                            allow_dirty,
                        },
                    );
                }
            }
        }
        if let Some(g) = t.get("model").and_then(|v| self.table(v, "[pins.model]")) {
            for (k, v) in g.iter() {
                let what = format!("pin `pins.model.{}`", k.get_ref());
                let Some(p) = self.table(v, &what) else {
                    continue;
                };
                self.keys(
                    p,
                    &["id", "revision", "path", "digest"],
                    &[],
                    &format!("in {what}"),
                );
                let id = p
                    .get("id")
                    .and_then(|v| self.string(v, &format!("`id` of {what}")));
                let revision = p
                    .get("revision")
                    .and_then(|v| self.string(v, &format!("`revision` of {what}")));
                let path = self.required(p, "path", &what, k.span(), "path = \"models/x\"");
                let path = path.and_then(|v| {
                    self.template(v, &format!("`path` of {what}"), ctx, false, &mut no_refs)
                });
                let digest = p.get("digest").and_then(|v| {
                    let s = self.string(v, &format!("`digest` of {what}"))?;
                    self.sha256(v, &s, false)
                });
                if let Some(path) = path {
                    pins.model.insert(
                        k.get_ref().to_string(),
                        ModelPin {
                            id,
                            revision,
                            path: lit_path(&path),
                            digest,
                        },
                    );
                }
            }
        }
        if let Some(g) = t.get("tools").and_then(|v| self.table(v, "[pins.tools]")) {
            for (k, v) in g.iter() {
                let what = format!("pin `pins.tools.{}`", k.get_ref());
                let Some(p) = self.table(v, &what) else {
                    continue;
                };
                self.keys(
                    p,
                    &["command", "expect", "timeout"],
                    &[],
                    &format!("in {what}"),
                );
                let command = self
                    .required(
                        p,
                        "command",
                        &what,
                        k.span(),
                        "command = [\"tool\", \"--version\"]",
                    )
                    .and_then(|v| {
                        let items = self.array(v, &format!("`command` of {what}"))?;
                        if items.is_empty() {
                            self.err(
                                v.span(),
                                format!("`command` of {what} is empty"),
                                "name a program, e.g. [\"nvcc\", \"--version\"]",
                            );
                            return None;
                        }
                        let mut out = Vec::new();
                        for item in items {
                            let t = self.template(
                                item,
                                &format!("each entry of `command` of {what}"),
                                ctx,
                                false,
                                &mut no_refs,
                            )?;
                            out.push(lit_string(&t));
                        }
                        Some(out)
                    });
                let expect = p
                    .get("expect")
                    .and_then(|v| self.string(v, &format!("`expect` of {what}")));
                let timeout = p
                    .get("timeout")
                    .and_then(|v| self.duration(v, &format!("`timeout` of {what}")));
                if let Some(command) = command {
                    pins.tools.insert(
                        k.get_ref().to_string(),
                        ToolPin {
                            command,
                            expect,
                            timeout,
                        },
                    );
                }
            }
        }
        if let Some(g) = t.get("python").and_then(|v| self.table(v, "[pins.python]")) {
            for (k, v) in g.iter() {
                let what = format!("pin `pins.python.{}`", k.get_ref());
                let Some(p) = self.table(v, &what) else {
                    continue;
                };
                self.keys(p, &["python", "packages"], &[], &format!("in {what}"));
                let python = match p.get("python") {
                    Some(v) => self
                        .template(v, &format!("`python` of {what}"), ctx, false, &mut no_refs)
                        .map(|t| lit_string(&t)),
                    None => Some("python3".to_string()),
                };
                let packages = p
                    .get("packages")
                    .and_then(|v| self.strings(v, &format!("`packages` of {what}")))
                    .unwrap_or_default();
                let mut ok = true;
                for (s, span) in &packages {
                    if !s.contains("==") {
                        ok = false;
                        self.err(
                            span.clone(),
                            format!("package `{s}` has no pinned version"),
                            "write `name==version`, e.g. \"numpy==2.1.3\"",
                        );
                    }
                }
                if let (Some(python), true) = (python, ok) {
                    pins.python.insert(
                        k.get_ref().to_string(),
                        PythonPin {
                            python,
                            packages: packages.into_iter().map(|p| p.0).collect(),
                        },
                    );
                }
            }
        }
        if let Some(g) = t.get("files").and_then(|v| self.table(v, "[pins.files]")) {
            for (k, v) in g.iter() {
                let what = format!("pin for file `{}`", k.get_ref());
                let Some(s) = self.string(v, &format!("the {what}")) else {
                    continue;
                };
                let key: &str = k.get_ref();
                let key_t = self.interp_key(k, key, ctx);
                if let (Some(path), Some(d)) = (key_t, self.sha256(v, &s, true)) {
                    pins.files.insert(path, d);
                }
            }
        }
        pins
    }

    /// Interpolate a table key (a file pin's path) at load time.
    fn interp_key(
        &mut self,
        k: &Spanned<std::borrow::Cow<'_, str>>,
        key: &str,
        ctx: &Ctx<'_>,
    ) -> Option<String> {
        let v: Val<'_> = Spanned::new(k.span(), DeValue::String(key.to_string().into()));
        let mut no_refs = Vec::new();
        self.interp(&v, key, ctx, false, &mut no_refs)
            .map(|t| lit_string(&t))
    }

    fn sha256(&mut self, v: &Val<'_>, s: &str, empty_ok: bool) -> Option<String> {
        if empty_ok && s.is_empty() {
            return Some(String::new());
        }
        match s.strip_prefix("sha256:") {
            Some(hex) if hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()) => {
                Some(s.to_ascii_lowercase())
            }
            _ => {
                self.err(
                    v.span(),
                    format!("`{s}` is not a sha256 digest"),
                    "write \"sha256:\" and 64 hex digits, or run `orchestrate pin` to fill it in",
                );
                None
            }
        }
    }

    fn required<'a, 'i>(
        &mut self,
        t: &'a DeTable<'i>,
        key: &str,
        what: &str,
        at: Range<usize>,
        example: &str,
    ) -> Option<&'a Val<'i>> {
        let v = t.get(key);
        if v.is_none() {
            self.err(
                at,
                format!("{what} is missing `{key}`"),
                format!("add `{example}`"),
            );
        }
        v
    }

    fn limits(&mut self, v: &Val<'_>) -> Limits {
        let mut l = Limits::default();
        let Some(t) = self.table(v, "[limits]") else {
            return l;
        };
        self.keys(t, LIMIT_KEYS, &[], "in [limits]");
        l.host_memory = t
            .get("host_memory")
            .and_then(|v| self.size(v, "`host_memory`"));
        l.swap = t
            .get("swap")
            .and_then(|v| self.boolean(v, "`swap`"))
            .unwrap_or(false);
        l.pids = t
            .get("pids")
            .and_then(|v| self.bounded(v, "`pids`", 1, units::MAX_PIDS))
            .map(|n| n as u64);
        l.cpus = t.get("cpus").and_then(|v| {
            let s = self.string(v, "`cpus`")?;
            if valid_cpuset(&s) {
                Some(s)
            } else {
                self.err(
                    v.span(),
                    format!("`{s}` is not a cpu list"),
                    "write a cpuset list such as \"0-3\" or \"0,2,4-7\"",
                );
                None
            }
        });
        l.timeout = t.get("timeout").and_then(|v| self.duration(v, "`timeout`"));
        l.run_timeout = t
            .get("run_timeout")
            .and_then(|v| self.duration(v, "`run_timeout`"));
        l.grace = t
            .get("grace")
            .and_then(|v| self.duration_from(v, "`grace`", true));
        if let Some(v) = t.get("isolation") {
            if let Some(s) = self.string(v, "`isolation`") {
                l.isolation = match s.as_str() {
                    "auto" => IsolationMode::Auto,
                    "cgroup" => IsolationMode::Cgroup,
                    "none" => IsolationMode::None,
                    _ => {
                        self.err(
                            v.span(),
                            format!("unknown isolation `{s}`"),
                            format!(
                                "use \"auto\", \"cgroup\" or \"none\"; {}",
                                did_you_mean(&s, &["auto", "cgroup", "none"])
                            ),
                        );
                        IsolationMode::Auto
                    }
                };
            }
        }
        l
    }

    fn devices(&mut self, v: &Val<'_>) -> BTreeMap<String, DeviceRequest> {
        let mut out = BTreeMap::new();
        let Some(t) = self.table(v, "[devices]") else {
            return out;
        };
        for (k, v) in t.iter() {
            let what = format!("device request `{}`", k.get_ref());
            let Some(d) = self.table(v, &what) else {
                continue;
            };
            self.keys(
                d,
                &["kind", "count", "cores", "ids", "simulate"],
                &[],
                &format!("in {what}"),
            );
            let kind = self
                .required(d, "kind", &what, k.span(), "kind = \"gpu\"")
                .and_then(|v| self.string(v, &format!("`kind` of {what}")));
            let ids = d
                .get("ids")
                .and_then(|v| self.strings(v, &format!("`ids` of {what}")))
                .unwrap_or_default();
            let count = match d.get("count") {
                Some(v) => self
                    .bounded(v, &format!("`count` of {what}"), 1, 4096)
                    .map(|n| n as u32),
                None => Some((ids.len() as u32).max(1)),
            };
            if let (Some(c), Some(v), false) = (count, d.get("count"), ids.is_empty()) {
                if c as usize != ids.len() {
                    self.err(
                        v.span(),
                        format!("{what} asks for {c} devices but names {} ids", ids.len()),
                        "make `count` equal the number of `ids`, or drop `count`",
                    );
                }
            }
            let cores = d
                .get("cores")
                .and_then(|v| self.bounded(v, &format!("`cores` of {what}"), 1, 4096))
                .map(|n| n as u32);
            let simulate = d
                .get("simulate")
                .and_then(|v| self.boolean(v, &format!("`simulate` of {what}")))
                .unwrap_or(false);
            if let (Some(kind), Some(count)) = (kind, count) {
                out.insert(
                    k.get_ref().to_string(),
                    DeviceRequest {
                        kind,
                        count,
                        cores,
                        ids: ids.into_iter().map(|i| i.0).collect(),
                        simulate,
                    },
                );
            }
        }
        out
    }

    fn report(&mut self, v: &Val<'_>) -> ReportSettings {
        let Some(t) = self.table(v, "[report]") else {
            return ReportSettings::default();
        };
        self.keys(t, &["templates"], &[], "in [report]");
        let templates = t
            .get("templates")
            .and_then(|v| self.strings(v, "`templates` of [report]"))
            .map(|v| {
                v.into_iter()
                    .filter(|(name, span)| self.template_ok(name, span.clone()))
                    .map(|s| s.0)
                    .collect()
            })
            .unwrap_or_default();
        ReportSettings { templates }
    }

    /// A report template is built in, or a file inside the plan's folder (its
    /// `templates/` included): a plan must not copy `/etc/shadow` into a record.
    fn template_ok(&mut self, name: &str, span: Range<usize>) -> bool {
        if ["pr", "html", "summary", "json"].contains(&name) {
            return true;
        }
        let rel = std::path::Path::new(name);
        let plain = !name.is_empty()
            && rel
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain {
            self.err(
                span,
                format!("report template `{name}` is not a file inside the plan's folder"),
                "use `pr`, `html`, `summary`, `json`, or a path relative to the plan, e.g. \"templates/pr.md.tera\"",
            );
            return false;
        }
        let dir = std::path::Path::new(&self.plan_dir);
        let inside = match (dir.join(rel).canonicalize(), dir.canonicalize()) {
            (Ok(p), Ok(d)) => p.starts_with(d) && p.is_file(),
            _ => false,
        };
        if !inside {
            self.err(
                span,
                format!("report template `{name}` is not a file inside the plan's folder"),
                "put the template beside the plan (or in its templates/), not behind a link out",
            );
        }
        inside
    }

    fn steps(&mut self, v: &Val<'_>, ctx: &Ctx<'_>) -> Vec<(Step, StepSrc)> {
        let Some(t) = self.table(v, "[steps]") else {
            return Vec::new();
        };
        if t.is_empty() {
            self.err(
                v.span(),
                "the plan has no steps".to_string(),
                "add a step, e.g. [steps.hello] with shell = \"echo hello\"",
            );
        }
        let mut out = Vec::with_capacity(t.len());
        for (k, v) in t.iter() {
            if let Some(s) = self.step(k, v, ctx) {
                out.push(s);
            }
        }
        out
    }

    fn step(
        &mut self,
        k: &Spanned<std::borrow::Cow<'_, str>>,
        v: &Val<'_>,
        ctx: &Ctx<'_>,
    ) -> Option<(Step, StepSrc)> {
        let id: &str = k.get_ref();
        let what = format!("in step `{id}`");
        if !valid_step_id(id) {
            self.err(
                k.span(),
                format!("`{id}` is not a valid step id"),
                "use letters, digits, `_`, `.` and `-`, starting with a letter, digit or `_`",
            );
        }
        let t = self.table(v, &format!("step `{id}`"))?;
        self.keys(t, STEP_KEYS, RESERVED_STEP, &what);
        let mut src = StepSrc {
            key_span: k.span(),
            ..StepSrc::default()
        };
        let of = |key: &str| format!("`{key}` of step `{id}`");
        let kind = match t.get("kind") {
            None => StepKind::Command,
            Some(v) => match self.string(v, &of("kind")).as_deref() {
                Some("compile") => StepKind::Compile,
                Some("prefill") => StepKind::Prefill,
                Some("handoff") => StepKind::Handoff,
                Some("compare") => StepKind::Compare,
                Some("command") => StepKind::Command,
                Some(other) => {
                    let kinds = ["compile", "prefill", "handoff", "compare", "command"];
                    self.err(
                        v.span(),
                        format!("unknown step kind `{other}`"),
                        format!(
                            "use one of compile, prefill, handoff, compare, command; {}",
                            did_you_mean(other, &kinds)
                        ),
                    );
                    StepKind::Command
                }
                None => StepKind::Command,
            },
        };
        if let Some(n) = t.get("needs").and_then(|v| self.strings(v, &of("needs"))) {
            src.needs = n;
        }
        if let Some(n) = t
            .get("devices")
            .and_then(|v| self.strings(v, &of("devices")))
        {
            src.devices = n;
        }
        let mut refs = Vec::new();
        let command = match (t.get("run"), t.get("shell")) {
            (Some(r), Some(_)) => {
                self.err(
                    r.span(),
                    format!("step `{id}` has both `run` and `shell`"),
                    "keep one: `run` is an argv array run directly, `shell` a string for /bin/sh -c",
                );
                None
            }
            (Some(r), None) => match self.templates(r, &of("run"), ctx, &mut refs) {
                Some(argv) if argv.is_empty() => {
                    self.err(
                        r.span(),
                        format!("`run` of step `{id}` is empty"),
                        "name a program, e.g. run = [\"python3\", \"x.py\"]",
                    );
                    None
                }
                Some(argv) => Some(StepCommand::Argv(argv)),
                None => None,
            },
            (None, Some(s)) => self
                .template(s, &of("shell"), ctx, true, &mut refs)
                .map(StepCommand::Shell),
            (None, None) => None,
        };
        if kind == StepKind::Compare {
            if let Some(v) = t.get("run").or(t.get("shell")) {
                self.err(
                    v.span(),
                    format!("compare step `{id}` cannot have a command"),
                    "compare steps are built in: remove `run`/`shell`, or use another kind",
                );
            }
        } else if command.is_none() && t.get("run").is_none() && t.get("shell").is_none() {
            self.err(
                k.span(),
                format!("step `{id}` has no command"),
                "add `run = [\"prog\", \"arg\"]` or `shell = \"...\"`",
            );
        }
        let mut env = BTreeMap::new();
        if let Some(v) = t.get("env") {
            if let Some(e) = self.table(v, &of("env")) {
                for (ek, ev) in e.iter() {
                    let name: &str = ek.get_ref();
                    if name.is_empty() || name.contains('=') || name.contains('\0') {
                        self.err(
                            ek.span(),
                            format!("`{name}` is not an environment variable name"),
                            "use letters, digits and `_`",
                        );
                        continue;
                    }
                    let what = format!("env `{name}` of step `{id}`");
                    if let Some(t) = self.template(ev, &what, ctx, true, &mut refs) {
                        env.insert(name.to_string(), t);
                    }
                }
            }
        }
        let cwd = t
            .get("cwd")
            .and_then(|v| self.template(v, &of("cwd"), ctx, true, &mut refs));
        let repeats = match t.get("repeats") {
            None => 1,
            Some(v) => self
                .bounded(v, &of("repeats"), 1, 100_000)
                .map_or(1, |n| n as u32),
        };
        let warmup = match t.get("warmup") {
            None => 0,
            Some(v) => self
                .bounded(v, &of("warmup"), 0, 100_000)
                .map_or(0, |n| n as u32),
        };
        let timeout = t
            .get("timeout")
            .and_then(|v| self.duration(v, &of("timeout")));
        let memory = t.get("memory").and_then(|v| self.size(v, &of("memory")));
        let pids = t.get("pids").and_then(|v| {
            self.bounded(v, &of("pids"), 1, units::MAX_PIDS)
                .map(|n| n as u64)
        });
        let outputs = match t.get("outputs") {
            None => Vec::new(),
            Some(v) => self
                .templates(v, &of("outputs"), ctx, &mut refs)
                .unwrap_or_default(),
        };
        let inputs = match t.get("inputs") {
            None => Vec::new(),
            Some(v) => self
                .templates(v, &of("inputs"), ctx, &mut refs)
                .unwrap_or_default(),
        };
        let mut checks = Vec::new();
        match (t.get("checks"), kind) {
            (Some(v), StepKind::Compare) => {
                if let Some(items) = self.array(v, &of("checks")) {
                    if items.is_empty() {
                        self.err(
                            v.span(),
                            format!("compare step `{id}` has no checks"),
                            "add checks = [{ name = \"...\", metric = \"bit_exact\", ... }]",
                        );
                    }
                    let mut names = HashSet::new();
                    for item in items {
                        if let Some(c) = self.check(item, id, ctx, &mut refs) {
                            if !names.insert(c.name.clone()) {
                                self.err(
                                    item.span(),
                                    format!("two checks of step `{id}` are named `{}`", c.name),
                                    "give each check its own name",
                                );
                            }
                            checks.push(c);
                        }
                    }
                }
            }
            (Some(v), _) => {
                self.err(
                    v.span(),
                    format!("step `{id}` has `checks` but is not a compare step"),
                    "set `kind = \"compare\"` and drop its command, or move the checks to a compare step",
                );
            }
            (None, StepKind::Compare) => {
                self.err(
                    k.span(),
                    format!("compare step `{id}` has no checks"),
                    "add checks = [{ name = \"...\", metric = \"bit_exact\", ... }]",
                );
            }
            (None, _) => {}
        }
        src.refs = refs;
        // A step with errors still joins the graph checks, so a cycle or a bad
        // reference is reported in the same run.
        let step = Step {
            id: StepId(id.to_string()),
            kind,
            needs: src.needs.iter().map(|n| StepId(n.0.clone())).collect(),
            devices: src.devices.iter().map(|d| d.0.clone()).collect(),
            command,
            env,
            cwd,
            repeats,
            warmup,
            timeout,
            memory,
            pids,
            outputs,
            inputs,
            checks,
        };
        Some((step, src))
    }

    fn check(
        &mut self,
        v: &Val<'_>,
        step: &str,
        ctx: &Ctx<'_>,
        refs: &mut Vec<(StepId, Range<usize>)>,
    ) -> Option<Check> {
        let t = self.table(v, &format!("each check of step `{step}`"))?;
        let label = match t.get("name").map(|n| n.get_ref()) {
            Some(DeValue::String(s)) => format!("check `{s}` of step `{step}`"),
            _ => format!("a check of step `{step}`"),
        };
        self.keys(t, CHECK_KEYS, &[], &format!("in {label}"));
        let mut ok = true;
        let name = self
            .required(t, "name", &label, v.span(), "name = \"what this checks\"")
            .and_then(|v| self.string(v, &format!("`name` of {label}")));
        ok &= name.is_some();
        let metrics = Metric::ALL.map(Metric::as_str);
        let metric = self
            .required(t, "metric", &label, v.span(), "metric = \"rel_rms\"")
            .and_then(|mv| {
                let s = self.string(mv, &format!("`metric` of {label}"))?;
                let m = match Metric::ALL.into_iter().find(|m| m.as_str() == s) {
                    Some(m) => m,
                    None => {
                        self.err(
                            mv.span(),
                            format!("unknown metric `{s}`"),
                            format!(
                                "use one of {}; {}",
                                metrics.join(", "),
                                did_you_mean(&s, &metrics)
                            ),
                        );
                        return None;
                    }
                };
                Some(m)
            });
        ok &= metric.is_some();
        let mut tref = |w: &mut Self, key: &str, ok: &mut bool| -> Option<Template> {
            let v = t.get(key)?;
            let r = w.template(v, &format!("`{key}` of {label}"), ctx, true, refs);
            *ok &= r.is_some();
            r
        };
        let actual = tref(self, "actual", &mut ok);
        let expected = tref(self, "expected", &mut ok);
        let actual_logits = tref(self, "actual_logits", &mut ok);
        let expected_logits = tref(self, "expected_logits", &mut ok);
        let across = t.get("across").and_then(|v| {
            let s = self.string(v, &format!("`across` of {label}"));
            ok &= s.is_some();
            let s = s?;
            refs.push((StepId(s.clone()), v.span()));
            Some(StepId(s))
        });
        let file = t.get("file").and_then(|v| {
            let s = self.string(v, &format!("`file` of {label}"));
            ok &= s.is_some();
            s
        });
        let axis = t.get("axis").and_then(|v| {
            let n = self
                .bounded(v, &format!("`axis` of {label}"), 0, 64)
                .map(|n| n as usize);
            ok &= n.is_some();
            n
        });
        let dtype = t.get("dtype").and_then(|v| {
            let s = self.string(v, &format!("`dtype` of {label}"))?;
            const DTYPES: &[&str] = &[
                "f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
                "bool",
            ];
            if DTYPES.contains(&s.as_str()) {
                Some(s)
            } else {
                self.err(
                    v.span(),
                    format!("unknown dtype `{s}`"),
                    format!(
                        "use one of {}; {}",
                        DTYPES.join(", "),
                        did_you_mean(&s, DTYPES)
                    ),
                );
                None
            }
        });
        let shape = t.get("shape").and_then(|v| {
            let items = self.array(v, &format!("`shape` of {label}"))?;
            let mut dims = Vec::new();
            for item in items {
                dims.push(self.bounded(
                    item,
                    &format!("each dimension of `shape` of {label}"),
                    0,
                    i64::MAX,
                )? as u64);
            }
            Some(dims)
        });
        let max = t
            .get("max")
            .and_then(|v| self.float(v, &format!("`max` of {label}")));
        let min = t
            .get("min")
            .and_then(|v| self.float(v, &format!("`min` of {label}")));
        let equals = t.get("equals").and_then(|v| self.json(v, 0));
        let metric = metric?;
        // Which fields each metric reads; anything else is a mistake worth naming.
        let has = |k: &str| t.get(k).is_some();
        let need = |w: &mut Self, cond: bool, msg: &str, help: &str| {
            if !cond {
                w.err(v.span(), format!("{label}: {msg}"), help.to_string());
            }
            cond
        };
        let pair = has("actual") && has("expected");
        ok &= match metric {
            Metric::BitExact => need(
                self,
                (has("across") && has("file") && !has("actual") && !has("expected")) || (pair && !has("across") && !has("file")),
                "bit_exact needs `across` + `file`, or `actual` + `expected`",
                "compare repeats with across = \"STEP\", file = \"kv.safetensors\", or two tensors with actual/expected",
            ),
            Metric::RelRms | Metric::MaxAbs | Metric::FirstDivergence | Metric::SlotsExact => need(
                self,
                pair,
                &format!("{} needs `actual` and `expected`", metric.as_str()),
                "add actual = \"${steps.A.out}/x.npy\" and expected = \"${steps.B.out}/x.npy\"",
            ),
            Metric::Finite => need(self, has("actual"), "finite needs `actual`", "add actual = \"${steps.A.out}/x.npy\""),
            Metric::Shape => need(
                self,
                has("actual") && (has("expected") || has("shape")),
                "shape needs `actual` and either `expected` or `shape`",
                "add actual = \"...\" and shape = [2, 8192]",
            ),
        };
        for (key, allowed) in [
            ("across", metric == Metric::BitExact),
            ("file", metric == Metric::BitExact),
            ("actual_logits", metric == Metric::FirstDivergence),
            ("expected_logits", metric == Metric::FirstDivergence),
            ("axis", metric == Metric::SlotsExact),
        ] {
            if let (Some((k, _)), false) = (t.get_key_value(key), allowed) {
                self.err(
                    k.span(),
                    format!(
                        "`{key}` is not used by metric {} in {label}",
                        metric.as_str()
                    ),
                    "remove it, or change the metric",
                );
                ok = false;
            }
        }
        if !ok {
            return None;
        }
        Some(Check {
            name: name?,
            metric,
            across,
            file,
            actual,
            expected,
            actual_logits,
            expected_logits,
            axis,
            dtype,
            shape,
            max,
            min,
            equals,
        })
    }

    /// A TOML value as JSON (for `equals`); depth is bounded by the parser.
    fn json(&mut self, v: &Val<'_>, depth: usize) -> Option<serde_json::Value> {
        use serde_json::Value as J;
        if depth > 64 {
            self.err(
                v.span(),
                "`equals` is nested too deeply".to_string(),
                "flatten the value",
            );
            return None;
        }
        Some(match v.get_ref() {
            DeValue::String(s) => J::String(s.to_string()),
            DeValue::Integer(_) => J::from(self.integer(v, "`equals`")?),
            DeValue::Float(_) => {
                let f = self.float(v, "`equals`")?;
                match serde_json::Number::from_f64(f) {
                    Some(n) => J::Number(n),
                    None => {
                        self.err(
                            v.span(),
                            "`equals` must be a finite number".to_string(),
                            "use the `finite` metric to test for inf/nan",
                        );
                        return None;
                    }
                }
            }
            DeValue::Boolean(b) => J::Bool(*b),
            DeValue::Datetime(d) => J::String(d.to_string()),
            DeValue::Array(a) => {
                let mut out = Vec::new();
                for item in a.iter() {
                    out.push(self.json(item, depth + 1)?);
                }
                J::Array(out)
            }
            DeValue::Table(t) => {
                let mut out = serde_json::Map::new();
                for (k, item) in t.iter() {
                    out.insert(k.get_ref().to_string(), self.json(item, depth + 1)?);
                }
                J::Object(out)
            }
        })
    }
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]*`
pub(crate) fn valid_step_id(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

fn valid_cpuset(s: &str) -> bool {
    !s.is_empty()
        && s.split(',').all(|part| {
            let mut ends = part.splitn(2, '-');
            let a = ends.next().unwrap_or("");
            let ok =
                |x: &str| !x.is_empty() && x.len() <= 6 && x.chars().all(|c| c.is_ascii_digit());
            ok(a) && ends.next().is_none_or(ok)
        })
}

/// A template without run-time variables, as plain text (validation guarantees none).
fn lit_string(t: &Template) -> String {
    t.segments
        .iter()
        .map(|s| match s {
            Segment::Lit(l) => l.as_str(),
            Segment::Var(_) => "",
        })
        .collect()
}

fn lit_path(t: &Template) -> std::path::PathBuf {
    std::path::PathBuf::from(lit_string(t))
}
