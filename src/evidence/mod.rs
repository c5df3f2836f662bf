//! Evidence: the journal written while a run lives, the record built from it, and the
//! hashing that makes both checkable.

pub mod atomic;
pub mod jcs;
pub mod journal;
pub mod record;
mod store;

pub use store::{write_record, StoreError};
