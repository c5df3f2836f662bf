//! The cluster's own limits on what one user may submit: `MaxArraySize` (the
//! controller's configuration), the user's `MaxSubmitJobs` (their association,
//! then their QOS), and how many of the user's jobs are already queued. A run
//! keeps under them instead of learning them from refusals; a refusal for a
//! submit limit (someone else's jobs came meanwhile) is waited out, never a
//! step's failure.

/// Slurm's default `MaxArraySize`.
pub(crate) const DEFAULT_MAX_ARRAY: usize = 1001;

/// What the cluster lets this user submit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The most tasks one array may have (indices `0..max_array`).
    pub max_array: usize,
    /// The most jobs (each array task counts) the user may have queued or
    /// running at once, and where that limit was read; `None` for no limit.
    pub max_submit: Option<(usize, String)>,
}

/// What sbatch's refusal says: a submit limit that waiting will lift, or not.
pub(crate) fn is_submit_limit(stderr: &str) -> bool {
    [
        "MaxSubmitJob",
        "AssocMaxSubmitJobLimit",
        "QOSMaxSubmitJobPerUserLimit",
        "QOSMaxSubmitJobPerAccountLimit",
        "job submit limit",
        "Invalid job array specification",
        "MaxJobCount",
        "Slurm temporarily unable to accept job",
    ]
    .iter()
    .any(|t| stderr.contains(t))
}

/// `MaxArraySize` from `scontrol show config`'s text.
pub(crate) fn max_array_of(config: &str) -> Option<usize> {
    config.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "MaxArraySize").then(|| v.trim().parse().ok())?
    })
}

/// The smallest limit set among `sacctmgr -n -P` lines of one number each (an
/// empty field: none set).
fn least(text: &str) -> Option<usize> {
    text.lines()
        .filter_map(|l| l.split('|').next()?.trim().parse::<usize>().ok())
        .min()
}

/// A program's stdout when it ran and succeeded.
fn output(program: &str, args: &[&str]) -> Option<String> {
    let o = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The user's limits as the controller and accounting tell them (`account` and
/// `qos`: the plan's, else the user's defaults). What cannot be read is taken as
/// Slurm's default: no submit limit, arrays of 1,001.
pub(crate) fn read(user: &str, account: Option<&str>, qos: Option<&str>) -> Limits {
    let max_array = output("scontrol", &["show", "config"])
        .as_deref()
        .and_then(max_array_of)
        .unwrap_or(DEFAULT_MAX_ARRAY);
    Limits {
        max_array,
        max_submit: max_submit(user, account, qos),
    }
}

/// The user's `MaxSubmitJobs`: their association's (for `account`, else every
/// association of theirs: the least), else their QOS's `MaxSubmitJobsPerUser`.
fn max_submit(user: &str, account: Option<&str>, qos: Option<&str>) -> Option<(usize, String)> {
    let who = format!("user={user}");
    let mut args = vec!["-n", "-P", "show", "assoc", "where", who.as_str()];
    let acct = account.map(|a| format!("account={a}"));
    if let Some(a) = &acct {
        args.push(a);
    }
    let assoc = output(
        "sacctmgr",
        &[args.as_slice(), &["format=MaxSubmit,QOS"]].concat(),
    )?;
    if let Some(n) = least(&assoc) {
        return Some((n, format!("the association of user {user}")));
    }
    // The QOS the job runs under: the plan's, else the association's (the first
    // named; `normal` when none is).
    let named = assoc
        .lines()
        .filter_map(|l| l.split('|').nth(1))
        .flat_map(|q| q.split(','))
        .map(str::trim)
        .find(|q| !q.is_empty())
        .unwrap_or("normal")
        .to_string();
    let q = qos.map(String::from).unwrap_or(named);
    let name = format!("name={q}");
    let text = output(
        "sacctmgr",
        &[
            "-n",
            "-P",
            "show",
            "qos",
            "where",
            &name,
            "format=MaxSubmitPU",
        ],
    )?;
    least(&text).map(|n| (n, format!("QOS {q}")))
}

/// How many of the user's jobs the controller holds queued or running (each
/// array task counted, as the submit limit counts them); `None` when squeue did
/// not answer.
pub(crate) fn queued(user: &str, name: &str) -> Option<(usize, usize)> {
    let u = format!("--user={user}");
    let text = output(
        "squeue",
        &["-h", "-r", &u, "-t", "PD,R,CG,S,CF,RQ", "-o", "%j"],
    )?;
    let jobs: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let named = jobs.iter().filter(|j| j.trim() == name).count();
    Some((jobs.len(), named))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_read_from_slurm_s_own_words() {
        let config = "Configuration data as of 2026-12-06T14:00:00\nMaxArraySize            = 100\nMaxJobCount             = 10000\n";
        assert_eq!(max_array_of(config), Some(100));
        assert_eq!(max_array_of("MaxJobCount = 3\n"), None);
        assert_eq!(least("300|normal\n|normal\n"), Some(300));
        assert_eq!(least("|normal\n"), None);
        assert_eq!(least("500|\n300|\n"), Some(300));
    }

    #[test]
    fn submit_limit_refusals_are_told_from_other_refusals() {
        for t in [
            "sbatch: error: AssocMaxSubmitJobLimit\nsbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)",
            "sbatch: error: QOSMaxSubmitJobPerUserLimit",
            "sbatch: error: Batch job submission failed: Invalid job array specification",
        ] {
            assert!(is_submit_limit(t), "{t}");
        }
        for t in [
            "sbatch: error: Batch job submission failed: Invalid partition name specified",
            "sbatch: error: invalid --mem",
        ] {
            assert!(!is_submit_limit(t), "{t}");
        }
    }
}
