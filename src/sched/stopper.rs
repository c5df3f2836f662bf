//! Why a run stops, and how hard: signals, the run timeout, fail-fast and a journal
//! that cannot be written each set a cancel reason that running attempts see. Reasons
//! are ordered (`FailFast < RunTimeout < Interrupt < Kill`), so a stronger one replaces
//! a weaker one and a second Ctrl-C escalates to an immediate kill. Once the run must
//! end at once (run timeout, second signal), steps that still have not ended after a
//! bound are abandoned.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::evidence::record::{RunStatus, StepStatus};
use crate::isolate::CancelReason;

/// A signal the run got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Interrupt,
    Terminate,
}

/// Beyond the grace: the attempt kill bound (5 s), the log copy bound (2 s) and the
/// give-up time of a hashing thread, with room to spare.
pub const ABANDON_MARGIN: Duration = Duration::from_secs(15);

/// Once the run must end at once, how long its end (the backends' word on their
/// jobs, the release audit) may take before the record is written: well inside the
/// watchdog's 5 s after a second interrupt, on a slow host too.
pub const END_AT_ONCE_WITHIN: Duration = Duration::from_secs(3);

#[derive(Debug)]
pub(crate) struct Stopper {
    tx: watch::Sender<Option<CancelReason>>,
    /// The first reason to start nothing new, as the record says it.
    why: Option<String>,
    interrupted: bool,
    signals: u32,
    timed_out: bool,
    journal_failed: bool,
    abandon_at: Option<Instant>,
    /// When the second signal came.
    second_signal: Option<Instant>,
}

impl Stopper {
    pub(crate) fn new() -> (Stopper, watch::Receiver<Option<CancelReason>>) {
        let (tx, rx) = watch::channel(None);
        (
            Stopper {
                tx,
                why: None,
                interrupted: false,
                signals: 0,
                timed_out: false,
                journal_failed: false,
                abandon_at: None,
                second_signal: None,
            },
            rx,
        )
    }

    /// Whether the run starts nothing new.
    pub(crate) fn stopping(&self) -> bool {
        self.why.is_some()
    }

    /// When steps still running are to be abandoned, once the run must end at once.
    pub(crate) fn abandon_at(&self) -> Option<Instant> {
        self.abandon_at
    }

    /// When the run's end must be done by, once it must end at once: counted from
    /// the second signal (the watchdog counts from there too), else from `now`.
    pub(crate) fn leave_by(&self, now: Instant) -> Option<Instant> {
        self.abandon_at?;
        Some(self.second_signal.unwrap_or(now) + END_AT_ONCE_WITHIN)
    }

    /// The cancel reason attempts see now.
    #[cfg(test)]
    pub(crate) fn reason(&self) -> Option<CancelReason> {
        *self.tx.borrow()
    }

    fn escalate(&self, r: CancelReason) {
        self.tx.send_if_modified(|cur| {
            if cur.is_none_or(|c| r > c) {
                *cur = Some(r);
                true
            } else {
                false
            }
        });
    }

    fn stop(&mut self, why: impl FnOnce() -> String) {
        if self.why.is_none() {
            self.why = Some(why());
        }
    }

    /// A signal arrived; returns what to tell the user.
    pub(crate) fn signal(&mut self, s: Signal, now: Instant) -> &'static str {
        self.signals += 1;
        self.interrupted = true;
        self.stop(|| match s {
            Signal::Interrupt => "interrupted".into(),
            Signal::Terminate => "terminated (SIGTERM)".into(),
        });
        if self.signals > 1 {
            self.escalate(CancelReason::Kill);
            self.abandon_at.get_or_insert(now + ABANDON_MARGIN);
            self.second_signal.get_or_insert(now);
            "second interrupt: killing every attempt now"
        } else {
            self.escalate(CancelReason::Interrupt);
            "interrupt: ending running attempts (press Ctrl-C again to kill at once)"
        }
    }

    /// The whole run hit its timeout `after`; attempts get `grace` to end.
    pub(crate) fn run_timeout(&mut self, after: Duration, grace: Duration, now: Instant) {
        self.timed_out = true;
        self.stop(|| {
            format!(
                "the run timed out after {}",
                crate::units::human_duration(after)
            )
        });
        self.escalate(CancelReason::RunTimeout);
        self.abandon_at.get_or_insert(now + grace + ABANDON_MARGIN);
    }

    /// A step ended `status`: without `keep_going`, anything but success (and a
    /// cancel, which has its own reason) stops the run.
    pub(crate) fn step_ended(&mut self, step: &str, status: StepStatus, keep_going: bool) {
        let failed = !matches!(
            status,
            StepStatus::Succeeded | StepStatus::Cancelled | StepStatus::Skipped
        );
        if failed && !keep_going && !self.stopping() {
            self.stop(|| format!("fail-fast: step `{step}` {}", super::dag::past(status)));
            self.escalate(CancelReason::FailFast);
        }
    }

    /// The journal could not be written: end the run (it cannot keep evidence).
    pub(crate) fn journal_failed(&mut self) {
        self.journal_failed = true;
        if !self.stopping() {
            self.stop(|| "the journal could not be written".into());
            self.escalate(CancelReason::Interrupt);
        }
    }

    /// Why steps that never started did not ("not started: ...").
    pub(crate) fn why_not_started(&self) -> &str {
        self.why.as_deref().unwrap_or("not reached")
    }

    /// The run's status and reason, given how its steps ended.
    pub(crate) fn outcome(&self, steps: &[(&str, StepStatus)]) -> (RunStatus, Option<String>) {
        if self.interrupted {
            return (RunStatus::Interrupted, self.why.clone());
        }
        if !self.timed_out && steps.iter().all(|(_, s)| *s == StepStatus::Succeeded) {
            return (RunStatus::Succeeded, None);
        }
        if self.timed_out {
            return (RunStatus::Failed, self.why.clone());
        }
        let failed: Vec<&str> = steps
            .iter()
            .filter(|(_, s)| *s == StepStatus::Failed)
            .map(|(id, _)| *id)
            .collect();
        let reason = if failed.is_empty() {
            "not every step succeeded".to_string()
        } else {
            format!("failed steps: {}", failed.join(", "))
        };
        (RunStatus::Failed, Some(reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_signal_escalates_to_kill_and_sets_the_abandon_bound() {
        let (mut s, rx) = Stopper::new();
        let t = Instant::now();
        assert!(!s.stopping());
        s.signal(Signal::Interrupt, t);
        assert_eq!(*rx.borrow(), Some(CancelReason::Interrupt));
        assert_eq!(
            s.abandon_at(),
            None,
            "a first Ctrl-C ends attempts gracefully"
        );
        assert_eq!(s.leave_by(t), None, "nothing is hurried after one Ctrl-C");
        s.signal(Signal::Terminate, t);
        assert_eq!(s.reason(), Some(CancelReason::Kill));
        assert_eq!(s.abandon_at(), Some(t + ABANDON_MARGIN));
        let later = t + Duration::from_secs(2);
        assert_eq!(
            s.leave_by(later),
            Some(t + END_AT_ONCE_WITHIN),
            "the run's end is counted from the second signal, as the watchdog counts"
        );
        assert_eq!(s.why_not_started(), "interrupted", "the first reason stays");
        assert_eq!(
            s.outcome(&[("a", StepStatus::Succeeded)]).0,
            RunStatus::Interrupted
        );
    }

    #[test]
    fn a_weaker_reason_never_replaces_a_stronger_one() {
        let (mut s, _rx) = Stopper::new();
        let t = Instant::now();
        s.run_timeout(Duration::from_secs(60), Duration::from_secs(2), t);
        assert_eq!(s.reason(), Some(CancelReason::RunTimeout));
        s.step_ended("a", StepStatus::Failed, false);
        assert_eq!(s.reason(), Some(CancelReason::RunTimeout));
        assert_eq!(s.why_not_started(), "the run timed out after 60.00 s");
        let (status, why) = s.outcome(&[("a", StepStatus::Failed)]);
        assert_eq!(status, RunStatus::Failed);
        assert_eq!(why.as_deref(), Some("the run timed out after 60.00 s"));
    }

    #[test]
    fn fail_fast_unless_keep_going_and_never_for_a_cancel() {
        let (mut s, _rx) = Stopper::new();
        s.step_ended("a", StepStatus::Cancelled, false);
        assert!(!s.stopping());
        s.step_ended("a", StepStatus::Failed, true);
        assert!(!s.stopping(), "keep-going");
        s.step_ended("b", StepStatus::Failed, false);
        assert_eq!(s.reason(), Some(CancelReason::FailFast));
        assert_eq!(s.why_not_started(), "fail-fast: step `b` failed");
        let (status, why) = s.outcome(&[("a", StepStatus::Failed), ("b", StepStatus::Failed)]);
        assert_eq!(status, RunStatus::Failed);
        assert_eq!(why.as_deref(), Some("failed steps: a, b"));
        let (ok, _rx) = Stopper::new();
        assert_eq!(
            ok.outcome(&[("a", StepStatus::Succeeded)]),
            (RunStatus::Succeeded, None)
        );
    }
}
