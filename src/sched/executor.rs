//! The executor of one step: lease its devices, run its attempts one after another
//! through isolate, hash what they wrote, and report every event to the dispatcher.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::collect::{AttemptFiles, Collected};
use super::durable::{wait_durable, Durable};
use super::prefetch::{attempt_dirs, STDERR_LOG, STDOUT_LOG};
use crate::evidence::journal::{redact_env, Event};
use crate::evidence::record::{
    rfc3339, round_us, Allocation, AttemptRecord, CheckRecord, FileRecord, OutputKind, StepStatus,
    Termination,
};
use crate::isolate::{AttemptOutcome, AttemptSpec, CancelReason, IsolateError, Isolator};
use crate::plan::{Check, Plan, Step, StepCommand, StepId, StepKind, Template, VarSource};
use crate::sys::Stop;

/// Devices held by a step while its attempts run.
pub struct DeviceLease {
    /// Variables that tell the step which devices are its own.
    pub env: Vec<(String, String)>,
    /// Device nodes the attempts may open.
    pub dev_nodes: Vec<PathBuf>,
    /// What was granted, for the record.
    pub allocations: Vec<Allocation>,
    /// Release everything; returns the allocations with their release times.
    pub release: Box<dyn FnOnce() -> Vec<Allocation> + Send>,
}

/// Leases devices for steps. Blocking: called on a blocking thread.
pub trait DeviceBroker: Send + Sync {
    /// Acquire every device the step names, all or none, waiting as configured and
    /// giving up soon after `stop` is set (a cancel arrived while waiting).
    fn acquire(&self, run_id: &str, step: &Step, stop: &Stop) -> Result<DeviceLease, String>;
}

/// Inputs of one check with every template rendered to a path.
#[derive(Debug, Clone, Default)]
pub struct ResolvedCheck {
    pub actual: Option<String>,
    pub expected: Option<String>,
    pub actual_logits: Option<String>,
    pub expected_logits: Option<String>,
    /// For `across`: the file in every measured attempt's `${out}`, in attempt order.
    pub across: Vec<String>,
}

/// Runs the built-in checks of compare steps. Blocking: called on a blocking thread.
pub trait CheckRunner: Send + Sync {
    fn run(&self, step: &str, check: &Check, inputs: &ResolvedCheck) -> CheckRecord;
}

/// One finished attempt's output folder, as later steps see it.
#[derive(Debug, Clone)]
pub(crate) struct AttemptOut {
    pub warmup: bool,
    pub out: PathBuf,
}

/// Output folders of finished steps, by step.
pub(crate) type Upstream = BTreeMap<StepId, Vec<AttemptOut>>;

/// What an executor tells the dispatcher.
pub(crate) enum StepMsg {
    /// Write to the journal.
    Event(Event),
    /// Live view only.
    Progress {
        step: StepId,
        attempt: u32,
        of: u32,
        warmup: bool,
    },
    Done {
        step: StepId,
        status: StepStatus,
        reason: Option<String>,
        outs: Vec<AttemptOut>,
        outputs: Vec<String>,
    },
}

/// Shared, read-only context of every executor.
pub(crate) struct ExecCtx {
    /// How far the journal is on disk (a step's first attempt waits for its barrier).
    pub durable: watch::Receiver<Durable>,
    pub plan: Arc<Plan>,
    pub opts: super::SchedOptions,
    pub isolator: Arc<Isolator>,
    pub base_env: Vec<(String, String)>,
    pub devices: Option<Arc<dyn DeviceBroker>>,
    pub checks: Option<Arc<dyn CheckRunner>>,
}

struct Vars<'a> {
    run_id: &'a str,
    work: String,
    out: Option<String>,
    repeat: Option<u32>,
    upstream: &'a Upstream,
}

impl VarSource for Vars<'_> {
    fn run_id(&self) -> &str {
        self.run_id
    }
    fn work(&self) -> &str {
        &self.work
    }
    fn out(&self) -> Option<&str> {
        self.out.as_deref()
    }
    fn repeat(&self) -> Option<u32> {
        self.repeat
    }
    fn step_out(&self, step: &StepId) -> Option<String> {
        let outs = self.upstream.get(step)?;
        let last = outs.iter().rev().find(|a| !a.warmup).or(outs.last())?;
        Some(last.out.display().to_string())
    }
}

/// Run one step to its end. Never panics; every problem becomes a `Done` status.
pub(crate) async fn execute(
    ctx: Arc<ExecCtx>,
    step: Step,
    upstream: Arc<Upstream>,
    tx: mpsc::UnboundedSender<StepMsg>,
    cancel: watch::Receiver<Option<CancelReason>>,
    barrier: u64,
) {
    let id = step.id.clone();
    let run = run_step(&ctx, &step, &upstream, &tx, cancel, barrier);
    let (status, reason, outs, outputs) = match run.await {
        Ok(r) => r,
        Err(e) => (StepStatus::Failed, Some(e), Vec::new(), Vec::new()),
    };
    let _ = tx.send(StepMsg::Done {
        step: id,
        status,
        reason,
        outs,
        outputs,
    });
}

type StepResult = (StepStatus, Option<String>, Vec<AttemptOut>, Vec<String>);

/// `barrier`: the journal sequence number that must be durable before the step acts
/// (the end that let it start); see durable.rs.
async fn run_step(
    ctx: &Arc<ExecCtx>,
    step: &Step,
    upstream: &Arc<Upstream>,
    tx: &mpsc::UnboundedSender<StepMsg>,
    cancel: watch::Receiver<Option<CancelReason>>,
    barrier: u64,
) -> Result<StepResult, String> {
    let lease = match (&ctx.devices, step.devices.is_empty()) {
        (Some(broker), false) => {
            let broker = Arc::clone(broker);
            let run_id = ctx.opts.run_id.clone();
            let s = step.clone();
            let stop = Stop::new();
            let stop_waiting = stop.clone();
            let mut task = tokio::task::spawn_blocking(move || broker.acquire(&run_id, &s, &stop));
            // A cancel while waiting for devices stops the wait (the task returns
            // within a poll interval, releasing anything it took).
            let mut cancel = cancel.clone();
            let got = tokio::select! {
                got = &mut task => got,
                _ = async {
                    while cancel.borrow_and_update().is_none() {
                        if cancel.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                } => {
                    stop_waiting.stop();
                    task.await
                }
            };
            let lease = got
                .map_err(|e| format!("device lease task failed: {e}"))?
                .map_err(|e| format!("devices: {e}"))?;
            let _ = tx.send(StepMsg::Event(Event::DevicesGranted {
                step: step.id.0.clone(),
                allocations: lease.allocations.clone(),
            }));
            Some(lease)
        }
        (None, false) => {
            return Err(format!(
                "step `{}` names devices but this run has no device broker",
                step.id
            ))
        }
        _ => None,
    };
    let (dev_env, dev_nodes) = match &lease {
        Some(l) => (l.env.clone(), Some(l.dev_nodes.clone())),
        None => (Vec::new(), None),
    };
    let result = if step.kind == StepKind::Compare {
        match wait_durable(ctx.durable.clone(), barrier).await {
            Ok(()) => run_checks(ctx, step, upstream, tx, &cancel).await,
            Err(e) => Err(e),
        }
    } else {
        run_attempts(ctx, step, upstream, tx, cancel, dev_env, dev_nodes, barrier).await
    };
    if let Some(lease) = lease {
        let released = tokio::task::spawn_blocking(lease.release)
            .await
            .unwrap_or_default();
        let _ = tx.send(StepMsg::Event(Event::DevicesReleased {
            step: step.id.0.clone(),
            allocations: released,
        }));
    }
    result
}

async fn run_checks(
    ctx: &Arc<ExecCtx>,
    step: &Step,
    upstream: &Arc<Upstream>,
    tx: &mpsc::UnboundedSender<StepMsg>,
    cancel: &watch::Receiver<Option<CancelReason>>,
) -> Result<StepResult, String> {
    let runner = ctx
        .checks
        .clone()
        .ok_or_else(|| "compare steps need the compare module, which this run lacks".to_string())?;
    let vars = Vars {
        run_id: &ctx.opts.run_id,
        work: ctx.opts.work_dir.display().to_string(),
        out: None,
        repeat: None,
        upstream,
    };
    let mut failed = Vec::new();
    for check in &step.checks {
        let inputs = resolve_check(check, &vars, upstream, &ctx.plan.dir)?;
        let runner = Arc::clone(&runner);
        let (sid, c) = (step.id.0.clone(), check.clone());
        let task = tokio::task::spawn_blocking(move || runner.run(&sid, &c, &inputs));
        // A check reads what upstream steps wrote, which may be huge: the run's end
        // does not wait for it.
        let rec = tokio::select! {
            rec = task => rec.map_err(|e| format!("check task failed: {e}"))?,
            _ = hard_cancel(cancel.clone()) => {
                return Ok((
                    StepStatus::Cancelled,
                    Some(format!("check `{}` given up: the run was ended", check.name)),
                    Vec::new(),
                    Vec::new(),
                ));
            }
        };
        if !rec.passed {
            failed.push(rec.name.clone());
        }
        let _ = tx.send(StepMsg::Event(Event::CheckEnded {
            step: step.id.0.clone(),
            check: Box::new(rec),
        }));
    }
    if failed.is_empty() {
        Ok((StepStatus::Succeeded, None, Vec::new(), Vec::new()))
    } else {
        Ok((
            StepStatus::Failed,
            Some(format!("failed checks: {}", failed.join(", "))),
            Vec::new(),
            Vec::new(),
        ))
    }
}

fn resolve_check(
    check: &Check,
    vars: &Vars<'_>,
    upstream: &Upstream,
    plan_dir: &Path,
) -> Result<ResolvedCheck, String> {
    let render = |t: &Option<Template>| -> Result<Option<String>, String> {
        t.as_ref()
            .map(|t| t.render(vars).map(|s| absolutize(plan_dir, &s)))
            .transpose()
            .map_err(|e| format!("check `{}`: {e}", check.name))
    };
    let mut r = ResolvedCheck {
        actual: render(&check.actual)?,
        expected: render(&check.expected)?,
        actual_logits: render(&check.actual_logits)?,
        expected_logits: render(&check.expected_logits)?,
        across: Vec::new(),
    };
    if let Some(across) = &check.across {
        let file = check.file.as_deref().unwrap_or("");
        let outs = upstream
            .get(across)
            .ok_or_else(|| format!("check `{}`: step `{across}` has no outputs", check.name))?;
        r.across = outs
            .iter()
            .filter(|a| !a.warmup)
            .map(|a| a.out.join(file).display().to_string())
            .collect();
    }
    Ok(r)
}

fn absolutize(base: &Path, p: &str) -> String {
    let path = Path::new(p);
    if path.is_absolute() {
        p.to_string()
    } else {
        base.join(path).display().to_string()
    }
}

#[allow(clippy::too_many_arguments)]
async fn run_attempts(
    ctx: &Arc<ExecCtx>,
    step: &Step,
    upstream: &Arc<Upstream>,
    tx: &mpsc::UnboundedSender<StepMsg>,
    cancel: watch::Receiver<Option<CancelReason>>,
    dev_env: Vec<(String, String)>,
    dev_nodes: Option<Vec<PathBuf>>,
    barrier: u64,
) -> Result<StepResult, String> {
    let plan = &ctx.plan;
    let opts = &ctx.opts;
    let total = step.attempts();
    let mut outs = Vec::new();
    let mut last_outputs = Vec::new();
    for n in 1..=total {
        if let Some(reason) = *cancel.borrow() {
            return Ok((
                StepStatus::Cancelled,
                Some(format!(
                    "cancelled before attempt {n}: {}",
                    cancel_text(reason)
                )),
                outs,
                last_outputs,
            ));
        }
        let warmup = n <= step.warmup;
        let (out, logs) = attempt_dirs(&opts.work_dir, &opts.record_dir, &step.id.0, n);
        for d in [&out, &logs] {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        let vars = Vars {
            run_id: &opts.run_id,
            work: opts.work_dir.display().to_string(),
            out: Some(out.display().to_string()),
            repeat: Some(if warmup { 0 } else { n - step.warmup }),
            upstream,
        };
        let render = |t: &Template| t.render(&vars).map_err(|e| e.to_string());
        let argv = match &step.command {
            Some(StepCommand::Argv(a)) => a.iter().map(render).collect::<Result<Vec<_>, _>>()?,
            Some(StepCommand::Shell(s)) => vec!["/bin/sh".into(), "-c".into(), render(s)?],
            None => return Err(format!("step `{}` has no command", step.id)),
        };
        let cwd = match &step.cwd {
            Some(c) => PathBuf::from(absolutize(&plan.dir, &render(c)?)),
            None => plan.dir.clone(),
        };
        let metrics_path = logs.join("metrics.json");
        let mut env = ctx.base_env.clone();
        let mut set = |k: &str, v: String| {
            env.retain(|(a, _)| a != k);
            env.push((k.to_string(), v));
        };
        set("ORCHESTRATE_RUN_ID", opts.run_id.clone());
        set("ORCHESTRATE_STEP", step.id.0.clone());
        set("ORCHESTRATE_OUT", out.display().to_string());
        set("ORCHESTRATE_WORK", opts.work_dir.display().to_string());
        set("ORCHESTRATE_METRICS", metrics_path.display().to_string());
        for (k, v) in &dev_env {
            set(k, v.clone());
        }
        for (k, t) in &step.env {
            set(k, render(t)?);
        }
        env.sort();
        let name = format!("orchestrate-{}-{}-{n}", opts.run_id, step.id);
        let canary = format!("{}/{}/{n}", opts.run_id, step.id);
        let memory = plan.memory_of(step).map(|b| b.0);
        let spec = AttemptSpec {
            name: name.clone(),
            canary: canary.clone(),
            argv: argv.clone(),
            cwd: cwd.clone(),
            env: env.clone(),
            memory,
            swap: plan.limits.swap,
            pids: step.pids.or(plan.limits.pids),
            cpus: plan.limits.cpus.clone(),
            device_nodes: dev_nodes.clone(),
            timeout: plan.timeout_of(step),
            grace: opts.grace,
            stdout: logs.join(STDOUT_LOG),
            stderr: logs.join(STDERR_LOG),
            tee: opts.tee,
            mask: (!opts.masker.is_empty()).then(|| opts.masker.clone()),
        };
        let _ = tx.send(StepMsg::Event(Event::AttemptStarted {
            step: step.id.0.clone(),
            attempt: n,
            warmup,
            cgroup: name.clone(),
            canary: canary.clone(),
            argv: argv.clone(),
            cwd: cwd.display().to_string(),
            out: out.display().to_string(),
            logs: logs
                .strip_prefix(&opts.record_dir)
                .ok()
                .map(|p| p.display().to_string()),
        }));
        let _ = tx.send(StepMsg::Progress {
            step: step.id.clone(),
            attempt: n,
            of: total,
            warmup,
        });
        let started = chrono::Utc::now();
        // Later attempts follow this step's own earlier ones: no barrier.
        let opened = wait_durable(ctx.durable.clone(), if n == 1 { barrier } else { 0 });
        let result = ctx.isolator.run_gated(spec, cancel.clone(), opened).await;
        let output_paths: Vec<String> = step
            .outputs
            .iter()
            .map(|t| render(t).map(|s| absolutize(&cwd, &s)))
            .collect::<Result<_, _>>()?;
        let files = AttemptFiles {
            record_dir: opts.record_dir.clone(),
            stdout: logs.join(STDOUT_LOG),
            stderr: logs.join(STDERR_LOG),
            metrics: metrics_path.clone(),
            outputs: output_paths.clone(),
        };
        let Collected {
            stdout,
            stderr,
            outputs,
            metrics,
        } = collect(files, cancel.clone()).await;
        // The step's own metrics file lives in the record folder: mask it in place.
        if metrics.as_ref().is_ok_and(Option::is_some) && !opts.masker.is_empty() {
            mask_file(&metrics_path, &opts.masker);
        }
        let redacted = redact_env(&env, &opts.secret_env);
        let mut rec = match &result {
            Ok(o) => attempt_record(o),
            Err(e @ IsolateError::CancelledBeforeStart(reason)) => {
                let mut rec = not_started_record(started, e.to_string());
                rec.termination = Termination::Cancelled;
                rec.cancel_reason = Some(cancel_reason_str(*reason));
                rec
            }
            Err(e) => not_started_record(started, e.to_string()),
        };
        rec.attempt = n;
        rec.warmup = warmup;
        rec.argv = argv;
        rec.cwd = cwd.display().to_string();
        rec.env = redacted;
        rec.out = out.display().to_string();
        rec.cgroup = name;
        rec.canary = canary;
        rec.memory_limit_bytes = memory;
        rec.stdout = stdout;
        rec.stderr = stderr;
        match metrics {
            Ok(m) => rec.metrics = m,
            Err(e) => rec.metrics_error = Some(e),
        }
        rec.outputs = outputs;
        let ok = rec.succeeded();
        let unhashed = rec.outputs.iter().any(|o| o.kind == OutputKind::Unhashed);
        let termination = rec.termination.clone();
        let missing: Vec<String> = rec
            .outputs
            .iter()
            .filter(|o| matches!(o.kind, OutputKind::Absent | OutputKind::Refused))
            .map(|o| match &o.note {
                Some(n) => format!("{} ({n})", o.path),
                None => o.path.clone(),
            })
            .collect();
        let _ = tx.send(StepMsg::Event(Event::AttemptEnded {
            step: step.id.0.clone(),
            attempt: Box::new(rec),
        }));
        outs.push(AttemptOut {
            warmup,
            out: out.clone(),
        });
        last_outputs = output_paths;
        if !ok {
            let status = if termination == Termination::Cancelled {
                StepStatus::Cancelled
            } else {
                StepStatus::Failed
            };
            let what = match &result {
                Ok(o) => describe(o),
                Err(e) => format!("could not start: {e}"),
            };
            return Ok((
                status,
                Some(format!("attempt {n} {what}")),
                outs,
                last_outputs,
            ));
        }
        if unhashed {
            return Ok((
                StepStatus::Cancelled,
                Some(format!(
                    "attempt {n}: the run was ended while its outputs were hashed"
                )),
                outs,
                last_outputs,
            ));
        }
        if !missing.is_empty() {
            return Ok((
                StepStatus::Failed,
                Some(format!(
                    "attempt {n} did not write its declared outputs as files or folders: {}",
                    missing.join(", ")
                )),
                outs,
                last_outputs,
            ));
        }
    }
    Ok((StepStatus::Succeeded, None, outs, last_outputs))
}

/// Read what the attempt left: in place when it is small, else on a blocking thread
/// that is given up (and told to stop) shortly after the run must end at once (run
/// timeout, second interrupt), so no step's files can hold the run.
async fn collect(files: AttemptFiles, cancel: watch::Receiver<Option<CancelReason>>) -> Collected {
    /// Left to a read that is under way when the run must end.
    const GIVE_UP_AFTER: Duration = Duration::from_millis(500);
    let stop = Stop::new();
    if files.small() {
        return files.collect(&stop);
    }
    let task = {
        let (files, stop) = (files.clone(), stop.clone());
        tokio::task::spawn_blocking(move || files.collect(&stop))
    };
    tokio::select! {
        done = task => done.unwrap_or_else(|_| files.given_up()),
        _ = async {
            hard_cancel(cancel).await;
            tokio::time::sleep(GIVE_UP_AFTER).await;
        } => {
            stop.stop();
            files.given_up()
        }
    }
}

/// Rewrite a small file of the record folder with its secret values masked.
fn mask_file(path: &Path, masker: &crate::mask::Masker) {
    let Ok(bytes) = crate::digest::read_regular(path, crate::digest::Follow::No, 1 << 20) else {
        return;
    };
    if masker.finds_in(&bytes) {
        let _ = crate::evidence::atomic::write_atomic(path, &masker.mask_bytes(&bytes));
    }
}

/// Resolves once the run must end at once: a run timeout or a second interrupt.
pub(crate) async fn hard_cancel(mut rx: watch::Receiver<Option<CancelReason>>) {
    loop {
        if matches!(
            *rx.borrow_and_update(),
            Some(CancelReason::Kill | CancelReason::RunTimeout)
        ) {
            return;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

fn cancel_text(r: CancelReason) -> &'static str {
    match r {
        CancelReason::FailFast => "another step failed",
        CancelReason::RunTimeout => "the run timed out",
        CancelReason::Interrupt => "interrupted",
        CancelReason::Kill => "killed",
    }
}

fn describe(o: &AttemptOutcome) -> String {
    use crate::isolate::Termination as T;
    match o.termination {
        T::Exited => format!("exited with code {}", o.exit_code.unwrap_or(-1)),
        T::Signaled => format!("was killed by signal {}", o.signal.unwrap_or(0)),
        T::OomKilled => "was killed by the OOM killer at its memory limit".into(),
        T::TimedOut => "timed out".into(),
        T::Cancelled => format!(
            "was cancelled ({})",
            o.cancel_reason.map(cancel_text).unwrap_or("cancel")
        ),
    }
}

fn ms(d: Duration) -> f64 {
    round_us(d.as_secs_f64() * 1000.0)
}

fn empty_file() -> FileRecord {
    FileRecord {
        path: String::new(),
        sha256: String::new(),
        bytes: 0,
        note: None,
    }
}

/// A cancel reason as the record spells it.
fn cancel_reason_str(r: CancelReason) -> String {
    serde_json::to_value(r)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

fn attempt_record(o: &AttemptOutcome) -> AttemptRecord {
    AttemptRecord {
        started_at: rfc3339(&o.started_at),
        ended_at: rfc3339(&o.ended_at),
        termination: o.termination.into(),
        cancel_reason: o.cancel_reason.map(cancel_reason_str),
        exit_code: o.exit_code,
        signal: o.signal,
        wall_ms: ms(o.wall),
        cpu_user_ms: o.cpu_user.map(ms),
        cpu_system_ms: o.cpu_system.map(ms),
        peak_memory_bytes: o.peak_memory_bytes,
        oom_kills: o.oom_kills,
        pids_limit_hit: o.pids_limit_hit,
        kill_ms: o.kill_duration.map(ms),
        enforcement: Some(o.enforcement.clone()),
        leftovers: o.leftovers.clone(),
        ..attempt_record_blank()
    }
}

fn not_started_record(at: chrono::DateTime<chrono::Utc>, error: String) -> AttemptRecord {
    let now = chrono::Utc::now();
    AttemptRecord {
        termination: Termination::NotStarted,
        started_at: rfc3339(&at),
        ended_at: rfc3339(&now),
        exit_code: None,
        wall_ms: 0.0,
        enforcement: None,
        error: Some(error),
        ..attempt_record_blank()
    }
}

fn attempt_record_blank() -> AttemptRecord {
    AttemptRecord {
        attempt: 0,
        warmup: false,
        argv: Vec::new(),
        cwd: String::new(),
        env: BTreeMap::new(),
        out: String::new(),
        cgroup: String::new(),
        canary: String::new(),
        started_at: String::new(),
        ended_at: String::new(),
        termination: Termination::NotStarted,
        cancel_reason: None,
        exit_code: None,
        signal: None,
        wall_ms: 0.0,
        cpu_user_ms: None,
        cpu_system_ms: None,
        peak_memory_bytes: None,
        memory_limit_bytes: None,
        oom_kills: None,
        pids_limit_hit: None,
        kill_ms: None,
        enforcement: None,
        stdout: empty_file(),
        stderr: empty_file(),
        metrics: None,
        metrics_error: None,
        outputs: Vec::new(),
        leftovers: Vec::new(),
        error: None,
    }
}
