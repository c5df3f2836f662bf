//! `cache gc --remote`: what a shared store no longer needs. Entries go by age
//! (when the store says they were written, not what they claim); then blobs that
//! no entry left names, but only those written longer ago than a grace time (an
//! hour by default), because a push writes its blobs before its entry and one may
//! be under way now.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use super::signed::{Shared, MAX_ENTRY};
use super::{Held, Remote, RemoteError};

/// By default, a blob younger than this is never removed: its entry may be on the way.
pub const GRACE: Duration = Duration::from_secs(3600);

/// What a collection removed (or, dry, would remove) and kept.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Collected {
    pub entries_removed: usize,
    pub blobs_removed: usize,
    pub bytes_freed: u64,
    pub entries_kept: usize,
    pub blobs_kept: usize,
    /// Blobs no entry names, kept because they were written within the grace time.
    pub blobs_young: usize,
}

/// Collect `remote`: entries written before `now - older_than` (none without
/// it), then blobs no remaining entry names, written before `now - grace`. With
/// `dry`, nothing is removed.
pub fn gc(
    remote: &dyn Remote,
    older_than: Option<Duration>,
    grace: Duration,
    now: SystemTime,
    dry: bool,
) -> Result<Collected, RemoteError> {
    let before = |age: Duration| now.checked_sub(age).unwrap_or(SystemTime::UNIX_EPOCH);
    let stored = remote.stored()?;
    let mut c = Collected::default();
    let mut named = BTreeSet::new();
    for s in &stored {
        let Held::Entry { key, signer } = &s.held else {
            continue;
        };
        if older_than.is_some_and(|age| s.modified < before(age)) {
            if !dry {
                remote.remove_entry(key, signer)?;
            }
            c.entries_removed += 1;
            c.bytes_freed += s.size;
            continue;
        }
        c.entries_kept += 1;
        named.extend(blobs_named(remote, key, signer));
    }
    for s in &stored {
        let Held::Blob { hex } = &s.held else {
            continue;
        };
        if named.contains(hex) {
            c.blobs_kept += 1;
        } else if s.modified >= before(grace) {
            c.blobs_young += 1;
        } else {
            if !dry {
                remote.remove_blob(hex)?;
            }
            c.blobs_removed += 1;
            c.bytes_freed += s.size;
        }
    }
    Ok(c)
}

/// The blobs an entry names, read without checking its signature: whoever's it
/// is, what it names stays while it does. An entry that cannot be read names none.
fn blobs_named(remote: &dyn Remote, key: &str, signer: &str) -> Vec<String> {
    let Ok(Some(bytes)) = remote.entry(key, signer, MAX_ENTRY) else {
        return Vec::new();
    };
    let Ok(env) = serde_json::from_slice::<crate::evidence::dsse::Envelope>(&bytes) else {
        return Vec::new();
    };
    let payload = <base64ct::Base64 as base64ct::Encoding>::decode_vec(&env.payload);
    let Some(shared) = payload
        .ok()
        .and_then(|p| serde_json::from_slice::<Shared>(&p).ok())
    else {
        return Vec::new();
    };
    shared
        .entry
        .outputs
        .iter()
        .flat_map(|o| o.files.iter())
        .filter(|f| f.link.is_none())
        .map(|f| f.sha256.clone())
        .collect()
}
