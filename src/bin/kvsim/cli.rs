//! A small hand-written argument parser: `--name value` options after a subcommand.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::model::{Config, Numerics};
use crate::Error;

/// Usage text.
pub const USAGE: &str = "\
kvsim: reference workload of orchestrate (a small deterministic transformer)

kvsim --version
kvsim compile --out DIR [--layers 32] [--heads 16] [--kv-heads 8] [--head-dim 8]
              [--hidden 128] [--ffn 256] [--vocab 512] [--seed 1]
              [--stage all|config|weights|pack]
kvsim prefill --model DIR --tokens N --out DIR [--seed 7] [--numerics f32|bf16]
kvsim decode  --model DIR --kv FILE --prompt FILE --steps K --out DIR
              [--layout head-major|token-major] [--cast none|bf16]
              [--numerics f32|bf16] [--slots 64]

Metrics go to the JSON file named by env ORCHESTRATE_METRICS when it is set.";

/// Which compile stages to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// config, weights and pack in order.
    All,
    /// `config.json`.
    Config,
    /// `weights.safetensors`.
    Weights,
    /// `packed.bin` + `manifest.json`.
    Pack,
}

/// KV layout a decode import goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `[layers, kv_heads, tokens, head_dim]`, as exported.
    HeadMajor,
    /// `[layers, tokens, kv_heads, head_dim]`: re-laid out and back.
    TokenMajor,
}

/// A parsed command line.
#[derive(Debug)]
pub enum Command {
    /// Materialise a model folder.
    Compile {
        /// Output folder.
        out: PathBuf,
        /// Model configuration.
        cfg: Config,
        /// Stages to run.
        stage: Stage,
    },
    /// Full-context prefill.
    Prefill {
        /// Model folder.
        model: PathBuf,
        /// Prompt length.
        tokens: usize,
        /// Output folder.
        out: PathBuf,
        /// Prompt seed.
        seed: u64,
        /// Numerics.
        numerics: Numerics,
    },
    /// KV import and greedy decode.
    Decode(Decode),
    /// Print usage.
    Help,
    /// Print the version and the commit built from.
    Version,
}

/// What `decode` imports, decodes and writes.
#[derive(Debug)]
pub struct Decode {
    /// Model folder.
    pub model: PathBuf,
    /// `kv.safetensors` to import.
    pub kv: PathBuf,
    /// `prompt.npy`.
    pub prompt: PathBuf,
    /// Tokens to decode.
    pub steps: usize,
    /// Output folder.
    pub out: PathBuf,
    /// Import layout.
    pub layout: Layout,
    /// Round K and V to bf16 on import.
    pub cast_bf16: bool,
    /// Numerics.
    pub numerics: Numerics,
    /// Token positions read back into `kv_readback.safetensors`.
    pub slots: usize,
}

fn num<T: std::str::FromStr>(
    opts: &BTreeMap<String, String>,
    key: &str,
    dflt: T,
) -> Result<T, Error> {
    match opts.get(key) {
        None => Ok(dflt),
        Some(v) => v
            .parse()
            .map_err(|_| Error::Usage(format!("--{key}: not a valid number: {v:?}"))),
    }
}

fn path(opts: &BTreeMap<String, String>, key: &str) -> Result<PathBuf, Error> {
    opts.get(key)
        .map(PathBuf::from)
        .ok_or_else(|| Error::Usage(format!("--{key} is required")))
}

fn numerics(opts: &BTreeMap<String, String>) -> Result<Numerics, Error> {
    match opts.get("numerics").map(String::as_str) {
        None | Some("f32") => Ok(Numerics::F32),
        Some("bf16") => Ok(Numerics::Bf16),
        Some(o) => Err(Error::Usage(format!(
            "--numerics: expected f32 or bf16, got {o:?}"
        ))),
    }
}

/// Parses `args` (without the program name).
pub fn parse(args: &[String]) -> Result<Command, Error> {
    let Some(sub) = args.first() else {
        return Ok(Command::Help);
    };
    if sub == "-h" || sub == "--help" || sub == "help" {
        return Ok(Command::Help);
    }
    if sub == "-V" || sub == "--version" {
        return Ok(Command::Version);
    }
    let allowed: &[&str] = match sub.as_str() {
        "compile" => &[
            "out", "layers", "heads", "kv-heads", "head-dim", "hidden", "ffn", "vocab", "seed",
            "stage",
        ],
        "prefill" => &["model", "tokens", "out", "seed", "numerics"],
        "decode" => &[
            "model", "kv", "prompt", "steps", "out", "layout", "cast", "numerics", "slots",
        ],
        o => return Err(Error::Usage(format!("unknown subcommand {o:?}"))),
    };
    let mut opts = BTreeMap::new();
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        if a == "-h" || a == "--help" {
            return Ok(Command::Help);
        }
        let key = a
            .strip_prefix("--")
            .ok_or_else(|| Error::Usage(format!("unexpected argument {a:?}")))?;
        let (key, val) = match key.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => {
                let v = it
                    .next()
                    .ok_or_else(|| Error::Usage(format!("--{key} needs a value")))?;
                (key.to_string(), v.clone())
            }
        };
        if !allowed.contains(&key.as_str()) {
            return Err(Error::Usage(format!("{sub}: unknown option --{key}")));
        }
        if opts.insert(key.clone(), val).is_some() {
            return Err(Error::Usage(format!("--{key} given twice")));
        }
    }
    match sub.as_str() {
        "compile" => {
            let cfg = Config {
                layers: num(&opts, "layers", 32)?,
                heads: num(&opts, "heads", 16)?,
                kv_heads: num(&opts, "kv-heads", 8)?,
                head_dim: num(&opts, "head-dim", 8)?,
                hidden: num(&opts, "hidden", 128)?,
                ffn: num(&opts, "ffn", 256)?,
                vocab: num(&opts, "vocab", 512)?,
                seed: num(&opts, "seed", 1)?,
                rope_theta: 10_000.0,
                norm_eps: 1e-5,
            };
            cfg.validate()?;
            let stage = match opts.get("stage").map(String::as_str) {
                None | Some("all") => Stage::All,
                Some("config") => Stage::Config,
                Some("weights") => Stage::Weights,
                Some("pack") => Stage::Pack,
                Some(o) => return Err(Error::Usage(format!("--stage: unknown stage {o:?}"))),
            };
            Ok(Command::Compile {
                out: path(&opts, "out")?,
                cfg,
                stage,
            })
        }
        "prefill" => {
            let tokens: usize = num(&opts, "tokens", 0)?;
            if tokens == 0 {
                return Err(Error::Usage("--tokens N (N > 0) is required".into()));
            }
            Ok(Command::Prefill {
                model: path(&opts, "model")?,
                tokens,
                out: path(&opts, "out")?,
                seed: num(&opts, "seed", 7)?,
                numerics: numerics(&opts)?,
            })
        }
        _ => {
            let layout = match opts.get("layout").map(String::as_str) {
                None | Some("head-major") => Layout::HeadMajor,
                Some("token-major") => Layout::TokenMajor,
                Some(o) => return Err(Error::Usage(format!("--layout: unknown layout {o:?}"))),
            };
            let cast_bf16 = match opts.get("cast").map(String::as_str) {
                None | Some("none") | Some("f32") => false,
                Some("bf16") => true,
                Some(o) => {
                    return Err(Error::Usage(format!(
                        "--cast: expected none or bf16, got {o:?}"
                    )))
                }
            };
            Ok(Command::Decode(Decode {
                model: path(&opts, "model")?,
                kv: path(&opts, "kv")?,
                prompt: path(&opts, "prompt")?,
                steps: num(&opts, "steps", 32)?,
                out: path(&opts, "out")?,
                layout,
                cast_bf16,
                numerics: numerics(&opts)?,
                slots: num(&opts, "slots", 64)?,
            }))
        }
    }
}
