//! The index as an interface: its read-only views, read with `pandas.read_sql` and
//! DuckDB's `sqlite_scan` as docs/tracking.md's recipes do, hold the records' own
//! samples, test failures and findings; a view planted under one of their names is
//! replaced.

use std::process::Command;

use crate::support::{self, skip_or_fail, Need};

const PLAN: &str = r#"schema = "orchestrate/plan/v1"
name = "sql"

[steps.bench]
repeats = 3
shell = '''printf '{"tok_s": %s}' "$((100 + ${repeat}))" > "$ORCHESTRATE_METRICS"'''

[steps.tests]
shell = '''printf '<testsuite name="s" tests="2"><testcase classname="s" name="a"/><testcase classname="s" name="b"><failure message="x"/></testcase></testsuite>' > ${out}/junit.xml'''
results = { junit = "${out}/junit.xml" }
"#;

/// docs/tracking.md's pandas recipe, as written there, on the index of `records`.
const RECIPE: &str = r#"
import json, sqlite3, sys
import pandas as pd

index = sys.argv[1] + "/.orchestrate-index.sqlite"
con = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
samples = pd.read_sql("SELECT * FROM v_samples WHERE verified", con)
steps = pd.read_sql("SELECT * FROM v_steps WHERE metric = 'tok_s'", con)
failing = pd.read_sql("SELECT run_id, step, test_id FROM v_failing_tests", con)
tests = pd.read_sql("SELECT * FROM v_tests", con)
runs = pd.read_sql("SELECT * FROM v_runs ORDER BY started_at", con)
tok = samples[samples.metric == "tok_s"].sort_values(["run_id", "sample"])
print(json.dumps({
    "runs": runs.run_id.tolist(),
    "tok_s": tok.groupby("run_id").value.apply(list).to_dict(),
    "mean": steps.set_index("run_id")["mean"].to_dict(),
    "failing": failing.test_id.tolist(),
    "cases": tests.cases.tolist(),
}))
"#;

fn python_has(modules: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `n` runs of the plan in `root/records`, indexed by `orchestrate runs`; their
/// record folders.
fn indexed_runs(root: &std::path::Path, n: usize) -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
    let plan = root.join("sql.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let records = root.join("records");
    let dirs = (0..n)
        .map(|_| support::run_plan_in(root, &plan, &records, &[]).0)
        .collect();
    let out = support::cli()
        .arg("runs")
        .arg("--records")
        .arg(&records)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", support::shown(&out));
    (records, dirs)
}

/// What a Python recipe printed (JSON) when given the records folder.
fn recipe(code: &str, records: &std::path::Path) -> serde_json::Value {
    let out = Command::new("python3")
        .args(["-c", code])
        .arg(records)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", support::shown(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn pandas_reads_the_views_as_the_records_hold_them() {
    if !python_has("pandas") {
        return skip_or_fail(Need::PyTools, "pandas is not installed");
    }
    let t = tempfile::tempdir().unwrap();
    let (records, dirs) = indexed_runs(t.path(), 2);
    let got = recipe(RECIPE, &records);
    let ids: Vec<String> = dirs
        .iter()
        .map(|d| {
            support::record_json(d)["run_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(got["runs"], serde_json::json!(ids));
    for id in &ids {
        assert_eq!(
            got["tok_s"][id],
            serde_json::json!([101.0, 102.0, 103.0]),
            "{got}"
        );
        assert_eq!(got["mean"][id], 102.0, "{got}");
    }
    assert_eq!(got["failing"], serde_json::json!(["s::b", "s::b"]));
    assert_eq!(got["cases"], serde_json::json!([2, 2]));
    // The recipe the docs give is this one.
    let doc = std::fs::read_to_string(support::project("docs/tracking.md")).unwrap();
    for line in RECIPE
        .lines()
        .filter(|l| l.contains("read_sql") || l.contains("connect"))
    {
        assert!(doc.contains(line.trim()), "docs/tracking.md lacks: {line}");
    }
}

/// docs/tracking.md's DuckDB recipe, offline: the SQLite extension from PyPI's
/// `duckdb-extension-sqlite-scanner` (DuckDB's signed build: loaded with unsigned
/// extensions refused), instead of `INSTALL sqlite`, which downloads it.
const DUCKDB: &str = r#"
import importlib.util, json, pathlib, sys
import duckdb

index = sys.argv[1] + "/.orchestrate-index.sqlite"
spec = importlib.util.find_spec("duckdb_extension_sqlite_scanner")
ext = next(pathlib.Path(spec.origin).parent.glob("extensions/*/sqlite_scanner.duckdb_extension"))
con = duckdb.connect()
assert not con.execute("SELECT current_setting('allow_unsigned_extensions')").fetchone()[0]
con.execute(f"LOAD '{ext}'")
steps = con.execute(f"SELECT run_id, mean FROM sqlite_scan('{index}', 'v_steps') WHERE metric = 'tok_s' ORDER BY run_id").fetchall()
failing = con.execute(f"SELECT count(*) FROM sqlite_scan('{index}', 'v_failing_tests')").fetchone()[0]
print(json.dumps({"mean": {k: float(v) for k, v in steps}, "failing": int(failing)}))
"#;

#[test]
fn duckdb_scans_the_views_as_the_records_hold_them() {
    if !python_has("duckdb, duckdb_extension_sqlite_scanner") {
        return skip_or_fail(
            Need::PyTools,
            "duckdb or its sqlite extension is not installed",
        );
    }
    let t = tempfile::tempdir().unwrap();
    let (records, dirs) = indexed_runs(t.path(), 1);
    let dir = &dirs[0];
    let got = recipe(DUCKDB, &records);
    let id = support::record_json(dir)["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(got["mean"][&id], 102.0, "{got}");
    assert_eq!(got["failing"], 1, "{got}");
    let doc = std::fs::read_to_string(support::project("docs/tracking.md")).unwrap();
    assert!(doc
        .contains("SELECT * FROM sqlite_scan('records/.orchestrate-index.sqlite', 'v_samples');"));
    assert!(
        doc.contains("duckdb-extension-sqlite-scanner==1.5.5"),
        "the offline recipe is documented"
    );
}

#[test]
fn a_view_planted_under_a_views_name_is_replaced() {
    let t = tempfile::tempdir().unwrap();
    let (records, _) = indexed_runs(t.path(), 1);
    let runs = |records: &std::path::Path| {
        let out = support::cli()
            .arg("runs")
            .arg("--records")
            .arg(records)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", support::shown(&out));
    };
    let index = records.join(".orchestrate-index.sqlite");
    let con = rusqlite::Connection::open(&index).unwrap();
    con.execute_batch("DROP VIEW v_samples; CREATE VIEW v_samples AS SELECT 1 AS value;")
        .unwrap();
    drop(con);
    runs(&records);
    let con = rusqlite::Connection::open(&index).unwrap();
    let n: i64 = con
        .query_row(
            "SELECT COUNT(*) FROM v_samples WHERE metric = 'tok_s'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 3);
    let format: String = con
        .query_row("SELECT value FROM meta WHERE key = 'format'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(format, "orchestrate/runs-index/v7");
}
