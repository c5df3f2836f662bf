//! What an attempt left behind, read for the record: its logs and declared outputs
//! hashed, its metrics file parsed.
//!
//! Everything here is written by the step, so nothing may hang or bloat the
//! orchestrator: only regular files are read (opened non-blocking, links not
//! followed: a FIFO or a link to `/dev/zero` is recorded as what it is), the metrics
//! file is capped, and hashing gives up between chunks once the run must end
//! (`Stop`), so a run timeout or a second Ctrl-C ends the run whatever a hashing
//! thread is doing.

use std::path::{Path, PathBuf};

use crate::digest::{self, Follow};
use crate::evidence::record::{FileRecord, OutputKind, OutputRecord};
use crate::sys::Stop;

/// The most a step's `ORCHESTRATE_METRICS` file may hold.
pub(crate) const METRICS_MAX_BYTES: u64 = 1 << 20;

/// What was read of one attempt.
#[derive(Debug, Clone)]
pub(crate) struct Collected {
    pub stdout: FileRecord,
    pub stderr: FileRecord,
    pub outputs: Vec<OutputRecord>,
    pub metrics: Result<Option<serde_json::Value>, String>,
    /// What the declared results files said.
    pub results: Option<crate::results::AttemptResults>,
}

/// The files of one attempt to read.
#[derive(Debug, Clone)]
pub(crate) struct AttemptFiles {
    pub record_dir: PathBuf,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub metrics: PathBuf,
    /// Declared outputs, rendered and absolute.
    pub outputs: Vec<String>,
    /// Declared results files (JUnit, SARIF): as written, and absolute.
    pub junit: Option<(String, PathBuf)>,
    pub sarif: Option<(String, PathBuf)>,
    /// Where results files may be read: the run's work folder and the working tree
    /// of the attempt's revision (a report named elsewhere, `/etc/shadow`, is not).
    pub roots: Vec<PathBuf>,
    /// The attempt's working folder: where a test runner's ids are relative to.
    pub cwd: PathBuf,
}

/// `path` if it lies inside one of `roots` (lexically, and with no link among its
/// folders that leads out); else why not.
pub(crate) fn confined(path: &Path, roots: &[PathBuf]) -> Result<PathBuf, crate::digest::Escape> {
    let clean = crate::plan::lexical_clean(path);
    for root in roots {
        let root = crate::plan::lexical_clean(root);
        if let Ok(rel) = clean.strip_prefix(&root) {
            let rel = rel.to_string_lossy();
            if rel.is_empty() {
                break;
            }
            return crate::digest::contained(&root, &rel);
        }
    }
    Err(crate::digest::Escape::Outside)
}

impl AttemptFiles {
    /// Read everything (blocking; hashing may take long for large outputs).
    pub(crate) fn collect(&self, stop: &Stop) -> Collected {
        Collected {
            stdout: log_record(&self.record_dir, &self.stdout, stop),
            stderr: log_record(&self.record_dir, &self.stderr, stop),
            outputs: self
                .outputs
                .iter()
                .map(|p| output_record(p, stop))
                .collect(),
            metrics: read_metrics(&self.metrics),
            results: self.results(),
        }
    }

    fn results(&self) -> Option<crate::results::AttemptResults> {
        if self.junit.is_none() && self.sarif.is_none() {
            return None;
        }
        Some(crate::results::AttemptResults {
            junit: self
                .junit
                .as_ref()
                .map(|(name, p)| match confined(p, &self.roots) {
                    Ok(p) => {
                        let mut r = crate::results::junit::read(&p, name);
                        crate::results::junit::add_node_ids(&mut r, &self.cwd);
                        if r.left_out > 0 {
                            r.kept = self.keep_whole(&p, "results.junit.xml", r.sha256.as_ref());
                        }
                        r
                    }
                    Err(why) => crate::results::JunitResults {
                        file: name.clone(),
                        error: Some(why.to_string()),
                        ..Default::default()
                    },
                }),
            sarif: self
                .sarif
                .as_ref()
                .map(|(name, p)| match confined(p, &self.roots) {
                    Ok(p) => {
                        let mut r = crate::results::sarif::read(&p, name);
                        if r.left_out > 0 {
                            r.kept = self.keep_whole(&p, "results.sarif.json", r.sha256.as_ref());
                        }
                        r
                    }
                    Err(why) => crate::results::SarifResults {
                        file: name.clone(),
                        error: Some(why.to_string()),
                        ..Default::default()
                    },
                }),
        })
    }

    /// A results file whose items the record left out, copied whole beside the
    /// attempt's logs as `name`: its path in the record folder, when the copy holds
    /// exactly the bytes that were parsed (`sha256`).
    fn keep_whole(
        &self,
        path: &Path,
        name: &str,
        sha256: Option<&crate::digest::Sha256Digest>,
    ) -> Option<String> {
        use std::io::Read as _;
        let dest = self.stdout.parent()?.join(name);
        let (f, _) = digest::open_regular(path, Follow::No).ok()?;
        let bytes = {
            let mut v = Vec::new();
            f.take(crate::results::MAX_RESULTS_BYTES)
                .read_to_end(&mut v)
                .ok()?;
            v
        };
        if Some(&digest::sha256_bytes(&bytes)) != sha256 {
            return None;
        }
        // A new file: never through a link or over something already there.
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&dest)
            .ok()?;
        std::io::Write::write_all(&mut out, &bytes).ok()?;
        Some(rel(&self.record_dir, &dest))
    }

    /// What the record says when the run ended before the files were read.
    pub(crate) fn given_up(&self) -> Collected {
        let why = "not hashed: the run was ended while this attempt's files were hashed";
        let log = |p: &Path| FileRecord {
            path: rel(&self.record_dir, p),
            sha256: String::new(),
            bytes: 0,
            note: Some(why.into()),
        };
        Collected {
            stdout: log(&self.stdout),
            stderr: log(&self.stderr),
            outputs: self
                .outputs
                .iter()
                .map(|p| OutputRecord {
                    note: Some(why.into()),
                    ..bare(p, OutputKind::Unhashed)
                })
                .collect(),
            metrics: Err("not read: the run was ended first".into()),
            results: None,
        }
    }

    /// Whether reading in place costs less than a hop to a blocking thread: no
    /// outputs, and both logs small regular files.
    pub(crate) fn small(&self) -> bool {
        const INLINE_HASH_BYTES: u64 = 256 * 1024;
        self.outputs.is_empty()
            && self.junit.is_none()
            && self.sarif.is_none()
            && [&self.stdout, &self.stderr].iter().all(|p| {
                std::fs::symlink_metadata(p)
                    .is_ok_and(|m| m.is_file() && m.len() <= INLINE_HASH_BYTES)
            })
    }
}

fn rel(record_dir: &Path, path: &Path) -> String {
    path.strip_prefix(record_dir)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A log file's record: path relative to the record folder, digest, size; a log the
/// step replaced by something else is recorded with a note instead.
pub(crate) fn log_record(record_dir: &Path, path: &Path, stop: &Stop) -> FileRecord {
    let path_rel = rel(record_dir, path);
    match digest::sha256_regular(path, stop) {
        Ok((d, bytes)) => FileRecord {
            path: path_rel,
            sha256: d.hex(),
            bytes,
            note: None,
        },
        Err(e) => FileRecord {
            path: path_rel,
            sha256: String::new(),
            bytes: 0,
            note: Some(format!("not hashed: {e}")),
        },
    }
}

fn bare(path: &str, kind: OutputKind) -> OutputRecord {
    OutputRecord {
        path: path.to_string(),
        kind,
        target: None,
        note: None,
        sha256: None,
        bytes: None,
        files: None,
    }
}

/// A declared output as it is: a file or folder hashed, a link recorded as the link
/// (never followed), anything else refused with what it is, absent if gone.
pub(crate) fn output_record(path: &str, stop: &Stop) -> OutputRecord {
    let p = Path::new(path);
    let meta = match std::fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(_) => return bare(path, OutputKind::Absent),
    };
    let failed = |e: std::io::Error| {
        let kind = if e.kind() == std::io::ErrorKind::Interrupted {
            OutputKind::Unhashed
        } else {
            OutputKind::Refused
        };
        OutputRecord {
            note: Some(format!("not hashed: {e}")),
            ..bare(path, kind)
        }
    };
    let ft = meta.file_type();
    if ft.is_symlink() {
        return match std::fs::read_link(p) {
            Ok(target) => {
                let text = target.to_string_lossy().into_owned();
                OutputRecord {
                    sha256: Some(digest::sha256_bytes(text.as_bytes()).hex()),
                    bytes: Some(text.len() as u64),
                    target: Some(text),
                    ..bare(path, OutputKind::Symlink)
                }
            }
            Err(e) => failed(e),
        };
    }
    if ft.is_dir() {
        return match digest::sha256_dir_until(p, stop) {
            Ok((d, entries)) => OutputRecord {
                sha256: Some(d.hex()),
                bytes: Some(entries.iter().map(|e| e.size).sum()),
                files: Some(entries.len() as u64),
                ..bare(path, OutputKind::Dir)
            },
            Err(e) => failed(e),
        };
    }
    if !ft.is_file() {
        return OutputRecord {
            note: Some(format!("{}: not read", digest::kind_of(&ft))),
            ..bare(path, OutputKind::Refused)
        };
    }
    match digest::sha256_regular(p, stop) {
        Ok((d, bytes)) => OutputRecord {
            sha256: Some(d.hex()),
            bytes: Some(bytes),
            ..bare(path, OutputKind::File)
        },
        Err(e) => failed(e),
    }
}

/// Metrics a step wrote: absent file = none; anything but a JSON object in a regular
/// file of at most [`METRICS_MAX_BYTES`] = an error. An integer beyond ±(2^53 - 1),
/// which canonical JSON cannot hold exactly, is kept as its decimal string.
pub(crate) fn read_metrics(path: &Path) -> Result<Option<serde_json::Value>, String> {
    let bytes = match digest::read_regular(path, Follow::No, METRICS_MAX_BYTES) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("ORCHESTRATE_METRICS {}: {e}", path.display())),
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(mut v @ serde_json::Value::Object(_)) => {
            exact_integers(&mut v);
            Ok(Some(v))
        }
        Ok(_) => Err("ORCHESTRATE_METRICS must hold a JSON object".into()),
        Err(e) => Err(format!("ORCHESTRATE_METRICS is not valid JSON: {e}")),
    }
}

fn exact_integers(v: &mut serde_json::Value) {
    const MAX: u64 = (1 << 53) - 1;
    match v {
        serde_json::Value::Number(n) => {
            let big = n.as_u64().is_some_and(|u| u > MAX)
                || n.as_i64().is_some_and(|i| i.unsigned_abs() > MAX);
            if big {
                *v = serde_json::Value::String(n.to_string());
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(exact_integers),
        serde_json::Value::Object(o) => o.values_mut().for_each(exact_integers),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_fifos_and_big_metrics_are_recorded_not_read() {
        let t = tempfile::tempdir().unwrap();
        let stop = Stop::new();
        let link = t.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let o = output_record(link.to_str().unwrap(), &stop);
        assert_eq!(o.kind, OutputKind::Symlink);
        assert_eq!(o.target.as_deref(), Some("/dev/zero"));
        let fifo = t.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let o = output_record(fifo.to_str().unwrap(), &stop);
        assert_eq!(o.kind, OutputKind::Refused);
        assert!(o.note.unwrap().contains("FIFO"));
        // A log replaced by a link or a FIFO is noted, not read.
        for p in [&link, &fifo] {
            let l = log_record(t.path(), p, &stop);
            assert!(l.sha256.is_empty() && l.note.is_some(), "{l:?}");
        }
        assert!(read_metrics(&link).unwrap_err().contains("symbolic link"));
        assert!(read_metrics(&fifo).unwrap_err().contains("FIFO"));
        let big = t.path().join("m.json");
        std::fs::write(&big, vec![b' '; METRICS_MAX_BYTES as usize + 1]).unwrap();
        assert!(read_metrics(&big).unwrap_err().contains("over the limit"));
        assert_eq!(read_metrics(&t.path().join("none")), Ok(None));
        let m = t.path().join("ints.json");
        std::fs::write(
            &m,
            r#"{"a": 18446744073709551615, "b": [-9007199254740993, 3]}"#,
        )
        .unwrap();
        let v = read_metrics(&m).unwrap().unwrap();
        assert_eq!(v["a"], "18446744073709551615");
        assert_eq!(v["b"][0], "-9007199254740993");
        assert_eq!(v["b"][1], 3);
        // Hashing gives up once stopped.
        let f = t.path().join("f");
        std::fs::write(&f, b"data").unwrap();
        stop.stop();
        let o = output_record(f.to_str().unwrap(), &stop);
        assert_eq!(o.kind, OutputKind::Unhashed, "{o:?}");
    }
}
