//! Following one submitted job to its end: watch the controller's rounds, the
//! job's own start and end records, the attempt's timeout, its queue timeout and
//! cancels ([`Slurm::follow`]), then make the attempt's outcome from what was
//! seen, Slurm's state first ([`outcome`]).

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::watch;

use super::exec::{JobEnd, Sealed};
use super::state::{self, JobState};
use super::{
    contradiction, escalated, job_files, poll, read_end, read_end_now, read_start_now, settle_logs,
    sleep_until, Read, Slurm, Tracked, CONTROLLER_PATIENCE, END_RECORD, LAUNCH_ALLOWANCE,
    START_RECORD, UNCONFIRMED, WATCH,
};
use crate::backend::{AttemptJob, AttemptOutcome, AttemptSpec, CancelReason};
use crate::contract::{Enforcement, JobAccounting, JobFacts, Termination};

/// What watching a job learnt.
#[derive(Default)]
struct Watch {
    /// When the command started (its start record).
    started: Option<Instant>,
    /// When Slurm first said the job runs.
    running_at: Option<Instant>,
    cancel_reason: Option<CancelReason>,
    timed_out: bool,
    leftovers: Vec<String>,
    unopened: Vec<PathBuf>,
    /// The job's sealed end record, once it appeared.
    seen_end: Option<JobEnd>,
    /// A record at the end record's place that the job's slurm-exec did not
    /// write (no valid seal): what was found.
    forged: Option<String>,
    /// The end record's place holds what is not a file.
    end_problem: Option<String>,
    /// Ended on a clean end record: Slurm's word comes later (poll.rs).
    provisional: bool,
    queue_failed: Option<String>,
    /// Slurm's pending reasons, each once.
    reasons: Vec<String>,
    silence_noted: bool,
    notes: Vec<String>,
}

/// What a watch reads but does not change.
struct Cx<'a> {
    spec: &'a AttemptSpec,
    job: &'a AttemptJob,
    id: &'a str,
    seal: Option<&'a str>,
    t_submit: Instant,
    queue_timeout: Option<Duration>,
}

impl Cx<'_> {
    fn tell(&self, note: &str) {
        if let Some(tell) = &self.job.on_note {
            tell(note);
        }
    }
}

impl Slurm {
    pub(super) async fn follow(
        &self,
        spec: &AttemptSpec,
        job: &AttemptJob,
        t: Tracked,
        cancel: watch::Receiver<Option<CancelReason>>,
    ) -> AttemptOutcome {
        let Tracked {
            id,
            script,
            gres,
            submitted,
            seal,
            notes,
            array,
        } = t;
        let cx = Cx {
            spec,
            job,
            id: &id,
            seal: seal.as_deref(),
            t_submit: Instant::now(),
            queue_timeout: job
                .placement
                .as_ref()
                .and_then(|p| p.request::<super::SlurmRequest>())
                .and_then(|r| r.options.queue_timeout),
        };
        let mut w = Watch {
            notes,
            ..Watch::default()
        };
        let fin = self.watch(&cx, &mut w, cancel).await;
        if let (false, Some((_, at))) = (w.silence_noted, self.poller.silent_since()) {
            w.notes.push(format!(
                "the Slurm controller has not answered since {}",
                crate::time::rfc3339(&at)
            ));
        }
        let end_file = job.logs.join(END_RECORD);
        let end = match w.seen_end.take() {
            Some(e) => Some(e),
            None => read_end(&end_file, fin.as_ref(), cx.seal).await,
        };
        if end.is_none() && w.end_problem.is_none() {
            if let Read::NotAFile(what) = read_end_now(&end_file) {
                w.end_problem = Some(what);
            }
        }
        let clean = w.provisional
            || fin
                .as_ref()
                .is_some_and(|f| matches!(f.state.as_str(), "COMPLETED" | "FAILED"));
        if !clean {
            let logs = vec![spec.stdout.clone(), spec.stderr.clone()];
            // What Slurm writes after a second of quiet (a loaded node's
            // slurmstepd saying why the job ended) goes beside the log, not into
            // the log the record hashes.
            let _ = tokio::task::spawn_blocking(move || {
                settle_logs(&logs, Duration::from_millis(1000), Duration::from_secs(10));
                for log in &logs {
                    super::freeze_log(log);
                }
            })
            .await;
        }
        if let Some(m) = spec.mask.as_ref().filter(|m| !m.is_empty()) {
            for log in [&spec.stdout, &spec.stderr] {
                crate::mask::mask_file_in_place(log, m);
            }
        }
        let _ = std::fs::remove_file(&job.private);
        let t_submit = cx.t_submit;
        let job_of = JobOf {
            id,
            script,
            gres,
            submitted,
            t_submit,
            array,
        };
        outcome(spec, job, job_of, fin, end, w)
    }

    /// Watch until the job ends, or until what is seen ends the attempt before
    /// Slurm's word (a clean end record, a second Ctrl-C, a silent controller):
    /// Slurm's final word when it came.
    async fn watch(
        &self,
        cx: &Cx<'_>,
        w: &mut Watch,
        mut cancel: watch::Receiver<Option<CancelReason>>,
    ) -> Option<poll::Final> {
        let (spec, id) = (cx.spec, cx.id);
        let poll::Watched {
            mut running,
            mut done,
            mut pending,
        } = self.poller.watch(id, &cx.job.step, cx.job.attempt);
        let mut tick = tokio::time::interval(WATCH);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            // The timeout counts from the command's start, or from Slurm's
            // "running" plus the time a launch may take when no start record comes.
            let deadline = match (w.started, w.running_at, spec.timeout, w.timed_out) {
                (Some(s), _, Some(t), false) => Some(s + t),
                (None, Some(r), Some(t), false) => Some(r + t + LAUNCH_ALLOWANCE),
                _ => None,
            };
            tokio::select! {
                fin = &mut done => return fin.ok(),
                // A cancel, or its escalation (a second Ctrl-C after the first).
                r = escalated(&mut cancel, w.cancel_reason), if w.cancel_reason != Some(CancelReason::Kill) => {
                    if w.cancel_reason.is_none() {
                        self.poller.cancel(id);
                    }
                    w.cancel_reason = Some(r);
                    if r == CancelReason::Kill {
                        // A second Ctrl-C: leave now, saying what may still run. Slurm
                        // still writes to the logs it holds open: those go on in a
                        // side file, and the record keeps what was there now.
                        for log in [&spec.stdout, &spec.stderr] {
                            if !self.poller.freeze(log) {
                                w.unopened.push(log.clone());
                            }
                        }
                        w.leftovers.push(format!("slurm job {id} may still be running (cancel sent)"));
                        return None;
                    }
                }
                _ = &mut running, if w.running_at.is_none() => {
                    w.running_at = Some(Instant::now());
                }
                changed = pending.changed(), if w.started.is_none() && w.running_at.is_none() => {
                    if changed.is_ok() {
                        if let Some(r) = pending.borrow_and_update().clone() {
                            // An array's task waiting on the run's own throttle (or
                            // its hold until a share is free) is no news.
                            let own = super::ids::is_task(id)
                                && matches!(r.as_str(), "JobArrayTaskLimit" | "JobHeldUser");
                            if !own && !w.reasons.contains(&r) {
                                cx.tell(&format!("job {id} is pending: {r}"));
                                w.reasons.push(r);
                            }
                        }
                    }
                }
                _ = sleep_until(deadline) => {
                    w.timed_out = true;
                    self.poller.cancel(id);
                }
                _ = tick.tick() => {
                    if self.tick(cx, w).await.is_break() {
                        return None;
                    }
                }
            }
        }
    }

    /// One look at what the controller's rounds do not tell: the queue timeout, a
    /// silent controller, and the job's own records. `Break`: the attempt ends now.
    async fn tick(&self, cx: &Cx<'_>, w: &mut Watch) -> ControlFlow<()> {
        self.queue_timeout(cx, w).await;
        if self.silence(cx, w).is_break() {
            return ControlFlow::Break(());
        }
        if w.seen_end.is_some() {
            return ControlFlow::Continue(());
        }
        if w.started.is_none() && read_start_now(&cx.job.logs.join(START_RECORD), cx.seal).is_some()
        {
            w.started = Some(Instant::now());
        }
        self.end_record(cx, w)
    }

    /// Pending past the step's `queue_timeout`: cancelled, with why.
    async fn queue_timeout(&self, cx: &Cx<'_>, w: &mut Watch) {
        let id = cx.id;
        let (None, None, Some(qt), None) =
            (w.started, w.running_at, cx.queue_timeout, &w.queue_failed)
        else {
            return;
        };
        if cx.t_submit.elapsed() < qt {
            return;
        }
        // Slurm's reason, asked of the controller if no round has told it yet.
        if w.reasons.is_empty() {
            if let Some(r) = self
                .poller
                .queue(false)
                .await
                .and_then(|q| q.into_iter().find(|q| q.id == id))
                .and_then(|q| q.reason)
            {
                cx.tell(&format!("job {id} is pending: {r}"));
                w.reasons.push(r);
            }
        }
        let why = w
            .reasons
            .last()
            .map_or(String::new(), |r| format!(" (Slurm's reason: {r})"));
        w.queue_failed = Some(format!(
            "job {id} was still pending after its queue_timeout of {}{why}: cancelled",
            crate::units::human_duration(qt)
        ));
        self.poller.cancel(id);
    }

    /// The controller does not answer: say so, and go on what the job's own end
    /// record says, within bounds.
    fn silence(&self, cx: &Cx<'_>, w: &mut Watch) -> ControlFlow<()> {
        let Some((since, at)) = self.poller.silent_since() else {
            return ControlFlow::Continue(());
        };
        if !w.silence_noted {
            w.silence_noted = true;
            let n = format!(
                "the Slurm controller has not answered since {}",
                crate::time::rfc3339(&at)
            );
            cx.tell(&format!("job {}: {n}", cx.id));
            w.notes.push(n);
        }
        let waited = since.elapsed();
        if waited < CONTROLLER_PATIENCE {
            return ControlFlow::Continue(());
        }
        if w.seen_end.is_some() {
            w.notes.push(format!(
                "ended on the job's own end record: the controller had not answered for {} s",
                waited.as_secs()
            ));
            return ControlFlow::Break(());
        }
        if w.cancel_reason.is_some() {
            w.leftovers.push(format!(
                "slurm job {} may still be running: cancelled while the controller did not answer",
                cx.id
            ));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    /// What is at the end record's place now. A clean, sealed end ends the attempt
    /// (Slurm's word is asked later); a failed one asks for Slurm's word now.
    fn end_record(&self, cx: &Cx<'_>, w: &mut Watch) -> ControlFlow<()> {
        let (spec, id) = (cx.spec, cx.id);
        match read_end_now(&cx.job.logs.join(END_RECORD)) {
            Read::Nothing => {}
            Read::NotAFile(what) => {
                if w.end_problem.is_none() {
                    w.end_problem = Some(what);
                    self.poller.hurry(id);
                }
            }
            Read::Record(e) => {
                let genuine = cx.seal.is_none_or(|k| e.sealed_by(k));
                if !genuine {
                    // The command wrote it: never an end. Slurm's word is wanted
                    // now, and the timeout keeps running.
                    if w.forged.is_none() {
                        w.forged = Some(format!(
                            "its end record at the time said exit {} after {:.1} ms but carried no valid seal: written by its command, not by slurm-exec",
                            e.exit_code.map_or("none".to_string(), |c| c.to_string()),
                            e.wall_ms
                        ));
                        self.poller.hurry(id);
                    }
                    return ControlFlow::Continue(());
                }
                w.started.get_or_insert_with(Instant::now);
                if e.clean() && w.cancel_reason.is_none() && !w.timed_out && w.forged.is_none() {
                    self.poller.defer(
                        id,
                        poll::Expected {
                            exit_code: e.exit_code,
                            wall_ms: e.wall_ms,
                            peak_memory_bytes: e.peak_memory_bytes,
                            ended_at: e.ended_at.clone(),
                            ended: Instant::now(),
                            deadline: w.started.zip(spec.timeout).map(|(s, t)| s + t),
                            nodes: super::fan_out_nodes(cx.job),
                            logs: vec![spec.stdout.clone(), spec.stderr.clone()],
                        },
                    );
                    w.seen_end = Some(*e);
                    w.provisional = true;
                    return ControlFlow::Break(());
                }
                // It failed: why is Slurm's to say, now.
                self.poller.hurry(id);
                w.seen_end = Some(*e);
            }
        }
        ControlFlow::Continue(())
    }
}

/// What the job ended as when Slurm's word did not come: unconfirmed after a
/// clean end record, UNKNOWN when it ended on its record while the controller was
/// silent, else cancelled.
fn unanswered(w: &Watch) -> poll::Final {
    poll::Final {
        state: if w.provisional {
            UNCONFIRMED.into()
        } else if w.leftovers.is_empty() && w.cancel_reason.is_none() {
            "UNKNOWN".into()
        } else {
            "CANCELLED".into()
        },
        ..Default::default()
    }
}

/// What the job's notes say beyond the watch: a broken end record, its pending
/// reasons, and why its end is the controller's word.
fn add_notes(w: &mut Watch, fin: &poll::Final) {
    if let Some(p) = &w.end_problem {
        w.notes.push(format!("its end record {p}"));
    }
    if !w.reasons.is_empty() {
        w.notes.push(format!(
            "pending in the queue: {}",
            w.reasons.join(", then ")
        ));
    }
    w.notes.extend(fin.why.clone());
}

/// Which job it was.
struct JobOf {
    id: String,
    script: String,
    gres: String,
    submitted: chrono::DateTime<Utc>,
    t_submit: Instant,
    /// Its array's script, when it is an array's task.
    array: Option<crate::isolate::JobFile>,
}

/// How the attempt ended, Slurm's state first: `OUT_OF_MEMORY` with exit code 0 is
/// an OOM kill, a job Slurm no longer knows ran to its end record if it left one,
/// and a record its command forged fails it.
fn termination_of(
    state: &JobState,
    w: &Watch,
    end: Option<&JobEnd>,
    evidence: bool,
    slurm_signal: bool,
) -> Termination {
    // The job's cgroup saw an OOM kill: an OOM kill, whatever the exit code says
    // (as for local attempts; a shell that exits 0 after its child was killed is
    // the classic false success).
    let oom = end.is_some_and(|e| e.oom_kills.unwrap_or(0) > 0);
    // A job the scheduler forgot (accounting off, past MinJobAge) or has not yet
    // told the end of, but that left its end record, ran to that end.
    let forgotten = !state.is_final() && end.is_some();
    let termination = match state.termination() {
        Some(Termination::Cancelled) if w.timed_out => Termination::TimedOut,
        Some(Termination::Cancelled) if w.queue_failed.is_some() => Termination::Forged,
        Some(t) if !forgotten => t,
        _ if oom => Termination::OomKilled,
        _ if evidence => Termination::Forged,
        _ => match end {
            Some(e) if e.signal.is_some() => Termination::Signaled,
            Some(_) => Termination::Exited,
            // Completed by Slurm's word but without the job's own end record:
            // nothing proves what ran.
            None if *state == JobState::Completed => Termination::Lost,
            None if slurm_signal => Termination::Signaled,
            None => Termination::Exited,
        },
    };
    // A forged record fails the attempt whatever else ended it.
    if w.forged.is_some() && matches!(termination, Termination::Exited) {
        Termination::Forged
    } else {
        termination
    }
}

fn outcome(
    spec: &AttemptSpec,
    job: &AttemptJob,
    of: JobOf,
    fin: Option<poll::Final>,
    end: Option<JobEnd>,
    mut w: Watch,
) -> AttemptOutcome {
    let fin = fin.unwrap_or_else(|| unanswered(&w));
    let state = JobState::parse(&fin.state);
    let (sl_code, sl_sig) = fin
        .exit_code
        .as_deref()
        .map(state::exit_code)
        .unwrap_or((None, None));
    let forgotten = !state.is_final() && end.is_some();
    // Slurm's word against the end record's, when both are known.
    let contradiction = match (&end, state.is_final()) {
        (Some(e), true) => contradiction(e, &fin, super::fan_out_nodes(job)),
        _ => None,
    };
    let evidence = w
        .forged
        .clone()
        .or(contradiction)
        .or_else(|| w.queue_failed.clone());
    let termination = termination_of(
        &state,
        &w,
        end.as_ref(),
        evidence.is_some(),
        sl_sig.is_some(),
    );
    add_notes(&mut w, &fin);
    let parse_time = |s: &str| {
        chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    };
    let began = end.as_ref().and_then(|e| parse_time(&e.started_at));
    let wall = match &end {
        Some(e) => Duration::from_secs_f64(e.wall_ms.max(0.0) / 1000.0),
        None => w
            .started
            .or(w.running_at)
            .map(|s| s.elapsed())
            .unwrap_or_default(),
    };
    // Queued from sbatch's answer to the command's start (its start record): one
    // clock, Slurm's hosts' and ours alike in UTC.
    let queued_ms = began
        .map(|s| ((s - of.submitted).num_microseconds().unwrap_or(0) as f64 / 1000.0).max(0.0))
        .or_else(|| {
            w.started
                .or(w.running_at)
                .map(|s| (s - of.t_submit).as_secs_f64() * 1000.0)
        });
    let enforcement = enforcement(spec, &of);
    let submitted = of.submitted;
    let facts = job_facts(
        job,
        of,
        &fin,
        end.as_ref(),
        &mut w,
        &state,
        forgotten,
        evidence,
        queued_ms,
    );
    AttemptOutcome {
        termination,
        exit_code: super::stated_exit(end.as_ref(), &fin, super::fan_out_nodes(job)).or(
            if termination == Termination::Exited {
                sl_code
            } else {
                None
            },
        ),
        signal: end.as_ref().and_then(|e| e.signal).or(sl_sig),
        started_at: began.unwrap_or(submitted),
        ended_at: end
            .as_ref()
            .and_then(|e| parse_time(&e.ended_at))
            .unwrap_or_else(Utc::now),
        wall,
        cpu_user: None,
        cpu_system: None,
        peak_memory_bytes: peak_memory(end.as_ref(), &fin, super::fan_out_nodes(job)),
        oom_kills: end.as_ref().and_then(|e| e.oom_kills),
        pids_limit_hit: None,
        kill_duration: None,
        cancel_reason: w.cancel_reason,
        enforcement,
        leftovers: w.leftovers,
        unopened_logs: w.unopened,
        gpus: Vec::new(),
        npus: Vec::new(),
        gpu_misuse: Vec::new(),
        job: Some(facts),
    }
}

/// The attempt's peak memory: its job's cgroup as its end record read it; a
/// multi-node command's tasks on the other nodes are in Slurm's `MaxRSS` (the
/// most any one task held), whichever is more.
fn peak_memory(end: Option<&JobEnd>, fin: &poll::Final, nodes: u32) -> Option<u64> {
    let said = end.and_then(|e| e.peak_memory_bytes);
    match (said, fin.max_rss) {
        (Some(p), Some(r)) if nodes > 1 => Some(p.max(r)),
        (p, r) => p.or(r),
    }
}

/// What a Slurm attempt's limits are: Slurm's, by its cgroups; `pids` is not one.
fn enforcement(spec: &AttemptSpec, of: &JobOf) -> Enforcement {
    Enforcement {
        memory: spec.memory.is_some(),
        devices: !of.gres.is_empty(),
        notes: {
            let mut n = vec![format!(
                "job {}: limits are Slurm's (--mem, --time, --gres), enforced by its cgroups",
                of.id
            )];
            if spec.pids.is_some() {
                n.push("pids: not enforced by the slurm backend".into());
            }
            n
        },
        ..Enforcement::nothing(crate::contract::Enforcer::Slurm)
    }
}

/// What the record keeps of the job: Slurm's accounting (or `unconfirmed` while
/// its word is to come), where and on what it ran, its script and files, and
/// what the end rests on.
#[allow(clippy::too_many_arguments)]
fn job_facts(
    job: &AttemptJob,
    of: JobOf,
    fin: &poll::Final,
    end: Option<&JobEnd>,
    w: &mut Watch,
    state: &JobState,
    forgotten: bool,
    evidence: Option<String>,
    queued_ms: Option<f64>,
) -> JobFacts {
    JobFacts {
        backend: "slurm".into(),
        job_id: of.id,
        accounting: JobAccounting {
            state: if w.provisional {
                UNCONFIRMED.into()
            } else {
                state.to_string()
            },
            exit_code: fin.exit_code.clone(),
            derived_exit_code: fin.derived_exit_code.clone(),
            elapsed: fin.elapsed.clone(),
            node: end
                .as_ref()
                .and_then(|e| e.node.clone())
                .or(fin.node.clone()),
            queried: fin.via.to_string(),
            max_rss_bytes: fin.max_rss,
        },
        gpus: end.and_then(|e| e.gpus.clone()),
        cuda_visible_devices: end.and_then(|e| e.cuda_visible_devices.clone()),
        gres: Some(of.gres).filter(|g| !g.is_empty()),
        script: of.script,
        submitted_at: crate::time::rfc3339(&of.submitted),
        queued_ms: queued_ms.map(crate::time::round_us),
        source: if forgotten {
            "end record"
        } else if end.is_some() {
            "end record and scheduler"
        } else {
            "scheduler"
        }
        .into(),
        evidence,
        notes: std::mem::take(&mut w.notes),
        files: job_files(&job.record_dir, &job.logs)
            .into_iter()
            .chain(of.array)
            .collect(),
    }
}
