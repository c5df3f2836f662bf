//! The cache on disk:
//!
//! ```text
//! <root>/blobs/sha256/<2 hex>/<64 hex>   file contents, 0400, deduplicated
//! <root>/entries/<2 hex>/<key>/entry.json     what a step produced (outputs, files)
//! <root>/entries/<2 hex>/<key>/preimage.json  what its key was made of
//! <root>/entries/<2 hex>/<key>/used           renamed anew on every reuse (for gc)
//! <root>/steps/<sha256 of plan and step>      the key that step used last
//! <root>/locks/<key>.lock, <root>/gc.lock     flock(2), as device leases use
//! <root>/secret.key                           keys the digests of secret values
//! <root>/tmp/                                 where everything is written first
//! ```
//!
//! The store is input, not trusted state: whoever can write it could plant
//! anything. So the root must belong to the user and be writable by nobody else
//! (as ssh and git require), every open below it is relative to a directory held
//! open and never follows a link (`fsx`), and what an entry says is checked before
//! it is used: its outputs must be the ones the plan declares, its paths plain names
//! below them, its links must stay inside them, its digests must add up, and every
//! blob must still be what the entry says (size, inode, mtime and ctime as stored,
//! else hashed again). A restore goes only where the plan's outputs lie, never to a
//! path read from the store. Restored files are reflinks where the filesystem has
//! them (copy-on-write) and copies elsewhere, so nothing written through a restored
//! file reaches the store or another restore; hard links only where a step opts in
//! (`cache_restore = "link"`), and then a write through one changes the blob's
//! ctime, which the next reuse sees.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::key::Preimage;
use crate::fsx::{Dir, Kind, Stamp};

/// The largest entry.json or preimage.json read.
const MAX_META: u64 = 64 << 20;
/// Every folder of the store.
const DIR_MODE: u32 = 0o700;
/// Every file the store writes besides blobs.
const FILE_MODE: u32 = 0o600;
/// Left in `tmp/` longer than this while `gc` holds the store alone: a writer died.
const STALE_TMP_S: u64 = 60;

/// One cache folder.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

/// What a step produced, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Entry {
    /// The cache key.
    pub key: String,
    /// The step that produced it, in the plan it ran in.
    pub step: String,
    pub plan: String,
    /// The run and attempt that produced it.
    pub run_id: String,
    pub attempt: u32,
    /// When it was stored (RFC 3339).
    pub created: String,
    /// The step's declared outputs.
    pub outputs: Vec<EntryOutput>,
    /// The shared cache it was taken from, when this run did not make it: never
    /// pushed again under another key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pulled_from: Option<String>,
}

/// One declared output of a stored step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EntryOutput {
    /// The path as the plan writes it (`${out}/kv.safetensors`, `${work}/model`).
    pub path: String,
    /// "file", "dir" or "symlink".
    pub kind: String,
    /// The digest the record gives it (a folder's manifest digest).
    pub sha256: String,
    /// Its size (a folder's files summed).
    pub bytes: u64,
    /// Its files: one for a file (path ""), each file or link of a folder.
    pub files: Vec<EntryFile>,
}

/// One stored file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EntryFile {
    /// Path inside the output folder, `/`-separated ("" for a file output).
    pub rel: String,
    /// sha256 of its bytes (of the target text, for a link).
    pub sha256: String,
    pub size: u64,
    /// Whether it was executable.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exec: bool,
    /// A symbolic link's target (no blob).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The blob's mtime (ns) when it was last known to hold these bytes.
    #[serde(default)]
    pub blob_mtime_ns: i64,
    /// The blob's ctime (ns) then: any write, chmod or link moves it, and it cannot
    /// be set back.
    #[serde(default)]
    pub blob_ctime_ns: i64,
    /// The blob's inode then.
    #[serde(default)]
    pub blob_ino: u64,
}

impl EntryFile {
    fn known(&self, st: &Stamp) -> bool {
        st.size == self.size
            && st.mtime_ns == self.blob_mtime_ns
            && st.ctime_ns == self.blob_ctime_ns
            && st.ino == self.blob_ino
    }

    fn stamp(&mut self, st: &Stamp) {
        self.blob_mtime_ns = st.mtime_ns;
        self.blob_ctime_ns = st.ctime_ns;
        self.blob_ino = st.ino;
    }
}

/// How restored files were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RestoreMode {
    Reflink,
    Hardlink,
    Copy,
}

impl RestoreMode {
    /// As the record writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            RestoreMode::Reflink => "reflink",
            RestoreMode::Hardlink => "hardlink",
            RestoreMode::Copy => "copy",
        }
    }

    /// The weaker of two: a restore is as shared as its most shared file.
    fn weakest(self, other: RestoreMode) -> RestoreMode {
        use RestoreMode::*;
        match (self, other) {
            (Hardlink, _) | (_, Hardlink) => Hardlink,
            (Copy, _) | (_, Copy) => Copy,
            _ => Reflink,
        }
    }
}

/// A lookup's answer.
#[derive(Debug)]
pub enum Lookup {
    Hit(Entry),
    Miss,
    /// An entry was there but cannot be used; it is removed.
    Corrupt(String),
}

/// Where one declared output goes in this run: a folder of the run (`${out}` or
/// `${work}`, made by the run) and a relative path of plain names below it ("" for
/// the folder itself). Computed from the plan, never read from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub root: PathBuf,
    pub rel: String,
}

impl Target {
    /// The absolute path, for the record.
    pub fn path(&self) -> PathBuf {
        if self.rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(&self.rel)
        }
    }
}

pub(crate) fn is_hex64(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn locked(file: File, arg: FlockArg) -> io::Result<Flock<File>> {
    let mut file = file;
    loop {
        match Flock::lock(file, arg) {
            Ok(l) => return Ok(l),
            Err((f, Errno::EINTR)) => file = f,
            Err((_, e)) => return Err(e.into()),
        }
    }
}

/// FICLONE: a copy-on-write clone of `src` into `dst` (btrfs, xfs, bcachefs).
fn reflink(src: &File, dst: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    const FICLONE: libc::c_ulong = 0x4004_9409;
    // SAFETY: both descriptors are open files owned by the caller.
    let r = unsafe { libc::ioctl(dst.as_raw_fd(), FICLONE as _, src.as_raw_fd()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Hash what `src` holds while copying it into `dst`; its digest and size.
fn copy_hashing(src: &mut File, dst: &mut File) -> io::Result<(String, u64)> {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = crate::sys::retry(|| src.read(&mut buf))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        dst.write_all(&buf[..n])?;
        size += n as u64;
    }
    Ok((crate::digest::Sha256Digest(h.finalize().into()).hex(), size))
}

pub(super) fn hash_file(f: &mut File) -> io::Result<String> {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = crate::sys::retry(|| f.read(&mut buf))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(crate::digest::Sha256Digest(h.finalize().into()).hex())
}

/// Why an entry cannot be used as the plan's outputs `expected`, if it cannot.
pub(crate) fn check_entry(entry: &Entry, key: &str, expected: &[String]) -> Result<(), String> {
    if entry.key != key {
        return Err("its entry.json names another key".into());
    }
    if entry.outputs.len() != expected.len()
        || entry
            .outputs
            .iter()
            .zip(expected)
            .any(|(o, e)| o.path != *e)
    {
        return Err("its entry names other outputs than the step declares".into());
    }
    for o in &entry.outputs {
        check_output(o).map_err(|why| format!("output `{}`: {why}", o.path))?;
    }
    Ok(())
}

fn check_output(o: &EntryOutput) -> Result<(), String> {
    if !is_hex64(&o.sha256) {
        return Err("its digest is not a sha256".into());
    }
    let sum: u64 = o.files.iter().map(|f| f.size).fold(0, u64::saturating_add);
    if sum != o.bytes {
        return Err("its size is not the sum of its files".into());
    }
    for f in &o.files {
        if !is_hex64(&f.sha256) {
            return Err(format!("file `{}` has no sha256", f.rel));
        }
        if let Some(t) = &f.link {
            if crate::digest::sha256_bytes(t.as_bytes()).hex() != f.sha256
                || t.len() as u64 != f.size
            {
                return Err(format!("link `{}` is not what its digest says", f.rel));
            }
        }
    }
    match o.kind.as_str() {
        "file" | "symlink" => {
            let [f] = o.files.as_slice() else {
                return Err(format!("a {} must hold one file", o.kind));
            };
            let want_link = o.kind == "symlink";
            if !f.rel.is_empty() || f.link.is_some() != want_link {
                return Err("its file is not the output itself".into());
            }
            if let Some(t) = &f.link {
                if crate::fsx::link_inside("link", t).is_none() {
                    return Err(format!("its link leads outside its folder (`{t}`)"));
                }
            }
            if f.sha256 != o.sha256 {
                return Err("its digest is not its file's".into());
            }
        }
        "dir" => {
            let mut seen = std::collections::BTreeSet::new();
            for f in &o.files {
                crate::fsx::plain_parts(&f.rel).map_err(|e| e.to_string())?;
                if !seen.insert(f.rel.as_str()) {
                    return Err(format!("`{}` is listed twice", f.rel));
                }
                if let Some(t) = &f.link {
                    if crate::fsx::link_inside(&f.rel, t).is_none() {
                        return Err(format!("link `{}` leads outside the folder (`{t}`)", f.rel));
                    }
                }
            }
            // A name that is a file and a folder at once cannot be restored.
            for f in &o.files {
                let mut p = f.rel.as_str();
                while let Some((parent, _)) = p.rsplit_once('/') {
                    if seen.contains(parent) {
                        return Err(format!("`{parent}` is a file and a folder"));
                    }
                    p = parent;
                }
            }
            let entries: Vec<crate::digest::ManifestEntry> = o
                .files
                .iter()
                .filter_map(|f| {
                    Some(crate::digest::ManifestEntry {
                        path: f.rel.clone(),
                        sha256: crate::digest::Sha256Digest::parse(&f.sha256)?,
                        size: f.size,
                        symlink: f.link.is_some(),
                    })
                })
                .collect();
            if crate::digest::manifest_digest(&entries).hex() != o.sha256 {
                return Err("its digest is not its files' manifest".into());
            }
        }
        other => return Err(format!("unknown kind `{other}`")),
    }
    Ok(())
}

/// The folders of the store, opened once per operation.
pub(super) struct Open {
    root: Dir,
}

impl Open {
    /// A folder of the store; whatever is planted where it goes is replaced.
    fn sub(&self, path: &str) -> io::Result<Dir> {
        let mut d = self.root.try_clone()?;
        for part in crate::fsx::plain_parts(path)? {
            d = d.sub_owned(part, DIR_MODE)?;
        }
        Ok(d)
    }

    pub(super) fn tmp(&self) -> io::Result<Dir> {
        self.sub("tmp")
    }

    /// The folder of entry `key` and its parent; `None` when absent.
    fn entry_parent(&self, key: &str, make: bool) -> io::Result<Option<Dir>> {
        let entries = self.sub("entries")?;
        let hh = &key[..2];
        if make {
            return entries.sub_owned(hh, DIR_MODE).map(Some);
        }
        match entries.sub(hh) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(super) fn blob_parent(&self, hex: &str, make: bool) -> io::Result<Dir> {
        let blobs = self.sub("blobs/sha256")?;
        if make {
            blobs.sub_owned(&hex[..2], DIR_MODE)
        } else {
            blobs.sub(&hex[..2])
        }
    }

    pub(super) fn lock(&self, name: &str, arg: FlockArg) -> io::Result<Flock<File>> {
        let dir = if name == "gc.lock" {
            self.root.try_clone()?
        } else {
            self.sub("locks")?
        };
        let f = match dir.lock_file(name) {
            Ok(f) => f,
            // Something planted where a lock file goes (a link, a FIFO): removed as
            // what it is, never followed, and the lock made anew.
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                dir.remove_tree(name)?;
                dir.lock_file(name)?
            }
            Err(e) => return Err(e),
        };
        locked(f, arg)
    }
}

impl Cache {
    /// Open (creating, mode 0700) the cache at `root`; refused when another user
    /// owns it or could write it or a folder above it.
    pub fn open(root: &Path) -> io::Result<Cache> {
        if !root.exists() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(root)?;
        }
        crate::fsx::check_private(root)?;
        let c = Cache {
            root: root.to_path_buf(),
        };
        let o = c.opened()?;
        for d in ["blobs/sha256", "entries", "steps", "locks", "tmp"] {
            o.sub(d)?;
        }
        Ok(c)
    }

    pub(super) fn opened(&self) -> io::Result<Open> {
        Ok(Open {
            root: Dir::open(&self.root)?,
        })
    }

    /// `--cache DIR`, else `ORCHESTRATE_CACHE`, else `$XDG_CACHE_HOME/orchestrate`,
    /// else `~/.cache/orchestrate` (the home folder from the password database when
    /// `HOME` is unset), else `/tmp/orchestrate-cache-<uid>` (made 0700, refused if
    /// someone else made it first).
    pub fn default_root() -> PathBuf {
        if let Some(p) = std::env::var_os("ORCHESTRATE_CACHE").filter(|p| !p.is_empty()) {
            return PathBuf::from(p);
        }
        if let Some(p) = std::env::var_os("XDG_CACHE_HOME").filter(|p| !p.is_empty()) {
            return PathBuf::from(p).join("orchestrate");
        }
        let uid = nix::unistd::geteuid();
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                nix::unistd::User::from_uid(uid)
                    .ok()
                    .flatten()
                    .map(|u| u.dir)
                    .filter(|d| d.is_absolute() && d.is_dir())
            });
        match home {
            Some(h) => h.join(".cache/orchestrate"),
            None => PathBuf::from(format!("/tmp/orchestrate-cache-{}", uid.as_raw())),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn step_index(plan: &str, step: &str) -> String {
        crate::digest::sha256_bytes(format!("{plan}\u{0}{step}").as_bytes()).hex()
    }

    fn read_json<T: for<'de> Deserialize<'de>>(dir: &Dir, name: &str) -> Option<T> {
        let bytes = dir.read(name, MAX_META).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// The key that digests secret values in pre-images (32 random bytes, made once
    /// per store, 0600): a pre-image never holds a secret, and without this key its
    /// digest cannot be checked against guesses.
    pub fn secret_key(&self) -> io::Result<[u8; 32]> {
        let o = self.opened()?;
        for _ in 0..2 {
            match o.root.read("secret.key", 64) {
                Ok(b) if b.len() == 32 => {
                    let mut k = [0u8; 32];
                    k.copy_from_slice(&b);
                    return Ok(k);
                }
                Ok(_) => o.root.remove_tree("secret.key")?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            let mut k = [0u8; 32];
            getrandom::fill(&mut k).map_err(|e| io::Error::other(e.to_string()))?;
            let tmp = o.tmp()?;
            let t = crate::fsx::unique_name();
            let mut f = tmp.create(&t, FILE_MODE)?;
            f.write_all(&k)?;
            f.sync_data()?;
            // Two runs making it at once: the first link wins, both read it.
            match nix::unistd::linkat(
                &tmp,
                t.as_str(),
                &o.root,
                "secret.key",
                nix::fcntl::AtFlags::empty(),
            ) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => {
                    let _ = tmp.unlink(&t);
                    return Err(e.into());
                }
            }
            let _ = tmp.unlink(&t);
        }
        Err(io::Error::other("secret.key could not be made"))
    }

    /// The entry for `key`, checked against the outputs the plan declares
    /// (`expected`, as written) and every blob against what the entry says. An entry
    /// that cannot be used is removed, with the blob that failed.
    pub fn lookup(&self, key: &str, expected: &[String]) -> Lookup {
        if !is_hex64(key) {
            return Lookup::Miss;
        }
        match self.lookup_io(key, expected) {
            Ok(l) => l,
            Err(e) => Lookup::Corrupt(format!("the cache could not be read ({e})")),
        }
    }

    fn lookup_io(&self, key: &str, expected: &[String]) -> io::Result<Lookup> {
        let o = self.opened()?;
        let Some(parent) = o.entry_parent(key, false)? else {
            return Ok(Lookup::Miss);
        };
        let dir = match parent.stat(key)? {
            None => return Ok(Lookup::Miss),
            Some((Kind::Dir, _)) => parent.sub(key)?,
            Some((k, _)) => {
                parent.remove_tree(key)?;
                return Ok(Lookup::Corrupt(format!("its entry is {}", k.words())));
            }
        };
        let refuse = |why: String| -> io::Result<Lookup> {
            parent.remove_tree(key)?;
            Ok(Lookup::Corrupt(why))
        };
        let Some(mut entry) = Self::read_json::<Entry>(&dir, "entry.json") else {
            return refuse("its entry.json could not be read".into());
        };
        if let Err(why) = check_entry(&entry, key, expected) {
            return refuse(why);
        }
        let mut restamped = false;
        for out in &mut entry.outputs {
            let written = out.path.clone();
            for f in out.files.iter_mut().filter(|f| f.link.is_none()) {
                let at = if f.rel.is_empty() {
                    written.clone()
                } else {
                    format!("{written}/{}", f.rel)
                };
                match Self::check_blob(&o, f) {
                    Ok(None) => {}
                    Ok(Some(st)) => {
                        f.stamp(&st);
                        restamped = true;
                    }
                    Err(why) => {
                        if let Ok(bp) = o.blob_parent(&f.sha256, false) {
                            let _ = bp.remove_tree(&f.sha256);
                        }
                        return refuse(format!("its copy of `{at}` {why}"));
                    }
                }
            }
        }
        let tmp = o.tmp()?;
        if restamped {
            let bytes = serde_json::to_vec_pretty(&entry).map_err(io::Error::other)?;
            dir.write_atomic(&tmp, "entry.json", &bytes, FILE_MODE)?;
        }
        dir.write_atomic(&tmp, "used", b"", FILE_MODE)?;
        Ok(Lookup::Hit(entry))
    }

    /// Whether blob `f.sha256` still holds what the entry says: `Ok(None)` when its
    /// stat is as stored, `Ok(Some(stat))` when it changed but still hashes right.
    fn check_blob(o: &Open, f: &EntryFile) -> Result<Option<Stamp>, String> {
        let parent = o
            .blob_parent(&f.sha256, false)
            .map_err(|_| "is gone".to_string())?;
        let (mut file, st) = parent.open_file(&f.sha256).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => "is gone".to_string(),
            _ => format!("cannot be read ({e})"),
        })?;
        if st.size != f.size {
            return Err(format!(
                "no longer matches its digest (its size is {} bytes, not {})",
                st.size, f.size
            ));
        }
        if f.known(&st) {
            return Ok(None);
        }
        // Touched since (or stored before its ctime was kept): trusted only if its
        // bytes still hash right.
        match hash_file(&mut file) {
            Ok(h) if h == f.sha256 => Ok(Some(st)),
            Ok(_) => Err("no longer matches its digest (written through a restored file?)".into()),
            Err(e) => Err(format!("cannot be read ({e})")),
        }
    }

    /// Remove the entry for `key` (its blobs stay until `gc`).
    pub fn remove(&self, key: &str) {
        if !is_hex64(key) {
            return;
        }
        if let Ok(o) = self.opened() {
            if let Ok(Some(p)) = o.entry_parent(key, false) {
                let _ = p.remove_tree(key);
            }
        }
    }

    /// The pre-image the entry for `key` was made from.
    pub fn preimage(&self, key: &str) -> Option<Preimage> {
        if !is_hex64(key) {
            return None;
        }
        let o = self.opened().ok()?;
        let dir = o.entry_parent(key, false).ok()??.sub(key).ok()?;
        Self::read_json(&dir, "preimage.json")
    }

    /// The key `step` of `plan` used last, and its pre-image.
    pub fn last_for_step(&self, plan: &str, step: &str) -> Option<(String, Preimage)> {
        let o = self.opened().ok()?;
        let bytes = o
            .sub("steps")
            .ok()?
            .read(&Self::step_index(plan, step), 128)
            .ok()?;
        let key = String::from_utf8(bytes).ok()?.trim().to_string();
        let pre = self.preimage(&key)?;
        Some((key, pre))
    }

    /// Remember that `step` of `plan` used `key`.
    pub fn remember(&self, plan: &str, step: &str, key: &str) {
        let _ = (|| -> io::Result<()> {
            let o = self.opened()?;
            o.sub("steps")?.write_atomic(
                &o.tmp()?,
                &Self::step_index(plan, step),
                key.as_bytes(),
                FILE_MODE,
            )
        })();
    }

    /// Copy the regular file `src` into the blob store while hashing it; its hex
    /// digest and the blob's stat. A blob already there is kept only if it holds
    /// the same bytes; anything else there (other bytes, a link, a folder) is
    /// replaced.
    fn put_blob(&self, o: &Open, src: &Path, exec: bool) -> io::Result<(String, Stamp)> {
        let tmp = o.tmp()?;
        let t = crate::fsx::unique_name();
        let res = (|| {
            let (mut input, _) = crate::digest::open_regular(src, crate::digest::Follow::No)?;
            let mut out = tmp.create(&t, FILE_MODE)?;
            let (hex, size) = copy_hashing(&mut input, &mut out)?;
            out.sync_data()?;
            let mode = if exec { 0o500 } else { 0o400 };
            nix::sys::stat::fchmod(
                std::os::fd::AsFd::as_fd(&out),
                nix::sys::stat::Mode::from_bits_truncate(mode),
            )?;
            let parent = o.blob_parent(&hex, true)?;
            match parent.stat(&hex)? {
                Some((Kind::File, st)) if st.size == size => {
                    if let Ok((mut f, st)) = parent.open_file(&hex) {
                        if hash_file(&mut f)? == hex {
                            let _ = tmp.unlink(&t);
                            return Ok((hex, st));
                        }
                    }
                }
                Some((Kind::Dir, _)) => parent.remove_tree(&hex)?,
                _ => {}
            }
            tmp.rename(&t, &parent, &hex)?;
            let (_, st) = parent.open_file(&hex)?;
            Ok((hex, st))
        })();
        if res.is_err() {
            let _ = tmp.unlink(&t);
        }
        res
    }

    /// Store the outputs of one attempt under `key`. `outputs`: each declared output
    /// as the plan writes it, where it is, and the digest the record gave it. Two
    /// runs storing one key at once: the second finds the first's entry.
    pub fn store(
        &self,
        key: &str,
        pre: &Preimage,
        meta: (&str, &str, &str, u32),
        outputs: &[(String, PathBuf, String)],
    ) -> io::Result<Entry> {
        if !is_hex64(key) {
            return Err(io::Error::other("not a cache key"));
        }
        let (plan, step, run_id, attempt) = meta;
        let o = self.opened()?;
        let _gc = o.lock("gc.lock", FlockArg::LockShared)?;
        let _key = o.lock(&format!("{key}.lock"), FlockArg::LockExclusive)?;
        let written: Vec<String> = outputs.iter().map(|(w, _, _)| w.clone()).collect();
        if let Lookup::Hit(e) = self.lookup(key, &written) {
            return Ok(e);
        }
        let mut stored = Vec::new();
        for (written, abs, digest) in outputs {
            stored.push(self.store_output(&o, written, abs, digest)?);
        }
        let entry = Entry {
            key: key.to_string(),
            step: step.to_string(),
            plan: plan.to_string(),
            run_id: run_id.to_string(),
            attempt,
            created: crate::time::rfc3339(&chrono::Utc::now()),
            outputs: stored,
            pulled_from: None,
        };
        check_entry(&entry, key, &written).map_err(io::Error::other)?;
        self.put_entry_dir(&o, &entry, pre)?;
        self.remember(plan, step, key);
        Ok(entry)
    }

    /// Write `entry` and its pre-image as the entry of its key (staged in `tmp/`,
    /// renamed into place), replacing what was there.
    pub(super) fn put_entry_dir(&self, o: &Open, entry: &Entry, pre: &Preimage) -> io::Result<()> {
        let key = entry.key.as_str();
        let tmp = o.tmp()?;
        let t = crate::fsx::unique_name();
        let staged = tmp.sub_owned(&t, DIR_MODE)?;
        let as_json = |r: serde_json::Result<Vec<u8>>| r.map_err(io::Error::other);
        for (name, bytes) in [
            ("entry.json", as_json(serde_json::to_vec_pretty(&entry))?),
            ("preimage.json", as_json(serde_json::to_vec_pretty(pre))?),
            ("used", Vec::new()),
        ] {
            let mut f = staged.create(name, FILE_MODE)?;
            f.write_all(&bytes)?;
            f.sync_data()?;
        }
        let parent = o
            .entry_parent(key, true)?
            .ok_or_else(|| io::Error::other("no entries folder"))?;
        parent.remove_tree(key)?;
        tmp.rename(&t, &parent, key)
    }

    fn store_output(
        &self,
        o: &Open,
        written: &str,
        abs: &Path,
        digest: &str,
    ) -> io::Result<EntryOutput> {
        let m = std::fs::symlink_metadata(abs)?;
        let is_exec = |m: &std::fs::Metadata| {
            use std::os::unix::fs::PermissionsExt;
            m.permissions().mode() & 0o111 != 0
        };
        let link_file = |rel: String, target: String| EntryFile {
            rel,
            sha256: crate::digest::sha256_bytes(target.as_bytes()).hex(),
            size: target.len() as u64,
            exec: false,
            link: Some(target),
            blob_mtime_ns: 0,
            blob_ctime_ns: 0,
            blob_ino: 0,
        };
        let blob_file = |rel: String, hex: String, st: Stamp, exec: bool| EntryFile {
            rel,
            sha256: hex,
            size: st.size,
            exec,
            link: None,
            blob_mtime_ns: st.mtime_ns,
            blob_ctime_ns: st.ctime_ns,
            blob_ino: st.ino,
        };
        let target_of = |p: &Path| -> io::Result<String> {
            std::fs::read_link(p)?
                .into_os_string()
                .into_string()
                .map_err(|_| io::Error::other("a link whose target is not UTF-8"))
        };
        let (kind, files) = if m.file_type().is_symlink() {
            ("symlink", vec![link_file(String::new(), target_of(abs)?)])
        } else if m.is_dir() {
            let (_, manifest) = crate::digest::sha256_dir(abs)?;
            let mut files = Vec::with_capacity(manifest.len());
            for e in manifest {
                let p = abs.join(&e.path);
                if e.symlink {
                    files.push(link_file(e.path, target_of(&p)?));
                } else {
                    let fm = std::fs::symlink_metadata(&p)?;
                    let (hex, st) = self.put_blob(o, &p, is_exec(&fm))?;
                    if hex != e.sha256.hex() {
                        return Err(io::Error::other(format!(
                            "`{}` changed while it was stored",
                            p.display()
                        )));
                    }
                    files.push(blob_file(e.path, hex, st, is_exec(&fm)));
                }
            }
            ("dir", files)
        } else {
            let (hex, st) = self.put_blob(o, abs, is_exec(&m))?;
            ("file", vec![blob_file(String::new(), hex, st, is_exec(&m))])
        };
        let bytes = files.iter().map(|f| f.size).sum();
        let out = EntryOutput {
            path: written.to_string(),
            kind: kind.into(),
            sha256: String::new(),
            bytes,
            files,
        };
        // The digest the record gave it must be what was stored.
        let got = match kind {
            "dir" => {
                let entries: Vec<crate::digest::ManifestEntry> = out
                    .files
                    .iter()
                    .filter_map(|f| {
                        Some(crate::digest::ManifestEntry {
                            path: f.rel.clone(),
                            sha256: crate::digest::Sha256Digest::parse(&f.sha256)?,
                            size: f.size,
                            symlink: f.link.is_some(),
                        })
                    })
                    .collect();
                crate::digest::manifest_digest(&entries).hex()
            }
            _ => out.files[0].sha256.clone(),
        };
        if got != digest {
            return Err(io::Error::other(format!(
                "`{written}` is not what the run hashed (it changed after the attempt ended)"
            )));
        }
        let out = EntryOutput { sha256: got, ..out };
        check_output(&out).map_err(|why| io::Error::other(format!("`{written}`: {why}")))?;
        Ok(out)
    }

    /// Put `entry`'s outputs at `targets` (one per output, in order, from the plan).
    /// Nothing outside a target is created or removed, and no link on the way to
    /// one is followed. `link` lets files be hard links to the blobs (the plan's
    /// `cache_restore = "link"`); else they are reflinks or copies. How files were
    /// made.
    pub fn restore(
        &self,
        entry: &Entry,
        targets: &[Target],
        link: bool,
    ) -> io::Result<RestoreMode> {
        if targets.len() != entry.outputs.len() {
            return Err(io::Error::other("the entry's outputs are not the step's"));
        }
        let o = self.opened()?;
        // A blob is not collected while it is being restored.
        let _gc = o.lock("gc.lock", FlockArg::LockShared)?;
        let mut mode = RestoreMode::Reflink;
        let mut relinked = false;
        let mut entry = entry.clone();
        for (out, t) in entry.outputs.iter_mut().zip(targets) {
            let root = Dir::open(&t.root)?;
            let (parent, last) = match t.rel.rsplit_once('/') {
                Some((p, l)) => (root.descend(p, Some(0o755))?, l.to_string()),
                None if t.rel.is_empty() => (root, String::new()),
                None => (root, t.rel.clone()),
            };
            let here = if last.is_empty() {
                // The run's folder itself (`${out}`): emptied, then filled.
                for (n, _) in parent.entries()? {
                    parent.remove_tree(&n)?;
                }
                None
            } else {
                parent.remove_tree(&last)?;
                Some(last)
            };
            if here.is_none() && out.kind != "dir" {
                return Err(io::Error::other(format!(
                    "`{}` is a folder of the run; the entry holds {}",
                    out.path, out.kind
                )));
            }
            match out.kind.as_str() {
                "symlink" => {
                    let target = out.files[0].link.clone().unwrap_or_default();
                    parent.symlink(&target, here.as_deref().unwrap_or_default())?;
                }
                "file" => {
                    let n = here.unwrap_or_default();
                    let m = self.place(&o, &mut out.files[0], &parent, &n, link)?;
                    relinked |= m == RestoreMode::Hardlink;
                    mode = mode.weakest(m);
                }
                _ => {
                    let d = match &here {
                        Some(n) => {
                            parent.mkdir(n, 0o755)?;
                            parent.sub(n)?
                        }
                        None => parent,
                    };
                    for f in &mut out.files {
                        let (sub, n) = match f.rel.rsplit_once('/') {
                            Some((p, n)) => (d.descend(p, Some(0o755))?, n.to_string()),
                            None => (d.try_clone()?, f.rel.clone()),
                        };
                        match &f.link {
                            Some(target) => sub.symlink(target, &n)?,
                            None => {
                                let m = self.place(&o, f, &sub, &n, link)?;
                                relinked |= m == RestoreMode::Hardlink;
                                mode = mode.weakest(m);
                            }
                        }
                    }
                }
            }
        }
        if relinked {
            // Linking moved each blob's ctime: what the entry knows is now that.
            let _key = o.lock(&format!("{}.lock", entry.key), FlockArg::LockExclusive)?;
            if let Ok(Some(parent)) = o.entry_parent(&entry.key, false) {
                if let Ok(dir) = parent.sub(&entry.key) {
                    let bytes = serde_json::to_vec_pretty(&entry).map_err(io::Error::other)?;
                    dir.write_atomic(&o.tmp()?, "entry.json", &bytes, FILE_MODE)?;
                }
            }
        }
        Ok(mode)
    }

    /// Make `name` in `dir` hold blob `f`: a reflink, else (with `link`) a hard link,
    /// else a copy.
    fn place(
        &self,
        o: &Open,
        f: &mut EntryFile,
        dir: &Dir,
        name: &str,
        link: bool,
    ) -> io::Result<RestoreMode> {
        let bp = o.blob_parent(&f.sha256, false)?;
        let (mut src, _) = bp.open_file(&f.sha256)?;
        let mode = if f.exec { 0o755 } else { 0o644 };
        {
            let dst = dir.create(name, mode)?;
            if reflink(&src, &dst).is_ok() {
                return Ok(RestoreMode::Reflink);
            }
            if !link {
                let mut dst = dst;
                io::copy(&mut src, &mut dst)?;
                return Ok(RestoreMode::Copy);
            }
        }
        dir.unlink(name)?;
        dir.hard_link_from(&bp, &f.sha256, name)?;
        let (_, st) = bp.open_file(&f.sha256)?;
        f.stamp(&st);
        Ok(RestoreMode::Hardlink)
    }
}

/// `gc`'s view of the store, for `admin.rs`.
pub(crate) mod walk {
    use super::*;

    /// One entry folder found on disk.
    pub(crate) struct Found {
        pub hh: String,
        pub key: String,
        pub entry: Option<Entry>,
        /// Seconds since `used` (else `entry.json`) changed.
        pub idle_s: u64,
    }

    fn age_s(st: &Stamp) -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as i64;
        (now.saturating_sub(st.mtime_ns).max(0) / 1_000_000_000) as u64
    }

    impl Cache {
        pub(crate) fn with_open<T>(
            &self,
            f: impl FnOnce(&OpenStore) -> io::Result<T>,
        ) -> io::Result<T> {
            let o = self.opened()?;
            f(&OpenStore(o))
        }
    }

    /// The store held open.
    pub(crate) struct OpenStore(Open);

    impl OpenStore {
        /// Every entry folder (links and files where one should be are junk: listed
        /// with no entry, removed by gc without being followed).
        pub(crate) fn entries(&self, read: bool) -> io::Result<Vec<Found>> {
            use rayon::prelude::*;
            let entries = self.0.sub("entries")?;
            let mut fans = Vec::new();
            for (hh, kind) in entries.entries()? {
                if kind != Kind::Dir || hh.len() != 2 {
                    entries.remove_tree(&hh)?;
                } else {
                    fans.push(hh);
                }
            }
            // One fan-out folder per task: reading 100 000 small entries is syscalls.
            let per: Vec<io::Result<Vec<Found>>> = fans
                .into_par_iter()
                .map(|hh| {
                    let d = entries.sub(&hh)?;
                    let mut out = Vec::new();
                    for (key, kind) in d.entries()? {
                        if kind != Kind::Dir || !is_hex64(&key) || !key.starts_with(&hh) {
                            d.remove_tree(&key)?;
                            continue;
                        }
                        let ed = d.sub(&key)?;
                        let idle_s = ed
                            .stat("used")
                            .ok()
                            .flatten()
                            .or_else(|| ed.stat("entry.json").ok().flatten())
                            .map_or(u64::MAX, |(_, st)| age_s(&st));
                        let entry = if read {
                            Cache::read_json::<Entry>(&ed, "entry.json").filter(|e| e.key == key)
                        } else {
                            None
                        };
                        out.push(Found {
                            hh: hh.clone(),
                            key,
                            entry,
                            idle_s,
                        });
                    }
                    Ok(out)
                })
                .collect();
            let mut out = Vec::new();
            for p in per {
                out.extend(p?);
            }
            Ok(out)
        }

        pub(crate) fn read_entry(&self, hh: &str, key: &str) -> Option<Entry> {
            let d = self.0.sub("entries").ok()?.sub(hh).ok()?.sub(key).ok()?;
            Cache::read_json::<Entry>(&d, "entry.json").filter(|e| e.key == key)
        }

        /// Entry keys by fan-out folder, names only (no stat, no read): what the
        /// locked phase of `gc` compares with its scan.
        pub(crate) fn entry_names(&self) -> io::Result<Vec<(String, String)>> {
            let entries = self.0.sub("entries")?;
            let mut out = Vec::new();
            for (hh, kind) in entries.entries()? {
                if kind != Kind::Dir {
                    continue;
                }
                for (key, _) in entries.sub(&hh)?.entries()? {
                    out.push((hh.clone(), key));
                }
            }
            Ok(out)
        }

        /// Move entry `key` out of the way, into `trash` (a folder under `tmp/`):
        /// one rename under the lock, the files removed after it.
        pub(crate) fn discard_entry(&self, hh: &str, key: &str, trash: &Dir) -> io::Result<bool> {
            let d = self.0.sub("entries")?.sub(hh)?;
            if d.stat(key)?.is_none() {
                return Ok(false);
            }
            d.rename(key, trash, key)?;
            Ok(true)
        }

        /// A fresh folder under `tmp/` for what `gc` removes after its lock.
        pub(crate) fn trash(&self) -> io::Result<(Dir, String)> {
            let t = self.0.tmp()?;
            let name = crate::fsx::unique_name();
            Ok((t.sub_owned(&name, DIR_MODE)?, name))
        }

        pub(crate) fn empty_trash(&self, name: &str) -> io::Result<()> {
            use rayon::prelude::*;
            let tmp = self.0.tmp()?;
            let trash = tmp.sub(name)?;
            let names: Vec<String> = trash.entries()?.into_iter().map(|(n, _)| n).collect();
            names.par_iter().try_for_each(|n| trash.remove_tree(n))?;
            tmp.remove_tree(name)
        }

        /// Every blob: (hex, size); anything else in the blob folders is removed.
        pub(crate) fn blobs(&self, clean: bool) -> io::Result<Vec<(String, String, u64)>> {
            let b = self.0.sub("blobs/sha256")?;
            let mut out = Vec::new();
            for (hh, kind) in b.entries()? {
                if kind != Kind::Dir {
                    if clean {
                        b.remove_tree(&hh)?;
                    }
                    continue;
                }
                let d = b.sub(&hh)?;
                for (hex, kind) in d.entries()? {
                    match (kind, d.stat(&hex)?) {
                        (Kind::File, Some((_, st))) if is_hex64(&hex) => {
                            out.push((hh.clone(), hex, st.size))
                        }
                        _ if clean => d.remove_tree(&hex)?,
                        _ => {}
                    }
                }
            }
            Ok(out)
        }

        pub(crate) fn remove_blob(&self, hh: &str, hex: &str) -> io::Result<()> {
            self.0.sub("blobs/sha256")?.sub(hh)?.unlink(hex)
        }

        /// Bytes in `tmp/`; with `collect`, what has sat there longer than a writer
        /// takes is removed first (call it with the store held alone).
        pub(crate) fn tmp(&self, collect: bool) -> io::Result<(u64, u64)> {
            let t = self.0.tmp()?;
            let (mut removed, mut bytes) = (0u64, 0u64);
            for (n, _) in t.entries()? {
                let Some((_, st)) = t.stat(&n)? else { continue };
                if collect && age_s(&st) >= STALE_TMP_S {
                    t.remove_tree(&n)?;
                    removed += st.size;
                } else {
                    bytes += st.size;
                }
            }
            Ok((removed, bytes))
        }

        pub(crate) fn lock_gc(&self, arg: FlockArg) -> io::Result<Flock<File>> {
            self.0.lock("gc.lock", arg)
        }
    }
}
