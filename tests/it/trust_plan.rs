//! Plans and command lines cannot hang, crash or mislead the tool (the trust issue,
//! items 4, 20, 21, 24–27): values that name one cell twice are refused, the run
//! always ends on a second interrupt whatever is stuck, huge matrices are refused
//! before they are built, includes are parsed and never follow a link, revision
//! names and quoted `--set` keys are checked, every free-text and path string takes
//! `${env.X}`, a closed stdout ends a command quietly, and `.ci/slurm` notices a
//! daemon that died at once.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{cli, host_exclusive, project, shown};

fn check(plan: &str) -> std::process::Output {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("plan.toml");
    std::fs::write(&p, plan).unwrap();
    cli().arg("check").arg(&p).output().unwrap()
}

const HEAD: &str = "schema = \"orchestrate/plan/v1\"\nname = \"t\"\n";

#[test]
fn values_that_read_alike_name_one_cell_and_are_refused() {
    for axis in ["[1, \"1\"]", "[1, 1.0, \"1\"]", "[\"a\", \"a\"]"] {
        let o = check(&format!(
            "{HEAD}[matrix]\nx = {axis}\n[steps.s]\nshell = \"echo ${{matrix.x}}\"\n"
        ));
        assert_eq!(o.status.code(), Some(2), "{axis}: {}", shown(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("would name the same cell") || err.contains("twice"),
            "{axis}: {err}"
        );
    }
    // An include row whose value reads like one the axis has is that value.
    let o = check(&format!(
        "{HEAD}[matrix]\nx = [1, 2]\ninclude = [{{ x = \"1\" }}]\n[steps.s]\nshell = \"echo ${{matrix.x}}\"\n"
    ));
    assert!(o.status.success(), "{}", shown(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.matches("s[x=1]").count(), 1, "{out}");
}

#[test]
fn a_matrix_too_large_is_refused_before_it_is_built() {
    let values = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    // 99 999 × 99 999 would need 240 GB built first; 300 000 distinct values on one
    // axis, a quadratic duplicate search.
    for m in [
        format!("a = [{}]\nb = [{}]", values(99_999), values(99_999)),
        format!("a = [{}]", values(300_000)),
    ] {
        let o = check(&format!(
            "{HEAD}[matrix]\n{m}\n[steps.s]\nshell = \"echo ${{matrix.a}}\"\n"
        ));
        assert_eq!(o.status.code(), Some(2), "{}", shown(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("more than 100000 cells"), "{err}");
    }
}

#[test]
fn an_include_is_parsed_never_follows_a_link_and_refuses_itself_and_chains() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let base = format!("{HEAD}[steps.s]\nshell = \"echo base\"\n");
    std::fs::write(d.join("base.toml"), &base).unwrap();
    let secret = d.join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET-LINE\n").unwrap();
    std::os::unix::fs::symlink(&secret, d.join("linked.toml")).unwrap();
    let run = |name: &str, text: &str| {
        std::fs::write(d.join(name), text).unwrap();
        cli().arg("check").arg(d.join(name)).output().unwrap()
    };
    let o = run("a.toml", "include = \"linked.toml\"\nname = \"a\"\n");
    assert_eq!(o.status.code(), Some(2));
    let all = shown(&o);
    assert!(!all.contains("TOP-SECRET-LINE"), "{all}");
    assert!(all.contains("symbolic link"), "{all}");
    let o = run("self.toml", "include = \"self.toml\"\nname = \"x\"\n");
    assert!(shown(&o).contains("includes itself"), "{}", shown(&o));
    std::fs::write(
        d.join("mid.toml"),
        "include = \"base.toml\"\nname = \"mid\"\n",
    )
    .unwrap();
    let o = run("top.toml", "include = \"mid.toml\"\nname = \"top\"\n");
    assert!(
        shown(&o).contains("`mid.toml` includes `base.toml` in turn"),
        "{}",
        shown(&o)
    );
    // An include after a multi-line string that holds `[x]` is still an include.
    let o = run(
        "late.toml",
        "description = \"\"\"\n[x]\n\"\"\"\ninclude = \"base.toml\"\nname = \"late\"\n",
    );
    assert!(o.status.success(), "{}", shown(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("plan: late"),
        "{}",
        shown(&o)
    );
}

#[test]
fn a_revision_named_dot_dot_is_refused_by_check() {
    let o = check(&format!(
        "{HEAD}[revisions]\nbaseline = {{ repo = \".\", commit = \"HEAD~1\" }}\n\"..\" = {{ repo = \".\" }}\n[steps.s]\nrevisions = [\"baseline\", \"..\"]\nshell = \"true\"\n"
    ));
    assert_eq!(o.status.code(), Some(2), "{}", shown(&o));
    assert!(
        shown(&o).contains("`..` is not a revision name"),
        "{}",
        shown(&o)
    );
}

#[test]
fn a_quoted_key_in_set_is_one_key() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("plan.toml");
    std::fs::write(
        &p,
        format!("{HEAD}[params]\n\"a.b\" = 1\n[steps.s]\nshell = \"echo ${{params.a.b}}\"\n"),
    )
    .unwrap();
    let set = orchestrate::plan::overrides::parse_set("params.\"a.b\"=2").unwrap();
    let opts = orchestrate::plan::LoadOptions {
        set: vec![set],
        ..Default::default()
    };
    let plan = orchestrate::plan::load_with(&p, &opts).unwrap();
    assert_eq!(
        plan.params.get("a.b"),
        Some(&orchestrate::plan::ParamValue::Int(2)),
        "{:?}",
        plan.params
    );
    assert!(
        !plan.params.contains_key("a"),
        "not a table `a` with a key `b`"
    );
    let o = cli()
        .arg("check")
        .arg(&p)
        .args(["--set", "params.\"a.b=2"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(shown(&o).contains("a TOML key"), "{}", shown(&o));
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let plan = project("plans/full.toml");
    let record = project("records/20261201T135804Z-83091a");
    let cases: Vec<Vec<String>> = vec![
        vec!["check".into(), plan.display().to_string()],
        vec!["schema".into(), "record".into()],
        vec!["verify".into(), record.display().to_string()],
        vec![
            "report".into(),
            record.display().to_string(),
            "--template".into(),
            "json".into(),
        ],
        vec!["--help".into()],
    ];
    for args in cases {
        let mut child = cli()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read one byte, then close the pipe, as `| head -c 1` does.
        {
            use std::io::Read;
            let mut out = child.stdout.take().unwrap();
            let mut b = [0u8; 1];
            let _ = out.read(&mut b);
        }
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(101), "{args:?} panicked: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn ci_slurm_notices_a_daemon_that_died_at_once() {
    let t = Instant::now();
    let o = Command::new("bash")
        .arg(project(".ci/slurm"))
        .arg("selftest")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", shown(&o));
    assert!(t.elapsed() < Duration::from_secs(10));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("exited at once"), "{err}");
    assert!(
        err.contains("ClusterName has changed"),
        "the log's tail: {err}"
    );
}

/// Every string-valued key of the plan schema either takes `${env.X}` (loaded with
/// two values, the plans differ) or is a name of the plan's own (a step, device,
/// axis, revision, secret or fixed word), listed here and in docs/plan.md.
#[test]
fn every_free_text_and_path_string_takes_env_variables() {
    const STEP: &str = "[steps.s]\nshell = \"true\"\n";
    const CHECK_HEAD: &str = "[steps.c]\nkind = \"compare\"\nneeds = [\"s\"]\n[[steps.c.checks]]\n";
    let t = |x: &str| x.replace('@', "${env.ORCH_T}");
    let rows: Vec<(&str, String, &str, &str)> = vec![
        (".name", format!("schema = \"orchestrate/plan/v1\"\nname = \"n-@\"\n{STEP}"), "a", "b"),
        (".description", format!("{HEAD}description = \"@\"\n{STEP}"), "a", "b"),
        (".changes", format!("{HEAD}changes = \"@\"\n{STEP}"), "a", "b"),
        (".backend.partition", format!("{HEAD}[backend]\npartition = \"@\"\n{STEP}"), "a", "b"),
        (".backend.account", format!("{HEAD}[backend]\naccount = \"@\"\n{STEP}"), "a", "b"),
        (".backend.qos", format!("{HEAD}[backend]\nqos = \"@\"\n{STEP}"), "a", "b"),
        (".backend.constraint", format!("{HEAD}[backend]\nconstraint = \"@\"\n{STEP}"), "a", "b"),
        (".backend.time", format!("{HEAD}[backend]\ntime = \"@\"\n{STEP}"), "1:00", "2:00"),
        (".backend.sbatch_args[]", format!("{HEAD}[backend]\nsbatch_args = [\"--comment=@\"]\n{STEP}"), "a", "b"),
        (".backend.queue_timeout", format!("{HEAD}[backend]\nqueue_timeout = \"@\"\n{STEP}"), "1m", "2m"),
        (".steps.*.slurm.queue_timeout", format!("{HEAD}[steps.s]\nshell = \"true\"\n[steps.s.slurm]\nqueue_timeout = \"@\"\n"), "1m", "2m"),
        (".backend.gres.*", format!("{HEAD}[backend]\ngres = {{ gpu = \"@\" }}\n{STEP}"), "a", "b"),
        (".cache.remote", format!("{HEAD}[cache]\nremote = \"/s/@\"\n{STEP}"), "a", "b"),
        (".cache.trust[]", format!("{HEAD}[cache]\ntrust = [\"/etc/@\"]\n{STEP}"), "passwd", "group"),
        (".devices.*.ids[]", format!("{HEAD}[devices]\ngpu = {{ kind = \"gpu\", ids = [\"@\"] }}\n{STEP}"), "a", "b"),
        (".limits.cpus", format!("{HEAD}[limits]\ncpus = \"@\"\n{STEP}"), "0", "0-1"),
        (".limits.grace", format!("{HEAD}[limits]\ngrace = \"@\"\n{STEP}"), "1s", "2s"),
        (".limits.host_memory", format!("{HEAD}[limits]\nhost_memory = \"@\"\n{STEP}"), "1GiB", "2GiB"),
        (".limits.run_timeout", format!("{HEAD}[limits]\nrun_timeout = \"@\"\n{STEP}"), "1m", "2m"),
        (".limits.timeout", format!("{HEAD}[limits]\ntimeout = \"@\"\n{STEP}"), "1m", "2m"),
        (".pins.files.*", format!("{HEAD}[pins.files]\n\"x\" = \"@\"\n{STEP}"), "", "sha256:0000000000000000000000000000000000000000000000000000000000000000"),
        (".pins.git.*.path", format!("{HEAD}[pins.git.r]\npath = \"@\"\n{STEP}"), ".", ".."),
        (".pins.git.*.commit", format!("{HEAD}[pins.git.r]\npath = \".\"\ncommit = \"@\"\n{STEP}"), "abcdef1", "abcdef2"),
        (".pins.model.*.path", format!("{HEAD}[pins.model.m]\npath = \"@\"\n{STEP}"), "a", "b"),
        (".pins.model.*.id", format!("{HEAD}[pins.model.m]\npath = \"m\"\nid = \"@\"\n{STEP}"), "a", "b"),
        (".pins.model.*.revision", format!("{HEAD}[pins.model.m]\npath = \"m\"\nrevision = \"@\"\n{STEP}"), "a", "b"),
        (".pins.model.*.digest", format!("{HEAD}[pins.model.m]\npath = \"m\"\ndigest = \"@\"\n{STEP}"), "sha256:1111111111111111111111111111111111111111111111111111111111111111", "sha256:0000000000000000000000000000000000000000000000000000000000000000"),
        (".pins.python.*.python", format!("{HEAD}[pins.python.p]\npython = \"@\"\npackages = [\"numpy==2.1.3\"]\n{STEP}"), "python3", "python"),
        (".pins.python.*.packages[]", format!("{HEAD}[pins.python.p]\npackages = [\"@\"]\n{STEP}"), "numpy==2.1.3", "scipy==1.14.1"),
        (".pins.tools.*.command[]", format!("{HEAD}[pins.tools.x]\ncommand = [\"@\", \"--version\"]\n{STEP}"), "rustc", "cargo"),
        (".pins.tools.*.expect", format!("{HEAD}[pins.tools.x]\ncommand = [\"x\"]\nexpect = \"@\"\n{STEP}"), "a", "b"),
        (".pins.tools.*.timeout", format!("{HEAD}[pins.tools.x]\ncommand = [\"x\"]\ntimeout = \"@\"\n{STEP}"), "1s", "2s"),
        (".limits.cgroup_parent", format!("{HEAD}[limits]\ncgroup_parent = \"/o/@\"\n{STEP}"), "a", "b"),
        (".report.cell_title", format!("{HEAD}[report]\ncell_title = \"@\"\n{STEP}"), "a", "b"),
        (".report.templates[]", format!("{HEAD}[report]\ntemplates = [\"@\"]\n{STEP}"), "pr", "html"),
        (".revisions.*.repo", format!("{HEAD}[revisions]\nbaseline = {{ repo = \"@\", commit = \"HEAD~1\" }}\nimplementation = {{ repo = \"@\" }}\n{STEP}"), ".", ".."),
        (".revisions.*.commit", format!("{HEAD}[revisions]\nbaseline = {{ repo = \".\", commit = \"@\" }}\nimplementation = {{ repo = \".\" }}\n{STEP}"), "HEAD~1", "HEAD~2"),
        (".steps.*.run[]", format!("{HEAD}[steps.s]\nrun = [\"echo\", \"@\"]\n"), "a", "b"),
        (".steps.*.shell", format!("{HEAD}[steps.s]\nshell = \"echo @\"\n"), "a", "b"),
        (".steps.*.cwd", format!("{HEAD}[steps.s]\nshell = \"true\"\ncwd = \"@\"\n"), "/a", "/b"),
        (".steps.*.env.*", format!("{HEAD}[steps.s]\nshell = \"true\"\nenv = {{ X = \"@\" }}\n"), "a", "b"),
        (".steps.*.inputs[]", format!("{HEAD}[steps.s]\nshell = \"true\"\ninputs = [\"@\"]\n"), "a", "b"),
        (".steps.*.outputs[]", format!("{HEAD}[steps.s]\nshell = \"true\"\noutputs = [\"${{out}}/@\"]\n"), "a", "b"),
        (".steps.*.memory", format!("{HEAD}[steps.s]\nshell = \"true\"\nmemory = \"@\"\n"), "1GiB", "2GiB"),
        (".steps.*.timeout", format!("{HEAD}[steps.s]\nshell = \"true\"\ntimeout = \"@\"\n"), "1m", "2m"),
        (".steps.*.results.junit", format!("{HEAD}[steps.s]\nshell = \"true\"\nresults = {{ junit = \"${{out}}/@\" }}\n"), "a", "b"),
        (".steps.*.results.sarif", format!("{HEAD}[steps.s]\nshell = \"true\"\nresults = {{ sarif = \"${{out}}/@\" }}\n"), "a", "b"),
        (".steps.*.slurm.partition", format!("{HEAD}[steps.s]\nshell = \"true\"\n[steps.s.slurm]\npartition = \"@\"\n"), "a", "b"),
        (".steps.*.slurm.time", format!("{HEAD}[steps.s]\nshell = \"true\"\n[steps.s.slurm]\ntime = \"@\"\n"), "1:00", "2:00"),
        (".steps.*.slurm.gres", format!("{HEAD}[steps.s]\nshell = \"true\"\n[steps.s.slurm]\ngres = \"@\"\n"), "gpu:1", "gpu:2"),
        (".steps.*.checks[].name", format!("{HEAD}{STEP}{CHECK_HEAD}name = \"@\"\nmetric = \"finite\"\nactual = \"${{steps.s.out}}/a.npy\"\n"), "a", "b"),
        (".steps.*.checks[].actual", format!("{HEAD}{STEP}{CHECK_HEAD}name = \"c\"\nmetric = \"finite\"\nactual = \"${{steps.s.out}}/@.npy\"\n"), "a", "b"),
        (".steps.*.checks[].expected", format!("{HEAD}{STEP}{CHECK_HEAD}name = \"c\"\nmetric = \"rel_rms\"\nmax = 0.1\nactual = \"${{steps.s.out}}/a.npy\"\nexpected = \"${{steps.s.out}}/@.npy\"\n"), "a", "b"),
        (".steps.*.checks[].actual_logits", format!("{HEAD}{STEP}{CHECK_HEAD}name = \"c\"\nmetric = \"first_divergence\"\nactual = \"${{steps.s.out}}/t.npy\"\nexpected = \"${{steps.s.out}}/u.npy\"\nactual_logits = \"${{steps.s.out}}/@.npy\"\nexpected_logits = \"${{steps.s.out}}/l.npy\"\n"), "a", "b"),
        (".steps.*.checks[].expected_logits", format!("{HEAD}{STEP}{CHECK_HEAD}name = \"c\"\nmetric = \"first_divergence\"\nactual = \"${{steps.s.out}}/t.npy\"\nexpected = \"${{steps.s.out}}/u.npy\"\nactual_logits = \"${{steps.s.out}}/l.npy\"\nexpected_logits = \"${{steps.s.out}}/@.npy\"\n"), "a", "b"),
        (".steps.*.checks[].file", format!("{HEAD}[steps.s]\nshell = \"true\"\nrepeats = 2\n{CHECK_HEAD}name = \"c\"\nmetric = \"bit_exact\"\nacross = \"s\"\nfile = \"@.bin\"\n"), "a", "b"),
    ];
    // Names of the plan's own things and fixed words: taken as written.
    let names: BTreeSet<&str> = [
        ".schema",
        ".include",
        ".secrets[]",
        ".secret_env[]",
        ".params.*",
        ".matrix.*[]",
        ".matrix.exclude[].*",
        ".matrix.include[].*",
        ".devices.*.kind",
        ".devices.*.mig",
        ".steps.*.needs[]",
        ".steps.*.devices[]",
        ".steps.*.matrix[]",
        ".steps.*.revisions[]",
        ".steps.*.retry_on[]",
        ".steps.*.cache_key[]",
        ".steps.*.report.metric",
        ".steps.*.report.threshold",
        ".steps.*.checks[].across",
        ".steps.*.checks[].dtype",
        ".steps.*.checks[].shape[]",
    ]
    .into_iter()
    .collect();
    let schema: serde_json::Value =
        serde_json::from_str(&orchestrate::plan::schema_string()).unwrap();
    let keys = string_keys(&schema);
    let covered: BTreeSet<&str> = rows
        .iter()
        .map(|r| r.0)
        .chain(names.iter().copied())
        .collect();
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| !covered.contains(k.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "string keys nobody classified: {missing:?}"
    );
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/plan.md")).unwrap();
    let undocumented: Vec<&&str> = covered
        .iter()
        .filter(|k| !doc.contains(&format!("`{k}`")))
        .collect();
    assert!(
        undocumented.is_empty(),
        "docs/plan.md does not list {undocumented:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.toml");
    let mut failures = Vec::new();
    for (key, text, a, b) in &rows {
        let text = t(text);
        let load = |v: &str| {
            let v = v.to_string();
            let env = move |k: &str| (k == "ORCH_T").then(|| v.clone());
            orchestrate::plan::load_str(&text, &path, &env)
                .map(|p| format!("{:?}", Plan(p)))
                .map_err(|e| e.to_string())
        };
        match (load(a), load(b)) {
            (Ok(x), Ok(y)) if x != y => {}
            (Ok(_), Ok(_)) => failures.push(format!("{key}: `${{env.X}}` is not filled in")),
            (Err(e), _) | (_, Err(e)) => failures.push(format!("{key}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A plan's Debug form without its source text (which holds `${env.X}` as written).
struct Plan(orchestrate::plan::Plan);

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut p = self.0.clone();
        p.source = String::new();
        let text = format!("{p:?}");
        // Templates keep their raw text too: only what was filled in may differ.
        let re = regex_lite::Regex::new(r#"raw: "(?:[^"\\]|\\.)*""#).unwrap();
        f.write_str(&re.replace_all(&text, "raw: _"))
    }
}

fn string_keys(schema: &serde_json::Value) -> BTreeSet<String> {
    schema_keys(schema, true)
}

/// The schema's keys as `.a.*.b[]` paths: those that take free strings, or all.
fn schema_keys(schema: &serde_json::Value, strings_only: bool) -> BTreeSet<String> {
    fn walk(
        defs: &serde_json::Value,
        node: &serde_json::Value,
        path: &str,
        depth: usize,
        strings_only: bool,
        out: &mut BTreeSet<String>,
    ) {
        if depth > 12 {
            return;
        }
        let node = match node.get("$ref").and_then(|r| r.as_str()) {
            Some(r) => &defs[r.rsplit('/').next().unwrap_or_default()],
            None => node,
        };
        if !node.is_object() {
            return;
        }
        for k in ["anyOf", "oneOf", "allOf"] {
            for n in node[k].as_array().into_iter().flatten() {
                walk(defs, n, path, depth + 1, strings_only, out);
            }
        }
        let is_string = match &node["type"] {
            serde_json::Value::String(s) => s == "string",
            serde_json::Value::Array(a) => a.iter().any(|t| t == "string"),
            _ => false,
        };
        if strings_only && is_string && node.get("enum").is_none() && node.get("const").is_none() {
            out.insert(path.to_string());
        }
        if let Some(props) = node["properties"].as_object() {
            for (k, v) in props {
                if !strings_only {
                    out.insert(format!("{path}.{k}"));
                }
                walk(
                    defs,
                    v,
                    &format!("{path}.{k}"),
                    depth + 1,
                    strings_only,
                    out,
                );
            }
        }
        if node.get("additionalProperties").is_some() {
            walk(
                defs,
                &node["additionalProperties"],
                &format!("{path}.*"),
                depth + 1,
                strings_only,
                out,
            );
        }
        if node.get("items").is_some() {
            walk(
                defs,
                &node["items"],
                &format!("{path}[]"),
                depth + 1,
                strings_only,
                out,
            );
        }
    }
    let mut out = BTreeSet::new();
    walk(&schema["$defs"], schema, "", 0, strings_only, &mut out);
    out
}

/// Every key of the plan schema is in docs/plan.md: a key as `` `.a.b` ``, a table
/// through the keys under it.
#[test]
fn every_plan_key_in_the_schema_is_documented() {
    let schema: serde_json::Value =
        serde_json::from_str(&orchestrate::plan::schema_string()).unwrap();
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/plan.md")).unwrap();
    let keys = schema_keys(&schema, false);
    assert!(
        keys.len() > 100,
        "{} keys: the walk missed the schema",
        keys.len()
    );
    // `.a.b`, or `.a.b[]`, `.a.b.*` and the keys under it.
    let listed = |k: &str| {
        doc.match_indices(&format!("`{k}"))
            .any(|(i, m)| matches!(doc.as_bytes().get(i + m.len()), Some(b'`' | b'[' | b'.')))
    };
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| {
            !listed(k)
                && !keys.iter().any(|under| {
                    under.len() > k.len() && under.starts_with(k.as_str()) && listed(under)
                })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/plan.md does not document {missing:?}"
    );
}

/// The stall points of the run: where an await (or a thread) may never return.
const STALLS: &[&str] = &[
    "dispatch-loop",
    "dispatch-loop:block",
    "dispatch-end",
    "after-dag",
];

#[test]
fn a_second_interrupt_ends_the_run_whatever_is_stuck() {
    let _host = host_exclusive();
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    std::fs::write(
        root.join("plan.toml"),
        format!("{HEAD}[steps.long]\nshell = \"(setsid sleep 300 &) ; sleep 120\"\n"),
    )
    .unwrap();
    for stall in STALLS {
        let records = root.join(format!("records-{}", stall.replace(':', "-")));
        let mut child = cli()
            .arg("run")
            .arg(root.join("plan.toml"))
            .arg("--records")
            .arg(&records)
            .args(["--progress", "quiet"])
            .env("ORCHESTRATE_TEST_STALL", stall)
            .env("ORCHESTRATE_LEASE_DIR", root.join("leases"))
            .current_dir(root)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The run's folder, then its attempt's process (the journal may be the stuck
        // part: the process is what shows the attempt started).
        let journal = crate::support::wait_for("the run's folder", Duration::from_secs(30), || {
            let d = std::fs::read_dir(&records).ok()?.flatten().next()?.path();
            d.join("journal.jsonl").exists().then_some(d)
        });
        let run_id = journal.file_name().unwrap().to_string_lossy().into_owned();
        let canary = format!("{run_id}/");
        // A thread blocked at the stall point may be the one that would start it.
        if !stall.ends_with(":block") {
            crate::support::wait_for("the attempt to start", Duration::from_secs(30), || {
                (!orchestrate::isolate::processes_with_canary(&|c| c.starts_with(&canary))
                    .is_empty())
                .then_some(())
            });
        } else {
            std::thread::sleep(Duration::from_millis(500));
        }
        let status = interrupt_twice(&mut child, stall);
        assert_eq!(status.code(), Some(130), "{stall}");
        let left = leftovers(&run_id);
        assert!(left.is_empty(), "{stall}: left behind: {left:?}");
        let (lines, _) = orchestrate::evidence::journal::read(&journal.join("journal.jsonl"))
            .expect("a readable journal");
        assert!(!lines.is_empty());
        // The record is finished by `recover`, and verifies.
        if !journal.join("record.json").exists() {
            let r = cli()
                .args(["recover", "--records"])
                .arg(&records)
                .env("ORCHESTRATE_LEASE_DIR", root.join("leases"))
                .current_dir(root)
                .output()
                .unwrap();
            assert!(r.status.success(), "{stall}: {}", shown(&r));
        }
        crate::support::assert_verifies(&journal);
    }
}

/// Cgroups and canary-marked processes of `run_id` still there.
/// Two SIGINTs 300 ms apart; the exit status, or a panic naming `stall` when the
/// process outlives the second by 60 s.
pub(crate) fn interrupt_twice(
    child: &mut std::process::Child,
    stall: &str,
) -> std::process::ExitStatus {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let second = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if second.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{stall}: the run did not end 60 s after a second interrupt");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!(
        "{stall}: ended {:.1} s after the second interrupt",
        second.elapsed().as_secs_f64()
    );
    status
}

pub(crate) fn leftovers(run_id: &str) -> Vec<String> {
    let iso = orchestrate::isolate::Isolator::new(orchestrate::isolate::Mode::Auto).unwrap();
    let prefix = format!("orchestrate-{run_id}-");
    let canary = format!("{run_id}/");
    let mut v: Vec<String> = iso
        .list()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    v.extend(
        orchestrate::isolate::processes_with_canary(&|c| c.starts_with(&canary))
            .into_iter()
            .map(|(p, c)| format!("process {p} ({c})")),
    );
    v
}
