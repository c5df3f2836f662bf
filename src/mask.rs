//! Secrets: which variables hold one, and masking their values wherever the
//! orchestrator would store them (the journal and so the record and its reports,
//! argv and shell text, the environment, metrics, and the attempt logs as they are
//! written), the way GitHub Actions masks a secret in its logs.
//!
//! A variable is secret by its name (`*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*KEY*`,
//! ...) or because the plan lists it (`secrets`, or the older `secret_env`); then
//! its *value* is masked everywhere, whatever name or text carries it. Values
//! shorter than [`MIN_LEN`] are not masked: masking `1` would garble every log.

use std::sync::Arc;

/// What a masked value is replaced with.
pub const MASK: &str = "***";
/// The shortest value that is masked.
pub const MIN_LEN: usize = 4;

/// Whether a variable name looks secret, or is listed in `extra`: a part of the
/// name that names a credential (`*TOKEN*`, `*SECRET*`, `*PASSWORD*`,
/// `*PASSPHRASE*`, `*KEY*`, `*CREDENTIAL*`, `*AUTH*`, `*COOKIE*`, `*WEBHOOK*`,
/// `*PRIVATE*`), or a word of it that does (`GH_PAT`, `DB_PASS`,
/// `DB_PWD`, `SENTRY_DSN`).
pub fn looks_secret(name: &str, extra: &[String]) -> bool {
    let up = name.to_ascii_uppercase();
    const PARTS: &[&str] = &[
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "KEY",
        "CREDENTIAL",
        "AUTH",
        "COOKIE",
        "WEBHOOK",
        "PRIVATE",
    ];
    // Short words only as a whole word of the name: `PASS` is not `BYPASS`.
    const WORDS: &[&str] = &["PAT", "PASS", "PWD", "PW", "DSN", "CRED", "CREDS"];
    let word = || {
        // `PWD` and `OLDPWD` are the shell's working folders.
        up != "PWD"
            && up != "OLDPWD"
            && up
                .split(|c: char| !c.is_ascii_alphanumeric())
                .any(|w| WORDS.contains(&w))
    };
    PARTS.iter().any(|p| up.contains(p)) || word() || extra.iter().any(|e| e == name)
}

/// The secrets a variable holds: its whole value when its name looks secret,
/// else the password of every URL in it (`postgres://user:pw@host`), whatever
/// the name.
pub fn secrets_in(name: &str, value: &str, extra: &[String]) -> Vec<String> {
    if looks_secret(name, extra) {
        return vec![value.to_string()];
    }
    url_passwords(value)
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// A variable's value as the record keeps it: `<redacted>` for a secret name,
/// else with every URL's password masked.
pub fn redacted(name: &str, value: &str, extra: &[String]) -> String {
    if looks_secret(name, extra) {
        return "<redacted>".to_string();
    }
    let mut out = value.to_string();
    for pw in url_passwords(value) {
        out = out.replace(&format!(":{pw}@"), &format!(":{MASK}@"));
    }
    out
}

/// The password part of every `scheme://user:password@host` in `text`.
pub fn url_passwords(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let after = &rest[i + 3..];
        // The authority ends at the path, query or fragment, or a blank.
        let end = after
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(after.len());
        let authority = &after[..end];
        if let Some(at) = authority.rfind('@') {
            if let Some((_, pw)) = authority[..at].split_once(':') {
                if !pw.is_empty() {
                    found.push(pw);
                }
            }
        }
        rest = &after[end..];
    }
    found
}

/// The secret values of one run, longest first (so a secret that contains another
/// is masked whole).
#[derive(Debug, Clone, Default)]
pub struct Masker {
    values: Vec<Vec<u8>>,
}

impl Masker {
    /// A masker for `values` (short and duplicate ones dropped).
    pub fn new<I: IntoIterator<Item = String>>(values: I) -> Masker {
        let mut v: Vec<Vec<u8>> = values
            .into_iter()
            .filter(|s| s.len() >= MIN_LEN)
            .map(String::into_bytes)
            .collect();
        v.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        v.dedup();
        Masker { values: v }
    }

    /// Nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    fn longest(&self) -> usize {
        self.values.first().map_or(0, Vec::len)
    }

    /// `text` with every secret value replaced by [`MASK`].
    pub fn mask_str(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_string();
        }
        // Secrets and the mask are whole UTF-8 strings, so the result is too.
        String::from_utf8(self.mask_bytes(text.as_bytes()))
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// Whether `text` holds a secret value.
    pub fn finds_in(&self, text: &[u8]) -> bool {
        self.values.iter().any(|s| find(text, s, 0).is_some())
    }

    /// `bytes` with every secret value replaced by [`MASK`].
    pub fn mask_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        for s in &self.values {
            if find(&out, s, 0).is_none() {
                continue;
            }
            let mut next = Vec::with_capacity(out.len());
            let mut at = 0;
            while let Some(i) = find(&out, s, at) {
                next.extend_from_slice(&out[at..i]);
                next.extend_from_slice(MASK.as_bytes());
                at = i + s.len();
            }
            next.extend_from_slice(&out[at..]);
            out = next;
        }
        out
    }

    /// `text` with every secret value replaced by what `with` makes of it (a keyed
    /// digest in a cache key, so the key still changes when the secret does).
    pub fn replace_str(&self, text: &str, with: &dyn Fn(&[u8]) -> String) -> String {
        if self.is_empty() || !self.finds_in(text.as_bytes()) {
            return text.to_string();
        }
        let mut out = text.as_bytes().to_vec();
        for s in &self.values {
            let mut next = Vec::with_capacity(out.len());
            let mut at = 0;
            while let Some(i) = find(&out, s, at) {
                next.extend_from_slice(&out[at..i]);
                next.extend_from_slice(with(s).as_bytes());
                at = i + s.len();
            }
            next.extend_from_slice(&out[at..]);
            out = next;
        }
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// Mask every string inside a JSON value (keys too).
    pub fn mask_json(&self, v: &mut serde_json::Value) {
        if self.is_empty() {
            return;
        }
        match v {
            serde_json::Value::String(s) if self.finds_in(s.as_bytes()) => {
                *s = self.mask_str(s);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| self.mask_json(x)),
            serde_json::Value::Object(o) => {
                let keys: Vec<String> = o
                    .keys()
                    .filter(|k| self.finds_in(k.as_bytes()))
                    .cloned()
                    .collect();
                for k in keys {
                    if let Some(x) = o.remove(&k) {
                        o.insert(self.mask_str(&k), x);
                    }
                }
                o.values_mut().for_each(|x| self.mask_json(x));
            }
            _ => {}
        }
    }
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    let first = needle[0];
    let last_start = hay.len() - needle.len();
    let mut i = from;
    while i <= last_start {
        let j = i + hay[i..=last_start].iter().position(|&b| b == first)?;
        if hay[j..j + needle.len()] == *needle {
            return Some(j);
        }
        i = j + 1;
    }
    None
}

/// Mask a file in place (a log a batch job or a lost attempt wrote), streaming: through
/// an exclusive temporary file of an unguessable name beside it, never one a link
/// planted there names, renamed over it when whole.
pub fn mask_file_in_place(path: &std::path::Path, masker: &Arc<Masker>) {
    use std::io::{Read, Write};
    if masker.is_empty() {
        return;
    }
    let Ok((mut f, _)) = crate::digest::open_regular(path, crate::digest::Follow::No) else {
        return;
    };
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return;
    };
    let Ok(d) = crate::fsx::Dir::open(dir) else {
        return;
    };
    let t = crate::fsx::unique_name();
    let Ok(mut out) = d.create(&t, 0o644) else {
        return;
    };
    let mut sm = StreamMask::new(Arc::clone(masker));
    let mut buf = vec![0u8; 1 << 16];
    let ok = loop {
        match crate::sys::retry(|| f.read(&mut buf)) {
            Ok(0) => break out.write_all(&sm.finish()).is_ok(),
            Ok(n) => {
                if out.write_all(&sm.push(&buf[..n])).is_err() {
                    break false;
                }
            }
            Err(_) => break false,
        }
    };
    if !(ok && d.rename(&t, &d, name).is_ok()) {
        let _ = d.unlink(&t);
    }
}

/// Masks a byte stream written in chunks: a secret split across two chunks is still
/// masked, because the last `longest - 1` bytes wait for the next chunk.
#[derive(Debug)]
pub struct StreamMask {
    masker: Arc<Masker>,
    pending: Vec<u8>,
}

impl StreamMask {
    pub fn new(masker: Arc<Masker>) -> StreamMask {
        StreamMask {
            masker,
            pending: Vec::new(),
        }
    }

    /// Feed a chunk; returns the bytes that are safe to write now.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        let masked = self.masker.mask_bytes(&self.pending);
        let keep = self.masker.longest().saturating_sub(1).min(masked.len());
        let cut = masked.len() - keep;
        self.pending = masked[cut..].to_vec();
        masked[..cut].to_vec()
    }

    /// The rest, at the end of the stream.
    pub fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.pending);
        self.masker.mask_bytes(&rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_look_secret() {
        for n in [
            "HF_TOKEN",
            "api_key",
            "DB_PASSWORD",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            assert!(looks_secret(n, &[]), "{n}");
        }
        assert!(!looks_secret("DB_HOST", &[]));
        assert!(looks_secret("DB_HOST", &["DB_HOST".into()]));
        assert!(!looks_secret("PATH", &[]));
        for n in [
            "GH_PAT",
            "PASSPHRASE",
            "COOKIE",
            "SLACK_WEBHOOK",
            "DB_PASS",
            "db_pwd",
            "SENTRY_DSN",
            "SSH_PRIVATE",
        ] {
            assert!(looks_secret(n, &[]), "{n}");
        }
        for n in [
            "PWD",
            "OLDPWD",
            "BYPASS_CACHE",
            "PATTERN",
            "COMPASS",
            "HOME",
        ] {
            assert!(!looks_secret(n, &[]), "{n}");
        }
    }

    #[test]
    fn passwords_in_urls_are_secrets_whatever_the_name() {
        let v = "postgres://u:pw-9f@db.example/app,redis://:r3dis@cache:6379/0 https://h/x?a=b:c@d";
        assert_eq!(url_passwords(v), ["pw-9f", "r3dis"]);
        assert_eq!(secrets_in("DATABASE_URL", v, &[]), ["pw-9f", "r3dis"]);
        assert_eq!(
            redacted("DATABASE_URL", v, &[]),
            "postgres://u:***@db.example/app,redis://:***@cache:6379/0 https://h/x?a=b:c@d"
        );
        assert_eq!(redacted("HF_TOKEN", "abc", &[]), "<redacted>");
        assert!(url_passwords("https://example.org/a@b").is_empty());
    }

    #[test]
    fn values_are_masked_whole_wherever_they_are() {
        let m = Masker::new(["hunter2-long".to_string(), "hunter".into(), "x".into()]);
        assert_eq!(m.mask_str("a hunter2-long b hunter c x"), "a *** b *** c x");
        let mut v = serde_json::json!({"argv": ["--t", "hunter2-long"], "hunter": 1});
        m.mask_json(&mut v);
        assert_eq!(v, serde_json::json!({"argv": ["--t", "***"], "***": 1}));
        assert!(
            Masker::new(["abc".to_string()]).is_empty(),
            "too short to mask"
        );
    }

    #[test]
    fn a_secret_split_across_chunks_is_masked() {
        let m = Arc::new(Masker::new(["s3cr3t-value".to_string()]));
        let text = b"one s3cr3t-value two s3cr3t-value three";
        for split in 1..text.len() {
            let mut s = StreamMask::new(m.clone());
            let mut out = s.push(&text[..split]);
            out.extend(s.push(&text[split..]));
            out.extend(s.finish());
            assert_eq!(out, b"one *** two *** three", "split at {split}");
        }
    }
}
