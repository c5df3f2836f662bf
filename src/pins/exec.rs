//! Running an observation command (git, a tool's `--version`, a Python interpreter)
//! with a deadline, a clean environment and bounded output.
//!
//! Synchronous on purpose: `verify` runs before any async machinery exists and each
//! command is short. The child gets its own process group so a timeout kills the shell
//! *and* whatever it started; reader threads are abandoned (not joined) if an escaped
//! grandchild keeps a pipe open, so a hang can never block `verify`.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// What a finished command produced.
#[derive(Debug, Clone)]
pub(crate) struct Output {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Exit code, or `None` when ended by a signal.
    pub code: Option<i32>,
    /// True when a stream exceeded the byte limit and was cut.
    pub truncated: bool,
    /// With [`Spec::hash_stdout`]: sha256 of everything the command wrote to stdout
    /// (kept nowhere, whatever its size), and how many bytes.
    pub stdout_sha256: Option<(crate::digest::Sha256Digest, u64)>,
}

/// Why no output came back.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExecError {
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("`{program}` did not finish within {secs:.1} s and was killed")]
    TimedOut { program: String, secs: f64 },
    #[error("waiting for `{program}` failed: {source}")]
    Wait {
        program: String,
        source: std::io::Error,
    },
}

/// One command to run.
pub(crate) struct Spec<'a> {
    pub program: &'a str,
    pub args: &'a [String],
    pub cwd: Option<&'a Path>,
    /// The only environment the child sees, besides `PATH` (the orchestrator's folder
    /// first) and `HOME` (copied).
    pub env: &'a [(&'a str, &'a str)],
    pub timeout: Duration,
    /// Per stream; the rest is read and dropped.
    pub max_bytes: usize,
    /// Hash stdout as it streams instead of keeping it (a diff of any size, through
    /// a pipe: no temporary file for anyone to plant a link at).
    pub hash_stdout: bool,
}

/// Resolve a program written with a slash relative to `cwd` (std leaves the choice
/// between the parent's and the child's directory unspecified).
pub(crate) fn resolve_program(program: &str, cwd: Option<&Path>) -> PathBuf {
    let p = Path::new(program);
    match cwd {
        Some(dir) if program.contains('/') && p.is_relative() => dir.join(p),
        _ => p.to_path_buf(),
    }
}

pub(crate) fn run(spec: &Spec<'_>) -> Result<Output, ExecError> {
    let program = resolve_program(spec.program, spec.cwd);
    let mut cmd = Command::new(&program);
    cmd.args(spec.args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // PATH as the steps see it, the orchestrator's own folder first: a pin of
    // `kvsim --version` observes the kvsim the steps will run.
    if let Some(v) = crate::sys::path_with_tool_dir() {
        cmd.env("PATH", v);
    }
    if let Some(v) = std::env::var_os("HOME") {
        cmd.env("HOME", v);
    }
    for (k, v) in spec.env {
        cmd.env(k, v);
    }
    if let Some(dir) = spec.cwd {
        cmd.current_dir(dir);
    }
    let name = spec.program.to_string();
    let mut child = cmd.spawn().map_err(|source| ExecError::Spawn {
        program: name.clone(),
        source,
    })?;

    let (tx, rx) = mpsc::channel::<(usize, Vec<u8>, bool)>();
    let (htx, hrx) = mpsc::channel::<(crate::digest::Sha256Digest, u64)>();
    if let Some(out) = child.stdout.take() {
        if spec.hash_stdout {
            spawn_hasher(out, htx);
        } else {
            spawn_reader(0, out, spec.max_bytes, tx.clone());
        }
    }
    if let Some(err) = child.stderr.take() {
        spawn_reader(1, err, spec.max_bytes, tx.clone());
    }
    drop(tx);

    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(source) => {
                kill_group(child.id());
                let _ = child.wait();
                return Err(ExecError::Wait {
                    program: name,
                    source,
                });
            }
        }
        if start.elapsed() >= spec.timeout {
            kill_group(child.id());
            let _ = child.wait();
            return Err(ExecError::TimedOut {
                program: name,
                secs: spec.timeout.as_secs_f64(),
            });
        }
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    };
    // The leader exited; anything it left in its group goes too, so the pipes close.
    kill_group(child.id());

    let mut out = Output {
        stdout: Vec::new(),
        stderr: Vec::new(),
        code: status.code(),
        truncated: false,
        stdout_sha256: None,
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    if spec.hash_stdout {
        out.stdout_sha256 = hrx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .ok();
    }
    for _ in 0..(if spec.hash_stdout { 1 } else { 2 }) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((0, bytes, cut)) => {
                out.stdout = bytes;
                out.truncated |= cut;
            }
            Ok((_, bytes, cut)) => {
                out.stderr = bytes;
                out.truncated |= cut;
            }
            Err(_) => break,
        }
    }
    Ok(out)
}

fn spawn_reader<R: Read + Send + 'static>(
    which: usize,
    mut src: R,
    max: usize,
    tx: mpsc::Sender<(usize, Vec<u8>, bool)>,
) {
    thread::spawn(move || {
        let mut kept = Vec::new();
        let mut cut = false;
        let mut buf = [0u8; 8192];
        loop {
            match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let room = max.saturating_sub(kept.len());
                    if n > room {
                        cut = true;
                    }
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let _ = tx.send((which, kept, cut));
    });
}

fn spawn_hasher<R: Read + Send + 'static>(
    mut src: R,
    tx: mpsc::Sender<(crate::digest::Sha256Digest, u64)>,
) {
    thread::spawn(move || {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        let mut n = 0u64;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match src.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => {
                    h.update(&buf[..k]);
                    n += k as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // A stream that broke off is not a digest of the whole.
                Err(_) => return,
            }
        }
        let _ = tx.send((crate::digest::Sha256Digest(h.finalize().into()), n));
    });
}

fn kill_group(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        // ESRCH (group already gone) is the normal case after a clean exit.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(program: &'a str, args: &'a [String], timeout_ms: u64) -> Spec<'a> {
        Spec {
            program,
            args,
            cwd: None,
            env: &[("LANG", "C")],
            timeout: Duration::from_millis(timeout_ms),
            max_bytes: 16,
            hash_stdout: false,
        }
    }

    #[test]
    fn captures_both_streams_and_code() {
        let args = vec!["-c".to_string(), "echo out; echo err >&2; exit 3".into()];
        let o = run(&spec("sh", &args, 10_000)).unwrap();
        assert_eq!(o.stdout, b"out\n");
        assert_eq!(o.stderr, b"err\n");
        assert_eq!(o.code, Some(3));
        assert!(!o.truncated);
    }

    #[test]
    fn environment_is_clean() {
        std::env::set_var("ORCHESTRATE_PINS_LEAK_TEST", "1");
        let args = vec![
            "-c".to_string(),
            "echo ${ORCHESTRATE_PINS_LEAK_TEST:-none}".into(),
        ];
        let o = run(&spec("sh", &args, 10_000)).unwrap();
        assert_eq!(o.stdout, b"none\n");
    }

    #[test]
    fn output_is_bounded() {
        let args = vec!["-c".to_string(), "head -c 100000 /dev/zero".into()];
        let o = run(&spec("sh", &args, 10_000)).unwrap();
        assert_eq!(o.stdout.len(), 16);
        assert!(o.truncated);
    }

    #[test]
    fn a_hanging_group_is_killed() {
        // The shell's child holds the pipe: only a group kill lets us return.
        let args = vec!["-c".to_string(), "sleep 30 & sleep 30".into()];
        let e = run(&spec("sh", &args, 200)).unwrap_err();
        assert!(matches!(e, ExecError::TimedOut { .. }), "{e}");
    }
}
