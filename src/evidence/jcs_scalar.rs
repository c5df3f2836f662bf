//! How RFC 8785 writes the two scalars that need care: strings escaped minimally,
//! numbers laid out as ECMAScript's `Number.prototype.toString` does. Shared by the
//! value-tree writer (`jcs`) and the one that writes from `Serialize` (`jcs_stream`).

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

pub(crate) fn write_string(s: &str, out: &mut Vec<u8>) {
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
