//! `orchestrate regressions`: the newest run of a plan (or a named one) against the
//! runs before it in the index, by the rule revisions use (Mann–Whitney U and the
//! bootstrap interval of the ratio of medians beyond a threshold) for every step
//! metric, and by what is new for test cases and findings. A confirmed regression,
//! a test that started failing or a new finding fails the gate.

pub mod render;

use serde::Serialize;

use super::index::{RunRow, StepTests};
use crate::compare::stats::{self, Mark, TimingComparison};
use crate::record::plan::Better;

/// What the gate compares.
#[derive(Debug, Clone)]
pub struct Options {
    /// The run to judge (its id or folder); default the newest.
    pub run: Option<String>,
    /// How many earlier runs make the history (their samples pooled).
    pub history: usize,
    /// The threshold of metrics the plan gives none (`--noise`, else the run's
    /// `[report] noise`).
    pub noise: Option<f64>,
}

/// How a metric went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Worse beyond the threshold, significantly: fails the gate.
    Regression,
    Improvement,
    /// The interval of the ratio lies within the threshold.
    NoChange,
    /// Too few samples, or an interval too wide to say either.
    NotEnoughEvidence,
    /// No earlier run measured it.
    New,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Regression => "regression",
            Outcome::Improvement => "improvement",
            Outcome::NoChange => "no change",
            Outcome::NotEnoughEvidence => "not enough evidence",
            Outcome::New => "new",
        }
    }
}

/// One metric of one step, judged.
#[derive(Debug, Clone, Serialize)]
pub struct MetricChange {
    pub step: String,
    pub metric: String,
    pub better: Better,
    /// Whether `better` and the threshold are the plan's (the step's headline
    /// metric), or the defaults.
    pub declared: bool,
    /// The earlier runs' samples pooled as the baseline, the judged run's as the
    /// implementation; the threshold is its `noise`.
    pub comparison: TimingComparison,
    pub outcome: Outcome,
}

/// How a test case or a finding went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemOutcome {
    /// Failing (present) now, not in the last earlier run that read it: fails the
    /// gate.
    New,
    /// Failing (present) in both.
    PreExisting,
    /// Failing (present) before, not now.
    Fixed,
    /// Failing now; no earlier run read this step's report.
    NoHistory,
}

impl ItemOutcome {
    pub fn as_str(self, finding: bool) -> &'static str {
        match (self, finding) {
            (ItemOutcome::New, false) => "new failure",
            (ItemOutcome::New, true) => "new finding",
            (ItemOutcome::PreExisting, _) => "pre-existing",
            (ItemOutcome::Fixed, false) => "fixed",
            (ItemOutcome::Fixed, true) => "gone",
            (ItemOutcome::NoHistory, _) => "no history",
        }
    }
}

/// A test case (JUnit) or a finding (SARIF) of one step.
#[derive(Debug, Clone, Serialize)]
pub struct ItemChange {
    pub step: String,
    pub id: String,
    pub outcome: ItemOutcome,
    /// The earlier run it was compared with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against: Option<String>,
}

/// The gate's verdict on one run.
#[derive(Debug, Clone, Serialize)]
pub struct Regressions {
    pub plan: String,
    pub run: String,
    pub started_at: Option<String>,
    /// The earlier runs, oldest first.
    pub history: Vec<String>,
    pub metrics: Vec<MetricChange>,
    pub tests: Vec<ItemChange>,
    pub findings: Vec<ItemChange>,
}

impl Regressions {
    /// What fails the gate, one line each: `step metric`, `step test id`,
    /// `step finding key`.
    pub fn failures(&self) -> Vec<String> {
        let m = self
            .metrics
            .iter()
            .filter(|m| m.outcome == Outcome::Regression)
            .map(|m| format!("{} {}", m.step, m.metric));
        let t = self
            .tests
            .iter()
            .filter(|t| t.outcome == ItemOutcome::New)
            .map(|t| format!("{} test {}", t.step, t.id));
        let f = self
            .findings
            .iter()
            .filter(|f| f.outcome == ItemOutcome::New)
            .map(|f| format!("{} finding {}", f.step, f.id));
        m.chain(t).chain(f).collect()
    }
}

/// Why the gate could not judge.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("no verified, finished run in the records")]
    NoRun,
    #[error("the records hold runs of several plans ({0}): name one with --plan")]
    WhichPlan(String),
    #[error("no verified, finished run {0:?} in the records (its id or folder)")]
    UnknownRun(String),
    #[error("cannot read the record of {0}: {1}")]
    Record(String, String),
}

/// A metric's direction and threshold: the step's own for its headline metric.
pub struct Rule {
    pub better: Better,
    pub threshold: f64,
    pub declared: bool,
}

/// Judge the run `opts.run` (else the newest) of `rows` against the runs of its
/// plan before it, with each metric's direction and threshold from its record.
pub fn gate(rows: &[RunRow], opts: &Options) -> Result<Regressions, GateError> {
    let (judged, history) = pick(rows, opts)?;
    let dir = std::path::Path::new(&judged.records).join(&judged.folder);
    let loaded = crate::report::load::load(&dir, false)
        .map_err(|e| GateError::Record(dir.display().to_string(), e.to_string()))?;
    let rule = rules(&loaded.record, opts.noise);
    Ok(judge(judged, &history, &rule))
}

/// The judged run and the runs of its plan before it (at most `opts.history`,
/// oldest first): verified, finished, and not copies of another.
fn pick<'a>(
    rows: &'a [RunRow],
    opts: &Options,
) -> Result<(&'a RunRow, Vec<&'a RunRow>), GateError> {
    let usable: Vec<&RunRow> = rows
        .iter()
        .filter(|r| r.verified && !r.running && r.duplicate_of.is_none() && r.run_id.is_some())
        .collect();
    let at = match &opts.run {
        Some(id) => usable
            .iter()
            .position(|r| r.run_id.as_deref() == Some(id) || r.folder == *id)
            .ok_or_else(|| GateError::UnknownRun(id.clone()))?,
        None => {
            let mut plans: Vec<&str> = usable.iter().filter_map(|r| r.plan.as_deref()).collect();
            plans.sort_unstable();
            plans.dedup();
            if plans.len() > 1 {
                return Err(GateError::WhichPlan(plans.join(", ")));
            }
            usable.len().checked_sub(1).ok_or(GateError::NoRun)?
        }
    };
    let judged = usable[at];
    let earlier: Vec<&RunRow> = usable[..at]
        .iter()
        .filter(|r| r.plan == judged.plan)
        .copied()
        .collect();
    let keep = earlier.len().saturating_sub(opts.history);
    Ok((judged, earlier[keep..].to_vec()))
}

/// The rule of each metric, from the judged run's record: a step's `better` and
/// `threshold` hold for its headline metric (wall time when it names none); every
/// other metric is lower-is-better at `noise` (else the plan's, else 5%).
pub fn rules(
    record: &crate::record::Record,
    noise: Option<f64>,
) -> impl Fn(&str, &str) -> Rule + '_ {
    let noise = noise
        .or(record.run.plan.noise)
        .unwrap_or(crate::evidence::revisions::DEFAULT_NOISE);
    move |step, metric| match record.run.steps.iter().find(|d| d.id == step) {
        Some(d) if d.report_metric.as_deref().unwrap_or("wall_ms") == metric => Rule {
            better: d.better.unwrap_or(Better::Lower),
            threshold: d.threshold.unwrap_or(noise),
            declared: d.better.is_some() || d.threshold.is_some(),
        },
        _ => Rule {
            better: Better::Lower,
            threshold: noise,
            declared: false,
        },
    }
}

/// Judge `judged` against `history` (oldest first).
pub fn judge(
    judged: &RunRow,
    history: &[&RunRow],
    rule: &dyn Fn(&str, &str) -> Rule,
) -> Regressions {
    Regressions {
        plan: judged.plan.clone().unwrap_or_default(),
        run: judged.run_id.clone().unwrap_or_default(),
        started_at: judged.started_at.clone(),
        history: history.iter().filter_map(|r| r.run_id.clone()).collect(),
        metrics: metrics(judged, history, rule),
        tests: items(judged, history, false),
        findings: items(judged, history, true),
    }
}

fn metrics(
    judged: &RunRow,
    history: &[&RunRow],
    rule: &dyn Fn(&str, &str) -> Rule,
) -> Vec<MetricChange> {
    // A step's wall time is its headline only when it writes no metric of its own;
    // beside its own metrics it is the cost of measuring, not what was measured.
    let own = |step: &str| {
        judged
            .series
            .iter()
            .any(|s| s.step == step && s.metric != "wall_ms")
    };
    let mut out = Vec::new();
    for s in judged
        .series
        .iter()
        .filter(|s| !s.samples.is_empty())
        .filter(|s| s.metric != "wall_ms" || !own(&s.step))
    {
        let before: Vec<f64> = history
            .iter()
            .flat_map(|r| &r.series)
            .filter(|h| h.step == s.step && h.metric == s.metric)
            .flat_map(|h| h.samples.iter().copied())
            .collect();
        let r = rule(&s.step, &s.metric);
        let comparison = stats::compare(&s.metric, &before, &s.samples, r.threshold);
        let outcome = if before.is_empty() {
            Outcome::New
        } else {
            outcome(&comparison, r.better)
        };
        out.push(MetricChange {
            step: s.step.clone(),
            metric: s.metric.clone(),
            better: r.better,
            declared: r.declared,
            comparison,
            outcome,
        });
    }
    out
}

/// The revisions' marks (lower is better) turned by the metric's direction; a
/// change the test cannot call is "no change" only when its whole interval lies
/// within the threshold.
fn outcome(c: &TimingComparison, better: Better) -> Outcome {
    let up_is_worse = better == Better::Lower;
    match c.mark {
        Mark::InsufficientSamples => Outcome::NotEnoughEvidence,
        Mark::Worse if up_is_worse => Outcome::Regression,
        Mark::Worse => Outcome::Improvement,
        Mark::Better if up_is_worse => Outcome::Improvement,
        Mark::Better => Outcome::Regression,
        Mark::NotSignificant => match c.interval {
            Some((lo, hi)) if lo >= 1.0 - c.noise && hi <= 1.0 + c.noise => Outcome::NoChange,
            _ => Outcome::NotEnoughEvidence,
        },
    }
}

/// What a step's report listed in one run: its failing cases, or its findings;
/// `None` when that run did not read such a report.
fn listed(t: &StepTests, findings: bool) -> Option<&[String]> {
    if findings {
        t.findings.as_deref()
    } else {
        t.junit.then_some(t.failing.as_slice())
    }
}

/// Each step's failing cases (or findings) now against the last earlier run that
/// read the same step's report.
fn items(judged: &RunRow, history: &[&RunRow], findings: bool) -> Vec<ItemChange> {
    let mut out = Vec::new();
    for t in &judged.tests {
        let Some(now) = listed(t, findings) else {
            continue;
        };
        let before = history.iter().rev().find_map(|r| {
            let e = r.tests.iter().find(|e| e.step == t.step)?;
            Some((listed(e, findings)?, r.run_id.clone()))
        });
        let item = |id: &String, outcome, against: &Option<String>| ItemChange {
            step: t.step.clone(),
            id: id.clone(),
            outcome,
            against: against.clone(),
        };
        match before {
            None => out.extend(now.iter().map(|id| item(id, ItemOutcome::NoHistory, &None))),
            Some((was, against)) => {
                for id in now {
                    let o = if was.contains(id) {
                        ItemOutcome::PreExisting
                    } else {
                        ItemOutcome::New
                    };
                    out.push(item(id, o, &against));
                }
                for id in was.iter().filter(|id| !now.contains(id)) {
                    out.push(item(id, ItemOutcome::Fixed, &against));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::index::{empty_row, Series};
    use super::*;

    fn row(i: usize, lat: f64, failing: &[&str], findings: &[&str]) -> RunRow {
        let mut r = empty_row(&format!("run{i}"));
        r.verified = true;
        r.run_id = Some(format!("run{i}"));
        r.plan = Some("p".into());
        // ±1% around `lat`, different in every run and repeat.
        let samples = (0..5)
            .map(|k| lat * (1.0 + (((i * 5 + k) * 7) % 5) as f64 / 100.0 - 0.02))
            .collect();
        r.series.push(Series {
            step: "s".into(),
            metric: "lat".into(),
            samples,
        });
        r.tests.push(StepTests {
            step: "t".into(),
            junit: true,
            cases: 3,
            failing: failing.iter().map(|s| s.to_string()).collect(),
            findings: Some(findings.iter().map(|s| s.to_string()).collect()),
        });
        r
    }

    fn lower(_: &str, _: &str) -> Rule {
        Rule {
            better: Better::Lower,
            threshold: 0.05,
            declared: false,
        }
    }

    #[test]
    fn tests_and_findings_are_new_pre_existing_or_fixed_against_the_last_run() {
        let h: Vec<RunRow> = (0..3)
            .map(|i| row(i, 10.0, &["old", "gone"], &["F1"]))
            .collect();
        let now = row(3, 10.0, &["old", "new"], &["F1", "F2"]);
        let hist: Vec<&RunRow> = h.iter().collect();
        let r = judge(&now, &hist, &lower);
        let got: Vec<(String, ItemOutcome)> =
            r.tests.iter().map(|t| (t.id.clone(), t.outcome)).collect();
        assert_eq!(
            got,
            [
                ("old".to_string(), ItemOutcome::PreExisting),
                ("new".to_string(), ItemOutcome::New),
                ("gone".to_string(), ItemOutcome::Fixed)
            ]
        );
        assert_eq!(
            r.findings
                .iter()
                .filter(|f| f.outcome == ItemOutcome::New)
                .count(),
            1
        );
        assert_eq!(r.failures(), ["t test new", "t finding F2"]);
        assert_eq!(r.tests[1].against.as_deref(), Some("run2"));
        // No earlier run read the report: failing, but not new.
        let r = judge(&now, &[], &lower);
        assert!(r.tests.iter().all(|t| t.outcome == ItemOutcome::NoHistory));
        assert!(r.metrics.iter().all(|m| m.outcome == Outcome::New));
        assert!(r.failures().is_empty());
    }

    #[test]
    fn direction_turns_the_mark_and_a_wide_interval_is_not_evidence() {
        let h: Vec<RunRow> = (0..4).map(|i| row(i, 10.0, &[], &[])).collect();
        let hist: Vec<&RunRow> = h.iter().collect();
        let up = row(4, 12.0, &[], &[]);
        assert_eq!(
            judge(&up, &hist, &lower).metrics[0].outcome,
            Outcome::Regression
        );
        let higher = |_: &str, _: &str| Rule {
            better: Better::Higher,
            threshold: 0.05,
            declared: true,
        };
        assert_eq!(
            judge(&up, &hist, &higher).metrics[0].outcome,
            Outcome::Improvement
        );
        // 3% up with a 5% threshold: significant, but within it: no change.
        let small = row(4, 10.3, &[], &[]);
        let m = &judge(&small, &hist, &lower).metrics[0];
        assert_ne!(m.outcome, Outcome::Regression, "{m:?}");
        // Noise of ±60% around the same median: the interval spans the threshold.
        let mut noisy = row(4, 10.0, &[], &[]);
        noisy.series[0].samples = vec![4.0, 16.0, 6.0, 14.0, 10.0];
        let m = &judge(&noisy, &hist, &lower).metrics[0];
        assert_eq!(m.outcome, Outcome::NotEnoughEvidence, "{m:?}");
    }
}
