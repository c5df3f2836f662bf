//! The record as a Workflow Run Crate 0.5 (`ro-crate-metadata.json`), so research-data
//! tools (WorkflowHub, ro-crate-py) read it: the plan is the `ComputationalWorkflow`
//! (the crate's main entity), the run one `CreateAction` whose instrument it is, and
//! every attempt a `CreateAction` of its step (a `SoftwareApplication`), failed
//! attempts with `FailedActionStatus` and their error. Files carry their sha256 and
//! size from the record; outputs outside the crate are `file://` entities.
//!
//! The crate's root is the record folder: its logs, plan copy, record and reports are
//! data entities by their paths in it. `export` writes it there, or copies the
//! folder's files to another folder and writes it beside them.

use std::path::{Path, PathBuf};

use super::error::ReportError;

/// Write `ro-crate-metadata.json` for the record in `record_dir` (digest checked):
/// into the record folder, or into `out` with a copy of the record folder's files.
/// Returns the crate's folder.
pub fn export(record_dir: &Path, out: Option<&Path>) -> Result<PathBuf, ReportError> {
    let loaded = super::load::load(record_dir, false)?;
    let write_err = |path: &Path, e: String| ReportError::Read {
        path: path.to_path_buf(),
        error: e,
    };
    let root = match out {
        Some(o) if std::fs::canonicalize(o).ok() != std::fs::canonicalize(record_dir).ok() => {
            if inside(o, record_dir) {
                return Err(write_err(
                    o,
                    "is inside the record folder: the copy would hold itself; name a folder outside it".into(),
                ));
            }
            copy_regular_files(record_dir, o).map_err(|e| write_err(o, e.to_string()))?;
            o.to_path_buf()
        }
        _ => record_dir.to_path_buf(),
    };
    let record_bytes = std::fs::metadata(record_dir.join("record.json"))
        .map(|m| m.len())
        .unwrap_or(0);
    let mut reports = Vec::new();
    for e in std::fs::read_dir(record_dir).map_err(|e| write_err(record_dir, e.to_string()))? {
        let Ok(e) = e else { continue };
        let name = e.file_name().to_string_lossy().into_owned();
        if !crate::evidence::attestation::is_report_name(&name) {
            continue;
        }
        let stop = crate::sys::Stop::new();
        if let Ok((d, bytes)) = crate::digest::sha256_regular(&e.path(), &stop) {
            reports.push((name, d.hex(), bytes));
        }
    }
    reports.sort();
    let meta = crate_metadata(&loaded.record, (&loaded.digest, record_bytes), &reports);
    let mut text =
        serde_json::to_string_pretty(&meta).map_err(|e| ReportError::Serialize(e.to_string()))?;
    text.push('\n');
    let path = root.join("ro-crate-metadata.json");
    crate::evidence::atomic::write_atomic(&path, text.as_bytes())
        .map_err(|e| write_err(&path, e.to_string()))?;
    Ok(root)
}

/// Whether `o` (which may not exist yet) lies inside `dir`: its nearest existing
/// folder, resolved, is `dir` or below it.
fn inside(o: &Path, dir: &Path) -> bool {
    let Ok(dir) = std::fs::canonicalize(dir) else {
        return false;
    };
    let abs = if o.is_absolute() {
        o.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|c| c.join(o))
            .unwrap_or_else(|_| o.to_path_buf())
    };
    let mut cur = Some(abs.as_path());
    while let Some(p) = cur {
        if let Ok(c) = std::fs::canonicalize(p) {
            return c.starts_with(&dir);
        }
        cur = p.parent();
    }
    false
}

/// Copy the regular files below `from` into `to` (links and special files are left
/// out), keeping the layout. Nothing is written through a link found in `to`: a
/// file is written beside its target name and renamed over it (a link there is
/// replaced), and a link where a folder goes is refused.
fn copy_regular_files(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    let dest = crate::fsx::Dir::open(&std::fs::canonicalize(to)?)?;
    copy_into(from, &dest, 0)
}

fn copy_into(from: &Path, dest: &crate::fsx::Dir, depth: usize) -> std::io::Result<()> {
    use std::io::Write;
    if depth > crate::fsx::MAX_DEPTH {
        return Err(std::io::Error::other(
            "the record folder is nested too deep",
        ));
    }
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let ft = e.file_type()?;
        let Some(name) = e.file_name().to_str().map(String::from) else {
            continue;
        };
        if ft.is_dir() {
            let sub = dest.sub_or_make(&name, 0o755)?;
            copy_into(&e.path(), &sub, depth + 1)?;
        } else if ft.is_file() {
            let (mut src, _) = crate::digest::open_regular(&e.path(), crate::digest::Follow::No)?;
            let tmp = crate::fsx::unique_name();
            let mut out = dest.create(&tmp, 0o644)?;
            let copied = std::io::copy(&mut src, &mut out).and_then(|_| out.flush());
            match copied.and_then(|()| dest.rename(&tmp, dest, &name)) {
                Ok(()) => {}
                Err(err) => {
                    let _ = dest.unlink(&tmp);
                    return Err(err);
                }
            }
        }
    }
    Ok(())
}

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::record::run::{AttemptRecord, OutputKind, Record, StepRecord};

/// The profiles the crate conforms to.
const PROFILES: &[(&str, &str)] = &[
    ("https://w3id.org/ro/wfrun/process/0.5", "Process Run Crate"),
    (
        "https://w3id.org/ro/wfrun/workflow/0.5",
        "Workflow Run Crate",
    ),
    (
        "https://w3id.org/workflowhub/workflow-ro-crate/1.0",
        "Workflow RO-Crate",
    ),
];

/// The language of the main workflow.
const LANGUAGE_ID: &str = "#orchestrate-plan";

fn id(s: &str) -> Value {
    json!({ "@id": s })
}

fn status_of(ok: bool) -> Value {
    id(if ok {
        "http://schema.org/CompletedActionStatus"
    } else {
        "http://schema.org/FailedActionStatus"
    })
}

/// A file of the crate (a path inside the record folder) with its digest.
fn file(path: &str, sha256: &str, bytes: u64, name: &str) -> Value {
    json!({
        "@id": path,
        "@type": "File",
        "name": name,
        "sha256": sha256,
        "contentSize": bytes.to_string(),
    })
}

fn attempt_id(step: &str, a: &AttemptRecord) -> String {
    format!("#attempt-{step}-{}", a.attempt)
}

/// `ro-crate-metadata.json` for `rec`, whose `record.json` has `record` (sha256,
/// bytes), with the reports of its folder as (file, sha256, bytes).
pub fn crate_metadata(
    rec: &Record,
    record: (&str, u64),
    reports: &[(String, String, u64)],
) -> Value {
    let mut g = Graph::default();
    g.entities.extend(preamble());
    g.add_file(json!({
        "@id": "plan.toml",
        "@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow"],
        "name": rec.run.plan.name,
        "programmingLanguage": id(LANGUAGE_ID),
        "sha256": rec.run.plan.sha256,
        "hasPart": rec.steps.iter().map(|s| id(&format!("#step-{}", s.id))).collect::<Vec<_>>(),
    }));
    g.add_file(file(
        "record.json",
        record.0,
        record.1,
        "the evidence record",
    ));
    for (name, sha, bytes) in reports {
        g.add_file(file(name, sha, *bytes, name));
    }
    let mut actions: Vec<Value> = Vec::new();
    for s in &rec.steps {
        let declared = rec.run.steps.iter().find(|d| d.id == s.id);
        g.entities.push(step_entity(s, declared));
        for a in &s.attempts {
            let result = g.attempt_results(a);
            actions.push(id(&attempt_id(&s.id, a)));
            g.entities.push(attempt_action(s, a, result));
        }
    }
    let run_id = format!("#run-{}", rec.run_id);
    let run = run_action(rec, &run_id);
    let mut mentions = vec![id(&run_id)];
    mentions.extend(actions);
    let Graph {
        mut entities,
        parts,
        ..
    } = g;
    entities.insert(1, root_dataset(rec, parts, mentions));
    entities.insert(2, run);
    json!({
        // The 1.1 context, with the Bioschemas term spelled out: some copies of the
        // context map it elsewhere, and readers look for this IRI.
        "@context": [
            "https://w3id.org/ro/crate/1.1/context",
            { "ComputationalWorkflow": "https://bioschemas.org/ComputationalWorkflow" },
        ],
        "@graph": entities,
    })
}

/// The entities as gathered, and the root's parts: every data entity, each once.
#[derive(Default)]
struct Graph {
    entities: Vec<Value>,
    parts: Vec<Value>,
    /// The files added so far, so a log two attempts share is one entity.
    seen: BTreeSet<String>,
}

impl Graph {
    /// A file of the crate, added once and made a part of the root.
    fn add_file(&mut self, f: Value) {
        let key = f["@id"].as_str().unwrap_or_default().to_string();
        if self.seen.insert(key.clone()) {
            self.parts.push(id(&key));
            self.entities.push(f);
        }
    }

    /// An attempt's logs and outputs as entities (once each): its action's `result`.
    fn attempt_results(&mut self, a: &AttemptRecord) -> Vec<Value> {
        let mut result: Vec<Value> = Vec::new();
        for log in [&a.stdout, &a.stderr] {
            if !log.path.is_empty() && !log.sha256.is_empty() {
                self.add_file(file(&log.path, &log.sha256, log.bytes, &log.path));
                result.push(id(&log.path));
            }
        }
        for o in &a.outputs {
            if let Some(uri) = self.add_output(o) {
                result.push(id(&uri));
            }
        }
        result
    }

    /// A hashed file or folder output (once), its `@id`; `None` for links and the like.
    fn add_output(&mut self, o: &crate::record::run::OutputRecord) -> Option<String> {
        let (Some(sha), OutputKind::File | OutputKind::Dir) = (&o.sha256, &o.kind) else {
            return None;
        };
        let uri = if o.path.starts_with('/') {
            format!("file://{}", o.path)
        } else {
            o.path.clone()
        };
        if seen_insert(&mut self.entities, &uri) {
            // Outputs live in the run's work folder, outside the crate: web-based
            // data entities, part of the crate by reference.
            self.parts.push(id(&uri));
            self.entities.push(json!({
                "@id": uri,
                "@type": if o.kind == OutputKind::Dir { "Dataset" } else { "File" },
                "name": o.path,
                "sha256": sha,
                "contentSize": o.bytes.unwrap_or(0).to_string(),
            }));
        }
        Some(uri)
    }
}

/// Descriptor, profiles and plan language: what every crate opens with.
fn preamble() -> Vec<Value> {
    let mut out = vec![json!({
        "@id": "ro-crate-metadata.json",
        "@type": "CreativeWork",
        "conformsTo": [
            id("https://w3id.org/ro/crate/1.1"),
            id("https://w3id.org/workflowhub/workflow-ro-crate/1.0"),
        ],
        "about": id("./"),
    })];
    for (uri, name) in PROFILES {
        out.push(json!({
            "@id": uri,
            "@type": "CreativeWork",
            "name": name,
            "version": uri.rsplit('/').next().unwrap_or_default(),
        }));
    }
    out.push(json!({
        "@id": LANGUAGE_ID,
        "@type": "ComputerLanguage",
        "name": "orchestrate plan",
        "alternateName": "orchestrate/plan/v1",
        "version": "1",
    }));
    out
}

/// A step as `SoftwareApplication`; repeats go in the description (no term for them).
fn step_entity(s: &StepRecord, declared: Option<&crate::record::run::DeclaredStep>) -> Value {
    json!({
        "@id": format!("#step-{}", s.id),
        "@type": "SoftwareApplication",
        "name": s.id,
        "description": format!(
            "{} step{}",
            s.kind,
            declared
                .filter(|d| d.repeats > 1 || d.warmup > 0)
                .map(|d| format!(", {} repeats after {} warm-up", d.repeats, d.warmup))
                .unwrap_or_default()
        ),
    })
}

/// One attempt as a `CreateAction`: times where recorded, why it failed if it did.
fn attempt_action(s: &StepRecord, a: &AttemptRecord, result: Vec<Value>) -> Value {
    let mut action = json!({
        "@id": attempt_id(&s.id, a),
        "@type": "CreateAction",
        "name": format!(
            "{} attempt {}{}",
            s.id,
            a.attempt,
            if a.warmup { " (warm-up)" } else { "" }
        ),
        "instrument": id(&format!("#step-{}", s.id)),
        "actionStatus": status_of(a.succeeded()),
        "result": result,
    });
    if !a.started_at.is_empty() {
        action["startTime"] = json!(a.started_at);
    }
    if !a.ended_at.is_empty() {
        action["endTime"] = json!(a.ended_at);
    }
    if !a.succeeded() {
        action["error"] = json!(match (&a.error, a.exit_code) {
            (Some(e), _) => e.clone(),
            (None, Some(c)) => format!("{} with exit code {c}", a.termination.as_str()),
            (None, None) => a.termination.as_str().to_string(),
        });
    }
    action
}

/// The run as the `CreateAction` whose instrument is the plan.
fn run_action(rec: &Record, run_id: &str) -> Value {
    let mut run = json!({
        "@id": run_id,
        "@type": "CreateAction",
        "name": format!("run {} of plan {}", rec.run_id, rec.run.plan.name),
        "instrument": id("plan.toml"),
        "startTime": rec.started_at,
        "actionStatus": status_of(rec.status == crate::record::run::RunStatus::Succeeded),
        "result": [id("record.json")],
    });
    if let Some(e) = &rec.ended_at {
        run["endTime"] = json!(e);
    }
    if let Some(r) = &rec.reason {
        run["error"] = json!(r);
    }
    run
}

/// The root dataset; a plan without a description gets the run's outcome instead.
fn root_dataset(rec: &Record, parts: Vec<Value>, mentions: Vec<Value>) -> Value {
    let failed_steps = rec.steps.iter().filter(|s| !s.status.is_success()).count();
    json!({
        "@id": "./",
        "@type": "Dataset",
        "name": format!("{}: run {}", rec.run.plan.name, rec.run_id),
        "description": rec.run.plan.description.clone().unwrap_or_else(|| format!(
            "Evidence record of run {} ({}; {} of {} steps did not succeed)",
            rec.run_id,
            rec.status.as_str(),
            failed_steps,
            rec.steps.len()
        )),
        "datePublished": rec.ended_at.clone().unwrap_or_else(|| rec.started_at.clone()),
        "license": "https://spdx.org/licenses/Apache-2.0",
        "conformsTo": PROFILES.iter().map(|(u, _)| id(u)).collect::<Vec<_>>(),
        "mainEntity": id("plan.toml"),
        "hasPart": parts,
        "mentions": mentions,
    })
}

/// Whether no entity of `graph` has `@id` `uri` yet.
fn seen_insert(graph: &mut [Value], uri: &str) -> bool {
    !graph.iter().any(|e| e["@id"] == uri)
}
