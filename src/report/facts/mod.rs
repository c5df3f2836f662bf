//! The facts a PR body states, taken from the record alone and pre-phrased where a
//! template could not phrase them without logic. Nothing here invents a figure: a
//! missing field becomes a missing line, never a default number.

use serde::Serialize;

use super::attribution::Attribution;
use super::format::{bytes, duration_ms, json_value, percent, short_hash};
use crate::record::check::{AcrossDetail, CheckDetail, FiniteDetail, Num, SlotsDetail, Token};
use crate::record::pins::{Details, PinKind, PinReport};
use crate::record::plan::{Metric, StepKind};
use crate::record::run::{CheckRecord, Record, StepRecord};
use crate::report::check_value::{self, Words};

mod checks;
mod clauses;
mod gpu;
mod pins;
pub mod short;
mod steps;
mod workload;

use checks::*;
use clauses::*;
pub(crate) use pins::not_enforced;
pub use pins::pin_report;
use pins::*;
pub use steps::cache_lines;
use steps::*;
pub(crate) use steps::{notable_status, status_text};
use workload::*;

/// Everything the PR and HTML templates read.
#[derive(Debug, Clone, Serialize)]
pub struct Facts {
    pub run_id: String,
    pub status: String,
    pub reason: Option<String>,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub plan_name: String,
    pub description: Option<String>,
    pub changes: Option<String>,
    pub plan_sha256: String,
    pub orchestrator_version: String,
    pub binary_sha256: Option<String>,
    /// sha256 of `record.json` (hex).
    pub digest: String,
    /// The record folder as the reader reaches it: relative to where they stand
    /// when it is below it, else absolute.
    pub record_path: String,
    /// `orchestrate verify <record_path>`: works as printed.
    pub verify_command: String,
    /// "Baseline 6787628; implementation 720e8dc": from `[revisions]`, else the git
    /// pins (empty without either).
    pub git_line: String,
    /// Steps run on the baseline and another revision: tests, findings, timings
    /// (Markdown, and plain for the HTML page).
    pub revisions: Vec<super::revisions::RevisionFacts>,
    pub revisions_plain: Vec<super::revisions::RevisionFacts>,
    /// The verdict after the status word, one short sentence (Markdown, plain).
    pub verdict: Option<String>,
    pub verdict_plain: Option<String>,
    /// Non-zero exits the results files explain and that do not gate: one
    /// sentence, not failures (Markdown, plain).
    pub explained: Option<String>,
    pub explained_plain: Option<String>,
    /// The failures again, plain, for the HTML page.
    pub failures_plain: Vec<String>,
    pub pins: Vec<PinLine>,
    pub drift: Vec<PinLine>,
    pub sources: Vec<SourceLine>,
    pub host: Vec<String>,
    pub isolation: String,
    pub devices: Vec<DeviceLine>,
    pub any_simulated: bool,
    /// Each simulated device once, in the order the run first used it.
    pub simulated_devices: Vec<String>,
    /// Every numeric step metric over measured repeats.
    pub metrics: Vec<MetricLine>,
    /// Above [`COMPACT_ABOVE`] steps the step table gives way to counts, the steps
    /// that did not succeed and the slowest few.
    pub compact: bool,
    pub status_counts: Vec<StatusCount>,
    /// Steps that failed, were cancelled or skipped (compact view).
    pub notable: Vec<StepLine>,
    /// The slowest steps by median wall time (compact view).
    pub slowest: Vec<StepLine>,
    /// Prefill and handoff steps outside any matrix cell.
    pub prefill: Vec<PrefillFacts>,
    pub handoffs: Vec<HandoffFacts>,
    /// One block per matrix cell (its prefill and handoff steps), as the seed PR
    /// writes "Full 2K: ..." and "Full 8K: ...".
    pub cells: Vec<CellFacts>,
    pub steps: Vec<StepLine>,
    pub checks: Vec<CheckLine>,
    pub failures: Vec<String>,
    /// What the step cache did: reused from which run, why a step reran, outputs
    /// that came out different with the same key.
    pub cache: Vec<String>,
    /// The same in plain text, for the HTML report.
    pub cache_plain: Vec<String>,
    pub release: Release,
    pub limits: Vec<String>,
    pub unenforced: Vec<String>,
    /// Attempts ran with no isolation: why (heads the PR body).
    pub not_enforced: Option<String>,
    pub warnings: Vec<String>,
    /// The Verification section's short form (Markdown): what a reviewer reads first.
    pub short: short::Short,
    /// The same in plain text, for the HTML page.
    pub short_plain: short::Short,
    /// Metrics the same in every repeat, in one plain line (they are left out of
    /// `metrics`).
    pub parameters: Option<String>,
}

/// One pin, in one line.
#[derive(Debug, Clone, Serialize)]
pub struct PinLine {
    pub kind: String,
    pub name: String,
    pub declared: String,
    pub observed: String,
    pub status: String,
    pub message: Option<String>,
    /// The pin phrased for people: "model koni: KISTI/x at revision 0172bf7".
    pub text: String,
    /// The same in Markdown, a revision's `HEAD~1` as code.
    pub text_md: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceLine {
    pub role: String,
    pub name: String,
    pub digest: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeviceLine {
    pub device: String,
    pub kind: String,
    pub cores: String,
    pub simulated: bool,
    /// The step that held it.
    pub step: String,
    /// The same in Markdown, each step id a code span ("`a` interleaved with `b`").
    pub step_md: String,
}

/// A prefill step: repeats, bit-exactness, finiteness, timing, KV shape.
#[derive(Debug, Clone, Serialize)]
pub struct PrefillFacts {
    pub step: String,
    /// The step's devices, "(simulated)" after each simulated one.
    pub devices: String,
    pub status: String,
    pub measured: usize,
    pub warmups: usize,
    /// Sentences, one per finding.
    pub lines: Vec<String>,
}

/// The prefill and handoff steps of one matrix cell.
#[derive(Debug, Clone, Serialize)]
pub struct CellFacts {
    /// `Full 8192` from `cell_title = "Full {tokens}"`, else `tokens=8192`.
    pub title: String,
    pub prefill: Vec<PrefillFacts>,
    pub handoffs: Vec<HandoffFacts>,
}

/// A handoff step: its match results, relative RMS and first divergence.
#[derive(Debug, Clone, Serialize)]
pub struct HandoffFacts {
    pub step: String,
    pub status: String,
    pub devices: String,
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepLine {
    pub id: String,
    pub kind: String,
    pub status: String,
    pub attempts: usize,
    pub warmups: usize,
    pub timing: String,
    pub reason: Option<String>,
    /// "succeeded on retry 2 of 3", when tries were retried.
    pub note: Option<String>,
    /// It did not succeed, and not only as its results explain: a reader looks.
    pub notable: bool,
}

/// One step metric, as reports state it.
#[derive(Debug, Clone, Serialize)]
pub struct MetricLine {
    pub step: String,
    pub name: String,
    /// `769.15–769.52 ms (median 769.30 ms, n=3)`.
    pub text: String,
    pub headline: bool,
    /// "timing dispersion remains: ..." when past the step's threshold.
    pub dispersion_note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StatusCount {
    pub status: String,
    pub n: usize,
    /// Steps of this status are failures a reader looks at (bold in Markdown).
    pub notable: bool,
}

/// Plans with more steps than this get the compact step view.
pub const COMPACT_ABOVE: usize = 40;
/// How many of the slowest steps the compact view names.
const SLOWEST: usize = 5;

#[derive(Debug, Clone, Serialize)]
pub struct CheckLine {
    pub step: String,
    pub name: String,
    pub metric: Metric,
    pub value: String,
    pub threshold: String,
    pub passed: bool,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Release {
    pub audited: bool,
    pub passed: bool,
    pub checked: Vec<String>,
    pub leftovers: Vec<String>,
}

/// Gather the facts of a record. `digest` is the hex sha256 of its `record.json`.
pub fn facts(rec: &Record, digest: &str, attr: &Attribution) -> Facts {
    facts_at(rec, digest, attr, None)
}

/// [`facts`], with the record folder where the reader finds it.
pub fn facts_at(
    rec: &Record,
    digest: &str,
    attr: &Attribution,
    record_dir: Option<&std::path::Path>,
) -> Facts {
    let pins = pin_report(rec);
    let devices = device_lines(rec);
    let record_path = record_path(rec, record_dir);
    let steps: Vec<StepLine> = rec.steps.iter().map(|s| step_line(rec, s)).collect();
    Facts {
        run_id: rec.run_id.clone(),
        status: rec.status.as_str().to_string(),
        reason: rec.reason.clone(),
        started_at: rec.started_at.clone(),
        ended_at: rec.ended_at.clone(),
        plan_name: rec.run.plan.name.clone(),
        description: rec.run.plan.description.clone(),
        changes: rec.run.plan.changes.clone(),
        plan_sha256: rec.run.plan.sha256.clone(),
        orchestrator_version: rec.run.orchestrator.version.clone(),
        binary_sha256: rec.run.orchestrator.binary_sha256.clone(),
        digest: digest.to_string(),
        verify_command: format!("orchestrate verify {record_path}"),
        record_path,
        git_line: super::revisions::revision_line(rec).unwrap_or_else(|| git_line(&pins)),
        revisions: super::revisions::revision_facts(rec, short::Style::Markdown),
        revisions_plain: super::revisions::revision_facts(rec, short::Style::Plain),
        verdict: super::verdict::why(rec, short::Style::Markdown),
        verdict_plain: super::verdict::why(rec, short::Style::Plain),
        explained: super::verdict::explained(rec, short::Style::Markdown),
        explained_plain: super::verdict::explained(rec, short::Style::Plain),
        failures_plain: failure_lines(rec, short::Style::Plain),
        pins: pin_lines(rec, &pins),
        drift: drift_lines(&pins),
        sources: source_lines(&pins),
        host: host_lines(rec),
        isolation: isolation_line(rec),
        any_simulated: devices.iter().any(|d| d.simulated),
        simulated_devices: simulated_devices(&devices),
        devices,
        metrics: metric_lines(rec),
        compact: steps.len() > COMPACT_ABOVE,
        status_counts: status_counts(&steps),
        notable: notable(&steps),
        cache: cache_lines(rec, short::Style::Markdown),
        cache_plain: cache_lines(rec, short::Style::Plain),
        slowest: slowest(rec, &steps),
        prefill: loose_prefill(rec, attr),
        handoffs: loose_handoffs(rec, attr),
        cells: cell_blocks(rec, attr),
        steps,
        checks: check_lines(rec),
        failures: failure_lines(rec, short::Style::Markdown),
        release: release(rec),
        limits: limit_lines(&rec.run.plan.limits),
        unenforced: unenforced(rec),
        not_enforced: not_enforced(rec),
        warnings: rec.warnings.clone(),
        short: short::short(rec, attr, short::Style::Markdown),
        short_plain: short::short(rec, attr, short::Style::Plain),
        parameters: short::parameters(rec, short::Style::Plain),
    }
}

/// The host in two lines, so a reader can tell whose machine the figures came from.
fn host_lines(rec: &Record) -> Vec<String> {
    let h = &rec.run.host;
    vec![
        format!("host {}: {}, kernel {}", h.hostname, h.os, h.kernel),
        format!(
            "CPU {} × {}, memory {}",
            h.cpu_model,
            h.cpus,
            bytes(h.memory_bytes as f64)
        ),
    ]
}

/// Step metrics with their dispersion note, so templates need no logic to warn;
/// parameters (the same in every repeat) are stated once elsewhere.
fn metric_lines(rec: &Record) -> Vec<MetricLine> {
    super::metrics::step_metrics(rec)
        .iter()
        .filter(|m| !short::is_parameter(m))
        .map(|m| MetricLine {
            step: m.step.clone(),
            name: m.name.clone(),
            text: m.text.clone(),
            headline: m.headline,
            dispersion_note: super::metrics::dispersion_words(m),
        })
        .collect()
}

/// The release audit, or an unaudited one: a run that did not finish has none.
fn release(rec: &Record) -> Release {
    match &rec.release_audit {
        Some(a) => Release {
            audited: true,
            passed: a.passed,
            checked: a.checked.clone(),
            leftovers: a.leftovers.clone(),
        },
        None => Release {
            audited: false,
            passed: false,
            checked: Vec::new(),
            leftovers: Vec::new(),
        },
    }
}

#[cfg(test)]
mod wall_tests {
    use super::wall_range;
    use crate::record::run::Stats;

    #[test]
    fn repeats_that_round_alike_keep_their_difference() {
        let st = |min, max| Stats {
            n: 3,
            min,
            median: (min + max) / 2.0,
            max,
        };
        assert_eq!(wall_range(&st(1300.0, 1360.0)), "1.30 s–1.36 s");
        assert_eq!(wall_range(&st(1355.2, 1362.1)), "1.355–1.362 s");
        assert_eq!(wall_range(&st(11876.0, 11880.0)), "11.876–11.880 s");
        assert_eq!(wall_range(&st(12.31, 12.34)), "12.31–12.34 ms");
        assert_eq!(wall_range(&st(5.0, 5.0)), "5.00 ms–5.00 ms");
    }
}
