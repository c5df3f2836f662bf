//! A page in a real headless browser (Debian's chromium): its DOM after the inline
//! scripts ran, and the console lines that are faults.

use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// What chromium made of a page.
pub struct Rendered {
    pub dom: String,
    /// Console errors and uncaught exceptions: a page that logs nothing has none.
    pub errors: Vec<String>,
}

/// `url` (a `file://` URL, a fragment allowed) rendered headless with a profile in
/// `scratch`; None (after `skip_or_fail`) when chromium is not installed.
pub fn render(url: &str, scratch: &Path) -> Option<Rendered> {
    let Some(browser) = chromium() else {
        super::skip_or_fail(super::Need::Browser, "/usr/bin/chromium is not installed");
        return None;
    };
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!(
            "--user-data-dir={}",
            scratch.join("profile").display()
        ))
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(url)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {stderr}");
    // chromium prints console.error and uncaught exceptions alike as
    // `...:CONSOLE:N] "..."` or `:CONSOLE(N)`.
    let errors = stderr
        .lines()
        .filter(|l| l.contains("Uncaught") || l.contains(":CONSOLE"))
        .map(String::from)
        .collect();
    Some(Rendered {
        dom: String::from_utf8_lossy(&out.stdout).into_owned(),
        errors,
    })
}
