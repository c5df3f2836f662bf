//! The `orchestrate` command line. Only parsing, messages and exit codes live here;
//! every capability is in the library.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Exit codes (DESIGN.md): 0 success; 1 the experiment ran and failed; 2 usage or
/// invalid plan; 3 environment refused; 130 interrupted.
mod exit {
    pub const FAILED: u8 = 1;
    pub const USAGE: u8 = 2;
}

#[derive(Parser, Debug)]
#[command(
    name = "orchestrate",
    version,
    about = "Declarative experiment orchestrator: pinned, isolated, evidenced runs",
    long_about = "Runs a TOML plan as a DAG of isolated step attempts and writes a hashed \
                  evidence record.\n\n`orchestrate PLAN` is the same as `orchestrate run PLAN`.\n\n\
                  Exit codes: 0 success; 1 the experiment ran and failed; 2 usage or invalid \
                  plan; 3 environment refused (pins drifted, devices unavailable, isolation \
                  impossible when required); 130 interrupted."
)]
struct Cli {
    /// More logging (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a plan: validate, verify pins, lease devices, run the DAG, write the record.
    Run {
        /// The plan file.
        plan: PathBuf,
    },
    /// Validate a plan and print its steps in dependency order; runs nothing.
    Check {
        /// The plan file.
        plan: PathBuf,
    },
    /// Print a JSON Schema.
    Schema {
        #[arg(value_enum)]
        which: SchemaKind,
    },
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum SchemaKind {
    /// The plan format.
    Plan,
}

/// `orchestrate PLAN` means `orchestrate run PLAN`: insert `run` when the first
/// non-flag argument is not a subcommand.
fn normalize_args(mut args: Vec<OsString>) -> Vec<OsString> {
    const SUBCOMMANDS: &[&str] = &[
        "run", "check", "schema", "report", "verify", "audit", "devices", "recover", "pin", "diff",
        "help",
    ];
    let first = args
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, a)| !a.to_string_lossy().starts_with('-'));
    if let Some((i, a)) = first {
        let s = a.to_string_lossy();
        if !SUBCOMMANDS.contains(&s.as_ref()) {
            args.insert(i, OsString::from("run"));
        }
    }
    args
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(normalize_args(std::env::args_os().collect())) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE } else { 0 });
        }
    };
    init_tracing(cli.verbose);
    match cli.command {
        Command::Check { plan } => cmd_check(&plan),
        Command::Schema { which } => cmd_schema(which),
        Command::Run { .. } => {
            eprintln!("orchestrate run: not built yet (see the open issue on running plans)");
            ExitCode::from(exit::FAILED)
        }
    }
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::env::var_os("NO_COLOR").is_none())
        .try_init();
}

fn cmd_check(path: &std::path::Path) -> ExitCode {
    match orchestrate::plan::load(path) {
        Ok(plan) => {
            print!("{}", orchestrate::plan::describe(&plan));
            ExitCode::SUCCESS
        }
        Err(errors) => {
            eprint!("{errors}");
            ExitCode::from(exit::USAGE)
        }
    }
}

fn cmd_schema(which: SchemaKind) -> ExitCode {
    match which {
        SchemaKind::Plan => print!("{}", orchestrate::plan::schema_string()),
    }
    ExitCode::SUCCESS
}
