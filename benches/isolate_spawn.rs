//! What isolation adds to one attempt: 500 isolated attempts of /bin/true (create and
//! configure cgroups, join before exec, wait, measure, remove) against 500 plain
//! tokio::process spawns of /bin/true with the same output files, interleaved in
//! rounds so machine load hits both alike. A third figure, plain spawns with a
//! `pre_exec` hook that only calls setsid, shows what fork costs over posix_spawn
//! (any `pre_exec` makes std fork); isolated attempts avoid it with a vfork-style clone
//! (src/isolate/spawn.rs). Target: at most 1.5 ms added per attempt. Run: `cargo bench --bench isolate_spawn` (as root, on a
//! machine with usable cgroups; otherwise it says why and measures nothing).

use std::time::{Duration, Instant};

use orchestrate::isolate::{AttemptSpec, Isolator, Mode};
use tokio::sync::watch;

const N: usize = 500;
const ROUNDS: usize = 5;
const WARMUP: usize = 20;

fn main() {
    let iso = match Isolator::new(Mode::Cgroup) {
        Ok(iso) => iso,
        Err(e) => {
            println!("isolate_spawn: skipped: {e}");
            return;
        }
    };
    let tmp = match tempfile::tempdir() {
        Ok(t) => t,
        Err(e) => {
            println!("isolate_spawn: no temp dir: {e}");
            return;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            println!("isolate_spawn: no runtime: {e}");
            return;
        }
    };
    let out = tmp.path().join("out");
    let err = tmp.path().join("err");

    let plain = |n: usize, hook: bool| -> Duration {
        rt.block_on(async {
            let start = Instant::now();
            for _ in 0..n {
                let (Ok(o), Ok(e)) = (std::fs::File::create(&out), std::fs::File::create(&err))
                else {
                    continue;
                };
                let mut cmd = tokio::process::Command::new("/bin/true");
                if hook {
                    // SAFETY: setsid is async-signal-safe.
                    unsafe {
                        cmd.pre_exec(|| {
                            libc::setsid();
                            Ok(())
                        });
                    }
                }
                let child = cmd
                    .env_clear()
                    .stdin(std::process::Stdio::null())
                    .stdout(o)
                    .stderr(e)
                    .spawn();
                if let Ok(mut c) = child {
                    let _ = c.wait().await;
                }
            }
            start.elapsed()
        })
    };
    let mut failures = 0usize;
    let mut isolated = |n: usize, tag: &str| -> Duration {
        rt.block_on(async {
            let start = Instant::now();
            for i in 0..n {
                let name = format!("orchestrate-bench{}-{tag}-{i}", std::process::id());
                let spec = AttemptSpec {
                    canary: name.clone(),
                    name,
                    argv: vec!["/bin/true".into()],
                    cwd: tmp.path().to_path_buf(),
                    env: Vec::new(),
                    memory: Some(256 << 20),
                    swap: false,
                    pids: Some(64),
                    cpus: None,
                    device_nodes: None,
                    gpus: Vec::new(),
                    npus: Vec::new(),
                    timeout: None,
                    grace: Duration::from_millis(100),
                    stdout: out.clone(),
                    stderr: err.clone(),
                    tee: false,
                    mask: None,
                };
                match iso.run(spec, watch::channel(None).1).await {
                    Ok(o) if o.succeeded() && o.leftovers.is_empty() => {}
                    _ => failures += 1,
                }
            }
            start.elapsed()
        })
    };

    plain(WARMUP, false);
    isolated(WARMUP, "warm");
    let (mut t_plain, mut t_hook, mut t_iso) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for r in 0..ROUNDS {
        t_plain += plain(N / ROUNDS, false);
        t_hook += plain(N / ROUNDS, true);
        t_iso += isolated(N / ROUNDS, &format!("r{r}"));
    }
    let per = |t: Duration| t.as_secs_f64() * 1e3 / N as f64;
    let info = iso.describe();
    println!(
        "isolate_spawn: cgroup v{} ({} hierarchies), {N} attempts of /bin/true",
        info.cgroup_version.unwrap_or(0),
        info.parents.len()
    );
    println!("  plain tokio spawn : {:.3} ms per attempt", per(t_plain));
    println!(
        "  plain + pre_exec  : {:.3} ms per attempt (fork instead of posix_spawn)",
        per(t_hook)
    );
    println!("  isolated attempt  : {:.3} ms per attempt", per(t_iso));
    println!(
        "  added by isolation: {:.3} ms per attempt (target <= 1.5 ms)",
        per(t_iso) - per(t_plain)
    );
    if failures > 0 {
        println!("  {failures} isolated attempts failed or left something behind");
    }
}
