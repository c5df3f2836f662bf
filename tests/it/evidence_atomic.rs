//! Disk full for real: a 256 KiB tmpfs, a write that cannot fit. Needs root to
//! mount; skips otherwise, and fails instead when ORCHESTRATE_REQUIRE_CGROUPS=1.

use std::path::{Path, PathBuf};
use std::process::Command;

use orchestrate::evidence::atomic::{write_atomic, AtomicWriteError};

/// Unmounts the tmpfs however the test ends.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn mount_small_tmpfs(dir: &Path) -> Option<Mount> {
    if !crate::support::is_root() {
        crate::support::skip_or_fail(
            crate::support::Need::Cgroups,
            "not root: cannot mount a tmpfs",
        );
        return None;
    }
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(dir)
        .status();
    match st {
        Ok(s) if s.success() => Some(Mount(dir.to_path_buf())),
        other => {
            crate::support::skip_or_fail(
                crate::support::Need::Cgroups,
                &format!("cannot mount a tmpfs: {other:?}"),
            );
            None
        }
    }
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn disk_full_leaves_old_file_and_no_temp() {
    let t = tempfile::tempdir().unwrap();
    let Some(_mount) = mount_small_tmpfs(t.path()) else {
        return;
    };
    let dir = t.path();

    // A new file that cannot fit: error, and nothing left behind.
    let fresh = dir.join("fresh.json");
    let big = vec![b'x'; 1 << 20];
    let e = write_atomic(&fresh, &big).unwrap_err();
    assert!(matches!(e, AtomicWriteError::NoSpace { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("no space left on device"), "{msg}");
    assert!(msg.contains("fresh.json"), "{msg}");
    assert!(listing(dir).is_empty(), "left behind: {:?}", listing(dir));

    // An existing file that a too-big replacement would overwrite keeps its content.
    let rec = dir.join("record.json");
    write_atomic(&rec, b"{\"old\":true}").unwrap();
    let e = write_atomic(&rec, &big).unwrap_err();
    assert!(matches!(e, AtomicWriteError::NoSpace { .. }), "{e:?}");
    assert_eq!(std::fs::read(&rec).unwrap(), b"{\"old\":true}");
    assert_eq!(listing(dir), vec!["record.json".to_string()]);

    // And once the content fits again, the write goes through.
    write_atomic(&rec, b"{\"new\":true}").unwrap();
    assert_eq!(std::fs::read(&rec).unwrap(), b"{\"new\":true}");
}
