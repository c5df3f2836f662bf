//! What the site's pages read besides their own HTML: `runs.js`, every run's row for
//! the paged run list and the compare page, and `runs/NAME/facts.js`, one run's
//! facts as the diff states them (pins, parameters, environment, steps, metrics,
//! checks) for the compare page to put side by side. Each is a script that hands its
//! JSON to a function the page defines, so the pages work from `file://` too, where
//! a browser fetches nothing.

use serde::Serialize;

use crate::record::run::Record;

/// `CALL(JSON);`: JSON is JavaScript, and the file is a script, never HTML, so no
/// text in it can close a tag.
fn script<T: Serialize>(call: &str, v: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = format!("{call}(").into_bytes();
    serde_json::to_writer(&mut out, v)?;
    out.extend_from_slice(b");\n");
    Ok(out)
}

/// The run list's rows, newest first.
pub(super) fn runs_js<T: Serialize>(views: &[T]) -> Result<Vec<u8>, serde_json::Error> {
    script("orchestrateRuns", &views)
}

#[derive(Serialize)]
struct Facts<'a> {
    /// The run's folder in the site (`runs/NAME`).
    site: &'a str,
    run_id: &'a str,
    sections: Vec<crate::report::diff::ColumnSection>,
}

/// One run's facts, a column of the compare page.
pub(super) fn facts_js(rec: &Record, name: &str) -> Result<Vec<u8>, serde_json::Error> {
    let d = crate::report::diff::diff_records(&[rec], false);
    let facts = Facts {
        site: name,
        run_id: &rec.run_id,
        sections: crate::report::diff::columns(&d).sections,
    };
    script("orchestrateFacts", &facts)
}
