//! The `orchestrate` command line. Only parsing, messages and exit codes live here;
//! every capability is in the library.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use orchestrate::exit::{Error, Verdict};

/// Whether stdout (0) or stderr (1) was closed by its reader (`| head`): then the
/// command goes on to its end and its exit code, printing nothing more there.
static CLOSED: [std::sync::atomic::AtomicBool; 2] = [
    std::sync::atomic::AtomicBool::new(false),
    std::sync::atomic::AtomicBool::new(false),
];

/// Write to stdout (`err` false) or stderr; a closed pipe ends output quietly
/// instead of panicking as `print!` does.
fn emit(err: bool, args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    use std::sync::atomic::Ordering;
    let i = usize::from(err);
    if CLOSED[i].load(Ordering::Relaxed) {
        return;
    }
    let r = if err {
        std::io::stderr().lock().write_fmt(args)
    } else {
        let mut out = std::io::stdout().lock();
        out.write_fmt(args).and_then(|()| out.flush())
    };
    if r.is_err() {
        CLOSED[i].store(true, Ordering::Relaxed);
    }
}

macro_rules! say {
    ($($t:tt)*) => { emit(false, format_args!($($t)*)) };
}
macro_rules! sayln {
    () => { emit(false, format_args!("\n")) };
    ($($t:tt)*) => { emit(false, format_args!("{}\n", format_args!($($t)*))) };
}
macro_rules! esay {
    ($($t:tt)*) => { emit(true, format_args!($($t)*)) };
}
macro_rules! esayln {
    ($($t:tt)*) => { emit(true, format_args!("{}\n", format_args!($($t)*))) };
}

#[derive(Parser, Debug)]
#[command(
    name = "orchestrate",
    version,
    about = "Declarative experiment orchestrator: pinned, isolated, evidenced runs",
    long_about = "Runs a TOML plan as a DAG of isolated step attempts and writes a hashed \
                  evidence record.\n\n`orchestrate PLAN` is the same as `orchestrate run PLAN`.\n\n\
                  Exit codes: 0 success; 1 the experiment ran and failed; 2 usage or invalid \
                  plan; 3 environment refused (pins drifted, devices unavailable, isolation \
                  impossible when required); 130 interrupted."
)]
struct Cli {
    /// More logging (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a plan: validate, verify pins, lease devices, run the DAG, write the record.
    Run(RunCmd),
    /// Write the observed pins (commits, revisions, digests, versions) into the plan,
    /// keeping its formatting and comments.
    Pin {
        /// The plan file.
        plan: PathBuf,
    },
    /// Finish a run whose orchestrator was killed while its Slurm jobs ran: its jobs
    /// are found in the journal and never submitted again (finished ones are read,
    /// running ones waited for); then the record is written.
    Resume {
        /// The record folder (`records/<run-id>`).
        run: PathBuf,
    },
    /// Clean what dead runs left (cgroups, unfinished records) and report it.
    Recover {
        /// Records folder whose unfinished runs get their record rebuilt.
        #[arg(long, default_value = "records")]
        records: PathBuf,
    },
    /// Validate a plan and print its steps (expanded over its matrix) in dependency
    /// order; runs nothing.
    Check {
        /// The plan file.
        plan: PathBuf,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Re-hash everything a record names (record, logs, plan, artifacts, attestation);
    /// exit 1 on any finding.
    Verify {
        /// The record folder (`records/<run-id>`).
        run: PathBuf,
        /// Public (SPKI PEM) or private (PKCS#8 PEM) ed25519 key: the attestation must
        /// be signed by it.
        #[arg(long)]
        key: Option<PathBuf>,
        /// Artifacts (declared outputs) that are gone are failures, not notes.
        #[arg(long)]
        require_artifacts: bool,
    },
    /// Render a report from a record alone (the digest is checked first).
    Report {
        /// The record folder (`records/<run-id>`).
        run: PathBuf,
        /// `pr` (Markdown PR body), `html`, `summary`, `json`, or a tera template file.
        #[arg(long, short = 't', default_value = "pr")]
        template: String,
        /// Same as `--template json`.
        #[arg(long, value_enum)]
        format: Option<ReportFormat>,
        /// Write here instead of standard output.
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
        /// Render even when record.json does not match record.sha256.
        #[arg(long)]
        no_verify: bool,
        /// Look for `templates/` overrides beside this plan folder.
        #[arg(long)]
        plan_dir: Option<PathBuf>,
    },
    /// Export a record for other tools: `--ro-crate` writes a Workflow Run Crate 0.5
    /// (`ro-crate-metadata.json`) into the record folder, or into `-o DIR` beside a
    /// copy of the record folder's files.
    Export {
        /// The record folder (`records/<run-id>`).
        run: PathBuf,
        /// Write an RO-Crate (Workflow Run Crate 0.5).
        #[arg(long, required = true)]
        ro_crate: bool,
        /// The crate's folder (default: the record folder itself).
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
    },
    /// Put two runs side by side: pins, environment, timings, comparisons.
    Diff {
        run_a: PathBuf,
        run_b: PathBuf,
        #[arg(long, value_enum, default_value = "md")]
        format: DiffArg,
    },
    /// Print a JSON Schema.
    Schema {
        #[arg(value_enum)]
        which: SchemaKind,
    },
    /// Leases, cgroups and processes dead runs left behind; exit 1 if any.
    Audit {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Also report unfinished records of dead runs in this folder.
        #[arg(long)]
        records: Option<PathBuf>,
    },
    /// Why each `cache = true` step of a plan would run or be reused, without running
    /// anything.
    Why {
        /// The plan file.
        plan: PathBuf,
        /// Only this step (or the cells made from it).
        step: Option<String>,
        #[command(flatten)]
        cache: CacheArg,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Inside a Slurm job: run an attempt's command and write its end record (the
    /// job script calls this; not for users).
    #[command(name = "slurm-exec", hide = true)]
    SlurmExec {
        /// The job's spec (written by the orchestrator before it submitted).
        spec: PathBuf,
    },
    /// The step cache: `list`, `du`, `gc`.
    Cache {
        #[command(subcommand)]
        what: CacheCmd,
        #[command(flatten)]
        cache: CacheArg,
    },
    /// The device inventory and who holds what.
    Devices {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
        /// Device inventory (TOML); default `ORCHESTRATE_INVENTORY`, then
        /// `/etc/orchestrate/devices.toml`.
        #[arg(long, env = "ORCHESTRATE_INVENTORY")]
        inventory: Option<PathBuf>,
    },
}

/// What the command line changes in a plan.
#[derive(clap::Args, Debug, Default)]
struct LoadArgs {
    /// Run only the matrix cells with this axis value (repeatable; several values of
    /// one axis: any of them), e.g. `--only tokens=2048`.
    #[arg(long, value_name = "AXIS=VALUE", value_parser = parse_pair)]
    only: Vec<(String, String)>,
    /// Override a plan value (TOML syntax; repeatable), recorded as an override:
    /// `--set params.tokens=4096`, `--set matrix.tokens=[2048]`.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_set)]
    set: Vec<(String, String)>,
}

impl LoadArgs {
    fn options(&self) -> orchestrate::plan::LoadOptions {
        orchestrate::plan::LoadOptions {
            only: self.only.clone(),
            set: self.set.clone(),
        }
    }
}

fn parse_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected AXIS=VALUE, e.g. tokens=2048, not `{s}`")),
    }
}

fn parse_set(s: &str) -> Result<(String, String), String> {
    orchestrate::plan::overrides::parse_set(s).map_err(|e| e.to_string())
}

#[derive(clap::Args, Debug)]
struct RunCmd {
    /// The plan file.
    plan: PathBuf,
    #[command(flatten)]
    load: LoadArgs,
    /// Folder of run records; the run writes `<records>/<run-id>/`.
    #[arg(long, default_value = "records")]
    records: PathBuf,
    /// Folder for artifacts (`${work}` is `<work>/<run-id>`); default `work/` beside
    /// the records folder.
    #[arg(long)]
    work: Option<PathBuf>,
    /// Steps running at once (default: the number of CPUs).
    #[arg(long, short = 'j')]
    jobs: Option<u32>,
    /// After a failure, go on with every step that does not depend on it.
    #[arg(long)]
    keep_going: bool,
    /// Override the plan's `limits.isolation`.
    #[arg(long, value_enum)]
    isolation: Option<IsolationArg>,
    /// Whole-run timeout (e.g. `30m`), overriding the plan's `limits.run_timeout`.
    #[arg(long, value_parser = parse_timeout)]
    timeout: Option<Duration>,
    /// Grace between SIGTERM and kill when ending attempts (default 10s).
    #[arg(long, value_parser = parse_duration)]
    grace: Option<Duration>,
    /// Host memory the running steps' limits may add up to (default: all of it).
    #[arg(long, value_parser = parse_size)]
    memory_budget: Option<u64>,
    /// `auto`: a live view on a terminal, plain lines otherwise.
    #[arg(long, value_enum, default_value = "auto")]
    progress: ProgressArg,
    /// Copy every step's output to the terminal too.
    #[arg(long)]
    tee: bool,
    /// Run even when pins drifted; the drift is recorded and shown first.
    #[arg(long)]
    allow_drift: bool,
    /// Device inventory (TOML); default `ORCHESTRATE_INVENTORY`, then
    /// `/etc/orchestrate/devices.toml`.
    #[arg(long, env = "ORCHESTRATE_INVENTORY")]
    inventory: Option<PathBuf>,
    /// How long a step waits for devices another run holds.
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    device_wait: Duration,
    /// Sign the attestation with this ed25519 private key (PKCS#8 PEM, as
    /// `openssl genpkey -algorithm ed25519` writes).
    #[arg(long)]
    sign_key: Option<PathBuf>,
    #[command(flatten)]
    cache: CacheArg,
    /// Run every `cache = true` step (what they make is still stored).
    #[arg(long)]
    no_cache: bool,
    /// Run this cached step whatever the cache holds (repeatable; a step id or the
    /// step a matrix cell was made from). An output that then differs from the
    /// entry's is flagged "nondeterministic output".
    #[arg(long, value_name = "STEP")]
    refresh: Vec<String>,
    /// Where steps that do not name a `backend` run: on this host, or as Slurm jobs
    /// (default: the plan's `[backend] kind`, else local).
    #[arg(long, value_enum)]
    backend: Option<BackendArg>,
}

/// Where the step cache is.
#[derive(clap::Args, Debug, Default)]
struct CacheArg {
    /// The step cache folder (default `ORCHESTRATE_CACHE`, then
    /// `$XDG_CACHE_HOME/orchestrate`, then `~/.cache/orchestrate`).
    #[arg(long = "cache", value_name = "DIR", global = true)]
    dir: Option<PathBuf>,
}

impl CacheArg {
    fn root(&self) -> PathBuf {
        self.dir
            .clone()
            .unwrap_or_else(orchestrate::cache::Cache::default_root)
    }
}

#[derive(Subcommand, Debug)]
enum CacheCmd {
    /// Every entry: its step, the run that made it, its size, how long unused.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Entries, blobs and the bytes they take.
    Du,
    /// Remove entries unused longer than `--older-than`, then the least recently
    /// used until the cache fits `--max-size`, then blobs no entry keeps.
    Gc {
        /// e.g. 50GiB.
        #[arg(long, value_parser = parse_size)]
        max_size: Option<u64>,
        /// e.g. 30d (d, h, m, s).
        #[arg(long, value_parser = parse_age)]
        older_than: Option<Duration>,
    },
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum BackendArg {
    Local,
    Slurm,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum IsolationArg {
    Auto,
    Cgroup,
    None,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum ProgressArg {
    Auto,
    Plain,
    Quiet,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum ReportFormat {
    /// A machine-readable summary.
    Json,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum DiffArg {
    Md,
    Text,
    Json,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum SchemaKind {
    /// The plan format.
    Plan,
    /// The evidence record (`record.json`).
    Record,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    orchestrate::plan::parse_duration(s)
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    orchestrate::plan::parse_timeout(s)
}

/// `orchestrate PLAN` means `orchestrate run PLAN`: insert `run` when the first
/// non-flag argument is not a subcommand.
fn normalize_args(mut args: Vec<OsString>) -> Vec<OsString> {
    const SUBCOMMANDS: &[&str] = &[
        "run",
        "check",
        "schema",
        "report",
        "verify",
        "audit",
        "devices",
        "recover",
        "pin",
        "diff",
        "export",
        "why",
        "cache",
        "slurm-exec",
        "resume",
        "help",
    ];
    let first = args
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, a)| !a.to_string_lossy().starts_with('-'));
    if let Some((i, a)) = first {
        let s = a.to_string_lossy();
        if !SUBCOMMANDS.contains(&s.as_ref()) {
            args.insert(i, OsString::from("run"));
        }
    }
    args
}

fn main() -> ExitCode {
    // glibc gives each thread that allocates an arena of its own and keeps what it
    // freed there: with tokio's and rayon's threads a run would hold several copies
    // of its peak. Two arenas keep the orchestrator's memory what it uses.
    // SAFETY: mallopt only sets an allocator parameter; it is called before any
    // thread starts.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
    let cli = match Cli::try_parse_from(normalize_args(std::env::args_os().collect())) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    init_tracing(cli.verbose);
    let result = match cli.command {
        Command::Check { plan, load } => cmd_check(&plan, &load.options()),
        Command::SlurmExec { spec } => {
            let code = orchestrate::backend::slurm::exec::exec_main(&spec);
            return ExitCode::from(code.clamp(0, 255) as u8);
        }
        Command::Schema { which } => cmd_schema(which),
        Command::Report {
            run,
            template,
            format,
            output,
            no_verify,
            plan_dir,
        } => {
            let template = if format.is_some() {
                "json".to_string()
            } else {
                template
            };
            cmd_report(&run, &template, output.as_deref(), no_verify, plan_dir)
        }
        Command::Diff {
            run_a,
            run_b,
            format,
        } => cmd_diff(&run_a, &run_b, format),
        Command::Run(cmd) => cmd_run(cmd),
        Command::Export {
            run,
            ro_crate: _,
            output,
        } => cmd_export(&run, output.as_deref()),
        Command::Recover { records } => cmd_recover(&records),
        Command::Resume { run } => cmd_resume(&run),
        Command::Pin { plan } => cmd_pin(&plan),
        Command::Verify {
            run,
            key,
            require_artifacts,
        } => cmd_verify(&run, key.as_deref(), require_artifacts),
        Command::Audit { json, records } => cmd_audit(json, records.as_deref()),
        Command::Devices { json, inventory } => cmd_devices(json, inventory.as_deref()),
        Command::Why {
            plan,
            step,
            cache,
            load,
        } => cmd_why(&plan, step.as_deref(), &cache.root(), &load.options()),
        Command::Cache { what, cache } => cmd_cache(what, &cache.root()),
    };
    ExitCode::from(match result {
        Ok(v) => v.exit_code(),
        Err(e) => {
            esay!("{}", e.message());
            e.exit_code()
        }
    })
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::env::var_os("NO_COLOR").is_none())
        .try_init();
}

fn cmd_check(path: &Path, load: &orchestrate::plan::LoadOptions) -> Result<Verdict, Error> {
    let plan = orchestrate::plan::load_with(path, load)?;
    say!("{}", orchestrate::plan::describe(&plan));
    let stat = orchestrate::digest::stat::StatCache::install_at(
        &orchestrate::cache::Cache::default_root(),
    );
    let pins = orchestrate::pins::verify(&plan.pins, &plan.dir);
    stat.save_quietly();
    sayln!("\npins:");
    say!("{}", orchestrate::pins::pin_table(&pins));
    if pins.has_drift() {
        sayln!("\nthese pins would refuse a run (exit 3) without --allow-drift:");
        say!("{}", orchestrate::pins::drift_table(&pins));
    }
    Ok(Verdict::Ok)
}

fn cmd_schema(which: SchemaKind) -> Result<Verdict, Error> {
    match which {
        SchemaKind::Plan => say!("{}", orchestrate::plan::schema_string()),
        SchemaKind::Record => say!("{}", orchestrate::evidence::record::schema_string()),
    }
    Ok(Verdict::Ok)
}

/// One runtime thread: the orchestrator's async work is waiting on processes, signals
/// and timers; disk syncs, hashing and comparisons go to blocking threads. Measured
/// against two workers, it saves the cross-thread wake-ups of every step (a 500-step
/// chain ran 1.63 s against 2.16 s, median of five).
fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Failed(format!("cannot start the async runtime: {e}")))
}

fn cmd_run(cmd: RunCmd) -> Result<Verdict, Error> {
    use orchestrate::evidence::record::RunStatus;
    use orchestrate::run::RunArgs;
    // Load the key before running anything: a bad key must not cost a run.
    let sign_key = cmd
        .sign_key
        .as_deref()
        .map(orchestrate::evidence::dsse::load_signing_key)
        .transpose()
        .map_err(|e| Error::Usage(e.to_string()))?;
    let args = RunArgs {
        sign_key,
        load: cmd.load.options(),
        plan: cmd.plan,
        records: cmd.records,
        work: cmd.work,
        jobs: cmd.jobs,
        keep_going: cmd.keep_going,
        isolation: cmd.isolation.map(|i| match i {
            IsolationArg::Auto => orchestrate::plan::IsolationMode::Auto,
            IsolationArg::Cgroup => orchestrate::plan::IsolationMode::Cgroup,
            IsolationArg::None => orchestrate::plan::IsolationMode::None,
        }),
        timeout: cmd.timeout,
        grace: cmd.grace,
        progress: match cmd.progress {
            ProgressArg::Auto => orchestrate::sched::ProgressMode::Auto,
            ProgressArg::Plain => orchestrate::sched::ProgressMode::Plain,
            ProgressArg::Quiet => orchestrate::sched::ProgressMode::Quiet,
        },
        tee: cmd.tee,
        memory_budget: cmd.memory_budget,
        allow_drift: cmd.allow_drift,
        inventory: cmd.inventory,
        device_wait: cmd.device_wait,
        cache: cmd.cache.dir,
        no_cache: cmd.no_cache,
        refresh: cmd.refresh,
        backend: cmd.backend.map(|b| match b {
            BackendArg::Local => orchestrate::plan::model::BackendKind::Local,
            BackendArg::Slurm => orchestrate::plan::model::BackendKind::Slurm,
        }),
    };
    let rt = runtime()?;
    let result = rt.block_on(orchestrate::run::run(args));
    // A blocking thread that was given up (a hash or a check the run did not wait
    // for) must not hold the exit: the runtime would wait for it when dropped.
    rt.shutdown_timeout(Duration::from_millis(100));
    let done = result?;
    say!("{}", orchestrate::report::summary::render(&done.record));
    for r in &done.reports {
        sayln!("report: {}", r.display());
    }
    for e in &done.report_errors {
        esayln!("warning: {e}");
    }
    sayln!("{}", done.record_dir.display());
    Ok(match done.record.status {
        RunStatus::Succeeded => Verdict::Ok,
        RunStatus::Failed => Verdict::Failed,
        RunStatus::Interrupted => Verdict::Interrupted,
    })
}

/// `Ok` when `ok`, else `Failed`.
fn verdict(ok: bool) -> Verdict {
    if ok {
        Verdict::Ok
    } else {
        Verdict::Failed
    }
}

fn cmd_verify(run: &Path, key: Option<&Path>, require_artifacts: bool) -> Result<Verdict, Error> {
    use orchestrate::evidence::{render_report, verify_run, VerifyOptions};
    let key = key
        .map(orchestrate::evidence::dsse::load_verifying_key)
        .transpose()
        .map_err(|e| Error::Usage(e.to_string()))?;
    let opts = VerifyOptions {
        key,
        require_artifacts,
    };
    let report = verify_run(run, &opts);
    say!("{}", render_report(&report, require_artifacts));
    Ok(verdict(report.ok(require_artifacts)))
}

fn cmd_resume(run: &Path) -> Result<Verdict, Error> {
    let rt = runtime()?;
    match rt.block_on(orchestrate::run::resume(run)) {
        Ok(r) => {
            for f in &r.resumed.finished {
                sayln!("finished {f}");
            }
            for d in &r.resumed.disagreed {
                sayln!("failed after all: {d}");
            }
            if r.resumed.kept > 0 {
                sayln!("{} attempts were already on the record", r.resumed.kept);
            }
            sayln!("run {}: {}", r.record.run_id, r.record.status.as_str());
            sayln!("{}", run.display());
            Ok(
                if r.record.status == orchestrate::evidence::record::RunStatus::Succeeded {
                    Verdict::Ok
                } else {
                    Verdict::Failed
                },
            )
        }
        Err(orchestrate::run::RunError::Refused(m)) => Err(Error::Refused(m)),
        Err(e) => Err(Error::Failed(e.to_string())),
    }
}

fn cmd_recover(records: &Path) -> Result<Verdict, Error> {
    // The text says `error:` on each line that is one.
    let report = orchestrate::recover::recover(records).map_err(Error::Failed)?;
    say!("{report}");
    Ok(Verdict::Ok)
}

fn cmd_pin(path: &Path) -> Result<Verdict, Error> {
    let plan = orchestrate::plan::load(path)?;
    let stat = orchestrate::digest::stat::StatCache::install_at(
        &orchestrate::cache::Cache::default_root(),
    );
    let report = orchestrate::pins::verify(&plan.pins, &plan.dir);
    stat.save_quietly();
    let text = orchestrate::pins::pin_plan_text(&plan.source, &report)
        .map_err(|e| Error::Failed(format!("cannot pin {}: {e}", path.display())))?;
    orchestrate::evidence::atomic::write_atomic(path, text.as_bytes())
        .map_err(|e| Error::Failed(format!("cannot write {}: {e}", path.display())))?;
    say!("{}", orchestrate::pins::pin_table(&report));
    let errors: Vec<_> = report
        .entries
        .iter()
        .filter(|e| e.status == orchestrate::pins::PinStatus::Error)
        .collect();
    for e in &errors {
        esayln!(
            "warning: {} pin `{}` could not be observed and was left as written: {}",
            e.kind.as_str(),
            e.name,
            e.message.as_deref().unwrap_or("")
        );
    }
    sayln!("pinned {}", path.display());
    if errors.is_empty() {
        Ok(Verdict::Ok)
    } else {
        Err(Error::Refused(format!(
            "{} pin(s) could not be observed",
            errors.len()
        )))
    }
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<(), Error> {
    let s = serde_json::to_string_pretty(v)
        .map_err(|e| Error::Failed(format!("cannot write JSON: {e}")))?;
    sayln!("{s}");
    Ok(())
}

fn cmd_audit(json: bool, records: Option<&Path>) -> Result<Verdict, Error> {
    let report = orchestrate::audit::audit_host(records);
    if json {
        print_json(&report)?;
    } else {
        say!("{}", orchestrate::audit::render_text(&report));
    }
    Ok(verdict(report.clean()))
}

fn cmd_why(
    plan: &Path,
    step: Option<&str>,
    cache: &Path,
    load: &orchestrate::plan::LoadOptions,
) -> Result<Verdict, Error> {
    let plan = orchestrate::plan::load_with(plan, load)?;
    let cache = orchestrate::cache::Cache::open(cache)
        .map_err(|e| Error::Failed(format!("cannot open the cache {}: {e}", cache.display())))?;
    let stat = orchestrate::digest::stat::StatCache::install_at(cache.root());
    let pins = orchestrate::pins::verify(&plan.pins, &plan.dir);
    stat.save_quietly();
    let text = orchestrate::run::why(&plan, &pins, &cache, step).map_err(Error::Usage)?;
    say!("{text}");
    Ok(Verdict::Ok)
}

fn cmd_cache(what: CacheCmd, root: &Path) -> Result<Verdict, Error> {
    use orchestrate::cache::admin;
    let cache = orchestrate::cache::Cache::open(root)
        .map_err(|e| Error::Failed(format!("cannot open the cache {}: {e}", root.display())))?;
    let size = |b: u64| orchestrate::report::format::bytes(b as f64);
    match what {
        CacheCmd::List { json } => {
            let l = admin::list(&cache);
            if json {
                sayln!("{}", serde_json::to_string_pretty(&l).unwrap_or_default());
            } else {
                sayln!(
                    "{:<14} {:<24} {:<26} {:>10} {:>8}",
                    "key",
                    "step",
                    "run",
                    "size",
                    "unused"
                );
                for e in &l {
                    sayln!(
                        "{:<14} {:<24} {:<26} {:>10} {:>8}",
                        &e.key[..12.min(e.key.len())],
                        format!("{}: {}", e.plan, e.step),
                        e.run_id,
                        size(e.bytes),
                        orchestrate::units::human_duration(Duration::from_secs(e.idle_s))
                    );
                }
                sayln!("{} entries in {}", l.len(), root.display());
            }
        }
        CacheCmd::Du => {
            let u = admin::usage(&cache);
            sayln!(
                "{} entries, {} blobs, {} in {}; {} in temporary files",
                u.entries,
                u.blobs,
                size(u.bytes),
                root.display(),
                size(u.tmp_bytes)
            );
        }
        CacheCmd::Gc {
            max_size,
            older_than,
        } => {
            let c = admin::gc(&cache, max_size, older_than)
                .map_err(|e| Error::Failed(format!("cache gc: {e}")))?;
            let u = admin::usage(&cache);
            sayln!(
                "removed {} entries and {} blobs ({}) and {} of stale temporary files; {} entries, {} left",
                c.entries,
                c.blobs,
                size(c.bytes),
                size(c.tmp_bytes),
                u.entries,
                size(u.bytes)
            );
        }
    }
    Ok(Verdict::Ok)
}

fn parse_size(s: &str) -> Result<u64, String> {
    orchestrate::plan::parse_bytes(s).map(|b| b.0)
}

fn parse_age(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = n
        .parse()
        .map_err(|_| format!("`{s}` is not an age such as 30d"))?;
    let secs = match unit {
        "d" => 86_400,
        "h" => 3_600,
        "m" => 60,
        "s" | "" => 1,
        _ => return Err(format!("`{s}`: use d, h, m or s")),
    };
    Ok(Duration::from_secs(n.saturating_mul(secs)))
}

fn cmd_devices(json: bool, inventory: Option<&Path>) -> Result<Verdict, Error> {
    let file = orchestrate::devices::load_inventory(inventory)
        .map_err(|e| Error::Refused(e.to_string()))?;
    let inv = orchestrate::devices::merged(file, orchestrate::devices::discover());
    let view =
        orchestrate::devices::describe_devices(&inv, &orchestrate::devices::default_lease_dir());
    if json {
        print_json(&view)?;
    } else {
        say!("{}", orchestrate::devices::view::render_text(&view));
    }
    Ok(Verdict::Ok)
}

fn cmd_report(
    run: &Path,
    template: &str,
    output: Option<&Path>,
    no_verify: bool,
    plan_dir: Option<PathBuf>,
) -> Result<Verdict, Error> {
    use orchestrate::report::{render, RenderOptions, ReportError, TemplateChoice};
    let opts = RenderOptions {
        no_verify,
        plan_dir,
    };
    let text = render(run, TemplateChoice::parse(template), &opts).map_err(|e| match e {
        e @ ReportError::DigestMismatch { .. } => Error::Failed(format!(
            "{e}\n(refusing to render a record that does not match its digest; --no-verify renders it anyway)"
        )),
        e => Error::Failed(e.to_string()),
    })?;
    write_output(output, &text)
}

fn cmd_export(run: &Path, output: Option<&Path>) -> Result<Verdict, Error> {
    let root = orchestrate::report::rocrate::export(run, output)
        .map_err(|e| Error::Failed(e.to_string()))?;
    sayln!("{}", root.join("ro-crate-metadata.json").display());
    Ok(Verdict::Ok)
}

fn cmd_diff(a: &Path, b: &Path, format: DiffArg) -> Result<Verdict, Error> {
    use orchestrate::report::DiffFormat;
    let f = match format {
        DiffArg::Md => DiffFormat::Md,
        DiffArg::Text => DiffFormat::Text,
        DiffArg::Json => DiffFormat::Json,
    };
    let text = orchestrate::report::diff(a, b, f).map_err(|e| Error::Failed(e.to_string()))?;
    write_output(None, &text)
}

fn write_output(output: Option<&Path>, text: &str) -> Result<Verdict, Error> {
    match output {
        None => say!("{text}"),
        Some(p) => orchestrate::evidence::atomic::write_atomic(p, text.as_bytes())
            .map_err(|e| Error::Failed(e.to_string()))?,
    }
    Ok(Verdict::Ok)
}
