//! File formats: `.npy` (v1.0, little-endian f32 / i64) and `.safetensors` (F32
//! only), both written by hand so the bytes are fully determined by the data, and read
//! back with bounds checks. Also SHA-256 hex and the metrics JSON.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::Error;

/// An f32 tensor: shape and row-major data.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub data: Vec<f32>,
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

fn fmt_err(path: &Path, msg: impl Into<String>) -> Error {
    Error::Format {
        path: path.to_path_buf(),
        msg: msg.into(),
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a reader never
/// sees a half-written file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let mut tmp = PathBuf::from(path);
    tmp.as_mut_os_string().push(".tmp");
    fs::write(&tmp, bytes).map_err(|e| io_err(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| io_err(path, e))
}

/// Reads a whole file.
pub fn read(path: &Path) -> Result<Vec<u8>, Error> {
    fs::read(path).map_err(|e| io_err(path, e))
}

/// Lowercase hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in d.iter() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn npy_bytes(descr: &str, shape: &[usize], payload: impl Iterator<Item = [u8; 4]>) -> Vec<u8> {
    let dims = match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::new();
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for b in payload {
        out.extend_from_slice(&b);
    }
    out
}

/// Writes an f32 array as `.npy`.
pub fn write_npy_f32(path: &Path, shape: &[usize], data: &[f32]) -> Result<(), Error> {
    write_atomic(
        path,
        &npy_bytes("<f4", shape, data.iter().map(|v| v.to_le_bytes())),
    )
}

/// Writes an i64 array as `.npy`.
pub fn write_npy_i64(path: &Path, data: &[i64]) -> Result<(), Error> {
    let mut bytes = npy_bytes("<i8", &[data.len()], std::iter::empty());
    for v in data {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    write_atomic(path, &bytes)
}

/// Reads a 1-D little-endian i64 `.npy` file.
pub fn read_npy_i64(path: &Path) -> Result<Vec<i64>, Error> {
    let bytes = read(path)?;
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(fmt_err(path, "not an .npy file"));
    }
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        _ => return Err(fmt_err(path, "unsupported .npy version")),
    };
    let header = bytes
        .get(start..start + hlen)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| fmt_err(path, "truncated .npy header"))?;
    if !header.contains("'<i8'") || header.contains("'fortran_order': True") {
        return Err(fmt_err(path, "expected little-endian i64 in C order"));
    }
    let body = &bytes[start + hlen..];
    if body.len() % 8 != 0 {
        return Err(fmt_err(path, "payload is not a whole number of i64"));
    }
    Ok(body
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

/// Writes F32 tensors, in the given order, as `.safetensors` with optional string
/// metadata. The header is padded with spaces to a multiple of 8 bytes.
pub fn write_safetensors(
    path: &Path,
    tensors: &[(&str, &[usize], &[f32])],
    metadata: &BTreeMap<String, String>,
) -> Result<(), Error> {
    let mut header = serde_json::Map::new();
    if !metadata.is_empty() {
        header.insert("__metadata__".into(), serde_json::to_value(metadata)?);
    }
    let mut offset = 0usize;
    for (name, shape, data) in tensors {
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(fmt_err(path, format!("tensor {name}: shape/data mismatch")));
        }
        header.insert(
            (*name).to_string(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + n * 4]}),
        );
        offset += n * 4;
    }
    let mut h = serde_json::to_string(&header)?;
    while h.len() % 8 != 0 {
        h.push(' ');
    }
    let mut out = Vec::with_capacity(8 + h.len() + offset);
    out.extend_from_slice(&(h.len() as u64).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    for (_, _, data) in tensors {
        for v in *data {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    write_atomic(path, &out)
}

/// The parsed header of a `.safetensors` file plus its bytes.
pub struct SafeTensors {
    path: PathBuf,
    bytes: Vec<u8>,
    data_start: usize,
    header: serde_json::Map<String, serde_json::Value>,
}

impl SafeTensors {
    /// Reads and parses a `.safetensors` file.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let bytes = read(path)?;
        Self::from_bytes(path, bytes)
    }

    /// Parses bytes already read from `path`.
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Self, Error> {
        let len = bytes
            .get(..8)
            .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
            .ok_or_else(|| fmt_err(path, "shorter than a safetensors header"))?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| l.checked_add(8))
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| fmt_err(path, "header length past the end of the file"))?;
        let header: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&bytes[8..end])
                .map_err(|e| fmt_err(path, format!("bad header: {e}")))?;
        Ok(Self {
            path: path.to_path_buf(),
            bytes,
            data_start: end,
            header,
        })
    }

    /// A metadata value, if present.
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.header
            .get("__metadata__")
            .and_then(|m| m.get(key))
            .and_then(|v| v.as_str())
    }

    /// One F32 tensor by name.
    pub fn tensor(&self, name: &str) -> Result<Tensor, Error> {
        let info = self
            .header
            .get(name)
            .ok_or_else(|| fmt_err(&self.path, format!("no tensor named {name:?}")))?;
        if info.get("dtype").and_then(|d| d.as_str()) != Some("F32") {
            return Err(fmt_err(
                &self.path,
                format!("tensor {name}: dtype is not F32"),
            ));
        }
        let shape: Vec<usize> = info
            .get("shape")
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .ok_or_else(|| fmt_err(&self.path, format!("tensor {name}: bad shape")))?;
        let offs: [usize; 2] = info
            .get("data_offsets")
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .ok_or_else(|| fmt_err(&self.path, format!("tensor {name}: bad offsets")))?;
        let n: usize = shape.iter().product();
        let raw = self
            .bytes
            .get(self.data_start + offs[0]..)
            .and_then(|b| b.get(..offs[1].saturating_sub(offs[0])))
            .filter(|b| b.len() == n * 4)
            .ok_or_else(|| fmt_err(&self.path, format!("tensor {name}: data out of range")))?;
        let data = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(Tensor { shape, data })
    }
}

/// Writes `value` as JSON to the file named by env `ORCHESTRATE_METRICS`, if set.
pub fn write_metrics(value: &serde_json::Value) -> Result<(), Error> {
    if let Some(p) = std::env::var_os("ORCHESTRATE_METRICS") {
        let path = PathBuf::from(p);
        let s = serde_json::to_string_pretty(value)?;
        fs::write(&path, s + "\n").map_err(|e| io_err(&path, e))?;
    }
    Ok(())
}
