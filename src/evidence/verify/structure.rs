//! What the record says of itself: steps, attempts and allocations that agree.

use super::*;

/// (g) the record against itself: steps declared vs recorded, references to steps.
pub(super) fn check_structure(rec: &Record, rep: &mut VerifyReport) {
    let declared: Vec<&str> = rec.run.steps.iter().map(|d| d.id.as_str()).collect();
    let declared_set: BTreeSet<&str> = declared.iter().copied().collect();
    let mut recorded: BTreeSet<&str> = BTreeSet::new();
    for s in &rec.steps {
        if !recorded.insert(s.id.as_str()) {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("step `{}` is recorded twice", s.id),
            );
        }
        if !declared_set.contains(s.id.as_str()) {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!(
                    "step `{}` is recorded but not declared in run.steps (added)",
                    s.id
                ),
            );
        }
    }
    for d in &declared {
        if !recorded.contains(d) {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("step `{d}` is declared in run.steps but has no record (dropped)"),
            );
        }
    }
    for c in &rec.comparisons {
        if !recorded.contains(c.step.as_str()) {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!(
                    "comparison `{}` names step `{}`, which is not recorded",
                    c.name, c.step
                ),
            );
        }
    }
    for f in &rec.failures {
        if !recorded.contains(f.step.as_str()) {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("a failure names step `{}`, which is not recorded", f.step),
            );
        }
    }
    check_allocations(rec, &recorded, rep);
    for s in &rec.steps {
        // A reused step ran no attempt: its outputs are the restored ones.
        if s.status == crate::evidence::record::StepStatus::Reused {
            if !s.attempts.is_empty() || s.cache.as_ref().is_none_or(|c| c.reused_from.is_none()) {
                rep.add(
                    FindingKind::Malformed,
                    "record.json",
                    format!(
                        "step `{}` is reused but has attempts, or no entry it came from",
                        s.id
                    ),
                );
            }
            continue;
        }
        // A step's outputs are a copy of its last measured attempt's.
        let last = s.attempts.iter().rev().find(|a| !a.warmup);
        let expected: &[OutputRecord] = last.map(|a| a.outputs.as_slice()).unwrap_or(&[]);
        if s.outputs != expected {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!(
                    "step `{}`: its outputs differ from those of its last measured attempt",
                    s.id
                ),
            );
        }
    }
}

/// The allocation invariants a reviewer relies on: each names a recorded step and a
/// grant time; when the release audit passed, each has a release time; and no two
/// allocations of one device core overlap in time (two runs, or two steps, never
/// owned one core at once).
pub(super) fn check_allocations(rec: &Record, recorded: &BTreeSet<&str>, rep: &mut VerifyReport) {
    use chrono::{DateTime, Utc};
    let time = |s: &str| {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    };
    let audit_passed = rec.release_audit.as_ref().is_some_and(|a| a.passed);
    /// (device, core, granted, released, step).
    type Held<'a> = (&'a str, u32, DateTime<Utc>, Option<DateTime<Utc>>, &'a str);
    let mut held: Vec<Held<'_>> = Vec::new();
    for a in &rec.allocations {
        let what = format!("allocation {} of step `{}`", a.lease, a.step);
        if !recorded.contains(a.step.as_str()) {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("{what}: the step is not recorded"),
            );
        }
        let Some(granted) = time(&a.granted_at) else {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("{what}: no readable grant time ({:?})", a.granted_at),
            );
            continue;
        };
        let released = a.released_at.as_deref().and_then(time);
        if audit_passed && released.is_none() {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!("{what}: never released, yet the release audit passed"),
            );
        }
        for &core in &a.cores {
            held.push((a.device.as_str(), core, granted, released, a.step.as_str()));
        }
    }
    held.sort_by(|x, y| (x.0, x.1, x.2).cmp(&(y.0, y.1, y.2)));
    for w in held.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let overlap = a.0 == b.0 && a.1 == b.1 && a.3.is_none_or(|end| b.2 < end);
        if overlap {
            rep.add(
                FindingKind::Malformed,
                "record.json",
                format!(
                    "device {} core {} is held by steps `{}` and `{}` at once",
                    a.0, a.1, a.4, b.4
                ),
            );
        }
    }
}
