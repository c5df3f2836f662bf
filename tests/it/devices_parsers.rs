//! Vendor tool parsers on every recorded sample. The samples are the vendors' own
//! outputs, kept with their provenance (SOURCES.md) in the shared fixture folder
//! beside the project, `../shared/fixtures/devices`, or where
//! `ORCHESTRATE_DEVICE_FIXTURES` names: they are read where they are kept, never
//! copied into the tree. Without them these tests skip, and fail under
//! `ORCHESTRATE_REQUIRE_TOOLS=1`.

use std::path::{Path, PathBuf};

use orchestrate::devices::discover::{furiosa, nodes, nvidia, rbln};

use crate::support::{skip_or_fail, Need};

pub(crate) fn fixtures() -> PathBuf {
    match std::env::var_os("ORCHESTRATE_DEVICE_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/devices"),
    }
}

/// One sample's text, or None (after skip_or_fail) when the folder is not there.
pub(crate) fn read_fixture(name: &str) -> Option<String> {
    let dir = fixtures();
    if !dir.join("SOURCES.md").is_file() {
        skip_or_fail(
            Need::Tools,
            &format!(
                "the recorded device samples are not at {} (set ORCHESTRATE_DEVICE_FIXTURES)",
                dir.display()
            ),
        );
        return None;
    }
    let path = dir.join(name);
    Some(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// A sample's text; the test ends (skipped) where the samples are not there.
macro_rules! fixture {
    ($name:expr $(,)?) => {
        match read_fixture($name) {
            Some(text) => text,
            None => return,
        }
    };
}

const MIB: u64 = 1024 * 1024;

#[test]
fn nvidia_query_reconstructed_noheader() {
    let (gpus, warnings) = nvidia::parse_query_csv(&fixture!(
        "nvidia-smi-query.RECONSTRUCTED.a100-sxm4-80gb-x8.csv",
    ));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(gpus.len(), 8);
    let g = &gpus[7];
    assert_eq!(g.id, "gpu7");
    assert_eq!(g.index, 7);
    assert_eq!(g.kind, "gpu");
    assert_eq!(g.cores, 1);
    assert_eq!(
        g.uuid.as_deref(),
        Some("GPU-5c084fc6-2373-fab1-7e48-aa2ae120117c")
    );
    assert_eq!(g.name.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
    assert_eq!(g.memory_bytes, Some(81920 * MIB));
    assert_eq!(g.driver.as_deref(), Some("570.133.20"));
    assert!(g.dev_nodes.contains(&PathBuf::from("/dev/nvidia7")));
    assert!(g.dev_nodes.contains(&PathBuf::from("/dev/nvidiactl")));
}

#[test]
fn nvidia_query_nounits_reads_bare_numbers_as_mib() {
    // Columns 4..7 of this sample are not our query's (see SOURCES.md): only index,
    // uuid and name are meaningful, and a bare number must parse as MiB.
    let (gpus, warnings) = nvidia::parse_query_csv(&fixture!(
        "nvidia-smi-query.index-uuid-name-nounits.a100-80gb-pcie-x8.csv",
    ));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(gpus.len(), 8);
    assert_eq!(
        gpus[0].uuid.as_deref(),
        Some("GPU-1cfb522d-f3a3-ad7e-a63f-6fd9c3fafebd")
    );
    assert_eq!(gpus[0].name.as_deref(), Some("NVIDIA A100 80GB PCIe"));
    assert_eq!(gpus[0].memory_bytes, Some(39831 * MIB));
    assert_eq!(gpus[3].index, 3);
}

#[test]
fn nvidia_query_with_header_maps_columns_by_name() {
    let (gpus, _) = nvidia::parse_query_csv(&fixture!("nvidia-smi-query.h200-x8.csv"));
    assert_eq!(gpus.len(), 8);
    assert_eq!(gpus[5].index, 5);
    assert_eq!(gpus[5].uuid, None);
    assert_eq!(gpus[5].name.as_deref(), Some("NVIDIA H200"));
    assert_eq!(gpus[5].memory_bytes, Some(143771 * MIB));
    assert_eq!(gpus[5].driver.as_deref(), Some("570.211.01"));

    let (gpus, _) = nvidia::parse_query_csv(&fixture!("nvidia-smi-query.h200-x2.csv"));
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[1].driver.as_deref(), Some("575.57.08"));

    // No index column: rows are numbered in order.
    let (gpus, _) = nvidia::parse_query_csv(&fixture!(
        "nvidia-smi-query.name-mem-driver.a100-sxm4-80gb-x8.csv",
    ));
    assert_eq!(gpus.len(), 8);
    assert_eq!(
        gpus.iter().map(|g| g.index).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    assert_eq!(gpus[2].memory_bytes, Some(81920 * MIB));
}

#[test]
fn nvidia_list_plain_samples() {
    for (file, n, name) in [
        (
            "nvidia-smi-L.a100-80gb-pcie-x1.txt",
            1,
            "NVIDIA A100 80GB PCIe",
        ),
        (
            "nvidia-smi-L.a100-sxm4-80gb-x8.txt",
            8,
            "NVIDIA A100-SXM4-80GB",
        ),
        ("nvidia-smi-L.h100-x4.txt", 4, "NVIDIA H100 80GB HBM3"),
        ("nvidia-smi-L.h100-x8.txt", 8, "NVIDIA H100 80GB HBM3"),
    ] {
        let listed = nvidia::parse_list(&fixture!(file));
        assert_eq!(listed.len(), n, "{file}");
        assert!(
            listed.iter().all(|g| g.name == name && g.mig.is_empty()),
            "{file}"
        );
        assert!(
            listed.iter().enumerate().all(|(i, g)| g.index as usize == i
                && g.uuid
                    .as_deref()
                    .is_some_and(|u| u.starts_with("GPU-") && u.len() == 40)),
            "{file}: {listed:?}"
        );
        let (devices, warnings) = nvidia::from_list(&listed);
        assert_eq!(devices.len(), n);
        assert!(warnings.is_empty());
    }
}

#[test]
fn nvidia_list_mig_samples_attach_instances_and_warn() {
    let listed = nvidia::parse_list(&fixture!("nvidia-smi-L.a100-sxm4-80gb-x4-mig.txt"));
    assert_eq!(listed.len(), 4);
    assert_eq!(listed[0].mig.len(), 4);
    assert_eq!(listed[0].mig[3], "MIG-930574a9-d43a-5d2b-95da-3e68384c8d6b");
    assert!(listed[1..].iter().all(|g| g.mig.is_empty()));
    assert_eq!(
        listed[0].uuid.as_deref(),
        Some("GPU-513536b6-7d19-9063-b049-1e69664bb298")
    );

    let listed = nvidia::parse_list(&fixture!("nvidia-smi-L.h200-x8-mig.txt"));
    assert_eq!(listed.len(), 8);
    assert_eq!(listed[0].name, "NVIDIA H200");
    assert_eq!(listed[0].mig.len(), 6);
    let (devices, warnings) = nvidia::from_list(&listed);
    assert_eq!(devices.len(), 8);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("gpu0") && warnings[0].contains("6 instance"));
}

fn check_rngd_info(
    file: &str,
    text: &str,
    n: usize,
    firmware: &str,
) -> Vec<orchestrate::devices::Device> {
    let (devs, warnings) = furiosa::parse_info(text);
    assert!(warnings.is_empty(), "{file}: {warnings:?}");
    assert_eq!(devs.len(), n, "{file}");
    for (i, d) in devs.iter().enumerate() {
        assert_eq!(d.id, format!("npu{i}"), "{file}");
        assert_eq!(d.index as usize, i);
        assert_eq!(d.kind, "rngd", "{file}");
        assert_eq!(d.cores, 8);
        assert_eq!(
            d.driver.as_deref(),
            Some(format!("firmware {firmware}").as_str())
        );
        assert!(d
            .dev_nodes
            .contains(&PathBuf::from(format!("/dev/rngd/npu{i}"))));
        assert!(d
            .dev_nodes
            .contains(&PathBuf::from(format!("/dev/rngd/npu{i}pe4-7"))));
        assert_eq!(d.dev_nodes.len(), 36);
    }
    devs
}

#[test]
fn furiosa_info_every_version() {
    let d = check_rngd_info(
        "furiosa-smi-info.rngd.txt",
        &fixture!("furiosa-smi-info.rngd.txt"),
        4,
        "1.7.0, 4dfed1852e7b",
    );
    assert!(d.iter().all(|d| d.uuid.is_none()));
    check_rngd_info(
        "furiosa-smi-info.rngd.2024.txt",
        &fixture!("furiosa-smi-info.rngd.2024.txt"),
        2,
        "0.0.15+af1daaa",
    );
    check_rngd_info(
        "furiosa-smi-info.rngd.pert-2025.txt",
        &fixture!("furiosa-smi-info.rngd.pert-2025.txt"),
        4,
        "2025.1.0+696efad",
    );
    check_rngd_info(
        "furiosa-smi-info.rngd.uppercase-partial.txt",
        &fixture!("furiosa-smi-info.rngd.uppercase-partial.txt"),
        2,
        "1.7.0, 4dfed1852e7b",
    );
}

#[test]
fn furiosa_info_full_formats_carry_uuids() {
    let d = check_rngd_info(
        "furiosa-smi-info-full.rngd.txt",
        &fixture!("furiosa-smi-info-full.rngd.txt"),
        4,
        "1.7.0, 4dfed1852e7b",
    );
    assert_eq!(
        d[3].uuid.as_deref(),
        Some("09512C86-0702-4305-824D-44454143444F")
    );
    let d = check_rngd_info(
        "furiosa-smi-info-full.rngd.pert-2025.txt",
        &fixture!("furiosa-smi-info-full.rngd.pert-2025.txt"),
        4,
        "2025.1.0+696efad",
    );
    assert_eq!(
        d[0].uuid.as_deref(),
        Some("8EAE95DA-2625-40D0-8838-68EA772193A8")
    );
}

#[test]
fn furiosa_non_info_tables_yield_no_devices_by_accident() {
    // status/topo/ps are not inventories; the info parser must not invent devices
    // from them beyond the named npus (status rows do name them, with Arch).
    let (devs, _) = furiosa::parse_info(&fixture!("furiosa-smi-status.rngd.txt"));
    assert_eq!(
        devs.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["npu0", "npu1", "npu2", "npu3"]
    );
    let (devs, _) = furiosa::parse_info(&fixture!("furiosa-smi-status.rngd.cores-2025.txt"));
    assert_eq!(devs.len(), 4);
    let (devs, _) = furiosa::parse_info(&fixture!("furiosa-smi-ps.rngd.txt"));
    assert!(devs.is_empty());
    let (devs, warnings) = furiosa::parse_info(&fixture!("furiosa-smi-ps.rngd.2024.txt"));
    assert!(devs.is_empty());
    assert_eq!(warnings.len(), 1, "npu0pe0-3 is a core range, not a device");
}

#[test]
fn furiosactl_warboy_info() {
    let (devs, warnings) = furiosa::parse_info(&fixture!("furiosactl-info.warboy.txt"));
    assert!(warnings.is_empty());
    assert_eq!(devs.len(), 1);
    assert_eq!(devs[0].id, "npu1");
    assert_eq!(devs[0].index, 1);
    assert_eq!(devs[0].kind, "warboy");
    assert_eq!(devs[0].cores, 2);
    assert_eq!(devs[0].name.as_deref(), Some("FuriosaAI Warboy"));
    let (devs, _) = furiosa::parse_info(&fixture!("furiosactl-ps.warboy.txt"));
    assert!(devs.is_empty());
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

#[test]
fn rbln_tables_every_variant() {
    for (file, n, name, driver, mem_gib) in [
        ("rbln-smi.txt", 2, "RBLN-CA12", None, 15.7),
        ("rbln-stat.legacy-no-perf.txt", 2, "RBLN-CA12", None, 15.7),
        (
            "rbln-smi.cr13-partial.txt",
            3,
            "RBLN-CR13",
            Some("3.5.1"),
            140.0,
        ),
        (
            "rbln-smi.ca22-kmd3.0.0.txt",
            1,
            "RBLN-CA22",
            Some("3.0.0"),
            15.7,
        ),
        (
            "rbln-stat.ca22-x2-table-only.txt",
            2,
            "RBLN-CA22",
            None,
            15.7,
        ),
        (
            "rbln-smi.ca25-kmd3.2.2-partial.txt",
            5,
            "RBLN-CA25",
            Some("3.2.2"),
            15.7,
        ),
    ] {
        let (devs, warnings) = rbln::parse_table(&fixture!(file));
        assert!(warnings.is_empty(), "{file}: {warnings:?}");
        assert_eq!(devs.len(), n, "{file}");
        for (i, d) in devs.iter().enumerate() {
            assert_eq!(d.id, format!("rbln{i}"), "{file}");
            assert_eq!(d.index as usize, i);
            assert_eq!(d.kind, "atom");
            assert_eq!(d.cores, 1);
            assert_eq!(d.name.as_deref(), Some(name), "{file} row {i}");
            assert_eq!(d.driver.as_deref(), driver, "{file}");
            assert_eq!(
                d.memory_bytes,
                Some((mem_gib * GIB).round() as u64),
                "{file}"
            );
            assert_eq!(d.dev_nodes, vec![PathBuf::from(format!("/dev/rbln{i}"))]);
        }
    }
}

#[test]
fn rbln_json_plain_and_grouped() {
    let (devs, warnings) = rbln::parse_json(&fixture!("rbln-stat-json.ca22.json")).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(devs.len(), 2);
    assert_eq!(devs[1].id, "rbln1");
    assert_eq!(devs[1].index, 1);
    assert_eq!(
        devs[1].uuid.as_deref(),
        Some("a58a772b-1a27-4df3-823d-bd1d26627f74")
    );
    assert_eq!(devs[1].memory_bytes, Some(16877879296));
    assert_eq!(devs[1].driver.as_deref(), Some("3.0.0"));
    let (devs, _) = rbln::parse_json(&fixture!("rbln-stat-json-grouped.ca22.json")).unwrap();
    assert_eq!(devs.len(), 1);
    assert_eq!(devs[0].name.as_deref(), Some("RBLN-CA22"));
    // SDK 1.x printed `npu` as a string.
    let (devs, _) =
        rbln::parse_json(r#"{"devices":[{"npu":"3","device":"rbln3","name":"RBLN-CA12"}]}"#)
            .unwrap();
    assert_eq!(devs[0].index, 3);
    assert!(rbln::parse_json("not json").is_err());
}

/// Paths named in an `ls -l` listing (absolute names, and `dir:` sections).
fn ls_paths(text: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dir: Option<PathBuf> = None;
    for line in text.lines() {
        if let Some(d) = line.strip_suffix(':') {
            dir = Some(PathBuf::from(d));
            continue;
        }
        let Some(last) = line.split_whitespace().last() else {
            continue;
        };
        if !line.starts_with('c') {
            continue;
        }
        if last.starts_with('/') {
            out.push(PathBuf::from(last));
        } else if let Some(d) = &dir {
            out.push(d.join(last));
        }
    }
    out
}

#[test]
fn dev_nodes_nvidia_listings() {
    let map = nodes::classify(&ls_paths(&fixture!("dev-nodes.nvidia.ls.txt")));
    assert_eq!(map.gpus.keys().copied().collect::<Vec<_>>(), [0]);
    assert_eq!(map.nvidia_shared.len(), 4);
    assert!(!map
        .nvidia_shared
        .iter()
        .chain(map.gpus.values())
        .any(|p| p.ends_with("nvram")));

    let map = nodes::classify(&ls_paths(&fixture!("dev-nodes.nvidia-with-caps.ls.txt")));
    assert_eq!(map.gpus.get(&0), Some(&PathBuf::from("/dev/nvidia0")));
    assert!(map
        .nvidia_shared
        .contains(&PathBuf::from("/dev/nvidia-caps/nvidia-cap2")));
    assert!(map.nvidia_shared.contains(&PathBuf::from("/dev/nvidiactl")));
    assert_eq!(map.nvidia_shared.len(), 6);
}

#[test]
fn dev_nodes_rngd_documented_list() {
    let doc = fixture!("dev-nodes.rngd.documented.txt");
    let mut paths: Vec<PathBuf> = Vec::new();
    for i in [0, 1, 12] {
        paths.push(PathBuf::from(format!("/dev/rngd/npu{i}")));
        paths.extend(
            doc.lines()
                .map(|l| PathBuf::from(l.replace("{index}", &i.to_string()))),
        );
    }
    let map = nodes::classify(&paths);
    assert_eq!(map.rngd.keys().copied().collect::<Vec<_>>(), [0, 1, 12]);
    assert_eq!(map.rngd[&12].len(), 36);
    assert!(map.rngd[&1]
        .iter()
        .all(|p| p.to_string_lossy().starts_with("/dev/rngd/npu1")));
    // The parser's nominal list is the documented one.
    let mut nominal = furiosa::rngd_nodes(12);
    nominal.sort();
    assert_eq!(map.rngd[&12], nominal);
}

#[test]
fn dev_scan_and_attach_on_a_fake_dev_tree() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    for f in [
        "nvidia0",
        "nvidia1",
        "nvidiactl",
        "nvidia-uvm",
        "nvram",
        "rbln0",
        "rbln1",
    ] {
        std::fs::write(r.join(f), "").unwrap();
    }
    std::fs::create_dir(r.join("rngd")).unwrap();
    for f in ["npu0", "npu0pe0", "npu0pe0-3"] {
        std::fs::write(r.join("rngd").join(f), "").unwrap();
    }
    let map = nodes::classify(&nodes::scan(r));
    assert_eq!(map.gpus.len(), 2);
    assert_eq!(map.rbln.len(), 2);
    assert_eq!(map.rngd[&0].len(), 3);

    // gpu0 reported by nvidia-smi; gpu1, npu0, rbln0/1 only seen under /dev.
    let mut inv = orchestrate::devices::Inventory::default();
    let (mut g, _) = nvidia::parse_query_csv("0, GPU-aaaa, NVIDIA H200, 143771 MiB, 575.57.08");
    inv.push(g.remove(0), "nvidia-smi");
    orchestrate::devices::discover::attach_nodes(&mut inv, &map);
    let ids: Vec<_> = inv.devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["gpu0", "gpu1", "npu0", "rbln0", "rbln1"]);
    assert_eq!(inv.sources, ["nvidia-smi", "/dev", "/dev", "/dev", "/dev"]);
    assert_eq!(
        inv.devices[0].dev_nodes,
        vec![r.join("nvidia0"), r.join("nvidia-uvm"), r.join("nvidiactl")]
    );
    assert_eq!(inv.devices[0].uuid.as_deref(), Some("GPU-aaaa"));
    assert_eq!(inv.warnings.len(), 4);
}

#[test]
fn missing_tool_is_absent_not_an_error() {
    use orchestrate::devices::discover::{run_tool, ToolOutput};
    let out = run_tool(
        "orchestrate-no-such-tool-xyz",
        &[],
        std::time::Duration::from_secs(1),
    );
    assert!(matches!(out, ToolOutput::Absent), "{out:?}");
    let out = run_tool(
        "sh",
        &["-c", "sleep 5"],
        std::time::Duration::from_millis(200),
    );
    assert!(matches!(out, ToolOutput::Failed(_)), "{out:?}");
    let out = run_tool("sh", &["-c", "echo hi"], std::time::Duration::from_secs(5));
    assert!(
        matches!(out, ToolOutput::Ok(ref s) if s == "hi\n"),
        "{out:?}"
    );
    // On this CPU-only machine discovery finds nothing and does not fail.
    let inv = orchestrate::devices::discover();
    assert_eq!(inv.devices.len(), inv.sources.len());
}

#[test]
fn atom_readings_from_rbln_stat_json() {
    use orchestrate::devices::readings::rbln_json;
    let r = rbln_json(&fixture!("rbln-stat-json.ca22.json"));
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].index, 0);
    assert_eq!(r[0].power_w, Some(17.5218));
    assert_eq!(r[0].temperature_c, Some(31.0));
    assert_eq!(r[0].memory_used_bytes, Some(0));
    assert_eq!(r[0].utilization_percent, Some(0.0));
    assert_eq!((r[1].index, r[1].power_w), (1, Some(18.307255)));
    assert!(rbln_json("not json").is_empty());
}

#[test]
fn atom_readings_from_the_rbln_table() {
    use orchestrate::devices::readings::rbln_table;
    let r = rbln_table(&fixture!("rbln-stat.ca22-x2-table-only.txt"));
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0].index, r[0].power_w, r[0].temperature_c),
        (0, Some(18.1), Some(33.0))
    );
    assert_eq!(
        (r[1].index, r[1].power_w, r[1].temperature_c),
        (1, Some(19.3), Some(36.0))
    );
    assert_eq!(r[0].memory_used_bytes, Some(0));
    // The legacy table has no Perf column but the same readings.
    let legacy = rbln_table(&fixture!("rbln-stat.legacy-no-perf.txt"));
    assert_eq!(legacy.len(), 2);
    assert_eq!(
        (legacy[0].power_w, legacy[0].utilization_percent),
        (Some(43.9), Some(98.7))
    );
    assert_eq!(
        legacy[0].memory_used_bytes,
        Some((2.4 * 1024.0 * MIB as f64).round() as u64)
    );
}

#[test]
fn rngd_readings_from_furiosa_smi_status() {
    use orchestrate::devices::readings::furiosa_status;
    let r = furiosa_status(&fixture!("furiosa-smi-status.rngd.txt"));
    let ids: Vec<u32> = r.iter().map(|c| c.index).collect();
    assert_eq!(ids[..3], [0, 1, 2], "{r:?}");
    assert_eq!(r[0].memory_used_bytes, Some(0));
    assert_eq!(r[0].utilization_percent, Some(0.0));
    // `Core N: -` everywhere: no utilization, not 0.
    assert_eq!(r[2].utilization_percent, None);
    // RNGD's tool prints no power.
    assert!(r.iter().all(|c| c.power_w.is_none()));
    // The older column set has no Memory column.
    let older = furiosa_status(&fixture!("furiosa-smi-status.rngd.cores-2025.txt"));
    assert_eq!(older[0].index, 0);
    assert_eq!(older[0].memory_used_bytes, None);
    assert_eq!(older[0].utilization_percent, Some(0.0));
}
