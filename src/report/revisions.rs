//! How reports state a run's revisions: "Baseline 6787628; implementation 720e8dc",
//! and for each step run on both, its tests, findings and timings in the seed PR's
//! words: "27 passed, 2 failed; both failures reproduce on baseline 6787628".

use serde::Serialize;

use super::format::{duration_ms, short_hash};
use crate::compare::stats::{Mark, TimingComparison};
use crate::evidence::record::Record;
use crate::evidence::revisions::RevisionComparison;
use crate::results::classify::{FindingsComparison, TestsComparison};
use crate::results::CaseCounts;

/// One step's comparison, in lines.
#[derive(Debug, Clone, Serialize)]
pub struct RevisionFacts {
    /// `tests` (with its other axes), and the revision when there are several.
    pub step: String,
    pub lines: Vec<String>,
}

/// "Baseline 6787628; implementation 720e8dc", or `None` without revisions.
pub fn revision_line(rec: &Record) -> Option<String> {
    let parts: Vec<String> = rec
        .run
        .revisions
        .iter()
        .map(|r| {
            let dirty = if r.dirty { " (dirty)" } else { "" };
            format!("{} {}{dirty}", r.name, short_hash(&r.commit, 7))
        })
        .collect();
    (!parts.is_empty()).then(|| {
        let s = parts.join("; ");
        let mut c = s.chars();
        c.next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default()
    })
}

fn counts_text(c: &CaseCounts) -> String {
    let mut parts = vec![format!("{} passed", c.passed)];
    for (n, what) in [
        (c.failed, "failed"),
        (c.errors, "errors"),
        (c.skipped, "skipped"),
        (c.flaky, "flaky"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    parts.join(", ")
}

/// `a`, `b` and 3 more.
fn ids(list: &[String], total: u32) -> String {
    let shown: Vec<String> = list
        .iter()
        .take(5)
        .map(|i| super::format::code(i))
        .collect();
    let more = total as usize - shown.len().min(total as usize);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Tests and findings of one side against the other (`base` names the other side).
pub fn comparison_lines(
    tests: Option<&TestsComparison>,
    findings: Option<&FindingsComparison>,
    base: &str,
) -> Vec<String> {
    tests
        .map(|t| tests_line(t, base))
        .into_iter()
        .chain(findings.map(|f| findings_line(f, base)))
        .collect()
}

fn tests_line(t: &TestsComparison, base: &str) -> String {
    let mut s = counts_text(&t.implementation);
    let failing = t.implementation.failing();
    let (new, old) = (t.totals.new, t.totals.pre_existing);
    if failing == 0 {
        s.push_str("; no failures");
    } else if new == 0 {
        let all = if old == 1 {
            "the failure reproduces"
        } else if old == 2 {
            "both failures reproduce"
        } else {
            "all failures reproduce"
        };
        s.push_str(&format!(
            "; {all} on baseline {base} ({})",
            ids(&t.pre_existing, old)
        ));
    } else {
        s.push_str(&format!(
            "; {new} new against baseline {base} ({})",
            ids(&t.new, new)
        ));
        if old > 0 {
            let verb = if old == 1 { "reproduces" } else { "reproduce" };
            s.push_str(&format!(
                ", {old} {verb} on it ({})",
                ids(&t.pre_existing, old)
            ));
        }
    }
    if t.totals.fixed > 0 {
        s.push_str(&format!(
            "; {} fixed ({})",
            t.totals.fixed,
            ids(&t.fixed, t.totals.fixed)
        ));
    }
    s.push_str(&format!(" (baseline: {})", counts_text(&t.baseline)));
    s
}

fn findings_line(f: &FindingsComparison, base: &str) -> String {
    let n = f.implementation;
    let mut s = format!("{n} finding{}", if n == 1 { "" } else { "s" });
    if n == 0 {
        s.push_str(&format!(" (baseline {base}: {})", f.baseline));
    } else if f.totals.new == 0 {
        s.push_str(&format!(", all pre-existing on baseline {base}"));
    } else {
        let shown: Vec<String> = f
            .new
            .iter()
            .take(5)
            .map(|x| match (&x.file, x.line) {
                (Some(file), Some(l)) => format!(
                    "{} in {}",
                    super::format::code(&x.rule),
                    super::format::code(&format!("{file}:{l}"))
                ),
                (Some(file), None) => format!(
                    "{} in {}",
                    super::format::code(&x.rule),
                    super::format::code(file)
                ),
                _ => super::format::code(&x.rule),
            })
            .collect();
        s.push_str(&format!(
            ": {} new against baseline {base} ({}), {} pre-existing",
            f.totals.new,
            shown.join(", "),
            f.totals.pre_existing
        ));
    }
    if f.totals.fixed > 0 {
        s.push_str(&format!("; {} fixed", f.totals.fixed));
    }
    s
}

fn timing_line(t: &TimingComparison) -> String {
    let med = |v: &[f64]| crate::compare::stats::median(v);
    let show = |x: f64| {
        if t.metric == "wall_ms" || t.metric.ends_with("_ms") {
            duration_ms(x)
        } else {
            super::format::number(x)
        }
    };
    let what = if t.metric == "wall_ms" {
        "wall time".to_string()
    } else {
        super::format::code(&t.metric)
    };
    let mut s = format!(
        "{what}: median {} against {} on the baseline (n={} and {})",
        show(med(&t.implementation)),
        show(med(&t.baseline)),
        t.implementation.len(),
        t.baseline.len()
    );
    if let (Some(r), Some((lo, hi))) = (t.ratio, t.interval) {
        s.push_str(&format!("; ratio {r:.3}, 95% interval {lo:.3}–{hi:.3}"));
    }
    if let Some(p) = t.p_value {
        s.push_str(&format!(", Mann–Whitney p = {}", super::format::number(p)));
    }
    let verdict = match t.mark {
        Mark::Worse => format!(
            "**worse** (beyond the {} noise threshold)",
            super::format::percent(t.noise)
        ),
        Mark::Better => format!(
            "**better** (beyond the {} noise threshold)",
            super::format::percent(t.noise)
        ),
        Mark::NotSignificant => format!(
            "not significant at the {} noise threshold",
            super::format::percent(t.noise)
        ),
        Mark::InsufficientSamples => "insufficient samples to tell".to_string(),
    };
    format!("{s}: {verdict}")
}

/// Each compared step's lines.
pub fn revision_facts(rec: &Record) -> Vec<RevisionFacts> {
    let base = rec
        .run
        .revisions
        .iter()
        .find(|r| r.baseline)
        .map(|r| short_hash(&r.commit, 7))
        .unwrap_or_default();
    let several = rec.run.revisions.len() > 2;
    rec.revisions_compared
        .iter()
        .map(|c: &RevisionComparison| {
            let mut lines = comparison_lines(c.tests.as_ref(), c.findings.as_ref(), &base);
            lines.extend(c.timings.iter().map(timing_line));
            RevisionFacts {
                step: if several {
                    format!("{} ({})", c.step, c.revision)
                } else {
                    c.step.clone()
                },
                lines,
            }
        })
        .filter(|f| !f.lines.is_empty())
        .collect()
}
