//! Commands that read or write a plan and run nothing: `init`, `check`, `schema`,
//! `pin`, `why`.

use std::path::Path;

use orchestrate::exit::{Error, Verdict};
use orchestrate::plan::LoadOptions;

use super::args::SchemaKind;
use super::out::{esayln, say, sayln};

fn default_cache() -> std::path::PathBuf {
    orchestrate::cache::Cache::default_root()
}

/// The plan `init` writes: `plans/starter.toml`, which the tests check and run.
const STARTER: &str = include_str!("../../plans/starter.toml");

/// Write a file that is not there yet: an existing one (or a link planted in its
/// place) is never written.
fn write_new(path: &Path, text: &str) -> Result<(), Error> {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => Error::Usage(format!(
                "{} exists: init writes a new plan only (pick another folder)",
                path.display()
            )),
            _ => Error::Usage(format!("cannot write {}: {e}", path.display())),
        })?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|source| Error::Write {
            path: path.to_path_buf(),
            source,
        })
}

/// Write the starter plan to `dir/plan.toml` and its schema beside it (editors with
/// a TOML language server validate the plan as it is typed), never over a file.
pub fn init(dir: &Path) -> Result<Verdict, Error> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::Usage(format!("cannot make {}: {e}", dir.display())))?;
    let plan = dir.join("plan.toml");
    let schema = dir.join("plan.schema.json");
    for p in [&plan, &schema] {
        if p.symlink_metadata().is_ok() {
            return Err(Error::Usage(format!(
                "{} exists: init writes a new plan only (pick another folder)",
                p.display()
            )));
        }
    }
    // In the repository the plan points at schemas/; beside the plan, at its copy.
    let text = STARTER.replacen(
        "#:schema ../schemas/plan.schema.json",
        "#:schema ./plan.schema.json",
        1,
    );
    write_new(&plan, &text)?;
    write_new(&schema, &orchestrate::plan::schema_string())?;
    let shown = plan.display();
    sayln!("wrote {shown} (and its schema, plan.schema.json)");
    sayln!("next:");
    sayln!("  orchestrate check {shown}    validate it and print its steps");
    sayln!("  orchestrate {shown}          run it; the record goes to records/<run-id>/");
    Ok(Verdict::Ok)
}

pub fn check(path: &Path, load: &LoadOptions) -> Result<Verdict, Error> {
    let plan = orchestrate::plan::load_with(path, load)?;
    say!("{}", orchestrate::plan::describe(&plan));
    let pins = orchestrate::run::pins::observe(&plan, &default_cache(), false);
    sayln!("\npins:");
    say!("{}", orchestrate::pins::pin_table(&pins));
    if pins.has_drift() {
        sayln!("\nthese pins would refuse a run (exit 3) without --allow-drift:");
        say!("{}", orchestrate::pins::drift_table(&pins));
    }
    Ok(Verdict::Ok)
}

pub fn schema(which: SchemaKind) -> Result<Verdict, Error> {
    match which {
        SchemaKind::Plan => say!("{}", orchestrate::plan::schema_string()),
        SchemaKind::Record => say!("{}", orchestrate::evidence::record::schema_string()),
    }
    Ok(Verdict::Ok)
}

pub fn pin(path: &Path) -> Result<Verdict, Error> {
    let plan = orchestrate::plan::load(path)?;
    let report = orchestrate::run::pins::observe(&plan, &default_cache(), false);
    let text = orchestrate::pins::pin_plan_text(&plan.source, &report)
        .map_err(|e| Error::Failed(format!("cannot pin {}: {e}", path.display())))?;
    orchestrate::evidence::atomic::write_atomic(path, text.as_bytes())?;
    say!("{}", orchestrate::pins::pin_table(&report));
    let errors: Vec<_> = report
        .entries
        .iter()
        .filter(|e| e.status == orchestrate::pins::PinStatus::Error)
        .collect();
    for e in &errors {
        esayln!(
            "warning: {} pin `{}` could not be observed and was left as written: {}",
            e.kind.as_str(),
            e.name,
            e.message.as_deref().unwrap_or("")
        );
    }
    sayln!("pinned {}", path.display());
    if errors.is_empty() {
        Ok(Verdict::Ok)
    } else {
        Err(Error::Refused(format!(
            "{} pin(s) could not be observed",
            errors.len()
        )))
    }
}

pub fn why(
    plan: &Path,
    step: Option<&str>,
    cache: &super::args::CacheArg,
    load: &LoadOptions,
) -> Result<Verdict, Error> {
    let (remote, cache) = (cache.remote.as_deref(), &cache.root());
    let plan = orchestrate::plan::load_with(plan, load)?;
    let store = orchestrate::cache::Cache::open(cache)
        .map_err(|e| Error::Failed(format!("cannot open the cache {}: {e}", cache.display())))?;
    let pins = orchestrate::run::pins::observe(&plan, store.root(), false);
    let text = orchestrate::run::why(&plan, &pins, &store, remote, step).map_err(|e| match e {
        e @ orchestrate::sched::WhyError::Cache { .. } => Error::Failed(e.to_string()),
        e => Error::Usage(e.to_string()),
    })?;
    say!("{text}");
    Ok(Verdict::Ok)
}
