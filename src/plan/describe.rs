//! `orchestrate check` output: plain, stable text (no colors, no timestamps).

use std::fmt::Write;

use super::model::{Limits, Plan, Step, StepCommand, Template};
use super::units::{format_duration, format_size};

pub(crate) fn describe(plan: &Plan) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "plan: {}", plan.name);
    if let Some(d) = &plan.description {
        let _ = writeln!(o, "description: {}", d.trim());
    }
    let _ = writeln!(o, "file: {}", plan.path.display());
    let l = &plan.limits;
    let _ = writeln!(o, "limits: {}", limits(l).join(" "));
    devices(&mut o, plan);
    if plan.allow_simulated {
        let _ = writeln!(o, "allow_simulated: true");
    }
    if !plan.matrix.is_empty() {
        matrix(&mut o, plan);
    }
    if !plan.revisions.is_empty() {
        revisions(&mut o, plan);
    }
    let _ = writeln!(o, "steps ({}, in dependency order):", plan.steps.len());
    for s in &plan.steps {
        step(&mut o, s, l);
    }
    o
}

/// The plan's limits as `key=value` words, only those set besides isolation and swap,
/// which always have a value.
fn limits(l: &Limits) -> Vec<String> {
    let mut limits = vec![format!("isolation={}", l.isolation)];
    if let Some(m) = l.host_memory {
        limits.push(format!("host_memory={}", format_size(m)));
    }
    limits.push(format!("swap={}", if l.swap { "on" } else { "off" }));
    if let Some(p) = l.pids {
        limits.push(format!("pids={p}"));
    }
    if let Some(c) = &l.cpus {
        limits.push(format!("cpus={c}"));
    }
    if let Some(p) = &l.cgroup_parent {
        limits.push(format!("cgroup_parent=/{}", p.display()));
    }
    for (k, v) in [
        ("timeout", l.timeout),
        ("run_timeout", l.run_timeout),
        ("grace", l.grace),
    ] {
        if let Some(d) = v {
            limits.push(format!("{k}={}", format_duration(d)));
        }
    }
    limits
}

/// The device requests, one a line, or `none` so that their absence is stated.
fn devices(o: &mut String, plan: &Plan) {
    if plan.devices.is_empty() {
        let _ = writeln!(o, "devices: none");
    } else {
        let _ = writeln!(o, "devices:");
        for (name, d) in &plan.devices {
            let _ = write!(o, "  {name}: kind={} count={}", d.kind, d.count);
            if let Some(c) = d.cores {
                let _ = write!(o, " cores={c}");
            }
            if !d.ids.is_empty() {
                let _ = write!(o, " ids={}", d.ids.join(","));
            }
            if d.simulate {
                let _ = write!(o, " simulate");
            }
            o.push('\n');
        }
    }
}

/// The matrix's axes and cell count, with the `--only` filters when they narrowed it.
fn matrix(o: &mut String, plan: &Plan) {
    let axes: Vec<String> = plan
        .matrix
        .axes
        .iter()
        .map(|a| {
            let v: Vec<String> = a.values.iter().map(super::matrix::value_text).collect();
            format!("{} = [{}]", a.name, v.join(", "))
        })
        .collect();
    let n = plan.matrix.cells.len();
    let cells = if n < plan.matrix.declared {
        let only: Vec<String> = plan
            .matrix
            .only
            .iter()
            .map(|(a, v)| format!("--only {a}={v}"))
            .collect();
        format!("{n} of {} cells ({})", plan.matrix.declared, only.join(" "))
    } else {
        format!("{n} cell{}", if n == 1 { "" } else { "s" })
    };
    let _ = writeln!(o, "matrix: {}; {cells}", axes.join("; "));
}

/// The revisions compared, which is the baseline, and where each runs.
fn revisions(o: &mut String, plan: &Plan) {
    let base = plan
        .revisions
        .iter()
        .find(|r| r.name == "baseline")
        .or(plan.revisions.first())
        .map(|r| r.name.as_str())
        .unwrap_or_default();
    let _ = writeln!(o, "revisions (of {}):", plan.revisions[0].repo.display());
    for r in &plan.revisions {
        let how = match r.worktree {
            None => "a clean checkout under the work folder",
            Some(super::model::WorkTree::Allow) => "the working tree as it is",
            Some(super::model::WorkTree::Refuse) => "the working tree, refused when dirty",
        };
        let role = if r.name == base { " (baseline)" } else { "" };
        let _ = writeln!(o, "  {}{role}: {}; {how}", r.name, r.commit);
    }
}

/// One step: its settings, with the plan's limits where the step sets none (marked so).
fn step(o: &mut String, s: &Step, l: &Limits) {
    let _ = writeln!(o, "  {} [{}]", s.id, s.kind);
    let list = |v: Vec<String>| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    };
    let _ = writeln!(
        o,
        "    needs: {}",
        list(s.needs.iter().map(|n| n.to_string()).collect())
    );
    if !s.devices.is_empty() {
        let _ = writeln!(o, "    devices: {}", s.devices.join(", "));
    }
    if s.retries > 0 {
        let _ = writeln!(o, "    retries: {}", s.retries);
    }
    for (what, t) in [("junit", &s.results.junit), ("sarif", &s.results.sarif)] {
        if let Some(t) = t {
            let _ = writeln!(o, "    results ({what}): {}", t.raw);
        }
    }
    if s.gate == super::model::GateMode::New {
        let _ = writeln!(o, "    gate: new failures only");
    }
    let _ = writeln!(o, "    repeats: {}, warmup: {}", s.repeats, s.warmup);
    let timeout = match (s.timeout, l.timeout) {
        (Some(t), _) => format_duration(t),
        (None, Some(t)) => format!("{} (plan)", format_duration(t)),
        (None, None) => "none".to_string(),
    };
    let memory = match (s.memory, l.host_memory) {
        (Some(m), _) => format_size(m),
        (None, Some(m)) => format!("{} (plan)", format_size(m)),
        (None, None) => "unlimited".to_string(),
    };
    let _ = writeln!(o, "    timeout: {timeout}, memory: {memory}");
    command(o, s);
    for c in &s.checks {
        let _ = writeln!(o, "    check: {} ({})", c.name, c.metric.as_str());
    }
}

/// A step's command as written: argv as JSON (quoting shown), a shell script indented
/// under its label.
fn command(o: &mut String, s: &Step) {
    match &s.command {
        Some(StepCommand::Argv(argv)) => {
            let raw: Vec<&str> = argv.iter().map(|t: &Template| t.raw.as_str()).collect();
            let _ = writeln!(
                o,
                "    run: {}",
                serde_json::to_string(&raw).unwrap_or_default()
            );
        }
        Some(StepCommand::Shell(t)) => {
            let shell = t.raw.trim().replace('\n', "\n           ");
            let _ = writeln!(o, "    shell: {shell}");
        }
        None => {}
    }
}
