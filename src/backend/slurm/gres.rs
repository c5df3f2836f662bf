//! What the cluster offers a plan's devices: GRES by kind, checked before
//! anything starts.

use crate::plan::Plan;

/// Devices of Slurm steps are GRES of the cluster: a kind the cluster does not
/// offer refuses the run, or with `allow_simulated` is simulated (asked of no job,
/// and said so in the record's warnings).
pub fn simulate_missing_gres(
    plan: &mut Plan,
    cli: Option<crate::plan::model::BackendKind>,
) -> Result<Vec<String>, String> {
    use crate::plan::model::BackendKind;
    let kinds: std::collections::BTreeSet<String> = plan
        .steps
        .iter()
        .filter(|s| plan.backend_of(s, cli) == BackendKind::Slurm)
        .flat_map(|s| s.devices.iter())
        .filter_map(|d| plan.devices.get(d).map(|r| r.kind.clone()))
        .collect();
    if kinds.is_empty() {
        return Ok(Vec::new());
    }
    let offered = super::offered_gres().map_err(|e| format!("slurm backend: {e}"))?;
    let mut warnings = Vec::new();
    for kind in kinds {
        let name = plan
            .backend
            .gres
            .get(&kind)
            .cloned()
            .unwrap_or_else(|| kind.clone());
        if offered.contains(&name) {
            continue;
        }
        if !plan.allow_simulated {
            return Err(format!(
                "device kind `{kind}` needs GRES `{name}`, which no node of the Slurm cluster offers \
                 (it offers: {}); name its GRES in [backend] gres, or allow_simulated = true",
                if offered.is_empty() { "none".to_string() } else { offered.iter().cloned().collect::<Vec<_>>().join(", ") }
            ));
        }
        warnings.push(format!(
            "device kind `{kind}`: the Slurm cluster offers no GRES `{name}`, so its devices are simulated (allow_simulated): jobs ask for none"
        ));
        plan.backend.gres.insert(kind, String::new());
    }
    Ok(warnings)
}
