//! Each matrix cell's prefill and handoff facts: repeats, timings, checks,
//! devices.

#[allow(unused_imports)]
use super::*;

/// `1.30 s–1.36 s`; where three digits would show one number twice, the digits
/// that tell the repeats apart: `1.355–1.362 s`.
pub(super) fn wall_range(st: &crate::record::run::Stats) -> String {
    let (lo, hi) = (duration_ms(st.min), duration_ms(st.max));
    if lo != hi || st.min == st.max {
        return format!("{lo}–{hi}");
    }
    let (unit, scale) = if st.median >= 1000.0 {
        ("s", 1000.0)
    } else {
        ("ms", 1.0)
    };
    let spread = (st.max - st.min) / scale;
    let decimals = (-spread.log10().floor() as i64).clamp(0, 6) as usize;
    format!(
        "{:.*}–{:.*} {unit}",
        decimals,
        st.min / scale,
        decimals,
        st.max / scale
    )
}

pub(super) fn measured(s: &StepRecord) -> (usize, usize) {
    let warm = s.attempts.iter().filter(|a| a.warmup).count();
    (s.attempts.len() - warm, warm)
}

/// Wall time over measured successes; a step without one shows what its last
/// attempt that ran took, and how it ended.
pub(super) fn timing(s: &StepRecord) -> String {
    if let Some(from) = s.cache.as_ref().and_then(|c| c.reused_from.as_ref()) {
        return format!("reused from run {}", from.run_id);
    }
    match s.wall_ms {
        Some(st) if st.n > 1 => format!(
            "{} (median {}, n={})",
            wall_range(&st),
            duration_ms(st.median),
            st.n
        ),
        Some(st) => duration_ms(st.median),
        None => match s.attempts.iter().rev().find(|a| a.wall_ms > 0.0) {
            Some(a) => format!(
                "{} (attempt {} {})",
                duration_ms(a.wall_ms),
                a.attempt,
                a.termination.as_str().replace('_', " ")
            ),
            None => "-".to_string(),
        },
    }
}

pub(super) fn prefill_facts(rec: &Record, attr: &Attribution, s: &StepRecord) -> PrefillFacts {
    let (m, w) = measured(s);
    let mut lines = Vec::new();
    let declared = rec.run.steps.iter().find(|d| d.id == s.id);
    if let Some(d) = declared {
        lines.push(format!(
            "{} measured repeat{} declared, {} warm-up; {} attempt{} ran",
            d.repeats,
            if d.repeats == 1 { "" } else { "s" },
            d.warmup,
            s.attempts.len(),
            if s.attempts.len() == 1 { "" } else { "s" }
        ));
    }
    for c in checks_for(rec, attr, |c, i| {
        c.metric == Metric::BitExact && i.across.contains(&s.id)
    }) {
        let what = attr.of(c).actual_file.unwrap_or_else(|| c.name.clone());
        match (c.found(), &c.error) {
            (
                Some(CheckDetail::BitExactAcross(AcrossDetail {
                    files,
                    identical_to_first: same,
                    ..
                })),
                None,
            ) => lines.push(format!(
                "{same} of {files} repeats bit-exact for {} ({}: {})",
                crate::report::format::code(&what),
                c.name,
                pass(c)
            )),
            _ => lines.push(format!(
                "{}: {} ({})",
                c.name,
                pass(c),
                c.error
                    .clone()
                    .unwrap_or_else(|| json_value(&c.value.to_json()))
            )),
        }
    }
    for c in checks_for(rec, attr, |c, i| {
        c.metric == Metric::Finite && i.actual.contains(&s.id)
    }) {
        match c.found() {
            Some(CheckDetail::Finite(FiniteDetail {
                nan,
                inf,
                elements: n,
                ..
            })) => lines.push(format!(
                "{}: {} finite of {n} values ({nan} NaN, {inf} Inf; {})",
                c.name,
                n.saturating_sub(*nan).saturating_sub(*inf),
                pass(c)
            )),
            _ => lines.push(format!("{}: {}", c.name, pass(c))),
        }
    }
    let metrics = crate::report::metrics::of_step(rec, s);
    match metrics.iter().find(|m| m.headline) {
        // The figure the plan names replaces process wall time in the prose.
        Some(m) => {
            lines.push(format!(
                "{} over {} measured attempt{}: {}",
                m.name,
                m.stats.n,
                if m.stats.n == 1 { "" } else { "s" },
                m.text
            ));
            lines.extend(crate::report::metrics::dispersion_words(m));
        }
        None => {
            if let Some(st) = s.wall_ms {
                lines.push(format!(
                    "warm timing over {} measured attempt{}: {} (median {})",
                    st.n,
                    if st.n == 1 { "" } else { "s" },
                    wall_range(&st),
                    duration_ms(st.median)
                ));
            }
        }
    }
    for c in checks_for(rec, attr, |c, i| {
        c.metric == Metric::Shape && i.actual.contains(&s.id)
    }) {
        let dtype = match c.found() {
            Some(CheckDetail::Shape(d)) => d.dtype.clone(),
            _ => String::new(),
        };
        let what = attr.of(c).actual_file.unwrap_or_default();
        lines.push(format!(
            "shape of {}: {} {dtype} ({}: {})",
            crate::report::format::code(&what),
            json_value(&c.value.to_json()),
            c.name,
            pass(c)
        ));
    }
    PrefillFacts {
        devices: devices_of(rec, &s.id),
        step: s.id.clone(),
        status: s.status.as_str().to_string(),
        measured: m,
        warmups: w,
        lines,
    }
}

/// "K", "V" or "logits" from `file:tensor`.
pub(super) fn tensor_label(file: &str) -> String {
    match file.rsplit_once(':') {
        Some((_, t)) => t.to_uppercase(),
        None => file
            .rsplit('/')
            .next()
            .unwrap_or(file)
            .split('.')
            .next()
            .unwrap_or(file)
            .to_string(),
    }
}

pub(super) fn divergence_line(c: &CheckRecord) -> String {
    if let Some(e) = &c.error {
        return format!("{}: could not run ({e})", c.name);
    }
    let Some(CheckDetail::FirstDivergence(d)) = c.found() else {
        return format!(
            "{}: {} ({})",
            c.name,
            json_value(&c.value.to_json()),
            pass(c)
        );
    };
    let compared = d.compared;
    match c.value.as_u64() {
        None => format!("{}: no divergence in {compared} tokens", c.name),
        Some(i) => {
            let margin = |m: Option<Num>| match m {
                None => "-".to_string(),
                Some(Num(f)) if f.is_finite() => crate::report::format::number(f),
                Some(Num(f)) => json_value(&crate::record::check::json_f64(f)),
            };
            let token = |t: Option<Token>| t.map_or_else(|| "-".to_string(), |t| t.to_string());
            format!(
                "{}: index {i} of {compared} tokens (actual token {} with margin {}, expected token {} with margin {})",
                c.name,
                token(d.actual_token.clone()),
                margin(d.actual_margin),
                token(d.expected_token.clone()),
                margin(d.expected_margin),
            )
        }
    }
}

pub(super) fn handoff_facts(rec: &Record, attr: &Attribution, s: &StepRecord) -> HandoffFacts {
    let mut lines = Vec::new();
    let mine = checks_for(rec, attr, |_, i| i.actual.contains(&s.id));
    for c in mine
        .iter()
        .filter(|c| !matches!(c.metric, Metric::RelRms | Metric::FirstDivergence))
    {
        let line = match c.found() {
            Some(CheckDetail::SlotsExact(SlotsDetail {
                identical: same,
                slots,
                ..
            })) => format!(
                "{}: {same} of {slots} slots identical ({})",
                c.name,
                pass(c)
            ),
            _ => format!(
                "{}: {} ({})",
                c.name,
                json_value(&c.value.to_json()),
                pass(c)
            ),
        };
        lines.push(line);
    }
    let rms: Vec<String> = mine
        .iter()
        .filter(|c| c.metric == Metric::RelRms)
        .map(|c| {
            let label = attr
                .of(c)
                .actual_file
                .map(|f| tensor_label(&f))
                .unwrap_or_else(|| c.name.clone());
            let v = match (c.value.finite(), &c.error) {
                (_, Some(e)) => format!("could not run ({e})"),
                (Some(v), None) => percent(v),
                (None, None) => json_value(&c.value.to_json()),
            };
            let limit = c
                .threshold
                .as_ref()
                .and_then(|b| b.max)
                .map(|Num(x)| x)
                .filter(|x| x.is_finite())
                .map(|t| format!(" (limit {})", percent(t)))
                .unwrap_or_default();
            format!("{label} {v}{limit} ({})", pass(c))
        })
        .collect();
    if !rms.is_empty() {
        lines.push(format!("relative RMS: {}", rms.join(", ")));
    }
    for c in mine.iter().filter(|c| c.metric == Metric::FirstDivergence) {
        lines.push(divergence_line(c));
    }
    if lines.is_empty() {
        // A reference decode is compared against, not compared.
        let theirs = checks_for(rec, attr, |_, i| i.expected.contains(&s.id));
        if !theirs.is_empty() {
            let passed = theirs.iter().filter(|c| c.passed).count();
            lines.push(format!(
                "the expected side of {} check{} ({passed} passed)",
                theirs.len(),
                if theirs.len() == 1 { "" } else { "s" }
            ));
        }
    }
    let devices = devices_of(rec, &s.id);
    HandoffFacts {
        step: s.id.clone(),
        status: s.status.as_str().to_string(),
        devices,
        lines,
    }
}

pub(super) fn cell_of<'a>(rec: &'a Record, s: &StepRecord) -> &'a [crate::record::run::CellValue] {
    cell_of_id(rec, &s.id)
}

/// The matrix cell of the step `id` (empty outside any cell).
pub(super) fn cell_of_id<'a>(rec: &'a Record, id: &str) -> &'a [crate::record::run::CellValue] {
    rec.run
        .steps
        .iter()
        .find(|d| d.id == id)
        .map_or(&[], |d| d.cell.as_slice())
}

/// A cell's title: the plan's `cell_title` with `{axis}` filled in, else
/// `tokens=8192, numerics=f32`.
pub(super) fn cell_title(rec: &Record, cell: &[crate::record::run::CellValue]) -> String {
    match &rec.run.plan.cell_title {
        Some(t) => cell.iter().fold(t.clone(), |acc, c| {
            acc.replace(&format!("{{{}}}", c.axis), &c.value)
        }),
        None => cell
            .iter()
            .map(|c| format!("{}={}", c.axis, c.value))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Prefill steps outside any matrix cell: they get no cell block of their own.
pub(super) fn loose_prefill(rec: &Record, attr: &Attribution) -> Vec<PrefillFacts> {
    rec.steps
        .iter()
        .filter(|s| s.kind == StepKind::Prefill && cell_of(rec, s).is_empty())
        .map(|s| prefill_facts(rec, attr, s))
        .collect()
}

/// Handoff steps outside any matrix cell: they get no cell block of their own.
pub(super) fn loose_handoffs(rec: &Record, attr: &Attribution) -> Vec<HandoffFacts> {
    rec.steps
        .iter()
        .filter(|s| s.kind == StepKind::Handoff && cell_of(rec, s).is_empty())
        .map(|s| handoff_facts(rec, attr, s))
        .collect()
}

/// The cells that hold a prefill or handoff step, in the order their first step
/// appears.
pub(super) fn cell_order(rec: &Record) -> Vec<&[crate::record::run::CellValue]> {
    let mut order: Vec<&[crate::record::run::CellValue]> = Vec::new();
    for s in &rec.steps {
        let c = cell_of(rec, s);
        if !c.is_empty()
            && matches!(s.kind, StepKind::Prefill | StepKind::Handoff)
            && !order.contains(&c)
        {
            order.push(c);
        }
    }
    order
}

/// The prefill and handoff steps grouped by their cell, cells in the order their
/// first step appears.
pub(super) fn cell_blocks(rec: &Record, attr: &Attribution) -> Vec<CellFacts> {
    cell_order(rec)
        .into_iter()
        .map(|c| {
            let mine = |kind: StepKind| {
                rec.steps
                    .iter()
                    .filter(move |s| s.kind == kind && cell_of(rec, s) == c)
            };
            CellFacts {
                title: cell_title(rec, c),
                prefill: mine(StepKind::Prefill)
                    .map(|s| prefill_facts(rec, attr, s))
                    .collect(),
                handoffs: mine(StepKind::Handoff)
                    .map(|s| handoff_facts(rec, attr, s))
                    .collect(),
            }
        })
        .collect()
}

/// The step whose lease `step` ran on: a cell run interleaved with its baseline
/// cell used that cell's lease.
pub(super) fn lease_holder<'a>(rec: &'a Record, step: &'a str) -> &'a str {
    rec.run
        .steps
        .iter()
        .find(|d| d.id == step)
        .and_then(|d| d.interleaved_with.as_deref())
        .unwrap_or(step)
}

pub(super) fn devices_of(rec: &Record, step: &str) -> String {
    let holder = lease_holder(rec, step);
    rec.allocations
        .iter()
        .filter(|a| a.step == holder)
        .map(device_text)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every allocation as a device line, with the step that held it.
pub(super) fn device_lines(rec: &Record) -> Vec<DeviceLine> {
    rec.allocations
        .iter()
        .map(|a| DeviceLine {
            device: a.device.clone(),
            kind: a.kind.clone(),
            // A whole device needs no core list.
            cores: if a.whole_device {
                String::new()
            } else {
                core_ranges(&a.cores)
            },
            simulated: a.simulated,
            step: a.step.clone(),
            step_md: holder_md(rec, &a.step),
        })
        .collect()
}

/// The holder in Markdown, with the steps interleaved on its lease named too.
fn holder_md(rec: &Record, step: &str) -> String {
    let with: Vec<String> = rec
        .run
        .steps
        .iter()
        .filter(|d| d.interleaved_with.as_deref() == Some(step))
        .map(|d| crate::report::format::code(&d.id))
        .collect();
    if with.is_empty() {
        crate::report::format::code(step)
    } else {
        format!(
            "{} interleaved with {}",
            crate::report::format::code(step),
            with.join(", ")
        )
    }
}

/// Each simulated device once, in first-use order, so the warning names each once.
pub(super) fn simulated_devices(devices: &[DeviceLine]) -> Vec<String> {
    let mut simulated: Vec<String> = Vec::new();
    for d in devices.iter().filter(|d| d.simulated) {
        if !simulated.contains(&d.device) {
            simulated.push(d.device.clone());
        }
    }
    simulated
}

/// `[0, 1, 2, 3, 6]` as `0-3,6`.
pub(super) fn core_ranges(cores: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cores.len() {
        let mut j = i;
        while j + 1 < cores.len() && cores[j + 1] == cores[j] + 1 {
            j += 1;
        }
        parts.push(if j > i {
            format!("{}-{}", cores[i], cores[j])
        } else {
            cores[i].to_string()
        });
        i = j + 1;
    }
    parts.join(",")
}

pub(super) fn device_text(a: &crate::record::run::Allocation) -> String {
    format!(
        "{}{}",
        a.device,
        if a.simulated { " (simulated)" } else { "" }
    )
}
