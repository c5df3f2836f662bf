//! `[report]` of a plan: templates, cell titles and the noise threshold.

use std::ops::Range;

use super::super::model::*;
use super::super::schema::Table;
use super::{Val, Walker};

impl Walker<'_> {
    pub(super) fn report(&mut self, v: &Val<'_>) -> ReportSettings {
        let Some(t) = self.table(v, "[report]") else {
            return ReportSettings::default();
        };
        self.keys(t, Table::Report, &[], "in [report]");
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
