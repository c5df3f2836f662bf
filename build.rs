//! Stamps the binaries with the commit they are built from (`--version`): the
//! release workflow's `ORCHESTRATE_BUILD_COMMIT` when set (a container's checkout
//! may be one git refuses to read), else the repository's HEAD, else "unknown
//! commit" (an sdist or a crate tarball).
//!
//! No `+dirty` mark: telling it truly would mean running again on every change of
//! the tree, and each run rebuilds the whole package; the record hashes the binary.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
}

/// `HASH DATE` of HEAD, or `None` outside a repository (or one git refuses).
fn from_git() -> Option<String> {
    let hash = git(&["rev-parse", "--verify", "HEAD"])?;
    let date = git(&["log", "-1", "--format=%cs", "HEAD"])?;
    Some(format!("{hash} {date}"))
}

/// Ask cargo to run this again when `path` changes; a path that does not exist
/// would make it run (and rebuild the package) every time, so none is named.
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=ORCHESTRATE_BUILD_COMMIT");
    // What moves HEAD: a checkout (HEAD) or a commit (a branch's ref).
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        watch(&Path::new(&dir).join("HEAD"));
    }
    if let Some(dir) = git(&["rev-parse", "--git-common-dir"]) {
        watch(&Path::new(&dir).join("refs/heads"));
        watch(&Path::new(&dir).join("packed-refs"));
    }
    watch(Path::new("build.rs"));
    let stamp = std::env::var("ORCHESTRATE_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(from_git)
        .unwrap_or_else(|| "unknown commit".to_string());
    println!("cargo:rustc-env=ORCHESTRATE_COMMIT={stamp}");
}
