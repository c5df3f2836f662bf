//! Built-in tensor comparisons (npy, safetensors, raw) for compare steps.
