//! The plan's words the record keeps: a step's kind, a check's metric.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a step is; the plan's `kind`, and the record's word for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StepKind {
    Compile,
    Prefill,
    Handoff,
    Compare,
    Command,
}

impl StepKind {
    /// The word the plan and the record use (as serde writes it).
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Compile => "compile",
            StepKind::Prefill => "prefill",
            StepKind::Handoff => "handoff",
            StepKind::Compare => "compare",
            StepKind::Command => "command",
        }
    }
}

impl fmt::Display for StepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which way a step's headline metric improves (`[steps.X.report] better`): what
/// `orchestrate regressions` calls worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Smaller is better: times, memory (the default).
    Lower,
    /// Larger is better: throughput, accuracy.
    Higher,
}

impl Better {
    pub fn as_str(self) -> &'static str {
        match self {
            Better::Lower => "lower",
            Better::Higher => "higher",
        }
    }
}

// The record keeps a check's metric by this type, so a new one is a compile
// error in every renderer until handled.
/// A built-in comparison metric, as plans and records name it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    BitExact,
    RelRms,
    MaxAbs,
    Finite,
    Shape,
    FirstDivergence,
    SlotsExact,
}

impl Metric {
    pub const ALL: [Metric; 7] = [
        Metric::BitExact,
        Metric::RelRms,
        Metric::MaxAbs,
        Metric::Finite,
        Metric::Shape,
        Metric::FirstDivergence,
        Metric::SlotsExact,
    ];

    /// The name plans and records use (the serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::BitExact => "bit_exact",
            Metric::RelRms => "rel_rms",
            Metric::MaxAbs => "max_abs",
            Metric::Finite => "finite",
            Metric::Shape => "shape",
            Metric::FirstDivergence => "first_divergence",
            Metric::SlotsExact => "slots_exact",
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
