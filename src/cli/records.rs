//! Commands that read what runs left: `verify`, `report`, `export`, `diff`,
//! `recover`, `audit`.

use std::path::{Path, PathBuf};

use orchestrate::exit::{Error, Verdict};

use super::out::{esayln, print_json, say, sayln, write_output};

pub fn verify(run: &Path, key: Option<&Path>, require_artifacts: bool) -> Result<Verdict, Error> {
    use orchestrate::evidence::{render_report, verify_run, VerifyOptions};
    let key = key
        .map(orchestrate::evidence::dsse::load_verifying_key)
        .transpose()
        .map_err(|e| Error::Usage(e.to_string()))?;
    let opts = VerifyOptions {
        key,
        require_artifacts,
    };
    let report = verify_run(run, &opts);
    say!("{}", render_report(&report, require_artifacts));
    Ok(Verdict::of(report.ok(require_artifacts)))
}

pub fn report(
    run: &Path,
    template: &str,
    output: Option<&Path>,
    no_verify: bool,
    plan_dir: Option<PathBuf>,
) -> Result<Verdict, Error> {
    use orchestrate::report::{render, RenderOptions, ReportError, TemplateChoice};
    let opts = RenderOptions {
        no_verify,
        plan_dir,
    };
    let text = render(run, TemplateChoice::parse(template), &opts).map_err(|e| match e {
        e @ ReportError::DigestMismatch { .. } => Error::Tampered(e),
        e => Error::Report(e),
    })?;
    write_output(output, &text)
}

pub fn export(run: &Path, output: Option<&Path>) -> Result<Verdict, Error> {
    let root = orchestrate::report::rocrate::export(run, output)?;
    sayln!("{}", root.join("ro-crate-metadata.json").display());
    Ok(Verdict::Ok)
}

pub fn diff(
    runs: &[std::path::PathBuf],
    format: orchestrate::report::DiffFormat,
    only_changed: bool,
) -> Result<Verdict, Error> {
    let text = orchestrate::report::diff(runs, format, only_changed)?;
    write_output(None, &text)
}

pub fn runs(
    folders: &[std::path::PathBuf],
    filter: &orchestrate::track::RunFilter,
    json: bool,
) -> Result<Verdict, Error> {
    let rows = indexed(folders, filter)?;
    if json {
        print_json(&rows)?;
    } else {
        say!("{}", orchestrate::track::table(&rows));
    }
    Ok(Verdict::Ok)
}

/// The indexed runs of `folders`, with why an index on disk was not used.
fn indexed(
    folders: &[std::path::PathBuf],
    filter: &orchestrate::track::RunFilter,
) -> Result<Vec<orchestrate::track::index::RunRow>, Error> {
    let (rows, refreshed) =
        orchestrate::track::runs(folders, filter).map_err(|e| Error::Failed(e.to_string()))?;
    for n in refreshed.iter().filter_map(|r| r.note.as_ref()) {
        esayln!("note: {n}");
    }
    Ok(rows)
}

/// The regression gate: judged, printed (or JSON), written as JUnit when asked,
/// appended to GitHub's step summary on GitHub; exit 1 on a regression.
pub fn regressions(
    folders: &[std::path::PathBuf],
    filter: &orchestrate::track::RunFilter,
    opts: &orchestrate::track::regressions::Options,
    junit: Option<&Path>,
    json: bool,
) -> Result<Verdict, Error> {
    use orchestrate::track::regressions::{self as gate, render, GateError};
    let rows = indexed(folders, filter)?;
    let r = gate::gate(&rows, opts).map_err(|e| match e {
        GateError::Record(..) => Error::Failed(e.to_string()),
        _ => Error::Usage(e.to_string()),
    })?;
    if json {
        print_json(&r)?;
    } else {
        say!("{}", render::text(&r));
    }
    if let Some(path) = junit {
        orchestrate::evidence::atomic::write_atomic(path, render::junit(&r).as_bytes())?;
    }
    super::ci::append_summary(&render::summary(&r));
    Ok(Verdict::of(r.failures().is_empty()))
}

pub fn site(
    folders: &[std::path::PathBuf],
    plan: Option<String>,
    output: &Path,
    opts: orchestrate::track::site::SiteOptions,
) -> Result<Verdict, Error> {
    let noise = opts.noise;
    if !(0.0..1.0).contains(&noise) {
        return Err(Error::Usage(format!(
            "--noise {noise}: a fraction in [0, 1), e.g. 0.05"
        )));
    }
    let filter = orchestrate::track::RunFilter {
        plan,
        ..Default::default()
    };
    let write = || -> Result<usize, Error> {
        let rows = indexed(folders, &filter)?;
        site_once(&rows, output, &opts)
    };
    match opts.refresh {
        None => write().map(|_| Verdict::Ok),
        Some(secs) => watch(write, std::time::Duration::from_secs(secs)),
    }
}

/// Write the site once and say what it holds; how many runs are in progress.
fn site_once(
    rows: &[orchestrate::track::RunRow],
    output: &Path,
    opts: &orchestrate::track::site::SiteOptions,
) -> Result<usize, Error> {
    use orchestrate::track::site;
    let s = site::write(rows, output, opts).map_err(|e| match e {
        site::SiteError::Refused { .. } => Error::Usage(e.to_string()),
        e => Error::Failed(e.to_string()),
    })?;
    let mut live = String::new();
    if s.running > 0 {
        live.push_str(&format!(", {} in progress", s.running));
    }
    if s.stopped > 0 {
        live.push_str(&format!(", {} without a record", s.stopped));
    }
    sayln!(
        "site: {} ({} runs, {} unverified{live}; {} reports; {} charts with {} changes; {} tests and findings with a history)",
        s.index.display(),
        s.runs,
        s.unverified,
        s.reports,
        s.charts,
        s.changes,
        s.histories
    );
    for p in &s.problems {
        sayln!("not rendered: {p}");
    }
    if !s.kept.is_empty() {
        sayln!(
            "kept what was added to the site folder: {}",
            s.kept.join(", ")
        );
    }
    Ok(s.running)
}

/// `write` every `every` while it reports a run in progress. SIGINT, SIGTERM and
/// SIGHUP are held off during a write (a site is never left half replaced) and end
/// the watch after it.
fn watch(
    mut write: impl FnMut() -> Result<usize, Error>,
    every: std::time::Duration,
) -> Result<Verdict, Error> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use nix::sys::signal::{SigSet, Signal};
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    use std::os::fd::AsFd;
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGINT);
    mask.add(Signal::SIGTERM);
    mask.add(Signal::SIGHUP);
    let os = |e: nix::Error| Error::Failed(format!("site --watch: {e}"));
    mask.thread_block().map_err(os)?;
    let signals = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC).map_err(os)?;
    let wait = PollTimeout::try_from(every.as_millis().min(i32::MAX as u128) as i32)
        .unwrap_or(PollTimeout::MAX);
    // Whether a signal came within `wait` (one that came during a write included).
    let signalled = |wait: PollTimeout| -> Result<bool, Error> {
        let mut fds = [PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, wait) {
            Ok(0) | Err(nix::Error::EINTR) => Ok(false),
            Ok(_) => Ok(signals.read_signal().is_ok()),
            Err(e) => Err(os(e)),
        }
    };
    loop {
        let running = write()?;
        let wait = if running == 0 {
            PollTimeout::ZERO
        } else {
            wait
        };
        if signalled(wait)? {
            sayln!("site: interrupted; the site stays as last written");
            return Ok(Verdict::Interrupted);
        }
        if running == 0 {
            sayln!("site: no run in progress; the site is final");
            return Ok(Verdict::Ok);
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub fn trend(
    step: &str,
    metric: Option<&str>,
    folders: &[std::path::PathBuf],
    plan: Option<String>,
    by: orchestrate::track::trend::Order,
    repo: &Path,
    noise: f64,
    json: bool,
) -> Result<Verdict, Error> {
    use orchestrate::track::trend;
    if !(0.0..1.0).contains(&noise) {
        return Err(Error::Usage(format!(
            "--noise {noise}: a fraction in [0, 1), e.g. 0.05"
        )));
    }
    let filter = orchestrate::track::RunFilter {
        plan,
        ..Default::default()
    };
    let rows = indexed(folders, &filter)?;
    if step == "tests" {
        // A pytest node id names the case its JUnit form does.
        let filter = metric.map(orchestrate::results::junit::case_id);
        let t = trend::tests(&rows, by, Some(repo), filter.as_deref());
        if json {
            print_json(&t)?;
        } else {
            say!("{}", trend::render_tests(&t));
        }
        return Ok(Verdict::Ok);
    }
    let mut steps: Vec<String> = rows
        .iter()
        .flat_map(|r| r.series.iter().map(|s| s.step.clone()))
        .collect();
    steps.sort();
    steps.dedup();
    let resolved = orchestrate::track::names::resolve_step(step, &steps).map_err(Error::Usage)?;
    if let Some(n) = &resolved.note {
        esayln!("{n}");
    }
    let step = resolved.id.as_str();
    let mut known: Vec<String> = rows
        .iter()
        .flat_map(|r| r.series.iter().filter(|s| s.step == step))
        .map(|s| s.metric.clone())
        .collect();
    known.sort();
    known.dedup();
    let listed = orchestrate::track::names::list(&known, 20);
    let Some(metric) = metric else {
        return Err(Error::Usage(format!(
            "trend {step}: which metric? It has {listed}"
        )));
    };
    if !known.iter().any(|k| k == metric) {
        return Err(Error::Usage(format!(
            "no run has samples of `{metric}` for step `{step}`; it has {listed}"
        )));
    }
    let t = trend::trend(&rows, step, metric, by, Some(repo), noise);
    if json {
        print_json(&t)?;
    } else {
        say!("{}", trend::render(&t));
    }
    Ok(Verdict::Ok)
}

/// One probe: `orchestrate run PLAN` (this binary) with the implementation replaced;
/// the record folder its last line names.
fn probe_run(
    plan: &Path,
    commit: &str,
    records: &Path,
    work: Option<&Path>,
) -> Result<std::path::PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("run")
        .arg(plan)
        .arg("--records")
        .arg(records)
        .args(["--keep-going", "--progress", "quiet", "--set"])
        .arg(format!("revisions.implementation.commit=\"{commit}\""));
    if let Some(w) = work {
        cmd.arg("--work").arg(w);
    }
    cmd.stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit());
    let out = cmd
        .output()
        .map_err(|e| format!("running the plan at {commit}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or("").trim().to_string();
    let dir = std::path::PathBuf::from(&last);
    // 0 and 1 (steps failed) leave a record; anything else is the run refused.
    if !matches!(out.status.code(), Some(0) | Some(1)) || !dir.join("record.json").is_file() {
        return Err(format!(
            "the run at {commit} ended {} without a record",
            out.status
        ));
    }
    Ok(dir)
}

pub fn bisect(
    plan: &Path,
    good: &str,
    bad: &str,
    target: orchestrate::track::bisect::Target,
    records: &Path,
    work: Option<&Path>,
    json: bool,
) -> Result<Verdict, Error> {
    use orchestrate::track::bisect;
    let loaded = orchestrate::plan::load(plan)?;
    let Some(imp) = loaded.revisions.iter().find(|r| r.name == "implementation") else {
        return Err(Error::Usage(format!(
            "{}: bisect replaces [revisions] implementation, which this plan does not have",
            plan.display()
        )));
    };
    let (target, note) = bisect::resolve_target(target, &loaded).map_err(Error::Usage)?;
    if let Some(n) = note {
        esayln!("{n}");
    }
    let (good, _, commits) = bisect::commits_between(&imp.repo, good, bad).map_err(Error::Usage)?;
    std::fs::create_dir_all(records)
        .map_err(|e| Error::Failed(format!("creating {}: {e}", records.display())))?;
    let mut probe = |c: &str| probe_run(plan, c, records, work);
    let b = bisect::bisect(target, &good, &commits, &mut probe).map_err(|e| match e {
        bisect::BisectError::Target(t) => Error::Usage(t),
        bisect::BisectError::Failed(f) => Error::Failed(f),
    })?;
    let dir = bisect::write(records, &b).map_err(Error::Failed)?;
    if json {
        print_json(&b)?;
    } else {
        sayln!("{}bisect record: {}", bisect::render(&b), dir.display());
    }
    Ok(Verdict::of(b.first_bad.is_some()))
}

pub fn recover(records: &Path) -> Result<Verdict, Error> {
    // The text says `error:` on each line that is one.
    let report =
        orchestrate::recover::recover(records).map_err(|e| Error::Failed(e.to_string()))?;
    say!("{report}");
    Ok(Verdict::Ok)
}

pub fn audit(json: bool, records: Option<&Path>) -> Result<Verdict, Error> {
    let report = orchestrate::audit::audit_host(records);
    if json {
        print_json(&report)?;
    } else {
        say!("{}", orchestrate::audit::render_text(&report));
    }
    Ok(Verdict::of(report.clean()))
}
