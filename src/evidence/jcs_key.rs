//! Map keys for the canonical writer: what `serde_json` accepts as an object key
//! (strings, chars, booleans, integers, unit variants, newtypes of those), written
//! as it writes them. Float keys are refused: `serde_json` lays them out with a
//! formatter of its own that canonical JSON does not promise to match.

use serde::ser::{self, Impossible, Serialize};

use super::jcs_error::JcsError;

pub(crate) struct KeySer;

fn not_a_key() -> JcsError {
    JcsError::Serialize("a map key must be a string, an integer or a boolean".into())
}

type Never = Impossible<String, JcsError>;

impl ser::Serializer for KeySer {
    type Ok = String;
    type Error = JcsError;
    type SerializeSeq = Never;
    type SerializeTuple = Never;
    type SerializeTupleStruct = Never;
    type SerializeTupleVariant = Never;
    type SerializeMap = Never;
    type SerializeStruct = Never;
    type SerializeStructVariant = Never;

    fn serialize_bool(self, v: bool) -> Result<String, JcsError> {
        Ok(v.to_string())
    }
    fn serialize_i8(self, v: i8) -> Result<String, JcsError> {
        Ok(v.to_string())
    }
    fn serialize_i16(self, v: i16) -> Result<String, JcsError> {
        Ok(v.to_string())
    }
    fn serialize_i32(self, v: i32) -> Result<String, JcsError> {
        Ok(v.to_string())
    }
    fn serialize_i64(self, v: i64) -> Result<String, JcsError> {
        Ok(v.to_string())
    }
    fn serialize_i128(self, v: i128) -> Result<String, JcsError> {
        Ok(v.to_string())
    }
    fn serialize_u8(self, v: u8) -> Result<String, JcsError> {
        Ok(v.to_string())
    }
    fn serialize_u16(self, v: u16) -> Result<String, JcsError> {
        Ok(v.to_string())
    }
    fn serialize_u32(self, v: u32) -> Result<String, JcsError> {
        Ok(v.to_string())
    }
    fn serialize_u64(self, v: u64) -> Result<String, JcsError> {
        Ok(v.to_string())
    }
    fn serialize_u128(self, v: u128) -> Result<String, JcsError> {
        Ok(v.to_string())
    }
    fn serialize_f32(self, _: f32) -> Result<String, JcsError> {
        Err(not_a_key())
    }
    fn serialize_f64(self, _: f64) -> Result<String, JcsError> {
        Err(not_a_key())
    }
    fn serialize_char(self, v: char) -> Result<String, JcsError> {
        Ok(v.to_string())
    }
    fn serialize_str(self, v: &str) -> Result<String, JcsError> {
        Ok(v.to_owned())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<String, JcsError> {
        Err(not_a_key())
    }
    fn serialize_none(self) -> Result<String, JcsError> {
        Err(not_a_key())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<String, JcsError> {
        Err(not_a_key())
    }
    fn serialize_unit(self) -> Result<String, JcsError> {
        Err(not_a_key())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<String, JcsError> {
        Err(not_a_key())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<String, JcsError> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<String, JcsError> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, JcsError> {
        Err(not_a_key())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Never, JcsError> {
        Err(not_a_key())
    }
    fn serialize_tuple(self, _: usize) -> Result<Never, JcsError> {
        Err(not_a_key())
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Never, JcsError> {
        Err(not_a_key())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Never, JcsError> {
        Err(not_a_key())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Never, JcsError> {
        Err(not_a_key())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Never, JcsError> {
        Err(not_a_key())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Never, JcsError> {
        Err(not_a_key())
    }
}
