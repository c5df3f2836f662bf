//! Deterministic parallel reductions over tensor views.
//!
//! Work is cut into fixed chunks of [`CHUNK`] elements whatever the thread count;
//! rayon computes one partial per chunk and the partials are combined sequentially,
//! in chunk order, so a result is bit-for-bit the same on 1 thread or 64.
//! Inside a chunk, elements are decoded a [`BLOCK`] at a time into stack buffers.

use rayon::prelude::*;

use super::tensor::TensorView;

/// Elements per parallel chunk.
pub const CHUNK: usize = 1 << 16;
/// Elements decoded at a time inside a chunk.
pub const BLOCK: usize = 1024;

fn chunk_ranges(len: usize) -> impl IndexedParallelIterator<Item = (usize, usize)> {
    let n = len.div_ceil(CHUNK);
    (0..n).into_par_iter().map(move |c| {
        let s = c * CHUNK;
        (s, (s + CHUNK).min(len))
    })
}

/// Folds pairs of elements of `a` and `b` (same element count) decoded to f64.
/// With `storage` true both are read in storage order (valid when both have the same
/// storage order), else in logical C order. `f` receives the first element index of
/// the block and the two decoded blocks. Returns per-chunk partials in order.
pub fn pair_f64<T, F>(a: &TensorView, b: &TensorView, storage: bool, f: F) -> Vec<T>
where
    T: Default + Send,
    F: Fn(&mut T, usize, &[f64], &[f64]) + Sync,
{
    let len = a.len().min(b.len());
    chunk_ranges(len)
        .map(|(s, e)| {
            let mut acc = T::default();
            let mut xa = [0f64; BLOCK];
            let mut xb = [0f64; BLOCK];
            let mut i = s;
            while i < e {
                let n = (e - i).min(BLOCK);
                if storage {
                    a.read_f64(i, &mut xa[..n]);
                    b.read_f64(i, &mut xb[..n]);
                } else {
                    a.read_f64_logical(i, &mut xa[..n]);
                    b.read_f64_logical(i, &mut xb[..n]);
                }
                f(&mut acc, i, &xa[..n], &xb[..n]);
                i += n;
            }
            acc
        })
        .collect()
}

/// Folds the elements of one tensor decoded to f64, in storage order.
pub fn single_f64<T, F>(a: &TensorView, f: F) -> Vec<T>
where
    T: Default + Send,
    F: Fn(&mut T, usize, &[f64]) + Sync,
{
    chunk_ranges(a.len())
        .map(|(s, e)| {
            let mut acc = T::default();
            let mut xa = [0f64; BLOCK];
            let mut i = s;
            while i < e {
                let n = (e - i).min(BLOCK);
                a.read_f64(i, &mut xa[..n]);
                f(&mut acc, i, &xa[..n]);
                i += n;
            }
            acc
        })
        .collect()
}

/// Folds pairs of element bit patterns in logical order (for layouts that differ).
pub fn pair_bits<T, F>(a: &TensorView, b: &TensorView, f: F) -> Vec<T>
where
    T: Default + Send,
    F: Fn(&mut T, usize, &[u64], &[u64]) + Sync,
{
    let len = a.len().min(b.len());
    chunk_ranges(len)
        .map(|(s, e)| {
            let mut acc = T::default();
            let mut xa = [0u64; BLOCK];
            let mut xb = [0u64; BLOCK];
            let mut i = s;
            while i < e {
                let n = (e - i).min(BLOCK);
                a.read_bits_logical(i, &mut xa[..n]);
                b.read_bits_logical(i, &mut xb[..n]);
                f(&mut acc, i, &xa[..n], &xb[..n]);
                i += n;
            }
            acc
        })
        .collect()
}

/// Compares the raw bytes of two same-layout tensors chunk by chunk. Returns, per
/// chunk, the number of differing elements and the first differing element index.
pub fn byte_diff(a: &TensorView, b: &TensorView) -> Vec<(u64, Option<usize>)> {
    let size = a.dtype().size();
    let (da, db) = (a.data(), b.data());
    let len = a.len().min(b.len());
    chunk_ranges(len)
        .map(|(s, e)| {
            let (ca, cb) = (
                da.get(s * size..e * size).unwrap_or(&[]),
                db.get(s * size..e * size).unwrap_or(&[]),
            );
            if ca == cb {
                return (0, None);
            }
            let mut count = 0u64;
            let mut first = None;
            for (k, (x, y)) in ca.chunks_exact(size).zip(cb.chunks_exact(size)).enumerate() {
                if x != y {
                    count += 1;
                    first.get_or_insert(s + k);
                }
            }
            (count, first)
        })
        .collect()
}

/// Lanes of independent accumulators: wide enough that the compiler keeps them in
/// vector registers and needs no reassociation to vectorise.
const LANES: usize = 16;

/// Sums of squared differences and of squared `b`, in f64, over one chunk.
#[inline(always)]
fn sq_sums_chunk(a: &[f32], b: &[f32]) -> (f64, f64) {
    let mut d = [0f64; LANES];
    let mut e = [0f64; LANES];
    let ca = a.chunks_exact(LANES);
    let cb = b.chunks_exact(LANES);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (xa, xb) in ca.zip(cb) {
        for l in 0..LANES {
            let x = f64::from(xa[l]);
            let y = f64::from(xb[l]);
            let t = x - y;
            d[l] += t * t;
            e[l] += y * y;
        }
    }
    for (l, (&x, &y)) in ra.iter().zip(rb).enumerate() {
        let (x, y) = (f64::from(x), f64::from(y));
        d[l] += (x - y) * (x - y);
        e[l] += y * y;
    }
    (d.iter().sum(), e.iter().sum())
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn sq_sums_chunk_avx2(a: &[f32], b: &[f32]) -> (f64, f64) {
    // Same code, compiled with wider vectors; results are identical because each
    // lane's sum is formed in the same order (FMA is not used for separate mul+add:
    // Rust never contracts `t * t + d` into an FMA on its own).
    sq_sums_chunk(a, b)
}

fn sq_sums_dispatch(a: &[f32], b: &[f32]) -> (f64, f64) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports the features the function was compiled for.
            return unsafe { sq_sums_chunk_avx2(a, b) };
        }
    }
    sq_sums_chunk(a, b)
}

/// `(sum((a-b)^2), sum(b^2))` over two f32 slices of equal length, in f64.
pub fn sq_sums_f32(a: &[f32], b: &[f32]) -> (f64, f64) {
    let parts: Vec<(f64, f64)> = a
        .par_chunks(CHUNK)
        .zip(b.par_chunks(CHUNK))
        .map(|(x, y)| sq_sums_dispatch(x, y))
        .collect();
    parts
        .into_iter()
        .fold((0.0, 0.0), |(d, e), (x, y)| (d + x, e + y))
}
