//! Making attempt folders ahead of time.
//!
//! An attempt needs four folders (`${out}` and its log folder, and their step parents)
//! and two log files before it can start. On the ext4 disks of our machines (mounted
//! without a journal) creating an inode costs 0.05 to 0.5 ms after heavy file churn
//! such as a cargo build: the allocator skips recently deleted inodes one by one, and
//! for folders it first scans inode groups (Orlov). A chain of short steps would wait
//! for each. So while a step runs, a thread makes the folders and empty log files of
//! the steps that may start when it ends (its dependents) and of its own later
//! attempts; the executor's `create_dir_all` and isolate's truncating open then find
//! them made. At the end of the run, what was made for attempts that never started is
//! removed again (only when empty), so the layout on disk says what ran.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The log files of an attempt, in its log folder.
pub(crate) const STDOUT_LOG: &str = "stdout.log";
pub(crate) const STDERR_LOG: &str = "stderr.log";
const LOG_FILES: [&str; 2] = [STDOUT_LOG, STDERR_LOG];

/// `${out}` and the log folder of attempt `n` of a step.
pub(crate) fn attempt_dirs(work: &Path, record: &Path, step: &str, n: u32) -> (PathBuf, PathBuf) {
    (
        work.join(step).join(n.to_string()),
        record.join("steps").join(step).join(n.to_string()),
    )
}

/// The folders of which attempts (step name, attempt number) were made here.
type Made = Arc<Mutex<BTreeSet<(String, u32)>>>;

pub(crate) struct Prefetcher {
    tx: Option<mpsc::Sender<(String, u32)>>,
    thread: Option<JoinHandle<()>>,
    made: Made,
    work: PathBuf,
    record: PathBuf,
}

impl Prefetcher {
    pub(crate) fn start(work: &Path, record: &Path) -> Prefetcher {
        let (tx, rx) = mpsc::channel::<(String, u32)>();
        let made: Made = Arc::default();
        let (w, r, m) = (work.to_path_buf(), record.to_path_buf(), Arc::clone(&made));
        let thread = std::thread::Builder::new()
            .name("orchestrate-dirs".into())
            .spawn(move || {
                for (step, n) in rx {
                    let (out, logs) = attempt_dirs(&w, &r, &step, n);
                    // Best effort: the executor makes what is missing and reports
                    // its own errors.
                    if std::fs::create_dir_all(&out).is_ok()
                        && std::fs::create_dir_all(&logs).is_ok()
                        && LOG_FILES.iter().all(|f| touch(&logs.join(f)))
                    {
                        m.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert((step, n));
                    }
                }
            })
            .ok();
        Prefetcher {
            // Without the thread, requests are dropped and executors make everything.
            tx: thread.as_ref().map(|_| tx),
            thread,
            made,
            work: work.to_path_buf(),
            record: record.to_path_buf(),
        }
    }

    /// Make the folders of attempts `from..=to` of a step.
    pub(crate) fn request(&self, step: &str, from: u32, to: u32) {
        if let Some(tx) = &self.tx {
            for n in from..=to {
                let _ = tx.send((step.to_string(), n));
            }
        }
    }

    /// Stop, then remove the (empty) folders of attempts that never started.
    pub(crate) fn finish(mut self, started: &BTreeSet<(String, u32)>) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let made = std::mem::take(&mut *self.made.lock().unwrap_or_else(|e| e.into_inner()));
        for (step, n) in made.difference(started) {
            let (out, logs) = attempt_dirs(&self.work, &self.record, step, *n);
            for f in LOG_FILES {
                let log = logs.join(f);
                if std::fs::metadata(&log).is_ok_and(|m| m.len() == 0) {
                    let _ = std::fs::remove_file(&log);
                }
            }
            for dir in [out, logs] {
                // remove_dir refuses a folder that is not empty: nothing is lost.
                let _ = std::fs::remove_dir(&dir);
                if let Some(parent) = dir.parent() {
                    let _ = std::fs::remove_dir(parent);
                }
            }
        }
    }
}

/// Create an empty file unless one exists (never truncates).
fn touch(path: &Path) -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_ahead_and_unused_folders_are_removed_used_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let (work, record) = (tmp.path().join("work"), tmp.path().join("rec"));
        let p = Prefetcher::start(&work, &record);
        p.request("a", 1, 2);
        p.request("b", 1, 1);
        // Once a/1 is made, finish as if only a/1 started and wrote a log.
        let (a1_out, a1_logs) = attempt_dirs(&work, &record, "a", 1);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !(a1_out.is_dir() && a1_logs.join("stderr.log").is_file()) {
            assert!(
                std::time::Instant::now() < deadline,
                "folders not made ahead"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::fs::write(a1_logs.join("stdout.log"), "x").unwrap();
        let started: BTreeSet<(String, u32)> = [("a".to_string(), 1)].into_iter().collect();
        p.finish(&started);
        assert!(a1_out.is_dir() && a1_logs.join("stdout.log").is_file());
        // An empty log of an attempt that started stays: it is evidence.
        assert!(a1_logs.join("stderr.log").is_file());
        let (a2_out, a2_logs) = attempt_dirs(&work, &record, "a", 2);
        assert!(!a2_out.exists() && !a2_logs.exists());
        assert!(!work.join("b").exists() && !record.join("steps/b").exists());
        assert!(work.join("a").is_dir());
    }
}
