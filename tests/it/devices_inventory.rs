//! The inventory file, its errors, and merging it with discovery.

use std::path::{Path, PathBuf};

use orchestrate::devices::{
    load_inventory, merged, parse_inventory, Device, DeviceError, Inventory,
};

fn parse(text: &str) -> Result<Inventory, DeviceError> {
    parse_inventory(text, Path::new("devices.toml"))
}

fn error_at(text: &str) -> (usize, usize, String) {
    match parse(text) {
        Err(DeviceError::Inventory {
            line, col, message, ..
        }) => (line, col, message),
        other => panic!("expected an inventory error, got {other:?}"),
    }
}

#[test]
fn devices_and_simulate_shortcut() {
    let inv = parse(
        r#"
[[device]]
id = "npu0"
kind = "rngd"
dev = ["/dev/rngd/npu0"]
uuid = "007741DA-70B7-4996-AAC0-7E8E46FFC817"

[[device]]
id = "gpu-a"
kind = "GPU"
index = 3
memory_bytes = 85899345920
simulated = false

[simulate]
rngd = 2
gpu = 1
"#,
    )
    .unwrap();
    let ids: Vec<_> = inv.devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["npu0", "gpu-a", "sim-gpu0", "sim-rngd0", "sim-rngd1"]);
    let npu = &inv.devices[0];
    assert_eq!((npu.kind.as_str(), npu.cores, npu.index), ("rngd", 8, 0));
    assert_eq!(npu.dev_nodes, vec![PathBuf::from("/dev/rngd/npu0")]);
    assert!(!npu.simulated);
    let gpu = &inv.devices[1];
    assert_eq!((gpu.kind.as_str(), gpu.cores, gpu.index), ("gpu", 1, 3));
    let sim = &inv.devices[4];
    assert!(sim.simulated);
    assert_eq!((sim.kind.as_str(), sim.cores, sim.index), ("rngd", 8, 1));
    assert_eq!(inv.sources[0], "devices.toml:3");
    assert_eq!(inv.sources[1], "devices.toml:9");
    assert!(
        inv.sources[2].starts_with("devices.toml:17"),
        "{}",
        inv.sources[2]
    );
}

#[test]
fn simulate_skips_ids_the_file_already_declares() {
    let inv = parse(
        "[[device]]\nid = \"sim-gpu0\"\nkind = \"gpu\"\nsimulated = true\n[simulate]\ngpu = 2\n",
    )
    .unwrap();
    let ids: Vec<_> = inv.devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["sim-gpu0", "sim-gpu1", "sim-gpu2"]);
}

#[test]
fn errors_carry_line_and_column() {
    let (line, col, msg) =
        error_at("[[device]]\nid = \"npu0\"\nkind = \"rngd\"\ncores = \"eight\"\n");
    assert_eq!((line, col), (4, 9), "{msg}");

    let (line, _, msg) = error_at("[[device]]\nid = \"npu0\"\nkind = \"rngd\"\ncolour = \"red\"\n");
    assert_eq!(line, 4);
    assert!(msg.contains("colour"), "{msg}");

    let (line, col, msg) = error_at("[[device]]\nid = \"npu0\"\nkind = \"rngd\"\ncores = 0\n");
    assert_eq!((line, col), (4, 9));
    assert!(msg.contains("at least 1"));

    let (line, col, msg) = error_at(
        "[[device]]\nid = \"a\"\nkind = \"gpu\"\n[[device]]\nid = \"a\"\nkind = \"gpu\"\n",
    );
    assert_eq!((line, col), (5, 6));
    assert!(msg.contains("duplicate"));

    let (line, col, _) = error_at("[[device]]\n  id = \"../etc\"\nkind = \"gpu\"\n");
    assert_eq!((line, col), (2, 8));

    let (line, _, msg) = error_at("[[device]]\nkind = \"gpu\"\n");
    assert_eq!(line, 1);
    assert!(msg.contains("id"), "{msg}");

    let (line, _, _) = error_at("[simulate]\ngpu = -1\n");
    assert_eq!(line, 2);

    let err = parse("[[device]\n").unwrap_err().to_string();
    assert!(err.starts_with("devices.toml:1:"), "{err}");
}

#[test]
fn load_precedence_explicit_then_env_then_system() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.toml");
    std::fs::write(&a, "[simulate]\ngpu = 1\n").unwrap();
    let inv = load_inventory(Some(&a)).unwrap();
    assert_eq!(inv.devices[0].id, "sim-gpu0");
    // A named file must exist.
    let missing = dir.path().join("missing.toml");
    assert!(matches!(
        load_inventory(Some(&missing)),
        Err(DeviceError::Io { .. })
    ));
    // The environment variable is only read without an explicit file; this is the
    // only test of this binary that touches it.
    let b = dir.path().join("b.toml");
    std::fs::write(&b, "[simulate]\natom = 2\n").unwrap();
    std::env::set_var("ORCHESTRATE_INVENTORY", &b);
    let from_env = load_inventory(None);
    let explicit_wins = load_inventory(Some(&a));
    std::env::remove_var("ORCHESTRATE_INVENTORY");
    assert_eq!(from_env.unwrap().devices.len(), 2);
    assert_eq!(explicit_wins.unwrap().devices.len(), 1);
}

fn real(id: &str, kind: &str, index: u32, uuid: Option<&str>) -> Device {
    Device {
        id: id.into(),
        kind: kind.into(),
        uuid: uuid.map(Into::into),
        name: Some("found".into()),
        cores: if kind == "rngd" { 8 } else { 1 },
        dev_nodes: vec![PathBuf::from(format!("/dev/{id}"))],
        index,
        simulated: false,
        memory_bytes: Some(1),
        driver: Some("1.0".into()),
        gpu: None,
    }
}

#[test]
fn merge_file_fields_win_and_discovery_fills_the_rest() {
    let file = parse(
        r#"
[[device]]
id = "fast-gpu"
kind = "gpu"
uuid = "GPU-1"
index = 1
name = "declared"

[[device]]
id = "npu7"
kind = "rngd"

[simulate]
gpu = 1
"#,
    )
    .unwrap();
    let mut found = Inventory::default();
    found.push(real("gpu0", "gpu", 0, Some("GPU-0")), "nvidia-smi");
    found.push(real("gpu1", "gpu", 1, Some("GPU-1")), "nvidia-smi");
    found.push(real("npu0", "rngd", 0, None), "furiosa-smi");
    let inv = merged(file, found);
    let ids: Vec<_> = inv.devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["fast-gpu", "npu7", "sim-gpu0", "gpu0", "npu0"]);
    let g = &inv.devices[0];
    assert_eq!(g.name.as_deref(), Some("declared"));
    assert_eq!(g.driver.as_deref(), Some("1.0"));
    assert_eq!(g.dev_nodes, vec![PathBuf::from("/dev/gpu1")]);
    assert_eq!(inv.sources[0], "devices.toml:3 + nvidia-smi");
    // npu7 is declared, discovery found other RNGDs but not it: a warning.
    assert_eq!(inv.warnings.len(), 1, "{:?}", inv.warnings);
    assert!(inv.warnings[0].contains("npu7"));
    assert_eq!(inv.devices.len(), inv.sources.len());
}
