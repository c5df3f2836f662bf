//! The lease part of the release audit: which lock files are free, held or stale.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;

use super::error::DeviceError;
use super::holder::{Holder, StaleReason};
use super::lease::parse_lock_file_name;

/// One lock file and its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaseState {
    pub file: PathBuf,
    pub device: String,
    pub core: u32,
    pub status: LeaseStatus,
}

/// The state of a lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum LeaseStatus {
    /// Unlocked with an empty body.
    Free,
    /// Locked by a live process (the kernel says so); `holder` is its body, `None`
    /// while it is being written or if unreadable.
    Held { holder: Option<Holder> },
    /// Unlocked, but the body names a holder: a run died without releasing.
    Stale {
        holder: Option<Holder>,
        reason: StaleReason,
    },
}

impl LeaseState {
    /// The run named by the body, if any.
    pub fn run_id(&self) -> Option<&str> {
        match &self.status {
            LeaseStatus::Free => None,
            LeaseStatus::Held { holder } | LeaseStatus::Stale { holder, .. } => {
                holder.as_ref().map(|h| h.run_id.as_str())
            }
        }
    }
}

/// Lock files of `dir`, sorted by name; an absent folder has none.
fn lock_files(dir: &Path) -> Result<Vec<(PathBuf, String, u32)>, DeviceError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(DeviceError::io(dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| DeviceError::io(dir, e))?;
        let name = entry.file_name();
        if let Some((device, core)) = name.to_str().and_then(parse_lock_file_name) {
            out.push((entry.path(), device, core));
        }
    }
    out.sort();
    Ok(out)
}

/// Tries to lock `file` without blocking: the lock if free, `None` if held.
fn probe(path: &Path, mut file: File) -> Result<Option<Flock<File>>, DeviceError> {
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(l) => return Ok(Some(l)),
            Err((f, Errno::EINTR)) => file = f,
            Err((_, Errno::EWOULDBLOCK)) => return Ok(None),
            Err((_, e)) => return Err(DeviceError::io(path, e.into())),
        }
    }
}

fn body_of(mut file: &File) -> String {
    let mut s = String::new();
    let _ = file.read_to_string(&mut s);
    s
}

fn stale_status(body: &str) -> LeaseStatus {
    match serde_json::from_str::<Holder>(body) {
        Ok(h) => LeaseStatus::Stale {
            reason: h.dead_reason().unwrap_or(StaleReason::ProcessAliveUnlocked),
            holder: Some(h),
        },
        Err(_) => LeaseStatus::Stale {
            holder: None,
            reason: StaleReason::Unreadable,
        },
    }
}

/// How long a lock whose holder died may stay held before it is called an
/// orphan's: a child forked by the holder keeps the inherited lock only until it
/// calls exec, which takes milliseconds.
const ORPHAN_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// The state of a lock file found held. A lock held although its holder's process
/// is gone belongs to a child the holder forked just before it died: wait for the
/// child's exec to drop it, then judge the file again; one still held after that
/// is stale (an orphan holds it), never a live holder's.
fn held_status(path: &Path) -> Result<LeaseStatus, DeviceError> {
    let started = std::time::Instant::now();
    loop {
        let holder: Option<Holder> = std::fs::read_to_string(path)
            .ok()
            .and_then(|b| serde_json::from_str(&b).ok());
        if holder.as_ref().and_then(Holder::dead_reason).is_none() {
            return Ok(LeaseStatus::Held { holder });
        }
        if started.elapsed() >= ORPHAN_GRACE {
            return Ok(LeaseStatus::Stale {
                holder,
                reason: StaleReason::HeldByOrphan,
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LeaseStatus::Free),
            Err(e) => return Err(DeviceError::io(path, e)),
        };
        if let Some(lock) = probe(path, file)? {
            let body = body_of(&lock);
            return Ok(if body.trim().is_empty() {
                LeaseStatus::Free
            } else {
                stale_status(&body)
            });
        }
    }
}

/// The state of every lock file in `dir`. Locks are tested on a fresh file
/// description, so leases held by this very process show as held.
pub fn audit_leases(dir: &Path) -> Result<Vec<LeaseState>, DeviceError> {
    let mut out = Vec::new();
    for (path, device, core) in lock_files(dir)? {
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(DeviceError::io(&path, e)),
        };
        let status = match probe(&path, file)? {
            Some(lock) => {
                let body = body_of(&lock);
                drop(lock);
                if body.trim().is_empty() {
                    LeaseStatus::Free
                } else {
                    stale_status(&body)
                }
            }
            None => held_status(&path)?,
        };
        out.push(LeaseState {
            file: path,
            device,
            core,
            status,
        });
    }
    Ok(out)
}

/// Clears the bodies of stale lock files, each only while holding its lock, and
/// says what it cleared (one line per file). Never deletes a file (see `lease`).
pub fn recover_leases(dir: &Path) -> Result<Vec<String>, DeviceError> {
    let mut cleared = Vec::new();
    for (path, device, core) in lock_files(dir)? {
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(DeviceError::io(&path, e)),
        };
        let Some(lock) = probe(&path, file)? else {
            continue;
        };
        let body = body_of(&lock);
        if body.trim().is_empty() {
            continue;
        }
        let what = match stale_status(&body) {
            LeaseStatus::Stale {
                holder: Some(h),
                reason,
            } => format!("{} ({reason:?})", h.describe()),
            _ => "an unreadable body".to_string(),
        };
        lock.set_len(0).map_err(|e| DeviceError::io(&path, e))?;
        cleared.push(format!(
            "{device} core {core}: cleared stale lease of {what}"
        ));
    }
    Ok(cleared)
}

/// Holders of the leases currently held in `dir`, one entry per lock file.
pub fn holders(dir: &Path) -> Result<Vec<Holder>, DeviceError> {
    Ok(audit_leases(dir)?
        .into_iter()
        .filter_map(|s| match s.status {
            LeaseStatus::Held { holder } => holder,
            _ => None,
        })
        .collect())
}
