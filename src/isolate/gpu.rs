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

/// A running mean and maximum: a long attempt keeps three numbers, not every
/// sample.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Series {
    sum: f64,
    n: u64,
    max: Option<f64>,
}

impl Series {
    pub(crate) fn add(&mut self, x: f64) {
        self.sum += x;
        self.n += 1;
        self.max = Some(self.max.map_or(x, |m| m.max(x)));
    }

    pub(crate) fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }

    pub(crate) fn max(&self) -> Option<f64> {
        self.max
    }
}

/// One owned GPU's readings so far; its handle is looked up once.
struct Watched {
    watch: GpuWatch,
    device: Option<Device<'static>>,
    energy_start: Option<u64>,
    samples: u64,
    memory_peak: Option<u64>,
    utilization: Series,
    temperature_max: Option<u32>,
    throttle: u64,
    not_supported: BTreeSet<&'static str>,
    errors: BTreeSet<String>,
}

impl Watched {
    fn new(nvml: &'static Nvml, watch: GpuWatch) -> Watched {
        let mut w = Watched {
            device: None,
            energy_start: None,
            samples: 0,
            memory_peak: None,
            utilization: Series::default(),
            temperature_max: None,
            throttle: 0,
            not_supported: BTreeSet::new(),
            errors: BTreeSet::new(),
            watch,
        };
        w.device = w.read("device", nvml.device_by_uuid(w.watch.uuid.as_str()));
        if let Some(dev) = &w.device {
            let start = dev.total_energy_consumption();
            w.energy_start = w.read("energy", start);
        }
        w
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

    fn sample(&mut self, own: &HashSet<u32>) {
        let Some(dev) = self.device.take() else {
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
            self.utilization.add(f64::from(u.gpu));
        }
        if let Some(t) = self.read("temperature", dev.temperature(TemperatureSensor::Gpu)) {
            self.temperature_max = Some(self.temperature_max.map_or(t, |m| m.max(t)));
        }
        if let Some(r) = self.read("throttle", dev.current_throttle_reasons()) {
            self.throttle |= r.bits();
        }
        self.device = Some(dev);
    }

    fn finish(self) -> GpuUse {
        let end = self
            .device
            .as_ref()
            .and_then(|d| d.total_energy_consumption().ok());
        let energy_j = match (self.energy_start, end) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1000.0),
            _ => None,
        };
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
            utilization_mean_percent: self.utilization.mean(),
            // Whole percents, as NVML gives them.
            utilization_max_percent: self.utilization.max().map(|m| m as u32),
            temperature_max_c: self.temperature_max,
            throttle_reasons: throttle_names(self.throttle),
            not_supported: self.not_supported.iter().map(|s| s.to_string()).collect(),
            errors: self.errors.into_iter().collect(),
        }
    }
}

/// Compute and graphics processes on `dev`, each once: a process with both
/// contexts is listed in both, with the same memory.
fn processes(dev: &Device<'_>) -> Result<Vec<ProcessInfo>, NvmlError> {
    let mut all = dev.running_compute_processes()?;
    for g in dev.running_graphics_processes()? {
        if !all.iter().any(|p| p.pid == g.pid) {
            all.push(g);
        }
    }
    Ok(all)
}

fn throttle_names(bits: u64) -> Vec<String> {
    nvml_wrapper::bitmasks::device::ThrottleReasons::from_bits_truncate(bits)
        .iter_names()
        .map(|(name, _)| name.to_ascii_lowercase())
        .collect()
}

/// A GPU the attempt owns no part of: its handle, UUID and name, listed once.
struct Other {
    device: Device<'static>,
    uuid: String,
    name: String,
}

/// The host's GPUs that none of `owned` (physical GPU UUIDs) is.
fn others(nvml: &'static Nvml, owned: &BTreeSet<String>) -> Vec<Other> {
    (0..nvml.device_count().unwrap_or(0))
        .filter_map(|i| {
            let device = nvml.device_by_index(i).ok()?;
            let uuid = device.uuid().ok()?;
            let name = format!("gpu{}", device.index().unwrap_or(i));
            (!owned.contains(&uuid)).then_some(Other { device, uuid, name })
        })
        .collect()
}

fn sample_until_stopped(
    nvml: &'static Nvml,
    watch: Vec<GpuWatch>,
    pids: &dyn Fn() -> Vec<i32>,
    stop: &mpsc::Receiver<()>,
) -> GpuFound {
    let owned: BTreeSet<String> = watch.iter().map(|w| w.gpu_uuid.clone()).collect();
    let others = others(nvml, &owned);
    let mut watched: Vec<Watched> = watch.into_iter().map(|w| Watched::new(nvml, w)).collect();
    let mut misuse: BTreeMap<(u32, String), GpuMisuse> = BTreeMap::new();
    loop {
        let own: HashSet<u32> = pids()
            .into_iter()
            .filter_map(|p| u32::try_from(p).ok())
            .collect();
        for w in &mut watched {
            w.sample(&own);
        }
        foreign(&others, &own, &mut misuse);
        match stop.recv_timeout(GPU_SAMPLE) {
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            _ => break,
        }
    }
    GpuFound {
        uses: watched.into_iter().map(Watched::finish).collect(),
        misuse: misuse.into_values().collect(),
    }
}

/// The attempt's processes on GPUs it owns no part of.
fn foreign(others: &[Other], own: &HashSet<u32>, out: &mut BTreeMap<(u32, String), GpuMisuse>) {
    if own.is_empty() {
        return;
    }
    for o in others {
        for p in processes(&o.device).unwrap_or_default() {
            if own.contains(&p.pid) {
                out.entry((p.pid, o.uuid.clone()))
                    .or_insert_with(|| GpuMisuse {
                        pid: p.pid,
                        uuid: o.uuid.clone(),
                        device: Some(o.name.clone()),
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
