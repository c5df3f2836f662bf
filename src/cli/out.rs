//! The one place the command line writes to stdout and stderr.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use orchestrate::exit::{Error, Verdict};

/// Whether stdout (0) or stderr (1) was closed by its reader (`| head`): then the
/// command goes on to its end and its exit code, printing nothing more there.
static CLOSED: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// Write to stdout (`err` false) or stderr; a closed pipe ends output quietly
/// instead of panicking as `print!` does.
///
/// Whatever the text holds, it draws nothing on a terminal (control characters
/// other than newlines and tabs are written as escapes) and, on GitHub Actions,
/// no line of it acts as a workflow command: the tool's own annotations go
/// through [`command`] alone.
pub fn emit(err: bool, args: std::fmt::Arguments<'_>) {
    let text = args
        .as_str()
        .map_or_else(|| args.to_string(), str::to_string);
    let text = orchestrate::term::safe_lines(&text);
    write(err, &orchestrate::term::fence_commands(&text));
}

/// One workflow command of the tool's own (an `::error` annotation, its fields
/// escaped by `report::github`), on stdout where the runner reads it.
pub fn command(line: &str) {
    write(false, &format!("{}\n", orchestrate::term::safe(line)));
}

fn write(err: bool, text: &str) {
    use std::io::Write;
    let i = usize::from(err);
    if CLOSED[i].load(Ordering::Relaxed) {
        return;
    }
    let r = if err {
        std::io::stderr().lock().write_all(text.as_bytes())
    } else {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes()).and_then(|()| out.flush())
    };
    if r.is_err() {
        CLOSED[i].store(true, Ordering::Relaxed);
    }
}

macro_rules! say {
    ($($t:tt)*) => { $crate::cli::out::emit(false, format_args!($($t)*)) };
}
macro_rules! sayln {
    () => { $crate::cli::out::emit(false, format_args!("\n")) };
    ($($t:tt)*) => { $crate::cli::out::emit(false, format_args!("{}\n", format_args!($($t)*))) };
}
macro_rules! esay {
    ($($t:tt)*) => { $crate::cli::out::emit(true, format_args!($($t)*)) };
}
macro_rules! esayln {
    ($($t:tt)*) => { $crate::cli::out::emit(true, format_args!("{}\n", format_args!($($t)*))) };
}
pub(crate) use {esay, esayln, say, sayln};

pub fn print_json<T: serde::Serialize>(v: &T) -> Result<(), Error> {
    let s = serde_json::to_string_pretty(v)
        .map_err(|e| Error::Failed(format!("cannot write JSON: {e}")))?;
    sayln!("{}", orchestrate::term::json_for_log(&s));
    Ok(())
}

/// `text` to stdout, or atomically into `output`.
pub fn write_output(output: Option<&Path>, text: &str) -> Result<Verdict, Error> {
    match output {
        None => say!("{text}"),
        Some(p) => orchestrate::evidence::atomic::write_atomic(p, text.as_bytes())?,
    }
    Ok(Verdict::Ok)
}
