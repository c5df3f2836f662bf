//! `kvsim`: the reference workload binary of orchestrate.
//!
//! A real, small, deterministic decoder-only transformer (see `model`) with three
//! subcommands that mirror an accelerator experiment: `compile` (staged model
//! materialisation), `prefill` (full-context prefill, KV export) and `decode` (KV
//! import as a device would, then greedy decode). Standalone on purpose: it does not
//! use the orchestrate library, so it can stand in for any external workload.
//!
//! Modules: `cli` parses, `compile` runs the stages, `model` holds the transformer,
//! `ops` the deterministic kernels, `io` the npy/safetensors/metrics files.

mod cli;
mod compile;
mod io;
mod model;
mod ops;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use cli::{Command, Layout, Stage};
use model::{Config, DecodeCache, Model, Numerics};

/// Everything that can stop kvsim.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad command line or inconsistent inputs.
    #[error("{0}")]
    Usage(String),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file's content is not what was expected.
    #[error("{}: {msg}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// JSON serialisation failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = match cli::parse(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kvsim: {e}\n\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    match run(cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ Error::Usage(_)) => {
            eprintln!("kvsim: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("kvsim: {e}");
            ExitCode::from(1)
        }
    }
}

fn mkdir(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::Io {
        path: dir.to_path_buf(),
        source: e,
    })
}

fn ms(since: Instant) -> f64 {
    (since.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

fn run(cmd: Command) -> Result<(), Error> {
    match cmd {
        Command::Help => {
            println!("{}", cli::USAGE);
            Ok(())
        }
        Command::Version => {
            // The same stamp as orchestrate's (build.rs): the commit both are built from.
            println!(
                "kvsim {} ({})",
                env!("CARGO_PKG_VERSION"),
                env!("ORCHESTRATE_COMMIT")
            );
            Ok(())
        }
        Command::Compile { out, cfg, stage } => compile_cmd(&out, &cfg, stage),
        Command::Prefill {
            model,
            tokens,
            out,
            seed,
            numerics,
        } => prefill(&model, tokens, &out, seed, numerics),
        Command::Decode(d) => decode(d),
    }
}

/// Materialise the model folder, stage by stage, and say what each stage did.
fn compile_cmd(out: &Path, cfg: &Config, stage: Stage) -> Result<(), Error> {
    let t0 = Instant::now();
    let done = compile::run(out, cfg, stage)?;
    let mut stages = serde_json::Map::new();
    for (name, o) in &done {
        println!("compile {name}: {}", o.word());
        stages.insert((*name).into(), o.word().into());
    }
    io::write_metrics(&serde_json::json!({
        "compile_ms": ms(t0),
        "stages": stages,
    }))
}

/// A full-context prefill: K, V, logits and the next tokens, with its timing.
fn prefill(
    model: &Path,
    tokens: usize,
    out: &Path,
    seed: u64,
    numerics: Numerics,
) -> Result<(), Error> {
    mkdir(out)?;
    let m = Model::load(model, numerics)?;
    let prompt = model::prompt(tokens, m.cfg.vocab, seed);
    let t0 = Instant::now();
    let model::PrefillOut { k, v, logits } = m.prefill(&prompt)?;
    let prefill_ms = ms(t0);
    let c = &m.cfg;
    let shape = [c.layers, c.kv_heads, tokens, c.head_dim];
    io::write_safetensors(
        &out.join("kv.safetensors"),
        &[("k", &shape, &k), ("v", &shape, &v)],
        &Default::default(),
    )?;
    io::write_npy_f32(&out.join("logits.npy"), &[tokens, c.vocab], &logits)?;
    let next: Vec<i64> = logits
        .chunks_exact(c.vocab)
        .map(|r| ops::argmax(r) as i64)
        .collect();
    io::write_npy_i64(&out.join("tokens.npy"), &next)?;
    io::write_npy_i64(&out.join("prompt.npy"), &prompt)?;
    let tps = tokens as f64 / (prefill_ms / 1e3).max(1e-9);
    io::write_metrics(&serde_json::json!({
        "prefill_ms": prefill_ms,
        "tokens": tokens,
        "tokens_per_s": (tps * 10.0).round() / 10.0,
        "layers": c.layers,
        "numerics": numerics.name(),
        "threads": rayon::current_num_threads(),
    }))?;
    println!(
        "prefill: {tokens} tokens, {} layers, {} numerics, {prefill_ms:.1} ms ({tps:.0} tokens/s)",
        c.layers,
        numerics.name()
    );
    Ok(())
}

/// Import a KV cache (as laid out and cast), read slots back, and decode greedily.
fn decode(d: cli::Decode) -> Result<(), Error> {
    let cli::Decode {
        model,
        kv,
        prompt,
        steps,
        out,
        layout,
        cast_bf16,
        numerics,
        slots,
    } = d;
    mkdir(&out)?;
    let m = Model::load(&model, numerics)?;
    let prompt = io::read_npy_i64(&prompt)?;
    let t = prompt.len();
    let Some(&last) = prompt.last() else {
        return Err(Error::Usage("the prompt is empty".into()));
    };
    let c = m.cfg.clone();
    let shape = vec![c.layers, c.kv_heads, t, c.head_dim];
    let st = io::SafeTensors::open(&kv)?;
    let ti = Instant::now();
    let mut k = st.tensor("k")?;
    let mut v = st.tensor("v")?;
    drop(st);
    for (name, x) in [("k", &k), ("v", &v)] {
        if x.shape != shape {
            return Err(Error::Format {
                path: kv.clone(),
                msg: format!(
                    "{name} has shape {:?}, model and prompt need {shape:?}",
                    x.shape
                ),
            });
        }
    }
    for x in [&mut k.data, &mut v.data] {
        if layout == Layout::TokenMajor {
            let tm = permute_middle(x, c.layers, c.kv_heads, t, c.head_dim);
            *x = permute_middle(&tm, c.layers, t, c.kv_heads, c.head_dim);
        }
        if cast_bf16 {
            ops::bf16_round_all(x);
        }
    }
    let import_ms = ms(ti);
    let s = slots.min(t);
    let rb_shape = [c.layers, c.kv_heads, s, c.head_dim];
    let rk = first_slots(&k.data, c.layers * c.kv_heads, t, s, c.head_dim);
    let rv = first_slots(&v.data, c.layers * c.kv_heads, t, s, c.head_dim);
    io::write_safetensors(
        &out.join("kv_readback.safetensors"),
        &[("k", &rb_shape, &rk), ("v", &rb_shape, &rv)],
        &Default::default(),
    )?;
    let t0 = Instant::now();
    let mut cache = DecodeCache::from_import(&m, &k.data, &v.data, t, steps);
    drop((k, v));
    let mut tokens = Vec::with_capacity(steps);
    let mut logits = Vec::with_capacity(steps * c.vocab);
    let mut tok = last;
    for i in 0..steps {
        let l = m.decode_step(&mut cache, tok, t - 1 + i)?;
        tok = ops::argmax(&l) as i64;
        tokens.push(tok);
        logits.extend_from_slice(&l);
    }
    let decode_ms = ms(t0);
    io::write_npy_i64(&out.join("tokens.npy"), &tokens)?;
    io::write_npy_f32(&out.join("logits.npy"), &[steps, c.vocab], &logits)?;
    // The first decoded position's logits depend only on the imported cache, so
    // they compare handoffs like for like; later rows follow each run's own
    // (possibly divergent) tokens.
    let first = logits.get(..c.vocab.min(logits.len())).unwrap_or(&[]);
    io::write_npy_f32(&out.join("first_logits.npy"), &[1, first.len()], first)?;
    let tps = steps as f64 / (decode_ms / 1e3).max(1e-9);
    io::write_metrics(&serde_json::json!({
        "decode_ms": decode_ms,
        "import_ms": import_ms,
        "steps": steps,
        "context": t,
        "tokens_per_s": (tps * 10.0).round() / 10.0,
        "numerics": numerics.name(),
        "layout": if layout == Layout::TokenMajor { "token-major" } else { "head-major" },
        "cast": if cast_bf16 { "bf16" } else { "none" },
    }))?;
    println!(
        "decode: {steps} tokens after {t}, {} numerics, {decode_ms:.1} ms ({tps:.1} tokens/s)",
        numerics.name()
    );
    Ok(())
}

/// Swaps the two middle axes of `[a, b, c, d]`, giving `[a, c, b, d]`.
fn permute_middle(x: &[f32], a: usize, b: usize, c: usize, d: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; x.len()];
    for i in 0..a {
        for j in 0..b {
            for k in 0..c {
                let src = ((i * b + j) * c + k) * d;
                let dst = ((i * c + k) * b + j) * d;
                out[dst..dst + d].copy_from_slice(&x[src..src + d]);
            }
        }
    }
    out
}

/// The first `s` of `t` token positions of `[outer, t, d]`, as `[outer, s, d]`.
fn first_slots(x: &[f32], outer: usize, t: usize, s: usize, d: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(outer * s * d);
    for o in 0..outer {
        out.extend_from_slice(&x[o * t * d..(o * t + s) * d]);
    }
    out
}
