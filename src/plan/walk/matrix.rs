//! `[matrix]` of a plan: axes, `exclude` and `include` rows, and the cells they span.

use std::borrow::Cow;

use toml::de::DeValue;
use toml::Spanned;

use super::super::diag::did_you_mean;
use super::super::model::*;
use super::top::*;
use super::{Val, Walker};

/// One `exclude` or `include` row: (axis, value index) pairs.
type MatrixRow = Vec<(usize, usize)>;

impl Walker<'_> {
    /// `[matrix]`: axes (non-empty arrays of plain scalars, in declaration order),
    /// `exclude` rows (partial: every cell matching them goes) and `include` rows
    /// (whole cells, added; a new value joins its axis).
    pub(super) fn matrix(&mut self, v: &Val<'_>) -> Matrix {
        let Some(t) = self.table(v, "[matrix]") else {
            return Matrix::default();
        };
        let mut keys: Vec<_> = t.iter().collect();
        // The map is ordered by name; the plan's order is the order of the source.
        keys.sort_by_key(|(k, _)| k.span().start);
        let mut m = Matrix::default();
        for (k, v) in &keys {
            if let Some(axis) = self.matrix_axis(k, v) {
                m.axes.push(axis);
            }
        }
        let Some(mut cells) = self.matrix_product(v, &m) else {
            return Matrix::default();
        };
        if let Some(rows) = t.get("exclude") {
            self.matrix_exclude(rows, &mut m, &mut cells);
        }
        if let Some(rows) = t.get("include") {
            self.matrix_include(rows, &mut m, &mut cells);
        }
        m.cells = cells;
        m
    }

    /// One axis of `[matrix]`; `None` for `exclude` / `include`, which are rows, and
    /// for an axis refused.
    fn matrix_axis(&mut self, k: &Spanned<Cow<'_, str>>, v: &Val<'_>) -> Option<Axis> {
        let name = k.get_ref().as_ref();
        if name == "exclude" || name == "include" {
            return None;
        }
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            self.err(
                k.span(),
                format!("`{name}` is not a matrix axis name"),
                "use letters, digits and `_`, e.g. `tokens = [2048, 8192]`",
            );
            return None;
        }
        let what = format!("matrix axis `{name}`");
        let items = self.array(v, &what)?;
        if items.is_empty() {
            self.err(
                v.span(),
                format!("{what} has no values"),
                "give it at least one value, e.g. `[2048, 8192]`",
            );
            return None;
        }
        let values = self.axis_values(items, &what);
        Some(Axis {
            name: name.to_string(),
            values,
        })
    }

    /// An axis's values, each once: cell ids, folders and cgroups are named by a value's
    /// text, so two values that read alike (`1`, `1.0`, `"1"`) would be one cell twice.
    fn axis_values(&mut self, items: &[Val<'_>], what: &str) -> Vec<ParamValue> {
        let mut values: Vec<ParamValue> = Vec::new();
        let mut seen: std::collections::HashMap<String, ParamValue> =
            std::collections::HashMap::with_capacity(items.len());
        for item in items {
            if let Some(x) = self.matrix_value(item, what) {
                let text = crate::plan::model::value_text(&x);
                match seen.get(&text) {
                    Some(first) if *first == x => self.err(
                        item.span(),
                        format!("{what} lists `{x}` twice"),
                        "list each value once",
                    ),
                    Some(first) => self.err(
                        item.span(),
                        format!(
                            "{what}: `{}` and `{}` both read `{text}`, so they would name the same cell",
                            toml_text(first),
                            toml_text(&x)
                        ),
                        "keep one of them (cell ids, folders and cgroups are named by a value's text)",
                    ),
                    None => {
                        seen.insert(text, x.clone());
                        values.push(x);
                    }
                }
            }
        }
        values
    }

    /// The axes' product, in axis order (the last axis varies fastest); `None` when it
    /// spans more than [`MAX_CELLS`], its size checked before it is built.
    fn matrix_product(&mut self, v: &Val<'_>, m: &Matrix) -> Option<Vec<Vec<usize>>> {
        let product = m
            .axes
            .iter()
            .try_fold(1usize, |n, a| n.checked_mul(a.values.len()));
        if product.is_none_or(|n| n > MAX_CELLS) {
            self.err(
                v.span(),
                format!(
                    "the matrix spans more than {MAX_CELLS} cells ({})",
                    m.axes
                        .iter()
                        .map(|a| a.values.len().to_string())
                        .collect::<Vec<_>>()
                        .join(" × ")
                ),
                "split the sweep into several plans, or narrow it with `exclude`",
            );
            return None;
        }
        let mut cells: Vec<Vec<usize>> = vec![Vec::new()];
        for a in &m.axes {
            let mut next = Vec::with_capacity(cells.len() * a.values.len());
            for c in &cells {
                for vi in 0..a.values.len() {
                    let mut c2 = c.clone();
                    c2.push(vi);
                    next.push(c2);
                }
            }
            cells = next;
            if cells.len() > MAX_CELLS {
                self.err(
                    v.span(),
                    format!("the matrix spans more than {MAX_CELLS} cells"),
                    "split the sweep into several plans, or narrow it with `exclude`",
                );
                return None;
            }
        }
        if m.axes.is_empty() {
            cells.clear();
        }
        Some(cells)
    }

    /// `exclude` rows: every cell matching a row goes; a row matching none is a typo.
    fn matrix_exclude(&mut self, rows: &Val<'_>, m: &mut Matrix, cells: &mut Vec<Vec<usize>>) {
        for (row, span) in self.matrix_rows(rows, m, "exclude", false) {
            let before = cells.len();
            cells.retain(|c| !row.iter().all(|(a, vi)| c[*a] == *vi));
            if cells.len() == before {
                self.err(
                    span,
                    "this `exclude` row matches no cell".to_string(),
                    "check its axis values against the axes above",
                );
            }
        }
    }

    /// `include` rows: whole cells, added once each (a new value already joined its axis).
    fn matrix_include(&mut self, rows: &Val<'_>, m: &mut Matrix, cells: &mut Vec<Vec<usize>>) {
        for (row, span) in self.matrix_rows(rows, m, "include", true) {
            if row.len() != m.axes.len() {
                self.err(
                    span,
                    "an `include` row must give a value for every axis".to_string(),
                    format!(
                        "name all of: {}",
                        m.axes
                            .iter()
                            .map(|a| a.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
                continue;
            }
            let mut cell = vec![0; m.axes.len()];
            for (a, vi) in row {
                cell[a] = vi;
            }
            if !cells.contains(&cell) {
                cells.push(cell);
            }
        }
    }

    fn matrix_value(&mut self, v: &Val<'_>, what: &str) -> Option<ParamValue> {
        match v.get_ref() {
            DeValue::Integer(_) => self.integer(v, what).map(ParamValue::Int),
            DeValue::Float(_) => self.float(v, what).map(ParamValue::Float),
            DeValue::Boolean(b) => Some(ParamValue::Bool(*b)),
            DeValue::String(s) => {
                // Values become part of step ids, folder names and cgroup names.
                let plain = !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '+'));
                if plain {
                    Some(ParamValue::String(s.to_string()))
                } else {
                    self.err(
                        v.span(),
                        format!("{what}: `{s}` is not a plain value"),
                        "use letters, digits and `_ - . +` (values name folders and steps)",
                    );
                    None
                }
            }
            _ => {
                self.wrong_type(
                    v,
                    what,
                    "a string, number or boolean",
                    "`2048` or `\"bf16\"`",
                );
                None
            }
        }
    }

    /// `exclude` / `include` rows as (axis, value index) pairs with their spans; a
    /// new value of an `include` row joins its axis (`add_values`).
    fn matrix_rows(
        &mut self,
        v: &Val<'_>,
        m: &mut Matrix,
        what: &str,
        add_values: bool,
    ) -> Vec<(MatrixRow, std::ops::Range<usize>)> {
        let mut out = Vec::new();
        let Some(items) = self.array(v, &format!("`{what}` of [matrix]")) else {
            return out;
        };
        for item in items {
            let Some(row) = self.table(item, &format!("each `{what}` row")) else {
                continue;
            };
            let mut pairs = Vec::new();
            let mut ok = true;
            for (k, x) in row.iter() {
                let name = k.get_ref().as_ref();
                let Some(ai) = m.axes.iter().position(|a| a.name == name) else {
                    let names: Vec<&str> = m.axes.iter().map(|a| a.name.as_str()).collect();
                    self.err(
                        k.span(),
                        format!("`{what}` names `{name}`, which is not a matrix axis"),
                        did_you_mean(name, &names),
                    );
                    ok = false;
                    continue;
                };
                let Some(val) = self.matrix_value(x, &format!("`{name}` of an `{what}` row"))
                else {
                    ok = false;
                    continue;
                };
                let text = crate::plan::model::value_text(&val);
                let vi = match m.axes[ai]
                    .values
                    .iter()
                    .position(|y| crate::plan::model::value_text(y) == text)
                {
                    Some(vi) => vi,
                    None if add_values => {
                        m.axes[ai].values.push(val);
                        m.axes[ai].values.len() - 1
                    }
                    None => {
                        self.err(
                            x.span(),
                            format!(
                                "`{what}` gives `{name} = {val}`, which the axis does not list"
                            ),
                            "use one of the axis's values",
                        );
                        ok = false;
                        continue;
                    }
                };
                pairs.push((ai, vi));
            }
            if ok {
                out.push((pairs, item.span()));
            }
        }
        out
    }
}

/// A matrix value as TOML writes it (`"1"`, `1`, `1.0`), for telling apart values
/// that read alike.
fn toml_text(v: &ParamValue) -> String {
    match v {
        ParamValue::String(s) => format!("\"{s}\""),
        ParamValue::Float(x) => format!("{x:?}"),
        other => other.to_string(),
    }
}
