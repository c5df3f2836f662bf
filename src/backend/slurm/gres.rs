//! What the cluster offers the devices of the steps sent to it: GRES by kind,
//! checked before anything starts.

use std::collections::{BTreeMap, BTreeSet};

/// The device kinds `wanted` by steps that run on Slurm are GRES of the cluster
/// (`gres` names each kind's, else the kind is its own name): a kind the cluster
/// does not offer refuses the run, or with `allow_simulated` is simulated (its
/// name set empty, so no job asks for it; said in the warnings returned).
pub fn simulate_missing_gres(
    wanted: &BTreeSet<String>,
    gres: &mut BTreeMap<String, String>,
    allow_simulated: bool,
) -> Result<Vec<String>, String> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let offered = super::offered_gres().map_err(|e| format!("slurm backend: {e}"))?;
    let mut warnings = Vec::new();
    for kind in wanted {
        let name = gres.get(kind).cloned().unwrap_or_else(|| kind.clone());
        if offered.contains(&name) {
            continue;
        }
        if !allow_simulated {
            let offers = if offered.is_empty() {
                "none".to_string()
            } else {
                offered.iter().cloned().collect::<Vec<_>>().join(", ")
            };
            return Err(format!(
                "device kind `{kind}` needs GRES `{name}`, which no node of the Slurm cluster offers \
                 (it offers: {offers}); name its GRES in [backend] gres, or allow_simulated = true"
            ));
        }
        warnings.push(format!(
            "device kind `{kind}`: the Slurm cluster offers no GRES `{name}`, so its devices are simulated (allow_simulated): jobs ask for none"
        ));
        gres.insert(kind.clone(), String::new());
    }
    Ok(warnings)
}
