//! Crash-safe writes: a file is either its old content or its complete new content,
//! never a torn mix, and a full disk leaves no debris behind.
//!
//! `write_atomic` writes a temp file beside the target (same folder, so the rename
//! stays on one file system and is atomic), fsyncs it, renames it over the target,
//! then fsyncs the folder so the rename itself survives a power cut.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Why an atomic write failed; the target (if it existed) is unchanged and no temp
/// file is left behind, unless the message says otherwise.
#[derive(Debug, thiserror::Error)]
pub enum AtomicWriteError {
    /// The file system is full (ENOSPC) or the quota is spent (EDQUOT).
    #[error("cannot write {}: no space left on device (the previous file, if any, is unchanged); free some space and retry", path.display())]
    NoSpace {
        /// The target path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Any other I/O failure, with the step that failed.
    #[error("cannot write {}: {step}: {source}", path.display())]
    Io {
        /// The target path.
        path: PathBuf,
        /// What was being done: "create temp file", "write", "fsync", "rename", ...
        step: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl AtomicWriteError {
    fn new(path: &Path, step: &'static str, source: io::Error) -> Self {
        if is_no_space(&source) {
            AtomicWriteError::NoSpace {
                path: path.to_path_buf(),
                source,
            }
        } else {
            AtomicWriteError::Io {
                path: path.to_path_buf(),
                step,
                source,
            }
        }
    }
}

/// True for "disk full" and "quota exceeded".
pub fn is_no_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
        || e.kind() == io::ErrorKind::StorageFull
}

/// Replace `path` with `bytes` atomically (see the module docs).
///
/// On any error the temp file is removed and the previous content of `path`, if
/// any, is untouched. The new file gets the default permissions (0666 & umask).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), AtomicWriteError> {
    write_atomic_mode(path, bytes, 0o666)
}

/// [`write_atomic`] creating the file with `mode` (still masked by the umask).
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<(), AtomicWriteError> {
    write_atomic_pieces(path, &[bytes], mode)
}

/// [`write_atomic_mode`] of pieces written one after another, so a large file need
/// not be joined into one buffer first.
pub fn write_atomic_pieces<B: AsRef<[u8]>>(
    path: &Path,
    pieces: &[B],
    mode: u32,
) -> Result<(), AtomicWriteError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        AtomicWriteError::new(
            path,
            "name the file",
            io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"),
        )
    })?;
    let (tmp_path, file) = create_temp(dir, &name.to_string_lossy(), mode)
        .map_err(|e| AtomicWriteError::new(path, "create temp file", e))?;
    let guard = TempGuard(Some(tmp_path.clone()));

    let mut out = io::BufWriter::with_capacity(1 << 20, file);
    for p in pieces {
        out.write_all(p.as_ref())
            .map_err(|e| AtomicWriteError::new(path, "write temp file", e))?;
    }
    let file = out
        .into_inner()
        .map_err(|e| AtomicWriteError::new(path, "write temp file", e.into_error()))?;
    // ENOSPC may surface only here, when delayed allocation meets the disk.
    file.sync_all()
        .map_err(|e| AtomicWriteError::new(path, "fsync temp file", e))?;
    drop(file);
    std::fs::rename(&tmp_path, path).map_err(|e| AtomicWriteError::new(path, "rename", e))?;
    guard.disarm();
    // The data is in place; this only makes the rename durable.
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| AtomicWriteError::new(path, "fsync folder", e))?;
    Ok(())
}

/// Create `<dir>/.tmp-<name>-<pid>-<random>` exclusively.
fn create_temp(dir: &Path, name: &str, mode: u32) -> io::Result<(PathBuf, File)> {
    use std::os::unix::fs::OpenOptionsExt;
    let pid = std::process::id();
    for _ in 0..16 {
        let mut rnd = [0u8; 8];
        getrandom::fill(&mut rnd).map_err(|e| io::Error::other(e.to_string()))?;
        let tag = u64::from_le_bytes(rnd);
        let tmp = dir.join(format!(".tmp-{name}-{pid}-{tag:016x}"));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "could not find a free temp file name",
    ))
}

/// Removes the temp file on every early return.
struct TempGuard(Option<PathBuf>);

impl TempGuard {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            // Best effort: the error being returned matters more than this one.
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temp() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("record.json");
        write_atomic(&p, b"old").unwrap();
        write_atomic(&p, b"new content").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new content");
        let names: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("record.json")]);
    }

    #[test]
    fn missing_folder_names_the_path() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("nope/record.json");
        let e = write_atomic(&p, b"x").unwrap_err();
        assert!(e.to_string().contains("nope/record.json"), "{e}");
        assert!(matches!(
            e,
            AtomicWriteError::Io {
                step: "create temp file",
                ..
            }
        ));
    }
}
