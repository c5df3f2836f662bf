//! The `.npy` header: magic, version (1.0, 2.0, 3.0), and the Python-literal dict
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
//!
//! The parser accepts exactly the subset numpy writes (string keys; string, bool and
//! int-tuple values) and rejects anything else with a reason; it never panics.

use super::dtype::{ByteOrder, DType, Order};

/// The six magic bytes every npy file starts with.
pub const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";

/// What an npy header says about the data that follows it.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyHeader {
    pub major: u8,
    pub minor: u8,
    pub dtype: DType,
    pub byte_order: ByteOrder,
    pub order: Order,
    pub shape: Vec<u64>,
    /// Offset of the first data byte from the start of the file.
    pub data_offset: usize,
}

/// Why a header could not be parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum NpyHeaderError {
    BadMagic,
    /// The prefix says the header is longer than the bytes available.
    Truncated {
        needed: u64,
    },
    Unsupported(String),
    UnsupportedDtype(String),
    Malformed(String),
}

/// Parses the header at the start of `bytes` (the whole file or at least its header).
pub fn parse_npy_header(bytes: &[u8]) -> Result<NpyHeader, NpyHeaderError> {
    let head = bytes.get(..6).unwrap_or(bytes);
    if !NPY_MAGIC.starts_with(head) {
        return Err(NpyHeaderError::BadMagic);
    }
    let (Some(&major), Some(&minor)) = (bytes.get(6), bytes.get(7)) else {
        // A prefix of the magic (or an empty file): the file was cut short.
        return Err(NpyHeaderError::Truncated { needed: 10 });
    };
    let (len, start) = match major {
        1 => {
            let b = bytes
                .get(8..10)
                .ok_or(NpyHeaderError::Truncated { needed: 10 })?;
            (usize::from(u16::from_le_bytes([b[0], b[1]])), 10usize)
        }
        2 | 3 => {
            let b = bytes
                .get(8..12)
                .ok_or(NpyHeaderError::Truncated { needed: 12 })?;
            let n = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            (usize::try_from(n).unwrap_or(usize::MAX), 12usize)
        }
        _ => {
            return Err(NpyHeaderError::Unsupported(format!(
                "npy format version {major}.{minor}"
            )))
        }
    };
    let end = start
        .checked_add(len)
        .ok_or(NpyHeaderError::Truncated { needed: u64::MAX })?;
    let raw = bytes
        .get(start..end)
        .ok_or(NpyHeaderError::Truncated { needed: end as u64 })?;
    // Version 1 and 2 headers are latin-1, version 3 utf-8; the dict itself is ASCII.
    let text = if major == 3 {
        std::str::from_utf8(raw)
            .map_err(|_| NpyHeaderError::Malformed("header is not UTF-8".into()))?
            .to_string()
    } else {
        raw.iter().map(|&b| char::from(b)).collect()
    };
    let dict = DictParser::new(&text).parse_dict()?;
    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    for (k, v) in dict {
        match (k.as_str(), v) {
            ("descr", Lit::Str(s)) => descr = Some(s),
            ("descr", Lit::Other(s)) => {
                return Err(NpyHeaderError::UnsupportedDtype(s));
            }
            ("fortran_order", Lit::Bool(b)) => fortran = Some(b),
            ("shape", Lit::Tuple(t)) => shape = Some(t),
            (k, _) => {
                return Err(NpyHeaderError::Malformed(format!(
                    "unexpected key or value for {k:?}"
                )))
            }
        }
    }
    let descr = descr.ok_or_else(|| NpyHeaderError::Malformed("no 'descr'".into()))?;
    let fortran = fortran.ok_or_else(|| NpyHeaderError::Malformed("no 'fortran_order'".into()))?;
    let shape = shape.ok_or_else(|| NpyHeaderError::Malformed("no 'shape'".into()))?;
    let (dtype, byte_order) =
        DType::from_npy_descr(&descr).ok_or(NpyHeaderError::UnsupportedDtype(descr))?;
    Ok(NpyHeader {
        major,
        minor,
        dtype,
        byte_order,
        order: if fortran { Order::Fortran } else { Order::C },
        shape,
        data_offset: end,
    })
}

/// A value in the header dict.
enum Lit {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
    /// Anything else (a structured dtype list, say), kept as text for the message.
    Other(String),
}

struct DictParser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> DictParser<'a> {
    fn new(s: &'a str) -> Self {
        DictParser {
            s: s.as_bytes(),
            pos: 0,
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, NpyHeaderError> {
        Err(NpyHeaderError::Malformed(format!(
            "{what} at byte {} of the header dict",
            self.pos
        )))
    }

    fn skip_ws(&mut self) {
        while self
            .s
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_whitespace())
        {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.pos).copied()
    }

    fn expect(&mut self, c: u8) -> Result<(), NpyHeaderError> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            self.err(&format!("expected {:?}", char::from(c)))
        }
    }

    fn parse_dict(&mut self) -> Result<Vec<(String, Lit)>, NpyHeaderError> {
        self.expect(b'{')?;
        let mut out = Vec::new();
        loop {
            if self.peek() == Some(b'}') {
                self.pos += 1;
                break;
            }
            let key = self.parse_str()?;
            self.expect(b':')?;
            let val = self.parse_value()?;
            out.push((key, val));
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                _ => return self.err("expected ',' or '}'"),
            }
        }
        // After the dict only padding (spaces and a newline) may follow.
        self.skip_ws();
        if self.pos != self.s.len() {
            return self.err("trailing bytes after the dict");
        }
        Ok(out)
    }

    fn parse_str(&mut self) -> Result<String, NpyHeaderError> {
        let q = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return self.err("expected a string"),
        };
        self.pos += 1;
        let start = self.pos;
        while let Some(&c) = self.s.get(self.pos) {
            if c == q {
                let s = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
                self.pos += 1;
                return Ok(s);
            }
            if c == b'\\' {
                return self.err("escapes in strings are not supported");
            }
            self.pos += 1;
        }
        self.err("unterminated string")
    }

    fn parse_value(&mut self) -> Result<Lit, NpyHeaderError> {
        match self.peek() {
            Some(b'\'' | b'"') => Ok(Lit::Str(self.parse_str()?)),
            Some(b'(') => Ok(Lit::Tuple(self.parse_tuple()?)),
            Some(b'[' | b'{') => {
                // A structured or nested dtype: capture the balanced text for the error.
                let start = self.pos;
                let mut depth = 0i32;
                while let Some(&c) = self.s.get(self.pos) {
                    self.pos += 1;
                    match c {
                        b'[' | b'{' | b'(' => depth += 1,
                        b']' | b'}' | b')' => {
                            depth -= 1;
                            if depth == 0 {
                                let t = String::from_utf8_lossy(&self.s[start..self.pos]);
                                return Ok(Lit::Other(t.into_owned()));
                            }
                        }
                        _ => {}
                    }
                }
                self.err("unbalanced brackets")
            }
            _ => {
                let start = self.pos;
                while self
                    .s
                    .get(self.pos)
                    .is_some_and(|c| c.is_ascii_alphabetic())
                {
                    self.pos += 1;
                }
                match &self.s[start..self.pos] {
                    b"True" => Ok(Lit::Bool(true)),
                    b"False" => Ok(Lit::Bool(false)),
                    _ => {
                        self.pos = start;
                        self.err("expected a value")
                    }
                }
            }
        }
    }

    fn parse_tuple(&mut self) -> Result<Vec<u64>, NpyHeaderError> {
        self.expect(b'(')?;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                Some(b')') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(c) if c.is_ascii_digit() => {
                    let mut v: u64 = 0;
                    while let Some(&d) = self.s.get(self.pos) {
                        if !d.is_ascii_digit() {
                            break;
                        }
                        v = match v
                            .checked_mul(10)
                            .and_then(|v| v.checked_add(u64::from(d - b'0')))
                        {
                            Some(v) => v,
                            None => return self.err("dimension too large"),
                        };
                        self.pos += 1;
                    }
                    // numpy on some platforms wrote `3L` for longs.
                    if self.s.get(self.pos) == Some(&b'L') {
                        self.pos += 1;
                    }
                    out.push(v);
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b')') => {}
                        _ => return self.err("expected ',' or ')' in shape"),
                    }
                }
                _ => return self.err("expected a dimension"),
            }
        }
    }
}
