//! Tool pins (a command's output must contain or match a text) and Python package
//! pins (versions read through the interpreter the plan names).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::exec::{self, Spec};
use super::report::{Details, PinEntry, PinKind, PinStatus, PythonDetails, ToolDetails};
use crate::plan::model::{PythonPin, ToolPin};

/// A `--version` that takes longer than this is hung.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(10);
/// Importing metadata for a large environment is slower than a `--version`.
const PYTHON_TIMEOUT: Duration = Duration::from_secs(60);
const TOOL_MAX_OUTPUT: usize = 1 << 20;
/// How much output the record keeps.
const KEEP_OUTPUT: usize = 4096;

/// What an `expect` text asks for.
#[derive(Debug)]
pub(crate) enum Expect {
    Contains(String),
    Regex(regex_lite::Regex),
}

impl Expect {
    /// `/re/` is a regular expression; anything else a plain substring.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        match text
            .strip_prefix('/')
            .and_then(|t| t.strip_suffix('/'))
            .filter(|_| text.len() >= 2)
        {
            Some(re) => regex_lite::Regex::new(re)
                .map(Expect::Regex)
                .map_err(|e| format!("expect {text:?} is not a valid regex: {e}")),
            None => Ok(Expect::Contains(text.to_string())),
        }
    }

    fn is_match(&self, line: &str) -> bool {
        match self {
            Expect::Contains(s) => line.contains(s.as_str()),
            Expect::Regex(re) => re.is_match(line),
        }
    }
}

/// The first line of `output` that matches, or `None`. A pattern spanning lines is
/// tried against the whole output last, and then reports its first matching line.
pub(crate) fn find_match<'a>(expect: &Expect, output: &'a str) -> Option<&'a str> {
    if let Some(l) = output.lines().find(|l| expect.is_match(l)) {
        return Some(l);
    }
    if expect.is_match(output) {
        return Some(first_line(output));
    }
    None
}

fn first_line(output: &str) -> &str {
    output.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

fn keep(s: &str) -> String {
    if s.len() <= KEEP_OUTPUT {
        return s.to_string();
    }
    let mut end = KEEP_OUTPUT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// Verify one tool pin; the command runs in the plan folder.
pub(crate) fn verify_tool(name: &str, pin: &ToolPin, plan_dir: &Path) -> PinEntry {
    let pin = &ToolPin {
        expect: pin.expect.clone().filter(|e| !e.is_empty()),
        ..pin.clone()
    };
    let mut entry = PinEntry {
        kind: PinKind::Tool,
        name: name.to_string(),
        declared: pin.expect.clone(),
        observed: None,
        status: PinStatus::Error,
        message: None,
        details: None,
    };
    let Some((program, args)) = pin.command.split_first() else {
        entry.message = Some("empty command".to_string());
        return entry;
    };
    let expect = match pin.expect.as_deref().map(Expect::parse).transpose() {
        Ok(e) => e,
        Err(why) => {
            entry.message = Some(why);
            return entry;
        }
    };
    let out = match exec::run(&Spec {
        program,
        args,
        cwd: Some(plan_dir),
        env: &[("LANG", "C")],
        timeout: pin.timeout.unwrap_or(DEFAULT_TOOL_TIMEOUT),
        max_bytes: TOOL_MAX_OUTPUT,
        hash_stdout: false,
    }) {
        Ok(o) => o,
        Err(e) => {
            entry.message = Some(e.to_string());
            return entry;
        }
    };
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !text.is_empty() && !text.ends_with('\n') && !out.stderr.is_empty() {
        text.push('\n');
    }
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    let exit_note = match out.code {
        Some(0) => None,
        Some(c) => Some(format!("exited with code {c}")),
        None => Some("killed by a signal".to_string()),
    };
    let found = expect.as_ref().and_then(|e| find_match(e, &text));
    entry.observed = Some(
        found
            .unwrap_or_else(|| first_line(&text))
            .trim()
            .to_string(),
    );
    (entry.status, entry.message) = match (&expect, found, exit_note) {
        (Some(_), Some(_), _) => (PinStatus::Ok, None),
        (_, None, Some(note)) => (PinStatus::Error, Some(note)),
        (Some(_), None, None) => (
            PinStatus::Drift,
            Some("the output does not contain the expected text".to_string()),
        ),
        (None, _, _) => (PinStatus::Unpinned, Some("no expect declared".to_string())),
    };
    entry.details = Some(Details::Tool(ToolDetails {
        command: pin.command.clone(),
        exit_code: out.code,
        output: keep(&text),
    }));
    entry
}

/// PEP 503 normalization: lowercase, runs of `-`, `_`, `.` become one `-`.
pub fn normalize_package(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.trim().chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// `name==version` -> (name, Some(version)); a bare name is unpinned.
pub(crate) fn parse_requirement(req: &str) -> Result<(String, Option<String>), String> {
    let req = req.trim();
    if let Some((name, version)) = req.split_once("==") {
        let (name, version) = (name.trim(), version.trim());
        if name.is_empty() || version.is_empty() || version.starts_with('=') {
            return Err(format!("{req:?} is not name==version"));
        }
        return Ok((name.to_string(), Some(version.to_string())));
    }
    let is_name = !req.is_empty()
        && req
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if is_name {
        Ok((req.to_string(), None))
    } else {
        Err(format!(
            "{req:?}: only exact pins (name==version) are supported"
        ))
    }
}

/// Lists every installed distribution in `sys.path` order, so the first occurrence
/// of a name is the one `import` would find.
const PY_SCRIPT: &str = r#"
import json, sys
import importlib.metadata as m
seen = []
for d in m.distributions():
    try:
        name = d.metadata["Name"]
    except Exception:
        name = None
    if name:
        seen.append([name, d.version])
print(json.dumps({"executable": sys.executable, "version": sys.version.split()[0], "packages": seen}))
"#;

#[derive(serde::Deserialize)]
struct PyReport {
    executable: String,
    version: String,
    packages: Vec<(String, String)>,
}

fn ask_python(python: &str, plan_dir: &Path) -> Result<PyReport, String> {
    // Not `-I`: the steps see user site-packages, so the pin must too.
    let args = vec!["-c".to_string(), PY_SCRIPT.to_string()];
    let out = exec::run(&Spec {
        program: python,
        args: &args,
        cwd: Some(plan_dir),
        env: &[("LANG", "C"), ("PYTHONIOENCODING", "utf-8")],
        timeout: PYTHON_TIMEOUT,
        max_bytes: 16 << 20,
        hash_stdout: false,
    })
    .map_err(|e| e.to_string())?;
    if out.code != Some(0) || out.truncated {
        return Err(format!(
            "{python} failed ({}): {}",
            out.code
                .map_or("killed".to_string(), |c| format!("exit {c}")),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("{python}: unexpected output ({e})"))
}

/// Verify one Python pin: one entry per package, named `PIN/PACKAGE`.
pub(crate) fn verify_python(name: &str, pin: &PythonPin, plan_dir: &Path) -> Vec<PinEntry> {
    let asked = ask_python(&pin.python, plan_dir);
    let installed: BTreeMap<String, String> = match &asked {
        Ok(r) => {
            let mut m = BTreeMap::new();
            for (n, v) in &r.packages {
                m.entry(normalize_package(n)).or_insert_with(|| v.clone());
            }
            m
        }
        Err(_) => BTreeMap::new(),
    };
    pin.packages
        .iter()
        .map(|req| {
            let parsed = parse_requirement(req);
            let package = match &parsed {
                Ok((n, _)) => normalize_package(n),
                // Still name the entry by its package: `torch>=2` -> `torch`.
                Err(_) => normalize_package(
                    req.split(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
                        .next()
                        .unwrap_or(req),
                ),
            };
            let mut entry = PinEntry {
                kind: PinKind::Python,
                name: format!("{name}/{package}"),
                declared: parsed.as_ref().ok().and_then(|(_, v)| v.clone()),
                observed: None,
                status: PinStatus::Error,
                message: None,
                details: Some(Details::Python(PythonDetails {
                    pin: name.to_string(),
                    requirement: req.clone(),
                    package: package.clone(),
                    python: pin.python.clone(),
                    executable: asked.as_ref().ok().map(|r| r.executable.clone()),
                    python_version: asked.as_ref().ok().map(|r| r.version.clone()),
                })),
            };
            let declared = match (&parsed, &asked) {
                (Err(why), _) | (_, Err(why)) => {
                    entry.message = Some(why.clone());
                    return entry;
                }
                (Ok((_, v)), Ok(_)) => v.clone(),
            };
            entry.observed = installed.get(&package).cloned();
            (entry.status, entry.message) = match (&declared, &entry.observed) {
                (_, None) => (
                    PinStatus::Drift,
                    Some(format!("{package} is not installed for {}", pin.python)),
                ),
                (None, Some(_)) => (PinStatus::Unpinned, Some("no version declared".into())),
                (Some(d), Some(o)) if d == o => (PinStatus::Ok, None),
                (Some(_), Some(o)) => (PinStatus::Drift, Some(format!("installed is {o}"))),
            };
            entry
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pep503_names() {
        assert_eq!(normalize_package("Foo.Bar__baz"), "foo-bar-baz");
        assert_eq!(normalize_package("optimum-rbln"), "optimum-rbln");
        assert_eq!(normalize_package("Optimum_RBLN"), "optimum-rbln");
    }

    #[test]
    fn requirements() {
        assert_eq!(
            parse_requirement("optimum==0.11.0.post1"),
            Ok(("optimum".into(), Some("0.11.0.post1".into())))
        );
        assert_eq!(parse_requirement("pip"), Ok(("pip".into(), None)));
        assert!(parse_requirement("pip>=1").is_err());
        assert!(parse_requirement("pip===1").is_err());
        assert!(parse_requirement("==1").is_err());
    }

    #[test]
    fn expect_forms() {
        let out = "furiosa-smi\nversion 2026.4.0 (rev 1)\n";
        let c = Expect::parse("2026.4").unwrap();
        assert_eq!(find_match(&c, out), Some("version 2026.4.0 (rev 1)"));
        let r = Expect::parse(r"/^version 2026\.\d+/").unwrap();
        assert_eq!(find_match(&r, out), Some("version 2026.4.0 (rev 1)"));
        let miss = Expect::parse("/2025/").unwrap();
        assert_eq!(find_match(&miss, out), None);
        assert!(Expect::parse("/(/").is_err());
        // A lone slash is a substring, not an empty regex.
        assert!(matches!(Expect::parse("/").unwrap(), Expect::Contains(_)));
    }
}
