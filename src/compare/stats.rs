//! Whether a timing moved between two revisions: the Mann–Whitney U test (as
//! `scipy.stats.mannwhitneyu` computes it with its defaults: two-sided, the exact
//! distribution for small samples without ties, else the normal approximation with
//! tie and continuity corrections), a bootstrap confidence interval of the ratio of
//! medians, and asv's marks: a change counts only when it is significant and its
//! interval lies beyond the noise threshold.

pub use crate::record::timing::{Mark, TimingComparison};

/// Significance level of the test.
pub const ALPHA: f64 = 0.05;
/// Bootstrap resamples (seeded: the interval is the same on every machine).
const RESAMPLES: usize = 2000;

/// `U` of `x` against `y` and the two-sided p-value.
pub fn mann_whitney(x: &[f64], y: &[f64]) -> Option<(f64, f64)> {
    let (n1, n2) = (x.len(), y.len());
    if n1 == 0 || n2 == 0 || x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    // Mid-ranks of the pooled sample.
    let mut all: Vec<(f64, usize)> = x
        .iter()
        .map(|&v| (v, 0))
        .chain(y.iter().map(|&v| (v, 1)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = all.len();
    let mut ranks = vec![0.0; n];
    let mut ties: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        ranks[i..=j].iter_mut().for_each(|x| *x = r);
        if j > i {
            ties.push(j - i + 1);
        }
        i = j + 1;
    }
    let r1: f64 = all
        .iter()
        .zip(&ranks)
        .filter(|(a, _)| a.1 == 0)
        .map(|(_, r)| r)
        .sum();
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let u2 = (n1 * n2) as f64 - u1;
    let big = u1.max(u2);
    let p = if n1.min(n2) <= 8 && ties.is_empty() {
        // P(U >= big), doubled.
        let counts = u_distribution(n1, n2);
        let total: f64 = counts.iter().sum();
        let k = big.round() as usize;
        let tail: f64 = counts.iter().skip(k).sum::<f64>() / total;
        (2.0 * tail).min(1.0)
    } else {
        let (m, nn) = (n1 as f64, n2 as f64);
        let nt = n as f64;
        let tie: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum();
        let var = m * nn / 12.0 * ((nt + 1.0) - tie / (nt * (nt - 1.0)));
        if var <= 0.0 {
            1.0
        } else {
            let z = (big - m * nn / 2.0 - 0.5) / var.sqrt();
            (2.0 * normal_sf(z)).clamp(0.0, 1.0)
        }
    };
    Some((u1, p))
}

/// How many arrangements of `m` and `n` values give each U (0..=m*n).
fn u_distribution(m: usize, n: usize) -> Vec<f64> {
    // f[i][j][u]: rolling over i, table over (j, u).
    let max = m * n;
    let mut prev: Vec<Vec<f64>> = (0..=n)
        .map(|_| {
            let mut v = vec![0.0; max + 1];
            v[0] = 1.0;
            v
        })
        .collect();
    for i in 1..=m {
        let mut cur: Vec<Vec<f64>> = vec![vec![0.0; max + 1]; n + 1];
        cur[0][0] = 1.0;
        for j in 1..=n {
            for u in 0..=max {
                // The largest value is from x (adds j to U) or from y (adds nothing).
                let from_x = if u >= j { prev[j][u - j] } else { 0.0 };
                cur[j][u] = from_x + cur[j - 1][u];
            }
        }
        prev = cur;
        let _ = i;
    }
    prev[n].clone()
}

/// The standard normal's survival function, 1 - Φ(z).
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// erfc with relative error below 1e-13 (W. J. Cody's rational approximations as in
/// most libms, through `erfc(x) = exp(-x²) * R(x)` for large x).
fn erfc(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 0.5 {
        return 1.0 - erf_small(x);
    }
    // Continued fraction (Lentz), converging fast for x >= 0.5.
    let mut f;
    let tiny = 1e-300;
    let (mut c, mut d);
    // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...))))
    let b0 = x;
    f = if b0 == 0.0 { tiny } else { b0 };
    c = f;
    d = 0.0;
    for k in 1..300 {
        let a = k as f64 / 2.0;
        let b = x;
        d = b + a * d;
        if d == 0.0 {
            d = tiny;
        }
        c = b + a / c;
        if c == 0.0 {
            c = tiny;
        }
        d = 1.0 / d;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-x * x).exp() / (f * std::f64::consts::PI.sqrt())
}

/// erf by its Taylor series (for |x| < 0.5, where it converges in a few terms).
fn erf_small(x: f64) -> f64 {
    let mut sum = x;
    let mut term = x;
    let x2 = x * x;
    for n in 1..60 {
        term *= -x2 / n as f64;
        let add = term / (2 * n + 1) as f64;
        sum += add;
        if add.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

/// The median (mean of the middle two for an even count).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// A 95% percentile-bootstrap interval of median(y) / median(x), seeded.
pub fn ratio_interval(x: &[f64], y: &[f64]) -> Option<(f64, f64)> {
    if x.is_empty() || y.is_empty() {
        return None;
    }
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let mut ratios: Vec<f64> = Vec::with_capacity(RESAMPLES);
    let mut bx = vec![0.0; x.len()];
    let mut by = vec![0.0; y.len()];
    for _ in 0..RESAMPLES {
        bx.iter_mut().for_each(|v| *v = x[next(x.len())]);
        by.iter_mut().for_each(|v| *v = y[next(y.len())]);
        let mx = median(&bx);
        if mx != 0.0 {
            ratios.push(median(&by) / mx);
        }
    }
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let at =
        |q: f64| ratios[((q * (ratios.len() - 1) as f64).round() as usize).min(ratios.len() - 1)];
    Some((at(0.025), at(0.975)))
}

/// Whether `n1` and `n2` samples can reach p < ALPHA at all (the exact test's
/// smallest two-sided p is 2 / C(n1 + n2, n1)).
fn enough(n1: usize, n2: usize) -> bool {
    if n1 == 0 || n2 == 0 {
        return false;
    }
    let mut c = 1.0f64;
    for i in 0..n1.min(n2) {
        c = c * (n1 + n2 - i) as f64 / (i + 1) as f64;
    }
    2.0 / c < ALPHA
}

/// Compare `implementation` with `baseline` (lower is better, as for timings).
pub fn compare(
    metric: &str,
    baseline: &[f64],
    implementation: &[f64],
    noise: f64,
) -> TimingComparison {
    let mut out = TimingComparison {
        metric: metric.to_string(),
        baseline: baseline.to_vec(),
        implementation: implementation.to_vec(),
        ratio: None,
        interval: None,
        u: None,
        p_value: None,
        noise,
        mark: Mark::InsufficientSamples,
    };
    let mb = median(baseline);
    if mb.is_finite() && mb != 0.0 && !implementation.is_empty() {
        out.ratio = Some(median(implementation) / mb);
    }
    out.interval = ratio_interval(baseline, implementation);
    if let Some((u, p)) = mann_whitney(implementation, baseline) {
        out.u = Some(u);
        out.p_value = Some(p);
    }
    if !enough(baseline.len(), implementation.len()) {
        return out;
    }
    out.mark = match (out.p_value, out.interval) {
        (Some(p), Some((lo, _))) if p < ALPHA && lo > 1.0 + noise => Mark::Worse,
        (Some(p), Some((_, hi))) if p < ALPHA && hi < 1.0 - noise => Mark::Better,
        _ => Mark::NotSignificant,
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_tail_matches_known_values() {
        // scipy.stats.norm.sf
        for (z, want) in [
            (0.0, 0.5),
            (1.0, 0.15865525393145707),
            (1.959963984540054, 0.025),
            (3.0, 0.0013498980316301),
            (6.0, 9.865876450376946e-10),
            (-1.0, 0.8413447460685429),
        ] {
            let got = normal_sf(z);
            assert!(
                ((got - want) / want).abs() < 1e-9,
                "sf({z}) = {got}, not {want}"
            );
        }
    }

    #[test]
    fn exact_u_distribution_sums_to_the_arrangements() {
        let d = u_distribution(3, 4);
        assert_eq!(d.iter().sum::<f64>(), 35.0); // C(7, 3)
        assert_eq!(d.len(), 13);
        assert_eq!(d[0], 1.0);
        assert_eq!(d[12], 1.0);
    }

    #[test]
    fn marks_need_significance_and_a_change_beyond_noise() {
        let base = [100.0, 101.0, 99.0, 100.5, 100.2, 99.8];
        let slow = [120.0, 121.0, 119.0, 120.5, 120.2, 119.8];
        assert_eq!(compare("wall_ms", &base, &slow, 0.05).mark, Mark::Worse);
        assert_eq!(compare("wall_ms", &slow, &base, 0.05).mark, Mark::Better);
        let near = [101.0, 102.0, 100.0, 101.5, 101.2, 100.8];
        assert_eq!(
            compare("wall_ms", &base, &near, 0.05).mark,
            Mark::NotSignificant
        );
        assert_eq!(
            compare("wall_ms", &base[..3], &slow[..3], 0.05).mark,
            Mark::InsufficientSamples
        );
    }
}
