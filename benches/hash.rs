//! Hashing throughput: one ~1 GiB file, two at once, and coreutils `sha256sum` on
//! the same file for comparison. Page cache warm (each file hashed once before
//! timing), best of 3. Run: `cargo bench --bench hash` (HASH_BENCH_MIB to resize).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use orchestrate::digest::{sha256_file, sha256_files};

fn make_file(path: &Path, mib: usize, seed: u64) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create bench file"));
    let mut s = seed | 1;
    let mut block = vec![0u8; 1 << 20];
    for _ in 0..mib {
        for chunk in block.chunks_mut(8) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            chunk.copy_from_slice(&s.to_le_bytes());
        }
        f.write_all(&block).expect("write bench file");
    }
    f.flush().expect("flush bench file");
}

fn best_of_3(mut f: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let mib: usize = std::env::var("HASH_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let dir = tempfile::tempdir().expect("temp dir");
    let a: PathBuf = dir.path().join("a.bin");
    let b: PathBuf = dir.path().join("b.bin");
    make_file(&a, mib, 1);
    make_file(&b, mib, 2);
    let bytes = (mib << 20) as f64;
    let cpu_sha = std::fs::read_to_string("/proc/cpuinfo")
        .map(|c| c.contains(" sha_ni"))
        .unwrap_or(false);
    println!(
        "hash bench: 2 files x {mib} MiB in {}, CPU sha_ni: {cpu_sha}",
        dir.path().display()
    );

    // Warm the page cache (and check the two paths agree).
    let da = sha256_file(&a).expect("hash a");
    let db = sha256_file(&b).expect("hash b");

    let t1 = best_of_3(|| {
        assert_eq!(sha256_file(&a).expect("hash a"), da);
    });
    println!(
        "sha256_file, one file:         {:6.2} GB/s ({t1:.3} s)",
        bytes / t1 / 1e9
    );

    let pair = [a.clone(), b.clone()];
    let t2 = best_of_3(|| {
        let r = sha256_files(&pair);
        assert_eq!(r[0].as_ref().expect("hash a"), &da);
        assert_eq!(r[1].as_ref().expect("hash b"), &db);
    });
    println!(
        "sha256_files, two in parallel: {:6.2} GB/s ({t2:.3} s)",
        2.0 * bytes / t2 / 1e9
    );

    // Ceiling: SHA-256 over bytes already in memory (no read, no copy).
    let mem = vec![0x5au8; 256 << 20];
    let tm = best_of_3(|| {
        std::hint::black_box(orchestrate::digest::sha256_bytes(std::hint::black_box(
            &mem,
        )));
    });
    println!(
        "sha256_bytes, in memory:       {:6.2} GB/s (ceiling, 256 MiB)",
        mem.len() as f64 / tm / 1e9
    );
    drop(mem);

    let ts = best_of_3(|| {
        let out = Command::new("sha256sum")
            .arg(&a)
            .output()
            .expect("run sha256sum");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with(&da.hex()), "sha256sum disagrees: {text}");
    });
    println!(
        "coreutils sha256sum, one file: {:6.2} GB/s ({ts:.3} s)",
        bytes / ts / 1e9
    );
}
