//! Requests to the store: signed URLs made here, sent with ureq, answered with a
//! status. A signed URL carries the caller's key id and a signature, so no error
//! or log line ever holds one: errors name the object, never the URL.

use std::io::Read;
use std::time::Duration;

use rusty_s3::S3Action;

use crate::cache::remote::RemoteError;

/// How long a signed URL stays good: longer than any one request.
pub const SIGN_FOR: Duration = Duration::from_secs(3600);
/// Tries of one request that failed on the way (a refused connection, a reset,
/// a timeout, a 429 or 5xx), 0.2 s doubling between them.
pub const TRIES: u32 = 3;

/// What goes in a request's body.
pub enum Send<'a> {
    Empty,
    Bytes(&'a [u8]),
    /// `len` bytes read from the reader.
    Reader(&'a mut dyn Read, u64),
}

/// The HTTP client: no redirects (a signed request goes only where it was
/// signed for), no status taken as an error (every status is looked at here),
/// and a stalled connection given up after a minute of silence.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_connect(Some(Duration::from_secs(10)))
        .timeout_per_read(Some(Duration::from_secs(60)))
        .timeout_per_write(Some(Duration::from_secs(60)))
        .user_agent(concat!("orchestrate/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

/// Send `action` signed, with `headers` (every one of them signed too) and
/// `body`; `what` names it in errors.
pub fn send<'a, A: S3Action<'a>>(
    agent: &ureq::Agent,
    action: &A,
    headers: &[(&str, &str)],
    body: Send<'_>,
    what: &str,
) -> Result<ureq::http::Response<ureq::Body>, RemoteError> {
    let url = action.sign(SIGN_FOR).to_string();
    let method = A::METHOD.to_str();
    let res = match method {
        "GET" => with_headers(agent.get(url), headers).call(),
        "HEAD" => with_headers(agent.head(url), headers).call(),
        "DELETE" => with_headers(agent.delete(url), headers).call(),
        m => {
            let b = if m == "POST" {
                agent.post(url)
            } else {
                agent.put(url)
            };
            let b = with_headers(b, headers);
            match body {
                Send::Empty => b.send_empty(),
                Send::Bytes(bytes) => b.send(bytes),
                Send::Reader(r, len) => b
                    .header("content-length", len.to_string())
                    .send(ureq::SendBody::from_reader(r)),
            }
        }
    };
    res.map_err(|e| RemoteError::io(what.to_string(), std::io::Error::other(scrub(e))))
}

fn with_headers<B>(
    mut b: ureq::RequestBuilder<B>,
    headers: &[(&str, &str)],
) -> ureq::RequestBuilder<B> {
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b
}

/// ureq's error in words, without any URL it may hold.
fn scrub(e: ureq::Error) -> String {
    match e {
        ureq::Error::BadUri(_) => "the endpoint is not a usable URL".to_string(),
        ureq::Error::Io(io) => io.to_string(),
        other => {
            let s = other.to_string();
            match s.find("http") {
                Some(i) if s[i..].contains("X-Amz-") => s[..i].to_string(),
                _ => s,
            }
        }
    }
}

/// Whether a status is worth another try: the server's trouble, or its asking
/// to slow down (S3 says 503 SlowDown; some compatible stores say 429).
pub fn transient(status: u16) -> bool {
    matches!(status, 429 | 500 | 502 | 503 | 504)
}

/// `op` until it succeeds, fails for good, or has been tried `TRIES` times; each
/// retry says why. `op` answers `Err(Ok(e))` for a failure worth retrying.
pub fn retry<T>(
    what: &str,
    mut op: impl FnMut() -> Result<T, Result<RemoteError, RemoteError>>,
) -> Result<T, RemoteError> {
    let mut wait = Duration::from_millis(200);
    for n in 1..=TRIES {
        match op() {
            Ok(v) => return Ok(v),
            Err(Err(fatal)) => return Err(fatal),
            Err(Ok(e)) if n == TRIES => return Err(e),
            Err(Ok(e)) => {
                tracing::warn!("S3 {what}: try {n} of {TRIES} failed ({e}); trying again");
                std::thread::sleep(wait);
                wait *= 2;
            }
        }
    }
    Err(RemoteError::Refused(format!("S3 {what}: no tries")))
}

/// The error for an unexpected status, with S3's own code when its body says.
pub fn status_error(what: &str, res: &mut ureq::http::Response<ureq::Body>) -> RemoteError {
    let status = res.status().as_u16();
    let body = res
        .body_mut()
        .with_config()
        .limit(64 << 10)
        .read_to_string()
        .unwrap_or_default();
    let code = xml_field(&body, "Code");
    let msg = xml_field(&body, "Message");
    let detail = match (code, msg) {
        (Some(c), Some(m)) => format!(": {c}: {m}"),
        (Some(c), None) => format!(": {c}"),
        _ => String::new(),
    };
    RemoteError::Refused(format!("S3 {what}: HTTP {status}{detail}"))
}

/// The text of the first `<name>` element of a small XML body.
pub fn xml_field(body: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = body.find(&open)? + open.len();
    let end = body[start..].find(&format!("</{name}>"))? + start;
    Some(
        body[start..end]
            .chars()
            .filter(|c| !c.is_control())
            .take(300)
            .collect(),
    )
}
