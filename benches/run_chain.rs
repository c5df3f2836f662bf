//! A chain of N trivial isolated steps against a bash loop running the same N
//! commands, in one run so the ratio is fair on a noisy machine (best of 3 each).
//! `cargo bench --bench run_chain` (target: at most 3x the loop at 500 steps, linear).
//! The same chain with a one-value matrix axis that every step reads shows what
//! expansion costs at run time (target: nothing; the `axis/plain` column).
//!
//! Records and work folders go to a temporary folder under `ORCHESTRATE_BENCH_DIR`
//! (default: the system temp dir). Each attempt creates four folders and two log
//! files; on a disk where inode creation is slow (ext4 without a journal after heavy
//! file churn, as on our VMs), compare with a tmpfs: `ORCHESTRATE_BENCH_DIR=/dev/shm`.

use std::fmt::Write as _;
use std::process::Command;
use std::time::Instant;

fn chain_plan(n: usize, axis: bool) -> String {
    let mut s = String::from("schema = \"orchestrate/plan/v1\"\nname = \"chain\"\n");
    if axis {
        s.push_str("[matrix]\nn = [1]\n");
    }
    for i in 0..n {
        if axis {
            let _ = write!(s, "[steps.s{i}]\nrun = [\"true\", \"${{matrix.n}}\"]\n");
        } else {
            let _ = write!(s, "[steps.s{i}]\nrun = [\"true\", \"1\"]\n");
        }
        if i > 0 {
            let _ = writeln!(s, "needs = [\"s{}\"]", i - 1);
        }
    }
    s
}

fn time<F: FnMut()>(mut f: F) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

fn main() {
    let dir = match std::env::var_os("ORCHESTRATE_BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base),
        None => tempfile::tempdir(),
    }
    .expect("tempdir");
    println!("records and work under {}", dir.path().display());
    let bin = env!("CARGO_BIN_EXE_orchestrate");
    println!(
        "{:>6} {:>10} {:>10} {:>7} {:>12} {:>10} {:>10}",
        "steps", "loop s", "orch s", "ratio", "orch ms/step", "axis s", "axis/plain"
    );
    for n in [100usize, 500, 1000] {
        let plan = dir.path().join(format!("chain{n}.toml"));
        std::fs::write(&plan, chain_plan(n, false)).expect("write plan");
        let axis_plan = dir.path().join(format!("chain{n}-axis.toml"));
        std::fs::write(&axis_plan, chain_plan(n, true)).expect("write plan");
        let script = format!("for i in $(seq {n}); do true; done");
        let mut best_loop = f64::MAX;
        let mut best_orch = f64::MAX;
        let mut best_axis = f64::MAX;
        let run = |plan: &std::path::Path| {
            let out = Command::new(bin)
                .arg("run")
                .arg(plan)
                .arg("--records")
                .arg(dir.path().join("records"))
                .args(["--progress", "quiet"])
                .output()
                .expect("orchestrate");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        for _ in 0..3 {
            best_loop = best_loop.min(time(|| {
                // `command true` would be a builtin; run the real binary like a step does.
                let s = script.replace("do true", "do /bin/true");
                let st = Command::new("bash")
                    .arg("-c")
                    .arg(&s)
                    .status()
                    .expect("bash");
                assert!(st.success());
            }));
            best_orch = best_orch.min(time(|| run(&plan)));
            best_axis = best_axis.min(time(|| run(&axis_plan)));
        }
        println!(
            "{n:>6} {best_loop:>10.3} {best_orch:>10.3} {:>7.2} {:>12.3} {best_axis:>10.3} {:>10.2}",
            best_orch / best_loop,
            best_orch * 1000.0 / n as f64,
            best_axis / best_orch
        );
    }
}
