//! `[steps.ID]`: one step, with the keys it accepts; its checks are in `check.rs`.

use std::collections::{BTreeMap, HashSet};

use super::super::diag::did_you_mean;
use super::super::interp::Ctx;
use super::super::model::*;
use super::super::schema::Table;
use super::super::units;
use super::{StepSrc, Val, Walker};
use toml::de::DeTable;
use toml::Spanned;

/// Keys reserved for features not built yet: refused, never ignored.
pub(super) const RESERVED_STEP: &[&str] = &[];
impl<'s> Walker<'s> {
    pub(super) fn steps(&mut self, v: &Val<'_>, ctx: &Ctx<'_>) -> Vec<(Step, StepSrc)> {
        let Some(t) = self.table(v, "[steps]") else {
            return Vec::new();
        };
        if t.is_empty() {
            self.err(
                v.span(),
                "the plan has no steps".to_string(),
                "add a step, e.g. [steps.hello] with shell = \"echo hello\"",
            );
        }
        let mut out = Vec::with_capacity(t.len());
        for (k, v) in t.iter() {
            if let Some(s) = self.step(k, v, ctx) {
                out.push(s);
            }
        }
        out
    }

    pub(super) fn step(
        &mut self,
        k: &Spanned<std::borrow::Cow<'_, str>>,
        v: &Val<'_>,
        ctx: &Ctx<'_>,
    ) -> Option<(Step, StepSrc)> {
        let id: &str = k.get_ref();
        let what = format!("in step `{id}`");
        if !valid_step_id(id) {
            self.err(
                k.span(),
                format!("`{id}` is not a valid step id"),
                "use letters, digits, `_`, `.` and `-`, starting with a letter, digit or `_`",
            );
        }
        let t = self.table(v, &format!("step `{id}`"))?;
        self.keys(t, Table::Step, RESERVED_STEP, &what);
        let mut src = StepSrc {
            key_span: k.span(),
            ..StepSrc::default()
        };
        let of = |key: &str| format!("`{key}` of step `{id}`");
        let kind = self.step_kind(t, id);
        if let Some(n) = t.get("needs").and_then(|v| self.strings(v, &of("needs"))) {
            src.needs = n;
        }
        if let Some(n) = t
            .get("devices")
            .and_then(|v| self.strings(v, &of("devices")))
        {
            src.devices = n;
        }
        let mut refs = Vec::new();
        let command = self.step_command(t, id, k.span(), kind, ctx, &mut refs);
        let env = self.step_env(t, id, ctx, &mut refs);
        let cwd = t
            .get("cwd")
            .and_then(|v| self.template(v, &of("cwd"), ctx, true, &mut refs));
        let (repeats, warmup) = self.step_counts(t, id);
        let timeout = t
            .get("timeout")
            .and_then(|v| self.duration(v, &of("timeout")));
        let memory = t.get("memory").and_then(|v| self.size(v, &of("memory")));
        let pids = t.get("pids").and_then(|v| {
            self.bounded(v, &of("pids"), 1, units::MAX_PIDS)
                .map(|n| n as u64)
        });
        let outputs = self.step_paths(t, "outputs", id, ctx, &mut refs);
        let inputs = self.step_paths(t, "inputs", id, ctx, &mut refs);
        let checks = self.step_checks(t, id, k.span(), kind, ctx, &mut refs);
        let report = t
            .get("report")
            .map(|v| self.step_report(v, &of("report")))
            .unwrap_or_default();
        let matrix = t.get("matrix").and_then(|v| {
            src.matrix_span = Some(v.span());
            self.strings(v, &of("matrix"))
                .map(|names| names.into_iter().map(|(n, _)| n).collect())
        });
        let (retries, retry_on) = self.step_retries(t, id);
        let revisions = self.step_revisions(t, id, ctx, &mut src);
        let (results, gate) = self.step_results(t, id, kind, ctx, &mut refs);
        if gate == GateMode::New {
            src.gate_span = t.get("gate").map(|v| v.span());
        }
        let (cache, cache_memory, cache_env, cache_link) = self.step_cache(t, id, kind);
        let exclusive = self.step_exclusive(t, id, kind);
        let backend = t
            .get("backend")
            .and_then(|v| self.backend_kind(v, &of("backend")));
        let slurm = t
            .get("slurm")
            .map(|v| self.step_slurm(v, &format!("[steps.{id}.slurm]")))
            .unwrap_or_default();
        src.refs = refs;
        // A step with errors still joins the graph checks, so a cycle or a bad
        // reference is reported in the same run.
        let step = Step {
            id: StepId(id.to_string()),
            kind,
            needs: src.needs.iter().map(|n| StepId(n.0.clone())).collect(),
            devices: src.devices.iter().map(|d| d.0.clone()).collect(),
            command,
            env,
            cwd,
            repeats,
            warmup,
            timeout,
            memory,
            pids,
            outputs,
            inputs,
            checks,
            report,
            matrix,
            cell: None,
            retries,
            retry_on,
            revisions,
            results,
            gate,
            cache,
            cache_memory,
            cache_env,
            cache_link,
            backend,
            slurm,
            exclusive,
        };
        Some((step, src))
    }

    /// A list of path templates (`outputs`, `inputs`); none when absent.
    fn step_paths(
        &mut self,
        t: &DeTable<'_>,
        key: &str,
        id: &str,
        ctx: &Ctx<'_>,
        refs: &mut Vec<(StepId, std::ops::Range<usize>)>,
    ) -> Vec<Template> {
        t.get(key)
            .and_then(|v| self.templates(v, &format!("`{key}` of step `{id}`"), ctx, refs))
            .unwrap_or_default()
    }

    /// `repeats` (default 1) and `warmup` (default 0).
    fn step_counts(&mut self, t: &DeTable<'_>, id: &str) -> (u32, u32) {
        let of = |key: &str| format!("`{key}` of step `{id}`");
        let repeats = match t.get("repeats") {
            None => 1,
            Some(v) => self
                .bounded(v, &of("repeats"), 1, 100_000)
                .map_or(1, |n| n as u32),
        };
        let warmup = match t.get("warmup") {
            None => 0,
            Some(v) => self
                .bounded(v, &of("warmup"), 0, 100_000)
                .map_or(0, |n| n as u32),
        };
        (repeats, warmup)
    }

    /// `exclusive`: whether the step's attempts run alone on the host (`None`: the
    /// default, alone when they are measurements). A compare step runs no attempt.
    fn step_exclusive(&mut self, t: &DeTable<'_>, id: &str, kind: StepKind) -> Option<bool> {
        let (k, v) = t.get_key_value("exclusive")?;
        let b = self.boolean(v, &format!("`exclusive` of step `{id}`"))?;
        if kind == StepKind::Compare {
            self.err(
                k.span(),
                format!("compare step `{id}` runs no attempt to run alone"),
                "set `exclusive` on the steps whose attempts are measured",
            );
        }
        Some(b)
    }

    /// `revisions`: the plan's revisions the step runs on (the plan must have some).
    fn step_revisions(
        &mut self,
        t: &DeTable<'_>,
        id: &str,
        ctx: &Ctx<'_>,
        src: &mut StepSrc,
    ) -> Option<Vec<String>> {
        let v = t.get("revisions")?;
        src.revisions_span = Some(v.span());
        if !ctx.revisions {
            self.err(
                v.span(),
                format!("step `{id}` names revisions but the plan has no [revisions]"),
                "declare them, e.g. [revisions] baseline = { repo = \"..\", commit = \"HEAD~1\" }",
            );
        }
        self.strings(v, &format!("`revisions` of step `{id}`"))
            .map(|names| names.into_iter().map(|(n, _)| n).collect())
    }

    /// `kind`: what the step is (default `command`).
    fn step_kind(&mut self, t: &DeTable<'_>, id: &str) -> StepKind {
        let of = |key: &str| format!("`{key}` of step `{id}`");
        match t.get("kind") {
            None => StepKind::Command,
            Some(v) => match self.string(v, &of("kind")).as_deref() {
                Some("compile") => StepKind::Compile,
                Some("prefill") => StepKind::Prefill,
                Some("handoff") => StepKind::Handoff,
                Some("compare") => StepKind::Compare,
                Some("command") => StepKind::Command,
                Some(other) => {
                    let kinds = ["compile", "prefill", "handoff", "compare", "command"];
                    self.err(
                        v.span(),
                        format!("unknown step kind `{other}`"),
                        format!(
                            "use one of compile, prefill, handoff, compare, command; {}",
                            did_you_mean(other, &kinds)
                        ),
                    );
                    StepKind::Command
                }
                None => StepKind::Command,
            },
        }
    }

    /// `run` or `shell`: what the step executes (a compare step has neither).
    fn step_command(
        &mut self,
        t: &DeTable<'_>,
        id: &str,
        key_span: std::ops::Range<usize>,
        kind: StepKind,
        ctx: &Ctx<'_>,
        refs: &mut Vec<(StepId, std::ops::Range<usize>)>,
    ) -> Option<StepCommand> {
        let of = |key: &str| format!("`{key}` of step `{id}`");
        let command = match (t.get("run"), t.get("shell")) {
            (Some(r), Some(_)) => {
                self.err(
                    r.span(),
                    format!("step `{id}` has both `run` and `shell`"),
                    "keep one: `run` is an argv array run directly, `shell` a string for /bin/sh -c",
                );
                None
            }
            (Some(r), None) => match self.templates(r, &of("run"), ctx, refs) {
                Some(argv) if argv.is_empty() => {
                    self.err(
                        r.span(),
                        format!("`run` of step `{id}` is empty"),
                        "name a program, e.g. run = [\"python3\", \"x.py\"]",
                    );
                    None
                }
                Some(argv) => Some(StepCommand::Argv(argv)),
                None => None,
            },
            (None, Some(s)) => self
                .template(s, &of("shell"), ctx, true, refs)
                .map(StepCommand::Shell),
            (None, None) => None,
        };
        if kind == StepKind::Compare {
            if let Some(v) = t.get("run").or(t.get("shell")) {
                self.err(
                    v.span(),
                    format!("compare step `{id}` cannot have a command"),
                    "compare steps are built in: remove `run`/`shell`, or use another kind",
                );
            }
        } else if command.is_none() && t.get("run").is_none() && t.get("shell").is_none() {
            self.err(
                key_span,
                format!("step `{id}` has no command"),
                "add `run = [\"prog\", \"arg\"]` or `shell = \"...\"`",
            );
        }
        command
    }

    /// `env`: variables the step sets, as templates.
    fn step_env(
        &mut self,
        t: &DeTable<'_>,
        id: &str,
        ctx: &Ctx<'_>,
        refs: &mut Vec<(StepId, std::ops::Range<usize>)>,
    ) -> BTreeMap<String, Template> {
        let of = |key: &str| format!("`{key}` of step `{id}`");
        let mut env = BTreeMap::new();
        if let Some(v) = t.get("env") {
            if let Some(e) = self.table(v, &of("env")) {
                for (ek, ev) in e.iter() {
                    let name: &str = ek.get_ref();
                    if name.is_empty() || name.contains('=') || name.contains('\0') {
                        self.err(
                            ek.span(),
                            format!("`{name}` is not an environment variable name"),
                            "use letters, digits and `_`",
                        );
                        continue;
                    }
                    let what = format!("env `{name}` of step `{id}`");
                    if let Some(t) = self.template(ev, &what, ctx, true, refs) {
                        env.insert(name.to_string(), t);
                    }
                }
            }
        }
        env
    }

    /// `checks`: a compare step's, and only a compare step's, each named once.
    fn step_checks(
        &mut self,
        t: &DeTable<'_>,
        id: &str,
        key_span: std::ops::Range<usize>,
        kind: StepKind,
        ctx: &Ctx<'_>,
        refs: &mut Vec<(StepId, std::ops::Range<usize>)>,
    ) -> Vec<Check> {
        let of = |key: &str| format!("`{key}` of step `{id}`");
        let mut checks = Vec::new();
        match (t.get("checks"), kind) {
            (Some(v), StepKind::Compare) => {
                if let Some(items) = self.array(v, &of("checks")) {
                    if items.is_empty() {
                        self.err(
                            v.span(),
                            format!("compare step `{id}` has no checks"),
                            "add checks = [{ name = \"...\", metric = \"bit_exact\", ... }]",
                        );
                    }
                    let mut names = HashSet::new();
                    for item in items {
                        if let Some(c) = self.check(item, id, ctx, refs) {
                            if !names.insert(c.name.clone()) {
                                self.err(
                                    item.span(),
                                    format!("two checks of step `{id}` are named `{}`", c.name),
                                    "give each check its own name",
                                );
                            }
                            checks.push(c);
                        }
                    }
                }
            }
            (Some(v), _) => {
                self.err(
                    v.span(),
                    format!("step `{id}` has `checks` but is not a compare step"),
                    "set `kind = \"compare\"` and drop its command, or move the checks to a compare step",
                );
            }
            (None, StepKind::Compare) => {
                self.err(
                    key_span,
                    format!("compare step `{id}` has no checks"),
                    "add checks = [{ name = \"...\", metric = \"bit_exact\", ... }]",
                );
            }
            (None, _) => {}
        }
        checks
    }

    /// `retries` and `retry_on`.
    fn step_retries(&mut self, t: &DeTable<'_>, id: &str) -> (u32, Vec<RetryOn>) {
        let of = |key: &str| format!("`{key}` of step `{id}`");
        let retries = t
            .get("retries")
            .and_then(|v| self.bounded(v, &of("retries"), 0, 100))
            .unwrap_or(0) as u32;
        let retry_on = t
            .get("retry_on")
            .and_then(|v| self.strings(v, &of("retry_on")))
            .map(|items| {
                items
                    .into_iter()
                    .filter_map(|(s, span)| match parse_retry_on(&s) {
                        Some(r) => Some(r),
                        None => {
                            self.err(
                                span,
                                format!("`{s}` is not a failure `retry_on` knows"),
                                "use exit, exit:CODE, signal, oom, timeout, not_started or outputs",
                            );
                            None
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        if t.get("retry_on").is_some() && retries == 0 {
            if let Some(v) = t.get("retry_on") {
                self.err(
                    v.span(),
                    format!("step `{id}` says what to retry but `retries` is 0"),
                    "set `retries = N`, or drop `retry_on`",
                );
            }
        }
        (retries, retry_on)
    }

    /// A results file named relative to the plan's folder (a step without `cwd`
    /// runs there), where results files are never read: said now, not found as
    /// "0 tests" after the run.
    fn results_outside(&mut self, v: &Val<'_>, key: &str, id: &str) {
        let Some(s) = v.get_ref().as_str() else {
            return;
        };
        if s.starts_with('/') || s.starts_with("${") {
            return;
        }
        self.err(
            v.span(),
            format!(
                "`{key}` file `{s}` of step `{id}` would be read from the plan's folder (the step has no `cwd`), where results files are not read"
            ),
            format!(
                "results are read only inside the run's work folder or a revision's checkout: write it to `${{out}}/{s}`, or set the step's `cwd`"
            ),
        );
    }

    /// `results` (JUnit, SARIF) and `gate` (`new` needs results).
    fn step_results(
        &mut self,
        t: &DeTable<'_>,
        id: &str,
        kind: StepKind,
        ctx: &Ctx<'_>,
        refs: &mut Vec<(StepId, std::ops::Range<usize>)>,
    ) -> (StepResults, GateMode) {
        let of = |key: &str| format!("`{key}` of step `{id}`");
        let results = match t.get("results") {
            None => StepResults::default(),
            Some(v) => {
                let what = of("results");
                match self.table(v, &what) {
                    None => StepResults::default(),
                    Some(r) => {
                        self.keys(r, Table::Results, &[], &format!("in {what}"));
                        let in_plan_dir = t.get("cwd").is_none();
                        let mut one = |w: &mut Self, key: &str| {
                            let v = r.get(key)?;
                            if in_plan_dir {
                                w.results_outside(v, key, id);
                            }
                            w.template(v, &format!("`{key}` of {what}"), ctx, true, refs)
                        };
                        StepResults {
                            junit: one(self, "junit"),
                            sarif: one(self, "sarif"),
                        }
                    }
                }
            }
        };
        if kind == StepKind::Compare && !results.is_empty() {
            if let Some((k, _)) = t.get_key_value("results") {
                self.err(
                    k.span(),
                    format!("compare step `{id}` has no command to write results"),
                    "put `results` on the step that runs the tests or the scan",
                );
            }
        }
        let gate = match t.get("gate") {
            None => GateMode::All,
            Some(v) => match self.string(v, &of("gate")).as_deref() {
                Some("all") => GateMode::All,
                Some("new") => {
                    if results.is_empty() {
                        self.err(
                            v.span(),
                            format!("step `{id}` gates on new failures but declares no `results`"),
                            "add results = { junit = \"${out}/junit.xml\" } (or sarif)",
                        );
                    }
                    GateMode::New
                }
                Some(other) => {
                    self.err(
                        v.span(),
                        format!(
                            "`gate` of step `{id}` must be \"all\" or \"new\", found `{other}`"
                        ),
                        "\"new\": only failures new against the baseline fail the run",
                    );
                    GateMode::All
                }
                None => GateMode::All,
            },
        };
        (results, gate)
    }

    /// `cache`, `cache_key` and `cache_restore`.
    fn step_cache(
        &mut self,
        t: &DeTable<'_>,
        id: &str,
        kind: StepKind,
    ) -> (bool, bool, Vec<String>, bool) {
        let of = |key: &str| format!("`{key}` of step `{id}`");
        let cache = t
            .get("cache")
            .and_then(|v| self.boolean(v, &of("cache")))
            .unwrap_or(false);
        if cache && kind == StepKind::Compare {
            if let Some((k, _)) = t.get_key_value("cache") {
                self.err(
                    k.span(),
                    format!("compare step `{id}` cannot be cached: its checks always run"),
                    "cache the steps that produce what it compares",
                );
            }
        }
        let mut cache_env = Vec::new();
        let cache_memory = match t.get("cache_key") {
            None => false,
            Some(v) => {
                let items = self.strings(v, &of("cache_key")).unwrap_or_default();
                let mut memory = false;
                for (s, span) in items {
                    if s == "memory" {
                        memory = true;
                    } else if let Some(name) = s.strip_prefix("env.").filter(|n| env_name(n)) {
                        if !cache_env.iter().any(|n| n == name) {
                            cache_env.push(name.to_string());
                        }
                    } else {
                        self.err(
                            span,
                            format!("`{s}` is not something a cache key can add"),
                            "cache_key = [\"memory\"] adds the memory limit to the key, \
                             [\"env.NAME\"] an environment variable (PATH, TERM, …)",
                        );
                    }
                }
                memory
            }
        };
        let cache_link = match t.get("cache_restore") {
            None => false,
            Some(v) => match self.string(v, &of("cache_restore")).as_deref() {
                Some("copy") => false,
                Some("link") => true,
                Some(other) => {
                    self.err(
                        v.span(),
                        format!(
                            "`cache_restore` of step `{id}` must be \"copy\" or \"link\", found `{other}`"
                        ),
                        "\"copy\" (default): a reflink where the filesystem has them, else a copy; \"link\": hard links to the cache, for outputs nothing writes",
                    );
                    false
                }
                None => false,
            },
        };
        (cache, cache_memory, cache_env, cache_link)
    }

    /// `[steps.X.report]`: how reports state the step.
    pub(super) fn step_report(&mut self, v: &Val<'_>, what: &str) -> StepReport {
        let Some(t) = self.table(v, what) else {
            return StepReport::default();
        };
        self.keys(t, Table::StepReport, &[], &format!("in {what}"));
        let metric = t
            .get("metric")
            .and_then(|v| self.string(v, &format!("`metric` of {what}")));
        let dispersion = t.get("dispersion").and_then(|v| {
            let x = self.float(v, &format!("`dispersion` of {what}"))?;
            if (0.0..=10.0).contains(&x) {
                Some(x)
            } else {
                self.err(
                    v.span(),
                    format!("`dispersion` of {what} must be a fraction from 0 to 10, found {x}"),
                    "write e.g. 0.05 for 5% of the median",
                );
                None
            }
        });
        let better = t.get("better").and_then(|v| {
            let b = self.string(v, &format!("`better` of {what}"))?;
            match b.as_str() {
                "lower" => Some(Better::Lower),
                "higher" => Some(Better::Higher),
                other => {
                    self.err(
                        v.span(),
                        format!(
                            "`better` of {what} must be \"lower\" or \"higher\", found `{other}`"
                        ),
                        "\"lower\" for times and sizes (the default), \"higher\" for throughput",
                    );
                    None
                }
            }
        });
        let threshold = t
            .get("threshold")
            .and_then(|v| self.fraction(v, &format!("`threshold` of {what}")));
        StepReport {
            metric,
            dispersion,
            better,
            threshold,
        }
    }

    /// A fraction in [0, 1): a number (0.05) or a percentage string ("5%").
    fn fraction(&mut self, v: &Val<'_>, what: &str) -> Option<f64> {
        let x = match v.get_ref() {
            toml::de::DeValue::String(s) => {
                let Some(x) = crate::units::fraction(s) else {
                    self.err(
                        v.span(),
                        format!("{what} must be a fraction or a percentage, found `{s}`"),
                        "write e.g. \"5%\" or 0.05",
                    );
                    return None;
                };
                x
            }
            _ => self.float(v, what)?,
        };
        if (0.0..1.0).contains(&x) {
            Some(x)
        } else {
            self.err(
                v.span(),
                format!("{what} must be from 0 to 100%, found {x}"),
                "write e.g. \"5%\" or 0.05",
            );
            None
        }
    }
}

/// `exit:75`, `exit`, `signal`, `oom`, `timeout`, `not_started`, `outputs`.
fn parse_retry_on(s: &str) -> Option<RetryOn> {
    Some(match s {
        "exit" => RetryOn::AnyExit,
        "signal" => RetryOn::Signal,
        "oom" => RetryOn::Oom,
        "timeout" => RetryOn::Timeout,
        "not_started" => RetryOn::NotStarted,
        "outputs" => RetryOn::Outputs,
        // Exit 0 is success; codes above 255 cannot be seen.
        other => RetryOn::Exit(
            other
                .strip_prefix("exit:")?
                .parse()
                .ok()
                .filter(|c| (1..=255).contains(c))?,
        ),
    })
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]*`
pub(crate) fn valid_step_id(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// An environment variable's name as `cache_key = ["env.NAME"]` may give it.
fn env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
