//! The executor of one step: lease its devices, run its attempts one after another
//! (each in the phases of `attempt.rs`: prepare, run through the backend, hash,
//! record), or its checks for a compare step, and report every event to the
//! dispatcher. It ends with one [`StepEnd`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::attempt::{self, DeviceAccess};
use super::durable::wait_durable;
use crate::backend::CancelReason;
use crate::evidence::journal::Event;
use crate::evidence::record::StepStatus;
use crate::plan::{Check, Step, StepKind, Template};
use crate::sys::Stop;

pub(crate) use super::context::{AttemptOut, ExecCtx, StepEnd, StepMsg, Upstream, Vars};
pub use super::context::{CheckRunner, DeviceBroker, DeviceLease, LeaseError, ResolvedCheck};

/// Run one step to its end. Never panics; every problem becomes its `StepEnd`.
pub(crate) async fn execute(
    ctx: Arc<ExecCtx>,
    step: Step,
    upstream: Arc<Upstream>,
    tx: mpsc::UnboundedSender<StepMsg>,
    cancel: watch::Receiver<Option<CancelReason>>,
    barrier: u64,
) {
    let end = run_step(&ctx, &step, &upstream, &tx, cancel, barrier)
        .await
        .unwrap_or_else(StepEnd::failed);
    let _ = tx.send(StepMsg::Done { step: step.id, end });
}

/// `barrier`: the journal sequence number that must be durable before the step acts
/// (the end that let it start); see durable.rs.
async fn run_step(
    ctx: &Arc<ExecCtx>,
    step: &Step,
    upstream: &Arc<Upstream>,
    tx: &mpsc::UnboundedSender<StepMsg>,
    cancel: watch::Receiver<Option<CancelReason>>,
    barrier: u64,
) -> Result<StepEnd, String> {
    // A cached step whose entry is there runs nothing, and needs no device. Its
    // key is made of what the steps it reads wrote: not known while they are only
    // submitted (a detached run).
    let unknown = upstream.keys().any(|s| ctx.submitted.has(s));
    let planned = match unknown {
        true => None,
        false => super::reuse::plan(ctx, step, upstream)?,
    };
    // A step whose jobs a detached run submitted waits on them, whatever the cache
    // holds by now.
    let journaled = ctx
        .opts
        .detach
        .collected()
        .is_some_and(|c| c.has_jobs(&step.id.0));
    if let (Some(p), false) = (&planned, journaled) {
        if let Some(end) = super::reuse::try_reuse(ctx, step, p, tx).await {
            return Ok(end);
        }
    }
    // A remote job's devices are its allocation there, not a lease on this host.
    let lease = if attempt::remote(ctx, step) {
        None
    } else {
        lease_devices(ctx, step, tx, &cancel).await?
    };
    let devices = match &lease {
        Some(l) => DeviceAccess {
            env: l.env.clone(),
            nodes: Some(l.dev_nodes.clone()),
            gpus: l.gpus.clone(),
            npus: l.npus.clone(),
        },
        None => DeviceAccess::default(),
    };
    let result = if step.kind == StepKind::Compare {
        match wait_durable(ctx.durable.clone(), barrier).await {
            Ok(()) => run_checks(ctx, step, upstream, tx, &cancel).await,
            Err(e) => Err(e),
        }
    } else {
        run_attempts(ctx, step, upstream, tx, cancel, &devices, barrier).await
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
    match (planned, &result) {
        (Some(p), Ok(end)) if !end.detached => super::reuse::after_run(ctx, step, p, end, tx).await,
        _ => {}
    }
    result
}

/// Lease every device the step names (all or none), on a blocking thread; a cancel
/// while waiting stops the wait (the task returns within a poll interval, releasing
/// anything it took).
async fn lease_devices(
    ctx: &Arc<ExecCtx>,
    step: &Step,
    tx: &mpsc::UnboundedSender<StepMsg>,
    cancel: &watch::Receiver<Option<CancelReason>>,
) -> Result<Option<DeviceLease>, String> {
    if step.devices.is_empty() {
        return Ok(None);
    }
    let Some(broker) = ctx.devices.clone() else {
        return Err(format!(
            "step `{}` names devices but this run has no device broker",
            step.id
        ));
    };
    let run_id = ctx.opts.run_id.clone();
    let s = step.clone();
    let stop = Stop::new();
    let stop_waiting = stop.clone();
    let mut task = tokio::task::spawn_blocking(move || broker.acquire(&run_id, &s, &stop));
    let mut cancel = cancel.clone();
    let got = tokio::select! {
        got = &mut task => got,
        _ = crate::contract::cancelled(&mut cancel) => {
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
    Ok(Some(lease))
}

/// The longest pause before a retry.
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(5);

/// The step's attempts one after another (warm-ups, then repeats); the first that
/// fails, or is cancelled, ends the step.
async fn run_attempts(
    ctx: &Arc<ExecCtx>,
    step: &Step,
    upstream: &Arc<Upstream>,
    tx: &mpsc::UnboundedSender<StepMsg>,
    cancel: watch::Receiver<Option<CancelReason>>,
    devices: &DeviceAccess,
    barrier: u64,
) -> Result<StepEnd, String> {
    let mut a = Attempts::new();
    for slot in 1..=step.attempts() {
        if a.slot(ctx, step, upstream, tx, &cancel, devices, barrier, slot)
            .await?
        {
            break;
        }
    }
    Ok(a.done)
}

/// One step's attempts so far.
struct Attempts {
    /// Every try has its own number (folders, canary); retries take the next ones.
    n: u32,
    done: StepEnd,
    ended: bool,
    /// A detached run's job for the attempt before: the next one follows it.
    last_job: Option<String>,
}

impl Attempts {
    fn new() -> Attempts {
        Attempts {
            n: 0,
            done: StepEnd {
                status: StepStatus::Succeeded,
                ..StepEnd::default()
            },
            ended: false,
            last_job: None,
        }
    }
}

/// Run attempt `p`; collecting a detached run, wait on the job it submitted for
/// it instead; detaching, submit it after the jobs it follows and return.
async fn go(
    ctx: &ExecCtx,
    step: &Step,
    p: &mut attempt::Prepared,
    (upstream, last_job): (&Upstream, &Option<String>),
    tx: &mpsc::UnboundedSender<StepMsg>,
    cancel: &watch::Receiver<Option<CancelReason>>,
    barrier: u64,
) -> attempt::Ran {
    let found = ctx
        .opts
        .detach
        .collected()
        .and_then(|c| c.take(&step.id.0, p.n));
    // A detached run's attempt starts on the record when it is collected: one its
    // step never reaches (an upstream failed) never started.
    if ctx.opts.detach.submits_only() {
        p.job.detach = true;
        p.job.after = ctx.submitted.of(upstream.keys());
        p.job.after.extend(last_job.clone());
    } else {
        let _ = tx.send(StepMsg::Event(p.started_event(step, &ctx.opts.record_dir)));
    }
    match found {
        Some(f) => attempt::reattach(ctx, p, f).await,
        None => attempt::run(ctx, p, cancel.clone(), barrier, tx).await,
    }
}

/// An attempt a detached run submitted: where it will write is what later steps
/// read, and the step's next attempt follows its job.
fn submitted(
    (done, last): (&mut StepEnd, &mut Option<String>),
    ctx: &ExecCtx,
    step: &Step,
    p: &attempt::Prepared,
    job: &str,
) {
    ctx.submitted.add(&step.id, job.to_string());
    *last = Some(job.to_string());
    done.detached = true;
    done.outputs = p.outputs.clone();
    done.outs.push(AttemptOut {
        warmup: p.warmup,
        out: p.out.clone(),
        failed: false,
        digests: Vec::new(),
    });
}

impl Attempts {
    /// Run warm-up or repeat `slot` (with its retries). Returns whether the step has
    /// ended (a failure or a cancel); `done` then says how.
    #[allow(clippy::too_many_arguments)]
    async fn slot(
        &mut self,
        ctx: &Arc<ExecCtx>,
        step: &Step,
        upstream: &Arc<Upstream>,
        tx: &mpsc::UnboundedSender<StepMsg>,
        cancel: &watch::Receiver<Option<CancelReason>>,
        devices: &DeviceAccess,
        barrier: u64,
        slot: u32,
    ) -> Result<bool, String> {
        let total = step.attempts();
        let done = &mut self.done;
        let mut retry = 0;
        loop {
            self.n += 1;
            let n = self.n;
            let seat = take_seat(ctx, step, cancel).await;
            if let Some(reason) = *cancel.borrow() {
                done.status = StepStatus::Cancelled;
                done.reason = Some(format!(
                    "cancelled before attempt {n}: {}",
                    attempt::cancel_text(reason)
                ));
                self.ended = true;
                return Ok(true);
            }
            let mut p = attempt::prepare(ctx, step, upstream, devices, n, slot)?;
            p.retry = retry;
            let live = (n, total + retry, p.warmup);
            let _ = tx.send(StepMsg::progress(step, live));
            let ran = go(
                ctx,
                step,
                &mut p,
                (upstream, &self.last_job),
                tx,
                cancel,
                barrier,
            )
            .await;
            if let Err(crate::backend::AttemptError::Detached(job)) = &ran.result {
                submitted((done, &mut self.last_job), ctx, step, &p, job);
                return Ok(false);
            }
            let collected = attempt::hash(ctx, &p, cancel.clone()).await;
            // A results file that was not read must not read as "0 tests".
            for why in attempt::unread_results(&collected) {
                let line = format!("{}/{n}: {why}", step.id);
                let _ = tx.send(StepMsg::Note(line.clone()));
                let _ = tx.send(StepMsg::Event(Event::Warning { message: line }));
            }
            let alone = match &seat {
                Some(s) => Some(s.alone()),
                // A remote job: alone on its node when it asked for it.
                None => step.runs_alone().then_some(true),
            };
            drop(seat);
            let (warmup, out) = (p.warmup, p.out.clone());
            done.outputs = p.outputs.clone();
            let (mut rec, verdict) = attempt::record(ctx, p, &ran, collected);
            rec.alone = alone;
            let again = verdict.is_some()
                && retry < step.retries
                && attempt::retryable(&step.retry_on, &rec)
                && cancel.borrow().is_none();
            done.outs.push(AttemptOut {
                warmup,
                out,
                failed: verdict.is_some(),
                digests: step
                    .outputs
                    .iter()
                    .zip(&rec.outputs)
                    .map(|(t, o)| {
                        (
                            super::reuse::written(t, &ctx.opts.revisions),
                            o.sha256.clone(),
                        )
                    })
                    .collect(),
            });
            let _ = tx.send(StepMsg::Event(Event::AttemptEnded {
                step: step.id.0.clone(),
                attempt: Box::new(rec),
            }));
            match verdict {
                None => return Ok(false),
                Some(_) if again => {
                    retry += 1;
                    // A busy device or a flaky service: give it a moment, more each
                    // time (0.1 s, 0.2 s, ... at most 5 s).
                    let pause =
                        Duration::from_millis(100 << (retry - 1).min(6)).min(RETRY_PAUSE_MAX);
                    let mut stop = cancel.clone();
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        // A cancel ends the pause; the loop's check then ends the step.
                        _ = stop.changed() => {}
                    }
                }
                Some(end) => {
                    done.status = end.status;
                    done.reason = match (end.reason, retry) {
                        (Some(r), 0) => Some(r),
                        (Some(r), k) => Some(format!(
                            "{r} (after {k} {})",
                            if k == 1 { "retry" } else { "retries" }
                        )),
                        (None, _) => None,
                    };
                    self.ended = true;
                    return Ok(true);
                }
            }
        }
    }
}

/// A seat on this host for one attempt of `step` (the exclusive one when the step
/// runs alone), or `None` for an attempt that runs elsewhere (a remote backend). A cancel ends
/// the wait; the caller's cancel check then ends the step.
async fn take_seat(
    ctx: &ExecCtx,
    step: &Step,
    cancel: &watch::Receiver<Option<CancelReason>>,
) -> Option<super::alone::Seat> {
    if attempt::remote(ctx, step) {
        return None;
    }
    let mut stop = cancel.clone();
    tokio::select! {
        seat = ctx.seats.take(step.runs_alone()) => Some(seat),
        _ = crate::contract::cancelled(&mut stop) => None,
    }
}

/// Run the cells of one step on several revisions as one unit (`Dag` groups them):
/// one device lease, and their attempts interleaved, baseline then the others, slot
/// by slot (ABAB), so drift on the device or host hits every revision alike. Each
/// cell ends with its own `StepEnd`; one that fails stops only itself.
pub(crate) async fn execute_group(
    ctx: Arc<ExecCtx>,
    steps: Vec<(Step, Arc<Upstream>)>,
    tx: mpsc::UnboundedSender<StepMsg>,
    cancel: watch::Receiver<Option<CancelReason>>,
    barrier: u64,
) {
    let Some((leader, _)) = steps.first().cloned() else {
        return;
    };
    let ends: Vec<StepEnd> = match lease_devices(&ctx, &leader, &tx, &cancel).await {
        Err(e) => steps.iter().map(|_| StepEnd::failed(e.clone())).collect(),
        Ok(lease) => {
            let devices = match &lease {
                Some(l) => DeviceAccess {
                    env: l.env.clone(),
                    nodes: Some(l.dev_nodes.clone()),
                    gpus: l.gpus.clone(),
                    npus: l.npus.clone(),
                },
                None => DeviceAccess::default(),
            };
            let mut all: Vec<Attempts> = steps.iter().map(|_| Attempts::new()).collect();
            let slots = steps.iter().map(|(s, _)| s.attempts()).max().unwrap_or(0);
            let mut failure: Vec<Option<String>> = vec![None; steps.len()];
            for slot in 1..=slots {
                for (k, (step, ups)) in steps.iter().enumerate() {
                    if all[k].ended || failure[k].is_some() || slot > step.attempts() {
                        continue;
                    }
                    if let Err(e) = all[k]
                        .slot(&ctx, step, ups, &tx, &cancel, &devices, barrier, slot)
                        .await
                    {
                        failure[k] = Some(e);
                    }
                }
            }
            if let Some(lease) = lease {
                let released = tokio::task::spawn_blocking(lease.release)
                    .await
                    .unwrap_or_default();
                let _ = tx.send(StepMsg::Event(Event::DevicesReleased {
                    step: leader.id.0.clone(),
                    allocations: released,
                }));
            }
            all.into_iter()
                .zip(failure)
                .map(|(a, f)| match f {
                    Some(e) => StepEnd::failed(e),
                    None => a.done,
                })
                .collect()
        }
    };
    // The others first: the leader's end frees the group's job slot and devices.
    let mut order: Vec<(Step, StepEnd)> = steps.into_iter().map(|(s, _)| s).zip(ends).collect();
    order.rotate_left(1);
    for (step, end) in order {
        let _ = tx.send(StepMsg::Done { step: step.id, end });
    }
}

async fn run_checks(
    ctx: &Arc<ExecCtx>,
    step: &Step,
    upstream: &Arc<Upstream>,
    tx: &mpsc::UnboundedSender<StepMsg>,
    cancel: &watch::Receiver<Option<CancelReason>>,
) -> Result<StepEnd, String> {
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
        revisions: &ctx.opts.revisions,
    };
    let mut failed = Vec::new();
    for check in &step.checks {
        let inputs = resolve_check(check, &vars, upstream, &ctx.plan.dir)?;
        let runner = Arc::clone(&runner);
        // A check reads and compares on this host's CPUs: never beside a step that
        // runs alone.
        let mut stop = cancel.clone();
        let _seat = tokio::select! {
            seat = ctx.seats.take(false) => seat,
            _ = crate::contract::cancelled(&mut stop) => {
                return Ok(StepEnd {
                    status: StepStatus::Cancelled,
                    reason: Some(format!("check `{}` not run: the run was ended", check.name)),
                    ..StepEnd::default()
                });
            }
        };
        let (sid, c) = (step.id.0.clone(), check.clone());
        let task = tokio::task::spawn_blocking(move || runner.run(&sid, &c, &inputs));
        // A check reads what upstream steps wrote, which may be huge: the run's end
        // does not wait for it.
        let rec = tokio::select! {
            rec = task => rec.map_err(|e| format!("check task failed: {e}"))?,
            _ = attempt::hard_cancel(cancel.clone()) => {
                return Ok(StepEnd {
                    status: StepStatus::Cancelled,
                    reason: Some(format!("check `{}` given up: the run was ended", check.name)),
                    ..StepEnd::default()
                });
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
    Ok(if failed.is_empty() {
        StepEnd {
            status: StepStatus::Succeeded,
            ..StepEnd::default()
        }
    } else {
        StepEnd::failed(format!("failed checks: {}", failed.join(", ")))
    })
}

fn resolve_check(
    check: &Check,
    vars: &Vars<'_>,
    upstream: &Upstream,
    plan_dir: &Path,
) -> Result<ResolvedCheck, String> {
    let render = |t: &Option<Template>| -> Result<Option<String>, String> {
        t.as_ref()
            .map(|t| t.render(vars).map(|s| attempt::absolutize(plan_dir, &s)))
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
            .filter(|a| !a.warmup && !a.failed)
            .map(|a| a.out.join(file).display().to_string())
            .collect();
    }
    Ok(r)
}
