//! What was done in the TUI, as a scenario file that replays it: the steps that ran, as
//! written in the original file, with each key's action where it was taken (between steps,
//! or inside a step after a `wait` for the time that had passed in it).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::session::Action;
use crate::scenario::Plan;
use crate::scenario::plan::StepKind;

/// An action taken by a key.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// Plan steps finished when it was taken.
    pub after_steps: usize,
    /// Virtual time of the action (ms).
    pub at_ms: u64,
    /// Inside a step: the virtual time that step started (ms); None between steps.
    pub step_started_ms: Option<u64>,
    pub action: Action,
    pub rollout: String,
}

impl Recorded {
    fn step(&self) -> Value {
        match self.action {
            Action::Promote { full: false } => json!({"promote": self.rollout}),
            Action::Promote { full: true } => {
                json!({"promote": {"rollout": self.rollout, "full": true}})
            }
            Action::Abort => json!({"abort": self.rollout}),
            Action::Retry => json!({"retry": self.rollout}),
        }
    }
}

/// Writes `<stem>.recorded.yaml` beside `file` (so its manifests' relative paths still
/// resolve): the original scenario with its steps replaced by what ran.
pub fn recorded_scenario(
    file: &Path,
    source: &str,
    plan: &Plan,
    done: usize,
    recorded: &[Recorded],
) -> Result<PathBuf, String> {
    let text = recorded_text(&file.display().to_string(), source, plan, done, recorded)?;
    let stem = file
        .file_stem()
        .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
    let out = file.with_file_name(format!("{stem}.recorded.yaml"));
    std::fs::write(&out, text).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    Ok(out)
}

/// The recorded scenario's text.
pub fn recorded_text(
    file: &str,
    source: &str,
    plan: &Plan,
    done: usize,
    recorded: &[Recorded],
) -> Result<String, String> {
    let docs = crate::model::yaml::parse_documents(file, source).map_err(|e| e.to_string())?;
    let mut doc = docs
        .into_iter()
        .next()
        .map(|(v, _)| v)
        .ok_or_else(|| format!("{file}: empty scenario"))?;
    let original: Vec<Value> = doc["steps"].as_array().cloned().unwrap_or_default();
    let mut steps: Vec<Value> = Vec::new();
    for k in 0..=done {
        // Actions taken after k steps: first those between steps, then those inside step k.
        let between = recorded
            .iter()
            .filter(|r| r.after_steps == k && r.step_started_ms.is_none());
        steps.extend(between.map(Recorded::step));
        let within: Vec<&Recorded> = recorded
            .iter()
            .filter(|r| r.after_steps == k && r.step_started_ms.is_some())
            .collect();
        // Actions inside step k: the time that had passed in it, then the action; a `wait`
        // for a duration keeps only what was left of it.
        let mut at = within.first().and_then(|r| r.step_started_ms).unwrap_or(0);
        for r in &within {
            if r.at_ms > at {
                steps.push(json!({"wait": format!("{}ms", r.at_ms - at)}));
                at = r.at_ms;
            }
            steps.push(r.step());
        }
        if k < done {
            let planned = &plan.steps[k];
            let raw = original
                .get(planned.index - 1)
                .cloned()
                .ok_or_else(|| format!("{file}: step {} not found", planned.index))?;
            match (
                &planned.kind,
                within.first().and_then(|r| r.step_started_ms),
            ) {
                (StepKind::Wait(d), Some(started)) => {
                    let left = (d.as_millis() as u64).saturating_sub(at - started);
                    steps.push(json!({"wait": format!("{left}ms")}));
                }
                _ => steps.push(raw),
            }
        }
    }
    let name = doc["name"].as_str().unwrap_or("scenario").to_string();
    doc["name"] = Value::String(format!("{name}-recorded"));
    doc["description"] = Value::String(format!(
        "Recorded in canarysim's TUI from {file}: the steps that ran, with the actions taken."
    ));
    doc["steps"] = Value::Array(steps);
    crate::model::yaml::to_yaml(&doc)
}
