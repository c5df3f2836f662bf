//! `[matrix]` plans: how steps expand into cells, how cells pair and fan in, what
//! `--only`, `--set` and `include` change, and where matrix mistakes are reported.

use std::path::Path;

use orchestrate::plan::{load_str, load_str_with, load_with, LoadOptions, Plan, PlanErrors, Var};

use super::support::{project, shown};

const HEAD: &str = "schema = \"orchestrate/plan/v1\"\nname = \"t\"\n";

/// Two axes with one cell excluded: prefill and decode over both, compare over
/// tokens only (fan-in of numerics), summary over none.
const SWEEP: &str = r#"
[matrix]
tokens = [2048, 8192]
numerics = ["f32", "bf16"]
exclude = [{ tokens = 8192, numerics = "bf16" }]

[steps.compile]
shell = "true"

[steps.prefill]
needs = ["compile"]
run = ["kvsim", "--tokens", "${matrix.tokens}", "--numerics", "${matrix.numerics}", "--out", "${out}"]

[steps.decode]
needs = ["prefill"]
run = ["cat", "${steps.prefill.out}/kv"]

[steps.compare]
kind = "compare"
needs = ["decode"]
matrix = ["tokens"]

[[steps.compare.checks]]
name = "f32 vs bf16"
metric = "shape"
actual = "${steps.decode[numerics=f32].out}/kv.npy"
shape = [2, "${matrix.tokens}"]

[steps.summary]
needs = ["compare"]
matrix = []
shell = "true"
"#;

fn load(src: &str) -> Plan {
    load_str(src, Path::new("plans/x.toml"), &|_| None)
        .unwrap_or_else(|e| panic!("plan should load:\n{e}"))
}

fn errors(src: &str) -> PlanErrors {
    match load_str(src, Path::new("plans/x.toml"), &|_| None) {
        Ok(_) => panic!("plan should be refused:\n{src}"),
        Err(e) => e,
    }
}

fn ids(p: &Plan) -> Vec<&str> {
    p.steps.iter().map(|s| s.id.as_str()).collect()
}

fn needs<'a>(p: &'a Plan, id: &str) -> Vec<&'a str> {
    let s = p
        .step(id)
        .unwrap_or_else(|| panic!("no step {id} in {:?}", ids(p)));
    s.needs.iter().map(|n| n.as_str()).collect()
}

fn literal_args(p: &Plan, id: &str) -> Vec<String> {
    match &p.step(id).unwrap().command {
        Some(orchestrate::plan::StepCommand::Argv(a)) => a.iter().map(|t| t.raw.clone()).collect(),
        other => panic!("{id}: not argv: {other:?}"),
    }
}

#[test]
fn steps_expand_over_the_axes_they_use_and_pair_cell_by_cell() {
    let p = load(&format!("{HEAD}{SWEEP}"));
    assert_eq!(
        ids(&p),
        [
            "compile",
            "prefill[tokens=2048,numerics=f32]",
            "prefill[tokens=2048,numerics=bf16]",
            "prefill[tokens=8192,numerics=f32]",
            "decode[tokens=2048,numerics=f32]",
            "decode[tokens=2048,numerics=bf16]",
            "decode[tokens=8192,numerics=f32]",
            "compare[tokens=2048]",
            "compare[tokens=8192]",
            "summary",
        ]
    );
    assert_eq!(
        p.matrix.cells.len(),
        3,
        "the product less the excluded cell"
    );
    // Values land in the command; cells pair with the same cell upstream.
    assert_eq!(
        literal_args(&p, "prefill[tokens=8192,numerics=f32]")[..5],
        ["kvsim", "--tokens", "8192", "--numerics", "f32"]
    );
    assert_eq!(needs(&p, "prefill[tokens=2048,numerics=bf16]"), ["compile"]);
    assert_eq!(
        needs(&p, "decode[tokens=2048,numerics=bf16]"),
        ["prefill[tokens=2048,numerics=bf16]"]
    );
    let decode = p.step("decode[tokens=2048,numerics=bf16]").unwrap();
    let refs: Vec<&str> = match &decode.command {
        Some(orchestrate::plan::StepCommand::Argv(a)) => a
            .iter()
            .flat_map(|t| t.segments.iter())
            .filter_map(|s| match s {
                orchestrate::plan::Segment::Var(Var::StepOut(id)) => Some(id.as_str()),
                _ => None,
            })
            .collect(),
        _ => unreachable!(),
    };
    assert_eq!(refs, ["prefill[tokens=2048,numerics=bf16]"]);
    // A narrowed step waits for every cell it does not split on.
    assert_eq!(
        needs(&p, "compare[tokens=2048]"),
        [
            "decode[tokens=2048,numerics=f32]",
            "decode[tokens=2048,numerics=bf16]"
        ]
    );
    assert_eq!(
        needs(&p, "compare[tokens=8192]"),
        ["decode[tokens=8192,numerics=f32]"]
    );
    assert_eq!(
        needs(&p, "summary"),
        ["compare[tokens=2048]", "compare[tokens=8192]"]
    );
    // Checks expand with their step: the cell in the name, the selector resolved,
    // `${matrix.X}` in a shape filled in.
    let c = &p.step("compare[tokens=8192]").unwrap().checks[0];
    assert_eq!(c.name, "f32 vs bf16 [tokens=8192]");
    assert_eq!(c.shape.as_deref(), Some(&[2, 8192][..]));
    assert_eq!(
        c.actual.as_ref().unwrap().raw,
        "${steps.decode[tokens=8192,numerics=f32].out}/kv.npy"
    );
    let cell = p
        .step("compare[tokens=8192]")
        .unwrap()
        .cell
        .clone()
        .unwrap();
    assert_eq!(cell.0.as_str(), "compare");
    assert_eq!(cell.1, [("tokens".to_string(), "8192".to_string())]);
}

#[test]
fn include_rows_add_cells_and_only_narrows_them() {
    let src = format!(
        "{HEAD}[matrix]\ntokens = [2048]\nnumerics = [\"f32\"]\ninclude = [{{ tokens = 8192, numerics = \"bf16\" }}]\n\
         [steps.a]\nshell = \"echo ${{matrix.tokens}} ${{matrix.numerics}}\"\n"
    );
    let p = load(&src);
    assert_eq!(
        ids(&p),
        [
            "a[tokens=2048,numerics=f32]",
            "a[tokens=8192,numerics=bf16]"
        ]
    );
    let only = [("numerics".to_string(), "bf16".to_string())];
    let p = load_str_with(&src, Path::new("x.toml"), &|_| None, &only).unwrap();
    assert_eq!(ids(&p), ["a[tokens=8192,numerics=bf16]"]);
    for (only, msg) in [
        (
            ("tokns", "2048"),
            "the matrix has no axis `tokns` (it has: tokens, numerics)",
        ),
        (
            ("tokens", "4096"),
            "axis `tokens` has no value `4096` (it has: 2048, 8192)",
        ),
    ] {
        let only = [(only.0.to_string(), only.1.to_string())];
        let e = load_str_with(&src, Path::new("x.toml"), &|_| None, &only).unwrap_err();
        assert!(e.to_string().contains(msg), "{e}");
    }
    // Values that no cell has together.
    let both = [
        ("tokens".to_string(), "2048".to_string()),
        ("numerics".to_string(), "bf16".to_string()),
    ];
    let e = load_str_with(&src, Path::new("x.toml"), &|_| None, &both).unwrap_err();
    assert!(
        e.to_string()
            .contains("no cell of the matrix has these values"),
        "{e}"
    );
}

#[test]
fn a_plan_without_a_matrix_keeps_its_ids() {
    let p = load(&format!("{HEAD}[steps.a]\nshell = \"x\"\n[steps.b]\nneeds = [\"a\"]\nshell = \"cat ${{steps.a.out}}\"\n"));
    assert_eq!(ids(&p), ["a", "b"]);
    assert!(p.steps.iter().all(|s| s.cell.is_none()));
}

/// (plan body after the header, line, column, message substring)
const CASES: &[(&str, usize, usize, &str)] = &[
    ("[matrix]\ntokens = []\n[steps.a]\nshell = \"x\"\n", 4, 10, "matrix axis `tokens` has no values"),
    ("[matrix]\ntokens = [1, 1]\n[steps.a]\nshell = \"x\"\n", 4, 14, "lists `1` twice"),
    ("[matrix]\ntokens = [\"a b\"]\n[steps.a]\nshell = \"x\"\n", 4, 11, "is not a plain value"),
    ("[matrix]\ntokens = [[1]]\n[steps.a]\nshell = \"x\"\n", 4, 11, "a string, number or boolean"),
    ("[matrix]\ntokens = [1]\n[steps.a]\nshell = \"${matrix.tokns}\"\n", 6, 10, "unknown matrix axis `tokns`"),
    ("[steps.a]\nshell = \"${matrix.tokens}\"\n", 4, 10, "unknown matrix axis `tokens`"),
    ("[matrix]\ntokens = [1]\nexclude = [{ tokns = 1 }]\n[steps.a]\nshell = \"x\"\n", 5, 14, "`exclude` names `tokns`, which is not a matrix axis"),
    ("[matrix]\ntokens = [1, 2]\nexclude = [{ tokens = 3 }]\n[steps.a]\nshell = \"x\"\n", 5, 23, "which the axis does not list"),
    ("[matrix]\ntokens = [1, 2]\nn = [1]\ninclude = [{ tokens = 1 }]\n[steps.a]\nshell = \"x\"\n", 6, 12, "must give a value for every axis"),
    ("[matrix]\ntokens = [1, 2]\n[steps.a]\nshell = \"${matrix.tokens}\"\nmatrix = []\n", 7, 10, "uses ${matrix.tokens} but is not expanded over it"),
    ("[matrix]\ntokens = [1, 2]\n[steps.a]\nshell = \"x\"\nmatrix = [\"tokns\"]\n", 7, 10, "names matrix axis `tokns`"),
    ("[matrix]\ntokens = [1, 2]\n[steps.a]\nshell = \"${matrix.tokens}\"\n[steps.b]\nneeds = [\"a\"]\nmatrix = []\nshell = \"cat ${steps.a.out}\"\n", 10, 14, "is ambiguous: `a` has 2 cells here"),
    ("[matrix]\ntokens = [1, 2]\n[steps.a]\nshell = \"${matrix.tokens}\"\n[steps.b]\nneeds = [\"a\"]\nmatrix = []\nshell = \"cat ${steps.a[tokens=3].out}\"\n", 10, 14, "selects `tokens=3`, which the matrix does not have"),
    ("[matrix]\nn = [\"x\"]\n[steps.c]\nkind = \"compare\"\nchecks = [{ name = \"s\", metric = \"shape\", actual = \"f\", shape = [\"${matrix.n}\"] }]\n", 5, 8, "not a whole number"),
    ("[steps.a]\nshell = \"x\"\nretries = 101\n", 5, 11, "must be between 0 and 100"),
    ("[steps.a]\nshell = \"${revision.dir}\"\n", 4, 10, "needs a [revisions] table"),
    ("[revisions]\nb = { repo = \"r\" }\ni = { repo = \"r\" }\n[steps.a]\nshell = \"${revision.dri}\"\n", 7, 10, "unknown revision field `dri`"),
    ("[revisions]\nb = { repo = \"r\" }\ni = { repo = \"other\" }\n[steps.a]\nshell = \"x\"\n", 5, 14, "names another repository"),
    ("[revisions]\nb = { repo = \"r\" }\n[steps.a]\nshell = \"x\"\nresults = { junit = \"j.xml\" }\ngate = \"new\"\n", 8, 8, "gates on failures new against the baseline, but [revisions] declares only `b`"),
    ("[revisions]\nb = { repo = \"r\", commit = \"--all\" }\ni = { repo = \"r\" }\n[steps.a]\nshell = \"x\"\n", 4, 28, "is not a git revision"),
    ("[revisions]\nb = { repo = \"r\" }\ni = { repo = \"r\" }\n[steps.a]\nshell = \"x\"\nrevisions = [\"b\", \"impl\"]\n", 8, 13, "names revision `impl`, which [revisions] does not declare"),
    ("[steps.a]\nshell = \"x\"\ngate = \"new\"\n", 5, 8, "gates on new failures but declares no `results`"),
    ("[steps.a]\nshell = \"x\"\nresults = { junit = \"j\", xml = \"x\" }\n", 5, 26, "unknown key `xml`"),
    ("[matrix]\nrevision = [1]\n[revisions]\nb = { repo = \"r\" }\ni = { repo = \"r\" }\n[steps.a]\nshell = \"x\"\n", 4, 1, "`revision` is the axis [revisions] makes"),
    ("[steps.a]\nshell = \"x\"\nretries = 1\nretry_on = [\"exit:0\"]\n", 6, 13, "`exit:0` is not a failure `retry_on` knows"),
    ("[steps.a]\nshell = \"x\"\nretries = 1\nretry_on = [\"busy\"]\n", 6, 13, "`busy` is not a failure"),
    ("[steps.a]\nshell = \"x\"\nretry_on = [\"oom\"]\n", 5, 12, "says what to retry but `retries` is 0"),
];

#[test]
fn matrix_mistakes_are_located_and_explained() {
    crate::support::assert_located(HEAD, CASES, errors);
}

#[test]
fn full8k_is_full_at_8k_by_include() {
    let full = load_with(
        &project("plans/full.toml"),
        &LoadOptions {
            only: vec![("tokens".into(), "8192".into())],
            set: vec![],
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let k8 = load_with(&project("plans/full8k.toml"), &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids(&full), ids(&k8));
    assert!(ids(&k8).contains(&"prefill[tokens=8192]"), "{:?}", ids(&k8));
    for s in &full.steps {
        let t = k8.step(s.id.as_str()).unwrap();
        assert_eq!(
            format!("{:?}", s.command),
            format!("{:?}", t.command),
            "{}",
            s.id
        );
        assert_eq!(s.checks.len(), t.checks.len());
    }
    assert_eq!(k8.name, "kvsim-full8k");
    let all = orchestrate::plan::load(&project("plans/full.toml")).unwrap();
    assert_eq!(all.matrix.cells.len(), 2);
    assert!(ids(&all).contains(&"compare[tokens=2048]"));
}

#[test]
fn check_lists_cells_and_applies_set_and_only() {
    let out = crate::support::cli()
        .args([
            "check",
            "--set",
            "matrix.tokens=[1024, 4096]",
            "--only",
            "tokens=4096",
        ])
        .arg(project("plans/full.toml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", shown(&out));
    assert!(text.contains("matrix: tokens = [1024, 4096]"), "{text}");
    assert!(text.contains("1 of 2 cells (--only tokens=4096)"), "{text}");
    assert!(text.contains("prefill[tokens=4096]"), "{text}");
    assert!(!text.contains("prefill[tokens=1024]"), "{text}");
    assert!(text.contains("\"--tokens\",\"4096\""), "{text}");
    // A --set that is not TOML, or does not fit the plan, is refused by name.
    let out = crate::support::cli()
        .args(["check", "--set", "matrix.tokens=[2048,"])
        .arg(project("plans/full.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--set matrix.tokens"),
        "{}",
        shown(&out)
    );
}

#[test]
fn include_errors_name_the_file_and_line_they_are_in() {
    let t = tempfile::tempdir().unwrap();
    std::fs::copy(project("plans/full.toml"), t.path().join("full.toml")).unwrap();
    let write = |name: &str, text: &str| {
        let p = t.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let bad = write(
        "bad.toml",
        "schema = \"orchestrate/plan/v1\"\ninclude = \"full.toml\"\nname = \"x\"\n[matrix]\ntokens = []\n[steps.prefill]\nrepeats = 0\n",
    );
    let e = load_with(&bad, &LoadOptions::default())
        .unwrap_err()
        .to_string();
    // Both mistakes are in bad.toml, where they are written; nothing cascades.
    assert!(e.contains("--> ") && e.contains("bad.toml:5:10"), "{e}");
    assert!(e.contains("bad.toml:7:11"), "{e}");
    assert!(e.contains("2 errors in"), "{e}");
    assert!(!e.contains("unknown matrix axis"), "{e}");
    // An override that breaks a step of the included plan: shown where the step is.
    let set = load_with(
        &project("plans/full8k.toml"),
        &LoadOptions {
            only: vec![],
            set: vec![("steps.prefill.timeout".into(), "\"0s\"".into())],
        },
    )
    .unwrap_err()
    .to_string();
    assert!(set.contains("a timeout of 0"), "{set}");
    // Only a plan beside this one, and only one level.
    let outside = write(
        "out.toml",
        "schema = \"orchestrate/plan/v1\"\ninclude = \"../full.toml\"\nname = \"x\"\n",
    );
    let e = load_with(&outside, &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("name a plan in the same folder"), "{e}");
    let twice = write(
        "twice.toml",
        "schema = \"orchestrate/plan/v1\"\ninclude = \"bad.toml\"\nname = \"x\"\n",
    );
    let e = load_with(&twice, &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("an included plan cannot include another"), "{e}");
}
