//! The diff's parameters: what each run was asked to do, as its record states it.

use super::{row, Row};
use crate::record::run::Record;
use crate::report::format::{bytes, duration_ms};

/// A value of one run, or `(absent)` when that run had no such parameter.
type Get<'a> = Box<dyn Fn(&Record) -> Option<String> + 'a>;

/// `--set` overrides, `--only`, the run's options and limits, each matrix axis,
/// each declared step's repeats: a row each, keyed by name across the runs.
pub(super) fn parameter_rows(runs: &[&Record]) -> Vec<Row> {
    // `--set` is checked to hold `=` before a run starts.
    let mut rows = keyed(runs, "--set ", |r| {
        let o = &r.run.options.overrides;
        o.iter()
            .filter_map(|o| o.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    });
    rows.extend(options().iter().map(|(name, get)| {
        let values = runs
            .iter()
            .map(|r| get(r).unwrap_or_else(|| "(absent)".into()))
            .collect();
        row(name, values)
    }));
    rows.extend(keyed(runs, "matrix ", |r| {
        let m = r.run.plan.matrix.iter();
        m.flat_map(|m| m.axes.iter().map(|a| (a.name.clone(), a.values.join(", "))))
            .collect()
    }));
    rows.extend(keyed(runs, "step ", |r| {
        let repeats = |s: &crate::record::run::DeclaredStep| match s.warmup {
            0 => format!("{} repeats", s.repeats),
            w => format!("{} repeats (+{w} warm-up)", s.repeats),
        };
        r.run
            .steps
            .iter()
            .map(|s| (s.id.clone(), repeats(s)))
            .collect()
    }));
    rows
}

/// A row per name any run has among its `(name, value)` pairs, `prefix` before it:
/// each run's value, or `(absent)`.
fn keyed(
    runs: &[&Record],
    prefix: &str,
    pairs: impl Fn(&Record) -> Vec<(String, String)>,
) -> Vec<Row> {
    let per_run: Vec<Vec<(String, String)>> = runs.iter().map(|r| pairs(r)).collect();
    let slices: Vec<&[(String, String)]> = per_run.iter().map(Vec::as_slice).collect();
    super::aligned(&slices, |(k, _)| k.clone())
        .into_iter()
        .map(|(k, found)| {
            let values = found
                .iter()
                .map(|p| p.map_or_else(|| "(absent)".into(), |(_, v)| v.clone()))
                .collect();
            row(&format!("{prefix}{k}"), values)
        })
        .collect()
}

fn or_dash(v: Option<String>) -> Option<String> {
    Some(v.unwrap_or_else(|| "-".into()))
}

fn ms(v: Option<u64>) -> Option<String> {
    or_dash(v.map(|x| duration_ms(x as f64)))
}

/// The run's options and plan-wide limits, always present.
fn options<'a>() -> Vec<(String, Get<'a>)> {
    let opt = or_dash;
    let list: Vec<(&str, Get<'a>)> = vec![
        (
            "--only",
            Box::new(move |r: &Record| {
                let o = &r.run.options.only;
                opt((!o.is_empty()).then(|| o.join(" ")))
            }),
        ),
        (
            "jobs",
            Box::new(|r: &Record| Some(r.run.options.jobs.to_string())),
        ),
        (
            "keep going",
            Box::new(|r: &Record| Some(r.run.options.keep_going.to_string())),
        ),
        (
            "isolation asked",
            Box::new(|r: &Record| Some(r.run.options.isolation.clone())),
        ),
        (
            "memory budget",
            Box::new(|r: &Record| Some(bytes(r.run.options.memory_budget_bytes as f64))),
        ),
        (
            "host memory limit",
            Box::new(move |r: &Record| {
                opt(r.run.plan.limits.host_memory_bytes.map(|b| bytes(b as f64)))
            }),
        ),
        (
            "step timeout",
            Box::new(move |r: &Record| ms(r.run.plan.limits.timeout_ms)),
        ),
        (
            "run timeout",
            Box::new(move |r: &Record| ms(r.run.options.run_timeout_ms)),
        ),
    ];
    list.into_iter().map(|(n, g)| (n.to_string(), g)).collect()
}
