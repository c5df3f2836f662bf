//! Where an S3 store is and who the caller is there. The location comes from the
//! remote's URL (`s3://bucket/prefix?endpoint=…&region=…&profile=…`), then the
//! environment (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, `AWS_REGION`,
//! `AWS_DEFAULT_REGION`, `AWS_PROFILE`), then the profile in the usual AWS files
//! (`~/.aws/config`: `region`, `endpoint_url`). Credentials come only from the
//! environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`)
//! or those files (`~/.aws/credentials`, then `~/.aws/config`), never from the URL
//! or a plan: a plan is shared and recorded, a secret is neither.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rusty_s3::Credentials;

use crate::cache::remote::RemoteError;
pub use crate::plan::remote::S3Location as Location;

/// What the caller's environment and AWS files say.
#[derive(Default)]
pub struct Resolved {
    pub endpoint: Option<String>,
    pub region: String,
    pub credentials: Option<Credentials>,
    /// Where the credentials came from, for messages (never the secret).
    pub credentials_from: &'static str,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("credentials_from", &self.credentials_from)
            .finish()
    }
}

/// Resolve `loc` with `var` (the environment) and the AWS files it names.
pub fn resolve(
    loc: &Location,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Resolved, RemoteError> {
    let var = |k: &str| var(k).filter(|v| !v.trim().is_empty());
    let profile = loc
        .profile
        .clone()
        .or_else(|| var("AWS_PROFILE"))
        .unwrap_or_else(|| "default".to_string());
    let home = var("HOME").map(PathBuf::from);
    let file = |env: &str, name: &str| {
        var(env)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    let config = match file("AWS_CONFIG_FILE", "config") {
        Some(p) => section(&p, &profile, true)?,
        None => BTreeMap::new(),
    };
    let shared = match file("AWS_SHARED_CREDENTIALS_FILE", "credentials") {
        Some(p) => section(&p, &profile, false)?,
        None => BTreeMap::new(),
    };
    let (credentials, credentials_from) =
        match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
            (Some(k), Some(s)) => (
                Some(creds(k, s, var("AWS_SESSION_TOKEN"))),
                "the environment",
            ),
            _ => match from_section(&shared).or_else(|| from_section(&config)) {
                Some(c) => (Some(c), "the AWS files"),
                None => (None, "nowhere (unsigned requests)"),
            },
        };
    let endpoint = loc
        .endpoint
        .clone()
        .or_else(|| var("AWS_ENDPOINT_URL_S3"))
        .or_else(|| var("AWS_ENDPOINT_URL"))
        .or_else(|| config.get("endpoint_url").cloned());
    let region = loc
        .region
        .clone()
        .or_else(|| var("AWS_REGION"))
        .or_else(|| var("AWS_DEFAULT_REGION"))
        .or_else(|| config.get("region").cloned())
        .unwrap_or_else(|| "us-east-1".to_string());
    Ok(Resolved {
        endpoint,
        region,
        credentials,
        credentials_from,
    })
}

fn creds(key: String, secret: String, token: Option<String>) -> Credentials {
    match token {
        Some(t) => Credentials::new_with_token(key, secret, t),
        None => Credentials::new(key, secret),
    }
}

fn from_section(s: &BTreeMap<String, String>) -> Option<Credentials> {
    let key = s.get("aws_access_key_id")?.clone();
    let secret = s.get("aws_secret_access_key")?.clone();
    Some(creds(key, secret, s.get("aws_session_token").cloned()))
}

/// The `key = value` lines of `profile`'s section of an AWS INI file (the config
/// file names it `[profile NAME]` except `[default]`); empty when the file is not
/// there. A file over 1 MiB is refused.
fn section(
    path: &std::path::Path,
    profile: &str,
    config: bool,
) -> Result<BTreeMap<String, String>, RemoteError> {
    use std::io::Read;
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(RemoteError::io(path.display().to_string(), e)),
    };
    let mut text = String::new();
    f.take((1 << 20) + 1)
        .read_to_string(&mut text)
        .map_err(|e| RemoteError::io(path.display().to_string(), e))?;
    if text.len() > 1 << 20 {
        return Err(RemoteError::Refused(format!(
            "{}: over 1 MiB, not an AWS file",
            path.display()
        )));
    }
    let want = if config && profile != "default" {
        format!("profile {profile}")
    } else {
        profile.to_string()
    };
    Ok(ini_section(&text, &want))
}

fn ini_section(text: &str, want: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == want;
        } else if inside {
            if let Some((k, v)) = line.split_once('=') {
                out.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_bucket_prefix_and_where_but_never_a_secret() {
        let l = Location::parse(
            "s3://team-cache/orch/v1/?endpoint=http://127.0.0.1:9000&region=eu-west-1",
        )
        .unwrap();
        assert_eq!(l.bucket, "team-cache");
        assert_eq!(l.prefix, "orch/v1");
        assert_eq!(l.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(l.region.as_deref(), Some("eu-west-1"));
        for bad in [
            "s3://AKIA:secret@bucket/x",
            "s3://Bucket",
            "s3://ab",
            "s3://bucket/a/../b",
            "s3://bucket/x?token=abc",
        ] {
            assert!(Location::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn credentials_come_from_the_environment_then_the_profile_in_the_aws_files() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".aws")).unwrap();
        std::fs::write(
            d.path().join(".aws/credentials"),
            "[default]\naws_access_key_id = AKDEF\naws_secret_access_key = s1\n\
             [ci]\naws_access_key_id=AKCI\naws_secret_access_key=s2\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join(".aws/config"),
            "[profile ci]\nregion = ap-south-1\nendpoint_url = http://minio:9000\n",
        )
        .unwrap();
        let home = d.path().display().to_string();
        let loc = Location::parse("s3://bucket-1?profile=ci").unwrap();
        let env = |k: &str| (k == "HOME").then(|| home.clone());
        let r = resolve(&loc, &env).unwrap();
        assert_eq!(r.credentials.as_ref().map(|c| c.key()), Some("AKCI"));
        assert_eq!(r.region, "ap-south-1");
        assert_eq!(r.endpoint.as_deref(), Some("http://minio:9000"));
        let env2 = |k: &str| match k {
            "HOME" => Some(home.clone()),
            "AWS_ACCESS_KEY_ID" => Some("AKENV".into()),
            "AWS_SECRET_ACCESS_KEY" => Some("s3".into()),
            _ => None,
        };
        let r = resolve(&Location::parse("s3://bucket-1").unwrap(), &env2).unwrap();
        assert_eq!(r.credentials.as_ref().map(|c| c.key()), Some("AKENV"));
        assert_eq!(r.region, "us-east-1");
        assert!(!format!("{r:?}").contains("s3\""), "{r:?}");
    }

    #[test]
    fn an_aws_file_over_a_mebibyte_is_refused_not_cut() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("credentials");
        let mut text = "[default]\naws_access_key_id = AK\naws_secret_access_key = s\n".to_string();
        text.push_str(&"#".repeat(1 << 20));
        std::fs::write(&f, text).unwrap();
        let e = section(&f, "default", false).unwrap_err();
        assert!(e.to_string().contains("over 1 MiB"), "{e}");
    }
}
