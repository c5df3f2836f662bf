//! Text bound for a terminal or a CI log. What a plan, a record, a results file or
//! a folder name supplies is someone else's text: printed raw, an escape sequence
//! redraws the screen, a newline forges a line of the table it sits in, and on
//! GitHub Actions a line the runner reads as a workflow command (`::error …`,
//! `::add-mask::…`) acts on the job.

use std::borrow::Cow;

/// `s` with every control character written as its escape (`\n`, `\r`,
/// `\u{1b}`): one line, drawing nothing. Tabs stay.
pub fn safe(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\t') {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| match c {
                '\t' => c.to_string(),
                c if c.is_control() => c.escape_default().to_string(),
                c => c.to_string(),
            })
            .collect(),
    )
}

/// `s` for a multi-line output: control characters other than newlines and tabs
/// written as escapes.
pub fn safe_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\t' && c != '\n') {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.split('\n')
            .map(|l| safe(l).into_owned())
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// Running as a GitHub Actions step, whose runner reads workflow commands from
/// the step's output.
pub fn on_github() -> bool {
    std::env::var("GITHUB_ACTIONS").as_deref() == Ok("true")
}

/// Whether a GitHub runner would read `line` as a workflow command: `::` once the
/// line's leading blanks are trimmed, or the older `##[` form anywhere in it.
pub fn reads_as_command(line: &str) -> bool {
    line.trim_start().starts_with("::") || line.contains("##[")
}

/// `text` with every line a GitHub runner would act on fenced by
/// `::stop-commands::` and a token nobody can guess, so the runner prints it as
/// it is; `text` itself when no line would (and always off GitHub Actions).
pub fn fence_commands(text: &str) -> Cow<'_, str> {
    if !on_github() || !text.lines().any(reads_as_command) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(fence_with(text, &stop_token()))
}

fn fence_with(text: &str, token: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for piece in text.split_inclusive('\n') {
        let line = piece.trim_end_matches('\n');
        if reads_as_command(line) {
            out.push_str(&format!("::stop-commands::{token}\n"));
            out.push_str(line);
            out.push_str(&format!("\n::{token}::"));
            out.push_str(&piece[line.len()..]);
            if !piece.ends_with('\n') {
                // The resume command must end its line to be read.
                out.push('\n');
            }
        } else {
            out.push_str(piece);
        }
    }
    out
}

/// A fresh token for `::stop-commands::`: random, so text cannot end the fence.
fn stop_token() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
            ^ u128::from(std::process::id());
        b = n.to_le_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// JSON text safe for a CI log: the older `##[` command form cannot appear in
/// it (its `#` written as the escape `\u0023`, which only a string can hold),
/// and no line of pretty JSON starts with `::`.
pub fn json_for_log(json: &str) -> Cow<'_, str> {
    if json.contains("##[") {
        Cow::Owned(json.replace("##[", "#\\u0023["))
    } else {
        Cow::Borrowed(json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_text_kept() {
        assert_eq!(safe("plain\ttab"), "plain\ttab");
        assert_eq!(safe("a\u{1b}[31m\nfake-line"), "a\\u{1b}[31m\\nfake-line");
        assert_eq!(safe("\r\u{7f}\u{9b}"), "\\r\\u{7f}\\u{9b}");
        assert_eq!(safe_lines("a\nb\u{1b}"), "a\nb\\u{1b}");
    }

    #[test]
    fn commands_are_found_where_the_runner_finds_them() {
        assert!(reads_as_command("::error title=x::y"));
        assert!(reads_as_command("   ::add-mask::z"));
        assert!(reads_as_command("text ##[error]x"));
        assert!(!reads_as_command("a ::error::b"));
        assert!(!reads_as_command("step: done"));
    }

    #[test]
    fn only_command_lines_are_fenced() {
        let text = "step one\n::error title=INJECT::x\nlast";
        assert_eq!(
            fence_with(text, "T0"),
            "step one\n::stop-commands::T0\n::error title=INJECT::x\n::T0::\nlast"
        );
        assert_eq!(fence_with("a\nb\n", "T0"), "a\nb\n");
    }

    #[test]
    fn json_keeps_its_value() {
        let v = serde_json::json!({"name": "x ##[add-mask]y"});
        let s = serde_json::to_string_pretty(&v).unwrap();
        let safe = json_for_log(&s);
        assert!(!safe.contains("##["));
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, v);
    }
}
