//! SHA-256 of bytes, files and folders: the one hashing primitive every module uses
//! (pins hash models and lock files, evidence hashes outputs and logs).
//!
//! A folder's digest is the SHA-256 of its manifest: one line per regular file,
//! `<hex sha256>  <relative path>\n`, sorted by the path's bytes (the `sha256sum`
//! line format, so a reviewer can rebuild it with coreutils). Symbolic links are listed
//! as `symlink:<sha256 of the link target text>  <path>` and never followed.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// Read size for streaming: large enough to keep the SHA extensions busy.
const CHUNK: usize = 1 << 20;

/// A SHA-256 digest, shown and stored as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256Digest(pub [u8; 32]);

impl Sha256Digest {
    pub fn hex(&self) -> String {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(char::from_digit((b >> 4) as u32, 16).unwrap_or('0'));
            s.push(char::from_digit((b & 15) as u32, 16).unwrap_or('0'));
        }
        s
    }

    /// Parse 64 hex digits, optionally prefixed with `sha256:`.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.strip_prefix("sha256:").unwrap_or(s);
        if s.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, chunk) in s.as_bytes().chunks(2).enumerate() {
            let hi = (chunk[0] as char).to_digit(16)?;
            let lo = (chunk[1] as char).to_digit(16)?;
            out[i] = (hi * 16 + lo) as u8;
        }
        Some(Sha256Digest(out))
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl Serialize for Sha256Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.hex())
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Sha256Digest::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("not a sha256 hex digest: {s:?}")))
    }
}

pub fn sha256_bytes(data: &[u8]) -> Sha256Digest {
    Sha256Digest(Sha256::digest(data).into())
}

/// Stream a file through SHA-256 in constant memory.
pub fn sha256_file(path: &Path) -> io::Result<Sha256Digest> {
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&buf[..n]);
    }
    Ok(Sha256Digest(h.finalize().into()))
}

/// One entry of a folder manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// Path relative to the folder, `/`-separated.
    pub path: String,
    pub sha256: Sha256Digest,
    pub size: u64,
    /// True for a symbolic link (digest of its target text, size of that text).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub symlink: bool,
}

/// Digest of a folder and its manifest (sorted by path).
pub fn sha256_dir(dir: &Path) -> io::Result<(Sha256Digest, Vec<ManifestEntry>)> {
    let mut entries = Vec::new();
    walk(dir, dir, &mut entries)?;
    entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
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

fn walk(root: &Path, dir: &Path, out: &mut Vec<ManifestEntry>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let ft = entry.file_type()?;
        let rel = rel_path(root, &path);
        if ft.is_symlink() {
            let target = std::fs::read_link(&path)?;
            let text = target.to_string_lossy();
            out.push(ManifestEntry {
                path: rel,
                sha256: sha256_bytes(text.as_bytes()),
                size: text.len() as u64,
                symlink: true,
            });
        } else if ft.is_dir() {
            walk(root, &path, out)?;
        } else if ft.is_file() {
            let size = entry.metadata()?.len();
            out.push(ManifestEntry {
                path: rel,
                sha256: sha256_file(&path)?,
                size,
                symlink: false,
            });
        }
    }
    Ok(())
}

fn rel_path(root: &Path, path: &Path) -> String {
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
}
