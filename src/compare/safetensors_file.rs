//! The safetensors header: an 8-byte little-endian length N, then N bytes of JSON
//! mapping tensor names to `{dtype, shape, data_offsets: [begin, end]}` (offsets into
//! the data that follows the header), plus an optional `__metadata__` map.
//!
//! Parsed here rather than through the `safetensors` crate so that every fault gets a
//! precise reason and so bf16/bool are mapped to our own [`DType`].

use super::dtype::DType;

/// One tensor entry of a safetensors header.
#[derive(Debug, Clone, PartialEq)]
pub struct SafetensorsEntry {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<u64>,
    /// Byte range from the start of the file.
    pub begin: usize,
    pub end: usize,
}

/// Why a safetensors header could not be parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum SafetensorsHeaderError {
    Truncated { needed: u64 },
    UnsupportedDtype(String),
    Malformed(String),
}

/// Parses the header of a whole safetensors file held in `bytes`; every entry is
/// checked against the file length and its dtype and shape. Entries keep the order
/// of their data offsets.
pub fn parse_safetensors_header(
    bytes: &[u8],
) -> Result<Vec<SafetensorsEntry>, SafetensorsHeaderError> {
    use SafetensorsHeaderError as E;
    let prefix = bytes.get(..8).ok_or(E::Truncated { needed: 8 })?;
    let mut n8 = [0u8; 8];
    n8.copy_from_slice(prefix);
    let n = u64::from_le_bytes(n8);
    let data_start = n
        .checked_add(8)
        .and_then(|v| usize::try_from(v).ok())
        .ok_or(E::Truncated { needed: u64::MAX })?;
    let json = bytes.get(8..data_start).ok_or(E::Truncated {
        needed: data_start as u64,
    })?;
    if json.first() != Some(&b'{') {
        return Err(E::Malformed("header does not start with '{'".into()));
    }
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(json).map_err(|e| E::Malformed(format!("header JSON: {e}")))?;
    let data_len = bytes.len() - data_start;
    let mut out = Vec::with_capacity(map.len());
    for (name, v) in map {
        if name == "__metadata__" {
            continue;
        }
        let obj = v
            .as_object()
            .ok_or_else(|| E::Malformed(format!("tensor {name:?} is not an object")))?;
        let dtype_s = obj
            .get("dtype")
            .and_then(|d| d.as_str())
            .ok_or_else(|| E::Malformed(format!("tensor {name:?} has no dtype")))?;
        let dtype = DType::from_safetensors(dtype_s)
            .ok_or_else(|| E::UnsupportedDtype(dtype_s.to_string()))?;
        let shape = obj
            .get("shape")
            .and_then(|s| s.as_array())
            .and_then(|a| a.iter().map(|d| d.as_u64()).collect::<Option<Vec<u64>>>())
            .ok_or_else(|| E::Malformed(format!("tensor {name:?}: bad shape")))?;
        let offs = obj
            .get("data_offsets")
            .and_then(|s| s.as_array())
            .and_then(|a| a.iter().map(|d| d.as_u64()).collect::<Option<Vec<u64>>>())
            .filter(|a| a.len() == 2)
            .ok_or_else(|| E::Malformed(format!("tensor {name:?}: bad data_offsets")))?;
        let (b, e) = (offs[0], offs[1]);
        if b > e {
            return Err(E::Malformed(format!("tensor {name:?}: offsets reversed")));
        }
        let nbytes = shape
            .iter()
            .try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| E::Malformed(format!("tensor {name:?}: shape overflows")))?;
        if e - b != nbytes {
            return Err(E::Malformed(format!(
                "tensor {name:?}: {} bytes of data for {nbytes} bytes of {dtype} {shape:?}",
                e - b
            )));
        }
        if e > data_len as u64 {
            return Err(E::Truncated {
                needed: (data_start as u64).saturating_add(e),
            });
        }
        out.push(SafetensorsEntry {
            name,
            dtype,
            shape,
            begin: data_start + b as usize,
            end: data_start + e as usize,
        });
    }
    out.sort_by_key(|e| (e.begin, e.end));
    Ok(out)
}
