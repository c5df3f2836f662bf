//! Reports rendered from a record folder: the PR body (Markdown), a self-contained
//! HTML page with SVG charts, the terminal summary, a JSON summary, JUnit XML for CI,
//! and diffs of two runs.
//!
//! ```text
//! record dir ──load (sha256 checked first)──> Record + digest (+ plan copy)
//!      │                                          │
//!      │               Attribution (which steps each check read)
//!      │                                          │
//!      └── Renderer::render(&Input) ── Summary | Json | Tera(pr.md / report.html / PATH)
//!                                               facts.rs (PR view) + charts.rs (SVG geometry)
//! ```
//!
//! Statistics come from `evidence::record::Stats` only. Output is a pure function of
//! the record: no clock, no hash-map order, no paths beyond what the record holds.
//! Templates are embedded at build time; a `templates/` folder beside the plan (or
//! `--template PATH`) overrides them.

pub mod attribution;
pub mod charts;
pub mod check_value;
pub mod diff;
pub mod error;
pub mod facts;
pub mod fit;
pub mod format;
pub mod github;
pub mod json;
pub mod junit;
pub mod load;
pub mod metrics;
pub mod revisions;
pub mod rocrate;
pub mod summary;
pub mod tera_renderer;
pub mod verdict;

use std::path::{Path, PathBuf};

pub use diff::{diff, DiffFormat};
pub use error::ReportError;

use crate::record::run::Record;
use attribution::Attribution;

/// Which output to render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateChoice {
    /// PR-ready Markdown (`pr.md.tera`).
    Pr,
    /// One self-contained HTML page (`report.html.tera`).
    Html,
    /// The terminal summary.
    Summary,
    /// A machine-readable JSON summary.
    Json,
    /// JUnit XML for CI test reporters.
    Junit,
    /// A tera template file; `.html` / `.htm` / `.xml` names are autoescaped.
    Path(PathBuf),
}

/// How to render.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// Render even when `record.json` does not match `record.sha256`.
    pub no_verify: bool,
    /// The plan's folder: a `templates/` folder there overrides the built-in templates.
    pub plan_dir: Option<PathBuf>,
}

/// What every renderer gets.
pub struct Input<'a> {
    pub record: &'a Record,
    /// sha256 of `record.json` (hex).
    pub digest: &'a str,
    pub attribution: &'a Attribution,
    /// The record folder as the reader gave it (the footer's `verify` command).
    pub record_dir: Option<&'a Path>,
}

/// One output format (hyperfine's exporter style).
pub trait Renderer {
    fn render(&self, input: &Input<'_>) -> Result<String, ReportError>;
}

/// Read the record in `record_dir` (digest checked unless `opts.no_verify`) and render it.
pub fn render(
    record_dir: &Path,
    template: TemplateChoice,
    opts: &RenderOptions,
) -> Result<String, ReportError> {
    let loaded = load::load(record_dir, opts.no_verify)?;
    render_record_in(
        &loaded.record,
        &loaded.digest,
        loaded.plan_toml.as_deref(),
        template,
        opts.plan_dir.as_deref(),
        Some(record_dir),
    )
}

/// Render a record already in memory. `plan_toml` is the plan copy of the record
/// folder, used to tell which steps each check read.
pub fn render_record(
    record: &Record,
    digest: &str,
    plan_toml: Option<&str>,
    template: TemplateChoice,
    plan_dir: Option<&Path>,
) -> Result<String, ReportError> {
    render_record_in(record, digest, plan_toml, template, plan_dir, None)
}

/// [`render_record`] for a record whose folder is `record_dir` (as the reader
/// reaches it).
pub fn render_record_in(
    record: &Record,
    digest: &str,
    plan_toml: Option<&str>,
    template: TemplateChoice,
    plan_dir: Option<&Path>,
    record_dir: Option<&Path>,
) -> Result<String, ReportError> {
    let attribution = Attribution::new(record, plan_toml);
    let input = Input {
        record,
        digest,
        attribution: &attribution,
        record_dir,
    };
    let pr = matches!(template, TemplateChoice::Pr);
    let text = renderer_for(template, plan_dir)?.render(&input)?;
    // A PR body GitHub would refuse whole is cut to fit, saying what it left out.
    Ok(if pr {
        fit::fit_body(&text, fit::GITHUB_BODY_LIMIT).into_owned()
    } else {
        text
    })
}

fn renderer_for(
    template: TemplateChoice,
    plan_dir: Option<&Path>,
) -> Result<Box<dyn Renderer>, ReportError> {
    let local = |name: &str| {
        plan_dir
            .map(|d| d.join("templates").join(name))
            .filter(|p| p.is_file())
    };
    Ok(match template {
        TemplateChoice::Json => Box::new(json::JsonRenderer),
        TemplateChoice::Junit => Box::new(junit::JunitRenderer),
        TemplateChoice::Summary => match local("summary.txt.tera") {
            Some(p) => Box::new(tera_renderer::TeraRenderer::from_file(&p)?),
            None => Box::new(summary::SummaryRenderer),
        },
        TemplateChoice::Pr => match local(tera_renderer::PR_NAME) {
            Some(p) => Box::new(tera_renderer::TeraRenderer::from_file(&p)?),
            None => Box::new(tera_renderer::TeraRenderer::pr()),
        },
        TemplateChoice::Html => match local(tera_renderer::HTML_NAME) {
            Some(p) => Box::new(tera_renderer::TeraRenderer::from_file(&p)?),
            None => Box::new(tera_renderer::TeraRenderer::html()),
        },
        TemplateChoice::Path(p) => Box::new(tera_renderer::TeraRenderer::from_file(&p)?),
    })
}

impl TemplateChoice {
    /// `pr`, `html`, `summary`, `json`, `junit`, or else a template file path.
    pub fn parse(s: &str) -> TemplateChoice {
        match s {
            "pr" => TemplateChoice::Pr,
            "html" => TemplateChoice::Html,
            "summary" => TemplateChoice::Summary,
            "json" => TemplateChoice::Json,
            "junit" => TemplateChoice::Junit,
            other => TemplateChoice::Path(PathBuf::from(other)),
        }
    }

    /// The file a run writes this report to inside its record folder.
    pub fn file_name(&self) -> String {
        match self {
            TemplateChoice::Pr => "report.md".into(),
            TemplateChoice::Html => "report.html".into(),
            TemplateChoice::Summary => "summary.txt".into(),
            TemplateChoice::Json => "summary.json".into(),
            TemplateChoice::Junit => "report.junit.xml".into(),
            TemplateChoice::Path(p) => {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                format!("report-{}", name.trim_end_matches(".tera"))
            }
        }
    }
}
