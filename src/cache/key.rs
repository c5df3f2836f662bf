//! A cache key: the sha256 of a canonical (RFC 8785) pre-image of everything that
//! decides what a step produces, with the run's own folders written as `${work}` and
//! `${out}`, so two runs of one plan on one machine meet at the same key. Run ids,
//! timestamps, host names and the run's absolute paths never enter it. The pre-image
//! is stored beside the entry: a miss is explained field by field against the entry
//! the same step used last.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The pre-image format; a new version misses every old entry, and says so.
pub const KEY_SCHEMA: &str = "orchestrate/cache-key/v3";

/// Everything a step's outputs are taken to depend on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Preimage {
    pub schema: String,
    /// The step's kind.
    pub kind: String,
    /// The command as it runs, with the run's folders as `${work}`, `${out}`,
    /// `${steps.X.out}` and the plan folder as `${plan_dir}`.
    pub argv: Vec<String>,
    /// The program the command runs (its first argument, found on the step's
    /// `PATH`) and its digest: a rebuilt tool misses even when its version string
    /// did not change.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub program: BTreeMap<String, String>,
    /// The working folder, written the same way.
    pub cwd: String,
    /// The environment the step sees (the curated base and the plan's `env`, without
    /// the variables that name this run).
    pub env: BTreeMap<String, String>,
    /// Declared `inputs`: path as written, and the digest found.
    pub inputs: BTreeMap<String, String>,
    /// Outputs of the upstream steps it reads: `step: path`, and their digests.
    pub upstream: BTreeMap<String, String>,
    /// Declared outputs, as written.
    pub outputs: Vec<String>,
    /// Tool pins and the versions observed for them.
    pub tools: BTreeMap<String, String>,
    /// Device kinds it runs on (not which device).
    pub devices: Vec<String>,
    /// The source trees the step runs in or names (a revision's checkout, a git
    /// pin's repository): name, and what it is (`commit <sha> tree <sha>`, with the
    /// digest of its diff when the working tree is dirty and of its untracked files).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub trees: BTreeMap<String, String>,
    /// The memory limit, when the plan says it matters (`cache_key = ["memory"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

/// A source tree a step may read: a revision's checkout or a git pin's repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeId {
    /// How the key names it: `revision implementation`, `pin implementation`.
    pub name: String,
    /// Its folder, absolute, as the step sees it.
    pub dir: String,
    /// What it is: `commit <sha> tree <sha>`, plus ` diff <sha256>` for a dirty
    /// working tree and ` untracked <sha256>` for its untracked files.
    pub id: String,
    /// For a revision, its name (a step on that revision's cells has it in its key).
    pub revision: Option<String>,
}

impl TreeId {
    /// The identity of a tree at `commit`/`tree`, with its working tree's changes.
    pub fn describe(
        commit: &str,
        tree: &str,
        diff: Option<&str>,
        untracked: &[(String, Option<String>)],
    ) -> String {
        let mut s = format!("commit {commit} tree {tree}");
        if let Some(d) = diff {
            s.push_str(&format!(" diff {d}"));
        }
        if !untracked.is_empty() {
            let mut list: Vec<String> = untracked
                .iter()
                .map(|(p, d)| format!("{p}\u{0}{}", d.as_deref().unwrap_or("unreadable")))
                .collect();
            list.sort();
            let d = crate::digest::sha256_bytes(list.join("\u{0}").as_bytes()).hex();
            s.push_str(&format!(" untracked {d}"));
        }
        s
    }
}

/// HMAC-SHA256 of `value` under `key` (RFC 2104), hex: what a pre-image holds of a
/// secret. Without the store's key nobody can check a guess against it.
pub fn keyed_digest(key: &[u8; 32], value: &[u8]) -> String {
    crate::digest::hmac_sha256(key, value).hex()
}

/// What a pre-image writes for a secret value.
pub fn secret_marker(key: &[u8; 32], value: &[u8]) -> String {
    format!("<secret:{}>", &keyed_digest(key, value)[..16])
}

fn is_secret(v: &str) -> bool {
    v.starts_with("<secret:") && v.ends_with('>') && !v.contains(' ')
}

impl Preimage {
    /// The key: sha256 of the pre-image in RFC 8785 form.
    pub fn key(&self) -> String {
        let v = serde_json::to_value(self).unwrap_or_default();
        let bytes = crate::evidence::jcs::to_canonical_vec(&v);
        crate::digest::sha256_bytes(&bytes).hex()
    }
}

fn short(s: &str) -> String {
    let s = s.trim_start_matches("sha256:");
    if s.len() > 12 {
        format!("{}…", &s[..12])
    } else {
        s.to_string()
    }
}

fn map_changes(
    what: &str,
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
    digests: bool,
) -> Vec<String> {
    let show = |v: &str| if digests { short(v) } else { format!("`{v}`") };
    let mut out = Vec::new();
    for (k, v) in new {
        match old.get(k) {
            None => out.push(format!("{what} `{k}` is new")),
            // A secret's digest says only that it changed.
            Some(o) if o != v && (is_secret(o) || is_secret(v)) => {
                out.push(format!("secret `{k}` changed"));
            }
            Some(o) if o != v && !digests && (o.contains(':') || v.contains(':')) => {
                out.push(format!("{what} `{k}`: {}", list_change(o, v)));
            }
            Some(o) if o != v => {
                let verb = if digests {
                    "changed (sha256 "
                } else {
                    "changed ("
                };
                out.push(format!("{what} `{k}` {verb}{} → {})", show(o), show(v)));
            }
            _ => {}
        }
    }
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        out.push(format!("{what} `{k}` is gone"));
    }
    out
}

/// How a `:` list (`PATH`, `LD_LIBRARY_PATH`) changed, on one line: what was added
/// (where), removed, or moved.
fn list_change(old: &str, new: &str) -> String {
    const AT_MOST: usize = 160;
    let a: Vec<&str> = old.split(':').collect();
    let b: Vec<&str> = new.split(':').collect();
    let mut parts = Vec::new();
    for (i, e) in b.iter().enumerate() {
        if !a.contains(e) {
            parts.push(format!("added {e} at {i}"));
        }
    }
    for e in a.iter().filter(|e| !b.contains(e)) {
        parts.push(format!("removed {e}"));
    }
    // What both hold, in another order: the first entry out of place.
    let kept_a: Vec<&&str> = a.iter().filter(|e| b.contains(e)).collect();
    let kept_b: Vec<&&str> = b.iter().filter(|e| a.contains(e)).collect();
    if let Some((was, now)) = kept_a.iter().zip(&kept_b).find(|(x, y)| x != y) {
        parts.push(format!("moved {now} before {was}"));
    }
    if parts.is_empty() {
        // Only repeats came or went.
        parts.push(format!("{} → {} entries", a.len(), b.len()));
    }
    let mut line = String::new();
    for (n, p) in parts.iter().enumerate() {
        let sep = if n == 0 { "" } else { "; " };
        if line.len() + sep.len() + p.len() > AT_MOST {
            line.push_str(&format!("; … {} more", parts.len() - n));
            break;
        }
        line.push_str(sep);
        line.push_str(p);
    }
    line
}

/// Why `new` differs from `old`, field by field ("input `model/config.json` changed
/// (sha256 3f2a… → 9c41…)"); empty when they are the same.
pub fn explain(old: &Preimage, new: &Preimage) -> Vec<String> {
    let mut why = Vec::new();
    if old.schema != new.schema {
        why.push(format!(
            "the cache key format changed ({} → {})",
            old.schema, new.schema
        ));
        return why;
    }
    if old.kind != new.kind {
        why.push(format!("kind changed (`{}` → `{}`)", old.kind, new.kind));
    }
    if old.argv != new.argv {
        let at = old.argv.iter().zip(&new.argv).position(|(a, b)| a != b);
        match at {
            Some(i) => {
                let (a, b) = around_difference(&old.argv[i], &new.argv[i]);
                why.push(format!("command changed at argument {i} (`{a}` → `{b}`)"))
            }
            None => why.push(format!(
                "command changed ({} → {} arguments)",
                old.argv.len(),
                new.argv.len()
            )),
        }
    }
    why.extend(map_changes("program", &old.program, &new.program, true));
    if old.cwd != new.cwd {
        why.push(format!(
            "working folder changed (`{}` → `{}`)",
            old.cwd, new.cwd
        ));
    }
    why.extend(map_changes(
        "environment variable",
        &old.env,
        &new.env,
        false,
    ));
    why.extend(map_changes("input", &old.inputs, &new.inputs, true));
    why.extend(map_changes(
        "upstream output",
        &old.upstream,
        &new.upstream,
        true,
    ));
    if old.outputs != new.outputs {
        why.push("declared outputs changed".to_string());
    }
    why.extend(map_changes("tool", &old.tools, &new.tools, false));
    if old.devices != new.devices {
        why.push(format!(
            "device kinds changed ({:?} → {:?})",
            old.devices, new.devices
        ));
    }
    for (name, id) in &new.trees {
        match old.trees.get(name) {
            None => why.push(format!("source tree `{name}` is new to its key")),
            Some(o) if o != id => why.push(format!("{name} changed ({})", tree_change(o, id))),
            _ => {}
        }
    }
    for name in old.trees.keys().filter(|k| !new.trees.contains_key(*k)) {
        why.push(format!("source tree `{name}` is no longer in its key"));
    }
    if old.memory_bytes != new.memory_bytes {
        why.push(format!(
            "memory limit changed ({:?} → {:?})",
            old.memory_bytes, new.memory_bytes
        ));
    }
    if !why.is_empty() && old.argv == new.argv {
        why.push("command unchanged".to_string());
    }
    why
}

/// What changed between two tree identities, shortest first: the commit, else the
/// working tree's diff, else its untracked files.
fn tree_change(old: &str, new: &str) -> String {
    let field = |s: &str, f: &str| {
        let mut it = s.split(' ');
        while let Some(w) = it.next() {
            if w == f {
                return it.next().map(String::from);
            }
        }
        None
    };
    for (f, words) in [
        ("commit", "commit"),
        ("diff", "uncommitted changes"),
        ("untracked", "untracked files"),
    ] {
        let (a, b) = (field(old, f), field(new, f));
        if a != b {
            let s = |x: Option<String>| x.map_or("none".to_string(), |v| short(&v));
            return format!("{words} {} → {}", s(a), s(b));
        }
    }
    "its identity changed".to_string()
}

/// Two versions of a long argument (a shell script) cut to where they first differ,
/// with some context, on one line each.
fn around_difference(a: &str, b: &str) -> (String, String) {
    const BEFORE: usize = 24;
    const AFTER: usize = 40;
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let at = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let cut = |s: &[char]| {
        let from = at.saturating_sub(BEFORE);
        let to = (at + AFTER).min(s.len());
        let mut t: String = s[from..to].iter().collect::<String>().replace('\n', "⏎");
        if from > 0 {
            t.insert(0, '…');
        }
        if to < s.len() {
            t.push('…');
        }
        t
    };
    (cut(&a), cut(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_misses_explained() {
        let mut a = Preimage {
            schema: KEY_SCHEMA.into(),
            kind: "compile".into(),
            argv: vec![
                "kvsim".into(),
                "compile".into(),
                "--out".into(),
                "${work}/model".into(),
            ],
            ..Preimage::default()
        };
        a.inputs.insert(
            "model/config.json".into(),
            "sha256:3f2a000000000000000000".into(),
        );
        let k = a.key();
        assert_eq!(k.len(), 64);
        assert_eq!(k, a.clone().key(), "the same pre-image, the same key");
        let mut b = a.clone();
        b.inputs.insert(
            "model/config.json".into(),
            "sha256:9c41000000000000000000".into(),
        );
        b.env.insert("OMP_NUM_THREADS".into(), "4".into());
        assert_ne!(b.key(), k);
        let why = explain(&a, &b);
        assert_eq!(
            why,
            [
                "environment variable `OMP_NUM_THREADS` is new",
                "input `model/config.json` changed (sha256 3f2a00000000… → 9c4100000000…)",
                "command unchanged",
            ]
        );
        let mut c = a.clone();
        c.argv[1] = "prefill".into();
        assert_eq!(
            explain(&a, &c),
            ["command changed at argument 1 (`compile` → `prefill`)"]
        );
        assert!(explain(&a, &a).is_empty());
        let mut p = a.clone();
        p.env
            .insert("PATH".into(), "${orchestrator}:/usr/bin:/bin".into());
        let mut q = p.clone();
        q.env.insert(
            "PATH".into(),
            "${orchestrator}:/opt/venv/bin:/bin:/usr/bin".into(),
        );
        assert_eq!(
            explain(&p, &q),
            [
                "environment variable `PATH`: added /opt/venv/bin at 1; moved /bin before /usr/bin",
                "command unchanged"
            ]
        );
        let mut r = p.clone();
        let long: Vec<String> = (0..40).map(|i| format!("/opt/tool{i}/bin")).collect();
        r.env.insert("PATH".into(), long.join(":"));
        let why = explain(&p, &r);
        assert!(why[0].len() < 220 && why[0].contains("more"), "{why:?}");
        let mut d = a.clone();
        d.argv[3] = format!("{}; echo 1 >> ${{out}}/h.bin", "x".repeat(100));
        let mut e = d.clone();
        e.argv[3] = format!("{}; echo 2 >> ${{out}}/h.bin", "x".repeat(100));
        assert_eq!(
            explain(&d, &e),
            ["command changed at argument 3 (`…xxxxxxxxxxxxxxxxx; echo 1 >> ${out}/h.bin` → `…xxxxxxxxxxxxxxxxx; echo 2 >> ${out}/h.bin`)"]
        );
    }
}
