//! `[pins]`: git, model, tools, python and file pins, each with the keys it accepts.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

use toml::de::{DeTable, DeValue};

use super::super::interp::Ctx;
use super::super::model::*;
use super::super::schema::Table;
use super::{Val, Walker};
use toml::Spanned;

/// A pin's name (or a file pin's path) as the table key it is written as.
type PinKey<'i> = Spanned<Cow<'i, str>>;

/// Walks one entry of a `[pins.X]` table into its name and pin, `None` when refused.
type PinWalk<'s, T> = fn(&mut Walker<'s>, &PinKey<'_>, &Val<'_>, &Ctx<'_>) -> Option<(String, T)>;

impl<'s> Walker<'s> {
    /// `untracked = "record" | "refuse"`: whether untracked files are drift.
    pub(super) fn untracked_policy(&mut self, v: &Val<'_>, what: &str) -> Option<bool> {
        let s = self.string(v, &format!("`untracked` of {what}"))?;
        match s.as_str() {
            "record" => Some(false),
            "refuse" => Some(true),
            _ => {
                self.err(
                    v.span(),
                    format!("`untracked` of {what} must be \"record\" or \"refuse\", found `{s}`"),
                    "\"record\" (the default) records untracked files; \"refuse\" treats them as drift",
                );
                None
            }
        }
    }

    pub(super) fn pins(&mut self, v: &Val<'_>, ctx: &Ctx<'_>) -> Pins {
        let mut pins = Pins::default();
        let Some(t) = self.table(v, "[pins]") else {
            return pins;
        };
        self.keys(t, Table::Pins, &[], "in [pins]");
        pins.git = self.pin_section(t, "git", ctx, Self::git_pin);
        pins.model = self.pin_section(t, "model", ctx, Self::model_pin);
        pins.tools = self.pin_section(t, "tools", ctx, Self::tool_pin);
        pins.python = self.pin_section(t, "python", ctx, Self::python_pin);
        pins.files = self.pin_section(t, "files", ctx, Self::file_pin);
        pins
    }

    /// One `[pins.X]` table, each entry walked by `pin`: the pins that read well, by name.
    fn pin_section<T>(
        &mut self,
        t: &DeTable<'_>,
        section: &str,
        ctx: &Ctx<'_>,
        pin: PinWalk<'s, T>,
    ) -> BTreeMap<String, T> {
        let mut out = BTreeMap::new();
        let what = format!("[pins.{section}]");
        if let Some(g) = t.get(section).and_then(|v| self.table(v, &what)) {
            for (k, v) in g.iter() {
                if let Some((name, p)) = pin(self, k, v, ctx) {
                    out.insert(name, p);
                }
            }
        }
        out
    }

    /// A git pin: a repository's path, and the commit it must be at.
    fn git_pin(&mut self, k: &PinKey<'_>, v: &Val<'_>, ctx: &Ctx<'_>) -> Option<(String, GitPin)> {
        let mut no_refs = Vec::new();
        let what = format!("pin `pins.git.{}`", k.get_ref());
        let p = self.table(v, &what)?;
        self.keys(p, Table::GitPin, &[], &format!("in {what}"));
        let path = self.required(p, "path", &what, k.span(), "path = \".\"");
        let path = path
            .and_then(|v| self.template(v, &format!("`path` of {what}"), ctx, false, &mut no_refs));
        let commit = p.get("commit").and_then(|v| {
            let s = self.load_string(v, &format!("`commit` of {what}"))?;
            if (4..=64).contains(&s.len()) && s.chars().all(|c| c.is_ascii_hexdigit()) {
                Some(s)
            } else {
                self.err(
                    v.span(),
                    format!("`{s}` is not a git commit"),
                    "write a short or full hex sha, e.g. \"720e8dc\"",
                );
                None
            }
        });
        let allow_dirty = p
            .get("allow_dirty")
            .and_then(|v| self.boolean(v, &format!("`allow_dirty` of {what}")))
            .unwrap_or(false);
        let refuse_untracked = p
            .get("untracked")
            .and_then(|v| self.untracked_policy(v, &what))
            .unwrap_or(false);
        let path = path?;
        Some((
            k.get_ref().to_string(),
            GitPin {
                path: lit_path(&path),
                commit,
                allow_dirty,
                refuse_untracked,
            },
        ))
    }

    /// A model pin: a folder (a hub cache when `id` is given), its revision and digest.
    fn model_pin(
        &mut self,
        k: &PinKey<'_>,
        v: &Val<'_>,
        ctx: &Ctx<'_>,
    ) -> Option<(String, ModelPin)> {
        let mut no_refs = Vec::new();
        let what = format!("pin `pins.model.{}`", k.get_ref());
        let p = self.table(v, &what)?;
        self.keys(p, Table::ModelPin, &[], &format!("in {what}"));
        let id = p
            .get("id")
            .and_then(|v| self.load_string(v, &format!("`id` of {what}")));
        let revision = p
            .get("revision")
            .and_then(|v| self.load_string(v, &format!("`revision` of {what}")));
        let path = self.required(p, "path", &what, k.span(), "path = \"models/x\"");
        let path = path
            .and_then(|v| self.template(v, &format!("`path` of {what}"), ctx, false, &mut no_refs));
        let digest = p.get("digest").and_then(|v| {
            let s = self.load_string(v, &format!("`digest` of {what}"))?;
            self.sha256(v, &s, false)
        });
        let path = path?;
        Some((
            k.get_ref().to_string(),
            ModelPin {
                id,
                revision,
                path: lit_path(&path),
                digest,
            },
        ))
    }

    /// A tool pin: a command whose output must hold `expect`.
    fn tool_pin(
        &mut self,
        k: &PinKey<'_>,
        v: &Val<'_>,
        ctx: &Ctx<'_>,
    ) -> Option<(String, ToolPin)> {
        let what = format!("pin `pins.tools.{}`", k.get_ref());
        let p = self.table(v, &what)?;
        self.keys(p, Table::ToolPin, &[], &format!("in {what}"));
        let command = self
            .required(
                p,
                "command",
                &what,
                k.span(),
                "command = [\"tool\", \"--version\"]",
            )
            .and_then(|v| self.tool_command(v, &what, ctx));
        let expect = p
            .get("expect")
            .and_then(|v| self.load_string(v, &format!("`expect` of {what}")));
        let timeout = p
            .get("timeout")
            .and_then(|v| self.duration(v, &format!("`timeout` of {what}")));
        let command = command?;
        Some((
            k.get_ref().to_string(),
            ToolPin {
                command,
                expect,
                timeout,
            },
        ))
    }

    /// A tool pin's `command`: a program to run before the plan, so it is known at load
    /// time and not empty.
    fn tool_command(&mut self, v: &Val<'_>, what: &str, ctx: &Ctx<'_>) -> Option<Vec<String>> {
        let mut no_refs = Vec::new();
        let items = self.array(v, &format!("`command` of {what}"))?;
        if items.is_empty() {
            self.err(
                v.span(),
                format!("`command` of {what} is empty"),
                "name a program, e.g. [\"nvcc\", \"--version\"]",
            );
            return None;
        }
        let mut out = Vec::new();
        for item in items {
            let t = self.template(
                item,
                &format!("each entry of `command` of {what}"),
                ctx,
                false,
                &mut no_refs,
            )?;
            out.push(lit_string(&t));
        }
        Some(out)
    }

    /// A python pin: an interpreter and packages, each at a pinned version.
    fn python_pin(
        &mut self,
        k: &PinKey<'_>,
        v: &Val<'_>,
        ctx: &Ctx<'_>,
    ) -> Option<(String, PythonPin)> {
        let mut no_refs = Vec::new();
        let what = format!("pin `pins.python.{}`", k.get_ref());
        let p = self.table(v, &what)?;
        self.keys(p, Table::PythonPin, &[], &format!("in {what}"));
        let python = match p.get("python") {
            Some(v) => self
                .template(v, &format!("`python` of {what}"), ctx, false, &mut no_refs)
                .map(|t| lit_string(&t)),
            None => Some("python3".to_string()),
        };
        let packages = p
            .get("packages")
            .and_then(|v| self.load_strings(v, &format!("`packages` of {what}")))
            .unwrap_or_default();
        let mut ok = true;
        for (s, span) in &packages {
            if !s.contains("==") {
                ok = false;
                self.err(
                    span.clone(),
                    format!("package `{s}` has no pinned version"),
                    "write `name==version`, e.g. \"numpy==2.1.3\"",
                );
            }
        }
        let (Some(python), true) = (python, ok) else {
            return None;
        };
        Some((
            k.get_ref().to_string(),
            PythonPin {
                python,
                packages: packages.into_iter().map(|p| p.0).collect(),
            },
        ))
    }

    /// A file pin: a path (its key, interpolated) and its digest, empty until pinned.
    fn file_pin(&mut self, k: &PinKey<'_>, v: &Val<'_>, ctx: &Ctx<'_>) -> Option<(String, String)> {
        let what = format!("pin for file `{}`", k.get_ref());
        let s = self.load_string(v, &format!("the {what}"))?;
        let key: &str = k.get_ref();
        let key_t = self.interp_key(k, key, ctx);
        match (key_t, self.sha256(v, &s, true)) {
            (Some(path), Some(d)) => Some((path, d)),
            _ => None,
        }
    }

    /// Interpolate a table key (a file pin's path) at load time.
    pub(super) fn interp_key(
        &mut self,
        k: &PinKey<'_>,
        key: &str,
        ctx: &Ctx<'_>,
    ) -> Option<String> {
        let v: Val<'_> = Spanned::new(k.span(), DeValue::String(key.to_string().into()));
        let mut no_refs = Vec::new();
        self.interp(&v, key, ctx, false, &mut no_refs)
            .map(|t| lit_string(&t))
    }

    pub(super) fn sha256(&mut self, v: &Val<'_>, s: &str, empty_ok: bool) -> Option<String> {
        if empty_ok && s.is_empty() {
            return Some(String::new());
        }
        match s.strip_prefix("sha256:") {
            Some(hex) if hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()) => {
                Some(s.to_ascii_lowercase())
            }
            _ => {
                self.err(
                    v.span(),
                    format!("`{s}` is not a sha256 digest"),
                    "write \"sha256:\" and 64 hex digits, or run `orchestrate pin` to fill it in",
                );
                None
            }
        }
    }

    pub(super) fn required<'a, 'i>(
        &mut self,
        t: &'a DeTable<'i>,
        key: &str,
        what: &str,
        at: Range<usize>,
        example: &str,
    ) -> Option<&'a Val<'i>> {
        let v = t.get(key);
        if v.is_none() {
            self.err(
                at,
                format!("{what} is missing `{key}`"),
                format!("add `{example}`"),
            );
        }
        v
    }
}

/// A template without run-time variables, as plain text (validation guarantees none).
fn lit_string(t: &Template) -> String {
    t.segments
        .iter()
        .map(|s| match s {
            Segment::Lit(l) => l.as_str(),
            Segment::Var(_) => "",
        })
        .collect()
}

fn lit_path(t: &Template) -> std::path::PathBuf {
    std::path::PathBuf::from(lit_string(t))
}
