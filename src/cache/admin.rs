//! `orchestrate cache list|du|gc`: what the cache holds, how much, and collecting
//! it by age and size (least recently used first).
//!
//! Collection reads the store without a lock, decides, then takes the cache's
//! `gc.lock` exclusively only to remove: entries stored meanwhile (runs storing hold
//! the lock shared) are read then and keep their blobs, so a blob is never collected
//! between being written and its entry being renamed into place. Nothing in the
//! store is followed: a link where a folder or blob should be is removed as the
//! link it is. Cost: one read of each entry and one pass over the blobs, then a
//! sort: O(n log n) in entries.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use nix::fcntl::FlockArg;

use super::store::{walk::Found, Cache};

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
}

/// `list` as a table for the terminal.
pub fn render_list(entries: &[Listed], root: &std::path::Path) -> String {
    use crate::units::{bytes, human_duration};
    let mut out = format!(
        "{:<14} {:<24} {:<26} {:>10} {:>8}\n",
        "key", "step", "run", "size", "unused"
    );
    for e in entries {
        out.push_str(&format!(
            "{:<14} {:<24} {:<26} {:>10} {:>8}\n",
            e.key.get(..12).unwrap_or(&e.key),
            format!("{}: {}", e.plan, e.step),
            e.run_id,
            bytes(e.bytes as f64),
            human_duration(Duration::from_secs(e.idle_s))
        ));
    }
    out.push_str(&format!(
        "{} entries in {}\n",
        entries.len(),
        root.display()
    ));
    out
}

/// What `du` says.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Usage {
    pub entries: u64,
    pub blobs: u64,
    /// Bytes the blobs take (each stored once).
    pub bytes: u64,
    /// Bytes left in `tmp/` (a write in progress, or one a killed run left).
    pub tmp_bytes: u64,
}

/// What `gc` removed.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Collected {
    pub entries: u64,
    pub blobs: u64,
    pub bytes: u64,
    /// Bytes of stale temporary files removed.
    pub tmp_bytes: u64,
    /// How long the store was held alone (runs storing entries waited this long).
    pub locked_ms: f64,
}

fn listed(f: &Found) -> Option<Listed> {
    let e = f.entry.as_ref()?;
    Some(Listed {
        bytes: e.outputs.iter().map(|o| o.bytes).sum(),
        idle_s: f.idle_s,
        key: e.key.clone(),
        plan: e.plan.clone(),
        step: e.step.clone(),
        run_id: e.run_id.clone(),
        created: e.created.clone(),
    })
}

/// Least recently used first, then by key.
fn lru(found: &mut [Found]) {
    found.sort_by(|a, b| b.idle_s.cmp(&a.idle_s).then_with(|| a.key.cmp(&b.key)));
}

/// Every entry, least recently used first.
pub fn list(cache: &Cache) -> Vec<Listed> {
    let mut found = cache.with_open(|s| s.entries(true)).unwrap_or_default();
    lru(&mut found);
    found.iter().filter_map(listed).collect()
}

/// Every entry that can be used as it stands (its blobs checked), with its
/// pre-image: what `cache push` sends.
pub fn usable(cache: &Cache) -> Vec<(super::Entry, super::Preimage)> {
    let found = cache.with_open(|s| s.entries(true)).unwrap_or_default();
    found
        .iter()
        .filter_map(|f| f.entry.as_ref())
        .filter_map(|e| {
            let paths: Vec<String> = e.outputs.iter().map(|o| o.path.clone()).collect();
            match cache.lookup(&e.key, &paths) {
                super::Lookup::Hit(e) => Some((cache.preimage(&e.key)?, e)),
                _ => None,
            }
        })
        .map(|(p, e)| (e, p))
        .collect()
}

/// Entries, blobs and the bytes they take.
pub fn usage(cache: &Cache) -> Usage {
    cache
        .with_open(|s| {
            let blobs = s.blobs(false)?;
            let (_, tmp_bytes) = s.tmp(false)?;
            Ok(Usage {
                entries: s
                    .entries(true)?
                    .iter()
                    .filter(|f| f.entry.is_some())
                    .count() as u64,
                blobs: blobs.len() as u64,
                bytes: blobs.iter().map(|b| b.2).sum(),
                tmp_bytes,
            })
        })
        .unwrap_or_default()
}

fn blobs_of(f: &Found) -> impl Iterator<Item = &str> {
    f.entry
        .iter()
        .flat_map(|e| e.outputs.iter())
        .flat_map(|o| o.files.iter())
        .filter(|f| f.link.is_none())
        .map(|f| f.sha256.as_str())
}

/// Remove entries idle longer than `older_than`, then the least recently used until
/// the blobs they keep fit in `max_bytes`, then every blob no entry keeps, and
/// temporary files killed writers left.
pub fn gc(
    cache: &Cache,
    max_bytes: Option<u64>,
    older_than: Option<Duration>,
) -> std::io::Result<Collected> {
    cache.with_open(|s| {
        // Decide without the lock.
        let mut found = s.entries(true)?;
        lru(&mut found);
        let sizes: HashMap<String, (String, u64)> = s
            .blobs(false)?
            .into_iter()
            .map(|(hh, hex, size)| (hex, (hh, size)))
            .collect();
        let mut refs: HashMap<&str, u32> = HashMap::new();
        for f in &found {
            let mut mine: HashSet<&str> = HashSet::new();
            for b in blobs_of(f) {
                if mine.insert(b) {
                    *refs.entry(b).or_default() += 1;
                }
            }
        }
        let mut kept: u64 = refs
            .keys()
            .filter_map(|h| sizes.get(*h).map(|(_, s)| *s))
            .sum();
        let mut doomed: Vec<usize> = Vec::new();
        for (i, f) in found.iter().enumerate() {
            let old = older_than.is_some_and(|a| f.idle_s > a.as_secs());
            let over = max_bytes.is_some_and(|m| kept > m);
            if !(old || over || f.entry.is_none()) {
                continue;
            }
            doomed.push(i);
            let mut mine: HashSet<&str> = HashSet::new();
            for b in blobs_of(f) {
                if !mine.insert(b) {
                    continue;
                }
                if let Some(n) = refs.get_mut(b) {
                    *n -= 1;
                    if *n == 0 {
                        kept -= sizes.get(b).map_or(0, |(_, s)| *s);
                    }
                }
            }
        }
        // Remove with the store held alone (no store is writing now), briefly: each
        // entry is one rename into a trash folder, its files go after the lock.
        let (trash, trash_name) = s.trash()?;
        let mut done = Collected::default();
        let lock = s.lock_gc(FlockArg::LockExclusive)?;
        let held = std::time::Instant::now();
        let dropped: HashSet<&str> = doomed.iter().map(|&i| found[i].key.as_str()).collect();
        for &i in &doomed {
            let f = &found[i];
            if s.discard_entry(&f.hh, &f.key, &trash)? && f.entry.is_some() {
                done.entries += 1;
            }
        }
        // What every entry left keeps, those stored since the scan included.
        let known: HashSet<&str> = found.iter().map(|f| f.key.as_str()).collect();
        let mut live: HashSet<String> = found
            .iter()
            .filter(|f| !dropped.contains(f.key.as_str()))
            .flat_map(|f| blobs_of(f).map(String::from))
            .collect();
        for (hh, key) in s.entry_names()? {
            if !known.contains(key.as_str()) {
                if let Some(e) = s.read_entry(&hh, &key) {
                    let again = Found {
                        hh,
                        key,
                        entry: Some(e),
                        idle_s: 0,
                    };
                    live.extend(blobs_of(&again).map(String::from));
                }
            }
        }
        // Blobs the scan saw that nothing keeps (one stored since is not touched).
        for (hex, (hh, size)) in &sizes {
            if !live.contains(hex) && s.remove_blob(hh, hex).is_ok() {
                done.blobs += 1;
                done.bytes += size;
            }
        }
        let (removed, _) = s.tmp(true)?;
        done.tmp_bytes = removed;
        drop(lock);
        done.locked_ms = held.elapsed().as_secs_f64() * 1000.0;
        s.empty_trash(&trash_name)?;
        // Junk in the blob folders (links, folders where a blob goes) is removed as
        // what it is, never followed.
        s.blobs(true)?;
        Ok(done)
    })
}
