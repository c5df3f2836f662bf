//! What `verify` observed: one entry per pin, the drift among them, the source hashes,
//! and the two terminal tables built from them.

pub use crate::record::pins::{
    Details, Drift, FileDetails, GitDetails, ModelDetails, PinEntry, PinKind, PinReport, PinStatus,
    PythonDetails, SourceHash, SourceRole, ToolDetails, UntrackedFile,
};

/// The refusing pins as a plain text table (kind, name, declared, observed, status),
/// each followed by its reason. Empty string when nothing drifted.
pub fn drift_table(report: &PinReport) -> String {
    let rows: Vec<[String; 5]> = report
        .drift
        .iter()
        .map(|d| {
            row(
                d.kind,
                &d.name,
                d.declared.as_deref(),
                d.observed.as_deref(),
                d.status,
            )
        })
        .collect();
    let notes: Vec<Option<&str>> = report.drift.iter().map(|d| d.message.as_deref()).collect();
    if rows.is_empty() {
        return String::new();
    }
    render(&rows, &notes)
}

/// Every pin as a plain text table, for `orchestrate check`.
pub fn pin_table(report: &PinReport) -> String {
    let rows: Vec<[String; 5]> = report
        .entries
        .iter()
        .map(|e| {
            row(
                e.kind,
                &e.name,
                e.declared.as_deref(),
                e.observed.as_deref(),
                e.status,
            )
        })
        .collect();
    let notes: Vec<Option<&str>> = report
        .entries
        .iter()
        .map(|e| e.message.as_deref())
        .collect();
    if rows.is_empty() {
        return "no pins declared\n".to_string();
    }
    render(&rows, &notes)
}

fn row(
    kind: PinKind,
    name: &str,
    declared: Option<&str>,
    observed: Option<&str>,
    status: PinStatus,
) -> [String; 5] {
    [
        kind.as_str().to_string(),
        name.to_string(),
        declared.unwrap_or("-").to_string(),
        observed.unwrap_or("-").to_string(),
        status.as_str().to_string(),
    ]
}

fn render(rows: &[[String; 5]], notes: &[Option<&str>]) -> String {
    const HEAD: [&str; 5] = ["KIND", "NAME", "DECLARED", "OBSERVED", "STATUS"];
    let mut width = HEAD.map(|h| h.chars().count());
    for r in rows {
        for (w, cell) in width.iter_mut().zip(r.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: [&str; 5], out: &mut String| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(c);
                let pad = width[i] + 2 - c.chars().count();
                s.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    line(HEAD, &mut out);
    for (r, note) in rows.iter().zip(notes) {
        line(
            [
                r[0].as_str(),
                r[1].as_str(),
                r[2].as_str(),
                r[3].as_str(),
                r[4].as_str(),
            ],
            &mut out,
        );
        if let Some(n) = note {
            out.push_str("    ");
            out.push_str(n);
            out.push('\n');
        }
    }
    out
}
