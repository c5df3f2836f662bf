//! The gate's verdict as the terminal, JUnit and GitHub's step summary state it:
//! the same numbers in each, formatted by `report::format`.

use super::{ItemChange, ItemOutcome, MetricChange, Outcome, Regressions};
use crate::report::format::{code, md_cell, number, percent, ratio};
use crate::report::junit::{attr, text_node};

/// `×1.300 (95% CI 1.280–1.320), p = 0.0001` and the medians, or what is missing.
fn figures(m: &MetricChange) -> String {
    let c = &m.comparison;
    let med = |v: &[f64]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            number(crate::compare::stats::median(v))
        }
    };
    let mut s = format!(
        "median {} -> {} (n = {} -> {})",
        med(&c.baseline),
        med(&c.implementation),
        c.baseline.len(),
        c.implementation.len()
    );
    if let Some(r) = c.ratio {
        s.push_str(&format!(", ratio {}", ratio(r)));
    }
    if let Some((lo, hi)) = c.interval {
        s.push_str(&format!(" (95% CI {}–{})", ratio(lo), ratio(hi)));
    }
    if let Some(p) = c.p_value {
        s.push_str(&format!(", p = {}", number(p)));
    }
    s.push_str(&format!(
        "; {} is better, threshold {}{}",
        m.better.as_str(),
        percent(c.noise),
        if m.declared { " (plan)" } else { "" }
    ));
    s
}

fn item_line(i: &ItemChange, finding: bool) -> String {
    let against = i
        .against
        .as_deref()
        .map(|a| format!(" (against {a})"))
        .unwrap_or_default();
    format!(
        "  {:<19} {} {}{against}",
        i.outcome.as_str(finding),
        i.step,
        i.id
    )
}

/// The verdict's first line: what fails the gate, or that nothing does.
pub fn verdict(r: &Regressions) -> String {
    let f = r.failures();
    if f.is_empty() {
        "no regression: the gate passes".to_string()
    } else {
        format!("{} regression(s): {}", f.len(), f.join("; "))
    }
}

/// For the terminal.
pub fn text(r: &Regressions) -> String {
    let mut out = format!(
        "run {} of plan {} against {} earlier run(s){}\n",
        r.run,
        r.plan,
        r.history.len(),
        match (r.history.first(), r.history.last()) {
            (Some(a), Some(b)) => format!(" ({a} .. {b})"),
            _ => String::new(),
        }
    );
    out.push_str("\nmetrics:\n");
    if r.metrics.is_empty() {
        out.push_str("  (none measured)\n");
    }
    for m in &r.metrics {
        out.push_str(&format!(
            "  {:<19} {} {}: {}\n",
            m.outcome.as_str(),
            m.step,
            m.metric,
            figures(m)
        ));
    }
    for (name, list, finding) in [("tests", &r.tests, false), ("findings", &r.findings, true)] {
        out.push_str(&format!("\n{name}:\n"));
        if list.is_empty() {
            out.push_str("  (none failing)\n");
        }
        for i in list {
            out.push_str(&item_line(i, finding));
            out.push('\n');
        }
    }
    out.push_str(&format!("\n{}\n", verdict(r)));
    out
}

/// For GitHub's step summary: the verdict, then a table of what changed.
pub fn summary(r: &Regressions) -> String {
    let mut out = format!(
        "### orchestrate regressions: plan {}\n\nRun {} against {} earlier run(s): **{}**.\n\n",
        code(&r.plan),
        code(&r.run),
        r.history.len(),
        verdict(r)
    );
    out.push_str("| outcome | step | what | figures |\n|---|---|---|---|\n");
    for m in &r.metrics {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            m.outcome.as_str(),
            code(&m.step),
            code(&m.metric),
            md_cell(&figures(m))
        ));
    }
    for (list, finding) in [(&r.tests, false), (&r.findings, true)] {
        for i in list {
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                i.outcome.as_str(finding),
                code(&i.step),
                code(&i.id),
                md_cell(i.against.as_deref().unwrap_or(""))
            ));
        }
    }
    out
}

/// JUnit: one case per metric, test and finding. What fails the gate is a
/// failure; what cannot be judged is skipped with the reason; the rest pass.
pub fn junit(r: &Regressions) -> String {
    let mut cases = Vec::new();
    for m in &r.metrics {
        let body = match m.outcome {
            Outcome::Regression => format!("<failure message=\"{}\"/>", attr(&figures(m))),
            Outcome::NotEnoughEvidence | Outcome::New => {
                format!(
                    "<skipped message=\"{}: {}\"/>",
                    m.outcome.as_str(),
                    attr(&figures(m))
                )
            }
            _ => format!(
                "<system-out>{}: {}</system-out>",
                m.outcome.as_str(),
                text_node(&figures(m))
            ),
        };
        cases.push((m.step.clone(), m.metric.clone(), body));
    }
    for (list, finding) in [(&r.tests, false), (&r.findings, true)] {
        for i in list {
            let what = i.outcome.as_str(finding);
            let body = match i.outcome {
                ItemOutcome::New => format!("<failure message=\"{what}\"/>"),
                ItemOutcome::Fixed => format!("<system-out>{what}</system-out>"),
                _ => format!("<skipped message=\"{what}\"/>"),
            };
            cases.push((i.step.clone(), i.id.clone(), body));
        }
    }
    let failures = cases.iter().filter(|c| c.2.starts_with("<failure")).count();
    let skipped = cases.iter().filter(|c| c.2.starts_with("<skipped")).count();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"orchestrate regressions\" tests=\"{}\" failures=\"{failures}\">\n  <testsuite name=\"regressions of {}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\">\n",
        cases.len(),
        attr(&r.plan),
        cases.len()
    );
    for (class, name, body) in cases {
        out.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\">{body}</testcase>\n",
            attr(&class),
            attr(&name)
        ));
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}
