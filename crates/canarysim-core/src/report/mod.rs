//! Renderings of a run: the `kubectl argo rollouts get rollout` view, the text report and
//! the JSON report. Renderers compute no verdicts.

pub mod rollout_view;
pub mod text;

use serde_json::{Map, Value};

use crate::outcome::RunReport;

/// The JSON report (`--format json`): the [`RunReport`] serialized, with each `get rollout`
/// view rendered as the plugin's text.
pub fn json(report: &RunReport) -> String {
    serde_json::to_string_pretty(&json_value(report)).expect("a report serializes")
}

/// Several runs (a directory) as one JSON array.
pub fn json_many(reports: &[RunReport]) -> String {
    let all: Vec<Value> = reports.iter().map(json_value).collect();
    serde_json::to_string_pretty(&all).expect("reports serialize")
}

fn json_value(report: &RunReport) -> Value {
    let render = |views: &[crate::rollout_info::RolloutView]| -> Value {
        views
            .iter()
            .map(|v| Value::String(rollout_view::render(v, false)))
            .collect()
    };
    let mut value = serde_json::to_value(report).expect("a report serializes");
    if let Some(steps) = value["steps"].as_array_mut() {
        for (json, step) in steps.iter_mut().zip(&report.steps) {
            json["detail"] = Value::String(text::step_detail(step).into_owned());
            if step.views.is_empty() {
                continue;
            }
            // `views` follows `detail`, as the schema lists it.
            let Some(fields) = json.as_object_mut() else {
                continue;
            };
            let mut ordered = Map::new();
            for (k, v) in std::mem::take(fields) {
                let after_detail = k == "detail";
                ordered.insert(k, v);
                if after_detail {
                    ordered.insert("views".into(), render(&step.views));
                }
            }
            *fields = ordered;
        }
    }
    value["final_views"] = render(&report.final_views);
    value
}
