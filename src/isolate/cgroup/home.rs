//! Where a cgroup v2 orchestrator creates its attempts, found from whatever cgroup it
//! was started in, and left as it was found when the last isolator of the process
//! ends.
//!
//! v2 lets a cgroup enable controllers for its children only while it holds no
//! process itself (the root cgroup is exempt), so:
//! - started in the root cgroup: attempts go right below it;
//! - started alone in a cgroup (a delegated systemd scope, a service): we move into a
//!   leaf `orchestrate.self-<pid>` of it, and attempts go beside that leaf;
//! - started in a cgroup shared with other processes (a login shell's session scope):
//!   we move into a leaf of `orchestrate.home`, a cgroup of our own beside the
//!   starting one (what `systemd-run --scope` does too), shared by every orchestrator
//!   started from there so that a later one sweeps what a crashed one left.
//!
//! At the end we move back, disable what we enabled, and remove the leaf (and the
//! home when nothing else uses it). A process killed with SIGKILL cannot; the next
//! orchestrator that uses the same home removes the empty leaves of dead processes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::isolate::cgfs::CgroupFs;

/// Prefix of the leaf one orchestrator process lives in (never an attempt name: those
/// start with `orchestrate-`).
pub(crate) const SELF_PREFIX: &str = "orchestrate.self-";
/// The cgroup beside a shared starting cgroup that orchestrators move into.
pub(crate) const SHARED_HOME: &str = "orchestrate.home";

/// One home in use by this process.
#[derive(Debug)]
struct State {
    fs: Arc<dyn CgroupFs>,
    base: PathBuf,
    start: PathBuf,
    leaf: Option<PathBuf>,
    /// Controllers we enabled in `base`'s `subtree_control`.
    enabled: Vec<String>,
    /// A home made beside `start`, removed when empty.
    beside: bool,
    refs: usize,
}

/// Every home in use, so that a second isolator (started from inside our leaf) shares
/// the first one's and the last one to end restores the starting cgroup.
static HOMES: Mutex<Vec<State>> = Mutex::new(Vec::new());

/// A use of a home; dropping the last use of one restores what was found.
#[derive(Debug)]
pub(crate) struct HomeRef {
    base: PathBuf,
}

/// The directory attempts are created in, the controllers enabled there, and the use.
#[derive(Debug)]
pub(crate) struct Home {
    pub base: PathBuf,
    pub controllers: Vec<String>,
    pub held: HomeRef,
}

fn me() -> i32 {
    std::process::id() as i32
}

fn pids_in(fs: &dyn CgroupFs, dir: &Path) -> Vec<i32> {
    fs.read(&dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn words(fs: &dyn CgroupFs, file: &Path) -> Vec<String> {
    fs.read(file)
        .unwrap_or_default()
        .split_whitespace()
        .map(|w| w.trim_start_matches('+').to_string())
        .collect()
}

/// Find or make a home from `start`, enabling `wanted` (those `start` offers).
pub(crate) fn acquire(
    fs: &Arc<dyn CgroupFs>,
    start: &Path,
    parent: Option<&Path>,
    wanted: &[&str],
    notes: &mut Vec<String>,
) -> Result<Home, String> {
    let mut homes = HOMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(h) = homes
        .iter_mut()
        .find(|h| h.leaf.as_deref() == Some(start) || (h.leaf.is_none() && h.base == start))
    {
        h.refs += 1;
        return Ok(Home {
            base: h.base.clone(),
            controllers: words(fs.as_ref(), &h.base.join("cgroup.subtree_control")),
            held: HomeRef {
                base: h.base.clone(),
            },
        });
    }
    let mut state = place(fs, start, parent, notes)?;
    let controllers = match enable(fs.as_ref(), &state.base, wanted) {
        Ok((now, enabled)) => {
            state.enabled = enabled;
            now
        }
        Err(e) => {
            restore(&state);
            return Err(e);
        }
    };
    let home = Home {
        base: state.base.clone(),
        controllers,
        held: HomeRef {
            base: state.base.clone(),
        },
    };
    homes.push(state);
    Ok(home)
}

/// Decide the base and move into a leaf where the rules ask for one.
///
/// With a delegated `parent` that does not hold `start`, we move into a leaf of the
/// parent (which needs the right to move ourselves there: root, or a user whose
/// starting cgroup and the parent share an ancestor they own) and attempts go beside
/// it; one that holds `start` only bounds where a home may be made.
fn place(
    fs: &Arc<dyn CgroupFs>,
    start: &Path,
    parent: Option<&Path>,
    notes: &mut Vec<String>,
) -> Result<State, String> {
    let f = fs.as_ref();
    let mut state = State {
        fs: fs.clone(),
        base: start.to_path_buf(),
        start: start.to_path_buf(),
        leaf: None,
        enabled: Vec::new(),
        beside: false,
        refs: 1,
    };
    let outside = parent.filter(|p| !start.starts_with(p));
    // Only the root cgroup lacks cgroup.events, and only it may both hold processes
    // and delegate.
    if outside.is_none() && !f.exists(&start.join("cgroup.events")) {
        return Ok(state);
    }
    let others: Vec<i32> = pids_in(f, start)
        .into_iter()
        .filter(|&p| p != me())
        .collect();
    if let Some(p) = outside {
        state.base = p.to_path_buf();
    } else if !others.is_empty() && parent == Some(start) {
        return Err(shared_refusal(
            start,
            &others,
            "it is the delegated parent, and a cgroup v2 cgroup that holds processes \
             cannot delegate",
        ));
    } else if !others.is_empty() {
        let parent = start
            .parent()
            .filter(|p| f.exists(&p.join("cgroup.procs")))
            .ok_or_else(|| shared_refusal(start, &others, "it is the top of the mounted tree"))?;
        let home = parent.join(SHARED_HOME);
        match f.mkdir(&home) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(shared_refusal(
                    start,
                    &others,
                    &format!("creating {}: {e}", home.display()),
                ))
            }
        }
        state.base = home;
        state.beside = true;
    }
    sweep_dead_leaves(f, &state.base);
    let leaf = state.base.join(format!("{SELF_PREFIX}{}", me()));
    if let Err(e) = f.mkdir(&leaf) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            restore(&state);
            return Err(format!("not writable: creating {}: {e}", leaf.display()));
        }
    }
    state.leaf = Some(leaf.clone());
    if let Err(e) = f.write(&leaf.join("cgroup.procs"), &me().to_string()) {
        restore(&state);
        let hint = match outside {
            Some(p) => format!(
                " (cgroup v2 moves a process only where the nearest cgroup above both \
                 ends is writable to the mover: start orchestrate from inside {}, e.g. \
                 from a shell an administrator moved there)",
                p.display()
            ),
            None => String::new(),
        };
        return Err(format!(
            "no delegation: moving the orchestrator into {}: {e}{hint}",
            leaf.display()
        ));
    }
    notes.push(if let Some(p) = outside {
        format!(
            "moved the orchestrator from {} into {} in the delegated parent {}; it moves \
             back at the end",
            start.display(),
            leaf.display(),
            p.display()
        )
    } else if state.beside {
        format!(
            "moved the orchestrator from {} (shared with other processes) into {}: a \
             cgroup v2 cgroup that holds processes cannot delegate controllers; it moves \
             back at the end",
            start.display(),
            leaf.display()
        )
    } else {
        format!(
            "moved the orchestrator into {} so that {} can enable controllers; it moves \
             back at the end",
            leaf.display(),
            start.display()
        )
    });
    Ok(state)
}

fn shared_refusal(start: &Path, others: &[i32], why: &str) -> String {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let shown: Vec<String> = others.iter().take(8).map(|p| p.to_string()).collect();
    let more = if others.len() > 8 { " …" } else { "" };
    let hint = if euid == 0 {
        "start it in a cgroup of its own"
    } else {
        "start it in a delegated cgroup of its own (systemd-run --user --scope -p \
         Delegate=yes orchestrate …)"
    };
    format!(
        "no delegation: {} holds other processes ({}{more}), and no cgroup of our own \
         can be made beside it ({why}); {hint}",
        start.display(),
        shown.join(" ")
    )
}

/// Enable what is wanted and offered in `base`; (enabled now, enabled by us).
fn enable(
    fs: &dyn CgroupFs,
    base: &Path,
    wanted: &[&str],
) -> Result<(Vec<String>, Vec<String>), String> {
    let control = base.join("cgroup.subtree_control");
    let offered = words(fs, &base.join("cgroup.controllers"));
    let on = words(fs, &control);
    let missing: Vec<String> = wanted
        .iter()
        .filter(|c| offered.iter().any(|o| o == *c) && !on.iter().any(|o| o == *c))
        .map(|c| c.to_string())
        .collect();
    if !missing.is_empty() {
        let value: Vec<String> = missing.iter().map(|c| format!("+{c}")).collect();
        write_when_free(fs, &control, &value.join(" ")).map_err(|e| {
            format!(
                "no delegation: enabling [{}] in {}: {e}",
                missing.join(" "),
                control.display()
            )
        })?;
    }
    let now: Vec<String> = wanted
        .iter()
        .filter(|c| words(fs, &control).iter().any(|o| o == *c))
        .map(|c| c.to_string())
        .collect();
    Ok((now, missing))
}

/// Write `value` to a `subtree_control`, trying again for up to a second while the
/// kernel answers EBUSY: a process of the cgroup that is still exiting (a child
/// reaped a moment ago) makes the write fail until it is gone. A process that stays
/// keeps the error.
fn write_when_free(fs: &dyn CgroupFs, control: &Path, value: &str) -> std::io::Result<()> {
    let mut tries = 0;
    loop {
        match fs.write(control, value) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 50 => {
                tries += 1;
                tracing::debug!(
                    "{} busy (try {tries}): a process is still leaving it",
                    control.display()
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

/// Remove the empty leaves of orchestrators that are gone.
pub(crate) fn sweep_dead_leaves(fs: &dyn CgroupFs, base: &Path) {
    for name in fs.subdirs(base).unwrap_or_default() {
        let Some(pid) = name
            .strip_prefix(SELF_PREFIX)
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: kill with signal 0 only checks that the pid exists.
        let alive = pid > 0 && (unsafe { libc::kill(pid, 0) } == 0 || errno_is_eperm());
        if pid != me() && !alive {
            let _ = fs.rmdir(&base.join(name));
        }
    }
}

fn errno_is_eperm() -> bool {
    std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Put back what `place` and `enable` changed, as far as the kernel lets us.
fn restore(state: &State) {
    let fs = state.fs.as_ref();
    let left: Vec<String> = fs
        .subdirs(&state.base)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.starts_with(super::PREFIX))
        .collect();
    if !state.beside && !left.is_empty() {
        // Disabling controllers would lift the limits of what is still there.
        tracing::warn!(
            "{} still holds {}; its controllers stay enabled (and the orchestrator in \
             its leaf, if it has one)",
            state.base.display(),
            left.join(" ")
        );
        return;
    }
    if !state.beside && !state.enabled.is_empty() {
        // A cgroup with controllers enabled for its children cannot take us back.
        let value: Vec<String> = state.enabled.iter().map(|c| format!("-{c}")).collect();
        let _ = fs.write(&state.base.join("cgroup.subtree_control"), &value.join(" "));
    }
    if let Some(leaf) = &state.leaf {
        if pids_in(fs, leaf).contains(&me()) {
            if let Err(e) = fs.write(&state.start.join("cgroup.procs"), &me().to_string()) {
                tracing::warn!(
                    "could not move back into {}: {e}; {} stays",
                    state.start.display(),
                    leaf.display()
                );
                return;
            }
        }
        let _ = fs.rmdir(leaf);
    }
    if state.beside {
        // Busy while another orchestrator or a left attempt uses it.
        let _ = fs.rmdir(&state.base);
    }
}

impl Drop for HomeRef {
    fn drop(&mut self) {
        let mut homes = HOMES.lock().unwrap_or_else(|e| e.into_inner());
        let Some(i) = homes.iter().position(|h| h.base == self.base) else {
            return;
        };
        homes[i].refs -= 1;
        if homes[i].refs == 0 {
            let state = homes.remove(i);
            restore(&state);
        }
    }
}

/// Put back every home of this process now (before `process::exit`, which runs no
/// destructor); later drops of their uses find nothing to do.
pub(crate) fn leave_all() {
    let mut homes = HOMES.lock().unwrap_or_else(|e| e.into_inner());
    for state in homes.drain(..) {
        restore(&state);
    }
}
