//! A compare step's `checks`: one check and the JSON values it compares against.

use std::ops::Range;

use toml::de::{DeTable, DeValue};

use super::super::diag::did_you_mean;
use super::super::interp::Ctx;
use super::super::model::*;
use super::super::schema::Table;
use super::{Val, Walker};

/// Dimensions of `shape` written as `"${matrix.X}"`, by place: filled in per cell.
type ShapeVars = Vec<(usize, Template)>;

impl<'s> Walker<'s> {
    pub(super) fn check(
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
        self.keys(t, Table::Check, &[], &format!("in {label}"));
        let mut ok = true;
        let name = self
            .required(t, "name", &label, v.span(), "name = \"what this checks\"")
            .and_then(|v| self.load_string(v, &format!("`name` of {label}")));
        ok &= name.is_some();
        let metric = self
            .required(t, "metric", &label, v.span(), "metric = \"rel_rms\"")
            .and_then(|mv| self.check_metric(mv, &label));
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
            let s = self.load_string(v, &format!("`file` of {label}"));
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
        let dtype = t.get("dtype").and_then(|v| self.check_dtype(v, &label));
        let (shape, shape_vars) = match t.get("shape") {
            None => (None, Vec::new()),
            Some(v) => match self.check_shape(v, &label, ctx, refs) {
                Some((dims, vars)) => (Some(dims), vars),
                None => {
                    ok = false;
                    (None, Vec::new())
                }
            },
        };
        let max = t
            .get("max")
            .and_then(|v| self.float(v, &format!("`max` of {label}")));
        let min = t
            .get("min")
            .and_then(|v| self.float(v, &format!("`min` of {label}")));
        let equals = t.get("equals").and_then(|v| self.json(v, 0));
        let metric = metric?;
        ok &= self.check_needs(t, v, &label, metric);
        ok &= self.check_unused(t, &label, metric);
        if !ok {
            return None;
        }
        Some(Check {
            line: self.idx.position(v.span().start).0,
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
            shape_vars,
            max,
            min,
            equals,
        })
    }

    /// `metric`: one of the metrics the comparer knows, the others named when it is not.
    fn check_metric(&mut self, mv: &Val<'_>, label: &str) -> Option<Metric> {
        let metrics = Metric::ALL.map(Metric::as_str);
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
    }

    /// `dtype`: raw files are read by element type, so only the types the reader has.
    fn check_dtype(&mut self, v: &Val<'_>, label: &str) -> Option<String> {
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
    }

    /// `shape`: whole numbers, or `${matrix.X}` dimensions left to fill in per cell
    /// (as 0 in the dims, with their place in the vars).
    fn check_shape(
        &mut self,
        v: &Val<'_>,
        label: &str,
        ctx: &Ctx<'_>,
        refs: &mut Vec<(StepId, Range<usize>)>,
    ) -> Option<(Vec<u64>, ShapeVars)> {
        let mut shape_vars: ShapeVars = Vec::new();
        let items = self.array(v, &format!("`shape` of {label}"))?;
        let mut dims = Vec::new();
        let mut good = true;
        for (i, item) in items.iter().enumerate() {
            let what = format!("each dimension of `shape` of {label}");
            if let DeValue::String(_) = item.get_ref() {
                // `"${params.tokens}"` or `"${matrix.tokens}"`: a number known at load
                // time, or once the step is expanded over its cells.
                let Some(tpl) = self.template(item, &what, ctx, true, refs) else {
                    good = false;
                    continue;
                };
                let text = tpl.as_literal();
                match text.as_deref().map(str::parse::<u64>) {
                    Some(Ok(n)) => dims.push(n),
                    None if tpl
                        .segments
                        .iter()
                        .all(|s| matches!(s, Segment::Lit(_) | Segment::Var(Var::Matrix(_)))) =>
                    {
                        dims.push(0);
                        shape_vars.push((i, tpl));
                    }
                    _ => {
                        self.err(
                            item.span(),
                            format!("{what} must be a whole number"),
                            "write a number, or a string holding only ${params.X} or ${matrix.X}",
                        );
                        good = false;
                    }
                }
                continue;
            }
            match self.bounded(item, &what, 0, i64::MAX) {
                Some(n) => dims.push(n as u64),
                None => good = false,
            }
        }
        good.then_some((dims, shape_vars))
    }

    /// Which fields each metric reads: a check missing one cannot be run.
    fn check_needs(&mut self, t: &DeTable<'_>, v: &Val<'_>, label: &str, metric: Metric) -> bool {
        let has = |k: &str| t.get(k).is_some();
        let need = |w: &mut Self, cond: bool, msg: &str, help: &str| {
            if !cond {
                w.err(v.span(), format!("{label}: {msg}"), help.to_string());
            }
            cond
        };
        let pair = has("actual") && has("expected");
        match metric {
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
        }
    }

    /// Fields another metric reads: set here they would be ignored, a mistake worth naming.
    fn check_unused(&mut self, t: &DeTable<'_>, label: &str, metric: Metric) -> bool {
        let mut ok = true;
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
        ok
    }

    /// A TOML value as JSON (for `equals`); depth is bounded by the parser.
    pub(super) fn json(&mut self, v: &Val<'_>, depth: usize) -> Option<serde_json::Value> {
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
