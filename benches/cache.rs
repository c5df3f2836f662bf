//! What reuse costs. `cargo bench --bench cache`.
//!
//! 1. Step cache: a chain of N cached steps, each writing a folder of 8 files
//!    (1 MiB), run once to fill the cache and again to reuse every step. Per reused
//!    step, the time from its start to its end in the journal (lookup, digest
//!    checks, restore by hard link, record): target under 50 ms. The whole second
//!    run per step is shown beside it (it includes the orchestrator's own per-step
//!    work).
//! 2. Pins: a model folder (`ORCHESTRATE_BENCH_MODEL_GIB`, default 1; the issue's
//!    figure is 16) pinned by digest, verified cold (every byte hashed) and again
//!    with the stat cache (nothing changed: no byte read). Target under 50 ms.
//!
//! 3. Restore: a model folder (`ORCHESTRATE_BENCH_RESTORE_GIB`, default 4) stored,
//!    then restored as a reuse does: by reflink where the filesystem has them
//!    (btrfs, xfs: point `ORCHESTRATE_BENCH_DIR` at one), by copy, and by hard link
//!    (`cache_restore = "link"`), with the lookup's blob checks before each.
//! 4. gc: a store of `ORCHESTRATE_BENCH_GC_ENTRIES` entries (default 100 000), listed,
//!    then collected down to half its size by `--max-size` (least recently used
//!    first). Target: under 2 s.
//!
//! Work goes under `ORCHESTRATE_BENCH_DIR` (default: the system temp dir);
//! `ORCHESTRATE_BENCH_CACHE=steps,pins,restore,gc` picks sections.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn chain_plan(n: usize) -> String {
    let mut s = String::from("schema = \"orchestrate/plan/v1\"\nname = \"cache-bench\"\n");
    for i in 0..n {
        let _ = write!(
            s,
            "[steps.s{i}]\nkind = \"compile\"\ncache = true\noutputs = [\"${{out}}/o\"]\n\
             shell = \"mkdir ${{out}}/o && for f in 1 2 3 4 5 6 7 8; do head -c 131072 /dev/urandom > ${{out}}/o/$f; done\"\n"
        );
        if i > 0 {
            let _ = writeln!(s, "needs = [\"s{}\"]", i - 1);
        }
    }
    s
}

fn run(bin: &str, dir: &Path, plan: &Path) -> (f64, std::path::PathBuf) {
    let records = dir.join("records");
    let before: Vec<_> = std::fs::read_dir(&records)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    let t = Instant::now();
    let out = Command::new(bin)
        .arg("run")
        .arg(plan)
        .args(["--progress", "quiet", "--records"])
        .arg(&records)
        .arg("--cache")
        .arg(dir.join("cache"))
        .current_dir(dir)
        .output()
        .expect("run orchestrate");
    let secs = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let new = std::fs::read_dir(&records)
        .expect("records")
        .flatten()
        .map(|e| e.path())
        .find(|p| !before.contains(p))
        .expect("a new record");
    (secs, new)
}

/// Start-to-end times (ms) of the steps the journal says were reused.
fn reused_step_ms(record: &Path) -> Vec<f64> {
    let text = std::fs::read_to_string(record.join("journal.jsonl")).expect("journal");
    let mut started = std::collections::HashMap::new();
    let mut reused = std::collections::HashSet::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("journal line");
        let step = v["step"].as_str().unwrap_or_default().to_string();
        let t = chrono::DateTime::parse_from_rfc3339(v["time"].as_str().unwrap_or_default())
            .map(|t| t.timestamp_nanos_opt().unwrap_or(0) as f64 / 1e6);
        match v["event"].as_str() {
            Some("step_started") => {
                started.insert(step, t.unwrap_or(0.0));
            }
            Some("step_cache") if v["cache"]["status"] == "reused" => {
                reused.insert(step);
            }
            Some("step_ended") if reused.contains(&step) => {
                if let (Some(s), Ok(e)) = (started.get(&step), t) {
                    out.push(e - s);
                }
            }
            _ => {}
        }
    }
    out
}

fn stats(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

fn step_cache(base: &Path, bin: &str) {
    println!("step cache: a chain of cached steps, each a folder of 8 files (1 MiB)");
    println!(
        "{:>6} {:>10} {:>10} {:>16} {:>16}",
        "steps", "fill s", "reuse s", "reuse run ms/step", "step ms min/med/max"
    );
    for n in [50usize, 200] {
        let dir = tempfile::tempdir_in(base).expect("tempdir");
        let plan = dir.path().join("plan.toml");
        std::fs::write(&plan, chain_plan(n)).expect("plan");
        let (fill, _) = run(bin, dir.path(), &plan);
        let (reuse, rec) = run(bin, dir.path(), &plan);
        let mut ms = reused_step_ms(&rec);
        assert_eq!(ms.len(), n, "every step is reused");
        let (lo, med, hi) = stats(&mut ms);
        println!(
            "{n:>6} {fill:>10.2} {reuse:>10.2} {:>16.2} {:>16}",
            reuse * 1000.0 / n as f64,
            format!("{lo:.2}/{med:.2}/{hi:.2}")
        );
    }
}

fn pins(base: &Path) {
    let gib: u64 = std::env::var("ORCHESTRATE_BENCH_MODEL_GIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let dir = tempfile::tempdir_in(base).expect("tempdir");
    let model = dir.path().join("model");
    std::fs::create_dir(&model).expect("model dir");
    // Shards of at most 2 GiB, as checkpoints are written, and the small files.
    let shards = gib.div_ceil(2).max(1);
    let per = (gib << 30) / shards;
    let chunk = vec![0x5au8; 1 << 20];
    for s in 0..shards {
        let mut f =
            std::fs::File::create(model.join(format!("model-{s:05}.safetensors"))).expect("shard");
        let mut left = per;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n]).expect("write");
            left -= n as u64;
        }
    }
    for name in ["config.json", "tokenizer.json", "generation_config.json"] {
        std::fs::write(model.join(name), format!("{{\"name\": \"{name}\"}}")).expect("small file");
    }
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        "schema = \"orchestrate/plan/v1\"\nname = \"pins-bench\"\n[pins.model.m]\npath = \"model\"\n\
         [steps.a]\nrun = [\"true\"]\n",
    )
    .expect("plan");
    let plan = orchestrate::plan::load(&plan).expect("load plan");
    // Past the racy window: the first digests are trusted on the next run.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let cache_dir = dir.path().join("cache");
    let verify = || {
        let stat = orchestrate::digest::stat::StatCache::install_at(&cache_dir);
        let t = Instant::now();
        let r = orchestrate::pins::verify(&plan.pins, &plan.dir);
        let secs = t.elapsed().as_secs_f64();
        stat.save().expect("save the stat cache");
        assert!(!r.has_drift());
        (secs, stat.counts())
    };
    let (cold, c1) = verify();
    let (warm, c2) = verify();
    let (warm2, _) = verify();
    println!(
        "\npins: a {gib} GiB model folder ({} files) pinned by digest",
        shards + 3
    );
    println!(
        "  first run {cold:.2} s ({:.2} GiB/s, {} hashed); unchanged: {:.2} ms and {:.2} ms ({} from the stat cache, {} hashed)",
        gib as f64 / cold,
        c1.hashed,
        warm * 1000.0,
        warm2 * 1000.0,
        c2.hits,
        c2.hashed
    );
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn restore(base: &Path) {
    use orchestrate::cache::{Cache, Lookup, Preimage, Target};
    let gib = env_num("ORCHESTRATE_BENCH_RESTORE_GIB", 4);
    let dir = tempfile::tempdir_in(base).expect("tempdir");
    let model = dir.path().join("made/model");
    std::fs::create_dir_all(&model).expect("model dir");
    let shards = gib.div_ceil(2).max(1);
    let per = (gib << 30) / shards;
    let mut chunk = vec![0u8; 1 << 20];
    for s in 0..shards {
        let mut f =
            std::fs::File::create(model.join(format!("model-{s:05}.safetensors"))).expect("shard");
        let mut left = per;
        let mut i = 0u64;
        while left > 0 {
            // Distinct bytes per MiB: nothing a filesystem could deduplicate.
            chunk[..8].copy_from_slice(&(s * 1_000_000 + i).to_le_bytes());
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n]).expect("write");
            left -= n as u64;
            i += 1;
        }
        f.sync_all().expect("sync");
    }
    let (digest, _) = orchestrate::digest::sha256_dir(&model).expect("hash");
    let cache = Cache::open(&dir.path().join("cache")).expect("cache");
    let written = vec!["${work}/model".to_string()];
    let pre = Preimage {
        schema: "bench".into(),
        outputs: written.clone(),
        ..Preimage::default()
    };
    let key = pre.key();
    let t = Instant::now();
    cache
        .store(
            &key,
            &pre,
            ("bench", "compile", "run", 1),
            &[(written[0].clone(), model.clone(), digest.hex())],
        )
        .expect("store");
    println!(
        "
restore: a {gib} GiB model folder ({shards} files); stored in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    shared(dir.path(), &cache, &key, &pre, &written, gib);
    for (n, link) in [(0, false), (1, true)] {
        let work = dir.path().join(format!("work{n}"));
        std::fs::create_dir_all(&work).expect("work");
        let t = Instant::now();
        let Lookup::Hit(entry) = cache.lookup(&key, &written) else {
            panic!("the entry is there");
        };
        let looked = t.elapsed().as_secs_f64();
        let target = Target {
            root: work.clone(),
            rel: "model".into(),
        };
        let mode = cache.restore(&entry, &[target], link).expect("restore");
        let secs = t.elapsed().as_secs_f64();
        println!(
            "  {:<9} {:>8.3} s ({:.1} GiB/s; lookup and blob checks {:.1} ms){}",
            mode.as_str(),
            secs,
            gib as f64 / secs,
            looked * 1000.0,
            if link {
                "  [cache_restore = \"link\"]"
            } else {
                ""
            }
        );
    }
}

/// The stored model pushed to a shared folder on the same disk, and to moto's S3
/// server on loopback where `moto_server` is installed, and pulled from each into
/// a fresh cache (every blob hashed on the way in); against `cp -r` of the folder
/// and `aws s3 cp --recursive` up and down where `aws` is installed.
fn shared(
    dir: &Path,
    cache: &orchestrate::cache::Cache,
    key: &str,
    pre: &orchestrate::cache::Preimage,
    written: &[String],
    gib: u64,
) {
    use orchestrate::cache::remote::SharedFolder;
    let folder = SharedFolder::open(&dir.join("shared")).expect("shared folder");
    let (push_s, pull_s) = round_trip(dir, "cache2", cache, &folder, key, pre, written);
    let t = Instant::now();
    let cp = Command::new("cp")
        .args(["-r", "--reflink=never"])
        .arg(dir.join("made/model"))
        .arg(dir.join("cp-copy"))
        .status()
        .expect("cp");
    assert!(cp.success());
    let sync = Command::new("sync").status();
    let cp_s = t.elapsed().as_secs_f64();
    assert!(sync.is_ok());
    let rate = |s: f64| gib as f64 / s;
    println!(
        "  shared folder: push {push_s:.2} s ({:.2} GiB/s), pull into a fresh cache {pull_s:.2} s ({:.2} GiB/s, hashed on the way in); cp -r {cp_s:.2} s ({:.2} GiB/s)",
        rate(push_s),
        rate(pull_s),
        rate(cp_s)
    );
    let _ = std::fs::remove_dir_all(dir.join("cp-copy"));
    let Some(moto) = Moto::start(dir) else {
        println!("  S3: moto_server is not installed (pip install 'moto[server]'), skipped");
        return;
    };
    let url = format!("s3://bench/orch?endpoint=http://127.0.0.1:{}", moto.port);
    let store = orchestrate::cache::remote::s3::S3Store::open_with(&url, &moto_env).expect("s3");
    let (push_s, pull_s) = round_trip(dir, "cache3", cache, &store, key, pre, written);
    print!(
        "  S3 (moto on loopback): push {push_s:.2} s ({:.2} GiB/s), pull into a fresh cache {pull_s:.2} s ({:.2} GiB/s)",
        rate(push_s),
        rate(pull_s)
    );
    match aws_cp(dir, moto.port) {
        Some((up, down)) => println!(
            "; aws s3 cp --recursive up {up:.2} s ({:.2} GiB/s), down {down:.2} s ({:.2} GiB/s)",
            rate(up),
            rate(down)
        ),
        None => println!("; aws (the AWS CLI) not installed, no yardstick"),
    }
}

/// Push the stored entry to `remote`, then pull it into a fresh cache: the seconds each took.
fn round_trip(
    dir: &Path,
    fresh: &str,
    cache: &orchestrate::cache::Cache,
    remote: &dyn orchestrate::cache::remote::Remote,
    key: &str,
    pre: &orchestrate::cache::Preimage,
    written: &[String],
) -> (f64, f64) {
    use orchestrate::cache::remote::{pull, push, Pulled, Trust, Writer};
    use orchestrate::cache::{Cache, Lookup};
    let Lookup::Hit(entry) = cache.lookup(key, written) else {
        panic!("the entry is there");
    };
    let sign = orchestrate::evidence::dsse::SigningKey::from_bytes(&[3; 32]);
    let trust = Trust::default().with("bench", sign.verifying_key());
    let writer = Writer {
        user: "bench".into(),
        host: "bench".into(),
        run_id: "run".into(),
    };
    let t = Instant::now();
    let pushed = push(cache, remote, &trust, &sign, writer, &entry, pre).expect("push");
    let push_s = t.elapsed().as_secs_f64();
    assert!(pushed.wrote);
    let other = Cache::open(&dir.join(fresh)).expect("cache");
    let t = Instant::now();
    let pulled = pull(&other, remote, &trust, key, written);
    let pull_s = t.elapsed().as_secs_f64();
    assert!(matches!(pulled, Pulled::Hit { .. }), "{pulled:?}");
    let _ = std::fs::remove_dir_all(dir.join(fresh));
    (push_s, pull_s)
}

/// moto's S3 server on a free loopback port, with bucket `bench`; stopped on drop.
struct Moto {
    child: std::process::Child,
    port: u16,
}

impl Moto {
    fn start(dir: &Path) -> Option<Moto> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a port")
            .port();
        let log = std::fs::File::create(dir.join("moto.log")).expect("log");
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .ok()?;
        let m = Moto { child, port };
        let endpoint = format!("http://127.0.0.1:{port}");
        for _ in 0..300 {
            if ureq::put(&format!("{endpoint}/bench")).send_empty().is_ok() {
                return Some(m);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("moto_server did not answer in 30 s");
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_env(k: &str) -> Option<String> {
    match k {
        "AWS_ACCESS_KEY_ID" => Some("AKIABENCH".into()),
        "AWS_SECRET_ACCESS_KEY" => Some("bench-secret".into()),
        _ => None,
    }
}

/// `aws s3 cp --recursive` of the model folder up to moto and back down: seconds each.
fn aws_cp(dir: &Path, port: u16) -> Option<(f64, f64)> {
    let endpoint = format!("http://127.0.0.1:{port}");
    let aws = |args: &[&str]| {
        let t = Instant::now();
        let ok = Command::new("aws")
            .args(args)
            .args(["--endpoint-url", &endpoint, "--only-show-errors"])
            .env("AWS_ACCESS_KEY_ID", "AKIABENCH")
            .env("AWS_SECRET_ACCESS_KEY", "bench-secret")
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .status()
            .ok()?
            .success();
        ok.then(|| t.elapsed().as_secs_f64())
    };
    let model = dir.join("made/model").display().to_string();
    let down = dir.join("aws-copy").display().to_string();
    let up = aws(&["s3", "cp", "--recursive", &model, "s3://bench/aws/"])?;
    let down_s = aws(&["s3", "cp", "--recursive", "s3://bench/aws/", &down])?;
    let _ = std::fs::remove_dir_all(&down);
    Some((up, down_s))
}

fn gc_bench(base: &Path) {
    use orchestrate::cache::{admin, Cache, Entry};
    let n = env_num("ORCHESTRATE_BENCH_GC_ENTRIES", 100_000) as usize;
    let dir = tempfile::tempdir_in(base).expect("tempdir");
    let root = dir.path().join("cache");
    let cache = Cache::open(&root).expect("cache");
    // A store as runs leave it: each entry one output of two files, blobs shared
    // between neighbours; written directly (storing through the API syncs each).
    let blobs = n / 2 + 1;
    let t = Instant::now();
    for b in 0..blobs {
        let hex = orchestrate::digest::sha256_bytes(&b.to_le_bytes()).hex();
        let d = root.join("blobs/sha256").join(&hex[..2]);
        std::fs::create_dir_all(&d).expect("blob dir");
        std::fs::write(d.join(&hex), vec![0u8; 1024]).expect("blob");
    }
    for i in 0..n {
        let key = orchestrate::digest::sha256_bytes(format!("entry {i}").as_bytes()).hex();
        let file = |b: usize| orchestrate::cache::store::EntryFile {
            rel: format!("f{b}"),
            sha256: orchestrate::digest::sha256_bytes(&b.to_le_bytes()).hex(),
            size: 1024,
            exec: false,
            link: None,
            blob_mtime_ns: 0,
            blob_ctime_ns: 0,
            blob_ino: 0,
        };
        let e = Entry {
            key: key.clone(),
            step: format!("s{i}"),
            plan: "bench".into(),
            run_id: "run".into(),
            attempt: 1,
            created: "2026-12-01T00:00:00Z".into(),
            outputs: vec![orchestrate::cache::store::EntryOutput {
                path: "${out}/o".into(),
                kind: "dir".into(),
                sha256: key.clone(),
                bytes: 2048,
                files: vec![file(i / 2), file((i / 2 + 1) % blobs)],
            }],
            pulled_from: None,
        };
        let d = root.join("entries").join(&key[..2]).join(&key);
        std::fs::create_dir_all(&d).expect("entry dir");
        std::fs::write(d.join("entry.json"), serde_json::to_vec(&e).expect("json")).expect("entry");
        std::fs::write(d.join("used"), b"").expect("used");
    }
    println!(
        "
gc: {n} entries over {blobs} blobs, made in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let listed = admin::list(&cache).len();
    println!(
        "  list: {listed} entries in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let none = admin::gc(&cache, Some(u64::MAX), None).expect("gc");
    println!(
        "  gc with nothing to collect ({listed} entries): {:.2} s, the store held alone {:.0} ms",
        t.elapsed().as_secs_f64(),
        none.locked_ms
    );
    let t = Instant::now();
    let done = admin::gc(&cache, Some((blobs as u64 * 1024) / 2), None).expect("gc");
    println!(
        "  gc --max-size (half): {:.2} s, removed {} entries and {} blobs; the store held alone {:.0} ms",
        t.elapsed().as_secs_f64(),
        done.entries,
        done.blobs,
        done.locked_ms
    );
}

fn main() {
    let base = std::env::var_os("ORCHESTRATE_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let bin = env!("CARGO_BIN_EXE_orchestrate");
    // `ORCHESTRATE_BENCH_CACHE=gc,restore` runs some sections only.
    let only = std::env::var("ORCHESTRATE_BENCH_CACHE").unwrap_or_default();
    let on = |s: &str| only.is_empty() || only.split(',').any(|o| o == s);
    if on("steps") {
        step_cache(&base, bin);
    }
    if on("pins") {
        pins(&base);
    }
    if on("restore") {
        restore(&base);
    }
    if on("gc") {
        gc_bench(&base);
    }
}
