//! A secret is masked by its value, wherever the run would store it: under another
//! name, interpolated into argv or shell text, echoed to the logs, written to the
//! metrics, rendered into reports. Templates cannot read the environment or files
//! outside the plan's folder, and raw HTML from a plan stays text in the PR body.

use std::path::Path;

use crate::support::{host_shared, record_dirs, shown};

const TOKEN: &str = "hf_tok_9f8e7d6c5b4a";
const DB: &str = "db-pass-1a2b3c4d";

/// Every file below `dir`, with its bytes.
fn files(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out
}

fn holds(bytes: &[u8], s: &str) -> bool {
    bytes.windows(s.len()).any(|w| w == s.as_bytes())
}

#[test]
fn secret_values_are_masked_everywhere_the_run_stores_them() {
    let _host = host_shared();
    let t = tempfile::tempdir().unwrap();
    let plan = t.path().join("secret.toml");
    std::fs::write(
        &plan,
        r#"schema = "orchestrate/plan/v1"
name = "secrets"
description = "token ${env.HF_TOKEN} in the description"
secrets = ["DB_PASS"]
[steps.leak]
run = ["sh", "-c", "echo token=$HF_HUB_TOK; echo db=$1 >&2; printf '{\"t\": \"%s\"}' \"$HF_HUB_TOK\" > \"$ORCHESTRATE_METRICS\"", "sh", "${env.DB_PASS}"]
env = { HF_HUB_TOK = "${env.HF_TOKEN}" }
[steps.shell]
shell = "echo ${env.DB_PASS}${env.DB_PASS}; exit 3"
[report]
templates = ["pr", "html", "summary", "json"]
"#,
    )
    .unwrap();
    let out = crate::support::cli()
        .arg("run")
        .arg(&plan)
        .arg("--records")
        .arg(t.path().join("records"))
        .args(["--progress", "plain", "--keep-going", "--tee"])
        .env("HF_TOKEN", TOKEN)
        .env("DB_PASS", DB)
        .current_dir(t.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    for s in [TOKEN, DB] {
        assert!(
            !holds(&out.stdout, s) && !holds(&out.stderr, s),
            "terminal: {}",
            shown(&out)
        );
    }
    let dir = record_dirs(&t.path().join("records")).pop().unwrap();
    let all = files(&dir);
    for (p, bytes) in &all {
        // The plan copy is the user's own text (it names variables, not values).
        for s in [TOKEN, DB] {
            assert!(!holds(bytes, s), "{} holds a secret", p.display());
        }
    }
    let log = std::fs::read_to_string(dir.join("steps/leak/1/stdout.log")).unwrap();
    assert_eq!(log, "token=***\n");
    let err = std::fs::read_to_string(dir.join("steps/leak/1/stderr.log")).unwrap();
    assert_eq!(err, "db=***\n");
    let shell = std::fs::read_to_string(dir.join("steps/shell/1/stdout.log")).unwrap();
    assert_eq!(shell, "******\n");
    let metrics = std::fs::read_to_string(dir.join("steps/leak/1/metrics.json")).unwrap();
    assert_eq!(metrics, "{\"t\": \"***\"}");
    // The masked record still verifies (logs were hashed as written).
    let v = crate::support::cli()
        .arg("verify")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", shown(&v));
}

#[test]
fn templates_cannot_read_the_environment_or_files_outside_the_plan() {
    let _host = host_shared();
    let t = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("shadow");
    std::fs::write(&secret, "root:secret-hash:19000\n").unwrap();
    let write_plan = |templates: &str| {
        let p = t.path().join("plan.toml");
        std::fs::write(
            &p,
            format!(
                "schema = \"orchestrate/plan/v1\"\nname = \"t\"\n[steps.a]\nshell = \"true\"\n[report]\ntemplates = [{templates}]\n"
            ),
        )
        .unwrap();
        p
    };
    // An absolute path, a `..`, and a link inside the plan's folder that leads out.
    std::os::unix::fs::symlink(&secret, t.path().join("link.tera")).unwrap();
    for bad in [
        format!("\"{}\"", secret.display()),
        "\"../shadow\"".to_string(),
        "\"link.tera\"".to_string(),
    ] {
        let p = write_plan(&bad);
        let out = crate::support::cli().arg("check").arg(&p).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", shown(&out));
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("is not a file inside the plan's folder"), "{e}");
        assert!(e.contains("plan.toml:6:"), "located: {e}");
    }
    // get_env is off in a template of the plan's own.
    std::fs::write(
        t.path().join("env.md.tera"),
        "{{ get_env(name=\"HOME\") }}\n",
    )
    .unwrap();
    let p = write_plan("\"env.md.tera\"");
    let out = crate::support::cli()
        .arg("run")
        .arg(&p)
        .arg("--records")
        .arg(t.path().join("records"))
        .args(["--progress", "quiet"])
        .current_dir(t.path())
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("get_env is disabled"), "{}", shown(&out));
}

#[test]
fn raw_html_in_a_plan_stays_text_in_the_pr_body() {
    let _host = host_shared();
    let t = tempfile::tempdir().unwrap();
    let plan = t.path().join("plan.toml");
    std::fs::write(
        &plan,
        r#"schema = "orchestrate/plan/v1"
name = "html"
description = "<script>alert(1)</script> & <img src=x onerror=alert(2)>"
changes = "<b>bold</b>"
[steps.a]
shell = "true"
[report]
templates = ["pr"]
"#,
    )
    .unwrap();
    let dir = crate::support::run_plan_ok(t.path(), &plan, &[]);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        !md.contains("<script>") && !md.contains("<img") && !md.contains("<b>"),
        "{md}"
    );
    assert!(
        md.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;img"),
        "{md}"
    );
}

#[test]
fn common_secret_names_and_url_passwords_never_reach_the_record_or_the_site() {
    let _host = host_shared();
    let t = tempfile::tempdir().unwrap();
    let secrets = [
        ("GH_PAT", "ghp_0a1b2c3d4e5f6a7b"),
        ("PASSPHRASE", "correct-horse-battery"),
        ("COOKIE", "sessionid=7c1d9e22aa"),
        (
            "SLACK_WEBHOOK",
            "https://hooks.example/T000/B000/XXXXsecret",
        ),
    ];
    let url_pw = "pw-5e6f7a8b9c";
    let env: Vec<String> = secrets
        .iter()
        .map(|(k, v)| format!("{k} = \"{v}\""))
        .chain([format!(
            "DATABASE_URL = \"postgres://u:{url_pw}@db.example:5432/app\""
        )])
        .collect();
    std::fs::write(
        t.path().join("plan.toml"),
        format!(
            "schema = \"orchestrate/plan/v1\"\nname = \"names\"\n[steps.leak]\nshell = \"echo $GH_PAT $PASSPHRASE $COOKIE $SLACK_WEBHOOK $DATABASE_URL\"\nenv = {{ {} }}\n",
            env.join(", ")
        ),
    )
    .unwrap();
    let out = crate::support::cli()
        .args(["run", "plan.toml", "--progress", "plain", "--tee"])
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    let git = std::process::Command::new("git")
        .args(["init", "-q", "repo"])
        .current_dir(t.path())
        .status()
        .unwrap();
    assert!(git.success());
    let site = crate::support::cli()
        .args([
            "site",
            "--records",
            "records",
            "--repo",
            "repo",
            "-o",
            "site",
        ])
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(
        matches!(site.status.code(), Some(0) | Some(1)),
        "{}",
        shown(&site)
    );
    let dir = record_dirs(&t.path().join("records")).pop().unwrap();
    let mut stored = files(&dir);
    stored.extend(files(&t.path().join("site")));
    let values: Vec<&str> = secrets.iter().map(|(_, v)| *v).chain([url_pw]).collect();
    for (p, bytes) in &stored {
        // The plan's copy is the user's own text, kept as written.
        if p.file_name().is_some_and(|n| n == "plan.toml") {
            continue;
        }
        for v in &values {
            assert!(!holds(bytes, v), "{} holds {v}", p.display());
        }
    }
    for v in &values {
        assert!(
            !holds(&out.stdout, v) && !holds(&out.stderr, v),
            "{}",
            shown(&out)
        );
    }
    let log = std::fs::read_to_string(dir.join("steps/leak/1/stdout.log")).unwrap();
    assert_eq!(
        log,
        "*** *** *** *** postgres://u:***@db.example:5432/app\n"
    );
    let rec = std::fs::read_to_string(dir.join("record.json")).unwrap();
    assert!(
        rec.contains("postgres://u:***@db.example:5432/app"),
        "{rec}"
    );
}
