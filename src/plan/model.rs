//! The validated, resolved plan: what `plan::load` returns and everything downstream
//! receives. Nothing after `load` re-parses TOML or re-checks references.
//!
//! Load-time references (`${params.X}`, `${env.X}`, `${env.X:-d}`, `${plan_dir}`) are
//! already substituted here; the references that only exist while running (`${run_id}`,
//! `${work}`, `${out}`, `${repeat}`, `${steps.ID.out}`) stay as [`Var`]s inside a
//! [`Template`] and are filled in by [`Template::render`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::record::plan::{Better, Metric, StepKind};
use serde::{Deserialize, Serialize};

/// The plan format this build understands.
pub const PLAN_SCHEMA: &str = "orchestrate/plan/v1";

/// A step id: `[A-Za-z0-9_][A-Za-z0-9_.-]*`, checked at load.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StepId(pub String);

impl fmt::Display for StepId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl StepId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A number of bytes, parsed from `"128GiB"`, `"4 GB"`, `"512MiB"` or an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

/// A validated, resolved plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Absolute path of the plan file.
    pub path: PathBuf,
    /// Absolute folder of the plan file (`${plan_dir}`).
    pub dir: PathBuf,
    /// The plan's bytes exactly as read (recorded and hashed).
    pub source: String,
    pub name: String,
    pub description: Option<String>,
    /// Text for the "Changes" section of the PR body.
    pub changes: Option<String>,
    pub params: BTreeMap<String, ParamValue>,
    pub pins: Pins,
    pub limits: Limits,
    /// Named device requests, by request name.
    pub devices: BTreeMap<String, DeviceRequest>,
    /// Allow simulated devices for requests the host cannot satisfy.
    pub allow_simulated: bool,
    /// Steps in a deterministic topological order (dependencies first, ties by id),
    /// expanded over the matrix: one step per cell, `prefill[tokens=2048]`.
    pub steps: Vec<Step>,
    /// `[matrix]`: its axes and the cells the run covers (after `--only`).
    pub matrix: Matrix,
    /// `[revisions]`: git revisions of one repository, in declaration order; the
    /// matrix then has an axis `revision` with their names.
    pub revisions: Vec<Revision>,
    /// Environment variable names whose values are secret (`secrets`, `secret_env`),
    /// besides the built-in secret-looking patterns.
    pub secret_env: Vec<String>,
    /// The values of secret variables this plan read at load (`${env.X}`) or sets
    /// literally in a step's `env`: masked wherever the run stores them.
    pub secret_values: SecretValues,
    pub report: ReportSettings,
    /// `[backend]`: where steps run unless they say (`backend = "slurm"`).
    pub backend: BackendSettings,
    pub cache: CacheSettings,
}

/// Where a step's attempts run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BackendKind {
    /// This host, each attempt in its own cgroups.
    #[default]
    Local,
    /// A Slurm cluster: one `sbatch` job per attempt.
    Slurm,
}

impl BackendKind {
    /// Every kind, in the order `--backend` lists them.
    pub const ALL: [BackendKind; 2] = [BackendKind::Local, BackendKind::Slurm];

    pub fn as_str(&self) -> &'static str {
        match self {
            BackendKind::Local => "local",
            BackendKind::Slurm => "slurm",
        }
    }
}

/// `[cache]` of a plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CacheSettings {
    /// The shared store (`remote`), as written.
    pub remote: Option<String>,
    /// The public keys whose entries are reused (`trust`), made absolute.
    pub trust: Vec<PathBuf>,
}

/// `[backend]` of a plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackendSettings {
    /// The default backend of every step (`kind`, default local).
    pub kind: BackendKind,
    /// What every Slurm job asks for, unless a step's `[steps.X.slurm]` says.
    pub slurm: SlurmOptions,
    /// Extra `sbatch` arguments for every job (`sbatch_args`).
    pub sbatch_args: Vec<String>,
    /// The GRES name of each device kind (`gres = { gpu = "gpu" }`); a kind not
    /// named is its own GRES name.
    pub gres: BTreeMap<String, String>,
    /// How many of the run's Slurm jobs (array tasks included) run at once
    /// (`array_parallelism`); default: `--jobs`.
    pub array_parallelism: Option<u32>,
}

/// Slurm job options (`[backend]` for the plan, `[steps.X.slurm]` per step).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlurmOptions {
    pub partition: Option<String>,
    pub account: Option<String>,
    pub qos: Option<String>,
    pub constraint: Option<String>,
    /// `--time` as Slurm writes it (`30`, `1:00:00`, `2-00:00:00`); default: the
    /// step's timeout.
    pub time: Option<String>,
    pub nodes: Option<u32>,
    /// `--cpus-per-task`.
    pub cpus: Option<u32>,
    /// `--gres` as written (`gpu:2`), instead of the one made from `devices`.
    pub gres: Option<String>,
    /// A job pending longer than this is cancelled and its attempt fails with
    /// Slurm's pending reason (default: no bound).
    pub queue_timeout: Option<std::time::Duration>,
}

impl SlurmOptions {
    /// `self`, with what it leaves unset taken from `base`.
    pub fn over(&self, base: &SlurmOptions) -> SlurmOptions {
        SlurmOptions {
            partition: self.partition.clone().or_else(|| base.partition.clone()),
            account: self.account.clone().or_else(|| base.account.clone()),
            qos: self.qos.clone().or_else(|| base.qos.clone()),
            constraint: self.constraint.clone().or_else(|| base.constraint.clone()),
            time: self.time.clone().or_else(|| base.time.clone()),
            nodes: self.nodes.or(base.nodes),
            cpus: self.cpus.or(base.cpus),
            gres: self.gres.clone().or_else(|| base.gres.clone()),
            queue_timeout: self.queue_timeout.or(base.queue_timeout),
        }
    }
}

/// Secret values, never shown by `Debug`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretValues(pub Vec<String>);

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretValues({} values)", self.0.len())
    }
}

impl Template {
    /// The text, when the template holds no run-time variable.
    pub fn as_literal(&self) -> Option<String> {
        let mut s = String::new();
        for seg in &self.segments {
            match seg {
                Segment::Lit(l) => s.push_str(l),
                Segment::Var(_) => return None,
            }
        }
        Some(s)
    }
}

impl Plan {
    /// Where `step`'s attempts run: its own `backend`, else `cli` (`--backend`), else
    /// `[backend] kind`. Compare steps run in the orchestrator.
    pub fn backend_of(&self, step: &Step, cli: Option<BackendKind>) -> BackendKind {
        if step.kind == StepKind::Compare {
            return BackendKind::Local;
        }
        step.backend.or(cli).unwrap_or(self.backend.kind)
    }

    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id.0 == id)
    }

    /// A step's memory limit per attempt: its own, else the plan's `host_memory`.
    pub fn memory_of(&self, step: &Step) -> Option<ByteSize> {
        step.memory.or(self.limits.host_memory)
    }

    /// A step's timeout per attempt: its own, else the plan's `timeout`.
    pub fn timeout_of(&self, step: &Step) -> Option<Duration> {
        step.timeout.or(self.limits.timeout)
    }
}

/// A free parameter value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Float(x) => write!(f, "{x}"),
            ParamValue::String(s) => f.write_str(s),
        }
    }
}

/// One entry of `[revisions]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    pub name: String,
    /// The repository (absolute, resolved against the plan folder).
    pub repo: PathBuf,
    /// What `git rev-parse` is given: a sha, a branch, `HEAD~1`; default `HEAD`.
    pub commit: String,
    /// `dirty = "allow"` or `"refuse"`: run in the working tree itself (dirty or
    /// refused when dirty); absent: a clean checkout of `commit` under the work folder.
    pub worktree: Option<WorkTree>,
    /// `untracked = "refuse"`: untracked files in the working tree are drift.
    pub refuse_untracked: bool,
}

/// How a revision that runs in the user's working tree treats local changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkTree {
    /// Run it as it is; a diff is recorded.
    Allow,
    /// Refuse to run when a tracked file changed.
    Refuse,
}

/// A step's `results`: files its test runner or scanner writes.
#[derive(Debug, Clone, Default)]
pub struct StepResults {
    /// JUnit XML (`results.junit`).
    pub junit: Option<Template>,
    /// SARIF 2.1.0 (`results.sarif`).
    pub sarif: Option<Template>,
}

impl StepResults {
    pub fn is_empty(&self) -> bool {
        self.junit.is_none() && self.sarif.is_none()
    }
}

/// What fails the run when a step with results fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GateMode {
    /// Any failure (the default).
    #[default]
    All,
    /// Only failures or findings that are new on a revision against the baseline.
    New,
}

/// `[matrix]`: axes of values, and the cells they span (the product minus
/// `exclude`, plus `include`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matrix {
    pub axes: Vec<Axis>,
    /// Each cell as one value index per axis, in axis order: the cells that run.
    pub cells: Vec<Vec<usize>>,
    /// How many cells the plan declares (before `--only`).
    pub declared: usize,
    /// The `--only AXIS=VALUE` filters that chose `cells`.
    pub only: Vec<(String, String)>,
}

/// One axis of the matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub name: String,
    pub values: Vec<ParamValue>,
}

impl Matrix {
    pub fn is_empty(&self) -> bool {
        self.axes.is_empty()
    }
}

/// Declared pins. Verified by `pins`, never by `plan`.
#[derive(Debug, Clone, Default)]
pub struct Pins {
    pub git: BTreeMap<String, GitPin>,
    pub model: BTreeMap<String, ModelPin>,
    pub tools: BTreeMap<String, ToolPin>,
    pub python: BTreeMap<String, PythonPin>,
    /// File path or glob (relative to the plan dir unless absolute) -> `sha256:<hex>`
    /// (or empty when not pinned yet).
    pub files: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct GitPin {
    pub path: PathBuf,
    /// Short or full sha; `None` means "record only" (filled by `orchestrate pin`).
    pub commit: Option<String>,
    pub allow_dirty: bool,
    /// `untracked = "refuse"`: untracked files are drift, not only recorded.
    pub refuse_untracked: bool,
}

#[derive(Debug, Clone)]
pub struct ModelPin {
    /// Hub id such as `ORG/NAME`; `None` for a plain folder pinned by digest.
    pub id: Option<String>,
    pub revision: Option<String>,
    pub path: PathBuf,
    /// `sha256:<hex>` directory digest, when pinned.
    pub digest: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ToolPin {
    pub command: Vec<String>,
    /// Substring, or `/regex/`.
    pub expect: Option<String>,
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct PythonPin {
    /// Interpreter to ask, e.g. `python3` or `.venv/bin/python`.
    pub python: String,
    /// `name==version` requirements.
    pub packages: Vec<String>,
}

/// How attempts are isolated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IsolationMode {
    /// cgroups where possible, else `none` with a recorded warning.
    #[default]
    Auto,
    /// cgroups required: refuse to run (exit 3) when impossible.
    Cgroup,
    /// Explicitly unisolated: process-group kill only, limits not enforced.
    None,
}

impl fmt::Display for IsolationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IsolationMode::Auto => "auto",
            IsolationMode::Cgroup => "cgroup",
            IsolationMode::None => "none",
        })
    }
}

/// Plan-wide limits; a step's own `memory`, `timeout` and `pids` override them.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    pub host_memory: Option<ByteSize>,
    /// `false` (the default) means swap is disabled for attempts.
    pub swap: bool,
    pub pids: Option<u64>,
    /// A cpuset list such as `"0-3"`.
    pub cpus: Option<String>,
    /// Per-step timeout default.
    pub timeout: Option<Duration>,
    /// Whole-run timeout.
    pub run_timeout: Option<Duration>,
    /// Grace between SIGTERM and SIGKILL.
    pub grace: Option<Duration>,
    pub isolation: IsolationMode,
    /// A cgroup an administrator delegated, as a path below each hierarchy's root:
    /// attempts' cgroups go below it.
    pub cgroup_parent: Option<std::path::PathBuf>,
}

/// A named device request.
#[derive(Debug, Clone)]
pub struct DeviceRequest {
    /// `gpu`, `rngd`, `atom`, or another inventory kind.
    pub kind: String,
    pub count: u32,
    /// Cores per device (e.g. 4 of an RNGD's 8); `None` = the whole device.
    pub cores: Option<u32>,
    /// Explicit device ids or UUIDs.
    pub ids: Vec<String>,
    /// This request may be served by simulated devices.
    pub simulate: bool,
    /// A MIG instance of this profile (`1g.18gb`, or `any`) of a GPU in MIG mode,
    /// instead of a whole GPU.
    pub mig: Option<String>,
}

/// What a step executes.
#[derive(Debug, Clone)]
pub enum StepCommand {
    /// `run = ["prog", "arg", ...]`: exec'd directly.
    Argv(Vec<Template>),
    /// `shell = "..."`: run by `/bin/sh -c`.
    Shell(Template),
}

#[derive(Debug, Clone)]
pub struct Step {
    pub id: StepId,
    pub kind: StepKind,
    /// Direct dependencies, as written (validated to exist).
    pub needs: Vec<StepId>,
    /// Device request names (validated to exist in `Plan::devices`).
    pub devices: Vec<String>,
    /// `None` only for compare steps.
    pub command: Option<StepCommand>,
    pub env: BTreeMap<String, Template>,
    pub cwd: Option<Template>,
    /// Measured attempts (>= 1).
    pub repeats: u32,
    /// Attempts run before the measured ones, kept in the record and marked warm-up.
    pub warmup: u32,
    pub timeout: Option<Duration>,
    pub memory: Option<ByteSize>,
    pub pids: Option<u64>,
    pub outputs: Vec<Template>,
    pub inputs: Vec<Template>,
    pub checks: Vec<Check>,
    pub report: StepReport,
    /// `matrix = [...]`: the axes the step is expanded over, when it narrows them
    /// (`[]`: not expanded); `None`: what it uses and what it needs decide.
    pub matrix: Option<Vec<String>>,
    /// After expansion: the step this cell was made from, and its cell (axis, value)
    /// in axis order; `None` for a step not expanded.
    pub cell: Option<(StepId, Vec<(String, String)>)>,
    /// How often a failed attempt is tried again (`retries`).
    pub retries: u32,
    /// What is retried (`retry_on`); empty: any failure but a cancel.
    pub retry_on: Vec<RetryOn>,
    /// `revisions = [...]`: the revisions this step runs on (an axis `revision`).
    pub revisions: Option<Vec<String>>,
    /// `results = { junit = "...", sarif = "..." }`.
    pub results: StepResults,
    /// `gate = "new"`: only new failures fail the run.
    pub gate: GateMode,
    /// `cache = true`: reuse the outputs of an earlier run with the same key.
    pub cache: bool,
    /// `cache_key = ["memory"]`: the memory limit is part of the key.
    pub cache_memory: bool,
    /// `cache_key = ["env.NAME"]`: variables in the key whatever the default rule
    /// says (and passed to the step from the caller's environment).
    pub cache_env: Vec<String>,
    /// `cache_restore = "link"`: a reuse may hard-link its files to the cache's
    /// (for large outputs nothing writes); else reflinks or copies.
    pub cache_link: bool,
    /// `backend = "local" | "slurm"`; `None`: the run's default.
    pub backend: Option<BackendKind>,
    /// `[steps.X.slurm]`: this step's Slurm job options.
    pub slurm: SlurmOptions,
    /// `exclusive`: as written; `None` leaves it to [`Step::runs_alone`]'s default.
    pub exclusive: Option<bool>,
}

/// A failure `retry_on` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryOn {
    /// An exit with this code (`exit:75`).
    Exit(i32),
    /// Any non-zero exit (`exit`).
    AnyExit,
    /// Killed by a signal.
    Signal,
    /// The OOM killer.
    Oom,
    /// The attempt's timeout.
    Timeout,
    /// The attempt could not start (a device reported busy, a missing program).
    NotStarted,
    /// It exited 0 but did not write its declared outputs.
    Outputs,
}

/// How reports state a step (`[steps.X.report]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepReport {
    /// The metric (from `ORCHESTRATE_METRICS`) the prose quotes instead of wall time.
    pub metric: Option<String>,
    /// (max − min) / median above which reports say the timing dispersion remains
    /// (default 0.05).
    pub dispersion: Option<f64>,
    /// Which way the headline metric improves (default lower), for the regression
    /// gate.
    pub better: Option<Better>,
    /// The change of the headline metric the regression gate ignores, a fraction
    /// (default: the plan's `[report] noise`).
    pub threshold: Option<f64>,
}

impl Step {
    pub fn attempts(&self) -> u32 {
        self.warmup + self.repeats
    }

    /// Whether the step's attempts run alone: while one runs (warm-ups included), no
    /// other attempt or check of the run does. By default a step whose attempts are
    /// measurements does (`repeats` > 1, or a `[steps.X.report] metric`), as asv and
    /// hyperfine never measure beside work of their own; `exclusive` says otherwise.
    pub fn runs_alone(&self) -> bool {
        self.kind != StepKind::Compare
            && self
                .exclusive
                .unwrap_or(self.repeats > 1 || self.report.metric.is_some())
    }
}

/// One check of a compare step. Tensor references are `path` or `path:tensor`
/// (a tensor inside a safetensors file).
#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    /// 1-based line of the check's table in the plan (annotations point there).
    pub line: usize,
    pub metric: Metric,
    /// `bit_exact` across every measured repeat of this step (against the first).
    pub across: Option<StepId>,
    /// File (and optional `:tensor`) inside each repeat's `${out}` for `across`.
    pub file: Option<String>,
    pub actual: Option<Template>,
    pub expected: Option<Template>,
    /// Logits for `first_divergence` margins.
    pub actual_logits: Option<Template>,
    pub expected_logits: Option<Template>,
    /// Axis along which `slots_exact` counts slots.
    pub axis: Option<usize>,
    /// For raw files: element type and shape.
    pub dtype: Option<String>,
    pub shape: Option<Vec<u64>>,
    /// Dimensions of `shape` written as `"${matrix.X}"`: filled in per cell.
    pub shape_vars: Vec<(usize, Template)>,
    pub max: Option<f64>,
    pub min: Option<f64>,
    pub equals: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default)]
pub struct ReportSettings {
    /// Templates rendered at the end of a run: `pr`, `html`, `summary`, or paths.
    pub templates: Vec<String>,
    /// How reports title a matrix cell's block: `Full {tokens}` (axes in braces).
    pub cell_title: Option<String>,
    /// A timing change across revisions counts only beyond this fraction (0.05).
    pub noise: Option<f64>,
}

/// What `${revision.X}` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevisionField {
    Name,
    Dir,
    Commit,
}

/// A variable that is only known while running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Var {
    RunId,
    Work,
    Out,
    Repeat,
    StepOut(StepId),
    /// `${matrix.NAME}`: filled in when the plan is expanded over its matrix.
    Matrix(String),
    /// `${revision.name|dir|commit}`: filled in per cell (`commit` at run time).
    Revision(RevisionField),
    /// The commit a revision resolved to, known once the run has resolved it.
    RevisionCommit(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Lit(String),
    Var(Var),
}

/// A string whose load-time references are resolved and whose run-time ones remain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// The text as written in the plan (for records and error messages).
    pub raw: String,
    pub segments: Vec<Segment>,
}

/// Values for the run-time variables of a [`Template`].
pub trait VarSource {
    fn run_id(&self) -> &str;
    fn work(&self) -> &str;
    /// This attempt's own output folder (`None` outside an attempt).
    fn out(&self) -> Option<&str>;
    fn repeat(&self) -> Option<u32>;
    /// The output folder of a finished upstream step (its last measured attempt).
    fn step_out(&self, step: &StepId) -> Option<String>;
    /// The full sha a revision resolved to.
    fn revision_commit(&self, _name: &str) -> Option<String> {
        None
    }
}

impl Template {
    /// A template with no variables.
    pub fn literal(s: impl Into<String>) -> Self {
        let s = s.into();
        Template {
            raw: s.clone(),
            segments: vec![Segment::Lit(s)],
        }
    }

    /// Fill in the run-time variables. Validation guarantees every `${steps.X.out}` is
    /// upstream, so a missing value here is a scheduler bug, reported as an error.
    pub fn render(&self, vars: &dyn VarSource) -> Result<String, UnresolvedVar> {
        let mut s = String::new();
        for seg in &self.segments {
            match seg {
                Segment::Lit(l) => s.push_str(l),
                Segment::Var(Var::RunId) => s.push_str(vars.run_id()),
                Segment::Var(Var::Work) => s.push_str(vars.work()),
                Segment::Var(Var::Out) => {
                    s.push_str(vars.out().ok_or_else(|| UnresolvedVar("out".into()))?)
                }
                Segment::Var(Var::Repeat) => {
                    let r = vars
                        .repeat()
                        .ok_or_else(|| UnresolvedVar("repeat".into()))?;
                    s.push_str(&r.to_string())
                }
                Segment::Var(Var::StepOut(id)) => {
                    let o = vars
                        .step_out(id)
                        .ok_or_else(|| UnresolvedVar(format!("steps.{id}.out")))?;
                    s.push_str(&o)
                }
                Segment::Var(Var::RevisionCommit(name)) => {
                    let c = vars
                        .revision_commit(name)
                        .ok_or_else(|| UnresolvedVar(format!("revision.commit of {name}")))?;
                    s.push_str(&c)
                }
                // Expansion fills every one in; one left is a loader bug.
                Segment::Var(Var::Matrix(a)) => return Err(UnresolvedVar(format!("matrix.{a}"))),
                Segment::Var(Var::Revision(_)) => return Err(UnresolvedVar("revision".into())),
            }
        }
        Ok(s)
    }

    /// Join neighbouring literal segments (after expansion filled some in).
    pub(crate) fn merge_literals(&mut self) {
        let mut out: Vec<Segment> = Vec::with_capacity(self.segments.len());
        for seg in self.segments.drain(..) {
            match (out.last_mut(), seg) {
                (Some(Segment::Lit(a)), Segment::Lit(b)) => a.push_str(&b),
                (_, seg) => out.push(seg),
            }
        }
        self.segments = out;
    }

    /// Steps this template refers to through `${steps.ID.out}`.
    pub fn step_refs(&self) -> impl Iterator<Item = &StepId> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Var(Var::StepOut(id)) => Some(id),
            _ => None,
        })
    }
}

/// A run-time variable had no value when a template was rendered.
#[derive(Debug, Clone, thiserror::Error)]
#[error("${{{0}}} has no value here")]
pub struct UnresolvedVar(pub String);

/// A value as cell ids and `${matrix.X}` write it.
pub fn value_text(v: &ParamValue) -> String {
    v.to_string()
}

#[cfg(test)]
mod metric_tests {
    use super::Metric;

    #[test]
    fn metric_names_are_the_serde_names() {
        for m in Metric::ALL {
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
            let back: Metric = serde_json::from_value(m.as_str().into()).unwrap();
            assert_eq!(back, m);
        }
    }
}
