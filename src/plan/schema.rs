//! The plan's INPUT shape as Rust types, for the JSON Schema (`orchestrate schema plan`,
//! `schemas/plan.schema.json`) that editors use. The loader does not deserialize into
//! these (it walks the spanned tree to report every error with its place); a test
//! deserializes every plan under `plans/` into them so the two cannot drift apart.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

/// An orchestrate plan (`schema = "orchestrate/plan/v1"`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "OrchestratePlan")]
pub struct PlanInput {
    /// Must be "orchestrate/plan/v1".
    pub schema: String,
    /// Short plan name.
    pub name: String,
    pub description: Option<String>,
    /// Text for the "Changes" section of the PR body.
    pub changes: Option<String>,
    /// Free values, usable as `${params.NAME}`.
    #[serde(default)]
    pub params: BTreeMap<String, ParamInput>,
    pub pins: Option<PinsInput>,
    pub limits: Option<LimitsInput>,
    /// Named device requests.
    #[serde(default)]
    pub devices: BTreeMap<String, DeviceInput>,
    /// Allow simulated devices for requests the host cannot satisfy.
    pub allow_simulated: Option<bool>,
    /// Environment variables whose values are secret, besides names that look secret
    /// (`*TOKEN*`, `*KEY*`, ...): their values are masked wherever the run stores
    /// them (journal, record, reports, logs, metrics).
    pub secrets: Option<Vec<String>>,
    /// The older name of `secrets` (same meaning).
    pub secret_env: Option<Vec<String>>,
    /// Steps keyed by id (`[A-Za-z0-9_][A-Za-z0-9_.-]*`); required unless the plan
    /// includes another.
    #[serde(default)]
    pub steps: BTreeMap<String, StepInput>,
    pub report: Option<ReportInput>,
    /// Git revisions of one repository to run steps on, by name: `baseline = {
    /// repo = "..", commit = "HEAD~1" }`, `implementation = { repo = "..", commit =
    /// "HEAD" }`. The first is the baseline the others are classified against.
    pub revisions: Option<BTreeMap<String, RevisionInput>>,
    /// Another plan in the same folder that this one is, with the tables and keys
    /// written here put in (tables merge key by key): `include = "full.toml"`.
    pub include: Option<String>,
    /// Sweep axes: `tokens = [2048, 8192]`; steps using `${matrix.tokens}` (or needing
    /// a step that does) run once per cell.
    pub matrix: Option<MatrixInput>,
    /// Where steps run: `[backend] kind = "slurm"` with the job options every job
    /// gets.
    pub backend: Option<BackendInput>,
    pub cache: Option<CacheInput>,
}

/// `[cache]`: the store a team shares, and whose entries are reused from it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheInput {
    /// The shared store asked after a miss in the user's own cache: a shared
    /// folder's absolute path (or `file://` URL) or an S3 bucket
    /// (`s3://bucket/prefix?endpoint=…&region=…&profile=…`). `--cache-remote` overrides it.
    pub remote: Option<String>,
    /// Public keys (SPKI PEM, relative to the plan's folder) whose signed entries
    /// are reused from the remote; the run's own `--sign-key` is trusted too.
    pub trust: Option<Vec<String>>,
}

/// Backend kinds.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackendKindInput {
    Local,
    Slurm,
}

/// `[backend]`: the default backend, and what Slurm jobs ask for.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendInput {
    /// local (default) or slurm.
    pub kind: Option<BackendKindInput>,
    /// `--partition`.
    pub partition: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// `--qos`.
    pub qos: Option<String>,
    /// `--constraint`.
    pub constraint: Option<String>,
    /// `--time` (Slurm's form: `30`, `1:00:00`); default: the step's timeout.
    pub time: Option<String>,
    /// `--nodes`; above 1 the command runs once on each node (one srun task per node).
    pub nodes: Option<u32>,
    /// `--cpus-per-task`.
    pub cpus: Option<u32>,
    /// More `sbatch` arguments for every job.
    pub sbatch_args: Option<Vec<String>>,
    /// The GRES name of each device kind: `{ gpu = "gpu", rngd = "npu" }`.
    pub gres: Option<BTreeMap<String, String>>,
    /// A job pending longer than this (`"30m"`) is cancelled and fails with Slurm's
    /// pending reason. Default: no bound.
    pub queue_timeout: Option<String>,
    /// How many of the run's Slurm jobs run at once, array tasks included (the
    /// `%N` of its arrays). Default: `--jobs`.
    pub array_parallelism: Option<u32>,
}

/// `[steps.X.slurm]`: this step's job options.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlurmStepInput {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--time` (Slurm's form).
    pub time: Option<String>,
    /// `--nodes`; above 1 the command runs once on each node (one srun task per node).
    pub nodes: Option<u32>,
    /// `--cpus-per-task`.
    pub cpus: Option<u32>,
    /// `--gres` as written (`gpu:2`), instead of the one made from `devices`.
    pub gres: Option<String>,
    /// A job pending longer than this (`"30m"`) is cancelled and fails with Slurm's
    /// pending reason. Default: `[backend] queue_timeout`, else no bound.
    pub queue_timeout: Option<String>,
}

/// `[matrix]`: axes, and rows that drop or add cells.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MatrixInput {
    /// Cells to drop: every cell that matches all of a row's values.
    pub exclude: Option<Vec<BTreeMap<String, ParamInput>>>,
    /// Whole cells to add (a value for every axis).
    pub include: Option<Vec<BTreeMap<String, ParamInput>>>,
    /// Each axis: a non-empty array of plain values.
    #[serde(flatten)]
    pub axes: BTreeMap<String, Vec<ParamInput>>,
}

/// A parameter value.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ParamInput {
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
}

/// A size: an integer of bytes, or a string such as "128GiB", "4GB", "512B".
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SizeInput {
    Bytes(u64),
    Text(SizeText),
}

/// A size with its unit, no space: "128GiB", "4GB", "512B", "1.5GiB".
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct SizeText(
    #[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+)?(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$"))] pub String,
);

/// A duration such as "90s", "15m", "2h", "1h30m", "500ms", "30d".
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct DurationInput(#[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$"))] pub String);

/// Declared pins.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PinsInput {
    #[serde(default)]
    pub git: BTreeMap<String, GitPinInput>,
    #[serde(default)]
    pub model: BTreeMap<String, ModelPinInput>,
    #[serde(default)]
    pub tools: BTreeMap<String, ToolPinInput>,
    #[serde(default)]
    pub python: BTreeMap<String, PythonPinInput>,
    /// Path or glob -> "sha256:<hex>" (or "" when not pinned yet).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
}

/// A git repository that must be at a commit.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitPinInput {
    pub path: String,
    /// Short or full sha.
    pub commit: Option<String>,
    pub allow_dirty: Option<bool>,
    /// "record" (default): untracked files are recorded with their digests, not
    /// drift; "refuse": they are drift.
    pub untracked: Option<UntrackedInput>,
}

/// A model folder (hub revision and/or directory digest).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelPinInput {
    pub id: Option<String>,
    pub revision: Option<String>,
    pub path: String,
    /// "sha256:<hex>" directory digest.
    pub digest: Option<String>,
}

/// A tool whose reported version must match.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolPinInput {
    pub command: Vec<String>,
    /// Substring, or `/regex/`.
    pub expect: Option<String>,
    pub timeout: Option<DurationInput>,
}

/// Python packages that must be installed at exact versions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PythonPinInput {
    /// Interpreter, default "python3".
    pub python: Option<String>,
    /// `name==version` requirements.
    #[serde(default)]
    pub packages: Vec<String>,
}

/// How attempts are isolated.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IsolationInput {
    Auto,
    Cgroup,
    None,
}

/// Plan-wide limits; steps may override memory, timeout and pids.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsInput {
    pub host_memory: Option<SizeInput>,
    pub swap: Option<bool>,
    #[schemars(range(min = 1))]
    pub pids: Option<u64>,
    /// cpuset list such as "0-3".
    pub cpus: Option<String>,
    pub timeout: Option<DurationInput>,
    pub run_timeout: Option<DurationInput>,
    pub grace: Option<DurationInput>,
    pub isolation: Option<IsolationInput>,
    /// A cgroup an administrator delegated (e.g. "/orchestrate/alice"): attempts'
    /// cgroups go below it in each hierarchy.
    pub cgroup_parent: Option<String>,
}

/// A named device request.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceInput {
    /// gpu, rngd, atom, ...
    pub kind: String,
    #[schemars(range(min = 1))]
    pub count: Option<u32>,
    #[schemars(range(min = 1))]
    pub cores: Option<u32>,
    pub ids: Option<Vec<String>>,
    pub simulate: Option<bool>,
    /// A MIG instance of a GPU in MIG mode instead of a whole GPU: its profile
    /// ("1g.18gb") or "any". Only for kind = "gpu"; never simulated.
    pub mig: Option<String>,
}

/// What a step is for (default "command").
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KindInput {
    Compile,
    Prefill,
    Handoff,
    Compare,
    Command,
}

/// One step.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepInput {
    pub kind: Option<KindInput>,
    /// Steps that must finish first.
    pub needs: Option<Vec<String>>,
    /// Device request names.
    pub devices: Option<Vec<String>>,
    /// argv, exec'd directly (exclusive with `shell`).
    pub run: Option<Vec<String>>,
    /// A /bin/sh -c script (exclusive with `run`).
    pub shell: Option<String>,
    pub env: Option<BTreeMap<String, String>>,
    pub cwd: Option<String>,
    #[schemars(range(min = 1))]
    pub repeats: Option<u32>,
    pub warmup: Option<u32>,
    pub timeout: Option<DurationInput>,
    pub memory: Option<SizeInput>,
    #[schemars(range(min = 1))]
    pub pids: Option<u64>,
    pub outputs: Option<Vec<String>>,
    pub inputs: Option<Vec<String>>,
    /// Compare steps only.
    pub checks: Option<Vec<CheckInput>>,
    /// How reports state this step.
    pub report: Option<StepReportInput>,
    /// The matrix axes the step is expanded over (`[]`: none); default: the axes it
    /// uses (`${matrix.X}`) and those of the steps it needs.
    pub matrix: Option<Vec<String>>,
    /// How often a failed attempt is tried again (every try stays on the record).
    #[schemars(range(min = 0, max = 100))]
    pub retries: Option<u32>,
    /// What is retried: `exit`, `exit:CODE`, `signal`, `oom`, `timeout`,
    /// `not_started`, `outputs`; default: any failure but a cancel.
    pub retry_on: Option<Vec<String>>,
    /// The revisions this step runs on (an axis `revision`): `["baseline",
    /// "implementation"]`.
    pub revisions: Option<Vec<String>>,
    /// Files the step's test runner or scanner writes: `{ junit = "${out}/junit.xml" }`,
    /// `{ sarif = "${out}/scan.sarif" }`.
    pub results: Option<ResultsInput>,
    /// "all" (default): any failure fails the run; "new": only failures and findings
    /// new against the baseline revision do.
    pub gate: Option<GateInput>,
    /// Reuse the outputs of an earlier run whose step had the same cache key (its
    /// command, environment, inputs, upstream outputs, tools and device kinds).
    /// Default false.
    pub cache: Option<bool>,
    /// What else enters the cache key: `["memory"]` adds the memory limit,
    /// `["env.NAME"]` an environment variable the default rule leaves out (PATH,
    /// TERM, HOME) or one from the caller's environment (passed to the step too).
    pub cache_key: Option<Vec<String>>,
    /// How a reused step's outputs are put back: "copy" (default: a reflink where the
    /// filesystem has them, else a copy; nothing written to them reaches the cache)
    /// or "link" (hard links to the cache's files, free for large models; only for
    /// outputs no step writes to).
    pub cache_restore: Option<CacheRestoreInput>,
    /// Where its attempts run: local or slurm (default: `[backend] kind`, or
    /// `--backend`).
    pub backend: Option<BackendKindInput>,
    /// This step's Slurm job options.
    pub slurm: Option<SlurmStepInput>,
    /// Whether its attempts run alone: while one runs (warm-ups included) no other
    /// attempt or check of the run does, and on Slurm its job asks for the node
    /// alone (`--exclusive`). Default: true for a step whose attempts are
    /// measurements (`repeats` > 1 or a `[steps.X.report] metric`), else false.
    pub exclusive: Option<bool>,
}

/// `results` of a step.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultsInput {
    /// JUnit XML (pytest --junitxml, cargo-nextest, JUnit 5).
    pub junit: Option<String>,
    /// SARIF 2.1.0 (ruff, semgrep, gitleaks, bandit).
    pub sarif: Option<String>,
}

/// What fails the run.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum GateInput {
    All,
    New,
}

/// How a reused step's outputs are put back.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum CacheRestoreInput {
    Copy,
    Link,
}

/// One entry of `[revisions]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevisionInput {
    /// The repository, relative to the plan folder; the same for every revision.
    pub repo: String,
    /// Anything `git rev-parse` accepts: a sha, a branch, `HEAD~1`. Default "HEAD".
    pub commit: Option<String>,
    /// "allow": run the working tree as it is (its diff recorded); "refuse": run the
    /// working tree only when clean. Absent: a clean checkout under the work folder.
    pub dirty: Option<DirtyInput>,
    /// "record" (default) or "refuse": whether untracked files in the working tree
    /// are drift.
    pub untracked: Option<UntrackedInput>,
}

/// `dirty` of a revision.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum DirtyInput {
    Allow,
    Refuse,
}

/// `[steps.X.report]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepReportInput {
    /// A metric the step writes to `ORCHESTRATE_METRICS` (e.g. `prefill_ms`), quoted
    /// in the prose instead of wall time.
    pub metric: Option<String>,
    /// (max − min) / median above which reports say the dispersion remains
    /// (default 0.05).
    #[schemars(range(min = 0.0, max = 10.0))]
    pub dispersion: Option<f64>,
    /// Which way the headline metric (or wall time) improves: "lower" (the default)
    /// or "higher"; `orchestrate regressions` calls a change the other way worse.
    pub better: Option<crate::record::plan::Better>,
    /// How much the headline metric may move before `orchestrate regressions` calls
    /// it a change: a fraction (0.05) or a percentage ("5%"); default the plan's
    /// `[report] noise`.
    pub threshold: Option<Fraction>,
}

/// A fraction written as a number (0.05) or a percentage ("5%").
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Fraction {
    Number(f64),
    Percent(String),
}

/// One check of a compare step; tensor refs are `path` or `path:tensor`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckInput {
    pub name: String,
    /// The comparison (one definition with the record's `metric`).
    pub metric: crate::record::plan::Metric,
    pub across: Option<String>,
    pub file: Option<String>,
    pub actual: Option<String>,
    pub expected: Option<String>,
    pub actual_logits: Option<String>,
    pub expected_logits: Option<String>,
    pub axis: Option<u32>,
    pub dtype: Option<String>,
    pub shape: Option<Vec<ShapeDim>>,
    pub max: Option<f64>,
    pub min: Option<f64>,
    pub equals: Option<serde_json::Value>,
}

/// Report settings.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportInput {
    /// pr, html, summary, json, junit, or template paths.
    pub templates: Option<Vec<String>>,
    /// How reports title a matrix cell's block, axes in braces: `"Full {tokens}"`.
    pub cell_title: Option<String>,
    /// A timing change across revisions counts only when its confidence interval
    /// lies beyond this fraction (default 0.05).
    pub noise: Option<f64>,
}

/// One dimension of a `shape` check: a number, or a string holding
/// `${params.X}` or `${matrix.X}` that names one.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum ShapeDim {
    Size(u64),
    Var(String),
}

/// What untracked files in a git tree mean.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum UntrackedInput {
    Record,
    Refuse,
}

/// A table of the plan, named by its input type above: the one place each of its
/// keys is named, typed and documented. The walker refuses any key its table's
/// type lacks, the JSON Schema is generated from the same types, and a test holds
/// docs/plan.md to them, so a new key is written once here (and walked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Table {
    Top,
    Limits,
    Device,
    Report,
    Revision,
    Backend,
    Cache,
    StepSlurm,
    Pins,
    GitPin,
    ModelPin,
    ToolPin,
    PythonPin,
    Step,
    StepReport,
    Results,
    Check,
}

impl Table {
    const COUNT: usize = 17;

    /// The keys the table may hold, as its input type's properties (computed once).
    pub(crate) fn keys(self) -> &'static [String] {
        static KEYS: [std::sync::OnceLock<Vec<String>>; Table::COUNT] =
            [const { std::sync::OnceLock::new() }; Table::COUNT];
        KEYS[self as usize].get_or_init(|| match self {
            Table::Top => properties::<PlanInput>(),
            Table::Limits => properties::<LimitsInput>(),
            Table::Device => properties::<DeviceInput>(),
            Table::Report => properties::<ReportInput>(),
            Table::Revision => properties::<RevisionInput>(),
            Table::Backend => properties::<BackendInput>(),
            Table::Cache => properties::<CacheInput>(),
            Table::StepSlurm => properties::<SlurmStepInput>(),
            Table::Pins => properties::<PinsInput>(),
            Table::GitPin => properties::<GitPinInput>(),
            Table::ModelPin => properties::<ModelPinInput>(),
            Table::ToolPin => properties::<ToolPinInput>(),
            Table::PythonPin => properties::<PythonPinInput>(),
            Table::Step => properties::<StepInput>(),
            Table::StepReport => properties::<StepReportInput>(),
            Table::Results => properties::<ResultsInput>(),
            Table::Check => properties::<CheckInput>(),
        })
    }
}

/// The property names of a table's input type, as its JSON Schema lists them.
fn properties<T: JsonSchema>() -> Vec<String> {
    let schema = schemars::schema_for!(T);
    schema
        .get("properties")
        .and_then(|p| p.as_object())
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}
