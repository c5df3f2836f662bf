//! SHA-256 of bytes, files and folders: the one hashing primitive every module uses
//! (pins hash models and lock files, evidence hashes outputs and logs).
//!
//! A folder's digest is the SHA-256 of its manifest: one line per regular file,
//! `<hex sha256>  <relative path>\n`, sorted by the path's bytes (the `sha256sum`
//! line format, so a reviewer can rebuild it with coreutils). Symbolic links are listed
//! as `symlink:<sha256 of the link target text>  <path>` and never followed.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use crate::record::digest::{ManifestEntry, Sha256Digest};
use crate::sys::Stop;

pub mod stat;

/// Read size for streaming: large enough to keep the SHA extensions busy.
const CHUNK: usize = 1 << 20;

pub fn sha256_bytes(data: &[u8]) -> Sha256Digest {
    Sha256Digest(Sha256::digest(data).into())
}

/// SHA-256 of pieces written one after another (a canonical record in pieces).
pub fn sha256_pieces(pieces: &[Vec<u8>]) -> Sha256Digest {
    let mut h = Sha256::new();
    for p in pieces {
        h.update(p);
    }
    Sha256Digest(h.finalize().into())
}

/// HMAC-SHA256 (RFC 2104) of `msg` under `key` (a key longer than the block is
/// hashed first): the keyed digests of secrets in cache keys, and the seals of a
/// batch job's own records.
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> Sha256Digest {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&sha256_bytes(key).0);
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut ipad = [0x36u8; 64];
    let mut opad = [0x5cu8; 64];
    for i in 0..64 {
        ipad[i] ^= block[i];
        opad[i] ^= block[i];
    }
    let inner = Sha256::new()
        .chain_update(ipad)
        .chain_update(msg)
        .finalize();
    Sha256Digest(
        Sha256::new()
            .chain_update(opad)
            .chain_update(inner)
            .finalize()
            .into(),
    )
}

/// Stream a file through SHA-256 in constant memory (one reusable buffer per
/// thread), whatever its size.
///
/// Plain `read` into a large buffer rather than mmap: the copy out of the page cache
/// costs a few percent next to SHA-256 itself, and a mapped file that shrinks while
/// being hashed would kill the process with SIGBUS instead of returning an error.
///
/// Symbolic links are followed (pins name files through links, as the Hugging Face
/// cache does), but only a regular file is read: a FIFO or a device is refused at
/// once instead of blocking or streaming forever.
///
/// With a [`stat::StatCache`] installed, a file whose stat matches a trusted entry
/// is not read again.
pub fn sha256_file(path: &Path) -> io::Result<Sha256Digest> {
    let (f, _) = open_regular(path, Follow::Yes)?;
    match stat::StatCache::installed() {
        Some(cache) => {
            let m = f.metadata()?;
            cache.digest(&m, || {
                let d = hash_file(f.try_clone()?, None)?;
                Ok((d, f.metadata()?))
            })
        }
        None => hash_file(f, None),
    }
}

/// Digest and size of the regular file at `path` itself: a symbolic link is refused,
/// not followed, as is anything but a regular file. Gives up between chunks once
/// `stop` is set. For what a step wrote: logs, outputs, metrics.
pub fn sha256_regular(path: &Path, stop: &Stop) -> io::Result<(Sha256Digest, u64)> {
    let (f, size) = open_regular(path, Follow::No)?;
    Ok((hash_file(f, Some(stop))?, size))
}

fn hash_file(f: File, stop: Option<&Stop>) -> io::Result<Sha256Digest> {
    advise_sequential(&f);
    // Nothing inside hashing calls back into it, so the borrow never clashes.
    BUF.with_borrow_mut(|buf| {
        if buf.len() < CHUNK {
            buf.resize(CHUNK, 0);
        }
        hash_reader(f, buf, stop)
    })
}

/// Whether [`open_regular`] follows a symbolic link at the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    Yes,
    No,
}

/// Open `path` for reading only if it is a regular file, with its size: opened
/// non-blocking (a FIFO cannot hang the open) and, with `Follow::No`, refusing a
/// symbolic link (`O_NOFOLLOW`); anything else is an `InvalidInput` error that says
/// what the path is.
pub fn open_regular(path: &Path, follow: Follow) -> io::Result<(File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if follow == Follow::No {
        flags |= libc::O_NOFOLLOW;
    }
    let opened = crate::sys::retry(|| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags)
            .open(path)
    });
    let f = match opened {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) && follow == Follow::No => {
            return Err(not_regular("a symbolic link"))
        }
        Err(e) => return Err(e),
    };
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(kind_of(&meta.file_type())));
    }
    Ok((f, meta.len()))
}

fn not_regular(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file ({what}): not read"),
    )
}

/// Why a path a record, a journal or a results file names is not read: it would
/// leave the folder it must stay in.
#[derive(Debug, thiserror::Error)]
pub enum Escape {
    #[error("names a path outside the folder")]
    NotPlain,
    #[error("cannot resolve {root}: {source}")]
    NoRoot { root: PathBuf, source: io::Error },
    #[error("a link among its folders leads out, to {}", .0.display())]
    ThroughLink(PathBuf),
    #[error("is outside the attempt's folders (the run's work folder and its revision's checkout): not read")]
    Outside,
}

/// `rel` below `root`, only if it stays there: a relative path of plain names (no
/// `..`, not absolute), and no link among its folders that leads out of `root`. The
/// file itself is for the caller to open without following a link.
pub fn contained(root: &Path, rel: &str) -> Result<PathBuf, Escape> {
    let r = Path::new(rel);
    let plain = !rel.is_empty()
        && r.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !plain {
        return Err(Escape::NotPlain);
    }
    let p = root.join(r);
    let canon_root = root.canonicalize().map_err(|source| Escape::NoRoot {
        root: root.to_path_buf(),
        source,
    })?;
    match p.parent().unwrap_or(root).canonicalize() {
        Ok(c) if c.starts_with(&canon_root) => Ok(p),
        Ok(c) => Err(Escape::ThroughLink(c)),
        // A folder that is missing is reported when the file is read.
        Err(_) => Ok(p),
    }
}

/// What a file type is, in words ("a FIFO", "a folder", ...).
pub fn kind_of(ft: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a folder"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_file() {
        "a regular file"
    } else {
        "an unknown kind of file"
    }
}

/// The bytes of the regular file at `path` (see [`open_regular`]), refused with a
/// `FileTooLarge` error when it holds more than `max` bytes: a file a step or a
/// crafted record folder controls can neither hang nor bloat the reader.
pub fn read_regular(path: &Path, follow: Follow, max: u64) -> io::Result<Vec<u8>> {
    let (f, size) = open_regular(path, follow)?;
    if size > max {
        return Err(too_large(size, max));
    }
    let mut out = Vec::with_capacity(size as usize);
    // The file may grow after the stat: never read more than the cap.
    f.take(max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(too_large(out.len() as u64, max));
    }
    Ok(out)
}

fn too_large(size: u64, max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!("holds {size} bytes or more, over the limit of {max}: not read"),
    )
}

thread_local! {
    static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn hash_reader(mut f: File, buf: &mut [u8], stop: Option<&Stop>) -> io::Result<Sha256Digest> {
    let mut h = Sha256::new();
    loop {
        if stop.is_some_and(Stop::is_stopped) {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "hashing given up: the run is ending",
            ));
        }
        let n = match f.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(buf.get(..n).unwrap_or(&[]));
    }
    Ok(Sha256Digest(h.finalize().into()))
}

/// Tell the kernel we read front to back, so it reads ahead further.
fn advise_sequential(f: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open fd; the call only sets a hint and cannot fail unsafely.
    // A failure (e.g. on a pipe) changes nothing, so its result is ignored.
    unsafe {
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL);
    }
}

/// Digest of a folder and its manifest (sorted by path). The files are hashed in
/// parallel (rayon), the first error in path order is returned.
pub fn sha256_dir(dir: &Path) -> io::Result<(Sha256Digest, Vec<ManifestEntry>)> {
    sha256_dir_until(dir, &Stop::new())
}

/// Like [`sha256_dir`], giving up once `stop` is set. Entries are opened without
/// following links (an entry swapped for a link after the walk is refused).
pub fn sha256_dir_until(dir: &Path, stop: &Stop) -> io::Result<(Sha256Digest, Vec<ManifestEntry>)> {
    use rayon::prelude::*;
    let mut found = Vec::new();
    walk(dir, dir, &mut found, stop)?;
    found.sort_by(|a, b| a.rel.as_bytes().cmp(b.rel.as_bytes()));
    let entries = found
        .into_par_iter()
        .map(|f| match f.kind {
            Found::Symlink { digest, size } => Ok(ManifestEntry {
                path: f.rel,
                sha256: digest,
                size,
                symlink: true,
            }),
            Found::File { size } => Ok(ManifestEntry {
                sha256: sha256_regular(&f.abs, stop)?.0,
                path: f.rel,
                size,
                symlink: false,
            }),
        })
        .collect::<io::Result<Vec<_>>>()?;
    Ok((manifest_digest(&entries), entries))
}

/// The digest of a manifest, as defined in the module docs.
pub fn manifest_digest(entries: &[ManifestEntry]) -> Sha256Digest {
    let mut h = Sha256::new();
    for e in entries {
        if e.symlink {
            h.update(b"symlink:");
        }
        h.update(e.sha256.hex().as_bytes());
        h.update(b"  ");
        h.update(e.path.as_bytes());
        h.update(b"\n");
    }
    Sha256Digest(h.finalize().into())
}

/// What the walk found, before any file is hashed.
struct FoundEntry {
    rel: String,
    abs: PathBuf,
    kind: Found,
}

enum Found {
    File { size: u64 },
    Symlink { digest: Sha256Digest, size: u64 },
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<FoundEntry>, stop: &Stop) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        if stop.is_stopped() {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "hashing given up: the run is ending",
            ));
        }
        let entry = entry?;
        let path = entry.path();
        let ft = entry.file_type()?;
        let rel = rel_path(root, &path);
        if ft.is_symlink() {
            let target = std::fs::read_link(&path)?;
            let text = target.to_string_lossy();
            out.push(FoundEntry {
                rel,
                abs: path.clone(),
                kind: Found::Symlink {
                    digest: sha256_bytes(text.as_bytes()),
                    size: text.len() as u64,
                },
            });
        } else if ft.is_dir() {
            walk(root, &path, out, stop)?;
        } else if ft.is_file() {
            let size = entry.metadata()?.len();
            out.push(FoundEntry {
                rel,
                abs: path,
                kind: Found::File { size },
            });
        }
    }
    Ok(())
}

/// `path` relative to `root`, `/`-separated (the manifest's path form).
pub fn rel_path(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Hash several files at once (one rayon task each), results in input order.
pub fn sha256_files(paths: &[PathBuf]) -> Vec<io::Result<Sha256Digest>> {
    use rayon::prelude::*;
    paths.par_iter().map(|p| sha256_file(p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector() {
        assert_eq!(
            sha256_bytes(b"abc").hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn parse_round_trip() {
        let d = sha256_bytes(b"x");
        assert_eq!(Sha256Digest::parse(&d.hex()), Some(d));
        assert_eq!(Sha256Digest::parse(&format!("sha256:{}", d.hex())), Some(d));
        assert_eq!(Sha256Digest::parse("zz"), None);
        assert_eq!(Sha256Digest::parse(&"g".repeat(64)), None);
    }

    #[test]
    fn dir_digest_matches_sha256sum_manifest() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("sub")).unwrap();
        std::fs::write(t.path().join("b.txt"), b"bee").unwrap();
        std::fs::write(t.path().join("sub/a.txt"), b"a").unwrap();
        let (d, m) = sha256_dir(t.path()).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].path, "b.txt");
        assert_eq!(m[1].path, "sub/a.txt");
        let text = format!(
            "{}  b.txt\n{}  sub/a.txt\n",
            sha256_bytes(b"bee").hex(),
            sha256_bytes(b"a").hex()
        );
        assert_eq!(d, sha256_bytes(text.as_bytes()));
        std::fs::write(t.path().join("sub/a.txt"), b"A").unwrap();
        assert_ne!(sha256_dir(t.path()).unwrap().0, d);
    }

    #[test]
    fn parallel_dir_and_files_match_one_by_one() {
        let t = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        for i in 0..40 {
            let p = t.path().join(format!("f{i:02}"));
            // Some files span several read chunks, one is empty.
            let len = if i % 10 == 3 { 2 * CHUNK + i } else { i * 7 };
            let data: Vec<u8> = (0..len).map(|j| (j * 31 + i) as u8).collect();
            std::fs::write(&p, &data).unwrap();
            assert_eq!(sha256_file(&p).unwrap(), sha256_bytes(&data));
            paths.push(p);
        }
        std::os::unix::fs::symlink("f01", t.path().join("link")).unwrap();
        let (_, m) = sha256_dir(t.path()).unwrap();
        assert_eq!(m.len(), 41);
        let link = m.iter().find(|e| e.path == "link").unwrap();
        assert!(link.symlink);
        assert_eq!(link.sha256, sha256_bytes(b"f01"));
        let each = sha256_files(&paths);
        for (p, d) in paths.iter().zip(each) {
            let name = p.file_name().unwrap().to_str().unwrap();
            let e = m.iter().find(|e| e.path == name).unwrap();
            assert_eq!(e.sha256, d.unwrap());
            assert_eq!(e.size, std::fs::metadata(p).unwrap().len());
        }
        assert!(sha256_file(&t.path().join("missing")).is_err());
        assert!(sha256_files(&[t.path().join("missing")])[0].is_err());
    }
}
