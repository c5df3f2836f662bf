//! What a command's end means as an exit code, in one place (docs/design.md, "Exit codes"): 0 success;
//! 1 the experiment ran and failed (a step, a check, a finding); 2 usage or an
//! invalid plan; 3 the environment refused (pins drifted, devices unavailable,
//! isolation impossible when required); 130 interrupted. Commands return a
//! [`Verdict`] or an [`Error`]; `main` prints and exits with its `exit_code()`.

use crate::evidence::record::RunStatus;
use crate::plan::PlanErrors;
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

/// Why a command could not do its work.
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
    /// Reading or writing failed, or the command's own work failed.
    #[error("{0}")]
    Failed(String),
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Plan(_) | Error::Usage(_) => 2,
            Error::Refused(_) => 3,
            Error::Failed(_) => 1,
        }
    }

    /// The message as the terminal shows it: a plan's located errors as they are,
    /// anything else after `error: `.
    pub fn message(&self) -> String {
        match self {
            Error::Plan(p) => p.to_string(),
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

impl From<RunError> for Error {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Plan(p) => Error::Plan(p),
            RunError::Refused(s) => Error::Refused(s),
            RunError::Io(s) => Error::Failed(s),
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
        assert_eq!(Error::Failed("boom".into()).message(), "error: boom\n");
        assert_eq!(
            Error::Failed("error: once\n".into()).message(),
            "error: once\n"
        );
    }
}
