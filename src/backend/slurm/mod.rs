//! The Slurm backend: each attempt is one `sbatch --parsable` job of a generated
//! script kept in the record (`steps/<step>/<n>/job.sh`), which runs the command
//! under `srun` through `orchestrate slurm-exec`; that writes the attempt's own end
//! record (`job-end.json`) beside its logs. One poller per run tracks every job
//! with one batched query per round ([`poll`]); at a job's end its state decides
//! the outcome first ([`state`]).
//!
//! Names: `--job-name=<run-id>` (so one `squeue --name`/`scancel --name` covers the
//! run), `--comment=<step>/<attempt>`.

pub mod exec;
mod poll;
mod state;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::watch;

use super::{
    AttemptError, AttemptJob, AttemptOutcome, AttemptSpec, Backend, BoxFuture, CancelReason, Gate,
};
use crate::isolate::{Enforcement, JobFacts, Termination};
use exec::{JobEnd, JobSpec};
pub use poll::{Confirmed, CEILING, FIRST, FLOOR};

/// The job's own records, beside its logs.
const END_RECORD: &str = "job-end.json";
const START_RECORD: &str = "job-start.json";
/// How often an attempt looks for its job's start and end records: a stat of a
/// file on the shared filesystem, nothing asked of the controller.
const WATCH: Duration = Duration::from_millis(50);
use state::JobState;

/// Submits and tracks a run's Slurm jobs.
pub struct Slurm {
    run_id: String,
    /// This orchestrator, which the job runs as `slurm-exec`.
    exe: PathBuf,
    srun: PathBuf,
    poller: Arc<poll::Poller>,
}

/// `program` on `PATH`.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// Single-quoted for sh.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Wait until none of `logs` has grown for `quiet` (at most `limit`): Slurm's step
/// daemon still writes to a cancelled job's logs ("*** JOB CANCELLED ***") after
/// the job left the queue, and a log is hashed once.
pub fn settle_logs(logs: &[PathBuf], quiet: Duration, limit: Duration) {
    let size = || -> Vec<u64> {
        logs.iter()
            .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
            .collect()
    };
    let t0 = Instant::now();
    let mut last = size();
    let mut since = Instant::now();
    while t0.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(100));
        let now = size();
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return;
        }
    }
}

/// The GRES names the cluster's nodes offer (`sinfo -o %G`: `gpu:2`,
/// `gpu:a100:4(S:0-1)`).
pub fn offered_gres() -> Result<std::collections::BTreeSet<String>, String> {
    let o = std::process::Command::new("sinfo")
        .args(["-h", "-o", "%G"])
        .output()
        .map_err(|e| format!("sinfo: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "sinfo: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout)
        .split([',', '\n'])
        .filter_map(|g| g.trim().split(':').next())
        .filter(|n| !n.is_empty() && *n != "(null)")
        .map(String::from)
        .collect())
}

impl Slurm {
    /// The backend for run `run_id`, if this host can reach a cluster (`sbatch`,
    /// `squeue`, `scancel` and `srun` on `PATH`, and the controller answers).
    pub fn new(run_id: &str) -> Result<Slurm, String> {
        let mut missing = Vec::new();
        for p in ["sbatch", "squeue", "scancel", "scontrol"] {
            if which(p).is_none() {
                missing.push(p);
            }
        }
        let srun = which("srun");
        if srun.is_none() {
            missing.push("srun");
        }
        if !missing.is_empty() {
            return Err(format!(
                "the slurm backend needs {} on PATH",
                missing.join(", ")
            ));
        }
        let ping = std::process::Command::new("squeue")
            .args(["-h", "-o", "%i", "--name=orchestrate-probe"])
            .output()
            .map_err(|e| format!("squeue: {e}"))?;
        if !ping.status.success() {
            return Err(format!(
                "the Slurm controller does not answer: {}",
                String::from_utf8_lossy(&ping.stderr).trim()
            ));
        }
        // With accounting storage, sacct reports MaxRSS and states after the
        // controller forgot the job; without it, squeue and scontrol do.
        let accounting = std::process::Command::new("sacct")
            .args(["-n", "-X", "-j", "1", "-o", "JobID"])
            .output()
            .is_ok_and(|o| o.status.success());
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find this orchestrator: {e}"))?;
        Ok(Slurm {
            run_id: run_id.to_string(),
            exe,
            srun: srun.unwrap_or_default(),
            poller: poll::Poller::new(run_id, accounting),
        })
    }

    /// Queries sent to the controller and accounting so far (submissions apart).
    pub fn queries(&self) -> u64 {
        self.poller.queries.load(Ordering::Relaxed)
    }

    /// `sbatch` calls so far.
    pub fn submits(&self) -> u64 {
        self.poller.submits.load(Ordering::Relaxed)
    }

    /// The run's jobs still queued or running, for the release audit.
    pub async fn still_there(&self) -> Option<Vec<String>> {
        self.poller.still_there().await
    }

    /// Cancel every job of the run at once.
    pub async fn cancel_all(&self) {
        self.poller.cancel_all().await;
    }

    /// A job of an earlier orchestrator of this run whose attempt ended on its
    /// end record and was never confirmed (`resume`).
    pub fn expect(&self, job_id: &str, step: &str, attempt: u32) {
        self.poller.expect(job_id, step, attempt);
    }

    /// Slurm's word on the attempts that ended on their own clean end records,
    /// waiting at most `limit` for the last ones: what the record is told, and
    /// whether Slurm disagrees.
    pub async fn confirm(&self, limit: Duration) -> Vec<Confirmation> {
        self.poller
            .confirm(limit)
            .await
            .into_iter()
            .map(Confirmation::of)
            .collect()
    }

    fn sbatch_args(&self, spec: &AttemptSpec, job: &AttemptJob) -> Vec<String> {
        let req = job.slurm.clone().unwrap_or_default();
        let o = &req.options;
        let mut a = vec![
            "--parsable".to_string(),
            format!("--job-name={}", self.run_id),
            format!("--comment={}/{}", job.step, job.attempt),
            format!("--output={}", spec.stdout.display()),
            format!("--error={}", spec.stderr.display()),
            format!("--chdir={}", spec.cwd.display()),
            // The command writes into the logs too (exec.rs): both append.
            "--open-mode=append".to_string(),
            // One attempt is one run of the command: a job whose node failed or
            // that was preempted is not run again behind the record's back (retries
            // are the plan's, `retries` and `retry_on`).
            "--no-requeue".to_string(),
            "--ntasks=1".to_string(),
        ];
        if let Some(m) = spec.memory {
            a.push(format!("--mem={}M", m.div_ceil(1 << 20).max(1)));
        }
        // Slurm's limit backs ours up: the orchestrator ends the job at the exact
        // timeout; Slurm counts in minutes.
        match (&o.time, spec.timeout) {
            (Some(t), _) => a.push(format!("--time={t}")),
            (None, Some(t)) => a.push(format!("--time={}", t.as_secs().div_ceil(60) + 1)),
            _ => {}
        }
        for (flag, v) in [
            ("--partition", &o.partition),
            ("--account", &o.account),
            ("--qos", &o.qos),
            ("--constraint", &o.constraint),
        ] {
            if let Some(v) = v {
                a.push(format!("{flag}={v}"));
            }
        }
        if let Some(n) = o.nodes {
            a.push(format!("--nodes={n}"));
        }
        if let Some(n) = o.cpus {
            a.push(format!("--cpus-per-task={n}"));
        }
        if let Some(g) = req.gres.as_ref().filter(|g| !g.is_empty()) {
            a.push(format!("--gres={g}"));
        }
        a.extend(req.sbatch_args.iter().cloned());
        a
    }

    fn script(&self, job: &AttemptJob, spec_file: &Path, args: &[String]) -> String {
        let mut s = String::from("#!/bin/sh\n");
        s.push_str(&format!(
            "# orchestrate run {}, step {}, attempt {}: submitted as\n#   sbatch {}\n",
            self.run_id,
            job.step,
            job.attempt,
            args.join(" ")
        ));
        s.push_str(&format!(
            "exec {} --ntasks=1 --kill-on-bad-exit=1 {} slurm-exec {}\n",
            sh_quote(&self.srun.to_string_lossy()),
            sh_quote(&self.exe.to_string_lossy()),
            sh_quote(&spec_file.to_string_lossy())
        ));
        s
    }

    async fn submit(
        &self,
        spec: &AttemptSpec,
        job: &AttemptJob,
    ) -> Result<(String, String, String), String> {
        let end = job.logs.join(END_RECORD);
        let start = job.logs.join(START_RECORD);
        let _ = std::fs::remove_file(&end);
        let _ = std::fs::remove_file(&start);
        let js = JobSpec {
            argv: spec.argv.clone(),
            cwd: spec.cwd.clone(),
            env: spec.env.clone(),
            canary: spec.canary.clone(),
            end,
            start: Some(start),
            stdout: Some(spec.stdout.clone()),
            stderr: Some(spec.stderr.clone()),
        };
        let bytes = serde_json::to_vec(&js).map_err(|e| e.to_string())?;
        write_private(&job.private, &bytes)
            .map_err(|e| format!("cannot write {}: {e}", job.private.display()))?;
        let args = self.sbatch_args(spec, job);
        let script = job.logs.join("job.sh");
        std::fs::write(&script, self.script(job, &job.private, &args))
            .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
        let gres = job.slurm.as_ref().and_then(|r| r.gres.clone());
        // A busy controller answers "try again": a few tries, a moment apart.
        let mut last = String::new();
        for pause in [0u64, 500, 2000, 5000] {
            tokio::time::sleep(Duration::from_millis(pause)).await;
            self.poller.submits.fetch_add(1, Ordering::Relaxed);
            let out = tokio::process::Command::new("sbatch")
                .args(&args)
                .arg(&script)
                .stdin(std::process::Stdio::null())
                .output()
                .await
                .map_err(|e| format!("sbatch: {e}"))?;
            let text = String::from_utf8_lossy(&out.stdout);
            let id = text.trim().split(';').next().unwrap_or("").to_string();
            if out.status.success() && !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
                let rel = script
                    .strip_prefix(&job.record_dir)
                    .unwrap_or(&script)
                    .display()
                    .to_string();
                return Ok((id, rel, gres.unwrap_or_default()));
            }
            last = String::from_utf8_lossy(&out.stderr).trim().to_string();
            let transient = [
                "try again",
                "Socket timed out",
                "temporarily unavailable",
                "Unable to contact",
            ];
            if !transient.iter().any(|t| last.contains(t)) {
                break;
            }
        }
        Err(format!("sbatch refused the job: {last}"))
    }

    async fn run_job(
        &self,
        spec: AttemptSpec,
        job: AttemptJob,
        mut cancel: watch::Receiver<Option<CancelReason>>,
        gate: Gate,
    ) -> Result<AttemptOutcome, AttemptError> {
        tokio::select! {
            biased;
            r = cancelled(&mut cancel) => return Err(AttemptError::CancelledBeforeStart(r)),
            opened = gate => {
                if let Err(why) = opened {
                    return Err(AttemptError::NotStarted(why));
                }
            }
        }
        let (id, script, gres) = self
            .submit(&spec, &job)
            .await
            .map_err(AttemptError::NotStarted)?;
        // When Slurm had the job (sbatch answered): the queue time counts from here.
        let submitted = Utc::now();
        let t_submit = Instant::now();
        if let Some(tell) = &job.on_submit {
            tell(&super::Submitted {
                job_id: id.clone(),
                script: script.clone(),
                gres: Some(gres.clone()).filter(|g| !g.is_empty()),
            });
        }
        Ok(self
            .follow(
                &spec,
                &job,
                Tracked {
                    id,
                    script,
                    gres,
                    submitted,
                    t_submit,
                },
                cancel,
            )
            .await)
    }

    /// Wait for a job of an earlier orchestrator of this run (`resume`): never
    /// submitted again; its outcome as if this orchestrator had watched it.
    pub async fn reattach(
        &self,
        spec: AttemptSpec,
        job: AttemptJob,
        id: String,
        script: String,
        gres: Option<String>,
        submitted: chrono::DateTime<Utc>,
    ) -> AttemptOutcome {
        let (_keep, cancel) = watch::channel(None);
        let tracked = Tracked {
            id,
            script,
            gres: gres.unwrap_or_default(),
            submitted,
            t_submit: Instant::now(),
        };
        self.follow(&spec, &job, tracked, cancel).await
    }

    async fn follow(
        &self,
        spec: &AttemptSpec,
        job: &AttemptJob,
        t: Tracked,
        mut cancel: watch::Receiver<Option<CancelReason>>,
    ) -> AttemptOutcome {
        let Tracked {
            id,
            script,
            gres,
            submitted,
            t_submit,
        } = t;
        let (mut running, mut done) = self.poller.watch(&id, &job.step, job.attempt);
        let start_file = job.logs.join(START_RECORD);
        let end_file = job.logs.join(END_RECORD);
        let mut tick = tokio::time::interval(WATCH);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut started: Option<Instant> = None;
        let mut cancel_reason: Option<CancelReason> = None;
        let mut timed_out = false;
        let mut leftovers = Vec::new();
        // The job's end record, once it appeared.
        let mut seen_end: Option<JobEnd> = None;
        // Ended on a clean end record: Slurm's word comes later (poll.rs).
        let mut provisional = false;
        let fin = loop {
            let deadline = match (started, spec.timeout, timed_out) {
                (Some(s), Some(t), false) => Some(s + t),
                _ => None,
            };
            tokio::select! {
                fin = &mut done => break fin.ok(),
                // A cancel, or its escalation (a second Ctrl-C after the first).
                r = escalated(&mut cancel, cancel_reason), if cancel_reason != Some(CancelReason::Kill) => {
                    if cancel_reason.is_none() {
                        self.poller.cancel(&id);
                    }
                    cancel_reason = Some(r);
                    if r == CancelReason::Kill {
                        // A second Ctrl-C: leave now, saying what may still run. Slurm
                        // still writes to the logs it holds open: those go on in a
                        // side file, and the record keeps what was there now.
                        for log in [&spec.stdout, &spec.stderr] {
                            freeze_log(log);
                        }
                        leftovers.push(format!("slurm job {id} may still be running (cancel sent)"));
                        break None;
                    }
                }
                _ = &mut running, if started.is_none() => {
                    started = Some(Instant::now());
                }
                _ = sleep_until(deadline) => {
                    timed_out = true;
                    self.poller.cancel(&id);
                }
                _ = tick.tick(), if seen_end.is_none() => {
                    if started.is_none() && std::fs::symlink_metadata(&start_file).is_ok() {
                        started = Some(Instant::now());
                    }
                    if let Some(e) = read_end_now(&end_file) {
                        started.get_or_insert_with(Instant::now);
                        if e.clean() && cancel_reason.is_none() && !timed_out {
                            self.poller.defer(&id);
                            seen_end = Some(e);
                            provisional = true;
                            break None;
                        }
                        // It failed: why is Slurm's to say, now.
                        self.poller.hurry(&id);
                        seen_end = Some(e);
                    }
                }
            }
        };
        let end = match seen_end {
            Some(e) => Some(e),
            None => read_end(&end_file, fin.as_ref()).await,
        };
        let clean = provisional
            || fin
                .as_ref()
                .is_some_and(|f| matches!(f.state.as_str(), "COMPLETED" | "FAILED"));
        if !clean {
            let logs = vec![spec.stdout.clone(), spec.stderr.clone()];
            let _ = tokio::task::spawn_blocking(move || {
                settle_logs(&logs, Duration::from_millis(1000), Duration::from_secs(10))
            })
            .await;
        }
        if let Some(m) = spec.mask.as_ref().filter(|m| !m.is_empty()) {
            for log in [&spec.stdout, &spec.stderr] {
                mask_log(log, m);
            }
        }
        let _ = std::fs::remove_file(&job.private);
        let fin = fin.unwrap_or_else(|| poll::Final {
            state: if provisional {
                UNCONFIRMED.into()
            } else {
                "CANCELLED".into()
            },
            ..Default::default()
        });
        let state = JobState::parse(&fin.state);
        let (sl_code, sl_sig) = fin
            .exit_code
            .as_deref()
            .map(state::exit_code)
            .unwrap_or((None, None));
        // The job's cgroup saw an OOM kill: an OOM kill, whatever the exit code says
        // (as for local attempts; a shell that exits 0 after its child was killed is
        // the classic false success).
        let oom = end.as_ref().is_some_and(|e| e.oom_kills.unwrap_or(0) > 0);
        // A job the scheduler forgot (accounting off, past MinJobAge) or has not
        // yet told the end of, but that left its end record, ran to that end: the
        // record is the evidence.
        let forgotten = !state.is_final() && end.is_some();
        let termination = match state.termination() {
            Some(Termination::Cancelled) if timed_out => Termination::TimedOut,
            Some(t) if !forgotten => t,
            _ if oom => Termination::OomKilled,
            _ => match &end {
                Some(e) if e.signal.is_some() => Termination::Signaled,
                Some(_) => Termination::Exited,
                // Completed by Slurm's word but without the job's own end record:
                // nothing proves what ran.
                None if state.0 == "COMPLETED" => Termination::Lost,
                None if sl_sig.is_some() => Termination::Signaled,
                None => Termination::Exited,
            },
        };
        let ended_at = Utc::now();
        let parse_time = |s: &str| {
            chrono::DateTime::parse_from_rfc3339(s)
                .ok()
                .map(|t| t.with_timezone(&Utc))
        };
        let started_at = end
            .as_ref()
            .and_then(|e| parse_time(&e.started_at))
            .unwrap_or(submitted);
        let wall = match &end {
            Some(e) => Duration::from_secs_f64(e.wall_ms.max(0.0) / 1000.0),
            None => started.map(|s| s.elapsed()).unwrap_or_default(),
        };
        let queued_ms = started.map(|s| (s - t_submit).as_secs_f64() * 1000.0);
        let node = end
            .as_ref()
            .and_then(|e| e.node.clone())
            .or(fin.node.clone());
        let oom_kills = end.as_ref().and_then(|e| e.oom_kills);
        AttemptOutcome {
            termination,
            exit_code: end.as_ref().and_then(|e| e.exit_code).or(
                if termination == Termination::Exited {
                    sl_code
                } else {
                    None
                },
            ),
            signal: end.as_ref().and_then(|e| e.signal).or(sl_sig),
            started_at,
            ended_at: end
                .as_ref()
                .and_then(|e| parse_time(&e.ended_at))
                .unwrap_or(ended_at),
            wall,
            cpu_user: None,
            cpu_system: None,
            peak_memory_bytes: end
                .as_ref()
                .and_then(|e| e.peak_memory_bytes)
                .or(fin.max_rss),
            oom_kills,
            pids_limit_hit: None,
            kill_duration: None,
            cancel_reason,
            enforcement: Enforcement {
                mode: "slurm".into(),
                cgroup_version: None,
                memory: spec.memory.is_some(),
                swap_off: false,
                pids: false,
                cpus: false,
                devices: !gres.is_empty(),
                notes: {
                    let mut n = vec![format!("job {id}: limits are Slurm's (--mem, --time, --gres), enforced by its cgroups")];
                    if spec.pids.is_some() {
                        n.push("pids: not enforced by the slurm backend".into());
                    }
                    n
                },
            },
            leftovers,
            job: Some(JobFacts {
                backend: "slurm".into(),
                job_id: id,
                state: if provisional {
                    UNCONFIRMED.into()
                } else {
                    state.0.clone()
                },
                exit_code: fin.exit_code.clone(),
                derived_exit_code: fin.derived_exit_code.clone(),
                elapsed: fin.elapsed.clone(),
                node,
                gpus: end.as_ref().and_then(|e| e.gpus.clone()),
                cuda_visible_devices: end.as_ref().and_then(|e| e.cuda_visible_devices.clone()),
                gres: Some(gres).filter(|g| !g.is_empty()),
                script,
                submitted_at: crate::evidence::record::rfc3339(&submitted),
                queued_ms: queued_ms.map(crate::evidence::record::round_us),
                source: if forgotten {
                    "end record"
                } else if end.is_some() {
                    "end record and scheduler"
                } else {
                    "scheduler"
                }
                .into(),
                queried: fin.via.to_string(),
                max_rss_bytes: fin.max_rss,
            }),
        }
    }
}

/// The job state of an attempt that ended on its own clean end record, until
/// Slurm's word on it is read.
pub const UNCONFIRMED: &str = "unconfirmed";

/// Slurm's word on a job whose attempt ended on its clean end record.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Confirmation {
    pub step: String,
    pub attempt: u32,
    pub job_id: String,
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived_exit_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rss_bytes: Option<u64>,
    pub queried: String,
    /// Slurm ended the job otherwise than its command did (it exited 0): how the
    /// attempt ends then, Slurm's state first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination: Option<Termination>,
}

impl Confirmation {
    fn of(c: Confirmed) -> Confirmation {
        let state = JobState::parse(&c.fin.state);
        let termination = match state.0.as_str() {
            // COMPLETED agrees; a job the scheduler forgot (UNKNOWN) leaves the end
            // record's word, as for any job that left one.
            "COMPLETED" | "UNKNOWN" => None,
            _ => Some(state.termination().unwrap_or(Termination::Exited)),
        };
        Confirmation {
            step: c.step,
            attempt: c.attempt,
            job_id: c.job_id,
            state: state.0,
            exit_code: c.fin.exit_code,
            derived_exit_code: c.fin.derived_exit_code,
            elapsed: c.fin.elapsed,
            node: c.fin.node,
            max_rss_bytes: c.fin.max_rss,
            queried: c.fin.via.to_string(),
            termination,
        }
    }

    /// The exit code in Slurm's `ExitCode` (`3:0` is 3).
    pub fn exit_code_number(&self) -> Option<i32> {
        self.exit_code
            .as_deref()
            .and_then(|e| state::exit_code(e).0)
    }

    /// Why the attempt failed after all, in words.
    pub fn disagreement(&self) -> Option<String> {
        self.termination.map(|_| {
            format!(
                "Slurm ended job {} ({}/{}) as {} (exit code {}) after its command exited 0",
                self.job_id,
                self.step,
                self.attempt,
                self.state,
                self.exit_code.as_deref().unwrap_or("unknown")
            )
        })
    }
}

/// A submitted job being watched.
struct Tracked {
    id: String,
    script: String,
    gres: String,
    submitted: chrono::DateTime<Utc>,
    t_submit: Instant,
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// Keep a log as it is now while its writer goes on: the file (and the writer's
/// open descriptor with it) moves to `<name>.after-kill`, and a copy of what it held
/// takes its place.
fn freeze_log(log: &Path) {
    let side = log.with_extension("log.after-kill");
    if std::fs::rename(log, &side).is_ok() {
        let _ = std::fs::copy(&side, log);
    }
}

/// The cancel reason once it is set and differs from `seen`.
async fn escalated(
    cancel: &mut watch::Receiver<Option<CancelReason>>,
    seen: Option<CancelReason>,
) -> CancelReason {
    loop {
        if let Some(r) = *cancel.borrow_and_update() {
            if Some(r) != seen {
                return r;
            }
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

async fn cancelled(cancel: &mut watch::Receiver<Option<CancelReason>>) -> CancelReason {
    loop {
        if let Some(r) = *cancel.borrow_and_update() {
            return r;
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The job's end record if it is there now.
fn read_end_now(path: &Path) -> Option<JobEnd> {
    let b = crate::digest::read_regular(path, crate::digest::Follow::No, 1 << 20).ok()?;
    serde_json::from_slice(&b).ok()
}

/// The job's end record; after the scheduler says the job ended, give a shared
/// filesystem a moment to show it.
async fn read_end(path: &Path, fin: Option<&poll::Final>) -> Option<JobEnd> {
    let tries = if fin.is_some() { 30 } else { 1 };
    for i in 0..tries {
        if let Some(e) = read_end_now(path) {
            return Some(e);
        }
        if i + 1 < tries {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    None
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

/// Slurm writes the logs itself: secrets are masked in place once the job ended.
fn mask_log(path: &Path, masker: &Arc<crate::mask::Masker>) {
    use std::io::{Read, Write};
    let Ok((mut f, _)) = crate::digest::open_regular(path, crate::digest::Follow::No) else {
        return;
    };
    let tmp = path.with_extension("masking");
    let Ok(mut out) = std::fs::File::create(&tmp) else {
        return;
    };
    let mut sm = crate::mask::StreamMask::new(Arc::clone(masker));
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match crate::sys::retry(|| f.read(&mut buf)) {
            Ok(0) => break,
            Ok(n) => {
                if out.write_all(&sm.push(&buf[..n])).is_err() {
                    let _ = std::fs::remove_file(&tmp);
                    return;
                }
            }
            Err(_) => {
                let _ = std::fs::remove_file(&tmp);
                return;
            }
        }
    }
    if out.write_all(&sm.finish()).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

impl Backend for Slurm {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn run(
        &self,
        spec: AttemptSpec,
        job: AttemptJob,
        cancel: watch::Receiver<Option<CancelReason>>,
        gate: Gate,
    ) -> BoxFuture<'_, Result<AttemptOutcome, AttemptError>> {
        Box::pin(self.run_job(spec, job, cancel, gate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confirmed(state: &str) -> Confirmation {
        Confirmation::of(Confirmed {
            step: "s".into(),
            attempt: 1,
            job_id: "9".into(),
            fin: poll::Final {
                state: state.into(),
                exit_code: Some("0:0".into()),
                via: "sacct",
                ..Default::default()
            },
        })
    }

    #[test]
    fn slurm_s_word_on_a_clean_end_decides_first() {
        assert_eq!(confirmed("COMPLETED").termination, None);
        assert_eq!(confirmed("COMPLETED").disagreement(), None);
        // Forgotten by the scheduler: the job's own end record stands.
        assert_eq!(confirmed("UNKNOWN").termination, None);
        for (state, t) in [
            ("OUT_OF_MEMORY", Termination::OomKilled),
            ("TIMEOUT", Termination::TimedOut),
            ("PREEMPTED", Termination::Preempted),
            ("NODE_FAIL", Termination::NodeFailed),
            ("CANCELLED by 0", Termination::Cancelled),
            ("FAILED", Termination::Exited),
        ] {
            let c = confirmed(state);
            assert_eq!(c.termination, Some(t), "{state}");
            assert!(c.disagreement().is_some_and(|d| d.contains("job 9")));
        }
    }

    #[test]
    fn only_an_unsignalled_zero_exit_without_oom_kills_is_clean() {
        let ok = JobEnd {
            exit_code: Some(0),
            oom_kills: Some(0),
            ..Default::default()
        };
        assert!(ok.clean());
        for bad in [
            JobEnd {
                exit_code: Some(1),
                ..ok.clone()
            },
            JobEnd {
                oom_kills: Some(1),
                ..ok.clone()
            },
            JobEnd {
                signals: vec![15],
                ..ok.clone()
            },
            JobEnd {
                exit_code: None,
                signal: Some(9),
                ..ok.clone()
            },
            JobEnd {
                error: Some("cannot start".into()),
                ..ok.clone()
            },
        ] {
            assert!(!bad.clean(), "{bad:?}");
        }
    }
}
