//! The shared cache on an S3-compatible server (moto's, from PyPI, on loopback)
//! through the real binary: a second "host" reuses CI's compile from the bucket
//! and says so in its record, which `verify` holds; only what a trusted key signed
//! is reused; a blob tampered in the bucket is refused, removed and rebuilt;
//! concurrent writers of one entry leave exactly one; a server that stops
//! mid-upload leaves no object; and the credentials are never written anywhere.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use orchestrate::cache::remote::s3::S3Store;
use orchestrate::cache::remote::Remote;

use crate::support::{
    assert_verifies, cli, record_dirs, record_json, record_step, shown, skip_or_fail, Need,
};

const KEY_ID: &str = "AKIAORCHTESTKEY00001";
const SECRET: &str = "orch-test-secret-5fd0c1e9a7b24d3e";
const BUCKET: &str = "team-cache";

/// A moto S3 server of this test's own on a free loopback port, stopped on drop.
struct Moto {
    child: Child,
    port: u16,
}

impl Moto {
    /// `None` (the test skips) when `moto_server` is not installed.
    fn start(log: &Path) -> Option<Moto> {
        for attempt in 1..=3 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .unwrap()
                .port();
            let log_file = std::fs::File::create(log).unwrap();
            let spawned = Command::new("moto_server")
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .stdin(Stdio::null())
                .stdout(log_file.try_clone().unwrap())
                .stderr(log_file)
                .spawn();
            let child = match spawned {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    skip_or_fail(
                        Need::S3,
                        "moto_server is not on PATH (pip install 'moto[server]')",
                    );
                    return None;
                }
                Err(e) => panic!("moto_server: {e}"),
            };
            let mut m = Moto { child, port };
            if m.wait_up() {
                m.create_bucket(BUCKET);
                return Some(m);
            }
            // Another process took the port between our probe and moto's bind.
            eprintln!(
                "moto_server did not come up on port {port} (attempt {attempt}): {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        panic!("moto_server did not start in 3 attempts");
    }

    fn wait_up(&mut self) -> bool {
        let limit = crate::support::patient(Duration::from_secs(30));
        let start = std::time::Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if ureq::get(&format!("{}/moto-api/", self.endpoint()))
                .call()
                .is_ok()
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn create_bucket(&self, name: &str) {
        ureq::put(&format!("{}/{name}", self.endpoint()))
            .send_empty()
            .unwrap();
    }

    /// The remote's URL for `prefix`, reaching the server through `endpoint`.
    fn url(&self, prefix: &str) -> String {
        format!("s3://{BUCKET}/{prefix}?endpoint={}", self.endpoint())
    }

    /// The store as an administrator reaches it, to look at or damage objects.
    fn store(&self, prefix: &str) -> S3Store {
        S3Store::open_with(&self.url(prefix), &aws_env).unwrap()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn aws_env(k: &str) -> Option<String> {
    match k {
        "AWS_ACCESS_KEY_ID" => Some(KEY_ID.into()),
        "AWS_SECRET_ACCESS_KEY" => Some(SECRET.into()),
        _ => None,
    }
}

/// The caller's AWS identity from the environment and nothing else of the
/// machine's (no ~/.aws, no profile or endpoint variables of whoever runs the tests).
fn with_aws(c: &mut Command, home: &Path) {
    for k in [
        "AWS_PROFILE",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_SESSION_TOKEN",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "ORCHESTRATE_CACHE_REMOTE",
    ] {
        c.env_remove(k);
    }
    c.env("AWS_ACCESS_KEY_ID", KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("HOME", home);
}

use crate::cache_shared::{keys, plan_for as plan};

/// Who a run as this process stores entries as (`user@`).
fn me() -> String {
    let uid = nix::unistd::geteuid();
    let user = nix::unistd::User::from_uid(uid).unwrap().unwrap();
    format!("{}@", user.name)
}

/// A host: its own home, cache and records; the plan and keys are shared.
struct Host {
    root: PathBuf,
    /// Run as this (uid, gid) rather than as the test.
    user: Option<(u32, u32)>,
}

impl Host {
    fn new(t: &Path, name: &str) -> Host {
        let root = t.join(name);
        std::fs::create_dir_all(&root).unwrap();
        Host { root, user: None }
    }

    /// A host whose runs are `nobody`'s, where the test is root.
    fn nobody(t: &Path, name: &str) -> Host {
        let mut h = Host::new(t, name);
        if crate::support::is_root() {
            let n = nix::unistd::User::from_name("nobody").unwrap().unwrap();
            let (uid, gid) = (n.uid.as_raw(), n.gid.as_raw());
            std::os::unix::fs::chown(&h.root, Some(uid), Some(gid)).unwrap();
            h.user = Some((uid, gid));
        }
        h
    }

    fn command(&self) -> Command {
        let mut c = cli();
        with_aws(&mut c, &self.root);
        c.current_dir(&self.root);
        if let Some((uid, gid)) = self.user {
            c.uid(uid).gid(gid);
        }
        c
    }

    /// Run `plan` here; the record as JSON, its folder, and what the run printed.
    fn run(&self, plan: &Path, extra: &[&str]) -> (serde_json::Value, PathBuf, Output) {
        let records = self.root.join("records");
        let before = record_dirs(&records);
        let out = self
            .command()
            .arg("run")
            .arg(plan)
            .arg("--records")
            .arg(&records)
            .arg("--cache")
            .arg(self.root.join("cache"))
            .args(["--progress", "plain"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", shown(&out));
        let mut after = record_dirs(&records);
        after.retain(|d| !before.contains(d));
        let dir = after.pop().expect("a record");
        (record_json(&dir), dir, out)
    }

    fn why(&self, plan: &Path) -> Output {
        self.command()
            .arg("why")
            .arg(plan)
            .arg("--cache")
            .arg(self.root.join("cache"))
            .output()
            .unwrap()
    }
}

fn cache_of(rec: &serde_json::Value) -> &serde_json::Value {
    &record_step(rec, "compile")["cache"]
}

fn remote_said(rec: &serde_json::Value) -> String {
    cache_of(rec)["remote"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Every file below `dir`, links not followed.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let ty = e.file_type().unwrap();
        if ty.is_dir() {
            out.extend(files(&p));
        } else if ty.is_file() {
            out.push(p);
        }
    }
    out
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// A writable tree that `nobody` can enter and read (the plan and public keys).
fn shared_tree() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(t.path(), mode).unwrap();
    t
}

#[test]
fn a_second_host_reuses_ci_compile_from_the_bucket_and_no_secret_is_written() {
    let t = shared_tree();
    let Some(moto) = Moto::start(&t.path().join("moto.log")) else {
        return;
    };
    let url = moto.url("orch");
    keys(t.path(), "ci", 7);
    keys(t.path(), "alice", 9);
    let p = t.path().join("plan.toml");
    std::fs::write(&p, plan(&url, &["ci.pub"], "one")).unwrap();
    let ci_key = t.path().join("ci.key").display().to_string();
    let mut said = Vec::new();

    // CI builds and pushes, logging as much as it can.
    let ci = Host::new(t.path(), "ci");
    let (rec, dir, out) = ci.run(&p, &["--sign-key", &ci_key, "-vv"]);
    let pushed = remote_said(&rec);
    assert!(
        pushed.starts_with("pushed to s3://team-cache/orch (1 blobs, 200003 bytes sent)"),
        "{pushed}\n{}",
        shown(&out)
    );
    assert_verifies(&dir);
    said.push(shown(&out));

    // `why` on another host says where it would come from.
    let bob = Host::nobody(t.path(), "bob");
    let why = bob.why(&p);
    let whose = format!("in s3://team-cache/orch signed by ci, stored by {}", me());
    assert!(shown(&why).contains(&whose), "{}", shown(&why));
    said.push(shown(&why));

    // The colleague (nobody, where the test is root) reuses it, with an empty cache.
    let (rec, dir, out) = bob.run(&p, &[]);
    let c = cache_of(&rec);
    assert_eq!(c["status"], "reused", "{c}\n{}", shown(&out));
    let from = &c["reused_from"];
    assert_eq!(from["remote"], "s3://team-cache/orch", "{from}");
    assert_eq!(from["signed_by"], "ci", "{from}");
    assert!(
        from["stored_by"].as_str().unwrap().starts_with(&me()),
        "{from}"
    );
    let work = rec["run"]["options"]["work"].as_str().unwrap();
    let w = std::fs::read(Path::new(work).join("model/w.bin")).unwrap();
    assert_eq!((&w[..3], w.len()), (&b"one"[..], 200_003));
    assert_verifies(&dir);
    said.push(shown(&out));

    // Alice's entry for another value is a miss that says whose it is.
    std::fs::write(&p, plan(&url, &["ci.pub"], "two")).unwrap();
    let alice_key = t.path().join("alice.key").display().to_string();
    let (rec, _, out) = Host::new(t.path(), "alice").run(&p, &["--sign-key", &alice_key]);
    assert!(
        remote_said(&rec).starts_with("pushed to "),
        "{}",
        shown(&out)
    );
    let (rec, _, out) = Host::new(t.path(), "carol").run(&p, &[]);
    let c = cache_of(&rec);
    assert_eq!(c["status"], "stored", "{c}");
    let why = c["why"].to_string();
    assert!(why.contains(&format!("entry signed by {}", me())), "{why}");
    assert!(why.contains("not trusted"), "{why}");
    said.push(shown(&out));

    // The credentials are in no record, journal, cache or log of any host.
    for f in files(t.path()) {
        // The server's own access log names the key id, as any S3 server's does.
        if f.ends_with("moto.log") {
            continue;
        }
        let bytes = std::fs::read(&f).unwrap();
        for s in [SECRET, KEY_ID] {
            assert!(!contains(&bytes, s), "{} holds {s}", f.display());
        }
    }
    for s in said {
        assert!(!s.contains(SECRET) && !s.contains(KEY_ID), "{s}");
    }
}

#[test]
fn a_blob_tampered_in_the_bucket_is_refused_removed_and_rebuilt() {
    let t = shared_tree();
    let Some(moto) = Moto::start(&t.path().join("moto.log")) else {
        return;
    };
    let url = moto.url("orch");
    keys(t.path(), "ci", 7);
    let p = t.path().join("plan.toml");
    std::fs::write(&p, plan(&url, &["ci.pub"], "one")).unwrap();
    let ci_key = t.path().join("ci.key").display().to_string();
    let (rec, _, _) = Host::new(t.path(), "ci").run(&p, &["--sign-key", &ci_key]);
    assert!(remote_said(&rec).starts_with("pushed to "));

    // Someone with write access to the bucket changes one byte of the blob.
    let store = moto.store("orch");
    let blobs: Vec<String> = store
        .objects()
        .unwrap()
        .into_iter()
        .filter(|o| o.starts_with("blobs/sha256/"))
        .collect();
    assert_eq!(blobs.len(), 1, "{blobs:?}");
    let hex = blobs[0].rsplit('/').next().unwrap().to_string();
    let mut bytes = Vec::new();
    store.get_blob(&hex, 200_003, &mut bytes).unwrap();
    bytes[100] = b'X';
    let bad = t.path().join("bad.bin");
    std::fs::write(&bad, &bytes).unwrap();
    let mut f = std::fs::File::open(&bad).unwrap();
    store.put_blob(&hex, &mut f, 200_003).unwrap();

    let (rec, _, out) = Host::new(t.path(), "dave").run(&p, &[]);
    let c = cache_of(&rec);
    assert_eq!(c["status"], "stored", "{c}\n{}", shown(&out));
    let why = c["why"].to_string();
    assert!(
        why.contains("does not match its digest: refused, removed from the remote"),
        "{why}"
    );
    assert!(
        !store.has_blob(&hex, 200_003).unwrap(),
        "the tampered blob is removed"
    );
    let work = rec["run"]["options"]["work"].as_str().unwrap();
    let w = std::fs::read(Path::new(work).join("model/w.bin")).unwrap();
    assert_eq!(
        w[100], 0,
        "the step ran again: nothing of the tampered blob is used"
    );

    // CI's next push puts the blob back; the next colleague reuses it.
    let (rec, _, _) = Host::new(t.path(), "ci2").run(&p, &["--sign-key", &ci_key]);
    assert!(
        remote_said(&rec).starts_with("already in "),
        "{}",
        remote_said(&rec)
    );
    let mut back = Vec::new();
    store.get_blob(&hex, 200_003, &mut back).unwrap();
    assert_eq!(back[100], 0, "the blob is back");
    let (rec, _, _) = Host::new(t.path(), "erin").run(&p, &[]);
    assert_eq!(cache_of(&rec)["status"], "reused");
}

#[test]
fn concurrent_writers_of_one_s3_entry_leave_exactly_one() {
    let t = tempfile::tempdir().unwrap();
    let Some(moto) = Moto::start(&t.path().join("moto.log")) else {
        return;
    };
    crate::cache_shared::one_of_16_writers_wins(Arc::new(moto.store("race")));
}

#[test]
fn two_trusted_writers_with_different_results_are_reported_and_neither_overwritten() {
    let t = tempfile::tempdir().unwrap();
    let Some(moto) = Moto::start(&t.path().join("moto.log")) else {
        return;
    };
    let url = moto.url("nd");
    keys(t.path(), "ci", 7);
    keys(t.path(), "gpu", 8);
    let p = t.path().join("plan.toml");
    let nondeterministic = plan(&url, &["ci.pub", "gpu.pub"], "one")
        .replace("printf '%s' ${params.value}", "date +%N");
    std::fs::write(&p, nondeterministic).unwrap();
    let key = |n: &str| t.path().join(format!("{n}.key")).display().to_string();
    let (rec, _, _) = Host::new(t.path(), "ci").run(&p, &["--sign-key", &key("ci")]);
    assert!(remote_said(&rec).starts_with("pushed to "));
    let (rec, _, _) =
        Host::new(t.path(), "gpu").run(&p, &["--sign-key", &key("gpu"), "--no-cache"]);
    let c = cache_of(&rec);
    assert!(remote_said(&rec).starts_with("pushed to "), "{c}");
    let nd = c["nondeterministic"].to_string();
    assert!(nd.contains("in the entry signed by `ci`"), "{c}");
    let entries: Vec<String> = moto
        .store("nd")
        .objects()
        .unwrap()
        .into_iter()
        .filter(|o| o.starts_with("entries/"))
        .collect();
    assert_eq!(
        entries.len(),
        2,
        "each key keeps its own entry: {entries:?}"
    );
}

/// A TCP proxy to `upstream` that forwards until `cutoff` bytes have gone up,
/// then cuts every connection and refuses new ones: a server that stops mid-upload.
struct Cutoff {
    port: u16,
    cut: Arc<AtomicBool>,
}

impl Cutoff {
    fn start(upstream: u16, cutoff: u64) -> Cutoff {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let flag = cut.clone();
        std::thread::spawn(move || {
            for client in l.incoming().flatten() {
                if flag.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (flag, sent) = (flag.clone(), sent.clone());
                std::thread::spawn(move || pump(client, server, Some((flag, sent, cutoff))));
                std::thread::spawn(move || pump(s2, c2, None));
            }
        });
        Cutoff { port, cut }
    }
}

/// Copy `from` to `to`; counting against `limit` where given, cutting both at it.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    limit: Option<(Arc<AtomicBool>, Arc<AtomicU64>, u64)>,
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some((cut, sent, max)) = &limit {
            if cut.load(Ordering::SeqCst) || sent.fetch_add(n as u64, Ordering::SeqCst) > *max {
                cut.store(true, Ordering::SeqCst);
                break;
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(std::net::Shutdown::Both);
    let _ = to.shutdown(std::net::Shutdown::Both);
}

#[test]
fn a_server_that_stops_mid_upload_leaves_no_object_and_the_run_goes_on() {
    let t = tempfile::tempdir().unwrap();
    let Some(moto) = Moto::start(&t.path().join("moto.log")) else {
        return;
    };
    let proxy = Cutoff::start(moto.port, 20 << 20);
    keys(t.path(), "ci", 7);
    let url = format!("s3://{BUCKET}/cut?endpoint=http://127.0.0.1:{}", proxy.port);
    // 40 MiB: uploaded in parts, several at once.
    let big = plan(&url, &["ci.pub"], "one")
        .replace("head -c 200000 /dev/zero", "head -c 41943040 /dev/urandom");
    let p = t.path().join("plan.toml");
    std::fs::write(&p, big).unwrap();
    let ci_key = t.path().join("ci.key").display().to_string();
    let (rec, dir, out) = Host::new(t.path(), "ci").run(&p, &["--sign-key", &ci_key]);
    assert!(proxy.cut.load(Ordering::SeqCst), "the proxy cut the upload");
    let c = cache_of(&rec);
    assert_eq!(c["status"], "stored", "stored locally all the same: {c}");
    let said = remote_said(&rec);
    assert!(
        said.starts_with("not pushed to s3://team-cache/cut"),
        "{said}\n{}",
        shown(&out)
    );
    assert_verifies(&dir);
    let left = moto.store("cut").objects().unwrap();
    assert!(
        left.is_empty(),
        "nothing half-written is an object: {left:?}"
    );
}

#[test]
fn gc_of_the_bucket_removes_old_entries_and_orphaned_blobs_only() {
    let t = tempfile::tempdir().unwrap();
    let Some(moto) = Moto::start(&t.path().join("moto.log")) else {
        return;
    };
    let home = t.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let store = moto.store("gc");
    crate::cache_shared::collect_round(t.path(), &moto.url("gc"), &store, &|c| with_aws(c, &home));
}

/// A server that answers every request plainly and keeps each request's line
/// and headers as they came on the wire.
fn recording_server() -> (u16, Arc<std::sync::Mutex<Vec<serde_json::Value>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = seen.clone();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            let mut r = std::io::BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            if std::io::BufRead::read_line(&mut r, &mut line).unwrap_or(0) == 0 {
                continue;
            }
            let mut headers = Vec::new();
            let mut len = 0usize;
            loop {
                let mut h = String::new();
                std::io::BufRead::read_line(&mut r, &mut h).unwrap();
                let Some((k, v)) = h.trim_end().split_once(':') else {
                    break;
                };
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap();
                }
                headers.push(vec![k.to_string(), v.trim().to_string()]);
            }
            std::io::copy(&mut (&mut r).take(len as u64), &mut std::io::sink()).unwrap();
            let mut words = line.split_whitespace();
            let (method, target) = (words.next().unwrap(), words.next().unwrap());
            let status = if method == "GET" || method == "HEAD" {
                "404 Not Found"
            } else {
                "200 OK"
            };
            keep.lock().unwrap().push(serde_json::json!({
                "method": method, "target": target, "headers": headers,
            }));
            let mut w = conn;
            let _ = write!(
                w,
                "HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
    });
    (port, seen)
}

#[test]
fn every_request_s_signature_checks_out_with_botocore() {
    let python = std::process::Command::new("python3")
        .args(["-c", "import botocore"])
        .status();
    if !python.is_ok_and(|s| s.success()) {
        skip_or_fail(
            Need::S3,
            "python3 cannot import botocore (pip install 'moto[server]')",
        );
        return;
    }
    let (port, seen) = recording_server();
    let url = format!("s3://{BUCKET}/sig/v1?endpoint=http://127.0.0.1:{port}&region=eu-west-1");
    let store = S3Store::open_with(&url, &aws_env).unwrap();
    let (key, signer) = ("ab".repeat(32), "cd".repeat(32));
    assert!(store.entry(&key, &signer, 100).unwrap().is_none());
    assert!(store.put_entry_if_absent(&key, &signer, b"{}").unwrap());
    store.replace_entry(&key, &signer, b"{}").unwrap();
    assert!(!store.has_blob(&key, 3).unwrap());
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("b"), b"abc").unwrap();
    let mut f = std::fs::File::open(t.path().join("b")).unwrap();
    store.put_blob(&key, &mut f, 3).unwrap();
    store.remove_blob(&key).unwrap();
    let _ = store.signers(&key); // a listing the server answers with nothing
    let requests = serde_json::to_vec(&*seen.lock().unwrap()).unwrap();
    let check = |secret: &str| {
        let mut c = std::process::Command::new("python3")
            .arg(crate::support::project("tests/tools/sigv4_check.py"))
            .args([KEY_ID, secret])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(&requests).unwrap();
        let out = c.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{said}");
        said
    };
    // The checker tells a wrong signature: with another secret, none holds.
    let wrong = check("not-the-secret");
    assert_eq!(
        wrong.lines().filter(|l| l.starts_with("mismatch ")).count(),
        7,
        "{wrong}"
    );
    let said = check(SECRET);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 7, "{said}");
    assert!(lines.iter().all(|l| l.starts_with("ok ")), "{said}");
    for m in ["GET", "PUT", "HEAD", "DELETE"] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("ok {m} "))),
            "{said}"
        );
    }
    // The conditional write signs its If-None-Match: a proxy cannot drop it.
    let seen = seen.lock().unwrap();
    let conditional = seen
        .iter()
        .find(|r| {
            r["headers"]
                .to_string()
                .to_lowercase()
                .contains("if-none-match")
        })
        .expect("a conditional PUT");
    assert!(
        conditional["target"]
            .as_str()
            .unwrap()
            .contains("if-none-match"),
        "{conditional}"
    );
}

#[test]
fn a_blob_over_one_put_goes_in_parts_and_comes_back_whole() {
    let t = tempfile::tempdir().unwrap();
    let Some(moto) = Moto::start(&t.path().join("moto.log")) else {
        return;
    };
    let store = moto.store("parts");
    // 40 MiB: three parts (16, 16 and 8 MiB), each of distinct bytes.
    let bytes: Vec<u8> = (0..40u32 << 20).map(|i| (i / 4096 % 251) as u8).collect();
    let f = t.path().join("big.bin");
    std::fs::write(&f, &bytes).unwrap();
    let hex = orchestrate::digest::sha256_bytes(&bytes).hex();
    let size = bytes.len() as u64;
    store
        .put_blob(&hex, &mut std::fs::File::open(&f).unwrap(), size)
        .unwrap();
    assert!(store.has_blob(&hex, size).unwrap());
    let mut back = Vec::new();
    assert_eq!(store.get_blob(&hex, size, &mut back).unwrap(), size);
    assert!(back == bytes, "the blob comes back as it went");
}
