//! `run` and `resume`: the two commands that run steps.

use std::time::Duration;

use orchestrate::exit::{Error, Verdict};
use orchestrate::run::{RunArgs, RunMode};

use super::args::RunCmd;
use super::out::{esayln, say, sayln};

/// One runtime thread: the orchestrator's async work is waiting on processes, signals
/// and timers; disk syncs, hashing and comparisons go to blocking threads. Measured
/// against two workers, it saves the cross-thread wake-ups of every step (a 500-step
/// chain ran 1.63 s against 2.16 s, median of five).
fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Failed(format!("cannot start the async runtime: {e}")))
}

/// Drive `fut` to its end on a fresh runtime.
fn block_on<F: std::future::Future>(fut: F) -> Result<F::Output, Error> {
    let rt = runtime()?;
    let out = rt.block_on(fut);
    // A blocking thread that was given up (a hash or a check the run did not wait
    // for) must not hold the exit: the runtime would wait for it when dropped.
    rt.shutdown_timeout(Duration::from_millis(100));
    Ok(out)
}

pub fn run(cmd: RunCmd) -> Result<Verdict, Error> {
    if cmd.detach {
        return detach(cmd);
    }
    let (plan, load) = (cmd.plan.clone(), cmd.load.options());
    let args = run_args(cmd, RunMode::Attached)?;
    finish(args, &plan, &load)
}

/// The library's arguments for `cmd`.
fn run_args(cmd: RunCmd, mode: RunMode) -> Result<RunArgs, Error> {
    // Load the key before running anything: a bad key must not cost a run.
    let sign_key = cmd
        .sign_key
        .as_deref()
        .map(orchestrate::evidence::dsse::load_signing_key)
        .transpose()
        .map_err(|e| Error::Usage(e.to_string()))?;
    Ok(RunArgs {
        sign_key,
        load: cmd.load.options(),
        plan: cmd.plan,
        records: cmd.records,
        work: cmd.work,
        jobs: cmd.jobs,
        keep_going: cmd.keep_going,
        isolation: cmd.isolation.map(Into::into),
        cgroup_parent: cmd.cgroup_parent,
        timeout: cmd.timeout,
        grace: cmd.grace,
        progress: cmd.progress.into(),
        tee: cmd.tee,
        memory_budget: cmd.memory_budget,
        allow_drift: cmd.allow_drift,
        inventory: cmd.inventory,
        device_wait: cmd.device_wait,
        cache_remote: cmd.cache.remote,
        cache: cmd.cache.dir,
        no_cache: cmd.no_cache,
        refresh: cmd.refresh,
        backend: cmd.backend.map(Into::into),
        mode,
    })
}

/// Run (or collect) to the record, and say it.
fn finish(
    args: RunArgs,
    plan_path: &std::path::Path,
    load: &orchestrate::plan::LoadOptions,
) -> Result<Verdict, Error> {
    let done = block_on(orchestrate::run::run(args))??;
    // CI outputs first: the record's path is the last line, whatever else is said
    // (the README reads it with `tail -1`).
    super::ci::after_run(plan_path, load, &done.record, &done.record_dir);
    say!("{}", orchestrate::report::summary::render(&done.record));
    for r in &done.reports {
        sayln!("report: {}", r.display());
    }
    for e in &done.report_errors {
        esayln!("warning: {e}");
    }
    sayln!("{}", done.record_dir.display());
    // Until here a second interrupt ends the process, whatever is stuck.
    drop(done.watchdog);
    Ok(done.record.status.into())
}

/// `run --detach`: submit, say how to follow and collect the run, return.
fn detach(cmd: RunCmd) -> Result<Verdict, Error> {
    let command = std::env::args_os()
        .map(|a| a.into_string())
        .collect::<Result<Vec<String>, _>>()
        .map_err(|_| {
            Error::Usage(
                "--detach: the command line must be UTF-8 to be run again by `resume`".into(),
            )
        })?;
    let cwd = std::env::current_dir()
        .map_err(|e| Error::Failed(format!("cannot read the current folder: {e}")))?;
    let args = run_args(cmd, RunMode::Detach { command, cwd })?;
    let d = block_on(orchestrate::run::detach(args))??;
    sayln!("run {} detached: {} jobs submitted", d.run_id, d.jobs);
    if !d.deferred.is_empty() {
        sayln!("run when it is collected: {}", d.deferred.join(", "));
    }
    let dir = d.record_dir.display();
    sayln!("follow it:  orchestrate status {dir}");
    sayln!("collect it: orchestrate resume {dir}   (waits for its jobs, then writes the record)");
    sayln!("{dir}");
    Ok(Verdict::Ok)
}

/// `resume` of a detached run: the command that detached it, run again in its
/// folder over its record, waiting on its jobs instead of submitting them.
fn collect(
    run: &std::path::Path,
    command: Vec<String>,
    cwd: std::path::PathBuf,
) -> Result<Verdict, Error> {
    let record_dir =
        std::path::absolute(run).map_err(|e| Error::Failed(format!("{}: {e}", run.display())))?;
    let words = super::normalize_args(command.iter().map(std::ffi::OsString::from).collect());
    let parsed = <super::args::Cli as clap::Parser>::try_parse_from(words)
        .map_err(|e| Error::Usage(format!("the journal's command does not parse: {e}")))?;
    let super::args::Command::Run(mut cmd) = parsed.command else {
        return Err(Error::Usage(
            "the journal's command is not `orchestrate run`".into(),
        ));
    };
    if !cmd.detach {
        return Err(Error::Usage(
            "the journal's command is not a detached run".into(),
        ));
    }
    std::env::set_current_dir(&cwd).map_err(|e| {
        Error::Failed(format!(
            "cannot enter {}, where the run was detached: {e}",
            cwd.display()
        ))
    })?;
    sayln!(
        "collecting {} (detached in {} by: {})",
        record_dir.display(),
        cwd.display(),
        command.join(" ")
    );
    // The pins were checked when it was submitted: its jobs ran what they fixed.
    cmd.allow_drift = true;
    let (plan, load) = (cmd.plan.clone(), cmd.load.options());
    let args = run_args(cmd, RunMode::Collect(record_dir))?;
    finish(args, &plan, &load)
}

/// `status`: where each step of a run is.
pub fn status(run: &std::path::Path) -> Result<Verdict, Error> {
    let (head, steps) = block_on(orchestrate::run::status(run))??;
    sayln!("{head}");
    let width = steps.iter().map(|s| s.step.len()).max().unwrap_or(0);
    for s in &steps {
        sayln!("  {:width$}  {}", s.step, s.state);
    }
    Ok(Verdict::Ok)
}

pub fn resume(run: &std::path::Path) -> Result<Verdict, Error> {
    if let Some((command, cwd)) = orchestrate::run::detached_command(run)? {
        return collect(run, command, cwd);
    }
    let r = block_on(orchestrate::run::resume(run))??;
    for f in &r.resumed.finished {
        sayln!("finished {f}");
    }
    for d in &r.resumed.disagreed {
        sayln!("failed after all: {d}");
    }
    if r.resumed.kept > 0 {
        sayln!("{} attempts were already on the record", r.resumed.kept);
    }
    sayln!("run {}: {}", r.record.run_id, r.record.status.as_str());
    sayln!("{}", run.display());
    Ok(r.record.status.into())
}
