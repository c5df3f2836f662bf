//! The model: configuration, seeded weights, full-context prefill and greedy decode.
//!
//! A decoder-only transformer: embedding; per layer RMSNorm -> causal attention with
//! RoPE and grouped-query attention -> residual -> RMSNorm -> SwiGLU -> residual;
//! final RMSNorm; LM head. Weight matrices are row-major `[in, out]` (x · W).
//!
//! Numerics: `F32` is the reference. `Bf16` rounds matmul inputs (weights at load,
//! activations before each matmul, and q, k, v before attention) to bf16 and
//! accumulates in f32, like a device would.

use std::collections::BTreeMap;
use std::path::Path;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::io::{self, SafeTensors, Tensor};
use crate::ops;
use crate::Error;

/// Model shape and seed; stored as `config.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Transformer layers.
    pub layers: usize,
    /// Query heads (a multiple of `kv_heads`).
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Size of one head (even, for RoPE).
    pub head_dim: usize,
    /// Width of the residual stream.
    pub hidden: usize,
    /// Width of the SwiGLU feed-forward.
    pub ffn: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Seed of the weight generator.
    pub seed: u64,
    /// RoPE base.
    pub rope_theta: f64,
    /// RMSNorm epsilon.
    pub norm_eps: f32,
}

impl Config {
    /// Checks the shape constraints the kernels rely on.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: &str| Err(Error::Usage(m.to_string()));
        if self.layers == 0 || self.heads == 0 || self.kv_heads == 0 || self.vocab == 0 {
            return bad("layers, heads, kv-heads and vocab must be positive");
        }
        if self.heads % self.kv_heads != 0 {
            return bad("heads must be a multiple of kv-heads");
        }
        if self.head_dim == 0 || self.head_dim % 2 != 0 {
            return bad("head-dim must be even and positive");
        }
        if self.hidden == 0 || self.ffn == 0 {
            return bad("hidden and ffn must be positive");
        }
        Ok(())
    }

    /// Names and shapes of all weight tensors, in file order, with their init scale
    /// (`None` for norm gains, which are 1 + 0.1 u).
    pub fn tensor_specs(&self) -> Vec<(String, Vec<usize>, Option<f32>)> {
        let (h, q, kv, f) = (
            self.hidden,
            self.heads * self.head_dim,
            self.kv_heads * self.head_dim,
            self.ffn,
        );
        let s = |fan_in: usize| Some(1.0 / (fan_in as f32).sqrt());
        let mut v = vec![("embed".to_string(), vec![self.vocab, h], Some(1.0))];
        for l in 0..self.layers {
            let p = format!("layers.{l}.");
            v.push((p.clone() + "attn_norm", vec![h], None));
            v.push((p.clone() + "wq", vec![h, q], s(h)));
            v.push((p.clone() + "wk", vec![h, kv], s(h)));
            v.push((p.clone() + "wv", vec![h, kv], s(h)));
            v.push((p.clone() + "wo", vec![q, h], s(q)));
            v.push((p.clone() + "ffn_norm", vec![h], None));
            v.push((p.clone() + "w_gate", vec![h, f], s(h)));
            v.push((p.clone() + "w_up", vec![h, f], s(h)));
            v.push((p + "w_down", vec![f, h], s(f)));
        }
        v.push(("final_norm".to_string(), vec![h], None));
        v.push(("lm_head".to_string(), vec![h, self.vocab], s(h)));
        v
    }
}

/// splitmix64: a small, well-mixed, seedable generator.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn next_unit(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// FNV-1a of a name: gives each tensor its own stream, independent of file order.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01B3)
    })
}

/// Generates every weight tensor of `cfg` from its seed.
pub fn generate(cfg: &Config) -> Vec<(String, Tensor)> {
    cfg.tensor_specs()
        .into_iter()
        .map(|(name, shape, scale)| {
            let mut rng = SplitMix64(cfg.seed ^ name_hash(&name));
            let n = shape.iter().product();
            let data = (0..n)
                .map(|_| match scale {
                    Some(s) => rng.next_unit() * s,
                    None => 1.0 + 0.1 * rng.next_unit(),
                })
                .collect();
            (name, Tensor { shape, data })
        })
        .collect()
}

/// Writes `weights.safetensors`, recording the config's hash as metadata.
pub fn write_weights(path: &Path, cfg: &Config, config_sha: &str) -> Result<(), Error> {
    let ts = generate(cfg);
    let refs: Vec<(&str, &[usize], &[f32])> = ts
        .iter()
        .map(|(n, t)| (n.as_str(), t.shape.as_slice(), t.data.as_slice()))
        .collect();
    let mut meta = BTreeMap::new();
    meta.insert("config_sha256".to_string(), config_sha.to_string());
    io::write_safetensors(path, &refs, &meta)
}

/// Matmul numerics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numerics {
    /// Reference: f32 everywhere.
    F32,
    /// Device-like: bf16 matmul inputs, f32 accumulation.
    Bf16,
}

impl Numerics {
    /// The CLI / metrics name.
    pub fn name(self) -> &'static str {
        match self {
            Numerics::F32 => "f32",
            Numerics::Bf16 => "bf16",
        }
    }
}

/// One layer's weights.
pub struct Layer {
    attn_norm: Vec<f32>,
    wq: Vec<f32>,
    wk: Vec<f32>,
    wv: Vec<f32>,
    wo: Vec<f32>,
    ffn_norm: Vec<f32>,
    w_gate: Vec<f32>,
    w_up: Vec<f32>,
    w_down: Vec<f32>,
}

/// A loaded model.
pub struct Model {
    /// Its configuration.
    pub cfg: Config,
    /// Numerics it runs with.
    pub numerics: Numerics,
    embed: Vec<f32>,
    layers: Vec<Layer>,
    final_norm: Vec<f32>,
    lm_head: Vec<f32>,
}

/// Reads `config.json` from a model folder.
pub fn read_config(dir: &Path) -> Result<Config, Error> {
    let path = dir.join("config.json");
    let cfg: Config = serde_json::from_slice(&io::read(&path)?).map_err(|e| Error::Format {
        path: path.clone(),
        msg: e.to_string(),
    })?;
    cfg.validate()?;
    Ok(cfg)
}

impl Model {
    /// Loads a compiled model folder (`config.json` + `weights.safetensors`).
    pub fn load(dir: &Path, numerics: Numerics) -> Result<Self, Error> {
        let cfg = read_config(dir)?;
        let st = SafeTensors::open(&dir.join("weights.safetensors"))?;
        let specs = cfg.tensor_specs();
        let get = |name: &str| -> Result<Vec<f32>, Error> {
            let t = st.tensor(name)?;
            let want = specs
                .iter()
                .find(|(n, _, _)| n == name)
                .map(|(_, s, _)| s.clone())
                .unwrap_or_default();
            if t.shape != want {
                return Err(Error::Format {
                    path: dir.join("weights.safetensors"),
                    msg: format!("{name}: shape {:?}, config says {want:?}", t.shape),
                });
            }
            let mut d = t.data;
            if numerics == Numerics::Bf16 {
                ops::bf16_round_all(&mut d);
            }
            Ok(d)
        };
        let mut layers = Vec::with_capacity(cfg.layers);
        for l in 0..cfg.layers {
            let p = format!("layers.{l}.");
            layers.push(Layer {
                attn_norm: get(&(p.clone() + "attn_norm"))?,
                wq: get(&(p.clone() + "wq"))?,
                wk: get(&(p.clone() + "wk"))?,
                wv: get(&(p.clone() + "wv"))?,
                wo: get(&(p.clone() + "wo"))?,
                ffn_norm: get(&(p.clone() + "ffn_norm"))?,
                w_gate: get(&(p.clone() + "w_gate"))?,
                w_up: get(&(p.clone() + "w_up"))?,
                w_down: get(&(p + "w_down"))?,
            });
        }
        Ok(Self {
            embed: get("embed")?,
            final_norm: get("final_norm")?,
            lm_head: get("lm_head")?,
            layers,
            cfg,
            numerics,
        })
    }

    fn round(&self, xs: &mut [f32]) {
        if self.numerics == Numerics::Bf16 {
            ops::bf16_round_all(xs);
        }
    }

    /// Rows of x · W for `rows` rows of width `k`; W is `[k, n]`. In bf16 numerics the
    /// input is rounded first (weights already are).
    fn matmul(&self, x: &[f32], w: &[f32], k: usize, n: usize) -> Vec<f32> {
        let xr;
        let x = if self.numerics == Numerics::Bf16 {
            let mut c = x.to_vec();
            ops::bf16_round_all(&mut c);
            xr = c;
            &xr[..]
        } else {
            x
        };
        let rows = x.len() / k;
        let mut out = vec![0.0f32; rows * n];
        const ROWS: usize = 16;
        out.par_chunks_mut(ROWS * n)
            .zip(x.par_chunks(ROWS * k))
            .for_each(|(o, xi)| {
                for (orow, xrow) in o.chunks_exact_mut(n).zip(xi.chunks_exact(k)) {
                    ops::matmul_row(xrow, w, orow);
                }
            });
        out
    }

    fn rmsnorm(&self, x: &[f32], w: &[f32]) -> Vec<f32> {
        let h = self.cfg.hidden;
        let eps = self.cfg.norm_eps;
        let mut out = vec![0.0f32; x.len()];
        out.par_chunks_mut(h * 16)
            .zip(x.par_chunks(h * 16))
            .for_each(|(o, xi)| {
                for (orow, xrow) in o.chunks_exact_mut(h).zip(xi.chunks_exact(h)) {
                    ops::rmsnorm_row(xrow, w, eps, orow);
                }
            });
        out
    }

    /// Applies RoPE to rows `[rows, nheads * head_dim]` whose first row is at `pos0`,
    /// then multiplies by `scale`.
    fn rope(&self, x: &mut [f32], nheads: usize, pos0: usize, scale: f32) {
        let hd = self.cfg.head_dim;
        let theta = self.cfg.rope_theta;
        x.par_chunks_mut(nheads * hd)
            .enumerate()
            .for_each(|(i, row)| {
                let (c, s) = ops::rope_angles(pos0 + i, hd, theta);
                for head in row.chunks_exact_mut(hd) {
                    ops::rope_head(head, &c, &s);
                    if scale != 1.0 {
                        for v in head.iter_mut() {
                            *v *= scale;
                        }
                    }
                }
            });
    }

    /// SwiGLU feed-forward added into `x` (rows of `hidden`).
    fn ffn(&self, layer: &Layer, x: &mut [f32]) {
        let (h, f) = (self.cfg.hidden, self.cfg.ffn);
        let hn = self.rmsnorm(x, &layer.ffn_norm);
        let mut g = self.matmul(&hn, &layer.w_gate, h, f);
        let u = self.matmul(&hn, &layer.w_up, h, f);
        g.par_chunks_mut(4096)
            .zip(u.par_chunks(4096))
            .for_each(|(g, u)| {
                ops::silu_mul(g, u);
            });
        let d = self.matmul(&g, &layer.w_down, f, h);
        add_into(x, &d);
    }

    fn q_scale(&self) -> f32 {
        1.0 / (self.cfg.head_dim as f32).sqrt()
    }

    /// Final norm and LM head over rows of `hidden`.
    fn logits(&self, x: &[f32]) -> Vec<f32> {
        let hn = self.rmsnorm(x, &self.final_norm);
        self.matmul(&hn, &self.lm_head, self.cfg.hidden, self.cfg.vocab)
    }

    fn embed_tokens(&self, tokens: &[i64]) -> Result<Vec<f32>, Error> {
        let h = self.cfg.hidden;
        let mut x = Vec::with_capacity(tokens.len() * h);
        for &t in tokens {
            let row = usize::try_from(t)
                .ok()
                .and_then(|t| self.embed.get(t * h..(t + 1) * h))
                .ok_or_else(|| Error::Usage(format!("token {t} outside the vocabulary")))?;
            x.extend_from_slice(row);
        }
        Ok(x)
    }

    /// Full-context prefill. Returns the KV cache (`k`, `v`, each `[layers, kv_heads,
    /// tokens, head_dim]`, k after RoPE) and logits `[tokens, vocab]`.
    pub fn prefill(&self, tokens: &[i64]) -> Result<PrefillOut, Error> {
        let c = &self.cfg;
        let (t, h, hd, nh, nkv) = (tokens.len(), c.hidden, c.head_dim, c.heads, c.kv_heads);
        let mut x = self.embed_tokens(tokens)?;
        let per_layer = nkv * t * hd;
        let mut k_all = vec![0.0f32; c.layers * per_layer];
        let mut v_all = vec![0.0f32; c.layers * per_layer];
        for (l, layer) in self.layers.iter().enumerate() {
            let hn = self.rmsnorm(&x, &layer.attn_norm);
            let mut q = self.matmul(&hn, &layer.wq, h, nh * hd);
            let mut k = self.matmul(&hn, &layer.wk, h, nkv * hd);
            let mut v = self.matmul(&hn, &layer.wv, h, nkv * hd);
            self.rope(&mut q, nh, 0, self.q_scale());
            self.rope(&mut k, nkv, 0, 1.0);
            self.round(&mut q);
            self.round(&mut k);
            self.round(&mut v);
            // Export layout [kv_heads, tokens, head_dim] and the kernels' transposed
            // layout [kv_heads, head_dim, tokens].
            let ko = &mut k_all[l * per_layer..(l + 1) * per_layer];
            let vo = &mut v_all[l * per_layer..(l + 1) * per_layer];
            let mut kt = vec![0.0f32; per_layer];
            let mut vt = vec![0.0f32; per_layer];
            for i in 0..t {
                for g in 0..nkv {
                    for d in 0..hd {
                        let src = i * nkv * hd + g * hd + d;
                        ko[(g * t + i) * hd + d] = k[src];
                        vo[(g * t + i) * hd + d] = v[src];
                        kt[(g * hd + d) * t + i] = k[src];
                        vt[(g * hd + d) * t + i] = v[src];
                    }
                }
            }
            let att = attention_prefill(&q, &kt, &vt, t, nh, nkv, hd);
            let o = self.matmul(&att, &layer.wo, nh * hd, h);
            add_into(&mut x, &o);
            self.ffn(layer, &mut x);
        }
        Ok(PrefillOut {
            k: k_all,
            v: v_all,
            logits: self.logits(&x),
        })
    }
}

/// What a prefill produces.
pub struct PrefillOut {
    /// K after RoPE, `[layers, kv_heads, tokens, head_dim]`.
    pub k: Vec<f32>,
    /// V, same shape.
    pub v: Vec<f32>,
    /// Logits, `[tokens, vocab]`.
    pub logits: Vec<f32>,
}

fn add_into(x: &mut [f32], d: &[f32]) {
    for (a, b) in x.iter_mut().zip(d) {
        *a += b;
    }
}

/// Causal attention over a whole sequence. `q` is `[t, nh * hd]` (scaled, rotated);
/// `kt`/`vt` are `[nkv, hd, t]`. Returns `[t, nh * hd]`. Work is split over
/// (head, query block); each output row is computed by one `attend_row` call.
fn attention_prefill(
    q: &[f32],
    kt: &[f32],
    vt: &[f32],
    t: usize,
    nh: usize,
    nkv: usize,
    hd: usize,
) -> Vec<f32> {
    const BLOCK: usize = 32;
    let group = nh / nkv;
    let mut heads = vec![0.0f32; nh * t * hd];
    heads
        .par_chunks_mut(t * hd)
        .enumerate()
        .for_each(|(hh, out_h)| {
            let g = hh / group;
            let ktg = &kt[g * hd * t..(g + 1) * hd * t];
            let vtg = &vt[g * hd * t..(g + 1) * hd * t];
            out_h
                .par_chunks_mut(BLOCK * hd)
                .enumerate()
                .for_each(|(b, out_b)| {
                    let i0 = b * BLOCK;
                    let mut scores = vec![0.0f32; (i0 + BLOCK).min(t)];
                    for (r, orow) in out_b.chunks_exact_mut(hd).enumerate() {
                        let i = i0 + r;
                        let qrow = &q[i * nh * hd + hh * hd..i * nh * hd + (hh + 1) * hd];
                        ops::attend_row(qrow, ktg, vtg, t, i + 1, &mut scores, orow);
                    }
                });
        });
    // Back to token-major rows for the output projection.
    let mut out = vec![0.0f32; t * nh * hd];
    for hh in 0..nh {
        for i in 0..t {
            let src = &heads[(hh * t + i) * hd..(hh * t + i + 1) * hd];
            out[i * nh * hd + hh * hd..i * nh * hd + (hh + 1) * hd].copy_from_slice(src);
        }
    }
    out
}

/// A KV cache for decode: per layer, `[kv_heads, head_dim, capacity]` for K and V.
pub struct DecodeCache {
    cap: usize,
    len: usize,
    kt: Vec<Vec<f32>>,
    vt: Vec<Vec<f32>>,
}

impl DecodeCache {
    /// Builds a cache from an imported KV (`[layers, kv_heads, tokens, head_dim]`) with
    /// room for `extra` more positions. In bf16 numerics the entries are rounded.
    pub fn from_import(
        model: &Model,
        k: &[f32],
        v: &[f32],
        tokens: usize,
        extra: usize,
    ) -> DecodeCache {
        let c = &model.cfg;
        let (nkv, hd) = (c.kv_heads, c.head_dim);
        let cap = tokens + extra;
        let per_layer = nkv * tokens * hd;
        let mut kts = Vec::with_capacity(c.layers);
        let mut vts = Vec::with_capacity(c.layers);
        for l in 0..c.layers {
            let mut kt = vec![0.0f32; nkv * hd * cap];
            let mut vt = vec![0.0f32; nkv * hd * cap];
            for g in 0..nkv {
                for i in 0..tokens {
                    for d in 0..hd {
                        let src = l * per_layer + (g * tokens + i) * hd + d;
                        kt[(g * hd + d) * cap + i] = k[src];
                        vt[(g * hd + d) * cap + i] = v[src];
                    }
                }
            }
            model.round(&mut kt);
            model.round(&mut vt);
            kts.push(kt);
            vts.push(vt);
        }
        DecodeCache {
            cap,
            len: tokens,
            kt: kts,
            vt: vts,
        }
    }
}

impl Model {
    /// Runs one token at position `pos` and returns its logits. When `pos` is below
    /// the cache length the cached K/V at `pos` are used as they are (the imported
    /// ones); otherwise K/V are computed and appended.
    pub fn decode_step(
        &self,
        cache: &mut DecodeCache,
        token: i64,
        pos: usize,
    ) -> Result<Vec<f32>, Error> {
        let c = &self.cfg;
        let (h, hd, nh, nkv) = (c.hidden, c.head_dim, c.heads, c.kv_heads);
        let append = pos >= cache.len;
        if append && (pos != cache.len || pos >= cache.cap) {
            return Err(Error::Usage(format!("decode position {pos} out of order")));
        }
        let cap = cache.cap;
        let mut x = self.embed_tokens(&[token])?;
        let group = nh / nkv;
        let mut scores = vec![0.0f32; pos + 1];
        for (l, layer) in self.layers.iter().enumerate() {
            let hn = self.rmsnorm(&x, &layer.attn_norm);
            let mut q = self.matmul(&hn, &layer.wq, h, nh * hd);
            self.rope(&mut q, nh, pos, self.q_scale());
            self.round(&mut q);
            if append {
                let mut k = self.matmul(&hn, &layer.wk, h, nkv * hd);
                let mut v = self.matmul(&hn, &layer.wv, h, nkv * hd);
                self.rope(&mut k, nkv, pos, 1.0);
                self.round(&mut k);
                self.round(&mut v);
                for g in 0..nkv {
                    for d in 0..hd {
                        cache.kt[l][(g * hd + d) * cap + pos] = k[g * hd + d];
                        cache.vt[l][(g * hd + d) * cap + pos] = v[g * hd + d];
                    }
                }
            }
            let mut att = vec![0.0f32; nh * hd];
            for (hh, orow) in att.chunks_exact_mut(hd).enumerate() {
                let g = hh / group;
                let kt = &cache.kt[l][g * hd * cap..(g + 1) * hd * cap];
                let vt = &cache.vt[l][g * hd * cap..(g + 1) * hd * cap];
                ops::attend_row(
                    &q[hh * hd..(hh + 1) * hd],
                    kt,
                    vt,
                    cap,
                    pos + 1,
                    &mut scores,
                    orow,
                );
            }
            let o = self.matmul(&att, &layer.wo, nh * hd, h);
            add_into(&mut x, &o);
            self.ffn(layer, &mut x);
        }
        if append {
            cache.len = pos + 1;
        }
        Ok(self.logits(&x))
    }
}

/// The deterministic prompt of `n` token ids for `seed`.
pub fn prompt(n: usize, vocab: usize, seed: u64) -> Vec<i64> {
    let mut rng = SplitMix64(seed ^ 0x5052_4F4D_5054); // "PROMPT"
    (0..n)
        .map(|_| (rng.next_u64() % vocab as u64) as i64)
        .collect()
}
