//! Tera templates: the built-in PR and HTML templates (embedded at build time) or a
//! user's file. Every template sees `f` (the facts), `charts` (SVG geometry) and
//! `record` (the record itself).

use std::path::Path;

use super::{charts, error::ReportError, facts, format, Input, Renderer};

/// File name of the built-in PR template (also looked up in a plan's `templates/`).
pub const PR_NAME: &str = "pr.md.tera";
/// File name of the built-in HTML template.
pub const HTML_NAME: &str = "report.html.tera";

const PR_SOURCE: &str = include_str!("../../templates/pr.md.tera");
const HTML_SOURCE: &str = include_str!("../../templates/report.html.tera");

/// One tera template and the name that decides its escaping.
pub struct TeraRenderer {
    /// Without `.tera`: `pr.md`, `report.html`, ...
    name: String,
    source: String,
}

impl TeraRenderer {
    /// The built-in PR body.
    pub fn pr() -> TeraRenderer {
        TeraRenderer {
            name: "pr.md".into(),
            source: PR_SOURCE.into(),
        }
    }

    /// The built-in HTML report.
    pub fn html() -> TeraRenderer {
        TeraRenderer {
            name: "report.html".into(),
            source: HTML_SOURCE.into(),
        }
    }

    /// A template file; its name without `.tera` picks autoescaping.
    pub fn from_file(path: &Path) -> Result<TeraRenderer, ReportError> {
        let source = std::fs::read_to_string(path).map_err(|e| ReportError::Read {
            path: path.to_path_buf(),
            error: e.to_string(),
        })?;
        let file = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "template".into());
        Ok(TeraRenderer {
            name: file.strip_suffix(".tera").unwrap_or(&file).to_string(),
            source,
        })
    }
}

impl Renderer for TeraRenderer {
    fn render(&self, input: &Input<'_>) -> Result<String, ReportError> {
        let err = |e: tera::Error| ReportError::Template {
            name: self.name.clone(),
            error: chain(&e),
        };
        let mut tera = tera::Tera::default();
        if self.name.ends_with(".md") {
            // Markdown renders raw HTML: every value a plan or record supplies is
            // escaped so `<script>` in a description or check name stays text.
            tera.autoescape_on(vec![".md"]);
            tera.set_escape_fn(escape_md);
        } else {
            tera.autoescape_on(vec![".html", ".htm", ".xml"]);
        }
        format::register(&mut tera);
        // A report shows what the record holds, never the renderer's environment.
        tera.register_function(
            "get_env",
            |_: &std::collections::HashMap<String, tera::Value>| -> tera::Result<tera::Value> {
                Err(tera::Error::msg(
                    "get_env is disabled in report templates: a report shows only what the record holds",
                ))
            },
        );
        tera.add_raw_template(&self.name, &self.source)
            .map_err(err)?;
        let mut ctx = tera::Context::new();
        ctx.insert(
            "f",
            &facts::facts_at(
                input.record,
                input.digest,
                input.attribution,
                input.record_dir,
            ),
        );
        ctx.insert("charts", &charts::charts(input.record));
        ctx.insert("record", input.record);
        tera.render(&self.name, &ctx).map_err(err)
    }
}

/// Escape what makes Markdown raw HTML (`<`, `>`, `&`); entities show as the text.
fn escape_md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c => out.push(c),
        }
    }
    out
}

/// Tera's error with its causes (the useful part is usually in the source).
fn chain(e: &tera::Error) -> String {
    let mut s = e.to_string();
    let mut cur: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
