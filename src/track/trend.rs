//! A metric over runs, ordered by implementation commit (git's topological order when
//! the repository is at hand) or by time, with its changes found and confirmed; and
//! when each test case started or stopped failing.
//!
//! Changes are found by optimal partitioning (Jackson et al., 2005) of the points'
//! medians under an L1 cost, the piecewise-constant model asv's step detection fits:
//! exact rather than approximate at these sizes (hundreds of points, O(n³)), a median
//! per point so that one slow sample does not move it, and deterministic (E-divisive needs permutation tests: random,
//! and slow to be sure of with a few points a side). The penalty per change is
//! 3·σ̂·ln(n+1), σ̂ the points' noise estimated from consecutive differences (MAD),
//! so a change must stand out of the point-to-point noise. A change stands only when
//! the samples of the runs beside it (up to five points a side) pass the rule
//! `revisions_compared` uses: Mann–Whitney U at p < 0.05 and a bootstrap interval of
//! the ratio of medians beyond the noise threshold (5%).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::index::{RunRow, StepTests};
use crate::compare::stats::{self, Mark};

/// Points in order (each a key and its rows), the order used, and why it is not the
/// one asked for.
type Grouped = (Vec<(String, Vec<usize>)>, Order, Option<String>);

/// How points are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Commit,
    Time,
}

/// Points beside a change whose samples confirm it.
const BESIDE: usize = 5;

/// One point: the runs of one commit (or one run, ordered by time).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Point {
    /// The commit, or the run id when ordered by time.
    pub key: String,
    /// The record folders of its runs.
    pub runs: Vec<String>,
    /// The first run's start.
    pub started_at: String,
    /// Samples over its runs.
    pub n: usize,
    /// Their median, min and max, unrounded.
    pub median: f64,
    pub min: f64,
    pub max: f64,
    #[serde(skip)]
    pub samples: Vec<f64>,
}

/// A change between two points.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Change {
    /// The first point after the change (a commit or a run id).
    pub at: String,
    /// The last point before it.
    pub after: String,
    /// The medians of every sample of the segments before and after it.
    pub before_median: f64,
    pub after_median: f64,
    /// median(after) / median(before), its 95% bootstrap interval, the U test.
    pub ratio: Option<f64>,
    pub interval: Option<(f64, f64)>,
    pub p_value: Option<f64>,
    /// `increase`, `decrease` (confirmed), or `not confirmed` (noise).
    pub verdict: String,
}

/// A metric's trend.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Trend {
    /// The step (a matrix cell's id in full) and the metric (`wall_ms` or one the
    /// step wrote).
    pub step: String,
    pub metric: String,
    /// `commit` or `time`.
    pub order: String,
    /// Why the order is not what was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_note: Option<String>,
    /// How changes were found and confirmed.
    pub detector: String,
    /// The fraction a change must exceed to count.
    pub noise: f64,
    /// One per commit (or run), in order.
    pub points: Vec<Point>,
    /// Every change found, confirmed or not.
    pub changes: Vec<Change>,
    /// Record folders that do not verify: not used, and said.
    pub unverified: Vec<String>,
}

/// A test case's history, or a finding's.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TestHistory {
    /// `test` (a JUnit case that failed somewhere) or `finding` (a SARIF result).
    pub kind: String,
    /// The step that read it.
    pub step: String,
    /// The case's id (`classname::name`), or the finding's `RULE in FILE [fingerprint]`.
    pub id: String,
    /// `started failing` or `stopped failing` (a finding: `appeared`, `went away`),
    /// where (the first point in the new state), and the point before.
    pub transitions: Vec<Transition>,
    /// `failing`, `passing` or `flaky` (a finding: `present`, `absent`, `flaky`) at
    /// the last point that ran it.
    pub now: String,
    /// The same at every point (`-` where no run read the step's file).
    pub states: Vec<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Transition {
    /// `started failing`, `stopped failing`, `appeared` or `went away`.
    pub what: String,
    /// The first point in the new state.
    pub at: String,
    /// The point before it.
    pub after: String,
}

/// Every test case that failed somewhere, with where it changed.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TestsTrend {
    /// `commit` or `time`.
    pub order: String,
    /// Why the order is not what was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_note: Option<String>,
    /// The points (commits or run ids) in order: `states` has one per point.
    pub points: Vec<String>,
    /// Each test case that failed somewhere, and each finding.
    pub tests: Vec<TestHistory>,
    /// Record folders that do not verify: not used, and said.
    pub unverified: Vec<String>,
}

/// The order of `rows`' points: (key of each row, order used, a note when time was
/// used instead of commits).
fn keys(
    rows: &[&RunRow],
    by: Order,
    repo: Option<&Path>,
) -> (Vec<(usize, String)>, Order, Option<String>) {
    let by_time = |note: Option<String>| {
        let mut idx: Vec<usize> = (0..rows.len()).collect();
        idx.sort_by(|&a, &b| {
            (rows[a].started_at.as_deref(), &rows[a].folder)
                .cmp(&(rows[b].started_at.as_deref(), &rows[b].folder))
        });
        let mut ranked = vec![(0, String::new()); rows.len()];
        for (rank, i) in idx.into_iter().enumerate() {
            ranked[i] = (rank, rows[i].folder.clone());
        }
        (ranked, Order::Time, note)
    };
    if by == Order::Time {
        return by_time(None);
    }
    let commits: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.implementation.as_deref())
        .collect();
    if commits.len() < rows.len() {
        return by_time(Some(format!(
            "ordered by time: {} of {} runs name no implementation commit",
            rows.len() - commits.len(),
            rows.len()
        )));
    }
    let mut unique: Vec<&str> = commits.clone();
    unique.sort_unstable();
    unique.dedup();
    let order: Option<Vec<String>> = repo.and_then(|repo| {
        let mut args = vec!["rev-list", "--topo-order", "--reverse"];
        args.extend(unique.iter().copied());
        args.push("--");
        let out = crate::pins::git::git(repo, &args).ok()?;
        Some(
            String::from_utf8_lossy(&out)
                .lines()
                .map(str::to_string)
                .collect(),
        )
    });
    let Some(order) = order else {
        // Without the repository, the commits in the order of their first run.
        let mut first: BTreeMap<&str, &str> = BTreeMap::new();
        for r in rows {
            let (Some(c), Some(t)) = (r.implementation.as_deref(), r.started_at.as_deref()) else {
                continue;
            };
            let e = first.entry(c).or_insert(t);
            if t < *e {
                *e = t;
            }
        }
        let mut v: Vec<(&str, &str)> = first.into_iter().collect();
        v.sort_by(|a, b| (a.1, a.0).cmp(&(b.1, b.0)));
        let rank: BTreeMap<&str, usize> = v.iter().enumerate().map(|(i, (c, _))| (*c, i)).collect();
        let note = match repo {
            Some(r) => format!(
                "commits ordered by their first run: {} does not hold them (--repo)",
                r.display()
            ),
            None => "commits ordered by their first run: no repository at hand (--repo)".into(),
        };
        return (
            rows.iter()
                .map(|r| {
                    let c = r.implementation.clone().unwrap_or_default();
                    (rank.get(c.as_str()).copied().unwrap_or(usize::MAX), c)
                })
                .collect(),
            Order::Commit,
            Some(note),
        );
    };
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, c)| (c.as_str(), i))
        .collect();
    // A run's commit may be abbreviated; rev-list prints full ones.
    let find = |c: &str| {
        rank.get(c)
            .copied()
            .or_else(|| order.iter().position(|full| full.starts_with(c)))
    };
    (
        rows.iter()
            .map(|r| {
                let c = r.implementation.clone().unwrap_or_default();
                (find(&c).unwrap_or(usize::MAX), c)
            })
            .collect(),
        Order::Commit,
        None,
    )
}

fn order_word(o: Order) -> String {
    match o {
        Order::Commit => "commit",
        Order::Time => "time",
    }
    .into()
}

/// Group rows into ordered points: (key, rank) → the row indexes.
fn group(rows: &[&RunRow], by: Order, repo: Option<&Path>) -> Grouped {
    let (keys, used, note) = keys(rows, by, repo);
    let mut groups: BTreeMap<(usize, String), Vec<usize>> = BTreeMap::new();
    for (i, (rank, k)) in keys.into_iter().enumerate() {
        groups.entry((rank, k)).or_default().push(i);
    }
    let mut out: Vec<(String, Vec<usize>)> = groups.into_iter().map(|((_, k), v)| (k, v)).collect();
    for (_, v) in &mut out {
        v.sort_by(|a, b| rows[*a].started_at.cmp(&rows[*b].started_at));
    }
    (out, used, note)
}

/// The record folders of `rows` that do not verify: never used, always said.
fn unverified(rows: &[RunRow]) -> Vec<String> {
    rows.iter()
        .filter(|r| !r.verified)
        .map(|r| format!("{}/{}", r.records, r.folder))
        .collect()
}

/// The trend of `metric` of `step` over `rows`.
pub fn trend(
    rows: &[RunRow],
    step: &str,
    metric: &str,
    by: Order,
    repo: Option<&Path>,
    noise: f64,
) -> Trend {
    let unverified = unverified(rows);
    let with: Vec<&RunRow> = rows
        .iter()
        .filter(|r| r.verified)
        .filter(|r| {
            r.series
                .iter()
                .any(|s| s.step == step && s.metric == metric)
        })
        .collect();
    let (groups, used, note) = group(&with, by, repo);
    let points: Vec<Point> = groups
        .into_iter()
        .map(|(key, idx)| {
            let samples: Vec<f64> = idx
                .iter()
                .flat_map(|&i| {
                    with[i]
                        .series
                        .iter()
                        .filter(|s| s.step == step && s.metric == metric)
                        .flat_map(|s| s.samples.iter().copied())
                })
                .filter(|v| v.is_finite())
                .collect();
            let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
            let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            Point {
                key,
                runs: idx.iter().map(|&i| with[i].folder.clone()).collect(),
                started_at: idx
                    .first()
                    .and_then(|&i| with[i].started_at.clone())
                    .unwrap_or_default(),
                n: samples.len(),
                median: stats::median(&samples),
                min,
                max,
                samples,
            }
        })
        .filter(|p| p.n > 0)
        .collect();
    let medians: Vec<f64> = points.iter().map(|p| p.median).collect();
    let changes = change_points(&medians)
        .into_iter()
        .map(|(left, cut, right)| confirm(&points, left, cut, right, metric, noise))
        .collect();
    Trend {
        step: step.to_string(),
        metric: metric.to_string(),
        order: order_word(used),
        order_note: note,
        detector: "optimal partitioning of the points' medians, L1 cost, penalty \
                   3·σ̂·ln(n+1); confirmed by Mann–Whitney U (p < 0.05) and a bootstrap \
                   interval of the ratio beyond the noise threshold"
            .into(),
        noise,
        points,
        changes,
        unverified,
    }
}

/// The samples of up to BESIDE points on each side of `cut`, within the segments
/// `[left, cut)` and `[cut, right)`, compared.
fn confirm(
    points: &[Point],
    left: usize,
    cut: usize,
    right: usize,
    metric: &str,
    noise: f64,
) -> Change {
    let before: Vec<f64> = points[left.max(cut.saturating_sub(BESIDE))..cut]
        .iter()
        .flat_map(|p| p.samples.iter().copied())
        .collect();
    let after: Vec<f64> = points[cut..right.min(cut + BESIDE)]
        .iter()
        .flat_map(|p| p.samples.iter().copied())
        .collect();
    let c = stats::compare(metric, &before, &after, noise);
    let verdict = match c.mark {
        Mark::Worse => "increase",
        Mark::Better => "decrease",
        _ => "not confirmed",
    };
    Change {
        at: points[cut].key.clone(),
        after: points[cut - 1].key.clone(),
        before_median: stats::median(&before),
        after_median: stats::median(&after),
        ratio: c.ratio,
        interval: c.interval,
        p_value: c.p_value,
        verdict: verdict.into(),
    }
}

/// Sum of absolute deviations from the median.
fn l1(v: &[f64]) -> f64 {
    let m = stats::median(v);
    v.iter().map(|x| (x - m).abs()).sum()
}

/// The noise of a series: 1.4826·MAD of consecutive differences / √2.
fn noise_of(y: &[f64]) -> f64 {
    let d: Vec<f64> = y.windows(2).map(|w| w[1] - w[0]).collect();
    if d.is_empty() {
        return 0.0;
    }
    let m = stats::median(&d);
    let dev: Vec<f64> = d.iter().map(|x| (x - m).abs()).collect();
    1.4826 * stats::median(&dev) / std::f64::consts::SQRT_2
}

/// The changes of `y` as (segment start, cut, segment end) with `cut` the first
/// index after each change.
pub fn change_points(y: &[f64]) -> Vec<(usize, usize, usize)> {
    let n = y.len();
    if n < 2 {
        return Vec::new();
    }
    let scale = stats::median(&y.iter().map(|v| v.abs()).collect::<Vec<_>>());
    // A noise-free series still needs a floor, or every float's jitter is a change.
    let sigma = noise_of(y).max(scale * 1e-6).max(f64::MIN_POSITIVE);
    let beta = 3.0 * sigma * ((n + 1) as f64).ln();
    let mut best = vec![f64::INFINITY; n + 1];
    let mut from = vec![0usize; n + 1];
    best[0] = -beta;
    for j in 1..=n {
        for i in 0..j {
            let c = best[i] + l1(&y[i..j]) + beta;
            if c < best[j] {
                best[j] = c;
                from[j] = i;
            }
        }
    }
    let mut cuts = Vec::new();
    let mut j = n;
    while j > 0 {
        cuts.push(from[j]);
        j = from[j];
    }
    cuts.reverse();
    // cuts: segment starts, the first being 0.
    let mut bounds = cuts.clone();
    bounds.push(n);
    (1..cuts.len())
        .map(|k| (bounds[k - 1], bounds[k], bounds[k + 1]))
        .collect()
}

/// What a history follows: a JUnit case that failed, or a SARIF finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Followed {
    Test,
    Finding,
}

impl Followed {
    /// The ids of this kind a step's run lists, or None when it did not read such a
    /// file (then the point says nothing about them).
    fn listed(self, t: &StepTests) -> Option<&[String]> {
        match self {
            Followed::Test => t.junit.then_some(t.failing.as_slice()),
            Followed::Finding => t.findings.as_deref(),
        }
    }

    /// (kind, the word for listed, for not listed, for going bad, for going good).
    fn words(self) -> [&'static str; 5] {
        match self {
            Followed::Test => [
                "test",
                "failing",
                "passing",
                "started failing",
                "stopped failing",
            ],
            Followed::Finding => ["finding", "present", "absent", "appeared", "went away"],
        }
    }
}

/// When each test case started or stopped failing, and each finding appeared or
/// went away.
pub fn tests(rows: &[RunRow], by: Order, repo: Option<&Path>, filter: Option<&str>) -> TestsTrend {
    let unverified = unverified(rows);
    let with: Vec<&RunRow> = rows
        .iter()
        .filter(|r| r.verified && !r.tests.is_empty())
        .collect();
    let (groups, used, note) = group(&with, by, repo);
    // (kind, step, id) → per point: (runs listing it, runs that read the step's file).
    type Seen = BTreeMap<(Followed, String, String), Vec<(usize, usize)>>;
    let mut seen: Seen = BTreeMap::new();
    for (_, idx) in &groups {
        for &i in idx {
            for t in &with[i].tests {
                for kind in [Followed::Test, Followed::Finding] {
                    for id in kind.listed(t).unwrap_or_default() {
                        if filter.is_some_and(|f| !id.contains(f)) {
                            continue;
                        }
                        seen.entry((kind, t.step.clone(), id.clone()))
                            .or_insert_with(|| vec![(0, 0); groups.len()]);
                    }
                }
            }
        }
    }
    for (p, (_, idx)) in groups.iter().enumerate() {
        for &i in idx {
            for t in &with[i].tests {
                for ((kind, step, id), per) in seen.iter_mut() {
                    if *step != t.step {
                        continue;
                    }
                    let Some(listed) = kind.listed(t) else {
                        continue;
                    };
                    per[p].1 += 1;
                    if listed.iter().any(|f| f == id) {
                        per[p].0 += 1;
                    }
                }
            }
        }
    }
    let tests = seen
        .into_iter()
        .map(|((kind, step, id), per)| {
            let [word, bad, good, went_bad, went_good] = kind.words();
            let states: Vec<&str> = per
                .iter()
                .map(|&(f, r)| match (f, r) {
                    (_, 0) => "-",
                    (0, _) => good,
                    (f, r) if f == r => bad,
                    _ => "flaky",
                })
                .collect();
            let mut transitions = Vec::new();
            // The last settled state: a flaky point neither starts nor ends a
            // failure, but one before any settled point is where the history starts.
            let mut last: Option<(&str, usize)> = None;
            for (p, &now) in states.iter().enumerate() {
                if now == "-" {
                    continue;
                }
                if let Some((was, at)) = last {
                    if was != now && now != "flaky" {
                        transitions.push(Transition {
                            what: if now == bad { went_bad } else { went_good }.into(),
                            at: groups[p].0.clone(),
                            after: groups[at].0.clone(),
                        });
                    }
                }
                if now != "flaky" || last.is_none() {
                    last = Some((now, p));
                }
            }
            let now = states
                .iter()
                .rev()
                .find(|s| **s != "-")
                .copied()
                .unwrap_or(good)
                .to_string();
            TestHistory {
                kind: word.into(),
                step,
                id,
                transitions,
                now,
                states: states.into_iter().map(String::from).collect(),
            }
        })
        .collect();
    TestsTrend {
        order: order_word(used),
        order_note: note,
        points: groups.into_iter().map(|(k, _)| k).collect(),
        tests,
        unverified,
    }
}

fn short(k: &str) -> &str {
    if k.len() == 40 && k.chars().all(|c| c.is_ascii_hexdigit()) {
        &k[..12]
    } else {
        k
    }
}

/// The trend for the terminal.
pub fn render(t: &Trend) -> String {
    let mut s = format!(
        "{} {} over {} points (ordered by {})\n",
        t.step,
        t.metric,
        t.points.len(),
        t.order
    );
    if let Some(n) = &t.order_note {
        s.push_str(&format!("note: {n}\n"));
    }
    s.push_str(&format!(
        "{:<14} {:>4} {:>4} {:>12} {:>12} {:>12}\n",
        t.order, "runs", "n", "median", "min", "max"
    ));
    let at: std::collections::BTreeSet<&str> = t
        .changes
        .iter()
        .filter(|c| c.verdict != "not confirmed")
        .map(|c| c.at.as_str())
        .collect();
    for p in &t.points {
        s.push_str(&format!(
            "{:<14} {:>4} {:>4} {:>12.4} {:>12.4} {:>12.4}{}\n",
            short(&p.key),
            p.runs.len(),
            p.n,
            p.median,
            p.min,
            p.max,
            if at.contains(p.key.as_str()) {
                "  <- change"
            } else {
                ""
            }
        ));
    }
    if t.changes.is_empty() {
        s.push_str("changes: none\n");
    } else {
        s.push_str("changes:\n");
    }
    for c in &t.changes {
        use crate::report::format::{number, ratio};
        let r = c.ratio.map_or("-".into(), |r| format!("x{}", ratio(r)));
        let ci = c.interval.map_or(String::new(), |(lo, hi)| {
            format!(" [{}, {}]", ratio(lo), ratio(hi))
        });
        let p = c
            .p_value
            .map_or(String::new(), |p| format!(", p = {}", number(p)));
        s.push_str(&format!(
            "  {}: at {} (after {}): {} -> {}, {r}{ci}{p}\n",
            c.verdict,
            short(&c.at),
            short(&c.after),
            number(c.before_median),
            number(c.after_median)
        ));
    }
    for u in &t.unverified {
        s.push_str(&format!("UNVERIFIED (not used): {u}\n"));
    }
    s.push_str(&format!("detector: {}\n", t.detector));
    s
}

/// The tests' history for the terminal.
pub fn render_tests(t: &TestsTrend) -> String {
    let mut s = format!(
        "test cases that failed somewhere and findings, over {} points (ordered by {})\n",
        t.points.len(),
        t.order
    );
    if let Some(n) = &t.order_note {
        s.push_str(&format!("note: {n}\n"));
    }
    if t.tests.is_empty() {
        s.push_str("no test failed and no finding was reported\n");
    }
    for h in &t.tests {
        s.push_str(&format!("{} {} {}: {} now\n", h.kind, h.step, h.id, h.now));
        for tr in &h.transitions {
            s.push_str(&format!(
                "  {} at {} (after {})\n",
                tr.what,
                short(&tr.at),
                short(&tr.after)
            ));
        }
    }
    for u in &t.unverified {
        s.push_str(&format!("UNVERIFIED (not used): {u}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic noise: a fixed pseudo-random sequence in [-1, 1].
    fn jitter(i: usize) -> f64 {
        // splitmix64
        let mut z = (i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }

    #[test]
    fn one_step_in_noise_is_found_where_it_is() {
        // 50 commits, 2% noise, +20% from commit 31 on.
        let y: Vec<f64> = (0..50)
            .map(|i| 100.0 * (1.0 + 0.02 * jitter(i)) * if i >= 31 { 1.2 } else { 1.0 })
            .collect();
        let c = change_points(&y);
        assert_eq!(c.iter().map(|c| c.1).collect::<Vec<_>>(), [31], "{c:?}");
    }

    #[test]
    fn noise_alone_and_a_flat_series_have_no_change() {
        let y: Vec<f64> = (0..200).map(|i| 50.0 * (1.0 + 0.03 * jitter(i))).collect();
        assert!(change_points(&y).is_empty(), "{:?}", change_points(&y));
        assert!(change_points(&[7.0; 40]).is_empty());
        assert!(change_points(&[1.0]).is_empty());
    }

    #[test]
    fn one_point_out_is_a_change_and_back_and_two_steps_are_two() {
        // A commit whose runs all read three times higher, fixed by the next one.
        let mut y: Vec<f64> = (0..40).map(|i| 10.0 * (1.0 + 0.01 * jitter(i))).collect();
        y[17] = 30.0;
        let cuts: Vec<usize> = change_points(&y).iter().map(|c| c.1).collect();
        assert_eq!(cuts, [17, 18]);
        let y: Vec<f64> = (0..60)
            .map(|i| {
                let level = if i < 20 {
                    10.0
                } else if i < 45 {
                    13.0
                } else {
                    9.0
                };
                level * (1.0 + 0.01 * jitter(i))
            })
            .collect();
        let cuts: Vec<usize> = change_points(&y).iter().map(|c| c.1).collect();
        assert_eq!(cuts, [20, 45]);
    }
}
