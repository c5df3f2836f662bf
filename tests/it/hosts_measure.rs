//! One plan (`tests/fixtures/plans/measure.toml`) measured on cgroup v1 (this host)
//! and on cgroup v2 (`.ci/v2guest`, stage `root-measure`): the two records agree on
//! how every step ended, OOM kills, peak memory and CPU time. The v2 record is the
//! one the guest just wrote when `ORCHESTRATE_V2_RECORDS` names its records folder
//! (CI), else the one it wrote when this test was made
//! (`tests/fixtures/records/measure-v2.json`, a real record of the guest).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{cli, project, shown, skip_or_fail, Need};

fn v2_record() -> (Value, String) {
    let (path, whence) = match std::env::var_os("ORCHESTRATE_V2_RECORDS") {
        Some(dir) => {
            let dirs = crate::support::record_dirs(Path::new(&dir));
            let last = dirs
                .last()
                .unwrap_or_else(|| panic!("no record in {}", Path::new(&dir).display()))
                .join("record.json");
            (last, "the guest's run now")
        }
        None => (
            project("tests/fixtures/records/measure-v2.json"),
            "the guest's recorded run",
        ),
    };
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (serde_json::from_slice(&text).unwrap(), whence.to_string())
}

use crate::support::first_attempt as attempt;

fn cpu_ms(a: &Value) -> f64 {
    a["cpu_user_ms"].as_f64().unwrap_or(f64::NAN) + a["cpu_system_ms"].as_f64().unwrap_or(0.0)
}

fn within(a: f64, b: f64, ratio: f64) -> bool {
    a > 0.0 && b > 0.0 && a / b <= ratio && b / a <= ratio
}

#[test]
fn a_v1_and_a_v2_record_of_one_plan_agree() {
    let _host = crate::support::host_shared();
    if !crate::support::is_root() || !Path::new("/sys/fs/cgroup/memory/tasks").exists() {
        skip_or_fail(Need::Cgroups, "not root on a cgroup v1 host");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = cli()
        .arg("run")
        .arg(project("tests/fixtures/plans/measure.toml"))
        .arg("--records")
        .arg(tmp.path().join("records"))
        .args(["--progress", "plain", "--keep-going"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "steps fail on purpose: {}",
        shown(&out)
    );
    let dirs: Vec<PathBuf> = crate::support::record_dirs(&tmp.path().join("records"));
    let v1: Value =
        serde_json::from_slice(&std::fs::read(dirs[0].join("record.json")).unwrap()).unwrap();
    let (v2, whence) = v2_record();
    let version = |r: &Value| r["run"]["isolation"]["info"]["cgroup_version"].as_u64();
    assert_eq!(version(&v1), Some(1));
    assert_eq!(version(&v2), Some(2), "{whence}");

    let mut differ = Vec::new();
    for step in ["spin", "touch", "oom", "slow", "fails"] {
        let (a, b) = (attempt(&v1, step), attempt(&v2, step));
        for k in ["termination", "exit_code"] {
            if a[k] != b[k] {
                differ.push(format!("{step}.{k}: v1 {} v2 {}", a[k], b[k]));
            }
        }
        for k in ["memory", "swap_off", "pids"] {
            if a["enforcement"][k] != true || b["enforcement"][k] != true {
                differ.push(format!("{step}: {k} not enforced on both"));
            }
        }
    }
    // CPU time counts the whole tree (the loop runs in a grandchild) and never
    // exceeds one CPU's worth of wall time; an idle step's share stays well below the
    // busy one's. The loop's share depends on what else the machine runs, and under
    // emulation starting `sh` and `sleep` costs a few hundred ms: shares, never
    // absolute figures.
    for (name, r) in [("v1", &v1), ("v2", &v2)] {
        let share = |step: &str| {
            let a = attempt(r, step);
            let (cpu, wall) = (cpu_ms(a), a["wall_ms"].as_f64().unwrap_or(0.0));
            (cpu, wall, if wall > 0.0 { cpu / wall } else { f64::NAN })
        };
        let (cpu, wall, busy) = share("spin");
        if !(busy >= 0.15 && cpu <= 1.1 * wall + 50.0) {
            differ.push(format!(
                "{name} spin: {cpu} ms of CPU in {wall} ms (one busy thread)"
            ));
        }
        let (cpu, wall, idle) = share("slow");
        if !(idle <= 0.35 && idle + 0.1 < busy) {
            differ.push(format!(
                "{name} slow: {cpu} ms of CPU in {wall} ms (asleep; the busy step's share {busy:.2})"
            ));
        }
    }
    let (a, b) = (attempt(&v1, "touch"), attempt(&v2, "touch"));
    let peak = |a: &Value| a["peak_memory_bytes"].as_f64().unwrap_or(0.0);
    let (pa, pb) = (peak(a), peak(b));
    let mib = |b: f64| b / f64::from(1 << 20);
    if pa < f64::from(48 << 20) || pb < f64::from(48 << 20) || !within(pa, pb, 1.35) {
        differ.push(format!(
            "touch peak memory: v1 {:.1} MiB, v2 {:.1} MiB (48 MiB written)",
            mib(pa),
            mib(pb)
        ));
    }
    for r in [&v1, &v2] {
        let oom = attempt(r, "oom");
        if oom["oom_kills"].as_u64().unwrap_or(0) < 1 {
            differ.push(format!("oom: no OOM kill counted: {oom}"));
        }
        if peak(oom) > f64::from(96 << 20) {
            differ.push(format!(
                "oom: peak {:.1} MiB above the limit",
                mib(peak(oom))
            ));
        }
    }
    assert_eq!(attempt(&v1, "oom")["termination"], "oom_killed");
    assert_eq!(attempt(&v1, "slow")["termination"], "timed_out");
    assert_eq!(attempt(&v1, "fails")["exit_code"], 3);
    assert!(
        differ.is_empty(),
        "v1 and v2 ({whence}) differ:\n{}",
        differ.join("\n")
    );
}
