//! How numbers read to people, in one place: the terminal summary, progress lines,
//! run reasons and every report say `769.2 ms`, `2.00 s`, `3.5 min`, `0.00702 ms`.
//! The record keeps every value unrounded; a value is rounded only here, where it is
//! printed, and never to fewer than three significant digits (a fixed count of
//! decimals turned 0.0024 into 0.002). (Plans write durations in their own syntax,
//! `1h30m`: `plan::units`.)

use std::time::Duration;

/// `x` with at least `decimals` decimals and at least `sig` significant digits:
/// `fixed_sig(0.00702, 1, 3)` is `0.00702`, `fixed_sig(769.24, 1, 3)` is `769.2`.
/// Values below 1e-12 in magnitude (and zero) keep `decimals`.
pub fn fixed_sig(x: f64, decimals: usize, sig: usize) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let a = x.abs();
    let needed = if a >= 1e-12 {
        // Digits after the point that reach the `sig`-th significant one.
        (sig as i64 - 1 - a.log10().floor() as i64).max(0) as usize
    } else {
        0
    };
    let d = decimals.max(needed).min(17);
    format!("{x:.d$}")
}

/// Milliseconds for people: `0.250 ms`, `0.00702 ms`, `12.3 ms`, `769.2 ms`,
/// `2.00 s`, `3.5 min`: at least three significant digits.
pub fn duration_ms(ms: f64) -> String {
    if !ms.is_finite() {
        return ms.to_string();
    }
    let a = ms.abs();
    if a < 1000.0 {
        format!("{} ms", fixed_sig(ms, 1, 3))
    } else if a < 120_000.0 {
        format!("{} s", fixed_sig(ms / 1000.0, 2, 3))
    } else {
        format!("{} min", fixed_sig(ms / 60_000.0, 1, 3))
    }
}

/// A [`Duration`] for people (see [`duration_ms`]).
pub fn human_duration(d: Duration) -> String {
    duration_ms(d.as_secs_f64() * 1000.0)
}

/// Binary units with one decimal: 1536 -> `1.5 KiB`, 512 -> `512 B`.
pub fn bytes(n: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if !n.is_finite() {
        return n.to_string();
    }
    let mut v = n;
    let mut unit = 0;
    while v.abs() >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{} B", n.round())
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A fraction written as a number (`0.05`) or a percentage (`5%`); the caller
/// checks its range.
pub fn fraction(s: &str) -> Option<f64> {
    match s.trim().strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().ok().map(|v| v / 100.0),
        None => s.trim().parse::<f64>().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_at_every_scale() {
        assert_eq!(duration_ms(0.25), "0.250 ms");
        assert_eq!(duration_ms(769.24), "769.2 ms");
        assert_eq!(duration_ms(2000.0), "2.00 s");
        assert_eq!(duration_ms(210_000.0), "3.50 min");
        assert_eq!(human_duration(Duration::from_secs(60)), "60.00 s");
        assert_eq!(duration_ms(12.34), "12.3 ms");
        assert_eq!(duration_ms(5.0), "5.00 ms");
    }

    #[test]
    fn small_values_keep_three_significant_digits() {
        assert_eq!(duration_ms(0.00702), "0.00702 ms");
        assert_eq!(fixed_sig(0.0024, 2, 3), "0.00240");
        assert_eq!(fixed_sig(0.8333, 2, 3), "0.833");
        assert_eq!(fixed_sig(133.333, 2, 3), "133.33");
        assert_eq!(fixed_sig(0.0, 2, 3), "0.00");
        assert_eq!(fixed_sig(-0.000123456, 0, 4), "-0.0001235");
    }
}
