//! The hand walker: a spanned TOML tree (`toml::de::DeTable`) into the typed model,
//! recording every problem as a [`Diagnostic`] and carrying on, so one load reports
//! all of them. Graph checks (needs, cycles, upstream references) live in `graph.rs`.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::diag::{did_you_mean, Diagnostic, LineIndex};
use super::interp::{self, Ctx};
use super::model::*;
use super::schema::Table;
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
    /// Where `matrix = [...]` is, when the step names its axes.
    pub matrix_span: Option<Range<usize>>,
    /// Where `revisions = [...]` is.
    pub revisions_span: Option<Range<usize>>,
    /// Where `gate = "new"` is, when the step gates on new failures.
    pub gate_span: Option<Range<usize>>,
}

mod backend;
mod cache;
mod check;
mod devices;
mod limits;
mod matrix;
mod pins;
mod report;
mod revisions;
mod step;
mod top;

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
    pub matrix: Matrix,
    pub revisions: Vec<Revision>,
    pub backend: BackendSettings,
    pub cache: CacheSettings,
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
    /// `[params]`, once read: what `${params.X}` means in load-time strings.
    load_params: BTreeMap<String, ParamValue>,
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
            load_params: BTreeMap::new(),
        }
    }

    /// A string value with its load-time variables filled in (`${params.X}`,
    /// `${env.X}`, `${env.X:-default}`, `${plan_dir}`; `$$` is a `$`): what every
    /// free-text, path and value string of a plan may use. Run-time variables are
    /// refused here with their place.
    pub(super) fn load_string(&mut self, v: &Val<'_>, what: &str) -> Option<String> {
        let s = self.string(v, what)?;
        if !s.contains('$') {
            return Some(s);
        }
        let params = std::mem::take(&mut self.load_params);
        let plan_dir = self.plan_dir.clone();
        let ctx = Ctx {
            params: &params,
            env: self.env,
            plan_dir: &plan_dir,
            axes: &[],
            revisions: false,
        };
        let t = self.interp(v, &s, &ctx, false, &mut Vec::new());
        self.load_params = params;
        t?.as_literal()
    }

    pub(crate) fn err(&mut self, span: Range<usize>, message: String, help: impl Into<String>) {
        let d = self.idx.diag(span, message, help.into());
        self.diags.push(d);
    }

    /// Refuse unknown and reserved keys of a table.
    /// Refuse every key of `t` that its table's input type (plan/schema.rs) lacks.
    pub(super) fn keys(&mut self, t: &DeTable<'_>, table: Table, reserved: &[&str], ctx: &str) {
        let allowed: Vec<&str> = table.keys().iter().map(String::as_str).collect();
        let allowed = allowed.as_slice();
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

    pub(super) fn wrong_type(&mut self, v: &Val<'_>, what: &str, expected: &str, example: &str) {
        self.err(
            v.span(),
            format!(
                "{what} must be {expected}, found {}",
                type_name(v.get_ref())
            ),
            format!("write it as {expected}, e.g. {example}"),
        );
    }

    pub(super) fn string(&mut self, v: &Val<'_>, what: &str) -> Option<String> {
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            _ => {
                self.wrong_type(v, what, "a string", "\"...\"");
                None
            }
        }
    }

    pub(super) fn boolean(&mut self, v: &Val<'_>, what: &str) -> Option<bool> {
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong_type(v, what, "a boolean", "`true` or `false` (no quotes)");
                None
            }
        }
    }

    /// An integer the record can hold exactly (within ±(2^53 - 1)).
    pub(super) fn integer(&mut self, v: &Val<'_>, what: &str) -> Option<i64> {
        let exact = units::MAX_EXACT as i64;
        self.bounded(v, what, -exact, exact)
    }

    /// An integer in `min..=max`, the range named in the error.
    pub(super) fn bounded(&mut self, v: &Val<'_>, what: &str, min: i64, max: i64) -> Option<i64> {
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

    pub(super) fn float(&mut self, v: &Val<'_>, what: &str) -> Option<f64> {
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

    pub(super) fn array<'a, 'i>(&mut self, v: &'a Val<'i>, what: &str) -> Option<&'a [Val<'i>]> {
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
    pub(super) fn strings(
        &mut self,
        v: &Val<'_>,
        what: &str,
    ) -> Option<Vec<(String, Range<usize>)>> {
        self.strings_by(v, what, Self::string)
    }

    /// An array of strings, each with its load-time variables filled in.
    pub(super) fn load_strings(
        &mut self,
        v: &Val<'_>,
        what: &str,
    ) -> Option<Vec<(String, Range<usize>)>> {
        self.strings_by(v, what, Self::load_string)
    }

    /// An array of strings, each entry read by `entry`; every bad entry is said.
    fn strings_by(
        &mut self,
        v: &Val<'_>,
        what: &str,
        entry: fn(&mut Self, &Val<'_>, &str) -> Option<String>,
    ) -> Option<Vec<(String, Range<usize>)>> {
        let items = self.array(v, what)?;
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in items {
            match entry(self, item, &format!("each entry of {what}")) {
                Some(s) => out.push((s, item.span())),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// A memory limit: a size within `units::check_memory`.
    pub(super) fn size(&mut self, v: &Val<'_>, what: &str) -> Option<ByteSize> {
        let b = self.any_size(v, what)?;
        match units::check_memory(b) {
            Ok(b) => Some(b),
            Err((m, h)) => {
                self.err(v.span(), format!("{what}: {m}"), h);
                None
            }
        }
    }

    pub(super) fn any_size(&mut self, v: &Val<'_>, what: &str) -> Option<ByteSize> {
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
            DeValue::String(_) => {
                let s = self.load_string(v, what)?;
                match units::parse_size(&s) {
                    Ok(b) => Some(b),
                    Err((m, h)) => {
                        self.err(v.span(), format!("{what}: {m}"), h);
                        None
                    }
                }
            }
            _ => {
                self.wrong_type(v, what, "a size", "\"128GiB\" or an integer of bytes");
                None
            }
        }
    }

    /// A timeout: above zero, at most 366 days.
    pub(super) fn duration(&mut self, v: &Val<'_>, what: &str) -> Option<Duration> {
        self.duration_from(v, what, false)
    }

    pub(super) fn duration_from(
        &mut self,
        v: &Val<'_>,
        what: &str,
        zero_ok: bool,
    ) -> Option<Duration> {
        match v.get_ref() {
            DeValue::String(_) => {
                let s = self.load_string(v, what)?;
                match units::parse_duration(&s).and_then(|d| units::check_duration(d, zero_ok)) {
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
    pub(super) fn sub_span(&self, v: &Val<'_>, decoded: &str, r: &Range<usize>) -> Range<usize> {
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
    pub(super) fn template(
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

    pub(super) fn interp(
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

    pub(super) fn templates(
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
}

/// Each walker's key list is the property list of its schema type, so the loader and
/// `schemas/plan.schema.json` cannot drift apart.
#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use schemars::JsonSchema;

    use super::super::schema::*;

    fn properties<T: JsonSchema>() -> BTreeSet<String> {
        let s = serde_json::to_value(schemars::schema_for!(T)).unwrap();
        s["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("no properties in {s}"))
            .keys()
            .cloned()
            .collect()
    }

    /// Each table's keys are its input type's properties, whatever the order.
    #[test]
    fn table_keys_are_the_schema_properties() {
        let set = |t: super::super::schema::Table| -> BTreeSet<String> {
            t.keys().iter().cloned().collect()
        };
        use super::super::schema::Table;
        assert_eq!(set(Table::Top), properties::<PlanInput>());
        assert!(set(Table::Top).contains("steps"));
        assert_eq!(set(Table::Step), properties::<StepInput>());
        assert!(set(Table::Check).contains("metric"));
        assert_eq!(
            set(Table::Results),
            ["junit", "sarif"].map(String::from).into()
        );
        assert_eq!(set(Table::Revision), properties::<RevisionInput>());
    }
}
