//! GitHub Actions: the run's summary as the job's step summary (Markdown appended to
//! `$GITHUB_STEP_SUMMARY`), and plan errors and failed checks as `::error`
//! workflow commands, which GitHub shows on the plan's lines in the PR.
//!
//! Everything here formats; the command line decides when (`GITHUB_ACTIONS=true`)
//! and where to write.

use std::io::Write as _;
use std::path::Path;

use crate::plan::{Plan, PlanErrors};
use crate::record::run::Record;

/// A workflow command's message: `%`, CR and LF encoded as the runner decodes them,
/// so a message cannot end the command early or start another.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value: [`escape_data`], and `:` and `,` too.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// Where an annotation points.
#[derive(Debug, Clone, Default)]
pub struct At<'a> {
    pub file: Option<&'a str>,
    pub line: Option<usize>,
    pub col: Option<usize>,
}

/// `::error file=F,line=L,col=C,title=T::message`.
pub fn error(at: &At<'_>, title: &str, message: &str) -> String {
    let mut props: Vec<String> = Vec::new();
    if let Some(f) = at.file {
        props.push(format!("file={}", escape_property(f)));
    }
    if let Some(l) = at.line.filter(|l| *l > 0) {
        props.push(format!("line={l}"));
    }
    if let Some(c) = at.col.filter(|c| *c > 0) {
        props.push(format!("col={c}"));
    }
    props.push(format!("title={}", escape_property(title)));
    format!("::error {}::{}", props.join(","), escape_data(message))
}

/// The path an annotation names: relative to the workspace when the file is in it,
/// as GitHub matches annotations to the PR's files.
pub fn workspace_path(path: &Path, workspace: Option<&Path>) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    workspace
        .and_then(|w| {
            let w = std::path::absolute(w).ok()?;
            abs.strip_prefix(w).ok().map(Path::to_path_buf)
        })
        .unwrap_or_else(|| path.to_path_buf())
        .display()
        .to_string()
}

/// One annotation per plan error, on its line and column.
pub fn plan_errors(e: &PlanErrors, workspace: Option<&Path>) -> Vec<String> {
    match e {
        PlanErrors::Read { path, reason } => vec![error(
            &At {
                file: Some(path),
                ..At::default()
            },
            "plan cannot be read",
            reason,
        )],
        PlanErrors::Invalid {
            path, diagnostics, ..
        } => {
            let file = workspace_path(path, workspace);
            diagnostics
                .iter()
                .map(|d| {
                    let message = if d.help.is_empty() {
                        d.message.clone()
                    } else {
                        format!("{}\nhelp: {}", d.message, d.help)
                    };
                    error(
                        &At {
                            file: Some(&file),
                            line: Some(d.line),
                            col: Some(d.column),
                        },
                        "plan error",
                        &message,
                    )
                })
                .collect()
        }
    }
}

/// One annotation per check that did not pass, on the line of the plan that
/// declares it; and one per failed step, on its table.
pub fn failed_checks(rec: &Record, plan: Option<&Plan>, file: &str) -> Vec<String> {
    let line_of = |step: &str, name: &str| {
        plan.and_then(|p| p.step(step))
            .and_then(|s| s.checks.iter().find(|c| c.name == name))
            .map(|c| c.line)
    };
    rec.comparisons
        .iter()
        .filter(|c| !c.passed)
        .map(|c| {
            let message = match &c.error {
                Some(e) => format!("could not run: {e}"),
                None => format!(
                    "{} {} against {} (step {})",
                    c.metric,
                    super::format::json_value(&c.value.to_json()),
                    super::format::threshold(&c.threshold_json()),
                    c.step
                ),
            };
            error(
                &At {
                    file: Some(file),
                    line: line_of(&c.step, &c.name),
                    col: None,
                },
                &format!("check failed: {}", c.name),
                &message,
            )
        })
        .collect()
}

/// The job's step summary: the run's status and the PR body's Verification section
/// (short, with its tables in `<details>`), rendered from the record folder.
pub fn step_summary(record_dir: &Path) -> Result<String, super::ReportError> {
    let loaded = super::load::load(record_dir, false)?;
    let pr = super::render_record_in(
        &loaded.record,
        &loaded.digest,
        loaded.plan_toml.as_deref(),
        super::TemplateChoice::Pr,
        None,
        Some(record_dir),
    )?;
    let start = pr.find("## Verification").unwrap_or(0);
    let rest = &pr[start..];
    let end = rest[2..].find("\n## ").map_or(rest.len(), |i| i + 3);
    Ok(format!(
        "### orchestrate: plan {}\n\n{}\n",
        super::format::code(&loaded.record.run.plan.name),
        rest[..end].trim_start_matches("## Verification").trim()
    ))
}

/// Append `text` to the step summary file, never through a link and never making
/// it (the runner makes it; a missing one is not ours to create). Only a regular
/// file: it is opened without blocking (a FIFO nobody reads would hold `open` for
/// ever) and refused when it is anything else.
pub fn append_step_summary(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    // Said before opening (a FIFO without a reader fails to open with ENXIO, which
    // says nothing), and checked again on what was opened.
    regular_file(&std::fs::symlink_metadata(path)?)?;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    regular_file(&f.metadata()?)?;
    f.write_all(text.as_bytes())
}

fn regular_file(m: &std::fs::Metadata) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt as _;
    let kind = m.file_type();
    let what = if kind.is_file() {
        return Ok(());
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a folder"
    } else {
        "of another kind"
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("it is {what}, not a regular file"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_cannot_be_broken_out_of() {
        let at = At {
            file: Some("plans/a,b:c.toml"),
            line: Some(3),
            col: Some(7),
        };
        assert_eq!(
            error(&at, "plan error", "bad\n::warning::x 100%"),
            "::error file=plans/a%2Cb%3Ac.toml,line=3,col=7,title=plan error::bad%0A::warning::x 100%25"
        );
        let none = At::default();
        assert_eq!(error(&none, "t", "m"), "::error title=t::m");
    }
}
