//! NVIDIA GPUs through NVML, loaded at run time (`libnvidia-ml.so.1`, or the
//! library `ORCHESTRATE_NVML_LIB` names). A host without the driver has no NVIDIA
//! devices, never an error or a link failure; `nvidia-smi` stays the fallback
//! when NVML is there but cannot answer.

use std::ffi::OsStr;

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

use super::super::model::Device;
use super::nvidia;
use crate::record::devices::{GpuFacts, MigInstance, MigMode};

/// Names the NVML library to load instead of the driver's (a fake one in tests).
pub const NVML_LIB_ENV: &str = "ORCHESTRATE_NVML_LIB";

/// What NVML found.
#[derive(Debug)]
pub enum NvmlFound {
    /// No NVML library, or no driver behind it: no NVIDIA GPU to use.
    Absent,
    /// The GPUs, and what could not be read of them.
    Found(Vec<Device>, Vec<String>),
    /// NVML loaded but failed; why.
    Failed(String),
}

/// Opens NVML: the library `ORCHESTRATE_NVML_LIB` names, else the driver's.
pub fn open() -> Result<Nvml, NvmlError> {
    match named_lib() {
        Some(path) => Nvml::builder().lib_path(OsStr::new(&path)).init(),
        None => Nvml::init(),
    }
}

/// NVML opened once for this process, for watching attempts; `None` on a host
/// without it.
pub fn shared() -> Option<&'static Nvml> {
    static NVML: std::sync::OnceLock<Option<Nvml>> = std::sync::OnceLock::new();
    NVML.get_or_init(|| open().ok()).as_ref()
}

fn named_lib() -> Option<std::ffi::OsString> {
    std::env::var_os(NVML_LIB_ENV).filter(|v| !v.is_empty())
}

/// The NVIDIA GPUs NVML lists, each with its UUID, name, memory, driver and CUDA
/// versions, PCI bus id and MIG mode.
pub fn discover() -> NvmlFound {
    let nvml = match open() {
        Ok(n) => n,
        // A library the user named that will not load is worth a word.
        Err(NvmlError::LibloadingError(e)) if named_lib().is_some() => {
            return NvmlFound::Failed(format!("{NVML_LIB_ENV}: {e}"))
        }
        Err(e) if absent(&e) => return NvmlFound::Absent,
        Err(e) => return NvmlFound::Failed(format!("NVML: {e}")),
    };
    let count = match nvml.device_count() {
        Ok(n) => n,
        Err(e) => return NvmlFound::Failed(format!("NVML device count: {e}")),
    };
    let driver = nvml.sys_driver_version().ok();
    let cuda = nvml
        .sys_cuda_driver_version()
        .ok()
        .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
    let mut devices = Vec::new();
    let mut warnings = Vec::new();
    for i in 0..count {
        match gpu(&nvml, i, driver.clone(), cuda.clone()) {
            Ok(d) => devices.push(d),
            Err(e) => warnings.push(format!("NVML GPU {i}: {e}")),
        }
    }
    NvmlFound::Found(devices, warnings)
}

/// An error that means "no NVIDIA driver here", not a fault.
fn absent(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::LibloadingError(_)
            | NvmlError::LibraryNotFound
            | NvmlError::DriverNotLoaded
            | NvmlError::NoPermission
    )
}

fn gpu(
    nvml: &Nvml,
    i: u32,
    driver: Option<String>,
    cuda: Option<String>,
) -> Result<Device, NvmlError> {
    let dev = nvml.device_by_index(i)?;
    let index = dev.index().unwrap_or(i);
    let mut d = nvidia::gpu(index, Some(dev.uuid()?), dev.name().ok());
    d.memory_bytes = dev.memory_info().ok().map(|m| m.total);
    d.driver = driver;
    let mig = match dev.mig_mode() {
        Ok(m) if m.current == 1 => MigMode::Enabled,
        Ok(_) => MigMode::Disabled,
        Err(NvmlError::NotSupported) => MigMode::NotSupported,
        Err(_) => MigMode::Unknown,
    };
    let instances = if mig == MigMode::Enabled {
        instances(&dev)
    } else {
        Vec::new()
    };
    if !instances.is_empty() {
        d.cores = instances.len() as u32;
    }
    d.gpu = Some(GpuFacts {
        pci_bus_id: dev.pci_info().ok().map(|p| p.bus_id),
        cuda_driver_version: cuda,
        mig,
        instances,
    });
    Ok(d)
}

/// The MIG instances of a GPU in MIG mode: every slot up to NVML's maximum that
/// holds one (empty slots answer "not found").
fn instances(dev: &nvml_wrapper::Device<'_>) -> Vec<MigInstance> {
    let max = dev.mig_device_count().unwrap_or(0);
    (0..max)
        .filter_map(|i| dev.mig_device_by_index(i).ok())
        .filter_map(|m| {
            Some(MigInstance {
                uuid: m.uuid().ok()?,
                profile: profile_of(&m.name().unwrap_or_default()),
                memory_bytes: m.memory_info().ok().map(|x| x.total),
            })
        })
        .collect()
}

/// The profile in a MIG device's name: `NVIDIA A100-SXM4-80GB MIG 1g.10gb` ->
/// `1g.10gb`; the whole name when it holds no `MIG `.
pub fn profile_of(name: &str) -> String {
    name.rsplit_once("MIG ")
        .map_or(name, |(_, p)| p)
        .trim()
        .to_string()
}
