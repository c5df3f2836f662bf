//! The run as JUnit XML, so CI test reporters (GitLab, Jenkins, GitHub's) show an
//! experiment's checks beside the tests: a `testsuite` per step (a cell step is a
//! step), a `testcase` per measured attempt and per check, failures with their
//! message and the check's numbers. The dialect is the one Jenkins' xunit plugin
//! publishes as `junit-10.xsd` (pytest writes it too), which GitLab and the GitHub
//! reporters read.
//!
//! A measured attempt that failed and was tried again, in a step that then
//! succeeded, is a `flakyFailure` (surefire's word for it): the case passes and the
//! failure stays on view. Warm-ups are not measured and are left out.
//!
//! The document agrees with the run's verdict: a consumer shows failures exactly
//! when the run failed. An exit that does not gate (a `gate = "new"` step whose
//! results files explain it, or a baseline cell) is `skipped` with why as its
//! message, as pytest reports an xfail, its detail kept in `system-out`; a last
//! suite, `(run)` (parentheses, so no step id can take its name), has one case that fails with the verdict when the run failed for
//! a reason no step's case carries (the release audit, the run timeout).

use std::fmt::Write as _;

use crate::record::contract::Termination;
use crate::record::run::{AttemptRecord, CheckRecord, Record, StepRecord, StepStatus};

/// The JUnit renderer (`report -t junit`).
pub struct JunitRenderer;

impl super::Renderer for JunitRenderer {
    fn render(&self, input: &super::Input<'_>) -> Result<String, super::ReportError> {
        Ok(render(input.record, input.digest))
    }
}

/// One test case's outcome.
enum Outcome {
    Passed,
    /// A failure that was tried again and then passed.
    Flaky {
        kind: String,
        message: String,
    },
    Failure {
        kind: String,
        message: String,
        text: String,
    },
    Error {
        kind: String,
        message: String,
    },
    Skipped {
        message: String,
    },
}

struct Case {
    name: String,
    time_s: f64,
    outcome: Outcome,
    out: Option<String>,
}

/// The whole document: `<testsuites>` over every step.
pub fn render(rec: &Record, digest: &str) -> String {
    let plan = &rec.run.plan.name;
    let mut suites: Vec<(Suite<'_>, Vec<Case>)> = rec
        .steps
        .iter()
        .map(|s| (Suite::Step(s), cases(rec, s)))
        .collect();
    suites.push((Suite::Run, vec![verdict_case(rec)]));
    let count = |f: &dyn Fn(&Outcome) -> bool| -> usize {
        suites
            .iter()
            .flat_map(|(_, cs)| cs)
            .filter(|c| f(&c.outcome))
            .count()
    };
    let tests: usize = suites.iter().map(|(_, cs)| cs.len()).sum();
    let failures = count(&|o| matches!(o, Outcome::Failure { .. }));
    let errors = count(&|o| matches!(o, Outcome::Error { .. }));
    let total: f64 = suites.iter().flat_map(|(_, cs)| cs).map(|c| c.time_s).sum();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{}\">",
        attr(plan),
        secs(total)
    );
    for (i, (s, cs)) in suites.iter().enumerate() {
        suite(&mut x, rec, digest, i, s, cs);
    }
    x.push_str("</testsuites>\n");
    x
}

/// What a `testsuite` stands for: a step, or the run as a whole.
enum Suite<'a> {
    Step(&'a StepRecord),
    Run,
}

fn suite(x: &mut String, rec: &Record, digest: &str, i: usize, s: &Suite<'_>, cs: &[Case]) {
    match s {
        Suite::Step(s) => step_suite(x, rec, digest, i, s, cs),
        Suite::Run => run_suite(x, rec, digest, i, cs),
    }
}

/// The run's own suite: its verdict, with the baseline comparison as properties.
fn run_suite(x: &mut String, rec: &Record, digest: &str, i: usize, cs: &[Case]) {
    let n = |f: &dyn Fn(&Outcome) -> bool| cs.iter().filter(|c| f(&c.outcome)).count();
    let _ = writeln!(
        x,
        "  <testsuite name=\"(run)\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" time=\"0.000\" timestamp=\"{}\" hostname=\"{}\" id=\"{i}\" package=\"{}\">",
        cs.len(),
        n(&|o| matches!(o, Outcome::Failure { .. })),
        n(&|o| matches!(o, Outcome::Error { .. })),
        attr(&rec.started_at),
        attr(&rec.run.host.hostname),
        attr(&rec.run.plan.name),
    );
    x.push_str("    <properties>\n");
    let verdict = super::verdict::line(rec, super::facts::short::Style::Plain);
    let mut props: Vec<(String, String)> = vec![
        ("run_id".into(), rec.run_id.clone()),
        ("record_sha256".into(), digest.to_string()),
        ("verdict".into(), verdict),
    ];
    if let Some(e) = super::verdict::explained(rec, super::facts::short::Style::Plain) {
        props.push(("not failures".into(), e));
    }
    for r in super::revisions::revision_facts(rec, super::facts::short::Style::Plain) {
        for l in r.lines {
            props.push((format!("against the baseline: {}", r.step), l));
        }
    }
    for (k, v) in &props {
        let _ = writeln!(
            x,
            "      <property name=\"{}\" value=\"{}\"/>",
            attr(k),
            attr(v)
        );
    }
    x.push_str("    </properties>\n");
    let classname = format!("{}.(run)", rec.run.plan.name);
    for c in cs {
        case(x, &classname, c);
    }
    x.push_str("  </testsuite>\n");
}

/// The run's verdict as a case: it fails when the run failed and no step's case
/// says so already, so a consumer never shows green for a red run.
fn verdict_case(rec: &Record) -> Case {
    use crate::record::run::RunStatus;
    let line = super::verdict::line(rec, super::facts::short::Style::Plain);
    let carried = rec.steps.iter().any(|s| {
        matches!(
            crate::evidence::revisions::judge(rec, s),
            Some(crate::evidence::revisions::Judged::Fails)
        )
    }) || rec.comparisons.iter().any(|c| !c.passed);
    let outcome = match rec.status {
        RunStatus::Succeeded => Outcome::Passed,
        RunStatus::Failed if carried => Outcome::Passed,
        RunStatus::Failed => Outcome::Failure {
            kind: "run".into(),
            message: line.clone(),
            text: line.clone(),
        },
        RunStatus::Interrupted => Outcome::Error {
            kind: "interrupted".into(),
            message: line.clone(),
        },
    };
    Case {
        name: "verdict".into(),
        time_s: 0.0,
        outcome,
        out: Some(line),
    }
}

fn step_suite(x: &mut String, rec: &Record, digest: &str, i: usize, s: &StepRecord, cs: &[Case]) {
    let plan = &rec.run.plan.name;
    let n = |f: &dyn Fn(&Outcome) -> bool| cs.iter().filter(|c| f(&c.outcome)).count();
    let time: f64 = cs.iter().map(|c| c.time_s).sum();
    let timestamp = s
        .attempts
        .first()
        .map_or(rec.started_at.as_str(), |a| a.started_at.as_str());
    let _ = writeln!(
        x,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\" timestamp=\"{}\" hostname=\"{}\" id=\"{i}\" package=\"{}\">",
        attr(&s.id),
        cs.len(),
        n(&|o| matches!(o, Outcome::Failure { .. })),
        n(&|o| matches!(o, Outcome::Error { .. })),
        n(&|o| matches!(o, Outcome::Skipped { .. })),
        secs(time),
        attr(timestamp),
        attr(&rec.run.host.hostname),
        attr(plan),
    );
    x.push_str("    <properties>\n");
    for (k, v) in [
        ("run_id", rec.run_id.as_str()),
        ("record_sha256", digest),
        ("kind", &s.kind.to_string()),
        ("status", s.status.as_str()),
    ] {
        let _ = writeln!(
            x,
            "      <property name=\"{}\" value=\"{}\"/>",
            attr(k),
            attr(v)
        );
    }
    if let Some(r) = &s.reason {
        let _ = writeln!(x, "      <property name=\"reason\" value=\"{}\"/>", attr(r));
    }
    x.push_str("    </properties>\n");
    let classname = format!("{plan}.{}", s.id);
    for c in cs {
        case(x, &classname, c);
    }
    x.push_str("  </testsuite>\n");
}

/// One `<testcase>` with its outcome and output.
fn case(x: &mut String, classname: &str, c: &Case) {
    let _ = write!(
        x,
        "    <testcase classname=\"{}\" name=\"{}\" time=\"{}\"",
        attr(classname),
        attr(&c.name),
        secs(c.time_s)
    );
    let body = match &c.outcome {
        Outcome::Passed => String::new(),
        Outcome::Flaky { kind, message } => format!(
            "      <flakyFailure type=\"{}\" message=\"{}\"/>\n",
            attr(kind),
            attr(message)
        ),
        Outcome::Failure {
            kind,
            message,
            text,
        } => format!(
            "      <failure type=\"{}\" message=\"{}\">{}</failure>\n",
            attr(kind),
            attr(message),
            text_node(text)
        ),
        Outcome::Error { kind, message } => format!(
            "      <error type=\"{}\" message=\"{}\"/>\n",
            attr(kind),
            attr(message)
        ),
        Outcome::Skipped { message } => {
            format!("      <skipped message=\"{}\"/>\n", attr(message))
        }
    };
    let out = c
        .out
        .as_ref()
        .map(|o| format!("      <system-out>{}</system-out>\n", text_node(o)))
        .unwrap_or_default();
    if body.is_empty() && out.is_empty() {
        x.push_str("/>\n");
    } else {
        let _ = write!(x, ">\n{body}{out}    </testcase>\n");
    }
}

/// The step's cases: each measured attempt, then each check it ran; a step that ran
/// no attempt and no check gets one case that says why.
fn cases(rec: &Record, s: &StepRecord) -> Vec<Case> {
    let excused = not_gating(rec, s);
    let mut out: Vec<Case> = s
        .attempts
        .iter()
        .filter(|a| !a.warmup)
        .map(|a| {
            let c = attempt_case(s, a);
            match (&excused, &c.outcome) {
                (Some(why), Outcome::Failure { message, text, .. }) => Case {
                    out: Some(format!(
                        "{message}\n{text}\n{}",
                        c.out.as_deref().unwrap_or_default()
                    )),
                    outcome: Outcome::Skipped {
                        message: format!("{message}: {why}"),
                    },
                    ..c
                },
                _ => c,
            }
        })
        .collect();
    out.extend(
        rec.comparisons
            .iter()
            .filter(|c| c.step == s.id)
            .map(check_case),
    );
    if out.is_empty() {
        let reason = s.reason.clone().unwrap_or_default();
        let outcome = match s.status {
            StepStatus::Succeeded => Outcome::Passed,
            StepStatus::Reused => Outcome::Passed,
            StepStatus::Skipped | StepStatus::UpstreamFailed | StepStatus::NotRun => {
                Outcome::Skipped {
                    message: join(s.status.as_str(), &reason),
                }
            }
            StepStatus::Cancelled => Outcome::Error {
                kind: "cancelled".into(),
                message: join("cancelled", &reason),
            },
            StepStatus::Failed => match not_gating(rec, s) {
                Some(why) => Outcome::Skipped {
                    message: join(&join("failed", &reason), &why),
                },
                None => Outcome::Failure {
                    kind: "failed".into(),
                    message: join("failed", &reason),
                    text: reason.clone(),
                },
            },
        };
        let note = s
            .cache
            .as_ref()
            .and_then(|c| c.reused_from.as_ref())
            .map(|f| format!("reused from run {} (its attempt {})", f.run_id, f.attempt));
        out.push(Case {
            name: "step".into(),
            time_s: 0.0,
            outcome,
            out: note,
        });
    }
    out
}

/// Why a failed step does not fail the run, when it does not: its exit is one its
/// results explain with no failure new against the baseline, or it ran on the
/// baseline of a `gate = "new"` comparison.
fn not_gating(rec: &Record, s: &StepRecord) -> Option<String> {
    use crate::evidence::revisions::{Excuse, Judged};
    Some(match crate::evidence::revisions::judge(rec, s)? {
        Judged::Fails => return None,
        Judged::Explained(Excuse::PreExistingOnly) => {
            "not a failure: its results explain the exit and every failure and finding is on the baseline too (gate = \"new\")".into()
        }
        Judged::Explained(Excuse::Baseline) => {
            "not a failure: the baseline's own failures, which its results explain (gate = \"new\")".into()
        }
        Judged::NotGating => "a failure on the baseline, which does not gate (gate = \"new\")".into(),
    })
}

fn join(a: &str, b: &str) -> String {
    if b.is_empty() {
        a.to_string()
    } else {
        format!("{a}: {b}")
    }
}

fn attempt_case(s: &StepRecord, a: &AttemptRecord) -> Case {
    let name = if a.retry > 0 {
        format!("attempt {} (retry {})", a.attempt, a.retry)
    } else {
        format!("attempt {}", a.attempt)
    };
    let outcome = if a.succeeded() {
        Outcome::Passed
    } else {
        let kind = a.termination.as_str().to_string();
        let message = ended(a);
        // Tried again, and the step then succeeded: flaky, not failed.
        let retried = s
            .attempts
            .iter()
            .any(|b| b.attempt > a.attempt && b.retry > a.retry);
        match a.termination {
            _ if retried && s.status.is_success() => Outcome::Flaky { kind, message },
            // Ended by something other than the step: an error, not a failure.
            Termination::Cancelled
            | Termination::NotStarted
            | Termination::OrchestratorLost
            | Termination::NodeFailed
            | Termination::Preempted
            | Termination::Lost => Outcome::Error { kind, message },
            _ => Outcome::Failure {
                text: a.error.clone().unwrap_or_else(|| message.clone()),
                kind,
                message,
            },
        }
    };
    let out = Some(format!(
        "argv: {}\nstdout: {}\nstderr: {}",
        a.argv.join(" "),
        a.stdout.path,
        a.stderr.path
    ));
    Case {
        name,
        time_s: a.wall_ms / 1000.0,
        outcome,
        out,
    }
}

/// How an attempt ended, in words.
fn ended(a: &AttemptRecord) -> String {
    match a.termination {
        Termination::Exited => match a.exit_code {
            Some(c) => format!("exited with code {c}"),
            None => "exited".into(),
        },
        Termination::Signaled => match a.signal {
            Some(s) => format!("killed by signal {s}"),
            None => "killed by a signal".into(),
        },
        Termination::OomKilled => "killed by the memory limit (OOM)".into(),
        Termination::TimedOut => "timed out".into(),
        Termination::Cancelled => match &a.cancel_reason {
            Some(r) => format!("cancelled ({r})"),
            None => "cancelled".into(),
        },
        other => other.as_str().replace('_', " "),
    }
}

fn check_case(c: &CheckRecord) -> Case {
    let value = super::format::json_value(&c.value.to_json());
    let threshold = super::format::threshold(&c.threshold_json());
    let outcome = match (&c.error, c.passed) {
        (Some(e), _) => Outcome::Error {
            kind: c.metric.to_string(),
            message: format!("could not run: {e}"),
        },
        (None, true) => Outcome::Passed,
        (None, false) => Outcome::Failure {
            kind: c.metric.to_string(),
            message: format!("{} {value} against {threshold}", c.metric),
            text: format!(
                "metric: {}\nvalue: {}\nthreshold: {}\ndetail: {}",
                c.metric,
                c.value,
                c.threshold_json(),
                c.detail_json()
            ),
        },
    };
    Case {
        name: format!("check: {}", c.name),
        time_s: 0.0,
        outcome,
        out: c
            .passed
            .then(|| format!("{} {value} ({threshold})", c.metric)),
    }
}

/// Seconds as the schema's time type wants them: digits, three decimals.
fn secs(s: f64) -> String {
    if s.is_finite() && s >= 0.0 {
        format!("{s:.3}")
    } else {
        "0.000".into()
    }
}

/// Characters XML 1.0 cannot hold at all (C0 controls but tab, newline and
/// carriage return; U+FFFE and U+FFFF), written as `\u{…}` so nothing is lost.
fn printable(c: char) -> Option<String> {
    let bad = (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{FFFE}' | '\u{FFFF}');
    bad.then(|| format!("\\u{{{:x}}}", c as u32))
}

/// An attribute value: markup escaped, and tab and line breaks as character
/// references so attribute normalisation keeps them.
pub(crate) fn attr(s: &str) -> String {
    escape(s, true)
}

/// Element text: markup escaped.
pub(crate) fn text_node(s: &str) -> String {
    escape(s, false)
}

fn escape(s: &str, in_attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' => out.push_str("&#13;"),
            '"' if in_attribute => out.push_str("&quot;"),
            '\'' if in_attribute => out.push_str("&apos;"),
            '\n' if in_attribute => out.push_str("&#10;"),
            '\t' if in_attribute => out.push_str("&#9;"),
            c => match printable(c) {
                Some(p) => out.push_str(&p),
                None => out.push(c),
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_controls_are_escaped() {
        assert_eq!(attr("a<b>&\"'\n\t"), "a&lt;b&gt;&amp;&quot;&apos;&#10;&#9;");
        assert_eq!(text_node("x\u{1}y]]>"), "x\\u{1}y]]&gt;");
        assert_eq!(secs(1.23456), "1.235");
        assert_eq!(secs(f64::NAN), "0.000");
    }
}
