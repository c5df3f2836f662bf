//! A shared folder as the remote store (NFS or any filesystem several users and
//! hosts mount):
//!
//! ```text
//! <root>/blobs/sha256/<2 hex>/<64 hex>         file contents, 0440
//! <root>/entries/<2 hex>/<key>/<key id>.json   one signed entry per signing key, 0440
//! <root>/tmp/                                  where every writer writes first
//! ```
//!
//! Folders are made group-writable and setgid (2770), so what any member of the
//! folder's group writes stays the group's. Nothing is locked (a lock NFS may not
//! honour is no lock) and no state is held in memory: every write is a new file in
//! `tmp/`, synced, then a `rename` (a blob: same name, same bytes, so the last one
//! standing is as good as the first) or a `link` that fails where a file is
//! (an entry: the first writer wins, atomically on NFS too). Everything below the
//! root is opened relative to a folder held open and never through a link; every
//! member of the group can write here, so what is read is checked by the reader
//! (signatures, digests), never believed.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

use super::progress::{Counting, Progress};
use super::{is_hex64, Held, Remote, RemoteError, Stored};
use crate::fsx::{Dir, Kind, Stamp};

/// Every folder: the owner and the group read and write, setgid.
const DIR_MODE: u32 = 0o2770;
/// Every file once written.
const FILE_MODE: u32 = 0o440;

/// A shared folder holding a cache.
#[derive(Debug)]
pub struct SharedFolder {
    root: std::path::PathBuf,
    url: String,
}

impl SharedFolder {
    /// Open the shared cache at `root` (made, with its folders, where missing).
    pub fn open(root: &Path) -> Result<SharedFolder, RemoteError> {
        let what = || format!("shared cache {}", root.display());
        if std::fs::symlink_metadata(root).is_err() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(DIR_MODE)
                .create(root)
                .map_err(|e| RemoteError::io(what(), e))?;
            let _ = std::fs::set_permissions(
                root,
                std::os::unix::fs::PermissionsExt::from_mode(DIR_MODE),
            );
        }
        let s = SharedFolder {
            root: root.to_path_buf(),
            url: root.display().to_string(),
        };
        let top = s.top()?;
        for d in ["blobs/sha256", "entries", "tmp"] {
            top.descend(d, Some(DIR_MODE))
                .map_err(|e| RemoteError::io(what(), e))?;
        }
        Ok(s)
    }

    fn top(&self) -> Result<Dir, RemoteError> {
        Dir::open(&self.root).map_err(|e| RemoteError::io(self.url.clone(), e))
    }

    /// The folder at `rel` below the root (made where missing when `make`); `None`
    /// when it is not there.
    fn dir(&self, rel: &str, make: bool) -> Result<Option<Dir>, RemoteError> {
        match self.top()?.descend(rel, make.then_some(DIR_MODE)) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(RemoteError::io(format!("{}/{rel}", self.url), e)),
        }
    }

    fn blob_dir(&self, hex: &str, make: bool) -> Result<Option<Dir>, RemoteError> {
        check_hex(hex)?;
        self.dir(&format!("blobs/sha256/{}", &hex[..2]), make)
    }

    fn entry_dir(&self, key: &str, make: bool) -> Result<Option<Dir>, RemoteError> {
        check_hex(key)?;
        self.dir(&format!("entries/{}/{key}", &key[..2]), make)
    }

    /// A new file in `tmp/` holding what `fill` writes, synced and made read-only;
    /// its name. Removed again when anything fails.
    fn staged(
        &self,
        fill: &mut dyn FnMut(&mut File) -> io::Result<()>,
    ) -> Result<(Dir, String), RemoteError> {
        let tmp = self.dir("tmp", true)?.ok_or_else(|| gone(&self.url))?;
        let t = crate::fsx::unique_name();
        let res = (|| {
            let mut f = tmp.create(&t, 0o640)?;
            fill(&mut f)?;
            f.sync_all()?;
            nix::sys::stat::fchmod(
                std::os::fd::AsFd::as_fd(&f),
                nix::sys::stat::Mode::from_bits_truncate(FILE_MODE),
            )?;
            Ok(())
        })();
        match res {
            Ok(()) => Ok((tmp, t)),
            Err(e) => {
                let _ = tmp.unlink(&t);
                Err(RemoteError::io(format!("{}/tmp", self.url), e))
            }
        }
    }
}

fn gone(url: &str) -> RemoteError {
    RemoteError::Refused(format!("{url}: a folder of the shared cache is gone"))
}

fn check_hex(hex: &str) -> Result<(), RemoteError> {
    if is_hex64(hex) {
        Ok(())
    } else {
        Err(RemoteError::Refused(format!("`{hex}` is not a sha256")))
    }
}

fn entry_name(signer: &str) -> Result<String, RemoteError> {
    check_hex(signer)?;
    Ok(format!("{signer}.json"))
}

impl Remote for SharedFolder {
    fn url(&self) -> &str {
        &self.url
    }

    fn entry(&self, key: &str, signer: &str, max: u64) -> Result<Option<Vec<u8>>, RemoteError> {
        let name = entry_name(signer)?;
        let Some(dir) = self.entry_dir(key, false)? else {
            return Ok(None);
        };
        match dir.read(&name, max) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(RemoteError::io(format!("entry {key}/{name}"), e)),
        }
    }

    fn signers(&self, key: &str) -> Result<Vec<String>, RemoteError> {
        let Some(dir) = self.entry_dir(key, false)? else {
            return Ok(Vec::new());
        };
        let names = dir
            .entries()
            .map_err(|e| RemoteError::io(format!("entries of {key}"), e))?;
        Ok(names
            .into_iter()
            .filter(|(_, k)| *k == Kind::File)
            .filter_map(|(n, _)| n.strip_suffix(".json").map(str::to_string))
            .filter(|n| is_hex64(n))
            .collect())
    }

    fn put_entry_if_absent(
        &self,
        key: &str,
        signer: &str,
        bytes: &[u8],
    ) -> Result<bool, RemoteError> {
        let name = entry_name(signer)?;
        let dir = self.entry_dir(key, true)?.ok_or_else(|| gone(&self.url))?;
        let (tmp, t) = self.staged(&mut |f| f.write_all(bytes))?;
        let linked = dir.hard_link_from(&tmp, &t, &name);
        // NFS may answer a retransmitted link with EEXIST although the first one
        // made it: then the entry is the staged file itself.
        let won = match linked {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let staged = tmp.stat(&t).ok().flatten().map(|(_, st)| (st.dev, st.ino));
                let there = dir
                    .stat(&name)
                    .ok()
                    .flatten()
                    .map(|(_, st)| (st.dev, st.ino));
                Ok(staged.is_some() && staged == there)
            }
            Err(e) => Err(RemoteError::io(format!("entry {key}/{name}"), e)),
        };
        let _ = tmp.unlink(&t);
        won
    }

    fn replace_entry(&self, key: &str, signer: &str, bytes: &[u8]) -> Result<(), RemoteError> {
        let name = entry_name(signer)?;
        let dir = self.entry_dir(key, true)?.ok_or_else(|| gone(&self.url))?;
        let (tmp, t) = self.staged(&mut |f| f.write_all(bytes))?;
        let moved = tmp.rename(&t, &dir, &name);
        if moved.is_err() {
            let _ = tmp.unlink(&t);
        }
        moved.map_err(|e| RemoteError::io(format!("entry {key}/{name}"), e))
    }

    fn has_blob(&self, hex: &str, size: u64) -> Result<bool, RemoteError> {
        let Some(dir) = self.blob_dir(hex, false)? else {
            return Ok(false);
        };
        let st = dir
            .stat(hex)
            .map_err(|e| RemoteError::io(format!("blob {hex}"), e))?;
        Ok(matches!(st, Some((Kind::File, st)) if st.size == size))
    }

    fn put_blob(&self, hex: &str, src: &mut File, size: u64) -> Result<(), RemoteError> {
        let dir = self.blob_dir(hex, true)?.ok_or_else(|| gone(&self.url))?;
        let progress = Progress::new(format!("pushing blob {hex}"), size);
        let (tmp, t) = self.staged(&mut |f| {
            // File to file in 64 MiB pieces: each io::copy stays in the kernel
            // (copy_file_range), and progress is told between them.
            let mut n = 0;
            while n < size {
                let piece = (size - n).min(64 << 20);
                let moved = io::copy(&mut Read::by_ref(src).take(piece), f)?;
                progress.add(moved);
                n += moved;
                if moved < piece {
                    break;
                }
            }
            if n == size {
                Ok(())
            } else {
                Err(io::Error::other(format!("read {n} of {size} bytes")))
            }
        })?;
        progress.end();
        let moved = tmp.rename(&t, &dir, hex);
        if moved.is_err() {
            let _ = tmp.unlink(&t);
        }
        moved.map_err(|e| RemoteError::io(format!("blob {hex}"), e))
    }

    fn get_blob(&self, hex: &str, size: u64, dst: &mut dyn Write) -> Result<u64, RemoteError> {
        let dir = self
            .blob_dir(hex, false)?
            .ok_or_else(|| RemoteError::Refused(format!("blob {hex} is not in the store")))?;
        let (f, st) = dir
            .open_file(hex)
            .map_err(|e| RemoteError::io(format!("blob {hex}"), e))?;
        if st.size != size {
            return Ok(st.size);
        }
        // Still growing is still refused: at most one byte past what it must hold.
        // io::copy moves a BufReader's buffer at once: 1 MiB writes, not 8 KiB.
        let mut f = io::BufReader::with_capacity(1 << 20, f.take(size + 1));
        let progress = Progress::new(format!("pulling blob {hex}"), size);
        let mut to = Counting {
            inner: dst,
            progress: &progress,
        };
        let n = io::copy(&mut f, &mut to).map_err(|e| RemoteError::io(format!("blob {hex}"), e));
        progress.end();
        n
    }

    fn remove_blob(&self, hex: &str) -> Result<(), RemoteError> {
        if let Some(dir) = self.blob_dir(hex, false)? {
            dir.remove_tree(hex)
                .map_err(|e| RemoteError::io(format!("blob {hex}"), e))?;
        }
        Ok(())
    }

    fn keys(&self) -> Result<Vec<String>, RemoteError> {
        let Some(entries) = self.dir("entries", false)? else {
            return Ok(Vec::new());
        };
        let io_err = |e| RemoteError::io(format!("{}/entries", self.url), e);
        let mut keys = Vec::new();
        for (hh, kind) in entries.entries().map_err(io_err)? {
            if kind != Kind::Dir || hh.len() != 2 {
                continue;
            }
            let sub = entries.sub(&hh).map_err(io_err)?;
            for (k, kind) in sub.entries().map_err(io_err)? {
                if kind == Kind::Dir && is_hex64(&k) && k.starts_with(&hh) {
                    keys.push(k);
                }
            }
        }
        keys.sort();
        Ok(keys)
    }

    fn stored(&self) -> Result<Vec<Stored>, RemoteError> {
        let mut out = Vec::new();
        for (hh, sub) in self.fanout("blobs/sha256")? {
            for (hex, st) in files_in(&sub, &self.url)? {
                if is_hex64(&hex) && hex.starts_with(&hh) {
                    out.push(stored(Held::Blob { hex }, &st));
                }
            }
        }
        let io_err = |e| RemoteError::io(format!("{}/entries", self.url), e);
        for (hh, sub) in self.fanout("entries")? {
            for (key, kind) in sub.entries().map_err(io_err)? {
                if kind != Kind::Dir || !is_hex64(&key) || !key.starts_with(&hh) {
                    continue;
                }
                let dir = sub.sub(&key).map_err(io_err)?;
                for (name, st) in files_in(&dir, &self.url)? {
                    let Some(signer) = name.strip_suffix(".json").filter(|n| is_hex64(n)) else {
                        continue;
                    };
                    let held = Held::Entry {
                        key: key.clone(),
                        signer: signer.to_string(),
                    };
                    out.push(stored(held, &st));
                }
            }
        }
        Ok(out)
    }

    fn remove_entry(&self, key: &str, signer: &str) -> Result<(), RemoteError> {
        let name = entry_name(signer)?;
        if let Some(dir) = self.entry_dir(key, false)? {
            match dir.unlink(&name) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(RemoteError::io(format!("entry {key}"), e))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl SharedFolder {
    /// The two-hex-digit folders below `rel`, each held open.
    fn fanout(&self, rel: &str) -> Result<Vec<(String, Dir)>, RemoteError> {
        let Some(top) = self.dir(rel, false)? else {
            return Ok(Vec::new());
        };
        let io_err = |e| RemoteError::io(format!("{}/{rel}", self.url), e);
        let mut out = Vec::new();
        for (hh, kind) in top.entries().map_err(io_err)? {
            if kind == Kind::Dir && hh.len() == 2 {
                out.push((hh.clone(), top.sub(&hh).map_err(io_err)?));
            }
        }
        Ok(out)
    }
}

/// The regular files of `dir` with their stat (links and folders left out).
fn files_in(dir: &Dir, url: &str) -> Result<Vec<(String, Stamp)>, RemoteError> {
    let io_err = |e| RemoteError::io(format!("{url}: {}", dir.path().display()), e);
    let mut out = Vec::new();
    for (n, kind) in dir.entries().map_err(io_err)? {
        if kind != Kind::File {
            continue;
        }
        if let Some((Kind::File, st)) = dir.stat(&n).map_err(io_err)? {
            out.push((n, st));
        }
    }
    Ok(out)
}

fn stored(held: Held, st: &Stamp) -> Stored {
    let ns = u64::try_from(st.mtime_ns).unwrap_or(0);
    Stored {
        held,
        size: st.size,
        modified: std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns),
    }
}
