//! The plans `init --example` writes: the ones in plans/, built into the binary so a
//! wheel user without the repository can run them, made portable on the way out.

use super::args::Example;

/// One file of an example: its path below the folder `init` writes to, its text.
pub struct File {
    pub path: &'static str,
    pub text: &'static str,
}

/// What `init --example NAME` writes, and the plan among its files to run.
pub struct Shipped {
    pub files: &'static [File],
    pub run: &'static str,
}

const fn file(path: &'static str, text: &'static str) -> File {
    File { path, text }
}

const FULL: File = file("full.toml", include_str!("../../plans/full.toml"));
const STARTER: &[File] = &[file("plan.toml", include_str!("../../plans/starter.toml"))];
const SMOKE: &[File] = &[file("smoke.toml", include_str!("../../plans/smoke.toml"))];
// full8k includes full.toml, so the two go together.
const FULL8K: &[File] = &[
    FULL,
    file("full8k.toml", include_str!("../../plans/full8k.toml")),
];
const TORCH: &[File] = &[
    file("torch.toml", include_str!("../../plans/torch.toml")),
    file("torch/build.py", include_str!("../../plans/torch/build.py")),
    file(
        "torch/common.py",
        include_str!("../../plans/torch/common.py"),
    ),
    file(
        "torch/prefill.py",
        include_str!("../../plans/torch/prefill.py"),
    ),
    file(
        "torch/decode.py",
        include_str!("../../plans/torch/decode.py"),
    ),
];

pub fn shipped(which: Example) -> Shipped {
    let (files, run): (&'static [File], _) = match which {
        Example::Starter => (STARTER, "plan.toml"),
        Example::Smoke => (SMOKE, "smoke.toml"),
        Example::Full => (&[FULL], "full.toml"),
        Example::Full8k => (FULL8K, "full8k.toml"),
        Example::Torch => (TORCH, "torch.toml"),
    };
    Shipped { files, run }
}

/// In the repository the plans point at schemas/; beside a copy, at its own copy.
const SCHEMA_IN_REPO: &str = "#:schema ../schemas/plan.schema.json";
const SCHEMA_BESIDE: &str = "#:schema ./plan.schema.json";

/// A shipped plan as it goes out: its schema line pointing beside it, and the pins
/// that only mean something in the repository (its git tree at `..`, files above
/// the plans folder, the Rust compiler kvsim is built with) replaced by a pin of
/// the kvsim the steps run. Other files go out as they are.
pub fn portable(path: &str, text: &str) -> Result<String, String> {
    if !path.ends_with(".toml") {
        return Ok(text.to_string());
    }
    let text = text.replacen(SCHEMA_IN_REPO, SCHEMA_BESIDE, 1);
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| format!("{path} as shipped does not parse: {e}"))?;
    let Some(pins) = doc.get_mut("pins").and_then(|p| p.as_table_like_mut()) else {
        return Ok(doc.to_string());
    };
    let outside = |k: &str| k.starts_with("../") || k == "..";
    if let Some(git) = pins.get_mut("git").and_then(|g| g.as_table_like_mut()) {
        let names: Vec<String> = git
            .iter()
            .filter(|(_, v)| v.get("path").and_then(|p| p.as_str()).is_some_and(outside))
            .map(|(k, _)| k.to_string())
            .collect();
        for n in names {
            git.remove(&n);
        }
    }
    if let Some(files) = pins.get_mut("files").and_then(|f| f.as_table_like_mut()) {
        let names: Vec<String> = files
            .iter()
            .map(|(k, _)| k.to_string())
            .filter(|k| outside(k))
            .collect();
        for n in names {
            files.remove(&n);
        }
    }
    let mut kvsim = false;
    if let Some(tools) = pins.get_mut("tools").and_then(|t| t.as_table_like_mut()) {
        if tools.remove("rustc").is_some() {
            tools.insert("kvsim", kvsim_pin());
            kvsim = true;
        }
    }
    // An emptied table would still print as a header with nothing under it.
    for name in ["git", "files", "tools"] {
        if pins
            .get(name)
            .and_then(|t| t.as_table_like())
            .is_some_and(|t| t.is_empty())
        {
            pins.remove(name);
        }
    }
    let mut out = doc.to_string();
    if kvsim {
        out = out.replacen(
            "[pins.tools.kvsim]",
            "# Copied out of the repository by `orchestrate init --example`: the source\n\
             # tree, Cargo.lock and rustc it pins there are not here, so the program the\n\
             # steps run is pinned by its version and commit (the record also hashes the\n\
             # orchestrator's own binary).\n[pins.tools.kvsim]",
            1,
        );
    }
    Ok(out)
}

fn kvsim_pin() -> toml_edit::Item {
    let mut t = toml_edit::Table::new();
    let mut cmd = toml_edit::Array::new();
    cmd.push("kvsim");
    cmd.push("--version");
    t.insert("command", toml_edit::value(cmd));
    toml_edit::Item::Table(t)
}
