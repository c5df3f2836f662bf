//! `orchestrate recover`: clean what dead runs left on this host and finish their
//! records from their journals. Only runs whose liveness lock is free are touched.

use std::fmt::Write as _;
use std::path::Path;

use crate::isolate::{self, Isolator, Mode};
use crate::sched;

/// What recover did, as text for the terminal.
pub fn recover(records: &Path) -> Result<String, String> {
    let mut out = String::new();
    let isolator = Isolator::new(Mode::Auto).map_err(|e| e.to_string())?;
    let removed = isolator
        .sweep(&|name| sched::run_id_of_cgroup(name).is_some_and(|id| !sched::is_run_alive(id)));
    for r in &removed {
        let _ = writeln!(out, "removed cgroup {r}");
    }
    // Processes still carrying the canary of a dead run: end them.
    let dead = |c: &str| {
        c.split('/')
            .next()
            .is_some_and(|id| id.len() == sched::RUN_ID_LEN && !sched::is_run_alive(id))
    };
    for (pid, canary) in isolate::processes_with_canary(&dead) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = writeln!(out, "killed process {pid} left by attempt {canary}");
    }
    if let Ok(entries) = std::fs::read_dir(records) {
        let mut dirs: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        dirs.sort();
        for dir in dirs {
            let Some(id) = dir.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if !dir.join("journal.jsonl").is_file()
                || dir.join("record.json").is_file()
                || sched::is_run_alive(id)
            {
                continue;
            }
            match crate::run::finish_record(&dir, None) {
                Ok(rec) => {
                    let _ = writeln!(
                        out,
                        "finished the record of dead run {id} from its journal: {}",
                        rec.status.as_str()
                    );
                }
                Err(e) => {
                    let _ = writeln!(out, "could not finish the record of {id}: {e}");
                }
            }
        }
    }
    if out.is_empty() {
        out.push_str("nothing to recover\n");
    }
    Ok(out)
}
