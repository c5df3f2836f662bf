//! The Slurm backend on the [`Backend`] trait: what a step asks of the cluster, the
//! controller's word on ended jobs, the release audit, and `resume`'s strays and
//! reattached jobs.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::watch;

use super::{Slurm, SlurmRequest};
use crate::backend::{
    AttemptError, AttemptJob, AttemptOutcome, AttemptSpec, Backend, BackendAudit, BoxFuture,
    CancelReason, Confirmation, Gate, Placement, Reattach, StepAsk, Stray,
};
use crate::contract::Termination;

impl Backend for Slurm {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn place(&self, ask: &StepAsk<'_>) -> Option<Placement> {
        Some(Placement::new(
            crate::plan::model::BackendKind::Slurm,
            request(ask),
        ))
    }

    fn run(
        &self,
        spec: AttemptSpec,
        job: AttemptJob,
        cancel: watch::Receiver<Option<CancelReason>>,
        gate: Gate,
    ) -> BoxFuture<'_, Result<AttemptOutcome, AttemptError>> {
        Box::pin(self.run_job(spec, job, cancel, gate))
    }

    fn confirm(&self, limit: Duration) -> BoxFuture<'_, Vec<Confirmation>> {
        Box::pin(Slurm::confirm(self, limit))
    }

    fn expect(&self, job_id: &str, step: &str, attempt: u32) {
        Slurm::expect(self, job_id, step, attempt);
    }

    fn release_audit(&self, hard: Option<std::time::Instant>) -> BoxFuture<'_, BackendAudit> {
        Box::pin(audit(self, hard))
    }

    fn jobs_now(&self) -> BoxFuture<'_, Option<std::collections::BTreeMap<String, String>>> {
        Box::pin(async move {
            let mut now: std::collections::BTreeMap<String, String> = self
                .poller
                .queue(true)
                .await?
                .into_iter()
                .map(|q| {
                    let said = match &q.reason {
                        Some(r) => format!("{} ({r})", q.state),
                        None => q.state.to_string(),
                    };
                    (q.id, said)
                })
                .collect();
            // Jobs the controller forgot (ended over MinJobAge ago): accounting's
            // word, said as such.
            let since = super::owners::since(&self.run_id);
            if let Some(acct) = self.poller.accounting_of_run(&since).await {
                for (id, said) in super::owners::ended_states(&acct) {
                    now.entry(id).or_insert(said);
                }
            }
            Some(now)
        })
    }

    fn strays<'a>(&'a self, known: &'a BTreeSet<String>) -> BoxFuture<'a, Option<Vec<Stray>>> {
        Box::pin(async move {
            Some(
                self.attempt_jobs()
                    .await?
                    .into_iter()
                    .filter(|(id, _, _, state)| {
                        !known.contains(id) && !super::is_final_state(state)
                    })
                    .map(|(job_id, step, attempt, _)| Stray {
                        job_id,
                        step,
                        attempt,
                    })
                    .collect(),
            )
        })
    }

    fn cancel_jobs<'a>(&'a self, ids: &'a [String], wait: Duration) -> BoxFuture<'a, bool> {
        Box::pin(self.cancel_and_wait(ids, wait))
    }

    fn end_now(&self, run_id: &str) {
        super::poll::cancel_run_now(run_id);
    }

    fn reattach(
        &self,
        spec: AttemptSpec,
        job: AttemptJob,
        found: Reattach,
    ) -> BoxFuture<'_, AttemptOutcome> {
        Box::pin(async move {
            match self.owns(&found.job_id, &job, found.array.as_deref()).await {
                Ok(()) => Slurm::reattach(self, spec, job, found).await,
                // The job the journal names is not this attempt's: never trusted.
                Err(why) => crate::backend::unwaited(
                    &found,
                    "slurm",
                    crate::contract::Enforcer::Slurm,
                    Termination::Forged,
                    format!("the journal names a job that is not this attempt's: {why}"),
                ),
            }
        })
    }
}

/// What a Slurm job for a step asks for: the plan's options under the step's, and
/// `--gres` from its devices (a device kind's GRES name from `[backend] gres`).
fn request(ask: &StepAsk<'_>) -> SlurmRequest {
    let options = ask.job.over(&ask.settings.slurm);
    let from_devices: Vec<String> = ask
        .devices
        .iter()
        .filter_map(|(kind, count)| {
            let name = ask
                .settings
                .gres
                .get(kind)
                .cloned()
                .unwrap_or_else(|| kind.clone());
            // An empty name: a kind the cluster does not offer, simulated.
            (!name.is_empty()).then(|| format!("{name}:{count}"))
        })
        .collect();
    let gres = options
        .gres
        .clone()
        .or_else(|| (!from_devices.is_empty()).then(|| from_devices.join(",")));
    SlurmRequest {
        options,
        sbatch_args: ask.settings.sbatch_args.clone(),
        gres,
        exclusive: ask.exclusive,
    }
}

/// No job of the run may be queued or running at its end (`squeue --name`); jobs
/// left by an interrupted run are cancelled first, all at once.
///
/// They get 30 s to leave the queue (Slurm's KillWait, then its epilog), or until
/// `hard` when the run had to end at once, and no longer than the next interrupt: the
/// watchdog ends the run 5 s after a second one, and the record must be written by
/// then. The cancel is sent whatever the time. Jobs still there are the audit's
/// leftovers.
async fn audit(s: &Slurm, hard: Option<std::time::Instant>) -> BackendAudit {
    let run_id = &s.run_id;
    let mut audit = BackendAudit::default();
    use tokio::signal::unix::{signal, SignalKind};
    let mut left = s.still_there().await;
    if left.as_ref().is_some_and(|l| !l.is_empty()) {
        s.cancel_all(hard.is_some()).await;
        const ROUND: Duration = Duration::from_millis(500);
        let until = hard.unwrap_or_else(|| std::time::Instant::now() + Duration::from_secs(30));
        let (mut int, mut term) = (
            signal(SignalKind::interrupt()).ok(),
            signal(SignalKind::terminate()).ok(),
        );
        let signalled = async {
            match (int.as_mut(), term.as_mut()) {
                (Some(i), Some(t)) => {
                    tokio::select! {
                        _ = i.recv() => {}
                        _ = t.recv() => {}
                    }
                }
                _ => std::future::pending::<()>().await,
            }
        };
        tokio::pin!(signalled);
        // The last look is at `until` itself: the whole budget is used.
        loop {
            let wait = until.saturating_duration_since(std::time::Instant::now());
            if wait.is_zero() {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(wait.min(ROUND)) => {}
                _ = &mut signalled => break,
            }
            left = s.still_there().await;
            if left.as_ref().is_some_and(|l| l.is_empty()) {
                break;
            }
        }
    }
    let refused = match s.refusals() {
        0 => String::new(),
        n => format!(" ({n} refused for a submit limit, waited out and tried again)"),
    };
    audit.checked.push(format!(
        "slurm jobs named {run_id} (squeue --name): {} submitted{refused}, {} queries to the controller and accounting",
        s.submits(),
        s.queries()
    ));
    if left.as_ref().is_some_and(|l| l.is_empty()) {
        s.settle_late_logs();
    }
    match left {
        Some(l) => audit
            .leftovers
            .extend(l.into_iter().map(|j| format!("slurm job {j}"))),
        None => audit
            .leftovers
            .push("slurm: squeue did not answer; the run's jobs are unknown".into()),
    }
    audit
}
