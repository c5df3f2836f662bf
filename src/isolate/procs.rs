//! Reading /proc: process status lines, our children, canary environments.

use std::path::Path;

/// The fields of `/proc/<pid>/stat` isolate needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub state: char,
    pub ppid: i32,
    pub session: i32,
}

/// Parse `/proc/<pid>/stat`; `None` when the process vanished or the text is odd.
pub(crate) fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

fn parse_stat(text: &str) -> Option<Stat> {
    // The command name may hold spaces and parentheses: cut after the last ')'.
    let (_, rest) = text.rsplit_once(')')?;
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let _pgrp = f.next()?;
    let session = f.next()?.parse().ok()?;
    Some(Stat {
        state,
        ppid,
        session,
    })
}

/// Numeric entries of /proc (pids of all visible processes).
fn all_pids() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

/// Our direct children (including adopted orphans), from the per-thread `children`
/// files, or a scan of /proc where those files do not exist.
pub(crate) fn children() -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    let mut found_file = false;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                found_file = true;
                out.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok()),
                );
            }
        }
    }
    if !found_file {
        out = all_pids()
            .into_iter()
            .filter(|&p| stat(p).is_some_and(|s| s.ppid == me))
            .collect();
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Our children that are zombies (exited, not yet reaped). Tests and audits use it to
/// prove nothing was left unreaped.
pub fn zombie_children() -> Vec<i32> {
    children()
        .into_iter()
        .filter(|&p| stat(p).is_some_and(|s| s.state == 'Z'))
        .collect()
}

/// Processes whose environment carries `ORCHESTRATE_ATTEMPT=<value>` with `pred(value)`
/// true, as (pid, value). Reads `/proc/*/environ`; vanished or unreadable processes
/// are skipped.
pub fn processes_with_canary(pred: &dyn Fn(&str) -> bool) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for pid in all_pids() {
        let Ok(env) = std::fs::read(Path::new("/proc").join(pid.to_string()).join("environ"))
        else {
            continue;
        };
        for var in env.split(|&b| b == 0) {
            if let Some(value) = var.strip_prefix(b"ORCHESTRATE_ATTEMPT=") {
                let value = String::from_utf8_lossy(value);
                if pred(&value) {
                    out.push((pid, value.into_owned()));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_odd_command_name() {
        let s = parse_stat("123 (a) b (c) Z 45 123 123 0 -1").unwrap();
        assert_eq!(
            s,
            Stat {
                state: 'Z',
                ppid: 45,
                session: 123
            }
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn finds_own_process_by_canary() {
        let me = std::process::id() as i32;
        // Our own environment has no canary; a child with one is found.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .env("ORCHESTRATE_ATTEMPT", "procs-unit-test")
            .spawn()
            .unwrap();
        // Until exec, the child still shows our environment: look a few times.
        let mut found = Vec::new();
        for _ in 0..100 {
            found = processes_with_canary(&|v| v == "procs-unit-test");
            if !found.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            found.iter().any(|(p, _)| *p == child.id() as i32),
            "{found:?}"
        );
        assert!(!found.iter().any(|(p, _)| *p == me));
    }
}
