//! Two runs side by side: pins, environment, per-step timings (median ratio B/A and
//! dispersion (max-min)/median, from `Stats`) and every check. Differences are marked:
//! `**` in Markdown, `*` in text, `changed: true` in JSON.

use std::path::Path;

use serde::Serialize;

use super::error::ReportError;
use super::facts::pin_report;
use super::format::{bytes, duration_ms, json_value, md_cell};
use crate::record::run::{Record, Stats};

/// Output format of a diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffFormat {
    Md,
    Text,
    Json,
}

/// One fact of both runs.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    pub a: String,
    pub b: String,
    pub changed: bool,
}

/// A step's timings in both runs.
#[derive(Debug, Clone, Serialize)]
pub struct StepRow {
    pub step: String,
    pub status_a: String,
    pub status_b: String,
    pub median_ms_a: Option<f64>,
    pub median_ms_b: Option<f64>,
    /// median B / median A.
    pub ratio: Option<f64>,
    pub dispersion_a: Option<f64>,
    pub dispersion_b: Option<f64>,
    /// The status differs.
    pub changed: bool,
}

/// A check in both runs.
#[derive(Debug, Clone, Serialize)]
pub struct CheckRow {
    pub step: String,
    pub name: String,
    pub metric: crate::record::plan::Metric,
    pub value_a: Option<serde_json::Value>,
    pub value_b: Option<serde_json::Value>,
    pub passed_a: Option<bool>,
    pub passed_b: Option<bool>,
    pub changed: bool,
}

/// A step metric (`ORCHESTRATE_METRICS`) in both runs.
#[derive(Debug, Clone, Serialize)]
pub struct MetricRow {
    pub step: String,
    pub name: String,
    /// min–max (median, n) over measured repeats.
    pub a: Option<String>,
    pub b: Option<String>,
    pub median_a: Option<f64>,
    pub median_b: Option<f64>,
    /// median B / median A.
    pub ratio: Option<f64>,
}

/// A step's test cases or findings in both runs, B classified against A as against a
/// baseline: new, pre-existing, fixed.
#[derive(Debug, Clone, Serialize)]
pub struct ResultsRow {
    pub step: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tests: Option<crate::record::results::TestsComparison>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<crate::record::results::FindingsComparison>,
    /// The same in words.
    pub lines: Vec<String>,
    /// The same in Markdown (ids as code spans).
    #[serde(skip)]
    pub lines_md: Vec<String>,
}

/// Everything a diff shows.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    pub run_a: String,
    pub run_b: String,
    pub pins: Vec<Row>,
    pub environment: Vec<Row>,
    pub steps: Vec<StepRow>,
    pub metrics: Vec<MetricRow>,
    pub checks: Vec<CheckRow>,
    pub results: Vec<ResultsRow>,
}

/// Steps of both runs with test reports or findings, B against A.
fn results_rows(a: &Record, b: &Record) -> Vec<ResultsRow> {
    use crate::evidence::revisions::results_of;
    use crate::results::classify;
    b.steps
        .iter()
        .filter_map(|sb| {
            let sa = a.steps.iter().find(|s| s.id == sb.id)?;
            let (ra, rb) = (results_of(sa)?, results_of(sb)?);
            let ok = |j: &Option<crate::record::results::JunitResults>| {
                j.as_ref().filter(|j| j.error.is_none()).cloned()
            };
            let tests = match (ok(&ra.junit), ok(&rb.junit)) {
                (Some(x), Some(y)) => Some(classify::tests(&x, &y)),
                _ => None,
            };
            // Findings are keyed by file relative to the repository each scanned.
            use crate::evidence::revisions::findings_of;
            let findings = match (findings_of(a, sa), findings_of(b, sb)) {
                (Some(x), Some(y)) => Some(classify::findings(&x, &y, ("", ""))),
                _ => None,
            };
            if tests.is_none() && findings.is_none() {
                return None;
            }
            use super::facts::short::Style;
            let shown = |id: &str| id.to_string();
            let lines_in = |style| {
                super::revisions::comparison_lines(
                    tests.as_ref(),
                    findings.as_ref(),
                    "A",
                    style,
                    &shown,
                )
            };
            Some(ResultsRow {
                step: sb.id.clone(),
                lines: lines_in(Style::Plain),
                lines_md: lines_in(Style::Markdown),
                tests,
                findings,
            })
        })
        .collect()
}

/// (max - min) / median, from the one `Stats` definition; none for a single value,
/// which has no spread to speak of (a dash, as the report shows it).
pub fn dispersion(s: &Stats) -> Option<f64> {
    (s.n > 1 && s.median > 0.0).then(|| (s.max - s.min) / s.median)
}

fn row(name: &str, a: String, b: String) -> Row {
    Row {
        name: name.to_string(),
        changed: a != b,
        a,
        b,
    }
}

fn isolation_mode(r: &Record) -> String {
    let info = &r.run.isolation.info;
    match info.cgroup_version {
        Some(v) => format!("{} (cgroup v{v})", info.mode),
        None => info.mode.to_string(),
    }
}

/// Compare two records already in memory.
pub fn diff_records(a: &Record, b: &Record) -> Diff {
    Diff {
        run_a: a.run_id.clone(),
        run_b: b.run_id.clone(),
        pins: pin_rows(a, b),
        environment: environment_rows(a, b),
        steps: step_rows(a, b),
        metrics: metric_rows(a, b),
        checks: check_rows(a, b),
        results: results_rows(a, b),
    }
}

/// Each key once, in the order first seen: A's rows first, then what only B has.
fn first_seen<K: PartialEq>(keys: impl Iterator<Item = K>) -> Vec<K> {
    let mut out: Vec<K> = Vec::new();
    for k in keys {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// Every pin of either run, then plan and binary: what was run, side by side.
fn pin_rows(a: &Record, b: &Record) -> Vec<Row> {
    let (pa, pb) = (pin_report(a), pin_report(b));
    let keys = first_seen(
        pa.entries
            .iter()
            .chain(pb.entries.iter())
            .map(|e| (e.kind.as_str().to_string(), e.name.clone())),
    );
    let mut pins = Vec::new();
    for (kind, name) in &keys {
        let find = |p: &crate::record::pins::PinReport| {
            p.entries
                .iter()
                .find(|e| e.kind.as_str() == kind && &e.name == name)
                .cloned()
        };
        let show = |e: &Option<crate::record::pins::PinEntry>| match e {
            Some(e) => format!(
                "declared {}, observed {} ({})",
                e.declared.as_deref().unwrap_or("-"),
                e.observed.as_deref().unwrap_or("-"),
                e.status.as_str()
            ),
            None => "(absent)".into(),
        };
        pins.push(row(
            &format!("{kind} {name}"),
            show(&find(&pa)),
            show(&find(&pb)),
        ));
    }
    pins.push(row(
        "plan sha256",
        a.run.plan.sha256.clone(),
        b.run.plan.sha256.clone(),
    ));
    pins.push(row("orchestrator", orchestrator(a), orchestrator(b)));
    pins
}

/// The binary's digest, else its version: the digest tells builds apart.
fn orchestrator(r: &Record) -> String {
    r.run
        .orchestrator
        .binary_sha256
        .clone()
        .unwrap_or_else(|| r.run.orchestrator.version.clone())
}

/// Host, kernel, OS, CPU, memory, isolation: causes of timing the plan omits.
fn environment_rows(a: &Record, b: &Record) -> Vec<Row> {
    let (ha, hb) = (&a.run.host, &b.run.host);
    vec![
        row("host", ha.hostname.clone(), hb.hostname.clone()),
        row("kernel", ha.kernel.clone(), hb.kernel.clone()),
        row("os", ha.os.clone(), hb.os.clone()),
        row(
            "cpu",
            format!("{} × {}", ha.cpu_model, ha.cpus),
            format!("{} × {}", hb.cpu_model, hb.cpus),
        ),
        row(
            "memory",
            bytes(ha.memory_bytes as f64),
            bytes(hb.memory_bytes as f64),
        ),
        row("isolation", isolation_mode(a), isolation_mode(b)),
    ]
}

/// Every step of either run; a changed status is the difference to mark.
fn step_rows(a: &Record, b: &Record) -> Vec<StepRow> {
    let mut ids: Vec<&str> = a.steps.iter().map(|s| s.id.as_str()).collect();
    for s in &b.steps {
        if !ids.contains(&s.id.as_str()) {
            ids.push(&s.id);
        }
    }
    ids.iter()
        .map(|id| {
            let sa = a.steps.iter().find(|s| s.id == *id);
            let sb = b.steps.iter().find(|s| s.id == *id);
            let st = |s: Option<&crate::record::run::StepRecord>| {
                s.map(|s| s.status.as_str().to_string())
                    .unwrap_or_else(|| "(absent)".into())
            };
            let (wa, wb) = (sa.and_then(|s| s.wall_ms), sb.and_then(|s| s.wall_ms));
            StepRow {
                step: id.to_string(),
                changed: st(sa) != st(sb),
                status_a: st(sa),
                status_b: st(sb),
                median_ms_a: wa.map(|s| s.median),
                median_ms_b: wb.map(|s| s.median),
                ratio: match (wa, wb) {
                    (Some(x), Some(y)) if x.median > 0.0 => Some(y.median / x.median),
                    _ => None,
                },
                dispersion_a: wa.as_ref().and_then(dispersion),
                dispersion_b: wb.as_ref().and_then(dispersion),
            }
        })
        .collect()
}

/// Every check of either run; a changed value or verdict is a difference.
fn check_rows(a: &Record, b: &Record) -> Vec<CheckRow> {
    let ckeys = first_seen(
        a.comparisons
            .iter()
            .chain(b.comparisons.iter())
            .map(|c| (c.step.clone(), c.name.clone(), c.metric)),
    );
    ckeys
        .into_iter()
        .map(|(step, name, metric)| {
            let find = |r: &Record| {
                r.comparisons
                    .iter()
                    .find(|c| c.step == step && c.name == name)
                    .cloned()
            };
            let (ca, cb) = (find(a), find(b));
            let value_a = ca.as_ref().map(|c| c.value.to_json());
            let value_b = cb.as_ref().map(|c| c.value.to_json());
            let passed_a = ca.as_ref().map(|c| c.passed);
            let passed_b = cb.as_ref().map(|c| c.passed);
            CheckRow {
                changed: value_a != value_b || passed_a != passed_b,
                step,
                name,
                metric,
                value_a,
                value_b,
                passed_a,
                passed_b,
            }
        })
        .collect()
}

/// Every step metric of either run, with the ratio of medians where A's is not zero.
fn metric_rows(a: &Record, b: &Record) -> Vec<MetricRow> {
    let (ma, mb) = (
        super::metrics::step_metrics(a),
        super::metrics::step_metrics(b),
    );
    let mkeys = first_seen(
        ma.iter()
            .chain(mb.iter())
            .map(|m| (m.step.clone(), m.name.clone())),
    );
    mkeys
        .into_iter()
        .map(|(step, name)| {
            let find = |v: &[super::metrics::StepMetric]| {
                v.iter().find(|m| m.step == step && m.name == name).cloned()
            };
            let (x, y) = (find(&ma), find(&mb));
            let (median_a, median_b) = (
                x.as_ref().map(|m| m.stats.median),
                y.as_ref().map(|m| m.stats.median),
            );
            MetricRow {
                ratio: match (median_a, median_b) {
                    (Some(p), Some(q)) if p != 0.0 => Some(q / p),
                    _ => None,
                },
                a: x.map(|m| m.text),
                b: y.map(|m| m.text),
                median_a,
                median_b,
                step,
                name,
            }
        })
        .collect()
}

/// Read two record folders (digests checked) and show their differences.
pub fn diff(a: &Path, b: &Path, format: DiffFormat) -> Result<String, ReportError> {
    let ra = super::load::load(a, false)?;
    let rb = super::load::load(b, false)?;
    let d = diff_records(&ra.record, &rb.record);
    match format {
        DiffFormat::Json => {
            let mut s = serde_json::to_string_pretty(&d)
                .map_err(|e| ReportError::Serialize(e.to_string()))?;
            s.push('\n');
            Ok(s)
        }
        DiffFormat::Md => Ok(markdown(&d)),
        DiffFormat::Text => Ok(text(&d)),
    }
}

fn opt_ms(v: Option<f64>) -> String {
    v.map(duration_ms).unwrap_or_else(|| "-".into())
}

fn opt_ratio(v: Option<f64>) -> String {
    v.map(|r| format!("{}×", super::format::ratio(r)))
        .unwrap_or_else(|| "-".into())
}

fn opt_pct(v: Option<f64>) -> String {
    v.map(super::format::percent).unwrap_or_else(|| "-".into())
}

fn opt_val(v: &Option<serde_json::Value>) -> String {
    v.as_ref()
        .map(json_value)
        .unwrap_or_else(|| "(absent)".into())
}

fn opt_pass(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "pass",
        Some(false) => "FAIL",
        None => "-",
    }
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
    let c = super::format::code_cell(s);
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
    Environment,
    Steps,
    Metrics,
    Results,
    Checks,
}

/// A row's numbers as both layouts state them, formatted once.
struct Cells {
    a: String,
    b: String,
    ratio: String,
    more: [String; 2],
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
        (Section::Environment, &d.environment),
    ] {
        l.section(s);
        rows.iter().for_each(|r| l.pair(r));
    }
    l.section(Section::Steps);
    for s in &d.steps {
        let c = Cells {
            a: opt_ms(s.median_ms_a),
            b: opt_ms(s.median_ms_b),
            ratio: opt_ratio(s.ratio),
            more: [opt_pct(s.dispersion_a), opt_pct(s.dispersion_b)],
        };
        l.step(s, &c);
    }
    if !d.metrics.is_empty() {
        l.section(Section::Metrics);
        for m in &d.metrics {
            let c = Cells {
                a: m.a.clone().unwrap_or_else(|| "(absent)".into()),
                b: m.b.clone().unwrap_or_else(|| "(absent)".into()),
                ratio: opt_ratio(m.ratio),
                more: Default::default(),
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
            a: opt_val(&c.value_a),
            b: opt_val(&c.value_b),
            ratio: String::new(),
            more: [opt_pass(c.passed_a).into(), opt_pass(c.passed_b).into()],
        };
        l.check(c, &v);
    }
}

struct Markdown(String);

impl Layout for Markdown {
    fn section(&mut self, s: Section) {
        self.0.push_str(match s {
            Section::Pins => "## Pins\n\n| | A | B |\n|---|---|---|\n",
            Section::Environment => "\n## Environment\n\n| | A | B |\n|---|---|---|\n",
            Section::Steps => "\n## Steps\n\n| step | status A | status B | median A | median B | B/A | dispersion A | dispersion B |\n|---|---|---|---|---|---|---|---|\n",
            Section::Metrics => "\n## Step metrics\n\n| step | metric | A | B | B/A |\n|---|---|---|---|---|\n",
            Section::Results => "\n## Tests and findings (B against A)\n\n",
            Section::Checks => "\n## Checks\n\n| check | metric | value A | value B | A | B |\n|---|---|---|---|---|---|\n",
        });
    }
    fn pair(&mut self, r: &Row) {
        let cells = [&r.name, &r.a, &r.b].map(|x| mark(x, r.changed));
        self.0.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    fn step(&mut self, s: &StepRow, c: &Cells) {
        self.0.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            mark_id(&s.step, s.changed),
            mark(&s.status_a, s.changed),
            mark(&s.status_b, s.changed),
            c.a,
            c.b,
            c.ratio,
            c.more[0],
            c.more[1]
        ));
    }
    fn metric(&mut self, m: &MetricRow, c: &Cells) {
        self.0.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            mark_id(&m.step, false),
            md_cell(&m.name),
            md_cell(&c.a),
            md_cell(&c.b),
            c.ratio
        ));
    }
    fn results(&mut self, r: &ResultsRow) {
        let step = super::format::code(&r.step);
        self.0
            .push_str(&format!("- {step}: {}.\n", r.lines_md.join("; ")));
    }
    fn check(&mut self, c: &CheckRow, v: &Cells) {
        self.0.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            mark(&c.name, c.changed),
            c.metric,
            mark(&v.a, c.changed),
            mark(&v.b, c.changed),
            v.more[0],
            v.more[1]
        ));
    }
}

struct Text(String);

fn star(changed: bool) -> &'static str {
    if changed {
        "*"
    } else {
        " "
    }
}

impl Layout for Text {
    fn section(&mut self, s: Section) {
        self.0.push_str(match s {
            Section::Pins => "\npins:\n",
            Section::Environment => "\nenvironment:\n",
            Section::Steps => "\nsteps (median A -> B, ratio B/A, dispersion A / B):\n",
            Section::Metrics => "\nstep metrics (A -> B, ratio B/A):\n",
            Section::Results => "\ntests and findings (B against A):\n",
            Section::Checks => "\nchecks (value A -> B, result A / B):\n",
        });
    }
    fn pair(&mut self, r: &Row) {
        let (mark, name) = (star(r.changed), &r.name);
        self.0
            .push_str(&format!("{mark} {name}\n    A: {}\n    B: {}\n", r.a, r.b));
    }
    fn step(&mut self, s: &StepRow, c: &Cells) {
        self.0.push_str(&format!(
            "{} {}: {} -> {}, {} -> {}, {}, {} / {}\n",
            star(s.changed),
            s.step,
            s.status_a,
            s.status_b,
            c.a,
            c.b,
            c.ratio,
            c.more[0],
            c.more[1]
        ));
    }
    fn metric(&mut self, m: &MetricRow, c: &Cells) {
        let (step, name) = (&m.step, &m.name);
        self.0.push_str(&format!(
            "  {step} {name}: {} -> {}, {}\n",
            c.a, c.b, c.ratio
        ));
    }
    fn results(&mut self, r: &ResultsRow) {
        self.0
            .push_str(&format!("  {}: {}\n", r.step, r.lines.join("; ")));
    }
    fn check(&mut self, c: &CheckRow, v: &Cells) {
        self.0.push_str(&format!(
            "{} {} [{}]: {} -> {}, {} / {}\n",
            star(c.changed),
            c.name,
            c.metric,
            v.a,
            v.b,
            v.more[0],
            v.more[1]
        ));
    }
}

fn markdown(d: &Diff) -> String {
    let mut l = Markdown(format!("# `{}` (A) vs `{}` (B)\n\n", d.run_a, d.run_b));
    walk(d, &mut l);
    l.0
}

fn text(d: &Diff) -> String {
    let head = format!("A: {}\nB: {}\n(* marks a difference)\n", d.run_a, d.run_b);
    let mut l = Text(head);
    walk(d, &mut l);
    l.0
}
