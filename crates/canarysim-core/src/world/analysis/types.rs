//! Typed views of Argo's analysis objects (`pkg/apis/rollouts/v1alpha1/analysis_types.go`):
//! AnalysisTemplate / ClusterAnalysisTemplate specs, and the AnalysisRun's spec and status.
//! Unknown fields are kept in the stored JSON; these views read what the simulation needs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::rollout::IntOrString;

/// `spec` of an AnalysisTemplate, a ClusterAnalysisTemplate, or an AnalysisRun.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AnalysisSpec {
    #[serde(default)]
    pub metrics: Vec<Metric>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<Argument>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dry_run: Vec<MetricRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measurement_retention: Vec<MeasurementRetention>,
    /// AnalysisRun only: stop taking measurements (the rollout no longer needs the run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminate: bool,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Metric {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_delay: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_condition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_condition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_limit: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inconclusive_limit: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_error_limit: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_success_limit: Option<IntOrString>,
    #[serde(default)]
    pub provider: Value,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Argument {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MetricRef {
    pub metric_name: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MeasurementRetention {
    pub metric_name: String,
    pub limit: i32,
}

/// `status` of an AnalysisRun.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metric_results: Vec<MetricResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_summary: Option<RunSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run_summary: Option<RunSummary>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunSummary {
    #[serde(default)]
    pub count: i32,
    #[serde(default)]
    pub successful: i32,
    #[serde(default)]
    pub failed: i32,
    #[serde(default)]
    pub inconclusive: i32,
    #[serde(default)]
    pub error: i32,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MetricResult {
    pub name: String,
    pub phase: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measurements: Vec<Measurement>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default)]
    pub count: i32,
    #[serde(default)]
    pub successful: i32,
    #[serde(default)]
    pub failed: i32,
    #[serde(default)]
    pub inconclusive: i32,
    #[serde(default)]
    pub error: i32,
    #[serde(default)]
    pub consecutive_error: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub consecutive_success: i32,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Measurement {
    pub phase: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}
