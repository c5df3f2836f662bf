//! Commands that read or write a plan and run nothing: `init`, `check`, `schema`,
//! `pin`, `why`.

use std::path::Path;

use orchestrate::exit::{Error, Verdict};
use orchestrate::plan::LoadOptions;

use super::args::{Example, SchemaKind};
use super::examples;
use super::out::{esayln, say, sayln};

fn default_cache() -> std::path::PathBuf {
    orchestrate::cache::Cache::default_root()
}

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

/// Write a shipped plan (the starter unless `example` names another) and the files
/// it needs to `dir`, with the plan schema beside it (editors with a TOML language
/// server validate the plan as it is typed), never over a file.
pub fn init(dir: &Path, example: Example) -> Result<Verdict, Error> {
    let shipped = examples::shipped(example);
    let mut files = Vec::new();
    for f in shipped.files {
        let text = examples::portable(f.path, f.text).map_err(Error::Failed)?;
        files.push((dir.join(f.path), text));
    }
    files.push((
        dir.join("plan.schema.json"),
        orchestrate::plan::schema_string(),
    ));
    for (p, _) in &files {
        if p.symlink_metadata().is_ok() {
            return Err(Error::Usage(format!(
                "{} exists: init writes a new plan only (pick another folder)",
                p.display()
            )));
        }
    }
    for (p, text) in &files {
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::Usage(format!("cannot make {}: {e}", parent.display())))?;
        }
        write_new(p, text)?;
    }
    let plan = dir.join(shipped.run);
    let shown = plan.display();
    let others = files.len() - 2;
    if others == 0 {
        sayln!("wrote {shown} (and its schema, plan.schema.json)");
    } else {
        sayln!("wrote {shown}, {others} file(s) it needs and its schema, plan.schema.json");
    }
    sayln!("next:");
    sayln!("  orchestrate check {shown}    validate it and print its steps");
    sayln!("  orchestrate {shown}          run it; the record goes to records/<run-id>/");
    Ok(Verdict::Ok)
}

/// A shell's completion script for every subcommand and flag, from the same
/// definition `--help` prints.
pub fn completions(shell: clap_complete::Shell) -> Result<Verdict, Error> {
    use clap::CommandFactory as _;
    let mut cmd = super::args::Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "orchestrate", &mut out);
    say!("{}", String::from_utf8_lossy(&out));
    Ok(Verdict::Ok)
}

/// The man pages: orchestrate(1), whose SUBCOMMANDS section names
/// orchestrate-run(1) and the others, and one page per subcommand.
pub fn man(command: Option<&str>, out: Option<&Path>) -> Result<Verdict, Error> {
    use clap::CommandFactory as _;
    // The package version alone: the pages are kept in the repository (the wheel's
    // share/man) and must not change with every commit.
    let top = super::args::Cli::command().version(env!("CARGO_PKG_VERSION"));
    let mut pages = vec![("orchestrate".to_string(), top.clone())];
    for sub in top.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("orchestrate-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .version(env!("CARGO_PKG_VERSION"));
        pages.push((name, page));
    }
    let render = |cmd: clap::Command| {
        let mut buf = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut buf)
            .map_err(|e| Error::Failed(format!("rendering the man page: {e}")))?;
        Ok::<_, Error>(buf)
    };
    let Some(dir) = out else {
        let want = command.map_or("orchestrate".to_string(), |c| format!("orchestrate-{c}"));
        let Some((_, cmd)) = pages.into_iter().find(|(n, _)| *n == want) else {
            return Err(Error::Usage(format!(
                "no subcommand {:?} (`orchestrate --help` lists them)",
                command.unwrap_or_default()
            )));
        };
        say!("{}", String::from_utf8_lossy(&render(cmd)?));
        return Ok(Verdict::Ok);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::Usage(format!("cannot make {}: {e}", dir.display())))?;
    let count = pages.len();
    for (name, cmd) in pages {
        let path = dir.join(format!("{name}.1"));
        orchestrate::evidence::atomic::write_atomic(&path, &render(cmd)?)?;
    }
    sayln!("wrote {count} man pages to {}", dir.display());
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
        SchemaKind::Runs => say!("{}", orchestrate::track::schema::runs()),
        SchemaKind::Trend => say!("{}", orchestrate::track::schema::trend()),
        SchemaKind::TrendTests => say!("{}", orchestrate::track::schema::trend_tests()),
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
