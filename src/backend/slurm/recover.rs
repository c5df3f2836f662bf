//! A dead run's jobs, for `recover`: found on the controller (this user's, named
//! for the run, commented as one of its attempts), cancelled, waited for, and
//! their logs settled.

use crate::backend::DeadRunJobs;
use std::path::PathBuf;

use super::{current_user, is_attempt_comment, settle_logs};

/// Cancel what the dead run `run_id` left queued or running, wait for it to go,
/// and settle `logs` its jobs may still have been writing.
pub fn end_jobs_of_dead_run(run_id: &str, logs: &[PathBuf]) -> DeadRunJobs {
    let ids = match slurm_jobs_of(run_id) {
        Some(ids) if ids.is_empty() => return DeadRunJobs::None,
        Some(ids) => ids,
        None => return DeadRunJobs::Unknown,
    };
    match std::process::Command::new("scancel")
        .arg(format!("--user={}", current_user()))
        .args(&ids)
        .output()
    {
        Ok(o) if o.status.success() => {
            let gone = wait_jobs_gone(run_id, std::time::Duration::from_secs(60));
            settle_logs(
                logs,
                std::time::Duration::from_millis(1500),
                std::time::Duration::from_secs(15),
            );
            DeadRunJobs::Cancelled { gone }
        }
        Ok(o) => DeadRunJobs::Failed(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Err(e) => DeadRunJobs::Failed(e.to_string()),
    }
}

/// This user's jobs named for `run_id` and commented as one of its attempts that
/// squeue lists as queued or running; `None` when there is no squeue or it did not
/// answer.
fn slurm_jobs_of(run_id: &str) -> Option<Vec<String>> {
    let o = std::process::Command::new("squeue")
        .args([
            "-h",
            &format!("--name={run_id}"),
            &format!("--user={}", current_user()),
            "-o",
            "%i|%k",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.split_once('|'))
            .filter(|(id, c)| !id.trim().is_empty() && is_attempt_comment(c.trim()))
            .map(|(id, _)| id.trim().to_string())
            .collect(),
    )
}

/// Wait until squeue lists none of this user's jobs of `run_id`; whether it got
/// there.
fn wait_jobs_gone(run_id: &str, limit: std::time::Duration) -> bool {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < limit {
        match slurm_jobs_of(run_id) {
            Some(ids) if ids.is_empty() => return true,
            _ => std::thread::sleep(std::time::Duration::from_millis(300)),
        }
    }
    false
}
