//! Git pins: HEAD, tree and dirty state of a repository, read without writing to it.
//!
//! `--no-optional-locks` (and `GIT_OPTIONAL_LOCKS=0`) stop `git status` from refreshing
//! the index, so verifying never touches the user's repository. git's ownership
//! check stays on: a repository another user owns is refused with git's advice
//! (`git config --global --add safe.directory DIR`), because its config can name
//! programs git runs (`core.fsmonitor`, `core.hooksPath`, filters, pagers) and they
//! would run as the orchestrator's user, root included.

use std::path::Path;
use std::time::Duration;

use super::exec::{self, Spec};
use super::report::{Details, GitDetails, PinEntry, PinKind, PinStatus, UntrackedFile};
use crate::digest::Sha256Digest;
use crate::plan::model::GitPin;

/// Long enough for `git status` on a large checkout with a cold cache.
const GIT_TIMEOUT: Duration = Duration::from_secs(120);
/// `git status -z` of a tree with very many untracked files still fits.
const GIT_MAX_OUTPUT: usize = 64 << 20;
/// Shorter prefixes are too likely to match by chance.
const MIN_SHORT_SHA: usize = 7;

#[derive(Debug, thiserror::Error)]
pub(crate) enum GitError {
    #[error(transparent)]
    Exec(#[from] exec::ExecError),
    #[error("`git {args}` failed ({code}): {stderr}")]
    Failed {
        args: String,
        code: String,
        stderr: String,
    },
    #[error("`git {0}` printed more than the output limit")]
    TooLong(String),
    #[error("cannot hash the diff: {0}")]
    Diff(std::io::Error),
}

pub(crate) fn git(repo: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    run_git(repo, args, false).map(|o| o.stdout)
}

/// Run git in `repo` as the user would, its ownership check on: a repository
/// another user owns is refused with git's own advice (its config could name
/// programs git runs: `core.fsmonitor`, hooks, filters, pagers), unless the user
/// listed it in `safe.directory` themselves.
fn run_git(repo: &Path, args: &[&str], hash_stdout: bool) -> Result<exec::Output, GitError> {
    let mut full: Vec<String> = vec![
        "--no-optional-locks".into(),
        "-C".into(),
        repo.to_string_lossy().into_owned(),
    ];
    full.extend(args.iter().map(|a| a.to_string()));
    let out = exec::run(&Spec {
        program: "git",
        args: &full,
        cwd: None,
        env: &[
            ("GIT_OPTIONAL_LOCKS", "0"),
            ("LC_ALL", "C"),
            ("GIT_TERMINAL_PROMPT", "0"),
        ],
        timeout: GIT_TIMEOUT,
        max_bytes: GIT_MAX_OUTPUT,
        hash_stdout,
    })?;
    if out.truncated {
        return Err(GitError::TooLong(args.join(" ")));
    }
    if out.code != Some(0) {
        let mut stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if stderr.contains("dubious ownership") {
            stderr.push_str(
                "\n(orchestrate runs git as git would: it does not read a repository another user owns, whose config could run commands as you; if you trust it, add it with the command above)",
            );
        }
        return Err(GitError::Failed {
            args: args.join(" "),
            code: out
                .code
                .map_or_else(|| "killed".to_string(), |c| format!("exit {c}")),
            stderr,
        });
    }
    Ok(out)
}

pub(crate) fn git_line(repo: &Path, args: &[&str]) -> Result<String, GitError> {
    Ok(String::from_utf8_lossy(&git(repo, args)?)
        .trim()
        .to_string())
}

/// Parse `git status --porcelain=v1 -z`: (dirty, untracked paths). Dirty means what
/// `git describe --dirty` means: a tracked file changed, staged or not; untracked
/// files alone do not make a tree dirty.
pub(crate) fn parse_status(raw: &[u8]) -> (bool, Vec<String>) {
    let mut untracked = Vec::new();
    let mut fields = raw.split(|b| *b == 0).filter(|f| !f.is_empty());
    let mut dirty = false;
    while let Some(f) = fields.next() {
        if f.len() < 3 {
            dirty = true;
            continue;
        }
        let (xy, path) = f.split_at(3);
        if xy.starts_with(b"??") {
            untracked.push(String::from_utf8_lossy(path).into_owned());
            continue;
        }
        dirty = true;
        if xy[0] == b'R' || xy[0] == b'C' {
            // A rename or copy carries its source path as the next field.
            fields.next();
        }
    }
    (dirty, untracked)
}

/// At most this many untracked files get a digest each; beyond it they are named.
const MAX_UNTRACKED_DIGESTS: usize = 10_000;

/// sha256 of each untracked regular file (links and others are named, not followed).
pub(crate) fn untracked_digests(toplevel: &Path, names: &[String]) -> Vec<UntrackedFile> {
    names
        .iter()
        .take(MAX_UNTRACKED_DIGESTS)
        .map(|n| UntrackedFile {
            path: n.clone(),
            sha256: crate::digest::sha256_regular(&toplevel.join(n), &crate::sys::Stop::default())
                .ok()
                .map(|(d, _)| d),
        })
        .collect()
}

/// sha256 of `git diff HEAD --binary`, hashed as it streams through a pipe: no
/// temporary file (whose name another user could plant a link at), no copy held.
pub(crate) fn diff_sha256(repo: &Path) -> Result<Sha256Digest, GitError> {
    let out = run_git(
        repo,
        &["diff", "HEAD", "--binary", "--no-color", "--no-ext-diff"],
        true,
    )?;
    out.stdout_sha256
        .map(|(d, _)| d)
        .ok_or_else(|| GitError::Diff(std::io::Error::other("the diff stream broke off")))
}

/// Whether `declared` names `head`: a full sha equal to it, or a prefix of at least
/// seven hex digits.
pub(crate) fn commit_matches(declared: &str, head: &str) -> Result<bool, String> {
    let d = declared.trim().to_ascii_lowercase();
    if d.len() < MIN_SHORT_SHA || !d.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "commit {declared:?} is not a sha (at least {MIN_SHORT_SHA} hex digits)"
        ));
    }
    Ok(head.to_ascii_lowercase().starts_with(&d))
}

/// Verify one git pin. `path` is already resolved against the plan folder.
pub(crate) fn verify_git(name: &str, pin: &GitPin, path: &Path) -> PinEntry {
    // An empty commit reads as "not pinned yet", like an empty file digest.
    let declared = pin.commit.clone().filter(|c| !c.trim().is_empty());
    let mut entry = PinEntry {
        kind: PinKind::Git,
        name: name.to_string(),
        declared: declared.clone(),
        observed: None,
        status: PinStatus::Error,
        message: None,
        details: None,
    };
    let observed = (|| -> Result<GitDetails, GitError> {
        let toplevel = git_line(path, &["rev-parse", "--show-toplevel"])?;
        let head = git_line(path, &["rev-parse", "--verify", "HEAD^{commit}"])?;
        let tree = git_line(path, &["rev-parse", "--verify", "HEAD^{tree}"])?;
        let status = git(
            path,
            &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
        )?;
        let (dirty, untracked) = parse_status(&status);
        let diff_sha256 = if dirty {
            Some(diff_sha256(path)?)
        } else {
            None
        };
        let untracked_files = untracked_digests(Path::new(&toplevel), &untracked);
        Ok(GitDetails {
            path: path.to_string_lossy().into_owned(),
            toplevel,
            head,
            tree,
            dirty,
            diff_sha256,
            untracked,
            untracked_files,
            allow_dirty: pin.allow_dirty,
            untracked_refused: pin.refuse_untracked,
        })
    })();
    let d = match observed {
        Ok(d) => d,
        Err(e) => {
            entry.message = Some(format!("{}: {e}", path.display()));
            return entry;
        }
    };
    entry.observed = Some(if d.dirty {
        format!("{} (dirty)", d.head)
    } else {
        d.head.clone()
    });

    let mut problems = Vec::new();
    let mut status = PinStatus::Ok;
    match declared.as_deref().map(|c| commit_matches(c, &d.head)) {
        None => {
            status = PinStatus::Unpinned;
            problems.push("no commit declared".to_string());
        }
        Some(Ok(true)) => {}
        Some(Ok(false)) => {
            status = PinStatus::Drift;
            problems.push(format!("HEAD is {}, not the pinned commit", d.head));
        }
        Some(Err(why)) => {
            status = PinStatus::Error;
            problems.push(why);
        }
    }
    if !d.untracked.is_empty() {
        let what = format!(
            "{} untracked file(s), recorded with their digests",
            d.untracked.len()
        );
        if pin.refuse_untracked {
            status = status.max(PinStatus::Drift);
            problems.push(format!(
                "{what}; refused by untracked = \"refuse\" (remove them, ignore them in .gitignore, or drop the setting)"
            ));
        } else {
            problems.push(what);
        }
    }
    if d.dirty {
        let what = format!(
            "work tree is dirty (tracked changes; diff sha256 {})",
            d.diff_sha256.map(|s| s.hex()).unwrap_or_default(),
        );
        if pin.allow_dirty {
            if status == PinStatus::Ok {
                status = PinStatus::Allowed;
            }
            problems.push(format!("{what}; allowed by allow_dirty"));
        } else {
            status = status.max(PinStatus::Drift);
            problems.push(format!("{what}; commit or stash it, or set allow_dirty"));
        }
    }
    entry.status = status;
    if !problems.is_empty() {
        entry.message = Some(problems.join("; "));
    }
    entry.details = Some(Details::Git(d));
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_full_shas_match_as_prefixes() {
        let head = "720e8dc0123456789abcdef0123456789abcdef0";
        assert_eq!(commit_matches("720e8dc", head), Ok(true));
        assert_eq!(commit_matches("720E8DC", head), Ok(true));
        assert_eq!(commit_matches(head, head), Ok(true));
        assert_eq!(commit_matches("6787628", head), Ok(false));
        assert!(commit_matches("720e8d", head).is_err());
        assert!(commit_matches("main", head).is_err());
    }

    #[test]
    fn status_parsing_handles_renames_and_untracked() {
        let raw = b"R  new.txt\0old.txt\0?? dir/u.txt\0 M m.txt\0";
        let (dirty, untracked) = parse_status(raw);
        assert!(dirty);
        assert_eq!(untracked, vec!["dir/u.txt".to_string()]);
        assert_eq!(parse_status(b""), (false, vec![]));
        // Untracked files alone: recorded, not dirty.
        assert_eq!(
            parse_status(b"?? a.pyc\0"),
            (false, vec!["a.pyc".to_string()])
        );
    }
}
