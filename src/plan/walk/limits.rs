//! `[params]` and `[limits]` of a plan.

use std::collections::BTreeMap;

use toml::de::DeValue;

use super::super::diag::did_you_mean;
use super::super::model::*;
use super::super::schema::Table;
use super::super::units;
use super::{Val, Walker};

impl Walker<'_> {
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
        self.keys(t, Table::Limits, &[], "in [limits]");
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
