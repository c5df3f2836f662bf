//! The terminal summary of a record: drift first, then one row per step with its
//! status, attempts and min / median / max wall time over measured repeats, then the
//! checks and the release.

use super::attribution::Attribution;
use super::check_value::{self, Words};
use super::facts::short::{self, Style};
use crate::record::run::Record;

use crate::units::duration_ms as fmt_ms;

/// Render the plain-text summary (checks attributed from the record alone).
pub fn render(rec: &Record) -> String {
    render_with(rec, &Attribution::new(rec, None))
}

/// Render the plain-text summary, checks attributed by `attr`.
pub fn render_with(rec: &Record, attr: &Attribution) -> String {
    let mut out = String::new();
    drift(&mut out, rec);
    let unisolated = super::facts::not_enforced(rec);
    if let Some(why) = &unisolated {
        out.push_str(&format!("LIMITS NOT ENFORCED: {why}\n\n"));
    }
    step_table(&mut out, rec);
    cache(&mut out, rec);
    metrics(&mut out, rec);
    checks(&mut out, rec, attr);
    revisions(&mut out, rec);
    failures(&mut out, rec);
    devices_and_warnings(&mut out, rec, unisolated.as_deref());
    release(&mut out, rec);
    out.push_str(&format!("run {}: {}", rec.run_id, rec.status.as_str()));
    if let Some(w) = super::verdict::why(rec, Style::Plain) {
        out.push_str(&format!(" ({w})"));
    }
    out.push('\n');
    out
}

/// The exits that are not failures, in one line (failed steps say why beneath
/// their row, failed checks in `checks`).
fn failures(out: &mut String, rec: &Record) {
    if let Some(e) = super::verdict::explained(rec, Style::Plain) {
        out.push_str(&format!("\n{e}.\n"));
    }
}

/// The pins that drifted, first: the run went on past them, so they head the summary.
fn drift(out: &mut String, rec: &Record) {
    let drift = &rec.run.pins.drift;
    if !drift.is_empty() {
        out.push_str("DRIFT: these pins did not match and the run went on (--allow-drift):\n");
        let or_dash = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".into());
        for d in drift {
            out.push_str(&format!(
                "  {} {}: declared {}, observed {} ({})\n",
                d.kind.as_str(),
                d.name,
                or_dash(&d.declared),
                or_dash(&d.observed),
                d.status.as_str(),
            ));
        }
        out.push('\n');
    }
}

/// The step table; in compact view only failed and slowest steps get rows. Each
/// column is as wide as its widest cell, so long ids and statuses stay aligned.
fn step_table(out: &mut String, rec: &Record) {
    let w = rec
        .steps
        .iter()
        .map(|s| s.id.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let sw = rec
        .steps
        .iter()
        .map(|s| super::facts::status_text(rec, s).chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    out.push_str(&format!(
        "{:<w$}  {:<sw$} {:>8}  {:>10} {:>10} {:>10}\n",
        "step", "status", "attempts", "min", "median", "max"
    ));
    let compact = rec.steps.len() > super::facts::COMPACT_ABOVE;
    if compact {
        // A large plan: counts, then only the steps that did not succeed, then the
        // slowest few (`--progress plain` keeps one line per event).
        status_counts(out, rec);
    }
    let mut slowest: Vec<(f64, &str)> = rec
        .steps
        .iter()
        .filter_map(|s| s.wall_ms.map(|w| (w.median, s.id.as_str())))
        .collect();
    slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
    slowest.truncate(5);
    for s in &rec.steps {
        if compact && s.status.is_success() && !slowest.iter().any(|(_, id)| *id == s.id) {
            continue;
        }
        step_row(out, rec, s, (w, sw));
    }
}

/// A large plan's step counts by status: one line in place of rows nobody reads.
fn status_counts(out: &mut String, rec: &Record) {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for s in &rec.steps {
        match counts.iter_mut().find(|c| c.0 == s.status.as_str()) {
            Some(c) => c.1 += 1,
            None => counts.push((s.status.as_str(), 1)),
        }
    }
    let text: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    out.push_str(&format!("{} steps: {}\n", rec.steps.len(), text.join(", ")));
}

/// One step's row, `w` wide in its first two columns, and why it failed beneath it.
fn step_row(
    out: &mut String,
    rec: &Record,
    s: &crate::record::run::StepRecord,
    (w, sw): (usize, usize),
) {
    let (min, med, max) = match s.wall_ms {
        Some(st) => (fmt_ms(st.min), fmt_ms(st.median), fmt_ms(st.max)),
        None => ("-".into(), "-".into(), "-".into()),
    };
    let warm = s.attempts.iter().filter(|a| a.warmup).count();
    let attempts = if warm > 0 {
        format!("{}+{}w", s.attempts.len() - warm, warm)
    } else {
        s.attempts.len().to_string()
    };
    out.push_str(&format!(
        "{:<w$}  {:<sw$} {:>8}  {:>10} {:>10} {:>10}\n",
        s.id,
        super::facts::status_text(rec, s),
        attempts,
        min,
        med,
        max
    ));
    if super::facts::notable_status(rec, s) {
        if let Some(r) = &s.reason {
            out.push_str(&format!("{:<w$}    {r}\n", ""));
        }
    }
}

/// What the step cache did.
fn cache(out: &mut String, rec: &Record) {
    let cache = super::facts::cache_lines(rec, Style::Plain);
    if !cache.is_empty() {
        out.push_str("\nstep cache:\n");
        for l in &cache {
            out.push_str(&format!("  {l}\n"));
        }
    }
}

/// The parameters in one line, then each step's measured metrics in one line: as
/// the PR body, a metric the same in every repeat is a parameter, not a row.
fn metrics(out: &mut String, rec: &Record) {
    if let Some(p) = short::parameters(rec, Style::Plain) {
        out.push_str(&format!("\nparameters: {p}\n"));
    }
    let metrics: Vec<_> = super::metrics::step_metrics(rec)
        .into_iter()
        .filter(|m| !short::is_parameter(m))
        .collect();
    if metrics.is_empty() {
        return;
    }
    out.push_str("\nmetrics (measured repeats):\n");
    let mut i = 0;
    while i < metrics.len() {
        let step = &metrics[i].step;
        let mine: Vec<String> = metrics[i..]
            .iter()
            .take_while(|m| &m.step == step)
            .map(|m| {
                let note = super::metrics::dispersion_words(m)
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default();
                format!("{} {}{note}", crate::term::safe(&m.name), m.text)
            })
            .collect();
        i += mine.len();
        out.push_str(&format!("  {step}: {}\n", mine.join("; ")));
    }
}

/// The checks as the PR body states them: a line per cell and per handoff, every
/// check that did not pass on its own line.
fn checks(out: &mut String, rec: &Record, attr: &Attribution) {
    if rec.comparisons.is_empty() {
        return;
    }
    let s = short::short(rec, attr, Style::Plain);
    out.push_str(&format!("\nchecks: {}\n", s.checks.unwrap_or_default()));
    for b in &s.blocks {
        out.push_str(&format!("  {}\n", b.line));
        for h in &b.handoffs {
            out.push_str(&format!("    {h}\n"));
        }
    }
    for c in &s.other_checks {
        out.push_str(&format!("  pass  {c}\n"));
    }
    for c in &rec.comparisons {
        if !c.passed {
            let err = c
                .error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default();
            out.push_str(&format!(
                "  FAIL  {}: {}{}\n",
                crate::term::safe(&c.name),
                check_value::of(c, Words::Worded),
                crate::term::safe(&err)
            ));
        }
    }
}

/// Steps run on several revisions, against the baseline.
fn revisions(out: &mut String, rec: &Record) {
    let revisions = super::revisions::revision_facts(rec, Style::Plain);
    if !revisions.is_empty() {
        out.push_str(&format!(
            "\n{}; against the baseline:\n",
            super::revisions::revision_line(rec).unwrap_or_default()
        ));
        for r in &revisions {
            for l in &r.lines {
                out.push_str(&format!("  {}: {l}\n", r.step));
            }
        }
    }
}

/// Simulated devices (so none is taken for hardware), then the run's warnings.
fn devices_and_warnings(out: &mut String, rec: &Record, said: Option<&str>) {
    let mut sim: Vec<String> = Vec::new();
    for a in rec.allocations.iter().filter(|a| a.simulated) {
        if !sim.contains(&a.device) {
            sim.push(a.device.clone());
        }
    }
    if !sim.is_empty() {
        out.push_str(&format!("\ndevices: {} (simulated)\n", sim.join(", ")));
    }
    let used = super::facts::short::device_use(rec, Style::Plain);
    if !used.is_empty() {
        out.push('\n');
    }
    for u in used {
        out.push_str(&format!("device use: {u}\n"));
    }
    for w in rec.warnings.iter().filter(|w| Some(w.as_str()) != said) {
        out.push_str(&format!("warning: {w}\n"));
    }
}

/// The release audit's outcome, what it left behind when it failed.
fn release(out: &mut String, rec: &Record) {
    match &rec.release_audit {
        Some(a) if a.passed => out.push_str("\nAll owned allocations released.\n"),
        Some(a) => {
            out.push_str("\nRELEASE AUDIT FAILED: left behind:\n");
            for l in &a.leftovers {
                out.push_str(&format!("  {l}\n"));
            }
        }
        None => out.push_str("\nrelease not audited (the run did not finish)\n"),
    }
}

/// The terminal summary as a [`super::Renderer`].
pub struct SummaryRenderer;

impl super::Renderer for SummaryRenderer {
    fn render(&self, input: &super::Input<'_>) -> Result<String, super::ReportError> {
        Ok(render_with(input.record, input.attribution))
    }
}
