//! The PR body a reviewer reads in a minute: the flagship record's Verification
//! section fits 40 lines outside `<details>` and keeps every fact the seed PR states;
//! it renders as GitHub renders it (comrak, GitHub-flavoured), and every string a
//! plan or a step supplies lands as the text it is. Goldens for the body, the
//! terminal summary and the JUnit XML of the same record.

use std::path::{Path, PathBuf};

use orchestrate::report::{self, RenderOptions, TemplateChoice};

/// The committed record of `plans/full.toml` (2K and 8K in one run).
fn flagship() -> PathBuf {
    let root = crate::support::project("records");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|d| {
            std::fs::read_to_string(d.join("plan.toml"))
                .is_ok_and(|p| p.contains("name = \"kvsim-full\""))
        })
        .collect();
    dirs.sort();
    dirs.pop().expect("a reviewed record of plans/full.toml")
}

fn render(dir: &Path, t: TemplateChoice) -> String {
    report::render(dir, t, &RenderOptions::default()).unwrap()
}

/// The Verification section, and its lines outside `<details>` blocks.
fn verification(pr: &str) -> (String, Vec<String>) {
    let start = pr.find("## Verification").expect("a Verification section");
    let rest = &pr[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    let section = rest[..end].to_string();
    let mut outside = Vec::new();
    let mut depth = 0usize;
    for l in section.lines() {
        if l.trim_start().starts_with("<details") {
            depth += 1;
        }
        if depth == 0 {
            outside.push(l.to_string());
        }
        if l.trim_start().starts_with("</details>") {
            depth = depth.saturating_sub(1);
        }
    }
    (section, outside)
}

#[test]
fn the_flagship_body_fits_forty_lines_and_keeps_the_seeds_facts() {
    // Rendered from the repository root, as the footer's command assumes.
    let dir = flagship();
    let pr = render(&dir, TemplateChoice::Pr);
    let (section, outside) = verification(&pr);
    assert!(
        outside.len() <= 40,
        "{} lines outside <details>:\n{}",
        outside.len(),
        outside.join("\n")
    );
    let short = outside.join("\n");
    for fact in [
        // The line with the implementation.
        "**succeeded**. Implementation 0651c56.",
        // Devices, grouped by device.
        "`sim-rngd0` (rngd, cores 0-3, simulated): `prefill` in both cells",
        "`sim-gpu0` (gpu, simulated): `handoff-gpu` in both cells",
        "`sim-atom0` (atom, simulated): `handoff-atom` in both cells",
        // Parameters in one line, not a row each.
        "**Parameters**: `layers` 32, `threads` 2, `tokens` 2048 / 8192 (the same in every repeat of `prefill`)",
        // Per cell: repeats, timing, shape.
        "- **Full 2048**: 3 finite, bit-exact KV/logits repeats; warm prefill 1194–1240 ms (`prefill_ms`, n=3); KV shape `[32,8,2048,8]`",
        "- **Full 8192**: 3 finite, bit-exact KV/logits repeats; warm prefill 11307–11370 ms (`prefill_ms`, n=3); KV shape `[32,8,8192,8]`",
        // Per handoff: outputs, slots, relative RMS, divergence with margins.
        "  - `decode-ref`: 64 of 64 slots read back exactly",
        "  - `handoff-gpu` on sim-gpu0: 32-token outputs match; 0 of 64 slots read back exactly (information); relative RMS K/V/first_logits 0.166%/0.166%/0.00856%",
        "  - `handoff-atom` on sim-atom0: diverges at token 14 of 32, margin 0.004237 against 0.001590; 0 of 64 slots read back exactly (information); relative RMS K/V/first_logits 0.166%/0.166%/0.538%",
        "**Checks**: 30 of 30 checks passed",
        "**Steps**: 11 steps: 11 succeeded; slowest `prefill[tokens=8192]`",
        "- All owned experiment allocations released.",
    ] {
        assert!(short.contains(fact), "missing {fact:?} in:\n{short}");
    }
    // What the short lines leave out is in the details: every step, metric, check.
    let details = &section[section.find("<details>").expect("details")..];
    for row in [
        "| `compile` | compile | succeeded | 1 |",
        "| `handoff-gpu[tokens=8192]` | `decode_ms` |",
        "| ATOM first divergent token \\[tokens=2048\\] | `first_divergence` | 14 |",
        "- git implementation: 0651c56",
    ] {
        assert!(details.contains(row), "missing {row:?} in the details");
    }
    assert_eq!(details.matches("| pass |").count(), 30, "every check's row");
    // A parameter is not a metric row.
    assert!(!details.contains("| layers |"), "{details}");
    crate::support::golden("full.pr.md", &pr);
}

#[test]
fn the_flagship_summary_and_junit_match_their_goldens() {
    let dir = flagship();
    let summary = render(&dir, TemplateChoice::Summary);
    assert!(
        summary.contains(
            "parameters: layers 32, threads 2, tokens 2048 / 8192 (the same in every repeat of prefill)"
        ),
        "{summary}"
    );
    assert!(
        summary.contains("checks: 30 of 30 checks passed"),
        "{summary}"
    );
    assert!(
        summary.contains("handoff-atom on sim-atom0: diverges at token 14 of 32"),
        "{summary}"
    );
    // One line per step's metrics, not one per metric.
    assert_eq!(
        summary.matches("  handoff-gpu[tokens=2048]: ").count(),
        1,
        "{summary}"
    );
    crate::support::golden("full.summary.txt", &summary);
    let junit = render(&dir, TemplateChoice::Junit);
    crate::support::golden("full.junit.xml", &junit);
}

/// Markdown as GitHub renders it: GFM tables, strikethrough, autolinks, task lists,
/// raw HTML through the tag filter.
fn github_html(md: &str) -> String {
    let mut o = comrak::Options::default();
    o.extension.table = true;
    o.extension.strikethrough = true;
    o.extension.autolink = true;
    o.extension.tagfilter = true;
    o.extension.tasklist = true;
    o.render.r#unsafe = true;
    comrak::markdown_to_html(md, &o)
}

/// The cells of each row of the `n`th table.
fn table_rows(html: &str, n: usize) -> Vec<Vec<String>> {
    let t = html.split("<table>").nth(n + 1).expect("the table");
    let t = &t[..t.find("</table>").unwrap()];
    t.split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|c| {
                    let c = &c[c.find('>').unwrap() + 1..];
                    c[..c.find("</td>").unwrap()].to_string()
                })
                .collect()
        })
        .filter(|r: &Vec<String>| !r.is_empty())
        .collect()
}

#[test]
fn the_flagship_body_renders_as_github_renders_it() {
    let pr = render(&flagship(), TemplateChoice::Pr);
    let html = github_html(&pr);
    // The two folded blocks, each with its summary line.
    assert_eq!(html.matches("<details>").count(), 2, "{html}");
    assert!(html.contains("<summary>Steps, metrics and checks</summary>"));
    // Steps, metrics and checks are tables, every row whole.
    assert_eq!(html.matches("<table>").count(), 3, "{html}");
    let steps = table_rows(&html, 0);
    assert_eq!(steps.len(), 11);
    assert!(steps.iter().all(|r| r.len() == 5), "{steps:?}");
    assert_eq!(steps[1][0], "<code>prefill[tokens=2048]</code>");
    let checks = table_rows(&html, 2);
    assert_eq!(checks.len(), 30);
    assert!(checks.iter().all(|r| r.len() == 5 && r[4] == "pass"));
    assert_eq!(
        checks[3][0],
        "KV shape [layers, kv_heads, tokens, head_dim] [tokens=2048]"
    );
    // Bullets nest: each cell's handoffs beneath it.
    assert!(html.contains(
        "<li><strong>Full 2048</strong>: 3 finite, bit-exact KV/logits repeats; warm prefill \
         1194–1240 ms (<code>prefill_ms</code>, n=3); KV shape <code>[32,8,2048,8]</code>\n<ul>\n<li><code>decode-ref</code>"
    ));
}

/// A record whose steps, checks, failures and findings carry every kind of markup.
fn hostile_record() -> orchestrate::evidence::record::Record {
    let dir = crate::support::project("tests/fixtures/report/smoke");
    let mut rec: orchestrate::evidence::record::Record =
        serde_json::from_slice(&std::fs::read(dir.join("record.json")).unwrap()).unwrap();
    let evil_step = "a`b|c<i>";
    let evil_check =
        "<script>alert(1)</script> *bold* _em_ [x](javascript:alert(1)) | pipe @team $x$ ~~s~~";
    rec.steps[0].id = evil_step.into();
    rec.steps[0].reason = Some("# heading\n- list <b>".into());
    rec.steps[0].status = orchestrate::evidence::record::StepStatus::Failed;
    let c = rec
        .comparisons
        .first_mut()
        .expect("the smoke record has a check");
    c.name = evil_check.into();
    c.passed = false;
    rec.failures.push(orchestrate::evidence::record::Failure {
        step: evil_step.into(),
        attempt: None,
        check: None,
        what: "1. ordered <img src=x onerror=alert(1)> **loud**".into(),
    });
    rec.failures.push(orchestrate::evidence::record::Failure {
        step: "# top".into(),
        attempt: None,
        check: None,
        what: "# heading\n- list <b>".into(),
    });
    rec
}

#[test]
fn every_supplied_string_lands_as_the_text_it_is() {
    let rec = hostile_record();
    let pr = report::render_record(&rec, "00", None, TemplateChoice::Pr, None).unwrap();
    let html = github_html(&pr);
    // No markup from a name: no script, image, link, emphasis, strike or heading but
    // the body's own.
    for bad in [
        "<script",
        "<img",
        "<i>",
        "<b>",
        "<a href=\"javascript",
        "<em>",
        "<del>",
        "<h1>",
        "<ol>",
    ] {
        assert!(!html.contains(bad), "{bad} in:\n{html}");
    }
    // The check's name reads as itself in its bullet and in its table row.
    let shown = "&lt;script&gt;alert(1)&lt;/script&gt; *bold* _em_ [x](javascript:alert(1)) | pipe @team $x$ ~~s~~";
    assert!(html.matches(shown).count() >= 2, "{shown} in:\n{html}");
    // The step id with a backtick and a pipe is one code span, in a bullet and in a
    // table cell, and the steps table keeps five cells a row.
    assert!(html.contains("<code>a`b|c&lt;i&gt;</code>"), "{html}");
    let steps = table_rows(&html, 0);
    assert!(steps.iter().all(|r| r.len() == 5), "{steps:?}");
    assert!(
        html.contains("1. ordered &lt;img src=x onerror=alert(1)&gt; **loud**"),
        "{html}"
    );
    assert!(html.contains("# heading - list &lt;b&gt;"), "{html}");
}

/// A sweep of 30 cells, one of which fails: the short section names that cell and
/// counts the rest, and stays within 40 lines; every cell's bullet is in the details.
#[test]
fn a_wide_sweep_names_the_cell_that_failed_and_counts_the_rest() {
    let t = tempfile::tempdir().unwrap();
    let values: Vec<String> = (1..=30).map(|n| n.to_string()).collect();
    let plan = t.path().join("wide.toml");
    std::fs::write(
        &plan,
        format!(
            r#"schema = "orchestrate/plan/v1"
name = "wide-sweep"
[matrix]
n = [{}]
[steps.prefill]
kind = "prefill"
repeats = 2
shell = "if [ ${{matrix.n}} = 7 ]; then echo ${{repeat}} > ${{out}}/kv.bin; else echo same > ${{out}}/kv.bin; fi"
outputs = ["${{out}}/kv.bin"]
[steps.compare]
kind = "compare"
needs = ["prefill"]
checks = [{{ name = "kv repeats bit-exact", metric = "bit_exact", across = "prefill", file = "kv.bin" }}]
[report]
templates = ["pr"]
cell_title = "N {{n}}"
"#,
            values.join(", ")
        ),
    )
    .unwrap();
    let (dir, out) = crate::support::run_plan_in(t.path(), &plan, &t.path().join("records"), &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        crate::support::shown(&out)
    );
    let pr = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let (section, outside) = verification(&pr);
    assert!(outside.len() <= 40, "{}", outside.join("\n"));
    let short = outside.join("\n");
    assert!(
        short.contains(
            "- **N 7**: kv repeats bit-exact: 1 of 2 repeats identical to the first (**FAIL**)"
        ),
        "{short}"
    );
    assert!(!short.contains("- **N 8**"), "{short}");
    assert!(short.contains("- 29 more came out clean"), "{short}");
    assert!(
        short.contains("**Checks**: 29 of 30 checks passed"),
        "{short}"
    );
    let every = &section[section
        .find("<summary>Every cell</summary>")
        .expect("every cell")..];
    for n in 1..=30 {
        assert!(
            every.contains(&format!("- **N {n}**: ")),
            "N {n} in:\n{every}"
        );
    }
}
