//! Expanding a plan over its `[matrix]`: one step per cell, so everything after the
//! loader (scheduler, record, reports) sees plain steps whose ids name their cell,
//! `prefill[tokens=2048,numerics=f32]` (axes in declaration order). Expansion costs
//! nothing at run time.
//!
//! A step is expanded over the axes it uses (`${matrix.X}`) and those of the steps it
//! needs, unless it names its axes (`matrix = ["tokens"]`, or `[]` for none). A
//! cell needs the cells of each needed step that agree with it on their common axes:
//! cell by cell when the axes are the same, all of them (fan-in) when the needed step
//! has axes this one lacks. `${steps.ID.out}` must then name one cell; when it would
//! name several, the reference selects one, `${steps.prefill[tokens=2048].out}`.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use super::model::*;
use super::walk::{StepSrc, Walker};

/// The most step instances a plan may expand to (steps times the cells each runs
/// in): the matrix's own cap counts cells, and thirty steps over it would build
/// three million instances before anything was checked.
pub(crate) const MAX_STEP_INSTANCES: usize = 100_000;

/// Where a checked-out revision lives under the run's work folder.
pub fn revision_folder(name: &str) -> String {
    format!("revisions/{name}")
}

/// The step a cell id belongs to: `prefill` of `prefill[tokens=2048]`.
pub(crate) fn base_id(id: &str) -> &str {
    id.split('[').next().unwrap_or(id)
}

/// `(axis, value)` pairs of a reference's selector: `prefill[tokens=2048]`.
fn selector(id: &str) -> Option<Vec<(&str, &str)>> {
    let inner = id.split_once('[')?.1.strip_suffix(']')?;
    inner
        .split(',')
        .map(|kv| kv.split_once('='))
        .collect::<Option<Vec<_>>>()
}

/// The id of `step` in a cell: `step[a=1,b=x]` (no brackets without axes).
pub fn cell_id(step: &str, cell: &[(String, String)]) -> String {
    if cell.is_empty() {
        return step.to_string();
    }
    let inner: Vec<String> = cell.iter().map(|(a, v)| format!("{a}={v}")).collect();
    format!("{step}[{}]", inner.join(","))
}

pub use super::model::value_text;

/// The cells of `m` that `only` keeps: for each axis it names, one of the values
/// given for it.
pub(crate) fn keep_only(m: &Matrix, only: &[(String, String)]) -> Result<Vec<Vec<usize>>, String> {
    let mut wanted: Vec<(usize, Vec<usize>)> = Vec::new();
    for (axis, value) in only {
        let Some(ai) = m.axes.iter().position(|a| &a.name == axis) else {
            let names: Vec<&str> = m.axes.iter().map(|a| a.name.as_str()).collect();
            return Err(format!(
                "--only {axis}={value}: the matrix has no axis `{axis}` (it has: {})",
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            ));
        };
        let Some(vi) = m.axes[ai]
            .values
            .iter()
            .position(|v| value_text(v) == *value)
        else {
            let vals: Vec<String> = m.axes[ai].values.iter().map(value_text).collect();
            return Err(format!(
                "--only {axis}={value}: axis `{axis}` has no value `{value}` (it has: {})",
                vals.join(", ")
            ));
        };
        match wanted.iter_mut().find(|w| w.0 == ai) {
            Some(w) => w.1.push(vi),
            None => wanted.push((ai, vec![vi])),
        }
    }
    let kept: Vec<Vec<usize>> = m
        .cells
        .iter()
        .filter(|c| wanted.iter().all(|(ai, vs)| vs.contains(&c[*ai])))
        .cloned()
        .collect();
    if kept.is_empty() && !only.is_empty() {
        let asked: Vec<String> = only.iter().map(|(a, v)| format!("{a}={v}")).collect();
        return Err(format!(
            "--only {}: no cell of the matrix has these values (an `exclude` row removes them)",
            asked.join(" --only ")
        ));
    }
    Ok(kept)
}

/// The axes (indices) each step is expanded over, in plan order.
fn step_axes(w: &mut Walker<'_>, steps: &[(Step, StepSrc)], m: &Matrix) -> Vec<Vec<usize>> {
    let index: HashMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, (s, _))| (s.id.as_str(), i))
        .collect();
    let axis_of = |name: &str| m.axes.iter().position(|a| a.name == name);
    let mut out: Vec<Vec<usize>> = Vec::with_capacity(steps.len());
    for (step, src) in steps {
        let mut used: Vec<usize> = Vec::new();
        for t in templates(step) {
            for seg in &t.segments {
                let name = match seg {
                    Segment::Var(Var::Matrix(a)) => a.as_str(),
                    Segment::Var(Var::Revision(_)) => "revision",
                    _ => continue,
                };
                if let Some(i) = axis_of(name) {
                    used.push(i);
                }
            }
        }
        used.sort_unstable();
        used.dedup();
        let axes = match &step.matrix {
            Some(named) => {
                let mut given: Vec<usize> = Vec::new();
                for a in named {
                    match axis_of(a) {
                        Some(i) => given.push(i),
                        None => w.err(
                            src.matrix_span.clone().unwrap_or(src.key_span.clone()),
                            format!(
                                "step `{}` names matrix axis `{a}`, which [matrix] does not have",
                                step.id
                            ),
                            "name axes declared under [matrix]",
                        ),
                    }
                }
                given.sort_unstable();
                given.dedup();
                if let Some(&missing) = used.iter().find(|u| !given.contains(u)) {
                    w.err(
                        src.matrix_span.clone().unwrap_or(src.key_span.clone()),
                        format!(
                            "step `{}` uses ${{matrix.{}}} but is not expanded over it",
                            step.id, m.axes[missing].name
                        ),
                        format!("add \"{}\" to its `matrix`", m.axes[missing].name),
                    );
                }
                given
            }
            None => {
                let mut axes = used;
                for n in &step.needs {
                    if let Some(&j) = index.get(n.as_str()) {
                        // Plan order is topological: needed steps are done.
                        if let Some(theirs) = out.get(j) {
                            axes.extend(theirs.iter().copied());
                        }
                    }
                }
                axes.sort_unstable();
                axes.dedup();
                axes
            }
        };
        let mut axes = axes;
        // `revisions = [...]` expands the step over them whatever else it names.
        if let (Some(_), Some(r)) = (&step.revisions, axis_of("revision")) {
            if !axes.contains(&r) {
                axes.push(r);
                axes.sort_unstable();
            }
        }
        out.push(axes);
    }
    out
}

/// The revision values (indices) each step may run on: its own `revisions`, and
/// no more than the steps it needs that run per revision. `None`: all of them.
fn allowed_revisions(
    w: &mut Walker<'_>,
    steps: &[(Step, StepSrc)],
    axes: &[Vec<usize>],
    m: &Matrix,
) -> Vec<Option<Vec<usize>>> {
    let Some(r) = m.axes.iter().position(|a| a.name == "revision") else {
        return vec![None; steps.len()];
    };
    let index: HashMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, (s, _))| (s.id.as_str(), i))
        .collect();
    let mut out: Vec<Option<Vec<usize>>> = Vec::with_capacity(steps.len());
    for (i, (step, src)) in steps.iter().enumerate() {
        let mut allowed: Option<Vec<usize>> = step.revisions.as_ref().map(|names| {
            names
                .iter()
                .filter_map(|n| {
                    let v = m.axes[r].values.iter().position(|x| value_text(x) == *n);
                    if v.is_none() {
                        let have: Vec<String> = m.axes[r].values.iter().map(value_text).collect();
                        w.err(
                            src.revisions_span.clone().unwrap_or(src.key_span.clone()),
                            format!("step `{}` names revision `{n}`, which [revisions] does not declare", step.id),
                            format!("use one of: {}", have.join(", ")),
                        );
                    }
                    v
                })
                .collect()
        });
        if axes[i].contains(&r) {
            for n in &step.needs {
                let Some(&j) = index.get(n.as_str()) else {
                    continue;
                };
                if let (true, Some(Some(theirs))) = (axes[j].contains(&r), out.get(j)) {
                    allowed = Some(match allowed {
                        None => theirs.clone(),
                        Some(mine) => mine.into_iter().filter(|v| theirs.contains(v)).collect(),
                    });
                }
            }
        }
        out.push(allowed);
    }
    out
}

/// Every template of a step (command, env, cwd, outputs, inputs, checks).
pub fn templates(step: &Step) -> Vec<&Template> {
    let mut v: Vec<&Template> = Vec::new();
    match &step.command {
        Some(StepCommand::Argv(a)) => v.extend(a.iter()),
        Some(StepCommand::Shell(s)) => v.push(s),
        None => {}
    }
    v.extend(step.env.values());
    v.extend(step.cwd.iter());
    v.extend(step.outputs.iter());
    v.extend(step.inputs.iter());
    v.extend(
        [&step.results.junit, &step.results.sarif]
            .into_iter()
            .flatten(),
    );
    for c in &step.checks {
        v.extend(
            [&c.actual, &c.expected, &c.actual_logits, &c.expected_logits]
                .into_iter()
                .flatten(),
        );
        v.extend(c.shape_vars.iter().map(|(_, t)| t));
    }
    v
}

fn templates_mut(step: &mut Step) -> Vec<&mut Template> {
    let mut v: Vec<&mut Template> = Vec::new();
    match &mut step.command {
        Some(StepCommand::Argv(a)) => v.extend(a.iter_mut()),
        Some(StepCommand::Shell(s)) => v.push(s),
        None => {}
    }
    v.extend(step.env.values_mut());
    v.extend(step.cwd.iter_mut());
    v.extend(step.outputs.iter_mut());
    v.extend(step.inputs.iter_mut());
    v.extend(
        [&mut step.results.junit, &mut step.results.sarif]
            .into_iter()
            .flatten(),
    );
    for c in &mut step.checks {
        v.extend(
            [
                &mut c.actual,
                &mut c.expected,
                &mut c.actual_logits,
                &mut c.expected_logits,
            ]
            .into_iter()
            .flatten(),
        );
        v.extend(c.shape_vars.iter_mut().map(|(_, t)| t));
    }
    v
}

/// The cells of one step: projections of the run's cells on its axes, in order.
struct StepCells {
    axes: Vec<usize>,
    /// Value index per axis of `axes`, one entry per cell.
    cells: Vec<Vec<usize>>,
    ids: Vec<String>,
}

fn project(cell: &[usize], axes: &[usize]) -> Vec<usize> {
    axes.iter().map(|&a| cell[a]).collect()
}

/// Expand `steps` (validated, in topological order) over `m` with `cells` (the
/// run's cells). Errors go to `w`, located at the reference that cannot pair.
pub(crate) fn expand(
    w: &mut Walker<'_>,
    steps: Vec<(Step, StepSrc)>,
    m: &Matrix,
    cells: &[Vec<usize>],
    revisions: &[Revision],
) -> Vec<Step> {
    if m.is_empty() {
        return steps.into_iter().map(|(s, _)| s).collect();
    }
    let axes = step_axes(w, &steps, m);
    let allowed = allowed_revisions(w, &steps, &axes, m);
    let per_step = cells_of_steps(&steps, &axes, &allowed, m, cells);
    let instances: usize = per_step.iter().map(|p| p.cells.len()).sum();
    if instances > MAX_STEP_INSTANCES {
        w.err(
            0..0,
            format!(
                "the plan expands to {instances} step instances over its matrix, more than {MAX_STEP_INSTANCES}"
            ),
            "run fewer cells (`--only`, fewer values on an axis) or split the plan",
        );
        return steps.into_iter().map(|(s, _)| s).collect();
    }
    let x = Expansion {
        m,
        revisions,
        index: steps
            .iter()
            .enumerate()
            .map(|(i, (s, _))| (s.id.as_str(), i))
            .collect(),
        pairing: Pairing {
            per_step: &per_step,
            buckets: Default::default(),
        },
    };
    let mut reported: HashSet<(usize, String)> = HashSet::new();
    let mut out: Vec<Step> = Vec::with_capacity(per_step.iter().map(|p| p.cells.len()).sum());
    for (i, (step, src)) in steps.iter().enumerate() {
        let spans: HashMap<&str, Range<usize>> = src
            .refs
            .iter()
            .map(|(id, span)| (id.as_str(), span.clone()))
            .collect();
        for k in 0..per_step[i].cells.len() {
            let cell = Cell {
                step,
                src,
                spans: &spans,
                mine: &per_step[i],
                k,
            };
            out.push(x.cell_step(w, &cell, &mut reported));
        }
    }
    out
}

/// The cells each step runs in: the run's cells projected onto its axes, once
/// each, and only the revisions it names.
fn cells_of_steps(
    steps: &[(Step, StepSrc)],
    axes: &[Vec<usize>],
    allowed: &[Option<Vec<usize>>],
    m: &Matrix,
    cells: &[Vec<usize>],
) -> Vec<StepCells> {
    let rev_axis = m.axes.iter().position(|a| a.name == "revision");
    steps
        .iter()
        .zip(axes)
        .zip(allowed)
        .map(|(((s, _), ax), allow)| {
            let mut seen: HashSet<Vec<usize>> = HashSet::new();
            let mut out = StepCells {
                axes: ax.clone(),
                cells: Vec::new(),
                ids: Vec::new(),
            };
            for c in cells {
                if let (Some(r), Some(allow)) = (rev_axis, allow) {
                    if !allow.contains(&c[r]) {
                        continue;
                    }
                }
                let p = project(c, ax);
                if seen.insert(p.clone()) {
                    let named = named(m, ax, &p);
                    out.ids.push(cell_id(s.id.as_str(), &named));
                    out.cells.push(p);
                }
            }
            out
        })
        .collect()
}

/// A cell's (axis, value) pairs by name.
fn named(m: &Matrix, axes: &[usize], cell: &[usize]) -> Vec<(String, String)> {
    axes.iter()
        .zip(cell)
        .map(|(&a, &v)| (m.axes[a].name.clone(), value_text(&m.axes[a].values[v])))
        .collect()
}

type Buckets = HashMap<Vec<usize>, Vec<usize>>;

/// Which cells of one step pair with a cell of another. Cells are bucketed by
/// their values on the common axes, so pairing costs the same per cell however
/// many cells there are.
struct Pairing<'a> {
    per_step: &'a [StepCells],
    buckets: std::cell::RefCell<HashMap<(usize, Vec<usize>), Buckets>>,
}

impl Pairing<'_> {
    /// The cells of step `d` that agree with cell `c` (over `s_axes`) on their
    /// common axes, and further with a selector.
    fn matching(
        &self,
        d: usize,
        s_axes: &[usize],
        c: &[usize],
        sel: &[(usize, usize)],
    ) -> Vec<usize> {
        let dc = &self.per_step[d];
        // Positions in `d`'s axes that `s` also has, and the values `c` gives them.
        // (A selector's axes are chosen by the selector instead.)
        let common: Vec<usize> = (0..dc.axes.len())
            .filter(|&p| s_axes.contains(&dc.axes[p]) && !sel.iter().any(|(a, _)| *a == dc.axes[p]))
            .collect();
        let key: Vec<usize> = common
            .iter()
            .map(|&p| {
                let at = s_axes.iter().position(|x| *x == dc.axes[p]).unwrap_or(0);
                c[at]
            })
            .collect();
        let mut cache = self.buckets.borrow_mut();
        let index = cache.entry((d, common.clone())).or_insert_with(|| {
            let mut b: Buckets = HashMap::new();
            for (k, cell) in dc.cells.iter().enumerate() {
                b.entry(common.iter().map(|&p| cell[p]).collect())
                    .or_default()
                    .push(k);
            }
            b
        });
        index
            .get(&key)
            .map(|ks| {
                ks.iter()
                    .copied()
                    .filter(|&k| {
                        sel.iter()
                            .all(|(sa, sv)| match dc.axes.iter().position(|a| a == sa) {
                                Some(p) => dc.cells[k][p] == *sv,
                                // A selector on an axis `d` is not expanded over names no
                                // cell of it.
                                None => false,
                            })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// What every cell's expansion reads.
struct Expansion<'a> {
    m: &'a Matrix,
    revisions: &'a [Revision],
    index: HashMap<&'a str, usize>,
    pairing: Pairing<'a>,
}

/// One cell of one step.
struct Cell<'a> {
    step: &'a Step,
    src: &'a StepSrc,
    spans: &'a HashMap<&'a str, Range<usize>>,
    mine: &'a StepCells,
    k: usize,
}

impl Cell<'_> {
    fn values(&self) -> &[usize] {
        &self.mine.cells[self.k]
    }

    fn id(&self) -> &str {
        &self.mine.ids[self.k]
    }
}

impl Expansion<'_> {
    /// The step as this cell runs it: its id, cell, needs, templates and checks
    /// resolved to the cells they pair with.
    fn cell_step(
        &self,
        w: &mut Walker<'_>,
        cell: &Cell<'_>,
        reported: &mut HashSet<(usize, String)>,
    ) -> Step {
        let (step, mine, c) = (cell.step, cell.mine, cell.values());
        let mut cellstep = step.clone();
        let named = named(self.m, &mine.axes, c);
        cellstep.id = StepId(cell.id().to_string());
        if !named.is_empty() {
            cellstep.cell = Some((step.id.clone(), named.clone()));
            for ch in &mut cellstep.checks {
                let inner: Vec<String> = named.iter().map(|(a, v)| format!("{a}={v}")).collect();
                ch.name = format!("{} [{}]", ch.name, inner.join(","));
            }
        }
        let per = self.pairing.per_step;
        cellstep.needs = step
            .needs
            .iter()
            .filter_map(|n| self.index.get(n.as_str()))
            .flat_map(|&d| {
                self.pairing
                    .matching(d, &mine.axes, c, &[])
                    .into_iter()
                    .map(move |j| StepId(per[d].ids[j].clone()))
            })
            .collect();
        let revision = named
            .iter()
            .find(|(n, _)| n == "revision")
            .and_then(|(_, v)| self.revisions.iter().find(|r| r.name == *v));
        for t in templates_mut(&mut cellstep) {
            let mut resolve = |target: &str| self.resolve(w, cell, target, reported);
            substitute(t, &named, revision, &mut resolve);
        }
        for ch in &mut cellstep.checks {
            if let Some(a) = ch.across.clone() {
                if let Some(id) = self.resolve(w, cell, a.as_str(), reported) {
                    ch.across = Some(StepId(id));
                }
            }
        }
        for ch in &mut cellstep.checks {
            fill_shape(w, ch, cell, reported);
        }
        cellstep
    }

    /// One cell of the referenced step, or a located error (once per reference).
    fn resolve(
        &self,
        w: &mut Walker<'_>,
        cell: &Cell<'_>,
        target: &str,
        reported: &mut HashSet<(usize, String)>,
    ) -> Option<String> {
        let (m, step, src, mine, c, k) = (
            self.m,
            cell.step,
            cell.src,
            cell.mine,
            cell.values(),
            cell.k,
        );
        let (index, per_step) = (&self.index, self.pairing.per_step);
        let matching = |d, s_axes: &[usize], c: &[usize], sel: &[(usize, usize)]| {
            self.pairing.matching(d, s_axes, c, sel)
        };
        let spans = cell.spans;
        let base = base_id(target);
        let d = *index.get(base)?;
        let mut sel: Vec<(usize, usize)> = Vec::new();
        let span = spans.get(target).cloned().unwrap_or(src.key_span.clone());
        for (a, v) in selector(target).unwrap_or_default() {
            let found = m.axes.iter().position(|x| x.name == a).and_then(|ai| {
                m.axes[ai]
                    .values
                    .iter()
                    .position(|x| value_text(x) == v)
                    .map(|vi| (ai, vi))
            });
            match found {
                Some(p) => sel.push(p),
                None => {
                    if reported.insert((span.start, "sel".into())) {
                        w.err(
                            span.clone(),
                            format!("`{target}` selects `{a}={v}`, which the matrix does not have"),
                            "select a declared axis and one of its values",
                        );
                    }
                    return None;
                }
            }
        }
        let hits = matching(d, &mine.axes, c, &sel);
        match hits.as_slice() {
            [one] => Some(per_step[d].ids[*one].clone()),
            _ => {
                if reported.insert((span.start, "pair".into())) {
                    let examples: Vec<&str> = hits
                        .iter()
                        .take(3)
                        .map(|&j| per_step[d].ids[j].as_str())
                        .collect();
                    let (message, help) = if hits.is_empty() {
                        (
                            format!(
                                "`{target}` names no cell of `{base}` that pairs with `{}`",
                                mine.ids[k]
                            ),
                            "select a cell the referencing step runs beside".to_string(),
                        )
                    } else {
                        (
                            format!(
                                "`${{steps.{target}.out}}` in step `{}` is ambiguous: `{base}` has {} cells here",
                                step.id,
                                hits.len()
                            ),
                            format!("name one, e.g. `${{steps.{}.out}}`", examples[0]),
                        )
                    };
                    w.err(span, message, help);
                }
                None
            }
        }
    }
}

/// A template as a cell runs it: its matrix values, its revision's name, commit
/// and folder, and its step references resolved to cells.
fn substitute(
    t: &mut Template,
    named: &[(String, String)],
    revision: Option<&Revision>,
    resolve: &mut dyn FnMut(&str) -> Option<String>,
) {
    let mut raw = t.raw.clone();
    // `${revision.dir}` may become two segments (`${work}` and a path).
    let mut segs: Vec<Segment> = Vec::with_capacity(t.segments.len());
    for mut seg in std::mem::take(&mut t.segments) {
        if let (Segment::Var(Var::Revision(field)), Some(r)) = (&seg, revision) {
            match field {
                RevisionField::Name => {
                    raw = raw.replace("${revision.name}", &r.name);
                    segs.push(Segment::Lit(r.name.clone()));
                }
                RevisionField::Commit => {
                    segs.push(Segment::Var(Var::RevisionCommit(r.name.clone())))
                }
                RevisionField::Dir => match r.worktree {
                    Some(_) => {
                        let d = r.repo.display().to_string();
                        raw = raw.replace("${revision.dir}", &d);
                        segs.push(Segment::Lit(d));
                    }
                    None => {
                        let rel = format!("/{}", revision_folder(&r.name));
                        raw = raw.replace("${revision.dir}", &format!("${{work}}{rel}"));
                        segs.push(Segment::Var(Var::Work));
                        segs.push(Segment::Lit(rel));
                    }
                },
            }
            continue;
        }
        match &mut seg {
            Segment::Var(Var::Matrix(a)) => {
                let v = named
                    .iter()
                    .find(|(n, _)| n == a)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                raw = raw.replace(&format!("${{matrix.{a}}}"), &v);
                seg = Segment::Lit(v);
            }
            Segment::Var(Var::StepOut(target)) => {
                if let Some(id) = resolve(target.as_str()) {
                    // `check` shows the cell each reference reads.
                    raw = raw.replace(
                        &format!("${{steps.{}.out}}", target.as_str()),
                        &format!("${{steps.{id}.out}}"),
                    );
                    *target = StepId(id);
                }
            }
            _ => {}
        }
        segs.push(seg);
    }
    t.segments = segs;
    t.raw = raw;
    t.merge_literals();
}

/// A check's `shape` dimensions given by matrix values, as numbers.
fn fill_shape(
    w: &mut Walker<'_>,
    ch: &mut Check,
    cell: &Cell<'_>,
    reported: &mut HashSet<(usize, String)>,
) {
    let src = cell.src;
    for (dim, t) in std::mem::take(&mut ch.shape_vars) {
        let text = t.as_literal().unwrap_or_default();
        match (
            text.parse::<u64>(),
            ch.shape.as_mut().and_then(|s| s.get_mut(dim)),
        ) {
            (Ok(n), Some(slot)) => *slot = n,
            _ => {
                if reported.insert((src.key_span.start, format!("shape{dim}"))) {
                    w.err(
                        src.key_span.clone(),
                        format!(
                            "dimension {dim} of `shape` in check `{}` is `{text}` in cell `{}`, not a whole number",
                            ch.name, cell.id()
                        ),
                        "use a numeric axis for a shape dimension",
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_selectors() {
        let cell = vec![
            ("tokens".to_string(), "2048".to_string()),
            ("n".into(), "f32".into()),
        ];
        assert_eq!(cell_id("prefill", &cell), "prefill[tokens=2048,n=f32]");
        assert_eq!(cell_id("prefill", &[]), "prefill");
        assert_eq!(base_id("prefill[tokens=2048]"), "prefill");
        assert_eq!(
            selector("prefill[tokens=2048,n=f32]"),
            Some(vec![("tokens", "2048"), ("n", "f32")])
        );
        assert_eq!(selector("prefill"), None);
    }
}
