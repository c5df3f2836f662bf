//! JUnit XML as pytest (`--junitxml`), cargo-nextest and JUnit 5 / Maven Surefire
//! write it: `testsuites` > `testsuite` (nested suites too) > `testcase`, whose
//! children say how it ended: `failure`, `error`, `skipped`, and for reruns
//! `flakyFailure`/`flakyError` (passed in the end) and `rerunFailure`/`rerunError`
//! (failed every time).

use std::path::Path;

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use super::{cut, Budget, CaseCounts, JunitResults, Outcome, TestCase};

/// Read and parse `path` (`file` is how the step named it).
pub fn read(path: &Path, file: &str) -> JunitResults {
    match super::read(path) {
        Ok((bytes, digest)) => {
            let mut r = parse(&bytes);
            r.file = file.to_string();
            r.sha256 = Some(digest);
            r
        }
        Err(e) => JunitResults {
            file: file.to_string(),
            error: Some(e),
            ..JunitResults::default()
        },
    }
}

/// An attribute's value, unescaped. Bytes that are not UTF-8 are kept as `\xNN`
/// (and a backslash as `\\`), so two cases that differ only there keep distinct
/// ids instead of both becoming empty.
fn attr(e: &BytesStart<'_>, name: &str) -> Option<String> {
    let a = e
        .attributes()
        .flatten()
        .find(|a| a.key.as_ref() == name.as_bytes())?;
    let raw: &[u8] = &a.value;
    let text = match std::str::from_utf8(raw) {
        Ok(t) => {
            let t = quick_xml::escape::unescape(t)
                .map(|c| c.into_owned())
                .unwrap_or_else(|_| t.to_string());
            // A value that itself reads `\x..` is told apart from an escaped byte.
            if t.contains("\\x") {
                t.replace('\\', "\\\\")
            } else {
                t
            }
        }
        Err(_) => {
            let mut t = String::with_capacity(raw.len());
            for chunk in raw.utf8_chunks() {
                let valid = chunk.valid();
                t.push_str(
                    &quick_xml::escape::unescape(valid)
                        .map(|c| c.replace('\\', "\\\\"))
                        .unwrap_or_else(|_| valid.replace('\\', "\\\\")),
                );
                for b in chunk.invalid() {
                    t.push_str(&format!("\\x{b:02x}"));
                }
            }
            t
        }
    };
    Some(text)
}

/// A case being read.
#[derive(Default)]
struct Open {
    suite: String,
    classname: Option<String>,
    name: String,
    time_s: Option<f64>,
    failed: bool,
    errored: bool,
    skipped: bool,
    flaky: bool,
    reruns: u32,
    /// `<failure>` elements: pytest writes one per failed subtest into the case.
    failures: u32,
    message: Option<String>,
    /// Text of the child element being read (a traceback), for a message-less one.
    text: Option<String>,
}

impl Open {
    /// Note a child element; whether its text is the case's message.
    fn child(&mut self, tag: &[u8], e: &BytesStart<'_>) -> bool {
        let (set, counts_rerun) = match tag {
            b"failure" => (Some(&mut self.failed), false),
            b"error" => (Some(&mut self.errored), false),
            b"skipped" => (Some(&mut self.skipped), false),
            b"flakyFailure" | b"flakyError" => (Some(&mut self.flaky), true),
            b"rerunFailure" | b"rerunError" => (None, true),
            _ => return false,
        };
        if let Some(flag) = set {
            *flag = true;
        }
        if tag == b"failure" {
            self.failures += 1;
        }
        if counts_rerun {
            self.reruns += 1;
        }
        if self.message.is_none() && self.text.is_none() && !counts_rerun {
            self.message = attr(e, "message").filter(|m| !m.trim().is_empty());
            self.text = Some(String::new());
            return self.message.is_none();
        }
        false
    }

    fn close(self) -> TestCase {
        let outcome = if self.failed {
            Outcome::Failed
        } else if self.errored {
            Outcome::Error
        } else if self.skipped {
            Outcome::Skipped
        } else if self.flaky {
            Outcome::Flaky
        } else {
            Outcome::Passed
        };
        let message = self
            .message
            .or(self.text.filter(|t| !t.trim().is_empty()))
            .map(|m| cut(&m));
        let id = match &self.classname {
            Some(c) if !c.is_empty() => format!("{c}::{}", self.name),
            _ if !self.suite.is_empty() => format!("{}::{}", self.suite, self.name),
            _ => self.name.clone(),
        };
        TestCase {
            id,
            suite: self.suite,
            name: self.name,
            outcome,
            message,
            time_s: self.time_s,
            reruns: self.reruns,
            failures: if self.failures > 1 { self.failures } else { 0 },
            node_id: None,
        }
    }
}

/// The classname a case's id was made from (`tests.test_x.SomeTests`), if any.
fn classname_of(c: &TestCase) -> Option<&str> {
    c.id.strip_suffix(c.name.as_str())?
        .strip_suffix("::")
        .filter(|s| !s.is_empty())
}

/// Give each case its pytest node id where its classname names a Python file under
/// `root` (the attempt's folder, pytest's rootdir): `tests.test_x.SomeTests` with
/// `tests/test_x.py` there is `tests/test_x.py::SomeTests::NAME`. The file is only
/// looked at: never through a link, never outside `root`.
pub fn add_node_ids(r: &mut JunitResults, root: &Path) {
    let mut known: std::collections::BTreeMap<String, Option<String>> = Default::default();
    for c in &mut r.cases {
        let Some(classname) = classname_of(c).map(str::to_string) else {
            continue;
        };
        let prefix = known
            .entry(classname.clone())
            .or_insert_with(|| node_prefix(&classname, root))
            .clone();
        c.node_id = prefix.map(|p| format!("{p}::{}", c.name));
    }
}

/// `tests/test_x.py::SomeTests` for `tests.test_x.SomeTests`, when that file is a
/// regular file under `root`.
fn node_prefix(classname: &str, root: &Path) -> Option<String> {
    let parts: Vec<&str> = classname.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    (1..=parts.len()).rev().find_map(|k| {
        let file = format!("{}.py", parts[..k].join("/"));
        let path = crate::digest::contained(root, &file).ok()?;
        let regular = std::fs::symlink_metadata(&path).ok()?.file_type().is_file();
        regular.then(|| {
            std::iter::once(file.as_str())
                .chain(parts[k..].iter().copied())
                .collect::<Vec<_>>()
                .join("::")
        })
    })
}

/// The id a report keys a case by, for a test named either way: a pytest node id
/// (`tests/test_x.py::SomeTests::test_basic`) becomes the JUnit form pytest writes
/// (`tests.test_x.SomeTests::test_basic`); anything else is taken as it is.
pub fn case_id(spec: &str) -> String {
    let parts: Vec<&str> = spec.split("::").collect();
    match parts.as_slice() {
        [file, rest @ .., name] if file.ends_with(".py") && !name.is_empty() => {
            let module = file.trim_end_matches(".py").trim_start_matches("./");
            let mut classname = module.replace('/', ".");
            for c in rest {
                classname.push('.');
                classname.push_str(c);
            }
            format!("{classname}::{name}")
        }
        _ => spec.to_string(),
    }
}

/// Parse a JUnit XML document. Malformed XML gives what was read before the error,
/// and the error.
pub fn parse(bytes: &[u8]) -> JunitResults {
    let mut reader = Reader::from_reader(bytes);
    reader.config_mut().trim_text(false);
    let mut buf = Vec::new();
    let mut suites: Vec<String> = Vec::new();
    let mut open: Option<Open> = None;
    // Inside a child of a testcase whose text is wanted.
    let mut in_child = false;
    let mut out = JunitResults::default();
    let mut counts = CaseCounts::default();
    let mut saw_root = false;
    // Elements opened and not yet closed: a report cut short ends with some open.
    let mut depth: usize = 0;
    let mut budget = Budget::default();
    let mut push = |c: TestCase, out: &mut JunitResults| {
        counts.add(c.outcome);
        counts.subtest_failures += c.failures.saturating_sub(1);
        let urgent = !matches!(c.outcome, Outcome::Passed | Outcome::Skipped);
        if budget.admit(c.kept_bytes(), urgent) {
            out.cases.push(c);
        } else {
            out.left_out = out.left_out.saturating_add(1);
        }
    };
    loop {
        let ev = match reader.read_event_into(&mut buf) {
            Ok(ev) => ev,
            Err(e) => {
                out.error = Some(format!(
                    "not well-formed XML at byte {}: {e}",
                    reader.error_position()
                ));
                break;
            }
        };
        match &ev {
            Event::Start(_) => depth += 1,
            Event::End(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
        match ev {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) if e.local_name().as_ref() == b"testsuites" => {
                saw_root = true;
            }
            Event::Start(ref e) if e.local_name().as_ref() == b"testsuite" => {
                saw_root = true;
                suites.push(attr(e, "name").unwrap_or_default());
            }
            Event::Empty(ref e) if e.local_name().as_ref() == b"testsuite" => {
                saw_root = true;
            }
            Event::End(ref e) if e.local_name().as_ref() == b"testsuite" => {
                suites.pop();
            }
            Event::Start(ref e) | Event::Empty(ref e) if e.local_name().as_ref() == b"testcase" => {
                let c = Open {
                    suite: suites.last().cloned().unwrap_or_default(),
                    classname: attr(e, "classname"),
                    name: attr(e, "name").unwrap_or_default(),
                    time_s: attr(e, "time").and_then(|t| t.trim().parse().ok()),
                    ..Open::default()
                };
                if matches!(ev, Event::Empty(_)) {
                    push(c.close(), &mut out);
                } else {
                    open = Some(c);
                }
            }
            Event::End(ref e) if e.local_name().as_ref() == b"testcase" => {
                if let Some(c) = open.take() {
                    push(c.close(), &mut out);
                }
                in_child = false;
            }
            Event::Start(ref e) => {
                if let Some(c) = open.as_mut() {
                    in_child = c.child(e.local_name().as_ref(), e);
                }
            }
            Event::Empty(ref e) => {
                if let Some(c) = open.as_mut() {
                    c.child(e.local_name().as_ref(), e);
                }
            }
            Event::End(_) => in_child = false,
            Event::Text(ref t) if in_child => {
                if let (Some(c), Ok(s)) = (open.as_mut(), t.decode()) {
                    if let Some(text) = c.text.as_mut() {
                        if text.len() < 4 * super::MAX_MESSAGE {
                            text.push_str(&s);
                        }
                    }
                }
            }
            Event::CData(ref t) if in_child => {
                if let (Some(c), Ok(s)) = (open.as_mut(), t.decode()) {
                    if let Some(text) = c.text.as_mut() {
                        if text.len() < 4 * super::MAX_MESSAGE {
                            text.push_str(&s);
                        }
                    }
                }
            }
            _ => {}
        }
        buf.clear();
    }
    if out.error.is_none() && !saw_root {
        out.error = Some("no <testsuites> or <testsuite> element: not a JUnit report".into());
    }
    if out.error.is_none() && depth > 0 {
        out.error = Some(format!(
            "incomplete: the report ends with {depth} element(s) still open (cut short?)"
        ));
    }
    out.counts = counts;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_beyond_the_bound_are_counted_and_failing_ones_kept_first() {
        let long = "n".repeat(900);
        let mut xml = String::from("<testsuites><testsuite name=\"s\">");
        for i in 0..6000 {
            xml.push_str(&format!("<testcase classname=\"c\" name=\"p{i}{long}\"/>"));
        }
        for i in 0..100 {
            xml.push_str(&format!(
                "<testcase classname=\"c\" name=\"f{i}\"><failure message=\"x\"/></testcase>"
            ));
        }
        xml.push_str("</testsuite></testsuites>");
        let r = parse(xml.as_bytes());
        assert_eq!(r.counts.tests, 6100);
        assert_eq!(r.counts.failed, 100);
        assert!(r.left_out > 0, "{}", r.left_out);
        assert_eq!(r.cases.len() as u32 + r.left_out, 6100);
        // Passing cases stop at half the budget; every failing one is kept.
        let failing = r.cases.iter().filter(|c| c.outcome.failing()).count();
        assert_eq!(failing, 100);
        let kept: usize = r.cases.iter().map(TestCase::kept_bytes).sum();
        assert!(kept <= crate::results::MAX_KEPT_BYTES, "{kept}");
    }

    #[test]
    fn node_ids_and_junit_ids_name_the_same_case() {
        assert_eq!(
            case_id("tests/test_x.py::SomeTests::test_basic"),
            "tests.test_x.SomeTests::test_basic"
        );
        assert_eq!(
            case_id("tests/test_x.py::test_plain[a-1]"),
            "tests.test_x::test_plain[a-1]"
        );
        assert_eq!(
            case_id("tests.test_x::test_plain"),
            "tests.test_x::test_plain"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tests")).unwrap();
        std::fs::write(dir.path().join("tests/test_x.py"), "").unwrap();
        let mut r = parse(br#"<testsuites><testsuite name="pytest"><testcase classname="tests.test_x.SomeTests" name="test_basic"/><testcase classname="tests.test_x" name="test_plain"/><testcase classname="com.x.KvTest" name="gen"/></testsuite></testsuites>"#);
        add_node_ids(&mut r, dir.path());
        let ids: Vec<Option<&str>> = r.cases.iter().map(|c| c.node_id.as_deref()).collect();
        assert_eq!(
            ids,
            [
                Some("tests/test_x.py::SomeTests::test_basic"),
                Some("tests/test_x.py::test_plain"),
                None
            ]
        );
    }

    #[test]
    fn pytest_nextest_and_surefire_shapes() {
        // pytest 8 --junitxml (trimmed from a real run).
        let pytest = br#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="4" time="0.05"><testcase classname="tests.test_kv" name="test_ok" time="0.001" /><testcase classname="tests.test_kv" name="test_gen[1]" time="0.002"><failure message="assert 1 == 2">def test_gen(): &gt; assert 1 == 2</failure></testcase><testcase classname="tests.test_kv" name="test_skip" time="0.000"><skipped type="pytest.skip" message="no NPU">/x.py:3: no NPU</skipped></testcase><testcase classname="tests.test_kv" name="test_fix" time="0.001"><error message="failed on setup with &quot;fixture 'x' not found&quot;">trace</error></testcase></testsuite></testsuites>"#;
        let r = parse(pytest);
        assert_eq!(r.error, None);
        assert_eq!(
            r.counts,
            CaseCounts {
                tests: 4,
                passed: 1,
                failed: 1,
                errors: 1,
                skipped: 1,
                flaky: 0,
                subtest_failures: 0,
            }
        );
        assert_eq!(r.cases[1].id, "tests.test_kv::test_gen[1]");
        assert_eq!(r.cases[1].message.as_deref(), Some("assert 1 == 2"));
        assert_eq!(
            r.cases[3].message.as_deref(),
            Some("failed on setup with \"fixture 'x' not found\"")
        );
        assert_eq!(r.cases[0].time_s, Some(0.001));
        // nextest: a retried pass is flaky, a retried failure stays failed.
        let nextest = br#"<testsuites name="nextest-run" tests="2" failures="1"><testsuite name="orchestrate::it" tests="2"><testcase name="a::flaky" classname="orchestrate::it"><flakyFailure message="boom" type="test failure">out</flakyFailure></testcase><testcase name="a::broken" classname="orchestrate::it"><failure type="test failure">thread panicked at x</failure><rerunFailure type="test failure">again</rerunFailure></testcase></testsuite></testsuites>"#;
        let r = parse(nextest);
        assert_eq!(r.cases[0].outcome, Outcome::Flaky);
        assert_eq!(r.cases[0].reruns, 1);
        assert_eq!(r.cases[1].outcome, Outcome::Failed);
        assert_eq!(r.cases[1].reruns, 1);
        assert_eq!(r.cases[1].message.as_deref(), Some("thread panicked at x"));
        // A lone <testsuite> (JUnit 5 / Surefire) with a CDATA trace.
        let surefire = br#"<testsuite name="com.x.KvTest" tests="1"><testcase name="gen" classname="com.x.KvTest"><failure><![CDATA[expected <1> but was <2>]]></failure></testcase></testsuite>"#;
        let r = parse(surefire);
        assert_eq!(
            r.cases[0].message.as_deref(),
            Some("expected <1> but was <2>")
        );
        assert_eq!(r.counts.failing(), 1);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let r = parse(b"<testsuites><testsuite><testcase name=\"a\"></testsuite>");
        assert!(r.error.is_some(), "{r:?}");
        assert!(parse(b"{\"not\": \"xml\"}").error.is_some());
        assert!(parse(b"").error.is_some());
        assert!(parse(&[0xff, 0xfe, 0x00]).error.is_some());
        // Cut short anywhere after the root: incomplete, not "all passed".
        let whole = br#"<testsuites><testsuite name="s"><testcase classname="c" name="a"/><testcase classname="c" name="b"/></testsuite></testsuites>"#;
        assert_eq!(parse(whole).error, None);
        for cut in 12..whole.len() - 1 {
            let r = parse(&whole[..cut]);
            assert!(r.error.is_some(), "cut at {cut}: {r:?}");
        }
    }

    #[test]
    fn attributes_that_are_not_utf8_keep_cases_apart() {
        let mut doc = b"<testsuite name=\"s\"><testcase classname=\"c\" name=\"t\xff\"/><testcase classname=\"c\" name=\"t\xfe\"/><testcase classname=\"c\" name=\"t\\xff\"/></testsuite>".to_vec();
        doc.shrink_to_fit();
        let r = parse(&doc);
        assert_eq!(r.error, None);
        let ids: Vec<&str> = r.cases.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["c::t\\xff", "c::t\\xfe", "c::t\\\\xff"]);
    }
}
