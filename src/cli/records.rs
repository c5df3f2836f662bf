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

#[allow(clippy::too_many_arguments)]
pub fn trend(
    step: &str,
    metric: Option<&str>,
    folders: &[std::path::PathBuf],
    plan: Option<String>,
    by: orchestrate::track::trend::Order,
    repo: &Path,
    noise: f64,
    json: bool,
) -> Result<Verdict, Error> {
    use orchestrate::track::trend;
    if !(0.0..1.0).contains(&noise) {
        return Err(Error::Usage(format!(
            "--noise {noise}: a fraction in [0, 1), e.g. 0.05"
        )));
    }
    let filter = orchestrate::track::RunFilter {
        plan,
        ..Default::default()
    };
    let (rows, _) =
        orchestrate::track::runs(folders, &filter).map_err(|e| Error::Failed(e.to_string()))?;
    if step == "tests" {
        let t = trend::tests(&rows, by, Some(repo), metric);
        if json {
            print_json(&t)?;
        } else {
            say!("{}", trend::render_tests(&t));
        }
        return Ok(Verdict::Ok);
    }
    let Some(metric) = metric else {
        return Err(Error::Usage(format!(
            "trend {step}: which metric? (`wall_ms`, or one the step writes)"
        )));
    };
    let t = trend::trend(&rows, step, metric, by, Some(repo), noise);
    if t.points.is_empty() {
        let mut known: Vec<String> = rows
            .iter()
            .flat_map(|r| r.series.iter().map(|s| format!("{} {}", s.step, s.metric)))
            .collect();
        known.sort();
        known.dedup();
        return Err(Error::Usage(format!(
            "no run has samples of {metric} for step {step}; these do: {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    }
    if json {
        print_json(&t)?;
    } else {
        say!("{}", trend::render(&t));
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
