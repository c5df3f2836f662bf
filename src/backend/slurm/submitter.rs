//! Submitting a run's jobs: one submitter per run gathers the attempts that are
//! ready at the same moment and submits those of one step that ask for the same
//! resources as one job array (`sbatch --array=0-N%T`): one call to the
//! controller instead of one per attempt. Each task runs its attempt's own
//! `job.sh` (the array's script picks it by `SLURM_ARRAY_TASK_ID`), and from there
//! on is followed, confirmed and cancelled by its id (`123_4`) exactly as a job
//! of its own. An attempt alone (a retry, a single step) is a job of its own, as
//! before.
//!
//! The run keeps under the cluster's limits ([`super::limits`]): an array is at
//! most `MaxArraySize` tasks, and the run never has more jobs queued than the
//! user's `MaxSubmitJobs` leaves beside their other jobs. It also keeps the
//! run's jobs running at once to its throttle (`--jobs`, or `[backend]
//! array_parallelism`): each submission claims `min(throttle, unfinished tasks)`
//! of it, a new one takes what is free, and what frees once nothing more can be
//! submitted goes to the arrays already queued (`scontrol update
//! ArrayTaskThrottle`). A submission refused for a submit limit is put back and
//! tried again once the user's queue has room: never a step's failure.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};

use super::{limits, poll, sh_quote, slurm_filename};
use crate::backend::OnNote;
use crate::isolate::JobFile;

/// How long the submitter waits for more attempts after one arrives: the
/// scheduler hands a step's ready cells over within milliseconds of each other.
const GATHER: Duration = Duration::from_millis(40);
/// The longest it gathers before it submits what it has.
const GATHER_MOST: Duration = Duration::from_millis(400);
/// How long a submission refused for a submit limit waits before it is tried
/// again (sooner when one of the run's jobs ends).
const LIMIT_WAIT: Duration = Duration::from_secs(5);
/// The comment of an array's job: never an attempt's (`<step>/<n>`: no step id
/// holds a `:`).
pub(crate) const ARRAY_COMMENT: &str = "orchestrate-array:";

/// One attempt that wants a job.
pub(crate) struct Ticket {
    /// What may share an array with it: its step's base id and every sbatch
    /// argument but those naming the attempt.
    pub key: String,
    pub step: String,
    pub attempt: u32,
    /// Its sbatch arguments as a job of its own.
    pub args: Vec<String>,
    /// The attempt's folder (its `job.sh`), the record folder, its spec file.
    pub logs: PathBuf,
    pub record_dir: PathBuf,
    pub private: PathBuf,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// A multi-node step's: `slurm-exec` runs in the batch step and starts the
    /// command's tasks itself.
    pub fan_out: bool,
    pub on_note: Option<OnNote>,
    pub reply: oneshot::Sender<Result<Placed, String>>,
}

/// Where an attempt's job went.
pub(crate) struct Placed {
    pub id: String,
    /// Its `job.sh`, relative to the record folder.
    pub script: String,
    /// The array's script, when it is an array's task (hashed with the attempt).
    pub array: Option<JobFile>,
    pub notes: Vec<String>,
    /// Its share of the run's throttle, given back when dropped (the attempt
    /// ended).
    pub slot: Slot,
}

/// A submission still holding part of the throttle.
struct LiveSub {
    /// The job's id, or the array's.
    id: String,
    array: bool,
    throttle: usize,
    unfinished: usize,
    /// Submitted held (`--hold`): queued, none of it may run until released.
    held: bool,
}

impl LiveSub {
    fn claim(&self) -> usize {
        if self.held {
            0
        } else {
            self.throttle.min(self.unfinished)
        }
    }
}

#[derive(Default)]
pub(super) struct State {
    queue: VecDeque<Ticket>,
    live: Vec<LiveSub>,
    started: bool,
    /// Read with the first submission.
    limits: Option<limits::Limits>,
    /// The user's jobs that are not this run's, as last counted.
    others: usize,
    /// Jobs named for this run in the queue, as last counted: a detached run's
    /// submitted jobs, which it no longer watches but which will make room.
    named: usize,
    /// Arrays submitted so far (named in their scripts' file names).
    pub(super) arrays: u64,
    /// Submissions refused for a submit limit so far.
    pub refusals: u64,
}

impl State {
    /// The run's own jobs not yet ended, as its live submissions count them.
    fn ours(&self) -> usize {
        self.live.iter().map(|l| l.unfinished).sum()
    }
}

/// The run's submitter (started with its first ticket).
pub(crate) struct Submitter {
    pub(super) run_id: String,
    exe: PathBuf,
    srun: PathBuf,
    pub(super) poller: Arc<poll::Poller>,
    throttle: usize,
    /// A detached run's: no array held for a share of the throttle.
    detached: bool,
    state: Mutex<State>,
    wake: Notify,
}

/// A ticket's share of the throttle: given back when dropped.
pub(crate) struct Slot {
    submitter: Option<Arc<Submitter>>,
    id: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(s) = self.submitter.take() else {
            return;
        };
        if let Ok(mut st) = s.state.lock() {
            if let Some(i) = st.live.iter().position(|l| l.id == self.id) {
                st.live[i].unfinished = st.live[i].unfinished.saturating_sub(1);
                if st.live[i].unfinished == 0 {
                    st.live.remove(i);
                }
            }
        }
        s.wake.notify_one();
    }
}

impl Submitter {
    pub(crate) fn new(
        run_id: &str,
        exe: PathBuf,
        srun: PathBuf,
        poller: Arc<poll::Poller>,
        throttle: usize,
        detached: bool,
    ) -> Arc<Submitter> {
        Arc::new(Submitter {
            run_id: run_id.to_string(),
            exe,
            srun,
            poller,
            throttle: throttle.max(1),
            detached,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
        })
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Submissions refused for a submit limit so far (each tried again).
    pub(crate) fn refusals(&self) -> u64 {
        self.state.lock().map(|s| s.refusals).unwrap_or(0)
    }

    /// Hand an attempt over; its job's id comes back on the ticket's reply.
    pub(crate) fn enqueue(self: &Arc<Self>, t: Ticket) {
        let start = {
            let Ok(mut st) = self.state.lock() else {
                let _ = t
                    .reply
                    .send(Err("the submitter's state is poisoned".into()));
                return;
            };
            st.queue.push_back(t);
            !std::mem::replace(&mut st.started, true)
        };
        if start {
            let me = Arc::clone(self);
            tokio::spawn(async move { me.rounds().await });
        }
        self.wake.notify_one();
    }

    async fn rounds(self: Arc<Self>) {
        loop {
            self.wake.notified().await;
            self.gather().await;
            if self.limits_missing() {
                let l = self.read_limits().await;
                if let Ok(mut st) = self.state.lock() {
                    st.limits = Some(l.0);
                    st.others = l.1;
                }
            }
            let mut refused = false;
            while let Some(batch) = self.next_batch() {
                if let Err(wait) = self.submit(batch).await {
                    // Refused for a submit limit: the queue has it back; wait for
                    // room (a job of the run ending wakes this sooner).
                    let _ = tokio::time::timeout(wait, self.wake.notified()).await;
                    self.recount().await;
                    self.wake.notify_one();
                    refused = true;
                    break;
                }
            }
            self.rebalance().await;
            if !refused && self.waits_on_others() {
                // No job of this run will end here to make room (a detached run
                // stops watching each job once it is submitted): count the
                // user's queue again until there is.
                let _ = tokio::time::timeout(LIMIT_WAIT, self.wake.notified()).await;
                self.recount().await;
                self.wake.notify_one();
            }
        }
    }

    /// Tickets wait for room in the submit limit while none of the run's own
    /// submissions is live: only jobs it no longer watches can make that room.
    fn waits_on_others(&self) -> bool {
        self.state
            .lock()
            .is_ok_and(|st| !st.queue.is_empty() && st.ours() == 0)
    }

    /// Wait until no ticket has come for [`GATHER`], at most [`GATHER_MOST`].
    async fn gather(&self) {
        let t0 = tokio::time::Instant::now();
        let mut seen = self.queued();
        loop {
            tokio::time::sleep(GATHER).await;
            let now = self.queued();
            if now == seen || t0.elapsed() >= GATHER_MOST {
                return;
            }
            seen = now;
        }
    }

    fn queued(&self) -> usize {
        self.state.lock().map(|s| s.queue.len()).unwrap_or(0)
    }

    fn limits_missing(&self) -> bool {
        self.state
            .lock()
            .map(|s| s.limits.is_none())
            .unwrap_or(false)
    }

    /// The cluster's limits and the user's jobs already there, read off the
    /// runtime's threads (sacctmgr and scontrol block).
    async fn read_limits(&self) -> (limits::Limits, usize) {
        let (user, run) = (self.poller.user.clone(), self.run_id.clone());
        self.poller.queries.fetch_add(3, Ordering::Relaxed);
        tokio::task::spawn_blocking(move || {
            (
                limits::read(&user, None, None),
                limits::queued(&user, &run).map_or(0, |q| q.0),
            )
        })
        .await
        .unwrap_or((
            limits::Limits {
                max_array: limits::DEFAULT_MAX_ARRAY,
                max_submit: None,
            },
            0,
        ))
    }

    /// After a refusal: the user's jobs that are not this run's, counted anew.
    async fn recount(&self) {
        let (user, run) = (self.poller.user.clone(), self.run_id.clone());
        self.poller.queries.fetch_add(1, Ordering::Relaxed);
        let n = tokio::task::spawn_blocking(move || limits::queued(&user, &run))
            .await
            .ok()
            .flatten();
        if let (Some((n, named)), Ok(mut st)) = (n, self.state.lock()) {
            let ours = st.ours();
            st.others = n.saturating_sub(ours);
            st.named = named.saturating_sub(ours);
        }
    }

    /// The next tickets to submit together, and the throttle they may take (0:
    /// none free now, so the array goes held and is released when some is);
    /// `None` when nothing is queued, or the user's submit limit has no room for
    /// a whole array now while the run's own jobs will make some.
    fn next_batch(&self) -> Option<(Vec<Ticket>, usize)> {
        let mut st = self.state.lock().ok()?;
        // Tickets whose attempt was cancelled while they waited.
        st.queue.retain(|t| !t.reply.is_closed());
        let claimed: usize = st.live.iter().map(LiveSub::claim).sum();
        // A detached run's arrays each run at most `throttle` tasks at once:
        // none is held, as nobody stays to release it.
        let free = if self.detached {
            self.throttle
        } else {
            self.throttle.saturating_sub(claimed)
        };
        let ours = st.ours();
        let limits = st.limits.clone()?;
        let room = match &limits.max_submit {
            Some((n, _)) => n.saturating_sub(st.others + ours),
            None => usize::MAX,
        };
        if room == 0 || st.queue.is_empty() {
            return None;
        }
        let key = st.queue.front()?.key.clone();
        let alike = st.queue.iter().filter(|t| t.key == key).count();
        let whole = alike.min(limits.max_array.max(1));
        // Part of an array now is another sbatch later: wait for room for all of
        // it (or half the limit, when an array is larger) while the run's own
        // jobs will make some by ending (those it watches, and a detached run's
        // that it let go), not while only others' jobs could. A job of its own
        // needs a free slot of the throttle.
        let enough = limits
            .max_submit
            .as_ref()
            .map_or(whole, |(n, _)| whole.min((n / 2).max(1)));
        let most = if room >= enough {
            room.min(whole)
        } else if ours == 0 && st.named == 0 {
            room
        } else {
            return None;
        };
        if free == 0 && most == 1 {
            return None;
        }
        let mut batch = Vec::new();
        let mut rest = VecDeque::new();
        while let Some(t) = st.queue.pop_front() {
            if t.key == key && batch.len() < most {
                batch.push(t);
            } else {
                rest.push_back(t);
            }
        }
        st.queue = rest;
        let throttle = free.min(batch.len());
        Some((batch, throttle))
    }

    /// Put refused tickets back at the head of the queue, in their order.
    fn put_back(&self, batch: Vec<Ticket>, why: &str) {
        for t in &batch {
            if let Some(n) = &t.on_note {
                n(why);
            }
        }
        if let Ok(mut st) = self.state.lock() {
            st.refusals += 1;
            for t in batch.into_iter().rev() {
                st.queue.push_front(t);
            }
        }
    }

    /// Submit one batch: a job of its own for one ticket, an array for more.
    /// `Err(wait)`: refused for a submit limit, put back.
    async fn submit(
        self: &Arc<Self>,
        (batch, throttle): (Vec<Ticket>, usize),
    ) -> Result<(), Duration> {
        let got = if batch.len() == 1 {
            self.submit_one(&batch[0]).await
        } else {
            self.submit_array(&batch, throttle).await
        };
        match got {
            Ok(mut placed) => {
                let (id, array) = (placed.id.clone(), batch.len() > 1);
                if let Ok(mut st) = self.state.lock() {
                    st.live.push(LiveSub {
                        id: id.clone(),
                        array,
                        throttle: if array { throttle.max(1) } else { 1 },
                        unfinished: batch.len(),
                        held: array && throttle == 0,
                    });
                }
                for (i, t) in batch.into_iter().enumerate() {
                    let task = if array {
                        format!("{id}_{i}")
                    } else {
                        id.clone()
                    };
                    let p = Placed {
                        id: task.clone(),
                        script: rel(&t.record_dir, &t.logs.join("job.sh")),
                        array: placed.array.clone(),
                        notes: std::mem::take(&mut placed.notes),
                        slot: Slot {
                            submitter: Some(Arc::clone(self)),
                            id: id.clone(),
                        },
                    };
                    // Its attempt was cancelled meanwhile: the job goes too.
                    if t.reply.send(Ok(p)).is_err() {
                        self.poller.cancel(&task);
                    }
                }
                Ok(())
            }
            Err(Refusal::Limit(why)) => {
                self.put_back(batch, &format!("waiting: Slurm refused the submission for a submit limit ({why}); tried again when the queue has room"));
                Err(LIMIT_WAIT)
            }
            Err(Refusal::Other(why)) => {
                for t in batch {
                    let _ = t.reply.send(Err(why.clone()));
                }
                Ok(())
            }
        }
    }

    /// What of the throttle is free goes to the arrays already queued, oldest
    /// first: a held one is given its share and released; once none is held, the
    /// ones running get more, so their last tasks do not run a few at a time.
    async fn rebalance(&self) {
        // (array, its throttle now, release it)
        let changes: Vec<(String, usize, bool)> = {
            let mut st = self.lock();
            let claimed: usize = st.live.iter().map(LiveSub::claim).sum();
            let mut free = self.throttle.saturating_sub(claimed);
            let mut out = Vec::new();
            let held = st.live.iter().any(|l| l.held);
            for l in st.live.iter_mut().filter(|l| l.array && l.held == held) {
                if free == 0 {
                    break;
                }
                let more = if l.held {
                    free.min(l.unfinished)
                } else {
                    free.min(l.unfinished.saturating_sub(l.throttle))
                };
                if more > 0 {
                    l.throttle = if l.held { more } else { l.throttle + more };
                    free -= more;
                    out.push((l.id.clone(), l.throttle, l.held));
                    l.held = false;
                }
            }
            out
        };
        for (id, t, release) in changes {
            let job = format!("JobId={id}");
            let throttle = format!("ArrayTaskThrottle={t}");
            self.control(&["update", &job, &throttle]).await;
            if release {
                self.control(&["release", &id]).await;
            }
        }
    }

    /// An `scontrol` command of the run's (counted as a query).
    async fn control(&self, args: &[&str]) {
        self.poller.queries.fetch_add(1, Ordering::Relaxed);
        let out = tokio::process::Command::new("scontrol")
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .await;
        // An array some of whose tasks ended answers per range: those are no
        // failure, the rest took the change ("No error").
        let failed = |o: &&std::process::Output| {
            !o.status.success()
                && String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .any(|l| !(l.ends_with("Job has already finished") || l.ends_with("No error")))
        };
        if let Some(o) = out.as_ref().ok().filter(failed) {
            tracing::warn!(
                "scontrol {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
    }

    /// The job script of an attempt: `srun` runs `slurm-exec` on its spec file.
    /// An array's task names its logs to srun (the array's own output is one
    /// file for all its tasks).
    pub(super) fn script(&self, t: &Ticket, header: &str, task: bool) -> String {
        let mut s = String::from("#!/bin/sh\n");
        s.push_str(header);
        if t.fan_out {
            // Its tasks are a step of their own (srun inside slurm-exec): a step
            // around slurm-exec would hold the first node's share they need.
            s.push_str(&format!(
                "exec {} slurm-exec {}\n",
                sh_quote(&self.exe.to_string_lossy()),
                sh_quote(&t.private.to_string_lossy())
            ));
            return s;
        }
        let logs = if task {
            format!(
                " --output={} --error={} --open-mode=append",
                sh_quote(&slurm_filename(&t.stdout.to_string_lossy())),
                sh_quote(&slurm_filename(&t.stderr.to_string_lossy()))
            )
        } else {
            String::new()
        };
        s.push_str(&format!(
            "exec {} --ntasks=1 --kill-on-bad-exit=1 --export=NONE{logs} {} slurm-exec {}\n",
            sh_quote(&self.srun.to_string_lossy()),
            sh_quote(&self.exe.to_string_lossy()),
            sh_quote(&t.private.to_string_lossy())
        ));
        s
    }

    pub(super) fn header(&self, t: &Ticket, what: &str, args: &[String]) -> String {
        // The header is a comment for people: each argument quoted as sh would
        // take it (none holds a control character: refused before).
        let shown: Vec<String> = args.iter().map(|a| sh_quote(a)).collect();
        format!(
            "# orchestrate run {}, step {}, attempt {}{what}: submitted as\n#   sbatch {}\n",
            self.run_id,
            t.step,
            t.attempt,
            shown.join(" ")
        )
    }
}

/// Why a submission did not make a job.
pub(crate) enum Refusal {
    /// A submit limit: wait and try again.
    Limit(String),
    Other(String),
}

/// `path` relative to the record folder.
pub(crate) fn rel(record_dir: &Path, path: &Path) -> String {
    path.strip_prefix(record_dir)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Write `bytes` as `name` in the folder `dir` (made if missing), atomically.
pub(crate) fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let d =
        crate::fsx::Dir::open(dir).map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
    d.write_atomic(&d, name, bytes, 0o644)
        .map_err(|e| format!("cannot write {}: {e}", dir.join(name).display()))
}

/// The sbatch arguments a ticket's job shares with its step's other attempts
/// (those naming the attempt itself left out).
pub(crate) fn shared_args(args: &[String]) -> Vec<String> {
    args.iter()
        .filter(|a| {
            !(a.starts_with("--comment=")
                || a.starts_with("--output=")
                || a.starts_with("--error="))
        })
        .cloned()
        .collect()
}

/// A random tag naming an array (its comment and its script's file name).
pub(crate) fn array_tag(seq: u64) -> String {
    let mut k = [0u8; 4];
    let _ = getrandom::fill(&mut k);
    let hex: String = k.iter().map(|b| format!("{b:02x}")).collect();
    format!("{seq}-{hex}")
}
