//! What a batch scheduler says of the job an attempt ran as, on the record and in
//! the confirmation that can come after the attempt ended.

use serde::{Deserialize, Serialize};

use super::end::Termination;

/// The job state of an attempt that ended on its own clean end record, until
/// the scheduler's word on it is read.
pub const UNCONFIRMED: &str = "unconfirmed";

/// What the scheduler says of a job once it ended: the same fields on the record's
/// `job` and in a confirmation that comes later.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobAccounting {
    /// The scheduler's final state (`COMPLETED`, `OUT_OF_MEMORY`, `TIMEOUT`, ...),
    /// which decides the outcome before the exit code does; `unconfirmed` while an
    /// attempt that ended on its own clean end record waits for the scheduler's
    /// word (read with other jobs' in a later round, at the latest at the run's end).
    pub state: String,
    /// The scheduler's exit code as it writes it (`0:125`: code, then signal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<String>,
    /// The largest exit code of the job's steps (`sacct DerivedExitCode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived_exit_code: Option<String>,
    /// The job's run time as the scheduler counted it (`sacct Elapsed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed: Option<String>,
    /// Where it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// How the scheduler's end state was read: "sacct" (accounting), "squeue" or
    /// "scontrol" (the controller, without accounting); empty while unconfirmed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub queried: String,
    /// The job's largest resident set as Slurm's accounting measured it (`sacct
    /// MaxRSS`, sampled), beside the cgroup peak in `peak_memory_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rss_bytes: Option<u64>,
}

/// What a batch scheduler says of the job an attempt ran as.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobFacts {
    /// The backend: "slurm".
    pub backend: String,
    /// The job id `sbatch --parsable` answered.
    pub job_id: String,
    /// The scheduler's word on the job: state, exit code, elapsed time, node,
    /// peak memory, and where it was read.
    #[serde(flatten)]
    pub accounting: JobAccounting,
    /// The GPUs the job was given (`SLURM_JOB_GPUS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<String>,
    /// `CUDA_VISIBLE_DEVICES` inside the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_visible_devices: Option<String>,
    /// `--gres` it asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gres: Option<String>,
    /// The job script, relative to the record folder.
    pub script: String,
    /// When Slurm had it: `sbatch` answered with its id (RFC 3339).
    pub submitted_at: String,
    /// How long it queued before it started (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<f64>,
    /// Where the outcome came from: "end record" (the job's own, written in the
    /// job), "scheduler" (its state only), or both.
    pub source: String,
    /// Why the job's own records could not be believed (a forged or contradicted
    /// end record), or why it was failed in the queue; set with termination
    /// `forged`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// What else happened to the job: a duplicate submission cancelled, Slurm's
    /// pending reasons, a controller that did not answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The job's own files in the record (`job.sh`, `job-start.json`,
    /// `job-end.json`) and their digests, which `verify` checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<JobFile>,
}

/// One file of a job, hashed with its attempt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobFile {
    /// Relative to the record folder.
    pub path: String,
    /// sha256 of its bytes.
    pub sha256: String,
    /// Its size.
    pub bytes: u64,
}

/// The scheduler's word on a job whose attempt ended on its clean end record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Confirmation {
    pub step: String,
    pub attempt: u32,
    pub job_id: String,
    #[serde(flatten)]
    pub accounting: JobAccounting,
    /// Why the controller was asked although accounting is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queried_why: Option<String>,
    /// The scheduler ended the job otherwise than its command did (it exited 0):
    /// how the attempt ends then, the scheduler's state first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination: Option<Termination>,
    /// Why, in words, when the scheduler's word overturns the end record's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// A scheduler's exit code as Slurm writes it (`3:0`, `0:9`): the code, and the
/// signal when it is not 0.
pub fn exit_code_parts(s: &str) -> (Option<i32>, Option<i32>) {
    let mut it = s.trim().splitn(2, ':');
    let code = it.next().and_then(|c| c.parse().ok());
    let sig = it
        .next()
        .and_then(|c| c.parse().ok())
        .filter(|&s: &i32| s != 0);
    (code, sig)
}

impl Confirmation {
    /// The exit code in the scheduler's `ExitCode` (`3:0` is 3).
    pub fn exit_code_number(&self) -> Option<i32> {
        self.accounting
            .exit_code
            .as_deref()
            .and_then(|e| exit_code_parts(e).0)
    }

    /// Why the attempt failed after all, in words.
    pub fn disagreement(&self) -> Option<String> {
        self.termination.map(|_| {
            self.why.clone().unwrap_or_else(|| {
                format!(
                    "Slurm ended job {} ({}/{}) as {} (exit code {}) after its end record said its command exited 0",
                    self.job_id,
                    self.step,
                    self.attempt,
                    self.accounting.state,
                    self.accounting.exit_code.as_deref().unwrap_or("unknown")
                )
            })
        })
    }
}
