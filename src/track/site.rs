//! `orchestrate site`: every indexed run on one static page that needs nothing but a
//! browser (no network, no CDN, as the HTML report): the runs with filters, a chart
//! per step metric over commits with its changes marked, the tests' and findings'
//! history, and each run's HTML report and record copied beside it so every link
//! resolves wherever the folder is published.
//!
//! The output folder is replaced whole (built beside it, then renamed into place), and
//! only when it is empty or a site this command wrote: a folder of someone else's is
//! refused, never overwritten.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::index::RunRow;
use super::trend::{self, Order, TestsTrend, Trend};
use crate::fsx::{Dir, Kind};

/// The file that marks a folder as a site this command wrote.
pub const MARKER: &str = ".orchestrate-site";

const TEMPLATE: &str = include_str!("../../templates/site.html.tera");

/// The compare page: static, it reads `runs.js` and the runs' `facts.js`.
const COMPARE: &str = include_str!("../../templates/site_compare.html");

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 240.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 36.0;

/// Why the site could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error("{path}: {reason}")]
    Refused { path: PathBuf, reason: String },
    #[error("writing the site at {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the site template: {0}")]
    Template(String),
    #[error("the site's data: {0}")]
    Data(String),
}

/// What to draw.
#[derive(Debug, Clone)]
pub struct SiteOptions {
    /// The repository whose history orders the commits.
    pub repo: Option<PathBuf>,
    /// A change smaller than this fraction is noise.
    pub noise: f64,
    /// Copy each verified run's record and HTML report (and its facts for the
    /// compare page) into `runs/`.
    pub reports: bool,
    /// While a run is in progress, the page reloads itself this often (seconds):
    /// for a site rewritten as runs go on (`site --watch`).
    pub refresh: Option<u64>,
}

/// What was written.
#[derive(Debug, Clone, Serialize)]
pub struct SiteSummary {
    pub index: PathBuf,
    pub runs: usize,
    /// Records that do not verify (runs without a record are counted below).
    pub unverified: usize,
    /// Runs without a record whose orchestrator runs on this host.
    pub running: usize,
    /// Runs without a record whose orchestrator is gone or is not on this host.
    pub stopped: usize,
    /// Runs whose HTML report and record were copied in.
    pub reports: usize,
    pub charts: usize,
    /// Confirmed changes over every chart.
    pub changes: usize,
    /// Tests and findings with a history.
    pub histories: usize,
    /// Runs indexed as verified whose report could not be rendered now (changed
    /// since it was indexed, for one): listed on the page, never linked.
    pub problems: Vec<String>,
    /// What the user had added to the site folder, kept in the new site.
    pub kept: Vec<String>,
}

#[derive(Serialize)]
struct Page {
    /// How many runs `runs.js` lists.
    runs: usize,
    plans: Vec<String>,
    statuses: Vec<String>,
    charts: Vec<ChartView>,
    histories: Vec<HistoryView>,
    points: Vec<String>,
    order_note: Option<String>,
    problems: Vec<String>,
    verified: usize,
    unverified: usize,
    running: usize,
    stopped: usize,
    refresh: Option<u64>,
    generated: String,
}

#[derive(Serialize)]
struct RunView {
    folder: String,
    /// Its folder in the site (`runs/NAME`) when its report is there.
    site: Option<String>,
    started: String,
    plan: String,
    status: String,
    baseline: String,
    implementation: String,
    implementation_full: String,
    host: String,
    took: String,
    devices: String,
    headline: String,
    problem: Option<String>,
    /// A run without a record: when each of its steps ended.
    progress: Option<String>,
}

#[derive(Serialize)]
struct ChartView {
    id: String,
    step: String,
    metric: String,
    width: String,
    height: String,
    plot_left: String,
    plot_right: String,
    plot_top: String,
    plot_bottom: String,
    points: Vec<PointView>,
    changes: Vec<ChangeView>,
    xticks: Vec<Tick>,
    yticks: Vec<Tick>,
    note: Option<String>,
    confirmed: usize,
}

#[derive(Serialize)]
struct PointView {
    key: String,
    cx: String,
    cy: String,
    y_min: String,
    y_max: String,
    href: Option<String>,
    title: String,
}

#[derive(Serialize)]
struct ChangeView {
    x: String,
    class: String,
    label: String,
    text: String,
}

#[derive(Serialize)]
struct Tick {
    at: String,
    text: String,
}

#[derive(Serialize)]
struct HistoryView {
    kind: String,
    step: String,
    id: String,
    now: String,
    transitions: Vec<String>,
    cells: Vec<Cell>,
}

#[derive(Serialize)]
struct Cell {
    class: String,
    title: String,
}

/// Write the site for `rows` to `out`.
pub fn write(rows: &[RunRow], out: &Path, opts: &SiteOptions) -> Result<SiteSummary, SiteError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SiteError::Io {
            path: path.clone(),
            source,
        }
    };
    let (parent, name) = split(out)?;
    std::fs::create_dir_all(&parent).map_err(io(&parent))?;
    let up = Dir::open(&parent).map_err(io(&parent))?;
    let replacing = check_output(&up, &name, out)?;

    let tmp = crate::fsx::unique_name();
    up.mkdir(&tmp, 0o755).map_err(io(out))?;
    let built = (|| {
        let site = up.sub(&tmp).map_err(io(out))?;
        let summary = build(rows, &site, out, opts)?;
        site.write_atomic(
            &site,
            MARKER,
            b"written by orchestrate site; replaced whole\n",
            0o644,
        )
        .map_err(io(out))?;
        site.sync().map_err(io(out))?;
        Ok::<_, SiteError>(summary)
    })();
    let summary = match built {
        Ok(s) => s,
        Err(e) => {
            let _ = up.remove_tree(&tmp);
            return Err(e);
        }
    };
    // What the user added to a site folder (a CNAME, a `.git`, notes) is theirs:
    // it moves into the new site, and only what the site writes is replaced.
    let kept = if replacing {
        let mut moved = Vec::new();
        match keep_added(&up, &name, &tmp, &mut moved) {
            Ok(()) => moved,
            Err(e) => {
                // Nothing of the user's is removed with the unfinished site.
                give_back(&up, &tmp, &name, &moved);
                let _ = up.remove_tree(&tmp);
                return Err(io(out)(e));
            }
        }
    } else {
        Vec::new()
    };
    let old = format!("{}.old", crate::fsx::unique_name());
    if replacing {
        up.rename(&name, &up, &old).map_err(io(out))?;
    }
    if let Err(e) = up.rename(&tmp, &up, &name) {
        if replacing {
            let _ = up.rename(&old, &up, &name);
            give_back(&up, &tmp, &name, &kept);
        }
        let _ = up.remove_tree(&tmp);
        return Err(io(out)(e));
    }
    if replacing {
        up.remove_tree(&old).map_err(io(out))?;
    }
    let mut summary = summary;
    summary.kept = kept;
    Ok(summary)
}

/// The names at a site's top that the site writes; anything else there was added.
const SITE_NAMES: &[&str] = &["index.html", "compare.html", "runs.js", "runs", MARKER];

/// Move what was added to the site folder `name` into the new site `tmp`; the
/// names moved.
fn keep_added(up: &Dir, name: &str, tmp: &str, moved: &mut Vec<String>) -> std::io::Result<()> {
    let old = up.sub(name)?;
    let new = up.sub(tmp)?;
    for (n, _) in old.entries()? {
        if SITE_NAMES.contains(&n.as_str()) {
            continue;
        }
        old.rename(&n, &new, &n)?;
        moved.push(n);
    }
    Ok(())
}

/// Put what [`keep_added`] moved back where it was.
fn give_back(up: &Dir, tmp: &str, name: &str, moved: &[String]) {
    if let (Ok(from), Ok(to)) = (up.sub(tmp), up.sub(name)) {
        for n in moved {
            let _ = from.rename(n, &to, n);
        }
    }
}

/// The folder above `out` and `out`'s own name.
fn split(out: &Path) -> Result<(PathBuf, String), SiteError> {
    let refused = |reason: &str| SiteError::Refused {
        path: out.to_path_buf(),
        reason: reason.into(),
    };
    let name = out
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| refused("not a folder name the site can be written to"))?
        .to_string();
    crate::fsx::name(&name).map_err(|_| refused("not a folder name the site can be written to"))?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((parent, name))
}

/// Whether `name` holds a site to replace; an error when it holds anything else.
fn check_output(up: &Dir, name: &str, out: &Path) -> Result<bool, SiteError> {
    let refused = |reason: String| SiteError::Refused {
        path: out.to_path_buf(),
        reason,
    };
    let io = |source| SiteError::Io {
        path: out.to_path_buf(),
        source,
    };
    match up.stat(name).map_err(io)? {
        None => Ok(false),
        Some((Kind::Dir, _)) => {
            let d = up.sub(name).map_err(io)?;
            let entries = d.entries().map_err(io)?;
            if entries.is_empty() {
                // An empty folder the user made for it: replaced like a site.
                return Ok(true);
            }
            if entries.iter().any(|(n, k)| n == MARKER && *k == Kind::File) {
                return Ok(true);
            }
            Err(refused(format!(
                "holds files and is not a site orchestrate wrote (no {MARKER}): \
                 refusing to replace it; name a new or empty folder"
            )))
        }
        Some((k, _)) => Err(refused(format!(
            "is {}, not a folder: refusing to replace it",
            k.words()
        ))),
    }
}

/// A name for a run's folder in the site: the record folder's, kept to characters
/// that need no escaping in a URL, made unique.
fn site_name(folder: &str, taken: &mut BTreeSet<String>) -> String {
    let mut base: String = folder
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if base.is_empty() || base.starts_with('.') {
        base = format!("run{base}");
    }
    let mut name = base.clone();
    let mut k = 2;
    while !taken.insert(name.clone()) {
        name = format!("{base}-{k}");
        k += 1;
    }
    name
}

fn build(
    rows: &[RunRow],
    site: &Dir,
    out: &Path,
    opts: &SiteOptions,
) -> Result<SiteSummary, SiteError> {
    let io = |source| SiteError::Io {
        path: out.to_path_buf(),
        source,
    };
    let runs_dir = site.sub_or_make("runs", 0o755).map_err(io)?;
    let mut taken = BTreeSet::new();
    // Record folder → its folder in the site.
    let mut linked: BTreeMap<String, String> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut views = Vec::new();
    let mut reports = 0;
    let mut newest: Vec<&RunRow> = rows.iter().collect();
    newest.sort_by(|a, b| {
        (b.started_at.as_deref(), &b.folder).cmp(&(a.started_at.as_deref(), &a.folder))
    });
    for r in newest {
        let mut problem = r.problem.clone();
        let mut site_dir = None;
        if opts.reports && r.verified && r.duplicate_of.is_none() {
            let dir = Path::new(&r.records).join(&r.folder);
            match copy_run(&dir, &runs_dir, &site_name(&r.folder, &mut taken)) {
                Ok(Some(name)) => {
                    reports += 1;
                    linked
                        .entry(r.folder.clone())
                        .or_insert_with(|| name.clone());
                    site_dir = Some(format!("runs/{name}"));
                }
                Ok(None) => {}
                Err(why) => {
                    problems.push(format!("{}: {why}", dir.display()));
                    problem = Some(why);
                }
            }
        }
        views.push(run_view(r, site_dir, problem));
    }

    let charts = all_charts(rows, &linked, opts);
    let tests = trend::tests(rows, Order::Commit, opts.repo.as_deref(), None);
    let histories = histories(&tests);

    let mut plans: Vec<String> = rows.iter().filter_map(|r| r.plan.clone()).collect();
    plans.sort();
    plans.dedup();
    let mut statuses: Vec<String> = views.iter().map(|v| v.status.clone()).collect();
    statuses.sort();
    statuses.dedup();
    let verified = rows.iter().filter(|r| r.verified).count();
    // Running: on this host, with or without its journal's progress (a run writing
    // its record has none to show).
    let running = rows.iter().filter(|r| r.running).count();
    let stopped = rows
        .iter()
        .filter(|r| r.progress.is_some() && !r.running)
        .count();
    let unverified = rows.len() - verified - running - stopped;
    let summary = SiteSummary {
        index: out.join("index.html"),
        runs: rows.len(),
        unverified,
        running,
        stopped,
        reports,
        charts: charts.len(),
        changes: charts.iter().map(|c| c.confirmed).sum(),
        histories: histories.len(),
        problems: problems.clone(),
        kept: Vec::new(),
    };
    let order_note = charts
        .iter()
        .find_map(|c| c.note.clone())
        .or(tests.order_note.clone());
    let list = super::site_data::runs_js(&views).map_err(|e| SiteError::Data(e.to_string()))?;
    site.write_atomic(site, "runs.js", &list, 0o644)
        .map_err(io)?;
    site.write_atomic(site, "compare.html", COMPARE.as_bytes(), 0o644)
        .map_err(io)?;
    let page = Page {
        runs: views.len(),
        plans,
        statuses,
        charts,
        histories,
        points: tests.points.iter().map(|k| short(k)).collect(),
        order_note,
        problems,
        verified,
        unverified,
        running,
        stopped,
        refresh: opts.refresh.filter(|_| running > 0),
        generated: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    };
    let html = render(&page)?;
    site.write_atomic(site, "index.html", html.as_bytes(), 0o644)
        .map_err(io)?;
    Ok(summary)
}

/// A chart per step metric of the verified runs; a point links to its run's report
/// where `linked` (record folder -> site folder) has it.
fn all_charts(
    rows: &[RunRow],
    linked: &BTreeMap<String, String>,
    opts: &SiteOptions,
) -> Vec<ChartView> {
    let mut pairs: BTreeSet<(String, String)> = BTreeSet::new();
    for r in rows.iter().filter(|r| r.verified) {
        for s in &r.series {
            pairs.insert((s.step.clone(), s.metric.clone()));
        }
    }
    let link = |folder: &str| linked.get(folder).map(|n| format!("runs/{n}/report.html"));
    let repo = opts.repo.as_deref();
    let mut charts = Vec::new();
    for (i, (step, metric)) in pairs.iter().enumerate() {
        let t = trend::trend(rows, step, metric, Order::Commit, repo, opts.noise);
        if !t.points.is_empty() {
            charts.push(chart(i, &t, &link));
        }
    }
    charts
}

/// Copy a run's record and its HTML report into `runs/NAME`; the report is rendered
/// from the record as read now, so a record changed since it was indexed is refused
/// here too.
fn copy_run(dir: &Path, runs: &Dir, name: &str) -> Result<Option<String>, String> {
    let (loaded, bytes) =
        crate::report::load::load_with_bytes(dir, false).map_err(|e| e.to_string())?;
    let html = crate::report::render_record_in(
        &loaded.record,
        &loaded.digest,
        loaded.plan_toml.as_deref(),
        crate::report::TemplateChoice::Html,
        None,
        Some(dir),
    )
    .map_err(|e| e.to_string())?;
    let d = runs.sub_or_make(name, 0o755).map_err(|e| e.to_string())?;
    let w = |n: &str, b: &[u8]| d.write_atomic(&d, n, b, 0o644).map_err(|e| e.to_string());
    w("record.json", &bytes)?;
    w(
        "record.sha256",
        format!("{}  record.json\n", loaded.digest).as_bytes(),
    )?;
    w("report.html", html.as_bytes())?;
    let facts = super::site_data::facts_js(&loaded.record, name).map_err(|e| e.to_string())?;
    w("facts.js", &facts)?;
    Ok(Some(name.to_string()))
}

fn short(k: &str) -> String {
    if k.len() >= 12 && k.chars().all(|c| c.is_ascii_hexdigit()) {
        k[..12].to_string()
    } else {
        k.to_string()
    }
}

fn run_view(r: &RunRow, site: Option<String>, problem: Option<String>) -> RunView {
    let or_dash = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".into());
    let commit = |s: &Option<String>| s.as_deref().map_or("-".into(), short);
    RunView {
        folder: r.folder.clone(),
        site,
        started: or_dash(&r.started_at),
        plan: or_dash(&r.plan),
        // A run without a record is running, dead or unknown, not damaged.
        status: if r.verified || r.running || r.progress.is_some() {
            or_dash(&r.status)
        } else {
            "unverified".into()
        },
        progress: r.progress.as_ref().map(over_time),
        baseline: commit(&r.baseline),
        implementation: commit(&r.implementation),
        implementation_full: r.implementation.clone().unwrap_or_default(),
        host: or_dash(&r.host),
        took: r
            .duration_ms
            .map(crate::units::duration_ms)
            .unwrap_or_else(|| "-".into()),
        devices: if r.devices.is_empty() {
            "-".into()
        } else {
            r.devices.join(", ")
        },
        headline: r
            .headline
            .iter()
            .map(|h| {
                format!(
                    "{} {} {}",
                    h.step,
                    h.metric,
                    crate::report::format::number(h.median)
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        problem,
    }
}

/// `steps done over time: 1 at 19:42:57, 2 at 19:43:01` (UTC, to the second).
fn over_time(p: &super::progress::Progress) -> String {
    if p.timeline.is_empty() {
        return "no step has ended yet".into();
    }
    let at = |t: &str| t.get(11..19).unwrap_or(t).to_string();
    let points: Vec<String> = p
        .timeline
        .iter()
        .map(|(t, n)| format!("{n} at {}", at(t)))
        .collect();
    format!("steps done over time (UTC): {}", points.join(", "))
}

fn f1(x: f64) -> String {
    format!("{x:.1}")
}

/// The geometry of one metric's chart: a dot per point at its median with a
/// min–max whisker, a line at each change.
fn chart(i: usize, t: &Trend, link: &dyn Fn(&str) -> Option<String>) -> ChartView {
    let n = t.points.len();
    let lo = t.points.iter().map(|p| p.min).fold(f64::INFINITY, f64::min);
    let hi = t
        .points
        .iter()
        .map(|p| p.max)
        .fold(f64::NEG_INFINITY, f64::max);
    let pad = if hi > lo {
        (hi - lo) * 0.08
    } else {
        lo.abs().max(1.0) * 0.05
    };
    let (lo, hi) = (lo - pad, hi + pad);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let step_w = plot_w / n as f64;
    let x = |k: f64| LEFT + k * step_w;
    let y = |v: f64| TOP + (1.0 - (v - lo) / (hi - lo)) * plot_h;
    let index: BTreeMap<&str, usize> = t
        .points
        .iter()
        .enumerate()
        .map(|(k, p)| (p.key.as_str(), k))
        .collect();
    let points = t
        .points
        .iter()
        .enumerate()
        .map(|(k, p)| PointView {
            key: p.key.clone(),
            cx: f1(x(k as f64 + 0.5)),
            cy: f1(y(p.median)),
            y_min: f1(y(p.min)),
            y_max: f1(y(p.max)),
            href: p.runs.first().and_then(|r| link(r)),
            title: format!(
                "{}: median {} (min {}, max {}), {} samples from {} run{}",
                short(&p.key),
                crate::report::format::number(p.median),
                crate::report::format::number(p.min),
                crate::report::format::number(p.max),
                p.n,
                p.runs.len(),
                if p.runs.len() == 1 { "" } else { "s" }
            ),
        })
        .collect();
    let changes: Vec<ChangeView> = t
        .changes
        .iter()
        .filter_map(|c| {
            let k = *index.get(c.at.as_str())?;
            let class = match c.verdict.as_str() {
                "increase" => "change increase",
                "decrease" => "change decrease",
                _ => "change unconfirmed",
            };
            let ratio = c.ratio.map_or(String::new(), |r| {
                format!(" ×{}", crate::report::format::ratio(r))
            });
            Some(ChangeView {
                x: f1(x(k as f64)),
                class: class.into(),
                label: format!("{}{ratio}", c.verdict),
                text: format!(
                    "{} at {} (after {}): {} → {}{ratio}{}",
                    c.verdict,
                    short(&c.at),
                    short(&c.after),
                    crate::report::format::number(c.before_median),
                    crate::report::format::number(c.after_median),
                    c.p_value.map_or(String::new(), |p| {
                        format!(", p = {}", crate::report::format::number(p))
                    })
                ),
            })
        })
        .collect();
    let every = n.div_ceil(10).max(1);
    let xticks = (0..n)
        .filter(|k| k % every == 0 || *k == n - 1)
        .map(|k| Tick {
            at: f1(x(k as f64 + 0.5)),
            text: t.points[k].key.chars().take(7).collect(),
        })
        .collect();
    let yticks = [lo + pad, (lo + hi) / 2.0, hi - pad]
        .iter()
        .map(|&v| Tick {
            at: f1(y(v)),
            text: crate::report::format::number(v),
        })
        .collect();
    ChartView {
        id: format!("chart-{i}"),
        step: t.step.clone(),
        metric: t.metric.clone(),
        width: f1(WIDTH),
        height: f1(HEIGHT),
        plot_left: f1(LEFT),
        plot_right: f1(WIDTH - RIGHT),
        plot_top: f1(TOP),
        plot_bottom: f1(HEIGHT - BOTTOM),
        points,
        confirmed: t
            .changes
            .iter()
            .filter(|c| c.verdict != "not confirmed")
            .count(),
        changes,
        xticks,
        yticks,
        note: t.order_note.clone(),
    }
}

fn histories(t: &TestsTrend) -> Vec<HistoryView> {
    t.tests
        .iter()
        .map(|h| HistoryView {
            kind: h.kind.clone(),
            step: h.step.clone(),
            id: h.id.clone(),
            now: h.now.clone(),
            transitions: h
                .transitions
                .iter()
                .map(|tr| {
                    format!(
                        "{} at {} (after {})",
                        tr.what,
                        short(&tr.at),
                        short(&tr.after)
                    )
                })
                .collect(),
            cells: h
                .states
                .iter()
                .zip(&t.points)
                .map(|(s, p)| Cell {
                    class: match s.as_str() {
                        "failing" | "present" => "bad",
                        "passing" | "absent" => "good",
                        "flaky" => "flaky",
                        _ => "none",
                    }
                    .into(),
                    title: format!("{}: {s}", short(p)),
                })
                .collect(),
        })
        .collect()
}

fn render(page: &Page) -> Result<String, SiteError> {
    let mut tera = tera::Tera::default();
    tera.autoescape_on(vec![".html"]);
    tera.add_raw_template("site.html", TEMPLATE)
        .map_err(|e| SiteError::Template(e.to_string()))?;
    let ctx =
        tera::Context::from_serialize(page).map_err(|e| SiteError::Template(e.to_string()))?;
    tera.render("site.html", &ctx)
        .map_err(|e| SiteError::Template(format!("{e:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_names_need_no_escaping_and_are_unique() {
        let mut taken = BTreeSet::new();
        assert_eq!(
            site_name("20261201T000000Z-1", &mut taken),
            "20261201T000000Z-1"
        );
        assert_eq!(
            site_name("20261201T000000Z-1", &mut taken),
            "20261201T000000Z-1-2"
        );
        assert_eq!(site_name("a b/<x>", &mut taken), "a_b__x_");
        assert_eq!(site_name(".hidden", &mut taken), "run.hidden");
    }

    #[test]
    fn a_folder_of_someone_elses_is_refused_and_a_site_is_replaced() {
        let t = tempfile::tempdir().unwrap();
        let out = t.path().join("site");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("notes.txt"), "mine").unwrap();
        let opts = SiteOptions {
            repo: None,
            noise: 0.05,
            reports: true,
            refresh: None,
        };
        let e = write(&[], &out, &opts).unwrap_err();
        assert!(
            e.to_string().contains("not a site orchestrate wrote"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(out.join("notes.txt")).unwrap(),
            "mine"
        );

        let link = t.path().join("link");
        std::os::unix::fs::symlink(&out, &link).unwrap();
        let e = write(&[], &link, &opts).unwrap_err();
        assert!(e.to_string().contains("not a folder"), "{e}");

        let fresh = t.path().join("fresh");
        let s = write(&[], &fresh, &opts).unwrap();
        assert_eq!(s.runs, 0);
        assert!(fresh.join(MARKER).is_file() && fresh.join("index.html").is_file());
        std::fs::write(fresh.join("runs/stale.txt"), "old").unwrap();
        write(&[], &fresh, &opts).unwrap();
        assert!(
            !fresh.join("runs/stale.txt").exists(),
            "the old site is replaced whole"
        );
        let left: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "nothing left beside it: {left:?}");
    }
}
