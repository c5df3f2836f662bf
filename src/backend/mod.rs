//! Where an attempt runs: the seam between the scheduler and what starts, watches
//! and ends the attempt's processes.
//!
//! ```text
//! sched::executor ── AttemptSpec, cancel, start gate ──> Backend::run
//!                 <── AttemptOutcome | AttemptError ───  local (isolate: cgroups)
//!                                                        slurm (sbatch, squeue)
//! ```
//!
//! Every backend returns the same [`AttemptOutcome`]: exit or signal, termination
//! reason, wall and CPU time, peak memory, OOM kills, leftovers and what was
//! enforced; the record is built from it alone.
//!
//! Beyond `run`, a backend that hands attempts to something that outlives the
//! orchestrator (a batch scheduler) answers for them on the same trait: what a
//! step asks of it ([`Backend::place`], opaque to the scheduler), the scheduler's
//! later word on ended jobs ([`Backend::confirm`]), the release audit
//! ([`Backend::release_audit`]) and, for `resume`, the jobs the journal does not
//! name and the ones to wait for again. Each has a no-op default, which is what
//! this host's backend needs. A new backend is a folder here and one line in
//! [`open`].

#[cfg(test)]
pub mod fake;
mod local;
pub mod slurm;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

pub use crate::contract::{AttemptOutcome, AttemptSpec, CancelReason, Confirmation, Termination};
pub use local::Local;
pub use slurm::Slurm;

use crate::plan::model::BackendKind;

/// Who an attempt is, for a backend that names and files its jobs.
#[derive(Clone, Default)]
pub struct AttemptJob {
    pub run_id: String,
    pub step: String,
    pub attempt: u32,
    /// The attempt's folder in the record (job script, end record).
    pub logs: PathBuf,
    pub record_dir: PathBuf,
    /// A private file for what the job runs (its environment holds secrets): in
    /// the work folder, never the record.
    pub private: PathBuf,
    /// Where it runs and what it asks there, made by that backend's
    /// [`Backend::place`]; `None`: on this host.
    pub placement: Option<Placement>,
    /// Told the job id as soon as the job exists (the journal), before anything
    /// waits on it.
    pub on_submit: Option<OnSubmit>,
    /// Told what a person watching should know while the job lives (why it is
    /// pending, a controller that does not answer): the progress line and journal.
    pub on_note: Option<OnNote>,
    /// Jobs that must end well before this one may start (`afterok`): a detached
    /// run's upstream attempts and the step's attempt before it.
    pub after: Vec<String>,
    /// Submit and return ([`AttemptError::Detached`]): nobody waits on the job,
    /// `resume` collects it.
    pub detach: bool,
}

/// What a backend calls the moment a job exists.
pub type OnSubmit = Arc<dyn Fn(&Submitted) + Send + Sync>;
/// What a backend calls to say something of a job while it lives.
pub type OnNote = Arc<dyn Fn(&str) + Send + Sync>;

/// A job just submitted.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub job_id: String,
    /// Its script, relative to the record folder.
    pub script: String,
    pub gres: Option<String>,
    /// The script of the array it is a task of, relative to the record folder.
    pub array: Option<String>,
}

/// What an attempt asks of the backend that runs it: made by that backend from the
/// plan ([`Backend::place`]), carried by the scheduler unread, and read back only
/// by the backend named.
#[derive(Clone)]
pub struct Placement {
    /// The kind of backend that runs it.
    pub kind: BackendKind,
    request: Arc<dyn std::any::Any + Send + Sync>,
}

impl Placement {
    pub fn new<T: std::any::Any + Send + Sync>(kind: BackendKind, request: T) -> Placement {
        Placement {
            kind,
            request: Arc::new(request),
        }
    }

    /// The request, when it is of the type the caller's backend makes.
    pub fn request<T: std::any::Any>(&self) -> Option<&T> {
        self.request.downcast_ref()
    }
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Placement({})", self.kind.as_str())
    }
}

/// What a backend found of the run at its release audit.
#[derive(Debug, Clone, Default)]
pub struct BackendAudit {
    /// What was looked at.
    pub checked: Vec<String>,
    /// What the run left there (jobs still queued or running, ...).
    pub leftovers: Vec<String>,
}

/// A job of the run that the journal never named (the orchestrator died between
/// submitting it and writing it down).
#[derive(Debug, Clone)]
pub struct Stray {
    pub job_id: String,
    pub step: String,
    pub attempt: u32,
}

/// A job the journal names, to be waited for again by `resume`.
#[derive(Debug, Clone)]
pub struct Reattach {
    pub job_id: String,
    /// Its script, relative to the record folder.
    pub script: String,
    pub gres: Option<String>,
    pub submitted: chrono::DateTime<chrono::Utc>,
    /// The script of the array it is a task of, relative to the record folder.
    pub array: Option<String>,
}

/// Why a backend cannot serve this run.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// Programs it needs are not on `PATH`.
    #[error("the {backend} backend needs {} on PATH", .tools.join(", "))]
    MissingTools {
        backend: &'static str,
        tools: Vec<&'static str>,
    },
    /// What it runs on does not answer.
    #[error("{0}")]
    Unreachable(String),
    /// This orchestrator's own executable cannot be found (jobs run it).
    #[error("cannot find this orchestrator: {0}")]
    NoSelf(std::io::Error),
}

/// The remote backend a run's steps ask for by kind (`None` for this host), made
/// for the run: the one line a new backend adds.
pub fn open(
    kind: BackendKind,
    run_id: &str,
    throttle: u32,
    detached: bool,
) -> Result<Option<Arc<dyn Backend>>, BackendError> {
    Ok(match kind {
        BackendKind::Local => None,
        BackendKind::Slurm => Some(Arc::new(Slurm::new(run_id, throttle, detached)?)),
    })
}

/// What became of the jobs a dead run left on a remote backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadRunJobs {
    /// None queued or running.
    None,
    /// squeue did not answer (or is not there).
    Unknown,
    /// scancel took them; `gone`: within 60 s.
    Cancelled { gone: bool },
    /// scancel refused (why).
    Failed(String),
}

/// End what the dead run `run_id` left on the remote backends (they outlive
/// it), and settle `logs` its jobs may still have been writing: `recover`'s
/// first act, registered here beside [`open`] for each backend that needs it.
pub fn end_jobs_of_dead_run(run_id: &str, logs: &[PathBuf]) -> DeadRunJobs {
    slurm::end_jobs_of_dead_run(run_id, logs)
}

/// The environment an attempt's spec file (as a remote backend writes it in the
/// work folder) hands its job; `None` for bytes that are no such file. `resume`
/// masks what it holds.
pub fn spec_env(bytes: &[u8]) -> Option<Vec<(String, String)>> {
    serde_json::from_slice::<slurm::exec::JobSpec>(bytes)
        .ok()
        .map(|js| js.env)
}

/// Fit the device kinds `wanted` by the steps that run on the `kind` backend to
/// what it offers, in its own options (a kind it lacks refuses the run, or with
/// `allow_simulated` is simulated there); the warnings to say. Registered here
/// beside [`open`].
pub fn fit_devices(
    kind: BackendKind,
    wanted: &std::collections::BTreeSet<String>,
    settings: &mut crate::plan::model::BackendSettings,
    allow_simulated: bool,
) -> Result<Vec<String>, String> {
    match kind {
        BackendKind::Local => Ok(Vec::new()),
        BackendKind::Slurm => {
            slurm::simulate_missing_gres(wanted, &mut settings.gres, allow_simulated)
        }
    }
}

/// What a step asks of the backend that runs it, made from the plan by the
/// scheduler: a backend reads this and its own options, never the plan.
#[derive(Debug, Clone)]
pub struct StepAsk<'a> {
    /// The backend the step itself names (a compare step: this host), and the
    /// plan's default; `--backend` comes between them.
    pub backend: Option<BackendKind>,
    pub default_backend: BackendKind,
    /// Its devices, each request as (kind, count).
    pub devices: Vec<(String, u32)>,
    /// It runs alone (measured, or `exclusive = true`).
    pub exclusive: bool,
    /// The plan's `[backend]`: the options of every backend.
    pub settings: &'a crate::plan::model::BackendSettings,
    /// The step's own job options (`[steps.X.slurm]`).
    pub job: &'a crate::plan::model::SlurmOptions,
}

impl StepAsk<'_> {
    /// Where it runs, given the command line's `--backend`.
    pub fn kind(&self, cli: Option<BackendKind>) -> BackendKind {
        self.backend.or(cli).unwrap_or(self.default_backend)
    }
}

/// Sends each attempt to the backend its placement names, else this host; asks
/// every remote backend the run opened for what the trait asks.
pub struct Router {
    /// This host's backend; `None` where nothing may run here (`resume`).
    pub local: Option<Local>,
    /// Each remote backend the run opened, by its kind.
    pub remotes: Vec<(BackendKind, Arc<dyn Backend>)>,
    /// `--backend`: where steps that name none go.
    pub choice: Option<BackendKind>,
}

impl Router {
    /// Every remote backend, for `resume`: nothing of the run runs here again, and
    /// its jobs may be on any of them.
    pub fn remotes_only(run_id: &str) -> Result<Router, BackendError> {
        let mut remotes = Vec::new();
        for kind in BackendKind::ALL {
            // Submits nothing: what it finishes was submitted before.
            if let Some(b) = open(kind, run_id, 1, false)? {
                remotes.push((kind, b));
            }
        }
        Ok(Router {
            local: None,
            remotes,
            choice: None,
        })
    }

    /// The kind the journal names (`slurm`), when this router has it.
    pub fn kind_of(&self, name: &str) -> Option<BackendKind> {
        BackendKind::ALL
            .into_iter()
            .find(|k| k.as_str() == name && self.remote(*k).is_some())
    }

    fn remote(&self, kind: BackendKind) -> Option<&Arc<dyn Backend>> {
        self.remotes
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, r)| r)
    }

    /// The remote backends alone.
    pub fn remote_backends(&self) -> impl Iterator<Item = &Arc<dyn Backend>> {
        self.remotes.iter().map(|(_, r)| r)
    }
}

impl Backend for Router {
    fn name(&self) -> &'static str {
        "router"
    }

    fn place(&self, ask: &StepAsk<'_>) -> Option<Placement> {
        let kind = ask.kind(self.choice);
        match self.remote(kind) {
            Some(r) => r.place(ask),
            // No backend of that kind was opened: the attempt says so when it runs.
            None if kind != BackendKind::Local => Some(Placement::new(kind, ())),
            None => None,
        }
    }

    fn run(
        &self,
        spec: AttemptSpec,
        job: AttemptJob,
        cancel: watch::Receiver<Option<CancelReason>>,
        gate: Gate,
    ) -> BoxFuture<'_, Result<AttemptOutcome, AttemptError>> {
        let on = job.placement.as_ref().map(|p| p.kind);
        match (on, &self.local) {
            (Some(kind), _) => match self.remote(kind) {
                Some(r) => r.run(spec, job, cancel, gate),
                None => Box::pin(async move {
                    let name = kind.as_str();
                    Err(AttemptError::NotStarted(format!(
                        "the step runs on {name} but this run has no {name} backend"
                    )))
                }),
            },
            (None, Some(l)) => l.run(spec, job, cancel, gate),
            (None, None) => Box::pin(async {
                Err(AttemptError::NotStarted(
                    "nothing runs on this host here".into(),
                ))
            }),
        }
    }

    fn confirm(&self, limit: Duration) -> BoxFuture<'_, Vec<Confirmation>> {
        Box::pin(async move {
            let mut all = Vec::new();
            for r in self.remote_backends() {
                all.extend(r.confirm(limit).await);
            }
            all
        })
    }

    fn expect(&self, job_id: &str, step: &str, attempt: u32) {
        for r in self.remote_backends() {
            r.expect(job_id, step, attempt);
        }
    }

    fn release_audit(&self, hard: Option<Instant>) -> BoxFuture<'_, BackendAudit> {
        Box::pin(async move {
            let mut all = BackendAudit::default();
            for r in self.remote_backends() {
                let a = r.release_audit(hard).await;
                all.checked.extend(a.checked);
                all.leftovers.extend(a.leftovers);
            }
            all
        })
    }

    fn strays<'a>(
        &'a self,
        known: &'a std::collections::BTreeSet<String>,
    ) -> BoxFuture<'a, Option<Vec<Stray>>> {
        Box::pin(async move {
            let mut all = Vec::new();
            for r in self.remote_backends() {
                all.extend(r.strays(known).await?);
            }
            Some(all)
        })
    }

    fn jobs_now(&self) -> BoxFuture<'_, Option<std::collections::BTreeMap<String, String>>> {
        Box::pin(async move {
            let mut all = std::collections::BTreeMap::new();
            for r in self.remote_backends() {
                all.extend(r.jobs_now().await?);
            }
            Some(all)
        })
    }

    fn cancel_jobs<'a>(&'a self, ids: &'a [String], wait: Duration) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let mut gone = true;
            for r in self.remote_backends() {
                gone &= r.cancel_jobs(ids, wait).await;
            }
            gone
        })
    }

    fn end_now(&self, run_id: &str) {
        self.remote_backends().for_each(|r| r.end_now(run_id));
    }

    fn reattach(
        &self,
        spec: AttemptSpec,
        job: AttemptJob,
        found: Reattach,
    ) -> BoxFuture<'_, AttemptOutcome> {
        let kind = job
            .placement
            .as_ref()
            .map_or(BackendKind::Local, |p| p.kind);
        match self.remote(kind) {
            Some(r) => r.reattach(spec, job, found),
            None => Box::pin(async move {
                let on = kind.as_str();
                unwaited(
                    &found,
                    on,
                    crate::contract::Enforcer::None,
                    Termination::Lost,
                    format!("no {on} backend to wait on it"),
                )
            }),
        }
    }
}

/// The outcome of a job the journal names that cannot be waited for again:
/// nothing measured, the job as the journal named it, and why (its evidence).
pub fn unwaited(
    found: &Reattach,
    backend: &str,
    enforcer: crate::contract::Enforcer,
    termination: Termination,
    why: String,
) -> AttemptOutcome {
    use crate::contract::{Enforcement, JobAccounting, JobFacts};
    AttemptOutcome {
        termination,
        exit_code: None,
        signal: None,
        started_at: found.submitted,
        ended_at: chrono::Utc::now(),
        wall: Duration::ZERO,
        cpu_user: None,
        cpu_system: None,
        peak_memory_bytes: None,
        oom_kills: None,
        pids_limit_hit: None,
        kill_duration: None,
        cancel_reason: None,
        enforcement: Enforcement::nothing(enforcer),
        leftovers: Vec::new(),
        unopened_logs: Vec::new(),
        gpus: Vec::new(),
        npus: Vec::new(),
        gpu_misuse: Vec::new(),
        job: Some(JobFacts {
            backend: backend.to_string(),
            job_id: found.job_id.clone(),
            accounting: JobAccounting {
                state: "UNKNOWN".into(),
                ..JobAccounting::default()
            },
            script: found.script.clone(),
            submitted_at: crate::time::rfc3339(&found.submitted),
            source: "journal".into(),
            evidence: Some(why),
            ..JobFacts::default()
        }),
    }
}

/// A boxed future a backend returns (backends are used as trait objects).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Resolves when the attempt may start its process (Ok) or must not (Err, why).
pub type Gate = BoxFuture<'static, Result<(), String>>;

/// Why an attempt did not run to an outcome.
#[derive(Debug, thiserror::Error)]
pub enum AttemptError {
    /// Cancelled while waiting at the start gate: nothing was started.
    #[error("cancelled before its start ({0:?})")]
    CancelledBeforeStart(CancelReason),
    /// It could not be started (the text says why).
    #[error("{0}")]
    NotStarted(String),
    /// Submitted as this job for a detached run: not waited on.
    #[error("submitted as job {0}, not waited on (the run is detached)")]
    Detached(String),
}

/// Runs attempts.
pub trait Backend: Send + Sync {
    /// `local`, `slurm`, ...
    fn name(&self) -> &'static str;

    /// Run one attempt to its end: start it once `gate` opens, end it (and all it
    /// started) on `cancel`, and measure it. Never returns while a process of the
    /// attempt lives, unless it survived a bounded kill (then its leftovers say so).
    fn run(
        &self,
        spec: AttemptSpec,
        job: AttemptJob,
        cancel: watch::Receiver<Option<CancelReason>>,
        gate: Gate,
    ) -> BoxFuture<'_, Result<AttemptOutcome, AttemptError>>;

    /// Where a step's attempts run and what they ask there; `None`: this host
    /// (devices leased here, cgroups made here).
    fn place(&self, _ask: &StepAsk<'_>) -> Option<Placement> {
        None
    }

    /// The backend's own word on attempts that ended on their own account (a
    /// batch scheduler's accounting), waiting at most `limit`; each disagreement
    /// fails its attempt.
    fn confirm(&self, _limit: Duration) -> BoxFuture<'_, Vec<Confirmation>> {
        Box::pin(async { Vec::new() })
    }

    /// Ask for the word on a job an earlier orchestrator left unconfirmed.
    fn expect(&self, _job_id: &str, _step: &str, _attempt: u32) {}

    /// What the run left on the backend, after its attempts ended (`hard`: the run
    /// must end at once, so wait for nothing past that instant).
    fn release_audit(&self, _hard: Option<Instant>) -> BoxFuture<'_, BackendAudit> {
        Box::pin(async { BackendAudit::default() })
    }

    /// The run's jobs that are not in `known` and still live; `None` when the
    /// backend did not answer.
    fn strays<'a>(
        &'a self,
        _known: &'a std::collections::BTreeSet<String>,
    ) -> BoxFuture<'a, Option<Vec<Stray>>> {
        Box::pin(async { Some(Vec::new()) })
    }

    /// The run's jobs the backend holds now, each with its state in words
    /// (`PENDING (Dependency)`); `None` when it did not answer.
    fn jobs_now(&self) -> BoxFuture<'_, Option<std::collections::BTreeMap<String, String>>> {
        Box::pin(async { Some(Default::default()) })
    }

    /// Cancel these jobs and wait up to `wait` for them to go; whether they went.
    fn cancel_jobs<'a>(&'a self, _ids: &'a [String], _wait: Duration) -> BoxFuture<'a, bool> {
        Box::pin(async { true })
    }

    /// End at once, blocking for a bounded time, whatever the run has on the
    /// backend: the watchdog's last act when the run itself does not end (no async
    /// runtime can be trusted then).
    fn end_now(&self, _run_id: &str) {}

    /// Wait again for a job an earlier orchestrator of this run submitted
    /// (`resume`): its outcome as if this orchestrator had watched it.
    fn reattach(
        &self,
        _spec: AttemptSpec,
        _job: AttemptJob,
        found: Reattach,
    ) -> BoxFuture<'_, AttemptOutcome> {
        Box::pin(async move {
            unwaited(
                &found,
                self.name(),
                crate::contract::Enforcer::None,
                Termination::Lost,
                format!("the {} backend cannot wait on a job again", self.name()),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found() -> Reattach {
        Reattach {
            job_id: "42".into(),
            script: "steps/a/1/job.sh".into(),
            gres: None,
            submitted: chrono::Utc::now(),
            array: None,
        }
    }

    fn job(kind: Option<BackendKind>) -> AttemptJob {
        AttemptJob {
            step: "a".into(),
            attempt: 1,
            placement: kind.map(|k| Placement::new(k, ())),
            ..AttemptJob::default()
        }
    }

    /// A job no opened backend can wait on again is lost, not forged, and says
    /// why; the backend that cannot reattach says so by its own name.
    #[tokio::test]
    async fn a_job_nothing_can_wait_on_is_lost_with_why() {
        let none = Router {
            local: None,
            remotes: Vec::new(),
            choice: None,
        };
        let router = Router {
            local: None,
            remotes: vec![(BackendKind::Slurm, Arc::new(fake::FakeBackend::new()))],
            choice: None,
        };
        let spec = AttemptSpec {
            name: String::new(),
            canary: String::new(),
            argv: vec![],
            cwd: PathBuf::new(),
            env: vec![],
            memory: None,
            swap: false,
            pids: None,
            cpus: None,
            device_nodes: None,
            gpus: Vec::new(),
            npus: Vec::new(),
            timeout: None,
            grace: Duration::ZERO,
            stdout: PathBuf::new(),
            stderr: PathBuf::new(),
            tee: false,
            mask: None,
        };
        let o = none
            .reattach(spec.clone(), job(Some(BackendKind::Slurm)), found())
            .await;
        assert_eq!(o.termination, Termination::Lost);
        let facts = o.job.unwrap();
        assert_eq!(
            (facts.backend.as_str(), facts.job_id.as_str()),
            ("slurm", "42")
        );
        assert_eq!(
            facts.evidence.as_deref(),
            Some("no slurm backend to wait on it")
        );
        let o = router
            .reattach(spec, job(Some(BackendKind::Slurm)), found())
            .await;
        assert_eq!(o.termination, Termination::Lost);
        assert_eq!(
            o.job.unwrap().evidence.as_deref(),
            Some("the fake backend cannot wait on a job again")
        );
    }
}
