//! A delegated cgroup parent must be ours: whoever can write a cgroup folder can
//! freeze, kill or move the processes below it, and change their limits. As ssh's
//! `StrictModes` refuses a home others can write, a parent (and every cgroup above
//! it, up to its hierarchy's root) owned by another user, or writable by its group
//! or everyone, is refused before anything runs there.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use super::layout::CgroupLayout;
use super::types::IsolateError;

/// Check each hierarchy's parent folder and those above it, `depth` of them (the
/// parent's own components): a missing one is made by us later, and is fine.
pub(super) fn owned_by_us(delegated: &CgroupLayout, parent: &Path) -> Result<(), IsolateError> {
    let depth = parent.components().count();
    let me = nix::unistd::geteuid().as_raw();
    let dirs = delegated.unified.iter().chain(delegated.v1.values());
    for dir in dirs {
        let mut cur = Some(dir.as_path());
        for _ in 0..depth {
            let Some(d) = cur else { break };
            if let Ok(m) = std::fs::symlink_metadata(d) {
                check(d, &m, me)?;
            }
            cur = d.parent();
        }
    }
    Ok(())
}

fn check(d: &Path, m: &std::fs::Metadata, me: u32) -> Result<(), IsolateError> {
    if m.uid() != me && m.uid() != 0 {
        return Err(IsolateError::ForeignParent(format!(
            "{} is owned by uid {}, not by you (uid {me}) or root: that user could freeze or kill what runs below it; use a parent of your own",
            d.display(),
            m.uid()
        )));
    }
    if m.mode() & 0o022 != 0 {
        return Err(IsolateError::ForeignParent(format!(
            "{} is writable by {} (mode {:o}): they could freeze or kill what runs below it; chmod go-w it",
            d.display(),
            if m.mode() & 0o002 != 0 { "everyone" } else { "its group" },
            m.mode() & 0o7777
        )));
    }
    Ok(())
}
