//! Run ids sort by time: `YYYYMMDDTHHMMSSZ-xxxxxx` (UTC, then 6 random hex digits).

/// Length of every run id; cgroup names embed it at a fixed position.
pub const RUN_ID_LEN: usize = 23;

pub fn new_run_id() -> String {
    run_id_at(chrono::Utc::now())
}

fn run_id_at(now: chrono::DateTime<chrono::Utc>) -> String {
    let mut b = [0u8; 3];
    if getrandom::fill(&mut b).is_err() {
        // No entropy source: fall back to the clock's sub-second part and our pid.
        let n = now.timestamp_subsec_nanos() ^ std::process::id();
        b = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
    }
    format!(
        "{}-{:02x}{:02x}{:02x}",
        now.format("%Y%m%dT%H%M%SZ"),
        b[0],
        b[1],
        b[2]
    )
}

/// The run id inside a cgroup name `orchestrate-<run-id>-<step>-<attempt>`.
pub fn run_id_of_cgroup(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("orchestrate-")?;
    let id = rest.get(..RUN_ID_LEN)?;
    let ok = id.as_bytes().get(8) == Some(&b'T') && id.as_bytes().get(16) == Some(&b'-');
    ok.then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_and_order() {
        let a = new_run_id();
        assert_eq!(a.len(), RUN_ID_LEN);
        let name = format!("orchestrate-{a}-step-x-1");
        assert_eq!(run_id_of_cgroup(&name), Some(a.as_str()));
        assert_eq!(run_id_of_cgroup("orchestrate-short"), None);
        assert!("20261129T152300Z-000000" < "20261129T152301Z-000000");
        // Ids made a second apart sort by time, whatever their random parts.
        let t = chrono::Utc::now();
        for _ in 0..32 {
            let (early, late) = (run_id_at(t), run_id_at(t + chrono::Duration::seconds(1)));
            assert!(early < late, "{early} !< {late}");
            assert_eq!(early.len(), RUN_ID_LEN);
        }
    }
}
