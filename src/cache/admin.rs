//! `orchestrate cache list|du|gc`: what the cache holds, how much, and collecting
//! it by age and size (least recently used first). Collection takes the cache's
//! `gc.lock` exclusively; runs storing entries hold it shared, so a blob is never
//! collected between being written and its entry being renamed into place.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::store::{Cache, Entry};

/// One entry, as `list` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Listed {
    pub key: String,
    pub plan: String,
    pub step: String,
    pub run_id: String,
    pub created: String,
    /// Seconds since it was last reused (or stored).
    pub idle_s: u64,
    /// Bytes of its outputs (blobs may be shared with other entries).
    pub bytes: u64,
    #[serde(skip)]
    dir: PathBuf,
}

/// What `du` says.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Usage {
    pub entries: u64,
    pub blobs: u64,
    /// Bytes the blobs take (each stored once).
    pub bytes: u64,
}

/// What `gc` removed.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Collected {
    pub entries: u64,
    pub blobs: u64,
    pub bytes: u64,
}

fn read_dirs(p: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(p)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

fn entry_of(dir: &Path) -> Option<Entry> {
    let bytes =
        crate::digest::read_regular(&dir.join("entry.json"), crate::digest::Follow::No, 64 << 20)
            .ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn idle(dir: &Path) -> u64 {
    let t = std::fs::metadata(dir.join("used"))
        .or_else(|_| std::fs::metadata(dir.join("entry.json")))
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    SystemTime::now()
        .duration_since(t)
        .unwrap_or_default()
        .as_secs()
}

/// Every entry, least recently used first.
pub fn list(cache: &Cache) -> Vec<Listed> {
    let mut out: Vec<Listed> = read_dirs(&cache.root().join("entries"))
        .into_iter()
        .flat_map(|hh| read_dirs(&hh))
        .filter_map(|dir| {
            let e = entry_of(&dir)?;
            Some(Listed {
                bytes: e.outputs.iter().map(|o| o.bytes).sum(),
                idle_s: idle(&dir),
                key: e.key,
                plan: e.plan,
                step: e.step,
                run_id: e.run_id,
                created: e.created,
                dir,
            })
        })
        .collect();
    out.sort_by(|a, b| b.idle_s.cmp(&a.idle_s).then(a.key.cmp(&b.key)));
    out
}

fn blobs(cache: &Cache) -> BTreeMap<String, (PathBuf, u64)> {
    read_dirs(&cache.root().join("blobs/sha256"))
        .into_iter()
        .flat_map(|hh| read_dirs(&hh))
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            let size = std::fs::symlink_metadata(&p).ok()?.len();
            Some((name, (p, size)))
        })
        .collect()
}

/// Entries, blobs and the bytes they take.
pub fn usage(cache: &Cache) -> Usage {
    let b = blobs(cache);
    Usage {
        entries: list(cache).len() as u64,
        blobs: b.len() as u64,
        bytes: b.values().map(|(_, s)| s).sum(),
    }
}

fn referenced(entries: &[Listed]) -> BTreeSet<String> {
    entries
        .iter()
        .filter_map(|l| entry_of(&l.dir))
        .flat_map(|e| {
            e.outputs
                .into_iter()
                .flat_map(|o| o.files.into_iter().map(|f| f.sha256))
        })
        .collect()
}

/// Remove entries idle longer than `older_than`, then the least recently used until
/// the blobs they keep fit in `max_bytes`, then every blob no entry keeps.
pub fn gc(
    cache: &Cache,
    max_bytes: Option<u64>,
    older_than: Option<Duration>,
) -> std::io::Result<Collected> {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(cache.root().join("gc.lock"))?;
    let _lock = loop {
        match nix::fcntl::Flock::lock(lock.try_clone()?, nix::fcntl::FlockArg::LockExclusive) {
            Ok(l) => break l,
            Err((_, nix::errno::Errno::EINTR)) => continue,
            Err((_, e)) => return Err(e.into()),
        }
    };
    let mut done = Collected::default();
    let mut keep = list(cache);
    let remove = |l: &Listed, done: &mut Collected| {
        if std::fs::remove_dir_all(&l.dir).is_ok() {
            done.entries += 1;
        }
    };
    if let Some(age) = older_than {
        let (old, young): (Vec<Listed>, Vec<Listed>) =
            keep.into_iter().partition(|l| l.idle_s > age.as_secs());
        old.iter().for_each(|l| remove(l, &mut done));
        keep = young;
    }
    let sizes = blobs(cache);
    if let Some(max) = max_bytes {
        // Least recently used first (`list` sorts so).
        while !keep.is_empty() {
            let used: u64 = referenced(&keep)
                .iter()
                .filter_map(|h| sizes.get(h).map(|(_, s)| *s))
                .sum();
            if used <= max {
                break;
            }
            let l = keep.remove(0);
            remove(&l, &mut done);
        }
    }
    let live = referenced(&keep);
    for (hex, (path, size)) in sizes {
        if !live.contains(&hex) && std::fs::remove_file(&path).is_ok() {
            done.blobs += 1;
            done.bytes += size;
        }
    }
    Ok(done)
}
