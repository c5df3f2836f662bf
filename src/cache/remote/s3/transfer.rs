//! Moving large blobs: an upload in parts, several at once, that is aborted when
//! any part fails (S3 keeps no object from an upload never completed), and a
//! download that goes on from the byte where a broken connection left it.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rusty_s3::actions::{CompleteMultipartUpload, CreateMultipartUpload};
use rusty_s3::S3Action;

use super::http::{retry, send, status_error, transient, xml_field, Send, TRIES};
use super::S3Store;
use crate::cache::remote::progress::Progress;
use crate::cache::remote::RemoteError;

/// A blob up to this size goes in one PUT.
const ONE_PUT: u64 = 32 << 20;
/// The smallest part (S3 allows 5 MiB, and at most 10 000 parts).
const PART: u64 = 16 << 20;
/// Parts in flight at once.
const AT_ONCE: usize = 4;

/// The Content-Length of a response.
pub fn length(res: &ureq::http::Response<ureq::Body>) -> Option<u64> {
    res.headers()
        .get("content-length")?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// `len` bytes of `f` from `at`, as a reader.
struct At<'a> {
    f: &'a File,
    at: u64,
    end: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len().min((self.end - self.at) as usize);
        if want == 0 {
            return Ok(0);
        }
        let n = self.f.read_at(&mut buf[..want], self.at)?;
        if n == 0 {
            return Err(io::Error::other("the file shrank while it was read"));
        }
        self.at += n as u64;
        Ok(n)
    }
}

/// Store `size` bytes of `src` as `obj`.
pub fn upload(s: &S3Store, obj: &str, src: &File, size: u64) -> Result<(), RemoteError> {
    if size <= ONE_PUT {
        return put_range(s, obj, src, 0, size, None);
    }
    let mut create = s.bucket.create_multipart_upload(s.creds.as_ref(), obj);
    create
        .headers_mut()
        .insert("content-type", "application/octet-stream");
    let hdr = [("content-type", "application/octet-stream")];
    let body = retry(&format!("start upload of {obj}"), || {
        let mut res = send(&s.agent, &create, &hdr, Send::Empty, obj).map_err(Ok)?;
        match res.status().as_u16() {
            200 => res
                .body_mut()
                .read_to_string()
                .map_err(|e| Ok(RemoteError::Refused(format!("{obj}: {e}")))),
            st if transient(st) => Err(Ok(status_error(obj, &mut res))),
            _ => Err(Err(status_error(obj, &mut res))),
        }
    })?;
    let id = CreateMultipartUpload::parse_response(&body)
        .map_err(|e| RemoteError::Refused(format!("{obj}: no upload id ({e})")))?
        .upload_id()
        .to_string();
    let done = parts(s, obj, src, size, &id).and_then(|etags| complete(s, obj, &id, &etags));
    if done.is_err() {
        abort(s, obj, &id);
    }
    done
}

/// Upload every part, `AT_ONCE` at a time; their ETags in order.
fn parts(
    s: &S3Store,
    obj: &str,
    src: &File,
    size: u64,
    id: &str,
) -> Result<Vec<String>, RemoteError> {
    let part = PART.max(size.div_ceil(9_000).next_multiple_of(1 << 20));
    let count = size.div_ceil(part);
    let next = AtomicU64::new(0);
    let etags = Mutex::new(vec![String::new(); count as usize]);
    let failed: Mutex<Option<RemoteError>> = Mutex::new(None);
    let progress = Progress::new(format!("pushing {obj}"), size);
    std::thread::scope(|sc| {
        for _ in 0..AT_ONCE.min(count as usize) {
            sc.spawn(|| loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= count || failed.lock().map(|f| f.is_some()).unwrap_or(true) {
                    return;
                }
                let at = n * part;
                let len = part.min(size - at);
                let mut etag = None;
                match put_range(s, obj, src, at, len, Some((n as u16 + 1, id, &mut etag))) {
                    Ok(()) => {
                        if let Ok(mut e) = etags.lock() {
                            e[n as usize] = etag.unwrap_or_default();
                        }
                        progress.add(len);
                    }
                    Err(e) => {
                        if let Ok(mut f) = failed.lock() {
                            f.get_or_insert(e);
                        }
                        return;
                    }
                }
            });
        }
    });
    progress.end();
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(e);
    }
    etags
        .into_inner()
        .map_err(|_| RemoteError::Refused(format!("{obj}: an upload thread panicked")))
}

type PartOf<'a, 'b> = Option<(u16, &'a str, &'b mut Option<String>)>;

/// PUT `len` bytes of `src` from `at` as `obj`, or as a part of upload `id`.
fn put_range(
    s: &S3Store,
    obj: &str,
    src: &File,
    at: u64,
    len: u64,
    mut part: PartOf<'_, '_>,
) -> Result<(), RemoteError> {
    let what = match &part {
        Some((n, _, _)) => format!("PUT {obj} part {n}"),
        None => format!("PUT {obj}"),
    };
    retry(&what, || {
        let mut body = At {
            f: src,
            at,
            end: at + len,
        };
        let mut res = match &part {
            Some((n, id, _)) => {
                let a = s.bucket.upload_part(s.creds.as_ref(), obj, *n, id);
                send(&s.agent, &a, &[], Send::Reader(&mut body, len), obj)
            }
            None => {
                let mut a = s.bucket.put_object(s.creds.as_ref(), obj);
                a.headers_mut()
                    .insert("content-type", "application/octet-stream");
                let h = [("content-type", "application/octet-stream")];
                send(&s.agent, &a, &h, Send::Reader(&mut body, len), obj)
            }
        }
        .map_err(Ok)?;
        match res.status().as_u16() {
            200 | 201 | 204 => {
                if let Some((_, _, etag)) = &mut part {
                    let e = res.headers().get("etag").and_then(|v| v.to_str().ok());
                    **etag = e.map(str::to_string);
                }
                Ok(())
            }
            st if transient(st) => Err(Ok(status_error(obj, &mut res))),
            _ => Err(Err(status_error(obj, &mut res))),
        }
    })
}

fn complete(s: &S3Store, obj: &str, id: &str, etags: &[String]) -> Result<(), RemoteError> {
    if etags.iter().any(String::is_empty) {
        return Err(RemoteError::Refused(format!(
            "{obj}: a part came back without an ETag"
        )));
    }
    let action = s.bucket.complete_multipart_upload(
        s.creds.as_ref(),
        obj,
        id,
        etags.iter().map(String::as_str),
    );
    let body = CompleteMultipartUpload::body(action.clone());
    retry(&format!("complete upload of {obj}"), || {
        let mut res =
            send(&s.agent, &action, &[], Send::Bytes(body.as_bytes()), obj).map_err(Ok)?;
        let status = res.status().as_u16();
        if status != 200 {
            let e = status_error(obj, &mut res);
            return Err(if transient(status) { Ok(e) } else { Err(e) });
        }
        // S3 may answer 200 and still have failed: the body says.
        let text = res.body_mut().read_to_string().unwrap_or_default();
        match xml_field(&text, "Code") {
            Some(code) if text.contains("<Error>") => Err(Ok(RemoteError::Refused(format!(
                "S3 complete upload of {obj}: {code}"
            )))),
            _ => Ok(()),
        }
    })
}

/// Best effort: an upload never completed is no object, but its parts cost.
fn abort(s: &S3Store, obj: &str, id: &str) {
    let action = s.bucket.abort_multipart_upload(s.creds.as_ref(), obj, id);
    if let Err(e) = send(&s.agent, &action, &[], Send::Empty, obj) {
        tracing::warn!(
            "S3: could not abort the failed upload of {obj} ({e}); its parts are no object, \
             and a lifecycle rule (AbortIncompleteMultipartUpload) removes them"
        );
    }
}

/// Write `obj`, which must be `size` bytes, to `dst`: the bytes written (a blob of
/// another size stops at `size` + 1). A connection that breaks is taken up again
/// from the byte it stopped at.
pub fn download(
    s: &S3Store,
    obj: &str,
    size: u64,
    dst: &mut dyn Write,
) -> Result<u64, RemoteError> {
    let mut got = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    let progress = Progress::new(format!("pulling {obj}"), size);
    let mut breaks = 0;
    'resume: loop {
        let Some(res) = s.get(obj, got)? else {
            return Err(RemoteError::Refused(format!("{obj} is not in the store")));
        };
        let total = length(&res).map(|l| l + got);
        if got == 0 && total != Some(size) {
            return Ok(total.unwrap_or(size + 1).min(size + 1));
        }
        let mut r = res.into_body().into_reader();
        while got <= size {
            let want = buf.len().min((size + 1 - got) as usize);
            let n = match r.read(&mut buf[..want]) {
                Ok(0) => break 'resume,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if breaks + 1 < TRIES && got < size => {
                    breaks += 1;
                    tracing::warn!(
                        "S3 GET {obj}: broke off at byte {got} ({e}); going on from there"
                    );
                    continue 'resume;
                }
                Err(e) => return Err(RemoteError::io(obj.to_string(), e)),
            };
            dst.write_all(&buf[..n])
                .map_err(|e| RemoteError::io(format!("writing {obj}"), e))?;
            got += n as u64;
            progress.add(n as u64);
        }
        break;
    }
    progress.end();
    Ok(got)
}
