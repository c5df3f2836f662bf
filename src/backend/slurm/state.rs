//! What Slurm says of a job, and what that means for the attempt. The outcome
//! follows Slurm's state first: `OUT_OF_MEMORY` with exit code 0 is an OOM kill,
//! never a success; a job Slurm no longer knows is lost.

use crate::isolate::Termination;

/// A job's state as `squeue -o %T`, `scontrol` and `sacct` write it. Slurm adds
/// states over its versions: one this code does not know is kept as `Other`, and
/// read as neither final nor running (the job is asked about again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JobState {
    Pending,
    Running,
    Completing,
    Configuring,
    StageOut,
    Signaling,
    Suspended,
    Requeued,
    Completed,
    Failed,
    Cancelled,
    Timeout,
    OutOfMemory,
    NodeFail,
    BootFail,
    Preempted,
    Deadline,
    SpecialExit,
    Revoked,
    /// A job the controller no longer knows.
    Unknown,
    Other(String),
}

/// Every named state with Slurm's word for it.
const NAMED: &[(JobState, &str)] = &[
    (JobState::Pending, "PENDING"),
    (JobState::Running, "RUNNING"),
    (JobState::Completing, "COMPLETING"),
    (JobState::Configuring, "CONFIGURING"),
    (JobState::StageOut, "STAGE_OUT"),
    (JobState::Signaling, "SIGNALING"),
    (JobState::Suspended, "SUSPENDED"),
    (JobState::Requeued, "REQUEUED"),
    (JobState::Completed, "COMPLETED"),
    (JobState::Failed, "FAILED"),
    (JobState::Cancelled, "CANCELLED"),
    (JobState::Timeout, "TIMEOUT"),
    (JobState::OutOfMemory, "OUT_OF_MEMORY"),
    (JobState::NodeFail, "NODE_FAIL"),
    (JobState::BootFail, "BOOT_FAIL"),
    (JobState::Preempted, "PREEMPTED"),
    (JobState::Deadline, "DEADLINE"),
    (JobState::SpecialExit, "SPECIAL_EXIT"),
    (JobState::Revoked, "REVOKED"),
    (JobState::Unknown, "UNKNOWN"),
];

impl JobState {
    /// `CANCELLED by 0` and `CANCELLED+` are `CANCELLED`.
    pub(crate) fn parse(s: &str) -> JobState {
        let head = s
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_end_matches('+')
            .to_ascii_uppercase();
        NAMED
            .iter()
            .find(|(_, w)| *w == head)
            .map_or(JobState::Other(head), |(st, _)| st.clone())
    }

    /// Slurm's word for it, as the record keeps it.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            JobState::Other(s) => s,
            named => NAMED
                .iter()
                .find(|(st, _)| st == named)
                .map_or("", |(_, w)| w),
        }
    }

    /// The job will not run again: its outcome can be read.
    pub(crate) fn is_final(&self) -> bool {
        use JobState::*;
        matches!(
            self,
            Completed
                | Failed
                | Cancelled
                | Timeout
                | OutOfMemory
                | NodeFail
                | BootFail
                | Preempted
                | Deadline
                | SpecialExit
                | Revoked
        )
    }

    /// It holds its allocation (the attempt's clock runs).
    pub(crate) fn is_running(&self) -> bool {
        use JobState::*;
        matches!(
            self,
            Running | Completing | Configuring | StageOut | Signaling
        )
    }

    /// How a final state ends the attempt; `None` for a state that leaves it to
    /// the exit code (`COMPLETED`, `FAILED`).
    pub(crate) fn termination(&self) -> Option<Termination> {
        use JobState::*;
        Some(match self {
            OutOfMemory => Termination::OomKilled,
            Timeout | Deadline => Termination::TimedOut,
            Cancelled | Revoked => Termination::Cancelled,
            NodeFail | BootFail => Termination::NodeFailed,
            Preempted => Termination::Preempted,
            Completed | Failed | SpecialExit => return None,
            _ => Termination::Lost,
        })
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

pub(crate) use crate::contract::job::exit_code_parts as exit_code;

/// `MaxRSS` as sacct writes it (`1234K`, `12M`, `1.5G`, bytes without a unit).
pub(crate) fn rss_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let (num, mul) = match s.as_bytes()[s.len() - 1] {
        b'K' | b'k' => (&s[..s.len() - 1], 1u64 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        b'T' | b't' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let v: f64 = num.parse().ok()?;
    (v >= 0.0).then_some((v * mul as f64) as u64)
}

/// `[D-]HH:MM:SS`, `MM:SS` or `MM:SS.mmm` as Slurm writes elapsed times: seconds.
pub(crate) fn elapsed_secs(s: &str) -> Option<f64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<f64>().ok()?, r),
        None => (0.0, s),
    };
    let parts: Vec<f64> = rest
        .split(':')
        .map(|p| p.parse::<f64>().ok())
        .collect::<Option<_>>()?;
    let secs = match parts.as_slice() {
        [h, m, s] => h * 3600.0 + m * 60.0 + s,
        [m, s] => m * 60.0 + s,
        [s] => *s,
        _ => return None,
    };
    Some(days * 86_400.0 + secs)
}

/// The squeue fields every query asks for, after id, state and nodes: the exit
/// code (raw wait status), why a job waits, whose it is, and its comment.
pub(crate) const SQUEUE_FIELDS: &str =
    "JobArrayID:|,State:|,NodeList:|,exit_code:|,Reason:|,UserName:|,Comment:|";
/// The same without the exit code (squeue before 21.08).
pub(crate) const SQUEUE_PLAIN: &str = "%i|%T|%N||%r|%u|%k";

/// One job's line of `squeue -h -O` [`SQUEUE_FIELDS`] (or `-o` [`SQUEUE_PLAIN`],
/// without the exit code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueLine {
    pub id: String,
    pub state: JobState,
    pub nodes: String,
    /// Slurm's `ExitCode` form (`3:0`), from the raw wait status squeue gives.
    pub exit_code: Option<String>,
    /// Why it is pending (`JobHeldUser`, `Resources`), `None` for none.
    pub reason: Option<String>,
    pub user: String,
    pub comment: String,
}

pub(crate) fn squeue_line(line: &str) -> Option<QueueLine> {
    let mut it = line.split('|');
    let id = it.next()?.trim();
    let state = it.next()?.trim();
    let nodes = it.next().unwrap_or("").trim();
    // A job, an array's task (`12_3`), or an array's pending tasks (`12_[4-9%2]`).
    super::ids::expand(id)?;
    let exit_code = it
        .next()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .map(|w| format!("{}:{}", (w >> 8) & 0xff, w & 0x7f));
    let mut text = || it.next().unwrap_or("").trim().to_string();
    let reason = Some(text()).filter(|r| !r.is_empty() && r != "None" && r != "(null)");
    let user = text();
    let comment = text();
    Some(QueueLine {
        id: id.to_string(),
        state: JobState::parse(state),
        nodes: nodes.to_string(),
        exit_code,
        reason,
        user,
        comment,
    })
}

/// One job as `sacct -n -P --format=JobIDRaw,State,ExitCode,DerivedExitCode,MaxRSS,
/// Elapsed,NodeList` tells it: the allocation's line has the state, its steps'
/// lines MaxRSS.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Acct {
    pub state: String,
    pub exit_code: String,
    pub derived_exit_code: String,
    pub elapsed: String,
    pub node: String,
    pub max_rss: Option<u64>,
    /// Why it waits (`JobHeldUser`), while it is pending.
    pub reason: String,
    pub user: String,
    pub name: String,
    pub comment: String,
    /// When the job ended (`2026-12-06T13:58:25`, the controller's local time).
    pub end: String,
    /// The most nodes any step of the job's own (not `batch`, not `extern`) ran
    /// on: where a multi-node step's command did run.
    pub step_nodes: Option<u32>,
}

pub(crate) const SACCT_FORMAT: &str =
    "--format=JobID,State,ExitCode,DerivedExitCode,MaxRSS,Elapsed,NodeList,Reason,User,JobName,Comment,End,NNodes";

/// Each job and array task `sacct` lists, by id (`12`, `12_3`): an array's tasks
/// still pending, listed as one compact line (`12_[4-9%2]`), each get its word
/// unless a line of their own says more.
pub(crate) fn sacct_jobs(text: &str) -> std::collections::HashMap<String, Acct> {
    let mut out = sacct_lines(text);
    let compact: Vec<String> = out.keys().filter(|k| k.contains('[')).cloned().collect();
    for c in compact {
        let Some(a) = out.remove(&c) else { continue };
        for id in super::ids::expand(&c).unwrap_or_default() {
            out.entry(id).or_insert_with(|| a.clone());
        }
    }
    out
}

fn sacct_lines(text: &str) -> std::collections::HashMap<String, Acct> {
    let mut out: std::collections::HashMap<String, Acct> = Default::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let (Some(jid), Some(state)) = (f.first(), f.get(1)) else {
            continue;
        };
        let (job, is_step) = match jid.split_once('.') {
            Some((j, _)) => (j, true),
            None => (*jid, false),
        };
        if super::ids::expand(job).is_none() {
            continue;
        }
        let a = out.entry(job.to_string()).or_default();
        if let Some(rss) = f.get(4).and_then(|r| rss_bytes(r)) {
            a.max_rss = Some(a.max_rss.map_or(rss, |m| m.max(rss)));
        }
        let step = jid.split_once('.').map(|(_, s)| s);
        if step.is_some_and(|s| s != "batch" && s != "extern") {
            if let Some(n) = f.get(12).and_then(|n| n.trim().parse::<u32>().ok()) {
                a.step_nodes = Some(a.step_nodes.map_or(n, |m| m.max(n)));
            }
        }
        if !is_step {
            let at = |i: usize| f.get(i).unwrap_or(&"").trim().to_string();
            a.state = state.to_string();
            a.exit_code = at(2);
            a.derived_exit_code = at(3);
            a.elapsed = at(5);
            a.node = at(6);
            a.reason = at(7);
            a.user = at(8);
            a.name = at(9);
            a.comment = at(10);
            a.end = at(11);
        }
    }
    out
}

/// `scontrol show job -o ID`: its `Key=Value` fields.
pub(crate) fn scontrol_fields(text: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for tok in text.split_whitespace() {
        if let Some((k, v)) = tok.split_once('=') {
            out.entry(k.to_string()).or_insert_with(|| v.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_decides_before_the_exit_code() {
        let t = |s: &str| JobState::parse(s).termination();
        assert_eq!(t("OUT_OF_MEMORY"), Some(Termination::OomKilled));
        assert_eq!(t("TIMEOUT"), Some(Termination::TimedOut));
        assert_eq!(t("CANCELLED by 0"), Some(Termination::Cancelled));
        assert_eq!(t("CANCELLED+"), Some(Termination::Cancelled));
        assert_eq!(t("NODE_FAIL"), Some(Termination::NodeFailed));
        assert_eq!(t("PREEMPTED"), Some(Termination::Preempted));
        assert_eq!(t("UNKNOWN"), Some(Termination::Lost));
        assert_eq!(t("COMPLETED"), None);
        assert_eq!(t("FAILED"), None);
        assert!(JobState::parse("OUT_OF_MEMORY").is_final());
        assert!(!JobState::parse("PENDING").is_final());
        assert!(!JobState::parse("COMPLETING").is_final());
        assert!(JobState::parse("COMPLETING").is_running());
    }

    #[test]
    fn slurm_numbers_parse() {
        assert_eq!(exit_code("0:125"), (Some(0), Some(125)));
        assert_eq!(exit_code("2:0"), (Some(2), None));
        assert_eq!(exit_code("garbage"), (None, None));
        assert_eq!(rss_bytes("1024K"), Some(1 << 20));
        assert_eq!(rss_bytes("1.5G"), Some(3 << 29));
        assert_eq!(rss_bytes("77"), Some(77));
        assert_eq!(rss_bytes(""), None);
        assert_eq!(rss_bytes("-1K"), None);
        let q = squeue_line("12|RUNNING|localhost").unwrap();
        assert_eq!(
            (
                q.id.as_str(),
                q.state.as_str(),
                q.nodes.as_str(),
                q.exit_code
            ),
            ("12", "RUNNING", "localhost", None)
        );
        // squeue -O exit_code is the raw wait status: 768 is `exit 3`, 9 SIGKILL.
        assert_eq!(
            squeue_line("13|FAILED|localhost|768|").unwrap().exit_code,
            Some("3:0".into())
        );
        assert_eq!(
            squeue_line("14|CANCELLED|localhost|9|").unwrap().exit_code,
            Some("0:9".into())
        );
        let a = sacct_jobs(
            "15|OUT_OF_MEMORY|0:125|0:0||00:00:02|localhost\n15.batch|OUT_OF_MEMORY|0:125||2048K|00:00:02|localhost\n15.0|OUT_OF_MEMORY|0:125||70M|00:00:01|localhost\nJobIDRaw|State\n",
        );
        assert_eq!(a.len(), 1);
        assert_eq!(a["15"].state, "OUT_OF_MEMORY");
        assert_eq!(a["15"].exit_code, "0:125");
        assert_eq!(a["15"].derived_exit_code, "0:0");
        assert_eq!(a["15"].elapsed, "00:00:02");
        assert_eq!(a["15"].max_rss, Some(70 << 20));
        assert_eq!(squeue_line("JOBID|STATE"), None);
        let f = scontrol_fields(
            "JobId=5 JobState=OUT_OF_MEMORY Reason=OutOfMemory ExitCode=0:125 NodeList=localhost",
        );
        assert_eq!(f["JobState"], "OUT_OF_MEMORY");
        assert_eq!(f["ExitCode"], "0:125");
    }

    #[test]
    fn a_multi_node_step_s_nodes_are_read_from_its_own_steps_only() {
        // As sacct 22.05 wrote a two-node job whose command ran on both nodes.
        let line = |id: &str, rss: &str, nodes: &str| {
            format!("{id}|COMPLETED|0:0|0:0|{rss}|00:00:03|localhost,node2|None|root|r|s/1|2026-12-06T21:07:43|{nodes}\n")
        };
        let text =
            line("3", "", "2") + &line("3.batch", "6012K", "1") + &line("3.0", "47968K", "2");
        let a = sacct_jobs(&text);
        assert_eq!(a["3"].step_nodes, Some(2));
        assert_eq!(a["3"].max_rss, Some(47968 << 10));
        // The allocation's two nodes are no proof: only a step's are.
        let alone = line("4", "", "2") + &line("4.batch", "6012K", "1") + &line("4.0", "1M", "1");
        assert_eq!(sacct_jobs(&alone)["4"].step_nodes, Some(1));
        assert_eq!(sacct_jobs(&line("5", "", "2"))["5"].step_nodes, None);
    }

    #[test]
    fn an_array_s_tasks_are_read_each_on_its_own() {
        // As sacct 22.05 wrote them for an array of six at %2: two done, two
        // running, the rest pending on one compact line.
        let a = sacct_jobs(
            "1_0|COMPLETED|0:0|0:0||00:00:01|localhost|None|root|r|orchestrate-array:1-ab|2026-12-06T13:58:25\n1_0.batch|COMPLETED|0:0||1024K|00:00:01|localhost\n1_2|RUNNING|0:0|0:0||00:00:00|localhost|None|root|r||Unknown\n1_[2-5%2]|PENDING|0:0|0:0||00:00:00|None assigned|JobArrayTaskLimit|root|r||Unknown\n",
        );
        assert_eq!(a.len(), 5, "{a:?}");
        assert_eq!(a["1_0"].state, "COMPLETED");
        assert_eq!(a["1_0"].end, "2026-12-06T13:58:25");
        assert_eq!(a["1_0"].max_rss, Some(1 << 20));
        // A task's own line says more than the compact one it left.
        assert_eq!(a["1_2"].state, "RUNNING");
        for t in ["1_3", "1_4", "1_5"] {
            assert_eq!(a[t].state, "PENDING");
            assert_eq!(a[t].reason, "JobArrayTaskLimit");
        }
        let q = squeue_line("7_[4-5%2]|PENDING||0|JobArrayTaskLimit|root|orchestrate-array:1-ab|")
            .unwrap();
        assert_eq!(q.id, "7_[4-5%2]");
        assert_eq!(squeue_line("7_[x]|PENDING|"), None);
    }
}
