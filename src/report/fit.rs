//! A PR body within GitHub's limit: a comment or description holds at most 65,536
//! characters, and a longer one is refused whole by the API. A wide sweep's body
//! (every failing check of every cell) can pass it; it is then cut at a line, its
//! open `<details>` and code fences closed, and ends saying what was left out and
//! where all of it is.

use std::borrow::Cow;

/// GitHub's limit on an issue or pull request body, in characters.
pub const GITHUB_BODY_LIMIT: usize = 65_536;

/// Room kept for the closing tags and the note.
const NOTE_ROOM: usize = 1_024;

/// `body`, or as much of it as fits `limit` characters with a note on the rest.
pub fn fit_body(body: &str, limit: usize) -> Cow<'_, str> {
    let total = body.chars().count();
    if total <= limit {
        return Cow::Borrowed(body);
    }
    let budget = limit.saturating_sub(NOTE_ROOM);
    let mut kept = String::new();
    let mut chars = 0;
    let mut lines = 0;
    for line in body.split_inclusive('\n') {
        let n = line.chars().count();
        if chars + n > budget {
            break;
        }
        kept.push_str(line);
        chars += n;
        lines += 1;
    }
    let left = body.split_inclusive('\n').count() - lines;
    if !kept.ends_with('\n') && !kept.is_empty() {
        kept.push('\n');
    }
    // Close what the cut left open, innermost first: a code fence, then details.
    let fences = kept
        .lines()
        .filter(|l| l.trim_start().starts_with("```"))
        .count();
    if fences % 2 == 1 {
        kept.push_str("```\n");
    }
    let open = kept.matches("<details").count();
    let closed = kept.matches("</details>").count();
    for _ in closed..open {
        kept.push_str("\n</details>\n");
    }
    kept.push_str(&format!(
        "\n> **This body was cut to fit GitHub's limit of {limit} characters**: {left} of its lines ({} of {total} characters) are left out. All of it is in `report.html` and `record.json` in the run's folder (`orchestrate report -t html RUN` renders it again).\n",
        total - chars
    ));
    Cow::Owned(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_body_is_kept_and_a_long_one_cut_closed_and_said() {
        assert_eq!(fit_body("a\nb\n", 100), "a\nb\n");
        let mut body = String::from("## Verification\n\n<details><summary>all</summary>\n\n```\n");
        for i in 0..5_000 {
            body.push_str(&format!(
                "- FAIL check {i}: `kv_rel_rms` 0.5 against 0.01\n"
            ));
        }
        body.push_str("```\n</details>\n");
        let out = fit_body(&body, GITHUB_BODY_LIMIT);
        assert!(out.chars().count() <= GITHUB_BODY_LIMIT, "{}", out.len());
        assert!(out.starts_with("## Verification\n"));
        assert_eq!(
            out.matches("<details").count(),
            out.matches("</details>").count()
        );
        assert_eq!(out.lines().filter(|l| l.starts_with("```")).count() % 2, 0);
        assert!(out.contains("This body was cut to fit GitHub's limit of 65536 characters"));
        assert!(out.contains("`report.html`"));
    }
}
