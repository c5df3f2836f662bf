//! SARIF 2.1.0 logs as ruff, semgrep, gitleaks and bandit write them: `runs[]`, each
//! with `tool.driver.name` and `results[]` (`ruleId`, `level`, `message.text`,
//! `locations[0].physicalLocation`, `partialFingerprints` / `fingerprints`).

use std::path::Path;

use serde_json::Value;

use super::{cut, Finding, SarifResults, MAX_ITEMS};

/// Read and parse `path` (`file` is how the step named it).
pub fn read(path: &Path, file: &str) -> SarifResults {
    match super::read(path) {
        Ok((bytes, digest)) => {
            let mut r = parse(&bytes);
            r.file = file.to_string();
            r.sha256 = Some(digest);
            r
        }
        Err(e) => SarifResults {
            file: file.to_string(),
            error: Some(e),
            ..SarifResults::default()
        },
    }
}

fn text<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str()
}

/// The tool's own location-independent fingerprint, else rule + message (the file
/// is part of a finding's key on its own, relative to the revision's folder).
fn fingerprint(r: &Value, rule: &str, message: &str) -> String {
    for key in ["partialFingerprints", "fingerprints"] {
        if let Some(obj) = r.get(key).and_then(Value::as_object) {
            // Sorted by name (a BTreeMap-ordered object), so the pick is stable.
            let mut pairs: Vec<(&String, &Value)> = obj.iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(b.0));
            // Line-based hashes (`primaryLocationLineHash`) move with the line: a
            // name without "line" is preferred, then any.
            let pick = pairs
                .iter()
                .find(|(k, _)| !k.to_ascii_lowercase().contains("line"))
                .or(pairs.first());
            if let Some((k, v)) = pick {
                if let Some(s) = v.as_str() {
                    return format!("{k}:{s}");
                }
            }
        }
    }
    let pre = format!("{rule}\u{0}{message}");
    format!(
        "sha256:{}",
        crate::digest::sha256_bytes(pre.as_bytes()).hex()
    )
}

/// Parse a SARIF log; what cannot be read is an error, never a panic.
pub fn parse(bytes: &[u8]) -> SarifResults {
    let mut out = SarifResults::default();
    let doc: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            out.error = Some(format!("not JSON: {e}"));
            return out;
        }
    };
    let Some(runs) = doc.get("runs").and_then(Value::as_array) else {
        out.error = Some("no `runs` array: not a SARIF log".into());
        return out;
    };
    for run in runs {
        if let Some(name) = text(run, &["tool", "driver", "name"]) {
            if !out.tools.iter().any(|t| t == name) {
                out.tools.push(name.to_string());
            }
        }
        let rules: Vec<&Value> = run
            .pointer("/tool/driver/rules")
            .and_then(Value::as_array)
            .map(|r| r.iter().collect())
            .unwrap_or_default();
        for r in run
            .get("results")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.count = out.count.saturating_add(1);
            if out.findings.len() >= MAX_ITEMS {
                continue;
            }
            let rule = text(r, &["ruleId"])
                .or_else(|| text(r, &["rule", "id"]))
                .map(String::from)
                .or_else(|| {
                    let i = r.get("ruleIndex")?.as_u64()? as usize;
                    text(rules.get(i)?, &["id"]).map(String::from)
                })
                .unwrap_or_else(|| "(no rule)".into());
            let loc = r.pointer("/locations/0/physicalLocation");
            let file = loc
                .and_then(|l| text(l, &["artifactLocation", "uri"]))
                .map(String::from);
            let line = loc
                .and_then(|l| l.pointer("/region/startLine"))
                .and_then(Value::as_u64);
            let message = cut(text(r, &["message", "text"]).unwrap_or(""));
            let fp = fingerprint(r, &rule, &message);
            out.findings.push(Finding {
                rule,
                file,
                line,
                level: text(r, &["level"]).map(String::from),
                message,
                fingerprint: fp,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_keep_their_key_when_lines_move() {
        let at = |line: u64| {
            format!(
                r#"{{"version":"2.1.0","runs":[{{"tool":{{"driver":{{"name":"ruff","rules":[{{"id":"F401"}}]}}}},"results":[{{"ruleIndex":0,"level":"error","message":{{"text":"`os` imported but unused"}},"locations":[{{"physicalLocation":{{"artifactLocation":{{"uri":"src/a.py"}},"region":{{"startLine":{line}}}}}}}]}}]}}]}}"#
            )
        };
        let a = parse(at(1).as_bytes());
        let b = parse(at(9).as_bytes());
        assert_eq!(a.error, None);
        assert_eq!(a.tools, ["ruff"]);
        assert_eq!(a.findings[0].rule, "F401");
        assert_eq!(a.findings[0].line, Some(1));
        assert_eq!(a.findings[0].key(), b.findings[0].key());
        // A tool's own fingerprint wins, a line hash only when nothing else is given.
        let fp = parse(br#"{"runs":[{"results":[{"ruleId":"generic-api-key","message":{"text":"x"},"partialFingerprints":{"primaryLocationLineHash":"aa:1","commitSha":"c0ffee"}}]}]}"#);
        assert_eq!(fp.findings[0].fingerprint, "commitSha:c0ffee");
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(parse(b"<xml/>").error.is_some());
        assert!(parse(b"{\"version\": \"2.1.0\"}").error.is_some());
        let odd = parse(br#"{"runs":[{"results":[1, {"ruleId": 5}, {"locations": "x"}]}]}"#);
        assert_eq!(odd.error, None);
        assert_eq!(odd.count, 3);
    }
}
