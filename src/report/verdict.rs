//! The run's verdict, said once and the same way in every output (the PR body, the
//! HTML page, the terminal summary, JUnit, the GitHub summary): the status word,
//! then at most one short sentence. It is read from the record's facts (each step
//! judged by `evidence::revisions::judge`), not from the text of its `reason`, so a
//! record written before reads the same.
//!
//! Failures are what made, or would have made, the run fail. A non-zero exit that
//! the step's own results files explain (pytest with only pre-existing failures,
//! ruff exiting 1 because it found anything) under `gate = "new"` is not one: it is
//! counted in one sentence, and its tests and findings are stated where the
//! revisions are compared.

use super::facts::short::Style;
use crate::evidence::revisions::{judge, Judged};
use crate::record::run::{Record, RunStatus, StepStatus};

/// How many step ids a sentence names before it counts the rest.
const NAMED: usize = 5;

/// `a`, `b` and 3 more.
fn named(ids: &[&str], style: Style) -> String {
    let shown: Vec<String> = ids.iter().take(NAMED).map(|i| style.code(i)).collect();
    match ids.len().saturating_sub(NAMED) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// The steps judged `j`, in record order.
fn judged(rec: &Record, pred: impl Fn(Judged) -> bool) -> Vec<&str> {
    rec.steps
        .iter()
        .filter(|s| judge(rec, s).is_some_and(&pred))
        .map(|s| s.id.as_str())
        .collect()
}

/// The short name of the baseline commit, when the run had one.
fn baseline(rec: &Record) -> Option<String> {
    rec.run
        .revisions
        .iter()
        .find(|r| r.baseline)
        .map(|r| super::format::short_hash(&r.commit, 7))
}

/// Failing tests the implementation no longer has, over every compared step.
fn removed_failing(rec: &Record) -> u32 {
    rec.revisions_compared
        .iter()
        .filter_map(|c| c.tests.as_ref())
        .map(|t| t.totals.removed_failing)
        .sum()
}

/// What follows the status word, or `None` when the word says it all.
pub fn why(rec: &Record, style: Style) -> Option<String> {
    let fails = judged(rec, |j| j == Judged::Fails);
    let explained = judged(rec, |j| matches!(j, Judged::Explained(_)));
    let not_gating = judged(rec, |j| j == Judged::NotGating);
    let by_steps = rec.reason.as_deref().is_none_or(|r| {
        r.starts_with("failed steps: ")
            || r.starts_with("not every step succeeded")
            || r.starts_with("gate = \"new\"")
    });
    let mut parts: Vec<String> = Vec::new();
    match rec.status {
        RunStatus::Failed if by_steps && !fails.is_empty() => {
            parts.push(format!("failed steps: {}", named(&fails, style)));
        }
        RunStatus::Failed | RunStatus::Interrupted => {
            let r = rec.reason.as_deref()?;
            if !by_steps {
                return Some(style.text(r));
            }
            let other: Vec<&str> = rec
                .steps
                .iter()
                .filter(|s| !s.status.is_success() && s.status != StepStatus::Skipped)
                .map(|s| s.id.as_str())
                .collect();
            parts.push(if other.is_empty() {
                style.text(r)
            } else {
                format!("steps that did not succeed: {}", named(&other, style))
            });
        }
        RunStatus::Succeeded => {
            if !explained.is_empty() || !not_gating.is_empty() {
                let against = baseline(rec)
                    .map(|b| format!(" against baseline {b}"))
                    .unwrap_or_default();
                parts.push(format!(
                    "nothing new fails{against} under {}",
                    style.code("gate = \"new\"")
                ));
            } else if let Some(r) = rec.reason.as_deref().filter(|_| !by_steps) {
                parts.push(style.text(r));
            }
        }
    }
    if !not_gating.is_empty() {
        parts.push(format!(
            "{} failed on the baseline without a report that explains it (not gating)",
            named(&not_gating, style)
        ));
    }
    let removed = removed_failing(rec);
    if removed > 0 {
        parts.push(style.bold(&format!(
            "{removed} failing test{} removed",
            if removed == 1 { "" } else { "s" }
        )));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// "4 non-zero exits are explained by their results files and are not new: not
/// failures (`tests`, `lint` on both revisions)"; `None` when there are none.
pub fn explained(rec: &Record, style: Style) -> Option<String> {
    let ids = judged(rec, |j| matches!(j, Judged::Explained(_)));
    let n = ids.len();
    (n > 0).then(|| {
        format!(
            "{n} step{} exited non-zero as {} results files explain, with no failure new against the baseline: not failures ({})",
            if n == 1 { "" } else { "s" },
            if n == 1 { "its" } else { "their" },
            named(&ids, style)
        )
    })
}

/// The verdict in one plain line: "succeeded", or "failed: failed steps: `a`".
pub fn line(rec: &Record, style: Style) -> String {
    match why(rec, style) {
        Some(w) => format!("{}: {w}", rec.status.as_str()),
        None => rec.status.as_str().to_string(),
    }
}
