//! Reports rendered from records: the terminal summary, PR Markdown, HTML, diffs.

pub mod summary;
