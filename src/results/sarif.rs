//! SARIF 2.1.0 logs as ruff, semgrep, gitleaks and bandit write them: `runs[]`, each
//! with `tool.driver.name` and `results[]` (`ruleId`, `level`, `message.text`,
//! `locations[0].physicalLocation`, `partialFingerprints` / `fingerprints`).

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use super::{cut, Budget, Finding, SarifResults};

/// Read and parse `path` (`file` is how the step named it), streaming: one result
/// is held at a time, so a log of millions of results costs the findings kept
/// (at most [`super::MAX_KEPT_BYTES`] of them) and not a tree of the whole document.
pub fn read(path: &Path, file: &str) -> SarifResults {
    let opened = crate::digest::open_regular(path, crate::digest::Follow::No);
    let mut r = match opened {
        Ok((_, size)) if size > super::MAX_RESULTS_BYTES => SarifResults {
            error: Some(format!(
                "holds {size} bytes, over the limit of {}: not read",
                super::MAX_RESULTS_BYTES
            )),
            ..SarifResults::default()
        },
        Ok((f, _)) => {
            let mut reader = Hashing::new(f.take(super::MAX_RESULTS_BYTES + 1));
            let mut r = parse_reader(std::io::BufReader::with_capacity(1 << 16, &mut reader));
            if reader.read_bytes > super::MAX_RESULTS_BYTES {
                r = SarifResults {
                    error: Some("grew over the size limit while it was read: not read".into()),
                    ..SarifResults::default()
                };
            } else {
                // Whatever the parser left unread still counts for the digest.
                let _ = std::io::copy(&mut reader, &mut std::io::sink());
                r.sha256 = Some(reader.digest());
            }
            r
        }
        Err(e) => SarifResults {
            error: Some(e.to_string()),
            ..SarifResults::default()
        },
    };
    r.file = file.to_string();
    r
}

/// A reader that hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hash: sha2::Sha256,
    read_bytes: u64,
}

impl<R: std::io::Read> Hashing<R> {
    fn new(inner: R) -> Self {
        use sha2::Digest;
        Hashing {
            inner,
            hash: sha2::Sha256::new(),
            read_bytes: 0,
        }
    }

    fn digest(self) -> crate::digest::Sha256Digest {
        use sha2::Digest;
        crate::digest::Sha256Digest(self.hash.finalize().into())
    }
}

impl<R: std::io::Read> std::io::Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use sha2::Digest;
        let n = crate::sys::retry(|| self.inner.read(buf))?;
        self.hash.update(&buf[..n]);
        self.read_bytes += n as u64;
        Ok(n)
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
    parse_reader(bytes)
}

/// Parse a SARIF log from a stream, one result at a time.
pub fn parse_reader<R: std::io::Read>(input: R) -> SarifResults {
    let mut out = SarifResults::default();
    let mut de = serde_json::Deserializer::from_reader(input);
    let mut saw_runs = false;
    let mut budget = Budget::default();
    let res = serde::de::DeserializeSeed::deserialize(
        stream::Log {
            out: &mut out,
            saw_runs: &mut saw_runs,
            budget: &mut budget,
        },
        &mut de,
    )
    .and_then(|()| de.end());
    match res {
        Err(e) if e.is_syntax() || e.is_eof() || e.is_io() => {
            out = SarifResults {
                error: Some(format!("not JSON: {e}")),
                ..SarifResults::default()
            };
        }
        Err(e) if !saw_runs => {
            out = SarifResults {
                error: Some(format!("no `runs` array: not a SARIF log ({e})")),
                ..SarifResults::default()
            };
        }
        Err(e) => out.error = Some(format!("not a SARIF log: {e}")),
        Ok(()) if !saw_runs => {
            out.error = Some("no `runs` array: not a SARIF log".into());
        }
        Ok(()) => {}
    }
    out
}

/// One result as a finding (its rule by index is resolved once the run's rules
/// are known: `tool` may come after `results`).
fn finding(r: &Value, rules: &[String]) -> (Finding, Option<usize>) {
    let named = text(r, &["ruleId"])
        .or_else(|| text(r, &["rule", "id"]))
        .map(String::from);
    let index = r
        .get("ruleIndex")
        .and_then(Value::as_u64)
        .map(|i| i as usize);
    let rule = named
        .clone()
        .or_else(|| rules.get(index?).cloned())
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
    let pending = if named.is_none() && rule == "(no rule)" {
        index
    } else {
        None
    };
    (
        Finding {
            rule,
            file,
            line,
            level: text(r, &["level"]).map(String::from),
            message,
            fingerprint: fp,
        },
        pending,
    )
}

/// The streaming visitors: the document, `runs`, one run, its `results`.
mod stream {
    use std::fmt;

    use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use serde_json::Value;

    use super::{cut, finding, fingerprint, text, Budget, SarifResults};

    pub(super) struct Log<'a> {
        pub out: &'a mut SarifResults,
        pub saw_runs: &'a mut bool,
        pub budget: &'a mut Budget,
    }

    impl<'de> DeserializeSeed<'de> for Log<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for Log<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a SARIF log (an object with `runs`)")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
            while let Some(k) = m.next_key::<String>()? {
                if k == "runs" && !*self.saw_runs {
                    *self.saw_runs = true;
                    m.next_value_seed(Runs {
                        out: self.out,
                        budget: self.budget,
                    })?;
                } else {
                    m.next_value::<IgnoredAny>()?;
                }
            }
            Ok(())
        }
    }

    struct Runs<'a> {
        out: &'a mut SarifResults,
        budget: &'a mut Budget,
    }

    impl<'de> DeserializeSeed<'de> for Runs<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }

    impl<'de> Visitor<'de> for Runs<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array of runs")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
            while s
                .next_element_seed(Run {
                    out: self.out,
                    budget: self.budget,
                })?
                .is_some()
            {}
            Ok(())
        }
    }

    struct Run<'a> {
        out: &'a mut SarifResults,
        budget: &'a mut Budget,
    }

    impl<'de> DeserializeSeed<'de> for Run<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Run<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a run")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
            let mut rules: Vec<String> = Vec::new();
            let first = self.out.findings.len();
            let mut pending: Vec<(usize, usize)> = Vec::new();
            while let Some(k) = m.next_key::<String>()? {
                match k.as_str() {
                    "tool" => {
                        let tool: Value = m.next_value()?;
                        if let Some(name) = text(&tool, &["driver", "name"]) {
                            if !self.out.tools.iter().any(|t| t == name) {
                                self.out.tools.push(name.to_string());
                            }
                        }
                        rules = tool
                            .pointer("/driver/rules")
                            .and_then(Value::as_array)
                            .map(|r| {
                                r.iter()
                                    // Cut: every finding naming it by index copies it.
                                    .map(|x| cut(text(x, &["id"]).unwrap_or("(no rule)")))
                                    .collect()
                            })
                            .unwrap_or_default();
                    }
                    "results" => m.next_value_seed(Results {
                        out: self.out,
                        budget: self.budget,
                        rules: &rules,
                        pending: &mut pending,
                    })?,
                    _ => {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
            }
            // Results read before the run's rules: their rule by index now.
            for (i, index) in pending {
                if let (Some(rule), Some(f)) =
                    (rules.get(index), self.out.findings.get_mut(first + i))
                {
                    f.rule = rule.clone();
                    f.fingerprint = fingerprint_again(f, rule);
                }
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
            while s.next_element::<IgnoredAny>()?.is_some() {}
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }

    /// A finding whose rule was resolved late: its fingerprint, made as if the rule
    /// had been known (the tool's own fingerprint stays).
    fn fingerprint_again(f: &super::Finding, rule: &str) -> String {
        if f.fingerprint.starts_with("sha256:") {
            fingerprint(&Value::Null, rule, &f.message)
        } else {
            f.fingerprint.clone()
        }
    }

    struct Results<'a, 'b> {
        out: &'a mut SarifResults,
        budget: &'a mut Budget,
        rules: &'b [String],
        pending: &'b mut Vec<(usize, usize)>,
    }

    impl<'de> DeserializeSeed<'de> for Results<'_, '_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Results<'_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array of results")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
            let base = self.out.findings.len();
            while let Some(r) = s.next_element::<Value>()? {
                self.out.count = self.out.count.saturating_add(1);
                let (f, pending) = finding(&r, self.rules);
                // A rule named by index later is at most a cut message long.
                let late_rule = if pending.is_some() {
                    4 * super::super::MAX_MESSAGE + 4
                } else {
                    0
                };
                if !self.budget.admit(f.kept_bytes() + late_rule, true) {
                    self.out.left_out = self.out.left_out.saturating_add(1);
                    continue;
                }
                if let Some(index) = pending {
                    self.pending.push((self.out.findings.len() - base, index));
                }
                self.out.findings.push(f);
            }
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
            while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }
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
