//! Argo's `rollout/sync.go` status half: replicas, conditions, phase and message.

// One reconciler across files: each part shares its module's imports and helpers.
use super::*;

impl Reconciler<'_> {
    /// `ClearPauseConditions` and `RemoveAbort`.
    pub(super) fn clear_pause_and_abort(&mut self) {
        self.status.pause_conditions.clear();
        self.status.controller_pause = false;
        self.status.abort = false;
        self.status.aborted_at = None;
    }

    /// `CalculatePauseConditions`: controllerPause outlives no pause condition, so a promote
    /// by hand is seen by one whole reconcile only. (Not after the early returns, where Argo
    /// would still have gone on and seen the promote.)
    pub(super) fn settle_controller_pause(&mut self) {
        if self.status.pause_conditions.is_empty() {
            self.status.controller_pause = false;
        }
    }

    /// Both strategies' `RemoveAbort` on a full promotion and `CalculateAbortStatus`: an
    /// abort clears the pauses and is stamped once; without one there is no `abortedAt`.
    pub(super) fn settle_abort_and_full_promotion(&mut self) {
        if self.status.promote_full {
            self.clear_pause_and_abort();
        }
        if self.status.abort {
            self.status.pause_conditions.clear();
            self.status.controller_pause = false;
            if self.status.aborted_at.is_none() {
                self.status.aborted_at = Some(self.now.rfc3339());
            }
        } else {
            self.status.aborted_at = None;
        }
    }

    // Long: Argo's `syncRolloutStatusCanary` in its order: counts, conditions, phase and message,
    // then one status write.
    /// Recomputes counts, phase, message and conditions; writes the status if it changed.
    pub(super) fn write_status(&mut self) -> Result<(), ApiError> {
        let n = self.summary.replicas;
        let rss = self.owned_replica_sets();
        let mut totals = (0, 0, 0, 0);
        for rs in &rss {
            totals.0 += rs.replicas;
            totals.2 += rs.ready;
            totals.3 += rs.available;
            if rs.hash == self.status.current_pod_hash {
                totals.1 = rs.replicas;
            }
        }
        let mut wake = None;
        let mut deadline_abort = None;
        let s = &mut self.status;
        (
            s.replicas,
            s.updated_replicas,
            s.ready_replicas,
            s.available_replicas,
        ) = totals;
        s.observed_generation = self.rollout.generation().to_string();
        s.selector.clone_from(&self.summary.selector);
        if self.summary.blue_green {
            // Availability and the selector are the active ReplicaSet's.
            let active = &s.blue_green.active_selector;
            if let Some(rs) = rss
                .iter()
                .find(|rs| !active.is_empty() && rs.hash == *active)
            {
                s.available_replicas = rs.available;
                s.ready_replicas = rs.ready;
                let mut labels: Vec<String> = s
                    .selector
                    .split(',')
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect();
                labels.push(format!("{HASH_LABEL}={}", rs.hash));
                labels.sort();
                s.selector = labels.join(",");
            }
        }
        let invalid = s.conditions.iter().any(|c| c.type_ == "InvalidSpec");
        if !invalid {
            let revision = rss
                .iter()
                .find(|rs| rs.hash == s.current_pod_hash)
                .map(|rs| rs.revision.to_string())
                .unwrap_or_else(|| "1".into());
            let aborted_already = s
                .conditions
                .iter()
                .any(|c| c.type_ == "Progressing" && c.reason == "RolloutAborted");
            if s.abort && !aborted_already {
                // Argo keeps an existing RolloutAborted condition as it is (same status and
                // reason), so the reason given with the abort stays in its message.
                let mut message = format!("Rollout aborted update to revision {revision}");
                if let Some(why) = &self.abort_message {
                    message.push_str(&format!(": {why}"));
                }
                set_condition(
                    &mut s.conditions,
                    "Progressing",
                    "False",
                    "RolloutAborted",
                    &message,
                    self.now,
                );
            } else if !s.abort {
                let rs_name = format!("{}-{}", self.rollout.name(), s.current_pod_hash);
                let waiting_for_scale_down = rss.iter().any(|rs| {
                    rs.hash != s.current_pod_hash
                        && rs.hash != s.stable_r_s
                        && rs.deadline.is_some()
                });
                let check = progress_check(
                    &self.summary,
                    &self.original_status,
                    s,
                    waiting_for_scale_down,
                    self.now,
                );
                match check {
                    Progress::Made => {
                        // Progress restarts the deadline: the update time moves even when the
                        // condition is otherwise unchanged (its transition time does not).
                        let since = s
                            .conditions
                            .iter()
                            .find(|c| c.type_ == "Progressing" && c.status == "True")
                            .map(|c| c.last_transition_time.clone());
                        remove_condition(&mut s.conditions, "Progressing");
                        set_condition(
                            &mut s.conditions,
                            "Progressing",
                            "True",
                            "ReplicaSetUpdated",
                            &format!("ReplicaSet \"{rs_name}\" is progressing."),
                            self.now,
                        );
                        if let (Some(since), Some(c)) = (
                            since,
                            s.conditions.iter_mut().find(|c| c.type_ == "Progressing"),
                        ) {
                            c.last_transition_time = since;
                        }
                    }
                    Progress::Exempt | Progress::TimedOutBefore => {}
                    Progress::Waiting(deadline) => wake = Some(deadline),
                    Progress::TimedOut => {
                        let message =
                            format!("ReplicaSet \"{rs_name}\" has timed out progressing.");
                        set_condition(
                            &mut s.conditions,
                            "Progressing",
                            "False",
                            "ProgressDeadlineExceeded",
                            &message,
                            self.now,
                        );
                        if self.summary.progress_deadline_abort {
                            // `evaluateProgressDeadlineAbort`: abort with the timeout message.
                            s.abort = true;
                            s.aborted_at = Some(self.now.rfc3339());
                            let abort =
                                format!("Rollout aborted update to revision {revision}: {message}");
                            set_condition(
                                &mut s.conditions,
                                "Progressing",
                                "False",
                                "RolloutAborted",
                                &abort,
                                self.now,
                            );
                            deadline_abort = Some(message);
                        }
                    }
                }
            }
            let (phase, message) = phase(&self.summary, s);
            s.phase = phase.into();
            s.message = message;
        }
        let available = if s.available_replicas >= n {
            "True"
        } else {
            "False"
        };
        set_condition(
            &mut s.conditions,
            "Available",
            available,
            "AvailableReason",
            "Rollout has minimum availability",
            self.now,
        );
        if let Some(t) = wake {
            self.wake_at(t);
        }
        if let Some(message) = deadline_abort {
            self.event(true, "RolloutAborted", message);
        }
        if let Some(why) = self.abort_message.take() {
            let revision = self
                .owned_replica_sets()
                .iter()
                .find(|rs| rs.hash == self.status.current_pod_hash)
                .map(|rs| rs.revision)
                .unwrap_or(1);
            self.event(
                true,
                "RolloutAborted",
                format!("Rollout aborted update to revision {revision}: {why}"),
            );
        }

        if self.original_status != self.status {
            let mut next = self.rollout.clone();
            next.value["status"] = serde_json::to_value(&self.status).expect("status serializes");
            self.rollout = self.api.update_status(next)?;
            self.outcome.changed = true;
        }
        Ok(())
    }
}

/// Where the rollout stands against its progress deadline.
enum Progress {
    /// `RolloutProgressing`: something moved; the deadline restarts.
    Made,
    /// Paused, at an indefinite step, fully promoted, or waiting for an old ReplicaSet's
    /// scale-down: the deadline does not apply.
    Exempt,
    /// No progress yet; the deadline passes at this instant.
    Waiting(SimTime),
    TimedOut,
    /// Timed out in an earlier reconcile.
    TimedOutBefore,
}

/// Argo's `RolloutProgressing` and `RolloutTimedOut` (rollout/sync.go, utils/conditions).
fn progress_check(
    spec: &SpecSummary,
    old: &RolloutStatus,
    new: &RolloutStatus,
    waiting_for_scale_down: bool,
    now: SimTime,
) -> Progress {
    let step_moved = matches!(
        (old.current_step_index, new.current_step_index),
        (Some(a), Some(b)) if a != b
    );
    let progressed = new.updated_replicas != old.updated_replicas
        || new.replicas - new.updated_replicas < old.replicas - old.updated_replicas
        || new.ready_replicas > old.ready_replicas
        || new.available_replicas > old.available_replicas
        || new.stable_r_s != old.stable_r_s
        || step_moved
        || new.current_step_hash != old.current_step_hash;
    let current = new.conditions.iter().find(|c| c.type_ == "Progressing");
    let Some(current) = current else {
        return Progress::Made;
    };
    if progressed || current.reason == "RolloutAborted" {
        return Progress::Made;
    }
    if current.reason == "ProgressDeadlineExceeded" {
        return Progress::TimedOutBefore;
    }
    let paused = spec.paused || !new.pause_conditions.is_empty();
    let completed = !new.stable_r_s.is_empty() && new.stable_r_s == new.current_pod_hash;
    let indefinite = new
        .current_step_index
        .and_then(|i| spec.indefinite_steps.get(i as usize))
        .copied()
        .unwrap_or(false);
    if paused || completed || indefinite || waiting_for_scale_down {
        return Progress::Exempt;
    }
    let Some(since) = SimTime::parse_rfc3339(&current.last_update_time) else {
        return Progress::Made;
    };
    // `from.Add(delta).Before(now)`: strictly after the deadline.
    let deadline = since.after(spec.progress_deadline);
    if now > deadline {
        Progress::TimedOut
    } else {
        Progress::Waiting(deadline.after(Duration::from_millis(1)))
    }
}

/// `CalculateRolloutPhase` (phase and message).
fn phase(spec: &SpecSummary, s: &RolloutStatus) -> (&'static str, String) {
    let n = spec.replicas;
    if s.abort {
        let msg = s
            .conditions
            .iter()
            .find(|c| c.reason == "RolloutAborted")
            .map(|c| c.message.clone())
            .unwrap_or_default();
        return ("Degraded", format!("RolloutAborted: {msg}"));
    }
    if let Some(c) = s
        .conditions
        .iter()
        .find(|c| c.reason == "ProgressDeadlineExceeded")
    {
        return (
            "Degraded",
            format!("ProgressDeadlineExceeded: {}", c.message),
        );
    }
    if spec.paused {
        return ("Paused", "manually paused".into());
    }
    if let Some(c) = s.pause_conditions.first() {
        return ("Paused", c.reason.clone());
    }
    if s.updated_replicas < n {
        return ("Progressing", "more replicas need to be updated".into());
    }
    if s.available_replicas < s.updated_replicas {
        return (
            "Progressing",
            "updated replicas are still becoming available".into(),
        );
    }
    if spec.blue_green {
        let active = &s.blue_green.active_selector;
        if active.is_empty() || *active != s.current_pod_hash {
            return ("Progressing", "active service cutover pending".into());
        }
        if s.stable_r_s != s.current_pod_hash {
            // `waitingForBlueGreenPostPromotionAnalysis`.
            let analysis_done = s
                .blue_green
                .post_promotion_analysis_run_status
                .as_ref()
                .and_then(|r| crate::analysis::Phase::parse(&r.status))
                .is_some_and(crate::analysis::Phase::completed);
            let message = if spec.post_promotion_analysis && !analysis_done {
                "waiting for analysis to complete"
            } else {
                "waiting for post-promotion verification to complete"
            };
            return ("Progressing", message.into());
        }
        return ("Healthy", String::new());
    }
    if !spec.traffic_routed && s.replicas > s.updated_replicas {
        return ("Progressing", "old replicas are pending termination".into());
    }
    if s.stable_r_s != s.current_pod_hash {
        return ("Progressing", "waiting for all steps to complete".into());
    }
    ("Healthy", String::new())
}
