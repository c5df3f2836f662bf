//! How the record writes times, for every module that writes one (a leaf: it uses
//! nothing of the crate).

/// RFC 3339 with microseconds, `Z`.
pub fn rfc3339(t: &chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// Round milliseconds to microsecond resolution.
pub fn round_us(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}
