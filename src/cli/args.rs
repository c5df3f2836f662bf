//! The command line's words: every subcommand, flag and value, as clap reads them.
//! Library enums (isolation, progress, backend, diff format) are clap values
//! themselves, so a new variant is a new choice here with nothing to copy.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "orchestrate",
    version = orchestrate::VERSION,
    about = "Declarative experiment orchestrator: pinned, isolated, evidenced runs",
    long_about = "Runs a TOML plan as a DAG of isolated step attempts and writes a hashed \
                  evidence record.\n\n`orchestrate PLAN` is the same as `orchestrate run PLAN`.\n\n\
                  Exit codes: 0 success; 1 the experiment ran and failed; 2 usage or invalid \
                  plan; 3 environment refused (pins drifted, devices unavailable, isolation \
                  impossible when required); 130 interrupted."
)]
pub struct Cli {
    /// More logging (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

/// The plans `init --example` writes: the ones the repository ships in plans/.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Example {
    Starter,
    Smoke,
    Full,
    #[value(name = "full8k")]
    Full8k,
    Torch,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a plan: validate, verify pins, lease devices, run the DAG, write the record.
    Run(RunCmd),
    /// Write a starter plan (shell steps, a compare, reports) to DIR/plan.toml and its
    /// schema beside it, never over a file: it checks and runs as it is, and its
    /// comments point into the docs. `--example NAME` writes one of the plans the
    /// project ships instead (with the files it needs), ready to run where
    /// orchestrate was installed without the repository.
    Init {
        /// The folder to write it in (made when missing).
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// A shipped plan: starter (the default), smoke, full, full8k (the README's
        /// main job) or torch (needs torch and transformers).
        #[arg(long, value_enum, default_value_t = Example::Starter)]
        example: Example,
    },
    /// Print a shell completion script: `orchestrate completions bash >
    /// ~/.local/share/bash-completion/completions/orchestrate` (the wheel installs
    /// them under share/ already).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), orchestrate(1) or a subcommand's, orchestrate-run(1)
    /// and so on: `orchestrate man run | man -l -`. The wheel installs them all under
    /// share/man/man1.
    Man {
        /// The subcommand whose page to print.
        command: Option<String>,
        /// Write every page (orchestrate.1 and one per subcommand) into DIR instead,
        /// replacing pages of the same names.
        #[arg(long, value_name = "DIR", conflicts_with = "command")]
        out: Option<PathBuf>,
    },
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
    /// Where each step of a run is (ended, its job queued or running, waiting),
    /// from its journal and the batch scheduler; writes nothing. For a detached
    /// run (`run --detach`) or one running elsewhere.
    Status {
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
        /// `pr` (Markdown PR body), `html`, `summary`, `json`, `junit` (JUnit XML for CI
        /// test reporters), or a tera template file.
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
    /// Put runs side by side, a column each: pins, environment, step timings,
    /// metrics, tests and findings, checks. The first run is the one the others are
    /// measured against (ratios, new and fixed tests).
    Diff {
        /// Record folders (`records/<run-id>`), two or more.
        #[arg(required = true, num_args = 2..)]
        runs: Vec<PathBuf>,
        #[arg(long, value_enum, default_value = "md")]
        format: super::choices::Diff,
        /// Keep only rows that differ: a value not the same in every run, a step
        /// whose status differs or whose time range does not overlap the first
        /// run's, a metric likewise, a new or fixed test or finding.
        #[arg(long)]
        diff_only: bool,
    },
    /// List the runs of records folders from their index (kept beside the records,
    /// refreshed with what is new; a record that does not verify is listed as such).
    Runs {
        /// Records folder (repeatable).
        #[arg(long = "records", default_value = "records")]
        records: Vec<PathBuf>,
        /// Only runs of this plan.
        #[arg(long)]
        plan: Option<String>,
        /// Only runs with this status (succeeded, failed, interrupted, …).
        #[arg(long)]
        status: Option<String>,
        /// Only runs started at or after this date (`2026-12-01` or RFC 3339).
        #[arg(long, value_parser = parse_since)]
        since: Option<String>,
        /// Print the runs as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A step's metric over runs, by implementation commit (git's order) or time,
    /// each change found and confirmed (Mann-Whitney U, bootstrap interval); `trend
    /// tests [ID]`: when each test case started or stopped failing.
    Trend {
        /// A step id, or `tests`.
        step: String,
        /// The metric (`wall_ms`, or one the step writes to $ORCHESTRATE_METRICS);
        /// with `tests`: only test ids that contain it.
        metric: Option<String>,
        /// Records folder (repeatable).
        #[arg(long = "records", default_value = "records")]
        records: Vec<PathBuf>,
        /// Only runs of this plan.
        #[arg(long)]
        plan: Option<String>,
        /// Order points by implementation commit (one point per commit) or by time
        /// (one point per run).
        #[arg(long, value_enum, default_value = "commit")]
        by: TrendOrder,
        /// The repository whose history orders the commits.
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        /// A change smaller than this fraction is noise.
        #[arg(long, default_value_t = 0.05)]
        noise: f64,
        /// Print the trend as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The regression gate for CI: the newest run of a plan (or --run) against the
    /// runs of that plan before it in the index. Every step metric is judged by the
    /// rule revisions use (Mann–Whitney U and the 95% bootstrap interval of the ratio
    /// of medians beyond the threshold; direction and threshold of a step's headline
    /// metric from `[steps.X.report] better` and `threshold`); every test case that
    /// started failing and every new finding fails it too. Exit 1 on a regression,
    /// 0 otherwise; a history too noisy to tell says "not enough evidence".
    Regressions {
        /// Records folder (repeatable).
        #[arg(long = "records", default_value = "records")]
        records: Vec<PathBuf>,
        /// Only runs of this plan (needed when the records hold several).
        #[arg(long)]
        plan: Option<String>,
        /// The run to judge (its id or folder); default the newest.
        #[arg(long)]
        run: Option<String>,
        /// How many earlier runs make the history.
        #[arg(long, default_value_t = 10)]
        history: usize,
        /// The threshold of metrics the plan gives none, a fraction or a percentage
        /// (default the plan's `[report] noise`, else 5%).
        #[arg(long, value_parser = parse_fraction)]
        noise: Option<f64>,
        /// Also write the verdict as JUnit XML (a case per metric, test and finding).
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Print the verdict as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write a static HTML site of every indexed run (no network needed): the runs
    /// with filters, a chart per step metric over commits with its changes marked,
    /// the tests' and findings' history, and each run's report and record beside it.
    Site {
        /// Records folder (repeatable).
        #[arg(long = "records", default_value = "records")]
        records: Vec<PathBuf>,
        /// Only runs of this plan.
        #[arg(long)]
        plan: Option<String>,
        /// The repository whose history orders the commits.
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        /// A change smaller than this fraction is noise.
        #[arg(long, default_value_t = 0.05)]
        noise: f64,
        /// The folder to write (new, empty, or a site this command wrote: its own
        /// files replaced, anything the user added there kept).
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// List and chart the runs without copying each run's record and HTML
        /// report into the site (no report links, nothing to compare): a large
        /// history's site builds in seconds.
        #[arg(long)]
        no_reports: bool,
        /// Rewrite the site every SECS seconds while a run is in progress (its page
        /// reloads itself as often); stops once none is, or on Ctrl-C between
        /// writes, leaving the site as last written.
        #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86400))]
        watch: Option<u64>,
    },
    /// Find the first bad commit between --good and --bad: the plan run once per probe
    /// with `[revisions] implementation` replaced, each probe decided from its record
    /// (an inconclusive one measured again), the probes tied in a bisect record.
    #[command(group(clap::ArgGroup::new("target").required(true).args(["metric", "test", "check"])))]
    Bisect {
        plan: PathBuf,
        /// A commit (any git revision) where the target holds.
        #[arg(long)]
        good: String,
        /// A later commit where it does not.
        #[arg(long)]
        bad: String,
        /// STEP.METRIC: bad when higher than on --good by more than --threshold,
        /// significantly (Mann-Whitney U, bootstrap interval).
        #[arg(long)]
        metric: Option<String>,
        /// The smallest change that counts: `5%` or `0.05`.
        #[arg(long, default_value = "5%", value_parser = parse_fraction)]
        threshold: f64,
        /// A JUnit test id (`classname::name`): bad when it fails.
        #[arg(long)]
        test: Option<String>,
        /// A compare check's name: bad when it does not pass.
        #[arg(long)]
        check: Option<String>,
        /// Where the probes' records and the bisect record go.
        #[arg(long, default_value = "records")]
        records: PathBuf,
        /// The probes' work folder (default: the run's own).
        #[arg(long)]
        work: Option<PathBuf>,
        /// Print the bisection as JSON.
        #[arg(long)]
        json: bool,
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
pub struct LoadArgs {
    /// Run only the matrix cells with this axis value (repeatable; several values of
    /// one axis: any of them), e.g. `--only tokens=2048`.
    #[arg(long, value_name = "AXIS=VALUE", value_parser = parse_pair)]
    pub only: Vec<(String, String)>,
    /// Override a plan value (TOML syntax; repeatable), recorded as an override:
    /// `--set params.tokens=4096`, `--set matrix.tokens=[2048]`.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_set)]
    pub set: Vec<(String, String)>,
}

impl LoadArgs {
    pub fn options(&self) -> orchestrate::plan::LoadOptions {
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
pub struct RunCmd {
    /// The plan file.
    pub plan: PathBuf,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Folder of run records; the run writes `<records>/<run-id>/`.
    #[arg(long, default_value = "records")]
    pub records: PathBuf,
    /// Folder for artifacts (`${work}` is `<work>/<run-id>`); default `work/` beside
    /// the records folder.
    #[arg(long)]
    pub work: Option<PathBuf>,
    /// Steps running at once (default: the number of CPUs).
    #[arg(long, short = 'j')]
    pub jobs: Option<u32>,
    /// After a failure, go on with every step that does not depend on it.
    #[arg(long)]
    pub keep_going: bool,
    /// Override the plan's `limits.isolation`.
    #[arg(long, value_enum)]
    pub isolation: Option<super::choices::Isolation>,
    /// A cgroup an administrator delegated to you (e.g. `/orchestrate/alice`, the same
    /// path in each hierarchy): attempts' cgroups go below it. Overrides the plan's
    /// `limits.cgroup_parent`; see docs/hosts.md.
    #[arg(long, env = "ORCHESTRATE_CGROUP_PARENT", value_parser = parse_cgroup_parent)]
    pub cgroup_parent: Option<PathBuf>,
    /// Whole-run timeout (e.g. `30m`), overriding the plan's `limits.run_timeout`.
    #[arg(long, value_parser = parse_timeout)]
    pub timeout: Option<Duration>,
    /// Grace between SIGTERM and kill when ending attempts (default 10s).
    #[arg(long, value_parser = parse_duration)]
    pub grace: Option<Duration>,
    /// Host memory the running steps' limits may add up to (default: all of it).
    #[arg(long, value_parser = parse_size)]
    pub memory_budget: Option<u64>,
    /// `auto`: a live view on a terminal, plain lines otherwise.
    #[arg(long, value_enum, default_value = "auto")]
    pub progress: super::choices::Progress,
    /// Copy every step's output to the terminal too.
    #[arg(long)]
    pub tee: bool,
    /// Run even when pins drifted; the drift is recorded and shown first.
    #[arg(long)]
    pub allow_drift: bool,
    /// Device inventory (TOML); default `ORCHESTRATE_INVENTORY`, then
    /// `/etc/orchestrate/devices.toml`.
    #[arg(long, env = "ORCHESTRATE_INVENTORY")]
    pub inventory: Option<PathBuf>,
    /// How long a step waits for devices another run holds.
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    pub device_wait: Duration,
    /// Sign the attestation with this ed25519 private key (PKCS#8 PEM, as
    /// `openssl genpkey -algorithm ed25519` writes).
    #[arg(long)]
    pub sign_key: Option<PathBuf>,
    #[command(flatten)]
    pub cache: CacheArg,
    /// Run every `cache = true` step (what they make is still stored).
    #[arg(long)]
    pub no_cache: bool,
    /// Run this cached step whatever the cache holds (repeatable; a step id or the
    /// step a matrix cell was made from). An output that then differs from the
    /// entry's is flagged "nondeterministic output".
    #[arg(long, value_name = "STEP")]
    pub refresh: Vec<String>,
    /// Where steps that do not name a `backend` run: on this host, or as Slurm jobs
    /// (default: the plan's `[backend] kind`, else local).
    #[arg(long, value_enum)]
    pub backend: Option<super::choices::Backend>,
    /// Submit every job (chained by `--dependency=afterok`) and return: the run
    /// goes on without this process. `orchestrate status RUN` follows it and
    /// `orchestrate resume RUN` collects it into its record. Every step but
    /// compare steps must run on a batch scheduler.
    #[arg(long)]
    pub detach: bool,
}

/// Where the step cache is.
#[derive(clap::Args, Debug, Default)]
pub struct CacheArg {
    /// The step cache folder (default `ORCHESTRATE_CACHE`, then
    /// `$XDG_CACHE_HOME/orchestrate`, then `~/.cache/orchestrate`).
    #[arg(long = "cache", value_name = "DIR", global = true)]
    pub dir: Option<PathBuf>,
    /// The shared store asked after a miss in the step cache, and sent what cached
    /// steps make (signed with `--sign-key`): a shared folder's path or
    /// `s3://bucket/prefix` (credentials from the environment or ~/.aws, never the
    /// URL). Default: the plan's `[cache] remote`.
    #[arg(
        long = "cache-remote",
        value_name = "URL",
        global = true,
        env = "ORCHESTRATE_CACHE_REMOTE"
    )]
    pub remote: Option<String>,
}

impl CacheArg {
    pub fn root(&self) -> PathBuf {
        self.dir
            .clone()
            .unwrap_or_else(orchestrate::cache::Cache::default_root)
    }
}

#[derive(Subcommand, Debug)]
pub enum CacheCmd {
    /// Every entry: its step, the run that made it, its size, how long unused.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Entries, blobs and the bytes they take.
    Du,
    /// Send entries of this cache (every one, or the keys named) to the shared
    /// cache (`--cache-remote`), signed with `--sign-key`: blobs it lacks first,
    /// then the entry, unless this key has one there.
    Push {
        /// Sign with this ed25519 private key (PKCS#8 PEM).
        #[arg(long)]
        sign_key: PathBuf,
        /// Cache keys (default: every entry).
        keys: Vec<String>,
    },
    /// Take entries of the shared cache (`--cache-remote`) that a `--trust` key
    /// signed into this cache, every blob hashed on the way in.
    Pull {
        /// A public key (SPKI PEM) whose entries are taken (repeatable).
        #[arg(long, required = true)]
        trust: Vec<PathBuf>,
        /// Cache keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// The entries of the shared cache (`--cache-remote`): key, who signed each
    /// and who stored it, as each entry claims (`trusted` names the `--trust` key
    /// that verifies it).
    Remote {
        /// Public keys (SPKI PEM) to verify signatures with (repeatable).
        #[arg(long)]
        trust: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Remove entries unused longer than `--older-than`, then the least recently
    /// used until the cache fits `--max-size`, then blobs no entry keeps. With
    /// `--remote`, the shared cache instead: entries stored longer ago than
    /// `--older-than`, then blobs no entry names stored before `--grace`.
    Gc {
        /// e.g. 50GiB (the step cache only).
        #[arg(long, value_parser = parse_size, conflicts_with = "shared")]
        max_size: Option<u64>,
        /// e.g. 30d (d, h, m, s, combined as 1d12h).
        #[arg(long, value_parser = parse_duration)]
        older_than: Option<Duration>,
        /// Collect the shared cache (`--cache-remote`), not the step cache.
        #[arg(long = "remote")]
        shared: bool,
        /// With `--remote`: keep blobs no entry names when stored more recently
        /// than this, as a push under way writes its blobs before its entry.
        #[arg(long, value_parser = parse_duration, default_value = "1h", requires = "shared")]
        grace: Duration,
        /// Say what would be removed; remove nothing (with `--remote`).
        #[arg(long, requires = "shared")]
        dry_run: bool,
    },
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum ReportFormat {
    /// A machine-readable summary.
    Json,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum TrendOrder {
    Commit,
    Time,
}

impl From<TrendOrder> for orchestrate::track::trend::Order {
    fn from(o: TrendOrder) -> Self {
        match o {
            TrendOrder::Commit => Self::Commit,
            TrendOrder::Time => Self::Time,
        }
    }
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum SchemaKind {
    /// The plan format.
    Plan,
    /// The evidence record (`record.json`).
    Record,
    /// `runs --json`: a list of runs.
    Runs,
    /// `trend STEP METRIC --json`: a metric over commits.
    Trend,
    /// `trend tests --json`: test cases and findings over commits.
    TrendTests,
}

fn parse_duration(s: &str) -> Result<Duration, orchestrate::plan::ValueError> {
    orchestrate::plan::parse_duration(s)
}

fn parse_timeout(s: &str) -> Result<Duration, orchestrate::plan::ValueError> {
    orchestrate::plan::parse_timeout(s)
}

/// A date as the records write their times (UTC RFC 3339), for comparison as text.
fn parse_fraction(s: &str) -> Result<f64, String> {
    let v = orchestrate::units::fraction(s)
        .ok_or_else(|| format!("`{s}` is not a fraction (0.05) or a percentage (5%)"))?;
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("`{s}`: between 0 and 100%"))
    }
}

fn parse_since(s: &str) -> Result<String, String> {
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(d.format("%Y-%m-%d").to_string());
    }
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| {
            t.with_timezone(&chrono::Utc)
                .format("%Y-%m-%dT%H:%M:%S")
                .to_string()
        })
        .map_err(|_| format!("`{s}` is not a date (2026-12-01) or an RFC 3339 time"))
}

fn parse_cgroup_parent(s: &str) -> Result<PathBuf, String> {
    orchestrate::contract::cgroup_parent_path(s)
}

fn parse_size(s: &str) -> Result<u64, orchestrate::plan::ValueError> {
    orchestrate::plan::parse_bytes(s).map(|b| b.0)
}
