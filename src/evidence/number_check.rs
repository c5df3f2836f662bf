//! A serializer that produces nothing and only looks at numbers: `serde_json::to_value`
//! turns NaN and infinities into `null` without a word, so `jcs::to_canonical`
//! walks the value once with this first to refuse them, and integers beyond ±(2^53-1).

use serde::ser::{self, Serialize};

/// Largest integer that an IEEE 754 double holds exactly (2^53 - 1): JCS numbers
/// are doubles, so larger integers would not survive a round trip through them.
pub const MAX_SAFE_INTEGER: i128 = (1 << 53) - 1;

/// Why a value cannot be canonicalized.
#[derive(Debug, thiserror::Error)]
pub enum JcsError {
    /// A float was NaN or infinite: JSON has no such number (write it with
    /// `evidence::float`, which stores it as a string).
    #[error("non-finite number {0} cannot be written as JSON (use evidence::float to store it as a string)")]
    NonFinite(f64),
    /// An integer outside ±(2^53-1) would lose digits as a double.
    #[error("integer {0} is outside ±(2^53-1) and would lose precision in canonical JSON")]
    IntegerTooLarge(i128),
    /// The value could not be serialized at all (a map with non-string keys, a
    /// failing `Serialize` impl).
    #[error("cannot serialize to JSON: {0}")]
    Serialize(String),
}

impl ser::Error for JcsError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        JcsError::Serialize(msg.to_string())
    }
}

/// Walk `t` and fail on the first number that canonical JSON cannot hold.
pub(crate) fn check<T: Serialize + ?Sized>(t: &T) -> Result<(), JcsError> {
    t.serialize(Checker)
}

struct Checker;

fn int(i: i128) -> Result<(), JcsError> {
    if i.abs() <= MAX_SAFE_INTEGER {
        Ok(())
    } else {
        Err(JcsError::IntegerTooLarge(i))
    }
}

fn float(x: f64) -> Result<(), JcsError> {
    if x.is_finite() {
        Ok(())
    } else {
        Err(JcsError::NonFinite(x))
    }
}

impl ser::Serializer for Checker {
    type Ok = ();
    type Error = JcsError;
    type SerializeSeq = Checker;
    type SerializeTuple = Checker;
    type SerializeTupleStruct = Checker;
    type SerializeTupleVariant = Checker;
    type SerializeMap = Checker;
    type SerializeStruct = Checker;
    type SerializeStructVariant = Checker;

    fn serialize_bool(self, _: bool) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<(), JcsError> {
        int(v.into())
    }
    fn serialize_i128(self, v: i128) -> Result<(), JcsError> {
        int(v)
    }
    fn serialize_u8(self, _: u8) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<(), JcsError> {
        int(v.into())
    }
    fn serialize_u128(self, v: u128) -> Result<(), JcsError> {
        int(i128::try_from(v).unwrap_or(i128::MAX))
    }
    fn serialize_f32(self, v: f32) -> Result<(), JcsError> {
        float(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<(), JcsError> {
        float(v)
    }
    fn serialize_char(self, _: char) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), JcsError> {
        v.serialize(Checker)
    }
    fn serialize_unit(self) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), JcsError> {
        v.serialize(Checker)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        v: &T,
    ) -> Result<(), JcsError> {
        v.serialize(Checker)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Checker, JcsError> {
        Ok(Checker)
    }
    fn serialize_tuple(self, _: usize) -> Result<Checker, JcsError> {
        Ok(Checker)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Checker, JcsError> {
        Ok(Checker)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Checker, JcsError> {
        Ok(Checker)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Checker, JcsError> {
        Ok(Checker)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Checker, JcsError> {
        Ok(Checker)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Checker, JcsError> {
        Ok(Checker)
    }
}

impl ser::SerializeSeq for Checker {
    type Ok = ();
    type Error = JcsError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), JcsError> {
        v.serialize(Checker)
    }
    fn end(self) -> Result<(), JcsError> {
        Ok(())
    }
}

impl ser::SerializeTuple for Checker {
    type Ok = ();
    type Error = JcsError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), JcsError> {
        v.serialize(Checker)
    }
    fn end(self) -> Result<(), JcsError> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Checker {
    type Ok = ();
    type Error = JcsError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), JcsError> {
        v.serialize(Checker)
    }
    fn end(self) -> Result<(), JcsError> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for Checker {
    type Ok = ();
    type Error = JcsError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), JcsError> {
        v.serialize(Checker)
    }
    fn end(self) -> Result<(), JcsError> {
        Ok(())
    }
}

impl ser::SerializeMap for Checker {
    type Ok = ();
    type Error = JcsError;
    // Keys are left to serde_json: it writes number keys as strings, so their size
    // is no precision problem.
    fn serialize_key<T: Serialize + ?Sized>(&mut self, _: &T) -> Result<(), JcsError> {
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), JcsError> {
        v.serialize(Checker)
    }
    fn end(self) -> Result<(), JcsError> {
        Ok(())
    }
}

impl ser::SerializeStruct for Checker {
    type Ok = ();
    type Error = JcsError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        v: &T,
    ) -> Result<(), JcsError> {
        v.serialize(Checker)
    }
    fn end(self) -> Result<(), JcsError> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for Checker {
    type Ok = ();
    type Error = JcsError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        v: &T,
    ) -> Result<(), JcsError> {
        v.serialize(Checker)
    }
    fn end(self) -> Result<(), JcsError> {
        Ok(())
    }
}
