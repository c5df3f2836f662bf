//! The steps table, retries, the cache and failures.

#[allow(unused_imports)]
use super::*;

/// The record folder as a reader standing in the current folder reaches it (relative
/// when below it, else absolute). Without a known folder: the records folder the run
/// was given, which is right from where it ran.
pub(super) fn record_path(rec: &Record, at: Option<&std::path::Path>) -> String {
    let dir = match at {
        Some(d) => d.to_path_buf(),
        None => std::path::Path::new(&rec.run.options.records).join(&rec.run_id),
    };
    let abs = std::path::absolute(&dir).unwrap_or_else(|_| dir.clone());
    // Rebuilt from its parts: `records/` given with a trailing slash shows none.
    let abs: std::path::PathBuf = abs.components().collect();
    let shown = std::env::current_dir()
        .ok()
        .and_then(|cwd| abs.strip_prefix(cwd).ok().map(std::path::Path::to_path_buf))
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| abs.clone());
    shown.display().to_string()
}

/// What retries a step needed, in words.
pub(super) fn retry_note(rec: &Record, s: &StepRecord) -> Option<String> {
    let declared = rec.run.steps.iter().find(|d| d.id == s.id)?.retries;
    let retried: Vec<&crate::record::run::AttemptRecord> =
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
/// outputs that differ from an earlier run with the same key; `style` says whether
/// it lands in Markdown (code spans, escaped text) or a terminal.
pub fn cache_lines(rec: &Record, style: super::short::Style) -> Vec<String> {
    let mut out = Vec::new();
    for s in &rec.steps {
        let Some(c) = &s.cache else { continue };
        let key = style.code(&short_hash(&c.key, 12));
        let id = style.code(&s.id);
        match (&c.reused_from, c.status.as_str()) {
            (Some(from), _) => out.push(format!(
                "{id}: reused from run {} (its attempt {}, stored {}), restored by {}, key {key}",
                style.text(&from.run_id),
                from.attempt,
                style.text(&from.created),
                style.text(c.restore.as_deref().unwrap_or("copy"))
            )),
            (None, status) => {
                let what = match status {
                    "stored" => "ran and was stored".to_string(),
                    "failed" => "ran and failed (not stored)".to_string(),
                    _ => format!(
                        "ran; {}",
                        style.phrased(c.note.as_deref().unwrap_or("not stored"))
                    ),
                };
                let why = if c.why.is_empty() {
                    String::new()
                } else {
                    let why: Vec<String> = c.why.iter().map(|w| style.phrased(w)).collect();
                    format!(": {}", why.join("; "))
                };
                out.push(format!("{id}: {what}, key {key}{why}"));
            }
        }
        for n in &c.nondeterministic {
            out.push(format!(
                "{id}: {} {}",
                style.bold("nondeterministic output"),
                style.phrased(n)
            ));
        }
    }
    out
}

/// A step's status as tables show it: a failed `gate = "new"` step that does not fail
/// the run says why not.
pub(crate) fn status_text(rec: &Record, s: &StepRecord) -> String {
    match crate::evidence::revisions::judge(rec, s) {
        Some(j) => j.status_text().to_string(),
        None => s.status.as_str().to_string(),
    }
}

/// Whether the step's status is one a reader must look at: it did not succeed, and
/// not only as its results explain.
pub(crate) fn notable_status(rec: &Record, s: &StepRecord) -> bool {
    !s.status.is_success()
        && !matches!(
            crate::evidence::revisions::judge(rec, s),
            Some(crate::evidence::revisions::Judged::Explained(_))
        )
}

pub(super) fn step_line(rec: &Record, s: &StepRecord) -> StepLine {
    let (m, w) = measured(s);
    StepLine {
        note: retry_note(rec, s),
        id: s.id.clone(),
        kind: s.kind.to_string(),
        status: status_text(rec, s),
        attempts: m,
        warmups: w,
        timing: timing(s),
        reason: s.reason.clone(),
        notable: notable_status(rec, s),
    }
}

/// Steps per status, in order first seen, for the compact view's counts.
pub(super) fn status_counts(steps: &[StepLine]) -> Vec<StatusCount> {
    let mut counts: Vec<StatusCount> = Vec::new();
    for s in steps {
        match counts.iter_mut().find(|c| c.status == s.status) {
            Some(c) => c.n += 1,
            None => counts.push(StatusCount {
                status: s.status.clone(),
                n: 1,
                notable: s.notable,
            }),
        }
    }
    counts
}

/// The steps the compact view still names one by one: those that did not succeed.
pub(super) fn notable(steps: &[StepLine]) -> Vec<StepLine> {
    steps
        .iter()
        .filter(|s| s.status != "succeeded" && s.status != "reused")
        .cloned()
        .collect()
}

/// Whether a failure kept on the record is one a reader must look at: not the exit
/// of a step whose results explain it and whose failures do not gate (ruff exits 1
/// whenever it finds anything; pytest with only pre-existing failures).
pub(crate) fn is_real_failure(rec: &Record, f: &crate::record::run::Failure) -> bool {
    if f.check.is_some() {
        return true;
    }
    let Some(s) = rec.steps.iter().find(|s| s.id == f.step) else {
        return true;
    };
    !matches!(
        crate::evidence::revisions::judge(rec, s),
        Some(crate::evidence::revisions::Judged::Explained(_))
    )
}

/// The [`SLOWEST`] steps by median wall time; `steps` line up with `rec.steps`.
pub(super) fn slowest(rec: &Record, steps: &[StepLine]) -> Vec<StepLine> {
    let mut by_time: Vec<(f64, &StepLine)> = rec
        .steps
        .iter()
        .zip(steps)
        .filter_map(|(r, l)| r.wall_ms.map(|w| (w.median, l)))
        .collect();
    by_time.sort_by(|a, b| b.0.total_cmp(&a.0));
    by_time
        .iter()
        .take(SLOWEST)
        .map(|(_, l)| (*l).clone())
        .collect()
}

/// What failed, with the check's name as a code span where the orchestrator
/// phrased it with one (`check `NAME` failed: ...`).
fn failure_what(f: &crate::record::run::Failure, style: super::short::Style) -> String {
    if let Some(name) = &f.check {
        if let Some(rest) = f.what.strip_prefix(&format!("check `{name}` ")) {
            return format!("check {} {}", style.code(name), style.text(rest));
        }
    }
    style.text(&f.what)
}

/// Failures grouped by step (in record order), each try that was tried again said
/// so; only those a reader must look at ([`is_real_failure`]).
pub(crate) fn failure_lines(rec: &Record, style: super::short::Style) -> Vec<String> {
    let order = |step: &str| {
        rec.steps
            .iter()
            .position(|s| s.id == step)
            .unwrap_or(usize::MAX)
    };
    let mut fs: Vec<&crate::record::run::Failure> = rec
        .failures
        .iter()
        .filter(|f| is_real_failure(rec, f))
        .collect();
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
                style.code(&f.step),
                failure_what(f, style),
                if retried { " (tried again)" } else { "" }
            )
        })
        .collect()
}
