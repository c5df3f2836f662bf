//! One timing of the implementation against the baseline, and its verdict.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// asv's verdict on a timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    /// Slower: significant, and the interval lies above 1 + noise.
    Worse,
    /// Faster: significant, and the interval lies below 1 − noise.
    Better,
    /// No change beyond noise that the samples can show.
    NotSignificant,
    /// Too few samples for the test ever to be significant at 5%.
    InsufficientSamples,
}

impl Mark {
    pub fn as_str(self) -> &'static str {
        match self {
            Mark::Worse => "worse",
            Mark::Better => "better",
            Mark::NotSignificant => "not significant",
            Mark::InsufficientSamples => "insufficient samples",
        }
    }
}

/// One timing of the implementation against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimingComparison {
    /// What was timed: `wall_ms`, or the step's headline metric.
    pub metric: String,
    /// The baseline's samples (measured attempts that succeeded).
    pub baseline: Vec<f64>,
    /// The implementation's samples.
    pub implementation: Vec<f64>,
    /// median(implementation) / median(baseline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// 95% bootstrap interval of the ratio (2000 seeded resamples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<(f64, f64)>,
    /// Mann–Whitney U of the implementation against the baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub u: Option<f64>,
    /// Its two-sided p-value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// The noise threshold the verdict used (a fraction).
    pub noise: f64,
    /// The verdict.
    pub mark: Mark,
}
