//! Discovery of the accelerators the host really has.
//!
//! Each vendor tool's output is parsed by a pure function over its text (tested on
//! recorded samples); `discover` only runs the tools (a few seconds' timeout each; a
//! missing tool means "none found") and checks `/dev`.

pub mod furiosa;
pub mod nodes;
pub mod nvidia;
pub mod nvml;
pub mod rbln;
pub mod table;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::model::{Device, Inventory};
use nodes::NodeMap;

/// How long one vendor tool may take.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(5);

/// The outcome of running a tool.
#[derive(Debug)]
pub enum ToolOutput {
    /// Not installed (not on `PATH`).
    Absent,
    /// Ran and exited 0, with its stdout.
    Ok(String),
    /// Ran but failed, timed out or printed non-UTF-8; the reason.
    Failed(String),
}

/// Runs `program args` with `timeout`, capturing stdout.
pub fn run_tool(program: &str, args: &[&str], timeout: Duration) -> ToolOutput {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // Its own process group, so a timeout kills whatever it forked too.
        .process_group(0)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return ToolOutput::Absent,
        Err(e) => return ToolOutput::Failed(format!("{program}: {e}")),
    };
    // Read on a thread so a chatty tool cannot block on a full pipe while we wait.
    let reader = child.stdout.take().map(|mut out| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = out.read_to_end(&mut buf);
            buf
        })
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) if start.elapsed() >= timeout => {
                if let Ok(pid) = i32::try_from(child.id()) {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                let _ = child.kill();
                let _ = child.wait();
                // A grandchild that left the group may keep the pipe open: do not
                // wait for the reader.
                return ToolOutput::Failed(format!("{program}: no answer within {timeout:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => break Err(format!("{program}: {e}")),
        }
    };
    let out = reader.and_then(|r| r.join().ok()).unwrap_or_default();
    match status {
        Err(e) => ToolOutput::Failed(e),
        Ok(s) if !s.success() => ToolOutput::Failed(format!("{program} {}: {s}", args.join(" "))),
        Ok(_) => match String::from_utf8(out) {
            Ok(text) => ToolOutput::Ok(text),
            Err(_) => ToolOutput::Failed(format!("{program}: output is not UTF-8")),
        },
    }
}

fn add(inv: &mut Inventory, found: (Vec<Device>, Vec<String>), source: &str) {
    for d in found.0 {
        if inv.find(&d.id).is_none() {
            inv.push(d, source);
        }
    }
    inv.warnings.extend(found.1);
}

fn note_failure(inv: &mut Inventory, out: &ToolOutput) {
    if let ToolOutput::Failed(why) = out {
        inv.warnings.push(why.clone());
    }
}

/// What the host really has: NVIDIA GPUs (NVML, else `nvidia-smi`), Furiosa RNGD
/// (`furiosa-smi`) or Warboy (`furiosactl`), Rebellions ATOM (`rbln-smi`, else
/// `rbln-stat`), each with the `/dev` nodes that exist. Never fails: problems are
/// warnings.
pub fn discover() -> Inventory {
    let mut inv = Inventory::default();
    match nvml::discover() {
        nvml::NvmlFound::Found(devices, warnings) => add(&mut inv, (devices, warnings), "NVML"),
        nvml::NvmlFound::Absent => nvidia_smi(&mut inv),
        nvml::NvmlFound::Failed(why) => {
            inv.warnings.push(why);
            nvidia_smi(&mut inv);
        }
    }
    furiosa(&mut inv);
    rebellions(&mut inv);
    attach_nodes(&mut inv, &nodes::classify(&nodes::scan(Path::new("/dev"))));
    inv
}

/// NVIDIA GPUs as `nvidia-smi` lists them (when NVML cannot).
fn nvidia_smi(inv: &mut Inventory) {
    let query = format!("--query-gpu={}", nvidia::QUERY_FIELDS.join(","));
    let csv = run_tool(
        "nvidia-smi",
        &[&query, "--format=csv,noheader"],
        TOOL_TIMEOUT,
    );
    if !matches!(csv, ToolOutput::Absent) {
        let listed = match run_tool("nvidia-smi", &["-L"], TOOL_TIMEOUT) {
            ToolOutput::Ok(text) => nvidia::parse_list(&text),
            _ => Vec::new(),
        };
        let (from_list, mig_warnings) = nvidia::from_list(&listed);
        inv.warnings.extend(mig_warnings);
        match &csv {
            ToolOutput::Ok(text) => add(inv, nvidia::parse_query_csv(text), "nvidia-smi"),
            other => {
                note_failure(inv, other);
                add(inv, (from_list, Vec::new()), "nvidia-smi -L");
            }
        }
    }
}

/// Furiosa RNGD (`furiosa-smi`) or Warboy (`furiosactl`).
fn furiosa(inv: &mut Inventory) {
    match run_tool("furiosa-smi", &["info"], TOOL_TIMEOUT) {
        ToolOutput::Ok(text) => add(inv, furiosa::parse_info(&text), "furiosa-smi"),
        ToolOutput::Absent => match run_tool("furiosactl", &["info"], TOOL_TIMEOUT) {
            ToolOutput::Ok(text) => add(inv, furiosa::parse_info(&text), "furiosactl"),
            other => note_failure(inv, &other),
        },
        other => note_failure(inv, &other),
    }
}

/// Rebellions ATOM (`rbln-smi`, else `rbln-stat`).
fn rebellions(inv: &mut Inventory) {
    for tool in ["rbln-smi", "rbln-stat"] {
        match run_tool(tool, &["-j"], TOOL_TIMEOUT) {
            ToolOutput::Absent => continue,
            ToolOutput::Ok(text) => match rbln::parse_json(&text) {
                Ok(found) => add(inv, found, tool),
                Err(_) => table_fallback(inv, tool),
            },
            ToolOutput::Failed(_) => table_fallback(inv, tool),
        }
        break;
    }
}

fn table_fallback(inv: &mut Inventory, tool: &str) {
    match run_tool(tool, &[], TOOL_TIMEOUT) {
        ToolOutput::Ok(text) => add(inv, rbln::parse_table(&text), tool),
        other => note_failure(inv, &other),
    }
}

/// Replaces each discovered device's nominal nodes by the ones present in `nodes`
/// (none when none is),
/// and adds devices that only `/dev` shows (their tool is missing), with a warning.
pub fn attach_nodes(inv: &mut Inventory, nodes: &NodeMap) {
    for d in inv.devices.iter_mut().filter(|d| !d.simulated) {
        let present: Vec<_> = match d.kind.as_str() {
            "gpu" => nodes
                .gpus
                .get(&d.index)
                .into_iter()
                .chain(nodes.nvidia_shared.iter())
                .cloned()
                .collect(),
            "rngd" => nodes.rngd.get(&d.index).cloned().unwrap_or_default(),
            "atom" => nodes.rbln.get(&d.index).cloned().into_iter().collect(),
            _ => continue,
        };
        // Only nodes that exist: a step is never handed a path it cannot open,
        // and where the driver shows a GPU without its nodes (a container given
        // NVML but no /dev entries) there is nothing to allow.
        d.dev_nodes = present;
    }
    let add_only = |inv: &mut Inventory, d: Device, what: &str| {
        if inv.find(&d.id).is_none()
            && !inv
                .devices
                .iter()
                .any(|x| x.kind == d.kind && x.index == d.index)
        {
            inv.warnings.push(format!(
                "{} found under /dev but not reported by {what}; its details are unknown",
                d.id
            ));
            inv.push(d, "/dev");
        }
    };
    for (n, node) in &nodes.gpus {
        let mut d = nvidia::gpu(*n, None, None);
        d.dev_nodes = std::iter::once(node.clone())
            .chain(nodes.nvidia_shared.iter().cloned())
            .collect();
        add_only(inv, d, "nvidia-smi");
    }
    for (n, list) in &nodes.rngd {
        let mut d = furiosa::rngd(*n);
        d.dev_nodes = list.clone();
        add_only(inv, d, "furiosa-smi");
    }
    for (n, node) in &nodes.rbln {
        let name = node
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or("rbln")
            .to_string();
        add_only(inv, rbln::atom(*n, &name), "rbln-smi");
    }
}
