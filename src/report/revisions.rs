//! How reports state a run's revisions: "Baseline 6787628; implementation 720e8dc",
//! and for each step run on both, its tests, findings and timings in the seed PR's
//! words: "27 passed, 2 failed; both failures reproduce on baseline 6787628".

use std::collections::BTreeMap;

use serde::Serialize;

use super::facts::short::Style;
use super::format::{duration_ms, short_hash};
use crate::evidence::revisions::RevisionComparison;
use crate::record::results::CaseCounts;
use crate::record::results::{FindingsComparison, TestsComparison};
use crate::record::run::Record;
use crate::record::timing::{Mark, TimingComparison};

/// One step's comparison, in lines.
#[derive(Debug, Clone, Serialize)]
pub struct RevisionFacts {
    /// `tests` (with its other axes), and the revision when there are several.
    pub step: String,
    /// In the style asked for (Markdown: code spans, bold marks; plain: as is).
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

/// "27 passed, 2 failed": the cases as JUnit lists them; with subtests, also the
/// failures as pytest's own line counts them (each failed subtest once).
pub fn counts_text(c: &CaseCounts) -> String {
    let mut parts = vec![format!("{} passed", c.passed)];
    for (n, one, many) in [
        (c.failed, "failed", "failed"),
        (c.errors, "error", "errors"),
        (c.skipped, "skipped", "skipped"),
        (c.flaky, "flaky", "flaky"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {}", if n == 1 { one } else { many }));
        }
    }
    let mut s = parts.join(", ");
    if c.subtest_failures > 0 {
        s.push_str(&format!(
            " ({} counting each failed subtest, as pytest does)",
            c.failed_as_pytest_counts()
        ));
    }
    s
}

/// How a test id reads to someone who would run it again: the runner's own form
/// where the record has it (a pytest node id), else the id as the report gave it.
pub type Shown<'a> = &'a dyn Fn(&str) -> String;

/// `a`, `b` and 3 more.
fn ids(list: &[String], total: u32, style: Style, shown: Shown<'_>) -> String {
    let listed: Vec<String> = list.iter().take(5).map(|i| style.code(&shown(i))).collect();
    let more = total as usize - listed.len().min(total as usize);
    if more > 0 {
        format!("{} and {more} more", listed.join(", "))
    } else {
        listed.join(", ")
    }
}

/// Tests and findings of one side against the other (`base` names the other side).
pub fn comparison_lines(
    tests: Option<&TestsComparison>,
    findings: Option<&FindingsComparison>,
    base: &str,
    style: Style,
    shown: Shown<'_>,
) -> Vec<String> {
    tests
        .map(|t| tests_line(t, base, style, shown))
        .into_iter()
        .chain(findings.map(|f| findings_line(f, base, style)))
        .collect()
}

fn tests_line(t: &TestsComparison, base: &str, style: Style, shown: Shown<'_>) -> String {
    let mut s = counts_text(&t.implementation);
    let failing = t.implementation.failing();
    let (new, old) = (t.totals.new, t.totals.pre_existing);
    let list = |l: &[String], n: u32| ids(l, n, style, shown);
    if failing == 0 {
        s.push_str("; no failures");
    } else if new == 0 && t.unclassified > 0 {
        s.push_str(&format!(
            "; of the failures kept, {old} reproduce on baseline {base} ({})",
            list(&t.pre_existing, old)
        ));
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
            list(&t.pre_existing, old)
        ));
    } else {
        s.push_str(&format!(
            "; {} against baseline {base} ({})",
            style.bold(&format!("{new} new")),
            list(&t.new, new)
        ));
        if old > 0 {
            let verb = if old == 1 { "reproduces" } else { "reproduce" };
            s.push_str(&format!(
                ", {old} {verb} on it ({})",
                list(&t.pre_existing, old)
            ));
        }
    }
    if t.totals.fixed > 0 {
        s.push_str(&format!(
            "; {} fixed ({})",
            t.totals.fixed,
            list(&t.fixed, t.totals.fixed)
        ));
    }
    s.push_str(&removed_text(t, style, shown));
    s.push_str(&format!("; on the baseline {}", counts_text(&t.baseline)));
    s.push_str(&unclassified_text(t.unclassified, "case"));
    s
}

/// "; 1,234 cases beyond what the record keeps not classified (...)".
fn unclassified_text(n: u32, what: &str) -> String {
    if n == 0 {
        return String::new();
    }
    format!(
        "; {n} {what}{} beyond what the record keeps not classified (the whole files are in the record folder)",
        if n == 1 { "" } else { "s" }
    )
}

/// "; 1 failing test removed: `tests/x.py::T::test_y`": cases the baseline has and
/// the implementation does not, failing ones by name.
fn removed_text(t: &TestsComparison, style: Style, shown: Shown<'_>) -> String {
    let (all, failing) = (t.totals.removed, t.totals.removed_failing);
    let mut s = String::new();
    if failing > 0 {
        s.push_str(&format!(
            "; {}: {}",
            style.bold(&format!(
                "{failing} failing test{} removed",
                if failing == 1 { "" } else { "s" }
            )),
            ids(&t.removed_failing, failing, style, shown)
        ));
    }
    let passing = all - failing.min(all);
    if passing > 0 {
        s.push_str(&format!(
            "; {passing} {}test{} removed",
            if failing > 0 { "other " } else { "" },
            if passing == 1 { "" } else { "s" }
        ));
    }
    s
}

fn findings_line(f: &FindingsComparison, base: &str, style: Style) -> String {
    let n = f.implementation;
    let mut s = format!("{n} finding{}", if n == 1 { "" } else { "s" });
    if n == 0 {
        s.push_str(&format!(" (baseline {base}: {})", f.baseline));
    } else if f.totals.new == 0 && f.unclassified > 0 {
        s.push_str(&format!(
            ", of those kept {} pre-existing on baseline {base}",
            f.totals.pre_existing
        ));
    } else if f.totals.new == 0 {
        s.push_str(&format!(", all pre-existing on baseline {base}"));
    } else {
        let listed: Vec<String> = f
            .new
            .iter()
            .take(5)
            .map(|x| match (&x.file, x.line) {
                (Some(file), Some(l)) => format!(
                    "{} in {}",
                    style.code(&x.rule),
                    style.code(&format!("{file}:{l}"))
                ),
                (Some(file), None) => {
                    format!("{} in {}", style.code(&x.rule), style.code(file))
                }
                _ => style.code(&x.rule),
            })
            .collect();
        s.push_str(&format!(
            ": {} against baseline {base} ({}), {} pre-existing",
            style.bold(&format!("{} new", f.totals.new)),
            listed.join(", "),
            f.totals.pre_existing
        ));
    }
    if f.totals.fixed > 0 {
        s.push_str(&format!("; {} fixed", f.totals.fixed));
    }
    s.push_str(&unclassified_text(f.unclassified, "finding"));
    s
}

fn timing_line(t: &TimingComparison, style: Style) -> String {
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
        style.code(&t.metric)
    };
    let mut s = format!(
        "{what}: median {} against {} on the baseline (n={} and {})",
        show(med(&t.implementation)),
        show(med(&t.baseline)),
        t.implementation.len(),
        t.baseline.len()
    );
    let ratio = super::format::ratio;
    if let (Some(r), Some((lo, hi))) = (t.ratio, t.interval) {
        s.push_str(&format!(
            "; ratio {}, 95% interval {}–{}",
            ratio(r),
            ratio(lo),
            ratio(hi)
        ));
    }
    if let Some(p) = t.p_value {
        s.push_str(&format!(", Mann–Whitney p = {}", super::format::number(p)));
    }
    let noise = super::format::percent(t.noise);
    let verdict = match t.mark {
        Mark::Worse => format!(
            "{} (beyond the {noise} noise threshold)",
            style.bold("worse")
        ),
        Mark::Better => format!(
            "{} (beyond the {noise} noise threshold)",
            style.bold("better")
        ),
        Mark::NotSignificant => format!("not significant at the {noise} noise threshold"),
        Mark::InsufficientSamples => "insufficient samples to tell".to_string(),
    };
    format!("{s}: {verdict}")
}

/// The runner's form of each test id the record knows (a pytest node id, kept with
/// the case when its file was found), for every step the record compared.
fn runner_ids(rec: &Record) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for s in &rec.steps {
        let Some(j) = crate::evidence::revisions::results_of(s).and_then(|r| r.junit.as_ref())
        else {
            continue;
        };
        for c in &j.cases {
            if let Some(n) = &c.node_id {
                out.insert(c.id.clone(), n.clone());
            }
        }
    }
    out
}

/// Each compared step's lines, in `style`.
pub fn revision_facts(rec: &Record, style: Style) -> Vec<RevisionFacts> {
    let base = rec
        .run
        .revisions
        .iter()
        .find(|r| r.baseline)
        .map(|r| short_hash(&r.commit, 7))
        .unwrap_or_default();
    let several = rec.run.revisions.len() > 2;
    let node_ids = runner_ids(rec);
    let shown = |id: &str| node_ids.get(id).cloned().unwrap_or_else(|| id.to_string());
    rec.revisions_compared
        .iter()
        .map(|c: &RevisionComparison| {
            let mut lines =
                comparison_lines(c.tests.as_ref(), c.findings.as_ref(), &base, style, &shown);
            lines.extend(c.timings.iter().map(|t| timing_line(t, style)));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_the_record_left_out_are_said_not_called_pre_existing() {
        let t = TestsComparison {
            implementation: CaseCounts {
                tests: 2,
                failed: 1,
                passed: 1,
                ..CaseCounts::default()
            },
            pre_existing: vec!["a".into()],
            totals: crate::record::results::ClassTotals {
                pre_existing: 1,
                ..Default::default()
            },
            unclassified: 7,
            ..TestsComparison::default()
        };
        let shown = |i: &str| i.to_string();
        let lines = comparison_lines(Some(&t), None, "b0", Style::Plain, &shown);
        assert!(
            lines[0].contains("of the failures kept, 1 reproduce"),
            "{lines:?}"
        );
        assert!(!lines[0].contains("all failures"), "{lines:?}");
        assert!(lines[0].contains("7 cases beyond what the record keeps not classified"));
    }

    #[test]
    fn counts_read_as_words_and_say_pytests_own_count() {
        let c = CaseCounts {
            tests: 7,
            passed: 2,
            failed: 3,
            errors: 1,
            skipped: 1,
            flaky: 0,
            subtest_failures: 1,
        };
        assert_eq!(
            counts_text(&c),
            "2 passed, 3 failed, 1 error, 1 skipped (4 counting each failed subtest, as pytest does)"
        );
    }
}
