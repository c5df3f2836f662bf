//! The environment a step starts from, and which of it enters the step cache's key.
//!
//! Steps do not inherit the caller's whole environment (a run must not depend on what
//! happened to be exported): only the names below pass through; anything else is
//! passed explicitly with `env = { NAME = "${env.NAME}" }` in the plan.
//!
//! The key holds what can change a step's result and no more (Bazel's strict action
//! environment is the model): the plan's own `env`, the locale and time zone, and the
//! variables of [`RESULT_VARS`] that users set outside plans. Never the terminal or
//! session (`TERM`, `SSH_*`, `TMUX`, …), nor who and where (`HOME`, `USER`, `TMPDIR`),
//! nor `PATH`, which enters through the digest of the program it resolves to; a step
//! names any of these with `cache_key = ["env.NAME"]` to have it in its key.

use std::path::Path;

/// Identity, locale and terminal: they reach every step.
const PASS_THROUGH: &[&str] = &[
    "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "TERM", "SHELL",
];

/// Variables users set outside a plan (a `module load`, an activated environment)
/// that change what a program loads or computes: they reach the step and are in its
/// cache key.
pub const RESULT_VARS: &[&str] = &[
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONHASHSEED",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "XLA_FLAGS",
    "CUDA_HOME",
];

/// Terminal and session variables: never in a key, even when a plan passes them on.
const SESSION_VARS: &[&str] = &[
    "TERM",
    "COLORTERM",
    "COLUMNS",
    "LINES",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "WINDOWID",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "SHLVL",
    "OLDPWD",
    "PWD",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_SESSION_ID",
    "XDG_SESSION_TYPE",
    "XDG_VTNR",
];
const SESSION_PREFIXES: &[&str] = &["SSH_", "TERM_PROGRAM", "KONSOLE_", "VTE_", "ITERM_"];

/// Who and where the step runs: reach the step, stay out of the key unless named.
const WHO_AND_WHERE: &[&str] = &["HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "PATH"];

/// What `${orchestrator}` stands for in a key: the orchestrator's own folder, which
/// the base `PATH` starts with, so that a second checkout or an installed copy meets
/// the same keys.
pub const ORCHESTRATOR_DIR: &str = "${orchestrator}";

/// The base environment: pass-through names, `LC_*`, [`RESULT_VARS`], and a PATH with
/// `tool_dir` (the orchestrator's own folder, where the reference workload lives)
/// first.
pub fn base_env(tool_dir: Option<&Path>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            PASS_THROUGH.contains(&k.as_str())
                || RESULT_VARS.contains(&k.as_str())
                || k.starts_with("LC_")
        })
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

/// The base environment and the variables a step's `cache_key` names that the caller
/// set: a step that names one sees it.
pub fn with_named(base: &[(String, String)], named: &[String]) -> Vec<(String, String)> {
    let mut env = base.to_vec();
    for n in named {
        if !env.iter().any(|(k, _)| k == n) {
            if let Ok(v) = std::env::var(n) {
                env.push((n.clone(), v));
            }
        }
    }
    env.sort();
    env
}

/// The orchestrator's own folder, which the base `PATH` starts with.
pub use crate::sys::tool_dir;

/// A value as a key holds it: an entry of a `:` list that is the orchestrator's own
/// folder becomes [`ORCHESTRATOR_DIR`].
pub fn key_value(value: &str, tool_dir: Option<&str>) -> String {
    match tool_dir {
        Some(t) if value.split(':').any(|e| e == t) => value
            .split(':')
            .map(|e| if e == t { ORCHESTRATOR_DIR } else { e })
            .collect::<Vec<_>>()
            .join(":"),
        _ => value.to_string(),
    }
}

/// Whether a variable of the step's environment enters its cache key: `declared`
/// when the plan's `env` sets it, `named` when `cache_key` lists it.
pub fn in_key(name: &str, declared: bool, named: bool) -> bool {
    if named {
        return true;
    }
    if name.starts_with("ORCHESTRATE_") || is_session(name) {
        return false;
    }
    declared || !WHO_AND_WHERE.contains(&name)
}

fn is_session(name: &str) -> bool {
    SESSION_VARS.contains(&name) || SESSION_PREFIXES.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::{in_key, key_value};

    #[test]
    fn the_orchestrators_folder_is_a_placeholder() {
        assert_eq!(
            key_value("/a/target/debug:/usr/bin", Some("/a/target/debug")),
            "${orchestrator}:/usr/bin"
        );
        assert_eq!(
            key_value("/a/target/debugx:/usr/bin", Some("/a/target/debug")),
            "/a/target/debugx:/usr/bin"
        );
    }

    #[test]
    fn the_key_holds_what_changes_results() {
        for v in ["LANG", "LC_ALL", "TZ", "LD_LIBRARY_PATH", "OMP_NUM_THREADS"] {
            assert!(in_key(v, false, false), "{v}");
        }
        for v in [
            "TERM", "COLUMNS", "SSH_TTY", "TMUX", "PATH", "HOME", "USER", "TMPDIR",
        ] {
            assert!(!in_key(v, false, false), "{v}");
        }
        // A plan's own variable is in; a terminal variable it passes on is not,
        // unless the step names it.
        assert!(in_key("MY_FLAG", true, false));
        assert!(!in_key("TERM", true, false));
        assert!(in_key("TERM", true, true));
        assert!(in_key("PATH", false, true));
        assert!(!in_key("ORCHESTRATE_ATTEMPT", true, false));
    }
}
