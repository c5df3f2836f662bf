//! Built-in tensor comparisons (npy, safetensors, raw) for compare steps.
//!
//! ```text
//!   "run/out/kv.safetensors:k" --TensorRef::parse--> TensorRef
//!        --open (npy.rs | safetensors_file.rs | raw)--> TensorView (mmap, no copy)
//!        --metrics.rs (via reduce.rs: fixed chunks, rayon, ordered sums)--> outcome
//!   CheckSpec --check.rs::run_check--> CheckResult {value, threshold, passed, detail}
//! ```
//!
//! - `dtype.rs`: element types, byte/storage orders, decoding to f64 or bits.
//! - `npy.rs`, `safetensors_file.rs`: header parsers over bytes; never panic.
//! - `tensor.rs`: references, `TensorView` over a shared mmap, the openers.
//! - `reduce.rs`: deterministic parallel folds and the fast f32 kernel.
//! - `metrics.rs`: bit_exact(_across), rel_rms, max_abs, finite, first_divergence,
//!   slots_exact, as typed outcomes.
//! - `check.rs`: a resolved check in, a JSON-ready result with pass/fail out.
//!
//! Inputs are plain resolved paths: templates are the plan's business, upstream.
//! Results are independent of the thread count: chunk size is fixed and partial
//! sums are combined in chunk order.

mod check;
mod dtype;
mod error;
mod metrics;
mod npy;
mod reduce;
mod safetensors_file;
pub mod stats;
mod tensor;

pub use crate::record::check as detail;
pub use check::{json_f64, run_check, CheckInputs, CheckResult, CheckSpec};
pub use detail::CheckDetail;
pub use dtype::{ByteOrder, DType, Order};
pub use error::{CompareError, Result};
pub use metrics::{
    bit_exact, bit_exact_across, bit_exact_files, finite, first_divergence, max_abs, rel_rms,
    slots_exact, top_margin, AcrossOutcome, BitExactOutcome, DivergenceOutcome, FileBitExact,
    FiniteOutcome, MaxAbsOutcome, RelRmsOutcome, SlotsOutcome,
};
pub use npy::{parse_npy_header, NpyHeader, NpyHeaderError, NPY_MAGIC};
pub use reduce::{sq_sums_f32, BLOCK, CHUNK};
pub use safetensors_file::{parse_safetensors_header, SafetensorsEntry, SafetensorsHeaderError};
pub use tensor::{
    open, open_all, open_npy, open_raw, open_safetensors, open_safetensors_all, OpenOptions,
    TensorRef, TensorView,
};
