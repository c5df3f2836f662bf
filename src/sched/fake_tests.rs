//! The scheduler against a scripted backend: no process, cgroup or cluster, so
//! these run on any machine in milliseconds and say exactly what the scheduler
//! decided (which attempts it asked for, in what order, and what it cancelled).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::tests::{options, plan, step};
use super::*;
use crate::backend::fake::{Act, FakeBackend};
use crate::evidence::journal::{self, Event, Journal};
use crate::evidence::record::{AttemptRecord, RunStatus, StepStatus};
use crate::plan::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

struct Ran {
    out: DagOutcome,
    attempts: Vec<(String, AttemptRecord)>,
    status: BTreeMap<String, StepStatus>,
}

async fn run(dir: &Path, p: Plan, keep_going: bool, fake: Arc<FakeBackend>) -> Ran {
    run_with(dir, p, keep_going, fake, None).await
}

async fn run_with(
    dir: &Path,
    p: Plan,
    keep_going: bool,
    fake: Arc<FakeBackend>,
    run_timeout: Option<Duration>,
) -> Ran {
    let opts = SchedOptions {
        run_timeout,
        ..options(dir, keep_going)
    };
    std::fs::create_dir_all(dir.join("rec")).unwrap();
    let mut j = Journal::create(&dir.join("rec/journal.jsonl")).unwrap();
    let dag = DagRun {
        plan: Arc::new(p),
        opts,
        backend: fake,
        base_env: vec![],
        devices: None,
        checks: None,
    };
    let out = run_dag(dag, &mut j).await.unwrap();
    drop(j);
    let (lines, _) = journal::read(&dir.join("rec/journal.jsonl")).unwrap();
    let attempts = lines
        .into_iter()
        .filter_map(|l| match l.event {
            Event::AttemptEnded { step, attempt } => Some((step, *attempt)),
            _ => None,
        })
        .collect();
    let status = out
        .steps
        .iter()
        .map(|(id, s, _)| (id.clone(), *s))
        .collect();
    Ran {
        out,
        attempts,
        status,
    }
}

fn tries(r: &Ran, id: &str) -> usize {
    r.attempts.iter().filter(|(s, _)| s == id).count()
}

#[tokio::test]
async fn fail_fast_cancels_the_running_and_skips_the_dependent() {
    let t = tempfile::tempdir().unwrap();
    let fake = Arc::new(
        FakeBackend::new()
            .with("bad", &[Act::Exit(3, ms(20))])
            .with("slow", &[Act::Hang]),
    );
    let p = plan(
        t.path(),
        vec![
            step("bad", &[], "x"),
            step("slow", &[], "x"),
            step("after", &["bad"], "x"),
        ],
    );
    let r = run(t.path(), p, false, Arc::clone(&fake)).await;
    assert_eq!(r.out.status, RunStatus::Failed);
    assert_eq!(r.status["bad"], StepStatus::Failed);
    assert_eq!(r.status["slow"], StepStatus::Cancelled);
    assert_eq!(r.status["after"], StepStatus::Skipped);
    let slow = &r.attempts.iter().find(|(s, _)| s == "slow").unwrap().1;
    assert_eq!(slow.cancel_reason.as_deref(), Some("fail_fast"));
    // `after` was never asked for.
    assert!(fake.calls().iter().all(|c| c.step != "after"));
}

#[tokio::test]
async fn keep_going_runs_what_does_not_depend_on_the_failure() {
    let t = tempfile::tempdir().unwrap();
    let fake = Arc::new(
        FakeBackend::new()
            .with("bad", &[Act::Exit(1, ms(5))])
            .with("other", &[Act::Exit(0, ms(40))]),
    );
    let p = plan(
        t.path(),
        vec![
            step("bad", &[], "x"),
            step("other", &[], "x"),
            step("after_bad", &["bad"], "x"),
            step("after_other", &["other"], "x"),
        ],
    );
    let r = run(t.path(), p, true, fake).await;
    assert_eq!(r.out.status, RunStatus::Failed);
    assert_eq!(r.status["other"], StepStatus::Succeeded);
    assert_eq!(r.status["after_other"], StepStatus::Succeeded);
    assert_eq!(r.status["after_bad"], StepStatus::Skipped);
}

#[tokio::test]
async fn retries_try_again_until_one_succeeds_and_no_further() {
    let t = tempfile::tempdir().unwrap();
    let fake = Arc::new(
        FakeBackend::new()
            .with(
                "flaky",
                &[
                    Act::Exit(1, ms(1)),
                    Act::Exit(1, ms(1)),
                    Act::Exit(0, ms(1)),
                ],
            )
            .with("broken", &[Act::Exit(1, ms(1))])
            .with("narrow", &[Act::Exit(1, ms(1))]),
    );
    let mut flaky = step("flaky", &[], "x");
    flaky.retries = 3;
    let mut broken = step("broken", &[], "x");
    broken.retries = 2;
    let mut narrow = step("narrow", &[], "x");
    narrow.retries = 5;
    narrow.retry_on = vec![RetryOn::Exit(75)];
    let p = plan(t.path(), vec![flaky, broken, narrow]);
    let r = run(t.path(), p, true, fake).await;
    assert_eq!(r.status["flaky"], StepStatus::Succeeded);
    assert_eq!(tries(&r, "flaky"), 3, "two failures, then the success");
    assert_eq!(r.status["broken"], StepStatus::Failed);
    assert_eq!(tries(&r, "broken"), 3, "the try and its two retries");
    assert_eq!(r.status["narrow"], StepStatus::Failed);
    assert_eq!(tries(&r, "narrow"), 1, "exit 1 is not retry_on exit:75");
}

#[tokio::test]
async fn an_attempt_past_its_timeout_times_out_and_fails_its_step() {
    let t = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeBackend::new().with("slow", &[Act::Hang]));
    let mut slow = step("slow", &[], "x");
    slow.timeout = Some(ms(30));
    let r = run(t.path(), plan(t.path(), vec![slow]), false, fake).await;
    assert_eq!(r.status["slow"], StepStatus::Failed);
    assert_eq!(
        r.attempts[0].1.termination,
        crate::evidence::record::Termination::TimedOut
    );
}

#[tokio::test]
async fn the_run_timeout_cancels_what_runs_and_ends_the_run_at_once() {
    let t = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeBackend::new().with("a", &[Act::Hang]));
    let p = plan(t.path(), vec![step("a", &[], "x"), step("b", &["a"], "x")]);
    let r = run_with(t.path(), p, false, fake, Some(ms(50))).await;
    assert_ne!(r.out.status, RunStatus::Succeeded);
    assert_eq!(r.status["a"], StepStatus::Cancelled);
    assert_ne!(r.status["b"], StepStatus::Succeeded);
    let a = &r.attempts.iter().find(|(s, _)| s == "a").unwrap().1;
    assert_eq!(a.cancel_reason.as_deref(), Some("run_timeout"));
}

#[tokio::test]
async fn an_attempt_that_cannot_start_fails_its_step_without_an_outcome() {
    let t = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeBackend::new().with("a", &[Act::NotStarted]));
    let r = run(
        t.path(),
        plan(t.path(), vec![step("a", &[], "x")]),
        false,
        fake,
    )
    .await;
    assert_eq!(r.status["a"], StepStatus::Failed);
    assert_eq!(
        r.attempts[0].1.termination,
        crate::evidence::record::Termination::NotStarted
    );
}

/// Thousands of steps in layers of fans: every step runs once, none before what it
/// needs has ended, and the whole DAG takes the scheduler alone.
#[tokio::test]
async fn two_thousand_steps_each_run_once_after_what_they_need() {
    let t = tempfile::tempdir().unwrap();
    let (layers, width) = (40usize, 50usize);
    let mut steps = Vec::new();
    for l in 0..layers {
        for w in 0..width {
            let needs: Vec<String> = if l == 0 {
                vec![]
            } else {
                vec![
                    format!("s{}_{w}", l - 1),
                    format!("s{}_{}", l - 1, (w + 1) % width),
                ]
            };
            let needs: Vec<&str> = needs.iter().map(String::as_str).collect();
            steps.push(step(&format!("s{l}_{w}"), &needs, "x"));
        }
    }
    let fake = Arc::new(FakeBackend::new());
    let r = run(t.path(), plan(t.path(), steps), false, Arc::clone(&fake)).await;
    assert_eq!(r.out.status, RunStatus::Succeeded);
    let calls = fake.calls();
    assert_eq!(calls.len(), layers * width, "every step once");
    let ended: BTreeMap<&str, Duration> =
        calls.iter().map(|c| (c.step.as_str(), c.ended)).collect();
    for c in &calls {
        let (l, w) = c.step[1..].split_once('_').unwrap();
        let (l, w): (usize, usize) = (l.parse().unwrap(), w.parse().unwrap());
        if l > 0 {
            for need in [
                format!("s{}_{w}", l - 1),
                format!("s{}_{}", l - 1, (w + 1) % width),
            ] {
                assert!(
                    ended[need.as_str()] <= c.started,
                    "{} started before {need} ended",
                    c.step
                );
            }
        }
    }
}
