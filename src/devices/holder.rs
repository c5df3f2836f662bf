//! Who holds a lease: the JSON body of a lock file, and how to tell if it is alive.

use serde::{Deserialize, Serialize};

/// The run and step a lease is taken for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub run_id: String,
    /// `None` when the whole run holds the lease.
    pub step: Option<String>,
}

/// The body of a held lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub run_id: String,
    pub step: Option<String>,
    pub pid: u32,
    /// Field 22 of `/proc/<pid>/stat` (clock ticks after boot): with `boot_id`, tells
    /// a live holder from a reused pid.
    pub start_time: Option<u64>,
    pub boot_id: Option<String>,
    pub host: String,
    /// RFC 3339.
    pub since: String,
    pub device: String,
    pub core: u32,
}

impl Holder {
    /// The body this process writes for `owner`, device and core left to fill in
    /// (read once per acquire: none of it changes while the process lives).
    pub(crate) fn of_this_process(owner: &Owner) -> Holder {
        let pid = std::process::id();
        Holder {
            run_id: owner.run_id.clone(),
            step: owner.step.clone(),
            pid,
            start_time: process_start_time(pid),
            boot_id: boot_id(),
            host: host_name(),
            since: String::new(),
            device: String::new(),
            core: 0,
        }
    }

    /// One line for a person: `run R step S (pid P on H since T)`.
    pub fn describe(&self) -> String {
        let step = self
            .step
            .as_deref()
            .map(|s| format!(" step {s}"))
            .unwrap_or_default();
        format!(
            "run {}{step} (pid {} on {} since {})",
            self.run_id, self.pid, self.host, self.since
        )
    }

    /// Why this holder is no longer alive, or `None` if its process still runs.
    pub fn dead_reason(&self) -> Option<StaleReason> {
        if let (Some(ours), Some(theirs)) = (boot_id(), self.boot_id.as_deref()) {
            if ours != theirs {
                return Some(StaleReason::OtherBoot);
            }
        }
        match (process_start_time(self.pid), self.start_time) {
            (None, _) => Some(StaleReason::ProcessGone),
            (Some(now), Some(then)) if now != then => Some(StaleReason::PidReused),
            _ => None,
        }
    }
}

/// Why an unlocked lease file still names a holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StaleReason {
    /// The holder's process no longer exists.
    ProcessGone,
    /// A process with that pid exists but started at another time.
    PidReused,
    /// The lease was written before the last reboot.
    OtherBoot,
    /// The holder's process still runs but no longer holds the lock (it closed the
    /// file without clearing it).
    ProcessAliveUnlocked,
    /// The holder's process is gone, yet the lock is still held: a process it
    /// forked holds the inherited lock file until it calls exec (the file is
    /// close-on-exec) or exits.
    HeldByOrphan,
    /// The body is not a lease record.
    Unreadable,
}

/// Start time of `pid` in clock ticks after boot (field 22 of `/proc/<pid>/stat`).
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count fields after
    // its closing parenthesis, which is followed by field 3.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    // A zombie (exited, not yet reaped by its parent) has closed every file and
    // dropped every lock: it is gone as far as any holder is concerned.
    if matches!(fields.next(), Some("Z" | "X")) {
        return None;
    }
    fields.nth(22 - 4)?.parse().ok()
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`).
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// This host's name, or `unknown`.
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_process_has_a_start_time_and_a_zombie_has_none() {
        let me = std::process::id();
        assert!(process_start_time(me).is_some());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not waited for: once it exits it stays a zombie until reaped.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while process_start_time(pid).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(stat.contains(") Z "), "still a zombie, unreaped: {stat}");
        assert_eq!(process_start_time(pid), None);
        child.wait().unwrap();
    }
}
