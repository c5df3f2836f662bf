//! Reports rendered from records: PR Markdown, HTML, summaries, diffs.
