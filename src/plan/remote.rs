//! Where a team's cache is, as a plan or `--cache-remote` writes it: a shared
//! folder (an absolute path or a `file://` URL) or an S3 bucket
//! (`s3://bucket/prefix?endpoint=…&region=…&profile=…`). Here only the form is
//! checked, so a plan's mistake is named at its line; the cache opens it.

/// What `spec` is, or why it is neither form.
pub fn check(spec: &str) -> Result<(), String> {
    if spec.starts_with("s3://") {
        return S3Location::parse(spec).map(|_| ());
    }
    let path = spec.strip_prefix("file://").unwrap_or(spec);
    if path.starts_with('/') && !spec.contains(char::is_control) {
        return Ok(());
    }
    Err(format!(
        "`{spec}` is neither a shared folder (an absolute path or a file:// URL) nor an s3:// bucket"
    ))
}

/// An `s3://` remote, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    /// Below the bucket, without a leading or trailing `/` (may be empty).
    pub prefix: String,
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub profile: Option<String>,
}

fn bad(spec: &str, why: &str) -> String {
    format!("`{spec}`: {why}")
}

impl S3Location {
    /// Parse `s3://bucket[/prefix][?endpoint=URL&region=R&profile=P]`.
    pub fn parse(spec: &str) -> Result<S3Location, String> {
        let rest = spec
            .strip_prefix("s3://")
            .ok_or_else(|| bad(spec, "an S3 remote starts with s3://"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
        if bucket.contains('@') || bucket.contains(':') {
            // Not echoed: what stands before `@` may be a secret.
            return Err("an s3:// remote: credentials never go in the URL; set \
                        AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or use ~/.aws/credentials"
                .to_string());
        }
        let bucket_ok = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !bucket_ok {
            return Err(bad(spec, "the bucket is 3 to 63 of a-z, 0-9, `-` and `.`"));
        }
        let prefix = prefix.trim_matches('/');
        let prefix_ok = prefix
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != "..")
            || prefix.is_empty();
        if !prefix_ok || prefix.contains(|c: char| c.is_control() || c == '\\') {
            return Err(bad(
                spec,
                "the prefix is `/`-separated names, none empty, `.` or `..`",
            ));
        }
        let mut loc = S3Location {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            endpoint: None,
            region: None,
            profile: None,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = Some(v.to_string()).filter(|v| !v.is_empty());
            match k {
                "endpoint" => loc.endpoint = v,
                "region" => loc.region = v,
                "profile" => loc.profile = v,
                _ => {
                    return Err(bad(
                        spec,
                        &format!("`{k}` is not one of endpoint, region, profile"),
                    ))
                }
            }
        }
        Ok(loc)
    }
}
