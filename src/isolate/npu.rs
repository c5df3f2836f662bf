//! An attempt's NPU cards, read by their vendors' tools once a second on a thread
//! of their own while the main process runs: `rbln-smi -j` (else `rbln-stat -j`)
//! for ATOM, `furiosa-smi status` for RNGD and Warboy. The tools read whole cards;
//! what a tool does not print for a card is named, never recorded as 0.

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::time::Duration;

use super::gpu::Series;
use crate::contract::NpuWatch;
use crate::devices::discover::{run_tool, ToolOutput, TOOL_TIMEOUT};
use crate::devices::readings::{furiosa_status, rbln_json, CardReading};
use crate::record::gpu::NpuUse;

/// How often the cards are read: each reading runs a vendor tool.
const NPU_SAMPLE: Duration = Duration::from_secs(1);

/// The reading thread; `None` when the attempt owns no NPU.
pub(crate) struct NpuSampler {
    run: Option<(mpsc::Sender<()>, std::thread::JoinHandle<Vec<NpuUse>>)>,
}

impl NpuSampler {
    pub(crate) fn start(watch: Vec<NpuWatch>) -> NpuSampler {
        if watch.is_empty() {
            return NpuSampler { run: None };
        }
        let (tx, rx) = mpsc::channel();
        match std::thread::Builder::new()
            .name("npu-sampler".into())
            .spawn(move || read_until_stopped(watch, &rx))
        {
            Ok(t) => NpuSampler { run: Some((tx, t)) },
            Err(_) => NpuSampler { run: None },
        }
    }

    pub(crate) async fn stop(self) -> Vec<NpuUse> {
        let Some((tx, thread)) = self.run else {
            return Vec::new();
        };
        let _ = tx.send(());
        tokio::task::spawn_blocking(move || thread.join().unwrap_or_default())
            .await
            .unwrap_or_default()
    }
}

/// The tool that reads a kind of card, and its parser.
type Reader = (
    &'static str,
    &'static [&'static str],
    fn(&str) -> Vec<CardReading>,
);

fn readers(kind: &str) -> &'static [Reader] {
    match kind {
        "atom" => &[
            ("rbln-smi", &["-j"], rbln_json),
            ("rbln-stat", &["-j"], rbln_json),
        ],
        "rngd" | "warboy" => &[("furiosa-smi", &["status"], furiosa_status)],
        _ => &[],
    }
}

/// Reads every card of one kind with the first of its tools that is installed.
fn read(kind: &str) -> Result<(String, Vec<CardReading>), String> {
    let mut why = format!("no tool reads `{kind}` cards");
    for (tool, args, parse) in readers(kind) {
        match run_tool(tool, args, TOOL_TIMEOUT) {
            ToolOutput::Absent => why = format!("{tool} is not installed"),
            ToolOutput::Failed(e) => return Err(e),
            ToolOutput::Ok(text) => {
                return Ok((format!("{tool} {}", args.join(" ")), parse(&text)))
            }
        }
    }
    Err(why)
}

#[derive(Default)]
struct Card {
    source: String,
    samples: u64,
    memory: Option<u64>,
    power: Series,
    temperature: Option<f64>,
    utilization: Series,
    errors: BTreeSet<String>,
}

fn read_until_stopped(watch: Vec<NpuWatch>, stop: &mpsc::Receiver<()>) -> Vec<NpuUse> {
    let mut cards: Vec<Card> = watch.iter().map(|_| Card::default()).collect();
    let kinds: BTreeSet<&str> = watch.iter().map(|w| w.kind.as_str()).collect();
    loop {
        for kind in &kinds {
            let got = read(kind);
            for (w, card) in watch
                .iter()
                .zip(cards.iter_mut())
                .filter(|(w, _)| w.kind == *kind)
            {
                match &got {
                    Err(e) => {
                        card.errors.insert(e.clone());
                    }
                    Ok((source, readings)) => match readings.iter().find(|r| r.index == w.index) {
                        Some(r) => card.add(source, r),
                        None => {
                            card.errors
                                .insert(format!("{source} printed no card {}", w.index));
                        }
                    },
                }
            }
        }
        match stop.recv_timeout(NPU_SAMPLE) {
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            _ => break,
        }
    }
    watch
        .into_iter()
        .zip(cards)
        .map(|(w, c)| c.finish(w))
        .collect()
}

impl Card {
    fn add(&mut self, source: &str, r: &CardReading) {
        self.source = source.to_string();
        self.samples += 1;
        if let Some(m) = r.memory_used_bytes {
            self.memory = Some(self.memory.map_or(m, |x| x.max(m)));
        }
        if let Some(w) = r.power_w {
            self.power.add(w);
        }
        if let Some(t) = r.temperature_c {
            self.temperature = Some(self.temperature.map_or(t, |x| x.max(t)));
        }
        if let Some(u) = r.utilization_percent {
            self.utilization.add(u);
        }
    }

    fn finish(self, w: NpuWatch) -> NpuUse {
        let mut not_supported = Vec::new();
        if self.samples > 0 {
            for (what, missing) in [
                ("memory", self.memory.is_none()),
                ("power", self.power.mean().is_none()),
                ("temperature", self.temperature.is_none()),
                ("utilization", self.utilization.mean().is_none()),
            ] {
                if missing {
                    not_supported.push(what.to_string());
                }
            }
        }
        NpuUse {
            device: w.device,
            source: self.source,
            samples: self.samples,
            peak_memory_bytes: self.memory,
            power_mean_w: self.power.mean(),
            power_max_w: self.power.max(),
            temperature_max_c: self.temperature,
            utilization_mean_percent: self.utilization.mean(),
            not_supported,
            errors: self.errors.into_iter().collect(),
        }
    }
}
