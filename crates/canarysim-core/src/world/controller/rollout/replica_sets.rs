//! Argo's `rollout/replicaset.go`, `ephemeralmetadata.go` and `restart.go`: creating and
//! scaling the rollout's ReplicaSets, delayed scale-down, clean-up, pod metadata and restarts.

// One reconciler across files: each part shares its module's imports and helpers.
use super::*;

impl Reconciler<'_> {
    pub(super) fn owned_replica_sets(&self) -> Vec<Rs> {
        owned_replica_sets(self.api, &self.rollout)
            .into_iter()
            .map(Rs::from)
            .collect()
    }

    pub(super) fn create_replica_set(
        &mut self,
        spec: &RolloutSpec,
        hash: &str,
        replicas: i32,
        revision: i64,
    ) -> Result<(), ApiError> {
        let mut template = spec.template.clone();
        let labels = crate::model::object::object_entry(
            crate::model::object::object_entry(&mut template, "metadata"),
            "labels",
        );
        crate::model::object::ensure_object(labels)
            .insert(HASH_LABEL.into(), Value::String(hash.into()));
        let mut selector = json!({});
        for (k, v) in spec
            .selector
            .as_ref()
            .map(|s| s.match_labels.clone())
            .unwrap_or_default()
        {
            selector[k] = Value::String(v);
        }
        selector[HASH_LABEL] = Value::String(hash.into());
        let mut rs_labels = template["metadata"]["labels"].clone();
        if !rs_labels.is_object() {
            rs_labels = json!({});
        }
        let name = format!("{}-{hash}", self.rollout.name());
        let canary_strategy = spec.canary().cloned().unwrap_or_default();
        // A new ReplicaSet beside a stable one is a canary; the first one will be stable.
        let ephemeral = if self.status.stable_r_s.is_empty() || self.status.stable_r_s == hash {
            canary_strategy.stable_metadata.as_ref()
        } else {
            canary_strategy.canary_metadata.as_ref()
        };
        let mut rs = Object::new(
            Kind::ReplicaSet,
            json!({
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": name,
                    "namespace": self.rollout.namespace(),
                    "labels": rs_labels,
                    "annotations": {REVISION: revision.to_string()},
                    "ownerReferences": [{
                        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
                        "name": self.rollout.name(),
                        "uid": self.rollout.metadata().and_then(|m| m.get("uid")).cloned().unwrap_or(Value::Null),
                        "controller": true, "blockOwnerDeletion": true
                    }]
                },
                "spec": {
                    "replicas": replicas,
                    "minReadySeconds": spec.min_ready_seconds,
                    "selector": {"matchLabels": selector},
                    "template": template,
                }
            }),
        );
        if ephemeral.is_some() {
            crate::controller::ephemeral::sync_replica_set(&mut rs.value, ephemeral);
        }
        self.api.create(rs)?;
        self.event(
            false,
            "NewReplicaSetCreated",
            format!("Created ReplicaSet {name} (revision {revision}) with size {replicas}"),
        );
        Ok(())
    }

    /// Sets `spec.replicas` of a ReplicaSet; true when it wrote.
    pub(super) fn scale(&mut self, rs: &Rs, replicas: i32) -> Result<bool, ApiError> {
        let spec = rs.spec;
        if spec == replicas {
            return Ok(false);
        }
        let mut next = self
            .api
            .get(Kind::ReplicaSet, &rs.namespace, rs.name())?
            .clone();
        next.value["spec"]["replicas"] = json!(replicas);
        // Argo drops the deadline with the scale to zero, except on an abort that keeps the
        // canary up for abortScaleDownDelaySeconds (rollout/sync.go scaleReplicaSet).
        let keeps_deadline = replicas == 0 && self.delays_scale_down_on_abort();
        if !keeps_deadline {
            if let Some(a) = next.value["metadata"]["annotations"].as_object_mut() {
                a.remove(SCALE_DOWN_DEADLINE);
            }
        }
        self.api.update(next)?;
        self.outcome.changed = true;
        let verb = if replicas > spec { "up" } else { "down" };
        self.event(
            false,
            "ScalingReplicaSet",
            format!(
                "Scaled {verb} ReplicaSet {} (revision {}) from {spec} to {replicas}",
                rs.name(),
                rs.revision
            ),
        );
        Ok(true)
    }

    /// `reconcileEphemeralMetadata`: the new ReplicaSet carries canaryMetadata (stableMetadata
    /// once it is stable), the stable one stableMetadata, older ones none — on their pod
    /// templates and on the pods they have.
    pub(super) fn reconcile_ephemeral_metadata(
        &mut self,
        canary: &CanaryStrategy,
        all: &[Rs],
        new_hash: &str,
    ) -> Result<(), ApiError> {
        if canary.canary_metadata.is_none() && canary.stable_metadata.is_none() {
            return Ok(());
        }
        let stable = self.status.stable_r_s.clone();
        let fully_rolled_out = stable.is_empty() || stable == new_hash;
        for rs in all {
            let desired = if rs.hash == new_hash {
                if fully_rolled_out {
                    canary.stable_metadata.as_ref()
                } else {
                    canary.canary_metadata.as_ref()
                }
            } else if rs.hash == stable {
                canary.stable_metadata.as_ref()
            } else {
                None
            };
            let Ok(current) = self.api.get(Kind::ReplicaSet, &rs.namespace, rs.name()) else {
                continue;
            };
            let mut next = current.clone();
            let existing = crate::controller::ephemeral::injected(&next.value);
            // A scaled-down ReplicaSet's template is synced; it has no pods to sync.
            let pods: Vec<String> = if rs.spec == 0 {
                Vec::new()
            } else {
                crate::controller::replicaset::owned_pod_names(self.api, &next)
            };
            if crate::controller::ephemeral::sync_replica_set(&mut next.value, desired) {
                self.api.update(next)?;
                self.outcome.changed = true;
            }
            for name in pods {
                // Decoded one at a time, for this comparison alone.
                let Ok(mut pod) = self.api.get_owned(Kind::Pod, &rs.namespace, &name) else {
                    continue;
                };
                let mut meta = pod.value.get("metadata").cloned().unwrap_or(Value::Null);
                if crate::controller::ephemeral::sync(&mut meta, existing.as_ref(), desired) {
                    pod.value["metadata"] = meta;
                    self.api.update(pod)?;
                    self.outcome.changed = true;
                }
            }
        }
        Ok(())
    }

    /// `rollout/restart.go` (RolloutPodRestarter): once `spec.restartAt` has passed, Pods
    /// created before it are evicted — stable ReplicaSet first, then the new one, then older
    /// ones — as many at a time as availability allows (maxUnavailable, at least one); when
    /// none is left, `status.restartedAt` records it. Returns how many were evicted.
    pub(super) fn restart_pods(
        &mut self,
        spec: &RolloutSpec,
        all: &[Rs],
        new_hash: &str,
    ) -> Result<i32, ApiError> {
        let Some(restart_at_text) = spec.restart_at.clone() else {
            return Ok(0);
        };
        if self.status.restarted_at.as_deref() == Some(restart_at_text.as_str()) {
            return Ok(0);
        }
        let Some(restart_at) = SimTime::parse_rfc3339(&restart_at_text) else {
            return Ok(0);
        };
        if self.now <= restart_at {
            self.wake_at(restart_at.after(Duration::from_millis(1)));
            return Ok(0);
        }
        let mut ordered: Vec<&Rs> = all.iter().collect();
        let stable_hash = self.status.stable_r_s.clone();
        ordered.sort_by_key(|r| {
            let rank = if r.hash == stable_hash {
                0
            } else if r.hash == new_hash {
                1
            } else {
                2
            };
            (rank, r.created.clone())
        });
        // (namespace, name, created, available) of each pod, read through its facts.
        let min_ready = Duration::from_secs(spec.min_ready_seconds.max(0) as u64);
        let mut pods: Vec<(String, String, SimTime, bool)> = Vec::new();
        for rs in &ordered {
            let Ok(rs_object) = self.api.get(Kind::ReplicaSet, &rs.namespace, rs.name()) else {
                continue;
            };
            for name in crate::controller::replicaset::owned_pod_names(self.api, rs_object) {
                let Some(pod) = self.api.pod(&rs.namespace, &name) else {
                    continue;
                };
                let created = SimTime::parse_rfc3339(&pod.creation_timestamp).unwrap_or(self.now);
                let available = pod.is_available(min_ready, self.now);
                pods.push((rs.namespace.clone(), name, created, available));
            }
        }
        let n = spec.desired_replicas();
        let total: i32 = all.iter().map(|r| r.spec).sum();
        let available = pods.iter().filter(|p| p.3).count() as i32;
        let canary = spec.canary().cloned().unwrap_or_default();
        let fence = replicas::canary_fenceposts(
            canary.max_surge.as_ref().map(to_int_or_percent).as_ref(),
            canary
                .max_unavailable
                .as_ref()
                .map(to_int_or_percent)
                .as_ref(),
            n,
        );
        let concurrent = fence.max_unavailable.max(1);
        let mut can_restart = available - (n.max(total) - concurrent);
        let (mut needs, mut restarted) = (0, 0);
        for (namespace, name, created, _) in &pods {
            if *created >= restart_at {
                continue;
            }
            needs += 1;
            if can_restart <= 0 {
                continue;
            }
            self.api.delete_quietly(Kind::Pod, namespace, name)?;
            self.outcome.changed = true;
            can_restart -= 1;
            restarted += 1;
        }
        if needs > restarted {
            // restartPodCheckTime
            self.wake_at(self.now.after(Duration::from_secs(30)));
        } else {
            self.status.restarted_at = Some(restart_at_text);
        }
        Ok(restarted)
    }

    /// Argo's `shouldDelayScaleDownOnAbort`.
    pub(super) fn delays_scale_down_on_abort(&self) -> bool {
        self.status.abort
            && !self.status.stable_r_s.is_empty()
            && self.summary.abort_scale_down_delayed
    }

    /// The canary (new) ReplicaSet. On abort with traffic routing it is held at its size
    /// until the stable ReplicaSet is fully available, then scaled down after
    /// `abortScaleDownDelaySeconds`.
    pub(super) fn scale_canary(
        &mut self,
        canary: &CanaryStrategy,
        new_rs: &Rs,
        stable_rs: Option<&Rs>,
        want: i32,
        n: i32,
    ) -> Result<bool, ApiError> {
        let delay = canary.abort_scale_down_delay_seconds.unwrap_or(30);
        if self.status.abort && canary.traffic_routing.is_some() && delay > 0 && want < new_rs.spec
        {
            let stable_ready = stable_rs.is_some_and(|s| s.available >= n);
            if !stable_ready {
                return Ok(false);
            }
            return self.delayed_scale_down(new_rs, want, Duration::from_secs(delay as u64));
        }
        self.scale(new_rs, want)
    }

    /// Scale-down after a deadline annotation (`scale-down-deadline`), as Argo leaves a
    /// traffic-routed ReplicaSet up so that traffic can shift back at once.
    pub(super) fn delayed_scale_down(
        &mut self,
        rs: &Rs,
        target: i32,
        delay: Duration,
    ) -> Result<bool, ApiError> {
        match rs.deadline {
            Some(deadline) if self.now >= deadline => self.scale(rs, target),
            Some(deadline) => {
                self.wake_at(deadline);
                Ok(false)
            }
            None => {
                let deadline = self.now.after(delay);
                self.set_scale_down_deadline(rs, Some(deadline))?;
                self.wake_at(deadline);
                Ok(true)
            }
        }
    }

    /// Writes (or, with None, removes) a ReplicaSet's `scale-down-deadline` annotation.
    pub(super) fn set_scale_down_deadline(
        &mut self,
        rs: &Rs,
        deadline: Option<SimTime>,
    ) -> Result<(), ApiError> {
        let value = deadline.map(|d| Value::String(d.rfc3339()));
        let patch = json!({"metadata": {"annotations": {SCALE_DOWN_DEADLINE: value}}});
        self.api.patch(
            Kind::ReplicaSet,
            &rs.namespace,
            rs.name(),
            &Patch::Merge(patch),
        )?;
        self.outcome.changed = true;
        Ok(())
    }

    /// ReplicaSets that are neither stable nor current: with traffic routing they stay up
    /// for `scaleDownDelaySeconds` (none with dynamicStableScale); without it they go at once.
    pub(super) fn scale_down_older(
        &mut self,
        canary: &CanaryStrategy,
        older: &[Rs],
        traffic_routed: bool,
        fully_promoted: bool,
    ) -> Result<(), ApiError> {
        // Newest first, as Argo walks them: the first scaleDownDelayRevisionLimit ReplicaSets
        // keep their delay, the rest go at once.
        let mut by_revision: Vec<&Rs> = older.iter().collect();
        by_revision.sort_by_key(|r| std::cmp::Reverse(r.revision));
        let limit = canary
            .scale_down_delay_revision_limit
            .map_or(i64::MAX, |l| i64::from(l.max(0)));
        let mut delayed: i64 = 0;
        for rs in by_revision {
            if traffic_routed && self.still_referenced(rs) {
                continue;
            }
            if rs.spec == 0 {
                continue;
            }
            if traffic_routed && !canary.dynamic_stable_scale {
                let scaled = if !fully_promoted && rs.deadline.is_none() {
                    // An intermediate ReplicaSet (V2 of an interrupted V1 → V2 → V3): no
                    // traffic goes to it, so it goes at once.
                    self.scale(rs, 0)?
                } else if rs.deadline.is_none() && delayed >= limit {
                    self.scale(rs, 0)?
                } else {
                    delayed += 1;
                    if delayed > limit {
                        self.scale(rs, 0)?
                    } else {
                        let delay = canary.scale_down_delay_seconds.unwrap_or(30).max(0) as u64;
                        self.delayed_scale_down(rs, 0, Duration::from_secs(delay))?
                    }
                };
                if scaled {
                    return Ok(());
                }
            } else if self.scale(rs, 0)? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// `cleanupRollouts`: beyond `revisionHistoryLimit` (default 10) ReplicaSets other than
    /// the current and the stable one, the oldest (by creation) that are scaled to zero are
    /// deleted, so an `undo` to them is no longer possible.
    pub(super) fn clean_up_old_replica_sets(
        &mut self,
        spec: &RolloutSpec,
        older: &[Rs],
    ) -> Result<bool, ApiError> {
        let limit = spec.revision_history_limit.unwrap_or(10).max(0) as usize;
        if older.len() <= limit {
            return Ok(false);
        }
        let mut by_age: Vec<&Rs> = older.iter().collect();
        by_age.sort_by(|a, b| (&a.created, &a.name).cmp(&(&b.created, &b.name)));
        let mut deleted = false;
        for rs in &by_age[..older.len() - limit] {
            if rs.spec != 0 || rs.replicas != 0 {
                continue;
            }
            self.api
                .delete(Kind::ReplicaSet, &rs.namespace, rs.name())?;
            self.outcome.changed = true;
            deleted = true;
        }
        Ok(deleted)
    }

    /// Whether a Service managed by this rollout still selects the ReplicaSet (Argo does not
    /// start the scale-down delay of a ReplicaSet that still receives traffic).
    pub(super) fn still_referenced(&self, rs: &Rs) -> bool {
        self.api
            .list(Kind::Service, Some(self.rollout.namespace()), None)
            .iter()
            .any(|svc| {
                svc.annotation(MANAGED_BY) == Some(self.rollout.name())
                    && svc.spec()["selector"][HASH_LABEL].as_str() == Some(rs.hash.as_str())
            })
    }
}
