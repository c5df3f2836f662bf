//! `orchestrate pin`: write what `verify` observed into the plan's `[pins]`, editing
//! the TOML text in place (toml_edit) so comments, order and formatting survive.
//!
//! What is written: git `commit` = the full HEAD sha; model `revision` = the resolved
//! snapshot sha (hub models only) and `digest` = `sha256:<folder digest>`; tool
//! `expect` = kept when it matched, else the observed line; Python packages =
//! `name==observed`; files = `sha256:<observed>`. Entries that could not be observed
//! (`error`) are left as written: the caller shows the report. A dirty repository
//! gets its commit pinned but not `allow_dirty`: that stays the researcher's call.

use toml_edit::{DocumentMut, Item, TableLike, Value};

use super::report::{Details, PinEntry, PinKind, PinReport, PinStatus};
use super::tool::{normalize_package, parse_requirement};

/// Why a plan could not be pinned.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("the plan is not valid TOML: {0}")]
    Toml(#[from] toml_edit::TomlError),
    #[error("the plan has no table {0} (was the report made from another plan?)")]
    Missing(String),
    #[error("{0} is not a table")]
    NotTable(String),
}

fn table<'a>(
    root: &'a mut dyn TableLike,
    path: &[&str],
    shown: &str,
) -> Result<&'a mut dyn TableLike, PinError> {
    let mut t = root;
    for key in path {
        t = t
            .get_mut(key)
            .ok_or_else(|| PinError::Missing(shown.to_string()))?
            .as_table_like_mut()
            .ok_or_else(|| PinError::NotTable(shown.to_string()))?;
    }
    Ok(t)
}

/// Set `key` to a string, keeping the old value's spacing and trailing comment.
fn set_string(t: &mut dyn TableLike, key: &str, text: &str) {
    let mut v = Value::from(text);
    match t.get_mut(key) {
        Some(Item::Value(old)) => {
            *v.decor_mut() = old.decor().clone();
            *old = v;
        }
        _ => {
            t.insert(key, Item::Value(v));
        }
    }
}

fn observed_sha(e: &PinEntry) -> Option<&str> {
    match &e.details {
        Some(Details::Git(g)) => Some(g.head.as_str()),
        _ => None,
    }
}

/// The plan text with the report's observed values written into its pins.
pub fn pin_plan_text(source: &str, report: &PinReport) -> Result<String, PinError> {
    let mut doc: DocumentMut = source.parse()?;
    let root = doc.as_table_mut() as &mut dyn TableLike;
    for e in &report.entries {
        if e.status == PinStatus::Error {
            continue;
        }
        match e.kind {
            PinKind::Git => {
                let Some(sha) = observed_sha(e) else { continue };
                let shown = format!("pins.git.{}", e.name);
                let t = table(root, &["pins", "git", &e.name], &shown)?;
                set_string(t, "commit", sha);
            }
            PinKind::Model => {
                let Some(Details::Model(m)) = &e.details else {
                    continue;
                };
                let shown = format!("pins.model.{}", e.name);
                let t = table(root, &["pins", "model", &e.name], &shown)?;
                if let (Some(rev), Some(_)) = (&m.revision, &m.id) {
                    set_string(t, "revision", rev);
                }
                set_string(t, "digest", &format!("sha256:{}", m.digest));
            }
            PinKind::Tool => {
                if e.status == PinStatus::Ok {
                    continue;
                }
                let Some(line) = e.observed.as_deref().filter(|l| !l.is_empty()) else {
                    continue;
                };
                let shown = format!("pins.tools.{}", e.name);
                let t = table(root, &["pins", "tools", &e.name], &shown)?;
                set_string(t, "expect", line);
            }
            PinKind::Python => {
                let (Some(Details::Python(p)), Some(version)) = (&e.details, &e.observed) else {
                    continue;
                };
                let shown = format!("pins.python.{}.packages", p.pin);
                let t = table(root, &["pins", "python", &p.pin], &shown)?;
                let arr = t
                    .get_mut("packages")
                    .and_then(|i| i.as_array_mut())
                    .ok_or_else(|| PinError::Missing(shown.clone()))?;
                for v in arr.iter_mut() {
                    let Some(req) = v.as_str() else { continue };
                    let Ok((name, _)) = parse_requirement(req) else {
                        continue;
                    };
                    if normalize_package(&name) == p.package {
                        let mut nv = Value::from(format!("{name}=={version}"));
                        *nv.decor_mut() = v.decor().clone();
                        *v = nv;
                    }
                }
            }
            PinKind::File => {
                let Some(obs) = &e.observed else { continue };
                let t = table(root, &["pins", "files"], "pins.files")?;
                set_string(t, &e.name, obs);
            }
        }
    }
    Ok(doc.to_string())
}
