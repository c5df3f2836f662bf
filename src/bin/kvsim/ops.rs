//! Numeric kernels: exp approximation, bf16 rounding, RMSNorm, matmul, RoPE and causal
//! attention.
//!
//! Determinism: every output element is computed by one thread in a fixed order. The
//! reductions that do exist (RMSNorm's sum of squares, the softmax max and sum, the
//! P·V sum) use eight fixed lanes combined in a fixed order, so the result does not
//! depend on whether the compiler vectorises, on the thread count, or on the batch a
//! row belongs to: a decode row and the same prefill row give identical bits.
//!
//! Speed: the hot kernels are compiled twice, once generic and once with AVX2+FMA
//! enabled, and picked at run time. Both use `mul_add` (an exactly rounded fused
//! multiply-add, in hardware or in software), so both give identical bits.

/// Lanes of the fixed-order reductions.
const LANES: usize = 8;

/// Defines a safe wrapper that runs `$imp` compiled with AVX2+FMA when the CPU has
/// them, and generically otherwise. `$imp` must be `#[inline(always)]` so its body is
/// compiled inside the feature-enabled function.
macro_rules! dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),*) => $imp:ident) => {
        $(#[$m])*
        $vis fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                    /// # Safety
                    /// The caller checked that the CPU supports AVX2 and FMA.
                    #[target_feature(enable = "avx2,fma")]
                    unsafe fn fast($($arg: $ty),*) { $imp($($arg),*) }
                    // SAFETY: both features were detected just above.
                    return unsafe { fast($($arg),*) };
                }
            }
            $imp($($arg),*)
        }
    };
}

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// 1.5 * 2^23: adding it rounds an f32 of magnitude < 2^22 to an integer.
const ROUND_MAGIC: f32 = 12_582_912.0;
/// ln 2 split in a short high part (exact in products with small n) and the rest.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// |x| bound that keeps 2^n normal: 125 ln 2.
const X_MAX: f32 = 86.6;
/// Taylor coefficients 1/k! of e^r, r in [-ln2/2, ln2/2].
const C2: f32 = 0.5;
const C3: f32 = 0.166_666_67;
const C4: f32 = 0.041_666_668;
const C5: f32 = 0.008_333_334;
const C6: f32 = 0.001_388_888_9;

/// e^x without libm, so it vectorises: x = n ln2 + r (Cody-Waite), e^r by a degree-6
/// polynomial, 2^n built in the exponent bits. Max relative error below 1e-6 on
/// [-80, 80]; x is clamped to [-86.6, 86.6] (no subnormals, no infinities).
#[inline(always)]
pub fn exp_approx(x: f32) -> f32 {
    let x = x.clamp(-X_MAX, X_MAX);
    let t = (x * LOG2E) + ROUND_MAGIC;
    let n = t - ROUND_MAGIC;
    let r = n.mul_add(-LN2_HI, x);
    let r = n.mul_add(-LN2_LO, r);
    let p = C6.mul_add(r, C5);
    let p = p.mul_add(r, C4);
    let p = p.mul_add(r, C3);
    let p = p.mul_add(r, C2);
    let p = p.mul_add(r, 1.0);
    let p = p.mul_add(r, 1.0);
    let ni = (t.to_bits() as i32).wrapping_sub(ROUND_MAGIC.to_bits() as i32);
    let scale = f32::from_bits(((ni + 127) as u32) << 23);
    p * scale
}

/// Rounds to the nearest bf16 (ties to even) and back to f32; NaN stays NaN.
#[inline(always)]
pub fn bf16_round(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let b = x.to_bits();
    let r = b.wrapping_add(0x7FFF + ((b >> 16) & 1));
    f32::from_bits(r & 0xFFFF_0000)
}

/// Rounds every element to bf16 in place.
pub fn bf16_round_all(xs: &mut [f32]) {
    for x in xs {
        *x = bf16_round(*x);
    }
}

/// SiLU, x * sigmoid(x), with the exp approximation.
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + exp_approx(-x))
}

#[inline(always)]
fn silu_mul_impl(g: &mut [f32], u: &[f32]) {
    for (a, b) in g.iter_mut().zip(u) {
        *a = silu(*a) * b;
    }
}

dispatch!(
    /// SwiGLU gate: g = silu(g) * u, element by element.
    pub fn silu_mul(g: &mut [f32], u: &[f32]) => silu_mul_impl
);

/// Sum of `xs` in eight fixed lanes, combined in a fixed order.
#[inline(always)]
fn lane_sum(mut acc: [f32; LANES], tail: f32) -> f32 {
    // Pairwise in a fixed tree.
    for w in [4, 2, 1] {
        for i in 0..w {
            acc[i] += acc[i + w];
        }
    }
    acc[0] + tail
}

#[inline(always)]
fn rmsnorm_row_impl(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let mut acc = [0.0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let rem = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            acc[l] = c[l].mul_add(c[l], acc[l]);
        }
    }
    let mut tail = 0.0f32;
    for &v in rem {
        tail = v.mul_add(v, tail);
    }
    let ss = lane_sum(acc, tail);
    let inv = 1.0 / (ss / x.len() as f32 + eps).sqrt();
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = v * inv * g;
    }
}

dispatch!(
    /// RMSNorm of one row: out = x / sqrt(mean(x^2) + eps) * w.
    pub fn rmsnorm_row(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) => rmsnorm_row_impl
);

#[inline(always)]
fn matmul_row_impl(x: &[f32], w: &[f32], out: &mut [f32]) {
    let n = out.len();
    out.fill(0.0);
    for (&xv, wr) in x.iter().zip(w.chunks_exact(n)) {
        for (o, &wv) in out.iter_mut().zip(wr) {
            *o = xv.mul_add(wv, *o);
        }
    }
}

dispatch!(
    /// One row of x · W with W row-major `[x.len(), out.len()]`; each output sums over
    /// the inputs in ascending order.
    pub fn matmul_row(x: &[f32], w: &[f32], out: &mut [f32]) => matmul_row_impl
);

/// Rotates one head vector in place by position angles (half-split RoPE: pairs
/// (i, i + d/2)); `cos`/`sin` hold d/2 values for this position.
pub fn rope_head(x: &mut [f32], cos: &[f32], sin: &[f32]) {
    let half = x.len() / 2;
    let (a, b) = x.split_at_mut(half);
    for i in 0..half {
        let (x0, x1) = (a[i], b[i]);
        a[i] = x0 * cos[i] - x1 * sin[i];
        b[i] = x0 * sin[i] + x1 * cos[i];
    }
}

/// cos and sin of the RoPE angles at one position, d/2 each, computed in f64 so
/// prefill and decode derive the same bits from the position alone.
pub fn rope_angles(pos: usize, head_dim: usize, theta: f64) -> (Vec<f32>, Vec<f32>) {
    let half = head_dim / 2;
    let mut c = Vec::with_capacity(half);
    let mut s = Vec::with_capacity(half);
    for i in 0..half {
        let inv = theta.powf(-2.0 * i as f64 / head_dim as f64);
        let a = pos as f64 * inv;
        c.push(a.cos() as f32);
        s.push(a.sin() as f32);
    }
    (c, s)
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attend_row_impl(
    q: &[f32],
    kt: &[f32],
    vt: &[f32],
    stride: usize,
    n: usize,
    scores: &mut [f32],
    out: &mut [f32],
) {
    let s = &mut scores[..n];
    // Scores, vectorised over keys: K is stored transposed ([head_dim, stride]).
    s.fill(0.0);
    for (d, &qd) in q.iter().enumerate() {
        let krow = &kt[d * stride..d * stride + n];
        for (sj, &kj) in s.iter_mut().zip(krow) {
            *sj = qd.mul_add(kj, *sj);
        }
    }
    // Max in fixed lanes.
    let mut mx = [f32::NEG_INFINITY; LANES];
    let chunks = s.chunks_exact(LANES);
    let rem = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            mx[l] = mx[l].max(c[l]);
        }
    }
    let mut m = f32::NEG_INFINITY;
    for v in mx.iter().chain(rem) {
        m = m.max(*v);
    }
    // Exponentials and their sum in fixed lanes.
    let mut acc = [0.0f32; LANES];
    let full = n - n % LANES;
    for c in s[..full].chunks_exact_mut(LANES) {
        for l in 0..LANES {
            let e = exp_approx(c[l] - m);
            c[l] = e;
            acc[l] += e;
        }
    }
    let mut tail = 0.0f32;
    for v in &mut s[full..] {
        *v = exp_approx(*v - m);
        tail += *v;
    }
    let inv = 1.0 / lane_sum(acc, tail);
    // P · V, V transposed too, so each output sums over keys in fixed lanes.
    for (d, o) in out.iter_mut().enumerate() {
        let vrow = &vt[d * stride..d * stride + n];
        let mut acc = [0.0f32; LANES];
        for (pc, vc) in s[..full]
            .chunks_exact(LANES)
            .zip(vrow[..full].chunks_exact(LANES))
        {
            for l in 0..LANES {
                acc[l] = pc[l].mul_add(vc[l], acc[l]);
            }
        }
        let mut tail = 0.0f32;
        for (p, v) in s[full..].iter().zip(&vrow[full..]) {
            tail = p.mul_add(*v, tail);
        }
        *o = lane_sum(acc, tail) * inv;
    }
}

/// Attention of one (already scaled) query over keys `0..n` of one KV head. `kt` and
/// `vt` are `[head_dim, stride]` (key-contiguous); `scores` is scratch of at least `n`.
#[allow(clippy::too_many_arguments)]
pub fn attend_row(
    q: &[f32],
    kt: &[f32],
    vt: &[f32],
    stride: usize,
    n: usize,
    scores: &mut [f32],
    out: &mut [f32],
) {
    let hd = q.len();
    assert!(
        n <= stride && kt.len() >= hd * stride && vt.len() >= hd * stride && scores.len() >= n,
        "attend_row: inconsistent sizes"
    );
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: features detected above; sizes checked by the assert.
            unsafe { avx2::attend_row(q, kt, vt, stride, n, scores, out) };
            return;
        }
    }
    attend_row_impl(q, kt, vt, stride, n, scores, out)
}

/// Hand-written AVX2+FMA attention row. Lane for lane the same operations, in the same
/// order, as `attend_row_impl`, so both give identical bits.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{LN2_HI, LN2_LO, LOG2E, ROUND_MAGIC, X_MAX};

    #[inline(always)]
    unsafe fn exp8(x: __m256) -> __m256 {
        let x = _mm256_min_ps(
            _mm256_max_ps(x, _mm256_set1_ps(-X_MAX)),
            _mm256_set1_ps(X_MAX),
        );
        let t = _mm256_add_ps(
            _mm256_mul_ps(x, _mm256_set1_ps(LOG2E)),
            _mm256_set1_ps(ROUND_MAGIC),
        );
        let n = _mm256_sub_ps(t, _mm256_set1_ps(ROUND_MAGIC));
        let r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_HI), x);
        let r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_LO), r);
        let p = _mm256_fmadd_ps(_mm256_set1_ps(super::C6), r, _mm256_set1_ps(super::C5));
        let p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(super::C4));
        let p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(super::C3));
        let p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(super::C2));
        let p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0));
        let p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0));
        let ni = _mm256_sub_epi32(
            _mm256_castps_si256(t),
            _mm256_set1_epi32(ROUND_MAGIC.to_bits() as i32),
        );
        let scale = _mm256_slli_epi32::<23>(_mm256_add_epi32(ni, _mm256_set1_epi32(127)));
        _mm256_mul_ps(p, _mm256_castsi256_ps(scale))
    }

    /// The fixed tree of `lane_sum`: (i, i+4), then (i, i+2), then (0, 1).
    #[inline(always)]
    unsafe fn hsum(v: __m256) -> f32 {
        let s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        let s1 = _mm_add_ss(s2, _mm_shuffle_ps::<1>(s2, s2));
        _mm_cvtss_f32(s1)
    }

    #[inline(always)]
    unsafe fn hmax(v: __m256) -> f32 {
        let mut a = [0.0f32; 8];
        _mm256_storeu_ps(a.as_mut_ptr(), v);
        a.iter().fold(f32::NEG_INFINITY, |m, x| m.max(*x))
    }

    /// # Safety
    /// AVX2 and FMA must be available; `kt`, `vt` hold `q.len() * stride` values,
    /// `n <= stride`, `scores.len() >= n`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn attend_row(
        q: &[f32],
        kt: &[f32],
        vt: &[f32],
        stride: usize,
        n: usize,
        scores: &mut [f32],
        out: &mut [f32],
    ) {
        // Constant head sizes let the compiler unroll and keep q in registers.
        match q.len() {
            8 => body(q, 8, kt, vt, stride, n, scores, out),
            4 => body(q, 4, kt, vt, stride, n, scores, out),
            16 => body(q, 16, kt, vt, stride, n, scores, out),
            hd => body(q, hd, kt, vt, stride, n, scores, out),
        }
    }

    // `hd` (not `q.len()`) bounds the loops so a constant `hd` unrolls them.
    #[inline(always)]
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    unsafe fn body(
        q: &[f32],
        hd: usize,
        kt: &[f32],
        vt: &[f32],
        stride: usize,
        n: usize,
        scores: &mut [f32],
        out: &mut [f32],
    ) {
        let full = n - n % 8;
        let sp = scores.as_mut_ptr();
        let kp = kt.as_ptr();
        let vp = vt.as_ptr();
        // Scores and their max.
        let mut mx = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut j = 0;
        while j < full {
            let mut s = _mm256_setzero_ps();
            for d in 0..hd {
                s = _mm256_fmadd_ps(
                    _mm256_set1_ps(q[d]),
                    _mm256_loadu_ps(kp.add(d * stride + j)),
                    s,
                );
            }
            _mm256_storeu_ps(sp.add(j), s);
            mx = _mm256_max_ps(mx, s);
            j += 8;
        }
        let mut m = hmax(mx);
        for j in full..n {
            let mut s = 0.0f32;
            for (d, &qd) in q.iter().enumerate() {
                s = qd.mul_add(*kp.add(d * stride + j), s);
            }
            *sp.add(j) = s;
            m = m.max(s);
        }
        // Exponentials and their sum.
        let mv = _mm256_set1_ps(m);
        let mut acc = _mm256_setzero_ps();
        let mut j = 0;
        while j < full {
            let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(sp.add(j)), mv));
            _mm256_storeu_ps(sp.add(j), e);
            acc = _mm256_add_ps(acc, e);
            j += 8;
        }
        let mut tail = 0.0f32;
        for j in full..n {
            let e = super::exp_approx(*sp.add(j) - m);
            *sp.add(j) = e;
            tail += e;
        }
        let inv = 1.0 / (hsum(acc) + tail);
        // P . V, up to eight output dims per pass over P.
        let mut d0 = 0;
        while d0 < hd {
            let w = (hd - d0).min(8);
            let mut a = [_mm256_setzero_ps(); 8];
            let mut j = 0;
            while j < full {
                let p = _mm256_loadu_ps(sp.add(j));
                for (i, ai) in a.iter_mut().enumerate().take(w) {
                    *ai = _mm256_fmadd_ps(p, _mm256_loadu_ps(vp.add((d0 + i) * stride + j)), *ai);
                }
                j += 8;
            }
            for (i, ai) in a.iter().enumerate().take(w) {
                let mut tail = 0.0f32;
                for j in full..n {
                    tail = (*sp.add(j)).mul_add(*vp.add((d0 + i) * stride + j), tail);
                }
                out[d0 + i] = (hsum(*ai) + tail) * inv;
            }
            d0 += w;
        }
    }
}

/// Index of the first largest value (0 for an empty slice).
pub fn argmax(xs: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in xs.iter().enumerate() {
        if v > xs[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_approx_max_relative_error_is_small() {
        let mut worst = 0.0f64;
        let mut x = -80.0f32;
        while x <= 80.0 {
            let want = (x as f64).exp();
            let got = exp_approx(x) as f64;
            worst = worst.max(((got - want) / want).abs());
            x += 0.001_7;
        }
        assert!(worst < 1e-6, "max relative error {worst}");
        assert!(worst > 0.0);
        assert_eq!(exp_approx(0.0), 1.0);
    }

    #[test]
    fn bf16_round_matches_half() {
        for &x in &[1.0f32, 1.003_906_3, 2.718_5, -0.000_123_4, 65_504.0, 1e-30] {
            assert_eq!(bf16_round(x), half::bf16::from_f32(x).to_f32(), "{x}");
        }
    }

    /// Naive causal attention in f64 with libm exp.
    fn naive(q: &[f32], k: &[Vec<f32>], v: &[Vec<f32>], n: usize) -> Vec<f64> {
        let s: Vec<f64> = (0..n)
            .map(|j| {
                q.iter()
                    .zip(&k[j])
                    .map(|(a, b)| *a as f64 * *b as f64)
                    .sum()
            })
            .collect();
        let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = e.iter().sum();
        (0..q.len())
            .map(|d| (0..n).map(|j| e[j] * v[j][d] as f64).sum::<f64>() / z)
            .collect()
    }

    #[test]
    fn attention_matches_naive_reference() {
        let (hd, t) = (8usize, 37usize);
        let mut st = 7u64;
        let mut rnd = || {
            st = st.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            ((st >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        };
        let k: Vec<Vec<f32>> = (0..t).map(|_| (0..hd).map(|_| rnd()).collect()).collect();
        let v: Vec<Vec<f32>> = (0..t).map(|_| (0..hd).map(|_| rnd()).collect()).collect();
        let mut kt = vec![0.0; hd * t];
        let mut vt = vec![0.0; hd * t];
        for j in 0..t {
            for d in 0..hd {
                kt[d * t + j] = k[j][d];
                vt[d * t + j] = v[j][d];
            }
        }
        let mut scores = vec![0.0; t];
        for n in [1, 7, 8, 9, 16, 37] {
            let q: Vec<f32> = (0..hd).map(|_| rnd()).collect();
            let mut out = vec![0.0; hd];
            attend_row(&q, &kt, &vt, t, n, &mut scores, &mut out);
            let want = naive(&q, &k, &v, n);
            for d in 0..hd {
                assert!(
                    (out[d] as f64 - want[d]).abs() < 1e-5,
                    "n={n} d={d}: {} vs {}",
                    out[d],
                    want[d]
                );
            }
        }
    }

    #[test]
    fn simd_attention_matches_the_generic_kernel_bit_for_bit() {
        let (hd, t) = (8usize, 53usize);
        let kt: Vec<f32> = (0..hd * t)
            .map(|i| ((i * 7919) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let vt: Vec<f32> = (0..hd * t)
            .map(|i| ((i * 104_729) % 97) as f32 / 40.0 - 1.2)
            .collect();
        let q: Vec<f32> = (0..hd).map(|i| i as f32 * 0.3 - 1.0).collect();
        let mut scores = vec![0.0; t];
        for n in [1, 8, 15, 16, 53] {
            let (mut a, mut b) = (vec![0.0; hd], vec![0.0; hd]);
            attend_row(&q, &kt, &vt, t, n, &mut scores, &mut a);
            attend_row_impl(&q, &kt, &vt, t, n, &mut scores, &mut b);
            assert_eq!(a, b, "n={n}");
        }
    }

    #[test]
    fn matmul_and_rmsnorm_match_naive() {
        let x: Vec<f32> = (0..13).map(|i| (i as f32 * 0.37).sin()).collect();
        let w: Vec<f32> = (0..13 * 5).map(|i| (i as f32 * 0.11).cos()).collect();
        let mut out = vec![0.0; 5];
        matmul_row(&x, &w, &mut out);
        for n in 0..5 {
            let want: f64 = (0..13).map(|k| x[k] as f64 * w[k * 5 + n] as f64).sum();
            assert!((out[n] as f64 - want).abs() < 1e-5);
        }
        let g = vec![1.0; 13];
        let mut y = vec![0.0; 13];
        rmsnorm_row(&x, &g, 0.0, &mut y);
        let ms: f64 = y.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / 13.0;
        assert!((ms - 1.0).abs() < 1e-5);
    }
}
