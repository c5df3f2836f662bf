//! On GitHub Actions (`GITHUB_ACTIONS=true`): plan errors and failed checks as
//! `::error` annotations on standard output, where the runner reads workflow
//! commands, and the run's summary appended to `$GITHUB_STEP_SUMMARY`.

use std::path::{Path, PathBuf};

use orchestrate::evidence::record::Record;
use orchestrate::plan::{LoadOptions, PlanErrors};
use orchestrate::report::github;

use super::out::{command, esayln};

/// Running as a GitHub Actions step.
pub fn on_github() -> bool {
    orchestrate::term::on_github()
}

fn workspace() -> Option<PathBuf> {
    std::env::var_os("GITHUB_WORKSPACE").map(PathBuf::from)
}

/// Each plan error on its line.
pub fn plan_errors(e: &PlanErrors) {
    if on_github() {
        for a in github::plan_errors(e, workspace().as_deref()) {
            command(&a);
        }
    }
}

/// After a run: each failed check on the plan's line that declares it, and the
/// summary appended to the job's step summary. A step summary that cannot be
/// written is a warning: the run and its record stand.
pub fn after_run(plan_path: &Path, load: &LoadOptions, rec: &Record, record_dir: &Path) {
    if !on_github() {
        return;
    }
    let plan = orchestrate::plan::load_with(plan_path, load).ok();
    let file = github::workspace_path(plan_path, workspace().as_deref());
    for a in github::failed_checks(rec, plan.as_ref(), &file) {
        command(&a);
    }
    if std::env::var_os("GITHUB_STEP_SUMMARY").is_none_or(|p| p.is_empty()) {
        return;
    }
    orchestrate::sys::stall_point_blocking("summary");
    match github::step_summary(record_dir) {
        Ok(text) => append_summary(&text),
        Err(e) => esayln!("warning: cannot write the step summary: {e}"),
    }
}

/// Append `text` to GitHub's step summary when on GitHub; one that cannot be
/// written is a warning.
pub fn append_summary(text: &str) {
    if !on_github() {
        return;
    }
    let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else {
        return;
    };
    if let Err(e) = github::append_step_summary(Path::new(&summary), text) {
        esayln!(
            "warning: cannot append to GITHUB_STEP_SUMMARY ({}): {e}",
            Path::new(&summary).display()
        );
    }
}
