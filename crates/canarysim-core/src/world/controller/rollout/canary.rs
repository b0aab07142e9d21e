//! Argo's `rollout/canary.go`: the canary path of one reconcile, the replica counts each
//! step asks for, aborts and full promotion, ping-pong's swap.

// One reconciler across files: each part shares its module's imports and helpers.
use super::*;

impl Reconciler<'_> {
    // Long: Argo's `rolloutCanary` (canary.go) in upstream's order; split, the order that decides
    // which write wins would be spread over several functions.
    pub(super) fn canary(
        &mut self,
        spec: &RolloutSpec,
        canary: &CanaryStrategy,
    ) -> Result<(), ApiError> {
        let n = spec.desired_replicas();
        let steps = &canary.steps;
        let traffic_routed = canary.traffic_routing.is_some();

        // ReplicaSets of this rollout, and the one for the current template.
        let new_hash = self.template_hash(spec);
        let all: Vec<Rs> = self.owned_replica_sets();

        // A new template (or the first reconcile): restart the steps.
        if self.status.current_pod_hash != new_hash {
            self.restart_steps(&new_hash, steps.len());
            return self.write_status();
        }
        let fully_promoted =
            !self.status.stable_r_s.is_empty() && self.status.stable_r_s == new_hash;
        self.apply_abort_and_promote_full(fully_promoted, steps.len());

        let new_rs = all.iter().find(|r| r.hash == new_hash).cloned();
        let stable_rs = all
            .iter()
            .find(|r| !self.status.stable_r_s.is_empty() && r.hash == self.status.stable_r_s)
            .cloned();
        let older: Vec<Rs> = all
            .iter()
            .filter(|r| r.hash != new_hash && Some(&r.hash) != stable_rs.as_ref().map(|s| &s.hash))
            .cloned()
            .collect();
        let stable_is_new = fully_promoted;
        let threshold = progress_threshold(canary);
        let (want_canary, want_stable, at_desired) = self.desired_replica_counts(
            canary,
            n,
            new_rs.as_ref(),
            stable_rs.as_ref(),
            &older,
            stable_is_new,
        );

        // Create the ReplicaSet of the current template.
        let Some(new_rs) = new_rs else {
            let replicas = if self.status.stable_r_s.is_empty() {
                n
            } else {
                want_canary
            };
            let revision = all.iter().map(|r| r.revision).max().unwrap_or(0) + 1;
            self.create_replica_set(spec, &new_hash, replicas, revision)?;
            self.outcome.changed = true;
            return self.write_status();
        };

        // The first deploy is promoted at once.
        if self.status.stable_r_s.is_empty() {
            self.promote_stable(canary, &new_hash, steps.len());
            self.event(
                false,
                "RolloutCompleted",
                "Rollout completed: Initial deploy".into(),
            );
            return self.write_status();
        }

        self.reconcile_ephemeral_metadata(canary, &all, &new_hash)?;
        if self.restart_pods(spec, &all, &new_hash)? > 0 {
            // Availability counts are stale until the next reconcile (Argo returns early).
            return Ok(());
        }
        if self.clean_up_old_replica_sets(spec, &older)? {
            return self.write_status();
        }
        self.reconcile_services(canary, &new_rs, stable_rs.as_ref(), &all, fully_promoted)?;

        if let Some(tr) = &canary.traffic_routing {
            if tr.istio.is_some() || tr.plugins.is_some() || tr.nginx.is_some() {
                let ok = self.reconcile_traffic(
                    spec,
                    canary,
                    &new_rs,
                    stable_rs.as_ref(),
                    &all,
                    at_desired,
                    fully_promoted,
                )?;
                if !ok {
                    // A traffic routing error stops the reconcile before scaling and steps.
                    return Ok(());
                }
            }
        }

        // Analysis: the runs this step and the background need, and what their phases mean.
        let decision = rollout_analysis::reconcile(
            self.api,
            &rollout_analysis::Context {
                rollout: &self.rollout,
                analyses: rollout_analysis::Analyses::Canary(canary),
                status: &self.status,
                new_hash: &new_hash,
                revision: new_rs.revision,
                fully_promoted,
                aborted_before: self.original_status.aborted_at.is_some(),
                now: self.now,
            },
        )?;
        // A pause an inconclusive run just added skips scaling and steps (`HasAddPause`).
        let paused_by_analysis = self.apply_analysis(decision);

        // Scaling: stable, then canary, then older ReplicaSets; one change per reconcile.
        let mut scaled = paused_by_analysis;
        if let Some(stable) = stable_rs.as_ref().filter(|_| !scaled && !stable_is_new) {
            scaled = self.scale(stable, want_stable)?;
        }
        if !scaled {
            scaled = self.scale_canary(canary, &new_rs, stable_rs.as_ref(), want_canary, n)?;
        }
        if !scaled {
            self.scale_down_older(canary, &older, traffic_routed, fully_promoted)?;
        }

        // Step progress.
        let steps_move = !spec.paused
            && !self.status.abort
            && !fully_promoted
            && !self.status.promote_full
            && !paused_by_analysis;
        if steps_move {
            self.progress_steps(steps, at_desired);
        }

        // Full promotion.
        let ready = new_rs.available >= n
            || replicas::replica_progress_threshold_met(threshold, Some(new_rs.counts()), n);
        if !fully_promoted && !self.status.abort && ready {
            self.complete_update(canary, &new_rs, &new_hash);
        }
        self.settle_controller_pause();
        self.write_status()
    }

    /// Argo's replica arithmetic for this reconcile: the canary and stable sizes wanted, and
    /// whether every ReplicaSet is at them (`AtDesiredReplicaCountsForCanary`).
    pub(super) fn desired_replica_counts(
        &self,
        canary: &CanaryStrategy,
        n: i32,
        new_rs: Option<&Rs>,
        stable_rs: Option<&Rs>,
        older: &[Rs],
        stable_is_new: bool,
    ) -> (i32, i32, bool) {
        let steps = &canary.steps;
        let traffic_routed = canary.traffic_routing.is_some();
        let threshold = progress_threshold(canary);
        let older_counts: Vec<RsCounts> = older.iter().map(Rs::counts).collect();
        let step_infos: Vec<StepInfo> = steps.iter().map(step_info).collect();
        let max_surge = canary.max_surge.as_ref().map(to_int_or_percent);
        let max_unavailable = canary.max_unavailable.as_ref().map(to_int_or_percent);
        let plan = replicas::CanaryState {
            replicas: n,
            max_surge: max_surge.as_ref(),
            max_unavailable: max_unavailable.as_ref(),
            steps: &step_infos,
            current_step_index: self.status.current_step_index,
            traffic_routing: traffic_routed,
            max_traffic_weight: canary
                .traffic_routing
                .as_ref()
                .and_then(|t| t.max_traffic_weight),
            dynamic_stable_scale: canary.dynamic_stable_scale,
            min_pods_per_replica_set: canary.min_pods_per_replica_set,
            abort_scale_down_delay_seconds: canary.abort_scale_down_delay_seconds,
            replica_progress_threshold: threshold,
            aborted: self.status.abort,
            promote_full: self.status.promote_full,
            stable_rs: &self.status.stable_r_s,
            current_pod_hash: &self.status.current_pod_hash,
        };
        let canary_counts = new_rs.map(Rs::counts);
        let stable_counts = stable_rs.map(Rs::counts);
        let actual_weights =
            self.status
                .canary
                .weights
                .as_ref()
                .map(|w| replicas::TrafficWeights {
                    canary: w.canary.weight,
                    stable: w.stable.weight,
                });
        let (want_canary, want_stable) = plan.desired_counts(
            canary_counts,
            stable_counts,
            &older_counts,
            stable_is_new,
            actual_weights,
        );
        let at_desired = plan.at_desired_replica_counts(
            canary_counts,
            stable_counts,
            &older_counts,
            stable_is_new,
            actual_weights,
        );

        (want_canary, want_stable, at_desired)
    }

    /// A new pod template: the steps start again (or are skipped when it is the stable one's,
    /// a rollback), and pauses, abort and promote-full are cleared.
    pub(super) fn restart_steps(&mut self, new_hash: &str, step_count: usize) {
        self.status.current_pod_hash = new_hash.to_string();
        self.status.current_step_hash =
            hash::steps_hash(&self.rollout.spec()["strategy"]["canary"]["steps"]);
        self.status.current_step_index = if step_count == 0 {
            None
        } else if new_hash == self.status.stable_r_s {
            Some(step_count as i32) // rolling back to stable skips the steps
        } else {
            Some(0)
        };
        self.clear_pause_and_abort();
        self.status.promote_full = false;
        remove_condition(&mut self.status.conditions, "Paused");
    }

    /// An abort goes back to step 0 (and clears itself once promoted); promote-full clears
    /// an abort and jumps past the last step; both clear the pauses.
    pub(super) fn apply_abort_and_promote_full(&mut self, fully_promoted: bool, step_count: usize) {
        if self.status.abort && fully_promoted {
            self.status.abort = false; // an abort on a promoted rollout clears itself
        }
        self.settle_abort_and_full_promotion();
        if self.status.abort {
            self.status.current_step_index = (step_count > 0).then_some(0);
        }
        if self.status.promote_full && step_count > 0 {
            self.status.current_step_index = Some(step_count as i32);
        }
    }

    /// All steps done (or promote-full): the new ReplicaSet becomes stable (`promoteStable`).
    pub(super) fn complete_update(&mut self, canary: &CanaryStrategy, new_rs: &Rs, new_hash: &str) {
        let steps = canary.steps.len();
        let steps_done = self.status.current_step_index.unwrap_or(0) as usize >= steps;
        if !(self.status.promote_full || steps_done) {
            return;
        }
        let message = if self.status.promote_full {
            "Rollout promoted to full".to_string()
        } else {
            format!("Completed all {steps} canary steps")
        };
        self.promote_stable(canary, new_hash, steps);
        self.status.pause_conditions.clear();
        self.status.controller_pause = false;
        self.status.abort = false;
        self.status.promote_full = false;
        self.event(
            false,
            "RolloutCompleted",
            format!(
                "Rollout completed update to revision {}: {message}",
                new_rs.revision
            ),
        );
    }

    /// `promoteStable`: the new ReplicaSet becomes stable and the steps are all done.
    pub(super) fn promote_stable(
        &mut self,
        canary: &CanaryStrategy,
        new_hash: &str,
        step_count: usize,
    ) {
        self.swap_ping_pong(canary, new_hash);
        self.status.stable_r_s = new_hash.to_string();
        self.status.current_step_index = (step_count > 0).then_some(step_count as i32);
    }

    /// `promoteStable`: when the stable ReplicaSet changes, ping and pong swap roles.
    pub(super) fn swap_ping_pong(&mut self, canary: &CanaryStrategy, new_stable_hash: &str) {
        if canary.ping_pong.is_some() && self.status.stable_r_s != new_stable_hash {
            let next = if self.status.canary.stable_ping_pong == "ping" {
                "pong"
            } else {
                "ping"
            };
            self.status.canary.stable_ping_pong = next.into();
        }
    }
}
