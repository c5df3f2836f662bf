//! `run` and `resume`: the two commands that run steps.

use std::time::Duration;

use orchestrate::exit::{Error, Verdict};
use orchestrate::run::RunArgs;

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
    // Load the key before running anything: a bad key must not cost a run.
    let sign_key = cmd
        .sign_key
        .as_deref()
        .map(orchestrate::evidence::dsse::load_signing_key)
        .transpose()
        .map_err(|e| Error::Usage(e.to_string()))?;
    let load = cmd.load.options();
    let plan_path = cmd.plan.clone();
    let args = RunArgs {
        sign_key,
        load: load.clone(),
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
        cache: cmd.cache.dir,
        no_cache: cmd.no_cache,
        refresh: cmd.refresh,
        backend: cmd.backend.map(Into::into),
    };
    let done = block_on(orchestrate::run::run(args))??;
    // CI outputs first: the record's path is the last line, whatever else is said
    // (the README reads it with `tail -1`).
    super::ci::after_run(&plan_path, &load, &done.record, &done.record_dir);
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

pub fn resume(run: &std::path::Path) -> Result<Verdict, Error> {
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
