//! Two revisions' results side by side, per test case and per finding: `new` (fails
//! or appears only on the implementation), `pre-existing` (the same on both), `fixed`
//! (fails or appears only on the baseline), `passing`; and for test cases `removed`
//! (on the baseline, absent on the implementation: a failing test deleted is not a
//! fix). `diff` of two runs uses the same rules, the earlier run as the baseline.

use std::collections::{BTreeMap, BTreeSet};

use super::{Finding, JunitResults, Outcome, SarifResults};
pub use crate::record::results::{ClassTotals, FindingsComparison, TestsComparison};

/// At most this many ids are listed per class; the counts cover all.
pub const MAX_LISTED: usize = 1000;

fn push<T>(list: &mut Vec<T>, total: &mut u32, x: T) {
    *total += 1;
    if list.len() < MAX_LISTED {
        list.push(x);
    }
}

/// Classify test cases by id. A case reported twice (parametrised reruns) keeps its
/// worst outcome.
pub fn tests(baseline: &JunitResults, implementation: &JunitResults) -> TestsComparison {
    fn by_id(r: &JunitResults) -> BTreeMap<&str, Outcome> {
        let mut m: BTreeMap<&str, Outcome> = BTreeMap::new();
        for c in &r.cases {
            m.entry(c.id.as_str())
                .and_modify(|o| {
                    if c.outcome.failing() {
                        *o = c.outcome;
                    }
                })
                .or_insert(c.outcome);
        }
        m
    }
    let base = by_id(baseline);
    let imp = by_id(implementation);
    let mut out = TestsComparison {
        baseline: baseline.counts,
        implementation: implementation.counts,
        unclassified: baseline.left_out.saturating_add(implementation.left_out),
        ..TestsComparison::default()
    };
    let passes = |o: Outcome| matches!(o, Outcome::Passed | Outcome::Flaky);
    for (id, &o) in &imp {
        let b = base.get(id).copied();
        if o.failing() {
            if b.is_some_and(Outcome::failing) {
                push(
                    &mut out.pre_existing,
                    &mut out.totals.pre_existing,
                    id.to_string(),
                );
            } else {
                push(&mut out.new, &mut out.totals.new, id.to_string());
            }
        } else if passes(o) {
            match b {
                Some(b) if b.failing() => {
                    push(&mut out.fixed, &mut out.totals.fixed, id.to_string())
                }
                Some(b) if passes(b) => out.passing += 1,
                _ => {}
            }
        }
    }
    for (id, &b) in base.iter().filter(|(id, _)| !imp.contains_key(*id)) {
        push(&mut out.removed, &mut out.totals.removed, id.to_string());
        if b.failing() {
            push(
                &mut out.removed_failing,
                &mut out.totals.removed_failing,
                id.to_string(),
            );
        }
    }
    out
}

/// Classify findings by rule, file (relative to each side's `root`, the revision's
/// folder) and fingerprint; a multiset: two identical findings on the implementation
/// against one on the baseline are one new.
pub fn findings(
    baseline: &SarifResults,
    implementation: &SarifResults,
    roots: (&str, &str),
) -> FindingsComparison {
    let base: Vec<Finding> = baseline
        .findings
        .iter()
        .map(|f| f.relative_to(roots.0))
        .collect();
    let imp: Vec<Finding> = implementation
        .findings
        .iter()
        .map(|f| f.relative_to(roots.1))
        .collect();
    let mut left: BTreeMap<(String, String, String), u32> = BTreeMap::new();
    for f in &base {
        *left.entry(f.key()).or_default() += 1;
    }
    let mut out = FindingsComparison {
        baseline: baseline.count,
        implementation: implementation.count,
        unclassified: baseline.left_out.saturating_add(implementation.left_out),
        ..FindingsComparison::default()
    };
    for f in &imp {
        match left.get_mut(&f.key()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                push(
                    &mut out.pre_existing,
                    &mut out.totals.pre_existing,
                    f.clone(),
                );
            }
            _ => push(&mut out.new, &mut out.totals.new, f.clone()),
        }
    }
    let mut seen: BTreeSet<(String, String, String)> = BTreeSet::new();
    for f in &base {
        let k = f.key();
        if left.get(&k).is_some_and(|n| *n > 0) && seen.insert(k.clone()) {
            for _ in 0..left[&k] {
                push(&mut out.fixed, &mut out.totals.fixed, f.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{CaseCounts, TestCase};
    use super::*;

    fn report(cases: &[(&str, Outcome)]) -> JunitResults {
        let mut counts = CaseCounts::default();
        let cases = cases
            .iter()
            .map(|(id, o)| {
                counts.add(*o);
                TestCase {
                    id: id.to_string(),
                    suite: String::new(),
                    name: id.to_string(),
                    outcome: *o,
                    message: None,
                    time_s: None,
                    reruns: 0,
                    failures: 0,
                    node_id: None,
                }
            })
            .collect();
        JunitResults {
            cases,
            counts,
            ..JunitResults::default()
        }
    }

    #[test]
    fn failures_are_new_pre_existing_or_fixed() {
        use Outcome::*;
        let base = report(&[
            ("a", Failed),
            ("b", Passed),
            ("c", Error),
            ("d", Passed),
            ("e", Skipped),
        ]);
        let imp = report(&[
            ("a", Failed),
            ("b", Failed),
            ("c", Passed),
            ("d", Flaky),
            ("e", Failed),
            ("f", Error),
        ]);
        let c = tests(&base, &imp);
        assert_eq!(c.pre_existing, ["a"]);
        assert_eq!(c.new, ["b", "e", "f"]);
        assert_eq!(c.fixed, ["c"]);
        assert_eq!(c.passing, 1);
        assert_eq!(
            c.totals,
            ClassTotals {
                new: 3,
                pre_existing: 1,
                fixed: 1,
                ..ClassTotals::default()
            }
        );
        assert_eq!(c.implementation.failing(), 4);
        assert!(c.removed.is_empty());
    }

    #[test]
    fn cases_the_record_left_out_are_unclassified_and_said() {
        use Outcome::*;
        let base = report(&[("a", Failed)]);
        let mut imp = report(&[("a", Failed)]);
        imp.left_out = 7;
        let c = tests(&base, &imp);
        assert_eq!(c.totals.new, 0);
        assert_eq!(c.unclassified, 7);
    }

    #[test]
    fn a_failing_test_deleted_is_removed_not_fixed() {
        use Outcome::*;
        let base = report(&[("a", Failed), ("b", Passed), ("c", Passed)]);
        let imp = report(&[("c", Passed)]);
        let c = tests(&base, &imp);
        assert_eq!(c.removed, ["a", "b"]);
        assert_eq!(c.removed_failing, ["a"]);
        assert_eq!((c.totals.removed, c.totals.removed_failing), (2, 1));
        assert!(c.fixed.is_empty() && c.new.is_empty() && c.pre_existing.is_empty());
    }

    #[test]
    fn findings_match_as_a_multiset() {
        let f = |rule: &str, fp: &str| Finding {
            rule: rule.into(),
            file: Some("a.py".into()),
            line: Some(1),
            level: None,
            message: String::new(),
            fingerprint: fp.into(),
        };
        let base = SarifResults {
            count: 2,
            findings: vec![f("F401", "x"), f("E501", "y")],
            ..Default::default()
        };
        let imp = SarifResults {
            count: 3,
            findings: vec![f("F401", "x"), f("F401", "x"), f("S105", "z")],
            ..Default::default()
        };
        let c = findings(&base, &imp, ("", ""));
        assert_eq!(
            c.totals,
            ClassTotals {
                new: 2,
                pre_existing: 1,
                fixed: 1,
                ..ClassTotals::default()
            }
        );
        assert_eq!(c.fixed[0].rule, "E501");
        // Absolute URIs of two checkouts match once made relative to each.
        let at = |root: &str| Finding {
            file: Some(format!("file://{root}/src/a.py")),
            ..f("F401", "x")
        };
        let b = SarifResults {
            count: 1,
            findings: vec![at("/w/revisions/baseline")],
            ..Default::default()
        };
        let i = SarifResults {
            count: 1,
            findings: vec![at("/w/revisions/implementation")],
            ..Default::default()
        };
        let c = findings(
            &b,
            &i,
            ("/w/revisions/baseline", "/w/revisions/implementation"),
        );
        assert_eq!(
            c.totals,
            ClassTotals {
                new: 0,
                pre_existing: 1,
                fixed: 0,
                ..ClassTotals::default()
            }
        );
        assert_eq!(c.pre_existing[0].file.as_deref(), Some("src/a.py"));
    }
}

/// A step's baseline cell and one of its other revisions' cells, with the same
/// values on every other axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionPair {
    /// The step with its other axes: `tests`, `prefill[tokens=2048]`.
    pub label: String,
    pub baseline: String,
    pub implementation: String,
    /// The implementation side's revision name.
    pub revision: String,
}

/// Pairs of `(id, template, cell)` steps that differ only in their `revision`.
pub fn revision_pairs<'a>(
    steps: impl IntoIterator<Item = (&'a str, &'a str, &'a [(String, String)])>,
    baseline: &str,
) -> Vec<RevisionPair> {
    // Per label: the baseline cell's id, and each other (id, revision).
    type Sides = (Option<String>, Vec<(String, String)>);
    let mut by_rest: BTreeMap<String, Sides> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for (id, template, cell) in steps {
        let Some(rev) = cell
            .iter()
            .find(|(a, _)| a == "revision")
            .map(|(_, v)| v.clone())
        else {
            continue;
        };
        let rest: Vec<(String, String)> = cell
            .iter()
            .filter(|(a, _)| a != "revision")
            .cloned()
            .collect();
        let label = crate::plan::matrix::cell_id(template, &rest);
        if !by_rest.contains_key(&label) {
            order.push(label.clone());
        }
        let e = by_rest.entry(label).or_default();
        if rev == baseline {
            e.0 = Some(id.to_string());
        } else {
            e.1.push((id.to_string(), rev));
        }
    }
    let mut out = Vec::new();
    for label in order {
        let (Some(base), others) = by_rest.remove(&label).unwrap_or_default() else {
            continue;
        };
        for (id, rev) in others {
            out.push(RevisionPair {
                label: label.clone(),
                baseline: base.clone(),
                implementation: id,
                revision: rev,
            });
        }
    }
    out
}
