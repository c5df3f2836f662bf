//! The top level of a plan: the document itself, `[params]`, `[limits]`, `[devices]`
//! and `[report]`, each with the keys it accepts.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::de::{DeTable, DeValue};

use super::super::diag::did_you_mean;
use super::super::interp::Ctx;
use super::super::model::*;
use super::super::units;
use super::{Val, Walked, Walker};

/// Keys reserved for features not built yet: refused, never ignored.
pub(super) const RESERVED_TOP: &[&str] = &["backend", "slurm", "include"];

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
];
pub(super) const LIMIT_KEYS: &[&str] = &[
    "host_memory",
    "swap",
    "pids",
    "cpus",
    "timeout",
    "run_timeout",
    "grace",
    "isolation",
];

pub(super) const DEVICE_KEYS: &[&str] = &["kind", "count", "cores", "ids", "simulate"];
pub(super) const REPORT_KEYS: &[&str] = &["templates"];

impl<'s> Walker<'s> {
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

    pub(super) fn report(&mut self, v: &Val<'_>) -> ReportSettings {
        let Some(t) = self.table(v, "[report]") else {
            return ReportSettings::default();
        };
        self.keys(t, REPORT_KEYS, &[], "in [report]");
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
    pub(super) fn template_ok(&mut self, name: &str, span: Range<usize>) -> bool {
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
