//! RFC 8785 conformance: the RFC's own number table, sample object and key-order
//! example, plus (when `node` is on PATH) a cross-check against ECMAScript itself.

use orchestrate::evidence::jcs::{
    format_es_number, sha256_canonical, to_canonical, to_canonical_vec,
};
use serde_json::Value;

/// RFC 8785 Appendix B (finite entries): IEEE 754 bits -> canonical text.
const APPENDIX_B: &[(u64, &str)] = &[
    (0x0000000000000000, "0"),
    (0x8000000000000000, "0"),
    (0x0000000000000001, "5e-324"),
    (0x8000000000000001, "-5e-324"),
    (0x7fefffffffffffff, "1.7976931348623157e+308"),
    (0xffefffffffffffff, "-1.7976931348623157e+308"),
    (0x4340000000000000, "9007199254740992"),
    (0xc340000000000000, "-9007199254740992"),
    (0x4430000000000000, "295147905179352830000"),
    (0x44b52d02c7e14af5, "9.999999999999997e+22"),
    (0x44b52d02c7e14af6, "1e+23"),
    (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
    (0x444b1ae4d6e2ef4e, "999999999999999700000"),
    (0x444b1ae4d6e2ef4f, "999999999999999900000"),
    (0x444b1ae4d6e2ef50, "1e+21"),
    (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
    (0x3eb0c6f7a0b5ed8d, "0.000001"),
    (0x41b3de4355555553, "333333333.3333332"),
    (0x41b3de4355555554, "333333333.33333325"),
    (0x41b3de4355555555, "333333333.3333333"),
    (0x41b3de4355555556, "333333333.3333334"),
    (0x41b3de4355555557, "333333333.33333343"),
    (0xbecbf647612f3696, "-0.0000033333333333333333"),
    (0x43143ff3c1cb0959, "1424953923781206.2"),
];

#[test]
fn rfc8785_appendix_b_numbers() {
    for &(bits, want) in APPENDIX_B {
        let x = f64::from_bits(bits);
        assert_eq!(format_es_number(x), want, "bits {bits:016x}");
        // And through the Value path, as a record would see it.
        let v = serde_json::json!(x);
        assert_eq!(
            String::from_utf8(to_canonical_vec(&v)).unwrap(),
            want,
            "bits {bits:016x} via Value"
        );
    }
    assert_eq!(
        format_es_number(f64::from_bits(0x4100000000000000)),
        "131072"
    );
}

#[test]
fn rfc8785_sample_object() {
    // RFC 8785 section 3.2.2 input, written as JSON text.
    let input = r#"{
      "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
      "literals": [null, true, false]
    }"#;
    let v: Value = serde_json::from_str(input).unwrap();
    let want = "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\"string\":\"\u{20ac}$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}";
    assert_eq!(String::from_utf8(to_canonical_vec(&v)).unwrap(), want);
}

#[test]
fn rfc8785_key_order_is_utf16() {
    let input = r#"{
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis"
    }"#;
    let v: Value = serde_json::from_str(input).unwrap();
    let got = String::from_utf8(to_canonical_vec(&v)).unwrap();
    let want = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
                \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
                \"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
    assert_eq!(got, want);
    // UTF-8 byte order would put U+FB33 before U+1F600: make sure we did not.
    assert!(got.find('\u{1f600}').unwrap() < got.find('\u{fb33}').unwrap());
}

#[test]
fn string_escapes_are_minimal_and_lowercase() {
    let s: String = (0u8..0x20)
        .map(char::from)
        .chain("\"\\/\u{7f}é\u{2028}".chars())
        .collect();
    let got = String::from_utf8(to_canonical(&s).unwrap()).unwrap();
    let want = "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\
                \\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\
                \\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\\\"\\\\/\u{7f}é\u{2028}\"";
    assert_eq!(got, want);
}

#[test]
fn nested_structs_canonicalize_and_hash_stably() {
    #[derive(serde::Serialize)]
    struct Inner {
        z: u32,
        a: Vec<f64>,
    }
    #[derive(serde::Serialize)]
    struct Outer {
        name: &'static str,
        inner: Inner,
        empty: Vec<u8>,
        none: Option<u8>,
    }
    let o = Outer {
        name: "x",
        inner: Inner {
            z: 1,
            a: vec![1.0, 0.5, -0.0],
        },
        empty: vec![],
        none: None,
    };
    assert_eq!(
        String::from_utf8(to_canonical(&o).unwrap()).unwrap(),
        r#"{"empty":[],"inner":{"a":[1,0.5,0],"z":1},"name":"x","none":null}"#
    );
    let d1 = sha256_canonical(&o).unwrap();
    let reparsed: Value = serde_json::from_slice(&to_canonical(&o).unwrap()).unwrap();
    assert_eq!(sha256_canonical(&reparsed).unwrap(), d1);
}

/// Cross-check against a real ECMAScript engine: random doubles formatted by node's
/// `String(x)` must match ours byte for byte. Skipped where node is missing, unless
/// `ORCHESTRATE_REQUIRE_TOOLS=1` (CI), where that fails.
#[test]
fn numbers_match_node_when_available() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    if Command::new("node").arg("--version").output().is_err() {
        crate::support::skip_or_fail(crate::support::Need::Tools, "node is not on PATH");
        return;
    }
    // xorshift: deterministic, spread over all exponents.
    let mut s: u64 = 0x9e3779b97f4a7c15;
    let mut xs = Vec::new();
    while xs.len() < 20_000 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let x = f64::from_bits(s);
        if x.is_finite() {
            xs.push(x);
        }
    }
    // Ties between two equally short digit strings happen only where the double is
    // itself a short decimal ending in 5 (e.g. 2^50..2^53 with a .25 fraction):
    // random mantissas in that range, and in the integer range above it.
    for i in 0..20_000u64 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let exp = 1023 + 45 + (i % 30); // 2^45 .. 2^75
        xs.push(f64::from_bits((exp << 52) | (s & ((1 << 52) - 1))));
    }
    // Plus the layout boundaries, where random bits rarely land.
    for e in -30..=30 {
        for m in [1.0, 1.5, 9.999999999999998, 123456789.0] {
            xs.push(m * 10f64.powi(e));
        }
    }
    let mut child = Command::new("node")
        .arg("-e")
        .arg(
            "let d='';process.stdin.on('data',c=>d+=c).on('end',()=>{\
             const b=Buffer.from(d.trim(),'hex');const o=[];\
             for(let i=0;i<b.length;i+=8)o.push(String(b.readDoubleBE(i)));\
             process.stdout.write(o.join('\\n'))})",
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let hex: String = xs.iter().map(|x| format!("{:016x}", x.to_bits())).collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(hex.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let theirs: Vec<&str> = text.split('\n').collect();
    assert_eq!(theirs.len(), xs.len());
    for (x, t) in xs.iter().zip(theirs) {
        assert_eq!(format_es_number(*x), t, "bits {:016x}", x.to_bits());
    }
}

/// What `verify` relies on: canonical text parsed back and canonicalized again is the
/// same bytes (this needs serde_json's correctly rounded float parsing).
#[test]
fn canonical_text_round_trips_through_parse() {
    let mut s: u64 = 0x2545f4914f6cdd1d;
    let mut xs = Vec::new();
    while xs.len() < 20_000 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let x = f64::from_bits(s);
        if x.is_finite() {
            xs.push(x);
        }
    }
    let v = serde_json::json!({ "xs": xs });
    let once = to_canonical_vec(&v);
    let back: Value = serde_json::from_slice(&once).unwrap();
    assert_eq!(to_canonical_vec(&back), once);
    for x in xs {
        assert_eq!(format_es_number(x).parse::<f64>().unwrap(), x);
    }
}
