//! Starting an attempt's main process without copying the orchestrator.
//!
//! Why not `Command::pre_exec`: any pre-exec hook makes std fork, and fork copies the
//! orchestrator's page tables, write-protects them (TLB shootdowns across its
//! threads) and makes its next writes fault, then the exec throws the copy away. On
//! these 2-core VMs that was the largest single cost of an attempt after the cgroup
//! work. Here the child is made the way posix_spawn makes one, `clone(CLONE_VM |
//! CLONE_VFORK)` on a small stack of its own, and does what the hook did: join the
//! attempt's cgroups by writing "0" to fds opened before the clone, start its own
//! session, then exec. Until the exec it shares our memory, so it runs nothing but
//! async-signal-safe system calls on data prepared beforehand, with every signal
//! blocked until its handlers are reset (all but glibc's two internal ones, which
//! glibc never lets a program block and whose handlers ignore other processes); the
//! calling thread sleeps meanwhile.
//!
//! A cpuset join before exec runs the kernel's cpuset attach against the address
//! space the child still shares with us (memory policy rebind, page migration when the
//! memory nodes differ); attempts get their parent's memory nodes, so nothing moves.
//!
//! The exit is noticed through SIGCHLD (tokio's signal driver) and collected with
//! `waitpid` on that one pid, which works on every kernel (no pidfd needed). The pid
//! cannot be reused before we reap it, and the orphan reaper never reaps registered
//! pids (see reaper.rs).

use std::ffi::{c_char, c_int, c_void, CString, OsStr};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};

use super::reaper;

/// The child's stack: it only makes system calls, so this is ample.
const STACK_BYTES: usize = 64 * 1024;
/// Highest signal number to reset in the child (the kernel's _NSIG is 64).
const LAST_SIGNAL: c_int = 64;
/// The PATH execvp uses when the environment has none.
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// What to start: all of it turned into C strings before the clone.
pub(crate) struct Request<'a> {
    pub argv: &'a [String],
    pub env: &'a [(String, String)],
    pub cwd: &'a Path,
    /// Descriptors that become the child's stdin, stdout and stderr.
    pub stdio: [RawFd; 3],
    /// Open cgroup join files; the child writes "0" to each before exec.
    pub join: &'a [RawFd],
}

/// Everything the child needs, prepared before the clone; the child writes back
/// where it stopped when it could not exec (the memory is shared until exec).
#[repr(C)]
struct ChildArgs {
    candidates: *const *const c_char,
    /// `/bin/sh <slot> args...`, for a file the kernel cannot run (ENOEXEC: a script
    /// without `#!`), as execvp does; the child puts the candidate in slot 1.
    sh_argv: *mut *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    stdio: [RawFd; 3],
    join: *const RawFd,
    njoin: usize,
    failed_step: c_int,
    failed_errno: c_int,
}

const STEP_STDIO: c_int = 1;
const STEP_CWD: c_int = 2;
const STEP_JOIN: c_int = 3;
const STEP_SETSID: c_int = 4;
const STEP_EXEC: c_int = 5;

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a NUL byte in an argument, the environment or the working directory",
        )
    })
}

/// Paths execve tries, in order: the program itself when it names a path, else each
/// PATH entry that holds a file of that name (execvp's search, done here so the child
/// makes no failing execve calls).
fn candidates(program: &str, env: &[(String, String)], cwd: &Path) -> io::Result<Vec<CString>> {
    if program.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    if program.contains('/') {
        return Ok(vec![cstring(program.as_bytes())?]);
    }
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map_or(DEFAULT_PATH, |(_, v)| v.as_str());
    let mut out = Vec::new();
    for dir in path.split(':') {
        let dir = if dir.is_empty() { "." } else { dir };
        let full = Path::new(dir).join(program);
        // A relative PATH entry is relative to the child's working directory.
        let seen = if full.is_relative() {
            cwd.join(&full)
        } else {
            full.clone()
        };
        if seen.is_file() {
            out.push(cstring(full.as_os_str().as_bytes())?);
        }
    }
    if out.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    Ok(out)
}

fn pointers(strings: &[CString]) -> Vec<*const c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The child, from clone to exec. It shares our memory and our thread's TLS (errno),
/// so it calls only async-signal-safe functions, allocates nothing and cannot panic.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the ChildArgs the parent keeps alive until we exec or exit
    // (CLONE_VFORK); every pointer in it is valid and NUL-terminated as built by
    // `spawn`; all calls below are async-signal-safe system call wrappers.
    unsafe {
        let a = arg.cast::<ChildArgs>();
        let fail = |step: c_int| -> ! {
            (*a).failed_errno = *libc::__errno_location();
            (*a).failed_step = step;
            libc::_exit(127)
        };
        // A handler of ours must never run here (shared memory), nor be inherited:
        // reset every installed handler while all signals are blocked. SIGPIPE goes
        // back to default too (Rust ignores it; programs expect to die of it).
        for sig in 1..=LAST_SIGNAL {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            if old.sa_sigaction != libc::SIG_DFL
                && (old.sa_sigaction != libc::SIG_IGN || sig == libc::SIGPIPE)
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        for (target, &fd) in (*a).stdio.iter().enumerate() {
            let target = target as c_int;
            let ok = if fd == target {
                // dup2 onto itself keeps FD_CLOEXEC: clear it instead.
                libc::fcntl(fd, libc::F_SETFD, 0) == 0
            } else {
                libc::dup2(fd, target) == target
            };
            if !ok {
                fail(STEP_STDIO);
            }
        }
        if libc::chdir((*a).cwd) != 0 {
            fail(STEP_CWD);
        }
        for i in 0..(*a).njoin {
            let fd = *(*a).join.add(i);
            // A signal may interrupt the join (EINTR): write again.
            loop {
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                if n == 1 {
                    break;
                }
                if n < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                fail(STEP_JOIN);
            }
        }
        if libc::setsid() < 0 {
            fail(STEP_SETSID);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        // execvp's rules: a later candidate may still run; report EACCES over ENOENT;
        // a file the kernel cannot run goes to /bin/sh, and the search stops there.
        let mut errno = libc::ENOENT;
        let mut i = 0;
        while !(*(*a).candidates.add(i)).is_null() {
            libc::execve(*(*a).candidates.add(i), (*a).argv, (*a).envp);
            let e = *libc::__errno_location();
            if e == libc::ENOEXEC {
                *(*a).sh_argv.add(1) = *(*a).candidates.add(i);
                libc::execve(*(*a).sh_argv, (*a).sh_argv, (*a).envp);
                errno = *libc::__errno_location();
                break;
            }
            if e != libc::ENOENT && e != libc::ENOTDIR {
                errno = e;
            }
            i += 1;
        }
        *libc::__errno_location() = errno;
        fail(STEP_EXEC)
    }
}

/// Start the process; returns its pid once it has exec'd.
pub(crate) fn spawn(req: &Request<'_>) -> io::Result<i32> {
    let program = req.argv.first().map(String::as_str).unwrap_or_default();
    let candidates = candidates(program, req.env, req.cwd)?;
    let argv: Vec<CString> = req
        .argv
        .iter()
        .map(|a| cstring(a.as_bytes()))
        .collect::<io::Result<_>>()?;
    let envp: Vec<CString> = req
        .env
        .iter()
        .map(|(k, v)| {
            let mut kv = Vec::with_capacity(k.len() + v.len() + 1);
            kv.extend_from_slice(k.as_bytes());
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            cstring(&kv)
        })
        .collect::<io::Result<_>>()?;
    let cwd = cstring(OsStr::as_bytes(req.cwd.as_os_str()))?;
    let (cand_p, argv_p, envp_p) = (pointers(&candidates), pointers(&argv), pointers(&envp));
    let mut sh_argv: Vec<*const c_char> = [c"/bin/sh".as_ptr(), std::ptr::null()]
        .into_iter()
        .chain(argv_p.iter().skip(1).copied())
        .collect();
    let mut args = ChildArgs {
        candidates: cand_p.as_ptr(),
        sh_argv: sh_argv.as_mut_ptr(),
        argv: argv_p.as_ptr(),
        envp: envp_p.as_ptr(),
        cwd: cwd.as_ptr(),
        stdio: req.stdio,
        join: req.join.as_ptr(),
        njoin: req.join.len(),
        failed_step: 0,
        failed_errno: 0,
    };
    // u128 keeps the stack 16-byte aligned, as the x86-64 and aarch64 ABIs require.
    let mut stack = vec![0u128; STACK_BYTES / 16];
    let args_ptr: *mut ChildArgs = &mut args;
    // SAFETY: the stack and args outlive the child's use of them (CLONE_VFORK returns
    // only after its exec or exit); signals are blocked around the clone so that no
    // handler of ours runs on the child's stack, and restored right after.
    let (pid, clone_err, failed_step, failed_errno) = unsafe {
        let top = stack.as_mut_ptr().add(stack.len()).cast::<c_void>();
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child_main,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            args_ptr.cast(),
        );
        let clone_err = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        (
            pid,
            clone_err,
            std::ptr::read_volatile(&(*args_ptr).failed_step),
            std::ptr::read_volatile(&(*args_ptr).failed_errno),
        )
    };
    drop(stack);
    if pid < 0 {
        return Err(clone_err);
    }
    if failed_step != 0 {
        let mut status = 0;
        // SAFETY: our own child, which has exited; reap it so it leaves no zombie.
        let _ = crate::sys::cvt(|| unsafe { libc::waitpid(pid, &mut status, 0) });
        let source = io::Error::from_raw_os_error(failed_errno);
        let what = match failed_step {
            STEP_STDIO => "redirecting stdio",
            STEP_CWD => "changing to the working directory",
            STEP_JOIN => "joining the attempt's cgroups",
            STEP_SETSID => "starting a session",
            _ => return Err(source),
        };
        return Err(io::Error::new(source.kind(), format!("{what}: {source}")));
    }
    Ok(pid)
}

/// A started main process, waited for through SIGCHLD and `waitpid` on its pid.
/// Dropped before its exit was seen, it is handed to the orphan reaper (it runs in a
/// session of its own), so it never stays a zombie.
pub(crate) struct Child {
    pid: i32,
    status: Option<ExitStatus>,
    sigchld: Signal,
}

impl Child {
    /// Listen for SIGCHLD first, so that an exit right after the spawn is not missed.
    pub(crate) fn listener() -> io::Result<Signal> {
        signal(SignalKind::child())
    }

    pub(crate) fn new(pid: i32, sigchld: Signal) -> Child {
        Child {
            pid,
            status: None,
            sigchld,
        }
    }

    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }

    /// The exit status if the process has ended (reaping it).
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(st) = self.status {
            return Ok(Some(st));
        }
        let mut raw = 0;
        // SAFETY: waitpid on our own unreaped child, without blocking.
        let rc = crate::sys::cvt(|| unsafe { libc::waitpid(self.pid, &mut raw, libc::WNOHANG) })?;
        if rc == self.pid {
            let st = ExitStatus::from_raw(raw);
            self.status = Some(st);
            Ok(Some(st))
        } else {
            Ok(None)
        }
    }

    /// Wait for the exit (cancel-safe: it only polls and sleeps on SIGCHLD).
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(st) = self.try_wait()? {
                return Ok(st);
            }
            if self.sigchld.recv().await.is_none() {
                // The signal driver is gone (runtime shutting down): poll instead.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.try_wait();
        reaper::unregister(self.pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_search_finds_existing_files_only() {
        let env = vec![("PATH".to_string(), "/nonexistent:/bin:/usr/bin".to_string())];
        let c = candidates("sh", &env, Path::new("/")).unwrap();
        assert!(!c.is_empty());
        assert!(c.iter().all(|p| p.to_bytes().ends_with(b"/sh")));
        assert!(!c.iter().any(|p| p.to_bytes().starts_with(b"/nonexistent")));
        let e = candidates("no-such-program-xyz", &env, Path::new("/")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        // A name with a slash is used as given, relative to the working directory.
        let c = candidates("./run.sh", &env, Path::new("/")).unwrap();
        assert_eq!(c, vec![CString::new("./run.sh").unwrap()]);
        assert!(cstring(b"a\0b").is_err());
    }
}
