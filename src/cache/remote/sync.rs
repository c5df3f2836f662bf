//! Pull (a local miss asks the remote) and push (a stored step goes to the remote).

use std::collections::BTreeSet;

use super::signed::{self, Shared, Trust, Vouched, Writer, MAX_ENTRY};
use super::{Remote, RemoteError};
use crate::cache::{Cache, Entry, ImportError, Preimage};
use crate::evidence::dsse::{self, SigningKey};

/// What a pull found.
#[derive(Debug, Clone)]
pub enum Pulled {
    /// Taken in: the local store now holds `entry`, signed by the key named
    /// `signer` and stored by `writer`.
    Hit {
        entry: Box<Entry>,
        signer: String,
        writer: Writer,
    },
    /// Nothing usable, and why ("no entry in …", "entry signed by alice@h2, not
    /// trusted", "its copy of `${work}/m` does not match its digest").
    Miss(String),
}

/// Ask `remote` for `key`; a trusted entry is taken into `cache` (every blob hashed
/// on the way in). A blob that does not match its digest is removed from the
/// remote, so the step that runs instead can push it again.
pub fn pull(
    cache: &Cache,
    remote: &dyn Remote,
    trust: &Trust,
    key: &str,
    expected: &[String],
) -> Pulled {
    let url = remote.url();
    let signers = match remote.signers(key) {
        Ok(s) => s,
        Err(e) => return Pulled::Miss(format!("{url} could not be read: {e}")),
    };
    if signers.is_empty() {
        return Pulled::Miss(format!("no entry in {url}"));
    }
    let mut why = Vec::new();
    for (id, name) in trust.ids() {
        if !signers.contains(&id) {
            continue;
        }
        match trusted(remote, trust, key, &id) {
            Ok(v) => match take(cache, remote, &v, expected) {
                Ok(entry) => {
                    return Pulled::Hit {
                        entry: Box::new(entry),
                        signer: v.signer,
                        writer: v.shared.writer,
                    }
                }
                Err(w) => why.push(format!("entry signed by `{name}`: {w}")),
            },
            Err(w) => why.push(w),
        }
    }
    if why.is_empty() {
        why.push(untrusted_only(remote, trust, key, &signers));
    }
    Pulled::Miss(format!("{} in {url}", why.join("; ")))
}

/// Only keys `trust` does not hold signed entries for `key`: say whose.
fn untrusted_only(remote: &dyn Remote, trust: &Trust, key: &str, signers: &[String]) -> String {
    let first = signers
        .first()
        .and_then(|id| remote.entry(key, id, MAX_ENTRY).ok().flatten());
    let said = first
        .and_then(|b| serde_json::from_slice(&b).ok())
        .map(|env| signed::untrusted(&env))
        .unwrap_or_else(|| "an entry no trusted key signed".into());
    if trust.is_empty() {
        format!("{said} (no key is trusted: name one in [cache] trust)")
    } else {
        said
    }
}

/// What [`pull`] would take for `key`, read and verified but not taken (no blob is
/// read): `orchestrate why`.
pub fn peek(
    remote: &dyn Remote,
    trust: &Trust,
    key: &str,
    expected: &[String],
) -> Result<Vouched, String> {
    let url = remote.url();
    let signers = remote
        .signers(key)
        .map_err(|e| format!("{url} could not be read: {e}"))?;
    if signers.is_empty() {
        return Err(format!("no entry in {url}"));
    }
    let mut why = Vec::new();
    for (id, _) in trust
        .ids()
        .into_iter()
        .filter(|(id, _)| signers.contains(id))
    {
        match trusted(remote, trust, key, &id).and_then(|v| {
            crate::cache::store::check_entry(&v.shared.entry, key, expected).map(|()| v)
        }) {
            Ok(v) => return Ok(v),
            Err(w) => why.push(w),
        }
    }
    if why.is_empty() {
        why.push(untrusted_only(remote, trust, key, &signers));
    }
    Err(format!("{} in {url}", why.join("; ")))
}

fn trusted(remote: &dyn Remote, trust: &Trust, key: &str, id: &str) -> Result<Vouched, String> {
    let bytes = remote
        .entry(key, id, MAX_ENTRY)
        .map_err(|e| format!("its entry could not be read: {e}"))?
        .ok_or("its entry is gone")?;
    trust.check(id, &bytes, key)
}

fn take(
    cache: &Cache,
    remote: &dyn Remote,
    v: &Vouched,
    expected: &[String],
) -> Result<Entry, String> {
    let mut fetch = |hex: &str, size: u64, dst: &mut dyn std::io::Write| {
        remote.get_blob(hex, size, dst).map_err(|e| e.to_string())
    };
    match cache.import(
        &v.shared.entry,
        &v.shared.preimage,
        expected,
        remote.url(),
        &mut fetch,
    ) {
        Ok(e) => Ok(e),
        Err(ImportError::Blob { hex, at, why }) => {
            // Only bytes that are not what their digest says are removed: a
            // failure to fetch or to write here says nothing of the blob.
            let removed = match remote.remove_blob(&hex) {
                Ok(()) => "removed from the remote",
                Err(_) => "left in the remote (it could not be removed)",
            };
            Err(format!("its copy of `{at}` {why}: refused, {removed}"))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// What a push did.
#[derive(Debug, Clone, PartialEq)]
pub struct Pushed {
    /// Blobs sent (the others were there) and their bytes.
    pub blobs: usize,
    pub bytes: u64,
    /// Whether this push wrote the signer's entry (else one was there first).
    pub wrote: bool,
    /// Whether what was there in the signer's place did not verify with its key
    /// and was replaced.
    pub replaced: bool,
    /// Where entries other trusted writers stored for the key differ from this one
    /// (nondeterminism), one line each.
    pub differs: Vec<String>,
}

/// Send the local `entry` (and its blobs, those the remote lacks) to `remote`,
/// signed with `key`: blobs first, the entry last and only if this key has none
/// there. Entries of the same key by trusted writers are compared.
pub fn push(
    cache: &Cache,
    remote: &dyn Remote,
    trust: &Trust,
    key: &SigningKey,
    writer: Writer,
    entry: &Entry,
    pre: &Preimage,
) -> Result<Pushed, RemoteError> {
    if let Some(from) = &entry.pulled_from {
        return Err(RemoteError::Refused(format!(
            "it was taken from {}: another key vouches for it",
            signed::printable(from)
        )));
    }
    let mut sent = BTreeSet::new();
    let mut bytes = 0;
    for f in entry.outputs.iter().flat_map(|o| o.files.iter()) {
        if f.link.is_some() || sent.contains(&f.sha256) || remote.has_blob(&f.sha256, f.size)? {
            continue;
        }
        let (mut file, size) = cache
            .open_blob(&f.sha256)
            .map_err(|e| RemoteError::io(format!("local blob {}", f.sha256), e))?;
        remote.put_blob(&f.sha256, &mut file, size)?;
        bytes += size;
        sent.insert(f.sha256.clone());
    }
    let shared = Shared::new(writer, entry, pre);
    let signed = shared.sign(key).map_err(RemoteError::Refused)?;
    let id = dsse::key_id(&key.verifying_key());
    let mut wrote = remote.put_entry_if_absent(&entry.key, &id, &signed)?;
    let mut replaced = false;
    if !wrote {
        // Whoever can write the folder could have put anything in this key's
        // place: what does not verify with the key is replaced, not kept.
        let own = Trust::default().with("own", key.verifying_key());
        let there = remote.entry(&entry.key, &id, MAX_ENTRY).ok().flatten();
        if there.is_none_or(|b| own.check(&id, &b, &entry.key).is_err()) {
            remote.replace_entry(&entry.key, &id, &signed)?;
            (wrote, replaced) = (true, true);
        }
    }
    let trust = trust.clone().with("this run's key", key.verifying_key());
    let mut differs = Vec::new();
    for (other, _) in trust.ids() {
        if other == id && (wrote || replaced) {
            continue;
        }
        if let Ok(v) = trusted(remote, &trust, &entry.key, &other) {
            differs.extend(differences(entry, &v));
        }
    }
    Ok(Pushed {
        blobs: sent.len(),
        bytes,
        wrote,
        replaced,
        differs,
    })
}

/// Where `v`'s outputs differ from `entry`'s, output by output (matched by path).
fn differences(entry: &Entry, v: &Vouched) -> Vec<String> {
    let theirs: std::collections::BTreeMap<&str, &str> = v
        .shared
        .entry
        .outputs
        .iter()
        .map(|o| (o.path.as_str(), o.sha256.as_str()))
        .collect();
    let run = signed::printable(&v.shared.writer.run_id);
    entry
        .outputs
        .iter()
        .filter_map(|a| {
            let b = theirs.get(a.path.as_str())?;
            (a.sha256 != *b).then(|| {
                format!(
                    "`{}`: sha256 {} here, {} in the entry signed by `{}` (stored by {}, run {run})",
                    a.path,
                    short(&a.sha256),
                    short(b),
                    v.signer,
                    v.shared.writer.who(),
                )
            })
        })
        .collect()
}

fn short(hex: &str) -> &str {
    hex.get(..12).unwrap_or(hex)
}
