//! The HTML report in a real headless browser (Debian's chromium): the charts are in
//! the DOM and the inline script ran without a console error. Skips when chromium is
//! absent, unless `ORCHESTRATE_REQUIRE_BROWSER=1`.

use std::path::Path;

use orchestrate::report::{self, RenderOptions, TemplateChoice};

#[test]
fn html_report_renders_in_headless_chromium() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/smoke");
    let html = report::render(&fixture, TemplateChoice::Html, &RenderOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, &html).unwrap();
    let Some(shown) =
        crate::support::browser::render(&format!("file://{}", page.display()), dir.path())
    else {
        return;
    };
    let dom = &shown.dom;
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
    // The page logs nothing, so any console line is a fault.
    assert!(
        shown.errors.is_empty(),
        "console errors: {:#?}",
        shown.errors
    );
}
