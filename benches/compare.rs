//! rel_rms over two 512 MiB f32 `.npy` files: the Rust kernel against numpy's
//! `np.sqrt(np.mean((a-b)**2)/np.mean(b**2))` on `np.load(path, mmap_mode='r')`
//! arrays, on the same files, page cache warm. Prints GB/s (input bytes of both
//! arrays per second) and the ratio. Run with `cargo bench --bench compare`.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use orchestrate::compare::{open, rel_rms, OpenOptions, TensorRef};

const ELEMS: usize = 512 * 1024 * 1024 / 4;

fn write_npy(path: &Path, seed: u64, noise_of: Option<u64>) -> std::io::Result<()> {
    let header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({ELEMS},), }}");
    let mut h = header;
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    w.write_all(b"\x93NUMPY\x01\x00")?;
    w.write_all(&(h.len() as u16).to_le_bytes())?;
    w.write_all(h.as_bytes())?;
    // `b` is `a` plus small noise: same base sequence, second generator for noise.
    let mut base = seed;
    let mut noise = noise_of.unwrap_or(1);
    let step = |x: &mut u64| {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        (*x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let mut buf = Vec::with_capacity(1 << 20);
    for i in 0..ELEMS {
        let mut v = step(&mut base);
        if noise_of.is_some() {
            v += step(&mut noise) * 1e-3;
        }
        buf.extend_from_slice(&v.to_le_bytes());
        if buf.len() >= 1 << 20 || i + 1 == ELEMS {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    w.flush()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let (pa, pb) = (dir.path().join("a.npy"), dir.path().join("b.npy"));
    write_npy(&pa, 0x9e3779b97f4a7c15, Some(0x2545f4914f6cdd1d))?;
    write_npy(&pb, 0x9e3779b97f4a7c15, None)?;
    let bytes = 2.0 * (ELEMS * 4) as f64;
    let opts = OpenOptions::default();
    let ra = TensorRef::parse(pa.to_str().ok_or("path")?);
    let rb = TensorRef::parse(pb.to_str().ok_or("path")?);

    // Warm the page cache.
    for p in [&pa, &pb] {
        let _ = std::fs::read(p)?.len();
    }

    let threads = rayon::current_num_threads();
    let mut open_and_run = f64::INFINITY;
    let mut value = 0.0;
    for _ in 0..3 {
        let t = Instant::now();
        let (a, b) = (open(&ra, &opts)?, open(&rb, &opts)?);
        value = rel_rms(&a, &b)?.value;
        open_and_run = open_and_run.min(t.elapsed().as_secs_f64());
    }
    let (a, b) = (open(&ra, &opts)?, open(&rb, &opts)?);
    let _ = rel_rms(&a, &b)?;
    let mut mapped = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        value = rel_rms(&a, &b)?.value;
        mapped = mapped.min(t.elapsed().as_secs_f64());
    }

    let script = format!(
        r#"
import numpy as np, time
a = np.load({pa:?}, mmap_mode='r'); b = np.load({pb:?}, mmap_mode='r')
best = float('inf')
for _ in range(3):
    t = time.perf_counter()
    v = np.sqrt(np.mean((a-b)**2)/np.mean(b**2))
    best = min(best, time.perf_counter() - t)
print(best, float(v))
"#,
        pa = pa.display().to_string(),
        pb = pb.display().to_string(),
    );
    let out = Command::new("python3").arg("-c").arg(&script).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace();
    let np_time: Option<f64> = it.next().and_then(|s| s.parse().ok());
    let np_value: Option<f64> = it.next().and_then(|s| s.parse().ok());

    println!("rel_rms over 2 x 512 MiB f32 .npy (page cache warm), rayon threads: {threads}");
    println!("  value: rust {value:.9e}, numpy {np_value:?}");
    println!(
        "  rust open+rel_rms (best of 3): {:.3} s, {:.2} GB/s",
        open_and_run,
        bytes / open_and_run / 1e9
    );
    println!(
        "  rust rel_rms, already mapped (best of 3): {:.3} s, {:.2} GB/s",
        mapped,
        bytes / mapped / 1e9
    );
    match np_time {
        Some(t) => {
            println!(
                "  numpy expression (best of 3): {:.3} s, {:.2} GB/s",
                t,
                bytes / t / 1e9
            );
            println!(
                "  ratio rust/numpy: {:.2}x (open+run), {:.2}x (mapped)",
                t / open_and_run,
                t / mapped
            );
        }
        None => println!(
            "  numpy: not measured ({})",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
    Ok(())
}
