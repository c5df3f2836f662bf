//! The top level of a plan: the document itself, `[params]`, `[limits]`, `[devices]`
//! and `[report]`, each with the keys it accepts.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::super::diag::did_you_mean;
use super::super::interp::Ctx;
use super::super::model::*;
use super::super::units;
use super::{StepSrc, Val, Walked, Walker};

/// The most cells a matrix may span.
pub(super) const MAX_CELLS: usize = 100_000;

/// One `exclude` or `include` row: (axis, value index) pairs.
type MatrixRow = Vec<(usize, usize)>;

/// Keys reserved for features not built yet: refused, never ignored.
pub(super) const RESERVED_TOP: &[&str] = &[];

pub(super) const TOP_KEYS: &[&str] = &[
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
    "matrix",
    "include",
    "revisions",
    "backend",
];
pub(super) const REVISION_KEYS: &[&str] = &["repo", "commit", "dirty", "untracked"];
pub(super) const LIMIT_KEYS: &[&str] = &[
    "host_memory",
    "swap",
    "pids",
    "cpus",
    "timeout",
    "run_timeout",
    "grace",
    "isolation",
    "cgroup_parent",
];

pub(super) const DEVICE_KEYS: &[&str] = &["kind", "count", "cores", "ids", "simulate"];
pub(super) const REPORT_KEYS: &[&str] = &["templates", "cell_title", "noise"];

impl<'s> Walker<'s> {
    /// Walk the whole document.
    pub(crate) fn document(&mut self, root: &DeTable<'_>) -> Option<Walked> {
        self.keys(root, TOP_KEYS, RESERVED_TOP, "at the top level");
        self.refuse_include(root);
        self.schema(root);
        let params = root
            .get("params")
            .map(|v| self.params(v))
            .unwrap_or_default();
        // Strings below may use `${params.X}`.
        self.load_params = params.clone();
        let name = self.plan_name(root);
        let description = root
            .get("description")
            .and_then(|v| self.load_string(v, "`description`"));
        let changes = root
            .get("changes")
            .and_then(|v| self.load_string(v, "`changes`"));
        let allow_simulated = root
            .get("allow_simulated")
            .and_then(|v| self.boolean(v, "`allow_simulated`"))
            .unwrap_or(false);
        let secret_env = self.secret_env(root);
        let mut matrix = root
            .get("matrix")
            .map(|v| self.matrix(v))
            .unwrap_or_default();
        let revisions = root
            .get("revisions")
            .map(|v| self.revisions(v))
            .unwrap_or_default();
        if !revisions.is_empty() {
            self.revision_axis(root, &mut matrix, &revisions);
        }
        let axes = declared_axes(root, &matrix, !revisions.is_empty());
        let plan_dir = self.plan_dir.clone();
        let env = self.env;
        let ctx = Ctx {
            params: &params,
            env,
            plan_dir: &plan_dir,
            axes: &axes,
            revisions: root.get("revisions").is_some(),
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
        let backend = root
            .get("backend")
            .map(|v| self.backend(v))
            .unwrap_or_default();
        let steps = self.plan_steps(root, &ctx);
        self.gates_need_a_baseline(&steps, &revisions);
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
            matrix,
            revisions,
            backend,
            steps,
        })
    }

    /// `[steps]`: required, since a plan without steps runs nothing.
    fn plan_steps(&mut self, root: &DeTable<'_>, ctx: &Ctx<'_>) -> Vec<(Step, StepSrc)> {
        match root.get("steps") {
            None => {
                self.err(
                    0..0,
                    "missing `steps`".to_string(),
                    "add at least one step, e.g. [steps.hello] with shell = \"echo hello\"",
                );
                Vec::new()
            }
            Some(v) => self.steps(v, ctx),
        }
    }

    /// `include` left in the text: the merge happens once, when the plan is read.
    fn refuse_include(&mut self, root: &DeTable<'_>) {
        if let Some((k, _)) = root.get_key_value("include") {
            // `load_with` merges the included plan before walking; text that still
            // says `include` was included twice over, or loaded without its file.
            self.err(
                k.span(),
                "`include` is resolved when a plan is read from its file, once".to_string(),
                "run the including plan by its path; an included plan cannot include another",
            );
        }
    }

    /// `schema`: a plan written for another schema would be read wrongly, so it is refused.
    fn schema(&mut self, root: &DeTable<'_>) {
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
    }

    /// `name`: required and not blank, since records and reports are titled by it.
    fn plan_name(&mut self, root: &DeTable<'_>) -> Option<String> {
        match root.get("name") {
            None => {
                self.err(
                    0..0,
                    "missing `name`".to_string(),
                    "add `name = \"my-experiment\"` at the top",
                );
                None
            }
            Some(v) => self.load_string(v, "`name`").and_then(|s| {
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
        }
    }

    /// `secrets` and `secret_env` (one list under two names): only variable names, as
    /// they are looked up in the environment.
    fn secret_env(&mut self, root: &DeTable<'_>) -> Vec<String> {
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
        secret_env
    }

    /// The `revision` axis [revisions] adds to the matrix: revisions are an axis like
    /// any other, after the plan's own.
    fn revision_axis(&mut self, root: &DeTable<'_>, matrix: &mut Matrix, revisions: &[Revision]) {
        if let Some((k, _)) = root
            .get("matrix")
            .and_then(|m| m.get_ref().as_table())
            .and_then(|t| t.get_key_value("revision"))
        {
            self.err(
                k.span(),
                "`revision` is the axis [revisions] makes; a [matrix] axis cannot have that name"
                    .to_string(),
                "rename this axis",
            );
        } else {
            let values: Vec<ParamValue> = revisions
                .iter()
                .map(|r| ParamValue::String(r.name.clone()))
                .collect();
            let n = values.len();
            let before = if matrix.axes.is_empty() {
                vec![vec![]]
            } else {
                std::mem::take(&mut matrix.cells)
            };
            matrix.cells = before
                .into_iter()
                .flat_map(|c| {
                    (0..n).map(move |v| {
                        let mut c = c.clone();
                        c.push(v);
                        c
                    })
                })
                .collect();
            matrix.axes.push(Axis {
                name: "revision".into(),
                values,
            });
        }
    }

    /// `[revisions]`: each a git revision of one repository.
    pub(super) fn revisions(&mut self, v: &Val<'_>) -> Vec<Revision> {
        let Some(t) = self.table(v, "[revisions]") else {
            return Vec::new();
        };
        let mut keys: Vec<_> = t.iter().collect();
        keys.sort_by_key(|(k, _)| k.span().start);
        let mut out: Vec<Revision> = Vec::new();
        let mut first_repo: Option<(PathBuf, std::ops::Range<usize>)> = None;
        for (k, v) in keys {
            let name = k.get_ref().to_string();
            let what = format!("revision `{name}`");
            if !self.revision_name(k.span(), &name) {
                continue;
            }
            let Some(r) = self.table(v, &what) else {
                continue;
            };
            self.keys(r, REVISION_KEYS, &[], &format!("in {what}"));
            let repo = self
                .required(r, "repo", &what, k.span(), "repo = \"..\"")
                .and_then(|v| Some((self.load_string(v, &format!("`repo` of {what}"))?, v.span())));
            let commit = self.revision_commit(r, &what);
            let worktree = r
                .get("dirty")
                .and_then(|v| self.revision_worktree(v, &what));
            let refuse_untracked = r
                .get("untracked")
                .and_then(|v| self.untracked_policy(v, &what))
                .unwrap_or(false);
            let (Some((repo, span)), Some(commit)) = (repo, commit) else {
                continue;
            };
            let repo = self.revision_repo(&repo);
            match &first_repo {
                Some((first, _)) if *first != repo => {
                    self.err(
                        span,
                        format!("{what} names another repository than the first revision"),
                        "[revisions] are revisions of one repository: give each the same `repo`",
                    );
                    continue;
                }
                Some(_) => {}
                None => first_repo = Some((repo.clone(), span)),
            }
            if worktree.is_some() && out.iter().any(|r| r.worktree.is_some()) {
                self.err(
                    k.span(),
                    format!("{what}: only one revision can run in the working tree (`dirty`)"),
                    "check the others out: leave `dirty` out",
                );
                continue;
            }
            out.push(Revision {
                name,
                repo,
                commit,
                worktree,
                refuse_untracked,
            });
        }
        // One revision is a plan that runs a commit of a repository (trend, bisect);
        // comparing needs two, which `gate = "new"` checks.
        out
    }

    /// `gate = "new"` compares against the baseline: a plan with one revision (or
    /// none) has nothing to compare with, and such a gate would silently gate on
    /// every failure.
    fn gates_need_a_baseline(&mut self, steps: &[(Step, StepSrc)], revisions: &[Revision]) {
        if revisions.len() >= 2 {
            return;
        }
        for (s, src) in steps {
            if let Some(span) = src.gate_span.clone() {
                let why = match revisions.first() {
                    Some(r) => format!("[revisions] declares only `{}`", r.name),
                    None => "the plan has no [revisions]".to_string(),
                };
                self.err(
                    span,
                    format!(
                        "step `{}` gates on failures new against the baseline, but {why}",
                        s.id
                    ),
                    "add a baseline, e.g. baseline = { repo = \"..\", commit = \"HEAD~1\" }, or leave `gate` out",
                );
            }
        }
    }

    /// A revision's name is a folder under the work folder (`revisions/<name>`): `.`
    /// and `..` would be another folder, and a leading `-` an option of git.
    fn revision_name(&mut self, span: Range<usize>, name: &str) -> bool {
        if name.is_empty()
            || name.starts_with('.')
            || name.starts_with('-')
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            self.err(
                span,
                format!("`{name}` is not a revision name"),
                "use letters, digits and `_ - .`, not starting with `.` or `-`, e.g. baseline, implementation",
            );
            return false;
        }
        true
    }

    /// `commit` (HEAD when left out): a revision git rev-parse reads, not an option it
    /// would take.
    fn revision_commit(&mut self, r: &DeTable<'_>, what: &str) -> Option<String> {
        match r.get("commit") {
            None => Some("HEAD".to_string()),
            Some(v) => self
                .load_string(v, &format!("`commit` of {what}"))
                .and_then(|c| {
                    if c.trim().is_empty()
                        || c.starts_with('-')
                        || c.contains(|ch: char| ch.is_whitespace() || ch.is_control())
                    {
                        self.err(
                            v.span(),
                            format!("`{c}` is not a git revision"),
                            "give a sha, a branch or tag, or HEAD~1",
                        );
                        None
                    } else {
                        Some(c)
                    }
                }),
        }
    }

    /// `dirty`: whether the revision runs in the working tree, and on what terms.
    fn revision_worktree(&mut self, v: &Val<'_>, what: &str) -> Option<WorkTree> {
        let s = self.string(v, &format!("`dirty` of {what}"))?;
        match s.as_str() {
            "allow" => Some(WorkTree::Allow),
            "refuse" => Some(WorkTree::Refuse),
            _ => {
                self.err(
                    v.span(),
                    format!("`dirty` of {what} must be \"allow\" or \"refuse\", found `{s}`"),
                    "\"allow\" runs the working tree as it is; \"refuse\" runs it only when clean; leave it out for a clean checkout of `commit`",
                );
                None
            }
        }
    }

    /// A revision's repository as a clean absolute path, so that two spellings of one
    /// repository compare equal.
    fn revision_repo(&self, repo: &str) -> PathBuf {
        let p = PathBuf::from(repo);
        let abs = if p.is_absolute() {
            p
        } else {
            PathBuf::from(&self.plan_dir).join(p)
        };
        crate::plan::lexical_clean(&abs)
    }

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

    pub(super) fn params(&mut self, v: &Val<'_>) -> BTreeMap<String, ParamValue> {
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

    pub(super) fn limits(&mut self, v: &Val<'_>) -> Limits {
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
            let s = self.load_string(v, "`cpus`")?;
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
        l.cgroup_parent = t.get("cgroup_parent").and_then(|v| {
            let s = self.load_string(v, "`cgroup_parent`")?;
            match crate::fsx::cgroup_parent_path(&s) {
                Ok(p) => Some(p),
                Err(e) => {
                    self.err(
                        v.span(),
                        e,
                        "write the delegated cgroup's path, e.g. \"/orchestrate/alice\"",
                    );
                    None
                }
            }
        });
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

    pub(super) fn devices(&mut self, v: &Val<'_>) -> BTreeMap<String, DeviceRequest> {
        let mut out = BTreeMap::new();
        let Some(t) = self.table(v, "[devices]") else {
            return out;
        };
        for (k, v) in t.iter() {
            let what = format!("device request `{}`", k.get_ref());
            let Some(d) = self.table(v, &what) else {
                continue;
            };
            self.keys(d, DEVICE_KEYS, &[], &format!("in {what}"));
            let kind = self
                .required(d, "kind", &what, k.span(), "kind = \"gpu\"")
                .and_then(|v| self.string(v, &format!("`kind` of {what}")));
            let ids = d
                .get("ids")
                .and_then(|v| self.load_strings(v, &format!("`ids` of {what}")))
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

    pub(super) fn report(&mut self, v: &Val<'_>) -> ReportSettings {
        let Some(t) = self.table(v, "[report]") else {
            return ReportSettings::default();
        };
        self.keys(t, REPORT_KEYS, &[], "in [report]");
        let templates = t
            .get("templates")
            .and_then(|v| self.load_strings(v, "`templates` of [report]"))
            .map(|v| {
                v.into_iter()
                    .filter(|(name, span)| self.template_ok(name, span.clone()))
                    .map(|s| s.0)
                    .collect()
            })
            .unwrap_or_default();
        let cell_title = t
            .get("cell_title")
            .and_then(|v| self.load_string(v, "`cell_title` of [report]"));
        let noise = t.get("noise").and_then(|v| {
            let f = self.float(v, "`noise` of [report]")?;
            if (0.0..1.0).contains(&f) {
                Some(f)
            } else {
                self.err(
                    v.span(),
                    format!("`noise` of [report] must be a fraction from 0 to 1, found {f}"),
                    "e.g. noise = 0.05: a timing change counts beyond 5%",
                );
                None
            }
        });
        ReportSettings {
            templates,
            cell_title,
            noise,
        }
    }

    /// A report template is built in, or a file inside the plan's folder (its
    /// `templates/` included): a plan must not copy `/etc/shadow` into a record.
    pub(super) fn template_ok(&mut self, name: &str, span: Range<usize>) -> bool {
        if ["pr", "html", "summary", "json", "junit"].contains(&name) {
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
                "use `pr`, `html`, `summary`, `json`, `junit`, or a path relative to the plan, e.g. \"templates/pr.md.tera\"",
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
}

/// Every axis the plan declares, even one refused, so that its uses are not reported
/// again as unknown.
fn declared_axes(root: &DeTable<'_>, matrix: &Matrix, revisions: bool) -> Vec<String> {
    let mut axes: Vec<String> = matrix.axes.iter().map(|a| a.name.clone()).collect();
    if let Some(DeValue::Table(t)) = root.get("matrix").map(|v| v.get_ref()) {
        for k in t.keys() {
            let k = k.get_ref().to_string();
            if k != "exclude" && k != "include" && !axes.contains(&k) {
                axes.push(k);
            }
        }
    }
    if revisions && !axes.iter().any(|a| a == "revision") {
        axes.push("revision".into());
    }
    axes
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

/// A matrix value as TOML writes it (`"1"`, `1`, `1.0`), for telling apart values
/// that read alike.
fn toml_text(v: &ParamValue) -> String {
    match v {
        ParamValue::String(s) => format!("\"{s}\""),
        ParamValue::Float(x) => format!("{x:?}"),
        other => other.to_string(),
    }
}
