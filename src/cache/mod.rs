//! Reuse of expensive steps: a content-keyed cache of step outputs (`cache = true`),
//! with the reason for every rerun. `key.rs` makes and explains keys; `store.rs`
//! keeps entries and blobs on disk and restores them; `admin.rs` lists, measures and
//! collects them. The scheduler asks [`Reuse`] what to do with a cacheable step.

pub mod admin;
pub mod import;
pub mod key;
pub mod remote;
pub mod store;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use import::ImportError;
pub use key::{explain, keyed_digest, secret_marker, Preimage, TreeId, KEY_SCHEMA};
pub use store::{Cache, Entry, Lookup, RestoreMode, Target};

/// What a run does with its cache.
#[derive(Debug, Clone)]
pub struct Reuse {
    pub cache: Cache,
    /// `--no-cache`: nothing is looked up (results are still stored).
    pub no_cache: bool,
    /// `--refresh STEP`: these steps run whatever the cache holds (ids or the step
    /// they were expanded from).
    pub refresh: Vec<String>,
    /// Tool pins and their observed versions (part of every key).
    pub tools: BTreeMap<String, String>,
    /// The plan's name (which entry a step used last is kept per plan and step).
    pub plan: String,
    /// Source trees steps may read (revisions' checkouts, git pins' repositories):
    /// a step that runs in one or names a path in one has its identity in its key.
    pub trees: Vec<TreeId>,
    /// Keys the digests that stand for secret values in pre-images.
    pub secret_key: [u8; 32],
    /// The store a team shares, asked after a local miss and sent what ran.
    pub remote: Option<Arc<RemoteTier>>,
}

/// The remote tier of a run's cache.
#[derive(Debug)]
pub struct RemoteTier {
    pub remote: Box<dyn remote::Remote>,
    /// Whose entries are reused.
    pub trust: remote::Trust,
    /// Signs what the run pushes; without one nothing is pushed (an unsigned entry
    /// is no one's to trust).
    pub sign: Option<crate::evidence::dsse::SigningKey>,
    /// Who the run is, as its entries say: user and host.
    pub user: String,
    pub host: String,
}

impl Reuse {
    /// Whether `step` (from `template`) must run whatever the cache holds.
    pub fn refreshed(&self, step: &str, template: Option<&str>) -> bool {
        self.refresh
            .iter()
            .any(|r| r == step || Some(r.as_str()) == template)
    }
}
