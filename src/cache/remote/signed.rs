//! A remote entry and the trust policy. What is shared is a DSSE envelope (ed25519,
//! the keys the records are signed with) around the canonical JSON of the entry,
//! the pre-image its key was made from, and who wrote it. A reader uses an entry
//! only when a key it trusts (`[cache] trust`) signed it; anything else is a miss
//! that says why.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cache::{Entry, Preimage};
use crate::evidence::dsse::{self, Envelope, SigningKey, VerifyingKey};

/// The payload type of a signed cache entry.
pub const PAYLOAD_TYPE: &str = "application/vnd.orchestrate.cache-entry.v1+json";
/// The schema the payload names.
pub const SCHEMA: &str = "orchestrate/cache-entry/v1";
/// The largest signed entry read.
pub const MAX_ENTRY: u64 = 64 << 20;

/// Who stored an entry: said in every hit and in every untrusted miss.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Writer {
    pub user: String,
    pub host: String,
    pub run_id: String,
}

impl Writer {
    /// `user@host`, with anything unprintable in what a writer claims taken out.
    pub fn who(&self) -> String {
        format!("{}@{}", printable(&self.user), printable(&self.host))
    }
}

/// What an entry says, fit for a terminal line: no control characters, at most 64.
pub(crate) fn printable(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(64).collect()
}

/// The payload of a signed entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shared {
    pub schema: String,
    pub writer: Writer,
    /// The entry as the writer stored it, without what only its own disk knows
    /// (blob inodes and times).
    pub entry: Entry,
    pub preimage: Preimage,
}

impl Shared {
    /// The entry to share: `entry` without the stamps of its writer's blobs.
    pub fn new(writer: Writer, entry: &Entry, preimage: &Preimage) -> Shared {
        let mut entry = entry.clone();
        entry.pulled_from = None;
        for f in entry.outputs.iter_mut().flat_map(|o| o.files.iter_mut()) {
            f.blob_mtime_ns = 0;
            f.blob_ctime_ns = 0;
            f.blob_ino = 0;
        }
        Shared {
            schema: SCHEMA.into(),
            writer,
            entry,
            preimage: preimage.clone(),
        }
    }

    /// The signed envelope's bytes.
    pub fn sign(&self, key: &SigningKey) -> Result<Vec<u8>, String> {
        let payload = crate::evidence::jcs::to_canonical(self).map_err(|e| e.to_string())?;
        let env = dsse::sign_typed(PAYLOAD_TYPE, &payload, key);
        serde_json::to_vec(&env).map_err(|e| e.to_string())
    }
}

/// The keys whose entries a reader reuses, each with the name it is said by (its
/// file's stem: `keys/ci.pub` is "ci").
#[derive(Debug, Clone, Default)]
pub struct Trust {
    keys: Vec<(String, VerifyingKey)>,
}

/// A trusted entry: what it holds and the name of the key that signed it.
#[derive(Debug, Clone)]
pub struct Vouched {
    pub shared: Shared,
    pub signer: String,
}

impl Trust {
    /// The keys in `paths` (SPKI PEM public keys, or private keys whose public half
    /// is taken).
    pub fn load(paths: &[PathBuf]) -> Result<Trust, dsse::KeyError> {
        let mut keys = Vec::new();
        for p in paths {
            keys.push((key_name(p), dsse::load_verifying_key(p)?));
        }
        Ok(Trust { keys })
    }

    /// Trust `key` too, as `name` (the signing key of this run: its own entries).
    pub fn with(mut self, name: &str, key: VerifyingKey) -> Trust {
        if !self.keys.iter().any(|(_, k)| *k == key) {
            self.keys.push((name.to_string(), key));
        }
        self
    }

    /// The ids of the trusted keys (where their entries are stored), with names.
    pub fn ids(&self) -> Vec<(String, String)> {
        self.keys
            .iter()
            .map(|(n, k)| (dsse::key_id(k), n.clone()))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The entry in `bytes` if the key `id` is trusted and signed it, for `key`.
    pub fn check(&self, id: &str, bytes: &[u8], key: &str) -> Result<Vouched, String> {
        let env: Envelope =
            serde_json::from_slice(bytes).map_err(|_| "its entry is not a signed envelope")?;
        let Some((name, vk)) = self.keys.iter().find(|(_, k)| dsse::key_id(k) == id) else {
            return Err(untrusted(&env));
        };
        let payload = dsse::verify_typed(&env, PAYLOAD_TYPE, vk)
            .map_err(|_| format!("its entry does not verify with key `{name}`"))?;
        let shared: Shared = serde_json::from_slice(&payload)
            .map_err(|_| format!("its entry signed by `{name}` cannot be read"))?;
        if shared.schema != SCHEMA {
            return Err(format!("its entry is of schema {:?}", shared.schema));
        }
        if shared.entry.key != key || shared.preimage.key() != key {
            return Err(format!(
                "its entry signed by `{name}` is for another key ({})",
                printable(&shared.entry.key)
            ));
        }
        Ok(Vouched {
            shared,
            signer: name.clone(),
        })
    }
}

/// Why an entry signed by no trusted key is not used, naming who it says wrote it
/// (unverified: it is only said).
pub fn untrusted(env: &Envelope) -> String {
    let claimed = <base64ct::Base64 as base64ct::Encoding>::decode_vec(&env.payload)
        .ok()
        .and_then(|p: Vec<u8>| serde_json::from_slice::<Shared>(&p).ok())
        .map(|s| s.writer.who());
    let by = claimed.unwrap_or_else(|| "someone".into());
    match env.signatures.first() {
        None => format!("entry unsigned, stored by {by}: not trusted"),
        Some(s) => format!(
            "entry signed by {by} (key {}), not trusted",
            printable(&s.keyid).chars().take(12).collect::<String>()
        ),
    }
}

fn key_name(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}
