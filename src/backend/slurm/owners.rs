//! Whose the jobs a resumed run's journal names are: one listing of the run's
//! jobs from the controller (`squeue --states=all`) and one from accounting
//! (`sacct --name=<run>`), shared by every attempt that reattaches, instead of a
//! query or two per job: the attempts of a sweep reattaching together ask once.
//! A job in neither listing is asked about on its own,
//! so what is said of a stranger's job stays as exact as before.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::poll::Poller;
use super::state::Acct;

/// How long one listing answers for every attempt that asks.
const FRESH: Duration = Duration::from_secs(5);

/// The run's jobs as the controller and accounting listed them.
#[derive(Default)]
pub(crate) struct Listing {
    /// The controller's: this user's jobs of this run (name and user filtered
    /// there), by id, with their comments.
    pub queued: HashMap<String, String>,
    /// Accounting's: jobs named as the run is, by id.
    pub accounted: HashMap<String, Acct>,
}

#[derive(Default)]
pub(crate) struct Owners {
    last: tokio::sync::Mutex<Option<(Instant, Arc<Listing>)>>,
}

impl Owners {
    /// The run's listing, at most [`FRESH`] old: the first caller asks, those
    /// who come meanwhile wait for its answer.
    pub(crate) async fn listing(&self, poller: &Poller, run_id: &str) -> Arc<Listing> {
        let mut last = self.last.lock().await;
        if let Some((at, l)) = last.as_ref() {
            if at.elapsed() < FRESH {
                return Arc::clone(l);
            }
        }
        let mut l = Listing::default();
        for q in poller.queue(true).await.unwrap_or_default() {
            l.queued.insert(q.id, q.comment);
        }
        l.accounted = poller
            .accounting_of_run(&since(run_id))
            .await
            .unwrap_or_default();
        let l = Arc::new(l);
        *last = Some((Instant::now(), Arc::clone(&l)));
        l
    }
}

/// Where accounting's listing starts: a day before the run's id says it began
/// (the controller writes its local time; a day covers any zone), else a week
/// back. sacct without `--starttime` lists today's jobs only.
pub(super) fn since(run_id: &str) -> String {
    run_id
        .get(..16)
        .and_then(|t| chrono::NaiveDateTime::parse_from_str(t, "%Y%m%dT%H%M%SZ").ok())
        .map(|t| {
            (t - chrono::Duration::days(1))
                .format("%Y-%m-%dT%H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|| "now-7days".to_string())
}

/// Accounting's jobs that ended, by id: their state and exit code, said to come
/// from accounting.
pub(super) fn ended_states(
    accounted: &HashMap<String, Acct>,
) -> std::collections::BTreeMap<String, String> {
    accounted
        .iter()
        .filter(|(_, a)| super::is_final_state(&a.state))
        .map(|(id, a)| {
            let said = format!("{} (exit code {}, from accounting)", a.state, a.exit_code);
            (id.clone(), said)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::slurm::state::sacct_jobs;

    /// sacct -X lines as `SACCT_FORMAT` asks for them.
    fn line(id: &str, state: &str, code: &str, comment: &str) -> String {
        format!("{id}|{state}|{code}|0:0||00:00:01|localhost|None|root|r1|{comment}|Unknown|1\n")
    }

    #[test]
    fn accounting_s_listing_is_read_by_job_and_task() {
        let text = line("12", "COMPLETED", "0:0", "s/1")
            + &line("13_0", "COMPLETED", "0:0", "orchestrate-array:1-ab")
            + &line("13_[1-2%2]", "PENDING", "0:0", "orchestrate-array:1-ab")
            + &line("not an id", "COMPLETED", "0:0", "x")
            + "14|COMPLETED\n";
        let a = sacct_jobs(&text);
        assert_eq!(a.len(), 5, "{a:?}");
        assert_eq!(a["12"].comment, "s/1");
        assert_eq!(a["13_2"].name, "r1");
        // A truncated line names nobody: no run's job by its name.
        assert_eq!(a["14"].name, "");
    }

    #[test]
    fn ended_jobs_are_said_from_accounting() {
        let text = line("12", "COMPLETED", "0:0", "s/1")
            + &line("13", "RUNNING", "0:0", "s/2")
            + &line("14_2", "FAILED", "3:0", "orchestrate-array:1-ab")
            + &line("x", "FAILED", "1:0", "s/3");
        let e: Vec<(String, String)> = ended_states(&sacct_jobs(&text)).into_iter().collect();
        assert_eq!(
            e,
            [
                (
                    "12".to_string(),
                    "COMPLETED (exit code 0:0, from accounting)".to_string()
                ),
                (
                    "14_2".to_string(),
                    "FAILED (exit code 3:0, from accounting)".to_string()
                ),
            ]
        );
    }

    #[test]
    fn the_listing_starts_a_day_before_the_run() {
        assert_eq!(since("20261206T210738Z-db9458"), "2026-12-05T21:07:38");
        assert_eq!(since("odd"), "now-7days");
    }
}
