//! The `orchestrate` command line: its words ([`args`]), one handler per command
//! group, and the one writer ([`out`]). A new subcommand is a variant of
//! [`args::Command`], a handler, and one arm in [`dispatch`]; the words that are
//! subcommands come from clap, never from a list kept by hand.

pub mod args;
mod choices;
pub mod out;

mod ci;
mod examples;
mod host;
mod plan;
mod records;
mod run;
mod shared;

use std::ffi::OsString;

use clap::CommandFactory;
use orchestrate::exit::{Error, Verdict};

use args::{Cli, Command};

/// `orchestrate PLAN` means `orchestrate run PLAN`: insert `run` when the first
/// non-flag argument is not a subcommand (or an alias of one, or `help`).
pub fn normalize_args(mut args: Vec<OsString>) -> Vec<OsString> {
    let cli = Cli::command();
    let is_subcommand = |s: &str| {
        s == "help"
            || cli
                .get_subcommands()
                .any(|c| c.get_name() == s || c.get_all_aliases().any(|a| a == s))
    };
    let first = args
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, a)| !a.to_string_lossy().starts_with('-'));
    if let Some((i, a)) = first {
        if !is_subcommand(&a.to_string_lossy()) {
            args.insert(i, OsString::from("run"));
        }
    }
    args
}

/// Run one command to its verdict.
pub fn dispatch(command: Command) -> Result<Verdict, Error> {
    match command {
        Command::Run(cmd) => run::run(cmd),
        Command::Init { dir, example } => plan::init(&dir, example),
        Command::Completions { shell } => plan::completions(shell),
        Command::Man { command, out } => plan::man(command.as_deref(), out.as_deref()),
        Command::Resume { run } => run::resume(&run),
        Command::Status { run } => run::status(&run),
        Command::Check { plan, load } => plan::check(&plan, &load.options()),
        Command::Schema { which } => plan::schema(which),
        Command::Pin { plan } => plan::pin(&plan),
        Command::Why {
            plan,
            step,
            cache,
            load,
        } => plan::why(&plan, step.as_deref(), &cache, &load.options()),
        Command::Audit { json, records } => records::audit(json, records.as_deref()),
        Command::Devices { json, inventory } => host::devices(json, inventory.as_deref()),
        Command::Cache { what, cache } => host::cache(what, &cache.root(), cache.remote.as_deref()),
        // main() runs it before anything else; its exit code is the job's own.
        Command::SlurmExec { spec } => Ok(Verdict::Code(
            orchestrate::backend::slurm::exec::exec_main(&spec).clamp(0, 255) as u8,
        )),
        // Every other command reads records; none is left over.
        other => {
            on_records(other).unwrap_or_else(|c| Err(Error::Usage(format!("no handler for {c:?}"))))
        }
    }
}

/// What `bisect` looks for: a metric's change, a test's or a check's failure.
fn bisect_target(
    metric: Option<String>,
    threshold: f64,
    test: Option<String>,
    check: Option<String>,
) -> Result<orchestrate::track::bisect::Target, Error> {
    use orchestrate::track::bisect::{metric_target, Target};
    Ok(match (metric, test, check) {
        (Some(m), _, _) => metric_target(&m, threshold).map_err(Error::Usage)?,
        (_, Some(id), _) => Target::Test { id },
        (_, _, Some(name)) => Target::Check { name },
        _ => return Err(Error::Usage("--metric, --test or --check".into())),
    })
}

/// The commands that read records and the index: their verdict, or the command
/// back when it is another.
fn on_records(command: Command) -> Result<Result<Verdict, Error>, Box<Command>> {
    Ok(match command {
        Command::Report {
            run,
            template,
            format,
            output,
            no_verify,
            plan_dir,
        } => {
            let template = if format.is_some() {
                "json".to_string()
            } else {
                template
            };
            records::report(&run, &template, output.as_deref(), no_verify, plan_dir)
        }
        Command::Verify {
            run,
            key,
            require_artifacts,
        } => records::verify(&run, key.as_deref(), require_artifacts),
        Command::Export {
            run,
            ro_crate: _,
            output,
        } => records::export(&run, output.as_deref()),
        Command::Diff {
            runs,
            format,
            diff_only,
        } => records::diff(&runs, format.into(), diff_only),
        Command::Recover { records } => records::recover(&records),
        other => return on_index(other),
    })
}

/// The commands that read the runs' index: their verdict, or the command back when
/// it is another.
fn on_index(command: Command) -> Result<Result<Verdict, Error>, Box<Command>> {
    Ok(match command {
        Command::Runs {
            records,
            plan,
            status,
            since,
            json,
        } => records::runs(
            &records,
            &orchestrate::track::RunFilter {
                plan,
                status,
                since,
            },
            json,
        ),
        Command::Trend {
            step,
            metric,
            records,
            plan,
            by,
            repo,
            noise,
            json,
        } => records::trend(
            &step,
            metric.as_deref(),
            &records,
            plan,
            by.into(),
            &repo,
            noise,
            json,
        ),
        Command::Regressions {
            records,
            plan,
            run,
            history,
            noise,
            junit,
            json,
        } => {
            let filter = orchestrate::track::RunFilter {
                plan,
                ..Default::default()
            };
            let opts = orchestrate::track::regressions::Options {
                run,
                history,
                noise,
            };
            records::regressions(&records, &filter, &opts, junit.as_deref(), json)
        }
        Command::Site {
            records,
            plan,
            repo,
            noise,
            output,
            no_reports,
            watch,
        } => {
            let opts = orchestrate::track::site::SiteOptions {
                repo: Some(repo),
                noise,
                reports: !no_reports,
                refresh: watch,
            };
            records::site(&records, plan, &output, opts)
        }
        Command::Bisect {
            plan,
            good,
            bad,
            metric,
            threshold,
            test,
            check,
            records,
            work,
            json,
        } => bisect_target(metric, threshold, test, check).and_then(|target| {
            records::bisect(&plan, &good, &bad, target, &records, work.as_deref(), json)
        }),
        other => return Err(Box::new(other)),
    })
}

/// The one place a command's end becomes an exit code (and an error its message).
pub fn exit_code(result: Result<Verdict, Error>) -> u8 {
    match result {
        Ok(v) => v.exit_code(),
        Err(e) => {
            if let Error::Plan(p) = &e {
                ci::plan_errors(p);
            }
            out::esay!("{}", e.message());
            e.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(args: &[&str]) -> Vec<String> {
        normalize_args(args.iter().map(OsString::from).collect())
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn every_subcommand_is_known_and_a_plan_path_means_run() {
        for c in Cli::command().get_subcommands() {
            let name = c.get_name();
            assert_eq!(norm(&["orchestrate", name, "x"])[1], name, "{name}");
        }
        assert_eq!(
            norm(&["orchestrate", "plans/a.toml"]),
            ["orchestrate", "run", "plans/a.toml"]
        );
        assert_eq!(
            norm(&["orchestrate", "-v", "a.toml"]),
            ["orchestrate", "-v", "run", "a.toml"]
        );
        assert_eq!(norm(&["orchestrate", "help"]), ["orchestrate", "help"]);
    }
}
