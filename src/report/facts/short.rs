//! The Verification section a reviewer reads in a minute, in the seed PR's voice:
//! one bullet per cell ("Full 2048: 3 finite, bit-exact KV/logits repeats; warm
//! prefill 1194–1240 ms (prefill_ms, n=3); KV shape [32,8,2048,8]"), one per
//! handoff, the devices grouped by device, the parameters in one line. The tables
//! behind these lines go into `<details>` and the HTML report. The terminal summary
//! states the same lines in plain text.

#[allow(unused_imports)]
use super::*;
use crate::report::format::{code, md_text};

/// Where the lines land: a Markdown body (code spans, escaped text, bold) or a
/// terminal (plain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Markdown,
    Plain,
}

impl Style {
    pub fn code(self, s: &str) -> String {
        match self {
            Style::Markdown => code(s),
            Style::Plain => s.replace(['\n', '\r'], " "),
        }
    }

    pub fn text(self, s: &str) -> String {
        match self {
            Style::Markdown => md_text(s),
            Style::Plain => s.replace(['\n', '\r'], " "),
        }
    }

    /// Text the orchestrator phrased with code spans of its own (a cache entry's
    /// why, a nondeterministic output): only raw HTML is escaped in Markdown.
    pub fn phrased(self, s: &str) -> String {
        let flat = s.replace(['\n', '\r'], " ");
        match self {
            Style::Markdown => flat
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;"),
            Style::Plain => flat,
        }
    }

    pub fn bold(self, s: &str) -> String {
        match self {
            Style::Markdown => format!("**{s}**"),
            Style::Plain => s.to_string(),
        }
    }

    fn fail(self) -> String {
        self.bold("FAIL")
    }
}

/// The short Verification section's facts.
#[derive(Debug, Clone, Serialize)]
pub struct Short {
    /// One line per device: what it ran, in which cells.
    pub devices: Vec<String>,
    /// Metrics the same in every repeat: "layers 32, threads 2, tokens 2048 / 8192".
    pub parameters: Option<String>,
    /// The blocks shown: every one (a cell's, then each prefill or handoff step's
    /// outside cells) up to [`SHORT_LIST`], else those that did not come out clean.
    pub blocks: Vec<ShortBlock>,
    /// Past [`SHORT_LIST`]: "28 more cells came out clean", and every block for the
    /// `<details>`.
    pub more_blocks: Option<String>,
    pub all_blocks: Vec<ShortBlock>,
    /// Failed checks past [`SHORT_LIST`]: "and 12 more in the checks table".
    pub more_failed_checks: Option<String>,
    /// "11 steps: 11 succeeded; slowest `prefill[tokens=8192]` 11.87 s".
    pub steps: String,
    /// "30 of 30 checks passed", with each failed check beneath.
    pub checks: Option<String>,
    pub failed_checks: Vec<String>,
    /// Passing checks no cell or handoff line states (on a command step's outputs),
    /// one clause each, when there are at most [`OTHER_CHECKS`].
    pub other_checks: Vec<String>,
    /// "plan sha256 `0b8bf3451ab2`, orchestrator 0.1.0; 3 pins, none drifted".
    pub pins: String,
    /// The step cache in one line: "1 reused, 1 ran and was stored".
    pub cache: Option<String>,
    /// "vm (Debian GNU/Linux 12, kernel 6.1.0), 2 × Xeon, 23.5 GiB; isolation ...".
    pub host: String,
}

/// A cell's bullet (or a loose step's) and its handoffs beneath it.
#[derive(Debug, Clone, Serialize)]
pub struct ShortBlock {
    pub line: String,
    pub handoffs: Vec<String>,
    /// Every step in it succeeded and every check on them passed.
    pub clean: bool,
}

/// Past this many cells, the short section names the cells that did not come out
/// clean (this many at most) and counts the rest; every cell's bullet is in
/// `<details>`. Failed checks are listed up to this many too.
pub const SHORT_LIST: usize = 10;

/// Passing checks outside the cell and handoff lines are named one by one up to
/// this many; past it the count says enough and the table has them.
pub const OTHER_CHECKS: usize = 10;

/// Gather the short section's facts in `style`.
pub fn short(rec: &Record, attr: &Attribution, style: Style) -> Short {
    let checks = rec.comparisons.len();
    let passed = rec.comparisons.iter().filter(|c| c.passed).count();
    let stated = |c: &CheckRecord| {
        let i = attr.of(c);
        i.actual.iter().chain(&i.across).any(|id| {
            rec.steps
                .iter()
                .any(|s| s.id == *id && matches!(s.kind, StepKind::Prefill | StepKind::Handoff))
        })
    };
    let others: Vec<&CheckRecord> = rec
        .comparisons
        .iter()
        .filter(|c| c.passed && !stated(c))
        .collect();
    let failed = rec.comparisons.iter().filter(|c| !c.passed).count();
    let all = blocks(rec, attr, style);
    let shown: Vec<ShortBlock> = if all.len() <= SHORT_LIST {
        all.clone()
    } else {
        all.iter()
            .filter(|b| !b.clean)
            .take(SHORT_LIST)
            .cloned()
            .collect()
    };
    Short {
        other_checks: if others.len() <= OTHER_CHECKS {
            others.iter().map(|c| clause(&c.name, c, style)).collect()
        } else {
            Vec::new()
        },
        devices: devices(rec, style),
        parameters: parameters(rec, style),
        blocks: shown.clone(),
        more_blocks: (all.len() > shown.len()).then(|| {
            let n = all.len() - shown.len();
            let clean =
                all.iter().filter(|b| b.clean).count() - shown.iter().filter(|b| b.clean).count();
            if clean == n {
                format!("{n} more came out clean (every one below, under “Every cell”)")
            } else {
                format!("{n} more (every one below, under “Every cell”)")
            }
        }),
        all_blocks: if all.len() > shown.len() {
            all
        } else {
            Vec::new()
        },
        more_failed_checks: (failed > SHORT_LIST)
            .then(|| format!("and {} more in the checks table", failed - SHORT_LIST)),
        steps: steps_line(rec, style),
        checks: (checks > 0).then(|| format!("{passed} of {checks} checks passed")),
        failed_checks: rec
            .comparisons
            .iter()
            .filter(|c| !c.passed)
            .take(SHORT_LIST)
            .map(|c| failed_check(c, style))
            .collect(),
        pins: pins_line(rec, style),
        cache: cache_counts(rec),
        host: host_line(rec, style),
    }
}

/// The step a cell step was made from (`prefill` for `prefill[tokens=2048]`).
fn base<'a>(rec: &'a Record, id: &'a str) -> &'a str {
    rec.run
        .steps
        .iter()
        .find(|d| d.id == id)
        .and_then(|d| d.template.as_deref())
        .unwrap_or(id)
}

/// A check's name without the cell suffix its cell step gave it (` [tokens=2048]`).
fn check_name<'a>(rec: &Record, c: &'a CheckRecord) -> &'a str {
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

fn cell_of_id<'a>(rec: &'a Record, id: &str) -> &'a [crate::evidence::record::CellValue] {
    rec.run
        .steps
        .iter()
        .find(|d| d.id == id)
        .map_or(&[], |d| d.cell.as_slice())
}

/// "KV" for `kv.safetensors`, "logits" for `logits.npy`: a file's stem, short stems
/// (acronyms) in capitals.
fn stem_label(file: &str) -> String {
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

/// How many cells the matrix has, for "both cells" / "all 4 cells".
fn cell_count(rec: &Record) -> u32 {
    rec.run.plan.matrix.as_ref().map_or(0, |m| m.cells)
}

/// One line per device: `sim-gpu0` (gpu): `handoff-gpu` in both cells.
fn devices(rec: &Record, style: Style) -> Vec<String> {
    struct Use<'a> {
        device: &'a str,
        kind: &'a str,
        cores: Vec<String>,
        simulated: bool,
        /// base step -> cells it held the device in
        steps: Vec<(&'a str, Vec<String>)>,
    }
    let mut uses: Vec<Use<'_>> = Vec::new();
    for a in &rec.allocations {
        let at = match uses.iter().position(|u| u.device == a.device) {
            Some(i) => i,
            None => {
                uses.push(Use {
                    device: &a.device,
                    kind: &a.kind,
                    cores: Vec::new(),
                    simulated: a.simulated,
                    steps: Vec::new(),
                });
                uses.len() - 1
            }
        };
        let u = &mut uses[at];
        let cores = if a.whole_device {
            String::new()
        } else {
            core_ranges(&a.cores)
        };
        if !cores.is_empty() && !u.cores.contains(&cores) {
            u.cores.push(cores);
        }
        u.simulated &= a.simulated;
        // The holder and every step interleaved on its lease.
        let mut holders = vec![a.step.as_str()];
        holders.extend(
            rec.run
                .steps
                .iter()
                .filter(|d| d.interleaved_with.as_deref() == Some(a.step.as_str()))
                .map(|d| d.id.as_str()),
        );
        for h in holders {
            let b = base(rec, h);
            let cell = cell_of_id(rec, h);
            let title = (!cell.is_empty()).then(|| cell_title(rec, cell));
            let i = match u.steps.iter().position(|(s, _)| *s == b) {
                Some(i) => i,
                None => {
                    u.steps.push((b, Vec::new()));
                    u.steps.len() - 1
                }
            };
            if let Some(t) = title {
                if !u.steps[i].1.contains(&t) {
                    u.steps[i].1.push(t);
                }
            }
        }
    }
    let cells = cell_count(rec) as usize;
    uses.iter()
        .map(|u| {
            let what = if u.cores.is_empty() {
                style.text(u.kind)
            } else {
                format!("{}, cores {}", style.text(u.kind), u.cores.join(" / "))
            };
            let steps: Vec<String> = u
                .steps
                .iter()
                .map(|(s, cs)| {
                    let s = style.code(s);
                    match cs.len() {
                        0 => s,
                        n if n == cells && n == 2 => format!("{s} in both cells"),
                        n if n == cells && n > 2 => format!("{s} in all {n} cells"),
                        _ => format!(
                            "{s} in {}",
                            cs.iter()
                                .map(|c| style.text(c))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    }
                })
                .collect();
            // Steps with their cells need a stronger break between them.
            let sep = if u.steps.iter().any(|(_, cs)| !cs.is_empty()) {
                "; "
            } else {
                ", "
            };
            format!(
                "{} ({what}{}): {}",
                style.code(u.device),
                if u.simulated { ", simulated" } else { "" },
                steps.join(sep)
            )
        })
        .collect()
}

/// Metrics with the same value in every measured repeat (n ≥ 2) are the run's
/// parameters, not measurements; the one the plan quotes stays a measurement.
pub(crate) fn is_parameter(m: &crate::report::metrics::StepMetric) -> bool {
    !m.headline && m.stats.n > 1 && m.stats.min == m.stats.max
}

/// "layers 32, threads 2, tokens 2048 / 8192 (the same in every repeat of `prefill`)".
pub fn parameters(rec: &Record, style: Style) -> Option<String> {
    let mut names: Vec<(String, Vec<String>)> = Vec::new();
    let mut steps: Vec<&str> = Vec::new();
    let metrics = crate::report::metrics::step_metrics(rec);
    for m in metrics.iter().filter(|m| is_parameter(m)) {
        let b = rec
            .steps
            .iter()
            .find(|s| s.id == m.step)
            .map_or(m.step.as_str(), |s| base(rec, &s.id));
        if !steps.contains(&b) {
            steps.push(b);
        }
        let v = crate::report::metrics::value_text(&m.name, m.stats.median, &m.stats);
        match names.iter_mut().find(|(n, _)| *n == m.name) {
            Some((_, vs)) => {
                if !vs.contains(&v) {
                    vs.push(v);
                }
            }
            None => names.push((m.name.clone(), vec![v])),
        }
    }
    if names.is_empty() {
        return None;
    }
    let list: Vec<String> = names
        .iter()
        .map(|(n, vs)| format!("{} {}", style.text(n), style.text(&vs.join(" / "))))
        .collect();
    let of: Vec<String> = steps.iter().map(|s| style.code(s)).collect();
    Some(format!(
        "{} (the same in every repeat of {})",
        list.join(", "),
        of.join(", ")
    ))
}

/// The cells' blocks, then prefill and handoff steps outside any cell.
fn blocks(rec: &Record, attr: &Attribution, style: Style) -> Vec<ShortBlock> {
    let mut out: Vec<ShortBlock> = cell_order(rec)
        .into_iter()
        .map(|c| {
            let mine = |kind: StepKind| {
                rec.steps
                    .iter()
                    .filter(move |s| s.kind == kind && cell_of(rec, s) == c)
                    .collect::<Vec<_>>()
            };
            let prefills = mine(StepKind::Prefill);
            let parts: Vec<String> = prefills
                .iter()
                .map(|s| {
                    let p = prefill_parts(rec, attr, s, style);
                    if prefills.len() > 1 {
                        format!("{}: {p}", style.code(base(rec, &s.id)))
                    } else {
                        p
                    }
                })
                .collect();
            let title = style.bold(&style.text(&cell_title(rec, c)));
            let steps: Vec<&StepRecord> = rec
                .steps
                .iter()
                .filter(|s| {
                    cell_of(rec, s) == c && matches!(s.kind, StepKind::Prefill | StepKind::Handoff)
                })
                .collect();
            ShortBlock {
                clean: clean(rec, attr, &steps),
                line: if parts.is_empty() {
                    title
                } else {
                    format!("{title}: {}", parts.join("; "))
                },
                handoffs: mine(StepKind::Handoff)
                    .iter()
                    .map(|s| handoff_line(rec, attr, s, style, true))
                    .collect(),
            }
        })
        .collect();
    for s in rec.steps.iter().filter(|s| cell_of(rec, s).is_empty()) {
        let line = match s.kind {
            StepKind::Prefill => format!(
                "{}{}: {}",
                style.bold(&style.code(&s.id)),
                on_devices(rec, &s.id, style),
                prefill_parts(rec, attr, s, style)
            ),
            StepKind::Handoff => handoff_line(rec, attr, s, style, false),
            _ => continue,
        };
        out.push(ShortBlock {
            line,
            handoffs: Vec::new(),
            clean: clean(rec, attr, &[s]),
        });
    }
    out
}

/// Every step succeeded and every check that read one of them passed.
fn clean(rec: &Record, attr: &Attribution, steps: &[&StepRecord]) -> bool {
    steps.iter().all(|s| s.status.is_success())
        && rec.comparisons.iter().all(|c| {
            let i = attr.of(c);
            c.passed
                || !steps
                    .iter()
                    .any(|s| i.actual.contains(&s.id) || i.across.contains(&s.id))
        })
}

/// " on sim-gpu0", or nothing for a step that held no device.
fn on_devices(rec: &Record, step: &str, style: Style) -> String {
    let holder = rec
        .run
        .steps
        .iter()
        .find(|d| d.id == step)
        .and_then(|d| d.interleaved_with.clone())
        .unwrap_or_else(|| step.to_string());
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

/// "failed (attempt 2 exited with code 1): " before a step's facts when it did not
/// succeed.
fn status_prefix(rec: &Record, s: &StepRecord, style: Style) -> String {
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
fn failed_check(c: &CheckRecord, style: Style) -> String {
    let what = match &c.error {
        Some(e) => format!("could not run ({})", style.text(e)),
        None => format!(
            "{} {} against {}",
            style.text(&c.metric),
            style.text(&check_value(&c.metric, &c.value)),
            style.text(&check_threshold(&c.metric, &c.threshold))
        ),
    };
    format!("{} {}: {what}", style.fail(), style.text(&c.name))
}

/// A check in one clause, with FAIL where it did not pass; in a cell's line its
/// name loses the cell suffix the line already says.
fn generic_clause(rec: &Record, c: &CheckRecord, style: Style) -> String {
    clause(check_name(rec, c), c, style)
}

fn clause(name: &str, c: &CheckRecord, style: Style) -> String {
    let v = match &c.error {
        Some(e) => format!("could not run ({})", style.text(e)),
        None => style.text(&check_value(&c.metric, &c.value)),
    };
    let mark = if c.passed {
        String::new()
    } else {
        format!(" ({})", style.fail())
    };
    format!("{}: {v}{mark}", style.text(name))
}

/// A prefill step's repeats, timing and shape in one sentence.
fn prefill_parts(rec: &Record, attr: &Attribution, s: &StepRecord, style: Style) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut used: Vec<&CheckRecord> = Vec::new();
    let finite: Vec<&CheckRecord> = checks_for(rec, attr, |c, i| {
        c.metric == "finite" && i.actual.contains(&s.id)
    });
    let all_finite = !finite.is_empty() && finite.iter().all(|c| c.passed);
    // Passing bit-exact checks over the same number of repeats read as one clause.
    let mut exact: Vec<(u64, Vec<String>)> = Vec::new();
    for c in checks_for(rec, attr, |c, i| {
        c.metric == "bit_exact" && i.across.contains(&s.id)
    }) {
        used.push(c);
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
                match exact.iter_mut().find(|(n, _)| *n == files) {
                    Some((_, ls)) => ls.push(label),
                    None => exact.push((files, vec![label])),
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
    for c in finite.iter().copied() {
        used.push(c);
        if exact.is_empty() || !c.passed {
            match c.found() {
                Some(CheckDetail::Finite(FiniteDetail {
                    nan, inf, elements, ..
                })) => parts.push(format!(
                    "{} of {elements} values finite ({nan} NaN, {inf} Inf{})",
                    elements.saturating_sub(nan).saturating_sub(inf),
                    if c.passed {
                        String::new()
                    } else {
                        format!("; {}", style.fail())
                    }
                )),
                _ => parts.push(generic_clause(rec, c, style)),
            }
        }
    }
    if let Some(t) = timing_clause(rec, s, style) {
        parts.push(t);
    }
    for c in checks_for(rec, attr, |c, i| {
        c.metric == "shape" && i.actual.contains(&s.id)
    }) {
        used.push(c);
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
                style.text(&check_threshold(&c.metric, &c.threshold))
            )
        };
        parts.push(format!(
            "{label}shape {}{mark}",
            style.text(&json_value(&c.value))
        ));
    }
    for c in checks_for(rec, attr, |_, i| i.actual.contains(&s.id)) {
        if !used.iter().any(|u| std::ptr::eq(*u, c)) {
            parts.push(generic_clause(rec, c, style));
        }
    }
    format!("{}{}", status_prefix(rec, s, style), parts.join("; "))
}

/// "warm prefill 1194–1240 ms (prefill_ms, n=3)": the plan's headline metric, else
/// wall time, over the measured repeats.
fn timing_clause(rec: &Record, s: &StepRecord, style: Style) -> Option<String> {
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
            (range, "wall time".to_string(), st.n, None)
        }
    };
    let note = note
        .map(|d| format!("; {}", style.text(&d)))
        .unwrap_or_default();
    Some(format!(
        "{} {} ({}, n={n}){note}",
        style.text(&what),
        style.text(&range),
        style.text(&name)
    ))
}

/// The unit both ends of a range share (" ms" of "1194 ms" and "1240 ms"), so that
/// it is said once.
fn unit_suffix<'a>(hi: &'a str, lo: &str) -> &'a str {
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
fn handoff_line(
    rec: &Record,
    attr: &Attribution,
    s: &StepRecord,
    style: Style,
    in_cell: bool,
) -> String {
    let id = if in_cell { base(rec, &s.id) } else { &s.id };
    let mine = checks_for(rec, attr, |_, i| i.actual.contains(&s.id));
    let mut parts: Vec<String> = Vec::new();
    for c in mine.iter().filter(|c| c.metric == "first_divergence") {
        parts.push(divergence_clause(rec, c, style));
    }
    for c in mine.iter().filter(|c| c.metric == "slots_exact") {
        parts.push(match (c.found(), &c.error) {
            (
                Some(CheckDetail::SlotsExact(SlotsDetail {
                    identical, slots, ..
                })),
                None,
            ) => {
                let informational = c
                    .threshold
                    .get("min")
                    .and_then(num)
                    .is_none_or(|m| m <= 0.0);
                let mark = if !c.passed {
                    format!(
                        " ({}: {})",
                        style.fail(),
                        style.text(&check_threshold(&c.metric, &c.threshold))
                    )
                } else if informational {
                    " (information)".to_string()
                } else {
                    String::new()
                };
                format!("{identical} of {slots} slots read back exactly{mark}")
            }
            _ => generic_clause(rec, c, style),
        });
    }
    let rms: Vec<&&CheckRecord> = mine.iter().filter(|c| c.metric == "rel_rms").collect();
    if !rms.is_empty() {
        let label = |c: &CheckRecord| {
            attr.of(c)
                .actual_file
                .map(|f| tensor_label(&f))
                .unwrap_or_else(|| check_name(rec, c).to_string())
        };
        let labels: Vec<String> = rms.iter().map(|c| label(c)).collect();
        let values: Vec<String> = rms
            .iter()
            .map(|c| match (&c.error, num(&c.value)) {
                (Some(_), _) => "-".to_string(),
                (None, Some(v)) => percent(v),
                (None, None) => json_value(&c.value),
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
                    style.text(&check_threshold(&c.metric, &c.threshold))
                ),
            })
            .collect();
        if !over.is_empty() {
            clause.push_str(&format!(" ({}: {})", style.fail(), over.join(", ")));
        }
        parts.push(clause);
    }
    for c in mine.iter().filter(|c| {
        !matches!(
            c.metric.as_str(),
            "first_divergence" | "slots_exact" | "rel_rms"
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

/// "32-token outputs match", or "diverges at token 14 of 32, margin 0.0042 against
/// 0.0016".
fn divergence_clause(rec: &Record, c: &CheckRecord, style: Style) -> String {
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
                Some(Num(f)) if f.is_finite() => format!("{f:.4}"),
                Some(Num(f)) => json_value(&crate::compare::json_f64(f)),
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

/// "11 steps: 11 succeeded; slowest `prefill[tokens=8192]` 11.87 s (median, n=3)".
fn steps_line(rec: &Record, style: Style) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for s in &rec.steps {
        let st = status_text(rec, s);
        match counts.iter_mut().find(|(t, _)| *t == st) {
            Some((_, n)) => *n += 1,
            None => counts.push((st, 1)),
        }
    }
    let counts: Vec<String> = counts
        .iter()
        .map(|(s, n)| {
            let s = style.text(s);
            if s == "succeeded" || s == "reused" {
                format!("{n} {s}")
            } else {
                style.bold(&format!("{n} {s}"))
            }
        })
        .collect();
    let slowest = rec
        .steps
        .iter()
        .filter_map(|s| s.wall_ms.map(|w| (w, s)))
        .max_by(|a, b| a.0.median.total_cmp(&b.0.median))
        .map(|(w, s)| {
            let n = if w.n > 1 {
                format!(" (median, n={})", w.n)
            } else {
                String::new()
            };
            format!(
                "; slowest {} {}{n}",
                style.code(&s.id),
                duration_ms(w.median)
            )
        })
        .unwrap_or_default();
    format!(
        "{} step{}: {}{slowest}",
        rec.steps.len(),
        if rec.steps.len() == 1 { "" } else { "s" },
        counts.join(", ")
    )
}

/// The host and its isolation in one line.
fn host_line(rec: &Record, style: Style) -> String {
    let h = &rec.run.host;
    style.text(&format!(
        "{} ({}, kernel {}), {} × {}, {}; {}",
        h.hostname,
        h.os,
        h.kernel,
        h.cpus,
        h.cpu_model,
        bytes(h.memory_bytes as f64),
        isolation_line(rec)
    ))
}

/// "plan sha256 `0b8bf3451ab2`, orchestrator 0.1.0; 3 pins, none drifted".
fn pins_line(rec: &Record, style: Style) -> String {
    let pins = &rec.run.pins;
    let n = pins.entries.len();
    let drifted = pins.drift.len();
    format!(
        "plan sha256 {}, orchestrator {}; {n} pin{}, {}",
        style.code(&short_hash(&rec.run.plan.sha256, 12)),
        style.text(&rec.run.orchestrator.version),
        if n == 1 { "" } else { "s" },
        if drifted == 0 {
            "none drifted".to_string()
        } else {
            style.bold(&format!("{drifted} drifted"))
        }
    )
}

/// The step cache in one line: "1 reused from an earlier run, 1 ran and was stored".
fn cache_counts(rec: &Record) -> Option<String> {
    let (mut reused, mut stored, mut other, mut odd) = (0, 0, 0, 0);
    for c in rec.steps.iter().filter_map(|s| s.cache.as_ref()) {
        match (&c.reused_from, c.status.as_str()) {
            (Some(_), _) => reused += 1,
            (None, "stored") => stored += 1,
            _ => other += 1,
        }
        odd += c.nondeterministic.len();
    }
    let parts: Vec<String> = [
        (reused, "reused from an earlier run"),
        (stored, "ran and stored"),
        (other, "ran, not stored"),
        (odd, "nondeterministic outputs"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, w)| format!("{n} {w}"))
    .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}
