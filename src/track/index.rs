//! The index of a records folder: one SQLite file beside the records
//! (`<records>/.orchestrate-index.sqlite`), refreshed incrementally. A record folder
//! is read again only when its `record.json` or `record.sha256` changed (size, mtime,
//! inode); every one read is checked against its `record.sha256`, and one that does
//! not verify is listed as such, never skipped.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde::Serialize;

/// The index file's name inside a records folder.
pub const INDEX_FILE: &str = ".orchestrate-index.sqlite";

/// The index format; another one is rebuilt from the records. v4: findings keyed by
/// their repository-relative file (an index of v3 keyed them by raw URI); v5: a
/// row is verified against its journal and attestation too, and a run still
/// writing its record is running; v7: a run without a record yet is listed with its
/// progress from its journal (running, dead or unknown).
const FORMAT: &str = "orchestrate/runs-index/v7";

/// Why a records folder could not be indexed.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("cannot read the records folder {path}: {source}")]
    Folder {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the run index {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

/// One run as the index holds it (`runs --json` prints a list of them).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RunRow {
    /// The record folder's name (the run id for a record that verifies).
    pub folder: String,
    /// The records folder it is in.
    pub records: String,
    /// Whether `record.json` matches its `record.sha256`.
    pub verified: bool,
    /// Why it does not verify or what is missing; for a run without a record,
    /// how far it got.
    pub problem: Option<String>,
    /// The run id, the plan's `name` and the run's status (`succeeded`, `failed`,
    /// `interrupted`, …; `running`, `dead` or `unknown` for a run without a record).
    pub run_id: Option<String>,
    pub plan: Option<String>,
    pub status: Option<String>,
    /// The baseline and implementation commits (`[revisions]`, else the plan's git
    /// pin).
    pub baseline: Option<String>,
    pub implementation: Option<String>,
    /// The host it ran on.
    pub host: Option<String>,
    /// When it started (RFC 3339) and how long it took, unrounded.
    pub started_at: Option<String>,
    pub duration_ms: Option<f64>,
    /// The devices it held.
    pub devices: Vec<String>,
    /// `step: metric median` of each step that names a headline metric.
    pub headline: Vec<Headline>,
    /// The folder of the run this one copies (the same run id): listed, and
    /// counted once, there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<String>,
    /// The run is still writing its record (its lock is held): neither verified
    /// nor failed yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub running: bool,
    /// A run without a record yet (running, or dead before writing it): how far its
    /// journal says it got. `status` is then `running`, `dead` (its orchestrator
    /// is gone: `orchestrate recover` writes the record) or `unknown` (no
    /// orchestrator for it on this host; it may run on another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<super::progress::Progress>,
    /// Every step's samples of every metric (and `wall_ms`), for `trend`.
    #[serde(skip)]
    pub series: Vec<Series>,
    /// Every step's test cases that failed, for `trend tests`.
    #[serde(skip)]
    pub tests: Vec<StepTests>,
}

/// A step's samples of one metric in one run (measured attempts that succeeded).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Series {
    pub step: String,
    pub metric: String,
    pub samples: Vec<f64>,
}

/// A step's JUnit cases in one run: how many, and the ids of those that failed or
/// erred (the first 1000); and its SARIF findings' keys (the first 1000), when it
/// declared a SARIF log that was read.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct StepTests {
    pub step: String,
    /// Whether a JUnit report was read (`cases` and `failing` mean something).
    #[serde(default = "yes")]
    pub junit: bool,
    pub cases: u64,
    pub failing: Vec<String>,
    /// `RULE in FILE [fingerprint]` of each finding: what stays the same across
    /// commits when lines move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub findings: Option<Vec<String>>,
}

/// A step's headline metric in one run.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Headline {
    /// The step and its `[steps.X.report] metric`.
    pub step: String,
    pub metric: String,
    /// The median of its measured samples, unrounded, and how many there were.
    pub median: f64,
    pub n: u32,
}

/// What a refresh did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Refreshed {
    /// Record folders read (new or changed).
    pub read: usize,
    /// Left as indexed.
    pub unchanged: usize,
    /// Gone from the folder, dropped from the index.
    pub dropped: usize,
    /// Where the index lives; None when the folder is not writable (kept in memory
    /// for this listing).
    pub index: Option<PathBuf>,
    /// Why the index on disk was not used, when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The index of `records`, brought up to date.
pub struct Index {
    conn: Connection,
    path: PathBuf,
    records: PathBuf,
    note: Option<String>,
}

/// How long a reader or writer waits for another process's write to the index.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Why the index file (or its WAL files) is not ours to believe: another user's,
/// or one others can write. Its rows, triggers and all, would be theirs.
fn not_ours(path: &Path) -> Option<String> {
    let me = nix::unistd::geteuid().as_raw();
    ["", "-wal", "-shm"].iter().find_map(|end| {
        let mut p = path.to_path_buf().into_os_string();
        p.push(end);
        let m = std::fs::symlink_metadata(&p).ok()?;
        let p = PathBuf::from(p);
        if m.uid() != me {
            Some(format!(
                "{} is owned by uid {}, not by you (uid {me}): its rows are not believed; a private index in memory was used",
                p.display(),
                m.uid()
            ))
        } else if m.mode() & 0o022 != 0 {
            Some(format!(
                "{} is writable by others (mode {:o}): its rows are not believed; a private index in memory was used",
                p.display(),
                m.mode() & 0o7777
            ))
        } else {
            None
        }
    })
}

/// What a record folder's two files look like on disk: read again when it changes.
fn stamp(dir: &Path) -> String {
    let one = |name: &str| match std::fs::symlink_metadata(dir.join(name)) {
        Ok(m) if m.file_type().is_file() => {
            format!("{}:{}:{}:{}", m.len(), m.mtime(), m.mtime_nsec(), m.ino())
        }
        Ok(_) => "not-a-file".to_string(),
        Err(_) => "missing".to_string(),
    };
    // The journal and the attestation too: each is checked on read.
    format!(
        "{}|{}|{}|{}",
        one("record.json"),
        one("record.sha256"),
        one(crate::evidence::attestation::ATTESTATION_FILE),
        one("journal.jsonl")
    )
}

impl Index {
    /// Open (or create) the index of `records`; an index the folder cannot hold is
    /// kept in memory.
    pub fn open(records: &Path) -> Result<Index, IndexError> {
        let path = records.join(INDEX_FILE);
        let sql = |source| IndexError::Sqlite {
            path: path.clone(),
            source,
        };
        // A link in place of the index or its journal files is never followed: it is
        // someone else's file. Then (or when the folder is not writable) the index
        // lives in memory for this listing.
        let planted = ["", "-wal", "-shm"].iter().any(|end| {
            let mut p = path.clone().into_os_string();
            p.push(end);
            std::fs::symlink_metadata(&p).is_ok_and(|m| !m.file_type().is_file())
        });
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let on_file = |path: &Path| {
            Connection::open_with_flags(path, flags)
                .ok()
                .filter(|c| c.busy_timeout(BUSY_WAIT).is_ok() && prepare(c).is_ok())
        };
        let note = if planted { None } else { not_ours(&path) };
        let planted = planted || note.is_some();
        let mut conn = if planted { None } else { on_file(&path) };
        if conn.is_none() && !planted && std::fs::symlink_metadata(&path).is_ok() {
            // Ours and damaged (it is only ever rebuilt from the records): start over.
            for end in ["", "-wal", "-shm"] {
                let mut p = path.clone().into_os_string();
                p.push(end);
                let _ = std::fs::remove_file(&p);
            }
            conn = on_file(&path);
        }
        let conn = match conn {
            Some(c) => c,
            None => {
                let c = Connection::open_in_memory().map_err(sql)?;
                prepare(&c).map_err(sql)?;
                c
            }
        };
        let on_disk = conn.path().is_some_and(|p| !p.is_empty());
        Ok(Index {
            conn,
            path: if on_disk { path } else { PathBuf::new() },
            records: records.to_path_buf(),
            note,
        })
    }

    /// Read what is new or changed in the records folder, drop what is gone.
    pub fn refresh(&mut self) -> Result<Refreshed, IndexError> {
        let folder_err = |source| IndexError::Folder {
            path: self.records.clone(),
            source,
        };
        let mut found: Vec<(String, PathBuf)> = Vec::new();
        for e in std::fs::read_dir(&self.records).map_err(folder_err)? {
            let e = e.map_err(folder_err)?;
            // Folders only, never through a link.
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            // A run in progress has its journal before its record.
            let has = |f: &str| e.path().join(f).exists();
            if name.starts_with('.') || !(has("record.json") || has("journal.jsonl")) {
                continue;
            }
            found.push((name, e.path()));
        }
        let path = self.path.clone();
        let sql = |source| IndexError::Sqlite {
            path: path.clone(),
            source,
        };
        // Taken at once, so a concurrent refresh waits its turn instead of failing
        // when it would upgrade a read to a write.
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(sql)?;
        let mut done = Refreshed {
            index: (!path.as_os_str().is_empty()).then(|| path.clone()),
            note: self.note.clone(),
            ..Refreshed::default()
        };
        {
            // A run that was still writing is read again whatever its stamp: it
            // may have died since.
            let mut known = tx
                .prepare(
                    "SELECT stamp FROM runs WHERE folder = ?1
                     AND NOT (verified = 0 AND IFNULL(status, '') IN ('running', 'unknown'))",
                )
                .map_err(sql)?;
            let mut put = tx
                .prepare(
                    "INSERT OR REPLACE INTO runs (folder, stamp, verified, problem, run_id,
                     plan, status, baseline, implementation, host, started_at, duration_ms,
                     devices, headline, series, tests, progress)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,
                     ?15, ?16, ?17)",
                )
                .map_err(sql)?;
            for (name, dir) in &found {
                let now = stamp(dir);
                let was: Option<String> = known
                    .query_row([name], |r| r.get(0))
                    .optional()
                    .map_err(sql)?;
                if was.as_deref() == Some(now.as_str()) {
                    done.unchanged += 1;
                    continue;
                }
                let row = read_row(name, dir);
                put.execute(params![
                    name,
                    now,
                    row.verified,
                    row.problem,
                    row.run_id,
                    row.plan,
                    row.status,
                    row.baseline,
                    row.implementation,
                    row.host,
                    row.started_at,
                    row.duration_ms,
                    to_json(&row.devices),
                    to_json(&row.headline),
                    to_json(&row.series),
                    to_json(&row.tests),
                    row.progress.as_ref().map(to_json),
                ])
                .map_err(sql)?;
                done.read += 1;
            }
        }
        let names: std::collections::HashSet<&str> =
            found.iter().map(|(n, _)| n.as_str()).collect();
        let indexed: Vec<String> = {
            let mut q = tx.prepare("SELECT folder FROM runs").map_err(sql)?;
            let rows = q.query_map([], |r| r.get::<_, String>(0)).map_err(sql)?;
            rows.collect::<Result<_, _>>().map_err(sql)?
        };
        for gone in indexed.iter().filter(|n| !names.contains(n.as_str())) {
            tx.execute("DELETE FROM runs WHERE folder = ?1", [gone])
                .map_err(sql)?;
            done.dropped += 1;
        }
        tx.commit().map_err(sql)?;
        Ok(done)
    }

    /// Every indexed run, oldest first.
    pub fn rows(&self) -> Result<Vec<RunRow>, IndexError> {
        let sql = |source| IndexError::Sqlite {
            path: self.path.clone(),
            source,
        };
        let mut q = self
            .conn
            .prepare(
                "SELECT folder, verified, problem, run_id, plan, status, baseline,
                 implementation, host, started_at, duration_ms, devices, headline,
                 series, tests, progress
                 FROM runs ORDER BY COALESCE(started_at, ''), folder",
            )
            .map_err(sql)?;
        let records = self.records.display().to_string();
        let rows = q
            .query_map([], |r| {
                let devices: String = r.get(11)?;
                let headline: String = r.get(12)?;
                let series: String = r.get(13)?;
                let tests: String = r.get(14)?;
                let progress: Option<String> = r.get(15)?;
                let (verified, status): (bool, Option<String>) = (r.get(1)?, r.get(5)?);
                Ok(RunRow {
                    running: !verified && status.as_deref() == Some("running"),
                    folder: r.get(0)?,
                    records: records.clone(),
                    verified: r.get(1)?,
                    problem: r.get(2)?,
                    run_id: r.get(3)?,
                    plan: r.get(4)?,
                    status: r.get(5)?,
                    baseline: r.get(6)?,
                    implementation: r.get(7)?,
                    host: r.get(8)?,
                    started_at: r.get(9)?,
                    duration_ms: r.get(10)?,
                    devices: serde_json::from_str(&devices).unwrap_or_default(),
                    headline: serde_json::from_str(&headline).unwrap_or_default(),
                    duplicate_of: None,
                    series: serde_json::from_str(&series).unwrap_or_default(),
                    tests: serde_json::from_str(&tests).unwrap_or_default(),
                    progress: progress.and_then(|p| serde_json::from_str(&p).ok()),
                })
            })
            .map_err(sql)?;
        rows.collect::<Result<_, _>>().map_err(sql)
    }
}

/// One run id, one run: of the folders holding the same verified run, the one
/// named for it (else the first by name) stands for it; the others are marked
/// copies, and give nothing to a trend, a chart or a count.
pub(crate) fn mark_copies(rows: &mut [RunRow]) {
    use std::collections::BTreeMap;
    let mut by_run: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if let (true, Some(id)) = (r.verified, &r.run_id) {
            by_run.entry(id.clone()).or_default().push(i);
        }
    }
    for (id, mut at) in by_run {
        if at.len() < 2 {
            continue;
        }
        at.sort_by(|&a, &b| {
            (rows[a].folder != id, &rows[a].folder).cmp(&(rows[b].folder != id, &rows[b].folder))
        });
        let r0 = &rows[at[0]];
        let keep = format!("{}/{}", r0.records, r0.folder);
        for &i in &at[1..] {
            let r = &mut rows[i];
            r.duplicate_of = Some(keep.clone());
            r.series.clear();
            r.tests.clear();
            r.headline.clear();
            r.problem = Some(format!("a copy of run {id}, counted once, in {keep}"));
        }
    }
}

/// What the project creates in an index: anything else (a trigger that rewrites
/// rows, a view, a table) was planted, and the index is rebuilt.
const SCHEMA: &[(&str, &str)] = &[
    ("table", "meta"),
    ("table", "runs"),
    ("index", "sqlite_autoindex_meta_1"),
    ("index", "sqlite_autoindex_runs_1"),
    ("view", "v_runs"),
    ("view", "v_samples"),
    ("view", "v_steps"),
    ("view", "v_tests"),
    ("view", "v_failing_tests"),
    ("view", "v_findings"),
];

/// The read-only views users query (docs/tracking.md, "The index as an
/// interface"): one row per run, per sample, per step and metric, per step's
/// JUnit report, per failing case, per finding. Every view has `verified`: a run
/// whose record does not verify is there, and marked.
const VIEWS: &[(&str, &str)] = &[
    (
        "v_runs",
        "SELECT folder, run_id, plan, status, verified, problem, baseline, implementation, \
         host, started_at, duration_ms, progress FROM runs",
    ),
    (
        "v_samples",
        "SELECT r.folder, r.run_id, r.plan, r.verified, json_extract(s.value, '$.step') AS step, \
         json_extract(s.value, '$.metric') AS metric, CAST(v.key AS INTEGER) + 1 AS sample, \
         v.value AS value FROM runs r, json_each(r.series) s, json_each(s.value, '$.samples') v",
    ),
    (
        "v_steps",
        "SELECT folder, run_id, plan, verified, step, metric, COUNT(*) AS n, MIN(value) AS min, \
         MAX(value) AS max, AVG(value) AS mean FROM v_samples \
         GROUP BY folder, run_id, plan, verified, step, metric",
    ),
    (
        "v_tests",
        "SELECT r.folder, r.run_id, r.plan, r.verified, json_extract(t.value, '$.step') AS step, \
         json_extract(t.value, '$.cases') AS cases, \
         json_array_length(t.value, '$.failing') AS failing \
         FROM runs r, json_each(r.tests) t WHERE json_extract(t.value, '$.junit')",
    ),
    (
        "v_failing_tests",
        "SELECT r.folder, r.run_id, r.plan, r.verified, json_extract(t.value, '$.step') AS step, \
         f.value AS test_id FROM runs r, json_each(r.tests) t, json_each(t.value, '$.failing') f",
    ),
    (
        "v_findings",
        "SELECT r.folder, r.run_id, r.plan, r.verified, json_extract(t.value, '$.step') AS step, \
         f.value AS finding FROM runs r, json_each(r.tests) t, \
         json_each(t.value, '$.findings') f",
    ),
];

/// Each view as [`VIEWS`] defines it: one whose text differs (an older format's, or
/// one planted under its name) is replaced.
fn views(conn: &Connection) -> rusqlite::Result<()> {
    for (name, body) in VIEWS {
        let want = format!("CREATE VIEW {name} AS {body}");
        let have: Option<String> = conn
            .query_row(
                "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = ?1",
                [name],
                |r| r.get(0),
            )
            .optional()?;
        if have.as_deref() != Some(want.as_str()) {
            conn.execute_batch(&format!("DROP VIEW IF EXISTS {name}; {want};"))?;
        }
    }
    Ok(())
}

/// The index's tables, emptied when they were written by another format; an
/// error when it holds anything the project did not create.
fn prepare(conn: &Connection) -> rusqlite::Result<()> {
    let mut q = conn.prepare("SELECT type, name FROM sqlite_master")?;
    let objects: Vec<(String, String)> = q
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    drop(q);
    if let Some((kind, name)) = objects
        .iter()
        .find(|(k, n)| !SCHEMA.contains(&(k.as_str(), n.as_str())))
    {
        return Err(rusqlite::Error::InvalidParameterName(format!(
            "the index holds a {kind} `{name}` the project did not create"
        )));
    }
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
    )?;
    let format: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = 'format'", [], |r| {
            r.get(0)
        })
        .optional()?;
    if format.as_deref() != Some(FORMAT) {
        conn.execute_batch("DROP TABLE IF EXISTS runs;")?;
    }
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS runs (
             folder TEXT PRIMARY KEY,
             stamp TEXT NOT NULL,
             verified INTEGER NOT NULL,
             problem TEXT,
             run_id TEXT, plan TEXT, status TEXT, baseline TEXT, implementation TEXT,
             host TEXT, started_at TEXT, duration_ms REAL,
             devices TEXT NOT NULL, headline TEXT NOT NULL,
             series TEXT NOT NULL, tests TEXT NOT NULL, progress TEXT);",
    )?;
    if format.as_deref() != Some(FORMAT) {
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('format', ?1)",
            [FORMAT],
        )?;
    }
    views(conn)
}

/// A list the index stores as JSON text.
fn to_json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

/// One record folder read and checked.
fn read_row(name: &str, dir: &Path) -> RunRow {
    let row = read_row_once(name, dir);
    if row.verified || row.running {
        return row;
    }
    // Judged not running after a read that failed: the run may have written its
    // last files and ended in between. Its folder is final now; what this read
    // finds is what it left.
    read_row_once(name, dir)
}

fn read_row_once(name: &str, dir: &Path) -> RunRow {
    let mut row = empty_row(name);
    // A run still writing its record (record.sha256 and the attestation come last)
    // is running, not damaged.
    let running = || crate::sched::liveness::Judge::new().of(name).is_alive();
    let still_running = |mut row: RunRow| {
        row.running = true;
        row.status = Some("running".into());
        row.problem = Some("still running: its record is being written".into());
        row
    };
    if !dir.join("record.json").exists() {
        return without_record(row, dir);
    }
    let (loaded, bytes) = match crate::report::load::load_with_bytes(dir, false) {
        Ok(l) => l,
        Err(_) if running() => return still_running(row),
        Err(crate::report::ReportError::DigestMismatch { .. }) => {
            row.problem = Some(
                "record.json does not match record.sha256: it was changed after the run \
                 (`orchestrate verify` shows what)"
                    .into(),
            );
            return row;
        }
        Err(e) => {
            row.problem = Some(e.to_string());
            return row;
        }
    };
    let rec = &loaded.record;
    // What `verify` would reject is never believed: the record rebuilt from its
    // journal, and the attestation's subjects, checked on every read.
    // The digest load computed, not the bytes hashed again.
    let digest = crate::digest::Sha256Digest::parse(&loaded.digest)
        .unwrap_or_else(|| crate::digest::sha256_bytes(&bytes));
    let rep = crate::evidence::verify::verify_on_read(dir, rec, &bytes, &digest);
    drop(bytes);
    if !rep.ok(false) {
        if running() {
            return still_running(row);
        }
        let first = rep
            .findings
            .iter()
            .find(|f| {
                !matches!(
                    f.kind,
                    crate::evidence::verify::FindingKind::AbsentArtifact
                        | crate::evidence::verify::FindingKind::NotChecked
                )
            })
            .map(ToString::to_string)
            .unwrap_or_default();
        row.problem = Some(format!("{first} (`orchestrate verify` shows all)"));
        return row;
    }
    row.verified = true;
    if rec.run_id != name {
        row.problem = Some(format!(
            "the record names run {} but sits in {name}",
            rec.run_id
        ));
    }
    describe(&mut row, rec);
    for st in &rec.steps {
        step_rows(&mut row, rec, st);
    }
    row
}

/// A run that has a journal and no record: running, dead before writing it, or
/// neither proven (another host's run in a shared folder); how far it got.
fn without_record(mut row: RunRow, dir: &Path) -> RunRow {
    use crate::sched::liveness::Liveness;
    let verdict = crate::sched::liveness::Judge::new().of(&row.folder);
    let (progress, started) = match super::progress::read(dir) {
        Ok(Some(read)) => read,
        // A run that has just made its folder: its journal names it a moment later.
        _ if verdict.is_alive() => {
            row.running = true;
            row.status = Some("running".into());
            row.problem = Some("starting: its journal does not name the run yet".into());
            return row;
        }
        Ok(None) => {
            row.problem = Some("no record.json, and no journal that names a run".into());
            return row;
        }
        Err(e) => {
            row.problem = Some(format!("no record.json, and its journal: {e}"));
            return row;
        }
    };
    let (status, problem) = match &verdict {
        Liveness::Alive { .. } => ("running", progress.summary()),
        // `run --detach` returned: its jobs go on with no orchestrator to hold a lock.
        _ if progress.detached && !progress.ended => ("detached", progress.summary()),
        Liveness::Dead { why } => (
            "dead",
            format!(
                "dead: {why}, and it wrote no record (`orchestrate recover` writes it from the journal); {}",
                progress.summary()
            ),
        ),
        Liveness::Unknown { .. } => (
            "unknown",
            format!(
                "no record yet, and no orchestrator for it on this host (it ran on {}); {}",
                started.host.as_deref().unwrap_or("an unnamed host"),
                progress.summary()
            ),
        ),
    };
    row.running = verdict.is_alive();
    row.status = Some(status.into());
    row.problem = Some(problem);
    row.run_id = started.run_id;
    row.plan = started.plan;
    row.host = started.host;
    row.started_at = started.started_at;
    row.progress = Some(progress);
    row
}

/// A row for the folder `name` before anything of it is read.
#[doc(hidden)]
pub fn empty_row(name: &str) -> RunRow {
    RunRow {
        folder: name.to_string(),
        records: String::new(),
        verified: false,
        problem: None,
        run_id: None,
        plan: None,
        status: None,
        baseline: None,
        implementation: None,
        host: None,
        started_at: None,
        duration_ms: None,
        devices: Vec::new(),
        headline: Vec::new(),
        series: Vec::new(),
        tests: Vec::new(),
        duplicate_of: None,
        running: false,
        progress: None,
    }
}

/// What the index keeps of a verified record's run: its name, plan, status,
/// commits, host, times, devices and headline metrics.
fn describe(row: &mut RunRow, rec: &crate::record::run::Record) {
    row.run_id = Some(rec.run_id.clone());
    row.plan = Some(rec.run.plan.name.clone());
    row.status = Some(rec.status.as_str().to_string());
    let commit = |baseline: bool| {
        rec.run
            .revisions
            .iter()
            .find(|r| r.baseline == baseline)
            .map(|r| r.commit.clone())
    };
    row.baseline = commit(true);
    row.implementation = commit(false).or_else(|| git_pin(rec));
    row.host = Some(rec.run.host.hostname.clone());
    row.started_at = Some(rec.started_at.clone());
    row.duration_ms = rec.ended_at.as_deref().and_then(|end| {
        let a = chrono::DateTime::parse_from_rfc3339(&rec.started_at).ok()?;
        let b = chrono::DateTime::parse_from_rfc3339(end).ok()?;
        Some((b - a).num_microseconds()? as f64 / 1000.0)
    });
    for a in &rec.allocations {
        if !row.devices.contains(&a.device) {
            row.devices.push(a.device.clone());
        }
    }
    row.headline = crate::report::metrics::step_metrics(rec)
        .into_iter()
        .filter(|m| m.headline)
        .map(|m| Headline {
            step: m.step,
            metric: m.name,
            median: m.stats.median,
            n: m.stats.n,
        })
        .collect();
}

/// A step's series (wall time and every numeric metric) and its tests and
/// findings, as trend and bisect read them.
fn step_rows(
    row: &mut RunRow,
    rec: &crate::record::run::Record,
    st: &crate::record::run::StepRecord,
) {
    let mut names: Vec<&str> = vec!["wall_ms"];
    for a in &st.attempts {
        if let Some(serde_json::Value::Object(m)) = &a.metrics {
            for (k, v) in m {
                if v.is_number() && !names.contains(&k.as_str()) {
                    names.push(k);
                }
            }
        }
    }
    for name in names {
        let metric = (name != "wall_ms").then_some(name);
        let samples = crate::evidence::revisions::samples(st, metric);
        if !samples.is_empty() {
            row.series.push(Series {
                step: st.id.clone(),
                metric: name.to_string(),
                samples,
            });
        }
    }
    let results = crate::evidence::revisions::results_of(st);
    let junit = results
        .and_then(|r| r.junit.as_ref())
        .filter(|j| j.error.is_none());
    let findings = crate::evidence::revisions::findings_of(rec, st)
        .as_ref()
        .map(|s| {
            let mut keys: Vec<String> = s.findings.iter().map(finding_key).collect();
            keys.sort();
            keys.dedup();
            keys.truncate(1000);
            keys
        });
    if junit.is_some() || findings.is_some() {
        row.tests.push(StepTests {
            step: st.id.clone(),
            junit: junit.is_some(),
            cases: junit.map_or(0, |j| j.cases.len() as u64),
            failing: junit
                .map(|j| {
                    j.cases
                        .iter()
                        .filter(|c| c.outcome.failing())
                        .take(1000)
                        .map(|c| c.id.clone())
                        .collect()
                })
                .unwrap_or_default(),
            findings,
        });
    }
}

fn yes() -> bool {
    true
}

/// What names a finding across runs: its rule, its file and the first 12 characters
/// of its fingerprint (lines move; these do not).
pub fn finding_key(f: &crate::record::results::Finding) -> String {
    let fp: String = f.fingerprint.chars().take(12).collect();
    match &f.file {
        Some(file) => format!("{} in {file} [{fp}]", f.rule),
        None => format!("{} [{fp}]", f.rule),
    }
}

/// The commit of a git pin named `implementation` (or the only git pin), for a run
/// without `[revisions]`.
fn git_pin(rec: &crate::record::run::Record) -> Option<String> {
    let git: Vec<&crate::record::pins::PinEntry> = rec
        .run
        .pins
        .entries
        .iter()
        .filter(|e| e.kind == crate::record::pins::PinKind::Git)
        .collect();
    let pick = git
        .iter()
        .find(|e| e.name == "implementation")
        .or_else(|| (git.len() == 1).then(|| &git[0]))?;
    // The observed line starts with the commit ("1a2b3c… (dirty)").
    pick.observed
        .as_deref()?
        .split_whitespace()
        .find(|w| w.len() >= 7 && w.chars().all(|c| c.is_ascii_hexdigit()))
        .map(String::from)
}
