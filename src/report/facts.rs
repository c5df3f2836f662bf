//! The facts a PR body states, taken from the record alone and pre-phrased where a
//! template could not phrase them without logic. Nothing here invents a figure: a
//! missing field becomes a missing line, never a default number.

use serde::Serialize;

use super::attribution::Attribution;
use super::format::{bytes, duration_ms, json_value, percent, short_hash};
use crate::compare::detail::{AcrossDetail, CheckDetail, FiniteDetail, Num, SlotsDetail, Token};
use crate::evidence::record::{CheckRecord, Record, StepRecord};
use crate::pins::{Details, PinKind, PinReport};
use crate::plan::StepKind;

/// Everything the PR and HTML templates read.
#[derive(Debug, Clone, Serialize)]
pub struct Facts {
    pub run_id: String,
    pub status: String,
    pub reason: Option<String>,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub plan_name: String,
    pub description: Option<String>,
    pub changes: Option<String>,
    pub plan_sha256: String,
    pub orchestrator_version: String,
    pub binary_sha256: Option<String>,
    /// sha256 of `record.json` (hex).
    pub digest: String,
    /// The record folder as the reader reaches it: relative to where they stand
    /// when it is below it, else absolute.
    pub record_path: String,
    /// `orchestrate verify <record_path>`: works as printed.
    pub verify_command: String,
    /// "Baseline 6787628; implementation 720e8dc": from `[revisions]`, else the git
    /// pins (empty without either).
    pub git_line: String,
    /// Steps run on the baseline and another revision: tests, findings, timings.
    pub revisions: Vec<super::revisions::RevisionFacts>,
    pub pins: Vec<PinLine>,
    pub drift: Vec<PinLine>,
    pub sources: Vec<SourceLine>,
    pub host: Vec<String>,
    pub isolation: String,
    pub devices: Vec<DeviceLine>,
    pub any_simulated: bool,
    /// Each simulated device once, in the order the run first used it.
    pub simulated_devices: Vec<String>,
    /// Every numeric step metric over measured repeats.
    pub metrics: Vec<MetricLine>,
    /// Above [`COMPACT_ABOVE`] steps the step table gives way to counts, the steps
    /// that did not succeed and the slowest few.
    pub compact: bool,
    pub status_counts: Vec<StatusCount>,
    /// Steps that failed, were cancelled or skipped (compact view).
    pub notable: Vec<StepLine>,
    /// The slowest steps by median wall time (compact view).
    pub slowest: Vec<StepLine>,
    /// Prefill and handoff steps outside any matrix cell.
    pub prefill: Vec<PrefillFacts>,
    pub handoffs: Vec<HandoffFacts>,
    /// One block per matrix cell (its prefill and handoff steps), as the seed PR
    /// writes "Full 2K: ..." and "Full 8K: ...".
    pub cells: Vec<CellFacts>,
    pub steps: Vec<StepLine>,
    pub checks: Vec<CheckLine>,
    pub failures: Vec<String>,
    /// What the step cache did: reused from which run, why a step reran, outputs
    /// that came out different with the same key.
    pub cache: Vec<String>,
    pub release: Release,
    pub limits: Vec<String>,
    pub unenforced: Vec<String>,
    pub warnings: Vec<String>,
}

/// One pin, in one line.
#[derive(Debug, Clone, Serialize)]
pub struct PinLine {
    pub kind: String,
    pub name: String,
    pub declared: String,
    pub observed: String,
    pub status: String,
    pub message: Option<String>,
    /// The pin phrased for people: "model koni: KISTI/x at revision 0172bf7".
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceLine {
    pub role: String,
    pub name: String,
    pub digest: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeviceLine {
    pub device: String,
    pub kind: String,
    pub cores: String,
    pub simulated: bool,
    /// The step that held it.
    pub step: String,
    /// The same in Markdown, each step id a code span ("`a` interleaved with `b`").
    pub step_md: String,
}

/// A prefill step: repeats, bit-exactness, finiteness, timing, KV shape.
#[derive(Debug, Clone, Serialize)]
pub struct PrefillFacts {
    pub step: String,
    /// The step's devices, "(simulated)" after each simulated one.
    pub devices: String,
    pub status: String,
    pub measured: usize,
    pub warmups: usize,
    /// Sentences, one per finding.
    pub lines: Vec<String>,
}

/// The prefill and handoff steps of one matrix cell.
#[derive(Debug, Clone, Serialize)]
pub struct CellFacts {
    /// `Full 8192` from `cell_title = "Full {tokens}"`, else `tokens=8192`.
    pub title: String,
    pub prefill: Vec<PrefillFacts>,
    pub handoffs: Vec<HandoffFacts>,
}

/// A handoff step: its match results, relative RMS and first divergence.
#[derive(Debug, Clone, Serialize)]
pub struct HandoffFacts {
    pub step: String,
    pub status: String,
    pub devices: String,
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepLine {
    pub id: String,
    pub kind: String,
    pub status: String,
    pub attempts: usize,
    pub warmups: usize,
    pub timing: String,
    pub reason: Option<String>,
    /// "succeeded on retry 2 of 3", when tries were retried.
    pub note: Option<String>,
}

/// One step metric, as reports state it.
#[derive(Debug, Clone, Serialize)]
pub struct MetricLine {
    pub step: String,
    pub name: String,
    /// `769.15–769.52 ms (median 769.30 ms, n=3)`.
    pub text: String,
    pub headline: bool,
    /// "timing dispersion remains: ..." when past the step's threshold.
    pub dispersion_note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StatusCount {
    pub status: String,
    pub n: usize,
}

/// Plans with more steps than this get the compact step view.
pub const COMPACT_ABOVE: usize = 40;
/// How many of the slowest steps the compact view names.
const SLOWEST: usize = 5;

#[derive(Debug, Clone, Serialize)]
pub struct CheckLine {
    pub step: String,
    pub name: String,
    pub metric: String,
    pub value: String,
    pub threshold: String,
    pub passed: bool,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Release {
    pub audited: bool,
    pub passed: bool,
    pub checked: Vec<String>,
    pub leftovers: Vec<String>,
}

/// The record's pins.
pub fn pin_report(rec: &Record) -> PinReport {
    rec.run.pins.clone()
}

fn opt(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "-".to_string())
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn pin_text(e: &crate::pins::PinEntry) -> String {
    let observed = opt(&e.observed);
    match &e.details {
        Some(Details::Git(g)) => format!(
            "git {}: {} (tree {}{})",
            e.name,
            short_hash(&g.head, 7),
            short_hash(&g.tree, 7),
            if g.dirty { ", dirty" } else { "" }
        ),
        Some(Details::Model(m)) => format!(
            "model {}: {}{} (files sha256 {})",
            e.name,
            m.id.clone().unwrap_or_else(|| m.path.clone()),
            m.revision
                .as_deref()
                .map(|r| format!(" at revision {}", short_hash(r, 12)))
                .unwrap_or_default(),
            short_hash(&m.digest.hex(), 12)
        ),
        Some(Details::File(f)) => format!(
            "file {}: sha256 {} ({} file{})",
            e.name,
            short_hash(&f.digest.hex(), 12),
            f.files.len(),
            if f.files.len() == 1 { "" } else { "s" }
        ),
        _ => format!("{} {}: {observed}", e.kind.as_str(), e.name),
    }
}

/// A revision as a pin line: what ran, where, and how.
fn revision_pin(r: &crate::pins::revisions::RevisionRecord) -> PinLine {
    let how = if r.mode == "worktree" {
        if r.dirty {
            format!(
                "the working tree, dirty (diff sha256 {})",
                r.diff_sha256
                    .map(|d| short_hash(&d.hex(), 12))
                    .unwrap_or_default()
            )
        } else {
            "the working tree".to_string()
        }
    } else {
        "a clean checkout".to_string()
    };
    let role = if r.baseline { ", the baseline" } else { "" };
    PinLine {
        kind: "revision".into(),
        name: r.name.clone(),
        declared: r.requested.clone(),
        observed: r.commit.clone(),
        status: "resolved".into(),
        message: None,
        text: format!(
            "revision {}{role}: {} is {} (tree {}), {how}",
            r.name,
            super::format::code(&r.requested),
            short_hash(&r.commit, 7),
            short_hash(&r.tree, 7)
        ),
    }
}

fn git_line(pins: &PinReport) -> String {
    let line = pins
        .entries
        .iter()
        .filter(|e| e.kind == PinKind::Git)
        .map(|e| {
            let sha = match &e.details {
                Some(Details::Git(g)) => short_hash(&g.head, 7),
                _ => e
                    .observed
                    .as_deref()
                    .map(|o| short_hash(o, 7))
                    .unwrap_or_else(|| "not observed".into()),
            };
            format!("{} {sha}", e.name)
        })
        .collect::<Vec<_>>()
        .join("; ");
    // "Baseline 6787628; implementation 720e8dc": a sentence, capitalized once.
    capitalize(&line)
}

/// Limits as declared, by name (sizes as sizes, durations as durations); what the
/// plan does not set is left out.
fn limit_lines(l: &crate::evidence::record::PlanLimits) -> Vec<String> {
    let ms = |label: &str, v: Option<u64>| v.map(|v| format!("{label}: {}", duration_ms(v as f64)));
    [
        l.cpus.as_ref().map(|c| format!("cpus: {c}")),
        ms("grace", l.grace_ms),
        l.host_memory_bytes
            .map(|b| format!("host memory: {}", bytes(b as f64))),
        Some(format!("isolation: {}", l.isolation)),
        l.pids.map(|p| format!("pids: {p}")),
        ms("run timeout", l.run_timeout_ms),
        Some(format!("swap: {}", l.swap)),
        ms("timeout", l.timeout_ms),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Every limit asked for and not enforced: attempt notes (each once, with the steps it
/// applied to) and isolation warnings.
fn unenforced(rec: &Record) -> Vec<String> {
    let mut notes: Vec<(String, Vec<String>)> = Vec::new();
    for s in &rec.steps {
        for a in &s.attempts {
            let mut these: Vec<String> = a
                .enforcement
                .as_ref()
                .map(|e| e.notes.clone())
                .unwrap_or_default();
            if a.enforcement
                .as_ref()
                .is_some_and(|e| e.mode == crate::contract::Enforcer::None)
            {
                these.push("no isolation: memory, pids and CPU limits were not enforced".into());
            }
            for n in these {
                match notes.iter_mut().find(|(t, _)| *t == n) {
                    Some((_, steps)) => {
                        if !steps.contains(&s.id) {
                            steps.push(s.id.clone());
                        }
                    }
                    None => notes.push((n, vec![s.id.clone()])),
                }
            }
        }
    }
    let mut out: Vec<String> = notes
        .into_iter()
        .map(|(n, steps)| format!("{n} (steps: {})", steps.join(", ")))
        .collect();
    out.extend(
        rec.run
            .isolation
            .warnings
            .iter()
            .map(|s| format!("isolation: {s}")),
    );
    out
}

fn isolation_line(rec: &Record) -> String {
    let info = &rec.run.isolation.info;
    let mut s = format!("isolation {}", info.mode);
    if let Some(v) = info.cgroup_version {
        s.push_str(&format!(" (cgroup v{v})"));
    }
    // What the attempts' enforcement says was enforced, from the first measured one.
    let enforced = rec
        .steps
        .iter()
        .flat_map(|st| st.attempts.iter())
        .map(|a| &a.enforcement)
        .next()
        .and_then(Option::as_ref)
        .map(|e| {
            [
                ("memory", e.memory),
                ("swap off", e.swap_off),
                ("pids", e.pids),
                ("cpus", e.cpus),
                ("devices", e.devices),
            ]
            .iter()
            .filter(|(_, on)| *on)
            .map(|(k, _)| k.to_string())
            .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    if !enforced.is_empty() {
        s.push_str(&format!("; enforced per attempt: {}", enforced.join(", ")));
    }
    s
}

fn checks_for<'a>(
    rec: &'a Record,
    attr: &Attribution,
    pred: impl Fn(&CheckRecord, &super::attribution::CheckInputs) -> bool,
) -> Vec<&'a CheckRecord> {
    rec.comparisons
        .iter()
        .filter(|c| pred(c, &attr.of(c)))
        .collect()
}

fn pass(c: &CheckRecord) -> &'static str {
    if c.passed {
        "pass"
    } else {
        "FAIL"
    }
}

fn num(v: &serde_json::Value) -> Option<f64> {
    v.as_f64()
}

/// `1.30 s–1.36 s`; where three digits would show one number twice, the digits
/// that tell the repeats apart: `1.355–1.362 s`.
fn wall_range(st: &crate::evidence::record::Stats) -> String {
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

fn measured(s: &StepRecord) -> (usize, usize) {
    let warm = s.attempts.iter().filter(|a| a.warmup).count();
    (s.attempts.len() - warm, warm)
}

/// Wall time over measured successes; a step without one shows what its last
/// attempt that ran took, and how it ended.
fn timing(s: &StepRecord) -> String {
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

fn prefill_facts(rec: &Record, attr: &Attribution, s: &StepRecord) -> PrefillFacts {
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
        c.metric == "bit_exact" && i.across.contains(&s.id)
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
                super::format::code(&what),
                c.name,
                pass(c)
            )),
            _ => lines.push(format!(
                "{}: {} ({})",
                c.name,
                pass(c),
                c.error.clone().unwrap_or_else(|| json_value(&c.value))
            )),
        }
    }
    for c in checks_for(rec, attr, |c, i| {
        c.metric == "finite" && i.actual.contains(&s.id)
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
                n.saturating_sub(nan).saturating_sub(inf),
                pass(c)
            )),
            _ => lines.push(format!("{}: {}", c.name, pass(c))),
        }
    }
    let metrics = super::metrics::of_step(rec, s);
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
            lines.extend(super::metrics::dispersion_words(m));
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
        c.metric == "shape" && i.actual.contains(&s.id)
    }) {
        let dtype = match c.found() {
            Some(CheckDetail::Shape(d)) => d.dtype,
            _ => String::new(),
        };
        let what = attr.of(c).actual_file.unwrap_or_default();
        lines.push(format!(
            "shape of {}: {} {dtype} ({}: {})",
            super::format::code(&what),
            json_value(&c.value),
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
fn tensor_label(file: &str) -> String {
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

fn divergence_line(c: &CheckRecord) -> String {
    if let Some(e) = &c.error {
        return format!("{}: could not run ({e})", c.name);
    }
    let Some(CheckDetail::FirstDivergence(d)) = c.found() else {
        return format!("{}: {} ({})", c.name, json_value(&c.value), pass(c));
    };
    let compared = d.compared;
    match c.value.as_u64() {
        None => format!("{}: no divergence in {compared} tokens", c.name),
        Some(i) => {
            let margin = |m: Option<Num>| match m {
                None => "-".to_string(),
                Some(Num(f)) if f.is_finite() => format!("{f:.4}"),
                Some(Num(f)) => json_value(&crate::compare::json_f64(f)),
            };
            let token = |t: Option<Token>| t.map_or_else(|| "-".to_string(), |t| t.to_string());
            format!(
                "{}: index {i} of {compared} tokens (actual token {} with margin {}, expected token {} with margin {})",
                c.name,
                token(d.actual_token),
                margin(d.actual_margin),
                token(d.expected_token),
                margin(d.expected_margin),
            )
        }
    }
}

fn handoff_facts(rec: &Record, attr: &Attribution, s: &StepRecord) -> HandoffFacts {
    let mut lines = Vec::new();
    let mine = checks_for(rec, attr, |_, i| i.actual.contains(&s.id));
    for c in mine
        .iter()
        .filter(|c| !matches!(c.metric.as_str(), "rel_rms" | "first_divergence"))
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
            _ => format!("{}: {} ({})", c.name, json_value(&c.value), pass(c)),
        };
        lines.push(line);
    }
    let rms: Vec<String> = mine
        .iter()
        .filter(|c| c.metric == "rel_rms")
        .map(|c| {
            let label = attr
                .of(c)
                .actual_file
                .map(|f| tensor_label(&f))
                .unwrap_or_else(|| c.name.clone());
            let v = match (num(&c.value), &c.error) {
                (_, Some(e)) => format!("could not run ({e})"),
                (Some(v), None) => percent(v),
                (None, None) => json_value(&c.value),
            };
            let limit = c
                .threshold
                .get("max")
                .and_then(num)
                .map(|t| format!(" (limit {})", percent(t)))
                .unwrap_or_default();
            format!("{label} {v}{limit} ({})", pass(c))
        })
        .collect();
    if !rms.is_empty() {
        lines.push(format!("relative RMS: {}", rms.join(", ")));
    }
    for c in mine.iter().filter(|c| c.metric == "first_divergence") {
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

fn cell_of<'a>(rec: &'a Record, s: &StepRecord) -> &'a [crate::evidence::record::CellValue] {
    rec.run
        .steps
        .iter()
        .find(|d| d.id == s.id)
        .map_or(&[], |d| d.cell.as_slice())
}

/// A cell's title: the plan's `cell_title` with `{axis}` filled in, else
/// `tokens=8192, numerics=f32`.
fn cell_title(rec: &Record, cell: &[crate::evidence::record::CellValue]) -> String {
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

/// The prefill and handoff steps grouped by their cell, cells in the order their
/// first step appears.
fn cell_blocks(rec: &Record, attr: &Attribution) -> Vec<CellFacts> {
    let mut order: Vec<&[crate::evidence::record::CellValue]> = Vec::new();
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

fn devices_of(rec: &Record, step: &str) -> String {
    // A cell run interleaved with its baseline cell used that cell's lease.
    let holder = rec
        .run
        .steps
        .iter()
        .find(|d| d.id == step)
        .and_then(|d| d.interleaved_with.clone())
        .unwrap_or_else(|| step.to_string());
    rec.allocations
        .iter()
        .filter(|a| a.step == holder)
        .map(device_text)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `[0, 1, 2, 3, 6]` as `0-3,6`.
fn core_ranges(cores: &[u32]) -> String {
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

fn device_text(a: &crate::evidence::record::Allocation) -> String {
    format!(
        "{}{}",
        a.device,
        if a.simulated { " (simulated)" } else { "" }
    )
}

/// The record folder as a reader standing in the current folder reaches it (relative
/// when below it, else absolute). Without a known folder: the records folder the run
/// was given, which is right from where it ran.
fn record_path(rec: &Record, at: Option<&std::path::Path>) -> String {
    let dir = match at {
        Some(d) => d.to_path_buf(),
        None => std::path::Path::new(&rec.run.options.records).join(&rec.run_id),
    };
    let abs = std::path::absolute(&dir).unwrap_or_else(|_| dir.clone());
    let shown = std::env::current_dir()
        .ok()
        .and_then(|cwd| abs.strip_prefix(cwd).ok().map(std::path::Path::to_path_buf))
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| abs.clone());
    shown.display().to_string()
}

/// What retries a step needed, in words.
fn retry_note(rec: &Record, s: &StepRecord) -> Option<String> {
    let declared = rec.run.steps.iter().find(|d| d.id == s.id)?.retries;
    let retried: Vec<&crate::evidence::record::AttemptRecord> =
        s.attempts.iter().filter(|a| a.retry > 0).collect();
    if declared == 0 || retried.is_empty() {
        return None;
    }
    let last = s.attempts.last()?;
    let verb = if s.status.is_success() {
        "succeeded"
    } else {
        "failed"
    };
    if retried.len() == last.retry as usize && last.retry > 0 {
        Some(format!("{verb} on retry {} of {declared}", last.retry))
    } else {
        Some(format!(
            "{verb} after {} retr{} in all",
            retried.len(),
            if retried.len() == 1 { "y" } else { "ies" }
        ))
    }
}

/// One line per cacheable step: where a reused one came from, why one reran, and
/// outputs that differ from an earlier run with the same key.
pub fn cache_lines(rec: &Record) -> Vec<String> {
    let mut out = Vec::new();
    for s in &rec.steps {
        let Some(c) = &s.cache else { continue };
        let key = short_hash(&c.key, 12);
        match (&c.reused_from, c.status.as_str()) {
            (Some(from), _) => out.push(format!(
                "{}: reused from run {} (its attempt {}, stored {}), restored by {}, key `{key}`",
                super::format::code(&s.id),
                from.run_id,
                from.attempt,
                from.created,
                c.restore.as_deref().unwrap_or("copy")
            )),
            (None, status) => {
                let what = match status {
                    "stored" => "ran and was stored".to_string(),
                    "failed" => "ran and failed (not stored)".to_string(),
                    _ => format!("ran; {}", c.note.as_deref().unwrap_or("not stored")),
                };
                let why = if c.why.is_empty() {
                    String::new()
                } else {
                    format!(": {}", c.why.join("; "))
                };
                out.push(format!(
                    "{}: {what}, key `{key}`{why}",
                    super::format::code(&s.id)
                ));
            }
        }
        for n in &c.nondeterministic {
            out.push(format!(
                "{}: **nondeterministic output** {n}",
                super::format::code(&s.id)
            ));
        }
    }
    out
}

fn step_line(rec: &Record, s: &StepRecord) -> StepLine {
    let (m, w) = measured(s);
    StepLine {
        note: retry_note(rec, s),
        id: s.id.clone(),
        kind: s.kind.to_string(),
        status: s.status.as_str().to_string(),
        attempts: m,
        warmups: w,
        timing: timing(s),
        reason: s.reason.clone(),
    }
}

/// A check's value as every report states it: relative RMS as a percentage, other
/// numbers with four significant digits, integers whole.
fn check_value(metric: &str, v: &serde_json::Value) -> String {
    match v.as_f64() {
        Some(x) if metric == "rel_rms" => percent(x),
        Some(x) if v.is_number() => super::format::number(x),
        _ => json_value(v),
    }
}

/// A check's threshold in the same units as its value.
fn check_threshold(metric: &str, v: &serde_json::Value) -> String {
    match v.as_object() {
        Some(obj) if !obj.is_empty() => obj
            .iter()
            .map(|(k, x)| {
                let x = check_value(metric, x);
                match k.as_str() {
                    "max" => format!("≤ {x}"),
                    "min" => format!("≥ {x}"),
                    "equals" => format!("= {x}"),
                    other => format!("{other} {x}"),
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        _ => super::format::threshold(v),
    }
}

/// Gather the facts of a record. `digest` is the hex sha256 of its `record.json`.
pub fn facts(rec: &Record, digest: &str, attr: &Attribution) -> Facts {
    facts_at(rec, digest, attr, None)
}

/// [`facts`], with the record folder where the reader finds it.
pub fn facts_at(
    rec: &Record,
    digest: &str,
    attr: &Attribution,
    record_dir: Option<&std::path::Path>,
) -> Facts {
    let pins = pin_report(rec);
    let line = |e: &crate::pins::PinEntry| PinLine {
        kind: e.kind.as_str().to_string(),
        name: e.name.clone(),
        declared: opt(&e.declared),
        observed: opt(&e.observed),
        status: e.status.as_str().to_string(),
        message: e.message.clone(),
        text: pin_text(e),
    };
    let drift = pins
        .drift
        .iter()
        .map(|d| PinLine {
            kind: d.kind.as_str().to_string(),
            name: d.name.clone(),
            declared: opt(&d.declared),
            observed: opt(&d.observed),
            status: d.status.as_str().to_string(),
            message: d.message.clone(),
            text: format!(
                "{} {}: declared {}, observed {} ({})",
                d.kind.as_str(),
                d.name,
                opt(&d.declared),
                opt(&d.observed),
                d.status.as_str()
            ),
        })
        .collect();
    let h = &rec.run.host;
    let host = vec![
        format!("host {}: {}, kernel {}", h.hostname, h.os, h.kernel),
        format!(
            "CPU {} × {}, memory {}",
            h.cpu_model,
            h.cpus,
            bytes(h.memory_bytes as f64)
        ),
    ];
    let devices: Vec<DeviceLine> = rec
        .allocations
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
            step_md: {
                let with: Vec<String> = rec
                    .run
                    .steps
                    .iter()
                    .filter(|d| d.interleaved_with.as_deref() == Some(a.step.as_str()))
                    .map(|d| super::format::code(&d.id))
                    .collect();
                if with.is_empty() {
                    super::format::code(&a.step)
                } else {
                    format!(
                        "{} interleaved with {}",
                        super::format::code(&a.step),
                        with.join(", ")
                    )
                }
            },
        })
        .collect();
    let any_simulated = devices.iter().any(|d| d.simulated);
    let mut simulated_devices: Vec<String> = Vec::new();
    for d in devices.iter().filter(|d| d.simulated) {
        if !simulated_devices.contains(&d.device) {
            simulated_devices.push(d.device.clone());
        }
    }
    let record_path = record_path(rec, record_dir);
    let steps: Vec<StepLine> = rec.steps.iter().map(|s| step_line(rec, s)).collect();
    let mut counts: Vec<StatusCount> = Vec::new();
    for s in &steps {
        match counts.iter_mut().find(|c| c.status == s.status) {
            Some(c) => c.n += 1,
            None => counts.push(StatusCount {
                status: s.status.clone(),
                n: 1,
            }),
        }
    }
    let notable: Vec<StepLine> = steps
        .iter()
        .filter(|s| s.status != "succeeded" && s.status != "reused")
        .cloned()
        .collect();
    let mut by_time: Vec<(f64, &StepLine)> = rec
        .steps
        .iter()
        .zip(&steps)
        .filter_map(|(r, l)| r.wall_ms.map(|w| (w.median, l)))
        .collect();
    by_time.sort_by(|a, b| b.0.total_cmp(&a.0));
    let slowest: Vec<StepLine> = by_time
        .iter()
        .take(SLOWEST)
        .map(|(_, l)| (*l).clone())
        .collect();
    let metrics: Vec<MetricLine> = super::metrics::step_metrics(rec)
        .iter()
        .map(|m| MetricLine {
            step: m.step.clone(),
            name: m.name.clone(),
            text: m.text.clone(),
            headline: m.headline,
            dispersion_note: super::metrics::dispersion_words(m),
        })
        .collect();
    let release = match &rec.release_audit {
        Some(a) => Release {
            audited: true,
            passed: a.passed,
            checked: a.checked.clone(),
            leftovers: a.leftovers.clone(),
        },
        None => Release {
            audited: false,
            passed: false,
            checked: Vec::new(),
            leftovers: Vec::new(),
        },
    };
    Facts {
        run_id: rec.run_id.clone(),
        status: rec.status.as_str().to_string(),
        reason: rec.reason.clone(),
        started_at: rec.started_at.clone(),
        ended_at: rec.ended_at.clone(),
        plan_name: rec.run.plan.name.clone(),
        description: rec.run.plan.description.clone(),
        changes: rec.run.plan.changes.clone(),
        plan_sha256: rec.run.plan.sha256.clone(),
        orchestrator_version: rec.run.orchestrator.version.clone(),
        binary_sha256: rec.run.orchestrator.binary_sha256.clone(),
        digest: digest.to_string(),
        verify_command: format!("orchestrate verify {record_path}"),
        record_path,
        git_line: super::revisions::revision_line(rec).unwrap_or_else(|| git_line(&pins)),
        revisions: super::revisions::revision_facts(rec),
        pins: pins
            .entries
            .iter()
            .map(line)
            .chain(rec.run.revisions.iter().map(revision_pin))
            .collect(),
        drift,
        sources: pins
            .sources
            .iter()
            .map(|s| SourceLine {
                role: serde_json::to_value(s.role)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                name: s.name.clone(),
                digest: s.digest.clone(),
            })
            .collect(),
        host,
        isolation: isolation_line(rec),
        devices,
        any_simulated,
        simulated_devices,
        metrics,
        compact: steps.len() > COMPACT_ABOVE,
        status_counts: counts,
        notable,
        cache: cache_lines(rec),
        slowest,
        prefill: rec
            .steps
            .iter()
            .filter(|s| s.kind == StepKind::Prefill && cell_of(rec, s).is_empty())
            .map(|s| prefill_facts(rec, attr, s))
            .collect(),
        handoffs: rec
            .steps
            .iter()
            .filter(|s| s.kind == StepKind::Handoff && cell_of(rec, s).is_empty())
            .map(|s| handoff_facts(rec, attr, s))
            .collect(),
        cells: cell_blocks(rec, attr),
        steps,
        checks: rec
            .comparisons
            .iter()
            .map(|c| CheckLine {
                step: c.step.clone(),
                name: c.name.clone(),
                metric: c.metric.clone(),
                value: check_value(&c.metric, &c.value),
                threshold: check_threshold(&c.metric, &c.threshold),
                passed: c.passed,
                error: c.error.clone(),
            })
            .collect(),
        failures: failure_lines(rec),
        release,
        limits: limit_lines(&rec.run.plan.limits),
        unenforced: unenforced(rec),
        warnings: rec.warnings.clone(),
    }
}

/// Failures grouped by step (in record order), each try that was tried again said so.
fn failure_lines(rec: &Record) -> Vec<String> {
    let order = |step: &str| {
        rec.steps
            .iter()
            .position(|s| s.id == step)
            .unwrap_or(usize::MAX)
    };
    let mut fs: Vec<&crate::evidence::record::Failure> = rec.failures.iter().collect();
    fs.sort_by_key(|f| order(&f.step));
    fs.into_iter()
        .map(|f| {
            let retried = f.attempt.is_some_and(|a| {
                rec.steps
                    .iter()
                    .filter(|s| s.id == f.step)
                    .flat_map(|s| &s.attempts)
                    .any(|x| x.attempt == a + 1 && x.retry > 0)
            });
            format!(
                "{}: {}{}",
                f.step,
                f.what,
                if retried { " (tried again)" } else { "" }
            )
        })
        .collect()
}

#[cfg(test)]
mod wall_tests {
    use super::wall_range;
    use crate::evidence::record::Stats;

    #[test]
    fn repeats_that_round_alike_keep_their_difference() {
        let st = |min, max| Stats {
            n: 3,
            min,
            median: (min + max) / 2.0,
            max,
        };
        assert_eq!(wall_range(&st(1300.0, 1360.0)), "1.30 s–1.36 s");
        assert_eq!(wall_range(&st(1355.2, 1362.1)), "1.355–1.362 s");
        assert_eq!(wall_range(&st(11876.0, 11880.0)), "11.876–11.880 s");
        assert_eq!(wall_range(&st(12.31, 12.34)), "12.31–12.34 ms");
        assert_eq!(wall_range(&st(5.0, 5.0)), "5.0 ms–5.0 ms");
    }
}
