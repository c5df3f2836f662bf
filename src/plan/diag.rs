//! Diagnostics: one error at a byte span of the plan, rendered like rustc/miette with
//! `file:line:col`, the source line, a caret run under the span, and a `help:` line.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// One problem in a plan, located in its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// 1-based line of the span's start (0 only when the file could not be read).
    pub line: usize,
    /// 1-based column of the span's start, counted in characters.
    pub column: usize,
    /// Byte range in the source the error is about.
    pub span: Range<usize>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub help: String,
}

/// Every error found in a plan, all at once.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PlanErrors {
    /// The file could not be read at all.
    #[error("error: cannot read plan {path}: {reason}\n  = help: check the path and its permissions\n1 error in {path}\n")]
    Read {
        /// The path as given.
        path: String,
        /// The OS error text.
        reason: String,
    },
    /// The file was read and has errors; `rendered` is the full report.
    #[error("{rendered}")]
    Invalid {
        /// The path as given.
        path: PathBuf,
        /// Errors in source order.
        diagnostics: Vec<Diagnostic>,
        /// The rendered report, ending with `N errors in FILE`.
        rendered: String,
    },
}

impl PlanErrors {
    /// The individual errors (empty for a read failure).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            PlanErrors::Read { .. } => &[],
            PlanErrors::Invalid { diagnostics, .. } => diagnostics,
        }
    }

    /// Sort diagnostics by position, drop exact duplicates and render them.
    pub(crate) fn from_diagnostics(path: &Path, source: &str, mut diags: Vec<Diagnostic>) -> Self {
        diags.sort_by(|a, b| {
            (a.span.start, a.span.end, &a.message).cmp(&(b.span.start, b.span.end, &b.message))
        });
        diags.dedup();
        let rendered = render(path, source, &diags);
        PlanErrors::Invalid {
            path: path.to_path_buf(),
            diagnostics: diags,
            rendered,
        }
    }
}

impl PlanErrors {
    /// Errors found in `merged` (a plan with another included, then `--set`), shown in
    /// the file each line came from: a line written in one of `files` (path, text) is
    /// shown there, any other line in the merged text under `label`.
    pub(crate) fn relocated(self, merged: &str, files: &[(&Path, &str)], label: &Path) -> Self {
        let PlanErrors::Invalid { diagnostics, .. } = self else {
            return self;
        };
        let from = LineIndex::new(merged);
        let mut groups: Vec<(PathBuf, String, Vec<Diagnostic>)> = files
            .iter()
            .map(|(p, t)| (p.to_path_buf(), t.to_string(), Vec::new()))
            .chain(std::iter::once((
                label.to_path_buf(),
                merged.to_string(),
                Vec::new(),
            )))
            .collect();
        let n = diagnostics.len();
        for d in diagnostics {
            let line = d.line.saturating_sub(1);
            let text = from.line_text(line);
            let start = from.starts.get(line).copied().unwrap_or(0);
            let moved = (!text.trim().is_empty())
                .then(|| {
                    groups
                        .iter()
                        .take(files.len())
                        .enumerate()
                        .find_map(|(g, (_, src, _))| {
                            let index = LineIndex::new(src);
                            (0..index.starts.len())
                                .find(|&l| index.line_text(l) == text)
                                .map(|l| (g, index.starts[l]))
                        })
                })
                .flatten();
            match moved {
                Some((g, at)) => {
                    let index = LineIndex::new(&groups[g].1);
                    let shift = |o: usize| at + o.saturating_sub(start);
                    let nd = index.diag(shift(d.span.start)..shift(d.span.end), d.message, d.help);
                    groups[g].2.push(nd);
                }
                None => {
                    let last = groups.len() - 1;
                    groups[last].2.push(d);
                }
            }
        }
        let mut rendered = String::new();
        let mut all = Vec::with_capacity(n);
        for (path, src, diags) in groups.into_iter().filter(|g| !g.2.is_empty()) {
            let text = render(&path, &src, &diags);
            // One count at the end, for the plan that was run.
            let body = text.rsplit_once("\n").map_or(text.as_str(), |(b, _)| b);
            let body = body.rsplit_once('\n').map_or("", |(b, _)| b);
            rendered.push_str(body);
            rendered.push('\n');
            all.extend(diags);
        }
        let _ = fmt::Write::write_fmt(
            &mut rendered,
            format_args!(
                "{n} error{} in {}\n",
                if n == 1 { "" } else { "s" },
                label.display()
            ),
        );
        PlanErrors::Invalid {
            path: label.to_path_buf(),
            diagnostics: all,
            rendered,
        }
    }
}

/// Maps byte offsets to 1-based line and character column.
pub(crate) struct LineIndex<'s> {
    source: &'s str,
    starts: Vec<usize>,
}

impl<'s> LineIndex<'s> {
    pub(crate) fn new(source: &'s str) -> Self {
        let mut starts = vec![0];
        starts.extend(
            source
                .bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        LineIndex { source, starts }
    }

    /// Clamp an offset into the source and back onto a char boundary.
    pub(crate) fn clamp(&self, mut offset: usize) -> usize {
        offset = offset.min(self.source.len());
        while !self.source.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    }

    /// Index of the line holding `offset` (0-based).
    fn line_of(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        }
    }

    /// 1-based (line, column in chars).
    pub(crate) fn position(&self, offset: usize) -> (usize, usize) {
        let offset = self.clamp(offset);
        let line = self.line_of(offset);
        let start = self.starts.get(line).copied().unwrap_or(0);
        let col = self
            .source
            .get(start..offset)
            .map_or(0, |s| s.chars().count());
        (line + 1, col + 1)
    }

    /// The text of a 0-based line without its line ending.
    fn line_text(&self, line: usize) -> &'s str {
        let start = self.starts.get(line).copied().unwrap_or(0);
        let end = self
            .starts
            .get(line + 1)
            .map_or(self.source.len(), |e| e.saturating_sub(1));
        let text = self.source.get(start..end).unwrap_or("");
        text.strip_suffix('\r').unwrap_or(text)
    }

    /// Build a diagnostic at `span` (clamped into the source).
    pub(crate) fn diag(&self, span: Range<usize>, message: String, help: String) -> Diagnostic {
        let start = self.clamp(span.start);
        let end = self.clamp(span.end.max(start));
        let (line, column) = self.position(start);
        Diagnostic {
            line,
            column,
            span: start..end,
            message,
            help,
        }
    }
}

fn render(path: &Path, source: &str, diags: &[Diagnostic]) -> String {
    use fmt::Write;
    let index = LineIndex::new(source);
    let mut out = String::new();
    for d in diags {
        let line_no = d.line.to_string();
        let pad = " ".repeat(line_no.len());
        // A message quotes the plan (a key, a name): one line whatever it holds.
        let _ = writeln!(out, "error: {}", crate::term::safe(&d.message));
        let shown_path = path.display().to_string();
        let shown_path = crate::term::safe(&shown_path);
        let _ = writeln!(out, "{pad}--> {shown_path}:{}:{}", d.line, d.column);
        let _ = writeln!(out, "{pad} |");
        let text = index.line_text(d.line.saturating_sub(1));
        let shown: String = text
            .chars()
            .map(|c| if c.is_control() && c != '\t' { ' ' } else { c })
            .collect();
        let _ = writeln!(out, "{line_no} | {shown}");
        // Carets under the part of the span on this line, at least one.
        let prefix: String = text
            .chars()
            .take(d.column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let line_start = index
            .starts
            .get(d.line.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        let line_end = line_start + text.len();
        let width = source
            .get(d.span.start..d.span.end.min(line_end).max(d.span.start))
            .map_or(0, |s| s.chars().count())
            .max(1);
        let _ = writeln!(out, "{pad} | {prefix}{}", "^".repeat(width));
        let _ = writeln!(out, "{pad} = help: {}", crate::term::safe(&d.help));
        out.push('\n');
    }
    let n = diags.len();
    let _ = writeln!(
        out,
        "{n} error{} in {}",
        if n == 1 { "" } else { "s" },
        path.display()
    );
    out
}

/// Levenshtein distance, for "did you mean" suggestions.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The closest candidate within a distance that scales with the word's length.
pub(crate) fn suggest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1) + 1;
    let lower = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| {
            let d = if c.to_ascii_lowercase() == lower {
                0
            } else {
                edit_distance(word, c)
            };
            (d, c)
        })
        .filter(|&(d, _)| d <= limit)
        .min()
        .map(|(_, c)| c)
}

/// `did you mean `x`?` or a list of what is allowed.
pub(crate) fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    match suggest(word, candidates.iter().copied()) {
        Some(s) => format!("did you mean `{s}`?"),
        None if candidates.is_empty() => "remove it".to_string(),
        None => format!(
            "remove it; allowed here: {}",
            candidates
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_rustc() {
        let src = "a = 1\nrepeat = 3\n";
        let idx = LineIndex::new(src);
        let d = idx.diag(
            6..12,
            "unknown key `repeat`".into(),
            "did you mean `repeats`?".into(),
        );
        assert_eq!((d.line, d.column), (2, 1));
        let e = PlanErrors::from_diagnostics(Path::new("x.toml"), src, vec![d]);
        assert_eq!(
            e.to_string(),
            "error: unknown key `repeat`\n --> x.toml:2:1\n  |\n2 | repeat = 3\n  | ^^^^^^\n  = help: did you mean `repeats`?\n\n1 error in x.toml\n"
        );
    }

    #[test]
    fn columns_count_chars() {
        let src = "é = \"x\"\n";
        let idx = LineIndex::new(src);
        assert_eq!(idx.position(src.find('=').unwrap_or(0)), (1, 3));
        assert_eq!(idx.position(src.len()), (2, 1));
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggest("repeat", ["repeats", "warmup"]), Some("repeats"));
        assert_eq!(suggest("zzzzzz", ["repeats", "warmup"]), None);
    }
}
