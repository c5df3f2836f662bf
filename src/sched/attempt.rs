//! One attempt of a step, in four phases: **prepare** (folders, argv, cwd, the
//! environment, the spec), **run** (through the backend, after the start gate),
//! **hash** (what it left: `collect.rs`), **record** (the attempt's record and what
//! it means for the step).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::watch;

use super::collect::{AttemptFiles, Collected};
use super::context::{ExecCtx, StepEnd, Upstream, Vars};
use super::durable::wait_durable;
use super::prefetch::{attempt_dirs, STDERR_LOG, STDOUT_LOG};
use crate::backend::{AttemptError, AttemptOutcome, AttemptSpec, CancelReason};
use crate::evidence::journal::{redact_env, Event};
use crate::evidence::record::{
    rfc3339, round_us, AttemptRecord, OutputKind, StepStatus, Termination,
};
use crate::plan::{Step, StepCommand, Template};
use crate::sys::Stop;

/// An attempt ready to run.
pub(crate) struct Prepared {
    pub n: u32,
    /// 0 for the first try of its warm-up or repeat, k for its k-th retry.
    pub retry: u32,
    pub warmup: bool,
    pub spec: AttemptSpec,
    /// `${out}` of this attempt.
    pub out: PathBuf,
    /// Its log folder in the record.
    pub logs: PathBuf,
    pub metrics: PathBuf,
    /// Declared outputs, rendered and absolute.
    pub outputs: Vec<String>,
    /// Declared results files: as rendered, and absolute.
    pub junit: Option<(String, PathBuf)>,
    pub sarif: Option<(String, PathBuf)>,
    /// Who it is, for the backend (and where it goes).
    pub job: crate::backend::AttemptJob,
}

/// Whether `step`'s attempts run away from this host (on a batch scheduler): then
/// its devices are the backend's to give, not a lease here.
pub(crate) fn remote(ctx: &ExecCtx, step: &Step) -> bool {
    ctx.backend.place(&ask_of(&ctx.plan, step)).is_some()
}

/// What `step` asks of the backend that runs it, from the plan: the backend
/// never reads the plan itself. A compare step runs in the orchestrator.
pub(crate) fn ask_of<'a>(
    plan: &'a crate::plan::Plan,
    step: &'a Step,
) -> crate::backend::StepAsk<'a> {
    let here = step.kind == crate::plan::StepKind::Compare;
    crate::backend::StepAsk {
        backend: if here {
            Some(crate::plan::model::BackendKind::Local)
        } else {
            step.backend
        },
        default_backend: plan.backend.kind,
        devices: step
            .devices
            .iter()
            .filter_map(|d| plan.devices.get(d))
            .map(|r| (r.kind.clone(), r.count))
            .collect(),
        exclusive: step.runs_alone(),
        settings: &plan.backend,
        job: &step.slurm,
    }
}

/// What a step's devices tell its attempts.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeviceAccess {
    pub env: Vec<(String, String)>,
    /// `None`: no device restriction.
    pub nodes: Option<Vec<PathBuf>>,
    /// The GPUs to watch while attempts run.
    pub gpus: Vec<crate::contract::GpuWatch>,
    /// The NPU cards to read while attempts run.
    pub npus: Vec<crate::contract::NpuWatch>,
}

/// Prepare: make the attempt's folders and render everything it runs with.
pub(crate) fn prepare(
    ctx: &ExecCtx,
    step: &Step,
    upstream: &Upstream,
    devices: &DeviceAccess,
    n: u32,
    slot: u32,
) -> Result<Prepared, String> {
    let plan = &ctx.plan;
    let opts = &ctx.opts;
    // `n` numbers every try (folders, canaries); `slot` is the warm-up or repeat it
    // is a try of.
    let warmup = slot <= step.warmup;
    let (out, logs) = attempt_dirs(&opts.work_dir, &opts.record_dir, &step.id.0, n);
    for d in [&out, &logs] {
        crate::sys::retry(|| std::fs::create_dir_all(d))
            .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    let vars = Vars {
        run_id: &opts.run_id,
        work: opts.work_dir.display().to_string(),
        out: Some(out.display().to_string()),
        repeat: Some(if warmup { 0 } else { slot - step.warmup }),
        upstream,
        revisions: &ctx.opts.revisions,
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
    let metrics = logs.join("metrics.json");
    let mut env = super::env::with_named(&ctx.base_env, &step.cache_env);
    let mut set = |k: &str, v: String| {
        env.retain(|(a, _)| a != k);
        env.push((k.to_string(), v));
    };
    set("ORCHESTRATE_RUN_ID", opts.run_id.clone());
    set("ORCHESTRATE_STEP", step.id.0.clone());
    set("ORCHESTRATE_OUT", out.display().to_string());
    set("ORCHESTRATE_WORK", opts.work_dir.display().to_string());
    set("ORCHESTRATE_METRICS", metrics.display().to_string());
    for (k, v) in &devices.env {
        set(k, v.clone());
    }
    for (k, t) in &step.env {
        set(k, render(t)?);
    }
    env.sort();
    let outputs: Vec<String> = step
        .outputs
        .iter()
        .map(|t| render(t).map(|s| absolutize(&cwd, &s)))
        .collect::<Result<_, _>>()?;
    let result_file = |t: &Option<Template>| -> Result<Option<(String, PathBuf)>, String> {
        t.as_ref()
            .map(|t| {
                render(t).map(|s| {
                    let abs = PathBuf::from(absolutize(&cwd, &s));
                    (s, abs)
                })
            })
            .transpose()
    };
    let junit = result_file(&step.results.junit)?;
    let sarif = result_file(&step.results.sarif)?;
    let spec = AttemptSpec {
        name: format!("orchestrate-{}-{}-{n}", opts.run_id, step.id),
        canary: format!("{}/{}/{n}", opts.run_id, step.id),
        argv,
        cwd,
        env,
        memory: plan.memory_of(step).map(|b| b.0),
        swap: plan.limits.swap,
        pids: step.pids.or(plan.limits.pids),
        cpus: plan.limits.cpus.clone(),
        device_nodes: devices.nodes.clone(),
        gpus: devices.gpus.clone(),
        npus: devices.npus.clone(),
        timeout: plan.timeout_of(step),
        grace: opts.grace,
        stdout: logs.join(STDOUT_LOG),
        stderr: logs.join(STDERR_LOG),
        tee: opts.tee,
        mask: (!opts.masker.is_empty()).then(|| opts.masker.clone()),
    };
    let job = crate::backend::AttemptJob {
        run_id: opts.run_id.clone(),
        step: step.id.0.clone(),
        attempt: n,
        logs: logs.clone(),
        record_dir: opts.record_dir.clone(),
        private: out.with_file_name(format!("{n}.job.json")),
        placement: ctx.backend.place(&ask_of(&ctx.plan, step)),
        on_submit: None,
        on_note: None,
        after: Vec::new(),
        detach: false,
    };
    Ok(Prepared {
        n,
        retry: 0,
        warmup,
        job,
        spec,
        out,
        logs,
        metrics,
        outputs,
        junit,
        sarif,
    })
}

impl Prepared {
    /// The journal's start event.
    pub(crate) fn started_event(&self, step: &Step, record_dir: &Path) -> Event {
        Event::AttemptStarted {
            step: step.id.0.clone(),
            attempt: self.n,
            warmup: self.warmup,
            cgroup: self.spec.name.clone(),
            canary: self.spec.canary.clone(),
            argv: self.spec.argv.clone(),
            cwd: self.spec.cwd.display().to_string(),
            out: self.out.display().to_string(),
            logs: self
                .logs
                .strip_prefix(record_dir)
                .ok()
                .map(|p| p.display().to_string()),
        }
    }
}

/// How one attempt ran, before it is recorded.
pub(crate) struct Ran {
    pub result: Result<AttemptOutcome, AttemptError>,
    /// When it was asked to run (the record's start when it never started).
    pub asked_at: chrono::DateTime<chrono::Utc>,
}

/// Run: through the backend, once the end that let the step start is durable (its
/// first attempt only: later ones follow the step's own earlier ones).
pub(crate) async fn run(
    ctx: &ExecCtx,
    p: &Prepared,
    cancel: watch::Receiver<Option<CancelReason>>,
    barrier: u64,
    tx: &tokio::sync::mpsc::UnboundedSender<super::context::StepMsg>,
) -> Ran {
    let asked_at = chrono::Utc::now();
    let gate = Box::pin(wait_durable(
        ctx.durable.clone(),
        if p.n == 1 { barrier } else { 0 },
    ));
    let mut job = p.job.clone();
    if let Some(placement) = job.placement.clone() {
        let (tx, step, attempt) = (tx.clone(), job.step.clone(), job.attempt);
        let (tx2, step2) = (tx.clone(), step.clone());
        let path = |p: &Path| p.display().to_string();
        let pair = |r: &Option<(String, PathBuf)>| r.as_ref().map(|(w, a)| (w.clone(), path(a)));
        let info = crate::evidence::journal::ResumeInfo {
            stdout: path(&p.spec.stdout),
            stderr: path(&p.spec.stderr),
            metrics: path(&p.metrics),
            outputs: p.outputs.clone(),
            junit: pair(&p.junit),
            sarif: pair(&p.sarif),
            env: redact_env(&p.spec.env, &ctx.opts.secret_env),
            memory: p.spec.memory,
            retry: p.retry,
            gres: None,
            script: String::new(),
            private: path(&p.job.private),
            array: None,
        };
        job.on_submit = Some(std::sync::Arc::new(move |s: &crate::backend::Submitted| {
            let mut info = info.clone();
            info.gres = s.gres.clone();
            info.script = s.script.clone();
            info.array = s.array.clone();
            let _ = tx.send(super::context::StepMsg::Event(Event::JobSubmitted {
                step: step.clone(),
                attempt,
                backend: placement.kind.as_str().into(),
                job_id: s.job_id.clone(),
                resume: Some(Box::new(info)),
            }));
        }));
        job.on_note = Some(std::sync::Arc::new(move |note: &str| {
            let line = format!("{step2}/{attempt}: {note}");
            let _ = tx2.send(super::context::StepMsg::Note(line.clone()));
            let _ = tx2.send(super::context::StepMsg::Event(Event::Warning {
                message: line,
            }));
        }));
    }
    let result = ctx.backend.run(p.spec.clone(), job, cancel, gate).await;
    Ran { result, asked_at }
}

/// Wait on the job a detached run submitted for this attempt, as `run` waits on
/// the job it submits.
pub(crate) async fn reattach(ctx: &ExecCtx, p: &Prepared, found: crate::backend::Reattach) -> Ran {
    let asked_at = found.submitted;
    let outcome = ctx
        .backend
        .reattach(p.spec.clone(), p.job.clone(), found)
        .await;
    Ran {
        result: Ok(outcome),
        asked_at,
    }
}

/// Where a step's results files may be: the run's work folder (its `${out}`, the
/// revisions' checkouts) and, for a cell on a revision run in the working tree,
/// that tree.
fn results_roots(ctx: &ExecCtx, step: &str) -> Vec<PathBuf> {
    let mut roots = vec![ctx.opts.work_dir.clone()];
    let cell = ctx
        .plan
        .steps
        .iter()
        .find(|s| s.id.0 == step)
        .and_then(|s| s.cell.as_ref());
    if let Some((_, cell)) = cell {
        for (axis, value) in cell {
            if axis != "revision" {
                continue;
            }
            if let Some(r) = ctx.plan.revisions.iter().find(|r| &r.name == value) {
                if r.worktree.is_some() {
                    roots.push(r.repo.clone());
                }
            }
        }
    }
    roots
}

/// Hash: read what the attempt left (logs, outputs, metrics) and mask the step's
/// metrics file in place when it holds a secret.
pub(crate) async fn hash(
    ctx: &ExecCtx,
    p: &Prepared,
    cancel: watch::Receiver<Option<CancelReason>>,
) -> Collected {
    let files = AttemptFiles {
        record_dir: ctx.opts.record_dir.clone(),
        stdout: p.spec.stdout.clone(),
        stderr: p.spec.stderr.clone(),
        metrics: p.metrics.clone(),
        outputs: p.outputs.clone(),
        junit: p.junit.clone(),
        sarif: p.sarif.clone(),
        roots: results_roots(ctx, &p.job.step),
        cwd: p.spec.cwd.clone(),
    };
    let collected = collect(files, cancel).await;
    let masker = &ctx.opts.masker;
    if collected.metrics.as_ref().is_ok_and(Option::is_some) && !masker.is_empty() {
        mask_file(&p.metrics, masker);
    }
    collected
}

/// What the attempt's declared results files could not give, one sentence each
/// (a file outside the folders results are read from, missing, unparsable).
pub(crate) fn unread_results(c: &Collected) -> Vec<String> {
    let Some(r) = &c.results else {
        return Vec::new();
    };
    let junit = r.junit.as_ref().map(|j| ("JUnit", &j.file, &j.error));
    let sarif = r.sarif.as_ref().map(|s| ("SARIF", &s.file, &s.error));
    junit
        .into_iter()
        .chain(sarif)
        .filter_map(|(kind, file, error)| {
            let e = error.as_deref()?;
            Some(format!(
                "{kind} results file `{}` not read, so no result of it is counted: {}",
                crate::term::safe(file),
                crate::term::safe(e)
            ))
        })
        .collect()
}

/// Record: the attempt's record, and how the step ends if this attempt ends it.
pub(crate) fn record(
    ctx: &ExecCtx,
    p: Prepared,
    ran: &Ran,
    c: Collected,
) -> (AttemptRecord, Option<StepEnd>) {
    let made = Made {
        n: p.n,
        retry: p.retry,
        warmup: p.warmup,
        env: redact_env(&p.spec.env, &ctx.opts.secret_env),
        argv: p.spec.argv,
        cwd: p.spec.cwd.display().to_string(),
        out: p.out.display().to_string(),
        cgroup: p.spec.name,
        canary: p.spec.canary,
        memory: p.spec.memory,
        strict_gpus: ctx.plan.limits.isolation == crate::plan::IsolationMode::Cgroup,
    };
    record_made(made, ran, c)
}

/// How an attempt was made, as its record states it.
pub(crate) struct Made {
    pub n: u32,
    pub retry: u32,
    pub warmup: bool,
    /// Secrets already redacted.
    pub env: BTreeMap<String, String>,
    pub argv: Vec<String>,
    pub cwd: String,
    pub out: String,
    pub cgroup: String,
    pub canary: String,
    pub memory: Option<u64>,
    /// A process on a GPU the attempt does not own fails it (`isolation =
    /// "cgroup"`); otherwise the record warns of it.
    pub strict_gpus: bool,
}

/// The attempt's record from how it was made, ran and what it left; and how the
/// step ends if this attempt ends it.
pub(crate) fn record_made(p: Made, ran: &Ran, c: Collected) -> (AttemptRecord, Option<StepEnd>) {
    let mut rec = match &ran.result {
        Ok(o) => attempt_record(o),
        Err(e @ AttemptError::CancelledBeforeStart(reason)) => AttemptRecord {
            termination: Termination::Cancelled,
            cancel_reason: Some(cancel_reason_str(*reason)),
            ..not_started_record(ran.asked_at, e.to_string())
        },
        Err(e) => not_started_record(ran.asked_at, e.to_string()),
    };
    let n = p.n;
    rec.attempt = n;
    rec.retry = p.retry;
    rec.warmup = p.warmup;
    rec.env = p.env;
    rec.argv = p.argv;
    rec.cwd = p.cwd;
    rec.out = p.out;
    rec.cgroup = p.cgroup;
    rec.canary = p.canary;
    rec.memory_limit_bytes = p.memory;
    rec.stdout = c.stdout;
    rec.stderr = c.stderr;
    if let Ok(o) = &ran.result {
        for log in [&mut rec.stdout, &mut rec.stderr] {
            if o.unopened_logs.iter().any(|u| u.ends_with(&log.path)) {
                log.sha256.clear();
                log.bytes = 0;
                log.note = Some(
                    "not hashed: the run was left before the job had opened it (anything written later is in its .after-kill file)".into(),
                );
            }
        }
    }
    match c.metrics {
        Ok(m) => rec.metrics = m,
        Err(e) => rec.metrics_error = Some(e),
    }
    rec.outputs = c.outputs;
    rec.results = c.results;
    let end = |status, reason: String| {
        Some(StepEnd {
            status,
            reason: Some(reason),
            ..StepEnd::default()
        })
    };
    let verdict = if !rec.succeeded() {
        let status = if rec.termination == Termination::Cancelled {
            StepStatus::Cancelled
        } else {
            StepStatus::Failed
        };
        let what = match &ran.result {
            Ok(o) => describe(o),
            Err(e) => format!("could not start: {e}"),
        };
        end(status, format!("attempt {n} {what}"))
    } else if p.strict_gpus && !rec.gpu_misuse.is_empty() {
        let seen: Vec<String> = rec
            .gpu_misuse
            .iter()
            .map(|m| format!("pid {} on {}", m.pid, m.uuid))
            .collect();
        end(
            StepStatus::Failed,
            format!(
                "attempt {n} used a GPU it did not own under isolation = \"cgroup\": {}",
                seen.join(", ")
            ),
        )
    } else if rec.outputs.iter().any(|o| o.kind == OutputKind::Unhashed) {
        end(
            StepStatus::Cancelled,
            format!("attempt {n}: the run was ended while its outputs were hashed"),
        )
    } else {
        let missing: Vec<String> = rec
            .outputs
            .iter()
            .filter(|o| matches!(o.kind, OutputKind::Absent | OutputKind::Refused))
            .map(|o| match &o.note {
                Some(note) => format!("{} ({note})", o.path),
                None => o.path.clone(),
            })
            .collect();
        if missing.is_empty() {
            None
        } else {
            end(
                StepStatus::Failed,
                format!(
                    "attempt {n} did not write its declared outputs as files or folders: {}",
                    missing.join(", ")
                ),
            )
        }
    };
    (rec, verdict)
}

pub(crate) fn absolutize(base: &Path, p: &str) -> String {
    let path = Path::new(p);
    if path.is_absolute() {
        p.to_string()
    } else {
        base.join(path).display().to_string()
    }
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

/// Rewrite a small file of the record folder with its secret values masked.
fn mask_file(path: &Path, masker: &crate::mask::Masker) {
    let Ok(bytes) = crate::digest::read_regular(path, crate::digest::Follow::No, 1 << 20) else {
        return;
    };
    if masker.finds_in(&bytes) {
        let _ = crate::evidence::atomic::write_atomic(path, &masker.mask_bytes(&bytes));
    }
}

pub(crate) fn cancel_text(r: CancelReason) -> &'static str {
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
        T::NotStarted => "never started".into(),
        T::OrchestratorLost => "was running when the orchestrator died".into(),
        T::NodeFailed => "lost its node (the scheduler says NODE_FAIL)".into(),
        T::Preempted => "was preempted by the scheduler".into(),
        T::Lost => match o
            .job
            .as_ref()
            .and_then(|j| j.notes.iter().find(|n| n.starts_with("its end record")))
        {
            Some(n) => format!("was lost: Slurm ended its job, and {n}"),
            None => "was lost: its job vanished from the scheduler".into(),
        },
        T::Forged => format!(
            "failed: {}",
            o.job
                .as_ref()
                .and_then(|j| j.evidence.clone())
                .unwrap_or_else(|| "its job's end record could not be believed".into())
        ),
    }
}

fn ms(d: Duration) -> f64 {
    round_us(d.as_secs_f64() * 1000.0)
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
        termination: o.termination,
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
        job: o.job.clone(),
        gpus: o.gpus.clone(),
        gpu_misuse: o.gpu_misuse.clone(),
        npus: o.npus.clone(),
        ..AttemptRecord::blank()
    }
}

fn not_started_record(at: chrono::DateTime<chrono::Utc>, error: String) -> AttemptRecord {
    AttemptRecord {
        termination: Termination::NotStarted,
        started_at: rfc3339(&at),
        ended_at: rfc3339(&chrono::Utc::now()),
        error: Some(error),
        ..AttemptRecord::blank()
    }
}

/// Whether a failed try (its record) is tried again under the step's `retry_on`:
/// any failure but a cancel by default.
pub(crate) fn retryable(retry_on: &[crate::plan::RetryOn], rec: &AttemptRecord) -> bool {
    use crate::plan::RetryOn;
    if rec.termination == Termination::Cancelled {
        return false;
    }
    if retry_on.is_empty() {
        return true;
    }
    retry_on.iter().any(|r| match r {
        RetryOn::Exit(c) => rec.termination == Termination::Exited && rec.exit_code == Some(*c),
        RetryOn::AnyExit => {
            rec.termination == Termination::Exited && rec.exit_code.is_some_and(|c| c != 0)
        }
        RetryOn::Signal => rec.termination == Termination::Signaled,
        RetryOn::Oom => rec.termination == Termination::OomKilled,
        RetryOn::Timeout => rec.termination == Termination::TimedOut,
        RetryOn::NotStarted => rec.termination == Termination::NotStarted,
        RetryOn::Outputs => rec.succeeded(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::RetryOn;

    fn ended(termination: Termination, exit_code: Option<i32>) -> AttemptRecord {
        AttemptRecord {
            termination,
            exit_code,
            ..AttemptRecord::blank()
        }
    }

    #[test]
    fn retry_on_narrows_what_is_tried_again() {
        let busy = ended(Termination::Exited, Some(75));
        let bug = ended(Termination::Exited, Some(1));
        let oom = ended(Termination::OomKilled, None);
        let slow = ended(Termination::TimedOut, None);
        let cancelled = ended(Termination::Cancelled, None);
        // By default every failure but a cancel.
        for r in [&busy, &bug, &oom, &slow] {
            assert!(retryable(&[], r), "{:?}", r.termination);
        }
        assert!(!retryable(&[], &cancelled));
        let only_busy = [RetryOn::Exit(75)];
        assert!(retryable(&only_busy, &busy));
        assert!(!retryable(&only_busy, &bug));
        assert!(!retryable(&only_busy, &oom));
        let any_exit = [RetryOn::AnyExit, RetryOn::Timeout];
        assert!(retryable(&any_exit, &bug) && retryable(&any_exit, &slow));
        assert!(!retryable(&any_exit, &oom));
        assert!(retryable(&[RetryOn::Oom], &oom));
        assert!(!retryable(&[RetryOn::Oom, RetryOn::AnyExit], &cancelled));
    }
}
