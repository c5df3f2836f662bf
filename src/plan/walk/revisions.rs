//! `[revisions]` of a plan, and the `revision` axis they add to the matrix.

use std::ops::Range;
use std::path::PathBuf;

use toml::de::DeTable;

use super::super::model::*;
use super::super::schema::Table;
use super::{StepSrc, Val, Walker};

impl Walker<'_> {
    /// The `revision` axis [revisions] adds to the matrix: revisions are an axis like
    /// any other, after the plan's own.
    pub(super) fn revision_axis(
        &mut self,
        root: &DeTable<'_>,
        matrix: &mut Matrix,
        revisions: &[Revision],
    ) {
        if let Some((k, _)) = root
            .get("matrix")
            .and_then(|m| m.get_ref().as_table())
            .and_then(|t| t.get_key_value("revision"))
        {
            self.err(
                k.span(),
                "`revision` is the axis [revisions] makes; a [matrix] axis cannot have that name"
                    .to_string(),
                "rename this axis",
            );
        } else {
            let values: Vec<ParamValue> = revisions
                .iter()
                .map(|r| ParamValue::String(r.name.clone()))
                .collect();
            let n = values.len();
            let before = if matrix.axes.is_empty() {
                vec![vec![]]
            } else {
                std::mem::take(&mut matrix.cells)
            };
            matrix.cells = before
                .into_iter()
                .flat_map(|c| {
                    (0..n).map(move |v| {
                        let mut c = c.clone();
                        c.push(v);
                        c
                    })
                })
                .collect();
            matrix.axes.push(Axis {
                name: "revision".into(),
                values,
            });
        }
    }

    /// `[revisions]`: each a git revision of one repository.
    pub(super) fn revisions(&mut self, v: &Val<'_>) -> Vec<Revision> {
        let Some(t) = self.table(v, "[revisions]") else {
            return Vec::new();
        };
        let mut keys: Vec<_> = t.iter().collect();
        keys.sort_by_key(|(k, _)| k.span().start);
        let mut out: Vec<Revision> = Vec::new();
        let mut first_repo: Option<(PathBuf, std::ops::Range<usize>)> = None;
        for (k, v) in keys {
            let name = k.get_ref().to_string();
            let what = format!("revision `{name}`");
            if !self.revision_name(k.span(), &name) {
                continue;
            }
            let Some(r) = self.table(v, &what) else {
                continue;
            };
            self.keys(r, Table::Revision, &[], &format!("in {what}"));
            let repo = self
                .required(r, "repo", &what, k.span(), "repo = \"..\"")
                .and_then(|v| Some((self.load_string(v, &format!("`repo` of {what}"))?, v.span())));
            let commit = self.revision_commit(r, &what);
            let worktree = r
                .get("dirty")
                .and_then(|v| self.revision_worktree(v, &what));
            let refuse_untracked = r
                .get("untracked")
                .and_then(|v| self.untracked_policy(v, &what))
                .unwrap_or(false);
            let (Some((repo, span)), Some(commit)) = (repo, commit) else {
                continue;
            };
            let repo = self.revision_repo(&repo);
            match &first_repo {
                Some((first, _)) if *first != repo => {
                    self.err(
                        span,
                        format!("{what} names another repository than the first revision"),
                        "[revisions] are revisions of one repository: give each the same `repo`",
                    );
                    continue;
                }
                Some(_) => {}
                None => first_repo = Some((repo.clone(), span)),
            }
            if worktree.is_some() && out.iter().any(|r| r.worktree.is_some()) {
                self.err(
                    k.span(),
                    format!("{what}: only one revision can run in the working tree (`dirty`)"),
                    "check the others out: leave `dirty` out",
                );
                continue;
            }
            out.push(Revision {
                name,
                repo,
                commit,
                worktree,
                refuse_untracked,
            });
        }
        // One revision is a plan that runs a commit of a repository (trend, bisect);
        // comparing needs two, which `gate = "new"` checks.
        out
    }

    /// `gate = "new"` compares against the baseline: a plan with one revision (or
    /// none) has nothing to compare with, and such a gate would silently gate on
    /// every failure.
    pub(super) fn gates_need_a_baseline(
        &mut self,
        steps: &[(Step, StepSrc)],
        revisions: &[Revision],
    ) {
        if revisions.len() >= 2 {
            return;
        }
        for (s, src) in steps {
            if let Some(span) = src.gate_span.clone() {
                let why = match revisions.first() {
                    Some(r) => format!("[revisions] declares only `{}`", r.name),
                    None => "the plan has no [revisions]".to_string(),
                };
                self.err(
                    span,
                    format!(
                        "step `{}` gates on failures new against the baseline, but {why}",
                        s.id
                    ),
                    "add a baseline, e.g. baseline = { repo = \"..\", commit = \"HEAD~1\" }, or leave `gate` out",
                );
            }
        }
    }

    /// A revision's name is a folder under the work folder (`revisions/<name>`): `.`
    /// and `..` would be another folder, and a leading `-` an option of git.
    fn revision_name(&mut self, span: Range<usize>, name: &str) -> bool {
        if name.is_empty()
            || name.starts_with('.')
            || name.starts_with('-')
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            self.err(
                span,
                format!("`{name}` is not a revision name"),
                "use letters, digits and `_ - .`, not starting with `.` or `-`, e.g. baseline, implementation",
            );
            return false;
        }
        true
    }

    /// `commit` (HEAD when left out): a revision git rev-parse reads, not an option it
    /// would take.
    fn revision_commit(&mut self, r: &DeTable<'_>, what: &str) -> Option<String> {
        match r.get("commit") {
            None => Some("HEAD".to_string()),
            Some(v) => self
                .load_string(v, &format!("`commit` of {what}"))
                .and_then(|c| {
                    if c.trim().is_empty()
                        || c.starts_with('-')
                        || c.contains(|ch: char| ch.is_whitespace() || ch.is_control())
                    {
                        self.err(
                            v.span(),
                            format!("`{c}` is not a git revision"),
                            "give a sha, a branch or tag, or HEAD~1",
                        );
                        None
                    } else {
                        Some(c)
                    }
                }),
        }
    }

    /// `dirty`: whether the revision runs in the working tree, and on what terms.
    fn revision_worktree(&mut self, v: &Val<'_>, what: &str) -> Option<WorkTree> {
        let s = self.string(v, &format!("`dirty` of {what}"))?;
        match s.as_str() {
            "allow" => Some(WorkTree::Allow),
            "refuse" => Some(WorkTree::Refuse),
            _ => {
                self.err(
                    v.span(),
                    format!("`dirty` of {what} must be \"allow\" or \"refuse\", found `{s}`"),
                    "\"allow\" runs the working tree as it is; \"refuse\" runs it only when clean; leave it out for a clean checkout of `commit`",
                );
                None
            }
        }
    }

    /// A revision's repository as a clean absolute path, so that two spellings of one
    /// repository compare equal.
    fn revision_repo(&self, repo: &str) -> PathBuf {
        let p = PathBuf::from(repo);
        let abs = if p.is_absolute() {
            p
        } else {
            PathBuf::from(&self.plan_dir).join(p)
        };
        crate::plan::lexical_clean(&abs)
    }
}
