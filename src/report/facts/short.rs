//! The Verification section a reviewer reads in a minute, in the seed PR's voice:
//! one bullet per cell ("Full 2048: 3 finite, bit-exact KV/logits repeats; warm
//! prefill 1194–1240 ms (prefill_ms, n=3); KV shape [32,8,2048,8]"), one per
//! handoff, the devices grouped by device, the parameters in one line. The tables
//! behind these lines go into `<details>` and the HTML report. The terminal summary
//! states the same lines in plain text; the sentences about one step are in
//! [`super::clauses`].

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

    pub fn fail(self) -> String {
        self.bold("FAIL")
    }
}

/// The short Verification section's facts.
#[derive(Debug, Clone, Serialize)]
pub struct Short {
    /// One line per device: what it ran, in which cells.
    pub devices: Vec<String>,
    /// What each step did on the GPUs (NVML's readings) and NPU cards (their
    /// tools' readings) it owned.
    pub device_use: Vec<String>,
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
        device_use: device_use(rec, style),
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

/// How many cells the matrix has, for "both cells" / "all 4 cells".
fn cell_count(rec: &Record) -> u32 {
    rec.run.plan.matrix.as_ref().map_or(0, |m| m.cells)
}

/// One line per device: `sim-gpu0` (gpu): `handoff-gpu` in both cells.
fn devices(rec: &Record, style: Style) -> Vec<String> {
    let cells = cell_count(rec) as usize;
    device_uses(rec)
        .iter()
        .map(|u| device_line(u, cells, style))
        .collect()
}

/// One device as the run used it.
struct DeviceUse<'a> {
    device: &'a str,
    kind: &'a str,
    cores: Vec<String>,
    simulated: bool,
    /// Each base step that held it, with the cells it held it in.
    steps: Vec<(&'a str, Vec<String>)>,
}

/// The run's allocations grouped by device, devices and steps in first-use order.
fn device_uses(rec: &Record) -> Vec<DeviceUse<'_>> {
    let mut uses: Vec<DeviceUse<'_>> = Vec::new();
    for a in &rec.allocations {
        let at = match uses.iter().position(|u| u.device == a.device) {
            Some(i) => i,
            None => {
                uses.push(DeviceUse {
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
        let interleaved = rec
            .run
            .steps
            .iter()
            .filter(|d| d.interleaved_with.as_deref() == Some(a.step.as_str()))
            .map(|d| d.id.as_str());
        for h in std::iter::once(a.step.as_str()).chain(interleaved) {
            let b = base(rec, h);
            let i = match u.steps.iter().position(|(s, _)| *s == b) {
                Some(i) => i,
                None => {
                    u.steps.push((b, Vec::new()));
                    u.steps.len() - 1
                }
            };
            let cell = cell_of_id(rec, h);
            if !cell.is_empty() {
                let t = cell_title(rec, cell);
                if !u.steps[i].1.contains(&t) {
                    u.steps[i].1.push(t);
                }
            }
        }
    }
    uses
}

/// "`sim-gpu0` (gpu, simulated): `handoff-gpu` in both cells".
fn device_line(u: &DeviceUse<'_>, cells: usize, style: Style) -> String {
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
        .map(|(n, vs)| format!("{} {}", style.code(n), style.text(&vs.join(" / "))))
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

/// "11 steps: 11 succeeded; slowest `prefill[tokens=8192]` 11.87 s (median, n=3)".
fn steps_line(rec: &Record, style: Style) -> String {
    let lines: Vec<StepLine> = rec.steps.iter().map(|s| step_line(rec, s)).collect();
    // Steps whose exits their results explain are one group: they are not failures.
    let explained = crate::evidence::revisions::explained_steps(rec);
    let (explained_lines, rest): (Vec<StepLine>, Vec<StepLine>) =
        lines.into_iter().partition(|l| {
            rec.steps.iter().any(|s| {
                s.id == l.id
                    && matches!(
                        crate::evidence::revisions::judge(rec, s),
                        Some(crate::evidence::revisions::Judged::Explained(_))
                    )
            })
        });
    debug_assert_eq!(explained_lines.len(), explained);
    let mut counts: Vec<String> = status_counts(&rest)
        .iter()
        .map(|StatusCount { status, n, notable }| {
            let s = style.text(status);
            if *notable {
                style.bold(&format!("{n} {s}"))
            } else {
                format!("{n} {s}")
            }
        })
        .collect();
    if explained > 0 {
        counts.push(format!(
            "{explained} exited as {} results explain (not gating)",
            if explained == 1 { "its" } else { "their" }
        ));
    }
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

/// What each step did on the GPUs and NPU cards it owned.
pub fn device_use(rec: &Record, style: Style) -> Vec<String> {
    let mut lines = super::gpu::gpu_lines(rec, style);
    lines.extend(super::gpu::npu_lines(rec, style));
    lines
}
