//! An attempt's GPU use, sampled through NVML on a thread of its own while the
//! main process runs, at the cadence memory is sampled: its own processes' device
//! memory, the GPU's utilization, temperature and throttle reasons, the energy
//! counter's delta, and any of its processes on a GPU it does not own. A reading a
//! device does not support is named as such, never recorded as 0.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::mpsc;
use std::time::Duration;

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::{Device, Nvml};

use crate::contract::GpuWatch;
use crate::record::gpu::{GpuMisuse, GpuUse};

/// How often GPUs are sampled (as memory is where the kernel keeps no peak).
const GPU_SAMPLE: Duration = Duration::from_millis(50);

/// What the sampler found, once stopped.
#[derive(Debug, Default)]
pub(crate) struct GpuFound {
    pub uses: Vec<GpuUse>,
    pub misuse: Vec<GpuMisuse>,
}

/// The sampling thread; `None` where there is nothing to sample (no NVML).
pub(crate) struct GpuSampler {
    run: Option<(mpsc::Sender<()>, std::thread::JoinHandle<GpuFound>)>,
}

impl GpuSampler {
    /// Starts sampling `watch` (the GPUs the attempt owns; all others are watched
    /// for its processes too); `pids` lists the attempt's processes now.
    pub(crate) fn start(
        watch: Vec<GpuWatch>,
        pids: Box<dyn Fn() -> Vec<i32> + Send>,
    ) -> GpuSampler {
        let Some(nvml) = crate::devices::discover::nvml::shared() else {
            return GpuSampler { run: None };
        };
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("gpu-sampler".into())
            .spawn(move || sample_until_stopped(nvml, watch, pids.as_ref(), &rx));
        match thread {
            Ok(t) => GpuSampler { run: Some((tx, t)) },
            Err(_) => GpuSampler { run: None },
        }
    }

    /// Stops sampling (at once: the thread waits on the channel, not a sleep).
    pub(crate) async fn stop(self) -> GpuFound {
        let Some((tx, thread)) = self.run else {
            return GpuFound::default();
        };
        let _ = tx.send(());
        tokio::task::spawn_blocking(move || thread.join().unwrap_or_default())
            .await
            .unwrap_or_default()
    }
}

/// One owned GPU's readings so far.
struct Watched {
    watch: GpuWatch,
    energy_start: Option<u64>,
    samples: u64,
    memory_peak: Option<u64>,
    utilization: Vec<u32>,
    temperature_max: Option<u32>,
    throttle: u64,
    not_supported: BTreeSet<&'static str>,
    errors: BTreeSet<String>,
}

impl Watched {
    fn new(nvml: &Nvml, watch: GpuWatch) -> Watched {
        let mut w = Watched {
            watch,
            energy_start: None,
            samples: 0,
            memory_peak: None,
            utilization: Vec::new(),
            temperature_max: None,
            throttle: 0,
            not_supported: BTreeSet::new(),
            errors: BTreeSet::new(),
        };
        if let Some(dev) = w.device(nvml) {
            w.energy_start = w.read("energy", dev.total_energy_consumption());
        }
        w
    }

    fn device<'n>(&mut self, nvml: &'n Nvml) -> Option<Device<'n>> {
        let uuid = self.watch.uuid.clone();
        self.read("device", nvml.device_by_uuid(uuid))
    }

    /// A reading, or its absence said: "not supported" apart from other failures.
    fn read<T>(&mut self, what: &'static str, r: Result<T, NvmlError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(NvmlError::NotSupported) => {
                self.not_supported.insert(what);
                None
            }
            Err(e) => {
                self.errors.insert(format!("{what}: {e}"));
                None
            }
        }
    }

    fn sample(&mut self, nvml: &Nvml, own: &HashSet<u32>) {
        let Some(dev) = self.device(nvml) else {
            return;
        };
        self.samples += 1;
        if let Some(procs) = self.read("memory", processes(&dev)) {
            let mut sum = 0u64;
            for p in procs.iter().filter(|p| own.contains(&p.pid)) {
                match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => sum += b,
                    UsedGpuMemory::Unavailable => {
                        self.not_supported.insert("memory");
                    }
                }
            }
            self.memory_peak = Some(self.memory_peak.unwrap_or(0).max(sum));
        }
        if let Some(u) = self.read("utilization", dev.utilization_rates()) {
            self.utilization.push(u.gpu);
        }
        if let Some(t) = self.read("temperature", dev.temperature(TemperatureSensor::Gpu)) {
            self.temperature_max = Some(self.temperature_max.map_or(t, |m| m.max(t)));
        }
        if let Some(r) = self.read("throttle", dev.current_throttle_reasons()) {
            self.throttle |= r.bits();
        }
    }

    fn finish(mut self, nvml: &Nvml) -> GpuUse {
        let end = self
            .device(nvml)
            .and_then(|d| d.total_energy_consumption().ok());
        let energy_j = match (self.energy_start, end) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1000.0),
            _ => None,
        };
        let n = self.utilization.len();
        GpuUse {
            device: self.watch.device,
            uuid: self.watch.uuid,
            source: "NVML".into(),
            samples: self.samples,
            // A reading NVML could not give is absent, not 0.
            peak_memory_bytes: self
                .memory_peak
                .filter(|_| !self.not_supported.contains("memory")),
            energy_j,
            utilization_mean_percent: (n > 0)
                .then(|| self.utilization.iter().map(|&u| f64::from(u)).sum::<f64>() / n as f64),
            utilization_max_percent: self.utilization.iter().copied().max(),
            temperature_max_c: self.temperature_max,
            throttle_reasons: throttle_names(self.throttle),
            not_supported: self.not_supported.iter().map(|s| s.to_string()).collect(),
            errors: self.errors.into_iter().collect(),
        }
    }
}

/// Compute and graphics processes on `dev`.
fn processes(dev: &Device<'_>) -> Result<Vec<ProcessInfo>, NvmlError> {
    let mut all = dev.running_compute_processes()?;
    all.extend(dev.running_graphics_processes()?);
    Ok(all)
}

fn throttle_names(bits: u64) -> Vec<String> {
    nvml_wrapper::bitmasks::device::ThrottleReasons::from_bits_truncate(bits)
        .iter_names()
        .map(|(name, _)| name.to_ascii_lowercase())
        .collect()
}

fn sample_until_stopped(
    nvml: &Nvml,
    watch: Vec<GpuWatch>,
    pids: &dyn Fn() -> Vec<i32>,
    stop: &mpsc::Receiver<()>,
) -> GpuFound {
    let owned: BTreeSet<String> = watch.iter().map(|w| w.gpu_uuid.clone()).collect();
    let mut watched: Vec<Watched> = watch.into_iter().map(|w| Watched::new(nvml, w)).collect();
    let mut misuse: BTreeMap<(u32, String), GpuMisuse> = BTreeMap::new();
    loop {
        let own: HashSet<u32> = pids()
            .into_iter()
            .filter_map(|p| u32::try_from(p).ok())
            .collect();
        for w in &mut watched {
            w.sample(nvml, &own);
        }
        foreign(nvml, &owned, &own, &mut misuse);
        match stop.recv_timeout(GPU_SAMPLE) {
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            _ => break,
        }
    }
    GpuFound {
        uses: watched.into_iter().map(|w| w.finish(nvml)).collect(),
        misuse: misuse.into_values().collect(),
    }
}

/// The attempt's processes on GPUs it owns no part of.
fn foreign(
    nvml: &Nvml,
    owned: &BTreeSet<String>,
    own: &HashSet<u32>,
    out: &mut BTreeMap<(u32, String), GpuMisuse>,
) {
    if own.is_empty() {
        return;
    }
    let count = nvml.device_count().unwrap_or(0);
    for i in 0..count {
        let Ok(dev) = nvml.device_by_index(i) else {
            continue;
        };
        let Ok(uuid) = dev.uuid() else {
            continue;
        };
        if owned.contains(&uuid) {
            continue;
        }
        for p in processes(&dev).unwrap_or_default() {
            if own.contains(&p.pid) {
                out.entry((p.pid, uuid.clone()))
                    .or_insert_with(|| GpuMisuse {
                        pid: p.pid,
                        uuid: uuid.clone(),
                        device: Some(format!("gpu{}", dev.index().unwrap_or(i))),
                        memory_bytes: match p.used_gpu_memory {
                            UsedGpuMemory::Used(b) => Some(b),
                            UsedGpuMemory::Unavailable => None,
                        },
                    });
            }
        }
    }
}

/// Every process NVML lists on any GPU or MIG instance, with the device's UUID
/// and name (`gpu1`); `None` on a host without NVML. For the release audit.
pub fn gpu_processes() -> Option<Vec<(u32, String, String)>> {
    let nvml = crate::devices::discover::nvml::shared()?;
    let mut out = Vec::new();
    for i in 0..nvml.device_count().unwrap_or(0) {
        let Ok(dev) = nvml.device_by_index(i) else {
            continue;
        };
        let name = format!("gpu{}", dev.index().unwrap_or(i));
        let instances = dev.mig_device_count().unwrap_or(0);
        let mut handles: Vec<Device<'_>> = (0..instances)
            .filter_map(|k| dev.mig_device_by_index(k).ok())
            .collect();
        handles.push(dev);
        for h in &handles {
            let uuid = h.uuid().unwrap_or_default();
            for p in processes(h).unwrap_or_default() {
                out.push((p.pid, uuid.clone(), name.clone()));
            }
        }
    }
    out.sort();
    out.dedup();
    Some(out)
}
