//! `[cache]`: the store a team shares and the keys whose entries are reused.

use std::path::PathBuf;

use super::super::model::CacheSettings;
use super::super::schema::Table;
use super::{Val, Walker};

impl<'s> Walker<'s> {
    /// `[cache]`.
    pub(super) fn cache(&mut self, v: &Val<'_>) -> CacheSettings {
        let Some(t) = self.table(v, "[cache]") else {
            return CacheSettings::default();
        };
        self.keys(t, Table::Cache, &[], "in [cache]");
        let remote = t.get("remote").and_then(|v| self.remote(v));
        let mut trust = Vec::new();
        let listed = t
            .get("trust")
            .and_then(|v| self.load_strings(v, "`trust` of [cache]"))
            .unwrap_or_default();
        for (s, span) in listed {
            let p = PathBuf::from(&self.plan_dir).join(&s);
            if p.is_file() {
                trust.push(p);
            } else {
                self.err(
                    span,
                    format!("trusted key `{s}` is not a file"),
                    "a public key (SPKI PEM) relative to the plan's folder, e.g. \"keys/ci.pub\"",
                );
            }
        }
        CacheSettings { remote, trust }
    }

    fn remote(&mut self, v: &Val<'_>) -> Option<String> {
        let s = self.load_string(v, "`remote` of [cache]")?;
        match crate::plan::remote::check(&s) {
            Ok(()) => Some(s),
            Err(why) => {
                self.err(
                    v.span(),
                    format!("`remote` of [cache]: {why}"),
                    "a shared folder such as \"/shared/orchestrate-cache\" (or a file:// URL), \
                     or a bucket such as \"s3://team-cache/orchestrate\"",
                );
                None
            }
        }
    }
}
