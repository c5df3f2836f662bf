//! Find the first bad commit between a good and a bad one: the plan run once per
//! probe with `[revisions] implementation` replaced (a shared clone each, as every
//! run makes; the step cache reuses what a commit did not change), each probe decided
//! from its record by the same statistics `revisions_compared` uses, an inconclusive
//! one measured again and never guessed.
//!
//! The runs themselves are the caller's (`probe`): this module orders them, reads
//! their records and decides.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::compare::stats::{self, Mark};
use crate::evidence::revisions::{results_of, samples};
use crate::record::run::Record;

/// What makes a commit bad.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// `STEP.METRIC` higher than on the good commit, by more than `threshold` (a
    /// fraction) and significantly.
    Metric {
        step: String,
        metric: String,
        threshold: f64,
    },
    /// A test case (JUnit id) that fails.
    Test { id: String },
    /// A compare check that does not pass.
    Check { name: String },
}

/// Why a bisection did not run to an outcome.
#[derive(Debug, thiserror::Error)]
pub enum BisectError {
    /// The target names nothing the plan or the first probe's record has: a usage
    /// error, found before more probes run.
    #[error("{0}")]
    Target(String),
    /// A probe could not be run or read.
    #[error("{0}")]
    Failed(String),
}

impl From<String> for BisectError {
    fn from(s: String) -> BisectError {
        BisectError::Failed(s)
    }
}

impl From<&str> for BisectError {
    fn from(s: &str) -> BisectError {
        BisectError::Failed(s.to_string())
    }
}

/// The target with its step and check named as the plan names them (a step's
/// own name for its one cell, or its implementation cell; a pytest node id in the
/// JUnit form records key cases by), and what was chosen, to print; checked before
/// the first probe.
pub fn resolve_target(
    target: Target,
    plan: &crate::plan::Plan,
) -> Result<(Target, Option<String>), String> {
    let ids: Vec<String> = plan.steps.iter().map(|s| s.id.0.clone()).collect();
    match target {
        Target::Metric {
            step,
            metric,
            threshold,
        } => {
            let r = super::names::resolve_step(&step, &ids)?;
            Ok((
                Target::Metric {
                    step: r.id,
                    metric,
                    threshold,
                },
                r.note,
            ))
        }
        Target::Test { id } => {
            let key = crate::results::junit::case_id(&id);
            let note = (key != id).then(|| format!("`{id}` is the case `{key}` in JUnit reports"));
            if !plan.steps.iter().any(|s| s.results.junit.is_some()) {
                return Err(format!(
                    "--test {id}: no step of {} declares a JUnit report (`results = {{ junit = ... }}`)",
                    plan.name
                ));
            }
            Ok((Target::Test { id: key }, note))
        }
        Target::Check { name } => {
            let names: Vec<String> = plan
                .steps
                .iter()
                .flat_map(|s| s.checks.iter().map(|c| c.name.clone()))
                .collect();
            if names.contains(&name) {
                return Ok((Target::Check { name }, None));
            }
            // A check of a cell step carries its cell: `name [revision=implementation]`.
            let cells: Vec<String> = names
                .iter()
                .filter(|n| {
                    n.strip_prefix(name.as_str())
                        .is_some_and(|r| r.starts_with(" ["))
                })
                .cloned()
                .collect();
            let imp: Vec<String> = cells
                .iter()
                .filter(|n| n.contains("revision=implementation"))
                .cloned()
                .collect();
            match (cells.as_slice(), imp.as_slice()) {
                ([one], _) | (_, [one]) => Ok((
                    Target::Check {
                        name: one.to_string(),
                    },
                    Some(format!("`{name}` is the check `{one}`")),
                )),
                _ => Err(format!(
                    "--check {name}: no such check; the plan's checks are: {}",
                    super::names::list(&names, 20)
                )),
            }
        }
    }
}

/// After the first probe: the metric or test the target names must be in its
/// record, else nothing later can decide; the error lists what is there.
fn check_target(target: &Target, rec: &Record) -> Result<(), String> {
    match target {
        Target::Metric { step, metric, .. } => {
            let Some(s) = rec.steps.iter().find(|s| s.id == *step) else {
                return Err(format!("the first probe's record has no step `{step}`"));
            };
            let mut known: Vec<String> = vec!["wall_ms".into()];
            for a in &s.attempts {
                if let Some(serde_json::Value::Object(m)) = &a.metrics {
                    known.extend(
                        m.iter()
                            .filter(|(_, v)| v.is_number())
                            .map(|(k, _)| k.clone()),
                    );
                }
            }
            known.sort();
            known.dedup();
            if known.contains(metric) {
                return Ok(());
            }
            Err(format!(
                "`{step}` writes no metric `{metric}`; it writes {}",
                super::names::list(&known, 20)
            ))
        }
        Target::Test { id } => {
            let cases: Vec<&crate::record::results::TestCase> = rec
                .steps
                .iter()
                .filter_map(|s| results_of(s).and_then(|r| r.junit.as_ref()))
                .flat_map(|j| &j.cases)
                .collect();
            if cases.iter().any(|c| c.id == *id) {
                return Ok(());
            }
            let name = id.rsplit("::").next().unwrap_or(id);
            let mut like: Vec<String> = cases
                .iter()
                .filter(|c| c.name == name || c.id.ends_with(name))
                .map(|c| match &c.node_id {
                    Some(n) => format!("{n} (or {})", c.id),
                    None => c.id.clone(),
                })
                .collect();
            like.dedup();
            Err(format!(
                "no test case `{id}` ran in the first probe ({} cases did){}",
                cases.len(),
                if like.is_empty() {
                    String::new()
                } else {
                    format!("; cases by that name: {}", super::names::list(&like, 10))
                }
            ))
        }
        Target::Check { .. } => Ok(()),
    }
}

/// How many times an inconclusive probe is measured in all.
const MEASUREMENTS: usize = 3;

/// One run of one commit.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    pub commit: String,
    /// The record folder.
    pub record: PathBuf,
    /// Its `record.sha256` digest, tying this bisection to the record.
    pub record_sha256: String,
    /// `good`, `bad` or `inconclusive`, and why.
    pub verdict: String,
    pub why: String,
}

/// The bisection and its evidence.
#[derive(Debug, Clone, Serialize)]
pub struct Bisection {
    pub schema: String,
    pub target: Target,
    pub good: String,
    pub bad: String,
    /// The commits after `good` up to `bad`, oldest first.
    pub commits: Vec<String>,
    /// ceil(log2(n)) + 2 commits measured at most.
    pub bound: usize,
    /// Commits measured (each once or more).
    pub measured: usize,
    pub probes: Vec<Probe>,
    pub first_bad: Option<String>,
    /// What came of it, in a sentence.
    pub outcome: String,
}

pub const BISECT_SCHEMA: &str = "orchestrate/bisect/v1";

/// Parse `STEP.METRIC` (the last dot splits: step ids may hold dots).
pub fn metric_target(spec: &str, threshold: f64) -> Result<Target, String> {
    let (step, metric) = spec
        .rsplit_once('.')
        .filter(|(s, m)| !s.is_empty() && !m.is_empty())
        .ok_or_else(|| format!("--metric {spec}: STEP.METRIC, e.g. bench.latency_ms"))?;
    Ok(Target::Metric {
        step: step.into(),
        metric: metric.into(),
        threshold,
    })
}

/// `git rev-list` of good..bad along the ancestry path, oldest first, with both ends
/// resolved to full commits.
pub fn commits_between(
    repo: &Path,
    good: &str,
    bad: &str,
) -> Result<(String, String, Vec<String>), String> {
    let one = |rev: &str| -> Result<String, String> {
        let out = crate::pins::git::git(
            repo,
            &[
                "rev-parse",
                "--verify",
                "--end-of-options",
                &format!("{rev}^{{commit}}"),
            ],
        )
        .map_err(|e| format!("{rev}: {e}"))?;
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    };
    let (g, b) = (one(good)?, one(bad)?);
    let range = format!("{g}..{b}");
    let out = crate::pins::git::git(
        repo,
        &["rev-list", "--ancestry-path", "--reverse", &range, "--"],
    )
    .map_err(|e| e.to_string())?;
    let commits: Vec<String> = String::from_utf8_lossy(&out)
        .lines()
        .map(str::to_string)
        .collect();
    if commits.last() != Some(&b) {
        return Err(format!(
            "{bad} ({}) does not descend from {good} ({}): nothing to bisect",
            &b[..12.min(b.len())],
            &g[..12.min(g.len())]
        ));
    }
    Ok((g, b, commits))
}

/// Probe bound for `n` commits after the good one.
pub fn bound(n: usize) -> usize {
    (n.max(1) as f64).log2().ceil() as usize + 2
}

enum Decision {
    Good(String),
    Bad(String),
    Unsure(String),
}

/// What a commit's records say about the target; for a metric, against the good and
/// bad commits' samples.
fn decide(target: &Target, recs: &[Record], reference: Option<(&[f64], &[f64])>) -> Decision {
    match target {
        Target::Metric {
            step,
            metric,
            threshold,
        } => {
            let mine = metric_samples(recs, step, metric);
            if mine.is_empty() {
                return Decision::Unsure(format!("no sample of {step}.{metric}"));
            }
            let Some((good, bad)) = reference else {
                return Decision::Unsure("no reference".into());
            };
            let vs_good = stats::compare(metric, good, &mine, *threshold);
            let vs_bad = stats::compare(metric, bad, &mine, *threshold);
            let r = crate::report::format::ratio;
            let show = |c: &stats::TimingComparison| {
                format!(
                    "x{}{}{}",
                    r(c.ratio.unwrap_or(f64::NAN)),
                    c.interval
                        .map_or(String::new(), |(lo, hi)| format!(" [{}, {}]", r(lo), r(hi))),
                    c.p_value.map_or(String::new(), |p| {
                        format!(", p = {}", crate::report::format::number(p))
                    })
                )
            };
            match (vs_good.mark, vs_bad.mark) {
                (Mark::Worse, _) => Decision::Bad(format!(
                    "median {}, {} of the good commit's",
                    crate::report::format::number(stats::median(&mine)),
                    show(&vs_good)
                )),
                (_, Mark::Better) => Decision::Good(format!(
                    "median {}, {} of the bad commit's",
                    crate::report::format::number(stats::median(&mine)),
                    show(&vs_bad)
                )),
                _ => Decision::Unsure(format!(
                    "median {}: neither worse than the good commit ({}) nor better than the bad one ({})",
                    crate::report::format::number(stats::median(&mine)),
                    show(&vs_good),
                    show(&vs_bad)
                )),
            }
        }
        Target::Test { id } => {
            let mut seen = 0;
            let mut failing = 0;
            for rec in recs {
                for st in &rec.steps {
                    let Some(j) = results_of(st).and_then(|r| r.junit.as_ref()) else {
                        continue;
                    };
                    for c in j.cases.iter().filter(|c| c.id == *id) {
                        seen += 1;
                        failing += usize::from(c.outcome.failing());
                    }
                }
            }
            match (seen, failing) {
                (0, _) => Decision::Unsure(format!("no test case {id} ran")),
                (s, 0) => Decision::Good(format!("{id} passed ({s} of {s})")),
                (s, f) if f == s => Decision::Bad(format!("{id} failed ({f} of {s})")),
                (s, f) => Decision::Unsure(format!("{id} failed {f} of {s} times (flaky)")),
            }
        }
        Target::Check { name } => {
            let checks: Vec<&crate::record::run::CheckRecord> = recs
                .iter()
                .flat_map(|r| &r.comparisons)
                .filter(|c| c.name == *name)
                .collect();
            if checks.is_empty() {
                return Decision::Unsure(format!("no check {name} ran"));
            }
            if let Some(e) = checks.iter().find_map(|c| c.error.as_ref()) {
                return Decision::Unsure(format!("check {name} could not run: {e}"));
            }
            let failed = checks.iter().filter(|c| !c.passed).count();
            match failed {
                0 => Decision::Good(format!("{name} passed (value {})", checks[0].value)),
                f if f == checks.len() => {
                    Decision::Bad(format!("{name} failed (value {})", checks[0].value))
                }
                f => Decision::Unsure(format!("{name} failed {f} of {} times", checks.len())),
            }
        }
    }
}

fn metric_samples(recs: &[Record], step: &str, metric: &str) -> Vec<f64> {
    let m = (metric != "wall_ms").then_some(metric);
    recs.iter()
        .flat_map(|r| r.steps.iter().filter(|s| s.id == step))
        .flat_map(|s| samples(s, m))
        .collect()
}

/// The probes run so far and how to run one more.
struct Search<'a> {
    target: &'a Target,
    probe: &'a mut dyn FnMut(&str) -> Result<PathBuf, String>,
}

impl Search<'_> {
    /// Run `commit` once more; its record joins `recs`, its probe `out`.
    fn measure(
        &mut self,
        out: &mut Bisection,
        commit: &str,
        recs: &mut Vec<Record>,
    ) -> Result<(), BisectError> {
        let dir = (self.probe)(commit)?;
        let loaded = crate::report::load::load(&dir, false)
            .map_err(|e| format!("the record of {commit} in {}: {e}", dir.display()))?;
        if out.probes.is_empty() {
            check_target(self.target, &loaded.record).map_err(BisectError::Target)?;
        }
        let digest = std::fs::read_to_string(dir.join("record.sha256"))
            .ok()
            .and_then(|t| t.split_whitespace().next().map(str::to_string))
            .unwrap_or_default();
        out.probes.push(Probe {
            commit: commit.to_string(),
            record: dir,
            record_sha256: digest,
            verdict: String::new(),
            why: String::new(),
        });
        recs.push(loaded.record);
        Ok(())
    }

    /// Measure `commit` until it is decided (or MEASUREMENTS times).
    fn settle(
        &mut self,
        out: &mut Bisection,
        commit: &str,
        reference: Option<(&[f64], &[f64])>,
        recs: &mut Vec<Record>,
    ) -> Result<Decision, BisectError> {
        out.measured += 1;
        loop {
            self.measure(out, commit, recs)?;
            let d = decide(self.target, recs, reference);
            let last = out.probes.last_mut().ok_or("no probe")?;
            let (verdict, why) = match &d {
                Decision::Good(w) => ("good", w.clone()),
                Decision::Bad(w) => ("bad", w.clone()),
                Decision::Unsure(w) => ("inconclusive", w.clone()),
            };
            last.verdict = verdict.into();
            last.why = why;
            if !matches!(d, Decision::Unsure(_)) || recs.len() >= MEASUREMENTS {
                return Ok(d);
            }
        }
    }
}

/// Bisect `commits` (after `good`, `bad` last) for `target`, running `probe(commit)`
/// for a record folder each time a commit is measured.
pub fn bisect(
    target: Target,
    good: &str,
    commits: &[String],
    probe: &mut dyn FnMut(&str) -> Result<PathBuf, String>,
) -> Result<Bisection, BisectError> {
    let bad = commits
        .last()
        .cloned()
        .ok_or("no commit after the good one")?;
    let mut out = Bisection {
        schema: BISECT_SCHEMA.into(),
        target: target.clone(),
        good: good.to_string(),
        bad: bad.clone(),
        commits: commits.to_vec(),
        bound: bound(commits.len()),
        measured: 0,
        probes: Vec::new(),
        first_bad: None,
        outcome: String::new(),
    };
    let mut search = Search {
        target: &target,
        probe,
    };
    let metric = match &target {
        Target::Metric { step, metric, .. } => Some((step.clone(), metric.clone())),
        _ => None,
    };
    // The two ends first: the good one must be good, the bad one bad.
    let mut good_recs = Vec::new();
    let mut bad_recs = Vec::new();
    let (mut good_s, mut bad_s) = (Vec::new(), Vec::new());
    if let Some((step, m)) = &metric {
        // The ends are each other's reference: measured until they differ.
        for round in 0..MEASUREMENTS {
            out.measured += usize::from(round == 0) * 2;
            search.measure(&mut out, good, &mut good_recs)?;
            search.measure(&mut out, &bad, &mut bad_recs)?;
            good_s = metric_samples(&good_recs, step, m);
            bad_s = metric_samples(&bad_recs, step, m);
            let d = decide(&target, &bad_recs, Some((&good_s, &bad_s)));
            let n = out.probes.len();
            let (gv, bv, why) = match &d {
                Decision::Bad(w) => ("good", "bad", w.clone()),
                Decision::Good(w) | Decision::Unsure(w) => {
                    ("inconclusive", "inconclusive", w.clone())
                }
            };
            out.probes[n - 2].verdict = gv.into();
            out.probes[n - 2].why = format!(
                "the reference: median {}",
                crate::report::format::number(stats::median(&good_s))
            );
            out.probes[n - 1].verdict = bv.into();
            out.probes[n - 1].why = why;
            if matches!(d, Decision::Bad(_)) {
                break;
            }
            if round + 1 == MEASUREMENTS {
                out.outcome = format!(
                    "the bad commit {} is not worse than the good one {} beyond the threshold \
                     after {MEASUREMENTS} measurements each: nothing to bisect",
                    short(&bad),
                    short(good)
                );
                return Ok(out);
            }
        }
    } else if !ends_hold(&mut search, &mut out, good, &bad)? {
        return Ok(out);
    }
    let reference = metric
        .as_ref()
        .map(|_| (good_s.as_slice(), bad_s.as_slice()));
    // Invariant: commits[lo] is good (lo = None: the good commit), commits[hi] bad.
    let mut lo: Option<usize> = None;
    let mut hi = commits.len() - 1;
    while hi - lo.map_or(0, |l| l + 1) > 0 {
        let from = lo.map_or(0, |l| l + 1);
        let mid = from + (hi - from) / 2;
        let mut recs = Vec::new();
        match search.settle(&mut out, &commits[mid], reference, &mut recs)? {
            Decision::Bad(_) => hi = mid,
            Decision::Good(_) => lo = Some(mid),
            Decision::Unsure(why) => {
                out.outcome = format!(
                    "inconclusive at {} after {MEASUREMENTS} measurements ({why}): the first bad \
                     commit is after {} and at or before {}",
                    short(&commits[mid]),
                    lo.map_or(short(good), |l| short(&commits[l])),
                    short(&commits[hi])
                );
                return Ok(out);
            }
        }
    }
    out.first_bad = Some(commits[hi].clone());
    out.outcome = format!(
        "the first bad commit is {} ({} of {} commits measured; bound {})",
        short(&commits[hi]),
        out.measured,
        commits.len(),
        out.bound
    );
    Ok(out)
}

/// For a test or check target: whether the good end is good and the bad end
/// bad; when not, the outcome says which.
fn ends_hold(
    search: &mut Search<'_>,
    out: &mut Bisection,
    good: &str,
    bad: &str,
) -> Result<bool, BisectError> {
    let g = search.settle(out, good, None, &mut Vec::new())?;
    if !matches!(g, Decision::Good(_)) {
        out.outcome = format!(
            "the good commit {} is not good: nothing to bisect",
            short(good)
        );
        return Ok(false);
    }
    let b = search.settle(out, bad, None, &mut Vec::new())?;
    if !matches!(b, Decision::Bad(_)) {
        out.outcome = format!(
            "the bad commit {} is not bad: nothing to bisect",
            short(bad)
        );
        return Ok(false);
    }
    Ok(true)
}

fn short(c: &str) -> String {
    c.chars().take(12).collect()
}

/// Write the bisection as `bisect.json` (canonical JSON) and `bisect.sha256` in a
/// new folder of `records`; the folder.
pub fn write(records: &Path, b: &Bisection) -> Result<PathBuf, String> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let dir = records.join(format!("bisect-{stamp}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let value = serde_json::to_value(b).map_err(|e| e.to_string())?;
    let bytes = crate::evidence::jcs::to_canonical_vec(&value);
    let digest = crate::digest::sha256_bytes(&bytes).hex();
    let write = |name: &str, data: &[u8]| {
        std::fs::write(dir.join(name), data).map_err(|e| format!("writing {name}: {e}"))
    };
    write("bisect.json", &bytes)?;
    write(
        "bisect.sha256",
        format!("{digest}  bisect.json\n").as_bytes(),
    )?;
    Ok(dir)
}

/// The bisection for the terminal.
pub fn render(b: &Bisection) -> String {
    let mut s = String::new();
    for p in &b.probes {
        s.push_str(&format!(
            "{} {:<12} {}: {}\n",
            short(&p.commit),
            p.verdict,
            p.record.display(),
            p.why
        ));
    }
    s.push_str(&b.outcome);
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_log2_plus_the_two_ends() {
        assert_eq!(bound(1), 2);
        assert_eq!(bound(2), 3);
        assert_eq!(bound(8), 5);
        assert_eq!(bound(9), 6);
        assert_eq!(bound(1000), 12);
    }

    #[test]
    fn a_metric_target_splits_at_the_last_dot() {
        let Ok(Target::Metric { step, metric, .. }) =
            metric_target("prefill[model=a.b].prefill_ms", 0.05)
        else {
            panic!("not a metric target");
        };
        assert_eq!(
            (step.as_str(), metric.as_str()),
            ("prefill[model=a.b]", "prefill_ms")
        );
        assert!(metric_target("nodot", 0.05).is_err());
        assert!(metric_target("step.", 0.05).is_err());
    }
}
