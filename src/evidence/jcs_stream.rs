//! Canonical JSON (RFC 8785) written straight from `Serialize`, byte for byte what
//! `to_canonical_vec(&serde_json::to_value(t))` writes, without the value tree.
//!
//! The tree cost about ten times the finished bytes (a `BTreeMap` node and a
//! `String` per member): a record of 100 000 sweep cells would have needed
//! gigabytes for a moment to be written. Here an object buffers only its members'
//! finished bytes, sorts them by key and writes them out; an array writes its
//! items in place. The top-level object is handed back as its sorted members, so
//! a writer can stream them to a file without joining them first.
//!
//! Numbers are refused as `to_canonical` refuses them (non-finite floats, integers
//! beyond ±(2^53-1)), at the first one met in serialization order. Maps keep the
//! last of duplicate keys, as a `serde_json::Map` does.

use serde::ser::{self, Serialize};

use super::jcs_error::{JcsError, MAX_SAFE_INTEGER};
use super::jcs_scalar::{format_es_number, write_string};

/// An object's members, sorted and without duplicate keys: key and canonical value.
pub(crate) type Members = Vec<(String, Vec<u8>)>;

/// Writes one value into `out`; `top` hands an object back as its members instead.
pub(crate) struct Canon<'a> {
    pub(crate) out: &'a mut Vec<u8>,
    pub(crate) top: bool,
}

impl<'a> Canon<'a> {
    fn nested(out: &'a mut Vec<u8>) -> Self {
        Canon { out, top: false }
    }

    fn int(self, i: i128) -> Result<Option<Members>, JcsError> {
        if i.abs() > MAX_SAFE_INTEGER {
            return Err(JcsError::IntegerTooLarge(i));
        }
        self.out.extend_from_slice(i.to_string().as_bytes());
        Ok(None)
    }

    fn float(self, x: f64) -> Result<Option<Members>, JcsError> {
        if !x.is_finite() {
            return Err(JcsError::NonFinite(x));
        }
        self.out.extend_from_slice(format_es_number(x).as_bytes());
        Ok(None)
    }

    fn raw(self, bytes: &[u8]) -> Result<Option<Members>, JcsError> {
        self.out.extend_from_slice(bytes);
        Ok(None)
    }

    /// `{"variant":` before an enum variant's content; the closing `}` is the end's.
    fn open_variant(&mut self, variant: &str) {
        self.out.push(b'{');
        write_string(variant, self.out);
        self.out.push(b':');
    }
}

/// Serialize one value into a fresh buffer.
fn value_bytes<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, JcsError> {
    let mut buf = Vec::new();
    v.serialize(Canon::nested(&mut buf))?;
    Ok(buf)
}

impl<'a> ser::Serializer for Canon<'a> {
    type Ok = Option<Members>;
    type Error = JcsError;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = Array<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    fn serialize_bool(self, v: bool) -> Result<Self::Ok, JcsError> {
        self.raw(if v { b"true" } else { b"false" })
    }
    fn serialize_i8(self, v: i8) -> Result<Self::Ok, JcsError> {
        self.int(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<Self::Ok, JcsError> {
        self.int(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<Self::Ok, JcsError> {
        self.int(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<Self::Ok, JcsError> {
        self.int(v.into())
    }
    fn serialize_i128(self, v: i128) -> Result<Self::Ok, JcsError> {
        self.int(v)
    }
    fn serialize_u8(self, v: u8) -> Result<Self::Ok, JcsError> {
        self.int(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<Self::Ok, JcsError> {
        self.int(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<Self::Ok, JcsError> {
        self.int(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<Self::Ok, JcsError> {
        self.int(v.into())
    }
    fn serialize_u128(self, v: u128) -> Result<Self::Ok, JcsError> {
        match i128::try_from(v) {
            Ok(i) => self.int(i),
            Err(_) => Err(JcsError::IntegerTooLarge(i128::MAX)),
        }
    }
    fn serialize_f32(self, v: f32) -> Result<Self::Ok, JcsError> {
        // serde_json widens an f32 to the f64 it denotes; so does this.
        self.float(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<Self::Ok, JcsError> {
        self.float(v)
    }
    fn serialize_char(self, v: char) -> Result<Self::Ok, JcsError> {
        write_string(v.encode_utf8(&mut [0u8; 4]), self.out);
        Ok(None)
    }
    fn serialize_str(self, v: &str) -> Result<Self::Ok, JcsError> {
        write_string(v, self.out);
        Ok(None)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Self::Ok, JcsError> {
        // serde_json's value tree holds bytes as an array of numbers.
        let mut seq = Array::open(self.out, false);
        for b in v {
            ser::SerializeSeq::serialize_element(&mut seq, b)?;
        }
        ser::SerializeSeq::end(seq)
    }
    fn serialize_none(self) -> Result<Self::Ok, JcsError> {
        self.raw(b"null")
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<Self::Ok, JcsError> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<Self::Ok, JcsError> {
        self.raw(b"null")
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Self::Ok, JcsError> {
        self.raw(b"null")
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Self::Ok, JcsError> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<Self::Ok, JcsError> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<Self::Ok, JcsError> {
        self.open_variant(variant);
        v.serialize(Canon::nested(self.out))?;
        self.out.push(b'}');
        Ok(None)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Array<'a>, JcsError> {
        Ok(Array::open(self.out, false))
    }
    fn serialize_tuple(self, _: usize) -> Result<Array<'a>, JcsError> {
        Ok(Array::open(self.out, false))
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Array<'a>, JcsError> {
        Ok(Array::open(self.out, false))
    }
    fn serialize_tuple_variant(
        mut self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Array<'a>, JcsError> {
        self.open_variant(variant);
        Ok(Array::open(self.out, true))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Object<'a>, JcsError> {
        Ok(Object::new(self, false))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Object<'a>, JcsError> {
        Ok(Object::new(self, false))
    }
    fn serialize_struct_variant(
        mut self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Object<'a>, JcsError> {
        self.open_variant(variant);
        Ok(Object::new(Canon::nested(self.out), true))
    }
}

/// An array being written in place; `variant` closes the `{"variant":` around it.
pub(crate) struct Array<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    variant: bool,
}

impl<'a> Array<'a> {
    fn open(out: &'a mut Vec<u8>, variant: bool) -> Self {
        out.push(b'[');
        Array {
            out,
            first: true,
            variant,
        }
    }

    fn element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), JcsError> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        v.serialize(Canon::nested(self.out))?;
        Ok(())
    }

    fn close(self) -> Result<Option<Members>, JcsError> {
        self.out.push(b']');
        if self.variant {
            self.out.push(b'}');
        }
        Ok(None)
    }
}

/// The four array-shaped serde traits, each one item at a time.
macro_rules! array_of {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Array<'_> {
            type Ok = Option<Members>;
            type Error = JcsError;
            fn $method<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), JcsError> {
                self.element(v)
            }
            fn end(self) -> Result<Self::Ok, JcsError> {
                self.close()
            }
        }
    )*};
}

array_of!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// An object's members collected as finished bytes, sorted when it ends.
pub(crate) struct Object<'a> {
    out: &'a mut Vec<u8>,
    top: bool,
    variant: bool,
    key: Option<String>,
    members: Members,
}

impl<'a> Object<'a> {
    fn new(at: Canon<'a>, variant: bool) -> Self {
        Object {
            out: at.out,
            top: at.top && !variant,
            variant,
            key: None,
            members: Vec::new(),
        }
    }

    fn member<T: Serialize + ?Sized>(&mut self, key: String, v: &T) -> Result<(), JcsError> {
        self.members.push((key, value_bytes(v)?));
        Ok(())
    }

    fn close(self) -> Result<Option<Members>, JcsError> {
        let members = sorted(self.members);
        if self.top {
            return Ok(Some(members));
        }
        write_object(&members, self.out);
        if self.variant {
            self.out.push(b'}');
        }
        Ok(None)
    }
}

/// Members in RFC 8785 order (UTF-16 code units of the keys), the last of equal keys kept.
fn sorted(mut members: Members) -> Members {
    // A stable sort keeps equal keys in insertion order, so the last is the newest.
    members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    let mut kept: Members = Vec::with_capacity(members.len());
    for m in members {
        match kept.last_mut() {
            Some(last) if last.0 == m.0 => *last = m,
            _ => kept.push(m),
        }
    }
    kept
}

/// `{"k":v,...}` from sorted members.
fn write_object(members: &Members, out: &mut Vec<u8>) {
    out.push(b'{');
    for (i, (k, v)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(k, out);
        out.push(b':');
        out.extend_from_slice(v);
    }
    out.push(b'}');
}

impl ser::SerializeMap for Object<'_> {
    type Ok = Option<Members>;
    type Error = JcsError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), JcsError> {
        self.key = Some(k.serialize(KeySer)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), JcsError> {
        let key = self
            .key
            .take()
            .ok_or_else(|| JcsError::Serialize("a map value came without its key".into()))?;
        self.member(key, v)
    }
    fn end(self) -> Result<Self::Ok, JcsError> {
        self.close()
    }
}

/// Structs and struct variants: a member per field.
macro_rules! struct_of {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Object<'_> {
            type Ok = Option<Members>;
            type Error = JcsError;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                k: &'static str,
                v: &T,
            ) -> Result<(), JcsError> {
                self.member(k.to_owned(), v)
            }
            fn end(self) -> Result<Self::Ok, JcsError> {
                self.close()
            }
        }
    )*};
}

struct_of!(SerializeStruct, SerializeStructVariant);

use super::jcs_key::KeySer;
