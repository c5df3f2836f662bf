//! One run from plan to record: load and validate the plan, choose the isolation,
//! open the record folder and journal, run the DAG, audit the release, and build the
//! record from the journal. `main.rs` only maps the result to messages and exit codes.

mod checks;
mod detached;
mod header;
mod leases;
pub mod pins;
mod preflight;
mod watchdog;
pub use detached::{detach, detached_command, status, DetachedRun, StepNow};
pub use watchdog::Watchdog;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::evidence::journal::{Event, Journal};
use crate::evidence::record::{self, HostInfo, Record, ReleaseAudit, RunStatus};
use crate::isolate::{self, Isolator, Mode};
use crate::plan::{IsolationMode, Plan, PlanErrors};
use crate::sched::{self, ProgressMode, SchedOptions};
use preflight::Preflight;

/// What the user asked for on the command line.
#[derive(Debug, Clone)]
pub struct RunArgs {
    pub plan: PathBuf,
    pub records: PathBuf,
    /// Default: `work/` beside the records folder.
    pub work: Option<PathBuf>,
    pub jobs: Option<u32>,
    pub keep_going: bool,
    pub isolation: Option<IsolationMode>,
    /// A delegated cgroup for the attempts (a path below each hierarchy's root),
    /// overriding the plan's `limits.cgroup_parent`.
    pub cgroup_parent: Option<PathBuf>,
    pub timeout: Option<Duration>,
    pub grace: Option<Duration>,
    pub progress: ProgressMode,
    pub tee: bool,
    /// Default: the host's total memory.
    pub memory_budget: Option<u64>,
    /// Run even when pins drifted; the drift is recorded and shown first.
    pub allow_drift: bool,
    /// Device inventory file (else `ORCHESTRATE_INVENTORY`, else
    /// `/etc/orchestrate/devices.toml`).
    pub inventory: Option<PathBuf>,
    /// How long a step waits for devices held by others.
    pub device_wait: Duration,
    /// Sign the attestation (DSSE, ed25519) with this key; unsigned without one.
    pub sign_key: Option<crate::evidence::dsse::SigningKey>,
    /// `--only` and `--set`.
    pub load: crate::plan::LoadOptions,
    /// `--cache DIR` (else `ORCHESTRATE_CACHE`, else `~/.cache/orchestrate`).
    pub cache: Option<PathBuf>,
    /// `--cache-remote`: the shared store (else the plan's `[cache] remote`).
    pub cache_remote: Option<String>,
    /// `--no-cache`: run every cached step (and store what it makes).
    pub no_cache: bool,
    /// `--refresh STEP`: run these cached steps whatever the cache holds.
    pub refresh: Vec<String>,
    /// `--backend`: where steps that do not say run (else `[backend] kind`).
    pub backend: Option<crate::plan::model::BackendKind>,
    /// Attached, detached (`--detach`), or collecting a detached run (`resume`).
    pub mode: RunMode,
}

/// Whether the run waits on its jobs (docs/slurm.md, "Detached runs").
#[derive(Debug, Clone, Default)]
pub enum RunMode {
    #[default]
    Attached,
    /// Submit every job and return; `resume` runs `command` again in `cwd` to
    /// collect the run.
    Detach { command: Vec<String>, cwd: PathBuf },
    /// Collect the detached run of this record folder.
    Collect(PathBuf),
}

/// Why a run could not be done. The CLI maps each to an exit code.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The plan is invalid (exit 2).
    #[error("{0}")]
    Plan(#[from] PlanErrors),
    /// The environment refused the run (exit 3).
    #[error("{0}")]
    Refused(String),
    /// Reading or writing the record failed (exit 1).
    #[error("{0}")]
    Io(String),
}

impl RunError {
    /// What the command that ran it exits with (docs/design.md, "Exit codes").
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Plan(_) => 2,
            RunError::Refused(_) => 3,
            RunError::Io(_) => 1,
        }
    }
}

/// A finished run.
#[derive(Debug)]
pub struct RunResult {
    pub record_dir: PathBuf,
    pub record: Record,
    /// Reports rendered into the record folder (the plan's `[report] templates`).
    pub reports: Vec<PathBuf>,
    /// Reports that could not be rendered (the record itself is intact).
    pub report_errors: Vec<String>,
    /// Still armed: what the caller does with the run (its summary, its CI
    /// outputs) ends on a second interrupt like the run did. Drop it when done.
    pub watchdog: Option<Watchdog>,
}

/// Everything a run holds once it is under way, before its DAG runs.
struct Underway {
    plan: Arc<Plan>,
    isolator: Arc<Isolator>,
    backend: Arc<crate::backend::Router>,
    run_id: String,
    record_dir: PathBuf,
    journal: Journal,
    dag: sched::DagRun,
    watchdog: Watchdog,
    _lock: sched::RunLock,
}

/// Run a plan to its end (or, collecting a detached run, finish it).
pub async fn run(args: RunArgs) -> Result<RunResult, RunError> {
    let mut u = begin(&args).await?;
    let jerr = |e: std::io::Error| RunError::Io(format!("cannot write the journal: {e}"));
    let collected = u.dag.opts.detach.collected().is_some();
    let detach = u.dag.opts.detach.clone();
    let outcome = sched::run_dag(u.dag, &mut u.journal).await.map_err(jerr)?;
    // Declared inputs of cached steps were hashed through it too.
    if let Some(stat) = crate::digest::stat::StatCache::installed() {
        stat.save_quietly();
    }
    crate::sys::stall_point("after-dag").await;
    if let (true, Some(c)) = (collected, detach.collected()) {
        detached::cancel_unwaited(c, u.backend.as_ref(), &mut u.journal)
            .await
            .map_err(jerr)?;
    }
    conclude(
        &u.plan,
        &u.isolator,
        u.backend.as_ref(),
        &u.run_id,
        &u.record_dir,
        outcome,
        &mut u.journal,
    )
    .await?;
    drop(u.journal);
    let mut done = record_and_reports(&u.plan, u.record_dir, args.sign_key.as_ref()).await?;
    done.watchdog = Some(u.watchdog);
    Ok(done)
}

/// Check, take what the run needs, and open (or, collecting, reopen) its
/// folders and journal.
async fn begin(args: &RunArgs) -> Result<Underway, RunError> {
    let Preflight {
        plan,
        pins,
        gres_warnings,
        inventory,
        lease_manager,
        mode,
        isolator,
        host,
        budget,
    } = preflight::preflight(args)?;
    let collect = match &args.mode {
        RunMode::Collect(dir) => Some(detached::reopen(dir, &plan)?),
        _ => None,
    };
    let run_id = match &collect {
        Some(c) => c.run_id.clone(),
        None => sched::new_run_id(),
    };
    let _lock = sched::RunLock::acquire(&run_id)
        .map_err(|e| RunError::Io(format!("cannot register the run: {e}")))?;
    let jobs = args.jobs.unwrap_or(host.cpus.max(1));
    let submits_only = matches!(args.mode, RunMode::Detach { .. });
    let backend = Arc::new(open_backends(&plan, &run_id, args, &isolator, jobs)?);
    let watchdog = start_watchdog(args, &plan, &run_id, &isolator, &backend);
    let (folders, detach) = match collect {
        Some(c) => (c.folders, sched::Detach::Collect(Arc::new(c.collected))),
        None => (
            open_folders(args, &plan, &run_id)?,
            if submits_only {
                sched::Detach::Submit
            } else {
                sched::Detach::No
            },
        ),
    };
    let Folders {
        work_dir,
        record_dir,
        revisions,
        mut journal,
    } = folders;
    let tool_dir = sched::tool_dir();
    let base_env = sched::base_env(tool_dir.as_deref());
    // Secret values the steps may see: what the plan read from secret variables or
    // sets literally under a secret name, and secret-named variables passed through.
    let masker = Arc::new(run_masker(&plan, &base_env));
    journal.set_masker(masker.clone());
    let opts = SchedOptions {
        run_id: run_id.clone(),
        record_dir: record_dir.clone(),
        work_dir: work_dir.clone(),
        jobs,
        keep_going: args.keep_going,
        memory_budget: budget,
        run_timeout: args.timeout.or(plan.limits.run_timeout),
        grace: grace_of(args, &plan),
        progress: args.progress,
        tee: args.tee,
        secret_env: plan.secret_env.clone(),
        masker,
        revisions: revisions
            .iter()
            .map(|r| (r.name.clone(), r.commit.clone()))
            .collect(),
        reuse: reuse(args, &plan, &pins, &revisions),
        detach,
    };
    if opts.detach.collected().is_none() {
        let header = header::run_header(&header::Inputs {
            plan: &plan,
            args,
            pins: &pins,
            inventory: &inventory,
            host,
            jobs,
            mode,
            budget,
            work_dir: &work_dir,
            run_timeout: opts.run_timeout,
            isolator: &isolator,
            revisions,
        });
        start_journal(
            &mut journal,
            &run_id,
            &header,
            &pins,
            &isolator,
            &gres_warnings,
        )?;
    }
    let early: Vec<String> = isolator
        .warnings()
        .iter()
        .chain(&gres_warnings)
        .cloned()
        .collect();
    sched::warn_before_start(args.progress, &early);
    let dag = sched::DagRun {
        plan: Arc::clone(&plan),
        opts,
        backend: Arc::clone(&backend) as Arc<dyn crate::backend::Backend>,
        base_env,
        devices: preflight::broker(lease_manager, inventory, &plan, args.device_wait),
        checks: Some(Arc::new(checks::CompareChecks) as Arc<dyn sched::CheckRunner>),
    };
    Ok(Underway {
        plan,
        isolator,
        backend,
        run_id,
        record_dir,
        journal,
        dag,
        watchdog,
        _lock,
    })
}

/// Render the plan's `[report] templates` from the finished record into its folder.
fn render_reports(plan: &Plan, record_dir: &Path) -> (Vec<PathBuf>, Vec<String>) {
    use crate::report::{load::load, render_record_in, TemplateChoice};
    let mut written = Vec::new();
    let mut errors = Vec::new();
    if plan.report.templates.is_empty() {
        return (written, errors);
    }
    // Read back from disk (digest checked) once, as `orchestrate report` would.
    let loaded = load(record_dir, false);
    // Reports are no more readable than the record folder that holds them.
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(record_dir).map_or(0o644, |m| m.permissions().mode() & 0o666)
    };
    for t in &plan.report.templates {
        let choice = match TemplateChoice::parse(t) {
            // Checked at load, and again here: the file must still be inside the
            // plan's folder, not behind a link placed since.
            TemplateChoice::Path(p) => {
                let full = plan.dir.join(p);
                match (full.canonicalize(), plan.dir.canonicalize()) {
                    (Ok(f), Ok(d)) if f.starts_with(&d) => TemplateChoice::Path(f),
                    _ => {
                        errors.push(format!(
                            "report `{t}`: the template is not a file inside the plan's folder"
                        ));
                        continue;
                    }
                }
            }
            c => c,
        };
        let path = record_dir.join(choice.file_name());
        let l = match &loaded {
            Ok(l) => l,
            Err(e) => {
                errors.push(format!("report `{t}`: {e}"));
                continue;
            }
        };
        let rendered = render_record_in(
            &l.record,
            &l.digest,
            l.plan_toml.as_deref(),
            choice,
            Some(&plan.dir),
            Some(record_dir),
        );
        match rendered {
            Ok(text) => {
                match crate::evidence::atomic::write_atomic_mode(&path, text.as_bytes(), mode) {
                    Ok(()) => written.push(path),
                    Err(e) => errors.push(format!("report `{t}`: {e}")),
                }
            }
            Err(e) => errors.push(format!("report `{t}`: {e}")),
        }
    }
    (written, errors)
}

/// Build `record.json`, `record.sha256` and `attestation.intoto.jsonl` (signed with
/// `key` when given) from the journal of a record folder.
pub fn finish_record(
    record_dir: &Path,
    key: Option<&crate::evidence::dsse::SigningKey>,
) -> Result<Record, RunError> {
    let (rec, digest) = write_record_from_journal(record_dir)?;
    crate::evidence::write_attestation_for(record_dir, &rec, &digest, key)
        .map_err(|e| RunError::Io(e.to_string()))?;
    Ok(rec)
}

/// Build `record.json` (with the journal's digest) and `record.sha256` from the
/// journal of a record folder; the record and its digest.
/// `orchestrate why`: each cached step's fate, without running (revisions are
/// resolved, nothing is checked out).
pub fn why(
    plan: &Plan,
    pins: &crate::pins::PinReport,
    cache: &crate::cache::Cache,
    remote: Option<&str>,
    step: Option<&str>,
) -> Result<String, sched::WhyError> {
    let work = Path::new("/nonexistent-work");
    let records = crate::pins::revisions::resolve(&plan.revisions, work)?;
    let revisions = records
        .iter()
        .map(|r| (r.name.clone(), r.commit.clone()))
        .collect();
    let secret_key = cache
        .secret_key()
        .map_err(|source| sched::WhyError::Cache {
            path: cache.root().to_path_buf(),
            source,
        })?;
    let reuse = Arc::new(crate::cache::Reuse {
        cache: cache.clone(),
        no_cache: false,
        refresh: Vec::new(),
        tools: tool_versions(pins),
        plan: plan.name.clone(),
        trees: source_trees(&records, pins),
        secret_key,
        remote: remote_tier(remote, plan, None),
    });
    let tool_dir = sched::tool_dir();
    let masker = run_masker(plan, &sched::base_env(tool_dir.as_deref()));
    sched::why(plan, reuse, &revisions, &masker, step)
}

/// Secret values the steps may see: what the plan read from secret variables or
/// sets literally under a secret name, and secret-named variables passed through.
fn run_masker(plan: &Plan, base_env: &[(String, String)]) -> crate::mask::Masker {
    crate::mask::Masker::new(
        plan.secret_values.0.iter().cloned().chain(
            base_env
                .iter()
                .flat_map(|(k, v)| crate::mask::secrets_in(k, v, &plan.secret_env)),
        ),
    )
}

/// The source trees steps may read, with what each is: every revision (its
/// checkout, or the working tree it runs) and every git pin's repository.
fn source_trees(
    revisions: &[crate::pins::revisions::RevisionRecord],
    pins: &crate::pins::PinReport,
) -> Vec<crate::cache::TreeId> {
    use crate::cache::TreeId;
    let untracked = |u: &[crate::pins::UntrackedFile]| -> Vec<(String, Option<String>)> {
        u.iter()
            .map(|f| (f.path.clone(), f.sha256.map(|d| d.hex())))
            .collect()
    };
    let mut out: Vec<TreeId> = revisions
        .iter()
        .map(|r| TreeId {
            name: format!("revision `{}`", r.name),
            dir: r.dir.clone(),
            id: TreeId::describe(
                &r.commit,
                &r.tree,
                r.diff_sha256.map(|d| d.hex()).as_deref(),
                &untracked(&r.untracked),
            ),
            revision: Some(r.name.clone()),
        })
        .collect();
    for e in &pins.entries {
        if let Some(crate::pins::Details::Git(g)) = &e.details {
            out.push(TreeId {
                name: format!("git pin `{}`", e.name),
                dir: g.toplevel.clone(),
                id: TreeId::describe(
                    &g.head,
                    &g.tree,
                    g.diff_sha256.map(|d| d.hex()).as_deref(),
                    &untracked(&g.untracked_files),
                ),
                revision: None,
            });
        }
    }
    out
}

fn tool_versions(pins: &crate::pins::PinReport) -> std::collections::BTreeMap<String, String> {
    pins.entries
        .iter()
        .filter(|e| e.kind == crate::pins::PinKind::Tool)
        .map(|e| (e.name.clone(), e.observed.clone().unwrap_or_default()))
        .collect()
}

/// The step cache, when a step asks for one; a cache folder that cannot be used is a
/// warning, and the run goes on without it.
/// `--cache DIR`, else the default cache folder: the step cache and the stat cache.
fn cache_root(args: &RunArgs) -> PathBuf {
    args.cache
        .clone()
        .unwrap_or_else(crate::cache::Cache::default_root)
}

fn reuse(
    args: &RunArgs,
    plan: &Plan,
    pins: &crate::pins::PinReport,
    revisions: &[crate::pins::revisions::RevisionRecord],
) -> Option<Arc<crate::cache::Reuse>> {
    if !plan.steps.iter().any(|s| s.cache) {
        return None;
    }
    let root = cache_root(args);
    let cache = match crate::cache::Cache::open(&root) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(
                "the step cache at {} cannot be used ({e}); cached steps run",
                root.display()
            );
            return None;
        }
    };
    let secret_key = match cache.secret_key() {
        Ok(k) => k,
        Err(e) => {
            tracing::warn!(
                "the step cache at {} cannot be used ({e}); cached steps run",
                root.display()
            );
            return None;
        }
    };
    Some(Arc::new(crate::cache::Reuse {
        cache,
        no_cache: args.no_cache,
        refresh: args.refresh.clone(),
        tools: tool_versions(pins),
        plan: plan.name.clone(),
        trees: source_trees(revisions, pins),
        secret_key,
        remote: remote_tier(args.cache_remote.as_deref(), plan, args.sign_key.as_ref()),
    }))
}

/// The shared store of the run's cache (`--cache-remote`, else the plan's `[cache]
/// remote`), with the keys it trusts; `None` (said) when it cannot be used.
fn remote_tier(
    flag: Option<&str>,
    plan: &Plan,
    sign: Option<&crate::evidence::dsse::SigningKey>,
) -> Option<Arc<crate::cache::RemoteTier>> {
    use crate::cache::remote;
    let spec = flag
        .map(str::to_string)
        .or_else(|| plan.cache.remote.clone())?;
    let opened = remote::open(&spec)
        .map_err(|e| e.to_string())
        .and_then(|r| {
            let t = remote::Trust::load(&plan.cache.trust).map_err(|e| e.to_string())?;
            Ok((r, t))
        });
    let (remote, trust) = match opened {
        Ok(both) => both,
        Err(e) => {
            tracing::warn!("the shared cache cannot be used ({e}); only the local one is");
            return None;
        }
    };
    let trust = match sign {
        Some(k) => trust.with("this user's key", k.verifying_key()),
        None => trust,
    };
    Some(Arc::new(crate::cache::RemoteTier {
        remote,
        trust,
        sign: sign.cloned(),
        user: crate::backend::slurm::current_user(),
        host: crate::devices::holder::host_name(),
    }))
}

/// A failed run whose only failures are `gate = "new"` steps without new failures
/// succeeds, saying so. Judged on the record the journal gives so far.
fn gate_outcome(
    plan: &Plan,
    record_dir: &Path,
    status: RunStatus,
    reason: Option<String>,
) -> (RunStatus, Option<String>) {
    if status != RunStatus::Failed
        || !plan
            .steps
            .iter()
            .any(|s| s.gate == crate::plan::GateMode::New)
    {
        return (status, reason);
    }
    let lines = match crate::evidence::journal::read(&record_dir.join("journal.jsonl")) {
        Ok((lines, _)) => lines,
        Err(_) => return (status, reason),
    };
    let Ok(rec) = crate::evidence::build::build(&lines) else {
        return (status, reason);
    };
    match crate::evidence::revisions::excused_by_gate(&rec) {
        Some(why) => (RunStatus::Succeeded, Some(why)),
        // Still failed by its steps: those that fail it, apart from those that do not.
        None if reason
            .as_deref()
            .is_some_and(|r| r.starts_with("failed steps: ")) =>
        {
            (
                status,
                crate::evidence::revisions::gate_reason(&rec).or(reason),
            )
        }
        None => (status, reason),
    }
}

fn write_record_from_journal(
    record_dir: &Path,
) -> Result<(Record, crate::digest::Sha256Digest), RunError> {
    let journal = record_dir.join("journal.jsonl");
    let mut rec = crate::evidence::build::build_from_journal(&journal)
        .map_err(|e| RunError::Io(e.to_string()))?;
    // Attempts the orchestrator lost: their logs are whatever they wrote until they
    // were ended (recover ends them before it finishes the record), masked for the
    // secrets that can still be known, and their spec files removed.
    let stop = crate::sys::Stop::new();
    let work = Path::new(&rec.run.options.work);
    let work = (work.is_absolute()
        && work.file_name().and_then(|n| n.to_str()) == Some(rec.run_id.as_str()))
    .then_some(work);
    let lost = rec
        .steps
        .iter()
        .flat_map(|s| s.attempts.iter())
        .any(|a| a.termination == record::Termination::OrchestratorLost);
    let masker = lost.then(|| Arc::new(sched::recovered_masker(record_dir, work)));
    for a in rec.steps.iter_mut().flat_map(|s| s.attempts.iter_mut()) {
        if a.termination == record::Termination::OrchestratorLost {
            for log in [&mut a.stdout, &mut a.stderr] {
                // The journal names the path: only ever inside the record folder.
                match crate::digest::contained(record_dir, &log.path) {
                    Ok(path) => {
                        if let Some(m) = &masker {
                            crate::mask::mask_file_in_place(&path, m);
                        }
                        *log = crate::sched::collect::log_record(record_dir, &path, &stop)
                    }
                    Err(why) => log.note = Some(format!("not hashed: {why}")),
                }
            }
        }
    }
    if let Some(w) = work.filter(|_| lost) {
        for spec in sched::spec_files(w) {
            let _ = std::fs::remove_file(spec);
        }
    }
    let (d, bytes) = crate::digest::sha256_regular(&journal, &stop)
        .map_err(|e| RunError::Io(format!("cannot hash the journal: {e}")))?;
    rec.journal = Some(crate::evidence::record::FileRecord {
        path: "journal.jsonl".into(),
        sha256: d.hex(),
        bytes,
        note: None,
    });
    let digest =
        crate::evidence::write_record(record_dir, &rec).map_err(|e| RunError::Io(e.to_string()))?;
    Ok((rec, digest))
}

/// The run's own audit: no cgroup of this run is left, and no process carries one of
/// its canaries.
/// The run's release audit: its remote jobs (if any) leave the queue first, since on
/// a node of the cluster that is this host their processes are the jobs' own until
/// then; then its cgroups, processes and leases.
async fn run_audit(
    isolator: &Isolator,
    backend: &dyn crate::backend::Backend,
    run_id: &str,
    hard: Option<std::time::Instant>,
) -> ReleaseAudit {
    let remote = backend.release_audit(hard).await;
    let mut audit = release_audit(isolator, run_id);
    audit.checked.extend(remote.checked);
    audit.leftovers.extend(remote.leftovers);
    audit.passed = audit.leftovers.is_empty();
    audit
}

fn release_audit(isolator: &Isolator, run_id: &str) -> ReleaseAudit {
    let prefix = format!("orchestrate-{run_id}-");
    let mut leftovers: Vec<String> = isolator
        .list()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .map(|n| format!("cgroup {n}"))
        .collect();
    let canary_prefix = format!("{run_id}/");
    let ours = isolate::processes_with_canary(&|c| c.starts_with(&canary_prefix));
    for (pid, canary) in &ours {
        leftovers.push(format!("process {pid} (attempt {canary})"));
    }
    let mut checked = vec!["cgroups".to_string(), "processes".to_string()];
    if let Some(on_gpus) = isolate::gpu_processes() {
        checked.push("GPU contexts (NVML)".to_string());
        for (pid, uuid, name) in on_gpus {
            if let Some((_, canary)) = ours.iter().find(|(p, _)| u32::try_from(*p) == Ok(pid)) {
                leftovers.push(format!(
                    "GPU context of process {pid} (attempt {canary}) on {name} ({uuid})"
                ));
            }
        }
    }
    let dir = crate::devices::default_lease_dir();
    match crate::devices::audit_leases(&dir) {
        Ok(states) => {
            checked.push(format!("leases in {}", dir.display()));
            for st in states {
                if st.run_id() == Some(run_id) {
                    leftovers.push(format!(
                        "lease {} (device {} core {})",
                        st.file.display(),
                        st.device,
                        st.core
                    ));
                }
            }
        }
        Err(e) => leftovers.push(format!("lease folder unreadable: {e}")),
    }
    ReleaseAudit {
        passed: leftovers.is_empty(),
        checked,
        leftovers,
    }
}

/// What `orchestrate resume` did.
#[derive(Debug)]
pub struct ResumeResult {
    pub record: Record,
    pub resumed: sched::Resumed,
}

/// `orchestrate resume RUN`: finish a run whose orchestrator was killed while its
/// batch jobs ran. Its jobs are found in the journal and never submitted again:
/// the ones that finished are read, the ones still running are waited for; then
/// the record is finished (steps that never started stay unstarted: the run is
/// `interrupted` unless every declared step ended).
pub async fn resume(record_dir: &Path) -> Result<ResumeResult, RunError> {
    use crate::evidence::journal::{read, Journal};
    let record_dir = &absolute(record_dir);
    let path = record_dir.join("journal.jsonl");
    let (lines, _) = read(&path).map_err(|e| RunError::Io(format!("{}: {e}", path.display())))?;
    let run_id = lines
        .iter()
        .find_map(|l| match &l.event {
            Event::RunStarted { run_id, .. } => Some(run_id.clone()),
            _ => None,
        })
        .ok_or_else(|| {
            RunError::Refused(format!("{} has no run in its journal", path.display()))
        })?;
    if lines
        .iter()
        .any(|l| matches!(l.event, Event::RunEnded { .. }))
    {
        return Err(RunError::Refused(format!(
            "run {run_id} has ended; nothing to resume"
        )));
    }
    if !sched::Judge::new().of(&run_id).is_dead() {
        return Err(RunError::Refused(format!(
            "run {run_id} is not proven dead (its lock is held): it cannot be resumed while it may run"
        )));
    }
    // The dead orchestrator's registration goes, so this one registers anew (and
    // leaves none behind when it is done).
    sched::forget_dead_run(&run_id);
    let _lock = sched::RunLock::acquire(&run_id)
        .map_err(|e| RunError::Io(format!("cannot take over run {run_id}: {e}")))?;
    let last = lines.last().map_or(0, |l| l.seq);
    let mut journal = Journal::reopen(&path, last)
        .map_err(|e| RunError::Io(format!("{}: {e}", path.display())))?;
    let resumed = sched::resume_jobs(&run_id, record_dir, &lines, &mut journal)
        .await
        .map_err(RunError::Refused)?;
    // Every declared step ended: the run ends as it would have.
    let (lines, _) = read(&path).map_err(|e| RunError::Io(format!("{}: {e}", path.display())))?;
    let mut declared: Vec<String> = Vec::new();
    let mut ended: std::collections::BTreeMap<String, record::StepStatus> = Default::default();
    for l in &lines {
        match &l.event {
            e @ Event::RunStarted { .. } => {
                declared = e
                    .run_header()
                    .map(|h| h.steps.iter().map(|s| s.id.clone()).collect())
                    .unwrap_or_default()
            }
            Event::StepEnded { step, status, .. } => {
                ended.insert(step.clone(), *status);
            }
            // The scheduler ended the job otherwise than its clean end record said.
            Event::JobConfirmed { confirmation: c } if c.termination.is_some() => {
                ended.insert(c.step.clone(), record::StepStatus::Failed);
            }
            _ => {}
        }
    }
    if declared.iter().all(|d| ended.contains_key(d)) {
        let mut audit = ReleaseAudit {
            passed: true,
            checked: Vec::new(),
            leftovers: Vec::new(),
        };
        if let Ok(b) = crate::backend::Router::remotes_only(&run_id) {
            let remote = crate::backend::Backend::release_audit(&b, None).await;
            audit.checked.extend(remote.checked);
            audit.leftovers.extend(remote.leftovers);
            audit.passed = audit.leftovers.is_empty();
        }
        let failed: Vec<&String> = ended
            .iter()
            .filter(|(_, s)| !s.is_success())
            .map(|(k, _)| k)
            .collect();
        let (status, reason) = if !audit.passed {
            (
                RunStatus::Failed,
                Some(format!(
                    "release audit failed: {}",
                    audit.leftovers.join("; ")
                )),
            )
        } else if failed.is_empty() {
            (
                RunStatus::Succeeded,
                Some("finished by `orchestrate resume`".to_string()),
            )
        } else {
            (
                RunStatus::Failed,
                Some(format!(
                    "failed steps: {}",
                    failed
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            )
        };
        journal
            .append(Event::RunEnded {
                status,
                reason,
                footer: record::RunFooter {
                    release_audit: Some(audit),
                },
            })
            .map_err(|e| RunError::Io(format!("cannot write the journal: {e}")))?;
    }
    drop(journal);
    let record = finish_record(record_dir, None)?;
    Ok(ResumeResult { record, resumed })
}

/// Every device request a step on this host makes must be servable (really, or
/// simulated where allowed) before anything starts; a remote backend's job asks
/// its own.
/// The inventory, and the lease manager when any step leases here.
fn local_devices(
    plan: &Plan,
    args: &RunArgs,
    elsewhere: &dyn Fn(&crate::plan::Step) -> bool,
) -> Result<
    (
        crate::devices::Inventory,
        Option<crate::devices::LeaseManager>,
    ),
    RunError,
> {
    let local_requests: Vec<&String> = plan
        .devices
        .keys()
        .filter(|d| {
            plan.steps
                .iter()
                .any(|s| !elsewhere(s) && s.devices.contains(d))
        })
        .collect();
    Ok(if local_requests.is_empty() {
        (crate::devices::Inventory::default(), None)
    } else {
        let file = crate::devices::load_inventory(args.inventory.as_deref())
            .map_err(|e| RunError::Refused(e.to_string()))?;
        let inv = crate::devices::merged(file, crate::devices::discover());
        for name in local_requests {
            if let Some(req) = leases::request(plan, name) {
                crate::devices::units_for(&inv, &req)
                    .map_err(|e| RunError::Refused(e.to_string()))?;
            }
        }
        let mgr = crate::devices::LeaseManager::from_env()
            .map_err(|e| RunError::Refused(format!("device leases: {e}")))?;
        (inv, Some(mgr))
    })
}

/// No step on this host may ask for more memory than the run may give.
fn check_budget(
    plan: &Plan,
    budget: u64,
    elsewhere: &dyn Fn(&crate::plan::Step) -> bool,
) -> Result<(), RunError> {
    for s in plan.steps.iter().filter(|s| !elsewhere(s)) {
        let m = plan.memory_of(s).map_or(0, |b| b.0);
        if m > budget {
            return Err(RunError::Refused(format!(
                "step `{}` asks for {} bytes of memory but this host can give {budget}; \
                 lower its `memory` or run with --memory-budget",
                s.id, m
            )));
        }
    }
    Ok(())
}

/// Where the run writes: its work folder (with the revisions checked out) and its
/// record folder with the plan and the journal. Revisions resolve before anything
/// is created: one that does not exist, or a working tree that must be clean and
/// is not, refuses the run.
pub(super) struct Folders {
    work_dir: PathBuf,
    record_dir: PathBuf,
    revisions: Vec<crate::pins::revisions::RevisionRecord>,
    journal: Journal,
}

fn open_folders(args: &RunArgs, plan: &Plan, run_id: &str) -> Result<Folders, RunError> {
    let record_dir = args.records.join(run_id);
    let work_root = args.work.clone().unwrap_or_else(|| {
        args.records
            .parent()
            .map(|p| p.join("work"))
            .unwrap_or_else(|| PathBuf::from("work"))
    });
    let work_dir = absolute(&work_root.join(run_id));
    let record_dir = absolute(&record_dir);
    let revisions = crate::pins::revisions::resolve(&plan.revisions, &work_dir)
        .map_err(|e| RunError::Refused(e.to_string()))?;
    std::fs::create_dir_all(&work_dir)
        .map_err(|e| RunError::Io(format!("cannot create {}: {e}", work_dir.display())))?;
    if let Err(e) = crate::pins::revisions::check_out(&revisions) {
        let _ = std::fs::remove_dir_all(&work_dir);
        return Err(RunError::Refused(e.to_string()));
    }
    std::fs::create_dir_all(&record_dir)
        .map_err(|e| RunError::Io(format!("cannot create {}: {e}", record_dir.display())))?;
    crate::evidence::atomic::write_atomic(&record_dir.join("plan.toml"), plan.source.as_bytes())
        .map_err(|e| RunError::Io(e.to_string()))?;
    let journal = Journal::create(&record_dir.join("journal.jsonl"))
        .map_err(|e| RunError::Io(format!("cannot create the journal: {e}")))?;
    Ok(Folders {
        work_dir,
        record_dir,
        revisions,
        journal,
    })
}

/// The run's end on the journal: the backends' word on attempts that ended on
/// their own records, the release audit, and the status they leave.
async fn conclude(
    plan: &Plan,
    isolator: &Isolator,
    backend: &dyn crate::backend::Backend,
    run_id: &str,
    record_dir: &Path,
    outcome: sched::DagOutcome,
    journal: &mut Journal,
) -> Result<(), RunError> {
    let jerr = |e: std::io::Error| RunError::Io(format!("cannot write the journal: {e}"));
    // A batch scheduler's word on the attempts that ended on their jobs' clean end
    // records; an interrupted run waits for it only briefly.
    let limit = if let Some(by) = outcome.hard {
        by.saturating_duration_since(std::time::Instant::now())
            .min(Duration::from_secs(1))
    } else if outcome.status == RunStatus::Interrupted {
        Duration::from_secs(3)
    } else {
        Duration::from_secs(60)
    };
    let disagreed = sched::confirm_jobs(backend, journal, limit)
        .await
        .map_err(jerr)?;
    crate::sys::stall_point("audit").await;
    let audit = run_audit(isolator, backend, run_id, outcome.hard).await;
    let (status, reason) = if disagreed.is_empty() {
        gate_outcome(plan, record_dir, outcome.status, outcome.reason)
    } else {
        (RunStatus::Failed, Some(disagreed.join("; ")))
    };
    let (status, reason) = after_audit(status, reason, &audit);
    journal
        .append(Event::RunEnded {
            status,
            reason,
            footer: record::RunFooter {
                release_audit: Some(audit),
            },
        })
        .map_err(jerr)?;
    Ok(())
}

/// The record from the journal, the plan's reports, and the attestation that
/// names both.
async fn record_and_reports(
    plan: &Plan,
    record_dir: PathBuf,
    sign_key: Option<&ed25519_dalek::SigningKey>,
) -> Result<RunResult, RunError> {
    crate::sys::stall_point("record").await;
    let (record, digest) = write_record_from_journal(&record_dir)?;
    crate::sys::stall_point("reports").await;
    let (reports, report_errors) = render_reports(plan, &record_dir);
    // The attestation names the reports too: the record cannot (they are made from
    // it), and editing one is then caught by `verify`.
    let mut extra = Vec::new();
    for r in &reports {
        let name = r.file_name().map(|n| n.to_string_lossy().into_owned());
        if let (Some(name), Ok(d)) = (name, crate::digest::sha256_file(r)) {
            extra.push(crate::evidence::attest::Subject::sha256(name, &d));
        }
    }
    crate::evidence::attestation::write_attestation_with(
        &record_dir,
        &record,
        &digest,
        sign_key,
        &extra,
    )
    .map_err(|e| RunError::Io(e.to_string()))?;
    Ok(RunResult {
        record_dir,
        record,
        reports,
        report_errors,
        watchdog: None,
    })
}

/// The journal's first lines: the run and its header, then what the user must
/// know before anything runs (drift allowed, isolation and GRES warnings).
fn start_journal(
    journal: &mut Journal,
    run_id: &str,
    header: &record::RunHeader,
    pins: &crate::pins::PinReport,
    isolator: &Isolator,
    gres_warnings: &[String],
) -> Result<(), RunError> {
    let header = Box::new(header.clone());
    let jerr = |e: std::io::Error| RunError::Io(format!("cannot write the journal: {e}"));
    journal
        .append(Event::RunStarted {
            run_id: run_id.to_string(),
            header,
        })
        .map_err(jerr)?;
    if pins.has_drift() {
        let msg = format!(
            "pins drifted and the run went on (--allow-drift):\n{}",
            crate::pins::drift_table(pins)
        );
        journal
            .append(Event::Warning { message: msg })
            .map_err(jerr)?;
    }
    for w in isolator.warnings().iter().chain(gres_warnings) {
        journal
            .append(Event::Warning { message: w.clone() })
            .map_err(jerr)?;
    }

    Ok(())
}

/// The isolation the run asks for (the plan's, or `--isolation`), made ready:
/// this orchestrator reaps its attempts' orphans, and cgroups refuse the run
/// when required and impossible.
fn isolator_for(args: &RunArgs, plan: &Plan) -> Result<(Mode, Arc<Isolator>), RunError> {
    let mode = match args.isolation.unwrap_or(plan.limits.isolation) {
        IsolationMode::Auto => Mode::Auto,
        IsolationMode::Cgroup => Mode::Cgroup,
        IsolationMode::None => Mode::None,
    };
    isolate::init_subreaper().map_err(|e| RunError::Refused(e.to_string()))?;
    let parent = args
        .cgroup_parent
        .as_deref()
        .or(plan.limits.cgroup_parent.as_deref());
    let isolator = Isolator::new_in(mode, parent)
        .map_err(|e| RunError::Refused(format!("isolation impossible: {e}")))?;
    Ok((mode, Arc::new(isolator)))
}

/// The watchdog that ends the run past its timeout (and the grace and a margin),
/// or soon after a second interrupt, whatever in it is stuck.
fn start_watchdog(
    args: &RunArgs,
    plan: &Plan,
    run_id: &str,
    isolator: &Arc<Isolator>,
    backend: &crate::backend::Router,
) -> watchdog::Watchdog {
    watchdog::Watchdog::start(
        watchdog::Cleanup {
            run_id: run_id.to_string(),
            isolator: Arc::downgrade(isolator),
            // The remotes alone: the router's local backend holds the isolator,
            // which must drop when the run returns.
            remotes: backend.remote_backends().cloned().collect(),
        },
        args.timeout
            .or(plan.limits.run_timeout)
            .map(|t| t + grace_of(args, plan) + sched::ABANDON_MARGIN),
    )
}

/// How long a cancelled attempt has between SIGTERM and SIGKILL: the command
/// line's, else the plan's, else 10 s.
fn grace_of(args: &RunArgs, plan: &Plan) -> Duration {
    args.grace
        .or(plan.limits.grace)
        .unwrap_or(Duration::from_secs(10))
}

/// The run's end once its release audit is in: what failed first, then what the
/// run left.
fn after_audit(
    status: RunStatus,
    reason: Option<String>,
    audit: &ReleaseAudit,
) -> (RunStatus, Option<String>) {
    if audit.passed {
        return (status, reason);
    }
    let why = format!("release audit failed: {}", audit.leftovers.join("; "));
    let why = match reason.filter(|_| status != RunStatus::Succeeded) {
        Some(first) => format!("{first}; {why}"),
        None => why,
    };
    (RunStatus::Failed, Some(why))
}

/// The backends the plan's steps ask for: this host's, and each remote kind any
/// step names (opened before anything runs, so a cluster that cannot be reached
/// refuses the run).
fn open_backends(
    plan: &Plan,
    run_id: &str,
    args: &RunArgs,
    isolator: &Arc<Isolator>,
    jobs: u32,
) -> Result<crate::backend::Router, RunError> {
    let choice = args.backend;
    let detached = matches!(args.mode, RunMode::Detach { .. });
    // An array's share of the run: its own setting, else the run's job count.
    let throttle = plan.backend.array_parallelism.unwrap_or(jobs);
    let mut kinds = Vec::new();
    for s in &plan.steps {
        let k = plan.backend_of(s, choice);
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    let mut remotes = Vec::new();
    for kind in kinds {
        let opened = crate::backend::open(kind, run_id, throttle, detached)
            .map_err(|e| RunError::Refused(format!("{} backend: {e}", kind.as_str())))?;
        remotes.extend(opened.map(|b| (kind, b)));
    }
    Ok(crate::backend::Router {
        local: Some(crate::backend::Local::new(Arc::clone(isolator))),
        remotes,
        choice,
    })
}

fn plan_limits(plan: &Plan) -> record::PlanLimits {
    let l = &plan.limits;
    let ms = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
    record::PlanLimits {
        host_memory_bytes: l.host_memory.map(|b| b.0),
        swap: l.swap,
        pids: l.pids,
        cpus: l.cpus.clone(),
        timeout_ms: ms(l.timeout),
        run_timeout_ms: ms(l.run_timeout),
        grace_ms: ms(l.grace),
        isolation: l.isolation.to_string(),
    }
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// What this host is.
pub fn host_info() -> HostInfo {
    use sysinfo::System;
    let (cpu_model, cpus, memory_bytes) = match System::new() {
        Ok(mut sys) => {
            sys.refresh_memory();
            sys.refresh_cpu_list(sysinfo::CpuRefreshKind::nothing());
            let model = sys
                .cpus()
                .first()
                .map(|c| c.brand().trim().to_string())
                .unwrap_or_default();
            (model, sys.cpus().len() as u32, sys.total_memory())
        }
        Err(_) => (
            String::new(),
            std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            0,
        ),
    };
    HostInfo {
        hostname: System::host_name().unwrap_or_default(),
        kernel: System::kernel_version().unwrap_or_default(),
        os: System::long_os_version().unwrap_or_default(),
        cpu_model,
        cpus,
        memory_bytes,
        boot_id: crate::devices::holder::boot_id(),
    }
}
