//! What a command's end means as an exit code, in one place (docs/design.md, "Exit codes"): 0 success;
//! 1 the experiment ran and failed (a step, a check, a finding); 2 usage or an
//! invalid plan; 3 the environment refused (pins drifted, devices unavailable,
//! isolation impossible when required); 130 interrupted. Commands return a
//! [`Verdict`] or an [`Error`]; `main` prints and exits with its `exit_code()`.

use std::path::PathBuf;

use crate::evidence::record::RunStatus;
use crate::plan::PlanErrors;
use crate::report::ReportError;
use crate::run::RunError;

/// How a command that did its work concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Everything held.
    Ok,
    /// It ran, and what it judged failed (a step, a check, a verify finding, an
    /// unclean audit).
    Failed,
    /// A run was interrupted (Ctrl-C, SIGTERM).
    Interrupted,
    /// An exit code that is someone else's (`slurm-exec` ends as the job's command
    /// did).
    Code(u8),
}

impl Verdict {
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Ok => 0,
            Verdict::Failed => 1,
            Verdict::Interrupted => 130,
            Verdict::Code(c) => c,
        }
    }
}

/// Why a command could not do its work: each variant carries what went wrong
/// and knows its exit code ([`Error::exit_code`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The plan is invalid; the text already locates every error.
    #[error("{0}")]
    Plan(#[from] PlanErrors),
    /// Bad command-line input (a key file that does not load, ...).
    #[error("{0}")]
    Usage(String),
    /// The environment refused the command.
    #[error("{0}")]
    Refused(String),
    /// The command's own work failed.
    #[error("{0}")]
    Failed(String),
    /// A run or resume that could not go on; its variant says which code.
    #[error("{0}")]
    Run(#[from] RunError),
    /// A record that could not be read or rendered.
    #[error("{0}")]
    Report(#[from] ReportError),
    /// A record that does not match its digest, refused for rendering.
    #[error(
        "{0}\n(refusing to render a record that does not match its digest; --no-verify renders it anyway)"
    )]
    Tampered(ReportError),
    /// A file written atomically could not be (the error names it and why).
    #[error("{0}")]
    Atomic(#[from] crate::evidence::atomic::AtomicWriteError),
    /// A new file the command writes could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Plan(_) | Error::Usage(_) => 2,
            Error::Refused(_) => 3,
            Error::Run(e) => e.exit_code(),
            Error::Failed(_)
            | Error::Report(_)
            | Error::Tampered(_)
            | Error::Atomic(_)
            | Error::Write { .. } => 1,
        }
    }

    /// The message as the terminal shows it: a plan's located errors as they are,
    /// anything else after `error: `.
    pub fn message(&self) -> String {
        match self {
            Error::Plan(p) | Error::Run(RunError::Plan(p)) => p.to_string(),
            other => {
                let text = other.to_string();
                if text.starts_with("error: ") {
                    text
                } else {
                    format!("error: {text}\n")
                }
            }
        }
    }
}

impl Verdict {
    /// `Ok` when `ok`, else `Failed`.
    pub fn of(ok: bool) -> Verdict {
        if ok {
            Verdict::Ok
        } else {
            Verdict::Failed
        }
    }
}

/// A run's status is its command's verdict, for `run` and `resume` alike.
impl From<RunStatus> for Verdict {
    fn from(s: RunStatus) -> Self {
        match s {
            RunStatus::Succeeded => Verdict::Ok,
            RunStatus::Failed => Verdict::Failed,
            RunStatus::Interrupted => Verdict::Interrupted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_design() {
        assert_eq!(Verdict::Ok.exit_code(), 0);
        assert_eq!(Verdict::Failed.exit_code(), 1);
        assert_eq!(Verdict::Interrupted.exit_code(), 130);
        assert_eq!(Error::Usage("x".into()).exit_code(), 2);
        assert_eq!(Error::Refused("x".into()).exit_code(), 3);
        assert_eq!(Error::Failed("x".into()).exit_code(), 1);
        assert_eq!(Error::Run(RunError::Refused("x".into())).exit_code(), 3);
        assert_eq!(Error::Run(RunError::Io("x".into())).exit_code(), 1);
        let write = Error::Write {
            path: PathBuf::from("/r/out.md"),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert_eq!(write.exit_code(), 1);
        assert!(write
            .message()
            .starts_with("error: cannot write /r/out.md: "));
        assert_eq!(Error::Failed("boom".into()).message(), "error: boom\n");
        assert_eq!(
            Error::Failed("error: once\n".into()).message(),
            "error: once\n"
        );
    }
}
