use super::*;
use std::time::Instant;
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct IsolateError(pub String);
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct IsolationInfo {
    pub mode: String,
}
pub struct Isolator {
    warnings: Vec<String>,
}
impl Isolator {
    pub fn new(_mode: Mode) -> Result<Isolator, IsolateError> {
        Ok(Isolator { warnings: vec![] })
    }
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
    pub fn describe(&self) -> IsolationInfo {
        IsolationInfo {
            mode: "none".into(),
        }
    }
    pub fn sweep(&self, _s: &dyn Fn(&str) -> bool) -> Vec<String> {
        vec![]
    }
    pub fn list(&self) -> Vec<String> {
        vec![]
    }
    pub async fn run(
        &self,
        spec: AttemptSpec,
        mut cancel: tokio::sync::watch::Receiver<Option<CancelReason>>,
    ) -> Result<AttemptOutcome, IsolateError> {
        let start = Instant::now();
        let started_at = chrono::Utc::now();
        let out = std::fs::File::create(&spec.stdout).map_err(|e| IsolateError(e.to_string()))?;
        let err = std::fs::File::create(&spec.stderr).map_err(|e| IsolateError(e.to_string()))?;
        let mut cmd = tokio::process::Command::new(&spec.argv[0]);
        cmd.args(&spec.argv[1..])
            .current_dir(&spec.cwd)
            .env_clear()
            .envs(spec.env.iter().map(|(a, b)| (a, b)))
            .env("ORCHESTRATE_ATTEMPT", &spec.canary)
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let mut child = cmd.spawn().map_err(|e| IsolateError(e.to_string()))?;
        let mut term = Termination::Exited;
        let mut reason = None;
        let timeout = spec
            .timeout
            .unwrap_or(std::time::Duration::from_secs(1 << 30));
        let status = tokio::select! {
            s = child.wait() => s,
            _ = tokio::time::sleep(timeout) => { term = Termination::TimedOut; let _ = child.start_kill(); child.wait().await }
            r = async { loop { let c = *cancel.borrow(); if c.is_some() { break c; } if cancel.changed().await.is_err() { std::future::pending::<()>().await } } } => { term = Termination::Cancelled; reason = r; let _ = child.start_kill(); child.wait().await }
        }.map_err(|e| IsolateError(e.to_string()))?;
        use std::os::unix::process::ExitStatusExt;
        if term == Termination::Exited && status.signal().is_some() {
            term = Termination::Signaled;
        }
        Ok(AttemptOutcome {
            termination: term,
            exit_code: status.code(),
            signal: status.signal(),
            started_at,
            ended_at: chrono::Utc::now(),
            wall: start.elapsed(),
            cpu_user: None,
            cpu_system: None,
            peak_memory_bytes: None,
            oom_kills: None,
            pids_limit_hit: None,
            kill_duration: None,
            cancel_reason: reason,
            enforcement: Enforcement {
                mode: "none".into(),
                cgroup_version: None,
                memory: false,
                swap_off: false,
                pids: false,
                cpus: false,
                devices: false,
                notes: vec![],
            },
            leftovers: vec![],
        })
    }
}
pub fn processes_with_canary(_p: &dyn Fn(&str) -> bool) -> Vec<(i32, String)> {
    vec![]
}
pub fn init_subreaper() -> Result<(), IsolateError> {
    Ok(())
}
