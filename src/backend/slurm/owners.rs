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

/// How long one listing answers for every attempt that asks.
const FRESH: Duration = Duration::from_secs(5);

/// A job as a listing names it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Owner {
    pub name: String,
    pub user: String,
    pub comment: String,
}

/// The run's jobs as the controller and accounting listed them.
#[derive(Default)]
pub(crate) struct Listing {
    /// The controller's: this user's jobs of this run (name and user filtered
    /// there), by id, with their comments.
    pub queued: HashMap<String, String>,
    /// Accounting's: jobs named as the run is, by id.
    pub accounted: HashMap<String, Owner>,
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
        let fields = "JobID,JobName,User,Comment";
        if let Some(text) = poller.accounting_of_run(&since(run_id), fields).await {
            l.accounted = accounted(&text);
        }
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

/// `sacct -n -P -X --format=JobID,JobName,User,Comment` lines, by id (an
/// array's pending tasks, written compactly, each by its own).
fn accounted(text: &str) -> HashMap<String, Owner> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let [id, name, user, comment, ..] = f[..] else {
            continue;
        };
        let owner = Owner {
            name: name.to_string(),
            user: user.to_string(),
            comment: comment.to_string(),
        };
        for id in super::ids::expand(id.trim()).unwrap_or_default() {
            out.entry(id).or_insert_with(|| owner.clone());
        }
    }
    out
}

/// `sacct -n -P -X --format=JobID,State,ExitCode` lines of jobs that ended, by id:
/// their state and exit code, said to come from accounting.
pub(super) fn ended_states(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            let [id, state, code, ..] = f[..] else {
                return None;
            };
            (super::ids::is_job_id(id) && super::is_final_state(state)).then(|| {
                (
                    id.to_string(),
                    format!("{state} (exit code {code}, from accounting)"),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounting_s_listing_is_read_by_job_and_task() {
        let a = accounted(
            "12|r1|root|s/1\n13_0|r1|root|orchestrate-array:1-ab\n13_[1-2%2]|r1|root|orchestrate-array:1-ab\nnot an id|r1|root|x\n14|r1\n",
        );
        assert_eq!(a.len(), 4, "{a:?}");
        assert_eq!(a["12"].comment, "s/1");
        assert_eq!(a["13_2"].name, "r1");
        assert!(!a.contains_key("14"));
    }

    #[test]
    fn ended_jobs_are_said_from_accounting() {
        let e = ended_states("12|COMPLETED|0:0\n13|RUNNING|0:0\n14_2|FAILED|3:0\nx|FAILED|1:0\n");
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
