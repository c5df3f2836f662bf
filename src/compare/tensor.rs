//! Tensor references and read-only views over memory-mapped files.
//!
//! A [`TensorView`] never copies the data: it keeps the mapping alive and decodes
//! elements to f64 (or to their bit patterns) a block at a time, on demand.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use super::dtype::{decode_bits, decode_f64, decode_i128, ByteOrder, DType, Order};
use super::error::{CompareError, Result};
use super::npy::{parse_npy_header, NpyHeaderError, NPY_MAGIC};
use super::safetensors_file::{parse_safetensors_header, SafetensorsHeaderError};

/// A resolved reference to a tensor: a file, and for safetensors the tensor's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorRef {
    pub path: PathBuf,
    /// Tensor name inside a safetensors file; `None` means the file's only tensor
    /// (or, for `bit_exact`, all of its tensors).
    pub tensor: Option<String>,
}

impl TensorRef {
    /// Parses `path` or `path:tensor`. A path may itself contain `:`, so the text is
    /// split at its last `:` only when the part before it ends in `.safetensors` and
    /// either exists as a file or the whole text does not.
    pub fn parse(s: &str) -> TensorRef {
        let whole = Path::new(s);
        if let Some((file, name)) = s.rsplit_once(':') {
            let prefix = Path::new(file);
            let is_st = file.ends_with(".safetensors");
            if is_st && !name.is_empty() && (prefix.is_file() || !whole.exists()) {
                return TensorRef {
                    path: prefix.to_path_buf(),
                    tensor: Some(name.to_string()),
                };
            }
        }
        TensorRef {
            path: whole.to_path_buf(),
            tensor: None,
        }
    }

    /// The reference as text (`path` or `path:tensor`).
    pub fn display(&self) -> String {
        match &self.tensor {
            Some(t) => format!("{}:{t}", self.path.display()),
            None => self.path.display().to_string(),
        }
    }
}

/// How to read a file that carries no header of its own (a raw file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Element type of a raw file (little-endian).
    pub raw_dtype: Option<DType>,
    /// Shape of a raw file; a flat vector when absent.
    pub raw_shape: Option<Vec<u64>>,
}

/// A shared read-only mapping (or nothing, for an empty file).
#[derive(Debug)]
struct Backing {
    map: Option<Mmap>,
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// A typed view of one tensor inside a memory-mapped file.
#[derive(Debug, Clone)]
pub struct TensorView {
    backing: Arc<Backing>,
    offset: usize,
    nbytes: usize,
    len: usize,
    dtype: DType,
    byte_order: ByteOrder,
    order: Order,
    shape: Vec<u64>,
    source: String,
}

impl TensorView {
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Shape (logical, whatever the storage order).
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }
    /// Storage order. Tensors with at most one dimension longer than 1 are reported as
    /// C order, since both orders lay them out the same way.
    pub fn order(&self) -> Order {
        self.order
    }
    /// Byte order of stored elements.
    pub fn byte_order(&self) -> ByteOrder {
        self.byte_order
    }
    /// Offset of the first data byte within the file.
    pub fn byte_offset(&self) -> usize {
        self.offset
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Where the tensor came from (`path` or `path:tensor`), for messages.
    pub fn source(&self) -> &str {
        &self.source
    }
    /// The stored data bytes, in storage order.
    pub fn data(&self) -> &[u8] {
        self.backing
            .bytes()
            .get(self.offset..self.offset + self.nbytes)
            .unwrap_or(&[])
    }

    /// The data as `&[f32]` when it is little-endian f32 on a little-endian machine
    /// and 4-byte aligned in memory; the fast kernels take this path.
    pub fn as_f32_slice(&self) -> Option<&[f32]> {
        if self.dtype != DType::F32 || self.byte_order != ByteOrder::native() {
            return None;
        }
        // SAFETY: every bit pattern is a valid f32; align_to only reinterprets the
        // aligned middle part, and we accept the result only when nothing is left over.
        let (pre, mid, post) = unsafe { self.data().align_to::<f32>() };
        (pre.is_empty() && post.is_empty()).then_some(mid)
    }

    /// Whether `self` and `other` store elements in the same sequence and encoding, so
    /// that their bytes can be compared or zipped directly in storage order.
    pub fn same_layout(&self, other: &TensorView) -> bool {
        self.dtype == other.dtype
            && self.shape == other.shape
            && self.order == other.order
            && self.byte_order == other.byte_order
    }

    fn elem_bytes(&self, start: usize, n: usize) -> &[u8] {
        let s = self.dtype.size();
        self.data().get(start * s..(start + n) * s).unwrap_or(&[])
    }

    /// Decodes elements `start..start + out.len()` in storage order into f64.
    pub fn read_f64(&self, start: usize, out: &mut [f64]) {
        decode_f64(
            self.dtype,
            self.byte_order,
            self.elem_bytes(start, out.len()),
            out,
        );
    }

    /// Decodes elements `start..start + out.len()` in storage order into their bit
    /// patterns (native order, zero-extended).
    pub fn read_bits(&self, start: usize, out: &mut [u64]) {
        decode_bits(
            self.dtype,
            self.byte_order,
            self.elem_bytes(start, out.len()),
            out,
        );
    }

    /// Storage index of the element at C-order (logical) index `i`.
    pub fn storage_index(&self, i: usize) -> usize {
        if self.order == Order::C {
            return i;
        }
        // Decompose i over the shape (last index fastest), then recombine with
        // Fortran strides (first index fastest).
        let mut rem = i as u64;
        let mut idx = vec![0u64; self.shape.len()];
        for (k, &d) in self.shape.iter().enumerate().rev() {
            if d > 0 {
                idx[k] = rem % d;
                rem /= d;
            }
        }
        let mut stride = 1u64;
        let mut out = 0u64;
        for (k, &d) in self.shape.iter().enumerate() {
            out += idx[k] * stride;
            stride *= d;
        }
        out as usize
    }

    /// Decodes elements at logical (C-order) indices `start..start + out.len()`.
    pub fn read_f64_logical(&self, start: usize, out: &mut [f64]) {
        if self.order == Order::C {
            return self.read_f64(start, out);
        }
        for (j, o) in out.iter_mut().enumerate() {
            let mut one = [0f64];
            self.read_f64(self.storage_index(start + j), &mut one);
            *o = one[0];
        }
    }

    /// Bit patterns at logical (C-order) indices `start..start + out.len()`.
    pub fn read_bits_logical(&self, start: usize, out: &mut [u64]) {
        if self.order == Order::C {
            return self.read_bits(start, out);
        }
        for (j, o) in out.iter_mut().enumerate() {
            let mut one = [0u64];
            self.read_bits(self.storage_index(start + j), &mut one);
            *o = one[0];
        }
    }

    /// Exact integer values at logical indices `start..start + out.len()` (tokens).
    pub fn read_i128_logical(&self, start: usize, out: &mut [i128]) {
        if self.order == Order::C {
            decode_i128(
                self.dtype,
                self.byte_order,
                self.elem_bytes(start, out.len()),
                out,
            );
            return;
        }
        for (j, o) in out.iter_mut().enumerate() {
            let mut one = [0i128];
            let k = self.storage_index(start + j);
            decode_i128(self.dtype, self.byte_order, self.elem_bytes(k, 1), &mut one);
            *o = one[0];
        }
    }
}

fn open_input(path: &Path) -> std::io::Result<File> {
    crate::digest::open_regular(path, crate::digest::Follow::Yes).map(|(f, _)| f)
}

fn map_file(path: &Path) -> Result<Arc<Backing>> {
    // Only a regular file: a FIFO or device an upstream step left must not hang us.
    let file = open_input(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => CompareError::NotFound {
            path: path.to_path_buf(),
        },
        _ => CompareError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    })?;
    let io = |e| CompareError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(CompareError::Invalid(format!(
            "{}: is a directory, not a tensor file",
            path.display()
        )));
    }
    if meta.len() == 0 {
        return Ok(Arc::new(Backing { map: None }));
    }
    // SAFETY: the mapping is read-only. If another process truncates the file while
    // it is mapped, reads fault (SIGBUS); compare steps run after their producers
    // have exited, so inputs are not being written.
    let map = unsafe { memmap2::MmapOptions::new().map(&file) }.map_err(io)?;
    Ok(Arc::new(Backing { map: Some(map) }))
}

fn is_safetensors_path(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "safetensors")
}

fn is_npy_path(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "npy")
}

fn checked_nbytes(path: &Path, dtype: DType, shape: &[u64]) -> Result<(usize, usize)> {
    let bad = || CompareError::BadHeader {
        path: path.to_path_buf(),
        reason: format!("shape {shape:?} is too large"),
    };
    let len = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(bad)?;
    let nbytes = len.checked_mul(dtype.size() as u64).ok_or_else(bad)?;
    Ok((
        usize::try_from(len).map_err(|_| bad())?,
        usize::try_from(nbytes).map_err(|_| bad())?,
    ))
}

#[allow(clippy::too_many_arguments)]
fn make_view(
    backing: Arc<Backing>,
    path: &Path,
    offset: usize,
    dtype: DType,
    byte_order: ByteOrder,
    order: Order,
    shape: Vec<u64>,
    source: String,
) -> Result<TensorView> {
    let (len, nbytes) = checked_nbytes(path, dtype, &shape)?;
    let have = backing.bytes().len() as u64;
    let needed = (offset as u64).saturating_add(nbytes as u64);
    if needed > have {
        return Err(CompareError::Truncated {
            path: path.to_path_buf(),
            needed,
            actual: have,
        });
    }
    let byte_order = if dtype.size() == 1 {
        ByteOrder::NotApplicable
    } else {
        byte_order
    };
    let order = if shape.iter().filter(|&&d| d > 1).count() <= 1 {
        Order::C
    } else {
        order
    };
    Ok(TensorView {
        backing,
        offset,
        nbytes,
        len,
        dtype,
        byte_order,
        order,
        shape,
        source,
    })
}

/// Opens an `.npy` file.
pub fn open_npy(path: &Path) -> Result<TensorView> {
    let backing = map_file(path)?;
    let h = parse_npy_header(backing.bytes()).map_err(|e| {
        let path = path.to_path_buf();
        match e {
            NpyHeaderError::BadMagic => CompareError::BadMagic {
                path,
                format: "npy",
            },
            NpyHeaderError::Truncated { needed } => CompareError::Truncated {
                path,
                needed,
                actual: backing.bytes().len() as u64,
            },
            NpyHeaderError::UnsupportedDtype(dtype) => {
                CompareError::UnsupportedDtype { path, dtype }
            }
            NpyHeaderError::Unsupported(reason) | NpyHeaderError::Malformed(reason) => {
                CompareError::BadHeader { path, reason }
            }
        }
    })?;
    let source = path.display().to_string();
    make_view(
        backing,
        path,
        h.data_offset,
        h.dtype,
        h.byte_order,
        h.order,
        h.shape,
        source,
    )
}

/// Opens every tensor of a safetensors file, in data order.
pub fn open_safetensors_all(path: &Path) -> Result<Vec<(String, TensorView)>> {
    let backing = map_file(path)?;
    let entries = parse_safetensors_header(backing.bytes()).map_err(|e| {
        let path = path.to_path_buf();
        match e {
            SafetensorsHeaderError::Truncated { needed } => CompareError::Truncated {
                path,
                needed,
                actual: backing.bytes().len() as u64,
            },
            SafetensorsHeaderError::UnsupportedDtype(dtype) => {
                CompareError::UnsupportedDtype { path, dtype }
            }
            SafetensorsHeaderError::Malformed(reason) => CompareError::BadHeader { path, reason },
        }
    })?;
    entries
        .into_iter()
        .map(|e| {
            let source = format!("{}:{}", path.display(), e.name);
            let v = make_view(
                backing.clone(),
                path,
                e.begin,
                e.dtype,
                ByteOrder::Little,
                Order::C,
                e.shape,
                source,
            )?;
            Ok((e.name, v))
        })
        .collect()
}

/// Opens one tensor of a safetensors file; with no name, the file must hold exactly one.
pub fn open_safetensors(path: &Path, name: Option<&str>) -> Result<TensorView> {
    let all = open_safetensors_all(path)?;
    let names = || {
        all.iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match name {
        Some(name) => match all.iter().find(|(n, _)| n == name) {
            Some((_, v)) => Ok(v.clone()),
            None => Err(CompareError::NoSuchTensor {
                path: path.to_path_buf(),
                name: name.to_string(),
                available: names(),
            }),
        },
        None => match all.as_slice() {
            [(_, v)] => Ok(v.clone()),
            [] => Err(CompareError::NoSuchTensor {
                path: path.to_path_buf(),
                name: String::new(),
                available: "no tensors".into(),
            }),
            _ => Err(CompareError::AmbiguousTensor {
                path: path.to_path_buf(),
                available: names(),
            }),
        },
    }
}

/// Opens a raw little-endian file of `dtype`; without a shape it is a flat vector.
pub fn open_raw(path: &Path, dtype: DType, shape: Option<&[u64]>) -> Result<TensorView> {
    let backing = map_file(path)?;
    let have = backing.bytes().len() as u64;
    let size = dtype.size() as u64;
    let shape = match shape {
        Some(s) => s.to_vec(),
        None => {
            if have % size != 0 {
                return Err(CompareError::SizeMismatch {
                    path: path.to_path_buf(),
                    needed: have / size * size + size,
                    actual: have,
                });
            }
            vec![have / size]
        }
    };
    let (_, nbytes) = checked_nbytes(path, dtype, &shape)?;
    if nbytes as u64 != have {
        return Err(CompareError::SizeMismatch {
            path: path.to_path_buf(),
            needed: nbytes as u64,
            actual: have,
        });
    }
    let source = path.display().to_string();
    make_view(
        backing,
        path,
        0,
        dtype,
        ByteOrder::Little,
        Order::C,
        shape,
        source,
    )
}

/// Which reader a file gets: by extension, then by npy magic, then raw if declared.
enum Format {
    Npy,
    Safetensors,
    Raw(DType),
}

fn detect(r: &TensorRef, opts: &OpenOptions) -> Result<Format> {
    if r.tensor.is_some() || is_safetensors_path(&r.path) {
        return Ok(Format::Safetensors);
    }
    if is_npy_path(&r.path) {
        return Ok(Format::Npy);
    }
    if let Some(d) = opts.raw_dtype {
        return Ok(Format::Raw(d));
    }
    let mut head = [0u8; 6];
    let n = {
        use std::io::Read;
        let mut f = open_input(&r.path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => CompareError::NotFound {
                path: r.path.clone(),
            },
            _ => CompareError::Io {
                path: r.path.clone(),
                source: e,
            },
        })?;
        f.read(&mut head).unwrap_or(0)
    };
    if n == 6 && &head == NPY_MAGIC {
        return Ok(Format::Npy);
    }
    Err(CompareError::UnknownFormat {
        path: r.path.clone(),
    })
}

/// Opens the one tensor a reference names.
pub fn open(r: &TensorRef, opts: &OpenOptions) -> Result<TensorView> {
    match detect(r, opts)? {
        Format::Npy => open_npy(&r.path),
        Format::Safetensors => open_safetensors(&r.path, r.tensor.as_deref()),
        Format::Raw(d) => open_raw(&r.path, d, opts.raw_shape.as_deref()),
    }
}

/// Opens every tensor a reference covers: all of a safetensors file when no tensor is
/// named, else the one tensor (named `""` for npy and raw files).
pub fn open_all(r: &TensorRef, opts: &OpenOptions) -> Result<Vec<(String, TensorView)>> {
    match detect(r, opts)? {
        Format::Safetensors if r.tensor.is_none() => open_safetensors_all(&r.path),
        Format::Safetensors => {
            let v = open_safetensors(&r.path, r.tensor.as_deref())?;
            Ok(vec![(r.tensor.clone().unwrap_or_default(), v)])
        }
        Format::Npy => Ok(vec![(String::new(), open_npy(&r.path)?)]),
        Format::Raw(d) => Ok(vec![(
            String::new(),
            open_raw(&r.path, d, opts.raw_shape.as_deref())?,
        )]),
    }
}
