//! A scripted backend for the scheduler's tests (as hyperfine's `MockExecutor`):
//! each attempt of a step does what its script says (exit with a code after a
//! while, or run until it is cancelled or times out), with no process, cgroup or
//! cluster, so fail-fast, retries, timeouts, cancels and the DAG's order are
//! tested in milliseconds on any machine. It writes the attempt's logs, as a real
//! backend's attempt would, and keeps every call.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::watch;

use super::{
    AttemptError, AttemptJob, AttemptOutcome, AttemptSpec, Backend, BoxFuture, CancelReason, Gate,
};
use crate::contract::{cancelled, Enforcement, Enforcer, Termination};

/// What one attempt does.
#[derive(Debug, Clone, Copy)]
pub enum Act {
    /// Exit with this code after this long.
    Exit(i32, Duration),
    /// Run until cancelled or past the attempt's timeout.
    Hang,
    /// Refuse to start.
    NotStarted,
}

/// One call the scheduler made: step, attempt, when it started and ended (since
/// the backend was made).
#[derive(Debug, Clone)]
pub struct Call {
    pub step: String,
    pub attempt: u32,
    pub started: Duration,
    pub ended: Duration,
    pub termination: Termination,
}

pub struct FakeBackend {
    /// By step id: the act of attempt n is the n-th, the last one repeating.
    script: BTreeMap<String, Vec<Act>>,
    t0: std::time::Instant,
    calls: Mutex<Vec<Call>>,
}

impl Default for FakeBackend {
    fn default() -> Self {
        FakeBackend::new()
    }
}

impl FakeBackend {
    /// Every step not scripted exits 0 at once.
    pub fn new() -> FakeBackend {
        FakeBackend {
            script: BTreeMap::new(),
            t0: std::time::Instant::now(),
            calls: Mutex::new(Vec::new()),
        }
    }

    pub fn with(mut self, step: &str, acts: &[Act]) -> FakeBackend {
        self.script.insert(step.to_string(), acts.to_vec());
        self
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn act(&self, step: &str, attempt: u32) -> Act {
        let acts = self.script.get(step).map(Vec::as_slice).unwrap_or(&[]);
        let i = (attempt as usize).saturating_sub(1);
        acts.get(i)
            .or(acts.last())
            .copied()
            .unwrap_or(Act::Exit(0, Duration::ZERO))
    }

    async fn attempt(
        &self,
        spec: AttemptSpec,
        job: AttemptJob,
        mut cancel: watch::Receiver<Option<CancelReason>>,
        gate: Gate,
    ) -> Result<AttemptOutcome, AttemptError> {
        tokio::select! {
            biased;
            why = cancelled(&mut cancel) => return Err(AttemptError::CancelledBeforeStart(why)),
            g = gate => g.map_err(AttemptError::NotStarted)?,
        }
        let act = self.act(&job.step, job.attempt);
        if let Act::NotStarted = act {
            return Err(AttemptError::NotStarted("scripted not to start".into()));
        }
        let started = self.t0.elapsed();
        let started_at = Utc::now();
        for log in [&spec.stdout, &spec.stderr] {
            std::fs::write(log, format!("{} attempt {}\n", job.step, job.attempt))
                .map_err(|e| AttemptError::NotStarted(format!("{}: {e}", log.display())))?;
        }
        let run_for = match act {
            Act::Exit(_, d) => Some(d),
            _ => None,
        };
        let limit = match (run_for, spec.timeout) {
            (Some(d), Some(t)) => Some(d.min(t)),
            (d, t) => d.or(t),
        };
        let sleep = async {
            match limit {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        let (termination, exit_code, cancel_reason) = tokio::select! {
            _ = sleep => match (act, spec.timeout) {
                (Act::Exit(code, d), t) if t.is_none_or(|t| d <= t) => {
                    (Termination::Exited, Some(code), None)
                }
                _ => (Termination::TimedOut, None, None),
            },
            why = cancelled(&mut cancel) => (Termination::Cancelled, None, Some(why)),
        };
        let ended = self.t0.elapsed();
        if let Ok(mut c) = self.calls.lock() {
            c.push(Call {
                step: job.step.clone(),
                attempt: job.attempt,
                started,
                ended,
                termination,
            });
        }
        Ok(AttemptOutcome {
            termination,
            exit_code,
            signal: None,
            started_at,
            ended_at: Utc::now(),
            wall: ended.saturating_sub(started),
            cpu_user: None,
            cpu_system: None,
            peak_memory_bytes: None,
            oom_kills: None,
            pids_limit_hit: None,
            kill_duration: None,
            cancel_reason,
            enforcement: Enforcement::nothing(Enforcer::None),
            leftovers: Vec::new(),
            job: None,
            unopened_logs: Vec::new(),
            gpus: Vec::new(),
            npus: Vec::new(),
            gpu_misuse: Vec::new(),
        })
    }
}

impl Backend for FakeBackend {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn run(
        &self,
        spec: AttemptSpec,
        job: AttemptJob,
        cancel: watch::Receiver<Option<CancelReason>>,
        gate: Gate,
    ) -> BoxFuture<'_, Result<AttemptOutcome, AttemptError>> {
        Box::pin(self.attempt(spec, job, cancel, gate))
    }
}
