//! Serde helpers for numbers that canonical JSON cannot hold as they are.
//!
//! - `f64` fields: `#[serde(with = "crate::evidence::float")]` writes finite values as
//!   numbers and NaN / ±infinity as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`
//!   (ECMAScript's names); reading accepts either form. `Option<f64>`:
//!   `#[serde(default, with = "crate::evidence::float::option")]`.
//! - Durations: [`duration_us`] (and [`duration_us::option`]) store a
//!   `std::time::Duration` as an integer count of **microseconds**. Microseconds
//!   because that is what the kernel reports CPU time in (rusage, cgroup
//!   `cpu.stat`), short steps keep three significant digits below a millisecond, and
//!   2^53 µs is still 285 years, so the value stays an exact JSON integer. Name such
//!   fields with a `_us` suffix. Sub-microsecond parts are truncated.

use serde::de::{self, Deserializer, Visitor};
use serde::Serializer;
use std::fmt;

/// Serialize an `f64`, non-finite values as strings.
pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    if x.is_finite() {
        s.serialize_f64(*x)
    } else {
        s.serialize_str(non_finite_name(*x))
    }
}

/// Deserialize an `f64` written as a number or as `"NaN"`, `"Infinity"`, `"-Infinity"`.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    d.deserialize_any(F64Visitor)
}

fn non_finite_name(x: f64) -> &'static str {
    if x.is_nan() {
        "NaN"
    } else if x > 0.0 {
        "Infinity"
    } else {
        "-Infinity"
    }
}

struct F64Visitor;

impl<'de> Visitor<'de> for F64Visitor {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number, or \"NaN\", \"Infinity\" or \"-Infinity\"")
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
        match v {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
        }
    }
}

/// The same for `Option<f64>` (`None` is `null`); pair it with `#[serde(default)]`
/// so a missing field reads as `None`.
pub mod option {
    use super::*;

    /// Serialize an `Option<f64>`, non-finite values as strings.
    pub fn serialize<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match x {
            Some(x) => super::serialize(x, s),
            None => s.serialize_none(),
        }
    }

    /// Deserialize an `Option<f64>` from `null`, a number or a non-finite name.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        d.deserialize_option(OptVisitor)
    }

    struct OptVisitor;

    impl<'de> Visitor<'de> for OptVisitor {
        type Value = Option<f64>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("null, a number, or \"NaN\", \"Infinity\" or \"-Infinity\"")
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            super::deserialize(d).map(Some)
        }
    }
}

/// A `Duration` as integer microseconds (see the module docs for why µs).
pub mod duration_us {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    /// Largest count that stays an exact JSON number (2^53 - 1 µs, about 285 years);
    /// longer durations are clamped to it rather than written inexactly.
    pub const MAX_US: u64 = (1 << 53) - 1;

    /// Whole microseconds of `d`, clamped to [`MAX_US`].
    pub fn to_us(d: Duration) -> u64 {
        u64::try_from(d.as_micros()).unwrap_or(u64::MAX).min(MAX_US)
    }

    /// Serialize a `Duration` as integer microseconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(to_us(*d))
    }

    /// Deserialize integer microseconds into a `Duration`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_micros)
    }

    /// The same for `Option<Duration>`; pair it with `#[serde(default)]`.
    pub mod option {
        use super::*;

        /// Serialize an `Option<Duration>` as integer microseconds or `null`.
        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => s.serialize_some(&to_us(*d)),
                None => s.serialize_none(),
            }
        }

        /// Deserialize `null` or integer microseconds.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            Option::<u64>::deserialize(d).map(|o| o.map(Duration::from_micros))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};
    use std::time::Duration;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct M {
        #[serde(with = "crate::evidence::float")]
        v: f64,
        #[serde(default, with = "crate::evidence::float::option")]
        o: Option<f64>,
        #[serde(with = "crate::evidence::float::duration_us")]
        wall_us: Duration,
        #[serde(default, with = "crate::evidence::float::duration_us::option")]
        cpu_us: Option<Duration>,
    }

    fn json(m: &M) -> String {
        String::from_utf8(crate::evidence::jcs::to_canonical(m).unwrap()).unwrap()
    }

    #[test]
    fn non_finite_written_as_names_and_read_back() {
        for (x, name) in [
            (f64::NAN, "\"NaN\""),
            (f64::INFINITY, "\"Infinity\""),
            (f64::NEG_INFINITY, "\"-Infinity\""),
            (1.5, "1.5"),
        ] {
            let m = M {
                v: x,
                o: Some(x),
                wall_us: Duration::ZERO,
                cpu_us: None,
            };
            let text = json(&m);
            assert_eq!(
                text,
                format!(r#"{{"cpu_us":null,"o":{name},"v":{name},"wall_us":0}}"#)
            );
            let back: M = serde_json::from_str(&text).unwrap();
            assert_eq!(back.v.to_bits(), x.to_bits());
            assert_eq!(back.o.map(f64::to_bits), Some(x.to_bits()));
        }
    }

    #[test]
    fn reads_integers_missing_options_and_rejects_other_strings() {
        let m: M = serde_json::from_str(r#"{"v":3,"wall_us":1500}"#).unwrap();
        assert_eq!(m.v, 3.0);
        assert_eq!(m.o, None);
        assert_eq!(m.wall_us, Duration::from_micros(1500));
        assert_eq!(m.cpu_us, None);
        assert!(serde_json::from_str::<M>(r#"{"v":"nan","wall_us":0}"#).is_err());
        assert!(serde_json::from_str::<M>(r#"{"v":1,"o":"inf","wall_us":0}"#).is_err());
    }

    #[test]
    fn durations_are_whole_microseconds_and_clamped() {
        let m = M {
            v: 0.0,
            o: None,
            wall_us: Duration::from_nanos(2_500_999),
            cpu_us: Some(Duration::from_secs(u64::MAX)),
        };
        assert_eq!(
            json(&m),
            r#"{"cpu_us":9007199254740991,"o":null,"v":0,"wall_us":2500}"#
        );
    }
}
