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

/// Lanes of independent f64 accumulators: lane `l` sums the elements at positions
/// `l mod 16` of a chunk. The AVX2 kernel keeps exactly this lane mapping, so both
/// kernels give bit-identical results.
const LANES: usize = 16;

/// Adds the tail (fewer than [`LANES`] elements) into the lanes, then sums the lanes
/// in order.
fn finish_lanes(d: &mut [f64; LANES], e: &mut [f64; LANES], ra: &[f32], rb: &[f32]) -> (f64, f64) {
    for (l, (&x, &y)) in ra.iter().zip(rb).enumerate() {
        let (x, y) = (f64::from(x), f64::from(y));
        let t = x - y;
        d[l] += t * t;
        e[l] += y * y;
    }
    (d.iter().sum(), e.iter().sum())
}

/// Portable kernel: sums of squared differences and of squared `b`, in f64.
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
    finish_lanes(&mut d, &mut e, ra, rb)
}

/// AVX2 kernel: four f32 -> f64 conversions per load, four ymm accumulators each for
/// the two sums (16 lanes). Separate multiply and add (no FMA) as in the portable
/// kernel, so the rounding is the same.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sq_sums_chunk_avx2(a: &[f32], b: &[f32]) -> (f64, f64) {
    use std::arch::x86_64::{
        _mm256_add_pd, _mm256_cvtps_pd, _mm256_mul_pd, _mm256_setzero_pd, _mm256_storeu_pd,
        _mm256_sub_pd, _mm_loadu_ps,
    };
    let n = a.len().min(b.len());
    let full = n / LANES * LANES;
    let mut d = [_mm256_setzero_pd(); 4];
    let mut e = [_mm256_setzero_pd(); 4];
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut i = 0;
    while i < full {
        for j in 0..4 {
            // SAFETY: i + 4j + 4 <= full <= the length of both slices; loadu has no
            // alignment requirement.
            let (xa, xb) = unsafe {
                (
                    _mm256_cvtps_pd(_mm_loadu_ps(pa.add(i + 4 * j))),
                    _mm256_cvtps_pd(_mm_loadu_ps(pb.add(i + 4 * j))),
                )
            };
            let t = _mm256_sub_pd(xa, xb);
            d[j] = _mm256_add_pd(d[j], _mm256_mul_pd(t, t));
            e[j] = _mm256_add_pd(e[j], _mm256_mul_pd(xb, xb));
        }
        i += LANES;
    }
    let mut dl = [0f64; LANES];
    let mut el = [0f64; LANES];
    for j in 0..4 {
        // SAFETY: each store writes 4 f64 at 4j..4j+4 < LANES of a local array.
        unsafe {
            _mm256_storeu_pd(dl.as_mut_ptr().add(4 * j), d[j]);
            _mm256_storeu_pd(el.as_mut_ptr().add(4 * j), e[j]);
        }
    }
    finish_lanes(&mut dl, &mut el, &a[full..n], &b[full..n])
}

fn sq_sums_dispatch(a: &[f32], b: &[f32]) -> (f64, f64) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports the feature the function was compiled for.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simd_and_portable_kernels_agree_bit_for_bit() {
        let mut x = 0x9e3779b97f4a7c15u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        for n in [0usize, 1, 15, 16, 17, 1000, 4099] {
            let a: Vec<f32> = (0..n).map(|_| rnd()).collect();
            let b: Vec<f32> = (0..n).map(|_| rnd()).collect();
            let p = sq_sums_chunk(&a, &b);
            let q = sq_sums_dispatch(&a, &b);
            assert_eq!(
                (p.0.to_bits(), p.1.to_bits()),
                (q.0.to_bits(), q.1.to_bits()),
                "n={n}"
            );
        }
    }
}
