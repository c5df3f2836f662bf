//! A small pure-Python project with a history, as a new user brings one: a bug-fix
//! commit on top of its parent (the fix also deletes a failing test), then a commit
//! that breaks another test. Its suite uses unittest subtests, so pytest counts
//! failures its own way; ruff finds an unused import on every commit; a benchmark
//! times the changed function. Run once per test process, shared by every test
//! that reads it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::{has_program, skip_or_fail, Need};

/// The project's three commits: parent, fix, break.
pub struct Repo {
    pub dir: PathBuf,
    pub parent: String,
    pub fix: String,
    pub broken: String,
}

const TESTS: &str = r#"import unittest

import textkit


class SomeTests(unittest.TestCase):
    def test_basic(self):
        self.assertEqual(textkit.slugify("Hello World!"), "hello-world")

    def test_lower(self):
        self.assertEqual(textkit.slugify("ABC"), "abc")

    def test_subtests(self):
        cases = [("a b", "a-b"), ("x", "x"), ("  y", "y"), ("z  ", "z")]
        for i, (s, want) in enumerate(cases):
            with self.subTest(i=i):
                self.assertEqual(textkit.slugify(s), want)

    def test_unicode(self):
        self.assertEqual(textkit.slugify("café"), "cafe")


def test_plain():
    assert textkit.slugify("a") == "a"
"#;

/// Make the repository under `root`.
pub fn repo(root: &Path) -> Repo {
    let r = super::GitRepo::init(root.join("textkit"));
    let write = |rel: &str, text: &str| r.write(rel, text);
    let commit = |msg: &str| r.commit(msg);
    write(".gitignore", "__pycache__/\n");
    write(
        "textkit.py",
        "import os\nimport re\n\n\ndef slugify(s):\n    s = s.lower()\n    return re.sub(r\"[^a-z0-9]+\", \"-\", s)\n",
    );
    write("tests/test_textkit.py", TESTS);
    let parent = commit("parent");
    write(
        "textkit.py",
        "import os\nimport re\n\n\ndef slugify(s):\n    s = s.lower()\n    return re.sub(r\"[^a-z0-9]+\", \"-\", s).strip(\"-\") if s.strip() == s else re.sub(r\"[^a-z0-9]+\", \"-\", s)\n",
    );
    let without_unicode = TESTS.replace(
        "    def test_unicode(self):\n        self.assertEqual(textkit.slugify(\"café\"), \"cafe\")\n\n",
        "",
    );
    assert_ne!(without_unicode, TESTS);
    write("tests/test_textkit.py", &without_unicode);
    let fix = commit("slugify: strip dashes");
    write(
        "textkit.py",
        "import os\nimport re\n\n\ndef slugify(s):\n    return re.sub(r\"[^A-Za-z0-9]+\", \"-\", s).strip(\"-\")\n",
    );
    let broken = commit("slugify: keep case");
    Repo {
        dir: r.dir.clone(),
        parent,
        fix,
        broken,
    }
}

/// The plan a user writes for the fix: tests and lint gated on new failures, a
/// benchmark with repeats and a headline metric.
pub fn plan(baseline: &str, implementation: &str) -> String {
    format!(
        r#"schema = "orchestrate/plan/v1"
name = "textkit-fix"
description = "slugify strips dashes"
[limits]
timeout = "120s"
[revisions]
baseline = {{ repo = "textkit", commit = "{baseline}" }}
implementation = {{ repo = "textkit", commit = "{implementation}" }}

[steps.tests]
revisions = ["baseline", "implementation"]
cwd = "${{revision.dir}}"
shell = "python3 -m pytest -q -W error -p no:cacheprovider --junitxml=\"${{out}}/junit.xml\" tests"
results = {{ junit = "${{out}}/junit.xml" }}
gate = "new"

[steps.lint]
revisions = ["baseline", "implementation"]
cwd = "${{revision.dir}}"
shell = "ruff check --no-cache --output-format sarif -o \"${{out}}/lint.sarif\" ."
results = {{ sarif = "${{out}}/lint.sarif" }}
gate = "new"

[steps.bench]
revisions = ["baseline", "implementation"]
repeats = 3
cwd = "${{revision.dir}}"
shell = '''python3 -c "
import json, os, timeit, textkit
t = timeit.timeit(lambda: textkit.slugify('Hello World, again!'), number=500)
json.dump({{'func_ms': t * 1000 / 500}}, open(os.environ['ORCHESTRATE_METRICS'], 'w'))
"'''
[steps.bench.report]
metric = "func_ms"

[report]
templates = ["pr", "html", "junit"]
"#
    )
}

/// The shared run: the fix against its parent.
pub struct FixRun {
    pub root: PathBuf,
    pub repo: Repo,
    pub record: PathBuf,
    pub stdout: String,
    pub code: Option<i32>,
    /// The GitHub step summary the run appended to.
    pub github: String,
}

/// Whether pytest and ruff are here (else the test skips, or fails under
/// `ORCHESTRATE_REQUIRE_PYTOOLS=1`).
pub fn tools() -> bool {
    let pytest = std::process::Command::new("python3")
        .args(["-c", "import pytest"])
        .output()
        .is_ok_and(|o| o.status.success());
    if pytest && has_program("ruff") {
        return true;
    }
    skip_or_fail(Need::PyTools, "pytest or ruff is not installed");
    false
}

/// The fix run, made once per test process.
pub fn fix_run() -> &'static FixRun {
    static RUN: OnceLock<FixRun> = OnceLock::new();
    RUN.get_or_init(|| {
        // Kept for the process: every test reads the same run.
        let root = tempfile::tempdir().unwrap().keep();
        let repo = repo(&root);
        let plan = root.join("plan.toml");
        std::fs::write(&plan, plan_text(&repo)).unwrap();
        let summary = root.join("github-summary.md");
        std::fs::write(&summary, "").unwrap();
        let out = {
            let _host = super::host_shared();
            super::cli()
                .arg("run")
                .arg(&plan)
                .arg("--records")
                .arg(root.join("records"))
                .args(["--progress", "quiet"])
                .env("GITHUB_ACTIONS", "true")
                .env("GITHUB_STEP_SUMMARY", &summary)
                .current_dir(&root)
                .output()
                .unwrap()
        };
        let record = super::record_dirs(&root.join("records"))
            .pop()
            .unwrap_or_else(|| panic!("no record: {}", super::shown(&out)));
        FixRun {
            github: std::fs::read_to_string(&summary).unwrap_or_default(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            code: out.status.code(),
            root,
            repo,
            record,
        }
    })
}

fn plan_text(r: &Repo) -> String {
    plan(&r.parent, &r.fix)
}
