//! The executor of one step: lease its devices, run its attempts one after another
//! (each in the phases of `attempt.rs`: prepare, run through the backend, hash,
//! record), or its checks for a compare step, and report every event to the
//! dispatcher. It ends with one [`StepEnd`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::attempt::{self, DeviceAccess};
use super::durable::{wait_durable, Durable};
use crate::backend::{Backend, CancelReason};
use crate::evidence::journal::Event;
use crate::evidence::record::{Allocation, CheckRecord, StepStatus};
use crate::plan::{Check, Plan, Step, StepId, StepKind, Template, VarSource};
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
        end: StepEnd,
    },
}

/// How a step ended.
#[derive(Debug, Default)]
pub(crate) struct StepEnd {
    pub status: StepStatus,
    pub reason: Option<String>,
    /// Its attempts' output folders, for the steps that read them.
    pub outs: Vec<AttemptOut>,
    /// Declared outputs of its last attempt, rendered.
    pub outputs: Vec<String>,
}

impl StepEnd {
    fn failed(reason: String) -> StepEnd {
        StepEnd {
            status: StepStatus::Failed,
            reason: Some(reason),
            ..StepEnd::default()
        }
    }
}

/// Shared, read-only context of every executor.
pub(crate) struct ExecCtx {
    /// How far the journal is on disk (a step's first attempt waits for its barrier).
    pub durable: watch::Receiver<Durable>,
    pub plan: Arc<Plan>,
    pub opts: super::SchedOptions,
    pub backend: Arc<dyn Backend>,
    pub base_env: Vec<(String, String)>,
    pub devices: Option<Arc<dyn DeviceBroker>>,
    pub checks: Option<Arc<dyn CheckRunner>>,
}

pub(crate) struct Vars<'a> {
    pub run_id: &'a str,
    pub work: String,
    pub out: Option<String>,
    pub repeat: Option<u32>,
    pub upstream: &'a Upstream,
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
    let lease = lease_devices(ctx, step, tx, &cancel).await?;
    let devices = match &lease {
        Some(l) => DeviceAccess {
            env: l.env.clone(),
            nodes: Some(l.dev_nodes.clone()),
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
    Ok(Some(lease))
}

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
    let total = step.attempts();
    let mut done = StepEnd {
        status: StepStatus::Succeeded,
        ..StepEnd::default()
    };
    for n in 1..=total {
        if let Some(reason) = *cancel.borrow() {
            done.status = StepStatus::Cancelled;
            done.reason = Some(format!(
                "cancelled before attempt {n}: {}",
                attempt::cancel_text(reason)
            ));
            return Ok(done);
        }
        let p = attempt::prepare(ctx, step, upstream, devices, n)?;
        let _ = tx.send(StepMsg::Event(p.started_event(step, &ctx.opts.record_dir)));
        let _ = tx.send(StepMsg::Progress {
            step: step.id.clone(),
            attempt: n,
            of: total,
            warmup: p.warmup,
        });
        let ran = attempt::run(ctx, &p, cancel.clone(), barrier).await;
        let collected = attempt::hash(ctx, &p, cancel.clone()).await;
        done.outs.push(AttemptOut {
            warmup: p.warmup,
            out: p.out.clone(),
        });
        done.outputs = p.outputs.clone();
        let (rec, verdict) = attempt::record(ctx, p, &ran, collected);
        let _ = tx.send(StepMsg::Event(Event::AttemptEnded {
            step: step.id.0.clone(),
            attempt: Box::new(rec),
        }));
        if let Some(end) = verdict {
            done.status = end.status;
            done.reason = end.reason;
            return Ok(done);
        }
    }
    Ok(done)
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
            .filter(|a| !a.warmup)
            .map(|a| a.out.join(file).display().to_string())
            .collect();
    }
    Ok(r)
}
