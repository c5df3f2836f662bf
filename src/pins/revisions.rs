//! `[revisions]`: resolve each named revision to a commit and tree, and check the
//! ones that are not the working tree out under the run's work folder, as a shared
//! clone (`git clone --shared`): it reads the repository's objects and writes
//! nothing to it, so the user's checkout, index, branches and worktree list are as
//! they were, even when the run is killed.

use std::path::{Path, PathBuf};

use super::git::{diff_sha256, git, git_line, parse_status, untracked_digests};
use crate::plan::model::{Revision, WorkTree};
pub use crate::record::pins::RevisionRecord;

/// The revision the others are compared against: the one named `baseline`, else
/// the first declared; none when there is only one (nothing to compare with).
pub fn baseline_name(revisions: &[Revision]) -> Option<&str> {
    if revisions.len() < 2 {
        return None;
    }
    revisions
        .iter()
        .find(|r| r.name == "baseline")
        .or(revisions.first())
        .map(|r| r.name.as_str())
}

/// Why a revision cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    /// git could not say what the plan asks of it.
    #[error("revision `{revision}` ({repo}): {what}: {message}")]
    Git {
        revision: String,
        repo: String,
        what: String,
        message: String,
    },
    #[error("revision `{revision}`: `dirty` runs the working tree, which is at {head}, but `commit = \"{requested}\"` is {commit}; drop `dirty` to check {requested} out, or set commit = \"HEAD\"")]
    HeadElsewhere {
        revision: String,
        head: String,
        requested: String,
        commit: String,
    },
    #[error("revision `{0}`: the working tree has tracked changes and `dirty = \"refuse\"`; commit or stash them, or set dirty = \"allow\"")]
    Dirty(String),
    #[error("revision `{revision}`: {count} untracked file(s) (e.g. `{example}`) and `untracked = \"refuse\"`")]
    Untracked {
        revision: String,
        count: usize,
        example: String,
    },
    /// The shared clone could not be made or does not hold the commit's tree.
    #[error("revision `{revision}`: {what}: {message}")]
    Checkout {
        revision: String,
        what: String,
        message: String,
    },
    #[error("revision `{revision}`: the checkout's tree is {found}, not {want}")]
    TreeMismatch {
        revision: String,
        found: String,
        want: String,
    },
}

/// Resolve every revision (before anything runs: a revision that does not exist, or
/// a working tree that must be clean and is not, refuses the run).
pub fn resolve(
    revisions: &[Revision],
    work_dir: &Path,
) -> Result<Vec<RevisionRecord>, RevisionError> {
    let base = baseline_name(revisions).unwrap_or_default().to_string();
    revisions
        .iter()
        .map(|r| {
            let e = |what: &str, err: &dyn std::fmt::Display| RevisionError::Git {
                revision: r.name.clone(),
                repo: r.repo.display().to_string(),
                what: what.to_string(),
                message: err.to_string(),
            };
            let top = git_line(&r.repo, &["rev-parse", "--show-toplevel"])
                .map_err(|x| e("not a git repository", &x))?;
            let spec = format!("{}^{{commit}}", r.commit);
            let commit = git_line(
                &r.repo,
                &["rev-parse", "--verify", "--end-of-options", &spec],
            )
            .map_err(|x| e(&format!("`{}` names no commit", r.commit), &x))?;
            let tree = git_line(
                &r.repo,
                &["rev-parse", "--verify", &format!("{commit}^{{tree}}")],
            )
            .map_err(|x| e("no tree", &x))?;
            let mut rec = RevisionRecord {
                name: r.name.clone(),
                repo: top.clone(),
                requested: r.commit.clone(),
                commit: commit.clone(),
                tree,
                dir: String::new(),
                mode: "checkout".into(),
                baseline: r.name == base,
                dirty: false,
                diff_sha256: None,
                untracked: Vec::new(),
            };
            match r.worktree {
                None => {
                    rec.dir = work_dir
                        .join(crate::plan::matrix::revision_folder(&r.name))
                        .display()
                        .to_string();
                }
                Some(policy) => {
                    let head = git_line(&r.repo, &["rev-parse", "--verify", "HEAD^{commit}"])
                        .map_err(|x| e("no HEAD", &x))?;
                    if head != commit {
                        return Err(RevisionError::HeadElsewhere {
                            revision: r.name.clone(),
                            head,
                            requested: r.commit.clone(),
                            commit,
                        });
                    }
                    let status = git(
                        &r.repo,
                        &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
                    )
                    .map_err(|x| e("git status", &x))?;
                    let (dirty, untracked) = parse_status(&status);
                    if dirty && policy == WorkTree::Refuse {
                        return Err(RevisionError::Dirty(r.name.clone()));
                    }
                    if !untracked.is_empty() && r.refuse_untracked {
                        return Err(RevisionError::Untracked {
                            revision: r.name.clone(),
                            count: untracked.len(),
                            example: untracked[0].clone(),
                        });
                    }
                    rec.mode = "worktree".into();
                    rec.dir = r.repo.display().to_string();
                    rec.dirty = dirty;
                    rec.diff_sha256 = if dirty {
                        Some(diff_sha256(&r.repo).map_err(|x| e("git diff", &x))?)
                    } else {
                        None
                    };
                    rec.untracked = untracked_digests(Path::new(&top), &untracked);
                }
            }
            Ok(rec)
        })
        .collect()
}

/// Check out every revision that is not the working tree into its `dir`.
pub fn check_out(revisions: &[RevisionRecord]) -> Result<(), RevisionError> {
    for r in revisions.iter().filter(|r| r.mode == "checkout") {
        let dir = PathBuf::from(&r.dir);
        let e = |what: &str, err: &dyn std::fmt::Display| RevisionError::Checkout {
            revision: r.name.clone(),
            what: what.to_string(),
            message: err.to_string(),
        };
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent).map_err(|x| e(&parent.display().to_string(), &x))?;
        }
        // `--shared` borrows the objects (alternates) instead of copying them.
        let parent = dir.parent().unwrap_or(Path::new("/"));
        git(
            parent,
            &[
                "clone",
                "--quiet",
                "--shared",
                "--no-checkout",
                "--",
                &r.repo,
                &r.dir,
            ],
        )
        .map_err(|x| e("git clone --shared", &x))?;
        git(&dir, &["checkout", "--quiet", "--detach", &r.commit])
            .map_err(|x| e("git checkout", &x))?;
        let head = git_line(&dir, &["rev-parse", "HEAD^{tree}"]).map_err(|x| e("rev-parse", &x))?;
        if head != r.tree {
            return Err(RevisionError::TreeMismatch {
                revision: r.name.clone(),
                found: head,
                want: r.tree.clone(),
            });
        }
    }
    Ok(())
}
