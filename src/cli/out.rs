//! The one place the command line writes to stdout and stderr.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use orchestrate::exit::{Error, Verdict};

/// Whether stdout (0) or stderr (1) was closed by its reader (`| head`): then the
/// command goes on to its end and its exit code, printing nothing more there.
static CLOSED: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// Write to stdout (`err` false) or stderr; a closed pipe ends output quietly
/// instead of panicking as `print!` does.
pub fn emit(err: bool, args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let i = usize::from(err);
    if CLOSED[i].load(Ordering::Relaxed) {
        return;
    }
    let r = if err {
        std::io::stderr().lock().write_fmt(args)
    } else {
        let mut out = std::io::stdout().lock();
        out.write_fmt(args).and_then(|()| out.flush())
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
    sayln!("{s}");
    Ok(())
}

/// `text` to stdout, or atomically into `output`.
pub fn write_output(output: Option<&Path>, text: &str) -> Result<Verdict, Error> {
    match output {
        None => say!("{text}"),
        Some(p) => orchestrate::evidence::atomic::write_atomic(p, text.as_bytes())
            .map_err(|e| Error::Failed(format!("cannot write {}: {e}", p.display())))?,
    }
    Ok(Verdict::Ok)
}
