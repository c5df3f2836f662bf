//! `orchestrate trend` over a generated history: 200 runs on 50 commits (4 each,
//! 5 samples a run, 3% noise), latency up 20% from commit 31, a test failing from
//! commit 40. Prints where the change and the test's start were found and how long
//! the detector and the tests' history took. Run with `cargo bench --bench trend`.

use std::time::Instant;

use orchestrate::track::trend::{self, Order};
use orchestrate::track::{RunRow, Series, StepTests};

#[path = "support/jitter.rs"]
mod jitter;
use jitter::jitter;

fn main() {
    let commits: Vec<String> = (0..50).map(|c| format!("{c:040x}")).collect();
    let mut rows = Vec::new();
    for run in 0..200u64 {
        let c = (run / 4) as usize;
        let level = if c >= 31 { 12.0 } else { 10.0 };
        let samples = (0..5)
            .map(|k| level * (1.0 + 0.03 * jitter(run * 5 + k)))
            .collect();
        rows.push(RunRow {
            folder: format!("run-{run:03}"),
            records: "records".into(),
            verified: true,
            problem: None,
            run_id: Some(format!("run-{run:03}")),
            plan: Some("p".into()),
            status: Some("succeeded".into()),
            baseline: None,
            implementation: Some(commits[c].clone()),
            host: None,
            started_at: Some(format!("2026-12-01T00:{:02}:{:02}Z", run / 60, run % 60)),
            duration_ms: None,
            devices: Vec::new(),
            headline: Vec::new(),
            duplicate_of: None,
            running: false,
            progress: None,
            series: vec![Series {
                step: "bench".into(),
                metric: "latency_ms".into(),
                samples,
            }],
            tests: vec![StepTests {
                step: "tests".into(),
                junit: true,
                cases: 2,
                failing: if c >= 40 {
                    vec!["suite::test_b".into()]
                } else {
                    Vec::new()
                },
                findings: None,
            }],
        });
    }
    let t = Instant::now();
    let tr = trend::trend(&rows, "bench", "latency_ms", Order::Commit, None, 0.05);
    let took = t.elapsed();
    let found: Vec<String> = tr
        .changes
        .iter()
        .map(|c| {
            let at = commits
                .iter()
                .position(|k| *k == c.at)
                .unwrap_or(usize::MAX);
            format!(
                "{} at commit {at} (x{:.3})",
                c.verdict,
                c.ratio.unwrap_or(f64::NAN)
            )
        })
        .collect();
    println!(
        "trend of 200 runs on {} commits: {:.1} ms; changes: {}",
        tr.points.len(),
        took.as_secs_f64() * 1e3,
        found.join(", ")
    );
    let t = Instant::now();
    let tests = trend::tests(&rows, Order::Commit, None, None);
    let took = t.elapsed();
    for h in &tests.tests {
        for tr in &h.transitions {
            let at = commits
                .iter()
                .position(|k| *k == tr.at)
                .unwrap_or(usize::MAX);
            println!(
                "test {} {} at commit {at} ({:.1} ms for the tests' history)",
                h.id,
                tr.what,
                took.as_secs_f64() * 1e3
            );
        }
    }
    let t = Instant::now();
    let by_time = trend::trend(&rows, "bench", "latency_ms", Order::Time, None, 0.05);
    println!(
        "by time, 200 points: {:.1} ms; changes: {}",
        t.elapsed().as_secs_f64() * 1e3,
        by_time.changes.len()
    );
}
