//! How a [`Diff`] reads: Markdown tables with a column per run, plain text with
//! values joined by `->`, or JSON. Every layout visits the same rows once.

use super::{CheckRow, Diff, MetricRow, ResultsRow, Row, StepRow};
use serde::Serialize;

use crate::report::error::ReportError;
use crate::report::format::{duration_ms, json_value, md_cell};

/// Output format of a diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffFormat {
    Md,
    Text,
    Json,
}

/// The diff in `format`.
pub fn render(d: &Diff, format: DiffFormat) -> Result<String, ReportError> {
    match format {
        DiffFormat::Json => {
            let mut s = serde_json::to_string_pretty(d)
                .map_err(|e| ReportError::Serialize(e.to_string()))?;
            s.push('\n');
            Ok(s)
        }
        DiffFormat::Md => Ok(markdown(d)),
        DiffFormat::Text => Ok(text(d)),
    }
}

fn opt_ms(v: &Option<f64>) -> String {
    v.map(duration_ms).unwrap_or_else(|| "-".into())
}

fn opt_ratio(v: &Option<f64>) -> String {
    v.map(|r| format!("{}×", crate::report::format::ratio(r)))
        .unwrap_or_else(|| "-".into())
}

fn opt_pct(v: &Option<f64>) -> String {
    v.map(crate::report::format::percent)
        .unwrap_or_else(|| "-".into())
}

fn opt_val(v: &Option<serde_json::Value>) -> String {
    v.as_ref()
        .map(json_value)
        .unwrap_or_else(|| "(absent)".into())
}

fn opt_pass(v: &Option<bool>) -> String {
    match v {
        Some(true) => "pass",
        Some(false) => "FAIL",
        None => "-",
    }
    .into()
}

fn mark(s: &str, changed: bool) -> String {
    if changed {
        format!("**{}**", md_cell(s))
    } else {
        md_cell(s)
    }
}

/// A step id in a table cell: a code span, bold when it changed.
fn mark_id(s: &str, changed: bool) -> String {
    let c = crate::report::format::code_cell(s);
    if changed {
        format!("**{c}**")
    } else {
        c
    }
}

/// The diff's sections, in the order every layout shows them.
#[derive(Clone, Copy)]
enum Section {
    Pins,
    Parameters,
    Environment,
    Steps,
    Metrics,
    Results,
    Checks,
}

/// A row's numbers as every layout states them, formatted once: a value per run,
/// a ratio per later run, and one more figure per run (dispersion, verdict).
struct Cells {
    values: Vec<String>,
    ratios: Vec<String>,
    more: Vec<String>,
}

/// One format's way of laying out what [`walk`] visits once.
trait Layout {
    fn section(&mut self, s: Section);
    fn pair(&mut self, r: &Row);
    fn step(&mut self, s: &StepRow, c: &Cells);
    fn metric(&mut self, m: &MetricRow, c: &Cells);
    fn results(&mut self, r: &ResultsRow);
    fn check(&mut self, c: &CheckRow, v: &Cells);
}

/// Every section and row of the diff, each visited once, handed to `l`.
fn walk(d: &Diff, l: &mut impl Layout) {
    for (s, rows) in [
        (Section::Pins, &d.pins),
        (Section::Parameters, &d.parameters),
        (Section::Environment, &d.environment),
    ] {
        l.section(s);
        rows.iter().for_each(|r| l.pair(r));
    }
    l.section(Section::Steps);
    for s in &d.steps {
        let c = Cells {
            values: s.median_ms.iter().map(opt_ms).collect(),
            ratios: s.ratio.iter().map(opt_ratio).collect(),
            more: s.dispersion.iter().map(opt_pct).collect(),
        };
        l.step(s, &c);
    }
    if !d.metrics.is_empty() {
        l.section(Section::Metrics);
        for m in &d.metrics {
            let c = Cells {
                values: m
                    .text
                    .iter()
                    .map(|t| t.clone().unwrap_or_else(|| "(absent)".into()))
                    .collect(),
                ratios: m.ratio.iter().map(opt_ratio).collect(),
                more: Vec::new(),
            };
            l.metric(m, &c);
        }
    }
    if !d.results.is_empty() {
        l.section(Section::Results);
        d.results.iter().for_each(|r| l.results(r));
    }
    l.section(Section::Checks);
    for c in &d.checks {
        let v = Cells {
            values: c.value.iter().map(opt_val).collect(),
            ratios: Vec::new(),
            more: c.passed.iter().map(opt_pass).collect(),
        };
        l.check(c, &v);
    }
}

/// Markdown tables, a column per run; `labels` head the columns.
struct Markdown {
    out: String,
    labels: Vec<String>,
}

impl Markdown {
    /// `| a | b | c |` and its rule, for a header of these cells.
    fn header(&mut self, title: &str, cells: &[String]) {
        // An empty cell is one space, as in `| | A | B |`.
        let head: Vec<String> = cells
            .iter()
            .map(|c| {
                if c.is_empty() {
                    " ".into()
                } else {
                    format!(" {c} ")
                }
            })
            .collect();
        self.out.push_str(&format!(
            "\n## {title}\n\n|{}|\n|{}\n",
            head.join("|"),
            "---|".repeat(cells.len())
        ));
    }
    fn each(&self, what: &str) -> Vec<String> {
        self.labels.iter().map(|l| format!("{what}{l}")).collect()
    }
    fn later(&self) -> Vec<String> {
        let first = self.labels.first().cloned().unwrap_or_default();
        self.labels
            .iter()
            .skip(1)
            .map(|l| format!("{l}/{first}"))
            .collect()
    }
    fn line(&mut self, cells: Vec<String>) {
        self.out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
}

impl Layout for Markdown {
    fn section(&mut self, s: Section) {
        let mut h: Vec<String>;
        match s {
            Section::Pins | Section::Parameters | Section::Environment => {
                h = vec![String::new()];
                h.extend(self.each(""));
                let title = match s {
                    Section::Pins => "Pins",
                    Section::Parameters => "Parameters",
                    _ => "Environment",
                };
                self.header(title, &h);
            }
            Section::Steps => {
                h = vec!["step".into()];
                h.extend(self.each("status "));
                h.extend(self.each("median "));
                h.extend(self.later());
                h.extend(self.each("dispersion "));
                self.header("Steps", &h);
            }
            Section::Metrics => {
                h = vec!["step".into(), "metric".into()];
                h.extend(self.each(""));
                h.extend(self.later());
                self.header("Step metrics", &h);
            }
            Section::Results => {
                let first = self.labels.first().cloned().unwrap_or_default();
                let later = self.labels[1.min(self.labels.len())..].join(", ");
                self.out.push_str(&format!(
                    "\n## Tests and findings ({later} against {first})\n\n"
                ));
            }
            Section::Checks => {
                h = vec!["check".into(), "metric".into()];
                h.extend(self.each("value "));
                h.extend(self.each(""));
                self.header("Checks", &h);
            }
        }
    }
    fn pair(&mut self, r: &Row) {
        let mut cells = vec![mark(&r.name, r.changed)];
        cells.extend(r.values.iter().map(|v| mark(v, r.changed)));
        self.line(cells);
    }
    fn step(&mut self, s: &StepRow, c: &Cells) {
        let mut cells = vec![mark_id(&s.step, s.changed)];
        cells.extend(s.status.iter().map(|v| mark(v, s.changed)));
        let t = s.timing_changed;
        cells.extend(c.values.iter().map(|v| mark(v, t)));
        cells.extend(c.ratios.iter().map(|v| mark(v, t)));
        cells.extend(c.more.iter().cloned());
        self.line(cells);
    }
    fn metric(&mut self, m: &MetricRow, c: &Cells) {
        let mut cells = vec![mark_id(&m.step, false), md_cell(&m.name)];
        cells.extend(c.values.iter().map(|v| mark(v, m.changed)));
        cells.extend(c.ratios.iter().map(|v| mark(v, m.changed)));
        self.line(cells);
    }
    fn results(&mut self, r: &ResultsRow) {
        let step = crate::report::format::code(&r.step);
        let who = who(&self.labels, r);
        self.out
            .push_str(&format!("- {step}{who}: {}.\n", r.lines_md.join("; ")));
    }
    fn check(&mut self, c: &CheckRow, v: &Cells) {
        let mut cells = vec![mark(&c.name, c.changed), c.metric.to_string()];
        cells.extend(v.values.iter().map(|x| mark(x, c.changed)));
        cells.extend(v.more.iter().cloned());
        self.line(cells);
    }
}

struct Text {
    out: String,
    labels: Vec<String>,
}

fn star(changed: bool) -> &'static str {
    if changed {
        "*"
    } else {
        " "
    }
}

impl Layout for Text {
    fn section(&mut self, s: Section) {
        let first = self.labels.first().cloned().unwrap_or_default();
        let later = self.labels[1.min(self.labels.len())..].join("/");
        let order = self.labels.join(" -> ");
        let each = self.labels.join(" / ");
        self.out.push_str(&match s {
            Section::Pins => "\npins:\n".into(),
            Section::Parameters => "\nparameters:\n".into(),
            Section::Environment => "\nenvironment:\n".into(),
            Section::Steps => {
                format!("\nsteps (median {order}, ratio {later}/{first}, dispersion {each}):\n")
            }
            Section::Metrics => format!("\nstep metrics ({order}, ratio {later}/{first}):\n"),
            Section::Results => format!("\ntests and findings ({later} against {first}):\n"),
            Section::Checks => format!("\nchecks (value {order}, result {each}):\n"),
        });
    }
    fn pair(&mut self, r: &Row) {
        let (mark, name) = (star(r.changed), &r.name);
        self.out.push_str(&format!("{mark} {name}\n"));
        for (l, v) in self.labels.iter().zip(&r.values) {
            self.out.push_str(&format!("    {l}: {v}\n"));
        }
    }
    fn step(&mut self, s: &StepRow, c: &Cells) {
        self.out.push_str(&format!(
            "{} {}: {}, {}, {}, {}\n",
            star(s.changed || s.timing_changed),
            s.step,
            s.status.join(" -> "),
            c.values.join(" -> "),
            c.ratios.join(", "),
            c.more.join(" / ")
        ));
    }
    fn metric(&mut self, m: &MetricRow, c: &Cells) {
        self.out.push_str(&format!(
            "{} {} {}: {}, {}\n",
            star(m.changed),
            m.step,
            m.name,
            c.values.join(" -> "),
            c.ratios.join(", ")
        ));
    }
    fn results(&mut self, r: &ResultsRow) {
        let who = who(&self.labels, r);
        self.out.push_str(&format!(
            "{} {}{who}: {}\n",
            star(r.changed),
            r.step,
            r.lines.join("; ")
        ));
    }
    fn check(&mut self, c: &CheckRow, v: &Cells) {
        self.out.push_str(&format!(
            "{} {} [{}]: {}, {}\n",
            star(c.changed),
            c.name,
            c.metric,
            v.values.join(" -> "),
            v.more.join(" / ")
        ));
    }
}

/// Which later run a results line is about, where there is more than one.
fn who(labels: &[String], r: &ResultsRow) -> String {
    if labels.len() > 2 {
        format!(" ({})", r.run)
    } else {
        String::new()
    }
}

fn title(d: &Diff, code: bool) -> String {
    d.runs
        .iter()
        .zip(&d.labels)
        .map(|(r, l)| {
            if code {
                format!("`{r}` ({l})")
            } else {
                format!("{l}: {r}")
            }
        })
        .collect::<Vec<_>>()
        .join(if code { " vs " } else { "\n" })
}

fn markdown(d: &Diff) -> String {
    let only = if d.only_changed {
        "Only what differs is shown.\n"
    } else {
        ""
    };
    let mut l = Markdown {
        out: format!("# {}\n{only}", title(d, true)),
        labels: d.labels.clone(),
    };
    walk(d, &mut l);
    l.out
}

fn text(d: &Diff) -> String {
    let only = if d.only_changed {
        ", only what differs is shown"
    } else {
        ""
    };
    let head = format!("{}\n(* marks a difference{only})\n", title(d, false));
    let mut l = Text {
        out: head,
        labels: d.labels.clone(),
    };
    walk(d, &mut l);
    l.out
}

/// A diff's rows as display text, a cell per run, for a reader that puts runs side
/// by side itself (the site's compare page): `same` is what must be equal in every
/// run for the row not to differ, `range` the min–max a timing or metric must
/// overlap the first run's with.
#[derive(Debug, Clone, Serialize)]
pub struct Columns {
    pub sections: Vec<ColumnSection>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ColumnSection {
    pub title: &'static str,
    pub rows: Vec<ColumnRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ColumnRow {
    pub key: String,
    pub cells: Vec<String>,
    pub same: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub range: Vec<Option<[f64; 2]>>,
}

fn pairs(title: &'static str, rows: &[Row]) -> ColumnSection {
    ColumnSection {
        title,
        rows: rows
            .iter()
            .map(|r| ColumnRow {
                key: r.name.clone(),
                cells: r.values.clone(),
                same: r.values.clone(),
                range: Vec::new(),
            })
            .collect(),
    }
}

/// The diff's pins, parameters, environment, steps, metrics and checks as columns.
pub fn columns(d: &Diff) -> Columns {
    let steps = d.steps.iter().map(|s| ColumnRow {
        key: s.step.clone(),
        cells: (0..s.status.len())
            .map(|i| {
                let ms = opt_ms(&s.median_ms[i]);
                match s.dispersion[i] {
                    Some(x) => format!(
                        "{} · {ms} ± {}",
                        s.status[i],
                        crate::report::format::percent(x)
                    ),
                    None => format!("{} · {ms}", s.status[i]),
                }
            })
            .collect(),
        same: s.status.clone(),
        range: s.range_ms.clone(),
    });
    let metrics = d.metrics.iter().map(|m| ColumnRow {
        key: format!("{} {}", m.step, m.name),
        cells: m
            .text
            .iter()
            .map(|t| t.clone().unwrap_or_else(|| "(absent)".into()))
            .collect(),
        same: m
            .text
            .iter()
            .map(|t| if t.is_some() { "" } else { "(absent)" }.into())
            .collect(),
        range: m.range.clone(),
    });
    let checks = d.checks.iter().map(|c| {
        let cells: Vec<String> = c
            .value
            .iter()
            .zip(&c.passed)
            .map(|(v, p)| format!("{} ({})", opt_val(v), opt_pass(p)))
            .collect();
        ColumnRow {
            // Check names are unique within a step only (a matrix's cells share them).
            key: format!("{}: {} [{}]", c.step, c.name, c.metric),
            same: cells.clone(),
            cells,
            range: Vec::new(),
        }
    });
    Columns {
        sections: vec![
            pairs("pins", &d.pins),
            pairs("parameters", &d.parameters),
            pairs("environment", &d.environment),
            ColumnSection {
                title: "steps (status · median ± dispersion)",
                rows: steps.collect(),
            },
            ColumnSection {
                title: "step metrics (min–max (median, n))",
                rows: metrics.collect(),
            },
            ColumnSection {
                title: "checks",
                rows: checks.collect(),
            },
        ],
    }
}
