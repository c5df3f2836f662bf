//! How long the site's run list takes to open in headless chromium (Debian's
//! `/usr/bin/chromium`), for a history of 10 runs and one of 10,000 (500 commits,
//! two step metrics of 5 samples each, a test that starts failing), written by
//! `site::write` without report copies (`--no-reports`: the open time does not depend
//! on them). Each site is opened `OPENS` times (default 7) in turn with a blank page;
//! a copy of its index.html adds one script that stamps `performance.now()` at the
//! load event, after the list's first page is drawn. Prints medians of that and of
//! chromium's whole run (start to exit) minus the blank page's. Run with
//! `cargo bench --bench site_open`; `RUNS=N` changes the large history's size.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use orchestrate::track::index::empty_row;
use orchestrate::track::site::{self, SiteOptions};
use orchestrate::track::{Headline, RunRow, Series, StepTests};

#[path = "support/jitter.rs"]
mod jitter;
use jitter::jitter;

fn history(n: u64) -> Vec<RunRow> {
    let commits = 500.min(n).max(1);
    (0..n)
        .map(|run| {
            let c = run * commits / n;
            let level = if c >= commits * 3 / 5 { 12.0 } else { 10.0 };
            let samples = |k0: u64, at: f64| -> Vec<f64> {
                (0..5).map(|k| at * (1.0 + 0.03 * jitter(k0 + k))).collect()
            };
            let mut r = empty_row(&format!("20261201T000000Z-{run:06x}"));
            r.records = "records".into();
            r.verified = true;
            r.run_id = Some(r.folder.clone());
            r.plan = Some(["full8k", "smoke"][(run % 2) as usize].into());
            r.status = Some(if run % 97 == 0 { "failed" } else { "succeeded" }.into());
            r.implementation = Some(format!("{c:040x}"));
            r.host = Some(format!("host-{}", run % 4));
            r.started_at = Some(format!(
                "2026-12-{:02}T{:02}:{:02}:{:02}Z",
                1 + run / 86_400 % 28,
                run / 3600 % 24,
                run / 60 % 60,
                run % 60
            ));
            r.duration_ms = Some(60_000.0 + 1000.0 * jitter(run));
            r.devices = vec!["cpu0".into()];
            r.headline = vec![Headline {
                step: "prefill".into(),
                metric: "latency_ms".into(),
                median: level,
                n: 5,
            }];
            r.series = vec![
                Series {
                    step: "prefill".into(),
                    metric: "latency_ms".into(),
                    samples: samples(run * 10, level),
                },
                Series {
                    step: "compile".into(),
                    metric: "wall_ms".into(),
                    samples: samples(run * 10 + 5, 240.0),
                },
            ];
            r.tests = vec![StepTests {
                step: "tests".into(),
                junit: true,
                cases: 40,
                failing: if c >= commits * 4 / 5 {
                    vec!["suite::test_b".into()]
                } else {
                    Vec::new()
                },
                findings: None,
            }];
            r
        })
        .collect()
}

fn chromium(url: &str, profile: &Path) -> (f64, String) {
    let t = Instant::now();
    let out = Command::new("/usr/bin/chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .args([
            "--disable-background-networking",
            "--disable-component-update",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--dump-dom", url])
        .output()
        .expect("chromium runs");
    let ms = t.elapsed().as_secs_f64() * 1e3;
    (ms, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A copy of the site's index.html that stamps the load event's time.
fn timed(site: &Path) -> PathBuf {
    let html = std::fs::read_to_string(site.join("index.html")).unwrap();
    let stamp = "<script>addEventListener('load', function () { \
        document.body.dataset.loadMs = performance.now().toFixed(1); });</script></body>";
    let path = site.join("index-timed.html");
    std::fs::write(&path, html.replace("</body>", stamp)).unwrap();
    path
}

fn load_ms(dom: &str) -> f64 {
    let at = dom.find("data-load-ms=\"").expect("the load stamp") + 14;
    dom[at..at + dom[at..].find('"').unwrap()].parse().unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if !Path::new("/usr/bin/chromium").is_file() {
        println!("site_open: /usr/bin/chromium is not installed; nothing measured");
        return;
    }
    let big: u64 = std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let opens: usize = std::env::var("OPENS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let tmp = tempfile::tempdir().unwrap();
    let blank = tmp.path().join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><title>blank</title><body></body>").unwrap();
    let opts = SiteOptions {
        repo: None,
        noise: 0.05,
        reports: false,
        refresh: None,
    };
    let mut sites = Vec::new();
    for n in [10, big] {
        let rows = history(n);
        let out = tmp.path().join(format!("site-{n}"));
        let t = Instant::now();
        site::write(&rows, &out, &opts).unwrap();
        let built = t.elapsed().as_secs_f64();
        let list = std::fs::metadata(out.join("runs.js")).unwrap().len();
        let page = std::fs::metadata(out.join("index.html")).unwrap().len();
        println!(
            "site of {n} runs written in {built:.2} s: index.html {page} bytes, runs.js {list} bytes"
        );
        sites.push((n, timed(&out)));
    }
    let profile = tmp.path().join("profile");
    chromium(&format!("file://{}", blank.display()), &profile); // first start warms the profile
    let mut blank_ms = Vec::new();
    let mut by_site: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); sites.len()];
    for _ in 0..opens {
        blank_ms.push(chromium(&format!("file://{}", blank.display()), &profile).0);
        for (i, (n, page)) in sites.iter().enumerate() {
            let (ms, dom) = chromium(&format!("file://{}", page.display()), &profile);
            let rows = dom.matches("<tr class=\"run").count();
            assert!(dom.contains(&format!("{n} of {n} runs")) && rows == (*n as usize).min(100));
            by_site[i].0.push(load_ms(&dom));
            by_site[i].1.push(ms);
        }
    }
    let blank_med = median(blank_ms);
    println!("blank page: chromium start to exit {blank_med:.0} ms (median of {opens})");
    for ((n, _), (load, whole)) in sites.iter().zip(by_site) {
        let (l, w) = (median(load), median(whole));
        println!(
            "{n} runs: load event at {l:.1} ms; chromium start to exit {w:.0} ms, {:.0} ms over the blank page (medians of {opens})",
            w - blank_med
        );
    }
}
