//! Scheduler tests on plans built in code (the CLI tests in tests/ use TOML plans).
//! They run real processes through a real isolator (`auto`: cgroups when root).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::evidence::journal::{self, Event, Journal};
use crate::evidence::record::{RunStatus, StepStatus};
use crate::isolate::{Isolator, Mode};
use crate::plan::*;

pub(super) fn step(id: &str, needs: &[&str], shell: &str) -> Step {
    Step {
        id: StepId(id.into()),
        kind: StepKind::Command,
        needs: needs.iter().map(|n| StepId(n.to_string())).collect(),
        devices: vec![],
        command: Some(StepCommand::Shell(Template::literal(shell))),
        env: BTreeMap::new(),
        cwd: None,
        repeats: 1,
        warmup: 0,
        timeout: None,
        memory: None,
        pids: None,
        outputs: vec![],
        inputs: vec![],
        checks: vec![],
        report: Default::default(),
        matrix: None,
        cell: None,
        retries: 0,
        retry_on: vec![],
        revisions: None,
        results: Default::default(),
        gate: Default::default(),
        cache: false,
        cache_memory: false,
        cache_env: Vec::new(),
        cache_link: false,
        backend: None,
        slurm: Default::default(),
        exclusive: None,
    }
}

pub(super) fn plan(dir: &Path, steps: Vec<Step>) -> Plan {
    Plan {
        path: dir.join("plan.toml"),
        dir: dir.to_path_buf(),
        source: String::new(),
        name: "t".into(),
        description: None,
        changes: None,
        params: BTreeMap::new(),
        pins: Pins::default(),
        limits: Limits::default(),
        devices: BTreeMap::new(),
        allow_simulated: false,
        steps,
        secret_env: vec![],
        secret_values: Default::default(),
        report: ReportSettings::default(),
        matrix: Matrix::default(),
        revisions: vec![],
        backend: Default::default(),
        cache: Default::default(),
    }
}

/// Options for a quiet test run with records and work under `dir`.
pub(super) fn options(dir: &Path, keep_going: bool) -> SchedOptions {
    SchedOptions {
        run_id: new_run_id(),
        record_dir: dir.join("rec"),
        work_dir: dir.join("work"),
        jobs: 8,
        keep_going,
        memory_budget: u64::MAX,
        run_timeout: None,
        grace: Duration::from_millis(50),
        progress: ProgressMode::Quiet,
        tee: false,
        secret_env: vec![],
        masker: Default::default(),
        revisions: Default::default(),
        reuse: None,
        detach: Default::default(),
    }
}

async fn run(dir: &Path, p: Plan, keep_going: bool) -> (DagOutcome, Vec<journal::JournalLine>) {
    let opts = SchedOptions {
        jobs: 4,
        grace: Duration::from_millis(200),
        ..options(dir, keep_going)
    };
    std::fs::create_dir_all(dir.join("rec")).unwrap();
    let mut j = Journal::create(&dir.join("rec/journal.jsonl")).unwrap();
    let iso = Arc::new(Isolator::new(Mode::Auto).unwrap());
    if std::env::var("ORCHESTRATE_REQUIRE_CGROUPS").as_deref() == Ok("1") {
        assert_eq!(
            iso.describe().mode,
            crate::contract::Enforcer::Cgroup,
            "cgroups are required here"
        );
    }
    let backend = Arc::new(crate::backend::Local::new(iso));
    let dag = DagRun {
        plan: Arc::new(p),
        opts,
        backend,
        base_env: base_env(None),
        devices: None,
        checks: None,
    };
    let out = run_dag(dag, &mut j).await.unwrap();
    drop(j);
    let (lines, _) = journal::read(&dir.join("rec/journal.jsonl")).unwrap();
    (out, lines)
}

fn attempt_times(lines: &[journal::JournalLine], id: &str) -> (String, String) {
    for l in lines {
        if let Event::AttemptEnded { step, attempt } = &l.event {
            if step == id {
                return (attempt.started_at.clone(), attempt.ended_at.clone());
            }
        }
    }
    panic!("no attempt of {id}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn independent_steps_overlap_and_dependents_wait() {
    let t = tempfile::tempdir().unwrap();
    let p = plan(
        t.path(),
        vec![
            step("a", &[], "sleep 0.5"),
            step("b", &[], "sleep 0.5"),
            step("c", &["a", "b"], "true"),
        ],
    );
    let (out, lines) = run(t.path(), p, false).await;
    assert_eq!(out.status, RunStatus::Succeeded);
    let (a0, a1) = attempt_times(&lines, "a");
    let (b0, b1) = attempt_times(&lines, "b");
    let (c0, _) = attempt_times(&lines, "c");
    // RFC 3339 strings of one format compare as times.
    assert!(
        a0 < b1 && b0 < a1,
        "a [{a0},{a1}] and b [{b0},{b1}] must overlap"
    );
    assert!(c0 > a1 && c0 > b1, "c started {c0} before a or b ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_fast_skips_downstream_and_cancels_running() {
    let t = tempfile::tempdir().unwrap();
    let p = plan(
        t.path(),
        vec![
            step("bad", &[], "exit 3"),
            step("slow", &[], "sleep 30"),
            step("after", &["bad"], "true"),
        ],
    );
    let started = std::time::Instant::now();
    let (out, _) = run(t.path(), p, false).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(out.status, RunStatus::Failed);
    let st: BTreeMap<_, _> = out.steps.iter().map(|(i, s, _)| (i.as_str(), *s)).collect();
    assert_eq!(st["bad"], StepStatus::Failed);
    assert_eq!(st["slow"], StepStatus::Cancelled);
    assert_eq!(st["after"], StepStatus::Skipped);
    let reason = out.steps.iter().find(|s| s.0 == "after").unwrap().2.clone();
    assert!(reason.unwrap().contains("needs `bad`"));
    // Folders made ahead for `after` were removed: the disk says what ran.
    assert!(t.path().join("rec/steps/bad/1/stdout.log").is_file());
    assert!(!t.path().join("work/after").exists());
    assert!(!t.path().join("rec/steps/after").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folders_of_attempts_that_never_ran_are_not_left_behind() {
    let t = tempfile::tempdir().unwrap();
    let mut rep = step("rep", &[], "exit 1");
    rep.repeats = 3;
    let (out, _) = run(t.path(), plan(t.path(), vec![rep]), false).await;
    assert_eq!(out.status, RunStatus::Failed);
    for dir in ["work/rep/1", "rec/steps/rep/1"] {
        assert!(t.path().join(dir).is_dir(), "{dir}");
    }
    for n in [2, 3] {
        assert!(!t.path().join(format!("work/rep/{n}")).exists());
        assert!(!t.path().join(format!("rec/steps/rep/{n}")).exists());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_going_runs_what_does_not_depend_on_the_failure() {
    let t = tempfile::tempdir().unwrap();
    let p = plan(
        t.path(),
        vec![
            step("bad", &[], "exit 3"),
            step("other", &[], "sleep 0.3"),
            step("other2", &["other"], "true"),
            step("after", &["bad"], "true"),
            step("after2", &["after"], "true"),
        ],
    );
    let (out, _) = run(t.path(), p, true).await;
    assert_eq!(out.status, RunStatus::Failed);
    let st: BTreeMap<_, _> = out.steps.iter().map(|(i, s, _)| (i.as_str(), *s)).collect();
    assert_eq!(st["other"], StepStatus::Succeeded);
    assert_eq!(st["other2"], StepStatus::Succeeded);
    assert_eq!(st["after"], StepStatus::Skipped);
    assert_eq!(st["after2"], StepStatus::Skipped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_get_their_own_out_and_metrics_are_captured() {
    let t = tempfile::tempdir().unwrap();
    let mut s = step(
        "r",
        &[],
        "echo $ORCHESTRATE_OUT > \"$ORCHESTRATE_OUT/where\"; \
         printf '{\"prefill_ms\": 769.2}' > \"$ORCHESTRATE_METRICS\"",
    );
    s.repeats = 3;
    s.warmup = 1;
    let (out, lines) = run(t.path(), plan(t.path(), vec![s]), false).await;
    assert_eq!(out.status, RunStatus::Succeeded);
    let attempts: Vec<_> = lines
        .iter()
        .filter_map(|l| match &l.event {
            Event::AttemptEnded { attempt, .. } => Some(attempt.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(attempts.len(), 4);
    assert!(attempts[0].warmup && !attempts[1].warmup);
    let outs: std::collections::BTreeSet<_> = attempts.iter().map(|a| a.out.clone()).collect();
    assert_eq!(outs.len(), 4, "each attempt has its own ${{out}}");
    for a in &attempts {
        assert_eq!(a.metrics.as_ref().unwrap()["prefill_ms"], 769.2);
        let written = std::fs::read_to_string(Path::new(&a.out).join("where")).unwrap();
        assert_eq!(written.trim(), a.out);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_timeout_fails_the_step() {
    let t = tempfile::tempdir().unwrap();
    let mut s = step("slow", &[], "sleep 30");
    s.timeout = Some(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let (out, lines) = run(t.path(), plan(t.path(), vec![s]), false).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(out.status, RunStatus::Failed);
    let term = lines.iter().find_map(|l| match &l.event {
        Event::AttemptEnded { attempt, .. } => Some(attempt.termination),
        _ => None,
    });
    assert_eq!(term, Some(crate::evidence::record::Termination::TimedOut));
}
