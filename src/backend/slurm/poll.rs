//! One poller per run, and as few questions to the controller as the evidence
//! allows. A job tells its own start and end on the shared filesystem
//! (`job-start.json`, `job-end.json`, written by `slurm-exec`): the attempt follows
//! those files, which costs the controller nothing. Slurm's own word on each job
//! (State, ExitCode, DerivedExitCode, MaxRSS, Elapsed, NodeList) is read in rounds:
//! one query per round for every live job of the run (`sacct --jobs` with
//! accounting, `squeue` with exit codes without), never one per job.
//!
//! Rounds come at a heartbeat that starts at [`FIRST`] and doubles to [`CEILING`]
//! (one query a minute for a run whose jobs run long: Nextflow's queue-status
//! interval), which catches the jobs that never write an end record (refused at
//! launch, node lost, killed outright). Someone who needs Slurm's word now (an end
//! record that tells a failure, a cancel, the run's end) hurries the poller: rounds
//! then come every [`FLOOR`], never closer. An attempt whose end record tells a clean
//! exit ends on it at once; its job is confirmed by a later round together with
//! others ([`Poller::confirm`] at the run's end waits for the last ones).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch, Notify};

use super::state::{
    sacct_jobs, scontrol_fields, squeue_line, Acct, JobState, QueueLine, SACCT_FORMAT,
    SQUEUE_FIELDS, SQUEUE_PLAIN,
};

/// The closest two rounds come while someone waits on one. slurmdbd hears of a
/// job's end a moment after the controller (under 0.3 s here), so a hurried job is
/// usually read in one or two rounds.
pub const FLOOR: Duration = Duration::from_millis(500);
/// The first heartbeat after a job is submitted to an idle poller: a job refused
/// at launch is known within about this.
pub const FIRST: Duration = Duration::from_secs(2);
/// The slowest heartbeat.
pub const CEILING: Duration = Duration::from_secs(60);
/// The name slurmdbd gives a job it knows only from its steps so far.
const UNNAMED: &str = "allocation";
/// A job missing from accounting this many rounds is asked of the controller.
const MISSING_ROUNDS: u32 = 3;
/// A hurried job that accounting still does not show ended after this is asked of
/// the controller (slurmdbd may lag far behind, or be down).
const ACCOUNTING_LAG: Duration = Duration::from_secs(10);
/// The closest two such questions to the controller come.
const LAG_CHECK: Duration = Duration::from_secs(5);
/// Job ids per query.
const CHUNK: usize = 500;
/// The longest one query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(20);
/// A job still in the queue this long after its own end record said its command
/// had ended is not that job's end: the record was forged (or Slurm is stuck).
pub(crate) const STRAY_AFTER: Duration = Duration::from_secs(15);

/// What an attempt's clean end record said, kept to be checked against Slurm's
/// word when it comes.
#[derive(Debug, Clone)]
pub(crate) struct Expected {
    pub exit_code: Option<i32>,
    pub wall_ms: f64,
    pub peak_memory_bytes: Option<u64>,
    /// When the end record says the command ended (RFC 3339).
    pub ended_at: String,
    /// When the attempt ended on it.
    pub ended: Instant,
    /// The attempt's timeout, which runs on until Slurm says the job ended.
    pub deadline: Option<Instant>,
    /// How many nodes its job asked for: its command ran on each.
    pub nodes: u32,
    /// Its logs, as hashed when the attempt ended: kept as they were if the job
    /// has to be cancelled after all (Slurm then writes its cancel notice into a
    /// side file, and the record still verifies).
    pub logs: Vec<std::path::PathBuf>,
}

/// A job's end as the scheduler tells it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Final {
    pub state: String,
    pub exit_code: Option<String>,
    pub derived_exit_code: Option<String>,
    pub elapsed: Option<String>,
    /// When the job ended, in the controller's local time.
    pub end: Option<String>,
    pub node: Option<String>,
    pub max_rss: Option<u64>,
    /// The most nodes a step of the job ran on (accounting only).
    pub step_nodes: Option<u32>,
    /// Where the end state was read: "sacct", "squeue" or "scontrol".
    pub via: &'static str,
    /// Why the controller was asked although accounting is on.
    pub why: Option<String>,
}

/// Slurm's word on a job whose attempt ended on its own end record.
#[derive(Debug, Clone)]
pub struct Confirmed {
    pub step: String,
    pub attempt: u32,
    pub job_id: String,
    pub(crate) fin: Final,
    /// What the end record said, to check Slurm's word against.
    pub(crate) expected: Option<Expected>,
    /// The job was still queued or running past its end record (or its timeout):
    /// cancelled, and why.
    pub(crate) stray: Option<String>,
}

struct Live {
    step: String,
    attempt: u32,
    done: Option<oneshot::Sender<Final>>,
    /// Told once, when the job first runs.
    running: Option<oneshot::Sender<()>>,
    /// Rounds in which the query did not list it.
    missing: u32,
    /// Since when someone waits on its end.
    urgent: Option<Instant>,
    /// Its attempt ended on its end record; Slurm's word goes to `confirmed`.
    provisional: bool,
    /// What that end record said.
    expected: Option<Expected>,
    /// Why it is pending, told to its attempt.
    pending: Option<watch::Sender<Option<String>>>,
}

#[derive(Default)]
struct State {
    live: HashMap<String, Live>,
    cancels: Vec<String>,
    started: bool,
    confirmed: Vec<Confirmed>,
    confirming: bool,
    lag_checked: Option<Instant>,
}

/// The run's poller (started with its first job).
pub(crate) struct Poller {
    run_id: String,
    /// Whose jobs: every query and cancel is for this user's jobs only.
    pub(crate) user: String,
    accounting: bool,
    /// Since when the controller (or accounting) has not answered.
    silent: Mutex<Option<(Instant, chrono::DateTime<chrono::Utc>)>>,
    state: Mutex<State>,
    wake: Notify,
    round_done: Notify,
    /// `squeue -O exit_code` works (Slurm 21.08 and later).
    squeue_exit: AtomicBool,
    /// Queries sent to the controller and accounting (sacct, squeue, scontrol,
    /// scancel); submissions are counted apart.
    pub queries: AtomicU64,
    /// `sbatch` calls.
    pub submits: AtomicU64,
    /// Logs frozen before their job had opened them (`freeze`).
    late: Mutex<Vec<std::path::PathBuf>>,
}

/// Cancel every job of the run by name, this user's only, waiting at most 5 s:
/// a controller that does not answer cannot hold the watchdog's exit.
pub(crate) fn cancel_run_now(run_id: &str) {
    let Ok(mut child) = std::process::Command::new("scancel")
        .arg(format!("--name={run_id}"))
        .arg(format!("--user={}", current_user()))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    else {
        return;
    };
    for _ in 0..50 {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The user running this process, as Slurm names users (`--user`).
pub fn current_user() -> String {
    let uid = nix::unistd::geteuid();
    nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string())
}

/// Whether `comment` is an attempt's (`<step>/<n>`), as this backend writes them.
pub(crate) fn attempt_comment(comment: &str) -> Option<(&str, u32)> {
    let (step, n) = comment.rsplit_once('/')?;
    let n: u32 = n.parse().ok()?;
    (!step.is_empty()).then_some((step, n))
}

/// Whether `comment` is one this backend gives a job: an attempt's or an array's.
pub(crate) fn run_comment(comment: &str) -> bool {
    attempt_comment(comment).is_some() || comment.starts_with(super::submitter::ARRAY_COMMENT)
}

/// A command's stdout, counted as a query; `None` when it could not run or failed.
async fn query(counter: &AtomicU64, program: &str, args: &[&str]) -> Option<String> {
    counter.fetch_add(1, Ordering::Relaxed);
    let out = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    // A controller that does not answer in this long is taken as silent (Slurm's
    // own MessageTimeout is 10 s): the run says so and goes on what it knows.
    match tokio::time::timeout(QUERY_TIMEOUT, out).await {
        Ok(Ok(o)) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(Ok(o)) => {
            tracing::debug!(
                "{program} {args:?}: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            None
        }
        _ => None,
    }
}

/// Says, on every end in `seen`, why it was read where it was.
fn say_why(seen: &mut HashMap<String, Seen>, why: &str) {
    for s in seen.values_mut() {
        if let Seen::Ended(fin) = s {
            fin.why = Some(why.to_string());
        }
    }
}

/// What an attempt is told of its job.
pub(crate) struct Watched {
    /// Told once, when the job first runs.
    pub running: oneshot::Receiver<()>,
    /// Its end, as the scheduler tells it.
    pub done: oneshot::Receiver<Final>,
    /// Why it waits in the queue, while it does.
    pub pending: watch::Receiver<Option<String>>,
}

/// What one round learnt of a job.
enum Seen {
    /// Waiting in the queue, and Slurm's reason.
    Pending(Option<String>),
    Running,
    Ended(Final),
    Missing,
}

impl Poller {
    pub(crate) fn new(run_id: &str, accounting: bool) -> Arc<Poller> {
        Arc::new(Poller {
            run_id: run_id.to_string(),
            user: current_user(),
            accounting,
            silent: Mutex::new(None),
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            round_done: Notify::new(),
            squeue_exit: AtomicBool::new(true),
            queries: AtomicU64::new(0),
            submits: AtomicU64::new(0),
            late: Mutex::new(Vec::new()),
        })
    }

    fn add(self: &Arc<Self>, job: &str, live: Live) {
        let (start, was_idle) = {
            let Ok(mut st) = self.state.lock() else {
                return;
            };
            let was_idle = st.live.is_empty();
            st.live.insert(job.to_string(), live);
            (!std::mem::replace(&mut st.started, true), was_idle)
        };
        if start {
            let me = Arc::clone(self);
            tokio::spawn(async move { me.rounds().await });
        } else if was_idle {
            self.wake.notify_one();
        }
    }

    /// Watch `job`: told when it first runs, and its end.
    pub(crate) fn watch(self: &Arc<Self>, job: &str, step: &str, attempt: u32) -> Watched {
        let (run_tx, run_rx) = oneshot::channel();
        let (done_tx, done_rx) = oneshot::channel();
        let (pending_tx, pending_rx) = watch::channel(None);
        self.add(
            job,
            Live {
                step: step.to_string(),
                attempt,
                done: Some(done_tx),
                running: Some(run_tx),
                missing: 0,
                urgent: None,
                provisional: false,
                expected: None,
                pending: Some(pending_tx),
            },
        );
        Watched {
            running: run_rx,
            done: done_rx,
            pending: pending_rx,
        }
    }

    /// Since when (and since what time of day) neither the controller nor
    /// accounting has answered a query; `None` while they answer.
    pub(crate) fn silent_since(&self) -> Option<(Instant, chrono::DateTime<chrono::Utc>)> {
        self.silent.lock().ok().and_then(|s| *s)
    }

    /// A query of the run's, counted, and whether the controller answers noted.
    async fn ask(&self, program: &str, args: &[&str]) -> Option<String> {
        let r = query(&self.queries, program, args).await;
        // The controller's silence: accounting (sacct, its own daemon) answering
        // says nothing of it.
        let controller = matches!(program, "squeue" | "scontrol");
        if let (true, Ok(mut s)) = (controller, self.silent.lock()) {
            match r {
                Some(_) => *s = None,
                None => {
                    if s.is_none() {
                        tracing::warn!(
                            "the Slurm controller does not answer ({program} failed); waiting on what the jobs' own records say"
                        );
                    }
                    s.get_or_insert((Instant::now(), chrono::Utc::now()));
                }
            }
        }
        r
    }

    /// A job of an earlier orchestrator of this run whose attempt ended on its end
    /// record, to be confirmed (`resume`).
    pub(crate) fn expect(self: &Arc<Self>, job: &str, step: &str, attempt: u32) {
        self.add(
            job,
            Live {
                step: step.to_string(),
                attempt,
                done: None,
                running: None,
                missing: 0,
                urgent: None,
                provisional: true,
                expected: None,
                pending: None,
            },
        );
    }

    fn lag_check_due(&self) -> bool {
        let Ok(mut st) = self.state.lock() else {
            return false;
        };
        if st.lag_checked.is_some_and(|t| t.elapsed() < LAG_CHECK) {
            return false;
        }
        st.lag_checked = Some(Instant::now());
        true
    }

    fn mark(&self, job: &str, f: impl FnOnce(&mut Live)) {
        if let Ok(mut st) = self.state.lock() {
            if let Some(l) = st.live.get_mut(job) {
                f(l);
            }
        }
    }

    /// Someone waits on `job`'s end now: rounds come at the floor until it is read.
    pub(crate) fn hurry(&self, job: &str) {
        self.mark(job, |l| {
            l.urgent.get_or_insert_with(Instant::now);
        });
        self.wake.notify_one();
    }

    /// `job`'s attempt ended on its own end record: Slurm's word on it is read in a
    /// later round, and kept for [`Poller::confirm`].
    pub(crate) fn defer(&self, job: &str, expected: Expected) {
        self.mark(job, |l| {
            l.provisional = true;
            l.done = None;
            l.expected = Some(expected);
        });
    }

    /// Cancel `job` in the next round (one `scancel` for all asked).
    pub(crate) fn cancel(&self, job: &str) {
        if let Ok(mut st) = self.state.lock() {
            if !st.cancels.iter().any(|j| j == job) {
                st.cancels.push(job.to_string());
            }
            if let Some(l) = st.live.get_mut(job) {
                l.urgent.get_or_insert_with(Instant::now);
            }
        }
        self.wake.notify_one();
    }

    /// Slurm's word on every job whose attempt ended on its end record: waits (rounds
    /// at the floor) until each is read, at most `limit`. Jobs not read by then are
    /// left out.
    pub(crate) async fn confirm(&self, limit: Duration) -> Vec<Confirmed> {
        let deadline = Instant::now() + limit;
        if let Ok(mut st) = self.state.lock() {
            st.confirming = true;
            // Waited on now: past the accounting lag, the controller is asked.
            for l in st.live.values_mut().filter(|l| l.provisional) {
                l.urgent.get_or_insert_with(Instant::now);
            }
        }
        self.wake.notify_one();
        loop {
            let pending = self
                .state
                .lock()
                .map(|st| st.live.values().any(|l| l.provisional))
                .unwrap_or(false);
            if !pending || Instant::now() >= deadline {
                break;
            }
            let notified = self.round_done.notified();
            let _ =
                tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), notified)
                    .await;
        }
        match self.state.lock() {
            Ok(mut st) => {
                st.confirming = false;
                std::mem::take(&mut st.confirmed)
            }
            Err(_) => Vec::new(),
        }
    }

    async fn rounds(self: Arc<Self>) {
        let mut heartbeat = FIRST;
        let mut next = FIRST;
        let mut last = Instant::now();
        loop {
            // Wait for the next round: the heartbeat, or sooner when hurried (but
            // never closer than the floor to the last round).
            tokio::select! {
                _ = tokio::time::sleep(next) => {}
                _ = self.wake.notified() => {
                    let since = last.elapsed();
                    if since < FLOOR {
                        tokio::time::sleep(FLOOR - since).await;
                    }
                }
            }
            let (idle, cancels) = match self.state.lock() {
                Ok(mut st) => (st.live.is_empty(), std::mem::take(&mut st.cancels)),
                Err(_) => return,
            };
            if !cancels.is_empty() {
                let user = format!("--user={}", self.user);
                let mut args: Vec<&str> = vec![user.as_str()];
                args.extend(cancels.iter().map(String::as_str));
                self.ask("scancel", &args).await;
            }
            if idle {
                // Nothing to watch: sleep until a job comes, then its heartbeat.
                self.wake.notified().await;
                heartbeat = FIRST;
                next = FIRST;
                continue;
            }
            self.round().await;
            last = Instant::now();
            self.round_done.notify_waiters();
            let hurried = !cancels.is_empty()
                || self
                    .state
                    .lock()
                    .map(|st| {
                        st.confirming
                            || !st.cancels.is_empty()
                            || st.live.values().any(|l| l.urgent.is_some())
                    })
                    .unwrap_or(false);
            next = if hurried {
                FLOOR
            } else {
                let h = heartbeat;
                heartbeat = (heartbeat * 2).min(CEILING);
                h
            };
        }
    }

    /// One round: the state of every live job; ends the ones that ended.
    async fn round(&self) {
        // (id, hurried past the accounting lag, rounds missing so far)
        let ids: Vec<(String, bool, u32)> = match self.state.lock() {
            Ok(st) => st
                .live
                .iter()
                .map(|(id, l)| {
                    let lagging = l.urgent.is_some_and(|t| t.elapsed() >= ACCOUNTING_LAG);
                    (id.clone(), lagging, l.missing)
                })
                .collect(),
            Err(_) => return,
        };
        let seen = self.look(&ids).await;
        self.apply(seen);
    }

    /// What the controller and accounting say of these jobs this round: one sacct
    /// (or squeue) for all, the controller for hurried jobs accounting lags on, and
    /// one by one for jobs missing for rounds.
    async fn look(&self, ids: &[(String, bool, u32)]) -> HashMap<String, Seen> {
        let mut seen: HashMap<String, Seen> = HashMap::new();
        let from_accounting = if self.accounting {
            self.sacct_round(ids, &mut seen).await
        } else {
            false
        };
        if !from_accounting {
            self.squeue_round(ids, &mut seen).await;
            if self.accounting {
                say_why(
                    &mut seen,
                    "accounting (sacct) did not answer: the end is the controller's word",
                );
            }
        } else {
            // Hurried jobs accounting still shows running long after: the
            // controller's word, one squeue for all of them, at most every
            // LAG_CHECK (a job slow to die on a cancel would otherwise cost one a
            // round).
            let lagging: Vec<(String, bool, u32)> = ids
                .iter()
                .filter(|(id, lag, _)| *lag && !matches!(seen.get(id), Some(Seen::Ended(_))))
                .cloned()
                .collect();
            if !lagging.is_empty() && self.lag_check_due() {
                let mut ctl = HashMap::new();
                self.squeue_round(&lagging, &mut ctl).await;
                say_why(
                    &mut ctl,
                    &format!(
                        "accounting still had the job unfinished {} s after its end: the end is the controller's word",
                        ACCOUNTING_LAG.as_secs()
                    ),
                );
                for (id, s) in ctl {
                    if matches!(s, Seen::Ended(_)) {
                        seen.insert(id, s);
                    }
                }
            }
        }
        // Jobs missing for rounds: the controller, one by one (rare: a job that
        // vanished, or one accounting never heard of).
        for (id, _, missing_before) in ids {
            let missing = matches!(seen.get(id), Some(Seen::Missing));
            if !(missing && missing_before + 1 >= MISSING_ROUNDS) {
                continue;
            }
            if let Some(mut fin) = self.controller(id, true).await {
                if self.accounting {
                    fin.why = Some(format!(
                        "missing from accounting {MISSING_ROUNDS} rounds: the end is the controller's word"
                    ));
                }
                seen.insert(id.clone(), Seen::Ended(fin));
            }
        }
        seen
    }

    /// This round's word into each job's watch: pending reasons, running, ended
    /// (or a confirmation for a job that ended on its own record), and strays.
    fn apply(&self, seen: HashMap<String, Seen>) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let st = &mut *st;
        for (id, what) in seen {
            let Some(live) = st.live.get_mut(&id) else {
                continue;
            };
            if let Some(why) = stray_why(&id, &what, live.expected.as_ref()) {
                if let Some(exp) = &live.expected {
                    for log in &exp.logs {
                        let _ = self.freeze(log);
                    }
                }
                if let Some(live) = st.live.remove(&id) {
                    st.confirmed.push(Confirmed {
                        step: live.step,
                        attempt: live.attempt,
                        job_id: id.clone(),
                        fin: Final {
                            state: "CANCELLED".into(),
                            via: "squeue",
                            ..Final::default()
                        },
                        expected: live.expected,
                        stray: Some(why),
                    });
                }
                if !st.cancels.contains(&id) {
                    st.cancels.push(id);
                }
                continue;
            }
            match what {
                Seen::Missing => live.missing += 1,
                Seen::Pending(reason) => {
                    live.missing = 0;
                    if let Some(tx) = &live.pending {
                        tx.send_if_modified(|r| {
                            let changed = *r != reason;
                            *r = reason;
                            changed
                        });
                    }
                }
                Seen::Running => {
                    live.missing = 0;
                    if let Some(tx) = live.pending.take() {
                        let _ = tx.send(None);
                    }
                    if let Some(tx) = live.running.take() {
                        let _ = tx.send(());
                    }
                }
                Seen::Ended(fin) => {
                    let Some(mut live) = st.live.remove(&id) else {
                        continue;
                    };
                    if let Some(tx) = live.running.take() {
                        let _ = tx.send(());
                    }
                    let told = match live.done.take() {
                        Some(tx) => tx.send(fin.clone()).is_ok(),
                        None => false,
                    };
                    if !told && live.provisional {
                        st.confirmed.push(Confirmed {
                            step: live.step,
                            attempt: live.attempt,
                            job_id: id,
                            fin,
                            expected: live.expected,
                            stray: None,
                        });
                    }
                }
            }
        }
    }

    /// One `sacct` for all (in chunks of [`CHUNK`] ids); false when accounting did
    /// not answer.
    async fn sacct_round(
        &self,
        ids: &[(String, bool, u32)],
        seen: &mut HashMap<String, Seen>,
    ) -> bool {
        let mut acct: HashMap<String, Acct> = HashMap::new();
        // An array's tasks are asked by the array's id: accounting lists its
        // pending tasks under it alone (`12_[4-9]`), not under theirs.
        let mut asked: Vec<&str> = Vec::new();
        let mut seen_base = std::collections::HashSet::new();
        for (id, _, _) in ids {
            let q = super::ids::base(id);
            if seen_base.insert(q) {
                asked.push(q);
            }
        }
        for chunk in asked.chunks(CHUNK) {
            let jobs = format!("--jobs={}", chunk.join(","));
            let Some(text) = self.ask("sacct", &["-n", "-P", &jobs, SACCT_FORMAT]).await else {
                return false;
            };
            acct.extend(sacct_jobs(&text));
        }
        // Only this run's jobs of this user count: an id that names another's job
        // (a journal edited to adopt one) is not ours to read.
        acct.retain(|_, a| {
            (a.user.is_empty() || a.user == self.user)
                && (a.name.is_empty() || a.name == self.run_id || a.name == UNNAMED)
        });
        for (id, _, _) in ids {
            // slurmdbd heard of the job's steps before its start: it names it
            // "allocation" until then, and its state is not the job's yet. No news.
            if acct.get(id).is_some_and(|a| a.name == UNNAMED) {
                continue;
            }
            let s = match acct.remove(id) {
                None => Seen::Missing,
                Some(a) => {
                    let state = JobState::parse(&a.state);
                    if state.is_final() {
                        Seen::Ended(Final {
                            state: state.to_string(),
                            exit_code: Some(a.exit_code),
                            derived_exit_code: Some(a.derived_exit_code).filter(|d| !d.is_empty()),
                            elapsed: Some(a.elapsed).filter(|e| !e.is_empty()),
                            end: Some(a.end).filter(|e| !e.is_empty() && e != "Unknown"),
                            node: Some(a.node).filter(|n| !n.is_empty() && n != "None assigned"),
                            max_rss: a.max_rss,
                            step_nodes: a.step_nodes,
                            via: "sacct",
                            why: None,
                        })
                    } else if state.is_running() {
                        Seen::Running
                    } else {
                        Seen::Pending(Some(a.reason).filter(|r| !r.is_empty() && r != "None"))
                    }
                }
            };
            seen.insert(id.clone(), s);
        }
        true
    }

    /// One `squeue --name <run-id>` for all, with exit codes where squeue has them.
    async fn squeue_round(&self, ids: &[(String, bool, u32)], seen: &mut HashMap<String, Seen>) {
        // The controller did not answer: nothing learnt; ask again next round.
        let Some(lines) = self.queue(true).await else {
            return;
        };
        let lines: HashMap<String, QueueLine> =
            lines.into_iter().map(|q| (q.id.clone(), q)).collect();
        for (id, _, _) in ids {
            let s = match lines.get(id) {
                None => Seen::Missing,
                Some(q) if q.state.is_final() && q.exit_code.is_some() => Seen::Ended(Final {
                    state: q.state.to_string(),
                    exit_code: q.exit_code.clone(),
                    node: Some(q.nodes.clone()).filter(|n| !n.is_empty() && n != "(null)"),
                    via: "squeue",
                    ..Final::default()
                }),
                // Ended, but without its exit code: the controller tells it.
                Some(q) if q.state.is_final() => match self.controller(id, false).await {
                    Some(f) => Seen::Ended(f),
                    None => Seen::Running,
                },
                Some(q) if q.state.is_running() => Seen::Running,
                Some(q) => Seen::Pending(q.reason.clone()),
            };
            seen.insert(id.clone(), s);
        }
    }

    /// The controller's word on one job (`scontrol show job`): its end, or `None`
    /// while it has not ended. A job it does not know either has vanished when
    /// `gone` (missing for rounds): `UNKNOWN`.
    async fn controller(&self, id: &str, gone: bool) -> Option<Final> {
        let text = self.ask("scontrol", &["show", "job", "-o", id]).await;
        let f = text.as_deref().map(scontrol_fields).unwrap_or_default();
        // Another user's job, or another run's, is not this attempt's.
        let foreign = f.get("JobName").is_some_and(|n| *n != self.run_id)
            || f.get("UserId")
                .is_some_and(|u| !u.starts_with(&format!("{}(", self.user)));
        if foreign {
            return Some(Final {
                state: "UNKNOWN".into(),
                via: "scontrol",
                ..Final::default()
            });
        }
        match f.get("JobState").map(|s| JobState::parse(s)) {
            Some(s) if s.is_final() => Some(Final {
                state: s.to_string(),
                exit_code: f.get("ExitCode").cloned(),
                derived_exit_code: f.get("DerivedExitCode").cloned(),
                elapsed: f.get("RunTime").cloned(),
                end: f.get("EndTime").cloned().filter(|e| e != "Unknown"),
                node: f.get("NodeList").cloned().filter(|n| n != "(null)"),
                max_rss: None,
                step_nodes: None,
                via: "scontrol",
                why: None,
            }),
            Some(_) => None,
            // Neither accounting nor the controller knows it: the job vanished (a
            // controller that does not answer says nothing of the kind).
            None if gone && text.is_none() && self.silent_since().is_none() => Some(Final {
                state: "UNKNOWN".into(),
                via: "scontrol",
                ..Final::default()
            }),
            None => None,
        }
    }

    /// Accounting's word on this user's jobs named as this run is, since `since`,
    /// by id (read as every sacct answer is, [`sacct_jobs`]); `None` without
    /// accounting or its answer.
    pub(crate) async fn accounting_of_run(
        &self,
        since: &str,
    ) -> Option<std::collections::HashMap<String, super::state::Acct>> {
        if !self.accounting {
            return None;
        }
        let name = format!("--name={}", self.run_id);
        let user = format!("--user={}", self.user);
        let start = format!("--starttime={since}");
        let args = ["-n", "-P", "-X", &name, &user, &start, SACCT_FORMAT];
        Some(sacct_jobs(&self.ask("sacct", &args).await?))
    }

    /// This user's jobs of this run the controller lists (with `all`, those that
    /// ended lately too), each with its attempt's comment; `None` when squeue did
    /// not answer.
    pub(crate) async fn queue(&self, all: bool) -> Option<Vec<QueueLine>> {
        let name = format!("--name={}", self.run_id);
        let user = format!("--user={}", self.user);
        let mut args = vec!["-h", name.as_str(), user.as_str()];
        if all {
            args.push("--states=all");
        }
        let with_exit = self.squeue_exit.load(Ordering::Relaxed);
        let mut fmt = if with_exit {
            ["-O", SQUEUE_FIELDS]
        } else {
            ["-o", SQUEUE_PLAIN]
        };
        let mut text = self.ask("squeue", &[args.as_slice(), &fmt].concat()).await;
        if text.is_none() && with_exit {
            // An older squeue without exit_code: the plain format from now on.
            self.squeue_exit.store(false, Ordering::Relaxed);
            fmt = ["-o", SQUEUE_PLAIN];
            text = self.ask("squeue", &[args.as_slice(), &fmt].concat()).await;
        }
        // An array's pending tasks come as one line (`12_[4-9%2]`): one each.
        Some(
            text?
                .lines()
                .filter_map(squeue_line)
                .filter(|q| q.user.is_empty() || q.user == self.user)
                .flat_map(|q| {
                    let ids = super::ids::expand(&q.id).unwrap_or_default();
                    ids.into_iter().map(move |id| QueueLine { id, ..q.clone() })
                })
                .collect(),
        )
    }

    /// The run's jobs still queued or running (`id STATE`), this user's and with an
    /// attempt's comment only; `None` when squeue did not answer.
    pub(crate) async fn still_there(&self) -> Option<Vec<String>> {
        Some(
            self.queue(false)
                .await?
                .into_iter()
                .filter(|q| q.comment.is_empty() || run_comment(&q.comment))
                .map(|q| format!("{} {}", q.id, q.state))
                .collect(),
        )
    }

    /// Cancel every job of the run at once: this user's jobs named for the run and
    /// commented as one of its attempts, by id (never another user's job that
    /// happens to share the name).
    /// Keep `log` as it is now (`freeze_log`); one not there yet is remembered.
    /// `false` when the log was not there yet.
    pub(crate) fn freeze(&self, log: &std::path::Path) -> bool {
        let there = super::freeze_log(log);
        if !there {
            if let Ok(mut late) = self.late.lock() {
                late.push(log.to_path_buf());
            }
        }
        there
    }

    /// The logs `freeze` found missing, taken.
    pub(crate) fn late_logs(&self) -> Vec<std::path::PathBuf> {
        self.late
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default()
    }

    /// `hard`: SIGKILL to every step of each job first (the batch step too), so a
    /// command that ignores SIGTERM does not hold the job for Slurm's KillWait.
    pub(crate) async fn cancel_all(&self, hard: bool) {
        let Some(jobs) = self.queue(false).await else {
            return;
        };
        // An array goes whole, by its own id (all its tasks are the run's).
        let mut ids: Vec<String> = Vec::new();
        let mut named = std::collections::HashSet::new();
        for q in jobs.into_iter().filter(|q| run_comment(&q.comment)) {
            let id = if attempt_comment(&q.comment).is_some() {
                q.id
            } else {
                super::ids::base(&q.id).to_string()
            };
            if named.insert(id.clone()) {
                ids.push(id);
            }
        }
        if ids.is_empty() {
            return;
        }
        let user = format!("--user={}", self.user);
        if hard {
            let mut args: Vec<&str> = vec![user.as_str(), "--signal=KILL", "--full"];
            args.extend(ids.iter().map(String::as_str));
            self.ask("scancel", &args).await;
        }
        let mut args: Vec<&str> = vec![user.as_str()];
        args.extend(ids.iter().map(String::as_str));
        self.ask("scancel", &args).await;
    }
}
/// Still in the queue long after its own end record said its command ended, or
/// past its timeout: that end record was not the job's end, and why.
fn stray_why(id: &str, what: &Seen, expected: Option<&Expected>) -> Option<String> {
    let exp = expected?;
    let state = match what {
        Seen::Running => "running",
        Seen::Pending(_) => "pending",
        _ => return None,
    };
    if exp.deadline.is_some_and(|d| Instant::now() >= d) {
        Some(format!(
            "Slurm still had job {id} {state} at its timeout, after its end record said its command had ended: cancelled"
        ))
    } else if exp.ended.elapsed() >= STRAY_AFTER {
        Some(format!(
            "Slurm still had job {id} {state} {} s after its end record said its command had ended (a record the job could have forged): cancelled",
            exp.ended.elapsed().as_secs()
        ))
    } else {
        None
    }
}
