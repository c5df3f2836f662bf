//! The layer order `lib.rs` declares (`orchestrate::LAYERS`) holds for every
//! `crate::` path in `src/`: a module uses only modules of lower layers (no upward
//! edge, none within a layer, so no circle between modules), and the files of one
//! module form no circle among themselves. The binaries (`main.rs`, `bin/`) sit on
//! top and are not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its comments and string literals, so a path named
/// in prose or in a message is not taken for a use.
fn code(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            // A char literal such as '"'.
            i += 3;
        } else if b[i] == b'r'
            && matches!(b.get(i + 1), Some(b'"' | b'#'))
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(b[i] as char);
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            j += 1;
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            i = j + close.len();
            out.push_str("\"\"");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// The identifiers that follow each `prefix` in `code`.
fn after<'a>(code: &'a str, prefix: &str) -> Vec<&'a str> {
    code.match_indices(prefix)
        .filter(|(i, _)| {
            *i == 0
                || !code.as_bytes()[i - 1].is_ascii_alphanumeric() && code.as_bytes()[i - 1] != b'_'
        })
        .map(|(i, _)| {
            let rest = &code[i + prefix.len()..];
            let end = rest
                .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|id| !id.is_empty())
        .collect()
}

#[test]
fn every_use_follows_the_declared_layers() {
    let layer: BTreeMap<&str, usize> = orchestrate::LAYERS
        .iter()
        .enumerate()
        .flat_map(|(n, mods)| mods.iter().map(move |m| (*m, n)))
        .collect();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let declared: BTreeSet<&str> = after(&lib, "pub mod ").into_iter().collect();
    let layered: BTreeSet<&str> = layer.keys().copied().collect();
    assert_eq!(declared, layered, "lib.rs's modules and LAYERS differ");

    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut wrong = Vec::new();
    // Within a module: file -> the files of the same module it uses.
    let mut inner: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let parts: Vec<String> = rel
            .iter()
            .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        let top = parts[0].as_str();
        // The binaries (`main.rs` and its `cli/`, `bin/`) stand above the library
        // and reach it as `orchestrate::`.
        if matches!(top, "main" | "lib" | "bin" | "cli") {
            continue;
        }
        let text = code(&std::fs::read_to_string(f).unwrap());
        let Some(&mine) = layer.get(top) else {
            wrong.push(format!("{}: module `{top}` is in no layer", rel.display()));
            continue;
        };
        for used in after(&text, "crate::") {
            if used == top {
                continue;
            }
            match layer.get(used) {
                Some(&theirs) if theirs < mine => {}
                Some(&theirs) => wrong.push(format!(
                    "{}: `{top}` (layer {mine}) uses `{used}` (layer {theirs})",
                    rel.display()
                )),
                None => wrong.push(format!("{}: uses unknown module `{used}`", rel.display())),
            }
        }
        // Files of one module: crate::top::x and, from a file of the module's
        // top folder, super::x or self::x.
        if parts.len() >= 2 {
            let me = parts[1].clone();
            let mut uses: BTreeSet<String> = after(&text, &format!("crate::{top}::"))
                .into_iter()
                .map(String::from)
                .collect();
            if parts.len() == 2 {
                uses.extend(after(&text, "super::").into_iter().map(String::from));
            }
            if me == "mod" {
                // mod.rs declares the files; its own uses are of what they hold.
                uses.clear();
            }
            uses.remove(&me);
            uses.remove("mod");
            uses.remove("tests");
            let key = format!("{top}/{me}");
            inner
                .entry(key)
                .or_default()
                .extend(uses.into_iter().map(|u| format!("{top}/{u}")));
        }
    }
    // A circle among one module's files.
    for (a, uses) in &inner {
        for b in uses {
            if inner.get(b).is_some_and(|back| back.contains(a)) && a < b {
                wrong.push(format!("`{a}` and `{b}` use each other"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} edges against the layers:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The checker sees through prose and literals, and finds what code uses.
#[test]
fn the_layer_checker_reads_code_not_prose() {
    let c = code("// crate::run in a comment\nlet s = \"crate::run\"; let r = r#\"crate::run\"#; use crate::plan::X; /* crate::run */ let q = '\"'; crate::digest::y();");
    assert_eq!(after(&c, "crate::"), vec!["plan", "digest"]);
}

/// The longest a function in `src/` may be, in lines from its `fn` to its closing
/// brace: a screen and a half.
const MOST_LINES: usize = 120;

/// Whether `line` starts a function (`pub(crate) async fn ...`), and its indent.
fn fn_start(line: &str) -> Option<&str> {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    let mut rest = body;
    for word in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(word).unwrap_or(rest);
    }
    rest.starts_with("fn ").then_some(indent)
}

/// Every function of `text` longer than [`MOST_LINES`]: (first line, lines).
fn long_functions(text: &str) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(indent) = fn_start(line) else {
            continue;
        };
        // Only a body that opens at a line's end spans lines: a declaration (a
        // trait's) ends with `;`, a one-line function closes where it opens.
        let opens = lines[i..].iter().map(|l| l.trim_end()).find(|t| {
            t.ends_with('{') || t.ends_with(';') || (t.contains('{') && t.ends_with('}'))
        });
        if !opens.is_some_and(|t| t.ends_with('{')) {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(n) = lines[i + 1..].iter().position(|l| l.trim_end() == close) {
            if n + 2 > MOST_LINES {
                out.push((i + 1, n + 2));
            }
        }
    }
    out
}

#[test]
fn no_function_in_src_is_longer_than_a_screen_and_a_half() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut long = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, n) in long_functions(&text) {
            long.push(format!(
                "{}:{line}: {n} lines",
                f.strip_prefix(&root).unwrap().display()
            ));
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MOST_LINES} lines:\n{}",
        long.join("\n")
    );
    // The counter finds what it is for.
    let body: String = (0..MOST_LINES).map(|_| "    x();\n").collect();
    assert_eq!(
        long_functions(&format!("fn f() {{\n{body}}}\n")),
        vec![(1, MOST_LINES + 2)]
    );
    let trait_and_one_liner =
        format!("trait T {{\n    fn f(&self);\n}}\nfn g() {{ 1 }}\nfn h() {{\n{body}}}\n");
    assert_eq!(
        long_functions(&trait_and_one_liner),
        vec![(5, MOST_LINES + 2)]
    );
}

/// The record module is a leaf that does no I/O: a reader of records (the reports,
/// `verify`, `track`, a Python port) needs serde's types and nothing else.
#[test]
fn the_record_module_is_a_leaf_that_does_no_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let leaves = orchestrate::LAYERS[0];
    let mut files = Vec::new();
    sources(&src.join("record"), &mut files);
    assert!(files.len() >= 10, "src/record holds the record's types");
    let mut wrong = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        let text = code(&std::fs::read_to_string(f).unwrap());
        for used in after(&text, "crate::") {
            if used != "record" && !leaves.contains(&used) {
                wrong.push(format!("{rel}: uses `crate::{used}`, not a leaf"));
            }
        }
        for io in [
            "std::fs",
            "std::io",
            "std::process",
            "std::net",
            "tokio",
            "nix",
            "libc",
            "clap",
        ] {
            if !after(&text, &format!("{io}::")).is_empty() || text.contains(&format!("use {io}")) {
                wrong.push(format!("{rel}: uses `{io}`"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the record module reaches past its leaf:\n{}",
        wrong.join("\n")
    );
}

/// Reports read the record's types (`crate::record`), never those of the modules
/// that observed them: what a pin or a device was is read from the record.
#[test]
fn reports_read_pins_and_devices_from_the_record() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src.join("report"), &mut files);
    let mut wrong = Vec::new();
    for f in &files {
        let text = code(&std::fs::read_to_string(f).unwrap());
        for used in after(&text, "crate::") {
            if matches!(used, "pins" | "devices") {
                wrong.push(format!("{}: crate::{used}", f.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
