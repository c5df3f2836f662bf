//! `[backend]` and `[steps.X.slurm]`: where steps run and what Slurm jobs ask for.

use std::collections::BTreeMap;

use super::super::model::{BackendKind, BackendSettings, SlurmOptions};
use super::super::schema::Table;
use super::{Val, Walker};

impl<'s> Walker<'s> {
    /// `kind = "local" | "slurm"` (a `[backend]` kind or a step's `backend`).
    pub(super) fn backend_kind(&mut self, v: &Val<'_>, what: &str) -> Option<BackendKind> {
        match self.string(v, what)?.as_str() {
            "local" => Some(BackendKind::Local),
            "slurm" => Some(BackendKind::Slurm),
            other => {
                self.err(
                    v.span(),
                    format!("{what} must be \"local\" or \"slurm\", found `{other}`"),
                    "local runs on this host; slurm submits each attempt with sbatch",
                );
                None
            }
        }
    }

    /// A Slurm option value that `sbatch` takes as one argument: no newline, not an
    /// option of its own.
    fn slurm_text(&mut self, v: &Val<'_>, what: &str) -> Option<String> {
        let s = self.load_string(v, what)?;
        if s.trim().is_empty() || s.starts_with('-') || s.contains(char::is_control) {
            self.err(
                v.span(),
                format!("{what} `{s}` is not a value sbatch takes"),
                "a plain value such as \"debug\" or \"1:00:00\"",
            );
            return None;
        }
        Some(s)
    }

    /// The options `[backend]` and `[steps.X.slurm]` share; `gres` is a step's own
    /// (`[backend] gres` names each device kind's GRES instead).
    fn slurm_options(&mut self, t: &toml::de::DeTable<'_>, what: &str, step: bool) -> SlurmOptions {
        let text = |w: &mut Self, key: &str| {
            t.get(key)
                .and_then(|v| w.slurm_text(v, &format!("`{key}` of {what}")))
        };
        let count = |w: &mut Self, key: &str| {
            t.get(key)
                .and_then(|v| w.bounded(v, &format!("`{key}` of {what}"), 1, 100_000))
                .map(|n| n as u32)
        };
        SlurmOptions {
            partition: text(self, "partition"),
            account: text(self, "account"),
            qos: text(self, "qos"),
            constraint: text(self, "constraint"),
            time: text(self, "time"),
            nodes: count(self, "nodes"),
            cpus: count(self, "cpus"),
            gres: if step { text(self, "gres") } else { None },
            queue_timeout: t
                .get("queue_timeout")
                .and_then(|v| self.duration(v, &format!("`queue_timeout` of {what}"))),
        }
    }

    /// `[backend]`.
    pub(super) fn backend(&mut self, v: &Val<'_>) -> BackendSettings {
        let Some(t) = self.table(v, "[backend]") else {
            return BackendSettings::default();
        };
        self.keys(t, Table::Backend, &[], "in [backend]");
        let kind = t
            .get("kind")
            .and_then(|v| self.backend_kind(v, "`kind` of [backend]"))
            .unwrap_or_default();
        let slurm = self.slurm_options(t, "[backend]", false);
        let mut sbatch_args = Vec::new();
        for (s, span) in t
            .get("sbatch_args")
            .and_then(|v| self.load_strings(v, "`sbatch_args` of [backend]"))
            .unwrap_or_default()
        {
            // Each is one argument of sbatch's command line: a newline or another
            // control character there could become a line of the job script.
            if s.contains(char::is_control) {
                self.err(
                    span,
                    format!("`sbatch_args` entry {s:?} holds a control character"),
                    "give each option as one plain string, e.g. \"--exclusive\"",
                );
            } else {
                sbatch_args.push(s);
            }
        }
        let mut gres = BTreeMap::new();
        if let Some(g) = t.get("gres") {
            if let Some(table) = self.table(g, "`gres` of [backend]") {
                for (k, v) in table.iter() {
                    let what = format!("`gres.{}` of [backend]", k.get_ref());
                    if let Some(name) = self.slurm_text(v, &what) {
                        gres.insert(k.get_ref().to_string(), name);
                    }
                }
            }
        }
        let array_parallelism = t
            .get("array_parallelism")
            .and_then(|v| self.bounded(v, "`array_parallelism` of [backend]", 1, 1_000_000))
            .map(|n| n as u32);
        BackendSettings {
            kind,
            slurm,
            sbatch_args,
            gres,
            array_parallelism,
        }
    }

    /// `[steps.X.slurm]`.
    pub(super) fn step_slurm(&mut self, v: &Val<'_>, what: &str) -> SlurmOptions {
        let Some(t) = self.table(v, what) else {
            return SlurmOptions::default();
        };
        self.keys(t, Table::StepSlurm, &[], &format!("in {what}"));
        self.slurm_options(t, what, true)
    }
}
