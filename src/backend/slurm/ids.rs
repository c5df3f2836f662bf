//! Slurm job ids as the controller and accounting write them: a job (`123`), an
//! array task (`123_4`), and a range of an array's tasks still pending, written
//! compactly (`123_[4-9%2]`, `123_[1,3,5-7]`).

/// The most tasks one compact id may stand for: more is not an id this backend
/// made (its arrays are at most `MaxArraySize`, which Slurm caps at 4,000,001).
const MOST_TASKS: u64 = 4_000_001;

fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `id` names one job or one array task (`123`, `123_4`).
pub(crate) fn is_job_id(id: &str) -> bool {
    match id.split_once('_') {
        Some((a, t)) => digits(a) && digits(t),
        None => digits(id),
    }
}

/// The array a task id belongs to (`123` of `123_4`); a plain job's own id.
pub(crate) fn base(id: &str) -> &str {
    id.split_once('_').map_or(id, |(a, _)| a)
}

/// Whether `id` is an array task's (`123_4`).
pub(crate) fn is_task(id: &str) -> bool {
    id.contains('_')
}

/// The task index of an array task's id.
pub(crate) fn task_index(id: &str) -> Option<u32> {
    id.split_once('_').and_then(|(_, t)| t.parse().ok())
}

/// The ids one id as written stands for: itself for a job or task, every task of
/// a compact range (`123_[4-6%2]` -> `123_4 123_5 123_6`). `None` for anything
/// else (never guessed at).
pub(crate) fn expand(id: &str) -> Option<Vec<String>> {
    if is_job_id(id) {
        return Some(vec![id.to_string()]);
    }
    let (array, rest) = id.split_once("_[")?;
    let inner = rest.strip_suffix(']')?;
    // The throttle (`%2`) says how many run at once, not which.
    let ranges = inner.split_once('%').map_or(inner, |(r, _)| r);
    if !digits(array) {
        return None;
    }
    let mut out = Vec::new();
    let mut total = 0u64;
    for part in ranges.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo, hi),
            None => (part, part),
        };
        // A step (`1-9:2`) is written by users, never by an array of this backend's.
        if !digits(lo) || !digits(hi) {
            return None;
        }
        let (lo, hi): (u64, u64) = (lo.parse().ok()?, hi.parse().ok()?);
        if hi < lo {
            return None;
        }
        total += hi - lo + 1;
        if total > MOST_TASKS {
            return None;
        }
        out.extend((lo..=hi).map(|t| format!("{array}_{t}")));
    }
    Some(out)
}

/// `0-4` for five tasks: the `--array` indices of an array of `n` tasks, with the
/// throttle `%t` when fewer than all may run at once.
pub(crate) fn array_spec(n: usize, throttle: usize) -> String {
    let last = n.saturating_sub(1);
    if throttle >= n {
        format!("0-{last}")
    } else {
        format!("0-{last}%{throttle}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_ids_expand_to_their_tasks() {
        assert_eq!(expand("123").unwrap(), ["123"]);
        assert_eq!(expand("123_4").unwrap(), ["123_4"]);
        assert_eq!(expand("123_[4-6%2]").unwrap(), ["123_4", "123_5", "123_6"]);
        assert_eq!(expand("9_[1,3,5-6]").unwrap(), ["9_1", "9_3", "9_5", "9_6"]);
        for bad in [
            "",
            "12a",
            "_3",
            "1_",
            "1_[4-2]",
            "1_[1-9:2]",
            "1_[x]",
            "1_[0-99999999999]",
            "1_[1-3",
            "1+0",
        ] {
            assert_eq!(expand(bad), None, "{bad}");
        }
    }

    #[test]
    fn task_ids_name_their_array_and_index() {
        assert!(is_job_id("7") && is_job_id("7_0") && !is_job_id("7_") && !is_job_id("7_[1]"));
        assert_eq!(base("123_4"), "123");
        assert_eq!(base("123"), "123");
        assert_eq!(task_index("123_4"), Some(4));
        assert_eq!(task_index("123"), None);
        assert_eq!(array_spec(5, 2), "0-4%2");
        assert_eq!(array_spec(5, 5), "0-4");
        assert_eq!(array_spec(5, 64), "0-4");
    }
}
