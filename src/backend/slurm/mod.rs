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
mod follow;
mod gres;
mod ids;
mod limits;
mod owners;
mod poll;
mod recover;
mod sbatch;
mod seam;
mod state;
mod submitter;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::watch;

use super::{
    AttemptError, AttemptJob, AttemptOutcome, AttemptSpec, BackendError, CancelReason, Gate,
};
use crate::contract::{cancelled, JobAccounting, Termination};
use exec::{JobEnd, JobSpec, Sealed};
pub use poll::{current_user, Confirmed, CEILING, FIRST, FLOOR};

/// What a Slurm job asks for.
#[derive(Debug, Clone, Default)]
pub struct SlurmRequest {
    pub options: crate::plan::model::SlurmOptions,
    pub sbatch_args: Vec<String>,
    /// `--gres`, made from the step's devices (or as the step wrote it).
    pub gres: Option<String>,
    /// `--exclusive`: the step runs alone, so its job asks for its node alone.
    pub exclusive: bool,
}

/// Whether `comment` is one this backend gives a job: an attempt's
/// (`<step>/<n>`) or an array's.
pub fn is_attempt_comment(comment: &str) -> bool {
    poll::run_comment(comment)
}

/// The job's own records, beside its logs.
const END_RECORD: &str = "job-end.json";
const START_RECORD: &str = "job-start.json";
/// How often an attempt looks for its job's start and end records: a stat of a
/// file on the shared filesystem, nothing asked of the controller.
const WATCH: Duration = Duration::from_millis(50);
/// How long an attempt whose job's end record it has waits on a controller that
/// does not answer before it ends on that record alone.
const CONTROLLER_PATIENCE: Duration = Duration::from_secs(30);
/// How long after Slurm says a job runs its command may take to start (srun's
/// launch), when no start record tells when it did.
const LAUNCH_ALLOWANCE: Duration = Duration::from_secs(10);
use state::JobState;

pub use gres::simulate_missing_gres;
pub use recover::end_jobs_of_dead_run;

/// Submits and tracks a run's Slurm jobs.
pub struct Slurm {
    run_id: String,
    /// This orchestrator, which the job runs as `slurm-exec`.
    exe: PathBuf,
    srun: PathBuf,
    poller: Arc<poll::Poller>,
    submitter: Arc<submitter::Submitter>,
    /// The run's jobs as last listed, shared by the attempts that reattach.
    owners: owners::Owners,
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

/// A path as `--output`/`--error` take it: Slurm expands `%j` and the like. A path
/// with a backslash is taken literally once its escaping backslashes are removed
/// (so each is doubled, and its `%` then stay as they are); without one, `%` is
/// written `%%` (measured on Slurm 22.05: both land where the path says).
fn slurm_filename(p: &str) -> String {
    if p.contains('\\') {
        p.replace('\\', "\\\\")
    } else {
        p.replace('%', "%%")
    }
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
    /// `squeue`, `scancel` and `srun` on `PATH`, and the controller answers); at
    /// most `throttle` of its jobs run at once.
    /// `detached`: every submission returns at once, so no array is held for a
    /// share of the throttle that nobody would be left to release.
    pub fn new(run_id: &str, throttle: u32, detached: bool) -> Result<Slurm, BackendError> {
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
            return Err(BackendError::MissingTools {
                backend: "slurm",
                tools: missing,
            });
        }
        let ping = std::process::Command::new("squeue")
            .args(["-h", "-o", "%i", "--name=orchestrate-probe"])
            .output()
            .map_err(|e| BackendError::Unreachable(format!("squeue: {e}")))?;
        if !ping.status.success() {
            return Err(BackendError::Unreachable(format!(
                "the Slurm controller does not answer: {}",
                String::from_utf8_lossy(&ping.stderr).trim()
            )));
        }
        // With accounting storage, sacct reports MaxRSS and states after the
        // controller forgot the job; without it, squeue and scontrol do.
        let accounting = std::process::Command::new("sacct")
            .args(["-n", "-X", "-j", "1", "-o", "JobID"])
            .output()
            .is_ok_and(|o| o.status.success());
        let exe = std::env::current_exe().map_err(BackendError::NoSelf)?;
        let srun = srun.unwrap_or_default();
        let poller = poll::Poller::new(run_id, accounting);
        Ok(Slurm {
            run_id: run_id.to_string(),
            submitter: submitter::Submitter::new(
                run_id,
                exe.clone(),
                srun.clone(),
                Arc::clone(&poller),
                throttle as usize,
                detached,
            ),
            owners: owners::Owners::default(),
            exe,
            srun,
            poller,
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

    /// Submissions Slurm refused for a submit limit so far (each waited out).
    pub fn refusals(&self) -> u64 {
        self.submitter.refusals()
    }

    /// The run's jobs still queued or running, for the release audit.
    pub async fn still_there(&self) -> Option<Vec<String>> {
        self.poller.still_there().await
    }

    /// Cancel every job of the run at once.
    /// Cancel every job of the run; `hard` kills their processes first.
    pub async fn cancel_all(&self, hard: bool) {
        self.poller.cancel_all(hard).await;
    }

    /// Once no job of the run is left: logs that appeared after their attempt was
    /// recorded without them (a job cancelled before it opened its files, which
    /// Slurm then opened to write why it ended) move to `<name>.after-kill`, so the
    /// record's files are what it hashed.
    pub fn settle_late_logs(&self) {
        for log in self.poller.late_logs() {
            if std::fs::symlink_metadata(&log).is_ok() {
                let side = after_kill(&log);
                if std::fs::symlink_metadata(&side).is_err() {
                    let _ = std::fs::rename(&log, &side);
                }
            }
        }
    }

    /// A job of an earlier orchestrator of this run whose attempt ended on its
    /// end record and was never confirmed (`resume`).
    pub fn expect(&self, job_id: &str, step: &str, attempt: u32) {
        self.poller.expect(job_id, step, attempt);
    }

    /// Every job of this run the controller lists for this user, with the attempt
    /// its comment names (`(job id, step, attempt, state)`): what `resume` and
    /// `recover` look for beyond the journal. `None` when squeue did not answer.
    pub async fn attempt_jobs(&self) -> Option<Vec<(String, String, u32, String)>> {
        Some(
            self.poller
                .queue(true)
                .await?
                .into_iter()
                .filter_map(|q| {
                    // An array's task: named by its array and index.
                    if let Some(tag) = q.comment.strip_prefix(submitter::ARRAY_COMMENT) {
                        let n = ids::task_index(&q.id)?;
                        return Some((
                            q.id.clone(),
                            format!("array {tag}, task"),
                            n,
                            q.state.to_string(),
                        ));
                    }
                    let (step, n) = poll::attempt_comment(&q.comment)?;
                    Some((q.id.clone(), step.to_string(), n, q.state.to_string()))
                })
                .collect(),
        )
    }

    /// Whether job `id` is this run's attempt `step`/`attempt` of this user: its
    /// name, comment and user as the controller (or accounting, once the controller
    /// forgot it) tell them. Else why not, in words.
    pub async fn owns(
        &self,
        id: &str,
        job: &AttemptJob,
        array: Option<&str>,
    ) -> Result<(), String> {
        if !ids::is_job_id(id) {
            return Err(format!("`{id}` is not a job id"));
        }
        // An array's task: the array's script must run this attempt's job.sh as
        // that task, and the job must carry that array's comment.
        let want = if ids::is_task(id) {
            array_task_of(id, job, array)?
        } else {
            format!("{}/{}", job.step, job.attempt)
        };
        let listed = self.owners.listing(&self.poller, &self.run_id).await;
        if let Some(comment) = listed.queued.get(id) {
            return if *comment == want {
                Ok(())
            } else {
                Err(format!(
                    "job {id} is this run's but commented `{comment}`, not `{want}`"
                ))
            };
        }
        if let Some(o) = listed.accounted.get(id) {
            return self.owned_by_accounting(id, &o.name, &o.user, &o.comment, &want);
        }
        // In neither listing: ask accounting who it is.
        let jobs = format!("--jobs={id}");
        let out = tokio::process::Command::new("sacct")
            .args(["-n", "-P", "-X", &jobs, "--format=JobName,User,Comment"])
            .stdin(std::process::Stdio::null())
            .output()
            .await;
        let Some(o) = out.ok().filter(|o| o.status.success()) else {
            return Err(format!(
                "job {id} is not one of this run's jobs the controller lists, and accounting cannot say whose it is"
            ));
        };
        let text = String::from_utf8_lossy(&o.stdout);
        let line = text.lines().next().unwrap_or("");
        let f: Vec<&str> = line.split('|').collect();
        let (name, user, comment) = (
            f.first().copied().unwrap_or(""),
            f.get(1).copied().unwrap_or(""),
            f.get(2).copied().unwrap_or(""),
        );
        if line.is_empty() {
            return Err(format!(
                "job {id} is unknown to the controller and to accounting"
            ));
        }
        self.owned_by_accounting(id, name, user, comment, &want)
    }

    /// Whether accounting's word on job `id` makes it attempt `want` of this run.
    fn owned_by_accounting(
        &self,
        id: &str,
        name: &str,
        user: &str,
        comment: &str,
        want: &str,
    ) -> Result<(), String> {
        // Accounting keeps comments only with AccountingStoreFlags=job_comment:
        // without one, the name and user decide (the job's sealed start record
        // names its attempt too).
        if name == self.run_id
            && user == self.poller.user
            && (comment == want || comment.is_empty())
        {
            Ok(())
        } else {
            Err(format!(
                "job {id} is not this attempt's: its name is `{name}`, its user `{user}`, its comment `{comment}` (this is run `{}`, user `{}`, attempt `{want}`)",
                self.run_id, self.poller.user
            ))
        }
    }

    /// Cancel the jobs `ids` (this user's) and wait, at most `limit`, until the
    /// controller no longer lists them as queued or running.
    pub async fn cancel_and_wait(&self, ids: &[String], limit: Duration) -> bool {
        for id in ids {
            self.poller.cancel(id);
        }
        let deadline = Instant::now() + limit;
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            match self.poller.queue(false).await {
                Some(live) if !live.iter().any(|q| ids.contains(&q.id)) => return true,
                _ if Instant::now() >= deadline => return false,
                _ => {}
            }
        }
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

    fn sbatch_args(&self, spec: &AttemptSpec, job: &AttemptJob) -> Result<Vec<String>, String> {
        let req = job
            .placement
            .as_ref()
            .and_then(|p| p.request::<SlurmRequest>())
            .cloned()
            .unwrap_or_default();
        let o = &req.options;
        let mut a = vec![
            "--parsable".to_string(),
            format!("--job-name={}", self.run_id),
            format!("--comment={}/{}", job.step, job.attempt),
            format!(
                "--output={}",
                slurm_filename(&spec.stdout.to_string_lossy())
            ),
            format!("--error={}", slurm_filename(&spec.stderr.to_string_lossy())),
            format!("--chdir={}", spec.cwd.display()),
            // The command writes into the logs too (exec.rs): both append.
            "--open-mode=append".to_string(),
            // One attempt is one run of the command: a job whose node failed or
            // that was preempted is not run again behind the record's back (retries
            // are the plan's, `retries` and `retry_on`).
            "--no-requeue".to_string(),
            // The controller keeps a job's environment: it gets none of the
            // orchestrator's. The attempt's own reaches the command through the
            // spec file only (0600, removed before the command starts).
            "--export=NONE".to_string(),
        ];
        if let Some(m) = spec.memory {
            a.push(format!("--mem={}M", m.div_ceil(1 << 20).max(1)));
        }
        // A detached run's chain: a failed upstream job cancels this one
        // (DependencyNeverSatisfied), as an attached run would not start it.
        if !job.after.is_empty() {
            a.push(format!("--dependency=afterok:{}", job.after.join(":")));
            a.push("--kill-on-invalid-dep=yes".to_string());
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
        // One task, or one per node: a multi-node step's command runs once on each
        // node (exec.rs fans it out with srun).
        match o.nodes {
            Some(n) if n > 1 => a.extend([
                format!("--nodes={n}"),
                format!("--ntasks={n}"),
                "--ntasks-per-node=1".to_string(),
            ]),
            Some(n) => a.extend([format!("--nodes={n}"), "--ntasks=1".to_string()]),
            None => a.push("--ntasks=1".to_string()),
        }
        if let Some(n) = o.cpus {
            a.push(format!("--cpus-per-task={n}"));
        }
        if let Some(g) = req.gres.as_ref().filter(|g| !g.is_empty()) {
            a.push(format!("--gres={g}"));
        }
        // A measured step's job shares its node with no other job, ours or anyone's.
        if req.exclusive {
            a.push("--exclusive".to_string());
        }
        a.extend(req.sbatch_args.iter().cloned());
        // Every value lands on sbatch's command line and in job.sh's header: a
        // newline (or any control character) there could become a line of the
        // script, an `#SBATCH` line among them. None is ever shell text.
        if let Some(bad) = a.iter().find(|v| v.contains(char::is_control)) {
            return Err(format!(
                "sbatch argument {bad:?} holds a control character (a newline?): refused, it would be a line of the job script"
            ));
        }
        for p in [&self.srun, &self.exe, &job.private] {
            if p.to_string_lossy().contains(char::is_control) {
                return Err(format!(
                    "{} holds a control character: refused, it would be a line of the job script",
                    p.display()
                ));
            }
        }
        Ok(a)
    }

    /// Hand the attempt's job to the run's submitter and wait for its id: its
    /// script (relative to the record), `--gres`, the seal key of its records,
    /// its array's script when it is an array's task, and notes (a second job
    /// found and cancelled). `Err` when the attempt was cancelled first.
    async fn submit(
        &self,
        spec: &AttemptSpec,
        job: &AttemptJob,
        cancel: &mut watch::Receiver<Option<CancelReason>>,
    ) -> Result<Result<(Submission, submitter::Slot), CancelReason>, String> {
        let end = job.logs.join(END_RECORD);
        let start = job.logs.join(START_RECORD);
        let logs = crate::fsx::Dir::open(&job.logs)
            .map_err(|e| format!("cannot open {}: {e}", job.logs.display()))?;
        // Whatever is there (a file, a link, a folder) goes, never followed.
        for n in [END_RECORD, START_RECORD] {
            let _ = logs.remove_tree(n);
        }
        let seal = {
            let mut k = [0u8; 32];
            getrandom::fill(&mut k).map_err(|e| format!("no randomness for the seal: {e}"))?;
            crate::digest::Sha256Digest(k).hex()
        };
        let js = JobSpec {
            argv: spec.argv.clone(),
            cwd: spec.cwd.clone(),
            env: spec.env.clone(),
            canary: spec.canary.clone(),
            end,
            start: Some(start),
            stdout: Some(spec.stdout.clone()),
            stderr: Some(spec.stderr.clone()),
            seal: Some(seal.clone()),
            fan_out: Some(fan_out_nodes(job))
                .filter(|n| *n > 1)
                .map(|nodes| exec::FanOut {
                    nodes,
                    srun: self.srun.clone(),
                }),
        };
        let bytes = serde_json::to_vec(&js).map_err(|e| e.to_string())?;
        write_private(&job.private, &bytes)
            .map_err(|e| format!("cannot write {}: {e}", job.private.display()))?;
        let args = self.sbatch_args(spec, job)?;
        let gres = job
            .placement
            .as_ref()
            .and_then(|p| p.request::<SlurmRequest>())
            .and_then(|r| r.gres.clone());
        let key = format!(
            "{}\n{}",
            crate::plan::matrix::base_id(&job.step),
            submitter::shared_args(&args).join("\n")
        );
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.submitter.enqueue(submitter::Ticket {
            key,
            step: job.step.clone(),
            attempt: job.attempt,
            args,
            logs: job.logs.clone(),
            record_dir: job.record_dir.clone(),
            private: job.private.clone(),
            stdout: spec.stdout.clone(),
            stderr: spec.stderr.clone(),
            fan_out: fan_out_nodes(job) > 1,
            on_note: job.on_note.clone(),
            reply,
        });
        // Dropping the answer takes the ticket out of the queue (or cancels the
        // job its submission made meanwhile).
        let placed = tokio::select! {
            biased;
            r = cancelled(cancel) => return Ok(Err(r)),
            p = answer => p.map_err(|_| "the run's submitter stopped".to_string())??,
        };
        Ok(Ok((
            Submission {
                id: placed.id,
                script: placed.script,
                gres: gres.unwrap_or_default(),
                seal: Some(seal),
                notes: placed.notes,
                array: placed.array,
            },
            placed.slot,
        )))
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
        let (sub, _slot) = match self
            .submit(&spec, &job, &mut cancel)
            .await
            .map_err(AttemptError::NotStarted)?
        {
            Ok(s) => s,
            Err(r) => return Err(AttemptError::CancelledBeforeStart(r)),
        };
        // When Slurm had the job (sbatch answered): the queue time counts from here.
        let submitted = Utc::now();
        if let Some(tell) = &job.on_submit {
            tell(&super::Submitted {
                job_id: sub.id.clone(),
                script: sub.script.clone(),
                gres: Some(sub.gres.clone()).filter(|g| !g.is_empty()),
                array: sub.array.as_ref().map(|a| a.path.clone()),
            });
        }
        if job.detach {
            return Err(AttemptError::Detached(sub.id));
        }
        Ok(self
            .follow(
                &spec,
                &job,
                Tracked {
                    id: sub.id,
                    script: sub.script,
                    gres: sub.gres,
                    submitted,
                    seal: sub.seal,
                    notes: sub.notes,
                    array: sub.array,
                },
                cancel,
            )
            .await)
    }

    /// Wait for a job of an earlier orchestrator of this run (`resume`): never
    /// submitted again; its outcome as if this orchestrator had watched it. The
    /// seal key died with that orchestrator: its records are taken as they are and
    /// checked against Slurm's accounting.
    pub async fn reattach(
        &self,
        spec: AttemptSpec,
        job: AttemptJob,
        found: crate::backend::Reattach,
    ) -> AttemptOutcome {
        let (_keep, cancel) = watch::channel(None);
        // The array's script as it is now: `verify` holds the record to it.
        let array = found.array.and_then(|rel| hashed(&job.record_dir, &rel));
        let tracked = Tracked {
            id: found.job_id,
            script: found.script,
            gres: found.gres.unwrap_or_default(),
            submitted: found.submitted,
            seal: None,
            array,
            notes: vec!["resumed: the job's own records are checked against Slurm's accounting, not by their seal (its key was the lost orchestrator's)".into()],
        };
        self.follow(&spec, &job, tracked, cancel).await
    }
}

/// Whether a state Slurm writes is one a job does not leave (`COMPLETED`,
/// `CANCELLED by 0`, ...).
pub fn is_final_state(s: &str) -> bool {
    JobState::parse(s).is_final()
}

pub use crate::contract::{Confirmation, UNCONFIRMED};

impl Confirmation {
    fn of(c: Confirmed) -> Confirmation {
        let state = JobState::parse(&c.fin.state);
        let said = c.expected.as_ref().map(|e| JobEnd {
            exit_code: e.exit_code,
            wall_ms: e.wall_ms,
            peak_memory_bytes: e.peak_memory_bytes,
            ended_at: e.ended_at.clone(),
            ..JobEnd::default()
        });
        let nodes = c.expected.as_ref().map_or(1, |e| e.nodes);
        let (termination, why) = if let Some(s) = c.stray.clone() {
            (Some(Termination::Forged), Some(s))
        } else {
            match state {
                // COMPLETED agrees unless its numbers say otherwise; a job the
                // scheduler forgot (UNKNOWN) leaves the end record's word, as for
                // any job that left one.
                JobState::Completed => match said.as_ref().and_then(|e| contradiction(e, &c.fin, nodes)) {
                    Some(w) => (
                        Some(Termination::Forged),
                        Some(format!("Slurm's accounting of job {} contradicts its end record: {w}", c.job_id)),
                    ),
                    None => (None, None),
                },
                JobState::Unknown => (None, None),
                _ => (
                    Some(state.termination().unwrap_or(Termination::Exited)),
                    Some(format!(
                        "Slurm ended job {} ({}/{}) as {} (exit code {}) after its sealed end record said its command exited 0",
                        c.job_id,
                        c.step,
                        c.attempt,
                        state,
                        c.fin.exit_code.as_deref().unwrap_or("unknown")
                    )),
                ),
            }
        };
        Confirmation {
            step: c.step,
            attempt: c.attempt,
            job_id: c.job_id,
            accounting: JobAccounting {
                state: state.to_string(),
                exit_code: c.fin.exit_code,
                derived_exit_code: c.fin.derived_exit_code,
                elapsed: c.fin.elapsed,
                node: c.fin.node,
                max_rss_bytes: c.fin.max_rss,
                queried: c.fin.via.to_string(),
            },
            queried_why: c.fin.why,
            termination,
            why,
        }
    }
}

/// A submitted job being watched.
struct Tracked {
    id: String,
    script: String,
    gres: String,
    submitted: chrono::DateTime<Utc>,
    /// The key its records are sealed with (`None` for a job resumed: the key
    /// died with the orchestrator that made it).
    seal: Option<String>,
    notes: Vec<String>,
    /// Its array's script, when it is an array's task.
    array: Option<crate::isolate::JobFile>,
}

/// What a submission made.
struct Submission {
    id: String,
    script: String,
    gres: String,
    seal: Option<String>,
    notes: Vec<String>,
    array: Option<crate::isolate::JobFile>,
}

/// What is at a job record's place.
enum Read {
    Nothing,
    /// A folder, a link, a FIFO: said, never followed or read.
    NotAFile(String),
    Record(Box<JobEnd>),
}

/// The digests of the job's own files in the record (`job.sh`, `job-start.json`,
/// `job-end.json`): hashed with the attempt, so `verify` sees an edit.
fn job_files(record_dir: &Path, logs: &Path) -> Vec<crate::isolate::JobFile> {
    let stop = crate::sys::Stop::new();
    ["job.sh", START_RECORD, END_RECORD]
        .iter()
        .filter_map(|n| {
            let p = logs.join(n);
            let (d, bytes) = crate::digest::sha256_regular(&p, &stop).ok()?;
            Some(crate::isolate::JobFile {
                path: p
                    .strip_prefix(record_dir)
                    .unwrap_or(&p)
                    .display()
                    .to_string(),
                sha256: d.hex(),
                bytes,
            })
        })
        .collect()
}

/// The comment of the array whose task `id` runs `job`, read from the array's
/// script in the record (`rel`, as the journal names it); else why not.
fn array_task_of(id: &str, job: &AttemptJob, rel: Option<&str>) -> Result<String, String> {
    let rel =
        rel.ok_or_else(|| format!("job {id} is an array's task, and the journal names no array"))?;
    let tag = Path::new(rel)
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("array-")?.strip_suffix(".sh"))
        .ok_or_else(|| format!("`{rel}` is not an array's script"))?;
    let p = crate::digest::contained(&job.record_dir, rel).map_err(|e| format!("`{rel}`: {e}"))?;
    let text = crate::digest::read_regular(&p, crate::digest::Follow::No, 64 << 20)
        .map_err(|e| format!("cannot read {rel}: {e}"))?;
    let index = ids::task_index(id).unwrap_or(u32::MAX);
    let line = format!(
        "{index}) exec /bin/sh {} ;;",
        sh_quote(&job.logs.join("job.sh").to_string_lossy())
    );
    if String::from_utf8_lossy(&text).lines().any(|l| l == line) {
        Ok(format!("{}{tag}", submitter::ARRAY_COMMENT))
    } else {
        Err(format!(
            "job {id}: task {index} of array {tag} does not run attempt {}/{}",
            job.step, job.attempt
        ))
    }
}

/// A time as Slurm writes it (`2026-12-06T13:58:25`, its local time).
fn slurm_time(s: Option<&str>) -> Option<chrono::DateTime<Utc>> {
    let t = chrono::NaiveDateTime::parse_from_str(s?, "%Y-%m-%dT%H:%M:%S").ok()?;
    Some(
        t.and_local_timezone(chrono::Local)
            .earliest()?
            .with_timezone(&Utc),
    )
}

/// A file of the record, hashed (never followed out of it).
fn hashed(record_dir: &Path, rel: &str) -> Option<crate::isolate::JobFile> {
    let p = crate::digest::contained(record_dir, rel).ok()?;
    let (d, bytes) = crate::digest::sha256_regular(&p, &crate::sys::Stop::new()).ok()?;
    Some(crate::isolate::JobFile {
        path: rel.to_string(),
        sha256: d.hex(),
        bytes,
    })
}

/// How many nodes an attempt's job asked for (`[steps.X.slurm] nodes`, else 1).
fn fan_out_nodes(job: &AttemptJob) -> u32 {
    job.placement
        .as_ref()
        .and_then(|p| p.request::<SlurmRequest>())
        .and_then(|r| r.options.nodes)
        .unwrap_or(1)
}

/// The exit code an attempt's record states. A multi-node command's end record
/// has srun's, which is the highest of its tasks' with a killed sibling counted
/// as 128 + the signal: a failed task ends its siblings, so that is never the
/// failure's own. Slurm's `DerivedExitCode` (the highest code its steps' tasks
/// exited with, signals apart) is.
pub(super) fn stated_exit(end: Option<&JobEnd>, fin: &poll::Final, nodes: u32) -> Option<i32> {
    let said = end.and_then(|e| e.exit_code);
    let derived = fin
        .derived_exit_code
        .as_deref()
        .and_then(|d| state::exit_code(d).0)
        .filter(|d| *d != 0);
    match (said, derived) {
        (Some(c), Some(d)) if nodes > 1 && c != 0 => Some(d),
        _ => said,
    }
}

/// Where Slurm's own word contradicts a job's end record (defense in depth: the
/// seal already keeps a command from writing one): a run time far from Slurm's
/// `Elapsed`, a peak memory far under its `MaxRSS`, another exit code.
fn contradiction(e: &JobEnd, fin: &poll::Final, nodes: u32) -> Option<String> {
    let wall_s = e.wall_ms / 1000.0;
    // A multi-node command is one task per node: accounting counts the nodes its
    // step ran on, and a command that ran on fewer did not do what was asked.
    if let Some(ran) = fin.step_nodes.filter(|n| nodes > 1 && *n < nodes) {
        return Some(format!(
            "its command ran on {ran} node(s) of the {nodes} its job asked for (Slurm's accounting of its steps)"
        ));
    }
    let lag = slurm_time(fin.end.as_deref()).zip(
        chrono::DateTime::parse_from_rfc3339(&e.ended_at)
            .ok()
            .map(|t| t.with_timezone(&Utc)),
    );
    if let Some(el) = fin.elapsed.as_deref().and_then(state::elapsed_secs) {
        // Slurm counts whole seconds and the job around the command (srun, this
        // process): the command cannot have run much longer. How long the job took
        // to launch it is no measure (a host running 16 jobs a core took 20 s
        // around a 5 ms command): when the job ended is. Without Slurm's end time,
        // up to 10 s around the command is not taken for a forgery.
        if wall_s > el + 2.0 || (lag.is_none() && el > wall_s * 1.1 + 10.0) {
            return Some(format!(
                "its end record says the command ran {wall_s:.3} s, Slurm's Elapsed {el:.0} s"
            ));
        }
    }
    if let Some((end, said)) = lag {
        // Slurm writes whole seconds: its end is at most a second before the
        // command's, and the job ends within moments of its command.
        let after = (end - said).num_milliseconds() as f64 / 1000.0;
        if !(-1.5..=12.0).contains(&after) {
            return Some(format!(
                "Slurm ended the job {after:.1} s after its end record says the command ended"
            ));
        }
    }
    // A multi-node job's end record reads its first node only; MaxRSS may be
    // another node's task.
    if let (Some(rss), Some(peak), 1) = (fin.max_rss, e.peak_memory_bytes, nodes) {
        if peak < rss / 2 && rss - peak > 16 << 20 {
            return Some(format!(
                "its end record says a peak of {peak} bytes, Slurm's MaxRSS {rss}"
            ));
        }
    }
    if let (Some(c), Some(sl)) = (
        e.exit_code,
        fin.exit_code.as_deref().and_then(|x| state::exit_code(x).0),
    ) {
        // Slurm's code for a job whose command was killed is 0 with the signal.
        // A multi-node command's code is srun's (a sibling killed for a failed
        // task makes it 128 + the signal): only success and failure compare.
        let differ = if nodes > 1 {
            (c == 0) != (sl == 0)
        } else {
            c != sl
        };
        if differ && e.signal.is_none() && JobState::parse(&fin.state) != JobState::Cancelled {
            return Some(format!(
                "its end record says exit {c}, Slurm's ExitCode {}",
                fin.exit_code.as_deref().unwrap_or("")
            ));
        }
    }
    None
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// Keep a log as it is now while its writer goes on: the file (and the writer's
/// open descriptor with it) moves to `<name>.after-kill`, and a copy of what it held
/// takes its place. A log not there yet (a job that had not opened its files) may
/// still be opened by path: `false`, and `settle_late_logs` moves it aside once the
/// job is gone.
pub(crate) fn freeze_log(log: &Path) -> bool {
    let side = after_kill(log);
    match std::fs::symlink_metadata(log) {
        Ok(m) if m.file_type().is_file() => {
            if std::fs::rename(log, &side).is_ok() {
                let _ = std::fs::copy(&side, log);
            }
            true
        }
        Ok(_) => true,
        Err(_) => false,
    }
}

fn after_kill(log: &Path) -> PathBuf {
    log.with_extension("log.after-kill")
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

/// What is at the job's end record's place now: never followed, bounded.
fn read_end_now(path: &Path) -> Read {
    match std::fs::symlink_metadata(path) {
        Err(_) => return Read::Nothing,
        Ok(m) if !m.is_file() => {
            return Read::NotAFile(format!(
                "is {}, not a file: not read",
                crate::digest::kind_of(&m.file_type())
            ))
        }
        Ok(_) => {}
    }
    match crate::digest::read_regular(path, crate::digest::Follow::No, 1 << 20) {
        Ok(b) => match serde_json::from_slice(&b) {
            Ok(e) => Read::Record(Box::new(e)),
            // A write in flight is a rename: a partial record is not an end.
            Err(_) => Read::Nothing,
        },
        Err(e) => Read::NotAFile(format!("cannot be read ({e})")),
    }
}

/// The job's start record if it is there now and sealed (when there is a key).
fn read_start_now(path: &Path, seal: Option<&str>) -> Option<exec::JobStart> {
    let b = crate::digest::read_regular(path, crate::digest::Follow::No, 1 << 20).ok()?;
    let s: exec::JobStart = serde_json::from_slice(&b).ok()?;
    seal.is_none_or(|k| s.sealed_by(k)).then_some(s)
}

/// The job's sealed end record; after the scheduler says the job ended, give a
/// shared filesystem a moment to show it.
async fn read_end(path: &Path, fin: Option<&poll::Final>, seal: Option<&str>) -> Option<JobEnd> {
    let tries = if fin.is_some() { 30 } else { 1 };
    for i in 0..tries {
        if let Read::Record(e) = read_end_now(path) {
            if seal.is_none_or(|k| e.sealed_by(k)) {
                return Some(*e);
            }
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
            expected: None,
            stray: None,
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
    fn a_job_ending_long_after_its_end_record_contradicts_it() {
        let said = JobEnd {
            exit_code: Some(0),
            wall_ms: 5.0,
            ended_at: "2026-12-06T13:58:25.300Z".into(),
            ..Default::default()
        };
        let fin = |elapsed: &str, end: Option<&str>| poll::Final {
            state: "COMPLETED".into(),
            exit_code: Some("0:0".into()),
            elapsed: Some(elapsed.into()),
            end: end.map(String::from),
            ..Default::default()
        };
        // A job that took 20 s to launch a 5 ms command, and ended with it.
        let end = slurm_time(Some("2026-12-06T13:58:26")).unwrap();
        let local = end
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%dT%H:%M:%S")
            .to_string();
        assert_eq!(
            contradiction(&said, &fin("00:00:20", Some(&local)), 1),
            None
        );
        // The same job ending 30 s after the command did.
        let late = (end + chrono::Duration::seconds(30))
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%dT%H:%M:%S")
            .to_string();
        assert!(contradiction(&said, &fin("00:00:50", Some(&late)), 1)
            .is_some_and(|w| w.contains("30.") && w.contains("after")));
        // Without Slurm's end time, Elapsed alone: up to 10 s around the command.
        assert_eq!(contradiction(&said, &fin("00:00:09", None), 1), None);
        assert!(contradiction(&said, &fin("00:00:20", None), 1).is_some());
        // The command cannot have run longer than its job.
        let long = JobEnd {
            wall_ms: 9_000.0,
            ..said.clone()
        };
        assert!(contradiction(&long, &fin("00:00:05", Some(&local)), 1).is_some());
    }

    #[test]
    fn a_multi_node_command_that_ran_on_fewer_nodes_contradicts_its_record() {
        let said = JobEnd {
            exit_code: Some(0),
            wall_ms: 1_000.0,
            peak_memory_bytes: Some(8 << 20),
            ..Default::default()
        };
        let fin = |nodes: Option<u32>| poll::Final {
            state: "COMPLETED".into(),
            exit_code: Some("0:0".into()),
            step_nodes: nodes,
            // Another node's task held more than the first node's cgroup.
            max_rss: Some(200 << 20),
            ..Default::default()
        };
        assert_eq!(contradiction(&said, &fin(Some(2)), 2), None);
        assert!(contradiction(&said, &fin(Some(1)), 2)
            .is_some_and(|w| w.contains("1 node(s) of the 2")));
        // Accounting that does not say (squeue, scontrol) is no contradiction.
        assert_eq!(contradiction(&said, &fin(None), 2), None);
        // A one-node job's MaxRSS far above its record's peak is.
        assert!(contradiction(&said, &fin(Some(1)), 1).is_some_and(|w| w.contains("MaxRSS")));
    }

    #[test]
    fn a_multi_node_failure_states_the_failed_task_s_code_not_srun_s() {
        let end = |c: i32| JobEnd {
            exit_code: Some(c),
            ..Default::default()
        };
        let fin = |derived: &str| poll::Final {
            state: "FAILED".into(),
            exit_code: Some("15:0".into()),
            derived_exit_code: Some(derived.into()),
            ..Default::default()
        };
        // Task 1 exited 3, srun killed task 0 and said 143.
        assert_eq!(stated_exit(Some(&end(143)), &fin("3:0"), 2), Some(3));
        assert_eq!(stated_exit(Some(&end(143)), &fin("3:0"), 1), Some(143));
        assert_eq!(stated_exit(Some(&end(0)), &fin("0:0"), 2), Some(0));
        // Only killed tasks (a timeout): srun's word stands.
        assert_eq!(stated_exit(Some(&end(137)), &fin("0:9"), 2), Some(137));
        // Success and failure still compare: srun's 143 against Slurm's 15.
        let said = end(143);
        assert_eq!(contradiction(&said, &fin("3:0"), 2), None);
        let clean = end(0);
        assert!(contradiction(&clean, &fin("3:0"), 2).is_some());
    }

    #[test]
    fn a_fanned_out_command_runs_once_per_node_with_the_attempt_s_environment() {
        let f = exec::FanOut {
            nodes: 3,
            srun: "/usr/bin/srun".into(),
        };
        let argv = f.argv(&["python3".into(), "-c".into(), "print(1)".into()]);
        assert_eq!(argv[0], "/usr/bin/srun");
        for a in [
            "--nodes=3",
            "--ntasks=3",
            "--ntasks-per-node=1",
            "--kill-on-bad-exit=1",
            "--export=ALL",
        ] {
            assert!(argv.contains(&a.to_string()), "{a}: {argv:?}");
        }
        assert_eq!(argv[argv.len() - 4..], ["--", "python3", "-c", "print(1)"]);
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
