//! An S3-compatible object store as the remote, laid out as the shared folder is:
//!
//! ```text
//! <prefix>/blobs/sha256/<2 hex>/<64 hex>         file contents
//! <prefix>/entries/<2 hex>/<key>/<key id>.json   one signed entry per signing key
//! ```
//!
//! An entry is written with `If-None-Match: *`, so the store itself decides the
//! first writer (a second gets 412 and writes nothing). Blobs are content-addressed
//! and checked by whoever reads them, so a blob is simply put; a large one goes in
//! parts, several at once, and a failed upload is aborted, so nothing half-written
//! is ever an object. A read that breaks off goes on from where it stopped.

pub mod config;
mod http;
mod transfer;

use std::fs::File;
use std::io::{Read, Write};

use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};

use self::http::{retry, send, status_error, transient, Send};
use super::{is_hex64, Held, Remote, RemoteError, Stored};
pub use config::Location;

/// The largest listing page asked for.
const PAGE: usize = 1000;

/// An S3 bucket (and a prefix in it) holding a cache.
pub struct S3Store {
    url: String,
    bucket: Bucket,
    creds: Option<Credentials>,
    /// "" or "some/prefix/".
    prefix: String,
    agent: ureq::Agent,
}

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Store").field("url", &self.url).finish()
    }
}

impl S3Store {
    /// The store `spec` names, located and signed for as the environment says.
    pub fn open(spec: &str) -> Result<S3Store, RemoteError> {
        Self::open_with(spec, &|k| std::env::var(k).ok())
    }

    /// As `open`, with `var` for the environment.
    pub fn open_with(
        spec: &str,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<S3Store, RemoteError> {
        let loc = Location::parse(spec).map_err(RemoteError::Location)?;
        let r = config::resolve(&loc, var)?;
        let (endpoint, style) = match &r.endpoint {
            Some(e) => (e.clone(), UrlStyle::Path),
            None => (
                format!("https://s3.{}.amazonaws.com", r.region),
                UrlStyle::VirtualHost,
            ),
        };
        let bad = |why: String| RemoteError::Location(format!("`{spec}`: {why}"));
        let url = endpoint
            .parse()
            .map_err(|_| bad(format!("the endpoint `{endpoint}` is not a URL")))?;
        let bucket = Bucket::new(url, style, loc.bucket.clone(), r.region.clone())
            .map_err(|e| bad(format!("the endpoint `{endpoint}`: {e}")))?;
        tracing::debug!("S3 remote {spec}: credentials from {}", r.credentials_from);
        let prefix = if loc.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", loc.prefix)
        };
        Ok(S3Store {
            url: format!("s3://{}/{}", loc.bucket, loc.prefix),
            bucket,
            creds: r.credentials,
            prefix,
            agent: http::agent(),
        })
    }

    fn blob_name(&self, hex: &str) -> Result<String, RemoteError> {
        check_hex(hex)?;
        Ok(format!("{}blobs/sha256/{}/{hex}", self.prefix, &hex[..2]))
    }

    fn entry_dir(&self, key: &str) -> Result<String, RemoteError> {
        check_hex(key)?;
        Ok(format!("{}entries/{}/{key}/", self.prefix, &key[..2]))
    }

    fn entry_name(&self, key: &str, signer: &str) -> Result<String, RemoteError> {
        check_hex(signer)?;
        Ok(format!("{}{signer}.json", self.entry_dir(key)?))
    }

    /// GET `obj` from byte `from` on; `None` when it is not there.
    fn get(
        &self,
        obj: &str,
        from: u64,
    ) -> Result<Option<ureq::http::Response<ureq::Body>>, RemoteError> {
        let action = self.bucket.get_object(self.creds.as_ref(), obj);
        let range = format!("bytes={from}-");
        let headers: &[(&str, &str)] = if from > 0 { &[("range", &range)] } else { &[] };
        retry(&format!("GET {obj}"), || {
            let mut res = send(&self.agent, &action, headers, Send::Empty, obj).map_err(Ok)?;
            match res.status().as_u16() {
                200 | 206 => Ok(Some(res)),
                404 => Ok(None),
                s if transient(s) => Err(Ok(status_error(obj, &mut res))),
                _ => Err(Err(status_error(obj, &mut res))),
            }
        })
    }

    /// PUT `bytes` as `obj`; with `only_new`, only where nothing is (`false` when
    /// something was).
    fn put_bytes(&self, obj: &str, bytes: &[u8], only_new: bool) -> Result<bool, RemoteError> {
        let mut action = self.bucket.put_object(self.creds.as_ref(), obj);
        let mut headers = vec![("content-type", "application/json")];
        if only_new {
            headers.push(("if-none-match", "*"));
        }
        for (k, v) in &headers {
            action.headers_mut().insert(*k, *v);
        }
        retry(&format!("PUT {obj}"), || {
            let mut res =
                send(&self.agent, &action, &headers, Send::Bytes(bytes), obj).map_err(Ok)?;
            match res.status().as_u16() {
                200 | 201 | 204 => Ok(true),
                412 if only_new => Ok(false),
                // Another conditional write of the same name is under way: S3
                // asks for a retry, after which one of them is there.
                409 => Err(Ok(status_error(obj, &mut res))),
                s if transient(s) => Err(Ok(status_error(obj, &mut res))),
                _ => Err(Err(status_error(obj, &mut res))),
            }
        })
    }

    /// Every object below the store's prefix, named relative to it: what a
    /// listing or an administrator's check reads.
    pub fn objects(&self) -> Result<Vec<String>, RemoteError> {
        Ok(self
            .list(&self.prefix)?
            .into_iter()
            .filter_map(|n| n.strip_prefix(&self.prefix).map(str::to_string))
            .collect())
    }

    /// DELETE `obj` (one already gone is no error).
    fn delete(&self, obj: &str) -> Result<(), RemoteError> {
        let action = self.bucket.delete_object(self.creds.as_ref(), obj);
        retry(&format!("DELETE {obj}"), || {
            let mut res = send(&self.agent, &action, &[], Send::Empty, obj).map_err(Ok)?;
            match res.status().as_u16() {
                200 | 204 | 404 => Ok(()),
                s if transient(s) => Err(Ok(status_error(obj, &mut res))),
                _ => Err(Err(status_error(obj, &mut res))),
            }
        })
    }

    /// Every object name under `prefix`, page by page.
    fn list(&self, prefix: &str) -> Result<Vec<String>, RemoteError> {
        Ok(self.listed(prefix)?.into_iter().map(|o| o.name).collect())
    }

    /// Every object under `prefix` with its size and time, page by page.
    fn listed(&self, prefix: &str) -> Result<Vec<Listed>, RemoteError> {
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut action = self.bucket.list_objects_v2(self.creds.as_ref());
            action.with_prefix(prefix);
            action.with_max_keys(PAGE);
            if let Some(t) = &token {
                action.with_continuation_token(t.clone());
            }
            let body = retry(&format!("LIST {prefix}"), || {
                let mut res = send(&self.agent, &action, &[], Send::Empty, prefix).map_err(Ok)?;
                match res.status().as_u16() {
                    200 => res
                        .body_mut()
                        .with_config()
                        .limit(64 << 20)
                        .read_to_string()
                        .map_err(|e| Ok(RemoteError::Refused(format!("LIST {prefix}: {e}")))),
                    s if transient(s) => Err(Ok(status_error(prefix, &mut res))),
                    _ => Err(Err(status_error(prefix, &mut res))),
                }
            })?;
            let page = rusty_s3::actions::ListObjectsV2::parse_response(&body)
                .map_err(|e| RemoteError::Refused(format!("LIST {prefix}: not a listing ({e})")))?;
            names.extend(page.contents.into_iter().map(|c| {
                Listed {
                    modified: c
                        .last_modified
                        .as_deref()
                        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                        .map(std::time::SystemTime::from),
                    size: c.size.unwrap_or(0),
                    name: c.key,
                }
            }));
            match page.next_continuation_token {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => return Ok(names),
            }
        }
    }
}

/// One object of a listing.
struct Listed {
    name: String,
    size: u64,
    /// `None` where the store gave no time it could be read as.
    modified: Option<std::time::SystemTime>,
}

fn check_hex(hex: &str) -> Result<(), RemoteError> {
    if is_hex64(hex) {
        Ok(())
    } else {
        Err(RemoteError::Refused(format!("`{hex}` is not a sha256")))
    }
}

impl Remote for S3Store {
    fn url(&self) -> &str {
        &self.url
    }

    fn entry(&self, key: &str, signer: &str, max: u64) -> Result<Option<Vec<u8>>, RemoteError> {
        let obj = self.entry_name(key, signer)?;
        let Some(res) = self.get(&obj, 0)? else {
            return Ok(None);
        };
        let mut bytes = Vec::new();
        res.into_body()
            .into_reader()
            .take(max + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| RemoteError::io(obj.clone(), e))?;
        if bytes.len() as u64 > max {
            return Err(RemoteError::Refused(format!("{obj}: over {max} bytes")));
        }
        Ok(Some(bytes))
    }

    fn signers(&self, key: &str) -> Result<Vec<String>, RemoteError> {
        let dir = self.entry_dir(key)?;
        Ok(self
            .list(&dir)?
            .iter()
            .filter_map(|n| n.strip_prefix(&dir)?.strip_suffix(".json"))
            .filter(|n| is_hex64(n))
            .map(str::to_string)
            .collect())
    }

    fn put_entry_if_absent(
        &self,
        key: &str,
        signer: &str,
        bytes: &[u8],
    ) -> Result<bool, RemoteError> {
        self.put_bytes(&self.entry_name(key, signer)?, bytes, true)
    }

    fn replace_entry(&self, key: &str, signer: &str, bytes: &[u8]) -> Result<(), RemoteError> {
        self.put_bytes(&self.entry_name(key, signer)?, bytes, false)
            .map(|_| ())
    }

    fn has_blob(&self, hex: &str, size: u64) -> Result<bool, RemoteError> {
        let obj = self.blob_name(hex)?;
        let action = self.bucket.head_object(self.creds.as_ref(), &obj);
        retry(&format!("HEAD {obj}"), || {
            let mut res = send(&self.agent, &action, &[], Send::Empty, &obj).map_err(Ok)?;
            match res.status().as_u16() {
                200 => Ok(transfer::length(&res) == Some(size)),
                404 => Ok(false),
                s if transient(s) => Err(Ok(status_error(&obj, &mut res))),
                _ => Err(Err(status_error(&obj, &mut res))),
            }
        })
    }

    fn put_blob(&self, hex: &str, src: &mut File, size: u64) -> Result<(), RemoteError> {
        let obj = self.blob_name(hex)?;
        transfer::upload(self, &obj, src, size)
    }

    fn get_blob(&self, hex: &str, size: u64, dst: &mut dyn Write) -> Result<u64, RemoteError> {
        let obj = self.blob_name(hex)?;
        transfer::download(self, &obj, size, dst)
    }

    fn remove_blob(&self, hex: &str) -> Result<(), RemoteError> {
        self.delete(&self.blob_name(hex)?)
    }

    fn keys(&self) -> Result<Vec<String>, RemoteError> {
        let top = format!("{}entries/", self.prefix);
        let mut keys: Vec<String> = self
            .list(&top)?
            .iter()
            .filter_map(|n| {
                let mut parts = n.strip_prefix(&top)?.split('/');
                let (hh, key) = (parts.next()?, parts.next()?);
                (is_hex64(key) && key.starts_with(hh)).then(|| key.to_string())
            })
            .collect();
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    fn stored(&self) -> Result<Vec<Stored>, RemoteError> {
        let now = std::time::SystemTime::now();
        let mut out = Vec::new();
        for o in self.listed(&self.prefix)? {
            let Some(rel) = o.name.strip_prefix(&self.prefix) else {
                continue;
            };
            let parts: Vec<&str> = rel.split('/').collect();
            let held = match parts[..] {
                ["blobs", "sha256", hh, hex] if is_hex64(hex) && hex.starts_with(hh) => {
                    Held::Blob { hex: hex.into() }
                }
                ["entries", hh, key, name] if is_hex64(key) && key.starts_with(hh) => {
                    match name.strip_suffix(".json").filter(|n| is_hex64(n)) {
                        Some(signer) => Held::Entry {
                            key: key.into(),
                            signer: signer.into(),
                        },
                        None => continue,
                    }
                }
                _ => continue,
            };
            // A time the store did not give reads as now: kept, never collected.
            let modified = o.modified.unwrap_or(now);
            out.push(Stored {
                held,
                size: o.size,
                modified,
            });
        }
        Ok(out)
    }

    fn remove_entry(&self, key: &str, signer: &str) -> Result<(), RemoteError> {
        self.delete(&self.entry_name(key, signer)?)
    }
}
