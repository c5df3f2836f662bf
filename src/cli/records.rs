//! Commands that read what runs left: `verify`, `report`, `export`, `diff`,
//! `recover`, `audit`.

use std::path::{Path, PathBuf};

use orchestrate::exit::{Error, Verdict};

use super::out::{print_json, say, sayln, write_output};

pub fn verify(run: &Path, key: Option<&Path>, require_artifacts: bool) -> Result<Verdict, Error> {
    use orchestrate::evidence::{render_report, verify_run, VerifyOptions};
    let key = key
        .map(orchestrate::evidence::dsse::load_verifying_key)
        .transpose()
        .map_err(|e| Error::Usage(e.to_string()))?;
    let opts = VerifyOptions {
        key,
        require_artifacts,
    };
    let report = verify_run(run, &opts);
    say!("{}", render_report(&report, require_artifacts));
    Ok(Verdict::of(report.ok(require_artifacts)))
}

pub fn report(
    run: &Path,
    template: &str,
    output: Option<&Path>,
    no_verify: bool,
    plan_dir: Option<PathBuf>,
) -> Result<Verdict, Error> {
    use orchestrate::report::{render, RenderOptions, ReportError, TemplateChoice};
    let opts = RenderOptions {
        no_verify,
        plan_dir,
    };
    let text = render(run, TemplateChoice::parse(template), &opts).map_err(|e| match e {
        e @ ReportError::DigestMismatch { .. } => Error::Failed(format!(
            "{e}\n(refusing to render a record that does not match its digest; --no-verify renders it anyway)"
        )),
        e => Error::Failed(e.to_string()),
    })?;
    write_output(output, &text)
}

pub fn export(run: &Path, output: Option<&Path>) -> Result<Verdict, Error> {
    let root = orchestrate::report::rocrate::export(run, output)
        .map_err(|e| Error::Failed(e.to_string()))?;
    sayln!("{}", root.join("ro-crate-metadata.json").display());
    Ok(Verdict::Ok)
}

pub fn diff(a: &Path, b: &Path, format: orchestrate::report::DiffFormat) -> Result<Verdict, Error> {
    let text = orchestrate::report::diff(a, b, format).map_err(|e| Error::Failed(e.to_string()))?;
    write_output(None, &text)
}

pub fn runs(
    folders: &[std::path::PathBuf],
    filter: &orchestrate::track::RunFilter,
    json: bool,
) -> Result<Verdict, Error> {
    let (rows, _) =
        orchestrate::track::runs(folders, filter).map_err(|e| Error::Failed(e.to_string()))?;
    if json {
        print_json(&rows)?;
    } else {
        say!("{}", orchestrate::track::table(&rows));
    }
    Ok(Verdict::Ok)
}

pub fn recover(records: &Path) -> Result<Verdict, Error> {
    // The text says `error:` on each line that is one.
    let report =
        orchestrate::recover::recover(records).map_err(|e| Error::Failed(e.to_string()))?;
    say!("{report}");
    Ok(Verdict::Ok)
}

pub fn audit(json: bool, records: Option<&Path>) -> Result<Verdict, Error> {
    let report = orchestrate::audit::audit_host(records);
    if json {
        print_json(&report)?;
    } else {
        say!("{}", orchestrate::audit::render_text(&report));
    }
    Ok(Verdict::of(report.clean()))
}
