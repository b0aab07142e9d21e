//! Analysis: Argo's AnalysisRuns on the virtual clock, measured against a built-in
//! Prometheus that the simulated traffic feeds (DESIGN.md: "a module of its own, fed by the
//! load's counts"): the objects' types, the conditions, the providers and the metrics.
//! The controllers act on them: `controller::rollout_analysis` (the rollout's runs and their
//! effects) and `controller::analysis_run` (the measurements, Argo's analysis controller).

pub mod condition;
pub mod metrics;
pub mod promql;
pub mod provider;
pub mod types;

pub use metrics::Prometheus;
pub use provider::Providers;

/// An AnalysisRun's, a metric's or a measurement's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Successful,
    Failed,
    Error,
    Inconclusive,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Successful => "Successful",
            Phase::Failed => "Failed",
            Phase::Error => "Error",
            Phase::Inconclusive => "Inconclusive",
        }
    }

    pub fn parse(s: &str) -> Option<Phase> {
        Some(match s {
            "Pending" => Phase::Pending,
            "Running" => Phase::Running,
            "Successful" => Phase::Successful,
            "Failed" => Phase::Failed,
            "Error" => Phase::Error,
            "Inconclusive" => Phase::Inconclusive,
            _ => return None,
        })
    }

    /// Successful, Failed, Error and Inconclusive end a measurement, a metric or a run.
    pub(crate) fn completed(self) -> bool {
        matches!(
            self,
            Phase::Successful | Phase::Failed | Phase::Error | Phase::Inconclusive
        )
    }

    /// Argo's `IsWorse` (`analysisStatusOrder`, best to worst: Successful, Running, Pending,
    /// Inconclusive, Error, Failed).
    pub(crate) fn worse_than(self, other: Phase) -> bool {
        self.rank() > other.rank()
    }

    fn rank(self) -> u8 {
        match self {
            Phase::Successful => 0,
            Phase::Running => 1,
            Phase::Pending => 2,
            Phase::Inconclusive => 3,
            Phase::Error => 4,
            Phase::Failed => 5,
        }
    }
}
