//! The top level of a plan: the document itself and the keys each top-level
//! section accepts; each section's walker is a file of its own (`revisions.rs`,
//! `matrix.rs`, `limits.rs`, `devices.rs`, `report.rs`).

use toml::de::{DeTable, DeValue};

use super::super::interp::Ctx;
use super::super::model::*;
use super::super::schema::Table;
use super::{StepSrc, Walked, Walker};

/// The most cells a matrix may span.
pub(super) const MAX_CELLS: usize = 100_000;

/// Keys reserved for features not built yet: refused, never ignored.
pub(super) const RESERVED_TOP: &[&str] = &[];

impl<'s> Walker<'s> {
    /// Walk the whole document.
    pub(crate) fn document(&mut self, root: &DeTable<'_>) -> Option<Walked> {
        self.keys(root, Table::Top, RESERVED_TOP, "at the top level");
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
        let cache = root.get("cache").map(|v| self.cache(v)).unwrap_or_default();
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
            cache,
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
