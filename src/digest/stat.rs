//! A stat cache of file digests, so pins do not rehash what did not change (a 16 GiB
//! checkpoint is 11 s of hashing). Keyed the way git's index and DVC's state
//! database key theirs: device, inode, size, mtime and ctime, to the nanosecond.
//! Any write changes mtime and ctime, and ctime cannot be set back (`touch -d` sets
//! it to now), so a changed file never matches its old entry; a file replaced by
//! another gets another inode.
//!
//! Racy-clean guard (git's "racy git" problem): a write in the same clock tick as
//! the one before it leaves the timestamps unchanged. An entry is trusted only if
//! the file's ctime is [`RACY_NS`] older than when the entry was recorded; a file
//! hashed right after it was written is hashed again next time, and trusted after.
//!
//! One JSON file per cache folder, replaced atomically; two runs saving at once
//! lose each other's new entries at worst (a rehash later), never a digest.

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};

use super::Sha256Digest;

/// How much older than its entry a file's ctime must be for the entry to be
/// trusted: above the timestamp granularity of every filesystem in use (FAT's is
/// 2 s; ext4 and xfs tick with the kernel's coarse clock).
pub const RACY_NS: i64 = 2_000_000_000;

/// The file name, versioned: a new format starts empty.
const FILE: &str = "stat-v1.json";

/// Entries not seen for this long are dropped when saving.
const KEEP_SECS: i64 = 90 * 24 * 3600;

/// The largest stat file read (about 2 million entries).
const MAX_FILE: u64 = 512 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Key {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Known {
    sha256: Sha256Digest,
    /// When the digest was taken (ns since the epoch).
    recorded_ns: i64,
    /// When it was last used (s since the epoch), for pruning.
    seen: i64,
}

#[derive(Debug, Serialize, Deserialize)]
struct OnDisk {
    entries: Vec<(Key, Known)>,
}

/// Counters for one process: how many digests came from the cache.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StatCounts {
    pub hits: u64,
    pub hashed: u64,
}

/// Digests of files by their stat.
#[derive(Debug)]
pub struct StatCache {
    path: PathBuf,
    map: Mutex<HashMap<Key, Known>>,
    counts: Mutex<(StatCounts, bool)>,
}

static INSTALLED: RwLock<Option<Arc<StatCache>>> = RwLock::new(None);

fn ns(secs: i64, nsec: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsec)
}

fn now_ns() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

fn key_of(m: &std::fs::Metadata) -> Key {
    Key {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_ns: ns(m.mtime(), m.mtime_nsec()),
        ctime_ns: ns(m.ctime(), m.ctime_nsec()),
    }
}

impl StatCache {
    /// The stat cache kept in `dir` (created when saved); an unreadable or foreign
    /// file starts it empty.
    pub fn load(dir: &Path) -> StatCache {
        let path = dir.join(FILE);
        // A digest taken from a file someone else could write would be theirs to
        // choose: only a folder of the user's own is read.
        let private = crate::fsx::check_private(dir).is_ok();
        let map = crate::fsx::Dir::open(dir)
            .ok()
            .filter(|_| private)
            .and_then(|d| d.read(FILE, MAX_FILE).ok())
            .and_then(|b| serde_json::from_slice::<OnDisk>(&b).ok())
            .map(|d| d.entries.into_iter().collect())
            .unwrap_or_default();
        StatCache {
            path,
            map: Mutex::new(map),
            counts: Mutex::new((StatCounts::default(), false)),
        }
    }

    /// Make `cache` the one [`super::sha256_file`] consults in this process.
    pub fn install(cache: Arc<StatCache>) {
        if let Ok(mut g) = INSTALLED.write() {
            *g = Some(cache);
        }
    }

    /// Load the stat cache kept in `dir` and install it.
    pub fn install_at(dir: &Path) -> Arc<StatCache> {
        let c = Arc::new(StatCache::load(dir));
        StatCache::install(c.clone());
        c
    }

    /// Save, saying why not in the log only: a digest is then taken again next time.
    pub fn save_quietly(&self) {
        if let Err(e) = self.save() {
            tracing::debug!("stat cache {} not saved: {e}", self.path.display());
        }
    }

    /// The installed cache, if any.
    pub fn installed() -> Option<Arc<StatCache>> {
        INSTALLED.read().ok().and_then(|g| g.clone())
    }

    pub fn counts(&self) -> StatCounts {
        self.counts.lock().map(|c| c.0).unwrap_or_default()
    }

    fn count(&self, hit: bool) {
        if let Ok(mut c) = self.counts.lock() {
            if hit {
                c.0.hits += 1;
            } else {
                c.0.hashed += 1;
                c.1 = true;
            }
        }
    }

    /// The digest of an open regular file whose metadata is `m`: from the cache when
    /// its stat matches a trusted entry, else `hash()`, recorded if the file did not
    /// change while it was read (`after` is its metadata then).
    pub fn digest(
        &self,
        m: &std::fs::Metadata,
        hash: impl FnOnce() -> io::Result<(Sha256Digest, std::fs::Metadata)>,
    ) -> io::Result<Sha256Digest> {
        let key = key_of(m);
        let now = now_ns();
        if let Ok(mut map) = self.map.lock() {
            if let Some(k) = map.get_mut(&key) {
                if key.ctime_ns < k.recorded_ns - RACY_NS {
                    k.seen = now / 1_000_000_000;
                    let d = k.sha256;
                    drop(map);
                    self.count(true);
                    return Ok(d);
                }
            }
        }
        let (d, after) = hash()?;
        self.count(false);
        if key_of(&after) == key {
            if let Ok(mut map) = self.map.lock() {
                map.insert(
                    key,
                    Known {
                        sha256: d,
                        recorded_ns: now,
                        seen: now / 1_000_000_000,
                    },
                );
            }
        }
        Ok(d)
    }

    /// Write the cache back if anything was hashed (atomically: a temporary file
    /// renamed over the old one).
    pub fn save(&self) -> io::Result<()> {
        let changed = self.counts.lock().map(|c| c.1).unwrap_or(false);
        if !changed {
            return Ok(());
        }
        let oldest = now_ns() / 1_000_000_000 - KEEP_SECS;
        let entries: Vec<(Key, Known)> = match self.map.lock() {
            Ok(m) => m
                .iter()
                .filter(|(_, k)| k.seen >= oldest)
                .map(|(a, b)| (*a, *b))
                .collect(),
            Err(_) => return Ok(()),
        };
        let bytes = serde_json::to_vec(&OnDisk { entries }).map_err(io::Error::other)?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        if !dir.exists() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        crate::fsx::check_private(dir)?;
        let d = crate::fsx::Dir::open(dir)?;
        d.write_atomic(&d, FILE, &bytes, 0o600)?;
        if let Ok(mut c) = self.counts.lock() {
            c.1 = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn digest(c: &StatCache, p: &Path) -> Sha256Digest {
        let m = std::fs::metadata(p).unwrap();
        c.digest(&m, || {
            Ok((
                crate::digest::sha256_bytes(&std::fs::read(p).unwrap()),
                std::fs::metadata(p).unwrap(),
            ))
        })
        .unwrap()
    }

    /// Age the entries instead of the file: ctime cannot be set back.
    fn backdate(c: &StatCache) {
        for k in c.map.lock().unwrap().values_mut() {
            k.recorded_ns += 10 * RACY_NS;
        }
    }

    #[test]
    fn a_changed_file_is_always_caught() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("w.bin");
        std::fs::write(&p, b"aaaa").unwrap();
        let c = StatCache::load(t.path());
        let a = digest(&c, &p);
        assert_eq!(c.counts(), StatCounts { hits: 0, hashed: 1 });
        // Hashed right after it was written: racy, hashed again.
        digest(&c, &p);
        assert_eq!(c.counts().hashed, 2);
        backdate(&c);
        assert_eq!(digest(&c, &p), a);
        assert_eq!(c.counts().hits, 1);
        // Same size, mtime set back to what it was: ctime still moves.
        let before = std::fs::metadata(&p).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .write_all(b"bbbb")
            .unwrap();
        let mt = filetime_of(&before);
        set_mtime(&p, mt);
        assert_eq!(std::fs::metadata(&p).unwrap().mtime(), before.mtime());
        let b = digest(&c, &p);
        assert_ne!(a, b, "a rewritten file is rehashed");
        // Saved and loaded again: the entries survive.
        backdate(&c);
        c.save().unwrap();
        let again = StatCache::load(t.path());
        assert_eq!(digest(&again, &p), b);
        assert_eq!(again.counts().hits, 1);
    }

    fn filetime_of(m: &std::fs::Metadata) -> libc::timespec {
        libc::timespec {
            tv_sec: m.mtime() as libc::time_t,
            tv_nsec: m.mtime_nsec() as _,
        }
    }

    fn set_mtime(p: &Path, t: libc::timespec) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        let times = [t, t];
        // SAFETY: a valid path and two timespecs.
        let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) };
        assert_eq!(r, 0);
    }
}
