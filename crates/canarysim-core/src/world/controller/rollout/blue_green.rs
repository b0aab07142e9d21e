//! Argo's `rollout/bluegreen.go` with the blue-green halves of `service.go`, `replicaset.go`
//! and `sync.go`: the new ReplicaSet comes up beside the active one, the preview Service
//! selects it at once, and the active Service switches to it when the pause (if any) and the
//! pre-promotion analysis are over; the rollout completes when the post-promotion analysis
//! succeeds, and the old ReplicaSet is scaled down `scaleDownDelaySeconds` later.

// One reconciler across files: each part shares its module's imports and helpers.
use super::*;
use crate::model::rollout::BlueGreenStrategy;
use rollout_analysis::{Analyses, BlueGreenAnalyses, Saturation};

const BLUE_GREEN_PAUSE: &str = "BlueGreenPause";

/// The ReplicaSets of one blue-green reconcile.
struct BlueGreenSets {
    new_rs: Rs,
    stable: Option<Rs>,
    all: Vec<Rs>,
}

impl Reconciler<'_> {
    /// `rolloutBlueGreen`, in upstream's order: preview Service, ReplicaSets, pause, active
    /// Service, status.
    pub(super) fn blue_green(
        &mut self,
        spec: &RolloutSpec,
        bg: &BlueGreenStrategy,
    ) -> Result<(), ApiError> {
        let n = spec.desired_replicas();
        let new_hash = self.template_hash(spec);
        let all: Vec<Rs> = self.owned_replica_sets();
        if self.status.current_pod_hash != new_hash {
            self.reset_blue_green(&new_hash);
            return self.write_status();
        }
        self.settle_abort_and_full_promotion();
        let Some(new_rs) = all.iter().find(|r| r.hash == new_hash).cloned() else {
            let replicas = if self.status.stable_r_s.is_empty() {
                n
            } else {
                self.new_rs_replicas(bg, n, &all, &new_hash)
            };
            let revision = all.iter().map(|r| r.revision).max().unwrap_or(0) + 1;
            self.create_replica_set(spec, &new_hash, replicas, revision)?;
            self.outcome.changed = true;
            return self.write_status();
        };
        let stable = all
            .iter()
            .find(|r| !self.status.stable_r_s.is_empty() && r.hash == self.status.stable_r_s)
            .cloned();
        let sets = BlueGreenSets {
            new_rs,
            stable,
            all,
        };
        // `haltProgress`: paused by hand or by an inconclusive analysis.
        let halted = spec.paused || self.paused_inconclusive();
        if !halted && !bg.preview_service.is_empty() {
            self.switch_selector(&bg.preview_service, &sets.new_rs.hash)?;
        }
        let older: Vec<Rs> = sets
            .all
            .iter()
            .filter(|r| {
                r.hash != sets.new_rs.hash && Some(&r.hash) != sets.stable.as_ref().map(|s| &s.hash)
            })
            .cloned()
            .collect();
        if self.clean_up_old_replica_sets(spec, &older)? {
            return self.write_status();
        }
        self.blue_green_replica_sets(bg, n, &sets, &older)?;
        let active = self.service_selector(&bg.active_service);
        let added_pause = self.blue_green_pause(bg, n, &sets, active.as_deref(), halted);
        if !halted {
            self.reconcile_active_service(bg, n, &sets, active.as_deref(), added_pause)?;
        }
        self.promotion_analyses(bg, n, &sets.new_rs)?;
        self.blue_green_status(bg, &sets, added_pause);
        self.settle_controller_pause();
        self.write_status()
    }

    /// `reconcileAnalysisRuns` for blue-green: the pre- and post-promotion runs, and what
    /// their phases mean for the rollout.
    fn promotion_analyses(
        &mut self,
        bg: &BlueGreenStrategy,
        n: i32,
        new_rs: &Rs,
    ) -> Result<(), ApiError> {
        let decision = rollout_analysis::reconcile(
            self.api,
            &rollout_analysis::Context {
                rollout: &self.rollout,
                analyses: Analyses::BlueGreen(BlueGreenAnalyses {
                    strategy: bg,
                    new_rs: saturation(new_rs, n),
                }),
                status: &self.status,
                new_hash: &new_rs.hash,
                revision: new_rs.revision,
                fully_promoted: !self.status.stable_r_s.is_empty()
                    && self.status.stable_r_s == new_rs.hash,
                aborted_before: self.original_status.aborted_at.is_some(),
                now: self.now,
            },
        )?;
        // The status follows in any case: nothing to skip when a pause is added.
        self.apply_analysis(decision);
        Ok(())
    }

    /// An inconclusive analysis pauses the rollout, as this reconcile read it (Argo's
    /// `haltProgress` and scale-down read the Rollout it was given).
    fn paused_inconclusive(&self) -> bool {
        self.original_status
            .pause_conditions
            .iter()
            .any(|c| c.reason == INCONCLUSIVE_ANALYSIS)
    }

    /// The phase of a promotion run the rollout records, as the run holds it now.
    fn promotion_run_phase(&self, run: &Option<rollout_analysis::RunRef>) -> Option<String> {
        let run = run.as_ref()?;
        let object = self
            .api
            .get(Kind::AnalysisRun, self.rollout.namespace(), &run.name)
            .ok()?;
        Some(object.status()["phase"].as_str().unwrap_or("").to_string())
    }

    /// `completedPrePromotionAnalysis`: none is configured, or its run succeeded.
    fn completed_pre_promotion_analysis(&self, bg: &BlueGreenStrategy) -> bool {
        bg.pre_promotion_analysis.is_none()
            || self
                .promotion_run_phase(&self.status.blue_green.pre_promotion_analysis_run_status)
                .as_deref()
                == Some("Successful")
    }

    /// Whether the post-promotion run has succeeded (false when there is none).
    fn post_promotion_succeeded(&self) -> bool {
        self.promotion_run_phase(&self.status.blue_green.post_promotion_analysis_run_status)
            .as_deref()
            == Some("Successful")
    }

    /// A new pod template (`resetRolloutStatus`): pauses, abort and promote-full are cleared.
    fn reset_blue_green(&mut self, new_hash: &str) {
        self.status.current_pod_hash = new_hash.to_string();
        self.clear_pause_and_abort();
        self.status.promote_full = false;
        self.status.blue_green.scale_up_preview_check_point = false;
        self.status.current_step_index = None;
        self.status.blue_green.pre_promotion_analysis_run_status = None;
        self.status.blue_green.post_promotion_analysis_run_status = None;
        self.status.canary.current_step_analysis_run_status = None;
        self.status.canary.current_background_analysis_run_status = None;
        remove_condition(&mut self.status.conditions, "Paused");
    }

    /// `NewRSNewReplicas` for blue-green: the full count, or `previewReplicaCount` until the
    /// pause is over.
    fn new_rs_replicas(&self, bg: &BlueGreenStrategy, n: i32, all: &[Rs], new_hash: &str) -> i32 {
        let Some(preview) = bg.preview_replica_count else {
            return n;
        };
        let active = &self.status.blue_green.active_selector;
        let active_rs = all.iter().find(|r| !active.is_empty() && &r.hash == active);
        if active_rs.is_none_or(|r| r.hash == new_hash) || self.status.promote_full {
            return n;
        }
        if new_hash != self.status.current_pod_hash {
            return preview;
        }
        let not_paused = !self.summary.paused && self.status.pause_conditions.is_empty();
        if not_paused && self.status.blue_green.scale_up_preview_check_point {
            return n;
        }
        preview
    }

    /// `ReadyForPause`: the new ReplicaSet is at the size it should have now, all available.
    fn ready_for_pause(&self, bg: &BlueGreenStrategy, n: i32, sets: &BlueGreenSets) -> bool {
        let want = self.new_rs_replicas(bg, n, &sets.all, &sets.new_rs.hash);
        sets.new_rs.spec == want && sets.new_rs.available == want
    }

    /// `reconcileBlueGreenReplicaSets`: the stable ReplicaSet at full size, the new one at
    /// [`Self::new_rs_replicas`] (held up `abortScaleDownDelaySeconds` after an abort), the
    /// others scaled down once their delay has passed.
    fn blue_green_replica_sets(
        &mut self,
        bg: &BlueGreenStrategy,
        n: i32,
        sets: &BlueGreenSets,
        older: &[Rs],
    ) -> Result<(), ApiError> {
        // `removeScaleDownDeadlines`: the ReplicaSets in use keep no deadline.
        let delayed_abort = self.delays_scale_down_on_abort();
        for rs in [
            (!delayed_abort).then_some(&sets.new_rs),
            sets.stable.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            if rs.deadline.is_some() {
                self.set_scale_down_deadline(rs, None)?;
            }
        }
        if let Some(stable) = sets.stable.as_ref().filter(|s| s.hash != sets.new_rs.hash) {
            self.scale(stable, n)?;
        }
        let want = self.new_rs_replicas(bg, n, &sets.all, &sets.new_rs.hash);
        if delayed_abort {
            let stable_ready = sets.stable.as_ref().is_some_and(|s| s.available >= n);
            if stable_ready {
                let delay = bg.abort_scale_down_delay_seconds.unwrap_or(30).max(0) as u64;
                self.delayed_scale_down(&sets.new_rs, 0, Duration::from_secs(delay))?;
            }
        } else {
            self.scale(&sets.new_rs, want)?;
        }
        self.scale_down_older_blue_green(bg, n, &sets.new_rs, older)
    }

    /// `scaleDownOldReplicaSetsForBlueGreen`: newest first, each old ReplicaSet no Service
    /// selects gets a scale-down deadline `scaleDownDelaySeconds` ahead (the first
    /// `scaleDownDelayRevisionLimit` of them; the rest go at once) and keeps its pods until then.
    /// Nothing is scaled down while an inconclusive analysis pauses the rollout, nor, without
    /// `scaleDownDelaySeconds`, before the post-promotion analysis succeeds.
    fn scale_down_older_blue_green(
        &mut self,
        bg: &BlueGreenStrategy,
        n: i32,
        new_rs: &Rs,
        older: &[Rs],
    ) -> Result<(), ApiError> {
        if self.paused_inconclusive() {
            return Ok(());
        }
        if bg.post_promotion_analysis.is_some() && bg.scale_down_delay_seconds.is_none() {
            let recorded = &self.status.blue_green.post_promotion_analysis_run_status;
            let started = self.promotion_run_phase(recorded).is_some();
            let skipped = rollout_analysis::skip_post_promotion(
                &self.original_status,
                &new_rs.hash,
                saturation(new_rs, n),
                started,
            );
            if !skipped && !self.post_promotion_succeeded() {
                return Ok(());
            }
        }
        let mut by_revision: Vec<&Rs> = older.iter().collect();
        by_revision.sort_by_key(|r| std::cmp::Reverse(r.revision));
        let limit = bg
            .scale_down_delay_revision_limit
            .map_or(i64::MAX, |l| i64::from(l.max(0)));
        let delay = Duration::from_secs(bg.scale_down_delay_seconds.unwrap_or(30).max(0) as u64);
        let mut annotated: i64 = 0;
        for rs in by_revision {
            if self.blue_green_referenced(bg, rs) || rs.spec == 0 {
                continue;
            }
            let want = match rs.deadline {
                None if annotated < limit => {
                    annotated += 1;
                    let deadline = self.now.after(delay);
                    self.set_scale_down_deadline(rs, Some(deadline))?;
                    self.wake_at(deadline);
                    rs.spec
                }
                None => 0,
                Some(deadline) => {
                    annotated += 1;
                    if annotated <= limit && self.now < deadline {
                        self.wake_at(deadline);
                        n
                    } else {
                        0
                    }
                }
            };
            self.scale(rs, want)?;
        }
        Ok(())
    }

    /// `isReplicaSetReferenced`: the status or a Service still points at the ReplicaSet.
    fn blue_green_referenced(&self, bg: &BlueGreenStrategy, rs: &Rs) -> bool {
        let s = &self.status;
        let recorded = [
            &s.stable_r_s,
            &s.current_pod_hash,
            &s.blue_green.active_selector,
            &s.blue_green.preview_selector,
        ];
        recorded.iter().any(|h| **h == rs.hash)
            || [&bg.active_service, &bg.preview_service]
                .iter()
                .filter(|svc| !svc.is_empty())
                .any(|svc| self.service_selector(svc).as_deref() == Some(rs.hash.as_str()))
    }

    /// The pod-template-hash a Service selects, if it has one.
    fn service_selector(&self, service: &str) -> Option<String> {
        let svc = self
            .api
            .get(Kind::Service, self.rollout.namespace(), service);
        svc.ok()?.spec()["selector"][HASH_LABEL]
            .as_str()
            .map(str::to_string)
    }

    /// `isBlueGreenFastTracked`: no pause before the switch (first deploy, promote-full, a
    /// rollback to the stable template, or the active Service already on the new one).
    fn blue_green_fast_tracked(&self, new_hash: &str, active: Option<&str>) -> bool {
        self.status.promote_full
            || new_hash == self.status.stable_r_s
            || active.is_none_or(|a| a == new_hash)
    }

    /// `CompletedBlueGreenPause`, over the status as this reconcile read it (as Argo reads
    /// the Rollout it was given): the reconcile that ends the pause still sees it.
    fn completed_blue_green_pause(&self, bg: &BlueGreenStrategy, added_pause: bool) -> bool {
        let read = &self.original_status;
        let cond = read
            .pause_conditions
            .iter()
            .find(|c| c.reason == BLUE_GREEN_PAUSE);
        if added_pause {
            return false;
        }
        if read.blue_green.scale_up_preview_check_point {
            return true;
        }
        if bg.auto_promotion_enabled != Some(false) {
            if bg.auto_promotion_seconds <= 0 {
                return true;
            }
            return cond.is_some_and(|c| {
                let start = SimTime::parse_rfc3339(&c.start_time).unwrap_or(self.now);
                self.now > start.after(auto_promotion(bg))
            });
        }
        read.controller_pause && cond.is_none()
    }

    /// `reconcileBlueGreenPause`: pauses once the new ReplicaSet is ready, when
    /// auto-promotion is off or delayed; true when it paused in this reconcile.
    fn blue_green_pause(
        &mut self,
        bg: &BlueGreenStrategy,
        n: i32,
        sets: &BlueGreenSets,
        active: Option<&str>,
        halted: bool,
    ) -> bool {
        if self.status.abort || !self.ready_for_pause(bg, n, sets) || halted {
            return false;
        }
        let past_checkpoint = self.status.blue_green.scale_up_preview_check_point;
        if self.blue_green_fast_tracked(&sets.new_rs.hash, active)
            || past_checkpoint
            || !bg.controller_pauses()
        {
            self.status
                .pause_conditions
                .retain(|c| c.reason != BLUE_GREEN_PAUSE);
            return false;
        }
        // The pause begins once the pre-promotion analysis has succeeded.
        if !self.completed_pre_promotion_analysis(bg) {
            return false;
        }
        let cond = self
            .status
            .pause_conditions
            .iter()
            .find(|c| c.reason == BLUE_GREEN_PAUSE)
            .cloned();
        match cond {
            Some(c) => {
                if !self.completed_blue_green_pause(bg, false) {
                    if bg.auto_promotion_seconds > 0 {
                        let start = SimTime::parse_rfc3339(&c.start_time).unwrap_or(self.now);
                        self.wake_at(pause_end(start, auto_promotion(bg)));
                    }
                } else {
                    self.status
                        .pause_conditions
                        .retain(|c| c.reason != BLUE_GREEN_PAUSE);
                }
                false
            }
            // Promoted by hand: the condition is gone and controllerPause stays set.
            None if self.status.controller_pause => false,
            None => {
                self.status.pause_conditions.push(PauseCondition {
                    reason: BLUE_GREEN_PAUSE.into(),
                    start_time: self.now.rfc3339(),
                });
                self.status.controller_pause = true;
                if bg.auto_promotion_seconds > 0 {
                    self.wake_at(pause_end(self.now, auto_promotion(bg)));
                }
                self.event(
                    false,
                    "RolloutPaused",
                    format!("Rollout is paused ({BLUE_GREEN_PAUSE})"),
                );
                true
            }
        }
    }

    /// `reconcileActiveService`: once the new ReplicaSet is fully up and available, the
    /// active Service switches to it when fast-tracked or when the pause and the
    /// pre-promotion analysis are over; back to the stable one on abort.
    fn reconcile_active_service(
        &mut self,
        bg: &BlueGreenStrategy,
        n: i32,
        sets: &BlueGreenSets,
        active: Option<&str>,
        added_pause: bool,
    ) -> Result<(), ApiError> {
        let new_rs = &sets.new_rs;
        let saturated = new_rs.spec == n && new_rs.available == n;
        if !self.ready_for_pause(bg, n, sets) || !saturated {
            return Ok(());
        }
        let mut target = active.unwrap_or("").to_string();
        let promoted = self.completed_blue_green_pause(bg, added_pause)
            && self.completed_pre_promotion_analysis(bg);
        if self.blue_green_fast_tracked(&new_rs.hash, active) || promoted {
            target.clone_from(&new_rs.hash);
        }
        if self.status.abort {
            target.clone_from(&self.status.stable_r_s);
        }
        if target.is_empty() {
            return Ok(());
        }
        self.switch_selector(&bg.active_service, &target)
    }

    /// `switchServiceSelector` (no availability check in blue-green).
    fn switch_selector(&mut self, service: &str, hash: &str) -> Result<(), ApiError> {
        let ns = self.ns();
        let Ok(svc) = self.api.get(Kind::Service, &ns, service) else {
            return Ok(());
        };
        let current = svc.spec()["selector"][HASH_LABEL]
            .as_str()
            .unwrap_or("")
            .to_string();
        if current == hash && svc.annotation(MANAGED_BY).is_some() {
            return Ok(());
        }
        self.write_service_selector(service, &current, hash)
    }

    /// `syncRolloutStatusBlueGreen`: the selectors as the Services hold them, full promotion
    /// (`shouldFullPromote`: after a successful post-promotion analysis, if there is one),
    /// and the preview scale-up checkpoint.
    fn blue_green_status(
        &mut self,
        bg: &BlueGreenStrategy,
        sets: &BlueGreenSets,
        added_pause: bool,
    ) {
        let selector = |svc: &str| self.service_selector(svc).unwrap_or_default();
        let preview = selector(&bg.preview_service);
        let active = selector(&bg.active_service);
        self.status.blue_green.preview_selector = preview;
        self.status.blue_green.active_selector = active.clone();
        let reason = if self.status.stable_r_s.is_empty() || active.is_empty() {
            Some("Initial deploy")
        } else if active != self.status.current_pod_hash {
            None
        } else if self.status.promote_full {
            Some("Full promotion requested")
        } else if self.status.abort
            || (bg.post_promotion_analysis.is_some() && !self.post_promotion_succeeded())
        {
            None
        } else {
            Some("Completed blue-green update")
        };
        match reason {
            Some(reason) => self.promote_blue_green(&sets.new_rs, reason),
            None => {
                let checkpoint = bg.preview_replica_count.is_some()
                    && (self.status.blue_green.scale_up_preview_check_point
                        || (self.completed_blue_green_pause(bg, added_pause)
                            && self.completed_pre_promotion_analysis(bg)
                            && bg.preview_replica_count == Some(sets.new_rs.available)));
                self.status.blue_green.scale_up_preview_check_point = checkpoint;
            }
        }
    }

    /// `promoteStable` for blue-green: the new ReplicaSet is stable; the event only when the
    /// stable one changes.
    fn promote_blue_green(&mut self, new_rs: &Rs, reason: &str) {
        self.clear_pause_and_abort();
        self.status.promote_full = false;
        self.status.blue_green.scale_up_preview_check_point = false;
        if self.status.stable_r_s == self.status.current_pod_hash {
            return;
        }
        self.status.stable_r_s = self.status.current_pod_hash.clone();
        let message = if reason == "Initial deploy" {
            format!("Rollout completed: {reason}")
        } else {
            format!(
                "Rollout completed update to revision {}: {reason}",
                new_rs.revision
            )
        };
        self.event(false, "RolloutCompleted", message);
    }
}

fn auto_promotion(bg: &BlueGreenStrategy) -> Duration {
    Duration::from_secs(bg.auto_promotion_seconds.max(0) as u64)
}

fn saturation(rs: &Rs, replicas: i32) -> Saturation {
    Saturation {
        spec: rs.spec,
        available: rs.available,
        replicas,
    }
}
