//! `orchestrate check` output for the smoke plan: stable, in dependency order, with the
//! commands as written.

use std::path::Path;

#[test]
fn smoke_plan_is_described_in_dependency_order() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/smoke.toml");
    let plan = match orchestrate::plan::load(&path) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let text = orchestrate::plan::describe(&plan);
    assert!(text.starts_with("plan: smoke\n"), "{text}");
    assert!(
        text.contains("limits: isolation=auto host_memory=1GiB swap=off pids=256 timeout=30s"),
        "{text}"
    );
    let order: Vec<usize> = [
        "  prepare [",
        "  left [",
        "  right [",
        "  join [",
        "  verify [",
    ]
    .iter()
    .map(|s| text.find(s).unwrap_or(usize::MAX))
    .collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "{text}");
    assert!(!order.contains(&usize::MAX), "{text}");
    assert!(text.contains("repeats: 3, warmup: 1"), "{text}");
    assert!(text.contains("${steps.left.out}/upper.txt"), "{text}");
    assert_eq!(
        text,
        orchestrate::plan::describe(&plan),
        "describe is stable"
    );
}
