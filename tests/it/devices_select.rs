//! Candidate selection for requests, and the step environment of grants.

use std::path::PathBuf;

use orchestrate::devices::{
    step_env, units_for, Device, DeviceError, GrantedDevice, Inventory, Request,
};

fn dev(id: &str, kind: &str, index: u32, cores: u32, uuid: Option<&str>, sim: bool) -> Device {
    Device {
        id: id.into(),
        kind: kind.into(),
        uuid: uuid.map(Into::into),
        name: None,
        cores,
        dev_nodes: vec![PathBuf::from(format!("/dev/{id}"))],
        index,
        simulated: sim,
        memory_bytes: None,
        driver: None,
        gpu: None,
    }
}

fn req(kind: &str, count: u32, cores: Option<u32>) -> Request {
    Request {
        name: format!("r-{kind}"),
        kind: kind.into(),
        count,
        cores,
        ids: Vec::new(),
        simulate: false,
        mig: None,
    }
}

fn host() -> Inventory {
    let mut inv = Inventory::default();
    inv.push(dev("npu1", "rngd", 1, 8, None, false), "t");
    inv.push(dev("npu0", "rngd", 0, 8, None, false), "t");
    inv.push(dev("gpu0", "gpu", 0, 1, Some("GPU-aa"), false), "t");
    inv.push(dev("gpu1", "gpu", 1, 1, Some("GPU-bb"), false), "t");
    inv.push(dev("sim-atom0", "atom", 0, 1, None, true), "t");
    inv
}

#[test]
fn core_requests_get_aligned_contiguous_slots_sorted_by_device() {
    let c = units_for(&host(), &req("rngd", 1, Some(4))).unwrap();
    assert!(!c.simulated);
    let ids: Vec<_> = c.options.iter().map(|o| o.device.id.as_str()).collect();
    assert_eq!(ids, ["npu0", "npu1"]);
    assert_eq!(c.options[0].slots, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
    let c = units_for(&host(), &req("rngd", 2, Some(2))).unwrap();
    assert_eq!(
        c.options[1].slots,
        vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
    );
    let c = units_for(&host(), &req("rngd", 1, None)).unwrap();
    assert_eq!(c.options[0].slots, vec![(0..8).collect::<Vec<_>>()]);
    assert!(matches!(
        units_for(&host(), &req("rngd", 1, Some(0))),
        Err(DeviceError::InvalidRequest { .. })
    ));
}

#[test]
fn explicit_ids_and_uuids_restrict_the_choice() {
    let mut r = req("gpu", 1, None);
    r.ids = vec!["GPU-bb".into()];
    let c = units_for(&host(), &r).unwrap();
    assert_eq!(c.options.len(), 1);
    assert_eq!(c.options[0].device.id, "gpu1");
    r.ids = vec!["npu0".into()];
    assert!(matches!(
        units_for(&host(), &r),
        Err(DeviceError::Missing { found: 0, .. })
    ));
    r.ids = vec!["gpu0".into()];
    r.count = 2;
    assert!(matches!(
        units_for(&host(), &r),
        Err(DeviceError::InvalidRequest { .. })
    ));
}

#[test]
fn missing_kind_without_simulation_says_how_to_declare() {
    let err = units_for(&host(), &req("gpu", 3, None)).unwrap_err();
    match &err {
        DeviceError::Missing {
            kind,
            wanted,
            found,
            how_to_declare,
        } => {
            assert_eq!((kind.as_str(), *wanted, *found), ("gpu", 3, 2));
            assert!(how_to_declare.contains("allow_simulated = true"));
            assert!(how_to_declare.contains("/etc/orchestrate/devices.toml"));
        }
        other => panic!("{other:?}"),
    }
    // A simulated device in the inventory does not count as real.
    assert!(matches!(
        units_for(&host(), &req("atom", 1, None)),
        Err(DeviceError::Missing { found: 0, .. })
    ));
}

#[test]
fn simulation_uses_inventory_sims_then_creates_more() {
    let mut r = req("atom", 2, None);
    r.simulate = true;
    let c = units_for(&host(), &r).unwrap();
    assert!(c.simulated);
    let ids: Vec<_> = c.options.iter().map(|o| o.device.id.as_str()).collect();
    assert_eq!(ids, ["sim-atom0", "sim-atom1"]);
    assert!(c.options.iter().all(|o| o.device.simulated));

    let mut r = req("rngd", 3, Some(4));
    r.simulate = true;
    let c = units_for(&host(), &r).unwrap();
    assert!(c.simulated, "never a mix of real and simulated");
    assert_eq!(c.options.len(), 3);
    assert_eq!(c.options[2].device.id, "sim-rngd2");
    assert_eq!(c.options[2].device.cores, 8);
    assert_eq!(c.options[2].slots.len(), 2);

    // Enough real devices: simulation is not used even when allowed.
    let mut r = req("gpu", 2, None);
    r.simulate = true;
    assert!(!units_for(&host(), &r).unwrap().simulated);
}

fn granted(d: Device, cores: Vec<u32>) -> GrantedDevice {
    GrantedDevice { device: d, cores }
}

fn get<'a>(env: &'a [(String, String)], k: &str) -> Option<&'a str> {
    env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

#[test]
fn env_per_vendor() {
    let env = step_env(&[
        granted(dev("gpu1", "gpu", 1, 1, Some("GPU-bb"), false), vec![0]),
        granted(dev("gpu3", "gpu", 3, 1, None, false), vec![0]),
    ]);
    assert_eq!(get(&env, "CUDA_VISIBLE_DEVICES"), Some("GPU-bb,3"));
    assert_eq!(get(&env, "CUDA_DEVICE_ORDER"), Some("PCI_BUS_ID"));
    assert_eq!(get(&env, "FURIOSA_DEVICES"), None);
    assert_eq!(get(&env, "ORCHESTRATE_SIMULATED"), None);

    let env = step_env(&[
        granted(dev("npu0", "rngd", 0, 8, None, false), vec![0, 1, 2, 3]),
        granted(dev("npu2", "rngd", 2, 8, None, false), (0..8).collect()),
        granted(dev("npu3", "rngd", 3, 8, None, false), vec![5]),
    ]);
    assert_eq!(
        get(&env, "FURIOSA_DEVICES"),
        Some("npu:0:0-3,npu:2,npu:3:5")
    );
    assert_eq!(get(&env, "CUDA_VISIBLE_DEVICES"), None);

    let env = step_env(&[
        granted(dev("rbln0", "atom", 0, 1, None, false), vec![0]),
        granted(dev("rbln5", "atom", 5, 1, None, false), vec![0]),
    ]);
    assert_eq!(get(&env, "RBLN_DEVICES"), Some("0,5"));

    let env = step_env(&[granted(
        dev("tpu0", "other", 0, 1, Some("T-1"), false),
        vec![0],
    )]);
    let json: serde_json::Value =
        serde_json::from_str(get(&env, "ORCHESTRATE_DEVICES").unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!([{"id": "tpu0", "kind": "other", "cores": [0], "uuid": "T-1", "simulated": false}])
    );
}

#[test]
fn env_for_simulated_devices_marks_them() {
    let env = step_env(&[
        granted(dev("sim-rngd1", "rngd", 1, 8, None, true), vec![4, 5, 6, 7]),
        granted(dev("sim-gpu0", "gpu", 0, 1, None, true), vec![0]),
    ]);
    assert_eq!(get(&env, "FURIOSA_DEVICES"), Some("npu:1:4-7"));
    assert_eq!(get(&env, "CUDA_VISIBLE_DEVICES"), Some("0"));
    assert_eq!(get(&env, "ORCHESTRATE_SIMULATED"), Some("1"));
    let json: serde_json::Value =
        serde_json::from_str(get(&env, "ORCHESTRATE_DEVICES").unwrap()).unwrap();
    assert_eq!(json[0]["simulated"], true);
    assert_eq!(json[0]["id"], "sim-rngd1");
    assert_eq!(json[1]["cores"], serde_json::json!([0]));
}

#[test]
fn plan_requests_inherit_the_plans_simulation_switch() {
    let plan_req = orchestrate::plan::DeviceRequest {
        kind: "rngd".into(),
        count: 1,
        cores: Some(4),
        ids: vec!["npu0".into()],
        simulate: false,
        mig: None,
    };
    let r = Request::from_plan("npu", &plan_req, true);
    assert_eq!(r.name, "npu");
    assert_eq!((r.count, r.cores, r.simulate), (1, Some(4), true));
    assert!(!Request::from_plan("npu", &plan_req, false).simulate);
}

#[test]
fn ids_that_are_not_plain_names_are_refused() {
    let mut inv = Inventory::default();
    inv.push(dev("../../etc/x", "gpu", 0, 1, None, false), "t");
    let dir = tempfile::tempdir().unwrap();
    let leases = orchestrate::devices::LeaseManager::open(dir.path()).unwrap();
    let owner = orchestrate::devices::Owner {
        run_id: "r".into(),
        step: None,
    };
    let err = leases
        .acquire(
            &req("gpu", 1, None),
            &inv,
            &owner,
            std::time::Duration::ZERO,
            &mut |_| {},
        )
        .unwrap_err();
    assert!(matches!(err, DeviceError::InvalidRequest { .. }), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn lease_dir_override_for_tests() {
    // The only test of this binary that touches this variable.
    std::env::set_var("ORCHESTRATE_LEASE_DIR", "/tmp/orchestrate-test-leases");
    let dir = orchestrate::devices::default_lease_dir();
    std::env::remove_var("ORCHESTRATE_LEASE_DIR");
    assert_eq!(dir, PathBuf::from("/tmp/orchestrate-test-leases"));
    // As root (this machine) the default is the system folder.
    if nix::unistd::geteuid().is_root() {
        assert_eq!(
            orchestrate::devices::default_lease_dir(),
            PathBuf::from("/run/orchestrate/leases")
        );
    }
}
