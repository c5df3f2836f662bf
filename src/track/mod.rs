//! Research tracking across runs: an index of every run in one or more records
//! folders (`index.rs`, SQLite beside the records), listed and filtered by
//! `orchestrate runs`. Reads records, never writes them.

pub mod bisect;
pub mod index;
pub mod names;
pub mod progress;
pub mod regressions;
pub mod schema;
pub mod site;
mod site_data;
pub mod trend;

use std::path::PathBuf;

pub use index::{Headline, Index, IndexError, Refreshed, RunRow, Series, StepTests, INDEX_FILE};

/// Which runs to list.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub plan: Option<String>,
    pub status: Option<String>,
    /// RFC 3339 or `YYYY-MM-DD`: runs started at or after it.
    pub since: Option<String>,
}

impl RunFilter {
    fn keeps(&self, r: &RunRow) -> bool {
        let plan = self
            .plan
            .as_ref()
            .is_none_or(|p| r.plan.as_deref() == Some(p.as_str()));
        // A record that does not verify is never filtered away by what it claims; a
        // run without a record is judged by its journal and its liveness.
        let judged = r.verified || r.progress.is_some();
        let status = self
            .status
            .as_ref()
            .is_none_or(|s| !judged || r.status.as_deref() == Some(s.as_str()));
        let since = self
            .since
            .as_ref()
            .is_none_or(|s| !judged || r.started_at.as_deref().is_some_and(|t| t >= s.as_str()));
        plan && status && since
    }
}

/// The runs of every records folder, each index refreshed first; what each refresh
/// did.
pub fn runs(
    folders: &[PathBuf],
    filter: &RunFilter,
) -> Result<(Vec<RunRow>, Vec<Refreshed>), IndexError> {
    let mut rows = Vec::new();
    let mut refreshed = Vec::new();
    for f in folders {
        let mut index = Index::open(f)?;
        refreshed.push(index.refresh()?);
        rows.extend(index.rows()?.into_iter().filter(|r| filter.keeps(r)));
    }
    // Across every folder: a copy in another records folder is the same run.
    index::mark_copies(&mut rows);
    rows.sort_by(|a, b| {
        (a.started_at.as_deref().unwrap_or(""), &a.folder)
            .cmp(&(b.started_at.as_deref().unwrap_or(""), &b.folder))
    });
    Ok((rows, refreshed))
}

/// The runs as a table for the terminal: one line each, headline metrics last.
pub fn table(rows: &[RunRow]) -> String {
    let short = |c: &Option<String>| {
        c.as_deref()
            .map(|c| c.chars().take(7).collect::<String>())
            .unwrap_or_else(|| "-".into())
    };
    let mut lines: Vec<[String; 8]> = vec![[
        "run".into(),
        "plan".into(),
        "status".into(),
        "base".into(),
        "impl".into(),
        "host".into(),
        "took".into(),
        "devices".into(),
    ]];
    let mut metrics: Vec<String> = vec!["headline".into()];
    for r in rows {
        let status = if let Some(p) = &r.progress {
            // running 3/9, DEAD 3/9, UNKNOWN 3/9: how far a run without a record got.
            let s = r.status.as_deref().unwrap_or("unknown");
            let s = if r.running {
                s.to_string()
            } else {
                s.to_uppercase()
            };
            format!("{s} {}/{}", p.done, p.steps)
        } else if r.running {
            "running".into()
        } else if r.duplicate_of.is_some() {
            "COPY".into()
        } else if r.verified {
            r.status.clone().unwrap_or_else(|| "-".into())
        } else {
            "UNVERIFIED".into()
        };
        lines.push([
            r.folder.clone(),
            r.plan.clone().unwrap_or_else(|| "-".into()),
            status,
            short(&r.baseline),
            short(&r.implementation),
            r.host.clone().unwrap_or_else(|| "-".into()),
            r.duration_ms
                .map(crate::units::duration_ms)
                .unwrap_or_else(|| "-".into()),
            if r.devices.is_empty() {
                "-".into()
            } else {
                r.devices.join(",")
            },
        ]);
        metrics.push(if !r.verified || r.duplicate_of.is_some() {
            r.problem.clone().unwrap_or_default()
        } else {
            r.headline
                .iter()
                .map(|h| format!("{} {} {}", h.step, h.metric, num(h.median)))
                .collect::<Vec<_>>()
                .join("; ")
        });
    }
    // Folder, plan and host names are anyone's text: one line each, drawing nothing.
    let lines: Vec<[String; 8]> = lines
        .into_iter()
        .map(|l| l.map(|c| crate::term::safe(&c).into_owned()))
        .collect();
    let metrics: Vec<String> = metrics
        .iter()
        .map(|m| crate::term::safe(m).into_owned())
        .collect();
    let widths: Vec<usize> = (0..8)
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (l, m) in lines.iter().zip(&metrics) {
        for (i, cell) in l.iter().enumerate() {
            out.push_str(cell);
            out.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
        }
        out.push_str(m);
        out.push('\n');
    }
    out
}

fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        crate::report::format::number(x)
    }
}
