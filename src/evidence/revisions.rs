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

/// A step's SARIF log with every finding's file relative to the repository it
/// scanned: its revision's checkout when it ran on one, else its attempt's working
/// folder, else the run's work folder. Tools write absolute `file://` URIs, which
/// differ per run and per checkout; this is the one place the comparison, the
/// index (and so `trend` and `site`) and `diff` read findings from. `None` without
/// a log that was read.
pub fn findings_of(rec: &Record, s: &StepRecord) -> Option<crate::results::SarifResults> {
    let sarif = results_of(s)?
        .sarif
        .as_ref()
        .filter(|x| x.error.is_none())?;
    let revision = rec
        .run
        .steps
        .iter()
        .find(|d| d.id == s.id)
        .and_then(|d| d.cell.iter().find(|c| c.axis == "revision"))
        .and_then(|c| rec.run.revisions.iter().find(|r| r.name == c.value))
        .map(|r| r.dir.as_str());
    let cwd = s
        .attempts
        .iter()
        .rev()
        .find(|a| a.results.is_some())
        .map(|a| a.cwd.as_str());
    let roots: Vec<&str> = revision
        .into_iter()
        .chain(cwd)
        .chain(std::iter::once(rec.run.options.work.as_str()))
        .filter(|r| !r.is_empty())
        .collect();
    let mut out = sarif.clone();
    for f in &mut out.findings {
        *f = f.relative_to_any(&roots);
    }
    Some(out)
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
            let findings = match (findings_of(rec, b), findings_of(rec, i)) {
                (Some(x), Some(y)) => Some(classify::findings(&x, &y, ("", ""))),
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

/// How a step that did not succeed counts toward the run's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// It fails the run.
    Fails,
    /// A `gate = "new"` step that exited as its results explain (a test runner with
    /// failing tests, a scanner with findings) and whose failures are not new: not a
    /// failure at all.
    Explained(Excuse),
    /// A `gate = "new"` baseline step that did not end as its results explain (it
    /// crashed, timed out, wrote no report): a failure, which does not gate.
    NotGating,
}

impl Judged {
    /// How a steps table shows the step's status.
    pub fn status_text(self) -> &'static str {
        match self {
            Judged::Fails => "failed",
            Judged::Explained(Excuse::Baseline) => "baseline failures (not gating)",
            Judged::Explained(Excuse::PreExistingOnly) => "pre-existing failures (not gating)",
            Judged::NotGating => "failed (baseline, not gating)",
        }
    }
}

/// How the step `s` counts toward the verdict; `None` when it did not fail.
pub fn judge(rec: &Record, s: &StepRecord) -> Option<Judged> {
    if s.status != super::record::StepStatus::Failed {
        return None;
    }
    Some(match excuse(rec, s) {
        None => Judged::Fails,
        Some(e @ Excuse::PreExistingOnly) => Judged::Explained(e),
        Some(e @ Excuse::Baseline) if explained_exit(s) => Judged::Explained(e),
        Some(Excuse::Baseline) => Judged::NotGating,
    })
}

/// Steps that did not succeed only as their results explain, gated on new failures
/// with none new: how many, for the verdict.
pub fn explained_steps(rec: &Record) -> usize {
    rec.steps
        .iter()
        .filter(|s| matches!(judge(rec, s), Some(Judged::Explained(_))))
        .count()
}

/// Whether every step that did not succeed is a `gate = "new"` step whose failures
/// are not new (see [`excuse`]). Then the reason to give; `None` when something
/// still fails the run.
pub fn excused_by_gate(rec: &Record) -> Option<String> {
    let mut n = 0;
    for s in rec.steps.iter().filter(|s| !s.status.is_success()) {
        excuse(rec, s)?;
        n += 1;
    }
    (n > 0).then(|| {
        format!(
            "gate = \"new\": nothing new fails against the baseline ({n} step{} failed only as the baseline does)",
            if n == 1 { "" } else { "s" }
        )
    })
}

/// A failed run's reason when `gate = "new"` steps are among its failures: the steps
/// that fail it, and how many more failed without gating; `None` without such steps.
pub fn gate_reason(rec: &Record) -> Option<String> {
    let failed: Vec<&super::record::StepRecord> = rec
        .steps
        .iter()
        .filter(|s| s.status == super::record::StepStatus::Failed)
        .collect();
    let excused = failed.iter().filter(|s| excuse(rec, s).is_some()).count();
    if excused == 0 {
        return None;
    }
    let gating: Vec<&str> = failed
        .iter()
        .filter(|s| excuse(rec, s).is_none())
        .map(|s| s.id.as_str())
        .collect();
    let mut reason = if gating.is_empty() {
        "not every step succeeded".to_string()
    } else {
        format!("failed steps: {}", gating.join(", "))
    };
    reason.push_str(&format!(
        " ({excused} more failed only as the baseline does: not gating)"
    ));
    Some(reason)
}

/// Whether the step's last attempt ended as its results files explain: it exited
/// with a code a test runner gives for failing tests or a scanner for findings
/// (1–125: not a crash, a signal or a missing command), every declared results file
/// was read whole, and they hold a failing test or a finding.
pub fn explained_exit(s: &StepRecord) -> bool {
    use super::record::Termination;
    let Some(last) = s.attempts.last() else {
        return false;
    };
    if last.termination != Termination::Exited {
        return false;
    }
    let Some(res) = last.results.as_ref() else {
        return false;
    };
    let whole_junit = res
        .junit
        .as_ref()
        .is_none_or(|j| j.error.is_none() && j.sha256.is_some());
    let whole_sarif = res
        .sarif
        .as_ref()
        .is_none_or(|f| f.error.is_none() && f.sha256.is_some());
    if !(whole_junit && whole_sarif) || (res.junit.is_none() && res.sarif.is_none()) {
        return false;
    }
    let failing = res.junit.as_ref().map_or(0, |j| j.counts.failing());
    let found = res.sarif.as_ref().map_or(0, |f| f.count);
    last.exit_code
        .is_some_and(|c| (1..=125).contains(&c) && (failing > 0 || found > 0))
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
    // Its exit is what its whole results files explain...
    if !explained_exit(s) {
        return None;
    }
    let res = last.results.as_ref()?;
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
    // Items the record left out were not classified: none of them is known old.
    let unclassified = c.tests.as_ref().map_or(0, |t| t.unclassified)
        + c.findings.as_ref().map_or(0, |f| f.unclassified);
    (new == 0 && unclassified == 0).then_some(Excuse::PreExistingOnly)
}
