//! What a step's test runner and scanners wrote, as the record keeps it: JUnit XML
//! (pytest `--junitxml`, cargo-nextest, JUnit 5) and SARIF 2.1.0 (ruff, semgrep,
//! gitleaks, bandit), read from the files a step declares in `results`. And how two
//! revisions' results compare: `new`, `pre-existing`, `fixed`, `passing`.

pub mod classify;
pub mod junit;
pub mod sarif;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::digest::Sha256Digest;

/// The largest results file read (a larger one is named, with its digest, not parsed).
pub const MAX_RESULTS_BYTES: u64 = 64 << 20;
/// Cases or findings kept per file; counts cover all of them.
pub const MAX_ITEMS: usize = 100_000;
/// The text of the cases or findings the record keeps per file, at most: a results
/// file near the size cap would otherwise make a record (and every command that
/// reads it: `verify`, `runs`, `site`) several times its size. Failing cases may use
/// all of it, passing and skipped ones half; what is left out is counted, and the
/// whole file is kept beside the attempt's logs.
pub const MAX_KEPT_BYTES: usize = 4 << 20;
/// A failure message or finding text is cut to this many characters.
pub const MAX_MESSAGE: usize = 1000;

/// What one attempt's results files said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AttemptResults {
    /// The test report (`results.junit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub junit: Option<JunitResults>,
    /// The findings (`results.sarif`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sarif: Option<SarifResults>,
}

/// A JUnit XML report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JunitResults {
    /// The file as the step declared it.
    pub file: String,
    /// Its digest; absent when it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<Sha256Digest>,
    /// Outcomes counted over every case.
    pub counts: CaseCounts,
    /// Each case, in the report's order, as far as the record keeps them (see
    /// `left_out`).
    pub cases: Vec<TestCase>,
    /// Cases counted but not listed: beyond 100,000, or beyond 4 MiB of cases'
    /// text (failing cases first). Comparisons do not classify them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub left_out: u32,
    /// The whole file, copied into the record folder (relative to it) when cases
    /// were left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
    /// Why the file could not be read or parsed; the counts are then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Outcomes of a report's cases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CaseCounts {
    /// Every case.
    pub tests: u32,
    /// Passed (first time).
    pub passed: u32,
    /// Failed an assertion.
    pub failed: u32,
    /// Errored (setup, teardown, collection, an unexpected exception).
    pub errors: u32,
    /// Skipped.
    pub skipped: u32,
    /// Passed after failing and being rerun.
    pub flaky: u32,
    /// Failures beyond a case's first: pytest writes each failed subtest as a
    /// `<failure>` of its case and counts each in its "N failed", so pytest's count
    /// is `failed + subtest_failures`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub subtest_failures: u32,
}

impl CaseCounts {
    /// Failed or errored.
    pub fn failing(&self) -> u32 {
        self.failed + self.errors
    }

    /// "N failed" as pytest's summary line counts it: each failed subtest once.
    pub fn failed_as_pytest_counts(&self) -> u32 {
        self.failed + self.subtest_failures
    }

    fn add(&mut self, o: Outcome) {
        self.tests += 1;
        match o {
            Outcome::Passed => self.passed += 1,
            Outcome::Failed => self.failed += 1,
            Outcome::Error => self.errors += 1,
            Outcome::Skipped => self.skipped += 1,
            Outcome::Flaky => self.flaky += 1,
        }
    }
}

/// How a test case ended.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Passed,
    Failed,
    Error,
    Skipped,
    /// Passed after failing and being rerun (`flakyFailure`, `flakyError`).
    Flaky,
}

impl Outcome {
    /// Failed or errored: what a classification calls a failure.
    pub fn failing(self) -> bool {
        matches!(self, Outcome::Failed | Outcome::Error)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Error => "error",
            Outcome::Skipped => "skipped",
            Outcome::Flaky => "flaky",
        }
    }
}

/// One test case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TestCase {
    /// `classname::name` (or `suite::name` without a classname): the key a case is
    /// matched by across revisions and runs.
    pub id: String,
    /// Its test suite's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub suite: String,
    /// The case's name (`test_kv_cache[1]`).
    pub name: String,
    /// How it ended.
    pub outcome: Outcome,
    /// The failure, error or skip message, cut to 1000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Its time in seconds, as the report gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
    /// Reruns the report lists (`rerunFailure`, `flakyFailure`, ...).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reruns: u32,
    /// `<failure>` elements when there are several (pytest's failed subtests, one
    /// each); absent for one or none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: u32,
    /// The id its runner takes back (`tests/test_x.py::SomeTests::test_basic` for
    /// pytest), where the classname led to a file in the attempt's folder; reports
    /// print it, and `trend` and `bisect` accept either form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
}

/// A SARIF 2.1.0 log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SarifResults {
    /// The file as the step declared it.
    pub file: String,
    /// Its digest; absent when it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<Sha256Digest>,
    /// The tools that wrote it (`runs[].tool.driver.name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// How many results the log holds.
    pub count: u32,
    /// Each finding, in the log's order, as far as the record keeps them (see
    /// `left_out`).
    pub findings: Vec<Finding>,
    /// Findings counted but not listed: beyond 100,000, or beyond 4 MiB of their
    /// text. Comparisons do not classify them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub left_out: u32,
    /// The whole file, copied into the record folder (relative to it) when findings
    /// were left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
    /// Why the file could not be read or parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    /// `ruleId` (or `rule.id`).
    pub rule: String,
    /// The first location's file (`artifactLocation.uri`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its start line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// `level` (`error`, `warning`, `note`), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// The message text, cut to 1000 characters.
    pub message: String,
    /// What the finding is matched by across revisions (with its rule and file): the
    /// tool's own (`partialFingerprints`, `fingerprints`) when it gives one, else
    /// sha256 of rule and message, which does not move when lines do.
    pub fingerprint: String,
}

impl Finding {
    /// The key findings are matched by: rule, file and fingerprint.
    pub fn key(&self) -> (String, String, String) {
        (
            self.rule.clone(),
            self.file.clone().unwrap_or_default(),
            self.fingerprint.clone(),
        )
    }

    /// This finding with its file relative to the first of `roots` it lies in
    /// (as it is when it lies in none).
    pub fn relative_to_any(&self, roots: &[&str]) -> Finding {
        let plain = |f: &str| f.strip_prefix("file://").unwrap_or(f).to_string();
        for root in roots {
            let r = self.relative_to(root);
            if r.file.as_deref().map(plain) != self.file.as_deref().map(plain) {
                return r;
            }
        }
        self.clone()
    }

    /// This finding with its file relative to `root` (a revision's folder), as
    /// tools that print absolute `file://` URIs make it differ per checkout.
    pub fn relative_to(&self, root: &str) -> Finding {
        let mut f = self.clone();
        if let Some(file) = &self.file {
            let plain = file.strip_prefix("file://").unwrap_or(file);
            let root = root.trim_end_matches('/');
            let rel = if root.is_empty() {
                plain
            } else {
                plain
                    .strip_prefix(root)
                    .and_then(|r| r.strip_prefix('/'))
                    .unwrap_or(plain)
            };
            f.file = Some(rel.to_string());
        }
        f
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What the record still has room for, of one results file's items.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Budget {
    used: usize,
    items: usize,
}

impl Budget {
    /// Whether an item of `bytes` of text is kept (and counted against the
    /// budget); `urgent` items (failing cases) may use all of it, others half.
    pub(crate) fn admit(&mut self, bytes: usize, urgent: bool) -> bool {
        let limit = if urgent {
            MAX_KEPT_BYTES
        } else {
            MAX_KEPT_BYTES / 2
        };
        if self.items >= MAX_ITEMS || self.used.saturating_add(bytes) > limit {
            return false;
        }
        self.used += bytes;
        self.items += 1;
        true
    }
}

impl TestCase {
    /// Its text as the record holds it, roughly: strings plus a field overhead.
    pub(crate) fn kept_bytes(&self) -> usize {
        let text = self.id.len()
            + self.suite.len()
            + self.name.len()
            + self.message.as_ref().map_or(0, String::len)
            + self.node_id.as_ref().map_or(0, String::len);
        text + 96
    }
}

impl Finding {
    /// Its text as the record holds it, roughly: strings plus a field overhead.
    pub(crate) fn kept_bytes(&self) -> usize {
        let text = self.rule.len()
            + self.file.as_ref().map_or(0, String::len)
            + self.level.as_ref().map_or(0, String::len)
            + self.message.len()
            + self.fingerprint.len();
        text + 96
    }
}

/// At most `MAX_MESSAGE` characters, trimmed.
pub(crate) fn cut(s: &str) -> String {
    let t = s.trim();
    match t.char_indices().nth(MAX_MESSAGE) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
}

/// Read a results file the way outputs are read: a regular file, bounded.
pub(crate) fn read(path: &std::path::Path) -> Result<(Vec<u8>, Sha256Digest), String> {
    // Not through a link: a step must not make the record quote a file outside it.
    let bytes = crate::digest::read_regular(path, crate::digest::Follow::No, MAX_RESULTS_BYTES)
        .map_err(|e| e.to_string())?;
    let d = crate::digest::sha256_bytes(&bytes);
    Ok((bytes, d))
}
