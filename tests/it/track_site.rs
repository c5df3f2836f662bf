//! `orchestrate site` over real runs of a real repository's commits (a regression at
//! one, a test that starts failing at another, a finding that appears at a third),
//! opened in headless chromium: the page renders, the chart has a point per commit
//! in git's order and the change at its commit, the history has the test and the
//! finding, every link resolves inside the site, and the filters run from the URL.

use std::path::Path;

use crate::support::{cli, git, shown};

const COMMITS: usize = 6;
const REGRESSION_AT: usize = 3;
const FAILING_FROM: usize = 4;
const FINDING_FROM: usize = 2;

const PLAN: &str = r#"
schema = "orchestrate/plan/v1"
name = "tracked"
[pins.git.implementation]
path = "repo"
[steps.bench]
repeats = 5
shell = '''
set -- $(cat repo/latency.txt)
shift $((${repeat} - 1))
printf '{"latency_ms": %s}' "$1" > "$ORCHESTRATE_METRICS"
'''
[steps.bench.report]
metric = "latency_ms"
[steps.tests]
shell = "cp repo/junit.xml ${out}/junit.xml"
results = { junit = "${out}/junit.xml" }
[steps.lint]
shell = "cp repo/findings.sarif ${out}/lint.sarif"
results = { sarif = "${out}/lint.sarif" }
"#;

fn run_at(root: &Path, commit: &str) {
    git(&root.join("repo"), &["checkout", "-q", commit]);
    let out = cli()
        .args([
            "run",
            "plan.toml",
            "--records",
            "records",
            "--progress",
            "quiet",
        ])
        .arg("--keep-going")
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{}",
        shown(&out)
    );
}

fn site(root: &Path, out: &str) -> std::process::Output {
    cli()
        .args(["site", "--records", "records", "--repo", "repo", "-o", out])
        .current_dir(root)
        .output()
        .unwrap()
}

/// The compare page of two runs marks as differing exactly the rows
/// `diff --diff-only` keeps, and "only what differs" hides the rest.
fn compare_page(root: &Path, site: &Path) {
    let runs: Vec<String> = crate::support::record_dirs(&root.join("records"))
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|n| n != "tampered-run")
        .take(REGRESSION_AT + 2)
        .collect();
    let (a, b) = (&runs[0], &runs[REGRESSION_AT + 1]);
    let d = cli()
        .args(["diff", "--format", "json", "--diff-only"])
        .arg(root.join("records").join(a))
        .arg(root.join("records").join(b))
        .output()
        .unwrap();
    assert!(d.status.success(), "{}", shown(&d));
    let v: serde_json::Value = serde_json::from_slice(&d.stdout).unwrap();
    let differ = [
        "pins",
        "parameters",
        "environment",
        "steps",
        "metrics",
        "checks",
    ]
    .iter()
    .map(|k| v[k].as_array().unwrap().len())
    .sum::<usize>();
    assert!(differ > 0, "two commits differ at least in their pin");
    let url = format!(
        "file://{}#runs={a},{b},not-a-run&only=1",
        site.join("compare.html").display()
    );
    let Some(page) = crate::support::browser::render(&url, root) else {
        return;
    };
    let dom = &page.dom;
    assert!(page.errors.is_empty(), "console errors: {:#?}", page.errors);
    assert!(dom.contains("class=\"only\" data-ready=\"1\""), "{dom}");
    assert_eq!(
        dom.matches("<tr class=\"changed\"").count(),
        differ,
        "{dom}"
    );
    let all = dom.matches("<tr class=\"same\"").count() + differ;
    assert!(
        dom.contains(&format!("{differ} of {all} rows differ")),
        "{dom}"
    );
    assert!(
        dom.contains("Not in this site, or without facts: not-a-run"),
        "{dom}"
    );
    // The implementation pin differs and is marked so; the plan's digest does not.
    assert!(
        dom.contains("<tr class=\"changed\" data-key=\"git implementation\">"),
        "{dom}"
    );
    assert!(
        dom.contains("<tr class=\"same\" data-key=\"plan sha256\">"),
        "{dom}"
    );
}

/// Every value of `attr="…"` in the DOM, in order.
fn attrs(dom: &str, attr: &str) -> Vec<String> {
    let pat = format!(" {attr}=\"");
    dom.match_indices(&pat)
        .map(|(i, _)| {
            let rest = &dom[i + pat.len()..];
            rest[..rest.find('"').unwrap()].replace("&amp;", "&")
        })
        .collect()
}

#[test]
fn the_site_shows_each_change_at_its_commit_and_every_link_resolves() {
    let _host = crate::support::host_shared();
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let commits = crate::support::history::repository_with(
        root,
        COMMITS,
        REGRESSION_AT,
        FAILING_FROM,
        Some(FINDING_FROM),
    );
    std::fs::write(root.join("plan.toml"), PLAN).unwrap();
    for c in commits.iter().chain(commits.iter().rev()) {
        run_at(root, c);
    }
    // One more record, changed after it was written: listed, never linked or charted.
    let first = crate::support::record_dirs(&root.join("records"))[0].clone();
    let tampered = root.join("records/tampered-run");
    crate::support::copy_dir(&first, &tampered);
    let mut bytes = std::fs::read(tampered.join("record.json")).unwrap();
    bytes.push(b' ');
    std::fs::write(tampered.join("record.json"), bytes).unwrap();

    let out = site(root, "site");
    assert!(out.status.success(), "{}", shown(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("13 runs, 1 unverified; 12 reports"), "{said}");

    let dir = root.join("site");
    let index = dir.join("index.html");
    let html = std::fs::read_to_string(&index).unwrap();
    // Self-contained: nothing fetched from anywhere.
    for bad in ["http://", "https://", "<link", "<img", "@import"] {
        assert!(!html.contains(bad), "the site names {bad}");
    }

    // Its scripts are the site's own files.
    for src in attrs(&html, "src") {
        assert!(dir.join(&src).is_file() && !src.contains(".."), "{src}");
    }

    let Some(page) = crate::support::browser::render(&format!("file://{}", index.display()), root)
    else {
        return;
    };
    let dom = &page.dom;
    assert!(page.errors.is_empty(), "console errors: {:#?}", page.errors);
    assert!(
        dom.contains("data-ready=\"1\""),
        "the inline script did not run"
    );
    assert!(dom.contains("13 of 13 runs"), "{dom}");

    // The latency chart: a point per commit, in git's order, one increase at its commit.
    let chart_at = dom
        .find("data-step=\"bench\" data-metric=\"latency_ms\"")
        .expect("a latency chart");
    let chart = &dom[chart_at..chart_at + dom[chart_at..].find("</svg>").unwrap()];
    assert!(chart.contains("data-points=\"6\"") && chart.contains("data-changes=\"1\""));
    assert_eq!(attrs(chart, "data-key"), commits, "points in git's order");
    assert_eq!(
        chart.matches("class=\"change increase\"").count(),
        2,
        "line and label"
    );
    let listed = format!(
        "increase at {} (after {})",
        &commits[REGRESSION_AT][..12],
        &commits[REGRESSION_AT - 1][..12]
    );
    assert!(dom.contains(&listed), "no `{listed}` in the page");
    // wall_ms of each step is charted too.
    assert!(dom.contains("data-step=\"tests\" data-metric=\"wall_ms\""));

    // The history: the test and the finding, each where it started.
    let test_b = format!("started failing at {}", &commits[FAILING_FROM][..12]);
    assert!(
        dom.contains("suite::test_b") && dom.contains(&test_b),
        "no `{test_b}`"
    );
    let finding = format!("appeared at {}", &commits[FINDING_FROM][..12]);
    assert!(
        dom.contains("R1 in src/a.rs") && dom.contains(&finding),
        "no `{finding}`"
    );
    assert!(
        !dom.contains("suite::test_a"),
        "a test that never failed has no history"
    );

    // Every link resolves inside the site: 12 reports and records, and each point.
    let hrefs = attrs(dom, "href");
    assert!(hrefs.len() >= 12 * 2 + 6, "{hrefs:?}");
    for h in &hrefs {
        assert!(
            !h.starts_with('/') && !h.contains(".."),
            "{h} leaves the site"
        );
        let target = dir.join(h.split('#').next().unwrap());
        assert!(target.is_file(), "{h} does not resolve");
    }
    let reports: Vec<&String> = hrefs
        .iter()
        .filter(|h| h.ends_with("report.html"))
        .collect();
    assert!(
        !hrefs.iter().any(|h| h.contains("tampered")),
        "an unverified run is linked"
    );
    for h in hrefs.iter().filter(|h| h.ends_with("record.json")) {
        let run = dir.join(h).parent().unwrap().to_path_buf();
        let bytes = std::fs::read(run.join("record.json")).unwrap();
        let sha = std::fs::read_to_string(run.join("record.sha256")).unwrap();
        assert!(
            sha.starts_with(&orchestrate::digest::sha256_bytes(&bytes).hex()),
            "{h}"
        );
        let report = std::fs::read_to_string(run.join("report.html")).unwrap();
        let name = run.file_name().unwrap().to_string_lossy().into_owned();
        assert!(report.contains(&name), "{name}'s report is not its own");
    }
    assert!(reports.len() >= 12);

    // A filter from the URL: a commit's two runs shown, the rest hidden.
    let url = format!("file://{}#q={}", index.display(), &commits[1][..7]);
    let Some(filtered) = crate::support::browser::render(&url, root) else {
        return;
    };
    assert!(
        filtered.dom.contains("2 of 13 runs"),
        "the filter did not apply"
    );
    assert_eq!(filtered.dom.matches("<tr class=\"run").count(), 2);

    compare_page(root, &dir);

    // Written again, the site is replaced; a folder of someone else's is refused.
    assert!(site(root, "site").status.success());
    std::fs::create_dir(root.join("mine")).unwrap();
    std::fs::write(root.join("mine/notes.txt"), "keep").unwrap();
    let refused = site(root, "mine");
    assert_eq!(refused.status.code(), Some(2), "{}", shown(&refused));
    assert_eq!(
        std::fs::read_to_string(root.join("mine/notes.txt")).unwrap(),
        "keep"
    );
}

/// 250 runs list 100 to a page, newest first; a filter's page comes from the URL,
/// and a page past the last shows the last.
#[test]
fn the_run_list_pages_a_large_history() {
    let t = tempfile::tempdir().unwrap();
    let rows: Vec<_> = (0..250)
        .map(|i| {
            let mut r = orchestrate::track::index::empty_row(&format!("run-{i:03}"));
            r.records = t.path().join("records").display().to_string();
            r.problem = Some("not a record".into());
            r.started_at = Some(format!("2026-12-01T00:{:02}:{:02}Z", i / 60, i % 60));
            r
        })
        .collect();
    let out = t.path().join("site");
    let opts = orchestrate::track::site::SiteOptions {
        repo: None,
        noise: 0.05,
        reports: true,
        refresh: None,
    };
    let s = orchestrate::track::site::write(&rows, &out, &opts).unwrap();
    assert_eq!((s.runs, s.unverified), (250, 250));
    let index = out.join("index.html");
    let at = |frag: &str| {
        let url = format!("file://{}#{frag}", index.display());
        crate::support::browser::render(&url, t.path()).map(|p| {
            assert!(p.errors.is_empty(), "{:#?}", p.errors);
            p.dom
        })
    };
    let Some(first) = at("") else {
        return;
    };
    assert!(first.contains("250 of 250 runs") && first.contains("page 1 of 3"));
    assert_eq!(first.matches("<tr class=\"run").count(), 100);
    assert!(first.contains("<code>run-249</code>") && !first.contains("<code>run-149</code>"));
    let third = at("page=3").unwrap();
    assert_eq!(third.matches("<tr class=\"run").count(), 50);
    assert!(third.contains("<code>run-049</code>") && third.contains("<code>run-000</code>"));
    let filtered = at("q=run-1&page=9").unwrap();
    assert!(
        filtered.contains("100 of 250 runs") && filtered.contains("page 1 of 1"),
        "{filtered}"
    );
    assert!(
        filtered.contains("<code>run-199</code>") && !filtered.contains("<code>run-200</code>")
    );
}
