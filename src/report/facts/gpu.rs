//! What each step did on the accelerators it owned, one line per step and device.
//! For a GPU: peak GPU
//! memory of its own processes and energy first (what a reviewer asks of a GPU
//! experiment), then utilization, temperature and throttling; a reading the
//! device does not support is said so, never shown as 0.

use super::short::Style;
use crate::record::gpu::{GpuUse, NpuUse};
use crate::record::run::{AttemptRecord, Record};
use crate::report::format::{bytes, number};

/// One line per step and GPU it held, in step order.
pub fn gpu_lines(rec: &Record, style: Style) -> Vec<String> {
    let mut out = Vec::new();
    for s in &rec.steps {
        // Measured attempts only; a step of warm-ups alone shows those.
        let measured: Vec<&AttemptRecord> = s.attempts.iter().filter(|a| !a.warmup).collect();
        let attempts = if measured.is_empty() {
            s.attempts.iter().collect()
        } else {
            measured
        };
        let mut uuids: Vec<(&str, &str)> = Vec::new();
        for g in attempts.iter().flat_map(|a| &a.gpus) {
            if !uuids.iter().any(|(u, _)| *u == g.uuid) {
                uuids.push((&g.uuid, &g.device));
            }
        }
        for (uuid, device) in uuids {
            let uses: Vec<&GpuUse> = attempts
                .iter()
                .flat_map(|a| &a.gpus)
                .filter(|g| g.uuid == uuid)
                .collect();
            let on = if uuid.starts_with("MIG-") {
                format!("{} ({})", style.code(device), style.code(uuid))
            } else {
                style.code(device)
            };
            out.push(format!("{} on {on}: {}", style.code(&s.id), figures(&uses)));
        }
    }
    out
}

/// The figures of one GPU over a step's attempts.
fn figures(uses: &[&GpuUse]) -> String {
    let n = uses.len();
    let of = if n > 1 {
        format!(" (highest of {n} attempts)")
    } else {
        String::new()
    };
    let mut parts = Vec::new();
    match uses.iter().filter_map(|u| u.peak_memory_bytes).max() {
        Some(b) => parts.push(format!("peak GPU memory {}{of}", bytes(b as f64))),
        None if unsupported(uses, "memory") => {
            parts.push("GPU memory not reported by the device".into())
        }
        None => {}
    }
    let energy: Vec<f64> = uses.iter().filter_map(|u| u.energy_j).collect();
    match (
        energy.len(),
        energy.iter().cloned().fold(f64::NAN, f64::min),
        energy.iter().cloned().fold(f64::NAN, f64::max),
    ) {
        (0, _, _) if unsupported(uses, "energy") => parts.push("energy not supported".into()),
        (0, _, _) => {}
        (1, _, _) => parts.push(format!("{} J", number(energy[0]))),
        (_, lo, hi) => parts.push(format!("{}–{} J per attempt", number(lo), number(hi))),
    }
    let means: Vec<f64> = uses
        .iter()
        .filter_map(|u| u.utilization_mean_percent)
        .collect();
    if !means.is_empty() {
        let mean = means.iter().sum::<f64>() / means.len() as f64;
        let max = uses
            .iter()
            .filter_map(|u| u.utilization_max_percent)
            .max()
            .unwrap_or(0);
        parts.push(format!("utilization {}% mean, {max}% max", number(mean)));
    }
    if let Some(t) = uses.iter().filter_map(|u| u.temperature_max_c).max() {
        parts.push(format!("{t} °C max"));
    }
    let mut reasons: Vec<&str> = uses
        .iter()
        .flat_map(|u| &u.throttle_reasons)
        .map(String::as_str)
        .filter(|r| *r != "gpu_idle")
        .collect();
    reasons.sort_unstable();
    reasons.dedup();
    if !reasons.is_empty() {
        parts.push(format!("throttled ({})", reasons.join(", ")));
    }
    if parts.is_empty() {
        return "nothing NVML could read".into();
    }
    parts.join(", ")
}

fn unsupported(uses: &[&GpuUse], what: &str) -> bool {
    uses.iter()
        .any(|u| u.not_supported.iter().any(|s| s == what))
}

/// One line per step and NPU card it held: the card's memory in use, power,
/// temperature and utilization as its vendor's tool read them.
pub fn npu_lines(rec: &Record, style: Style) -> Vec<String> {
    let mut out = Vec::new();
    for s in &rec.steps {
        let mut devices: Vec<&str> = Vec::new();
        for n in s
            .attempts
            .iter()
            .filter(|a| !a.warmup)
            .flat_map(|a| &a.npus)
        {
            if !devices.contains(&n.device.as_str()) {
                devices.push(&n.device);
            }
        }
        for device in devices {
            let uses: Vec<&NpuUse> = s
                .attempts
                .iter()
                .filter(|a| !a.warmup)
                .flat_map(|a| &a.npus)
                .filter(|n| n.device == device)
                .collect();
            out.push(format!(
                "{} on {}: {}",
                style.code(&s.id),
                style.code(device),
                npu_figures(&uses)
            ));
        }
    }
    out
}

fn npu_figures(uses: &[&NpuUse]) -> String {
    let mut parts = Vec::new();
    if let Some(b) = uses.iter().filter_map(|u| u.peak_memory_bytes).max() {
        parts.push(format!("card memory in use up to {}", bytes(b as f64)));
    }
    let means: Vec<f64> = uses.iter().filter_map(|u| u.power_mean_w).collect();
    if !means.is_empty() {
        let max = uses
            .iter()
            .filter_map(|u| u.power_max_w)
            .fold(f64::NAN, f64::max);
        parts.push(format!(
            "{} W mean, {} W max",
            number(means.iter().sum::<f64>() / means.len() as f64),
            number(max)
        ));
    } else if uses
        .iter()
        .any(|u| u.not_supported.iter().any(|s| s == "power"))
    {
        parts.push("power not reported by its tool".into());
    }
    if let Some(t) = uses
        .iter()
        .filter_map(|u| u.temperature_max_c)
        .reduce(f64::max)
    {
        parts.push(format!("{} °C max", number(t)));
    }
    let utils: Vec<f64> = uses
        .iter()
        .filter_map(|u| u.utilization_mean_percent)
        .collect();
    if !utils.is_empty() {
        parts.push(format!(
            "utilization {}% mean",
            number(utils.iter().sum::<f64>() / utils.len() as f64)
        ));
    }
    let source = uses.first().map(|u| u.source.as_str()).unwrap_or_default();
    if parts.is_empty() {
        let why = uses.iter().flat_map(|u| &u.errors).next();
        return match why {
            Some(e) => format!("not read ({e})"),
            None => "nothing its tool could read".into(),
        };
    }
    format!("{} ({source}; the whole card's)", parts.join(", "))
}
