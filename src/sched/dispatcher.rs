//! The dispatcher: one `select!` loop over what can happen (a step's message, a
//! signal, the run timeout, a tick, the journal's sync state, the abandon bound). The
//! decisions live in values: [`Dag`] (what may start, what is skipped) and
//! [`Stopper`] (why and how hard the run stops); the dispatcher only wires them to
//! the journal, the progress view and the executors.

use std::collections::BTreeSet;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, watch};

use super::dag::{runs_attempts, Dag};
use super::durable::{Durable, Syncer};
use super::executor::{execute, CheckRunner, DeviceBroker, ExecCtx, StepEnd, StepMsg, Upstream};
use super::prefetch::Prefetcher;
use super::progress::Progress;
use super::stopper::{Signal, Stopper};
use super::SchedOptions;
use crate::backend::Backend;
use crate::evidence::journal::{Event, Journal};
use crate::evidence::record::{RunStatus, StepStatus};
use crate::plan::{Plan, StepId};

/// Events that end no step are fdatasynced at the latest on the first tick (250 ms)
/// after this much time.
const SYNC_AT_LEAST_EVERY: Duration = Duration::from_millis(200);

/// How the DAG ended.
#[derive(Debug, Clone)]
pub struct DagOutcome {
    pub status: RunStatus,
    pub reason: Option<String>,
    /// Final status of every step, in plan order.
    pub steps: Vec<(String, StepStatus, Option<String>)>,
    /// The run had to end at once (a second interrupt, the run timeout): what
    /// follows waits for nothing past this instant.
    pub hard: Option<std::time::Instant>,
}

/// What the loop holds besides the Dag and the Stopper.
struct Dispatch<'a> {
    plan: &'a Plan,
    dag: Dag,
    stopper: Stopper,
    journal: &'a mut Journal,
    journal_error: Option<io::Error>,
    progress: Progress,
    /// Finished steps' output folders, for the steps that read them.
    upstream: Upstream,
    /// (step, attempt) that started, so unused prefetched folders can be removed.
    started: BTreeSet<(String, u32)>,
    /// Steps a detached run leaves to `resume` (compare steps, and what reads them).
    deferred: BTreeSet<StepId>,
    /// What a detached run being collected journaled already.
    collected: Option<Arc<super::Collected>>,
}

impl Dispatch<'_> {
    fn write(&mut self, ev: Event) {
        // A step a detached run ended (a cache hit), or an attempt a stopped
        // collection of it ended, is journaled once.
        let again = self.collected.as_ref().is_some_and(|c| {
            event_step(&ev).is_some_and(|s| c.ended.contains(s)) || c.journaled(&ev)
        });
        if again {
            return;
        }
        if let Err(e) = self.journal.append_unsynced(ev) {
            self.journal_error.get_or_insert(e);
        }
    }

    /// The one way a step ends (reported by its executor, skipped, abandoned): the
    /// journal, the progress view, then what its end means for the rest.
    fn end_step(
        &mut self,
        i: usize,
        status: StepStatus,
        reason: Option<String>,
        outputs: Vec<String>,
    ) {
        let id = self.plan.steps[i].id.0.clone();
        self.progress.step_ended(&id, status, reason.as_deref());
        self.write(Event::StepEnded {
            step: id.clone(),
            status,
            reason: reason.clone(),
            outputs,
        });
        for (d, why) in self.dag.finish(i, status, reason) {
            self.end_skipped(d, why);
        }
    }

    fn end_skipped(&mut self, i: usize, why: String) {
        let id = self.plan.steps[i].id.0.clone();
        self.progress
            .step_ended(&id, StepStatus::Skipped, Some(&why));
        self.write(Event::StepEnded {
            step: id,
            status: StepStatus::Skipped,
            reason: Some(why),
            outputs: Vec::new(),
        });
    }

    fn handle(&mut self, msg: StepMsg, opts: &SchedOptions) {
        match msg {
            StepMsg::Event(ev) => {
                match &ev {
                    Event::AttemptEnded { step, attempt } => {
                        self.progress.attempt_ended(step, attempt);
                    }
                    Event::AttemptStarted { step, attempt, .. }
                    | Event::JobSubmitted { step, attempt, .. } => {
                        self.started.insert((step.clone(), *attempt));
                    }
                    _ => {}
                }
                self.write(ev);
            }
            StepMsg::Progress {
                step,
                attempt,
                of,
                warmup,
            } => self.progress.attempt_started(&step.0, attempt, of, warmup),
            StepMsg::Note(line) => self.progress.note(&line),
            StepMsg::Done { step, end } => {
                let Some(i) = self.plan.steps.iter().position(|s| s.id == step) else {
                    return;
                };
                // An abandoned step that reports after all is already done.
                if self.dag.state(i) != super::dag::State::Running {
                    return;
                }
                let StepEnd {
                    status,
                    reason,
                    outs,
                    outputs,
                    detached,
                } = end;
                self.upstream.insert(step.clone(), outs);
                if detached {
                    self.progress.note(&format!("submitted {step}"));
                    self.dag.finish(i, status, reason);
                    return;
                }
                self.end_step(i, status, reason, outputs);
                // A step gated on new failures is judged once the run's revisions
                // can be compared; its failure alone does not stop the run.
                let gated = self.plan.steps[i].gate == crate::plan::GateMode::New;
                self.stopper
                    .step_ended(&step.0, status, opts.keep_going || gated);
            }
        }
    }
}

/// What one run of the DAG needs: the plan and its options, where attempts run,
/// the environment every attempt starts from, and the optional services (device
/// leases on this host, compare checks).
pub struct DagRun {
    pub plan: Arc<Plan>,
    pub opts: SchedOptions,
    pub backend: Arc<dyn Backend>,
    pub base_env: Vec<(String, String)>,
    pub devices: Option<Arc<dyn DeviceBroker>>,
    pub checks: Option<Arc<dyn CheckRunner>>,
}

/// Run every step of the plan. Returns an error only when the journal cannot be
/// written (then every running attempt has been ended first).
pub async fn run_dag(run: DagRun, journal: &mut Journal) -> io::Result<DagOutcome> {
    let (plan, opts) = (Arc::clone(&run.plan), run.opts.clone());
    // What each step may read of finished steps: validation guarantees these are
    // upstream, so the executor gets exactly them (not the whole ancestry).
    let referenced: Vec<Vec<StepId>> = plan.steps.iter().map(referenced_steps).collect();
    let syncer = Syncer::start(journal.sync_handle()?);
    let (stopper, cancel_rx) = Stopper::new();
    let ctx = Arc::new(exec_ctx(run, syncer.subscribe()));
    let (tx, mut rx) = mpsc::unbounded_channel::<StepMsg>();
    let mut d = Dispatch {
        plan: &plan,
        dag: new_dag(&plan, &ctx),
        stopper,
        journal,
        journal_error: None,
        progress: Progress::new(opts.progress, plan.steps.len()),
        upstream: Upstream::new(),
        started: BTreeSet::new(),
        deferred: BTreeSet::new(),
        collected: opts.detach.collecting(),
    };
    if let Some(c) = &d.collected {
        d.started.extend(c.jobs.keys().cloned());
    }
    // Folders for the attempts that may come next are made while steps run.
    let prefetch = Prefetcher::start(&opts.work_dir, &opts.record_dir);
    let mut prefetched = vec![false; plan.steps.len()];
    let launch = Launch {
        plan: &plan,
        ctx: &ctx,
        tx: &tx,
        cancel_rx: &cancel_rx,
        referenced: &referenced,
        prefetch: &prefetch,
    };

    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let deadline = opts.run_timeout.map(|t| Instant::now() + t);
    let far = Instant::now() + Duration::from_secs(10 * 365 * 24 * 3600);
    let timeout_sleep = tokio::time::sleep_until(deadline.unwrap_or(far).into());
    tokio::pin!(timeout_sleep);
    let mut timed_out = false;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_sync = Instant::now();
    let mut durable_rx = syncer.subscribe();
    let mut durable_open = true;
    let mut requested = 0u64;

    loop {
        if !d.stopper.stopping() {
            launch.start_ready(&mut d, &mut prefetched, requested);
        }
        if d.dag.running() == 0 {
            break;
        }
        crate::sys::stall_point("dispatch-loop").await;
        let mut batch: Vec<StepMsg> = Vec::new();
        let abandon_at = d.stopper.abandon_at();
        let abandon_sleep = tokio::time::sleep_until(abandon_at.unwrap_or(far).into());
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(m) => batch.push(m),
                None => break,
            },
            _ = sigint.recv() => {
                let note = d.stopper.signal(Signal::Interrupt, Instant::now());
                d.progress.note(note);
            }
            _ = sigterm.recv() => {
                d.stopper.signal(Signal::Terminate, Instant::now());
            }
            _ = &mut timeout_sleep, if deadline.is_some() && !timed_out => {
                timed_out = true;
                d.stopper.run_timeout(opts.run_timeout.unwrap_or_default(), opts.grace, Instant::now());
                d.progress.note("run timeout: ending running attempts");
            }
            _ = abandon_sleep, if abandon_at.is_some() => {
                let why = "abandoned: it did not end in time after the run's end".to_string();
                d.progress.note(&why);
                for i in d.dag.running_steps() {
                    d.end_step(i, StepStatus::Cancelled, Some(why.clone()), Vec::new());
                }
                break;
            }
            _ = tick.tick() => d.progress.redraw(),
            changed = durable_rx.changed(), if durable_open => {
                if changed.is_err() {
                    durable_open = false;
                } else if let Durable::Failed(e) = &*durable_rx.borrow_and_update() {
                    durable_open = false;
                    d.journal_error.get_or_insert(io::Error::other(e.clone()));
                }
            }
        }
        settle(
            &mut d,
            &mut rx,
            batch,
            &opts,
            &syncer,
            &mut requested,
            &mut last_sync,
        );
        if d.journal_error.is_some() {
            d.stopper.journal_failed();
        }
    }

    crate::sys::stall_point("dispatch-end").await;
    finish(d, &plan, prefetch)
}

/// The plan's DAG, each step's place known: one placed off this host takes no
/// job slot or memory here.
fn new_dag(plan: &Plan, ctx: &ExecCtx) -> Dag {
    let mut dag = Dag::new(plan, ctx.opts.jobs, ctx.opts.memory_budget);
    dag.set_off_host(
        plan.steps
            .iter()
            .map(|s| {
                ctx.backend
                    .place(&super::attempt::ask_of(plan, s))
                    .is_some_and(|p| p.kind != crate::plan::model::BackendKind::Local)
            })
            .collect(),
    );
    dag
}

/// What every executor of the run shares.
fn exec_ctx(run: DagRun, durable: watch::Receiver<Durable>) -> ExecCtx {
    let reuse = run.opts.reuse.clone();
    ExecCtx {
        durable,
        plan: run.plan,
        opts: run.opts,
        backend: run.backend,
        base_env: run.base_env,
        devices: run.devices,
        checks: run.checks,
        reuse,
        seats: Default::default(),
        submitted: Default::default(),
    }
}

/// Handle `batch` and whatever else arrived, and ask for the journal's
/// fdatasync when it is due.
fn settle(
    d: &mut Dispatch<'_>,
    rx: &mut mpsc::UnboundedReceiver<StepMsg>,
    mut batch: Vec<StepMsg>,
    opts: &SchedOptions,
    syncer: &Syncer,
    requested: &mut u64,
    last_sync: &mut Instant,
) {
    // Drain what else arrived; one fdatasync covers the batch when it ends a step.
    while let Ok(m) = rx.try_recv() {
        batch.push(m);
    }
    let ends_a_step = batch.iter().any(|m| matches!(m, StepMsg::Done { .. }));
    for msg in batch {
        d.handle(msg, opts);
    }
    // Every event is already written, so a killed orchestrator loses none. The
    // fdatasync (against a machine crash) is asked for when a step ended, and
    // otherwise within a tick; steps started now carry `requested` as their
    // barrier, so none starts its process before the end that allowed it is
    // durable (durable.rs). The syncer works on a blocking thread: the runtime
    // keeps noticing exits of running attempts (their wall times stay exact).
    if d.journal.seq() > *requested && (ends_a_step || last_sync.elapsed() >= SYNC_AT_LEAST_EVERY) {
        *requested = d.journal.seq();
        syncer.request(*requested);
        *last_sync = Instant::now();
    }
}

/// What starting steps needs besides the Dispatch: the plan, the executors'
/// context and channels, and the folders made ahead.
struct Launch<'a> {
    plan: &'a Plan,
    ctx: &'a Arc<ExecCtx>,
    tx: &'a mpsc::UnboundedSender<StepMsg>,
    cancel_rx: &'a tokio::sync::watch::Receiver<Option<crate::backend::CancelReason>>,
    referenced: &'a [Vec<StepId>],
    prefetch: &'a Prefetcher,
}

impl Launch<'_> {
    /// Start every step the DAG lets start (a group of interleaved cells
    /// together), asking for the folders of their attempts and their dependents'
    /// ahead.
    fn start_ready(&self, d: &mut Dispatch<'_>, prefetched: &mut [bool], requested: u64) {
        let leaders = d.dag.take_startable();
        let mut groups: Vec<Vec<usize>> = leaders.iter().map(|&i| d.dag.members(i)).collect();
        if self.ctx.opts.detach.submits_only() {
            groups.retain(|g| !self.defer(d, g));
        }
        let start: Vec<usize> = groups.iter().flatten().copied().collect();
        for &i in &start {
            let step = &self.plan.steps[i];
            d.progress.step_started(&step.id.0);
            // A step made ahead as a dependent has all its attempts made.
            if runs_attempts(step.kind) && !prefetched[i] {
                prefetched[i] = true;
                self.prefetch.request(&step.id.0, 2, step.attempts());
            }
            for &dep in d.dag.dependents(i) {
                let next = &self.plan.steps[dep];
                if !prefetched[dep] && runs_attempts(next.kind) {
                    prefetched[dep] = true;
                    self.prefetch.request(&next.id.0, 1, next.attempts());
                }
            }
            let journaled = d
                .collected
                .as_ref()
                .is_some_and(|c| c.started.contains(&step.id.0));
            if !journaled {
                d.write(Event::StepStarted {
                    step: step.id.0.clone(),
                });
            }
        }
        // No fdatasync here: an attempt starts before its own start event can be
        // durable anyway, so start events ride on a later sync (below), while a
        // step's end is durable before anything starts because of it.
        for group in groups {
            let mut members: Vec<(crate::plan::Step, Arc<Upstream>)> = group
                .iter()
                .map(|&i| {
                    let ups: Upstream = self.referenced[i]
                        .iter()
                        .filter_map(|id| d.upstream.get_key_value(id))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    (self.plan.steps[i].clone(), Arc::new(ups))
                })
                .collect();
            if members.len() > 1 {
                tokio::spawn(super::executor::execute_group(
                    Arc::clone(self.ctx),
                    members,
                    self.tx.clone(),
                    self.cancel_rx.clone(),
                    requested,
                ));
            } else if let Some((step, ups)) = members.pop() {
                tokio::spawn(execute(
                    Arc::clone(self.ctx),
                    step,
                    ups,
                    self.tx.clone(),
                    self.cancel_rx.clone(),
                    requested,
                ));
            }
        }
    }
}

impl Launch<'_> {
    /// Whether a detached run leaves these steps to `resume`: a compare step runs
    /// in the orchestrator, and a step that reads one waits for it. They count as
    /// done here, so what else is ready is still submitted.
    fn defer(&self, d: &mut Dispatch<'_>, group: &[usize]) -> bool {
        let later = group.iter().any(|&i| {
            self.plan.steps[i].kind == crate::plan::StepKind::Compare
                || self.referenced[i].iter().any(|s| d.deferred.contains(s))
        });
        if later {
            for &i in group {
                let id = self.plan.steps[i].id.clone();
                d.progress.note(&format!(
                    "{id}: runs when the run is collected (`orchestrate resume`)"
                ));
                d.deferred.insert(id);
                d.dag.finish(i, StepStatus::Succeeded, None);
            }
        }
        later
    }
}

/// The step an event is of, when it is of one.
fn event_step(ev: &Event) -> Option<&str> {
    match ev {
        Event::StepStarted { step }
        | Event::StepCache { step, .. }
        | Event::DevicesGranted { step, .. }
        | Event::DevicesReleased { step, .. }
        | Event::AttemptStarted { step, .. }
        | Event::JobSubmitted { step, .. }
        | Event::AttemptEnded { step, .. }
        | Event::CheckEnded { step, .. }
        | Event::StepEnded { step, .. } => Some(step),
        _ => None,
    }
}

/// The run's outcome once the loop ended: steps that never started are skipped,
/// everything written is durable, and unused prefetched folders go.
fn finish(mut d: Dispatch<'_>, plan: &Plan, prefetch: Prefetcher) -> io::Result<DagOutcome> {
    // Steps that never started.
    let why = d.stopper.why_not_started().to_string();
    for (i, reason) in d.dag.skip_waiting(&why) {
        d.end_skipped(i, reason);
    }
    // Everything written is durable before the outcome is reported: one sync.
    if let Err(e) = d.journal.sync() {
        d.journal_error.get_or_insert(e);
    }
    d.progress.finish();
    prefetch.finish(&d.started);
    if let Some(e) = d.journal_error {
        return Err(e);
    }
    let statuses = d.dag.statuses();
    let named: Vec<(&str, StepStatus)> = plan
        .steps
        .iter()
        .zip(&statuses)
        .map(|(s, st)| (s.id.as_str(), *st))
        .collect();
    let (status, reason) = d.stopper.outcome(&named);
    let hard = d.stopper.leave_by(std::time::Instant::now());
    Ok(DagOutcome {
        status,
        reason,
        hard,
        steps: plan
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    s.id.0.clone(),
                    statuses[i],
                    d.dag.reason(i).map(String::from),
                )
            })
            .collect(),
    })
}

/// The steps whose outputs a step reads: what it needs, what its templates name with
/// `${steps.X.out}`, and what its checks compare `across`.
fn referenced_steps(step: &crate::plan::Step) -> Vec<StepId> {
    use crate::plan::StepCommand;
    let mut ids: BTreeSet<StepId> = step.needs.iter().cloned().collect();
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
