//! The HTML report in a real headless browser (Debian's chromium): the charts are in
//! the DOM and the inline script ran without a console error. Skips when chromium is
//! absent, unless `ORCHESTRATE_REQUIRE_BROWSER=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use orchestrate::report::{self, RenderOptions, TemplateChoice};

fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

#[test]
fn html_report_renders_in_headless_chromium() {
    let Some(browser) = chromium() else {
        crate::support::skip_or_fail(
            crate::support::Need::Browser,
            "/usr/bin/chromium is not installed",
        );
        return;
    };
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/smoke");
    let html = report::render(&fixture, TemplateChoice::Html, &RenderOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, &html).unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {stderr}");
    for id in ["timeline", "repeats", "memory"] {
        assert!(
            dom.contains(&format!("<svg id=\"{id}\"")),
            "no <svg id={id}> in the DOM:\n{dom}"
        );
    }
    assert!(dom.contains("id=\"comparisons\""), "no comparison table");
    assert!(
        dom.contains("<rect class=\"ok\""),
        "the timeline has no bars"
    );
    assert!(
        dom.contains("data-ready=\"1\""),
        "the inline script did not run:\n{dom}"
    );
    // The page logs nothing, so any console line (chromium prints console.error and
    // uncaught exceptions alike as `...:CONSOLE:N] "..."` or `:CONSOLE(N)`) is a fault.
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("Uncaught") || l.contains(":CONSOLE"))
        .collect();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
}
