//! Graph checks over the walked steps: `needs` targets exist (no self, no duplicates),
//! device names are requested, cycles are reported as paths, `${steps.X.out}` and
//! `across` only name (transitive) upstream steps; then the deterministic topological
//! order (Kahn with a min-heap on the id-sorted index: dependencies first, ties by id).
//!
//! Upstream checks stay linear in practice: a reference to a direct need is answered
//! at once; anything else runs one breadth-first search over `needs` from the
//! referencing step (a need-of-a-need is found at depth two, without walking the whole
//! ancestry), with an epoch-stamped visited array so no per-query allocation happens.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use super::diag::{did_you_mean, suggest};
use super::model::{DeviceRequest, Step};
use super::walk::{StepSrc, Walker};

/// Validate the graph and return the steps in topological order, each with where its
/// references sit in the source.
pub(crate) fn order(
    w: &mut Walker<'_>,
    steps: Vec<(Step, StepSrc)>,
    devices: &BTreeMap<String, DeviceRequest>,
    all_ids: &[String],
) -> Vec<(Step, StepSrc)> {
    let index: HashMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, (s, _))| (s.id.as_str(), i))
        .collect();
    let known: std::collections::HashSet<&str> = all_ids.iter().map(String::as_str).collect();
    let device_names: Vec<&str> = devices.keys().map(String::as_str).collect();
    // needs[i] = indices of the steps i depends on.
    let mut needs: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    for (i, (step, src)) in steps.iter().enumerate() {
        let id = step.id.as_str();
        let mut seen: Vec<&str> = Vec::with_capacity(src.needs.len());
        for (n, span) in &src.needs {
            if n == id {
                w.err(
                    span.clone(),
                    format!("step `{id}` needs itself"),
                    "remove it from its own `needs`",
                );
            } else if seen.contains(&n.as_str()) {
                w.err(
                    span.clone(),
                    format!("step `{id}` lists `{n}` twice in `needs`"),
                    "remove the duplicate",
                );
            } else if let Some(&j) = index.get(n.as_str()) {
                needs[i].push(j);
            } else if !known.contains(n.as_str()) {
                let help = match suggest(n, all_ids.iter().map(String::as_str)) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => "name a step defined under [steps]".to_string(),
                };
                w.err(
                    span.clone(),
                    format!("step `{id}` needs unknown step `{n}`"),
                    help,
                );
            }
            seen.push(n);
        }
        for (d, span) in &src.devices {
            if !devices.contains_key(d) {
                let help = if device_names.is_empty() {
                    format!(
                        "request it under [devices], e.g. {d} = {{ kind = \"gpu\", count = 1 }}"
                    )
                } else {
                    format!(
                        "{}; or request it under [devices]",
                        did_you_mean(d, &device_names)
                    )
                };
                w.err(
                    span.clone(),
                    format!("step `{id}` uses device `{d}`, which is not requested"),
                    help,
                );
            }
        }
    }

    report_cycles(w, &steps, &needs);
    check_upstream(w, &steps, &needs, &index, &known);

    // Kahn: dependents[j] = steps that need j.
    let n = steps.len();
    let mut indegree = vec![0usize; n];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, ns) in needs.iter().enumerate() {
        indegree[i] = ns.len();
        for &j in ns {
            dependents[j].push(i);
        }
    }
    let mut heap: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = heap.pop() {
        order.push(i);
        for &d in &dependents[i] {
            indegree[d] -= 1;
            if indegree[d] == 0 {
                heap.push(Reverse(d));
            }
        }
    }
    let mut slots: Vec<Option<(Step, StepSrc)>> = steps.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|i| slots.get_mut(i).and_then(Option::take))
        .collect()
}

/// Every cycle found by one iterative DFS, each printed as its path.
fn report_cycles(w: &mut Walker<'_>, steps: &[(Step, StepSrc)], needs: &[Vec<usize>]) {
    const WHITE: u8 = 0;
    const GREY: u8 = 1;
    const BLACK: u8 = 2;
    let mut color = vec![WHITE; steps.len()];
    let mut on_stack_pos = vec![usize::MAX; steps.len()];
    for root in 0..steps.len() {
        if color[root] != WHITE {
            continue;
        }
        // Stack of (node, next edge index).
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        color[root] = GREY;
        on_stack_pos[root] = 0;
        while let Some(&mut (node, ref mut edge)) = stack.last_mut() {
            if let Some(&next) = needs[node].get(*edge) {
                *edge += 1;
                match color[next] {
                    WHITE => {
                        color[next] = GREY;
                        on_stack_pos[next] = stack.len();
                        stack.push((next, 0));
                    }
                    GREY => {
                        let start = on_stack_pos[next];
                        let cycle: Vec<usize> = stack[start..].iter().map(|&(n, _)| n).collect();
                        report_cycle(w, steps, &cycle);
                    }
                    _ => {}
                }
            } else {
                color[node] = BLACK;
                on_stack_pos[node] = usize::MAX;
                stack.pop();
            }
        }
    }
}

fn report_cycle(w: &mut Walker<'_>, steps: &[(Step, StepSrc)], cycle: &[usize]) {
    let Some(&first) = cycle.first() else { return };
    let mut path: Vec<&str> = cycle.iter().map(|&i| steps[i].0.id.as_str()).collect();
    path.push(steps[first].0.id.as_str());
    let second = path.get(1).copied().unwrap_or("");
    // Point at the `needs` entry of the first step that starts the loop.
    let span = steps[first]
        .1
        .needs
        .iter()
        .find(|(n, _)| n == second)
        .map_or_else(|| steps[first].1.key_span.clone(), |(_, s)| s.clone());
    w.err(
        span,
        format!("dependency cycle: {}", path.join(" -> ")),
        "each arrow means `needs`; remove one of these needs to break the cycle",
    );
}

/// `${steps.X.out}` and `across = "X"` must name a step upstream of the user.
fn check_upstream(
    w: &mut Walker<'_>,
    steps: &[(Step, StepSrc)],
    needs: &[Vec<usize>],
    index: &HashMap<&str, usize>,
    known: &std::collections::HashSet<&str>,
) {
    let mut stamp = vec![0u32; steps.len()];
    let mut epoch = 0u32;
    let mut queue = std::collections::VecDeque::new();
    for (i, (step, src)) in steps.iter().enumerate() {
        let id = step.id.as_str();
        for (target, span) in &src.refs {
            // `prefill[tokens=2048]` names a cell of `prefill`: the graph is of steps.
            let t = super::matrix::base_id(target.as_str());
            let Some(&j) = index.get(t) else {
                if !known.contains(t) {
                    let all: Vec<&str> = index.keys().copied().collect();
                    w.err(
                        span.clone(),
                        format!("step `{id}` refers to unknown step `{t}`"),
                        match suggest(t, all.iter().copied()) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => "name a step defined under [steps]".to_string(),
                        },
                    );
                }
                continue;
            };
            if j == i {
                w.err(
                    span.clone(),
                    format!("step `{id}` refers to its own output through `steps.{id}`"),
                    "use `${out}` for this attempt's own output folder",
                );
                continue;
            }
            if needs[i].contains(&j) {
                continue;
            }
            epoch += 1;
            queue.clear();
            queue.extend(needs[i].iter().copied());
            let mut found = false;
            while let Some(n) = queue.pop_front() {
                if n == j {
                    found = true;
                    break;
                }
                if stamp[n] == epoch {
                    continue;
                }
                stamp[n] = epoch;
                queue.extend(needs[n].iter().copied());
            }
            if !found {
                w.err(
                    span.clone(),
                    format!("step `{id}` uses the output of `{t}`, which is not upstream of it"),
                    format!("add \"{t}\" to `needs` of step `{id}`"),
                );
            }
        }
    }
}
