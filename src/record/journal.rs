//! The journal's lines: what happened during a run, one event per line, in order.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::run::{AttemptRecord, CheckRecord, StepStatus};

/// One journal line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JournalLine {
    /// 1-based sequence number.
    pub seq: u64,
    pub time: DateTime<Utc>,
    #[serde(flatten)]
    pub event: Event,
}

/// What happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        run_id: String,
        /// Everything known before the first step (plan, host, pins, isolation...):
        /// the record's `run` header.
        header: Box<super::run::RunHeader>,
    },
    StepStarted {
        step: String,
    },
    DevicesGranted {
        step: String,
        allocations: Vec<super::contract::Allocation>,
    },
    DevicesReleased {
        step: String,
        allocations: Vec<super::contract::Allocation>,
    },
    /// What the cache did for a `cache = true` step: reused an entry (then `outputs`
    /// are the restored outputs), or ran it and stored (or could not store) the result.
    StepCache {
        step: String,
        cache: super::run::StepCacheRecord,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        outputs: Vec<super::run::OutputRecord>,
    },
    AttemptStarted {
        step: String,
        attempt: u32,
        warmup: bool,
        cgroup: String,
        canary: String,
        argv: Vec<String>,
        cwd: String,
        out: String,
        /// The attempt's logs, relative to the record folder (journals written before
        /// this field use `steps/<step>/<attempt>/`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        logs: Option<String>,
    },
    /// A batch job was submitted for an attempt (before anything waits on it): what
    /// `resume` and `recover` find the run's jobs by.
    JobSubmitted {
        step: String,
        attempt: u32,
        backend: String,
        job_id: String,
        /// What `resume` needs to finish the attempt without the plan's context.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume: Option<Box<ResumeInfo>>,
    },
    AttemptEnded {
        step: String,
        attempt: Box<AttemptRecord>,
    },
    /// Slurm's word on a job whose attempt ended on its own clean end record (read
    /// later, with other jobs'): the attempt's `job` gets it, and a job Slurm ended
    /// otherwise fails the attempt and its step after all.
    JobConfirmed {
        confirmation: Box<super::job::Confirmation>,
    },
    CheckEnded {
        step: String,
        check: Box<CheckRecord>,
    },
    StepEnded {
        step: String,
        status: StepStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Declared outputs of the step's last measured attempt, rendered.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        outputs: Vec<String>,
    },
    Warning {
        message: String,
    },
    /// `run --detach` returned with every job it could submit submitted: `resume`
    /// runs this command again, in this folder, to collect the run.
    RunDetached {
        command: Vec<String>,
        cwd: String,
        /// Jobs submitted.
        jobs: usize,
    },
    RunEnded {
        status: super::run::RunStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Facts only known at the end (release audit, ...).
        #[serde(default)]
        footer: super::contract::RunFooter,
    },
}

impl Event {
    /// The run's header, from a `RunStarted` event; `None` for any other event.
    pub fn run_header(&self) -> Option<&super::run::RunHeader> {
        match self {
            Event::RunStarted { header, .. } => Some(header),
            _ => None,
        }
    }
}

/// What an attempt left in flight needs to be finished by `orchestrate resume`:
/// where its files are, and what its record says of how it was run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResumeInfo {
    pub stdout: String,
    pub stderr: String,
    pub metrics: String,
    /// Declared outputs, rendered and absolute.
    pub outputs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub junit: Option<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sarif: Option<(String, String)>,
    /// The attempt's environment as its record shows it (secrets redacted).
    pub env: std::collections::BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    pub retry: u32,
    /// The job's `--gres`, and its script relative to the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gres: Option<String>,
    pub script: String,
    /// The work-folder file the job reads its command from.
    pub private: String,
    /// The script of the array the job is a task of, relative to the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<String>,
}
