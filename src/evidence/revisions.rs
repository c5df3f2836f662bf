//! The record's revision comparisons: for each step that ran on the baseline and on
//! another revision, its test cases and findings classified (`new`, `pre-existing`,
//! `fixed`) and its timings compared (Mann–Whitney U, a bootstrap interval of the
//! ratio, asv's marks).

use super::record::{Record, StepRecord};
use crate::compare::stats;
use crate::results::classify;
use crate::results::AttemptResults;

/// A cell: axis and value pairs.
type Cell = Vec<(String, String)>;

/// The noise threshold when the plan sets none.
pub const DEFAULT_NOISE: f64 = 0.05;

pub use super::contract::RevisionComparison;

/// The results of a step's last attempt that has any.
pub fn results_of(s: &StepRecord) -> Option<&AttemptResults> {
    s.attempts.iter().rev().find_map(|a| a.results.as_ref())
}

/// A step's samples of `metric` (wall time when None): its measured attempts that
/// succeeded.
pub fn samples(s: &StepRecord, metric: Option<&str>) -> Vec<f64> {
    s.attempts
        .iter()
        .filter(|a| !a.warmup && a.succeeded())
        .filter_map(|a| match metric {
            None => Some(a.wall_ms),
            Some(m) => a.metrics.as_ref()?.get(m)?.as_f64(),
        })
        .collect()
}

/// Every revision comparison the record's steps allow.
pub fn compare(rec: &Record) -> Vec<RevisionComparison> {
    let Some(base) = rec.run.revisions.iter().find(|r| r.baseline) else {
        return Vec::new();
    };
    let cells: Vec<(String, String, Cell)> = rec
        .run
        .steps
        .iter()
        .filter_map(|d| {
            let t = d.template.clone()?;
            let cell = d
                .cell
                .iter()
                .map(|c| (c.axis.clone(), c.value.clone()))
                .collect();
            Some((d.id.clone(), t, cell))
        })
        .collect();
    let pairs = classify::revision_pairs(
        cells
            .iter()
            .map(|(id, t, c)| (id.as_str(), t.as_str(), c.as_slice())),
        &base.name,
    );
    let step = |id: &str| rec.steps.iter().find(|s| s.id == id);
    let noise = rec.run.plan.noise.unwrap_or(DEFAULT_NOISE);
    pairs
        .into_iter()
        .filter_map(|p| {
            let (b, i) = (step(&p.baseline)?, step(&p.implementation)?);
            let (rb, ri) = (results_of(b), results_of(i));
            let tests = match (
                rb.and_then(|r| r.junit.as_ref()),
                ri.and_then(|r| r.junit.as_ref()),
            ) {
                (Some(x), Some(y)) if x.error.is_none() && y.error.is_none() => {
                    Some(classify::tests(x, y))
                }
                _ => None,
            };
            let findings = match (
                rb.and_then(|r| r.sarif.as_ref()),
                ri.and_then(|r| r.sarif.as_ref()),
            ) {
                (Some(x), Some(y)) if x.error.is_none() && y.error.is_none() => {
                    let dir = |name: &str| {
                        rec.run
                            .revisions
                            .iter()
                            .find(|r| r.name == name)
                            .map_or("", |r| r.dir.as_str())
                    };
                    Some(classify::findings(
                        x,
                        y,
                        (dir(&base.name), dir(&p.revision)),
                    ))
                }
                _ => None,
            };
            let headline = rec
                .run
                .steps
                .iter()
                .find(|d| d.id == p.implementation)
                .and_then(|d| d.report_metric.clone());
            let mut timings = Vec::new();
            for metric in std::iter::once(None).chain(headline.as_deref().map(Some)) {
                let (xs, ys) = (samples(b, metric), samples(i, metric));
                if xs.len() >= 2 && ys.len() >= 2 {
                    timings.push(stats::compare(metric.unwrap_or("wall_ms"), &xs, &ys, noise));
                }
            }
            Some(RevisionComparison {
                step: p.label,
                baseline: p.baseline,
                implementation: p.implementation,
                revision: p.revision,
                tests,
                findings,
                timings,
            })
        })
        .collect()
}

/// Why a failed `gate = "new"` step does not fail the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Excuse {
    /// It failed on the baseline revision: reported, never gating.
    Baseline,
    /// It failed on another revision with only pre-existing failures and findings.
    PreExistingOnly,
}

impl Excuse {
    /// How a steps table shows the step's status.
    pub fn status_text(self) -> &'static str {
        match self {
            Excuse::Baseline => "failed (baseline, not gating)",
            Excuse::PreExistingOnly => "failed (pre-existing only)",
        }
    }
}

/// Whether every step that did not succeed is a `gate = "new"` step whose failures
/// are not new (see [`excuse`]). Then the reason to give; `None` when something
/// still fails the run.
pub fn excused_by_gate(rec: &Record) -> Option<String> {
    let mut notes: Vec<String> = Vec::new();
    for s in rec.steps.iter().filter(|s| !s.status.is_success()) {
        notes.push(match excuse(rec, s)? {
            Excuse::Baseline => format!("`{}` fails on the baseline (reported, not gating)", s.id),
            Excuse::PreExistingOnly => format!("`{}` has only pre-existing failures", s.id),
        });
    }
    (!notes.is_empty()).then(|| format!("gate = \"new\": {}", notes.join("; ")))
}

/// A failed run's reason when `gate = "new"` steps are among its failures: the steps
/// that fail it first, then those that do not and why; `None` without such steps.
pub fn gate_reason(rec: &Record) -> Option<String> {
    let failed: Vec<&super::record::StepRecord> = rec
        .steps
        .iter()
        .filter(|s| s.status == super::record::StepStatus::Failed)
        .collect();
    let excused: Vec<(&str, Excuse)> = failed
        .iter()
        .filter_map(|s| excuse(rec, s).map(|e| (s.id.as_str(), e)))
        .collect();
    if excused.is_empty() {
        return None;
    }
    let gating: Vec<&str> = failed
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| !excused.iter().any(|(e, _)| e == id))
        .collect();
    let mut reason = if gating.is_empty() {
        "not every step succeeded".to_string()
    } else {
        format!("failed steps: {}", gating.join(", "))
    };
    let words: Vec<String> = excused
        .iter()
        .map(|(id, e)| match e {
            Excuse::Baseline => format!("{id} fails on the baseline"),
            Excuse::PreExistingOnly => format!("{id} has only pre-existing failures"),
        })
        .collect();
    reason.push_str(&format!(" (not gating: {})", words.join("; ")));
    Some(reason)
}

/// Why the failed step `s` does not fail the run, if it does not: a `gate = "new"`
/// step failing on the baseline (its own failures never fail the run), or failing
/// on another revision with only pre-existing failures and findings, where every
/// declared results file was read whole and its exit is one a runner gives for
/// failing tests (or a scanner for findings) that those results explain.
pub fn excuse(rec: &Record, s: &super::record::StepRecord) -> Option<Excuse> {
    use super::record::{StepStatus, Termination};
    let base = rec.run.revisions.iter().find(|r| r.baseline)?.name.clone();
    let d = rec.run.steps.iter().find(|d| d.id == s.id)?;
    if s.status != StepStatus::Failed || !d.gate_new {
        return None;
    }
    // Only a suite that ran to its end and reported is judged by its report.
    let last = s.attempts.last()?;
    if last.termination != Termination::Exited {
        return None;
    }
    let revision = d
        .cell
        .iter()
        .find(|c| c.axis == "revision")
        .map(|c| c.value.as_str());
    if revision == Some(base.as_str()) {
        return Some(Excuse::Baseline);
    }
    // Every declared results file exists, parses and is complete...
    let res = last.results.as_ref()?;
    let whole_junit = res
        .junit
        .as_ref()
        .is_none_or(|j| j.error.is_none() && j.sha256.is_some());
    let whole_sarif = res
        .sarif
        .as_ref()
        .is_none_or(|f| f.error.is_none() && f.sha256.is_some());
    if !(whole_junit && whole_sarif) || (res.junit.is_none() && res.sarif.is_none()) {
        return None;
    }
    // ...its non-zero exit is what a runner says when tests fail or a scanner
    // finds something (not a crash, a signal or a missing command, > 125)...
    let failing = res.junit.as_ref().map_or(0, |j| j.counts.failing());
    let found = res.sarif.as_ref().map_or(0, |f| f.count);
    let code = last.exit_code?;
    if code == 0 || code > 125 || (failing == 0 && found == 0) {
        return None;
    }
    // ...and what failed is all on the baseline too.
    let c = rec
        .revisions_compared
        .iter()
        .find(|c| c.implementation == s.id)?;
    if (res.junit.is_some() && c.tests.is_none()) || (res.sarif.is_some() && c.findings.is_none()) {
        return None;
    }
    let new = c.tests.as_ref().map_or(0, |t| t.totals.new)
        + c.findings.as_ref().map_or(0, |f| f.totals.new);
    (new == 0).then_some(Excuse::PreExistingOnly)
}
