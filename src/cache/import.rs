//! Entries that come from elsewhere (a remote store) become local entries: every
//! blob is hashed as it arrives and refused unless it is what the entry says, and
//! only then is the entry written, last, as a local store writes its own.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};

use nix::fcntl::FlockArg;

use super::store::{check_entry, hash_file};
use super::{Cache, Entry, Lookup, Preimage};
use crate::fsx::{Kind, Stamp};

/// Why an entry could not be taken in.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A blob that arrived is not what its digest says (`hex`: the digest).
    #[error("its copy of `{at}` {why}")]
    Blob {
        hex: String,
        at: String,
        why: String,
    },
    /// A blob could not be fetched or kept here (the remote or this disk failed).
    #[error("its copy of `{at}` could not be taken in: {why}")]
    Fetch { at: String, why: String },
    /// The entry itself is not one the step can use.
    #[error("{0}")]
    Entry(String),
    #[error("the local cache could not be written ({0})")]
    Io(#[from] io::Error),
}

/// A blob's source: writes blob `hex` into the file, the bytes written.
pub type Fetch<'a> = dyn FnMut(&str, u64, &mut dyn Write) -> Result<u64, String> + 'a;

/// Hashes what passes through to a file.
struct Hashing<'a> {
    file: &'a mut File,
    hash: sha2::Sha256,
}

impl Write for Hashing<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        sha2::Digest::update(&mut self.hash, &buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Cache {
    /// Take in `entry` (made elsewhere, for the step's outputs `expected`), its
    /// blobs from `fetch` where this store lacks them. What the local store then
    /// holds for the key.
    pub fn import(
        &self,
        entry: &Entry,
        pre: &Preimage,
        expected: &[String],
        from: &str,
        fetch: &mut Fetch<'_>,
    ) -> Result<Entry, ImportError> {
        check_entry(entry, &entry.key, expected).map_err(ImportError::Entry)?;
        let o = self.opened()?;
        let _gc = o.lock("gc.lock", FlockArg::LockShared)?;
        let _key = o.lock(&format!("{}.lock", entry.key), FlockArg::LockExclusive)?;
        if let Lookup::Hit(e) = self.lookup(&entry.key, expected) {
            return Ok(e);
        }
        let mut stamps: BTreeMap<String, Stamp> = BTreeMap::new();
        let mut entry = entry.clone();
        entry.pulled_from = Some(from.to_string());
        for out in &entry.outputs {
            for f in out.files.iter().filter(|f| f.link.is_none()) {
                if stamps.contains_key(&f.sha256) {
                    continue;
                }
                let at = if f.rel.is_empty() {
                    out.path.clone()
                } else {
                    format!("{}/{}", out.path, f.rel)
                };
                let st = self
                    .take_blob(&o, &f.sha256, f.size, f.exec, fetch)
                    .map_err(|e| match e {
                        Taken::Mismatch(why) => ImportError::Blob {
                            hex: f.sha256.clone(),
                            at,
                            why,
                        },
                        Taken::Failed(why) => ImportError::Fetch { at, why },
                    })?;
                stamps.insert(f.sha256.clone(), st);
            }
        }
        for f in entry.outputs.iter_mut().flat_map(|o| o.files.iter_mut()) {
            if let Some(st) = stamps.get(&f.sha256).filter(|_| f.link.is_none()) {
                f.blob_mtime_ns = st.mtime_ns;
                f.blob_ctime_ns = st.ctime_ns;
                f.blob_ino = st.ino;
            }
        }
        self.put_entry_dir(&o, &entry, pre)?;
        Ok(entry)
    }

    /// The local blob `hex`, opened for reading (never through a link), and its size.
    pub fn open_blob(&self, hex: &str) -> io::Result<(File, u64)> {
        if !super::store::is_hex64(hex) {
            return Err(io::Error::other("not a blob name"));
        }
        let o = self.opened()?;
        let (f, st) = o.blob_parent(hex, false)?.open_file(hex)?;
        Ok((f, st.size))
    }

    /// Blob `hex` of `size` bytes in this store: the one there if it holds those
    /// bytes, else fetched, hashed on the way and kept only if it matches.
    fn take_blob(
        &self,
        o: &super::store::Open,
        hex: &str,
        size: u64,
        exec: bool,
        fetch: &mut Fetch<'_>,
    ) -> Result<Stamp, Taken> {
        let io = |e: io::Error| Taken::Failed(format!("cannot be written here ({e})"));
        let parent = o.blob_parent(hex, true).map_err(io)?;
        if let Ok(Some((Kind::File, st))) = parent.stat(hex) {
            if st.size == size {
                if let Ok((mut f, st)) = parent.open_file(hex) {
                    if hash_file(&mut f).map_err(io)? == hex {
                        return Ok(st);
                    }
                }
            }
        }
        let tmp = o.tmp().map_err(io)?;
        let t = crate::fsx::unique_name();
        let res = (|| {
            let mut file = tmp.create(&t, 0o600).map_err(io)?;
            let mut w = Hashing {
                file: &mut file,
                hash: sha2::Digest::new(),
            };
            let got = fetch(hex, size, &mut w).map_err(Taken::Failed)?;
            let h = crate::digest::Sha256Digest(sha2::Digest::finalize(w.hash).into()).hex();
            check_fetched(&h, hex, size, got).map_err(Taken::Mismatch)?;
            file.sync_data().map_err(io)?;
            let mode = if exec { 0o500 } else { 0o400 };
            nix::sys::stat::fchmod(
                std::os::fd::AsFd::as_fd(&file),
                nix::sys::stat::Mode::from_bits_truncate(mode),
            )
            .map_err(|e| io(e.into()))?;
            parent.remove_tree(hex).map_err(io)?;
            tmp.rename(&t, &parent, hex).map_err(io)?;
            parent.open_file(hex).map(|(_, st)| st).map_err(io)
        })();
        if res.is_err() {
            let _ = tmp.unlink(&t);
        }
        res
    }
}

/// Why a blob was not taken in: it is not what its digest says, or it could not
/// be fetched or kept.
enum Taken {
    Mismatch(String),
    Failed(String),
}

/// Whether what arrived (`got` bytes hashing to `h`) is blob `hex` of `size` bytes.
fn check_fetched(h: &str, hex: &str, size: u64, got: u64) -> Result<(), String> {
    if got != size {
        return Err(format!("is {got} bytes, not {size}"));
    }
    if h != hex {
        return Err("does not match its digest".into());
    }
    Ok(())
}
