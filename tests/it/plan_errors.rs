//! Broken plans, each asserting where the error is reported and what it says, and that
//! one load reports every error of a plan at once.

use std::path::Path;

use orchestrate::plan::{load_str, PlanErrors};

const HEAD: &str = "schema = \"orchestrate/plan/v1\"\nname = \"t\"\n";

fn errors(src: &str) -> PlanErrors {
    let env = |k: &str| (k == "SET").then(|| "/set".to_string());
    match load_str(src, Path::new("plans/x.toml"), &env) {
        Ok(_) => panic!("plan should be refused:\n{src}"),
        Err(e) => e,
    }
}

/// (plan body after the header, line, column, message substring)
const CASES: &[(&str, usize, usize, &str)] = &[
    ("[steps.prefill]\nshell = \"x\"\nrepeat = 3\n", 5, 1, "unknown key `repeat` in step `prefill`"),
    ("[steps.a]\nshell = \"x\"\nbackend = \"k8s\"\n", 5, 11, "must be \"local\" or \"slurm\", found `k8s`"),
    ("[cache]\nremote = \"shared/cache\"\n[steps.a]\nshell = \"x\"\n", 4, 10, "`remote` of [cache]: `shared/cache` is neither a shared folder"),
    ("[cache]\nremote = \"s3://AKIA:secret@team-cache/x\"\n[steps.a]\nshell = \"x\"\n", 4, 10, "credentials never go in the URL"),
    ("[cache]\nremote = \"s3://Team_Cache\"\n[steps.a]\nshell = \"x\"\n", 4, 10, "the bucket is 3 to 63 of a-z"),
    ("[cache]\ntrust = [\"keys/ci.pub\"]\n[steps.a]\nshell = \"x\"\n", 4, 10, "trusted key `keys/ci.pub` is not a file"),
    ("[cache]\nremotes = \"/s\"\n[steps.a]\nshell = \"x\"\n", 4, 1, "unknown key `remotes` in [cache]"),
    ("[backend]\nkind = \"slurm\"\npartition = \"--all\"\n[steps.a]\nshell = \"x\"\n", 5, 13, "is not a value sbatch takes"),
    ("[steps.a]\nshell = \"x\"\n[steps.a.slurm]\nnodes = 0\n", 6, 9, "must be between 1 and 100000"),
    ("[steps.a]\nshell = \"x\"\nrepeats = 0\n", 5, 11, "must be between 1"),
    ("[steps.a]\nshell = \"x\"\nrepeats = \"3\"\n", 5, 11, "must be an integer, found a string"),
    ("[steps.a]\nshell = \"x\"\nneeds = [\"zz\"]\n", 5, 10, "needs unknown step `zz`"),
    ("[steps.a]\nshell = \"x\"\nneeds = [\"a\"]\n", 5, 10, "needs itself"),
    ("[steps.a]\nneeds = [\"b\"]\nshell = \"x\"\n[steps.b]\nneeds = [\"a\"]\nshell = \"y\"\n", 4, 10, "dependency cycle: a -> b -> a"),
    ("[steps.a]\nshell = \"echo ${params.x}\"\n", 4, 15, "unknown param `x`"),
    ("[steps.a]\nshell = \"echo ${env.UNSET_VAR}\"\n", 4, 15, "environment variable `UNSET_VAR` is not set"),
    ("[steps.a]\nshell = \"echo ${wrok}\"\n", 4, 15, "unknown variable `${wrok}`"),
    ("[steps.a]\nshell = \"x\"\n[steps.b]\nshell = \"cat ${steps.a.out}/f\"\n", 6, 14, "not upstream"),
    ("[steps.a]\nshell = \"x\"\ndevices = [\"gpu\"]\n", 5, 12, "device `gpu`, which is not requested"),
    ("[limits]\nhost_memory = \"128 GB\"\n[steps.a]\nshell = \"x\"\n", 4, 15, "space before its unit"),
    ("[limits]\nhost_memory = \"128GiBs\"\n[steps.a]\nshell = \"x\"\n", 4, 15, "unknown size unit `GiBs`"),
    ("[limits]\ntimeout = \"10 mins\"\n[steps.a]\nshell = \"x\"\n", 4, 11, "space before its unit"),
    ("[limits]\ntimeout = 10\n[steps.a]\nshell = \"x\"\n", 4, 11, "needs a unit"),
    ("[steps.a]\nshell = \"x\"\nrun = [\"y\"]\n", 5, 7, "has both `run` and `shell`"),
    ("[steps.a]\nenv = {}\n", 3, 8, "has no command"),
    ("[steps.c]\nkind = \"compare\"\nshell = \"x\"\nchecks = [{ name = \"n\", metric = \"finite\", actual = \"f\" }]\n", 5, 9, "cannot have a command"),
    ("[steps.c]\nkind = \"compare\"\n", 3, 8, "has no checks"),
    ("[steps.c]\nkind = \"compare\"\nchecks = [{ name = \"n\", metric = \"rel_rms\", actual = \"f\" }]\n", 5, 11, "rel_rms needs `actual` and `expected`"),
    ("[steps.c]\nkind = \"compare\"\nchecks = [{ name = \"n\", metric = \"bit_exact\", actual = \"f\" }]\n", 5, 11, "bit_exact needs"),
    ("[steps.c]\nkind = \"compare\"\nchecks = [{ name = \"n\", metric = \"rel_rsm\", actual = \"f\", expected = \"g\" }]\n", 5, 34, "unknown metric `rel_rsm`"),
    ("[steps.\"a b\"]\nshell = \"x\"\n", 3, 8, "not a valid step id"),
    ("[steps.a]\nkind = \"compil\"\nshell = \"x\"\n", 4, 8, "unknown step kind `compil`"),
    ("[pins.git.impl]\npath = \"${out}\"\n[steps.a]\nshell = \"x\"\n", 4, 9, "only known while running"),
    ("[pins.files]\n\"uv.lock\" = \"sha256:zz\"\n[steps.a]\nshell = \"x\"\n", 4, 13, "not a sha256 digest"),
    ("nmae = \"x\"\n[steps.a]\nshell = \"x\"\n", 3, 1, "unknown key `nmae` at the top level"),
    ("[steps.a]\nshell = \"x\"\n[steps.a]\nshell = \"y\"\n", 5, 8, "TOML syntax: duplicate key"),
    ("[steps.a]\nshell = \"x\n", 4, 11, "TOML syntax: invalid basic string"),
    // Values the kernel or the record cannot hold are refused at `check`, with the range.
    ("[limits]\npids = 9223372036854775807\n[steps.a]\nshell = \"x\"\n", 4, 8, "must be between 1 and 4194304"),
    ("[steps.a]\nshell = \"x\"\npids = 4194305\n", 5, 8, "must be between 1 and 4194304"),
    ("[steps.a]\nshell = \"x\"\nmemory = \"0B\"\n", 5, 10, "too little memory"),
    ("[limits]\nhost_memory = 18446744073709551615\n[steps.a]\nshell = \"x\"\n", 4, 15, "out of range"),
    ("[limits]\nhost_memory = \"16000TiB\"\n[steps.a]\nshell = \"x\"\n", 4, 15, "more than the record can hold"),
    ("[steps.a]\nshell = \"x\"\ntimeout = \"0s\"\n", 5, 11, "a timeout of 0"),
    ("[limits]\nrun_timeout = \"18446744073709551615ms\"\n[steps.a]\nshell = \"x\"\n", 4, 15, "longer than 366 days"),
    ("[limits]\nrun_timeout = \"18446744073709551616ms\"\n[steps.a]\nshell = \"x\"\n", 4, 15, "is too large"),
    ("[limits]\nrun_timeout = \"9000h\"\n[steps.a]\nshell = \"x\"\n", 4, 15, "longer than 366 days"),
    ("[params]\nn = 9007199254740993\n[steps.a]\nshell = \"x\"\n", 4, 5, "must be between -9007199254740991 and 9007199254740991"),
    ("[steps.a]\nshell = \"echo ${env.A:-${env.B:-z}}\"\n", 4, 15, "inside another is not supported"),
];

#[test]
fn each_broken_plan_is_located_and_explained() {
    crate::support::assert_located(HEAD, CASES, errors);
}

#[test]
fn all_errors_are_reported_at_once() {
    let src = format!(
        "{HEAD}[limits]\nhost_memory = \"1 GiB\"\n[steps.a]\nshell = \"${{params.x}}\"\nrepeat = 2\n[steps.b]\nneeds = [\"zz\"]\nrun = [\"x\"]\n"
    );
    let e = errors(&src);
    let lines: Vec<usize> = e.diagnostics().iter().map(|d| d.line).collect();
    assert_eq!(lines, vec![4, 6, 7, 9], "{e}");
    let text = e.to_string();
    assert!(text.ends_with("4 errors in plans/x.toml\n"), "{text}");
}

#[test]
fn rendering_matches_the_documented_shape() {
    let src = format!("{HEAD}[steps.prefill]\nshell = \"x\"\nrepeat = 3\n");
    let text = errors(&src).to_string();
    assert_eq!(
        text,
        "error: unknown key `repeat` in step `prefill`\n --> plans/x.toml:5:1\n  |\n5 | repeat = 3\n  | ^^^^^^\n  = help: did you mean `repeats`?\n\n1 error in plans/x.toml\n"
    );
}

#[test]
fn missing_required_keys_and_wrong_schema() {
    let e = errors("schema = \"orchestrate/plan/v2\"\n");
    let msgs: Vec<&str> = e.diagnostics().iter().map(|d| d.message.as_str()).collect();
    assert!(
        msgs.iter().any(|m| m.contains("unsupported plan schema")),
        "{msgs:?}"
    );
    assert!(
        msgs.iter().any(|m| m.contains("missing `name`")),
        "{msgs:?}"
    );
    assert!(
        msgs.iter().any(|m| m.contains("missing `steps`")),
        "{msgs:?}"
    );
}

#[test]
fn invalid_utf8_is_an_error_with_a_place() {
    let mut bytes = format!("{HEAD}[steps.a]\nshell = \"").into_bytes();
    bytes.extend_from_slice(&[0xff, 0xfe, b'"', b'\n']);
    let e = match orchestrate::plan::load_bytes(&bytes, Path::new("x.toml"), &|_| None) {
        Err(e) => e,
        Ok(_) => panic!("invalid utf-8 accepted"),
    };
    let d = &e.diagnostics()[0];
    assert_eq!((d.line, d.column), (4, 10));
}

#[test]
fn load_time_variables_are_substituted() {
    let src = format!(
        "{HEAD}[params]\nn = 4\n[steps.a]\nrun = [\"x\", \"${{params.n}}\", \"${{env.SET}}\", \"${{env.NO:-d}}\", \"$${{HOME}}\", \"${{plan_dir}}\"]\n"
    );
    let plan = match load_str(&src, Path::new("/p/plans/x.toml"), &|k| {
        (k == "SET").then(|| "/set".to_string())
    }) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let Some(orchestrate::plan::StepCommand::Argv(argv)) = &plan.steps[0].command else {
        panic!("argv expected")
    };
    let lits: Vec<String> = argv
        .iter()
        .map(|t| t.render(&NoVars).unwrap_or_default())
        .collect();
    assert_eq!(lits, ["x", "4", "/set", "d", "${HOME}", "/p/plans"]);
}

struct NoVars;
impl orchestrate::plan::VarSource for NoVars {
    fn run_id(&self) -> &str {
        "r"
    }
    fn work(&self) -> &str {
        "w"
    }
    fn out(&self) -> Option<&str> {
        None
    }
    fn repeat(&self) -> Option<u32> {
        None
    }
    fn step_out(&self, _: &orchestrate::plan::StepId) -> Option<String> {
        None
    }
}

#[test]
fn steps_come_in_topological_order_ties_by_id() {
    let src = format!(
        "{HEAD}[steps.d]\nneeds = [\"b\", \"c\"]\nshell = \"x\"\n[steps.c]\nneeds = [\"a\"]\nshell = \"x\"\n[steps.b]\nneeds = [\"a\"]\nshell = \"x\"\n[steps.a]\nshell = \"x\"\n[steps.0z]\nshell = \"x\"\n"
    );
    let plan = match load_str(&src, Path::new("x.toml"), &|_| None) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let ids: Vec<&str> = plan.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["0z", "a", "b", "c", "d"]);
}
