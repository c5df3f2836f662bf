//! Exclusive, crash-safe leases: one `flock`ed file per device core.
//!
//! Lock files are never deleted: a process waiting on a file that another deletes
//! would lock an orphan inode while a third creates and locks a new file, and both
//! would "own" the core. Release truncates the body, then unlocks. As a guard
//! against someone else deleting files (a tmpfiles cleaner, a user), a locker checks
//! after locking that the path still names the inode it locked, and retries if not.
//! The kernel drops the lock of a dead process, so a crash never holds a core; its
//! body stays behind as evidence until a new holder or `recover_leases` clears it.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::env::{step_env, GrantedDevice};
use super::error::DeviceError;
pub use super::holder::{Holder, Owner};
use super::model::{valid_id, Inventory, Request};
use super::select::{units_for, Candidates};

/// Environment variable overriding the lease folder (tests, unusual hosts).
pub const LEASE_DIR_ENV: &str = "ORCHESTRATE_LEASE_DIR";

/// The lease folder: `ORCHESTRATE_LEASE_DIR`, else `/run/orchestrate/leases` as root,
/// else `$XDG_RUNTIME_DIR/orchestrate/leases`, else `<tmp>/orchestrate-<uid>/leases`.
/// Leases only exclude runs that use the same folder.
pub fn default_lease_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(LEASE_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let uid = nix::unistd::geteuid();
    if uid.is_root() {
        return PathBuf::from("/run/orchestrate/leases");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("orchestrate").join("leases"),
        None => std::env::temp_dir()
            .join(format!("orchestrate-{uid}"))
            .join("leases"),
    }
}

/// The lock file of one core: `<device-id>.core<N>.lock`.
pub fn lock_file_name(device: &str, core: u32) -> String {
    format!("{device}.core{core}.lock")
}

/// Splits a lock file name into device id and core.
pub fn parse_lock_file_name(name: &str) -> Option<(String, u32)> {
    let stem = name.strip_suffix(".lock")?;
    let (device, core) = stem.rsplit_once(".core")?;
    Some((device.to_string(), core.parse().ok()?))
}

/// One locked core file; truncated and unlocked on release or drop.
#[derive(Debug)]
struct HeldLock {
    path: PathBuf,
    lock: Option<Flock<File>>,
}

impl HeldLock {
    fn release(&mut self) -> Result<(), DeviceError> {
        if let Some(lock) = self.lock.take() {
            // Clear the body while still holding the lock: unlocked with a body
            // means "stale" to the audit.
            let cleared = lock.set_len(0);
            drop(lock);
            cleared.map_err(|e| DeviceError::io(&self.path, e))?;
        }
        Ok(())
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

/// Devices granted to one request, held until `release` or drop.
#[derive(Debug)]
pub struct Grant {
    /// The plan's request name.
    pub request: String,
    pub units: Vec<GrantedDevice>,
    /// Every granted device is simulated.
    pub simulated: bool,
    pub granted_at: DateTime<Utc>,
    /// Variables for the step (see [`step_env`]).
    pub env: Vec<(String, String)>,
    /// Device nodes of the granted devices, deduplicated.
    pub dev_nodes: Vec<PathBuf>,
    /// The lock files held: the lease ids the record names.
    pub lease_files: Vec<PathBuf>,
    /// Bodies of dead holders this acquisition found and overwrote (including in
    /// files it locked and let go while looking for a free set).
    pub replaced_stale: Vec<Holder>,
    locks: Vec<HeldLock>,
}

impl Grant {
    /// Releases every lease (body cleared, then unlocked); returns the time taken just
    /// before the first unlock.
    pub fn release(mut self) -> Result<DateTime<Utc>, DeviceError> {
        // Taken before the first unlock, so a later holder's `granted_at` (taken after
        // its lock) is never earlier: the record's intervals on one device never overlap.
        let at = Utc::now();
        let mut first_err = None;
        for lock in &mut self.locks {
            if let Err(e) = lock.release() {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(at),
        }
    }
}

/// Takes leases in one lease folder.
#[derive(Debug, Clone)]
pub struct LeaseManager {
    dir: PathBuf,
    poll: Duration,
}

enum Attempt {
    Granted(Vec<(GrantedDevice, Vec<HeldLock>)>, Vec<Holder>),
    Busy(Vec<PathBuf>),
}

impl LeaseManager {
    /// A manager for `dir`, creating it if needed.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, DeviceError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|e| DeviceError::io(&dir, e))?;
        Ok(LeaseManager {
            dir,
            poll: Duration::from_millis(50),
        })
    }

    /// A manager for [`default_lease_dir`].
    pub fn from_env() -> Result<Self, DeviceError> {
        Self::open(default_lease_dir())
    }

    /// How often a waiting `acquire` retries (default 50 ms).
    pub fn with_poll(mut self, poll: Duration) -> Self {
        self.poll = poll.max(Duration::from_millis(1));
        self
    }

    /// Leases devices for `req`: the first free candidate set, its units locked in
    /// the global order (device id, then core), all or none. While none is free it
    /// retries every poll interval up to `wait`, calling `on_wait` with the holders
    /// of the busy units each time they change; then `Busy`.
    pub fn acquire(
        &self,
        req: &Request,
        inv: &Inventory,
        owner: &Owner,
        wait: Duration,
        on_wait: &mut dyn FnMut(&[Holder]),
    ) -> Result<Grant, DeviceError> {
        self.acquire_until(req, inv, owner, wait, on_wait, &crate::sys::Stop::new())
    }

    /// Like [`LeaseManager::acquire`], giving up with `Stopped` within one poll
    /// interval of `stop` being set (the run is ending).
    pub fn acquire_until(
        &self,
        req: &Request,
        inv: &Inventory,
        owner: &Owner,
        wait: Duration,
        on_wait: &mut dyn FnMut(&[Holder]),
        stop: &crate::sys::Stop,
    ) -> Result<Grant, DeviceError> {
        let candidates = units_for(inv, req)?;
        if (candidates.options.len() as u64) < u64::from(candidates.count) {
            return Err(DeviceError::InvalidRequest {
                request: req.name.clone(),
                reason: format!(
                    "only {} device(s) can give {} core(s) each",
                    candidates.options.len(),
                    req.cores.map_or("all".into(), |c| c.to_string())
                ),
            });
        }
        // Ids become file names: refuse any that could leave the lease folder.
        if let Some(bad) = candidates.options.iter().find(|o| !valid_id(&o.device.id)) {
            return Err(DeviceError::InvalidRequest {
                request: req.name.clone(),
                reason: format!("device id `{}` is not a plain name", bad.device.id),
            });
        }
        let start = Instant::now();
        let mut last_seen: Option<Vec<Holder>> = None;
        let me = Holder::of_this_process(owner);
        loop {
            match self.attempt(&candidates, &me)? {
                Attempt::Granted(taken, replaced_stale) => {
                    return Ok(grant(&candidates, taken, replaced_stale))
                }
                Attempt::Busy(paths) => {
                    if stop.is_stopped() {
                        return Err(DeviceError::Stopped {
                            request: req.name.clone(),
                        });
                    }
                    let holders = read_holders(&paths);
                    if start.elapsed() >= wait {
                        return Err(DeviceError::Busy {
                            request: req.name.clone(),
                            holders,
                        });
                    }
                    if last_seen.as_ref() != Some(&holders) {
                        on_wait(&holders);
                        last_seen = Some(holders);
                    }
                    std::thread::sleep(self.poll.min(wait.saturating_sub(start.elapsed())));
                }
            }
        }
    }

    /// One pass over the candidates without waiting.
    fn attempt(&self, c: &Candidates, me: &Holder) -> Result<Attempt, DeviceError> {
        let mut taken = Vec::new();
        let mut stale = Vec::new();
        let mut busy = Vec::new();
        for option in &c.options {
            if taken.len() as u64 >= u64::from(c.count) {
                break;
            }
            for slot in &option.slots {
                match self.lock_slot(&option.device.id, slot, me, &mut stale)? {
                    Ok(locks) => {
                        taken.push((
                            GrantedDevice {
                                device: option.device.clone(),
                                cores: slot.clone(),
                            },
                            locks,
                        ));
                        break;
                    }
                    Err(path) => busy.push(path),
                }
            }
        }
        if taken.len() as u64 >= u64::from(c.count) {
            Ok(Attempt::Granted(taken, stale))
        } else {
            // Dropping `taken` releases the partial set: all or none.
            Ok(Attempt::Busy(busy))
        }
    }

    /// Locks every core of one slot (ascending) or none; `Err(path)` names the busy
    /// file.
    fn lock_slot(
        &self,
        device: &str,
        cores: &[u32],
        me: &Holder,
        stale: &mut Vec<Holder>,
    ) -> Result<Result<Vec<HeldLock>, PathBuf>, DeviceError> {
        let mut held = Vec::with_capacity(cores.len());
        for &core in cores {
            let path = self.dir.join(lock_file_name(device, core));
            let Some(lock) = lock_path(&path)? else {
                return Ok(Err(path));
            };
            let mut old = String::new();
            // A body left by a dead holder is evidence worth keeping in the grant.
            let _ = (&*lock).read_to_string(&mut old);
            if !old.trim().is_empty() {
                if let Ok(h) = serde_json::from_str::<Holder>(&old) {
                    stale.push(h);
                }
            }
            let body = Holder {
                since: Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
                device: device.to_string(),
                core,
                ..me.clone()
            };
            let text = serde_json::to_string(&body).unwrap_or_default();
            let h = HeldLock {
                path: path.clone(),
                lock: Some(lock),
            };
            if let Some(l) = h.lock.as_ref() {
                l.set_len(0)
                    .and_then(|_| l.write_all_at(text.as_bytes(), 0))
                    .map_err(|e| DeviceError::io(&path, e))?;
            }
            held.push(h);
        }
        Ok(Ok(held))
    }
}

/// Opens and locks `path` without blocking; `None` when another holds it. Retries
/// when the path was replaced between open and lock.
fn lock_path(path: &Path) -> Result<Option<Flock<File>>, DeviceError> {
    for _ in 0..8 {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .map_err(|e| DeviceError::io(path, e))?;
        let mut file = file;
        let lock = loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(l) => break l,
                Err((f, Errno::EINTR)) => file = f,
                Err((_, Errno::EWOULDBLOCK)) => return Ok(None),
                Err((_, e)) => return Err(DeviceError::io(path, e.into())),
            }
        };
        let ours = lock.metadata().map_err(|e| DeviceError::io(path, e))?;
        match std::fs::metadata(path) {
            Ok(now) if now.ino() == ours.ino() && now.dev() == ours.dev() => return Ok(Some(lock)),
            _ => continue, // deleted or replaced: lock the file the path names now
        }
    }
    Err(DeviceError::io(
        path,
        std::io::Error::other("lock file keeps being replaced"),
    ))
}

/// The holders named by the bodies of `paths` (unreadable or empty ones skipped),
/// without duplicates.
pub(crate) fn read_holders(paths: &[PathBuf]) -> Vec<Holder> {
    let mut out: Vec<Holder> = Vec::new();
    for p in paths {
        let Ok(text) = std::fs::read_to_string(p) else {
            continue;
        };
        let Ok(h) = serde_json::from_str::<Holder>(&text) else {
            continue;
        };
        if !out
            .iter()
            .any(|o| o.pid == h.pid && o.run_id == h.run_id && o.step == h.step && o.host == h.host)
        {
            out.push(h);
        }
    }
    out
}

fn grant(
    c: &Candidates,
    taken: Vec<(GrantedDevice, Vec<HeldLock>)>,
    replaced_stale: Vec<Holder>,
) -> Grant {
    let mut units = Vec::new();
    let mut locks = Vec::new();
    for (unit, held) in taken {
        units.push(unit);
        locks.extend(held);
    }
    let mut dev_nodes: Vec<PathBuf> = Vec::new();
    for u in &units {
        for n in &u.device.dev_nodes {
            if !dev_nodes.contains(n) {
                dev_nodes.push(n.clone());
            }
        }
    }
    Grant {
        request: c.request.clone(),
        env: step_env(&units),
        simulated: c.simulated,
        granted_at: Utc::now(),
        dev_nodes,
        lease_files: locks.iter().map(|l| l.path.clone()).collect(),
        replaced_stale,
        units,
        locks,
    }
}
