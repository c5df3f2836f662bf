//! The canonical writer (`jcs_stream`) against the value-tree path it replaces:
//! the same bytes for every record on file, every serde shape, and random values.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::Serialize;
use serde_json::Value;

use crate::evidence::jcs::{to_canonical, to_canonical_pieces, to_canonical_vec, JcsError};

/// The bytes the value tree gives, the reference.
fn by_tree<T: Serialize>(t: &T) -> Vec<u8> {
    to_canonical_vec(&serde_json::to_value(t).unwrap())
}

fn same<T: Serialize>(t: &T) {
    let streamed = to_canonical(t).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&streamed),
        String::from_utf8_lossy(&by_tree(t))
    );
    assert_eq!(to_canonical_pieces(t).unwrap().concat(), streamed);
}

#[test]
fn records_on_file_are_written_back_byte_for_byte() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![
        root.join("tests/fixtures/report/smoke/record.json"),
        root.join("tests/fixtures/records/measure-v2.json"),
    ];
    for e in std::fs::read_dir(root.join("records")).unwrap().flatten() {
        files.push(e.path().join("record.json"));
    }
    let mut checked = 0;
    for f in files.iter().filter(|f| f.is_file()) {
        let bytes = std::fs::read(f).unwrap();
        let rec: crate::record::Record = serde_json::from_slice(&bytes).unwrap();
        same(&rec);
        let tree: Value = serde_json::from_slice(&bytes).unwrap();
        same(&tree);
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} records found");
}

#[derive(Serialize)]
enum Shape {
    Unit,
    Newtype(u8),
    Tuple(i32, String),
    Struct { z: bool, a: Option<f32> },
}

#[derive(Serialize)]
#[serde(tag = "kind")]
enum Tagged {
    One { b: u8, a: u8 },
}

#[derive(Serialize)]
struct Unit;

#[derive(Serialize)]
struct Wrapper(Vec<Shape>);

#[derive(Serialize)]
struct Inner {
    b: u8,
    x: u8,
}

#[derive(Serialize)]
struct Every {
    shapes: Wrapper,
    tagged: Tagged,
    unit: Unit,
    nothing: (),
    tuple: (u8, char, &'static str),
    #[serde(with = "serde_bytes_as_seq")]
    bytes: Vec<u8>,
    int_keys: BTreeMap<i64, u8>,
    bool_keys: BTreeMap<bool, u8>,
    float: f32,
    #[serde(flatten)]
    inner: Inner,
    x: u8,
    big: u64,
    neg: i128,
}

mod serde_bytes_as_seq {
    pub fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }
}

#[test]
fn every_serde_shape_matches_the_value_tree() {
    let every = Every {
        shapes: Wrapper(vec![
            Shape::Unit,
            Shape::Newtype(7),
            Shape::Tuple(-3, "t\u{1}".into()),
            Shape::Struct {
                z: true,
                a: Some(0.1),
            },
            Shape::Struct { z: false, a: None },
        ]),
        tagged: Tagged::One { b: 2, a: 1 },
        unit: Unit,
        nothing: (),
        tuple: (1, '\u{1F600}', "\u{e000}"),
        bytes: vec![0, 255, 16],
        int_keys: [(-5, 1), (10, 2), (9, 3)].into_iter().collect(),
        bool_keys: [(true, 1), (false, 0)].into_iter().collect(),
        float: 1.5e-7,
        inner: Inner { b: 1, x: 2 },
        // `x` twice (flattened and own): a map keeps the last.
        x: 9,
        big: (1 << 53) - 1,
        neg: -((1 << 53) - 1),
    };
    same(&every);
}

#[test]
fn keys_sort_by_utf16_not_utf8() {
    // U+1F600 is D83D DE00 in UTF-16, before U+E000; in UTF-8 it sorts after.
    let m: BTreeMap<String, u8> = [("\u{e000}".to_string(), 1), ("\u{1F600}".into(), 2)]
        .into_iter()
        .collect();
    let bytes = to_canonical(&m).unwrap();
    assert_eq!(bytes, "{\"\u{1F600}\":2,\"\u{e000}\":1}".as_bytes());
    same(&m);
}

#[test]
fn refused_numbers_are_refused_wherever_they_sit() {
    #[derive(Serialize)]
    struct Deep {
        ok: Vec<f64>,
        inner: BTreeMap<String, Vec<u64>>,
    }
    let nan = Deep {
        ok: vec![1.0, f64::NAN],
        inner: BTreeMap::new(),
    };
    assert!(matches!(to_canonical(&nan), Err(JcsError::NonFinite(_))));
    let big = Deep {
        ok: vec![],
        inner: [("k".to_string(), vec![1, 1 << 53])].into_iter().collect(),
    };
    assert!(matches!(
        to_canonical(&big),
        Err(JcsError::IntegerTooLarge(9007199254740992))
    ));
    assert!(matches!(
        to_canonical(&u128::MAX),
        Err(JcsError::IntegerTooLarge(_))
    ));
}

#[test]
fn empty_and_scalar_tops() {
    same(&BTreeMap::<String, u8>::new());
    same(&Vec::<u8>::new());
    same(&"x");
    same(&3.25f64);
    same(&Option::<u8>::None);
}

fn json() -> impl Strategy<Value = Value> {
    let text = "[\\PC\u{0}-\u{1f}\u{e000}-\u{e00f}\u{1F600}-\u{1F60F}\"\\\\]{0,8}";
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-(1i64 << 53) + 1..(1i64 << 53)).prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(Value::from),
        text.prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(text, inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn random_values_match_the_value_tree(v in json()) {
        let streamed = to_canonical(&v).unwrap();
        prop_assert_eq!(&streamed, &to_canonical_vec(&v));
        prop_assert_eq!(to_canonical_pieces(&v).unwrap().concat(), streamed);
    }
}
