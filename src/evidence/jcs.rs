//! RFC 8785 JSON Canonicalization Scheme (JCS): one byte sequence per JSON value, so
//! a digest of a record means the same thing on every machine and in every language.
//!
//! The three rules that differ from plain `serde_json` output:
//! - object members sorted by their keys' UTF-16 code units (not UTF-8 bytes: the
//!   two orders differ once a key holds characters above U+FFFF next to U+E000..U+FFFF);
//! - strings escaped minimally: `\b \t \n \f \r \" \\`, other controls as `\u00xx`
//!   (lowercase hex), everything else literal UTF-8;
//! - numbers laid out as ECMAScript's `Number.prototype.toString` does, from the
//!   shortest digits that round-trip (Rust's `{:e}` finds them; ties between two
//!   equally short candidates go to the even one, as ECMAScript says).

use serde::Serialize;

use crate::digest::{sha256_bytes, Sha256Digest};

use super::number_check;
pub use super::number_check::{JcsError, MAX_SAFE_INTEGER};

/// Canonical bytes of a JSON value.
///
/// Infallible because a `serde_json::Value` never holds a non-finite number; an
/// integer beyond ±(2^53-1) is written as the double it rounds to, exactly what an
/// ECMAScript implementation of JCS would write. Use [`to_canonical`] to reject
/// such integers instead.
pub fn to_canonical_vec(v: &serde_json::Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_value(v, &mut out);
    out
}

/// Canonical bytes of any serializable value, rejecting non-finite floats and
/// integers that a double cannot hold exactly.
pub fn to_canonical<T: Serialize + ?Sized>(t: &T) -> Result<Vec<u8>, JcsError> {
    // serde_json::to_value silently turns NaN into null: check the numbers first.
    number_check::check(t)?;
    let v = serde_json::to_value(t).map_err(|e| JcsError::Serialize(e.to_string()))?;
    Ok(to_canonical_vec(&v))
}

/// SHA-256 of the canonical bytes of a value.
pub fn sha256_canonical<T: Serialize + ?Sized>(t: &T) -> Result<Sha256Digest, JcsError> {
    Ok(sha256_bytes(&to_canonical(t)?))
}

fn write_value(v: &serde_json::Value, out: &mut Vec<u8>) {
    use serde_json::Value;
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push(b'{');
            for (i, (k, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(k, out);
                out.push(b':');
                write_value(item, out);
            }
            out.push(b'}');
        }
    }
}

fn write_number(n: &serde_json::Number, out: &mut Vec<u8>) {
    if let Some(i) = n.as_i64() {
        if i128::from(i).abs() <= MAX_SAFE_INTEGER {
            out.extend_from_slice(i.to_string().as_bytes());
            return;
        }
    }
    // Floats, and integers too large to be exact: lay out the double they denote.
    // as_f64 is always Some without serde_json's arbitrary_precision feature.
    let x = n.as_f64().unwrap_or(0.0);
    out.extend_from_slice(format_es_number(x).as_bytes());
}

/// ECMAScript `Number.prototype.toString` of a finite double (non-finite values
/// give `"NaN"`, `"Infinity"`, `"-Infinity"`, which JCS callers never pass).
pub fn format_es_number(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return "0".into(); // covers -0
    }
    let sci = shortest_digits(x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exp + 1; // ES: the value is 0.digits * 10^n
    let mut s = String::with_capacity(32);
    if x < 0.0 {
        s.push('-');
    }
    if k <= n && n <= 21 {
        s.push_str(&digits);
        s.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        s.push_str(&digits[..n as usize]);
        s.push('.');
        s.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        s.push_str("0.");
        s.extend(std::iter::repeat_n('0', (-n) as usize));
        s.push_str(&digits);
    } else {
        s.push_str(&digits[..1]);
        if k > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        s.push('e');
        s.push(if n > 0 { '+' } else { '-' });
        s.push_str(&(n - 1).abs().to_string());
    }
    s
}

/// Shortest round-trip digits of a positive finite double as `d.ddde[-]x`, with
/// ECMAScript's tie rule: of two equally short candidates equally close to the
/// value, the even one. Rust's shortest mode breaks such ties upwards
/// (1424953923781206.25 -> ...206.3), its exact mode rounds half to even, so when the
/// exact rounding to the same digit count also round-trips, it is the answer.
fn shortest_digits(x: f64) -> String {
    let shortest = format!("{x:e}");
    let k = shortest
        .split_once('e')
        .map_or(0, |(m, _)| m.chars().filter(char::is_ascii_digit).count());
    if k < 2 {
        return shortest;
    }
    let nearest = format!("{:.*e}", k - 1, x);
    if nearest != shortest && nearest.parse::<f64>() == Ok(x) {
        nearest
    } else {
        shortest
    }
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            0x08 => Some(b"\\b"),
            b'\t' => Some(b"\\t"),
            b'\n' => Some(b"\\n"),
            0x0c => Some(b"\\f"),
            b'\r' => Some(b"\\r"),
            0..=0x1f => None,
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        match esc {
            Some(e) => out.extend_from_slice(e),
            None => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 15) as usize]);
            }
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn es_layout_boundaries() {
        assert_eq!(format_es_number(1e21), "1e+21");
        assert_eq!(format_es_number(1e20), "100000000000000000000");
        assert_eq!(format_es_number(1e-7), "1e-7");
        assert_eq!(format_es_number(1.5e-7), "1.5e-7");
        assert_eq!(format_es_number(0.000001), "0.000001");
        assert_eq!(format_es_number(-0.0), "0");
        assert_eq!(format_es_number(-1.5), "-1.5");
        assert_eq!(format_es_number(123.0), "123");
        assert_eq!(format_es_number(0.1), "0.1");
    }

    #[test]
    fn big_integers_in_values_become_doubles() {
        let v = serde_json::json!(u64::MAX);
        assert_eq!(to_canonical_vec(&v), b"18446744073709552000");
        assert!(matches!(
            to_canonical(&(1u64 << 53)),
            Err(JcsError::IntegerTooLarge(_))
        ));
        assert_eq!(
            to_canonical(&((1u64 << 53) - 1)).unwrap(),
            b"9007199254740991"
        );
        assert_eq!(
            to_canonical(&-((1i64 << 53) - 1)).unwrap(),
            b"-9007199254740991"
        );
    }

    #[test]
    fn non_finite_is_an_error_not_null() {
        assert!(matches!(
            to_canonical(&f64::NAN),
            Err(JcsError::NonFinite(_))
        ));
        assert!(matches!(
            to_canonical(&vec![1.0, f64::INFINITY]),
            Err(JcsError::NonFinite(_))
        ));
        assert!(matches!(
            to_canonical(&f32::NEG_INFINITY),
            Err(JcsError::NonFinite(_))
        ));
    }
}
