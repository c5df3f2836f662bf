//! Pins, limits and isolation as the PR body states them.

#[allow(unused_imports)]
use super::*;

/// The record's pins.
pub fn pin_report(rec: &Record) -> PinReport {
    rec.run.pins.clone()
}

pub(super) fn opt(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "-".to_string())
}

pub(super) fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

pub(super) fn pin_text(e: &crate::record::pins::PinEntry) -> String {
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

/// Pins, then revisions as pins, so what ran shows beside what was pinned.
pub(super) fn pin_lines(rec: &Record, pins: &PinReport) -> Vec<PinLine> {
    pins.entries
        .iter()
        .map(|e| PinLine {
            kind: e.kind.as_str().to_string(),
            name: e.name.clone(),
            declared: opt(&e.declared),
            observed: opt(&e.observed),
            status: e.status.as_str().to_string(),
            message: e.message.clone(),
            text_md: crate::report::format::md_line(&pin_text(e)),
            text: pin_text(e),
        })
        .chain(rec.run.revisions.iter().map(revision_pin))
        .collect()
}

/// The pins that did not match, each phrased with both sides so the drift is plain.
pub(super) fn drift_lines(pins: &PinReport) -> Vec<PinLine> {
    pins.drift
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
            text_md: String::new(),
        })
        .map(|mut l| {
            l.text_md = crate::report::format::md_line(&l.text);
            l
        })
        .collect()
}

/// The hashed sources, their role as the record spells it (empty if it has none).
pub(super) fn source_lines(pins: &PinReport) -> Vec<SourceLine> {
    pins.sources
        .iter()
        .map(|s| SourceLine {
            role: serde_json::to_value(s.role)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            name: s.name.clone(),
            digest: s.digest.clone(),
        })
        .collect()
}

/// A revision as a pin line: what ran, where, and how.
pub(super) fn revision_pin(r: &crate::record::pins::RevisionRecord) -> PinLine {
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
    let text = |name: String, requested: String, rest: String| {
        format!(
            "revision {name}{role}: {requested} is {} (tree {}), {rest}",
            short_hash(&r.commit, 7),
            short_hash(&r.tree, 7)
        )
    };
    use crate::report::format::{code, md_text};
    PinLine {
        text_md: text(md_text(&r.name), code(&r.requested), md_text(&how)),
        kind: "revision".into(),
        name: r.name.clone(),
        declared: r.requested.clone(),
        observed: r.commit.clone(),
        status: "resolved".into(),
        message: None,
        text: text(r.name.clone(), r.requested.clone(), how.clone()),
    }
}

pub(super) fn git_line(pins: &PinReport) -> String {
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
pub(super) fn limit_lines(l: &crate::record::run::PlanLimits) -> Vec<String> {
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
pub(super) fn unenforced(rec: &Record) -> Vec<String> {
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
                .is_some_and(|e| e.mode == crate::record::attempt::Enforcer::None)
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

/// The line that heads the summary and the PR body when attempts ran with no
/// isolation at all, so that no limit is read as held: why there was none.
pub(crate) fn not_enforced(rec: &Record) -> Option<String> {
    use crate::record::attempt::Enforcer;
    let enforcers: Vec<Enforcer> = rec
        .steps
        .iter()
        .flat_map(|s| &s.attempts)
        .filter_map(|a| a.enforcement.as_ref().map(|e| e.mode))
        .collect();
    let unisolated = enforcers.contains(&Enforcer::None)
        || (enforcers.is_empty() && rec.run.isolation.info.mode == Enforcer::None);
    if !unisolated {
        return None;
    }
    Some(match rec.run.isolation.warnings.first() {
        Some(w) => w.clone(),
        None => "isolation \"none\" was asked for: memory, pids, cpuset and device limits \
                 were not enforced"
            .into(),
    })
}

pub(super) fn isolation_line(rec: &Record) -> String {
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
    if let Some(scope) = &info.systemd_scope {
        s.push_str(&format!(
            "; in the user's systemd scope {}, delegated [{}]",
            scope.unit,
            scope.delegated.join(" ")
        ));
        if !scope.not_delegated.is_empty() {
            s.push_str(&format!(
                "; not delegated: {}",
                scope.not_delegated.join("; ")
            ));
        }
    }
    s
}
