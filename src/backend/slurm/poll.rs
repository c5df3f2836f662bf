//! One poller per run: every round, one `squeue --name <run-id>` for all the run's
//! live jobs (never one query per job), and one `scancel` for every cancel asked
//! since the last round. The interval backs off while nothing changes: from
//! [`FLOOR`] (a job starts 0.4–0.7 s after `sbatch` here, and a short one ends
//! within a second of that) doubling to [`CEILING`] (a long job costs the controller
//! 12 queries a minute), and drops back to the floor whenever a job changes state
//! or a new one is submitted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};

use super::state::{scontrol_fields, squeue_line, JobState};

pub const FLOOR: Duration = Duration::from_millis(200);
pub const CEILING: Duration = Duration::from_secs(5);

/// A job's end as the scheduler tells it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Final {
    pub state: String,
    pub exit_code: Option<String>,
    pub node: Option<String>,
    pub max_rss: Option<u64>,
    /// Where the end state was read: "sacct", "scontrol", or "squeue" alone.
    pub via: &'static str,
}

/// One job's line (and its steps') in `sacct`.
#[derive(Debug, Default)]
pub(crate) struct Acct {
    state: String,
    exit_code: String,
    node: String,
    max_rss: Option<u64>,
}

struct Live {
    done: Option<oneshot::Sender<Final>>,
    state: String,
    /// Told once, when the job first runs.
    running: Option<oneshot::Sender<()>>,
    /// Rounds in which squeue did not list it.
    missing: u32,
}

#[derive(Default)]
struct State {
    live: HashMap<String, Live>,
    cancels: Vec<String>,
    started: bool,
}

/// The run's poller (started with its first job).
pub(crate) struct Poller {
    run_id: String,
    accounting: bool,
    state: Mutex<State>,
    wake: Notify,
    /// Queries sent to the controller (squeue, scontrol, sacct, scancel).
    pub queries: AtomicU64,
}

/// A command's stdout, counted as a query; `None` when it could not run or failed.
async fn query(counter: &AtomicU64, program: &str, args: &[&str]) -> Option<String> {
    counter.fetch_add(1, Ordering::Relaxed);
    let out = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(60), out).await {
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

impl Poller {
    pub(crate) fn new(run_id: &str, accounting: bool) -> Arc<Poller> {
        Arc::new(Poller {
            run_id: run_id.to_string(),
            accounting,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            queries: AtomicU64::new(0),
        })
    }

    /// Watch `job`: told when it first runs, and its end.
    pub(crate) fn watch(
        self: &Arc<Self>,
        job: &str,
    ) -> (oneshot::Receiver<()>, oneshot::Receiver<Final>) {
        let (run_tx, run_rx) = oneshot::channel();
        let (done_tx, done_rx) = oneshot::channel();
        let start = {
            let Ok(mut st) = self.state.lock() else {
                return (run_rx, done_rx);
            };
            st.live.insert(
                job.to_string(),
                Live {
                    done: Some(done_tx),
                    state: "PENDING".into(),
                    running: Some(run_tx),
                    missing: 0,
                },
            );
            !std::mem::replace(&mut st.started, true)
        };
        if start {
            let me = Arc::clone(self);
            tokio::spawn(async move { me.rounds().await });
        }
        self.wake.notify_one();
        (run_rx, done_rx)
    }

    /// Cancel `job` in the next round (one `scancel` for all asked).
    pub(crate) fn cancel(&self, job: &str) {
        if let Ok(mut st) = self.state.lock() {
            if !st.cancels.iter().any(|j| j == job) {
                st.cancels.push(job.to_string());
            }
        }
        self.wake.notify_one();
    }

    async fn rounds(self: Arc<Self>) {
        let mut interval = FLOOR;
        loop {
            let (idle, cancels) = match self.state.lock() {
                Ok(mut st) => (st.live.is_empty(), std::mem::take(&mut st.cancels)),
                Err(_) => return,
            };
            if !cancels.is_empty() {
                let args: Vec<&str> = cancels.iter().map(String::as_str).collect();
                query(&self.queries, "scancel", &args).await;
                // A cancelled job ends within a second or two: watch it closely.
                interval = FLOOR;
            }
            if idle {
                self.wake.notified().await;
                interval = FLOOR;
                continue;
            }
            let changed = self.round().await;
            interval = if changed || !cancels.is_empty() {
                FLOOR
            } else {
                (interval * 2).min(CEILING)
            };
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = self.wake.notified() => { interval = FLOOR; }
            }
        }
    }

    /// One round: the states of all the run's jobs; ends the ones that ended.
    /// Whether anything changed.
    async fn round(&self) -> bool {
        let name = format!("--name={}", self.run_id);
        let Some(text) = query(
            &self.queries,
            "squeue",
            &["-h", "--states=all", &name, "-o", "%i|%T|%N"],
        )
        .await
        else {
            // The controller did not answer: ask again next round.
            return false;
        };
        let seen: HashMap<String, (JobState, String)> = text
            .lines()
            .filter_map(squeue_line)
            .map(|(id, s, n)| (id, (s, n)))
            .collect();
        let mut ended: Vec<(String, Option<JobState>, String)> = Vec::new();
        let mut changed = false;
        if let Ok(mut st) = self.state.lock() {
            for (id, live) in st.live.iter_mut() {
                match seen.get(id) {
                    Some((s, nodes)) => {
                        live.missing = 0;
                        if s.0 != live.state {
                            changed = true;
                            live.state = s.0.clone();
                        }
                        if s.is_running() || s.is_final() {
                            if let Some(tx) = live.running.take() {
                                let _ = tx.send(());
                            }
                        }
                        if s.is_final() {
                            ended.push((id.clone(), Some(s.clone()), nodes.clone()));
                        }
                    }
                    None => {
                        // Not listed: just submitted and not yet visible, or gone.
                        live.missing += 1;
                        if live.missing >= 3 {
                            ended.push((id.clone(), None, String::new()));
                        }
                    }
                }
            }
        }
        // One accounting query for every job that ended this round.
        let sacct = if self.accounting && !ended.is_empty() {
            let ids: Vec<&str> = ended.iter().map(|(id, _, _)| id.as_str()).collect();
            self.sacct(&ids).await
        } else {
            HashMap::new()
        };
        for (id, state, nodes) in ended {
            changed = true;
            let fin = self.final_of(&id, state, nodes, sacct.get(&id)).await;
            if let Ok(mut st) = self.state.lock() {
                if let Some(mut live) = st.live.remove(&id) {
                    if let Some(tx) = live.running.take() {
                        let _ = tx.send(());
                    }
                    if let Some(tx) = live.done.take() {
                        let _ = tx.send(fin);
                    }
                }
            }
        }
        changed
    }

    /// What accounting says of these jobs (one `sacct` for all, steps included:
    /// the allocation's line has the state, its steps' lines MaxRSS).
    async fn sacct(&self, ids: &[&str]) -> HashMap<String, Acct> {
        let jobs = format!("--jobs={}", ids.join(","));
        let mut out: HashMap<String, Acct> = HashMap::new();
        let Some(text) = query(
            &self.queries,
            "sacct",
            &[
                "-n",
                "-P",
                &jobs,
                "--format=JobIDRaw,State,ExitCode,MaxRSS,NodeList",
            ],
        )
        .await
        else {
            return out;
        };
        for line in text.lines() {
            let f: Vec<&str> = line.split('|').collect();
            let (Some(jid), Some(state)) = (f.first(), f.get(1)) else {
                continue;
            };
            let (job, is_step) = match jid.split_once('.') {
                Some((j, _)) => (j, true),
                None => (*jid, false),
            };
            let a = out.entry(job.to_string()).or_default();
            if let Some(rss) = f.get(3).and_then(|r| super::state::rss_bytes(r)) {
                a.max_rss = Some(a.max_rss.map_or(rss, |m| m.max(rss)));
            }
            if !is_step {
                a.state = state.to_string();
                a.exit_code = f.get(2).unwrap_or(&"").to_string();
                a.node = f.get(4).unwrap_or(&"").to_string();
            }
        }
        out
    }

    /// A finished job's state, exit code, node and (with accounting) MaxRSS, read
    /// once.
    async fn final_of(
        &self,
        id: &str,
        state: Option<JobState>,
        nodes: String,
        acct: Option<&Acct>,
    ) -> Final {
        let mut fin = Final {
            state: state.as_ref().map(|s| s.0.clone()).unwrap_or_default(),
            node: Some(nodes).filter(|n| !n.is_empty() && n != "(null)"),
            via: "squeue",
            ..Final::default()
        };
        if let Some(a) = acct.filter(|a| JobState::parse(&a.state).is_final()) {
            // slurmdbd hears of a job's end after the controller: a state that is
            // not final yet is not taken over the controller's.
            fin.state = JobState::parse(&a.state).0;
            fin.exit_code = Some(a.exit_code.clone());
            fin.node = Some(a.node.clone()).filter(|n| !n.is_empty());
            fin.via = "sacct";
        }
        fin.max_rss = acct.and_then(|a| a.max_rss);
        if fin.exit_code.is_none() {
            if let Some(text) = query(&self.queries, "scontrol", &["show", "job", "-o", id]).await {
                let f = scontrol_fields(&text);
                if let Some(s) = f
                    .get("JobState")
                    .map(|s| JobState::parse(s))
                    .filter(|s| s.is_final())
                {
                    fin.state = s.0;
                }
                fin.exit_code = f.get("ExitCode").cloned();
                fin.via = "scontrol";
                if fin.node.is_none() {
                    fin.node = f.get("NodeList").cloned().filter(|n| n != "(null)");
                }
            }
        }
        if fin.state.is_empty() {
            // Neither squeue nor scontrol knows it: the job vanished.
            fin.state = "UNKNOWN".into();
        }
        fin
    }

    /// The run's jobs still queued or running (`squeue --name <run-id>`); `None`
    /// when squeue did not answer.
    pub(crate) async fn still_there(&self) -> Option<Vec<String>> {
        let name = format!("--name={}", self.run_id);
        let text = query(&self.queries, "squeue", &["-h", &name, "-o", "%i %T"]).await?;
        Some(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect(),
        )
    }

    /// Cancel every job of the run at once (`scancel --name <run-id>`).
    pub(crate) async fn cancel_all(&self) {
        let name = format!("--name={}", self.run_id);
        query(&self.queries, "scancel", &[&name]).await;
    }
}
