//! Runs side by side (any number; the first is the one the others are measured
//! against): pins, environment, per-step timings (median, its ratio to the first
//! run's, dispersion (max-min)/median from `Stats`), step metrics, tests and findings
//! against the first run, and every check. Each row says whether it differs:
//! `**` in Markdown, `*` in text, `changed: true` in JSON; `only_changed` keeps just
//! those rows.

use std::path::PathBuf;

use serde::Serialize;

use super::error::ReportError;
use super::facts::pin_report;
use super::format::bytes;
use crate::record::run::{Record, Stats};

mod layout;
mod params;

pub use layout::{columns, ColumnRow, ColumnSection, Columns, DiffFormat};

/// One fact of every run.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    /// One per run, in the runs' order.
    pub values: Vec<String>,
    pub changed: bool,
}

/// A step's timings in every run.
#[derive(Debug, Clone, Serialize)]
pub struct StepRow {
    pub step: String,
    pub status: Vec<String>,
    pub median_ms: Vec<Option<f64>>,
    /// Each later run's median / the first run's (one fewer than the runs).
    pub ratio: Vec<Option<f64>>,
    pub dispersion: Vec<Option<f64>>,
    /// min and max over measured repeats.
    pub range_ms: Vec<Option<[f64; 2]>>,
    /// The status differs.
    pub changed: bool,
    /// Some run's wall-time range (min–max over measured repeats) does not overlap
    /// the first run's.
    pub timing_changed: bool,
}

/// A check in every run.
#[derive(Debug, Clone, Serialize)]
pub struct CheckRow {
    pub step: String,
    pub name: String,
    pub metric: crate::record::plan::Metric,
    pub value: Vec<Option<serde_json::Value>>,
    pub passed: Vec<Option<bool>>,
    pub changed: bool,
}

/// A step metric (`ORCHESTRATE_METRICS`) in every run.
#[derive(Debug, Clone, Serialize)]
pub struct MetricRow {
    pub step: String,
    pub name: String,
    /// min–max (median, n) over measured repeats.
    pub text: Vec<Option<String>>,
    pub median: Vec<Option<f64>>,
    /// min and max over measured repeats.
    pub range: Vec<Option<[f64; 2]>>,
    /// Each later run's median / the first run's.
    pub ratio: Vec<Option<f64>>,
    /// A run lacks it, or its range does not overlap the first run's.
    pub changed: bool,
}

/// A step's test cases or findings in one later run, classified against the first
/// run as against a baseline: new, pre-existing, fixed.
#[derive(Debug, Clone, Serialize)]
pub struct ResultsRow {
    pub step: String,
    /// The later run's label (B, C, …).
    pub run: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tests: Option<crate::record::results::TestsComparison>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<crate::record::results::FindingsComparison>,
    /// The same in words.
    pub lines: Vec<String>,
    /// The same in Markdown (ids as code spans).
    #[serde(skip)]
    pub lines_md: Vec<String>,
    /// Something is new or fixed.
    pub changed: bool,
}

/// Everything a diff shows.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    /// The runs' ids, in order.
    pub runs: Vec<String>,
    /// Their labels: A, B, C, …
    pub labels: Vec<String>,
    /// Only rows that differ are kept.
    pub only_changed: bool,
    pub pins: Vec<Row>,
    /// What the run was asked to do: `--set` overrides, `--only`, the matrix, the
    /// options and limits, each step's repeats.
    pub parameters: Vec<Row>,
    pub environment: Vec<Row>,
    pub steps: Vec<StepRow>,
    pub metrics: Vec<MetricRow>,
    pub checks: Vec<CheckRow>,
    pub results: Vec<ResultsRow>,
}

/// A run's label: A to Z, then R27, R28, …
pub fn label(i: usize) -> String {
    match u8::try_from(i) {
        Ok(k) if k < 26 => char::from(b'A' + k).to_string(),
        _ => format!("R{}", i + 1),
    }
}

/// Steps with test reports or findings in the first run and a later one, the later
/// against the first.
fn results_rows(runs: &[&Record]) -> Vec<ResultsRow> {
    let Some((first, later)) = runs.split_first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (k, b) in later.iter().enumerate() {
        for sb in &b.steps {
            if let Some(r) = results_row(first, b, sb, &label(k + 1)) {
                out.push(r);
            }
        }
    }
    out
}

fn results_row(
    a: &Record,
    b: &Record,
    sb: &crate::record::run::StepRecord,
    run: &str,
) -> Option<ResultsRow> {
    use crate::evidence::revisions::{findings_of, results_of};
    use crate::results::classify;
    let sa = a.steps.iter().find(|s| s.id == sb.id)?;
    let (ra, rb) = (results_of(sa)?, results_of(sb)?);
    let ok = |j: &Option<crate::record::results::JunitResults>| {
        j.as_ref().filter(|j| j.error.is_none()).cloned()
    };
    let tests = match (ok(&ra.junit), ok(&rb.junit)) {
        (Some(x), Some(y)) => Some(classify::tests(&x, &y)),
        _ => None,
    };
    // Findings are keyed by file relative to the repository each scanned.
    let findings = match (findings_of(a, sa), findings_of(b, sb)) {
        (Some(x), Some(y)) => Some(classify::findings(&x, &y, ("", ""))),
        _ => None,
    };
    if tests.is_none() && findings.is_none() {
        return None;
    }
    use super::facts::short::Style;
    let shown = |id: &str| id.to_string();
    let lines_in = |style| {
        super::revisions::comparison_lines(tests.as_ref(), findings.as_ref(), "A", style, &shown)
    };
    let changed = tests
        .as_ref()
        .is_some_and(|t| !t.new.is_empty() || !t.fixed.is_empty())
        || findings
            .as_ref()
            .is_some_and(|f| !f.new.is_empty() || !f.fixed.is_empty());
    Some(ResultsRow {
        step: sb.id.clone(),
        run: run.to_string(),
        lines: lines_in(Style::Plain),
        lines_md: lines_in(Style::Markdown),
        tests,
        findings,
        changed,
    })
}

/// (max - min) / median, from the one `Stats` definition; none for a single value,
/// which has no spread to speak of (a dash, as the report shows it).
pub fn dispersion(s: &Stats) -> Option<f64> {
    (s.n > 1 && s.median > 0.0).then(|| (s.max - s.min) / s.median)
}

/// Not every value the same.
fn differ<T: PartialEq>(v: &[T]) -> bool {
    v.windows(2).any(|w| w[0] != w[1])
}

fn row(name: &str, values: Vec<String>) -> Row {
    Row {
        name: name.to_string(),
        changed: differ(&values),
        values,
    }
}

fn isolation_mode(r: &Record) -> String {
    let info = &r.run.isolation.info;
    match info.cgroup_version {
        Some(v) => format!("{} (cgroup v{v})", info.mode),
        None => info.mode.to_string(),
    }
}

/// Compare records already in memory, the first against the others.
pub fn diff_records(runs: &[&Record], only_changed: bool) -> Diff {
    let mut d = Diff {
        runs: runs.iter().map(|r| r.run_id.clone()).collect(),
        labels: (0..runs.len()).map(label).collect(),
        only_changed,
        pins: pin_rows(runs),
        parameters: params::parameter_rows(runs),
        environment: environment_rows(runs),
        steps: step_rows(runs),
        metrics: metric_rows(runs),
        checks: check_rows(runs),
        results: results_rows(runs),
    };
    if only_changed {
        d.pins.retain(|r| r.changed);
        d.parameters.retain(|r| r.changed);
        d.environment.retain(|r| r.changed);
        d.steps.retain(|s| s.changed || s.timing_changed);
        d.metrics.retain(|m| m.changed);
        d.checks.retain(|c| c.changed);
        d.results.retain(|r| r.changed);
    }
    d
}

/// Each key of any run's items once, in the order first seen (the first run's items
/// first, then what only later runs have), with the item each run holds under it
/// (its first, as a search would find). Linear in the items: a sweep of thousands
/// of cells is diffed (and its facts written for the site) without a search per key.
fn aligned<'a, T, K: Eq + std::hash::Hash + Clone>(
    per_run: &[&'a [T]],
    key: impl Fn(&T) -> K,
) -> Vec<(K, Vec<Option<&'a T>>)> {
    let mut at: std::collections::HashMap<K, usize> = std::collections::HashMap::new();
    let mut out: Vec<(K, Vec<Option<&'a T>>)> = Vec::new();
    for (i, items) in per_run.iter().enumerate() {
        for item in items.iter() {
            let k = key(item);
            let j = *at.entry(k.clone()).or_insert_with(|| {
                out.push((k, vec![None; per_run.len()]));
                out.len() - 1
            });
            out[j].1[i].get_or_insert(item);
        }
    }
    out
}

/// Every pin of any run, then plan and binary: what was run, side by side.
fn pin_rows(runs: &[&Record]) -> Vec<Row> {
    let reports: Vec<_> = runs.iter().map(|r| pin_report(r)).collect();
    let entries: Vec<&[crate::record::pins::PinEntry]> =
        reports.iter().map(|p| p.entries.as_slice()).collect();
    let mut pins = Vec::new();
    for ((kind, name), found) in aligned(&entries, |e| (e.kind.as_str(), e.name.clone())) {
        let show = |e: &Option<&crate::record::pins::PinEntry>| match e {
            Some(e) => format!(
                "declared {}, observed {} ({})",
                e.declared.as_deref().unwrap_or("-"),
                e.observed.as_deref().unwrap_or("-"),
                e.status.as_str()
            ),
            None => "(absent)".into(),
        };
        pins.push(row(
            &format!("{kind} {name}"),
            found.iter().map(show).collect(),
        ));
    }
    let each = |f: &dyn Fn(&Record) -> String| runs.iter().map(|r| f(r)).collect();
    pins.push(row("plan sha256", each(&|r| r.run.plan.sha256.clone())));
    pins.push(row("orchestrator", each(&orchestrator)));
    pins
}

/// The binary's digest, else its version: the digest tells builds apart.
fn orchestrator(r: &Record) -> String {
    r.run
        .orchestrator
        .binary_sha256
        .clone()
        .unwrap_or_else(|| r.run.orchestrator.version.clone())
}

/// Host, kernel, OS, CPU, memory, isolation: causes of timing the plan omits.
fn environment_rows(runs: &[&Record]) -> Vec<Row> {
    let each = |f: &dyn Fn(&Record) -> String| runs.iter().map(|r| f(r)).collect();
    vec![
        row("host", each(&|r| r.run.host.hostname.clone())),
        row("kernel", each(&|r| r.run.host.kernel.clone())),
        row("os", each(&|r| r.run.host.os.clone())),
        row(
            "cpu",
            each(&|r| format!("{} × {}", r.run.host.cpu_model, r.run.host.cpus)),
        ),
        row("memory", each(&|r| bytes(r.run.host.memory_bytes as f64))),
        row("isolation", each(&isolation_mode)),
    ]
}

/// Each later run's median over the first run's, where the first's is not zero.
fn ratios(medians: &[Option<f64>]) -> Vec<Option<f64>> {
    let first = medians.first().copied().flatten();
    medians
        .iter()
        .skip(1)
        .map(|m| match (first, m) {
            (Some(p), Some(q)) if p != 0.0 => Some(q / p),
            _ => None,
        })
        .collect()
}

/// Some later range lies wholly above or below the first one.
fn ranges_apart(stats: &[Option<Stats>]) -> bool {
    let Some(Some(first)) = stats.first() else {
        return false;
    };
    stats
        .iter()
        .skip(1)
        .flatten()
        .any(|s| s.min > first.max || s.max < first.min)
}

/// Every step of any run; a changed status is the difference to mark.
fn step_rows(runs: &[&Record]) -> Vec<StepRow> {
    let per_run: Vec<&[crate::record::run::StepRecord]> =
        runs.iter().map(|r| r.steps.as_slice()).collect();
    aligned(&per_run, |s| s.id.clone())
        .into_iter()
        .map(|(id, steps)| {
            let status: Vec<String> = steps
                .iter()
                .map(|s| {
                    s.map(|s| s.status.as_str().to_string())
                        .unwrap_or_else(|| "(absent)".into())
                })
                .collect();
            let wall: Vec<Option<Stats>> =
                steps.iter().map(|s| s.and_then(|s| s.wall_ms)).collect();
            let median_ms: Vec<Option<f64>> = wall.iter().map(|w| w.map(|s| s.median)).collect();
            StepRow {
                step: id,
                changed: differ(&status),
                timing_changed: ranges_apart(&wall),
                status,
                ratio: ratios(&median_ms),
                median_ms,
                range_ms: wall.iter().map(|w| w.map(|s| [s.min, s.max])).collect(),
                dispersion: wall
                    .iter()
                    .map(|w| w.as_ref().and_then(dispersion))
                    .collect(),
            }
        })
        .collect()
}

/// Every check of any run; a changed value or verdict is a difference.
fn check_rows(runs: &[&Record]) -> Vec<CheckRow> {
    let per_run: Vec<&[crate::record::run::CheckRecord]> =
        runs.iter().map(|r| r.comparisons.as_slice()).collect();
    aligned(&per_run, |c| (c.step.clone(), c.name.clone()))
        .into_iter()
        .filter_map(|((step, name), found)| {
            // A check's metric is the first run's that has it.
            let metric = found.iter().flatten().next()?.metric;
            let value: Vec<_> = found.iter().map(|c| c.map(|c| c.value.to_json())).collect();
            let passed: Vec<_> = found.iter().map(|c| c.map(|c| c.passed)).collect();
            Some(CheckRow {
                changed: differ(&value) || differ(&passed),
                step,
                name,
                metric,
                value,
                passed,
            })
        })
        .collect()
}

/// Every step metric of any run, with each later median's ratio to the first's.
fn metric_rows(runs: &[&Record]) -> Vec<MetricRow> {
    let all: Vec<_> = runs
        .iter()
        .map(|r| super::metrics::step_metrics(r))
        .collect();
    let per_run: Vec<&[super::metrics::StepMetric]> = all.iter().map(Vec::as_slice).collect();
    aligned(&per_run, |m| (m.step.clone(), m.name.clone()))
        .into_iter()
        .map(|((step, name), found)| {
            let stats: Vec<Option<Stats>> = found.iter().map(|m| m.map(|m| m.stats)).collect();
            let median: Vec<Option<f64>> = stats.iter().map(|s| s.map(|s| s.median)).collect();
            MetricRow {
                changed: found.iter().any(Option::is_none) || ranges_apart(&stats),
                text: found.iter().map(|m| m.map(|m| m.text.clone())).collect(),
                ratio: ratios(&median),
                range: stats.iter().map(|s| s.map(|s| [s.min, s.max])).collect(),
                median,
                step,
                name,
            }
        })
        .collect()
}

/// Read record folders (digests checked) and show them side by side, the first
/// against the others.
pub fn diff(
    runs: &[PathBuf],
    format: DiffFormat,
    only_changed: bool,
) -> Result<String, ReportError> {
    let loaded = runs
        .iter()
        .map(|p| super::load::load(p.as_path(), false))
        .collect::<Result<Vec<_>, _>>()?;
    let records: Vec<&Record> = loaded.iter().map(|l| &l.record).collect();
    let d = diff_records(&records, only_changed);
    layout::render(&d, format)
}
