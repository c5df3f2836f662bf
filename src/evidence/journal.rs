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

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::record::{AttemptRecord, CheckRecord, StepStatus};

/// One journal line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JournalLine {
    /// 1-based sequence number.
    pub seq: u64,
    pub time: DateTime<Utc>,
    #[serde(flatten)]
    pub event: Event,
}

/// What happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        run_id: String,
        /// Everything known before the first step (plan, host, pins, isolation...), as
        /// the record's `run` header; kept as JSON so the journal stays forward-readable.
        header: serde_json::Value,
    },
    StepStarted {
        step: String,
    },
    DevicesGranted {
        step: String,
        allocations: Vec<super::contract::Allocation>,
    },
    DevicesReleased {
        step: String,
        allocations: Vec<super::contract::Allocation>,
    },
    /// What the cache did for a `cache = true` step: reused an entry (then `outputs`
    /// are the restored outputs), or ran it and stored (or could not store) the result.
    StepCache {
        step: String,
        cache: super::record::StepCacheRecord,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        outputs: Vec<super::record::OutputRecord>,
    },
    AttemptStarted {
        step: String,
        attempt: u32,
        warmup: bool,
        cgroup: String,
        canary: String,
        argv: Vec<String>,
        cwd: String,
        out: String,
        /// The attempt's logs, relative to the record folder (journals written before
        /// this field use `steps/<step>/<attempt>/`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        logs: Option<String>,
    },
    /// A batch job was submitted for an attempt (before anything waits on it): what
    /// `resume` and `recover` find the run's jobs by.
    JobSubmitted {
        step: String,
        attempt: u32,
        backend: String,
        job_id: String,
        /// What `resume` needs to finish the attempt without the plan's context.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume: Option<Box<ResumeInfo>>,
    },
    AttemptEnded {
        step: String,
        attempt: Box<AttemptRecord>,
    },
    /// Slurm's word on a job whose attempt ended on its own clean end record (read
    /// later, with other jobs'): the attempt's `job` gets it, and a job Slurm ended
    /// otherwise fails the attempt and its step after all.
    JobConfirmed {
        confirmation: Box<crate::contract::Confirmation>,
    },
    CheckEnded {
        step: String,
        check: Box<CheckRecord>,
    },
    StepEnded {
        step: String,
        status: StepStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Declared outputs of the step's last measured attempt, rendered.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        outputs: Vec<String>,
    },
    Warning {
        message: String,
    },
    RunEnded {
        status: super::record::RunStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Facts only known at the end (release audit, ...).
        #[serde(default)]
        footer: super::contract::RunFooter,
    },
}

impl Event {
    /// The run's header, typed, from a `RunStarted` event; `None` for any other
    /// event, or for a header this build cannot read (then none of it is used).
    pub fn run_header(&self) -> Option<super::record::RunHeader> {
        match self {
            Event::RunStarted { header, .. } => serde_json::from_value(header.clone()).ok(),
            _ => None,
        }
    }
}

/// What an attempt left in flight needs to be finished by `orchestrate resume`:
/// where its files are, and what its record says of how it was run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResumeInfo {
    pub stdout: String,
    pub stderr: String,
    pub metrics: String,
    /// Declared outputs, rendered and absolute.
    pub outputs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub junit: Option<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sarif: Option<(String, String)>,
    /// The attempt's environment as its record shows it (secrets redacted).
    pub env: std::collections::BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    pub retry: u32,
    /// The job's `--gres`, and its script relative to the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gres: Option<String>,
    pub script: String,
    /// The work-folder file the job reads its command from.
    pub private: String,
}

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
    // Parsed as read (a large journal is not held twice): a bad line is an error
    // unless it turns out to be the last, torn by a crash.
    let mut lines = Vec::new();
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
            Ok(j) => lines.push(j),
            Err(e) => pending = Some((i, e)),
        }
    }
    if let Some((_, e)) = pending {
        tracing::warn!("{}: ignoring torn last line: {e}", path.display());
        torn += 1;
    }
    Ok((lines, torn))
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
