//! The cache's second tier: a store a team shares. Local first, remote second: a
//! miss in the user's own cache asks the remote, and what comes back is checked as
//! strictly as anything read from disk (a signed entry from a key the plan trusts,
//! every blob hashed again on the way in) before it becomes a local entry that the
//! usual restore puts in place. A step that ran and was stored locally is pushed:
//! blobs first, the signed entry last and only where none is (the first writer
//! wins; a second writer's different result is nondeterminism, never an overwrite).
//!
//! `folder.rs` is a shared folder (NFS or any shared filesystem), `s3/` an
//! S3-compatible object store; `signed.rs` the
//! signed entry and the trust policy; `sync.rs` pull and push.

pub mod folder;
pub mod gc;
pub mod listing;
pub mod progress;
pub mod s3;
pub mod signed;
pub mod sync;

use std::fs::File;
use std::io::Write;

pub use folder::SharedFolder;
pub use listing::{listing, RemoteListed};
pub use signed::{Trust, Writer};
pub use sync::{peek, pull, push, Pulled, Pushed};

/// Why the remote store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// Reading or writing the store failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// What the store holds is not what it must be (a link, a folder where a
    /// file goes, a file too large).
    #[error("{0}")]
    Refused(String),
    /// The location is not one this build can use.
    #[error("{0}")]
    Location(String),
}

impl RemoteError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> RemoteError {
        RemoteError::Io {
            what: what.into(),
            source,
        }
    }
}

/// A store shared by everyone who may write it. Every method is blocking; the
/// scheduler calls them on a blocking thread.
pub trait Remote: Send + Sync + std::fmt::Debug {
    /// Where it is, as the user wrote it (never with credentials).
    fn url(&self) -> &str;
    /// The entry for `key` signed by the key whose id is `signer`, as stored (at
    /// most `max` bytes); `None` when there is none.
    fn entry(&self, key: &str, signer: &str, max: u64) -> Result<Option<Vec<u8>>, RemoteError>;
    /// The ids of the keys that signed an entry for `key`. Each signer has its own
    /// entry, so one writer's entry never keeps another's out.
    fn signers(&self, key: &str) -> Result<Vec<String>, RemoteError>;
    /// Store `signer`'s entry for `key` unless it has one: `true` when this call
    /// wrote it, `false` when one was there first.
    fn put_entry_if_absent(
        &self,
        key: &str,
        signer: &str,
        bytes: &[u8],
    ) -> Result<bool, RemoteError>;
    /// Whether blob `hex` is there with `size` bytes (its bytes are checked by
    /// whoever reads it).
    fn has_blob(&self, hex: &str, size: u64) -> Result<bool, RemoteError>;
    /// Store `src` (`size` bytes, whose sha256 the caller computed) as blob `hex`.
    fn put_blob(&self, hex: &str, src: &mut File, size: u64) -> Result<(), RemoteError>;
    /// Write blob `hex`, which must be `size` bytes, to `dst`; the bytes written
    /// (never more than `size` + 1: a blob of another size is refused). The caller
    /// hashes them.
    fn get_blob(&self, hex: &str, size: u64, dst: &mut dyn Write) -> Result<u64, RemoteError>;
    /// Put `bytes` as `signer`'s entry for `key` whatever is there (one that does
    /// not verify with the signer's own key, found by its next push).
    fn replace_entry(&self, key: &str, signer: &str, bytes: &[u8]) -> Result<(), RemoteError>;
    /// Remove blob `hex` (found not to hold its digest's bytes).
    fn remove_blob(&self, hex: &str) -> Result<(), RemoteError>;
    /// Every key with an entry.
    fn keys(&self) -> Result<Vec<String>, RemoteError>;
    /// Every blob and entry the store holds, with its size and when it was
    /// written (what `cache gc --remote` reads; anything else there is left alone).
    fn stored(&self) -> Result<Vec<Stored>, RemoteError>;
    /// Remove `signer`'s entry for `key` (one already gone is no error).
    fn remove_entry(&self, key: &str, signer: &str) -> Result<(), RemoteError>;
}

/// What one object of a store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    Blob { hex: String },
    Entry { key: String, signer: String },
}

/// One object of a store, as its listing tells it.
#[derive(Debug, Clone)]
pub struct Stored {
    pub held: Held,
    pub size: u64,
    pub modified: std::time::SystemTime,
}

/// The remote named by `spec`: `s3://bucket/prefix` an S3 store, an absolute path
/// a shared folder (`file://` may prefix it).
pub fn open(spec: &str) -> Result<Box<dyn Remote>, RemoteError> {
    crate::plan::remote::check(spec).map_err(RemoteError::Location)?;
    if spec.starts_with("s3://") {
        return Ok(Box::new(s3::S3Store::open(spec)?));
    }
    let path = spec.strip_prefix("file://").unwrap_or(spec);
    Ok(Box::new(SharedFolder::open(std::path::Path::new(path))?))
}

pub(crate) use crate::cache::store::is_hex64;
