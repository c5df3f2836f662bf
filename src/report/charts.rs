//! Geometry of the HTML report's SVG charts, computed here so the template only
//! places precomputed numbers: a timeline of every attempt, the repeat timings of
//! each step, and peak memory against the limit for each attempt. Coordinates are
//! formatted with one decimal so the output is stable.

use serde::Serialize;

use super::format::{bytes, duration_ms};
use crate::record::run::{AttemptRecord, Record};

/// Chart width in SVG units (the page scales it).
const WIDTH: f64 = 960.0;
/// Left column for row labels.
const LABEL_W: f64 = 170.0;
/// Right margin for value labels.
const RIGHT_W: f64 = 150.0;
const ROW_H: f64 = 24.0;
const TOP: f64 = 24.0;

/// All charts of one record.
#[derive(Debug, Clone, Serialize)]
pub struct Charts {
    pub width: String,
    pub timeline: Timeline,
    pub repeats: Repeats,
    pub memory: Memory,
    /// One chart per step metric, rows the steps that wrote it.
    pub metrics: Vec<MetricChart>,
}

/// The repeats of one step metric.
#[derive(Debug, Clone, Serialize)]
pub struct MetricChart {
    pub name: String,
    pub chart: Repeats,
}

/// One row of a dot chart: its label, its dots (value, class, tooltip), its median
/// mark and the text at its right.
struct DotRow {
    label: String,
    dots: Vec<(f64, String, String)>,
    median: Option<(f64, String)>,
    note: String,
    /// Tooltip of the row's scale line.
    scale: String,
}

/// One row label.
#[derive(Debug, Clone, Serialize)]
pub struct Label {
    pub y: String,
    pub text: String,
}

/// An axis tick.
#[derive(Debug, Clone, Serialize)]
pub struct Tick {
    pub x: String,
    pub text: String,
}

/// A rectangle with its class (outcome) and tooltip.
#[derive(Debug, Clone, Serialize)]
pub struct Bar {
    pub x: String,
    pub y: String,
    pub w: String,
    pub h: String,
    pub class: String,
    pub title: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    pub height: String,
    pub axis_y: String,
    pub labels: Vec<Label>,
    pub ticks: Vec<Tick>,
    pub bars: Vec<Bar>,
    /// False when no attempt has parsable times.
    pub any: bool,
}

/// A dot for one attempt's wall time.
#[derive(Debug, Clone, Serialize)]
pub struct Dot {
    pub cx: String,
    pub cy: String,
    pub class: String,
    pub title: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Repeats {
    pub height: String,
    pub labels: Vec<Label>,
    /// Baseline per row.
    pub rules: Vec<Bar>,
    pub medians: Vec<Bar>,
    pub dots: Vec<Dot>,
    /// Range text at the right of each row.
    pub notes: Vec<Label>,
    /// Where the notes start.
    pub note_x: String,
    pub any: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Memory {
    pub height: String,
    pub labels: Vec<Label>,
    pub tracks: Vec<Bar>,
    pub bars: Vec<Bar>,
    /// Limit markers (thin bars).
    pub limits: Vec<Bar>,
    pub notes: Vec<Label>,
    /// Where the notes start.
    pub note_x: String,
    pub any: bool,
}

fn n(x: f64) -> String {
    format!("{:.1}", if x.is_finite() { x } else { 0.0 })
}

/// Outcome class of an attempt: ok, warmup, failed, cancelled.
pub fn outcome(a: &AttemptRecord) -> &'static str {
    if a.termination == crate::record::run::Termination::Cancelled {
        "cancelled"
    } else if !a.succeeded() {
        "failed"
    } else if a.warmup {
        "warmup"
    } else {
        "ok"
    }
}

fn parse_time(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    chrono::DateTime::parse_from_rfc3339(s).ok()
}

fn attempt_name(step: &str, a: &AttemptRecord) -> String {
    format!(
        "{step} #{}{}",
        a.attempt,
        if a.warmup { " (warm-up)" } else { "" }
    )
}

fn timeline(rec: &Record) -> Timeline {
    let start = parse_time(&rec.started_at);
    let plot_w = WIDTH - LABEL_W - 40.0;
    let mut spans = Vec::new();
    for (row, s) in rec.steps.iter().enumerate() {
        for a in &s.attempts {
            let (Some(t0), Some(b), Some(e)) =
                (start, parse_time(&a.started_at), parse_time(&a.ended_at))
            else {
                continue;
            };
            let from = (b - t0).num_microseconds().unwrap_or(0) as f64 / 1000.0;
            let to = (e - t0).num_microseconds().unwrap_or(0) as f64 / 1000.0;
            spans.push((row, from.max(0.0), to.max(from).max(0.0), s.id.as_str(), a));
        }
    }
    let end = spans.iter().map(|s| s.2).fold(0.0_f64, f64::max).max(1e-3);
    let x = |ms: f64| LABEL_W + ms / end * plot_w;
    let bars = spans
        .iter()
        .map(|(row, from, to, step, a)| Bar {
            x: n(x(*from)),
            y: n(TOP + *row as f64 * ROW_H + 4.0),
            w: n((x(*to) - x(*from)).max(1.5)),
            h: n(ROW_H - 8.0),
            class: outcome(a).to_string(),
            title: format!(
                "{}: {} from {} to {} ({})",
                attempt_name(step, a),
                a.termination.as_str(),
                duration_ms(*from),
                duration_ms(*to),
                duration_ms(a.wall_ms)
            ),
        })
        .collect();
    let rows = rec.steps.len() as f64;
    let axis_y = TOP + rows * ROW_H + 4.0;
    Timeline {
        height: n(axis_y + 24.0),
        axis_y: n(axis_y),
        labels: rec
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| Label {
                y: n(TOP + i as f64 * ROW_H + ROW_H / 2.0 + 4.0),
                text: s.id.clone(),
            })
            .collect(),
        ticks: (0..=4)
            .map(|i| {
                let ms = end * i as f64 / 4.0;
                Tick {
                    x: n(x(ms)),
                    text: if i == 0 { "0".into() } else { duration_ms(ms) },
                }
            })
            .collect(),
        any: !spans.is_empty(),
        bars,
    }
}

/// A dot chart, each row on its own scale (0 to its largest value): repeats are
/// compared within a row.
fn dot_chart(rows: Vec<DotRow>) -> Repeats {
    let plot_w = WIDTH - LABEL_W - RIGHT_W;
    let mut r = Repeats {
        height: n(TOP + rows.len() as f64 * ROW_H + 8.0),
        labels: Vec::new(),
        rules: Vec::new(),
        medians: Vec::new(),
        dots: Vec::new(),
        notes: Vec::new(),
        note_x: n(LABEL_W + plot_w + 8.0),
        any: !rows.is_empty(),
    };
    for (i, row) in rows.into_iter().enumerate() {
        let cy = TOP + i as f64 * ROW_H + ROW_H / 2.0;
        let max = row
            .dots
            .iter()
            .map(|d| d.0.abs())
            .fold(0.0_f64, f64::max)
            .max(1e-3);
        let x = |v: f64| LABEL_W + v.abs() / max * plot_w;
        r.labels.push(Label {
            y: n(cy + 4.0),
            text: row.label,
        });
        r.rules.push(Bar {
            x: n(LABEL_W),
            y: n(cy),
            w: n(plot_w),
            h: "1.0".into(),
            class: "rule".into(),
            title: row.scale,
        });
        if let Some((m, title)) = row.median {
            r.medians.push(Bar {
                x: n(x(m) - 1.0),
                y: n(cy - 8.0),
                w: "2.0".into(),
                h: "16.0".into(),
                class: "median".into(),
                title,
            });
        }
        for (v, class, title) in row.dots {
            r.dots.push(Dot {
                cx: n(x(v)),
                cy: n(cy),
                class,
                title,
            });
        }
        r.notes.push(Label {
            y: n(cy + 4.0),
            text: row.note,
        });
    }
    r
}

fn repeats(rec: &Record) -> Repeats {
    let rows = rec
        .steps
        .iter()
        .filter(|s| !s.attempts.is_empty())
        .map(|s| DotRow {
            label: s.id.clone(),
            scale: format!(
                "0 – {}",
                duration_ms(
                    s.attempts
                        .iter()
                        .map(|a| a.wall_ms)
                        .fold(0.0_f64, f64::max)
                        .max(1e-3)
                )
            ),
            dots: s
                .attempts
                .iter()
                .map(|a| {
                    (
                        a.wall_ms,
                        outcome(a).to_string(),
                        format!("{}: {}", attempt_name(&s.id, a), duration_ms(a.wall_ms)),
                    )
                })
                .collect(),
            median: s.wall_ms.map(|st| {
                (
                    st.median,
                    format!("median {} of {} measured", duration_ms(st.median), st.n),
                )
            }),
            note: match s.wall_ms {
                Some(st) if st.n > 1 => {
                    format!("{}–{}", duration_ms(st.min), duration_ms(st.max))
                }
                Some(st) => duration_ms(st.median),
                None => "no measured success".into(),
            },
        })
        .collect();
    dot_chart(rows)
}

/// One chart per step metric (the metric's name on each row's step).
fn metric_charts(rec: &Record) -> Vec<MetricChart> {
    let all = super::metrics::step_metrics(rec);
    let mut names: Vec<&str> = all.iter().map(|m| m.name.as_str()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let rows = all
                .iter()
                .filter(|m| m.name == name)
                .map(|m| DotRow {
                    label: m.step.clone(),
                    scale: format!(
                        "0 – {}",
                        super::metrics::value_text(name, m.stats.max, &m.stats)
                    ),
                    dots: m
                        .values
                        .iter()
                        .map(|(attempt, v)| {
                            (
                                *v,
                                "ok".to_string(),
                                format!(
                                    "{} #{attempt}: {}",
                                    m.step,
                                    super::metrics::value_text(name, *v, &m.stats)
                                ),
                            )
                        })
                        .collect(),
                    median: Some((
                        m.stats.median,
                        format!(
                            "median {}",
                            super::metrics::value_text(name, m.stats.median, &m.stats)
                        ),
                    )),
                    note: m.text.clone(),
                })
                .collect();
            MetricChart {
                name: name.to_string(),
                chart: dot_chart(rows),
            }
        })
        .collect()
}

fn memory(rec: &Record) -> Memory {
    let plot_w = WIDTH - LABEL_W - RIGHT_W - 40.0;
    let rows: Vec<(&str, &AttemptRecord)> = rec
        .steps
        .iter()
        .flat_map(|s| s.attempts.iter().map(move |a| (s.id.as_str(), a)))
        .collect();
    let mut m = Memory {
        height: n(TOP + rows.len() as f64 * ROW_H + 8.0),
        labels: Vec::new(),
        tracks: Vec::new(),
        bars: Vec::new(),
        limits: Vec::new(),
        notes: Vec::new(),
        note_x: n(LABEL_W + plot_w + 8.0),
        any: !rows.is_empty(),
    };
    for (i, (step, a)) in rows.iter().enumerate() {
        let y = TOP + i as f64 * ROW_H;
        m.labels.push(Label {
            y: n(y + ROW_H / 2.0 + 4.0),
            text: attempt_name(step, a),
        });
        m.tracks.push(Bar {
            x: n(LABEL_W),
            y: n(y + 5.0),
            w: n(plot_w),
            h: n(ROW_H - 10.0),
            class: "track".into(),
            title: String::new(),
        });
        let peak = a.peak_memory_bytes.map(|p| p as f64);
        let limit = a.memory_limit_bytes.map(|l| l as f64);
        // One scale per row: the limit, or the peak when it went past (or no limit).
        let scale = peak.unwrap_or(0.0).max(limit.unwrap_or(0.0)).max(1.0);
        let x = |b: f64| LABEL_W + b / scale * plot_w;
        if let Some(p) = peak {
            m.bars.push(Bar {
                x: n(LABEL_W),
                y: n(y + 5.0),
                w: n((x(p) - LABEL_W).max(1.5)),
                h: n(ROW_H - 10.0),
                class: if limit.is_some_and(|l| p >= l) {
                    "over"
                } else {
                    outcome(a)
                }
                .to_string(),
                title: format!("{}: peak {}", attempt_name(step, a), bytes(p)),
            });
        }
        if let Some(l) = limit {
            m.limits.push(Bar {
                x: n(x(l) - 1.0),
                y: n(y + 1.0),
                w: "2.0".into(),
                h: n(ROW_H - 2.0),
                class: "limit".into(),
                title: format!("limit {}", bytes(l)),
            });
        }
        m.notes.push(Label {
            y: n(y + ROW_H / 2.0 + 4.0),
            text: match (peak, limit) {
                (Some(p), Some(l)) => format!("{} of {}", bytes(p), bytes(l)),
                (Some(p), None) => format!("{} (no limit)", bytes(p)),
                (None, Some(l)) => format!("not measured (limit {})", bytes(l)),
                (None, None) => "not measured".into(),
            },
        });
    }
    m
}

/// The charts of a record.
pub fn charts(rec: &Record) -> Charts {
    Charts {
        width: n(WIDTH),
        timeline: timeline(rec),
        repeats: repeats(rec),
        memory: memory(rec),
        metrics: metric_charts(rec),
    }
}
