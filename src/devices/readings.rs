//! What the NPU vendors' tools say of each card at one moment, read from their
//! output by pure functions (tested on recorded outputs): `rbln-smi -j` /
//! `rbln-stat -j` give power, temperature, memory in use and utilization per ATOM;
//! `furiosa-smi status` gives memory in use and per-core utilization per RNGD, and
//! no power.

use serde_json::Value;

use super::discover::table::{parse_size, tables};

/// One card's readings; `None` where its tool printed none.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CardReading {
    /// The vendor's index (`npu` of `rbln-stat`, N of `npuN`).
    pub index: u32,
    pub memory_used_bytes: Option<u64>,
    pub power_w: Option<f64>,
    pub temperature_c: Option<f64>,
    pub utilization_percent: Option<f64>,
}

/// `rbln-smi -j` / `rbln-stat -j`: `devices[]` with `npu`, `card_power` ("17521800uW"),
/// `temperature` ("31C"), `memory.used` (bytes as a string) and `util` ("0.0").
pub fn rbln_json(text: &str) -> Vec<CardReading> {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    let text_of = |d: &Value, k: &str| match d.get(k) {
        Some(Value::String(s)) => Some(s.trim().to_string()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    v["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| {
            Some(CardReading {
                index: u32::try_from(d.get("npu")?.as_u64()?).ok()?,
                memory_used_bytes: d
                    .get("memory")
                    .and_then(|m| text_of(m, "used"))
                    .and_then(|s| s.parse().ok()),
                power_w: text_of(d, "card_power").and_then(|s| power(&s)),
                temperature_c: text_of(d, "temperature").and_then(|s| celsius(&s)),
                utilization_percent: text_of(d, "util").and_then(|s| s.parse().ok()),
            })
        })
        .collect()
}

/// A power such as `17521800uW`, `18.1W` or `250mW`, in watts.
fn power(s: &str) -> Option<f64> {
    // Divided, not multiplied by 1e-6: 18307255 µW reads 18.307255 W exactly as
    // printed (a division is correctly rounded, 1e-6 is not exact).
    let (num, per_watt) = if let Some(n) = s.strip_suffix("uW") {
        (n, 1e6)
    } else if let Some(n) = s.strip_suffix("mW") {
        (n, 1e3)
    } else {
        (s.strip_suffix('W')?, 1.0)
    };
    let w = num.trim().parse::<f64>().ok()? / per_watt;
    w.is_finite().then_some(w)
}

/// A temperature such as `31C` or `31 °C`.
fn celsius(s: &str) -> Option<f64> {
    let n = s.trim_end_matches(['C', 'c']).trim_end_matches('°').trim();
    n.parse().ok()
}

/// The table `rbln-smi` / `rbln-stat` print: `NPU`, `Temp`, `Power`,
/// `Memory(used/total)`, `Util` columns (older versions lack some).
pub fn rbln_table(text: &str) -> Vec<CardReading> {
    let mut out = Vec::new();
    for t in tables(text) {
        let Some(npu) = t.column("NPU") else { continue };
        let col = |prefix: &str| {
            t.header
                .iter()
                .position(|h| h.to_ascii_lowercase().starts_with(prefix))
        };
        let (temp, pow, mem, util) = (col("temp"), col("power"), col("memory"), col("util"));
        for row in &t.rows {
            let cell = |c: Option<usize>| c.and_then(|i| row.get(i)).map(String::as_str);
            let Some(index) = cell(Some(npu)).and_then(|s| s.parse().ok()) else {
                continue;
            };
            out.push(CardReading {
                index,
                memory_used_bytes: cell(mem)
                    .and_then(|m| m.split('/').next())
                    .and_then(parse_size),
                power_w: cell(pow).and_then(power),
                temperature_c: cell(temp).and_then(celsius),
                utilization_percent: cell(util).and_then(|s| s.parse().ok()),
            });
        }
    }
    out
}

/// `furiosa-smi status`: per card `npuN` its `Memory` ("0.00/47.50 GiB": used of
/// total, one unit) and `Core Utilization` ("Core 3: 12.50%", one core per line, its
/// card's name on a middle line; `-` when the core reports none), whose mean is the
/// card's. No power is printed.
pub fn furiosa_status(text: &str) -> Vec<CardReading> {
    // A card's block starts at its `Core 0` line.
    // (the card, its cores' percentages, whether its name line was seen)
    let mut blocks: Vec<(CardReading, Vec<f64>, bool)> = Vec::new();
    for t in tables(text) {
        let (Some(dev), Some(util)) = (t.column("Device"), t.column("Core Utilization")) else {
            continue;
        };
        let mem = t.column("Memory");
        for row in &t.rows {
            let cell = |c: Option<usize>| c.and_then(|i| row.get(i)).map(String::as_str);
            let core = cell(Some(util)).unwrap_or_default();
            if core.starts_with("Core 0:") || blocks.is_empty() {
                blocks.push((CardReading::default(), Vec::new(), false));
            }
            let Some((card, cores, named)) = blocks.last_mut() else {
                continue;
            };
            if let Some(u) = core_percent(core) {
                cores.push(u);
            }
            let index = cell(Some(dev))
                .and_then(|d| d.strip_prefix("npu"))
                .and_then(|n| n.parse().ok());
            if let Some(index) = index {
                card.index = index;
                card.memory_used_bytes = cell(mem).and_then(used_of_total);
                *named = true;
            }
        }
    }
    blocks
        .into_iter()
        .filter(|(_, _, named)| *named)
        .map(|(mut c, cores, _)| {
            c.utilization_percent =
                (!cores.is_empty()).then(|| cores.iter().sum::<f64>() / cores.len() as f64);
            c
        })
        .collect()
}

/// `Core 3: 12.50%` (a trailing comma allowed) -> 12.5; `Core 3: -` -> none.
fn core_percent(cell: &str) -> Option<f64> {
    let (_, v) = cell.split_once(':')?;
    v.trim()
        .trim_end_matches(',')
        .strip_suffix('%')?
        .trim()
        .parse()
        .ok()
}

/// `0.00/47.50 GiB` -> the used part in bytes, with the total's unit.
fn used_of_total(cell: &str) -> Option<u64> {
    let (used, total) = cell.split_once('/')?;
    let unit: String = total
        .trim()
        .chars()
        .skip_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    parse_size(&format!("{}{}", used.trim(), unit.trim()))
}
