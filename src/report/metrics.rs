//! What steps wrote to `ORCHESTRATE_METRICS`, summarised the one way every report
//! states it: per step and metric, min–max, median and n over the measured attempts
//! that succeeded, with the dispersion ((max − min) / median) flagged in words when
//! it passes the step's threshold. The terminal summary, the PR body, the HTML
//! report and `diff` all read these.

use serde::Serialize;

use crate::record::run::{Record, Stats, StepRecord};

/// The default dispersion threshold: 5% of the median.
pub const DEFAULT_DISPERSION: f64 = 0.05;

/// One numeric metric of one step over its measured repeats.
#[derive(Debug, Clone, Serialize)]
pub struct StepMetric {
    pub step: String,
    pub name: String,
    /// (attempt number, value), measured successful attempts only.
    pub values: Vec<(u32, f64)>,
    pub stats: Stats,
    /// (max − min) / median, when the median is not zero.
    pub dispersion: Option<f64>,
    /// Above the step's threshold.
    pub dispersed: bool,
    /// The metric the plan names for the step's prose.
    pub headline: bool,
    /// How many of `values` were measured while something else of the run ran on
    /// the host (the attempt's `alone` is false).
    pub shared: u32,
    /// `769.15–769.52 ms (median 769.30 ms, n=3)`, or one value when n = 1.
    pub text: String,
}

/// Every numeric metric of every step, in step order then metric name.
pub fn step_metrics(rec: &Record) -> Vec<StepMetric> {
    rec.steps.iter().flat_map(|s| of_step(rec, s)).collect()
}

/// The numeric metrics of one step.
pub fn of_step(rec: &Record, s: &StepRecord) -> Vec<StepMetric> {
    let declared = rec.run.steps.iter().find(|d| d.id == s.id);
    let headline = declared.and_then(|d| d.report_metric.as_deref());
    let threshold = declared
        .and_then(|d| d.dispersion)
        .unwrap_or(DEFAULT_DISPERSION);
    let mut by_name: std::collections::BTreeMap<&str, Vec<(u32, f64)>> = Default::default();
    let beside: Vec<u32> = s
        .attempts
        .iter()
        .filter(|a| a.alone == Some(false))
        .map(|a| a.attempt)
        .collect();
    for a in s.attempts.iter().filter(|a| !a.warmup && a.succeeded()) {
        let Some(obj) = a.metrics.as_ref().and_then(|m| m.as_object()) else {
            continue;
        };
        for (k, v) in obj {
            if let Some(x) = v.as_f64().filter(|x| x.is_finite()) {
                by_name.entry(k.as_str()).or_default().push((a.attempt, x));
            }
        }
    }
    by_name
        .into_iter()
        .filter_map(|(name, values)| {
            let xs: Vec<f64> = values.iter().map(|v| v.1).collect();
            let stats = Stats::of(&xs)?;
            let dispersion =
                (stats.median != 0.0).then(|| (stats.max - stats.min) / stats.median.abs());
            Some(StepMetric {
                step: s.id.clone(),
                name: name.to_string(),
                text: range_text(name, &stats),
                dispersed: dispersion.is_some_and(|d| d > threshold),
                headline: headline == Some(name),
                shared: values.iter().filter(|(a, _)| beside.contains(a)).count() as u32,
                values,
                stats,
                dispersion,
            })
        })
        .collect()
}

/// The unit a metric's name implies (`_ms` milliseconds, `_s` seconds, `_bytes`).
fn unit(name: &str) -> &'static str {
    if name.ends_with("_per_s") || name.ends_with("_per_sec") {
        "/s"
    } else if name.ends_with("_ms") {
        " ms"
    } else if name.ends_with("_s") || name.ends_with("_sec") || name.ends_with("_seconds") {
        " s"
    } else if name.ends_with("_bytes") {
        " B"
    } else if name.ends_with("_pct") || name.ends_with("_percent") {
        "%"
    } else {
        ""
    }
}

/// Decimals that show how values of this spread differ: enough for two digits of
/// the spread, or four significant digits when all are equal; and never fewer than
/// three significant digits of the smallest value ([`crate::units::fixed_sig`]).
fn decimals(stats: &Stats) -> usize {
    // Counts (layers, tokens, threads) read as counts.
    if [stats.min, stats.max, stats.median]
        .iter()
        .all(|x| x.fract() == 0.0)
    {
        return 0;
    }
    let spread = stats.max - stats.min;
    let d = if spread > 0.0 {
        1 - spread.log10().floor() as i64
    } else if stats.median != 0.0 {
        3 - stats.median.abs().log10().floor() as i64
    } else {
        0
    };
    d.clamp(0, 17) as usize
}

/// One value of the metric `name`, with its unit, at the decimals of `stats`
/// (counts whole).
pub fn value_text(name: &str, x: f64, stats: &Stats) -> String {
    let d = decimals(stats);
    let shown = if d == 0 && x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        crate::units::fixed_sig(x, d, 3)
    };
    format!("{shown}{}", unit(name))
}

/// `769.15–769.52 ms (median 769.30 ms, n=3)`.
pub fn range_text(name: &str, st: &Stats) -> String {
    let v = |x: f64| value_text(name, x, st);
    if st.n > 1 && st.min == st.max {
        format!("{} (n={}, all equal)", v(st.median), st.n)
    } else if st.n > 1 {
        let with_unit = value_text(name, st.min, st);
        let bare = with_unit
            .strip_suffix(unit(name))
            .unwrap_or(&with_unit)
            .to_string();
        format!("{bare}–{} (median {}, n={})", v(st.max), v(st.median), st.n)
    } else {
        v(st.median)
    }
}

/// "timing dispersion remains: max − min is 7.2% of the median" for a dispersed
/// metric, else nothing; with why, when some of its repeats were measured beside
/// other work of the run.
pub fn dispersion_words(m: &StepMetric) -> Option<String> {
    let d = m.dispersion.filter(|_| m.dispersed)?;
    let beside = match m.shared {
        0 => String::new(),
        k => format!(
            "; {k} of {} repeats ran beside other steps of the run (the step has exclusive = false)",
            m.stats.n
        ),
    };
    Some(format!(
        "{} dispersion remains: max − min is {} of the median{beside}",
        if unit(&m.name).ends_with(" ms") || unit(&m.name) == " s" {
            "timing"
        } else {
            "value"
        },
        super::format::percent(d)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(xs: &[f64]) -> Stats {
        Stats::of(xs).unwrap()
    }

    #[test]
    fn ranges_show_the_spread_with_units() {
        assert_eq!(
            range_text("prefill_ms", &st(&[769.15, 769.52, 769.3])),
            "769.15–769.52 ms (median 769.30 ms, n=3)"
        );
        assert_eq!(range_text("tokens", &st(&[8192.0])), "8192");
        assert_eq!(
            range_text("loss", &st(&[0.5, 0.5])),
            "0.5000 (n=2, all equal)"
        );
        assert_eq!(
            range_text("wall_s", &st(&[12.0, 15.0])),
            "12.0–15.0 s (median 13.5 s, n=2)"
        );
    }
}
