//! Changing a plan's text before it is read: `--set KEY=VALUE` from the command line,
//! and `include = "other.toml"`, a plan that is another plan with a few tables or
//! keys replaced (`plans/full8k.toml` is `plans/full.toml` over 8K only). Both edit
//! the TOML document with `toml_edit`, which keeps every line it does not change, so
//! errors elsewhere keep their places.

use toml_edit::{DocumentMut, Item, Table, Value};

/// Why an override cannot be applied.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OverrideError {
    #[error("--set {0}: expected KEY=VALUE with KEY a TOML key, e.g. params.tokens=4096, matrix.tokens=[2048] or 'params.\"a.b\"=2'")]
    Shape(String),
    #[error(
        "--set {key}: `{value}` is not a TOML value ({reason}); strings need quotes: '\"bf16\"'"
    )]
    Value {
        key: String,
        value: String,
        reason: String,
    },
    #[error("--set {0}: cannot set a key below a value that is not a table")]
    NotATable(String),
    #[error("cannot read the plan text as TOML to apply overrides: {0}")]
    Document(String),
}

/// Parse `KEY=VALUE` (VALUE in TOML syntax; a bare word is taken as a string).
pub fn parse_set(s: &str) -> Result<(String, String), OverrideError> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| OverrideError::Shape(s.to_string()))?;
    let (k, v) = (k.trim(), v.trim());
    if key_parts(k).is_none() {
        return Err(OverrideError::Shape(s.to_string()));
    }
    Ok((k.to_string(), v.to_string()))
}

/// The parts of a dotted key as TOML reads it: `params."a.b"` is `params` and `a.b`.
fn key_parts(k: &str) -> Option<Vec<String>> {
    let keys = toml_edit::Key::parse(k).ok()?;
    let parts: Vec<String> = keys.iter().map(|k| k.get().to_string()).collect();
    (!parts.is_empty() && parts.iter().all(|p| !p.is_empty())).then_some(parts)
}

fn toml_value(key: &str, text: &str) -> Result<Value, OverrideError> {
    text.parse::<Value>().or_else(|e| {
        // `--set matrix.numerics=[bf16]` or `--set params.x=bf16`: words as strings.
        let plain = !text.is_empty()
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '+' | '/'));
        if plain {
            Ok(Value::from(text))
        } else {
            Err(OverrideError::Value {
                key: key.to_string(),
                value: text.to_string(),
                reason: e.to_string().trim().replace('\n', "; "),
            })
        }
    })
}

/// `source` with each `(key, value)` set (dotted keys make tables as needed).
pub fn apply(source: &str, sets: &[(String, String)]) -> Result<String, OverrideError> {
    if sets.is_empty() {
        return Ok(source.to_string());
    }
    let mut doc: DocumentMut = source
        .parse()
        .map_err(|e: toml_edit::TomlError| OverrideError::Document(e.to_string()))?;
    for (key, text) in sets {
        let value = toml_value(key, text)?;
        let parts = key_parts(key).ok_or_else(|| OverrideError::Shape(key.clone()))?;
        let (last, tables) = parts
            .split_last()
            .ok_or_else(|| OverrideError::Shape(key.clone()))?;
        // Down through tables and inline tables (`[revisions] baseline = { ... }`).
        let mut t: &mut dyn toml_edit::TableLike = doc.as_table_mut();
        let mut inline = false;
        for p in tables {
            if t.get(p).is_none() {
                let fresh = if inline {
                    Item::Value(Value::InlineTable(Default::default()))
                } else {
                    Item::Table(Table::new())
                };
                t.insert(p, fresh);
            }
            let item = t
                .get_mut(p)
                .ok_or_else(|| OverrideError::NotATable(key.clone()))?;
            inline = inline || matches!(item, Item::Value(_));
            t = item
                .as_table_like_mut()
                .ok_or_else(|| OverrideError::NotATable(key.clone()))?;
        }
        t.insert(last, Item::Value(value));
    }
    Ok(doc.to_string())
}

/// `base` with every key of `over` (except `include` and `schema`) put in: tables
/// merge key by key, anything else replaces what `base` had.
pub fn merge_include(base: &str, over: &str) -> Result<String, OverrideError> {
    let mut doc: DocumentMut = base
        .parse()
        .map_err(|e: toml_edit::TomlError| OverrideError::Document(e.to_string()))?;
    let over: DocumentMut = over
        .parse()
        .map_err(|e: toml_edit::TomlError| OverrideError::Document(e.to_string()))?;
    fn merge(into: &mut Table, from: &Table) {
        for (k, item) in from.iter() {
            match (into.get_mut(k), item) {
                (Some(Item::Table(a)), Item::Table(b)) => merge(a, b),
                _ => {
                    into.insert(k, item.clone());
                }
            }
        }
    }
    let mut top = over.as_table().clone();
    top.remove("include");
    top.remove("schema");
    merge(doc.as_table_mut(), &top);
    Ok(doc.to_string())
}

/// The `include = "..."` of a plan's text, if it has one.
pub fn include_of(source: &str) -> Option<String> {
    let doc: DocumentMut = source.parse().ok()?;
    doc.get("include")?.as_str().map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_replace_values_and_keep_the_rest() {
        let src = "name = \"x\" # keep\n[params]\ntokens = 2048\n[matrix]\ntokens = [2048, 8192]\n";
        let out = apply(
            src,
            &[
                parse_set("params.tokens=4096").unwrap(),
                parse_set("matrix.tokens=[2048]").unwrap(),
                parse_set("params.dtype=bf16").unwrap(),
            ],
        )
        .unwrap();
        assert!(out.contains("name = \"x\" # keep"), "{out}");
        assert!(out.contains("tokens = 4096"), "{out}");
        assert!(out.contains("tokens = [2048]"), "{out}");
        assert!(out.contains("dtype = \"bf16\""), "{out}");
        assert!(parse_set("noequals").is_err());
        // Into an inline table.
        let out = apply(
            "[revisions]\nimplementation = { repo = \"..\", commit = \"HEAD~1\" }\n",
            &[parse_set("revisions.implementation.commit=\"HEAD\"").unwrap()],
        )
        .unwrap();
        assert!(
            out.contains("implementation = { repo = \"..\", commit = \"HEAD\" }"),
            "{out}"
        );
        assert!(apply(src, &[parse_set("name.x=1").unwrap()]).is_err());
    }

    #[test]
    fn an_include_replaces_what_it_names() {
        let base = "name = \"full\"\n[matrix]\ntokens = [2048, 8192]\n[steps.a]\nshell = \"x\"\n";
        let over = "schema = \"orchestrate/plan/v1\"\ninclude = \"full.toml\"\nname = \"full8k\"\n[matrix]\ntokens = [8192]\n";
        assert_eq!(include_of(over).as_deref(), Some("full.toml"));
        let out = merge_include(base, over).unwrap();
        assert!(out.contains("name = \"full8k\""), "{out}");
        assert!(
            out.contains("tokens = [8192]") && !out.contains("2048"),
            "{out}"
        );
        assert!(
            out.contains("[steps.a]") && !out.contains("include"),
            "{out}"
        );
    }
}
