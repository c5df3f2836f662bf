//! The environment a step starts from. Steps do not inherit the caller's whole
//! environment (a run must not depend on what happened to be exported): only the
//! names below pass through; anything else is passed explicitly with
//! `env = { NAME = "${env.NAME}" }` in the plan.

use std::path::Path;

const PASS_THROUGH: &[&str] = &[
    "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "TERM", "SHELL",
];

/// The base environment: pass-through names, `LC_*`, and a PATH with `tool_dir` (the
/// orchestrator's own folder, where the reference workload lives) first.
pub fn base_env(tool_dir: Option<&Path>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| PASS_THROUGH.contains(&k.as_str()) || k.starts_with("LC_"))
        .collect();
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let path = match tool_dir {
        Some(d) => format!("{}:{path}", d.display()),
        None => path,
    };
    env.push(("PATH".to_string(), path));
    env.sort();
    env
}
