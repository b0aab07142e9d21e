//! Renderings of a run: the `kubectl argo rollouts get rollout` view, the text report and
//! the JSON report. Renderers compute no verdicts.

pub mod get_rollout;
pub mod rollout_view;
pub mod text;

/// The JSON report (`--format json`): the [`crate::scenario::RunReport`] serialized.
pub fn json(report: &crate::scenario::RunReport) -> String {
    serde_json::to_string_pretty(report).expect("a report serializes")
}
