//! The `orchestrate` command line: parse, dispatch, exit. The words are in
//! `cli::args`, the handlers in `cli/`, every capability in the library.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // glibc gives each thread that allocates an arena of its own and keeps what it
    // freed there: with tokio's and rayon's threads a run would hold several copies
    // of its peak. Two arenas keep the orchestrator's memory what it uses.
    // SAFETY: mallopt only sets an allocator parameter; it is called before any
    // thread starts.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
    let args = cli::normalize_args(std::env::args_os().collect());
    let cli = match cli::args::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    init_tracing(cli.verbose);
    ExitCode::from(cli::exit_code(cli::dispatch(cli.command)))
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
