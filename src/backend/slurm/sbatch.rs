//! The `sbatch` calls of the submitter: a job of its own, or an array whose
//! script runs each task's `job.sh` by `SLURM_ARRAY_TASK_ID`. A busy controller
//! answers "try again": a few tries, a moment apart, and before each retry the
//! job is looked for by its comment, so a controller that took it and lost its
//! answer never gets it twice.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::submitter::{
    array_tag, rel, shared_args, write_file, Refusal, Submitter, Ticket, ARRAY_COMMENT,
};
use super::{ids, limits, sh_quote, slurm_filename};
use crate::isolate::JobFile;

/// What a submission made.
pub(crate) struct Done {
    /// The job's id, or the array's.
    pub id: String,
    pub array: Option<JobFile>,
    pub notes: Vec<String>,
}

const TRANSIENT: [&str; 4] = [
    "try again",
    "Socket timed out",
    "temporarily unavailable",
    "Unable to contact",
];

impl Submitter {
    /// One attempt as a job of its own (`--comment=<step>/<n>`).
    pub(crate) async fn submit_one(&self, t: &Ticket) -> Result<Done, Refusal> {
        let header = self.header(t, "", &t.args);
        let script = self.script(t, &header, false);
        write_file(&t.logs, "job.sh", script.as_bytes()).map_err(Refusal::Other)?;
        let comment = format!("{}/{}", t.step, t.attempt);
        let (id, retried) = self
            .sbatch(&t.args, &t.logs.join("job.sh").to_string_lossy(), &comment)
            .await?;
        let notes = self.adopted(&id, &comment, retried, "attempt").await;
        Ok(Done {
            id,
            array: None,
            notes,
        })
    }

    /// The tickets of `batch` (one step's, asking alike) as one array of
    /// `batch.len()` tasks, at most `throttle` running at once.
    pub(crate) async fn submit_array(
        &self,
        batch: &[Ticket],
        throttle: usize,
    ) -> Result<Done, Refusal> {
        let first = &batch[0];
        let seq = {
            let mut st = self.lock();
            st.arrays += 1;
            st.arrays
        };
        let tag = array_tag(seq);
        let comment = format!("{ARRAY_COMMENT}{tag}");
        let folder = first.record_dir.join("slurm");
        let output = folder.join(format!("array-{tag}.log"));
        let mut args = shared_args(&first.args);
        args.push(format!("--comment={comment}"));
        let out = slurm_filename(&output.to_string_lossy());
        args.push(format!("--output={out}"));
        args.push(format!("--error={out}"));
        // No share of the throttle free now: queued held, released with one.
        if throttle == 0 {
            args.push("--hold".to_string());
        }
        args.push(format!(
            "--array={}",
            ids::array_spec(batch.len(), throttle.max(1))
        ));
        if let Some(bad) = args.iter().find(|a| a.contains(char::is_control)) {
            return Err(Refusal::Other(format!(
                "sbatch argument {bad:?} holds a control character: refused"
            )));
        }
        let mut table = format!(
            "#!/bin/sh\n# orchestrate run {}: array {tag} of {} tasks of step {}; each runs its attempt's job.sh\n",
            self.run_id,
            batch.len(),
            crate::plan::matrix::base_id(&first.step)
        );
        table.push_str("case \"$SLURM_ARRAY_TASK_ID\" in\n");
        for (i, t) in batch.iter().enumerate() {
            let header = self.header(t, &format!(", task {i} of array {tag}"), &args);
            let script = self.script(t, &header, true);
            write_file(&t.logs, "job.sh", script.as_bytes()).map_err(Refusal::Other)?;
            table.push_str(&format!(
                "{i}) exec /bin/sh {} ;;\n",
                sh_quote(&t.logs.join("job.sh").to_string_lossy())
            ));
        }
        table.push_str(
            "esac\necho \"orchestrate: this array has no task $SLURM_ARRAY_TASK_ID\" >&2\nexit 1\n",
        );
        let name = format!("array-{tag}.sh");
        write_file(&folder, &name, table.as_bytes()).map_err(Refusal::Other)?;
        let path = folder.join(&name);
        let (id, retried) = self
            .sbatch(&args, &path.to_string_lossy(), &comment)
            .await?;
        let notes = self.adopted(&id, &comment, retried, "array").await;
        Ok(Done {
            id,
            array: Some(JobFile {
                path: rel(&first.record_dir, &path),
                sha256: crate::digest::sha256_bytes(table.as_bytes()).hex(),
                bytes: table.len() as u64,
            }),
            notes,
        })
    }

    /// `sbatch ARGS SCRIPT`: the job's (or array's) id, and whether it took more
    /// than one try.
    async fn sbatch(
        &self,
        args: &[String],
        script: &str,
        comment: &str,
    ) -> Result<(String, bool), Refusal> {
        let mut last = String::new();
        for (i, pause) in [0u64, 500, 2000, 5000].into_iter().enumerate() {
            tokio::time::sleep(Duration::from_millis(pause)).await;
            if i > 0 {
                if let Some(first) = self
                    .commented(comment)
                    .await
                    .and_then(|f| f.first().cloned())
                {
                    return Ok((first, true));
                }
            }
            self.poller.submits.fetch_add(1, Ordering::Relaxed);
            let out = tokio::process::Command::new("sbatch")
                .args(args)
                .arg(script)
                .stdin(std::process::Stdio::null())
                .output()
                .await
                .map_err(|e| Refusal::Other(format!("sbatch: {e}")))?;
            let text = String::from_utf8_lossy(&out.stdout);
            let got = text.trim().split(';').next().unwrap_or("").to_string();
            if out.status.success() && ids::is_job_id(&got) && !ids::is_task(&got) {
                return Ok((got, i > 0));
            }
            last = String::from_utf8_lossy(&out.stderr).trim().to_string();
            if !TRANSIENT.iter().any(|t| last.contains(t)) {
                break;
            }
        }
        // A last look: an answer lost on the final try still made a job.
        if let Some(found) = self
            .commented(comment)
            .await
            .and_then(|f| f.first().cloned())
        {
            return Ok((found, true));
        }
        if limits::is_submit_limit(&last) {
            let said: Vec<&str> = last
                .lines()
                .map(|l| l.trim().trim_start_matches("sbatch: error: "))
                .filter(|l| !l.is_empty())
                .collect();
            return Err(Refusal::Limit(said.join("; ")));
        }
        Err(Refusal::Other(format!("sbatch refused the job: {last}")))
    }

    /// The jobs (arrays by their own id) the controller lists with `comment`.
    async fn commented(&self, comment: &str) -> Option<Vec<String>> {
        let mut out: Vec<String> = Vec::new();
        for q in self.poller.queue(true).await? {
            let id = ids::base(&q.id).to_string();
            if q.comment == comment && !out.contains(&id) {
                out.push(id);
            }
        }
        Some(out)
    }

    /// The submission is `id`: any other job the controller lists with its
    /// comment (a retried sbatch whose first answer was lost) is cancelled and
    /// named.
    async fn adopted(&self, id: &str, comment: &str, retried: bool, what: &str) -> Vec<String> {
        let mut notes = Vec::new();
        if !retried {
            return notes;
        }
        for j in self
            .commented(comment)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|j| j != id)
        {
            self.poller.cancel(&j);
            notes.push(format!(
                "a second job {j} was submitted for this {what} (sbatch retried after an answer was lost): cancelled; job {id} is the {what}"
            ));
        }
        notes
    }
}
