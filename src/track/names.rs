//! Names as users type them: `bench` for the cell `bench[revision=implementation]`,
//! a pytest node id for a JUnit case. `trend` and `bisect` resolve what they are
//! given here before they read or run anything, and a name that resolves to nothing
//! is a usage error naming what does exist.

/// What a step name resolved to: the step id, and a note when the user's name was
/// not the id itself (printed, so the choice is never silent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub id: String,
    pub note: Option<String>,
}

/// The step a cell id was made from: `bench` for `bench[revision=baseline]`.
pub fn base_of(id: &str) -> &str {
    id.split_once('[').map_or(id, |(b, _)| b)
}

/// The cell values of a cell id: `[("revision", "baseline")]`.
fn cell_of(id: &str) -> Vec<(&str, &str)> {
    id.split_once('[')
        .and_then(|(_, rest)| rest.strip_suffix(']'))
        .map(|inner| {
            inner
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .collect()
        })
        .unwrap_or_default()
}

/// Resolve `name` among the step ids `ids` (cells included): the id itself; else
/// the one cell made from a step of that name; else, among cells that differ only
/// in their revision, the implementation's (the one a history or a probe changes).
/// Anything else is an error that lists the steps there are.
pub fn resolve_step(name: &str, ids: &[String]) -> Result<Resolved, String> {
    if ids.iter().any(|i| i == name) {
        return Ok(Resolved {
            id: name.to_string(),
            note: None,
        });
    }
    let cells: Vec<&String> = ids.iter().filter(|i| base_of(i) == name).collect();
    let note = |id: &str, why: &str| Resolved {
        id: id.to_string(),
        note: Some(format!("`{name}` is `{id}`{why}")),
    };
    match cells.as_slice() {
        [one] => return Ok(note(one, "")),
        [] => {}
        many => {
            fn rest(id: &str) -> Vec<(&str, &str)> {
                cell_of(id)
                    .into_iter()
                    .filter(|(a, _)| *a != "revision")
                    .collect()
            }
            let same_rest = many.iter().all(|c| rest(c) == rest(many[0]));
            let imp = many
                .iter()
                .find(|c| cell_of(c).contains(&("revision", "implementation")));
            if let (true, Some(imp)) = (same_rest, imp) {
                let others: Vec<String> = many
                    .iter()
                    .filter(|c| *c != imp)
                    .map(|c| format!("`{c}`"))
                    .collect();
                return Ok(note(
                    imp,
                    &format!(
                        " (the implementation's cell; `{name}` also names {})",
                        others.join(", ")
                    ),
                ));
            }
            let listed: Vec<String> = many.iter().map(|c| format!("`{c}`")).collect();
            return Err(format!(
                "`{name}` names {} cells: {}; give one of them",
                many.len(),
                listed.join(", ")
            ));
        }
    }
    Err(format!(
        "no step `{name}`; the steps are: {}",
        if ids.is_empty() {
            "none".to_string()
        } else {
            list(ids, 20)
        }
    ))
}

/// `a`, `b`, … and N more.
pub fn list(items: &[String], at_most: usize) -> String {
    let shown: Vec<String> = items
        .iter()
        .take(at_most)
        .map(|i| format!("`{i}`"))
        .collect();
    match items.len().saturating_sub(at_most) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_step_name_finds_its_cell() {
        let one = ids(&["tests", "bench[revision=implementation]"]);
        let r = resolve_step("bench", &one).unwrap();
        assert_eq!(r.id, "bench[revision=implementation]");
        assert!(r.note.is_some());
        assert_eq!(resolve_step("tests", &one).unwrap().note, None);
        let two = ids(&["bench[revision=baseline]", "bench[revision=implementation]"]);
        let r = resolve_step("bench", &two).unwrap();
        assert_eq!(r.id, "bench[revision=implementation]");
        assert!(r.note.unwrap().contains("bench[revision=baseline]"));
        let sweep = ids(&["p[tokens=2048]", "p[tokens=8192]"]);
        let e = resolve_step("p", &sweep).unwrap_err();
        assert!(e.contains("p[tokens=2048]") && e.contains("2 cells"), "{e}");
        let e = resolve_step("nope", &sweep).unwrap_err();
        assert!(e.contains("no step `nope`"), "{e}");
    }
}
