//! The sentences the short Verification section and the terminal summary say of
//! one step: a prefill's repeats, timing and shape; a handoff's outputs, slots and
//! relative RMS; a check that did not pass. [`super::short`] assembles them.

use super::short::Style;
#[allow(unused_imports)]
use super::*;

/// The step a cell step was made from (`prefill` for `prefill[tokens=2048]`).
pub(super) fn base<'a>(rec: &'a Record, id: &'a str) -> &'a str {
    rec.run
        .steps
        .iter()
        .find(|d| d.id == id)
        .and_then(|d| d.template.as_deref())
        .unwrap_or(id)
}

/// A check's name without the cell suffix its cell step gave it (` [tokens=2048]`).
pub(super) fn check_name<'a>(rec: &Record, c: &'a CheckRecord) -> &'a str {
    let cell = cell_of_id(rec, &c.step);
    if cell.is_empty() {
        return &c.name;
    }
    let inner: Vec<String> = cell
        .iter()
        .map(|v| format!("{}={}", v.axis, v.value))
        .collect();
    c.name
        .strip_suffix(&format!(" [{}]", inner.join(",")))
        .unwrap_or(&c.name)
}

/// "KV" for `kv.safetensors`, "logits" for `logits.npy`: a file's stem, short stems
/// (acronyms) in capitals.
pub(super) fn stem_label(file: &str) -> String {
    let file = file.split(':').next().unwrap_or(file);
    let stem = file
        .rsplit('/')
        .next()
        .unwrap_or(file)
        .split('.')
        .next()
        .unwrap_or(file);
    if stem.chars().count() <= 2 {
        stem.to_uppercase()
    } else {
        stem.to_string()
    }
}

/// "failed (attempt 2 exited with code 1): " before a step's facts when it did not
/// succeed.
pub(super) fn status_prefix(rec: &Record, s: &StepRecord, style: Style) -> String {
    if s.status.is_success() {
        return String::new();
    }
    let status = style.bold(&status_text(rec, s));
    match &s.reason {
        Some(r) => format!("{status} ({}); ", style.text(r)),
        None => format!("{status}; "),
    }
}

/// A check that did not pass, in words: its value, against what, or why it could
/// not run.
pub(super) fn failed_check(c: &CheckRecord, style: Style) -> String {
    let what = match &c.error {
        Some(e) => format!("could not run ({})", style.text(e)),
        None => format!(
            "{} {} against {}",
            style.code(c.metric.as_str()),
            style.text(&check_value::of(c, Words::Bare)),
            style.text(&check_value::threshold(c.metric, c.threshold.as_ref()))
        ),
    };
    format!("{} {}: {what}", style.fail(), style.text(&c.name))
}

/// A check in one clause, with FAIL where it did not pass; in a cell's line its
/// name loses the cell suffix the line already says.
pub(super) fn generic_clause(rec: &Record, c: &CheckRecord, style: Style) -> String {
    clause(check_name(rec, c), c, style)
}

pub(super) fn clause(name: &str, c: &CheckRecord, style: Style) -> String {
    // A yes/no check reads as words, never a bare `true`: "logits exact",
    // "tokens match", "tokens differ (FAIL)".
    if let (None, crate::record::CheckValue::Verdict(b)) = (&c.error, &c.value) {
        let said = ["exact", "match", "identical", "equal", "same"]
            .iter()
            .any(|w| name.to_lowercase().contains(w));
        return match (*b, c.passed) {
            (true, true) if said => style.text(name),
            (true, true) => format!("{} match", style.text(name)),
            (v, passed) => format!(
                "{}: {}{}",
                style.text(name),
                if v { "match" } else { "differ" },
                if passed {
                    String::new()
                } else {
                    format!(" ({})", style.fail())
                }
            ),
        };
    }
    let v = match &c.error {
        Some(e) => format!("could not run ({})", style.text(e)),
        None => style.text(&check_value::of(c, Words::Bare)),
    };
    let mark = if c.passed {
        String::new()
    } else {
        format!(" ({})", style.fail())
    };
    format!("{}: {v}{mark}", style.text(name))
}

/// A prefill step's repeats, timing and shape in one sentence.
pub(super) fn prefill_parts(
    rec: &Record,
    attr: &Attribution,
    s: &StepRecord,
    style: Style,
) -> String {
    let mut parts = repeat_clauses(rec, attr, s, style);
    parts.extend(timing_clause(rec, s, style));
    for c in checks_for(rec, attr, |c, i| {
        c.metric == Metric::Shape && i.actual.contains(&s.id)
    }) {
        parts.push(shape_clause(attr, c, style));
    }
    // Checks the clauses above do not state, one clause each.
    for c in checks_for(rec, attr, |c, i| {
        i.actual.contains(&s.id)
            && !matches!(c.metric, Metric::Finite | Metric::Shape)
            && !(c.metric == Metric::BitExact && i.across.contains(&s.id))
    }) {
        parts.push(generic_clause(rec, c, style));
    }
    format!("{}{}", status_prefix(rec, s, style), parts.join("; "))
}

/// "3 finite, bit-exact KV/logits repeats": passing bit-exact checks over the same
/// number of repeats in one clause, finiteness folded in; what did not pass, each on
/// its own.
pub(super) fn repeat_clauses(
    rec: &Record,
    attr: &Attribution,
    s: &StepRecord,
    style: Style,
) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    let finite: Vec<&CheckRecord> = checks_for(rec, attr, |c, i| {
        c.metric == Metric::Finite && i.actual.contains(&s.id)
    });
    let all_finite = !finite.is_empty() && finite.iter().all(|c| c.passed);
    let mut exact: Vec<(u64, Vec<String>)> = Vec::new();
    for c in checks_for(rec, attr, |c, i| {
        c.metric == Metric::BitExact && i.across.contains(&s.id)
    }) {
        match (c.found(), c.passed, &c.error) {
            (
                Some(CheckDetail::BitExactAcross(AcrossDetail {
                    files,
                    identical_to_first,
                    ..
                })),
                true,
                None,
            ) if identical_to_first == files => {
                let label = stem_label(
                    &attr
                        .of(c)
                        .actual_file
                        .unwrap_or_else(|| check_name(rec, c).to_string()),
                );
                match exact.iter_mut().find(|(n, _)| n == files) {
                    Some((_, ls)) => ls.push(label),
                    None => exact.push((*files, vec![label])),
                }
            }
            (Some(CheckDetail::BitExactAcross(d)), _, None) => parts.push(format!(
                "{}: {} of {} repeats identical to the first ({})",
                style.text(check_name(rec, c)),
                d.identical_to_first,
                d.files,
                style.fail()
            )),
            _ => parts.push(generic_clause(rec, c, style)),
        }
    }
    for (i, (n, labels)) in exact.iter().enumerate() {
        let finite_word = if i == 0 && all_finite { "finite, " } else { "" };
        parts.push(format!(
            "{n} {finite_word}bit-exact {} repeats",
            style.text(&labels.join("/"))
        ));
    }
    for c in finite.iter().filter(|c| exact.is_empty() || !c.passed) {
        parts.push(match c.found() {
            Some(CheckDetail::Finite(FiniteDetail {
                nan, inf, elements, ..
            })) => format!(
                "{} of {elements} values finite ({nan} NaN, {inf} Inf{})",
                elements.saturating_sub(*nan).saturating_sub(*inf),
                if c.passed {
                    String::new()
                } else {
                    format!("; {}", style.fail())
                }
            ),
            _ => generic_clause(rec, c, style),
        });
    }
    parts
}

/// "KV shape [32,8,2048,8]", with what was expected when it did not match.
pub(super) fn shape_clause(attr: &Attribution, c: &CheckRecord, style: Style) -> String {
    let label = stem_label(&attr.of(c).actual_file.unwrap_or_default());
    let label = if label.is_empty() {
        String::new()
    } else {
        format!("{} ", style.text(&label))
    };
    let mark = if c.passed {
        String::new()
    } else {
        format!(
            " ({}: expected {})",
            style.fail(),
            style.code(&check_value::threshold(c.metric, c.threshold.as_ref()))
        )
    };
    format!(
        "{label}shape {}{mark}",
        style.code(&json_value(&c.value.to_json()))
    )
}

/// "warm prefill 1194–1240 ms (prefill_ms, n=3)": the plan's headline metric, else
/// wall time, over the measured repeats.
pub(super) fn timing_clause(rec: &Record, s: &StepRecord, style: Style) -> Option<String> {
    let warm = rec
        .run
        .steps
        .iter()
        .find(|d| d.id == s.id)
        .is_some_and(|d| d.warmup > 0);
    let what = format!("{}{}", if warm { "warm " } else { "" }, s.kind);
    let metrics = crate::report::metrics::of_step(rec, s);
    // The plan's headline, else the workload's own timing of what the step is
    // (`prefill_ms` for a prefill step): the seed quotes it, not process wall time.
    let own = [format!("{}_ms", base(rec, &s.id)), format!("{}_ms", s.kind)];
    let chosen = metrics
        .iter()
        .find(|m| m.headline)
        .or_else(|| metrics.iter().find(|m| own.contains(&m.name)));
    let (range, name, n, note) = match chosen {
        Some(m) => {
            let v = |x| crate::report::metrics::value_text(&m.name, x, &m.stats);
            let range = if m.stats.n > 1 && m.stats.min != m.stats.max {
                let bare = v(m.stats.min);
                let bare = bare
                    .strip_suffix(unit_suffix(&v(m.stats.max), &bare))
                    .unwrap_or(&bare)
                    .to_string();
                format!("{bare}–{}", v(m.stats.max))
            } else {
                v(m.stats.median)
            };
            (
                range,
                m.name.clone(),
                m.stats.n,
                crate::report::metrics::dispersion_words(m),
            )
        }
        None => {
            let st = s.wall_ms?;
            let range = if st.n > 1 {
                wall_range(&st)
            } else {
                duration_ms(st.median)
            };
            (range, String::new(), st.n, None)
        }
    };
    // A metric is an identifier, in a code span; wall time is words.
    let name = if name.is_empty() {
        "wall time".to_string()
    } else {
        style.code(&name)
    };
    let note = note
        .map(|d| format!("; {}", style.text(&d)))
        .unwrap_or_default();
    Some(format!(
        "{} {} ({}, n={n}){note}",
        style.text(&what),
        style.text(&range),
        name
    ))
}

/// The unit both ends of a range share (" ms" of "1194 ms" and "1240 ms"), so that
/// it is said once.
pub(super) fn unit_suffix<'a>(hi: &'a str, lo: &str) -> &'a str {
    let unit = hi.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    if !unit.is_empty() && lo.ends_with(unit) {
        unit
    } else {
        ""
    }
}

/// A handoff's outputs against the reference, its slots and relative RMS in one
/// line: "`handoff-atom` on sim-atom0: diverges at token 14 of 32, margin 0.0042
/// against 0.0016; relative RMS K/V/first_logits 0.17%/0.17%/0.54%".
pub(super) fn handoff_line(
    rec: &Record,
    attr: &Attribution,
    s: &StepRecord,
    style: Style,
    in_cell: bool,
) -> String {
    let id = if in_cell { base(rec, &s.id) } else { &s.id };
    let mine = checks_for(rec, attr, |_, i| i.actual.contains(&s.id));
    let mut parts: Vec<String> = Vec::new();
    for c in mine.iter().filter(|c| c.metric == Metric::FirstDivergence) {
        parts.push(divergence_clause(rec, c, style));
    }
    for c in mine.iter().filter(|c| c.metric == Metric::SlotsExact) {
        parts.push(slots_clause(rec, c, style));
    }
    let rms: Vec<&CheckRecord> = mine
        .iter()
        .copied()
        .filter(|c| c.metric == Metric::RelRms)
        .collect();
    parts.extend(rms_clause(rec, attr, &rms, style));
    for c in mine.iter().filter(|c| {
        !matches!(
            c.metric,
            Metric::FirstDivergence | Metric::SlotsExact | Metric::RelRms
        )
    }) {
        parts.push(generic_clause(rec, c, style));
    }
    if parts.is_empty() {
        let theirs = checks_for(rec, attr, |_, i| i.expected.contains(&s.id));
        if !theirs.is_empty() {
            parts.push(format!(
                "the reference of {} check{}",
                theirs.len(),
                if theirs.len() == 1 { "" } else { "s" }
            ));
        } else {
            parts.push("no check compared its outputs".to_string());
        }
    }
    format!(
        "{}{}: {}{}",
        style.code(id),
        on_devices(rec, &s.id, style),
        status_prefix(rec, s, style),
        parts.join("; ")
    )
}

/// "64 of 64 slots read back exactly", "(information)" for a check that cannot fail.
pub(super) fn slots_clause(rec: &Record, c: &CheckRecord, style: Style) -> String {
    let (
        Some(CheckDetail::SlotsExact(SlotsDetail {
            identical, slots, ..
        })),
        None,
    ) = (c.found(), &c.error)
    else {
        return generic_clause(rec, c, style);
    };
    let informational = c
        .threshold
        .as_ref()
        .and_then(|b| b.min)
        .map(|Num(x)| x)
        .filter(|x| x.is_finite())
        .is_none_or(|m| m <= 0.0);
    let mark = if !c.passed {
        format!(
            " ({}: {})",
            style.fail(),
            style.text(&check_value::threshold(c.metric, c.threshold.as_ref()))
        )
    } else if informational {
        " (information)".to_string()
    } else {
        String::new()
    };
    format!("{identical} of {slots} slots read back exactly{mark}")
}

/// "relative RMS K/V/first_logits 0.17%/0.17%/0.54%", the ones past their limit
/// named after it; nothing without such checks.
pub(super) fn rms_clause(
    rec: &Record,
    attr: &Attribution,
    rms: &[&CheckRecord],
    style: Style,
) -> Option<String> {
    if rms.is_empty() {
        return None;
    }
    let label = |c: &CheckRecord| {
        attr.of(c)
            .actual_file
            .map(|f| tensor_label(&f))
            .unwrap_or_else(|| check_name(rec, c).to_string())
    };
    let labels: Vec<String> = rms.iter().map(|c| label(c)).collect();
    let values: Vec<String> = rms
        .iter()
        .map(|c| match (&c.error, c.value.finite()) {
            (Some(_), _) => "-".to_string(),
            (None, Some(v)) => percent(v),
            (None, None) => json_value(&c.value.to_json()),
        })
        .collect();
    let mut clause = format!(
        "relative RMS {} {}",
        style.text(&labels.join("/")),
        style.text(&values.join("/"))
    );
    let over: Vec<String> = rms
        .iter()
        .filter(|c| !c.passed)
        .map(|c| match &c.error {
            Some(e) => format!(
                "{} could not run ({})",
                style.text(&label(c)),
                style.text(e)
            ),
            None => format!(
                "{} {}",
                style.text(&label(c)),
                style.text(&check_value::threshold(c.metric, c.threshold.as_ref()))
            ),
        })
        .collect();
    if !over.is_empty() {
        clause.push_str(&format!(" ({}: {})", style.fail(), over.join(", ")));
    }
    Some(clause)
}

/// "32-token outputs match", or "diverges at token 14 of 32, margin 0.0042 against
/// 0.0016".
pub(super) fn divergence_clause(rec: &Record, c: &CheckRecord, style: Style) -> String {
    if c.error.is_some() {
        return generic_clause(rec, c, style);
    }
    let Some(CheckDetail::FirstDivergence(d)) = c.found() else {
        return generic_clause(rec, c, style);
    };
    let compared = d.compared;
    let mark = if c.passed {
        String::new()
    } else {
        format!(" ({})", style.fail())
    };
    match c.value.as_u64() {
        None => format!("{compared}-token outputs match{mark}"),
        Some(i) => {
            let margin = |m: Option<Num>| match m {
                Some(Num(f)) if f.is_finite() => crate::report::format::number(f),
                Some(Num(f)) => json_value(&crate::record::check::json_f64(f)),
                None => "-".to_string(),
            };
            format!(
                "diverges at token {i} of {compared}, margin {} against {}{mark}",
                margin(d.actual_margin),
                margin(d.expected_margin)
            )
        }
    }
}

/// " on sim-gpu0", or nothing for a step that held no device.
pub(super) fn on_devices(rec: &Record, step: &str, style: Style) -> String {
    let holder = lease_holder(rec, step);
    let mut names: Vec<String> = Vec::new();
    for a in rec.allocations.iter().filter(|a| a.step == holder) {
        let n = style.text(&a.device);
        if !names.contains(&n) {
            names.push(n);
        }
    }
    if names.is_empty() {
        String::new()
    } else {
        format!(" on {}", names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::record::CheckValue;

    fn check(name: &str, value: CheckValue, passed: bool) -> CheckRecord {
        CheckRecord {
            step: "s".into(),
            name: name.into(),
            metric: Metric::BitExact,
            value,
            threshold: None,
            passed,
            detail: None,
            error: None,
            inputs: None,
        }
    }

    #[test]
    fn a_yes_or_no_check_reads_as_words() {
        let t = CheckValue::Verdict(true);
        let f = CheckValue::Verdict(false);
        let md = Style::Markdown;
        assert_eq!(
            clause("logits exact", &check("x", t.clone(), true), md),
            "logits exact"
        );
        assert_eq!(clause("tokens", &check("x", t, true), md), "tokens match");
        assert_eq!(
            clause("tokens", &check("x", f, false), md),
            "tokens: differ (**FAIL**)"
        );
    }
}
