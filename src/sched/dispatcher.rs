//! The dispatcher: owns step states, resources, cancellation, the journal and the
//! progress view; starts executors and reacts to what they report.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, watch};

use super::durable::{Durable, Syncer};
use super::executor::{execute, CheckRunner, DeviceBroker, ExecCtx, StepMsg, Upstream};
use super::prefetch::Prefetcher;
use super::progress::Progress;
use super::SchedOptions;
use crate::evidence::journal::{Event, Journal};
use crate::evidence::record::{RunStatus, StepStatus};
use crate::isolate::{CancelReason, Isolator};
use crate::plan::{Plan, StepKind};

/// Events that end no step are fdatasynced at the latest on the first tick (250 ms)
/// after this much time.
const SYNC_AT_LEAST_EVERY: Duration = Duration::from_millis(200);
/// Beyond the grace: the attempt kill bound (5 s), the log copy bound (2 s) and the
/// give-up time of a hashing thread, with room to spare.
const ABANDON_MARGIN: Duration = Duration::from_secs(15);

/// How the DAG ended.
#[derive(Debug, Clone)]
pub struct DagOutcome {
    pub status: RunStatus,
    pub reason: Option<String>,
    /// Final status of every step, in plan order.
    pub steps: Vec<(String, StepStatus, Option<String>)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Waiting,
    Running,
    Done(StepStatus),
}

/// Run every step of the plan. Returns an error only when the journal cannot be
/// written (then every running attempt has been ended first).
#[allow(clippy::too_many_arguments)]
pub async fn run_dag(
    plan: Arc<Plan>,
    opts: SchedOptions,
    isolator: Arc<Isolator>,
    base_env: Vec<(String, String)>,
    devices: Option<Arc<dyn DeviceBroker>>,
    checks: Option<Arc<dyn CheckRunner>>,
    journal: &mut Journal,
) -> io::Result<DagOutcome> {
    let n = plan.steps.len();
    let index: BTreeMap<String, usize> = plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.0.clone(), i))
        .collect();
    let needs: Vec<Vec<usize>> = plan
        .steps
        .iter()
        .map(|s| {
            s.needs
                .iter()
                .filter_map(|d| index.get(&d.0).copied())
                .collect()
        })
        .collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, ds) in needs.iter().enumerate() {
        for &d in ds {
            dependents[d].push(i);
        }
    }
    let mem_of = |i: usize| -> u64 { plan.memory_of(&plan.steps[i]).map_or(0, |b| b.0) };
    // What each step may read of finished steps: validation guarantees these are
    // upstream, so the executor gets exactly them (not the whole ancestry).
    let referenced: Vec<Vec<crate::plan::StepId>> =
        plan.steps.iter().map(referenced_steps).collect();
    let mut missing: Vec<usize> = needs.iter().map(Vec::len).collect();
    let mut state = vec![State::Waiting; n];
    let mut reasons: Vec<Option<String>> = vec![None; n];
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| missing[i] == 0).collect();
    let mut upstream: Upstream = BTreeMap::new();

    let syncer = Syncer::start(journal.sync_handle()?);
    let ctx = Arc::new(ExecCtx {
        durable: syncer.subscribe(),
        plan: Arc::clone(&plan),
        opts: opts.clone(),
        isolator,
        base_env,
        devices,
        checks,
    });
    let (tx, mut rx) = mpsc::unbounded_channel::<StepMsg>();
    let (cancel_tx, cancel_rx) = watch::channel::<Option<CancelReason>>(None);
    let mut progress = Progress::new(opts.progress, n);

    // Folders for the attempts that may come next are made while steps run.
    let prefetch = Prefetcher::start(&opts.work_dir, &opts.record_dir);
    let mut prefetched = vec![false; n];
    let mut started: BTreeSet<(String, u32)> = BTreeSet::new();
    let runs_attempts = |i: usize| plan.steps[i].kind != StepKind::Compare;

    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let deadline = opts.run_timeout.map(|t| Instant::now() + t);
    let far = Instant::now() + Duration::from_secs(10 * 365 * 24 * 3600);
    let timeout_sleep = tokio::time::sleep_until(deadline.unwrap_or(far).into());
    tokio::pin!(timeout_sleep);
    // Once the run must end at once, steps that still have not reported after this
    // long are abandoned (their executor waits on something that does not return).
    let abandon_after = opts.grace + ABANDON_MARGIN;
    let mut abandon_at: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);

    let mut running = 0usize;
    let mut mem_used = 0u64;
    let mut stopping: Option<String> = None;
    let mut interrupted = false;
    let mut timed_out = false;
    let mut interrupts = 0u32;
    let mut journal_error: Option<io::Error> = None;
    let mut last_sync = Instant::now();
    let mut durable_rx = syncer.subscribe();
    let mut durable_open = true;
    let mut requested = 0u64;

    let escalate = |tx: &watch::Sender<Option<CancelReason>>, r: CancelReason| {
        tx.send_if_modified(|cur| {
            if cur.is_none_or(|c| r > c) {
                *cur = Some(r);
                true
            } else {
                false
            }
        });
    };

    loop {
        if stopping.is_none() {
            let mut to_spawn = Vec::new();
            let candidates: Vec<usize> = ready.iter().copied().collect();
            for i in candidates {
                if running >= opts.jobs.max(1) as usize {
                    break;
                }
                let mem = mem_of(i);
                if running > 0 && mem_used.saturating_add(mem) > opts.memory_budget {
                    continue;
                }
                ready.remove(&i);
                state[i] = State::Running;
                running += 1;
                mem_used = mem_used.saturating_add(mem);
                let step = plan.steps[i].clone();
                let ups: Upstream = referenced[i]
                    .iter()
                    .filter_map(|id| upstream.get_key_value(id))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                progress.step_started(&step.id.0);
                // A step made ahead as a dependent has all its attempts made.
                if runs_attempts(i) && !prefetched[i] {
                    prefetched[i] = true;
                    prefetch.request(&step.id.0, 2, step.attempts());
                }
                for &d in &dependents[i] {
                    if !prefetched[d] && runs_attempts(d) {
                        prefetched[d] = true;
                        let next = &plan.steps[d];
                        prefetch.request(&next.id.0, 1, next.attempts());
                    }
                }
                if let Err(e) = journal.append_unsynced(Event::StepStarted {
                    step: step.id.0.clone(),
                }) {
                    journal_error.get_or_insert(e);
                }
                to_spawn.push((step, ups));
            }
            // No fdatasync here: an attempt starts before its own start event can be
            // durable anyway, so start events ride on a later sync (below), while a
            // step's end is durable before anything starts because of it.
            for (step, ups) in to_spawn {
                tokio::spawn(execute(
                    Arc::clone(&ctx),
                    step,
                    Arc::new(ups),
                    tx.clone(),
                    cancel_rx.clone(),
                    requested,
                ));
            }
        }
        if running == 0 {
            break;
        }
        let mut batch: Vec<StepMsg> = Vec::new();
        let abandon_sleep = tokio::time::sleep_until(abandon_at.unwrap_or(far).into());
        tokio::select! {
            _ = abandon_sleep, if abandon_at.is_some() => {
                let why = format!(
                    "abandoned: it did not end within {} of the run's end",
                    humantime(abandon_after)
                );
                progress.note(&why);
                for i in 0..n {
                    if state[i] != State::Running {
                        continue;
                    }
                    state[i] = State::Done(StepStatus::Cancelled);
                    reasons[i] = Some(why.clone());
                    let id = plan.steps[i].id.0.clone();
                    progress.step_ended(&id, StepStatus::Cancelled, Some(&why));
                    if let Err(e) = journal.append_unsynced(Event::StepEnded {
                        step: id,
                        status: StepStatus::Cancelled,
                        reason: Some(why.clone()),
                        outputs: Vec::new(),
                    }) {
                        journal_error.get_or_insert(e);
                    }
                }
                break;
            }
            msg = rx.recv() => match msg {
                Some(m) => batch.push(m),
                None => break,
            },
            _ = sigint.recv() => {
                interrupts += 1;
                interrupted = true;
                stopping.get_or_insert_with(|| "interrupted".to_string());
                let r = if interrupts > 1 { CancelReason::Kill } else { CancelReason::Interrupt };
                if interrupts > 1 {
                    abandon_at.get_or_insert_with(|| Instant::now() + ABANDON_MARGIN);
                }
                progress.note(if interrupts > 1 {
                    "second interrupt: killing every attempt now"
                } else {
                    "interrupt: ending running attempts (press Ctrl-C again to kill at once)"
                });
                escalate(&cancel_tx, r);
            }
            _ = sigterm.recv() => {
                interrupts += 1;
                interrupted = true;
                stopping.get_or_insert_with(|| "terminated (SIGTERM)".to_string());
                let r = if interrupts > 1 { CancelReason::Kill } else { CancelReason::Interrupt };
                if interrupts > 1 {
                    abandon_at.get_or_insert_with(|| Instant::now() + ABANDON_MARGIN);
                }
                escalate(&cancel_tx, r);
            }
            _ = &mut timeout_sleep, if deadline.is_some() && !timed_out => {
                timed_out = true;
                let t = opts.run_timeout.unwrap_or_default();
                stopping.get_or_insert_with(|| format!("the run timed out after {}", humantime(t)));
                progress.note("run timeout: ending running attempts");
                abandon_at.get_or_insert_with(|| Instant::now() + abandon_after);
                escalate(&cancel_tx, CancelReason::RunTimeout);
            }
            _ = tick.tick() => progress.redraw(),
            changed = durable_rx.changed(), if durable_open => {
                if changed.is_err() {
                    durable_open = false;
                } else if let Durable::Failed(e) = &*durable_rx.borrow_and_update() {
                    durable_open = false;
                    journal_error.get_or_insert(io::Error::other(e.clone()));
                }
            }
        }
        // Drain what else arrived; one fdatasync covers the batch when it ends a step.
        while let Ok(m) = rx.try_recv() {
            batch.push(m);
        }
        let ends_a_step = batch.iter().any(|m| matches!(m, StepMsg::Done { .. }));
        for msg in batch {
            match msg {
                StepMsg::Event(ev) => {
                    match &ev {
                        Event::AttemptEnded { step, attempt } => {
                            progress.attempt_ended(step, attempt);
                        }
                        Event::AttemptStarted { step, attempt, .. } => {
                            started.insert((step.clone(), *attempt));
                        }
                        _ => {}
                    }
                    if let Err(e) = journal.append_unsynced(ev) {
                        journal_error.get_or_insert(e);
                    }
                }
                StepMsg::Progress {
                    step,
                    attempt,
                    of,
                    warmup,
                } => {
                    progress.attempt_started(&step.0, attempt, of, warmup);
                }
                StepMsg::Done {
                    step,
                    status,
                    reason,
                    outs,
                    outputs,
                } => {
                    let Some(&i) = index.get(&step.0) else {
                        continue;
                    };
                    running -= 1;
                    mem_used = mem_used.saturating_sub(mem_of(i));
                    state[i] = State::Done(status);
                    reasons[i] = reason.clone();
                    progress.step_ended(&step.0, status, reason.as_deref());
                    upstream.insert(step.clone(), outs);
                    if let Err(e) = journal.append_unsynced(Event::StepEnded {
                        step: step.0.clone(),
                        status,
                        reason: reason.clone(),
                        outputs,
                    }) {
                        journal_error.get_or_insert(e);
                    }
                    if status == StepStatus::Succeeded {
                        for &d in &dependents[i] {
                            missing[d] -= 1;
                            if missing[d] == 0 && state[d] == State::Waiting {
                                ready.insert(d);
                            }
                        }
                    } else {
                        // Everything downstream is skipped, with the first reason.
                        let why = format!("needs `{}`, which {}", step.0, past(status));
                        let mut stack = dependents[i].clone();
                        while let Some(d) = stack.pop() {
                            if state[d] != State::Waiting {
                                continue;
                            }
                            state[d] = State::Done(StepStatus::Skipped);
                            ready.remove(&d);
                            reasons[d] = Some(why.clone());
                            let id = plan.steps[d].id.0.clone();
                            progress.step_ended(&id, StepStatus::Skipped, Some(&why));
                            if let Err(e) = journal.append_unsynced(Event::StepEnded {
                                step: id,
                                status: StepStatus::Skipped,
                                reason: Some(why.clone()),
                                outputs: Vec::new(),
                            }) {
                                journal_error.get_or_insert(e);
                            }
                            stack.extend(dependents[d].iter().copied());
                        }
                        if !opts.keep_going && stopping.is_none() && status != StepStatus::Cancelled
                        {
                            stopping =
                                Some(format!("fail-fast: step `{}` {}", step.0, past(status)));
                            escalate(&cancel_tx, CancelReason::FailFast);
                        }
                    }
                }
            }
        }
        // Every event is already written, so a killed orchestrator loses none. The
        // fdatasync (against a machine crash) is asked for when a step ended, and
        // otherwise within a tick; steps started now carry `requested` as their
        // barrier, so none starts its process before the end that allowed it is
        // durable (durable.rs). The syncer works on a blocking thread: the runtime
        // keeps noticing exits of running attempts (their wall times stay exact).
        if journal.seq() > requested && (ends_a_step || last_sync.elapsed() >= SYNC_AT_LEAST_EVERY)
        {
            requested = journal.seq();
            syncer.request(requested);
            last_sync = Instant::now();
        }
        if journal_error.is_some() && stopping.is_none() {
            stopping = Some("the journal could not be written".into());
            escalate(&cancel_tx, CancelReason::Interrupt);
        }
    }

    // Steps that never started.
    let why_not = stopping
        .clone()
        .unwrap_or_else(|| "not reached".to_string());
    for i in 0..n {
        if state[i] == State::Waiting {
            let status = StepStatus::Skipped;
            state[i] = State::Done(status);
            let reason = format!("not started: {why_not}");
            reasons[i] = Some(reason.clone());
            progress.step_ended(&plan.steps[i].id.0, status, Some(&reason));
            if let Err(e) = journal.append_unsynced(Event::StepEnded {
                step: plan.steps[i].id.0.clone(),
                status,
                reason: Some(reason),
                outputs: Vec::new(),
            }) {
                journal_error.get_or_insert(e);
            }
        }
    }
    // Everything written is durable before the outcome is reported: one sync.
    if let Err(e) = journal.sync() {
        journal_error.get_or_insert(e);
    }
    progress.finish();
    prefetch.finish(&started);
    if let Some(e) = journal_error {
        return Err(e);
    }
    let all_ok = state
        .iter()
        .all(|s| *s == State::Done(StepStatus::Succeeded));
    let (status, reason) = if interrupted {
        (RunStatus::Interrupted, stopping)
    } else if all_ok && !timed_out {
        (RunStatus::Succeeded, None)
    } else {
        let failed: Vec<&str> = plan
            .steps
            .iter()
            .zip(&state)
            .filter(|(_, s)| matches!(s, State::Done(StepStatus::Failed)))
            .map(|(s, _)| s.id.as_str())
            .collect();
        let reason = if timed_out {
            stopping
        } else if failed.is_empty() {
            Some("not every step succeeded".to_string())
        } else {
            Some(format!("failed steps: {}", failed.join(", ")))
        };
        (RunStatus::Failed, reason)
    };
    Ok(DagOutcome {
        status,
        reason,
        steps: plan
            .steps
            .iter()
            .zip(state.iter().zip(reasons))
            .map(|(s, (st, r))| {
                let st = match st {
                    State::Done(x) => *x,
                    _ => StepStatus::NotRun,
                };
                (s.id.0.clone(), st, r)
            })
            .collect(),
    })
}

/// The steps whose outputs a step reads: what it needs, what its templates name with
/// `${steps.X.out}`, and what its checks compare `across`.
fn referenced_steps(step: &crate::plan::Step) -> Vec<crate::plan::StepId> {
    use crate::plan::StepCommand;
    let mut ids: BTreeSet<crate::plan::StepId> = step.needs.iter().cloned().collect();
    let mut add = |t: &crate::plan::Template| ids.extend(t.step_refs().cloned());
    match &step.command {
        Some(StepCommand::Argv(a)) => a.iter().for_each(&mut add),
        Some(StepCommand::Shell(t)) => add(t),
        None => {}
    }
    step.env.values().for_each(&mut add);
    step.cwd.iter().for_each(&mut add);
    step.outputs.iter().chain(&step.inputs).for_each(&mut add);
    for c in &step.checks {
        for t in [&c.actual, &c.expected, &c.actual_logits, &c.expected_logits]
            .into_iter()
            .flatten()
        {
            add(t);
        }
    }
    for c in &step.checks {
        if let Some(a) = &c.across {
            ids.insert(a.clone());
        }
    }
    ids.into_iter().collect()
}

fn past(s: StepStatus) -> &'static str {
    match s {
        StepStatus::Failed => "failed",
        StepStatus::Cancelled => "was cancelled",
        StepStatus::Skipped => "was skipped",
        StepStatus::NotRun => "did not run",
        StepStatus::Succeeded => "succeeded",
    }
}

pub(crate) fn humantime(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 120_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else if ms < 7_200_000 {
        format!("{}m{}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h{}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}
