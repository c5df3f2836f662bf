//! Observing a plan's pins the way every command does: through the stat cache beside
//! the step cache, so files that did not change are not hashed again.

use std::path::Path;

use crate::digest::stat::StatCache;
use crate::pins::PinReport;
use crate::plan::Plan;

/// The plan's pins as this host sees them; with `sources`, the plan's own files are
/// hashed too (what a run records).
pub fn observe(plan: &Plan, cache_root: &Path, sources: bool) -> PinReport {
    let stat = StatCache::install_at(cache_root);
    let mut pins = crate::pins::verify(&plan.pins, &plan.dir);
    if sources {
        crate::pins::hash_sources(&mut pins, &plan.path, &plan.source);
    }
    stat.save_quietly();
    let c = stat.counts();
    tracing::info!(
        "pins: {} file digest{} from the stat cache, {} hashed",
        c.hits,
        if c.hits == 1 { "" } else { "s" },
        c.hashed
    );
    pins
}
