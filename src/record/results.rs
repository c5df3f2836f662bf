//! What an attempt's results files said (JUnit, SARIF), and two revisions' results
//! side by side.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::digest::Sha256Digest;

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

    pub(crate) fn add(&mut self, o: Outcome) {
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

fn is_zero(n: &u32) -> bool {
    *n == 0
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

/// Test cases of the implementation against the baseline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TestsComparison {
    /// The baseline's counts.
    pub baseline: CaseCounts,
    /// The implementation's counts.
    pub implementation: CaseCounts,
    /// Failing on the implementation, not on the baseline (passing, skipped or absent
    /// there): ids.
    pub new: Vec<String>,
    /// Failing on both: ids.
    pub pre_existing: Vec<String>,
    /// Failing on the baseline, passing on the implementation: ids.
    pub fixed: Vec<String>,
    /// Passing on both (flaky counts as passing).
    pub passing: u32,
    /// On the baseline, absent on the implementation: ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    /// Those of `removed` that failed (or erred) on the baseline: ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_failing: Vec<String>,
    /// How many of each class there are (the lists stop at 1000).
    pub totals: ClassTotals,
    /// Items of either side the record does not keep (its `left_out`): counted,
    /// not classified, so no class above is known to be complete.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unclassified: u32,
}

/// Counts of each class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClassTotals {
    /// Failing (or found) only on the implementation.
    pub new: u32,
    /// Failing (or found) on both.
    pub pre_existing: u32,
    /// Failing (or found) only on the baseline.
    pub fixed: u32,
    /// Test cases on the baseline that the implementation does not have.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub removed: u32,
    /// Of those, the ones that failed on the baseline.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub removed_failing: u32,
}

/// Findings of the implementation against the baseline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FindingsComparison {
    /// Findings on the baseline.
    pub baseline: u32,
    /// Findings on the implementation.
    pub implementation: u32,
    /// Only on the implementation.
    pub new: Vec<Finding>,
    /// On both (the implementation's copy).
    pub pre_existing: Vec<Finding>,
    /// Only on the baseline.
    pub fixed: Vec<Finding>,
    /// How many of each class there are (the lists stop at 1000).
    pub totals: ClassTotals,
    /// Items of either side the record does not keep (its `left_out`): counted,
    /// not classified, so no class above is known to be complete.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unclassified: u32,
}
