//! `kvsim compile`: materialises a model folder in three stages, each skipped when its
//! output exists and was made from the same inputs.
//!
//! - config:  `config.json` from the command line (input: the arguments).
//! - weights: `weights.safetensors` (input: sha256 of `config.json`, stored in the
//!   file's `__metadata__.config_sha256`).
//! - pack:    `packed.bin` + `manifest.json`: weights re-laid out for the kernels
//!   (fused q|k|v and gate|up per layer, 64-byte aligned parts), with the sha256 of
//!   each part (input: sha256 of `weights.safetensors`, stored in the manifest).

use std::path::Path;

use crate::cli::Stage;
use crate::io::{self, SafeTensors};
use crate::model::{self, Config};
use crate::Error;

/// What a stage did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Output written.
    Built,
    /// Output already present for the same inputs.
    Skipped,
}

impl Outcome {
    /// Short word for messages and metrics.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Built => "built",
            Outcome::Skipped => "skipped (up to date)",
        }
    }
}

/// Runs the requested stages; returns (stage name, outcome) in order.
pub fn run(out: &Path, cfg: &Config, stage: Stage) -> Result<Vec<(&'static str, Outcome)>, Error> {
    std::fs::create_dir_all(out).map_err(|e| Error::Io {
        path: out.to_path_buf(),
        source: e,
    })?;
    let mut done = Vec::new();
    if matches!(stage, Stage::All | Stage::Config) {
        done.push(("config", config_stage(out, cfg)?));
    }
    if matches!(stage, Stage::All | Stage::Weights) {
        done.push(("weights", weights_stage(out)?));
    }
    if matches!(stage, Stage::All | Stage::Pack) {
        done.push(("pack", pack_stage(out)?));
    }
    Ok(done)
}

fn config_stage(out: &Path, cfg: &Config) -> Result<Outcome, Error> {
    let path = out.join("config.json");
    let bytes = serde_json::to_string_pretty(cfg)? + "\n";
    if std::fs::read(&path).ok().as_deref() == Some(bytes.as_bytes()) {
        return Ok(Outcome::Skipped);
    }
    io::write_atomic(&path, bytes.as_bytes())?;
    Ok(Outcome::Built)
}

fn weights_stage(out: &Path) -> Result<Outcome, Error> {
    let cfg_bytes = io::read(&out.join("config.json"))?;
    let cfg = model::read_config(out)?;
    let sha = io::sha256_hex(&cfg_bytes);
    let path = out.join("weights.safetensors");
    if let Ok(bytes) = std::fs::read(&path) {
        if let Ok(st) = SafeTensors::from_bytes(&path, bytes) {
            if st.metadata("config_sha256") == Some(sha.as_str()) {
                return Ok(Outcome::Skipped);
            }
        }
    }
    model::write_weights(&path, &cfg, &sha)?;
    Ok(Outcome::Built)
}

fn pack_stage(out: &Path) -> Result<Outcome, Error> {
    let cfg = model::read_config(out)?;
    let wpath = out.join("weights.safetensors");
    let wbytes = io::read(&wpath)?;
    let wsha = io::sha256_hex(&wbytes);
    let mpath = out.join("manifest.json");
    let ppath = out.join("packed.bin");
    if let (Ok(m), Ok(p)) = (std::fs::read(&mpath), std::fs::read(&ppath)) {
        if let Ok(m) = serde_json::from_slice::<serde_json::Value>(&m) {
            if m["weights_sha256"] == wsha.as_str()
                && m["packed_sha256"] == io::sha256_hex(&p).as_str()
            {
                return Ok(Outcome::Skipped);
            }
        }
    }
    let st = SafeTensors::from_bytes(&wpath, wbytes)?;
    // (part name, shape, tensors whose rows are concatenated side by side)
    let mut groups: Vec<(String, Vec<&str>)> = vec![("embed".into(), vec!["embed"])];
    let layer_names: Vec<[String; 9]> = (0..cfg.layers)
        .map(|l| {
            [
                "attn_norm",
                "wq",
                "wk",
                "wv",
                "wo",
                "ffn_norm",
                "w_gate",
                "w_up",
                "w_down",
            ]
            .map(|n| format!("layers.{l}.{n}"))
        })
        .collect();
    for (l, n) in layer_names.iter().enumerate() {
        groups.push((format!("layers.{l}.attn_norm"), vec![&n[0]]));
        groups.push((format!("layers.{l}.wqkv"), vec![&n[1], &n[2], &n[3]]));
        groups.push((format!("layers.{l}.wo"), vec![&n[4]]));
        groups.push((format!("layers.{l}.ffn_norm"), vec![&n[5]]));
        groups.push((format!("layers.{l}.w_gate_up"), vec![&n[6], &n[7]]));
        groups.push((format!("layers.{l}.w_down"), vec![&n[8]]));
    }
    groups.push(("final_norm".into(), vec!["final_norm"]));
    groups.push(("lm_head".into(), vec!["lm_head"]));

    let mut packed: Vec<u8> = Vec::new();
    let mut parts = Vec::new();
    for (name, members) in groups {
        let ts = members
            .iter()
            .map(|m| st.tensor(m))
            .collect::<Result<Vec<_>, _>>()?;
        let rows = ts[0].shape[0];
        let cols: Vec<usize> = ts
            .iter()
            .map(|t| if t.shape.len() == 2 { t.shape[1] } else { 1 })
            .collect();
        let mut bytes = Vec::new();
        if ts.len() == 1 {
            for v in &ts[0].data {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        } else {
            for r in 0..rows {
                for (t, &c) in ts.iter().zip(&cols) {
                    for v in &t.data[r * c..(r + 1) * c] {
                        bytes.extend_from_slice(&v.to_le_bytes());
                    }
                }
            }
        }
        while packed.len() % 64 != 0 {
            packed.push(0);
        }
        let shape = if ts[0].shape.len() == 2 {
            vec![rows, cols.iter().sum()]
        } else {
            vec![rows]
        };
        parts.push(serde_json::json!({
            "name": name,
            "offset": packed.len(),
            "bytes": bytes.len(),
            "dtype": "F32",
            "shape": shape,
            "sha256": io::sha256_hex(&bytes),
        }));
        packed.extend_from_slice(&bytes);
    }
    io::write_atomic(&ppath, &packed)?;
    let manifest = serde_json::json!({
        "schema": "kvsim/pack/v1",
        "config_sha256": io::sha256_hex(&io::read(&out.join("config.json"))?),
        "weights_sha256": wsha,
        "packed_sha256": io::sha256_hex(&packed),
        "packed_bytes": packed.len(),
        "parts": parts,
    });
    io::write_atomic(
        &mpath,
        (serde_json::to_string_pretty(&manifest)? + "\n").as_bytes(),
    )?;
    Ok(Outcome::Built)
}
