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

pub use super::jcs_scalar::format_es_number;
use super::jcs_scalar::write_string;

pub use super::jcs_error::{JcsError, MAX_SAFE_INTEGER};

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
/// integers that a double cannot hold exactly. Written without a value tree
/// (`jcs_stream`); the bytes are those of [`to_canonical_vec`] on `to_value(t)`.
pub fn to_canonical<T: Serialize + ?Sized>(t: &T) -> Result<Vec<u8>, JcsError> {
    let pieces = to_canonical_pieces(t)?;
    let mut out = Vec::with_capacity(pieces.iter().map(|p| p.len()).sum());
    for p in &pieces {
        out.extend_from_slice(p);
    }
    Ok(out)
}

/// Canonical bytes of `t` as pieces to be written one after another, so a large
/// value (a record of 100 000 cells) reaches a file or a digest without first
/// being joined into one buffer.
pub fn to_canonical_pieces<T: Serialize + ?Sized>(t: &T) -> Result<Vec<Vec<u8>>, JcsError> {
    let mut out = Vec::new();
    let top = super::jcs_stream::Canon {
        out: &mut out,
        top: true,
    };
    let Some(members) = t.serialize(top)? else {
        return Ok(vec![out]);
    };
    let mut pieces = Vec::with_capacity(2 * members.len() + 1);
    for (i, (k, v)) in members.into_iter().enumerate() {
        let mut head = vec![if i == 0 { b'{' } else { b',' }];
        write_string(&k, &mut head);
        head.push(b':');
        pieces.push(head);
        pieces.push(v);
    }
    pieces.push(if pieces.is_empty() {
        b"{}".to_vec()
    } else {
        b"}".to_vec()
    });
    Ok(pieces)
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

#[cfg(test)]
mod stream_tests;

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
