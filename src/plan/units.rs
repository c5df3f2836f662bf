//! Sizes (`128GiB`, `4GB`, `512B`, or an integer of bytes) and durations (`90s`, `15m`,
//! `2h`, `1h30m`, `500ms`), parsed once into typed values. Units are case-sensitive
//! (`Gb` could mean gigabits) and a space between number and unit is refused, because
//! `128 GB` is far more often a typo than a choice.

use std::time::Duration;

use super::diag::suggest;
use super::model::ByteSize;

/// Why a size or duration was refused: message and help.
pub(crate) type UnitError = (String, String);

const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
];

const DURATION_UNITS: &[(&str, u64)] = &[
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// The longest duration a plan may give: 366 days. Longer would not be a limit, and
/// every duration must fit the record's integers exactly.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);
/// The smallest memory limit: below it no process can even start, so the attempt
/// would fail at run time for a reason `check` can tell now.
pub const MIN_MEMORY: u64 = 1 << 20;
/// The largest integer the record holds exactly (2^53 - 1): sizes and counts above
/// it could not be written into `record.json`.
pub const MAX_EXACT: u64 = (1 << 53) - 1;
/// The kernel's largest pid count (`PID_MAX_LIMIT`): a larger `pids.max` is refused.
pub const MAX_PIDS: i64 = 4_194_304;

/// A duration within the limits: above zero unless `zero_ok`, at most
/// [`MAX_DURATION`].
pub(crate) fn check_duration(d: Duration, zero_ok: bool) -> Result<Duration, UnitError> {
    if d.is_zero() && !zero_ok {
        return Err((
            "a timeout of 0 would end every attempt before it starts".into(),
            "use at least 1ms, e.g. \"30s\"".into(),
        ));
    }
    if d > MAX_DURATION {
        return Err((
            format!("{}ms is longer than 366 days", d.as_millis()),
            "use at most 8784h".into(),
        ));
    }
    Ok(d)
}

/// A memory size within the limits: [`MIN_MEMORY`] ..= [`MAX_EXACT`] bytes.
pub(crate) fn check_memory(b: ByteSize) -> Result<ByteSize, UnitError> {
    if b.0 < MIN_MEMORY {
        return Err((
            format!("{} bytes is too little memory to start a process", b.0),
            "use at least 1MiB".into(),
        ));
    }
    if b.0 > MAX_EXACT {
        return Err((
            format!("{} bytes is more than the record can hold exactly", b.0),
            format!("use at most {MAX_EXACT} bytes (8PiB)"),
        ));
    }
    Ok(b)
}

/// Split leading digits (with an optional `.fraction`) from the rest.
fn split_number(s: &str) -> (&str, &str) {
    let mut end = 0;
    let mut seen_dot = false;
    for (i, c) in s.char_indices() {
        if c.is_ascii_digit() {
            end = i + 1;
        } else if c == '.' && !seen_dot && i > 0 {
            seen_dot = true;
        } else {
            break;
        }
    }
    s.split_at(end)
}

/// Parse `"128GiB"`-style text.
pub(crate) fn parse_size(text: &str) -> Result<ByteSize, UnitError> {
    let units: Vec<&str> = SIZE_UNITS.iter().map(|u| u.0).collect();
    let help_units =
        "use B, KB, MB, GB, TB (decimal) or KiB, MiB, GiB, TiB (binary), e.g. \"512MiB\"";
    let t = text.trim();
    let (num, unit) = split_number(t);
    if num.is_empty() {
        return Err((
            format!("`{text}` is not a size"),
            format!("write a number followed by a unit; {help_units}"),
        ));
    }
    if unit.starts_with(char::is_whitespace) {
        let u = unit.trim();
        return Err((
            format!("size `{text}` has a space before its unit"),
            format!("write {num}{} (no space)", fix_size_unit(u)),
        ));
    }
    if unit.is_empty() {
        return Err((
            format!("size `{text}` has no unit"),
            format!("write {num}B for bytes, or an integer without quotes; {help_units}"),
        ));
    }
    let Some(&(_, factor)) = SIZE_UNITS.iter().find(|u| u.0 == unit) else {
        let help = match suggest(unit, units.iter().copied()) {
            Some(s) => format!("did you mean `{num}{s}`? {help_units}"),
            None => help_units.to_string(),
        };
        return Err((format!("unknown size unit `{unit}` in `{text}`"), help));
    };
    let bytes = if let Some((whole, frac)) = num.split_once('.') {
        // Nine fraction digits are plenty for bytes and keep the products in range.
        let whole: u128 = whole.parse().unwrap_or(u128::MAX);
        let scale = 10u128.pow(frac.len().min(9) as u32);
        let frac: u128 = frac
            .get(..frac.len().min(9))
            .and_then(|f| f.parse().ok())
            .unwrap_or(0);
        whole
            .checked_mul(factor as u128)
            .and_then(|w| w.checked_add(frac * factor as u128 / scale))
    } else {
        num.parse::<u128>()
            .ok()
            .and_then(|n| n.checked_mul(factor as u128))
    };
    match bytes.and_then(|b| u64::try_from(b).ok()) {
        Some(b) => Ok(ByteSize(b)),
        None => Err((
            format!("size `{text}` is too large"),
            "sizes must fit in 64 bits of bytes".to_string(),
        )),
    }
}

fn fix_size_unit(u: &str) -> String {
    if SIZE_UNITS.iter().any(|x| x.0 == u) {
        return u.to_string();
    }
    suggest(u, SIZE_UNITS.iter().map(|x| x.0))
        .unwrap_or("GiB")
        .to_string()
}

/// Parse `"1h30m"`-style text: one or more `<integer><unit>` parts.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let help_units = "use ms, s, m, h or d, e.g. \"90s\", \"15m\", \"2h\", \"1h30m\"";
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(("empty duration".to_string(), help_units.to_string()));
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(end);
        if num.is_empty() {
            return Err((
                format!("`{text}` is not a duration"),
                help_units.to_string(),
            ));
        }
        if tail.starts_with(char::is_whitespace) {
            let u: String = tail
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphabetic())
                .collect();
            let fixed = fix_duration_unit(&u);
            return Err((
                format!("duration `{text}` has a space before its unit"),
                format!("write {num}{fixed} (no space)"),
            ));
        }
        let uend = tail
            .find(|c: char| !c.is_alphabetic())
            .unwrap_or(tail.len());
        let (unit, after) = tail.split_at(uend);
        if unit.is_empty() {
            let msg = if tail.is_empty() {
                format!("duration `{text}` has no unit")
            } else {
                format!("`{text}` is not a duration")
            };
            return Err((msg, help_units.to_string()));
        }
        let Some(&(_, ms)) = DURATION_UNITS.iter().find(|u| u.0 == unit) else {
            return Err((
                format!("unknown duration unit `{unit}` in `{text}`"),
                format!(
                    "did you mean `{num}{}`? {help_units}",
                    fix_duration_unit(unit)
                ),
            ));
        };
        let part = num
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(ms))
            .and_then(|p| p.checked_add(total));
        total = part.ok_or_else(|| {
            (
                format!("duration `{text}` is too large"),
                help_units.to_string(),
            )
        })?;
        rest = after;
    }
    Ok(Duration::from_millis(total))
}

fn fix_duration_unit(u: &str) -> &'static str {
    let lower = u.to_ascii_lowercase();
    match lower.as_str() {
        "ms" | "msec" | "msecs" | "millis" | "milliseconds" | "millisecond" => "ms",
        "s" | "sec" | "secs" | "second" | "seconds" => "s",
        "m" | "min" | "mins" | "minute" | "minutes" => "m",
        "h" | "hr" | "hrs" | "hour" | "hours" => "h",
        "d" | "day" | "days" => "d",
        _ => suggest(u, DURATION_UNITS.iter().map(|x| x.0)).unwrap_or("s"),
    }
}

/// `1073741824` -> `1GiB`; the largest unit that divides evenly.
pub(crate) fn format_size(b: ByteSize) -> String {
    let n = b.0;
    for &(unit, factor) in SIZE_UNITS.iter().rev() {
        if n != 0 && factor > 1 && n % factor == 0 {
            return format!("{}{unit}", n / factor);
        }
    }
    format!("{n}B")
}

/// `5400s` -> `1h30m`.
pub(crate) fn format_duration(d: Duration) -> String {
    let mut ms = d.as_millis();
    if ms == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    for (unit, f) in [("h", 3_600_000u128), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
        if ms >= f {
            out.push_str(&format!("{}{unit}", ms / f));
            ms %= f;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("128GiB"), Ok(ByteSize(128 << 30)));
        assert_eq!(parse_size("4GB"), Ok(ByteSize(4_000_000_000)));
        assert_eq!(parse_size("512B"), Ok(ByteSize(512)));
        assert_eq!(parse_size("1.5KiB"), Ok(ByteSize(1536)));
        let e = parse_size("128 GB").unwrap_err();
        assert!(e.1.contains("128GB"), "{e:?}");
        let e = parse_size("128GiBs").unwrap_err();
        assert!(e.0.contains("unknown size unit `GiBs`"), "{e:?}");
        assert!(e.1.contains("128GiB"), "{e:?}");
        assert!(parse_size("99999999999TiB").is_err());
        assert!(parse_size("12").is_err());
        assert!(parse_size("1.99999999999999999999999999999999999999TiB").is_ok());
        assert!(parse_size("").is_err());
        assert_eq!(format_size(ByteSize(1 << 30)), "1GiB");
        assert_eq!(format_size(ByteSize(1_000)), "1KB");
        assert_eq!(format_size(ByteSize(7)), "7B");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1d12h"), Ok(Duration::from_secs(36 * 3600)));
        assert!(parse_duration("2days").is_err_and(|(_, help)| help.contains("2d")));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        let e = parse_duration("10 mins").unwrap_err();
        assert!(e.1.contains("10m"), "{e:?}");
        let e = parse_duration("10mins").unwrap_err();
        assert!(e.1.contains("10m"), "{e:?}");
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("99999999999999999999h").is_err());
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
    }
}
