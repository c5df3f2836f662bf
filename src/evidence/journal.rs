//! The journal: `records/<run-id>/journal.jsonl`, one JSON event per line, written
//! (write(2), no user-space buffer) as it happens and fdatasynced in groups (a step
//! that another's end allowed to start waits for that end to be durable before its
//! first process starts: sched/durable.rs). It is the source of truth while a
//! run lives: `record.json` is built from it at the end, and a SIGKILLed orchestrator
//! leaves a journal that holds everything that finished (a torn last line is ignored
//! when read back).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use chrono::Utc;

pub use crate::record::journal::{Event, JournalLine, ResumeInfo};

/// The most a journal may hold when read back (a 100 000-step run writes a few
/// hundred MB).
pub const MAX_JOURNAL: u64 = 4 << 30;

/// An append-only journal file, fdatasynced in groups. Secret values are masked in
/// every event before it is written, so the record and reports built from the
/// journal never hold them.
pub struct Journal {
    file: File,
    path: PathBuf,
    seq: u64,
    dirty: bool,
    masker: std::sync::Arc<crate::mask::Masker>,
}

impl Journal {
    /// Create the journal (it must not exist yet).
    pub fn create(path: &Path) -> io::Result<Journal> {
        let file = OpenOptions::new().write(true).create_new(true).open(path)?;
        Ok(Journal {
            file,
            path: path.to_path_buf(),
            seq: 0,
            dirty: false,
            masker: Default::default(),
        })
    }

    /// Open an existing journal to go on writing it (`resume`): a last line torn by
    /// a crash is cut off first, and numbering goes on after `last_seq`.
    pub fn reopen(path: &Path, last_seq: u64) -> io::Result<Journal> {
        let (f, size) = crate::digest::open_regular(path, crate::digest::Follow::No)?;
        drop(f);
        let bytes = std::fs::read(path)?;
        let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) as u64;
        let file = OpenOptions::new().append(true).open(path)?;
        if keep < size {
            file.set_len(keep)?;
        }
        Ok(Journal {
            file,
            path: path.to_path_buf(),
            seq: last_seq,
            dirty: false,
            masker: Default::default(),
        })
    }

    /// Mask these secret values in every event written from now on.
    pub fn set_masker(&mut self, masker: std::sync::Arc<crate::mask::Masker>) {
        self.masker = masker;
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one event: written, flushed and fdatasynced before this returns.
    pub fn append(&mut self, event: Event) -> io::Result<()> {
        self.append_unsynced(event)?;
        self.sync()
    }

    /// Write one event without waiting for the disk; [`Journal::sync`] must follow
    /// before anything acts on it (group commit: one fdatasync covers every event
    /// written since the last one).
    pub fn append_unsynced(&mut self, event: Event) -> io::Result<()> {
        self.seq += 1;
        let line = JournalLine {
            seq: self.seq,
            time: Utc::now(),
            event,
        };
        let mut bytes = if self.masker.is_empty() {
            serde_json::to_vec(&line).map_err(io::Error::other)?
        } else {
            let mut v = serde_json::to_value(&line).map_err(io::Error::other)?;
            self.masker.mask_json(&mut v);
            serde_json::to_vec(&v).map_err(io::Error::other)?
        };
        bytes.push(b'\n');
        self.file.write_all(&bytes)?;
        self.file.flush()?;
        self.dirty = true;
        Ok(())
    }

    /// A handle that syncs this journal from another thread (the same open file), for
    /// callers that must not block while the disk works: an fdatasync through it
    /// makes every event written before it began durable.
    pub fn sync_handle(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// Sequence number of the last event written (0 before the first).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Make every event written so far durable.
    pub fn sync(&mut self) -> io::Result<()> {
        if self.dirty {
            self.file.sync_data()?;
            self.dirty = false;
        }
        Ok(())
    }
}

/// Read a journal back. A last line that was torn by a crash is skipped (and counted);
/// a bad line anywhere else is an error.
///
/// Only a regular file is read (a link or FIFO in its place is refused), and at most
/// [`MAX_JOURNAL`] bytes of it: a crafted record folder cannot hang or bloat `recover`.
pub fn read(path: &Path) -> io::Result<(Vec<JournalLine>, usize)> {
    let mut lines = Vec::new();
    let torn = read_each(path, |l| {
        lines.push(l);
        Ok(())
    })?;
    Ok((lines, torn))
}

/// [`read`] handing each line to `each` as it is parsed, so a journal of 100 000
/// attempts is never held whole; an error from `each` stops the reading.
pub fn read_each(
    path: &Path,
    mut each: impl FnMut(JournalLine) -> io::Result<()>,
) -> io::Result<usize> {
    use std::io::Read;
    let (f, size) = crate::digest::open_regular(path, crate::digest::Follow::No)?;
    if size > MAX_JOURNAL {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!(
                "{}: {size} bytes, over the journal limit of {MAX_JOURNAL}",
                path.display()
            ),
        ));
    }
    // Parsed as read: a bad line is an error unless it turns out to be the last,
    // torn by a crash.
    let mut pending: Option<(usize, serde_json::Error)> = None;
    let mut torn = 0;
    for (i, l) in BufReader::new(f.take(MAX_JOURNAL)).lines().enumerate() {
        let l = match l {
            Ok(l) => l,
            // A line cut inside a UTF-8 sequence (a torn write) is still a line.
            Err(e) if e.kind() == io::ErrorKind::InvalidData => String::from("\u{fffd}"),
            Err(e) => return Err(e),
        };
        if let Some((at, e)) = pending.take() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}:{}: bad journal line: {e}", path.display(), at + 1),
            ));
        }
        if l.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<JournalLine>(&l) {
            Ok(j) => each(j)?,
            Err(e) => pending = Some((i, e)),
        }
    }
    if let Some((_, e)) = pending {
        tracing::warn!("{}: ignoring torn last line: {e}", path.display());
        torn += 1;
    }
    Ok(torn)
}

/// Replace the values of secret-looking names by `<redacted>`, and the password
/// of a URL in any value by the mask.
pub fn redact_env(env: &[(String, String)], extra: &[String]) -> BTreeMap<String, String> {
    env.iter()
        .map(|(k, v)| (k.clone(), crate::mask::redacted(k, v, extra)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction() {
        let env = vec![
            ("HF_TOKEN".to_string(), "hf_abc".to_string()),
            ("PATH".to_string(), "/bin".to_string()),
            ("api_key".to_string(), "k".to_string()),
            ("MY_VAR".to_string(), "v".to_string()),
        ];
        let r = redact_env(&env, &["MY_VAR".to_string()]);
        assert_eq!(r["HF_TOKEN"], "<redacted>");
        assert_eq!(r["api_key"], "<redacted>");
        assert_eq!(r["MY_VAR"], "<redacted>");
        assert_eq!(r["PATH"], "/bin");
    }

    #[test]
    fn torn_last_line_is_skipped() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("journal.jsonl");
        let mut j = Journal::create(&p).unwrap();
        j.append(Event::StepStarted { step: "a".into() }).unwrap();
        j.append(Event::StepStarted { step: "b".into() }).unwrap();
        drop(j);
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"seq\":3,\"ti").unwrap();
        let (lines, torn) = read(&p).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(torn, 1);
        assert_eq!(lines[1].seq, 2);
    }
}
