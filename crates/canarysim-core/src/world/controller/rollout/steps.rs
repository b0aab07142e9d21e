//! Argo's `rollout/pause.go` and the analysis side of `canary.go`: step progress, pauses
//! and what an AnalysisRun's result does to the rollout.

// One reconciler across files: each part shares its module's imports and helpers.
use super::*;

impl Reconciler<'_> {
    /// Records the current runs and applies their effects: Failed or Error abort the
    /// rollout, Inconclusive pauses it (`InconclusiveAnalysisRun`). True when it added that
    /// pause (Argo's `HasAddPause`).
    pub(super) fn apply_analysis(&mut self, d: rollout_analysis::Decision) -> bool {
        self.status.canary.current_step_analysis_run_status = d.step_run;
        self.status.canary.current_background_analysis_run_status = d.background_run;
        self.status.blue_green.pre_promotion_analysis_run_status = d.pre_promotion_run;
        self.status.blue_green.post_promotion_analysis_run_status = d.post_promotion_run;
        self.outcome.changed |= d.changed;
        for (warning, reason, message) in d.events {
            self.event(warning, &reason, message);
        }
        if let Some(e) = d.error {
            self.outcome.error = Some(e);
        }
        if let Some(message) = d.abort {
            if !self.status.abort {
                self.status.abort = true;
                self.status.aborted_at = Some(self.now.rfc3339());
                self.abort_message = Some(message);
            }
        } else if d.pause_inconclusive
            && !self
                .status
                .pause_conditions
                .iter()
                .any(|c| c.reason == INCONCLUSIVE_ANALYSIS)
        {
            self.status.pause_conditions.push(PauseCondition {
                reason: INCONCLUSIVE_ANALYSIS.into(),
                start_time: self.now.rfc3339(),
            });
            self.status.controller_pause = true;
            self.event(
                false,
                "RolloutPaused",
                format!("Rollout is paused ({INCONCLUSIVE_ANALYSIS})"),
            );
            return true;
        }
        false
    }

    /// `completedCurrentCanaryStep` and the pause handling of `pause.go`.
    pub(super) fn progress_steps(&mut self, steps: &[CanaryStep], at_desired: bool) {
        let Some(index) = self.status.current_step_index else {
            return;
        };
        let i = index as usize;
        let Some(step) = steps.get(i) else { return };
        let completed = if step.set_weight.is_some() || step.set_canary_scale.is_some() {
            at_desired
        } else if let Some(pause) = &step.pause {
            let cond = self
                .status
                .pause_conditions
                .iter()
                .find(|c| c.reason == CANARY_PAUSE_STEP)
                .cloned();
            match cond {
                // Promoted: `CompletedCanaryPauseStep` reads the status as it was read.
                None if self.original_status.controller_pause => true,
                None => {
                    self.status.pause_conditions.push(PauseCondition {
                        reason: CANARY_PAUSE_STEP.into(),
                        start_time: self.now.rfc3339(),
                    });
                    self.status.controller_pause = true;
                    if let Some(d) = pause_duration(pause.duration.as_ref()) {
                        self.wake_at(pause_end(self.now, d));
                    }
                    self.event(
                        false,
                        "RolloutPaused",
                        format!("Rollout is paused ({CANARY_PAUSE_STEP})"),
                    );
                    false
                }
                Some(c) => match pause_duration(pause.duration.as_ref()) {
                    None => false,
                    Some(d) => {
                        let start = SimTime::parse_rfc3339(&c.start_time).unwrap_or(self.now);
                        // Argo completes the pause once now is *after* start + duration.
                        if self.now > start.after(d) {
                            true
                        } else {
                            self.wake_at(pause_end(start, d));
                            false
                        }
                    }
                },
            }
        } else if step.set_header_route.is_some() || step.set_mirror_route.is_some() {
            true
        } else if step.analysis.is_some() {
            // The step's AnalysisRun must have succeeded.
            self.status
                .canary
                .current_step_analysis_run_status
                .as_ref()
                .is_some_and(|r| r.status == "Successful")
        } else {
            // experiment / plugin steps are not simulated: they pass.
            self.event(
                true,
                "StepNotSimulated",
                format!(
                    "canarysim does not simulate step {} ({}); treating it as successful",
                    i + 1,
                    step.describe()
                ),
            );
            true
        };
        if completed {
            self.status.current_step_index = Some(index + 1);
            self.status
                .pause_conditions
                .retain(|c| c.reason != CANARY_PAUSE_STEP);
            self.status.controller_pause = false;
            self.event(
                false,
                "RolloutStepCompleted",
                format!(
                    "Rollout step {}/{} completed ({})",
                    i + 1,
                    steps.len(),
                    step.describe()
                ),
            );
        }
    }
}
