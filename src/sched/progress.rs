//! What the user sees while a run lives: a live view with one line per running step
//! when stderr is a terminal, else one plain line per event. The numbers are never
//! computed here; this only shows what the dispatcher tells it.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Instant;

use crate::evidence::record::{AttemptRecord, StepStatus};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// Live view on a terminal, plain lines otherwise.
    Auto,
    /// One line per event.
    Plain,
    /// Nothing.
    Quiet,
}

/// What the user must know before the first step starts (isolation that fell back,
/// GRES notes), shown once at the top, as it will be in the summary and the PR body.
pub fn warn_before_start(mode: ProgressMode, warnings: &[String]) {
    if mode == ProgressMode::Quiet || warnings.is_empty() {
        return;
    }
    let tty = std::io::stderr().is_terminal();
    let color = tty && std::env::var_os("NO_COLOR").is_none();
    let mut e = std::io::stderr().lock();
    for w in warnings {
        let w = crate::term::fence_commands(&crate::term::safe_lines(w)).into_owned();
        let _ = if color {
            writeln!(e, "\x1b[33mwarning: {w}\x1b[0m")
        } else {
            writeln!(e, "warning: {w}")
        };
    }
}

struct Running {
    since: Instant,
    attempt: u32,
    of: u32,
    warmup: bool,
}

pub(crate) struct Progress {
    live: bool,
    quiet: bool,
    color: bool,
    total: usize,
    done: usize,
    running: BTreeMap<String, Running>,
    drawn: usize,
}

impl Progress {
    pub fn new(mode: ProgressMode, total: usize) -> Progress {
        let tty = std::io::stderr().is_terminal();
        Progress {
            live: mode == ProgressMode::Auto && tty,
            quiet: mode == ProgressMode::Quiet,
            color: tty && std::env::var_os("NO_COLOR").is_none(),
            total,
            done: 0,
            running: BTreeMap::new(),
            drawn: 0,
        }
    }

    fn line(&mut self, s: &str) {
        if self.quiet {
            return;
        }
        self.clear();
        // What it holds may come from the plan or a step (a check's name, a
        // reason): neither may act on a CI runner.
        let s = crate::term::fence_commands(s);
        let mut e = std::io::stderr().lock();
        let _ = writeln!(e, "{s}");
        drop(e);
        self.redraw();
    }

    fn paint(&self, s: &str, code: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    pub fn note(&mut self, s: &str) {
        let s = self.paint(&crate::term::safe_lines(s), "33");
        self.line(&s);
    }

    pub fn step_started(&mut self, step: &str) {
        self.running.insert(
            step.to_string(),
            Running {
                since: Instant::now(),
                attempt: 0,
                of: 0,
                warmup: false,
            },
        );
        if !self.live {
            self.line(&format!("start  {step}"));
        }
    }

    pub fn attempt_started(&mut self, step: &str, attempt: u32, of: u32, warmup: bool) {
        if let Some(r) = self.running.get_mut(step) {
            r.attempt = attempt;
            r.of = of;
            r.warmup = warmup;
        }
        if !self.live && of > 1 {
            let w = if warmup { " (warm-up)" } else { "" };
            self.line(&format!("       {step}: attempt {attempt}/{of}{w}"));
        }
        self.redraw();
    }

    pub fn attempt_ended(&mut self, step: &str, a: &AttemptRecord) {
        if !a.succeeded() {
            let what = match (a.termination.as_str(), a.exit_code) {
                ("exited", Some(c)) => format!("exit code {c}"),
                (t, _) => t.replace('_', " "),
            };
            let s = self.paint(
                &format!("       {step}: attempt {} failed: {what}", a.attempt),
                "31",
            );
            self.line(&s);
        }
    }

    pub fn step_ended(&mut self, step: &str, status: StepStatus, reason: Option<&str>) {
        let took = self
            .running
            .remove(step)
            .map(|r| crate::units::human_duration(r.since.elapsed()));
        self.done += 1;
        let (word, code) = match status {
            StepStatus::Succeeded => ("ok", "32"),
            StepStatus::Reused => ("reused", "32"),
            StepStatus::Failed => ("FAILED", "31"),
            StepStatus::Cancelled => ("cancelled", "33"),
            StepStatus::Skipped => ("skipped", "33"),
            StepStatus::NotRun => ("not run", "33"),
            StepStatus::UpstreamFailed => ("FAILED", "31"),
        };
        let mut s = format!("{:<6} {step}", self.paint(word, code),);
        if let Some(t) = took {
            s.push_str(&format!(" ({t})"));
        }
        if let Some(r) = reason {
            s.push_str(&format!(": {}", crate::term::safe(r)));
        }
        self.line(&s);
    }

    fn clear(&mut self) {
        if self.live && self.drawn > 0 {
            let mut e = std::io::stderr().lock();
            for _ in 0..self.drawn {
                let _ = write!(e, "\x1b[1A\x1b[2K");
            }
            let _ = e.flush();
            self.drawn = 0;
        }
    }

    /// Redraw the live lines (one per running step).
    pub fn redraw(&mut self) {
        if !self.live || self.quiet {
            return;
        }
        self.clear();
        let mut lines = Vec::new();
        for (step, r) in &self.running {
            let what = if r.of == 0 {
                "waiting for devices".to_string()
            } else if r.warmup {
                format!("warm-up {} of {}", r.attempt, r.of)
            } else {
                format!("attempt {} of {}", r.attempt, r.of)
            };
            lines.push(format!(
                "  {} {step:<24} {:>8}  {what}",
                self.paint("▶", "36"),
                crate::units::human_duration(r.since.elapsed())
            ));
        }
        lines.push(format!("  {}/{} steps done", self.done, self.total));
        let mut e = std::io::stderr().lock();
        for l in &lines {
            let _ = writeln!(e, "{l}");
        }
        let _ = e.flush();
        self.drawn = lines.len();
    }

    pub fn finish(&mut self) {
        self.clear();
    }
}
