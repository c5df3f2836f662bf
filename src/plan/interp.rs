//! `${...}` interpolation. Load-time references are substituted here; run-time ones
//! become [`Var`]s. `$$` is a literal `$`; a `$` not followed by `{` or `$` is kept as
//! written (so shell `$HOME` works; shell `${HOME}` must be written `$${HOME}`).

use std::collections::BTreeMap;
use std::ops::Range;

use super::diag::suggest;
use super::model::{ParamValue, Segment, StepId, Template, Var};

/// What interpolation may consult.
pub(crate) struct Ctx<'a> {
    pub params: &'a BTreeMap<String, ParamValue>,
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub plan_dir: &'a str,
    /// The matrix's axis names (`${matrix.NAME}`).
    pub axes: &'a [String],
    /// Whether the plan has `[revisions]` (`${revision.X}`).
    pub revisions: bool,
}

/// An error at a byte range of the raw string.
pub(crate) struct InterpError {
    pub range: Range<usize>,
    pub message: String,
    pub help: String,
}

/// A `${steps.ID.out}` reference and where it sits in the raw string.
pub(crate) type StepRef = (StepId, Range<usize>);

/// Interpolate `raw`. `runtime` says whether run-time variables are allowed here.
pub(crate) fn interpolate(
    raw: &str,
    ctx: &Ctx<'_>,
    runtime: bool,
) -> Result<(Template, Vec<StepRef>), Vec<InterpError>> {
    let mut segments: Vec<Segment> = Vec::new();
    let mut refs = Vec::new();
    let mut errors = Vec::new();
    let mut lit = String::new();
    let mut rest = raw;
    let mut pos = 0;
    while let Some(i) = rest.find('$') {
        lit.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if after.starts_with('$') {
            lit.push('$');
            pos += i + 2;
            rest = &rest[i + 2..];
            continue;
        }
        if !after.starts_with('{') {
            lit.push('$');
            pos += i + 1;
            rest = after;
            continue;
        }
        let start = pos + i;
        let Some(close) = after.find('}') else {
            errors.push(InterpError {
                range: start..raw.len(),
                message: "unterminated `${` reference".to_string(),
                help: "close it with `}`, or write `$$` for a literal `$`".to_string(),
            });
            rest = "";
            break;
        };
        let name = &after[1..close];
        let range = start..start + close + 2;
        if name.contains("${") {
            // `${env.A:-${env.B:-z}}` would reach the step as text: refuse it.
            errors.push(InterpError {
                range: start
                    ..(start + close + 2 + after[close + 1..].find('}').map_or(0, |j| j + 1))
                        .min(raw.len()),
                message: "a `${` reference inside another is not supported".to_string(),
                help: "give the default as plain text, e.g. `${env.A:-z}`".to_string(),
            });
            pos = start + close + 2;
            rest = &after[close + 1..];
            continue;
        }
        match resolve(name, ctx, runtime) {
            Ok(Resolved::Text(t)) => lit.push_str(&t),
            Ok(Resolved::Var(v)) => {
                if !lit.is_empty() {
                    segments.push(Segment::Lit(std::mem::take(&mut lit)));
                }
                if let Var::StepOut(id) = &v {
                    refs.push((id.clone(), range.clone()));
                }
                segments.push(Segment::Var(v));
            }
            Err((message, help)) => errors.push(InterpError {
                range,
                message,
                help,
            }),
        }
        pos = start + close + 2;
        rest = &after[close + 1..];
    }
    lit.push_str(rest);
    if !lit.is_empty() || segments.is_empty() {
        segments.push(Segment::Lit(lit));
    }
    if errors.is_empty() {
        Ok((
            Template {
                raw: raw.to_string(),
                segments,
            },
            refs,
        ))
    } else {
        Err(errors)
    }
}

enum Resolved {
    Text(String),
    Var(Var),
}

fn resolve(name: &str, ctx: &Ctx<'_>, runtime: bool) -> Result<Resolved, (String, String)> {
    let name_t = name.trim();
    if name_t != name || name.is_empty() {
        return Err((
            format!("malformed reference `${{{name}}}`"),
            "write a name without spaces, e.g. `${params.tokens}`".to_string(),
        ));
    }
    if let Some(p) = name.strip_prefix("params.") {
        return resolve_param(p, ctx);
    }
    if let Some(e) = name.strip_prefix("env.") {
        return resolve_env(e, ctx);
    }
    if name == "plan_dir" {
        return Ok(Resolved::Text(ctx.plan_dir.to_string()));
    }
    if let Some(field) = name.strip_prefix("revision.") {
        return resolve_revision(name, field, ctx, runtime);
    }
    if let Some(axis) = name.strip_prefix("matrix.") {
        return resolve_matrix(name, axis, ctx, runtime);
    }
    resolve_running(name, runtime)
}

/// `${params.X}`: substituted at load time, the declared names suggested when unknown.
fn resolve_param(p: &str, ctx: &Ctx<'_>) -> Result<Resolved, (String, String)> {
    match ctx.params.get(p) {
        Some(v) => Ok(Resolved::Text(v.to_string())),
        None => {
            let help = match suggest(p, ctx.params.keys().map(String::as_str)) {
                Some(s) => format!("did you mean `${{params.{s}}}`?"),
                None => format!("declare it under [params], e.g. `{p} = ...`"),
            };
            Err((format!("unknown param `{p}`"), help))
        }
    }
}

/// `${env.X}` and `${env.X:-default}`: substituted at load time; an unset variable
/// without a default is an error, not an empty string.
fn resolve_env(e: &str, ctx: &Ctx<'_>) -> Result<Resolved, (String, String)> {
    let (var, default) = match e.split_once(":-") {
        Some((v, d)) => (v, Some(d)),
        None => (e, None),
    };
    if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err((
            format!("`{var}` is not an environment variable name"),
            "use letters, digits and `_`, e.g. `${env.HF_HOME}`".to_string(),
        ));
    }
    match ((ctx.env)(var), default) {
        (Some(v), _) => Ok(Resolved::Text(v)),
        (None, Some(d)) => Ok(Resolved::Text(d.to_string())),
        (None, None) => Err((
            format!("environment variable `{var}` is not set"),
            format!("set it, or give a default: `${{env.{var}:-VALUE}}`"),
        )),
    }
}

/// `${revision.X}`: differs per revision, so only where run-time variables may be, and
/// only in a plan with [revisions].
fn resolve_revision(
    name: &str,
    field: &str,
    ctx: &Ctx<'_>,
    runtime: bool,
) -> Result<Resolved, (String, String)> {
    use super::model::RevisionField as F;
    let f = match field {
        "name" => F::Name,
        "dir" => F::Dir,
        "commit" => F::Commit,
        _ => {
            return Err((
                format!("unknown revision field `{field}`"),
                "use ${revision.name}, ${revision.dir} or ${revision.commit}".to_string(),
            ))
        }
    };
    if !ctx.revisions {
        return Err((
            format!("`${{{name}}}` needs a [revisions] table"),
            "declare the revisions, e.g. [revisions] baseline = { repo = \"..\", commit = \"HEAD~1\" }".to_string(),
        ));
    }
    if !runtime {
        return Err((
            format!("`${{{name}}}` differs per revision and cannot be used here"),
            "pins are checked once for the whole run: use ${params.X} or ${env.X}".to_string(),
        ));
    }
    Ok(Resolved::Var(Var::Revision(f)))
}

/// `${matrix.X}`: differs per cell, so only where run-time variables may be, and only
/// for a declared axis.
fn resolve_matrix(
    name: &str,
    axis: &str,
    ctx: &Ctx<'_>,
    runtime: bool,
) -> Result<Resolved, (String, String)> {
    if !ctx.axes.iter().any(|a| a == axis) {
        let help = if ctx.axes.is_empty() {
            format!("declare the axis under [matrix], e.g. `{axis} = [1, 2]`")
        } else {
            match suggest(axis, ctx.axes.iter().map(String::as_str)) {
                Some(s) => format!("did you mean `${{matrix.{s}}}`?"),
                None => format!("the matrix has: {}", ctx.axes.join(", ")),
            }
        };
        return Err((format!("unknown matrix axis `{axis}`"), help));
    }
    if !runtime {
        return Err((
            format!("`${{{name}}}` differs per cell and cannot be used here"),
            "pins are checked once for the whole run: use ${params.X} or ${env.X}".to_string(),
        ));
    }
    Ok(Resolved::Var(Var::Matrix(axis.to_string())))
}

/// The variables known only while running (`${run_id}`, `${out}`, `${steps.ID.out}`
/// ...), and anything else, which is unknown.
fn resolve_running(name: &str, runtime: bool) -> Result<Resolved, (String, String)> {
    let var = match name {
        "run_id" => Some(Var::RunId),
        "work" => Some(Var::Work),
        "out" => Some(Var::Out),
        "repeat" => Some(Var::Repeat),
        _ => None,
    };
    let var = match var {
        Some(v) => v,
        None => match name.strip_prefix("steps.") {
            Some(s) => match s.strip_suffix(".out") {
                // `steps.prefill[tokens=2048].out` names one cell of `prefill`.
                Some(id) if !id.is_empty() => Var::StepOut(StepId(id.to_string())),
                _ => {
                    return Err((
                        format!("unknown step reference `${{{name}}}`"),
                        "only a step's output folder is available: `${steps.ID.out}`".to_string(),
                    ))
                }
            },
            None => {
                let known = ["plan_dir", "run_id", "work", "out", "repeat"];
                let help = match suggest(name, known) {
                    Some(s) => format!("did you mean `${{{s}}}`?"),
                    None => "known: ${params.X}, ${env.X}, ${env.X:-default}, ${plan_dir}, ${run_id}, ${work}, ${out}, ${repeat}, ${steps.ID.out}; write `$$` for a literal `$`".to_string(),
                };
                return Err((format!("unknown variable `${{{name}}}`"), help));
            }
        },
    };
    if !runtime {
        return Err((
            format!("`${{{name}}}` is only known while running and cannot be used here"),
            "pins are checked before a run: use ${params.X}, ${env.X} or ${plan_dir}".to_string(),
        ));
    }
    Ok(Resolved::Var(var))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx_with<'a>(
        params: &'a BTreeMap<String, ParamValue>,
        env: &'a dyn Fn(&str) -> Option<String>,
    ) -> Ctx<'a> {
        Ctx {
            params,
            env,
            plan_dir: "/p",
            axes: &[],
            revisions: false,
        }
    }

    #[test]
    fn substitutes_and_keeps_runtime_vars() {
        let mut params = BTreeMap::new();
        params.insert("tokens".to_string(), ParamValue::Int(8192));
        let env = |k: &str| (k == "HOME").then(|| "/root".to_string());
        let ctx = ctx_with(&params, &env);
        let (t, refs) = match interpolate(
            "${plan_dir}/x --t ${params.tokens} ${env.HOME} ${env.NOPE:-d} $$ $HOME ${out}/${steps.a.out}",
            &ctx,
            true,
        ) {
            Ok(v) => v,
            Err(_) => panic!("should interpolate"),
        };
        assert_eq!(
            t.segments,
            vec![
                Segment::Lit("/p/x --t 8192 /root d $ $HOME ".into()),
                Segment::Var(Var::Out),
                Segment::Lit("/".into()),
                Segment::Var(Var::StepOut(StepId("a".into()))),
            ]
        );
        assert_eq!(refs.len(), 1);
    }

    #[test]
    fn reports_every_bad_reference() {
        let params = BTreeMap::new();
        let env = |_: &str| None;
        let ctx = ctx_with(&params, &env);
        let errs = match interpolate("${params.x} ${env.Y} ${wrok} ${out", &ctx, true) {
            Err(e) => e,
            Ok(_) => panic!("should fail"),
        };
        assert_eq!(errs.len(), 4);
        assert!(errs[2].help.contains("${work}"));
        let errs = match interpolate("${out}", &ctx, false) {
            Err(e) => e,
            Ok(_) => panic!("runtime var in pin"),
        };
        assert!(errs[0].message.contains("only known while running"));
    }
}
