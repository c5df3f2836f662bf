//! `record.json`: the run as evidence, built from the journal at the end of a run (or by
//! `recover` after a crash). Times are RFC 3339 strings, durations milliseconds with
//! microsecond resolution, digests 64 lowercase hex digits; every integer stays below
//! 2^53 so the canonical form is exact.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::check_record::{Bounds, CheckInputsRecord, CheckRecord, CheckValue};
pub use super::contract::{
    Allocation, DeviceRequestRecord, IsolationRecord, PlanDevices, PlanLimits, ReleaseAudit,
    RunFooter, Termination,
};

/// The record format this build writes.
pub const RECORD_SCHEMA: &str = "orchestrate/record/v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every step succeeded and the release audit passed.
    Succeeded,
    /// A step did not succeed, the run timed out, or the release audit failed.
    Failed,
    /// Interrupted (Ctrl-C, SIGTERM), or the orchestrator died before the run ended.
    Interrupted,
}

impl RunStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Never started (the run ended first).
    #[default]
    NotRun,
    /// Every attempt succeeded and wrote its declared outputs (compare: every check
    /// passed).
    Succeeded,
    /// An attempt or check failed, or the step could not be run (`reason` says which).
    Failed,
    /// Not started because something it needs did not succeed.
    Skipped,
    /// Stopped by a cancel (fail-fast, interrupt, run timeout).
    Cancelled,
    /// Not run: its outputs were restored from the cache (`cache = true`), counted as
    /// success; `cache` says from which run.
    Reused,
    /// It ran on a result Slurm later overturned: an attempt of a step it needs
    /// ended on its job's end record, and Slurm's word contradicted that record
    /// after this step had used it (`reason` says which). Never a success.
    UpstreamFailed,
}

impl StepStatus {
    /// Succeeded, or reused from the cache (a reused step counts as success).
    pub fn is_success(&self) -> bool {
        matches!(self, StepStatus::Succeeded | StepStatus::Reused)
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            StepStatus::NotRun => "not_run",
            StepStatus::Succeeded => "succeeded",
            StepStatus::Reused => "reused",
            StepStatus::Failed => "failed",
            StepStatus::Skipped => "skipped",
            StepStatus::Cancelled => "cancelled",
            StepStatus::UpstreamFailed => "upstream_failed",
        }
    }
}

/// The whole record.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Always `orchestrate/record/v1`.
    pub schema: String,
    /// `YYYYMMDDTHHMMSSZ-xxxxxx`: the UTC start time, then 6 random hex digits; it names
    /// the record folder, the attempts' cgroups and their canaries.
    pub run_id: String,
    /// How the run ended.
    pub status: RunStatus,
    /// Why the run did not succeed, for people; absent when it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// RFC 3339 UTC (microseconds), when the run started (its first journal event).
    pub started_at: String,
    /// RFC 3339 UTC, when the run ended; for a run the orchestrator did not finish, the
    /// time of its last journal event. Null when unknown.
    pub ended_at: Option<String>,
    /// Facts fixed before the first step: orchestrator, plan, host, options, isolation,
    /// pins and the declared steps.
    pub run: RunHeader,
    /// What became of every declared step, in dependency order, those that never ran
    /// included.
    pub steps: Vec<StepRecord>,
    /// Device allocations, in grant order.
    pub allocations: Vec<Allocation>,
    /// Results of the compare steps' checks, in the order they ran.
    pub comparisons: Vec<CheckRecord>,
    /// Every failure, kept: failed attempts, failed checks, failed steps.
    pub failures: Vec<Failure>,
    /// Warnings raised during the run, in journal order: pins that drifted under
    /// `--allow-drift`, isolation fallbacks.
    pub warnings: Vec<String>,
    /// The run's own final audit of what it owned; `None` when the orchestrator died.
    pub release_audit: Option<ReleaseAudit>,
    /// `journal.jsonl` as it was when the record was built from it (absent in records
    /// made before journals were hashed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<FileRecord>,
    /// Steps that ran on the baseline revision and on another, compared: test cases
    /// and findings classified, timings tested; absent without `[revisions]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revisions_compared: Vec<super::contract::RevisionComparison>,
}

/// What was fixed before the run started.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunHeader {
    /// The orchestrator that ran: its version and binary digest.
    pub orchestrator: OrchestratorInfo,
    /// The plan that ran: name, path, digest, limits and device requests.
    pub plan: PlanInfo,
    /// The host the run ran on.
    pub host: HostInfo,
    /// The run's effective options (command line over plan).
    pub options: RunOptionsInfo,
    /// How attempts were isolated and what the system could enforce.
    pub isolation: IsolationRecord,
    /// Declared against observed pins, and the hashes of the run's sources.
    #[serde(default)]
    pub pins: super::pins::PinReport,
    /// `[revisions]` as resolved and checked out; absent without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<super::pins::RevisionRecord>,
    /// The declared steps, in dependency order.
    pub steps: Vec<DeclaredStep>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OrchestratorInfo {
    /// The orchestrator's version (the crate version it was built from).
    pub version: String,
    /// sha256 of the orchestrator binary that ran.
    pub binary_sha256: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PlanInfo {
    /// The plan's short `name`.
    pub name: String,
    /// The plan's `description`, as written; absent when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The plan's `changes`: text for the "Changes" section of the PR body; absent when
    /// it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<String>,
    /// Path as given on the command line.
    pub path: String,
    /// sha256 of the plan's bytes; a copy is kept as `plan.toml` in the record folder.
    pub sha256: String,
    /// Plan-wide limits as declared (sizes in bytes, durations in ms).
    pub limits: PlanLimits,
    /// The plan's device requests.
    pub devices: PlanDevices,
    /// `[matrix]`: each axis and its values, and how many cells the run covers;
    /// absent without a matrix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<MatrixInfo>,
    /// How reports title a matrix cell (`[report] cell_title`, axes in braces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_title: Option<String>,
    /// `[report] noise`: the fraction a timing must move by to count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HostInfo {
    /// Host name as the system reports it; empty when unknown.
    pub hostname: String,
    /// Kernel version; empty when unknown.
    pub kernel: String,
    /// Operating system name and version; empty when unknown.
    pub os: String,
    /// Brand string of the first CPU; empty when unknown.
    pub cpu_model: String,
    /// Logical CPUs of the host (the default for `jobs`).
    pub cpus: u32,
    /// Total host memory in bytes, 0 when unknown (the default memory budget).
    pub memory_bytes: u64,
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`): tells whether the host
    /// rebooted between runs; null when unreadable.
    pub boot_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunOptionsInfo {
    /// Steps allowed to run at once (`--jobs`, default the host's CPU count).
    pub jobs: u32,
    /// `--keep-going`: after a failure, steps that do not depend on it went on.
    pub keep_going: bool,
    /// The isolation mode asked for, `auto`, `cgroup` or `none` (`--isolation`, else the
    /// plan's `limits.isolation`); `run.isolation` says what was used.
    pub isolation: String,
    /// The records folder as given (`--records`); this record is `<records>/<run-id>`.
    pub records: String,
    /// The run's work folder, absolute: `<work>/<run-id>`, the steps' `${work}`.
    pub work: String,
    /// Bytes of host memory the scheduler let running steps' limits add up to.
    pub memory_budget_bytes: u64,
    /// Whole-run timeout in milliseconds (`--timeout`, else the plan's
    /// `limits.run_timeout`); absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_timeout_ms: Option<u64>,
    /// `--set KEY=VALUE` overrides the plan ran with (its `plan.toml` is the text
    /// after them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
    /// `--only AXIS=VALUE`: the matrix cells the run was limited to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DeclaredStep {
    /// The step's id in the plan.
    pub id: String,
    /// `compile`, `prefill`, `handoff`, `compare` or `command`.
    pub kind: super::plan::StepKind,
    /// Ids of the steps it depends on.
    pub needs: Vec<String>,
    /// Names of the plan's device requests it uses.
    pub devices: Vec<String>,
    /// Measured attempts declared (at least 1).
    pub repeats: u32,
    /// Warm-up attempts declared: run before the measured ones, kept out of statistics.
    pub warmup: u32,
    /// Memory limit per attempt in bytes (the step's `memory`, else the plan's
    /// `limits.host_memory`); absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Timeout per attempt in milliseconds (the step's own, else the plan's
    /// `limits.timeout`); absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The metric reports quote for this step instead of wall time
    /// (`[steps.X.report] metric`); absent when none is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_metric: Option<String>,
    /// (max − min) / median above which reports say the dispersion remains; absent:
    /// the default, 0.05.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispersion: Option<f64>,
    /// Which way the headline metric (else wall time) improves
    /// (`[steps.X.report] better`); absent: lower.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub better: Option<crate::record::plan::Better>,
    /// The change of the headline metric (else wall time) the regression gate
    /// ignores, a fraction (`[steps.X.report] threshold`); absent: the plan's noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// For a cell of a matrix step: the step it was made from (`prefill`)...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// ...and its cell, axis to value, in the matrix's axis order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cell: Vec<CellValue>,
    /// How often a failed attempt is tried again (absent: never).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// `gate = "new"`: only failures new against the baseline fail the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gate_new: bool,
    /// For a cell on another revision run interleaved (ABAB) with its baseline cell:
    /// that cell, whose device lease it shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interleaved_with: Option<String>,
    /// Its attempts ran alone (`exclusive`, by default for measured steps): each
    /// waited until nothing else of the run ran on the host, and nothing else
    /// started while it ran; each attempt's `alone` says what happened.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
}

/// The plan's matrix as run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MatrixInfo {
    /// Axes in declaration order, each with its values as cell ids write them.
    pub axes: Vec<MatrixAxisInfo>,
    /// Cells the run covers (after `exclude`, `include` and `--only`).
    pub cells: u32,
}

/// One axis of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MatrixAxisInfo {
    /// The axis name (`${matrix.NAME}`).
    pub name: String,
    /// Its values.
    pub values: Vec<String>,
}

/// One axis value of a cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CellValue {
    /// The axis.
    pub axis: String,
    /// Its value in this cell, as the cell id writes it.
    pub value: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StepRecord {
    /// The step's id in the plan.
    pub id: String,
    /// `compile`, `prefill`, `handoff`, `compare` or `command`, as declared.
    pub kind: super::plan::StepKind,
    /// How the step ended.
    pub status: StepStatus,
    /// Why the step did not succeed (e.g. `attempt 2 exited with code 1`), for people;
    /// absent when it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Every attempt, warm-ups first, by attempt number; empty for a compare step and
    /// for a step that never ran.
    pub attempts: Vec<AttemptRecord>,
    /// Declared outputs of the last measured attempt (hashed by evidence).
    pub outputs: Vec<OutputRecord>,
    /// Wall time over the measured (non-warm-up) attempts that succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<Stats>,
    /// What the cache did for it (`cache = true` steps only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<StepCacheRecord>,
}

/// min / median / max over repeats (one definition, used by summary and reports).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Stats {
    /// How many values (for `wall_ms`: measured, non-warm-up attempts that succeeded).
    pub n: u32,
    /// The smallest value (milliseconds for `wall_ms`).
    pub min: f64,
    /// The median (the mean of the middle two for an even count), unrounded:
    /// reports round a value only where they print it.
    pub median: f64,
    /// The largest value (milliseconds for `wall_ms`).
    pub max: f64,
}

impl Stats {
    pub fn of(values: &[f64]) -> Option<Stats> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Stats {
            n: n as u32,
            min: v[0],
            median,
            max: v[n - 1],
        })
    }
}

pub use crate::time::{rfc3339, round_us};

/// A file the record names, with its digest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FileRecord {
    /// Relative to the record folder.
    pub path: String,
    /// Empty when the file was not hashed (`note` says why).
    pub sha256: String,
    /// Size in bytes as hashed; 0 when not hashed.
    pub bytes: u64,
    /// Why the file was not hashed: it was replaced by a link or a FIFO, it was gone,
    /// or the run ended while it was being hashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputKind {
    /// A regular file, hashed.
    File,
    /// A folder, hashed as the manifest of its files.
    Dir,
    /// A symbolic link, recorded as the link (its target text and that text's
    /// sha256), never followed.
    Symlink,
    /// Nothing at the path.
    Absent,
    /// Not a regular file, folder or link (a FIFO, socket or device): not read.
    Refused,
    /// Not hashed because the run was ended while it was being hashed.
    Unhashed,
}

/// A declared output as found after the attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OutputRecord {
    /// The path as rendered (absolute, or relative to the work folder).
    pub path: String,
    /// What was found at the path.
    pub kind: OutputKind,
    /// The link's target, for a symbolic link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Why the output is refused or unhashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The sha256 of a file's bytes or of a link's target text, or a folder's manifest
    /// digest (64 lowercase hex digits); absent when absent, refused or unhashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A file's size, the summed sizes of a folder's files, or the length of a link's
    /// target text, in bytes; absent when not hashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Number of files, for a folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<u64>,
}

/// What the cache did for a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CacheStatus {
    /// Restored from an entry.
    Reused,
    /// Ran, and its outputs were stored.
    Stored,
    /// Ran, and could not be stored (`note` says why).
    #[default]
    NotStored,
    /// Ran and did not succeed.
    Failed,
}

impl CacheStatus {
    /// The word the record uses (as serde writes it).
    pub fn as_str(self) -> &'static str {
        match self {
            CacheStatus::Reused => "reused",
            CacheStatus::Stored => "stored",
            CacheStatus::NotStored => "not_stored",
            CacheStatus::Failed => "failed",
        }
    }
}

/// What the cache did for one step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepCacheRecord {
    /// What the cache did: `reused`, `stored`, `not_stored` or `failed`.
    pub status: CacheStatus,
    /// The cache key (sha256 of the pre-image stored beside the entry).
    pub key: String,
    /// The run and attempt that produced the reused entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<Box<ReusedFrom>>,
    /// How restored files were made: reflink, hardlink or copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<String>,
    /// Why it ran instead of being reused, field by field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<String>,
    /// Outputs that differ from an earlier run with the same key (after `--refresh`):
    /// "nondeterministic output".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nondeterministic: Vec<String>,
    /// Anything else worth knowing (why it could not be stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What the shared store got: "pushed to … (N blobs, B bytes)", or why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
}

/// Where a reused entry came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReusedFrom {
    /// The run that produced it.
    pub run_id: String,
    /// Its step there.
    pub step: String,
    /// Its attempt there.
    pub attempt: u32,
    /// When it was stored.
    pub created: String,
    /// The shared store it came from, when it was not in this user's cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// The name of the trusted key that signed the shared entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
    /// Who stored the shared entry (`user@host`, as its signed entry says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_by: Option<String>,
}

/// One attempt of one step.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AttemptRecord {
    /// 1-based, warm-ups first.
    pub attempt: u32,
    /// A warm-up attempt: run before the measured ones and kept out of statistics.
    pub warmup: bool,
    /// The command as run, templates rendered (a `shell` command is
    /// `/bin/sh -c <text>`).
    pub argv: Vec<String>,
    /// Working folder of the attempt, absolute (the step's `cwd`, else the plan folder).
    pub cwd: String,
    /// The attempt's environment, secret-looking values replaced by `<redacted>`.
    pub env: BTreeMap<String, String>,
    /// This attempt's `${out}`.
    pub out: String,
    /// The attempt's cgroup name, `orchestrate-<run-id>-<step>-<n>`.
    pub cgroup: String,
    /// Value of `ORCHESTRATE_ATTEMPT` in its environment, `<run-id>/<step>/<n>`: how
    /// audits find its processes.
    pub canary: String,
    /// RFC 3339 UTC (microseconds), when the attempt started.
    pub started_at: String,
    /// RFC 3339 UTC, when the attempt ended; for an attempt the orchestrator lost, the
    /// time of its last journal event.
    pub ended_at: String,
    /// Why the attempt ended.
    pub termination: Termination,
    /// What cancelled it: `fail_fast`, `run_timeout`, `interrupt` or `kill`; absent
    /// when it was not cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_reason: Option<String>,
    /// Exit code of the main process; null when it did not exit (signaled, not started).
    pub exit_code: Option<i32>,
    /// Signal that killed the main process; null when it was not killed by a signal.
    pub signal: Option<i32>,
    /// Wall time of the attempt in milliseconds, microsecond resolution; 0 when it
    /// never started or the orchestrator lost it.
    pub wall_ms: f64,
    /// User CPU time of the attempt's cgroup in milliseconds; null when not measured
    /// (e.g. isolation `none`).
    pub cpu_user_ms: Option<f64>,
    /// System CPU time of the attempt's cgroup in milliseconds; null when not measured
    /// (e.g. isolation `none`).
    pub cpu_system_ms: Option<f64>,
    /// Peak memory use of the attempt's cgroup in bytes (memory and swap under cgroup
    /// v1 with swap accounting); null when not measured.
    pub peak_memory_bytes: Option<u64>,
    /// The memory limit asked for this attempt.
    pub memory_limit_bytes: Option<u64>,
    /// OOM kills in the attempt's cgroup; null when not measured.
    pub oom_kills: Option<u64>,
    /// Whether a fork was refused at the pids limit; null when not measured.
    pub pids_limit_hit: Option<bool>,
    /// From the kill decision until the attempt was empty.
    pub kill_ms: Option<f64>,
    /// What the system enforced (limits not enforced are listed in its notes); null
    /// when the attempt never started.
    pub enforcement: Option<super::attempt::Enforcement>,
    /// The attempt's standard output log, `steps/<step>/<n>/stdout.log`, and its digest.
    pub stdout: FileRecord,
    /// The attempt's standard error log, `steps/<step>/<n>/stderr.log`, and its digest.
    pub stderr: FileRecord,
    /// What the step wrote to `$ORCHESTRATE_METRICS` (a JSON object), if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<serde_json::Value>,
    /// Why `$ORCHESTRATE_METRICS` was not taken (not a JSON object, over 1 MiB, not a
    /// regular file, ...); absent when it was read or not written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_error: Option<String>,
    /// Declared outputs of this attempt.
    pub outputs: Vec<OutputRecord>,
    /// Anything the attempt left that could not be cleaned.
    pub leftovers: Vec<String>,
    /// Why the attempt could not start (termination `not_started`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// 0 (absent) for the first try of a warm-up or repeat; k for its k-th retry
    /// (`retries`), which runs after a failed try.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retry: u32,
    /// What the step's declared results files said (JUnit cases, SARIF findings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<super::results::AttemptResults>,
    /// The batch job it ran as (`backend = "slurm"`): id, final state, node, GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<super::job::JobFacts>,
    /// Whether it ran alone: true when no other attempt or check of the run ran on
    /// its host at any moment while it did (for a Slurm job: it asked for its node
    /// alone, `--exclusive`), false when one did; absent where nobody can tell (a
    /// Slurm job that shared its node, or a record written before this was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alone: Option<bool>,
    /// The GPUs (or MIG instances) it owned, as NVML saw them while it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<super::gpu::GpuUse>,
    /// Its processes seen on GPUs it did not own (a breach of exclusivity).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_misuse: Vec<super::gpu::GpuMisuse>,
    /// The NPU cards it owned, as their vendors' tools read them while it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub npus: Vec<super::gpu::NpuUse>,
}

impl AttemptRecord {
    /// An attempt with nothing known yet (not started, no figures): what the
    /// places that make attempt records fill in.
    pub fn blank() -> AttemptRecord {
        AttemptRecord {
            attempt: 0,
            warmup: false,
            argv: Vec::new(),
            cwd: String::new(),
            env: BTreeMap::new(),
            out: String::new(),
            cgroup: String::new(),
            canary: String::new(),
            started_at: String::new(),
            ended_at: String::new(),
            termination: Termination::NotStarted,
            cancel_reason: None,
            exit_code: None,
            signal: None,
            wall_ms: 0.0,
            cpu_user_ms: None,
            cpu_system_ms: None,
            peak_memory_bytes: None,
            memory_limit_bytes: None,
            oom_kills: None,
            pids_limit_hit: None,
            kill_ms: None,
            enforcement: None,
            job: None,
            stdout: FileRecord::default(),
            stderr: FileRecord::default(),
            metrics: None,
            metrics_error: None,
            outputs: Vec::new(),
            leftovers: Vec::new(),
            error: None,
            retry: 0,
            results: None,
            alone: None,
            gpus: Vec::new(),
            gpu_misuse: Vec::new(),
            npus: Vec::new(),
        }
    }

    /// An attempt the orchestrator was lost while it ran: its end, exit and
    /// figures are unknown, its logs named but not hashed.
    pub fn lost(attempt: u32, logs: &str) -> AttemptRecord {
        let log = |name: &str| FileRecord {
            path: format!("{logs}/{name}"),
            note: Some("not hashed yet: the orchestrator was lost".into()),
            ..FileRecord::default()
        };
        AttemptRecord {
            attempt,
            termination: Termination::OrchestratorLost,
            stdout: log("stdout.log"),
            stderr: log("stderr.log"),
            error: Some(
                "the orchestrator was lost while this attempt ran: its end, exit \
                 and figures are unknown (ended_at is the orchestrator's last event)"
                    .into(),
            ),
            ..AttemptRecord::blank()
        }
    }

    pub fn succeeded(&self) -> bool {
        self.termination == Termination::Exited && self.exit_code == Some(0)
    }
}

/// A failure kept on the record.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Failure {
    /// Id of the step that failed, or whose attempt or check did.
    pub step: String,
    /// The failed attempt's number (1-based, warm-ups first); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The failed check's name; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// What failed and how, for people (e.g. `attempt 2 exited with code 1`).
    pub what: String,
}

/// The JSON Schema of `record.json`.
pub fn schema_string() -> String {
    let schema = schemars::schema_for!(Record);
    let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_median() {
        let s = Stats::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.n, s.min, s.median, s.max), (3, 1.0, 2.0, 3.0));
        let s = Stats::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert!(Stats::of(&[]).is_none());
    }
}
