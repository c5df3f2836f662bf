//! The diff's parameters: what each run was asked to do, as its record states it.

use super::{row, Row};
use crate::record::run::Record;
use crate::report::format::{bytes, duration_ms};

/// A value of one run, or `(absent)` when that run had no such parameter.
type Get<'a> = Box<dyn Fn(&Record) -> Option<String> + 'a>;

/// `--set` overrides, `--only`, each matrix axis, the run's options and limits,
/// each declared step's repeats: a row each, keyed by name across the runs.
pub(super) fn parameter_rows(runs: &[&Record]) -> Vec<Row> {
    let seen = |f: &dyn Fn(&Record) -> Vec<String>| {
        let mut keys: Vec<String> = Vec::new();
        for k in runs.iter().flat_map(|r| f(r)) {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys
    };
    let mut named: Vec<(String, Get)> = Vec::new();
    let sets = seen(&|r| {
        let o = &r.run.options.overrides;
        o.iter()
            .map(|o| o.split('=').next().unwrap_or(o).to_string())
            .collect()
    });
    for key in sets {
        let name = format!("--set {key}");
        let get: Get = Box::new(move |r: &Record| {
            r.run.options.overrides.iter().find_map(|o| {
                o.split_once('=')
                    .filter(|(name, _)| *name == key)
                    .map(|(_, v)| v.to_string())
            })
        });
        named.push((name, get));
    }
    named.extend(options());
    let axes = seen(&|r| {
        let m = r.run.plan.matrix.iter();
        m.flat_map(|m| m.axes.iter().map(|a| a.name.clone()))
            .collect()
    });
    for axis in axes {
        let name = format!("matrix {axis}");
        let get: Get = Box::new(move |r: &Record| {
            let m = r.run.plan.matrix.as_ref()?;
            let a = m.axes.iter().find(|a| a.name == axis)?;
            Some(a.values.join(", "))
        });
        named.push((name, get));
    }
    for step in seen(&|r| r.run.steps.iter().map(|s| s.id.clone()).collect()) {
        let name = format!("step {step}");
        let get: Get = Box::new(move |r: &Record| {
            let s = r.run.steps.iter().find(|s| s.id == step)?;
            Some(match s.warmup {
                0 => format!("{} repeats", s.repeats),
                w => format!("{} repeats (+{w} warm-up)", s.repeats),
            })
        });
        named.push((name, get));
    }
    named
        .iter()
        .map(|(name, get)| {
            let values = runs
                .iter()
                .map(|r| get(r).unwrap_or_else(|| "(absent)".into()))
                .collect();
            row(name, values)
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
