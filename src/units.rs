//! How durations read to people, in one place: the terminal summary, progress lines,
//! run reasons and reports all say `769.2 ms`, `2.00 s`, `3.5 min`. (Plans write
//! durations in their own syntax, `1h30m`: `plan::units`.)

use std::time::Duration;

/// Milliseconds for people: `0.250 ms`, `769.2 ms`, `2.00 s`, `3.5 min`.
pub fn duration_ms(ms: f64) -> String {
    if !ms.is_finite() {
        return ms.to_string();
    }
    let a = ms.abs();
    if a < 1.0 {
        format!("{ms:.3} ms")
    } else if a < 1000.0 {
        format!("{ms:.1} ms")
    } else if a < 120_000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        format!("{:.1} min", ms / 60_000.0)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_at_every_scale() {
        assert_eq!(duration_ms(0.25), "0.250 ms");
        assert_eq!(duration_ms(769.24), "769.2 ms");
        assert_eq!(duration_ms(2000.0), "2.00 s");
        assert_eq!(duration_ms(210_000.0), "3.5 min");
        assert_eq!(human_duration(Duration::from_secs(60)), "60.00 s");
    }
}
