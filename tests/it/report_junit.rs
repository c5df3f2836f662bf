//! `orchestrate report -t junit`: a real run's steps and checks as JUnit XML that
//! validates against the published junit-10.xsd (Jenkins' dialect, which GitLab and
//! the GitHub reporters read) and reads back through junitparser with every count,
//! failure message and check number where a CI page shows them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{self, skip_or_fail, Need};

/// The schema and a python3 with lxml and junitparser, or why the test cannot run.
fn tools() -> Result<PathBuf, String> {
    let xsd = std::env::var_os("ORCHESTRATE_JUNIT_XSD")
        .map(PathBuf::from)
        .ok_or("ORCHESTRATE_JUNIT_XSD does not name junit-10.xsd (.ci/run fetches it)")?;
    if !xsd.is_file() {
        return Err(format!("{} is not a file", xsd.display()));
    }
    let ok = Command::new("python3")
        .args(["-c", "import lxml.etree, junitparser"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        return Err("python3 with lxml and junitparser is not installed".into());
    }
    Ok(xsd)
}

/// Validate `xml` and read it back: junitparser's view of it, as JSON.
fn check(xsd: &Path, xml: &Path) -> serde_json::Value {
    let out = Command::new("python3")
        .arg(support::project("tests/tools/junit_check.py"))
        .arg(xsd)
        .arg(xml)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} does not validate against {}: {}",
        xml.display(),
        xsd.display(),
        support::shown(&out)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn suite<'a>(doc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    doc["suites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no suite {name} in {doc}"))
}

const PLAN: &str = r#"
schema = "orchestrate/plan/v1"
name = "junit-demo"

[limits]
timeout = "30s"
isolation = "auto"

[steps.flaky]
retries = 1
shell = "if [ -e ${work}/tried ]; then echo ok > ${out}/v.txt; else touch ${work}/tried; exit 1; fi"
outputs = ["${out}/v.txt"]

[steps.repeat]
repeats = 2
shell = "echo ${repeat} > ${out}/v.txt"
outputs = ["${out}/v.txt"]

[steps.fails]
shell = "echo 'bad <thing> & \"quotes\"' >&2; exit 3"

[steps.after]
needs = ["fails"]
shell = "true"

[steps.compare]
kind = "compare"
needs = ["repeat"]
checks = [
  { name = "repeats <bit-exact> & \"same\"", metric = "bit_exact", across = "repeat", file = "v.txt" },
]
"#;

#[test]
fn a_runs_steps_and_checks_read_back_as_a_ci_reporter_reads_them() {
    let xsd = match tools() {
        Ok(x) => x,
        Err(why) => return skip_or_fail(Need::PyTools, &why),
    };
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let (record, out) = support::run_plan_in(dir.path(), &plan, &dir.path().join("records"), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", support::shown(&out));
    let xml = dir.path().join("junit.xml");
    let out = support::cli()
        .args(["report", "-t", "junit", "-o"])
        .arg(&xml)
        .arg(&record)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", support::shown(&out));
    let doc = check(&xsd, &xml);
    assert_eq!(doc["name"], "junit-demo");
    // A suite per step and the run's own, whose verdict case passes: the failed
    // step and the failed check carry the failure already.
    assert_eq!(doc["suites"].as_array().unwrap().len(), 6, "{doc}");
    let run = suite(&doc, "(run)");
    assert_eq!(run["tests"], 1);
    assert_eq!(run["failures"], 0);
    assert_eq!(run["cases"][0]["name"], "verdict");
    assert_eq!(run["cases"][0]["classname"], "junit-demo.(run)");

    // Tried again and then passed: both attempts pass in a reporter's eyes, the
    // first still marked flaky in the file.
    let flaky = suite(&doc, "flaky");
    assert_eq!(flaky["tests"], 2);
    assert_eq!(flaky["failures"], 0);
    let text = std::fs::read_to_string(&xml).unwrap();
    assert!(
        text.contains("<flakyFailure type=\"exited\" message=\"exited with code 1\"/>"),
        "{text}"
    );

    let repeat = suite(&doc, "repeat");
    assert_eq!(repeat["tests"], 2);
    assert_eq!(repeat["failures"], 0);
    assert!(repeat["time"].as_f64().unwrap() > 0.0);
    let names: Vec<&str> = repeat["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["attempt 1", "attempt 2"]);
    assert_eq!(repeat["cases"][0]["classname"], "junit-demo.repeat");

    let fails = suite(&doc, "fails");
    assert_eq!(fails["failures"], 1);
    let r = &fails["cases"][0]["result"][0];
    assert_eq!(r["kind"], "failure");
    assert_eq!(r["message"], "exited with code 3");

    // A step that never ran because its dependency failed is skipped, with why.
    let after = suite(&doc, "after");
    assert_eq!(after["skipped"], 1);
    assert_eq!(after["cases"][0]["result"][0]["kind"], "skipped");

    // The failed check: its name as written, its numbers in the message and text.
    let compare = suite(&doc, "compare");
    assert_eq!(compare["failures"], 1);
    let case = &compare["cases"][0];
    assert_eq!(case["name"], "check: repeats <bit-exact> & \"same\"");
    let r = &case["result"][0];
    assert_eq!(r["kind"], "failure");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .starts_with("bit_exact 1 against"),
        "{r}"
    );
    assert!(
        r["text"].as_str().unwrap().contains("identical_to_first"),
        "{r}"
    );
}

#[test]
fn the_flagship_record_validates_with_every_check_a_case() {
    let xsd = match tools() {
        Ok(x) => x,
        Err(why) => return skip_or_fail(Need::PyTools, &why),
    };
    let xml = support::project("tests/fixtures/report/full.junit.xml");
    let doc = check(&xsd, &xml);
    let suites = doc["suites"].as_array().unwrap();
    // A suite per step, and the run's own with its verdict.
    assert_eq!(suites.len(), 12);
    let cases: usize = suites
        .iter()
        .map(|s| s["cases"].as_array().unwrap().len())
        .sum();
    // 3 + 3 measured prefill attempts, 7 single attempts (compile, decode and
    // handoffs), 30 checks and the run's verdict.
    assert_eq!(cases, 6 + 7 + 30 + 1, "{doc}");
    assert!(suites
        .iter()
        .all(|s| s["failures"] == 0 && s["errors"] == 0));
    let compare = suite(&doc, "compare[tokens=2048]");
    assert_eq!(compare["tests"], 15);
}
