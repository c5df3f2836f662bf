//! Number formatting shared by every renderer, and the tera filters built on it
//! (`bytes`, `duration_ms`, `percent`, `short_hash`, `md_text`, `md_line`, `md_cell`, `code`, `code_cell`,
//! `json_value`).

use std::collections::HashMap;

use tera::{Tera, Value};

pub use crate::units::{bytes, duration_ms};

/// A fraction as a percentage: 0.0315 -> `3.15%`, 0.8333 -> `83.33%`; small values
/// keep 3 significant digits (`0.00123%`).
pub fn percent(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    format!("{}%", crate::units::fixed_sig(x * 100.0, 2, 3))
}

/// A ratio or an interval end: `1.018`, `0.551`, and `0.000412` for a small one
/// (at least 3 decimals and 3 significant digits).
pub fn ratio(x: f64) -> String {
    crate::units::fixed_sig(x, 3, 3)
}

/// The first `len` characters of a hash, without a `sha256:` / `git-tree:` prefix.
pub fn short_hash(s: &str, len: usize) -> String {
    let s = s.rsplit(':').next().unwrap_or(s);
    s.chars().take(len).collect()
}

/// Text that reads as itself inside a Markdown line, escaped only where GitHub
/// would misread it: emphasis and strikethrough delimiters that could open or close
/// (a `_` inside a word, as in `prefill_ms`, cannot), links, code spans, math,
/// mentions and raw HTML; line breaks as spaces. Whatever else a reader sees raw (a
/// terminal, a mail notification) reads as written. Templates mark its output
/// `safe`: it is escaped already. A check name or a failure's reason lands in a
/// bullet as the text it is.
pub fn md_text(s: &str) -> String {
    escape_md(s, false, false)
}

/// [`md_text`] for text that starts a line or a list item: a heading, list, quote or
/// thematic-break marker at its start is escaped too.
pub fn md_line(s: &str) -> String {
    escape_md(s, true, false)
}

/// Whether the character at `i` of `cs` may open or close an emphasis or strike
/// run: CommonMark's flanking rules, made stricter (a delimiter beside any
/// non-space counts), except that `_` inside a word never does.
fn may_delimit(cs: &[char], i: usize) -> bool {
    let before = i.checked_sub(1).map(|j| cs[j]);
    let after = cs.get(i + 1).copied();
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    if cs[i] == '_' && word(before) && word(after) {
        return false;
    }
    let solid = |c: Option<char>| c.is_some_and(|c| !c.is_whitespace());
    solid(before) || solid(after)
}

fn escape_md(s: &str, line_start: bool, in_cell: bool) -> String {
    let cs: Vec<char> = s.replace(['\n', '\r'], " ").chars().collect();
    let count = |c: char| cs.iter().filter(|&&x| x == c).count();
    let (backticks, dollars) = (count('`'), count('$'));
    let mut out = String::with_capacity(cs.len() + 8);
    for (i, &c) in cs.iter().enumerate() {
        let next = cs.get(i + 1).copied();
        let prev = i.checked_sub(1).map(|j| cs[j]);
        // Raw HTML, autolinks and entities: as entities, which GitHub shows as the
        // characters.
        match c {
            '<' if next.is_some_and(|n| n.is_ascii_alphabetic() || "/!?".contains(n)) => {
                out.push_str("&lt;");
                continue;
            }
            '&' if next.is_some_and(|n| n.is_ascii_alphanumeric() || n == '#') => {
                out.push_str("&amp;");
                continue;
            }
            '>' if line_start && cs[..i].iter().all(|c| *c == ' ') => {
                out.push_str("&gt;");
                continue;
            }
            _ => {}
        }
        let at_start = line_start && cs[..i].iter().all(|c| *c == ' ');
        let special = match c {
            '\\' => next.is_some_and(|n| n.is_ascii_punctuation()) || next.is_none(),
            '`' => backticks > 1,
            '*' | '_' | '~' => may_delimit(&cs, i),
            // Links, images and footnotes all need a bracket.
            '[' | ']' => true,
            '!' => next == Some('['),
            '$' => dollars > 1,
            '@' => {
                next.is_some_and(|n| n.is_ascii_alphanumeric())
                    && !prev.is_some_and(|p| p.is_ascii_alphanumeric())
            }
            '|' => in_cell,
            '-' | '+' | '=' | '#' => at_start,
            '.' | ')' => line_start && i > 0 && cs[..i].iter().all(|b| b.is_ascii_digit()),
            _ => false,
        };
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Text safe inside a Markdown table cell: [`md_text`], pipes escaped too.
pub fn md_cell(s: &str) -> String {
    escape_md(s, false, true)
}

/// `s` as a Markdown code span that shows exactly `s`, whatever it holds: fenced by
/// one backtick more than its longest run of backticks, padded with a space where
/// it starts or ends with a backtick (CommonMark's rule, so `` a`b `` stays whole);
/// a line break becomes a space. A test id with backticks cannot break out of it.
pub fn code(s: &str) -> String {
    let s = s.replace(['\n', '\r'], " ");
    let (mut longest, mut run) = (0, 0);
    for c in s.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest + 1);
    let spaced = s.starts_with(' ') && s.ends_with(' ') && !s.trim().is_empty();
    let pad = if s.starts_with('`') || s.ends_with('`') || spaced {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{s}{pad}{fence}")
}

/// [`code`] for a table cell: its pipes escaped as GFM tables want (inside a code
/// span too).
pub fn code_cell(s: &str) -> String {
    code(s).replace('|', "\\|")
}

/// A JSON value in one line: strings bare, numbers as JSON writes them.
pub fn json_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "-".to_string(),
        other => other.to_string(),
    }
}

/// A number for people: integers whole, others with four significant digits
/// (scientific when very small or very large).
pub fn number(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x.fract() == 0.0 && x.abs() < 1e15 {
        return format!("{x:.0}");
    }
    let a = x.abs();
    if !(1e-4..1e9).contains(&a) {
        return format!("{x:.3e}");
    }
    let decimals = (3 - a.log10().floor() as i64).clamp(0, 10) as usize;
    format!("{x:.decimals$}")
}

/// A check threshold for people: `{"max": 0.01}` -> `≤ 0.01`; others as JSON.
pub fn threshold(v: &serde_json::Value) -> String {
    let Some(obj) = v.as_object() else {
        return json_value(v);
    };
    let parts: Vec<String> = obj
        .iter()
        .map(|(k, x)| match k.as_str() {
            "max" => format!("≤ {}", json_value(x)),
            "min" => format!("≥ {}", json_value(x)),
            "equals" => format!("= {}", json_value(x)),
            other => format!("{other} {}", json_value(x)),
        })
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

fn num(v: &Value, filter: &str) -> tera::Result<f64> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| tera::Error::msg(format!("{filter}: bad number"))),
        Value::String(s) => s
            .parse::<f64>()
            .map_err(|_| tera::Error::msg(format!("{filter}: `{s}` is not a number"))),
        other => Err(tera::Error::msg(format!(
            "{filter}: `{other}` is not a number"
        ))),
    }
}

type Args = HashMap<String, Value>;

/// Register every filter of this module on `tera`.
pub fn register(tera: &mut Tera) {
    tera.register_filter("bytes", |v: &Value, _: &Args| {
        Ok(Value::String(bytes(num(v, "bytes")?)))
    });
    tera.register_filter("duration_ms", |v: &Value, _: &Args| {
        Ok(Value::String(duration_ms(num(v, "duration_ms")?)))
    });
    tera.register_filter("percent", |v: &Value, _: &Args| {
        Ok(Value::String(percent(num(v, "percent")?)))
    });
    tera.register_filter("short_hash", |v: &Value, args: &Args| {
        let len = args.get("len").and_then(|l| l.as_u64()).unwrap_or(7) as usize;
        match v {
            Value::String(s) => Ok(Value::String(short_hash(s, len))),
            other => Err(tera::Error::msg(format!(
                "short_hash: `{other}` is not a string"
            ))),
        }
    });
    tera.register_filter("md_cell", |v: &Value, _: &Args| {
        Ok(Value::String(md_cell(&json_value(v))))
    });
    tera.register_filter("md_text", |v: &Value, _: &Args| {
        Ok(Value::String(md_text(&json_value(v))))
    });
    tera.register_filter("md_line", |v: &Value, _: &Args| {
        Ok(Value::String(md_line(&json_value(v))))
    });
    tera.register_filter("code", |v: &Value, _: &Args| {
        Ok(Value::String(code(&json_value(v))))
    });
    tera.register_filter("code_cell", |v: &Value, _: &Args| {
        Ok(Value::String(code_cell(&json_value(v))))
    });
    tera.register_filter("json_value", |v: &Value, _: &Args| {
        Ok(Value::String(json_value(v)))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(filter: &str, input: Value, args: &str) -> String {
        let mut t = Tera::default();
        register(&mut t);
        let mut ctx = tera::Context::new();
        ctx.insert("x", &input);
        t.render_str(&format!("{{{{ x | {filter}{args} }}}}"), &ctx)
            .unwrap()
    }

    #[test]
    fn bytes_filter() {
        assert_eq!(apply("bytes", 1536.into(), ""), "1.5 KiB");
        assert_eq!(apply("bytes", 512.into(), ""), "512 B");
        assert_eq!(apply("bytes", 4294967296u64.into(), ""), "4.0 GiB");
    }

    #[test]
    fn duration_filter() {
        assert_eq!(apply("duration_ms", 1234.5.into(), ""), "1.23 s");
        assert_eq!(apply("duration_ms", 12.34.into(), ""), "12.3 ms");
        assert_eq!(apply("duration_ms", 0.25.into(), ""), "0.250 ms");
        assert_eq!(apply("duration_ms", 150000.into(), ""), "2.50 min");
    }

    #[test]
    fn percent_filter() {
        assert_eq!(apply("percent", 0.0315.into(), ""), "3.15%");
        assert_eq!(apply("percent", 0.0.into(), ""), "0.00%");
        assert_eq!(apply("percent", 0.0000123.into(), ""), "0.00123%");
    }

    #[test]
    fn short_hash_filter() {
        let h = "sha256:0123456789abcdef0123";
        assert_eq!(apply("short_hash", h.into(), ""), "0123456");
        assert_eq!(apply("short_hash", h.into(), "(len=12)"), "0123456789ab");
    }

    #[test]
    fn thresholds() {
        assert_eq!(threshold(&serde_json::json!({"max": 0.01})), "≤ 0.01");
        assert_eq!(threshold(&serde_json::json!({"min": 64})), "≥ 64");
        assert_eq!(threshold(&serde_json::Value::Null), "-");
    }

    #[test]
    fn md_cell_filter() {
        assert_eq!(apply("md_cell", "a|b\nc".into(), ""), "a\\|b c");
    }

    #[test]
    fn md_text_escapes_markup_and_line_starts() {
        assert_eq!(md_text("a *b* _c_"), "a \\*b\\* \\_c\\_");
        assert_eq!(md_text("<script>&amp;"), "&lt;script>&amp;amp;");
        assert_eq!(md_line("# not a heading"), "\\# not a heading");
        assert_eq!(md_line("- x"), "\\- x");
        assert_eq!(md_line("1. x"), "1\\. x");
        assert_eq!(md_text("1. x"), "1. x");
        assert_eq!(md_text("v1.2 @team $x$"), "v1.2 \\@team \\$x\\$");
        assert_eq!(md_text("a-b 0.17%"), "a-b 0.17%");
    }

    #[test]
    fn md_text_leaves_alone_what_markdown_reads_as_itself() {
        for plain in [
            "prefill_ms and first_logits",
            "2 * 3 = 6, a > b, x & y, 1 < 2",
            "it's 5$ (one dollar sign), user@example.com",
            "a lone ` backtick, C:\\dir and ~ alone",
            "gate = \"new\": nothing new fails",
        ] {
            assert_eq!(md_text(plain), plain);
        }
        assert_eq!(md_text("[8,8,256,8]"), "\\[8,8,256,8\\]");
        assert_eq!(md_cell("a|b"), "a\\|b");
        assert_eq!(md_text("a|b"), "a|b");
    }

    #[test]
    fn non_numbers_are_errors_not_panics() {
        let mut t = Tera::default();
        register(&mut t);
        let mut ctx = tera::Context::new();
        ctx.insert("x", &vec![1]);
        assert!(t.render_str("{{ x | bytes }}", &ctx).is_err());
    }
}
