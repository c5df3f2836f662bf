//! The scheduler's side of the step cache: before a `cache = true` step runs, its
//! key is made from what it is about to run (with the run's folders as `${work}`,
//! `${out}`); an entry with that key is restored into the step's first attempt
//! folder instead of running it. After it ran, its outputs are stored, and a miss
//! says why, field by field, against the entry the step used last.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::context::{AttemptOut, ExecCtx, StepEnd, StepMsg, Upstream, Vars};
use super::prefetch::attempt_dirs;
use crate::cache::{explain, Lookup, Preimage, Reuse, Target, KEY_SCHEMA};
use crate::evidence::journal::Event;
use crate::evidence::record::{
    CacheStatus, OutputKind, OutputRecord, ReusedFrom, StepCacheRecord, StepStatus,
};
use crate::plan::{Segment, Step, StepCommand, StepId, Template, Var, VarSource};

/// What a cacheable step is about to run, keyed.
pub(crate) struct Planned {
    reuse: Arc<Reuse>,
    pre: Preimage,
    key: String,
    /// Declared outputs as written, with the run's folders as placeholders.
    outputs: Vec<String>,
    /// Why its outputs cannot be stored, if they cannot.
    not_storable: Option<String>,
    /// Why the entry with its key was refused (found corrupt and removed).
    refused: std::sync::Mutex<Option<String>>,
    /// Why the shared store had nothing this run could use.
    remote_miss: std::sync::Mutex<Option<String>>,
}

/// The run's folders as placeholders: a key is the same in every run.
struct Placeholders<'a> {
    revisions: &'a BTreeMap<String, String>,
}

impl VarSource for Placeholders<'_> {
    fn run_id(&self) -> &str {
        "${run_id}"
    }
    fn work(&self) -> &str {
        "${work}"
    }
    fn out(&self) -> Option<&str> {
        Some("${out}")
    }
    fn repeat(&self) -> Option<u32> {
        Some(0)
    }
    fn step_out(&self, step: &StepId) -> Option<String> {
        Some(format!("${{steps.{step}.out}}"))
    }
    fn revision_commit(&self, name: &str) -> Option<String> {
        self.revisions.get(name).cloned()
    }
}

/// An output path as a cache entry writes it: the run's folders as placeholders.
pub(crate) fn written(t: &Template, revisions: &BTreeMap<String, String>) -> String {
    t.render(&Placeholders { revisions })
        .unwrap_or_else(|_| t.raw.clone())
}

/// The steps whose outputs `step` names (`${steps.X.out}`).
fn steps_read(step: &Step) -> Vec<StepId> {
    let v = crate::plan::matrix::templates(step);
    let mut out: Vec<StepId> = Vec::new();
    for t in v {
        for seg in &t.segments {
            if let Segment::Var(Var::StepOut(id)) = seg {
                if !out.contains(id) {
                    out.push(id.clone());
                }
            }
        }
    }
    out
}

fn digest_of(path: &Path) -> String {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => crate::digest::sha256_dir(path)
            .map(|(d, _)| format!("sha256:{}", d.hex()))
            .unwrap_or_else(|e| format!("unreadable: {e}")),
        Ok(_) => crate::digest::sha256_file(path)
            .map(|d| format!("sha256:{}", d.hex()))
            .unwrap_or_else(|e| format!("unreadable: {e}")),
        Err(_) => "absent".to_string(),
    }
}

/// Where `name` runs from: itself if it has a `/` (from `cwd` if relative), else the
/// first executable file of that name on `path`.
fn find_program(name: &str, path: Option<&str>, cwd: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let exec = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let p = cwd.join(name);
        return exec(&p).then_some(p);
    }
    path?
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(name))
        .find(|p| exec(p))
}

/// What a key is made in: the plan, the curated environment, the revisions' commits,
/// the run's folders and id.
pub(crate) struct KeyEnv<'a> {
    pub plan: &'a crate::plan::Plan,
    pub base_env: &'a [(String, String)],
    pub revisions: &'a BTreeMap<String, String>,
    pub work_dir: &'a Path,
    pub run_id: &'a str,
    pub reuse: Option<Arc<Reuse>>,
    /// The run's secret values: a key holds a keyed digest of each, never the value.
    pub masker: &'a crate::mask::Masker,
}

/// The key a cacheable step runs under; `None` for a step that is not cached.
pub(crate) fn plan(
    ctx: &ExecCtx,
    step: &Step,
    upstream: &Upstream,
) -> Result<Option<Planned>, String> {
    let env = KeyEnv {
        plan: &ctx.plan,
        base_env: &ctx.base_env,
        revisions: &ctx.opts.revisions,
        work_dir: &ctx.opts.work_dir,
        run_id: &ctx.opts.run_id,
        reuse: ctx.reuse.clone(),
        masker: &ctx.opts.masker,
    };
    plan_in(&env, step, upstream)
}

pub(crate) fn plan_in(
    ctx: &KeyEnv<'_>,
    step: &Step,
    upstream: &Upstream,
) -> Result<Option<Planned>, String> {
    let Some(reuse) = ctx
        .reuse
        .clone()
        .filter(|_| step.cache && super::dag::runs_attempts(step.kind))
    else {
        return Ok(None);
    };
    let ph = Placeholders {
        revisions: ctx.revisions,
    };
    let render = |t: &Template| t.render(&ph).map_err(|e| e.to_string());
    let plan_dir = ctx.plan.dir.display().to_string();
    let relative = |s: String| match s.strip_prefix(&plan_dir) {
        Some(rest) => format!("${{plan_dir}}{rest}"),
        None => s,
    };
    let argv = match &step.command {
        Some(StepCommand::Argv(a)) => a.iter().map(render).collect::<Result<Vec<_>, _>>()?,
        Some(StepCommand::Shell(s)) => vec!["/bin/sh".into(), "-c".into(), render(s)?],
        None => Vec::new(),
    };
    let cwd = match &step.cwd {
        Some(c) => relative(render(c)?),
        None => "${plan_dir}".to_string(),
    };
    let mut env = key_env(ctx, step, &render)?;
    let command_text = argv.clone();
    // A pre-image is stored in plain text and explained in the terminal: secrets
    // enter it only as digests keyed by the store's own key.
    let secret_key = reuse.secret_key;
    let conceal = |v: &str| {
        ctx.masker
            .replace_str(v, &|s| crate::cache::secret_marker(&secret_key, s))
    };
    for (k, v) in env.iter_mut() {
        *v = if crate::mask::looks_secret(k, &ctx.plan.secret_env) {
            crate::cache::secret_marker(&secret_key, v.as_bytes())
        } else {
            conceal(v)
        };
    }
    let argv: Vec<String> = argv.iter().map(|a| conceal(a)).collect();
    let cwd = conceal(&cwd);
    // Inputs are hashed where they are now.
    let real = Vars {
        run_id: ctx.run_id,
        work: ctx.work_dir.display().to_string(),
        out: None,
        repeat: None,
        upstream,
        revisions: ctx.revisions,
    };
    let real_cwd = match &step.cwd {
        Some(c) => PathBuf::from(super::attempt::absolutize(
            &ctx.plan.dir,
            &c.render(&real).map_err(|e| e.to_string())?,
        )),
        None => ctx.plan.dir.clone(),
    };
    let program = match argv.first() {
        Some(shown) => program_digest(ctx, step, &real, &real_cwd)?
            .map(|d| BTreeMap::from([(relative(shown.clone()), d)]))
            .unwrap_or_default(),
        None => BTreeMap::new(),
    };
    let inputs = hashed_inputs(ctx, step, &real, &real_cwd, &render, &relative)?;
    let mut text: Vec<&str> = argv.iter().map(String::as_str).collect();
    text.extend(env.values().map(String::as_str));
    text.push(&cwd);
    text.extend(inputs.keys().map(String::as_str));
    let ups = upstream_read(step, upstream, &text);
    let outputs: Vec<String> = step.outputs.iter().map(render).collect::<Result<_, _>>()?;
    let not_storable = outputs.iter().find_map(|o| {
        target_of(o, Path::new("/out"), Path::new("/work"))
            .err()
            .map(|why| format!("output `{o}` {why}"))
    });
    let other: Vec<String> = step
        .env
        .values()
        .chain(&step.inputs)
        .chain(&step.cwd)
        .map(render)
        .collect::<Result<_, _>>()?;
    let trees = trees_read(&reuse, step, &command_text, &other, &real_cwd);
    let devices = device_kinds(ctx.plan, step);
    let pre = Preimage {
        schema: KEY_SCHEMA.into(),
        kind: step.kind.to_string(),
        argv,
        program,
        cwd,
        env,
        inputs,
        upstream: ups,
        outputs: outputs.clone(),
        tools: reuse.tools.clone(),
        devices,
        trees,
        memory_bytes: if step.cache_memory {
            ctx.plan.memory_of(step).map(|b| b.0)
        } else {
            None
        },
    };
    Ok(Some(Planned {
        reuse,
        key: pre.key(),
        pre,
        outputs,
        not_storable,
        refused: std::sync::Mutex::new(None),
        remote_miss: std::sync::Mutex::new(None),
    }))
}

/// The step's environment as it enters the key: what of the run's environment
/// can change the result (sched::env's rule), the step's own values rendered,
/// the tool folder written as itself.
fn key_env(
    ctx: &KeyEnv<'_>,
    step: &Step,
    render: &dyn Fn(&Template) -> Result<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    let named = |k: &str| step.cache_env.iter().any(|n| n == k);
    let mut env: BTreeMap<String, String> = super::env::with_named(ctx.base_env, &step.cache_env)
        .into_iter()
        .filter(|(k, _)| super::env::in_key(k, false, named(k)))
        .collect();
    for (k, t) in &step.env {
        if super::env::in_key(k, true, named(k)) {
            env.insert(k.clone(), render(t)?);
        } else {
            env.remove(k);
        }
    }
    let tool_dir = super::env::tool_dir().map(|d| d.display().to_string());
    for v in env.values_mut() {
        *v = super::env::key_value(v, tool_dir.as_deref());
    }
    Ok(env)
}

/// Each input's digest where it is now, keyed by its name as the plan wrote it.
fn hashed_inputs(
    ctx: &KeyEnv<'_>,
    step: &Step,
    real: &Vars<'_>,
    real_cwd: &Path,
    render: &dyn Fn(&Template) -> Result<String, String>,
    relative: &dyn Fn(String) -> String,
) -> Result<BTreeMap<String, String>, String> {
    let mut inputs = BTreeMap::new();
    for t in &step.inputs {
        let at = t.render(real).map_err(|e| e.to_string())?;
        let abs = super::attempt::absolutize(&ctx.plan.dir, &at);
        // A bare name that is no file of the plan's folder is a program, found on the
        // step's PATH as its command would be: PATH enters the key through it.
        let found = (!at.contains('/') && !Path::new(&abs).exists())
            .then(|| find_program(&at, step_path(ctx, step, real).ok()?.as_deref(), real_cwd))
            .flatten();
        let d = digest_of(found.as_deref().unwrap_or(Path::new(&abs)));
        inputs.insert(relative(render(t)?), d);
    }
    Ok(inputs)
}

/// The kinds of the devices a step leases, sorted: a step on another kind of
/// device may compute otherwise.
fn device_kinds(plan: &crate::plan::Plan, step: &Step) -> Vec<String> {
    let mut devices: Vec<String> = step
        .devices
        .iter()
        .filter_map(|d| plan.devices.get(d).map(|r| r.kind.clone()))
        .collect();
    devices.sort();
    devices
}

/// The digest of the program an argv step runs, as it runs: `${params.tool}` and
/// `${plan_dir}/tool.sh` filled in, found on the step's `PATH`.
fn program_digest(
    ctx: &KeyEnv<'_>,
    step: &Step,
    real: &Vars<'_>,
    real_cwd: &Path,
) -> Result<Option<String>, String> {
    let Some(StepCommand::Argv(a)) = &step.command else {
        return Ok(None);
    };
    let Some(first) = a.first() else {
        return Ok(None);
    };
    let name = first.render(real).map_err(|e| e.to_string())?;
    let path = step_path(ctx, step, real)?;
    Ok(find_program(&name, path.as_deref(), real_cwd).map(|found| digest_of(&found)))
}

/// The `PATH` the step's programs are found on: the plan's, else the base one.
fn step_path(ctx: &KeyEnv<'_>, step: &Step, real: &Vars<'_>) -> Result<Option<String>, String> {
    Ok(match step.env.get("PATH") {
        Some(t) => Some(t.render(real).map_err(|e| e.to_string())?),
        None => ctx
            .base_env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone()),
    })
}

/// Upstream outputs the step reads: every output of a step it names
/// (`${steps.X.out}`), and any output of a step it needs whose path its command,
/// environment, folder or inputs write (`${work}/model`).
fn upstream_read(step: &Step, upstream: &Upstream, text: &[&str]) -> BTreeMap<String, String> {
    let named = steps_read(step);
    let mut ups = BTreeMap::new();
    for (id, outs) in upstream {
        let Some(last) = outs.iter().rev().find(|a| !a.warmup && !a.failed) else {
            continue;
        };
        let whole = named.contains(id);
        for (path, d) in &last.digests {
            if whole || text.iter().any(|t| t.contains(path.as_str())) {
                ups.insert(
                    format!("{id}: {path}"),
                    d.clone().unwrap_or_else(|| "unhashed".into()),
                );
            }
        }
    }
    ups
}

/// Where an output as written (`${out}/kv.bin`, `${work}/model`) lies in this run:
/// one of the run's folders and a relative path of plain names below it, folded
/// lexically first, so `${work}/../shared` is outside and refused before anything
/// is checked or removed.
pub(crate) fn target_of(written: &str, out: &Path, work: &Path) -> Result<Target, String> {
    let outside = || "is outside the run's folders (${out}, ${work})".to_string();
    let (root, rest, is_out) = if let Some(r) = written.strip_prefix("${out}") {
        (out, r, true)
    } else if let Some(r) = written.strip_prefix("${work}") {
        (work, r, false)
    } else {
        return Err(outside());
    };
    if !(rest.is_empty() || rest.starts_with('/')) || rest.contains("${") {
        return Err(outside());
    }
    let rel = crate::fsx::normalize(rest.trim_start_matches('/')).ok_or_else(outside)?;
    if rel.is_empty() && !is_out {
        return Err("is the whole work folder".to_string());
    }
    Ok(Target {
        root: root.to_path_buf(),
        rel,
    })
}

/// Whether `hay` names the folder `dir` or a path below it.
fn names_path(hay: &str, dir: &str) -> bool {
    if dir.is_empty() || dir == "/" {
        return false;
    }
    let mut from = 0;
    while let Some(i) = hay[from..].find(dir) {
        let end = from + i + dir.len();
        match hay[end..].chars().next() {
            None | Some('/') => return true,
            Some(c) if !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')) => return true,
            _ => {}
        }
        from = end;
    }
    false
}

/// The source trees a step reads, with what each is: the revision of its cell, any
/// tree its command, environment, working folder or inputs name, and any tree a
/// relative argument resolves into from its working folder (`python3 gen.py`).
/// `command` and `other` are written with the run's folders as placeholders, so a
/// work folder inside a repository (`records/` beside the plan) names no tree.
fn trees_read(
    reuse: &Reuse,
    step: &Step,
    command: &[String],
    other: &[String],
    cwd: &Path,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if reuse.trees.is_empty() {
        return out;
    }
    let words: Vec<&str> = command
        .iter()
        .flat_map(|t| t.split(|c: char| c.is_whitespace() || "'\";|&<>()=`".contains(c)))
        .filter(|w| !w.is_empty() && !w.starts_with('-') && !w.contains("${"))
        .collect();
    let revision = step.cell.as_ref().and_then(|(_, c)| {
        c.iter()
            .find(|(a, _)| a == "revision")
            .map(|(_, v)| v.as_str())
    });
    for tree in &reuse.trees {
        let mine = tree.revision.is_some() && tree.revision.as_deref() == revision;
        let named = || {
            command
                .iter()
                .chain(other)
                .any(|t| names_path(t, &tree.dir))
        };
        let resolved = || {
            words.iter().any(|w| {
                let p = crate::plan::lexical_clean(&cwd.join(w));
                p.starts_with(&tree.dir) && std::fs::symlink_metadata(&p).is_ok()
            })
        };
        if mine || named() || resolved() {
            out.insert(tree.name.clone(), tree.id.clone());
        }
    }
    out
}

/// Restore the entry for `p.key` if there is one (and the step is not refreshed).
pub(crate) async fn try_reuse(
    ctx: &Arc<ExecCtx>,
    step: &Step,
    p: &Planned,
    tx: &mpsc::UnboundedSender<StepMsg>,
) -> Option<StepEnd> {
    let template = step.cell.as_ref().map(|(t, _)| t.0.as_str());
    if p.reuse.no_cache || p.reuse.refreshed(&step.id.0, template) {
        return None;
    }
    let cache = p.reuse.cache.clone();
    let key = p.key.clone();
    let expected = p.outputs.clone();
    let found = tokio::task::spawn_blocking(move || cache.lookup(&key, &expected))
        .await
        .ok()?;
    let (entry, shared) = match found {
        Lookup::Hit(e) => (e, None),
        Lookup::Corrupt(why) => {
            let _ = tx.send(StepMsg::Note(format!(
                "cache entry of {} refused: {why}",
                step.id
            )));
            if let Ok(mut r) = p.refused.lock() {
                *r = Some(why);
            }
            return None;
        }
        Lookup::Miss => {
            let (e, from) = pull_shared(p, step, tx).await?;
            (e, Some(from))
        }
    };
    let (out, _) = attempt_dirs(&ctx.opts.work_dir, &ctx.opts.record_dir, &step.id.0, 1);
    // Where each output goes comes from the plan, never from the entry.
    let targets: Vec<Target> = p
        .outputs
        .iter()
        .map(|w| target_of(w, &out, &ctx.opts.work_dir))
        .collect::<Result<_, _>>()
        .ok()?;
    let out2 = out.clone();
    let cache = p.reuse.cache.clone();
    let e2 = entry.clone();
    let t2 = targets.clone();
    let link = step.cache_link;
    let restored = tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&out2)?;
        cache.restore(&e2, &t2, link).map(|m| {
            let at: Vec<(String, PathBuf)> = e2
                .outputs
                .iter()
                .zip(&t2)
                .map(|(o, t)| (o.path.clone(), t.path()))
                .collect();
            (m, at)
        })
    })
    .await
    .ok()?;
    let (mode, placed_at) = match restored {
        Ok(x) => x,
        Err(e) => {
            let _ = tx.send(StepMsg::Note(format!(
                "cache entry of {} not restored ({e}); running it",
                step.id
            )));
            return None;
        }
    };
    let outputs = restored_outputs(&entry, &placed_at);
    let record = StepCacheRecord {
        status: CacheStatus::Reused,
        key: p.key.clone(),
        reused_from: Some(Box::new(ReusedFrom {
            run_id: entry.run_id.clone(),
            step: entry.step.clone(),
            attempt: entry.attempt,
            created: entry.created.clone(),
            remote: shared.as_ref().map(|s| s.0.clone()),
            signed_by: shared.as_ref().map(|s| s.1.clone()),
            stored_by: shared.as_ref().map(|s| s.2.clone()),
        })),
        restore: Some(mode.as_str().to_string()),
        ..StepCacheRecord::default()
    };
    let _ = tx.send(StepMsg::Event(Event::StepCache {
        step: step.id.0.clone(),
        cache: record,
        outputs: outputs.clone(),
    }));
    p.reuse.cache.remember(&p.reuse.plan, &step.id.0, &p.key);
    Some(reused_end(p, &entry, out, outputs))
}

/// After a local miss: the entry the shared store has for `p.key` and a trusted key
/// signed, taken into the local cache; (url, signer, writer) with it. A miss says
/// why in the step's reasons to run.
async fn pull_shared(
    p: &Planned,
    step: &Step,
    tx: &mpsc::UnboundedSender<StepMsg>,
) -> Option<(crate::cache::Entry, (String, String, String))> {
    let tier = p.reuse.remote.clone()?;
    let cache = p.reuse.cache.clone();
    let (key, expected) = (p.key.clone(), p.outputs.clone());
    let pulled = tokio::task::spawn_blocking(move || {
        let r = &tier;
        crate::cache::remote::pull(&cache, r.remote.as_ref(), &r.trust, &key, &expected)
    })
    .await
    .ok()?;
    let url = p.reuse.remote.as_ref()?.remote.url().to_string();
    match pulled {
        crate::cache::remote::Pulled::Hit {
            entry,
            signer,
            writer,
        } => {
            let _ = tx.send(StepMsg::Note(format!(
                "{}: hit in {url} (signed by {signer}, stored by {} in run {})",
                step.id,
                writer.who(),
                crate::cache::remote::signed::printable(&entry.run_id)
            )));
            Some((*entry, (url, signer, writer.who())))
        }
        crate::cache::remote::Pulled::Miss(why) => {
            if let Ok(mut m) = p.remote_miss.lock() {
                *m = Some(why);
            }
            None
        }
    }
}

/// `why` for one step: the entry it would reuse (and, when shared, where), or why
/// it runs.
fn why_one(
    cache: &crate::cache::Cache,
    plan: &str,
    step: &Step,
    p: &Planned,
) -> Result<(crate::cache::Entry, String), Vec<String>> {
    let mut shared = None;
    let other = match cache.lookup(&p.key, &p.outputs) {
        Lookup::Hit(e) => return Ok((e, String::new())),
        Lookup::Miss => match peek_shared(p) {
            Some(Ok(hit)) => return Ok(hit),
            Some(Err(w)) => {
                shared = Some(w);
                Lookup::Miss
            }
            None => Lookup::Miss,
        },
        other => other,
    };
    let mut why = match (other, cache.last_for_step(plan, &step.id.0)) {
        (Lookup::Corrupt(w), _) => vec![format!("its entry is refused: {w}")],
        (_, None) => vec!["no earlier run of this step is in the cache".into()],
        (_, Some((_, old))) => {
            let w = explain(&old, &p.pre);
            if w.is_empty() {
                vec!["its entry was removed".into()]
            } else {
                w
            }
        }
    };
    if let Some(m) = shared {
        why.push(format!("no shared entry: {m}"));
    }
    Err(why)
}

/// `why` after a local miss: the shared entry a pull would take (read and verified,
/// no blob fetched) and where it is, or why there is none; `None` without a shared
/// cache.
fn peek_shared(p: &Planned) -> Option<Result<(crate::cache::Entry, String), String>> {
    let tier = p.reuse.remote.as_ref()?;
    let r = tier.remote.as_ref();
    Some(
        crate::cache::remote::peek(r, &tier.trust, &p.key, &p.outputs).map(|v| {
            let from = format!(
                ", in {} signed by {}, stored by {}",
                r.url(),
                v.signer,
                v.shared.writer.who()
            );
            (v.shared.entry, from)
        }),
    )
}

/// The record of each output as the entry restored it, where it now is.
fn restored_outputs(
    entry: &crate::cache::Entry,
    placed_at: &[(String, PathBuf)],
) -> Vec<OutputRecord> {
    entry
        .outputs
        .iter()
        .zip(placed_at)
        .map(|(o, (_, at))| OutputRecord {
            path: at.display().to_string(),
            kind: match o.kind.as_str() {
                "dir" => OutputKind::Dir,
                "symlink" => OutputKind::Symlink,
                _ => OutputKind::File,
            },
            target: o
                .files
                .first()
                .and_then(|f| f.link.clone())
                .filter(|_| o.kind == "symlink"),
            note: None,
            sha256: Some(o.sha256.clone()),
            bytes: Some(o.bytes),
            files: (o.kind == "dir").then_some(o.files.len() as u64),
        })
        .collect()
}

/// A reused step ends as if its one attempt had made what the entry held.
fn reused_end(
    p: &Planned,
    entry: &crate::cache::Entry,
    out: PathBuf,
    outputs: Vec<OutputRecord>,
) -> StepEnd {
    StepEnd {
        status: StepStatus::Succeeded,
        reason: Some(format!(
            "reused from run {} (cache key {})",
            entry.run_id,
            &p.key[..12]
        )),
        outs: vec![AttemptOut {
            warmup: false,
            out,
            failed: false,
            digests: p
                .outputs
                .iter()
                .cloned()
                .zip(entry.outputs.iter().map(|o| Some(o.sha256.clone())))
                .collect(),
        }],
        outputs: outputs.into_iter().map(|o| o.path).collect(),
        detached: false,
    }
}

/// Why a cacheable step ran: the entry refused, `--no-cache`, `--refresh`, or what
/// changed since the step's last run in the cache.
fn why_it_ran(reuse: &Reuse, step: &Step, template: Option<&str>, p: &Planned) -> Vec<String> {
    let refused = p.refused.lock().ok().and_then(|r| r.clone());
    let why: Vec<String> = if let Some(r) = refused {
        vec![format!("its cache entry was refused: {r}")]
    } else if reuse.no_cache {
        vec!["--no-cache".into()]
    } else if reuse.refreshed(&step.id.0, template) {
        vec![format!(
            "--refresh {}",
            template
                .filter(|t| reuse.refresh.iter().any(|r| r == t))
                .unwrap_or(&step.id.0)
        )]
    } else {
        match reuse.cache.last_for_step(&reuse.plan, &step.id.0) {
            None => vec!["no earlier run of this step is in the cache".into()],
            Some((k, _)) if k == p.key => vec!["its cache entry was missing or refused".into()],
            Some((_, old)) => {
                let w = explain(&old, &p.pre);
                if w.is_empty() {
                    vec!["its cache entry was missing or refused".into()]
                } else {
                    w
                }
            }
        }
    };
    let mut why = if why.is_empty() {
        vec!["not in the cache".into()]
    } else {
        why
    };
    if let Some(m) = p.remote_miss.lock().ok().and_then(|m| m.clone()) {
        why.push(format!("no shared entry: {m}"));
    }
    why
}

/// Outputs that differ from what an earlier run with the same key made: the
/// step is not deterministic in them.
fn differing(p: &Planned, last: &AttemptOut, before: &crate::cache::Entry) -> Vec<String> {
    let mut out = Vec::new();
    for ((w, (_, d)), o) in p.outputs.iter().zip(&last.digests).zip(&before.outputs) {
        let d = d.clone().unwrap_or_default();
        if o.sha256 != d {
            out.push(format!(
                "`{w}`: sha256 {} in run {}, {} now",
                &o.sha256[..12.min(o.sha256.len())],
                before.run_id,
                &d[..12.min(d.len())]
            ));
        }
    }
    out
}

/// Send what a step stored to the shared store, signed with the run's key; what
/// happened goes in `record.remote`, other trusted writers' different results in
/// `record.nondeterministic`.
async fn push_shared(
    p: &Planned,
    run_id: &str,
    entry: crate::cache::Entry,
    record: &mut StepCacheRecord,
) {
    let Some(tier) = p.reuse.remote.clone() else {
        return;
    };
    let url = tier.remote.url().to_string();
    if tier.sign.is_none() {
        record.remote = Some(format!("not pushed to {url}: no signing key (--sign-key)"));
        return;
    }
    let (cache, pre, run) = (p.reuse.cache.clone(), p.pre.clone(), run_id.to_string());
    let pushed = tokio::task::spawn_blocking(move || {
        let writer = crate::cache::remote::Writer {
            user: tier.user.clone(),
            host: tier.host.clone(),
            run_id: run,
        };
        let key = tier.sign.as_ref()?;
        Some(crate::cache::remote::push(
            &cache,
            tier.remote.as_ref(),
            &tier.trust,
            key,
            writer,
            &entry,
            &pre,
        ))
    })
    .await;
    record.remote = Some(match pushed {
        Ok(Some(Ok(done))) => {
            record.nondeterministic.extend(done.differs);
            if done.replaced {
                format!(
                    "pushed to {url} ({} blobs, {} bytes sent), replacing what stood in this key's place and did not verify",
                    done.blobs, done.bytes
                )
            } else if done.wrote {
                format!(
                    "pushed to {url} ({} blobs, {} bytes sent)",
                    done.blobs, done.bytes
                )
            } else {
                format!("already in {url}, signed by this run's key")
            }
        }
        Ok(Some(Err(e))) => format!("not pushed to {url}: {e}"),
        Ok(None) | Err(_) => format!("not pushed to {url}"),
    });
}

/// After a cacheable step ran: say why it ran, store what it made, and flag outputs
/// that differ from an earlier run with the same key.
pub(crate) async fn after_run(
    ctx: &Arc<ExecCtx>,
    step: &Step,
    p: Planned,
    end: &StepEnd,
    tx: &mpsc::UnboundedSender<StepMsg>,
) {
    let reuse = Arc::clone(&p.reuse);
    let template = step.cell.as_ref().map(|(t, _)| t.0.as_str());
    let why = why_it_ran(&reuse, step, template, &p);
    let _ = tx.send(StepMsg::Note(format!(
        "rerun {}: {}",
        step.id,
        why.join("; ")
    )));
    let mut record = StepCacheRecord {
        status: CacheStatus::NotStored,
        key: p.key.clone(),
        why,
        ..StepCacheRecord::default()
    };
    if end.status != StepStatus::Succeeded {
        record.status = CacheStatus::Failed;
    } else if let Some(note) = &p.not_storable {
        record.note = Some(format!("not stored: {note}"));
    } else {
        // Attempts are numbered in the order of `outs`.
        let found = end
            .outs
            .iter()
            .enumerate()
            .rev()
            .find(|(_, a)| !a.warmup && !a.failed);
        let attempt = found.map_or(1, |(i, _)| i as u32 + 1);
        let last = found.map(|(_, a)| a.clone());
        match last {
            None => record.note = Some("not stored: no measured attempt succeeded".into()),
            Some(last) => {
                let outputs: Vec<(String, PathBuf, String)> = p
                    .outputs
                    .iter()
                    .zip(&end.outputs)
                    .zip(&last.digests)
                    .map(|((w, at), (_, d))| {
                        (w.clone(), PathBuf::from(at), d.clone().unwrap_or_default())
                    })
                    .collect();
                let cache = reuse.cache.clone();
                let (key, pre, plan, id, run) = (
                    p.key.clone(),
                    p.pre.clone(),
                    reuse.plan.clone(),
                    step.id.0.clone(),
                    ctx.opts.run_id.clone(),
                );
                let refreshed = reuse.refreshed(&step.id.0, template);
                let stored = tokio::task::spawn_blocking(move || {
                    // Before it is replaced: what an earlier run with this key made.
                    let written: Vec<String> = outputs.iter().map(|o| o.0.clone()).collect();
                    let before = match cache.lookup(&key, &written) {
                        Lookup::Hit(e) => Some(e),
                        _ => None,
                    };
                    if refreshed {
                        cache.remove(&key);
                    }
                    let e = cache.store(&key, &pre, (&plan, &id, &run, attempt), &outputs);
                    (before, e)
                })
                .await;
                match stored {
                    Ok((before, Ok(entry))) => {
                        record.status = CacheStatus::Stored;
                        if let Some(b) = before {
                            record.nondeterministic = differing(&p, &last, &b);
                        }
                        push_shared(&p, &ctx.opts.run_id, entry, &mut record).await;
                    }
                    Ok((_, Err(e))) => record.note = Some(format!("not stored: {e}")),
                    Err(e) => record.note = Some(format!("not stored: {e}")),
                }
            }
        }
    }
    if !record.nondeterministic.is_empty() {
        let _ = tx.send(StepMsg::Note(format!(
            "nondeterministic output in {}: {}",
            step.id,
            record.nondeterministic.join("; ")
        )));
    }
    let _ = tx.send(StepMsg::Event(Event::StepCache {
        step: step.id.0.clone(),
        cache: record,
        outputs: Vec::new(),
    }));
}

/// Why `why` has nothing to say.
#[derive(Debug, thiserror::Error)]
pub enum WhyError {
    #[error("no step `{step}` with cache = true in plan `{plan}`")]
    NoSuchStep { step: String, plan: String },
    #[error("plan `{0}` has no step with cache = true")]
    NothingCached(String),
    /// A step's command or inputs cannot be made from the plan as it stands.
    #[error("{0}")]
    Step(String),
    /// A revision of the plan does not resolve.
    #[error("{0}")]
    Revision(#[from] crate::pins::revisions::RevisionError),
    /// The cache's key for secrets cannot be read.
    #[error("the cache at {path}: {source}")]
    Cache {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Why each cached step of `plan` would run, or which run it would be reused from,
/// without running anything: steps whose upstream would be reused are keyed with the
/// entries' digests; one that reads a step that would run cannot be told.
pub fn why(
    plan: &crate::plan::Plan,
    reuse: Arc<Reuse>,
    revisions: &BTreeMap<String, String>,
    masker: &crate::mask::Masker,
    only: Option<&str>,
) -> Result<String, WhyError> {
    use std::fmt::Write;
    let tool_dir = super::env::tool_dir();
    let base_env = super::base_env(tool_dir.as_deref());
    let cache = reuse.cache.clone();
    let cache = &cache;
    let work = PathBuf::from("/nonexistent-work");
    let env = KeyEnv {
        plan,
        base_env: &base_env,
        revisions,
        work_dir: &work,
        run_id: "why",
        reuse: Some(reuse),
        masker,
    };
    let mut known = Upstream::new();
    let mut out = String::new();
    let mut any = false;
    for step in &plan.steps {
        let template = step.cell.as_ref().map(|(t, _)| t.0.as_str());
        let wanted = only.is_none_or(|o| o == step.id.0 || Some(o) == template);
        if !step.cache {
            continue;
        }
        any |= wanted;
        // Whatever it reads of a step that would run is known only once that ran.
        let unknown: Vec<String> = steps_read(step)
            .into_iter()
            .chain(step.needs.iter().cloned())
            .filter(|id| !known.contains_key(id))
            .fold(Vec::new(), |mut v, id| {
                let s = format!("`{id}`");
                if !v.contains(&s) {
                    v.push(s);
                }
                v
            });
        if !unknown.is_empty() {
            if wanted {
                let _ = writeln!(
                    out,
                    "{}: runs: it reads {} first, which is not reused, so its key is known only then",
                    step.id,
                    unknown.join(", ")
                );
            }
            continue;
        }
        let Some(p) = plan_in(&env, step, &known).map_err(WhyError::Step)? else {
            continue;
        };
        let found = why_one(cache, &plan.name, step, &p);
        match found {
            Ok((e, from)) => {
                if wanted {
                    let _ = writeln!(
                        out,
                        "{}: reused from run {} (step {}, attempt {}, stored {}{from}); key {}",
                        step.id,
                        e.run_id,
                        e.step,
                        e.attempt,
                        e.created,
                        &p.key[..12]
                    );
                }
                known.insert(
                    step.id.clone(),
                    vec![AttemptOut {
                        warmup: false,
                        out: work.join(&step.id.0),
                        failed: false,
                        digests: p
                            .outputs
                            .iter()
                            .cloned()
                            .zip(e.outputs.iter().map(|o| Some(o.sha256.clone())))
                            .collect(),
                    }],
                );
            }
            Err(why) => {
                if !wanted {
                    continue;
                }
                let _ = writeln!(out, "{}: runs: {}", step.id, why.join("; "));
            }
        }
    }
    if !any {
        return Err(match only {
            Some(s) => WhyError::NoSuchStep {
                step: s.to_string(),
                plan: plan.name.clone(),
            },
            None => WhyError::NothingCached(plan.name.clone()),
        });
    }
    Ok(out)
}
