//! Multi-node steps on the CI cluster's two nodes (two `slurmd` on this host, see
//! `.ci/slurm`): `[steps.X.slurm] nodes = 2` runs the command once on each node,
//! with the attempt's environment, under one attempt whose end Slurm's accounting
//! confirms ran on both; a task that fails ends the others.

use std::process::Command;
use std::time::Instant;

use super::slurm::{attempts, cluster, jobs_of, run, write, CLUSTER};
use crate::support::{assert_verifies, serial, shown, skip_or_fail, Need};

/// Whether the cluster has the two-node partition `multi` (else skipped, or
/// failed where the cluster is required).
fn two_nodes() -> bool {
    if !cluster() {
        return false;
    }
    let o = Command::new("sinfo")
        .args(["-h", "-p", "multi", "-o", "%D"])
        .output();
    let nodes: u32 = o
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(0);
    if nodes < 2 {
        skip_or_fail(
            Need::Slurm,
            "the cluster has no two-node partition `multi` (.ci/slurm start makes one)",
        );
        return false;
    }
    true
}

fn plan(shell: &str, outputs: &str) -> String {
    format!(
        r#"schema = "orchestrate/plan/v1"
name = "slurm-nodes"
[backend]
kind = "slurm"
[steps.shard]
timeout = "2m"
memory = "256MiB"
env = {{ SHARD_SECRET = "s3cr3t-shard-value" }}
shell = '''{shell}'''
outputs = [{outputs}]
[steps.shard.slurm]
nodes = 2
partition = "multi"
"#
    )
}

#[test]
fn a_two_node_step_runs_its_command_once_on_each_node() {
    if !two_nodes() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let shell = r#"echo "$SLURMD_NODENAME $SLURM_NTASKS $SHARD_SECRET $ORCHESTRATE_ATTEMPT" > ${out}/task-$SLURM_PROCID.txt
python3 -c "import os, time; b = b'x' * ((16 << 20) * (1 + int(os.environ['SLURM_PROCID']))); time.sleep(1)"
echo "task $SLURM_PROCID done""#;
    let p = write(
        t.path(),
        "plan.toml",
        &plan(shell, r#""${out}/task-0.txt", "${out}/task-1.txt""#),
    );
    let (dir, rec, out) = run(t.path(), &p, &[]);
    assert_eq!(rec["status"], "succeeded", "{}", shown(&out));
    let a = &attempts(&rec, "shard")[0];
    // One task on each node, each with the attempt's environment and canary.
    let out_dir = std::path::PathBuf::from(a["out"].as_str().unwrap());
    let mut nodes = Vec::new();
    for i in 0..2 {
        let line = std::fs::read_to_string(out_dir.join(format!("task-{i}.txt"))).unwrap();
        let w: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            w[1..],
            ["2", "s3cr3t-shard-value", a["canary"].as_str().unwrap()][..],
            "{line}"
        );
        nodes.push(w[0].to_string());
    }
    nodes.sort();
    assert_eq!(nodes, ["localhost", "node2"]);
    // Both tasks' words are in the attempt's log; the secret is in none of the
    // record's files.
    let log = std::fs::read_to_string(dir.join("steps/shard/1/stdout.log")).unwrap();
    assert!(
        log.contains("task 0 done") && log.contains("task 1 done"),
        "{log}"
    );
    // Confirmed by accounting, which saw the command's step on both nodes.
    let job = &a["job"];
    assert_eq!(job["state"], "COMPLETED", "{job}");
    assert_eq!(job["queried"], "sacct", "{job}");
    assert_eq!(job["node"], "localhost,node2", "{job}");
    let script = std::fs::read_to_string(dir.join(job["script"].as_str().unwrap())).unwrap();
    assert!(
        script.contains("'--nodes=2' '--ntasks=2' '--ntasks-per-node=1'")
            && script.contains("slurm-exec")
            && !script.contains("srun"),
        "{script}"
    );
    assert!(a["peak_memory_bytes"].as_u64().unwrap() > 16 << 20, "{a}");
    let grep = Command::new("grep")
        .args(["-rl", "--exclude=plan.toml", "s3cr3t-shard-value"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        grep.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&grep.stdout)
    );
    assert_verifies(&dir);
    assert!(jobs_of(rec["run_id"].as_str().unwrap()).is_empty());
}

#[test]
fn a_failed_task_ends_its_siblings_and_the_attempt() {
    if !two_nodes() {
        return;
    }
    let _c = serial(&CLUSTER);
    let t = tempfile::tempdir().unwrap();
    let shell = r#"if [ "$SLURM_PROCID" = 1 ]; then echo "task 1 fails" >&2; exit 3; fi
sleep 60; touch ${out}/task-0-slept"#;
    let p = write(t.path(), "plan.toml", &plan(shell, ""));
    let started = Instant::now();
    let (dir, rec, out) = run(t.path(), &p, &[]);
    let took = started.elapsed().as_secs_f64();
    assert_eq!(rec["status"], "failed", "{}", shown(&out));
    let a = &attempts(&rec, "shard")[0];
    assert_eq!(a["exit_code"], 3, "{a}");
    // Task 0 did not sleep its minute out: srun ended it with its sibling.
    assert!(took < 45.0, "the run took {took:.1} s");
    let out_dir = std::path::PathBuf::from(a["out"].as_str().unwrap());
    assert!(!out_dir.join("task-0-slept").exists());
    let err = std::fs::read_to_string(dir.join("steps/shard/1/stderr.log")).unwrap();
    assert!(err.contains("task 1 fails"), "{err}");
    assert!(jobs_of(rec["run_id"].as_str().unwrap()).is_empty());
    assert_verifies(&dir);
}
