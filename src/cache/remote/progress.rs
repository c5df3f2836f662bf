//! Progress of a long transfer: nothing for the first seconds (most blobs take
//! less), then a line on stderr every few seconds with how much is done and how
//! fast, as the scheduler's own progress lines are written.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Silence for a transfer shorter than this.
const QUIET_FOR: Duration = Duration::from_secs(3);
/// Between two lines.
const EVERY: Duration = Duration::from_secs(5);

/// A transfer of `total` bytes, told as it goes.
pub struct Progress {
    what: String,
    total: u64,
    done: AtomicU64,
    start: Instant,
    next: Mutex<Instant>,
}

const GIB: f64 = (1u64 << 30) as f64;

impl Progress {
    pub fn new(what: String, total: u64) -> Progress {
        let start = Instant::now();
        Progress {
            what,
            total,
            done: AtomicU64::new(0),
            start,
            next: Mutex::new(start + QUIET_FOR),
        }
    }

    /// `n` more bytes moved.
    pub fn add(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        let now = Instant::now();
        let Ok(mut next) = self.next.try_lock() else {
            return;
        };
        if now >= *next {
            *next = now + EVERY;
            let secs = now.duration_since(self.start).as_secs_f64();
            say(format_args!(
                "{}: {:.2} of {:.2} GiB ({:.2} GiB/s)",
                self.what,
                done as f64 / GIB,
                self.total as f64 / GIB,
                done as f64 / GIB / secs
            ));
        }
    }

    /// The transfer is over: a last line when any was said.
    pub fn end(&self) {
        let secs = self.start.elapsed();
        if secs >= QUIET_FOR {
            let done = self.done.load(Ordering::Relaxed);
            say(format_args!(
                "{}: {done} bytes in {:.1} s ({:.2} GiB/s)",
                self.what,
                secs.as_secs_f64(),
                done as f64 / GIB / secs.as_secs_f64()
            ));
        }
    }
}

fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "  {line}");
}

/// A writer that tells `progress` what passes through it.
pub struct Counting<'a, W: ?Sized> {
    pub inner: &'a mut W,
    pub progress: &'a Progress,
}

impl<W: std::io::Write + ?Sized> std::io::Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.progress.add(n as u64);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
