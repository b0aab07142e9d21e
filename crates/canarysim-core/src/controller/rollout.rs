//! The rollout reconciler: Argo Rollouts' canary path (`rollout/canary.go`, `service.go`,
//! `trafficrouting.go`, `sync.go`, `pause.go`, `replicaset.go`), one level-triggered,
//! idempotent reconcile at a time. It reads and writes only through the apiserver.
//!
//! Order inside one reconcile, as upstream: validation → ReplicaSet discovery / template
//! change → Services → traffic routing (header/mirror step, DestinationRule, VirtualService
//! weights) → scaling (stable, canary, older) → step progress and full promotion → status.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

use super::analysis;
use super::hash::{self, GoJsonFlavor};
use super::istio::{self, IstioContext, RemoveOutcome};
use super::replicas::{self, ReplicaProgressThreshold, RsCounts, StepInfo};
use super::replicaset::{HASH_LABEL, min_time};
use super::validation;
use crate::apiserver::{ApiError, ApiServer, Patch};
use crate::clock::SimTime;
use crate::model::duration;
use crate::model::rollout::{
    CanaryStep, CanaryStrategy, Condition, IntOrString, PauseCondition, RolloutSpec, RolloutStatus,
    TrafficWeights, WeightDestination,
};
use crate::model::{Kind, Object};

/// Annotation Argo puts on Services and DestinationRules it manages.
pub use crate::model::vocabulary::MANAGED_BY;
/// ReplicaSet annotation: revision number.
pub use crate::model::vocabulary::REVISION;
/// ReplicaSet annotation: when a delayed scale-down happens.
pub use crate::model::vocabulary::SCALE_DOWN_DEADLINE;
const CANARY_PAUSE_STEP: &str = "CanaryPauseStep";
const INCONCLUSIVE_ANALYSIS: &str = "InconclusiveAnalysisRun";

/// A Kubernetes event emitted by the controllers.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub time: SimTime,
    /// `Rollout/rollouts-demo`, `AnalysisRun/rollouts-demo-5cf4fb69f8-2`
    pub object: String,
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

/// Knobs of the simulated controller.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Which apimachinery JSON encoding the pod-template-hash is computed over.
    pub hash_flavor: GoJsonFlavor,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            hash_flavor: GoJsonFlavor::Legacy,
        }
    }
}

/// What one reconcile did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Something was written: reconcile again at the same instant.
    pub changed: bool,
    /// The next instant this rollout needs a reconcile by itself (pause end, deadline).
    pub wake: Option<SimTime>,
    /// The error the controller reports for this rollout, if any.
    pub error: Option<String>,
}

/// A ReplicaSet of the rollout: the fields the reconciler reads (read once, without
/// copying the object).
#[derive(Debug, Clone)]
struct Rs {
    name: String,
    namespace: String,
    hash: String,
    spec: i32,
    replicas: i32,
    ready: i32,
    available: i32,
    revision: i64,
    deadline: Option<SimTime>,
    /// metadata.creationTimestamp (RFC 3339 in UTC, so it sorts as text).
    created: String,
}

impl Rs {
    fn from(object: &Object) -> Rs {
        let st = object.status();
        let count = |k: &str| st.get(k).and_then(Value::as_i64).unwrap_or(0) as i32;
        Rs {
            name: object.name().to_string(),
            namespace: object.namespace().to_string(),
            hash: object
                .metadata()
                .and_then(|m| m.get("labels"))
                .and_then(|l| l.get(HASH_LABEL))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            spec: object
                .spec()
                .get("replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1) as i32,
            replicas: count("replicas"),
            ready: count("readyReplicas"),
            available: count("availableReplicas"),
            revision: object
                .annotation(REVISION)
                .and_then(|r| r.parse().ok())
                .unwrap_or(0),
            deadline: object
                .annotation(SCALE_DOWN_DEADLINE)
                .and_then(SimTime::parse_rfc3339),
            created: object
                .metadata()
                .and_then(|m| m.get("creationTimestamp"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        }
    }

    fn counts(&self) -> RsCounts {
        RsCounts {
            spec: self.spec,
            replicas: self.replicas,
            available: self.available,
        }
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// Reconciles one Rollout.
pub fn reconcile(
    api: &mut ApiServer,
    now: SimTime,
    namespace: &str,
    name: &str,
    settings: &Settings,
    events: &mut Vec<Event>,
) -> Result<Outcome, ApiError> {
    let rollout = api.get(Kind::Rollout, namespace, name)?.clone();
    let status: RolloutStatus = rollout.status_as().unwrap_or_default();
    let mut r = Reconciler {
        api,
        now,
        settings,
        events,
        summary: SpecSummary::default(),
        original_status: status.clone(),
        status,
        rollout,
        outcome: Outcome::default(),
        abort_message: None,
    };
    r.run()?;
    Ok(r.outcome)
}

struct Reconciler<'a> {
    api: &'a mut ApiServer,
    now: SimTime,
    settings: &'a Settings,
    events: &'a mut Vec<Event>,
    rollout: Object,
    /// What the status computation needs from the spec.
    summary: SpecSummary,
    /// The status as read, to write only when something changed.
    original_status: RolloutStatus,
    status: RolloutStatus,
    outcome: Outcome,
    /// Why an analysis aborted the rollout (after "Rollout aborted update to revision N: ").
    abort_message: Option<String>,
}

impl Reconciler<'_> {
    fn ns(&self) -> String {
        self.rollout.namespace().to_string()
    }

    fn name(&self) -> String {
        self.rollout.name().to_string()
    }

    fn event(&mut self, warning: bool, reason: &str, message: String) {
        self.events.push(Event {
            time: self.now,
            object: format!("Rollout/{}", self.rollout.name()),
            warning,
            reason: reason.to_string(),
            message,
        });
    }

    fn istio_event(&mut self, e: istio::IstioEvent) {
        let warning = e.event_type == istio::EventType::Warning;
        self.event(warning, e.reason, e.message);
    }

    /// Replaces `object`; true when the store changed. The API server drops a write that
    /// changes nothing, as Kubernetes does (no new resourceVersion, no watch event), so such
    /// a write wakes no controller and is no reason to reconcile again.
    fn write(&mut self, object: Object) -> Result<bool, ApiError> {
        let before = self.api.resource_version();
        self.api.update(object)?;
        let changed = self.api.resource_version() != before;
        self.outcome.changed |= changed;
        Ok(changed)
    }

    fn wake_at(&mut self, t: SimTime) {
        self.outcome.wake = min_time(self.outcome.wake, Some(t));
    }

    fn run(&mut self) -> Result<(), ApiError> {
        let spec: RolloutSpec = match self.rollout.spec_as() {
            Ok(s) => s,
            Err(e) => return self.invalid_spec(format!("spec: Invalid value: {e}")),
        };
        self.summary = SpecSummary::of(&spec);
        let Some(canary) = spec.canary().cloned() else {
            return self.invalid_spec(
                "spec.strategy: Invalid value: canarysim simulates the canary strategy only"
                    .to_string(),
            );
        };
        // Spec validation depends on the spec alone: a generation already observed without
        // an InvalidSpec condition was valid then and is valid now.
        let observed_valid = self.original_status.observed_generation
            == self.rollout.generation().to_string()
            && !self
                .original_status
                .conditions
                .iter()
                .any(|c| c.type_ == "InvalidSpec");
        if !observed_valid {
            if let Some(err) = validation::validate_rollout(self.rollout.spec(), &spec).first() {
                return self.invalid_spec(err.to_string());
            }
        }
        if let Some(message) = self.referenced_resources_error(&spec, &canary) {
            return self.invalid_spec(message);
        }
        remove_condition(&mut self.status.conditions, "InvalidSpec");
        self.canary(&spec, &canary)
    }

    /// Records an InvalidSpec condition (phase Degraded) and stops.
    fn invalid_spec(&mut self, error: String) -> Result<(), ApiError> {
        let message = format!(
            "The Rollout \"{}\" is invalid: {error}",
            self.rollout.name()
        );
        set_condition(
            &mut self.status.conditions,
            "InvalidSpec",
            "True",
            "InvalidSpec",
            &message,
            self.now,
        );
        self.status.phase = "Degraded".into();
        self.status.message = format!("InvalidSpec: {message}");
        self.outcome.error = Some(message);
        self.write_status()
    }

    /// Argo's `getRolloutReferencedResources`: Services, VirtualServices (with their routes)
    /// and the DestinationRule must exist; the first problem is reported.
    fn referenced_resources_error(
        &self,
        spec: &RolloutSpec,
        canary: &CanaryStrategy,
    ) -> Option<String> {
        let ns = self.rollout.namespace();
        for (field, svc) in referenced_services(canary) {
            if self.api.get(Kind::Service, ns, svc).is_err() {
                return Some(service_not_found(field, svc));
            }
        }
        // `getReferencedRolloutAnalyses`: every template an analysis names must exist.
        let missing = missing_analysis_templates(canary, |kind, name| {
            let ns = if kind == Kind::ClusterAnalysisTemplate {
                ""
            } else {
                ns
            };
            self.api.get(kind, ns, name).is_ok()
        });
        if let Some((_, message)) = missing.into_iter().next() {
            return Some(message);
        }
        // `ValidateRolloutVirtualServicesConfig`, before the VirtualServices are looked up:
        // exactly one of virtualService / virtualServices.
        if let Some(e) = validation::validate_virtual_services_config(spec) {
            return Some(e.to_string());
        }
        let istio_cfg = canary.traffic_routing.as_ref()?.istio.as_ref()?;
        let vs_refs = istio_cfg.virtual_service_list();
        let managed = managed_routes(canary);
        let services =
            stable_and_canary_services(canary, &self.status.canary.stable_ping_pong, false);
        let ctx = istio_context(self.rollout.name(), canary, &services, managed.as_deref());
        for vs_ref in vs_refs {
            let (vs_ns, vs_name) = istio::virtual_service_namespace_name(&vs_ref.name, ns);
            let vs = self.api.get(Kind::VirtualService, &vs_ns, &vs_name).ok();
            if let Err(e) = istio::validate_virtual_service(
                vs.map(|o| &o.value),
                vs_ref,
                istio_cfg.virtual_service_field(),
                &ctx,
            ) {
                return Some(e);
            }
        }
        if let Some(dr) = &istio_cfg.destination_rule {
            if self.api.get(Kind::DestinationRule, ns, &dr.name).is_err() {
                return Some(format!(
                    "spec.strategy.canary.trafficRouting.istio.destinationRule.name: Invalid value: \"{0}\": destinationrules.networking.istio.io \"{0}\" not found",
                    dr.name
                ));
            }
        }
        None
    }

    fn canary(&mut self, spec: &RolloutSpec, canary: &CanaryStrategy) -> Result<(), ApiError> {
        let n = spec.desired_replicas();
        let steps = &canary.steps;
        let traffic_routed = canary.traffic_routing.is_some();

        // ReplicaSets of this rollout, and the one for the current template.
        let new_hash = hash::pod_template_hash(
            &spec.template,
            self.status.collision_count,
            self.settings.hash_flavor,
        );
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
            if tr.istio.is_some() {
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
        let decision = analysis::reconcile(
            self.api,
            &analysis::Context {
                rollout: &self.rollout,
                canary,
                status: &self.status,
                new_hash: &new_hash,
                revision: new_rs.revision,
                fully_promoted,
                aborted_before: self.original_status.aborted_at.is_some(),
                now: self.now,
            },
        )?;
        self.apply_analysis(decision);

        // Scaling: stable, then canary, then older ReplicaSets; one change per reconcile.
        let mut scaled = false;
        if let Some(stable) = stable_rs.as_ref().filter(|_| !stable_is_new) {
            scaled = self.scale(stable, want_stable)?;
        }
        if !scaled {
            scaled = self.scale_canary(canary, &new_rs, stable_rs.as_ref(), want_canary, n)?;
        }
        if !scaled {
            self.scale_down_older(canary, &older, traffic_routed, fully_promoted)?;
        }

        // Step progress.
        if !spec.paused && !self.status.abort && !fully_promoted && !self.status.promote_full {
            self.progress_steps(steps, at_desired);
        }

        // Full promotion.
        let ready = new_rs.available >= n
            || replicas::replica_progress_threshold_met(threshold, Some(new_rs.counts()), n);
        if !fully_promoted && !self.status.abort && ready {
            self.complete_update(canary, &new_rs, &new_hash);
        }
        self.write_status()
    }

    /// Argo's replica arithmetic for this reconcile: the canary and stable sizes wanted, and
    /// whether every ReplicaSet is at them (`AtDesiredReplicaCountsForCanary`).
    fn desired_replica_counts(
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
    fn restart_steps(&mut self, new_hash: &str, step_count: usize) {
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
        self.status.pause_conditions.clear();
        self.status.controller_pause = false;
        self.status.abort = false;
        self.status.aborted_at = None;
        self.status.promote_full = false;
        remove_condition(&mut self.status.conditions, "Paused");
    }

    /// An abort goes back to step 0 (and clears itself once promoted); promote-full clears
    /// an abort and jumps past the last step; both clear the pauses.
    fn apply_abort_and_promote_full(&mut self, fully_promoted: bool, step_count: usize) {
        if self.status.promote_full {
            // Argo: `RemoveAbort()` when promoting in full (found by tests/simulation/properties.rs).
            self.status.abort = false;
            self.status.aborted_at = None;
        }
        if self.status.abort && fully_promoted {
            self.status.abort = false; // an abort on a promoted rollout clears itself
            self.status.aborted_at = None;
        }
        if !self.status.abort {
            // `CalculateAbortStatus`: not aborted (a retry) → no abortedAt.
            self.status.aborted_at = None;
        }
        if self.status.abort {
            self.status.current_step_index = (step_count > 0).then_some(0);
            self.status.pause_conditions.clear();
            self.status.controller_pause = false;
            if self.status.aborted_at.is_none() {
                self.status.aborted_at = Some(self.now.rfc3339());
            }
        }
        if self.status.promote_full {
            self.status.pause_conditions.clear();
            self.status.controller_pause = false;
            if step_count > 0 {
                self.status.current_step_index = Some(step_count as i32);
            }
        }
    }

    /// All steps done (or promote-full): the new ReplicaSet becomes stable (`promoteStable`).
    fn complete_update(&mut self, canary: &CanaryStrategy, new_rs: &Rs, new_hash: &str) {
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

    fn owned_replica_sets(&self) -> Vec<Rs> {
        owned_replica_sets(self.api, &self.rollout)
            .into_iter()
            .map(Rs::from)
            .collect()
    }

    fn create_replica_set(
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
            super::ephemeral::sync_replica_set(&mut rs.value, ephemeral);
        }
        self.api.create(rs)?;
        self.event(
            false,
            "NewReplicaSetCreated",
            format!("Created ReplicaSet {name} (revision {revision}) with size {replicas}"),
        );
        Ok(())
    }

    /// `promoteStable`: the new ReplicaSet becomes stable and the steps are all done.
    fn promote_stable(&mut self, canary: &CanaryStrategy, new_hash: &str, step_count: usize) {
        self.swap_ping_pong(canary, new_hash);
        self.status.stable_r_s = new_hash.to_string();
        self.status.current_step_index = (step_count > 0).then_some(step_count as i32);
    }

    /// `promoteStable`: when the stable ReplicaSet changes, ping and pong swap roles.
    fn swap_ping_pong(&mut self, canary: &CanaryStrategy, new_stable_hash: &str) {
        if canary.ping_pong.is_some() && self.status.stable_r_s != new_stable_hash {
            let next = if self.status.canary.stable_ping_pong == "ping" {
                "pong"
            } else {
                "ping"
            };
            self.status.canary.stable_ping_pong = next.into();
        }
    }

    /// `rollout/service.go`: the stable Service selects the stable ReplicaSet, the canary
    /// Service the new one (the stable one on abort). A Service Argo does not manage yet is
    /// switched only once its target is fully available; a managed one once the target has
    /// an available pod.
    fn reconcile_services(
        &mut self,
        canary: &CanaryStrategy,
        new_rs: &Rs,
        stable_rs: Option<&Rs>,
        all: &[Rs],
        fully_promoted: bool,
    ) -> Result<(), ApiError> {
        let stable_hash = stable_rs.map(|s| s.hash.clone()).unwrap_or_default();
        let canary_target = if self.status.abort {
            stable_hash.clone()
        } else {
            new_rs.hash.clone()
        };
        // `reconcilePingAndPongService`: until the update is fully promoted, the canary of
        // ping/pong selects the new ReplicaSet, without the availability check.
        let ping_pong_canary = match &canary.ping_pong {
            Some(_) if !fully_promoted => {
                stable_and_canary_services(canary, &self.status.canary.stable_ping_pong, true).1
            }
            _ => String::new(),
        };
        for (svc_name, target, check_availability) in [
            (&ping_pong_canary, new_rs.hash.clone(), false),
            (&canary.stable_service, stable_hash, true),
            (&canary.canary_service, canary_target, true),
        ] {
            if svc_name.is_empty() || target.is_empty() {
                continue;
            }
            let ns = self.ns();
            let Ok(svc) = self.api.get(Kind::Service, &ns, svc_name) else {
                continue;
            };
            let current = svc.spec()["selector"][HASH_LABEL]
                .as_str()
                .unwrap_or("")
                .to_string();
            let managed = svc.annotation(MANAGED_BY) == Some(self.rollout.name());
            if current == target && managed {
                continue;
            }
            let Some(target_rs) = all.iter().find(|r| r.hash == target) else {
                continue;
            };
            let ready = if !check_availability {
                true
            } else if managed || current == target {
                target_rs.available >= 1
            } else {
                target_rs.spec > 0 && target_rs.available >= target_rs.spec
            };
            if !ready {
                continue;
            }
            let patch = json!({
                "metadata": {"annotations": {MANAGED_BY: self.rollout.name()}},
                "spec": {"selector": {HASH_LABEL: target}},
            });
            self.api
                .patch(Kind::Service, &ns, svc_name, &Patch::Merge(patch))?;
            self.outcome.changed = true;
            self.event(
                false,
                "SwitchService",
                format!(
                    "Switched selector for service '{svc_name}' from '{current}' to '{target}'"
                ),
            );
        }
        Ok(())
    }

    /// `rollout/trafficrouting.go` for Istio. Returns false when an error stops the reconcile.
    #[allow(clippy::too_many_arguments)]
    fn reconcile_traffic(
        &mut self,
        spec: &RolloutSpec,
        canary: &CanaryStrategy,
        new_rs: &Rs,
        stable_rs: Option<&Rs>,
        all: &[Rs],
        at_desired: bool,
        fully_promoted: bool,
    ) -> Result<bool, ApiError> {
        let tr = canary.traffic_routing.as_ref().expect("caller checked");
        let Some(istio_cfg) = tr.istio.as_ref() else {
            return Ok(true);
        };
        let n = spec.desired_replicas();
        let steps = &canary.steps;
        let managed = managed_routes(canary);
        let name = self.name();
        let services =
            stable_and_canary_services(canary, &self.status.canary.stable_ping_pong, false);
        let ctx = istio_context(&name, canary, &services, managed.as_deref());
        let index = self.status.current_step_index.unwrap_or(0) as usize;

        // The weight to write, and whether managed routes go.
        let (weight, remove_routes) =
            self.desired_weight(canary, n, new_rs, stable_rs, at_desired, fully_promoted);

        if remove_routes {
            self.remove_managed_routes(istio_cfg, &ctx)?;
        }

        // The stable ReplicaSet must be able to take the rest of the traffic.
        let stable_available = stable_rs.map(|s| s.available).unwrap_or(0);
        let needed = ((100 - weight).max(0) as i64 * n as i64 / 100) as i32;
        let threshold_met = replicas::replica_progress_threshold_met(
            progress_threshold(canary),
            stable_rs.map(Rs::counts),
            n,
        );
        if stable_available < needed && !(progress_threshold(canary).is_some() && threshold_met) {
            return Ok(true);
        }

        let dr_object: Option<Value> = match &istio_cfg.destination_rule {
            Some(dr) => self
                .api
                .get(Kind::DestinationRule, &self.ns(), &dr.name)
                .ok()
                .map(|o| o.value.clone()),
            None => None,
        };

        // A header or mirror step is applied in the reconcile where it is current.
        let revision = new_rs.revision;
        if revision > 1 && !self.status.abort && !fully_promoted {
            if let Some(step) = steps.get(index) {
                if step.set_header_route.is_some() || step.set_mirror_route.is_some() {
                    if let Err(e) =
                        self.apply_route_step(istio_cfg, &ctx, step, dr_object.as_ref())?
                    {
                        return self.traffic_error(e);
                    }
                }
            }
        }

        // Subset-level split: label the DestinationRule's subsets (after the "delaying
        // destination rule switch" check, which the Istio module makes).
        if let Some(dr) = &istio_cfg.destination_rule {
            if let Err(e) = self.update_subsets(canary, dr, dr_object.as_ref(), &ctx, new_rs, all) {
                return self.traffic_error(e);
            }
        }
        if let Err(e) = self.set_virtual_service_weights(istio_cfg, &ctx, weight) {
            return self.traffic_error(e);
        }

        let weights = TrafficWeights {
            canary: WeightDestination {
                weight,
                service_name: services.1.clone(),
                pod_template_hash: new_rs.hash.clone(),
            },
            stable: WeightDestination {
                weight: 100 - weight,
                service_name: services.0.clone(),
                pod_template_hash: self.status.stable_r_s.clone(),
            },
            additional: Vec::new(),
            verified: None,
        };
        self.status.canary.weights = Some(weights);
        Ok(true)
    }

    /// Argo's `desiredWeight` in `reconcileTrafficRouting` (first match wins), and whether the
    /// managed routes are removed: 0 once promoted or when nothing of the canary is up;
    /// on abort 0 (or, with dynamicStableScale, the step-down weight); on promote-full the
    /// canary's share of pods (dynamicStableScale, unclamped as Argo has it) or the last
    /// weight; else the step's weight, the previous one until the replicas are in place.
    fn desired_weight(
        &self,
        canary: &CanaryStrategy,
        n: i32,
        new_rs: &Rs,
        stable_rs: Option<&Rs>,
        at_desired: bool,
        fully_promoted: bool,
    ) -> (i32, bool) {
        let steps = &canary.steps;
        let index = self.status.current_step_index.unwrap_or(0) as usize;
        let last_weight = self
            .status
            .canary
            .weights
            .as_ref()
            .map(|w| w.canary.weight)
            .unwrap_or(0);
        if fully_promoted {
            (0, true)
        } else if self.status.abort {
            if canary.dynamic_stable_scale {
                let set_weights: Vec<i32> = steps.iter().filter_map(|s| s.set_weight).collect();
                let w = replicas::dynamic_abort_weight(
                    n,
                    100,
                    &set_weights,
                    new_rs.available,
                    stable_rs.map(|s| s.available).unwrap_or(0),
                    replicas::has_explicit_abort_scale_down_delay(
                        true,
                        canary.abort_scale_down_delay_seconds,
                    ),
                );
                (w.min(last_weight), true)
            } else {
                (0, true)
            }
        } else if new_rs.available == 0 {
            (0, true)
        } else if self.status.promote_full {
            if canary.dynamic_stable_scale && n > 0 {
                // Unclamped, as Argo computes it: above 100 when the canary has more pods
                // than spec.replicas (setCanaryScale), argo-rollouts#4424; the Istio
                // module then writes stable 0, which istiod before 1.15 rejects.
                (100 * new_rs.available / n, true)
            } else {
                (last_weight, true)
            }
        } else if !at_desired {
            (previous_set_weight(steps, index), false)
        } else if index < steps.len() {
            (current_set_weight(steps, index), false)
        } else {
            (100, false)
        }
    }

    /// The DestinationRule's canary and stable subsets select the new and stable
    /// ReplicaSets' hashes; an error is the traffic routing error to report.
    fn update_subsets(
        &mut self,
        canary: &CanaryStrategy,
        dr: &crate::model::rollout::IstioDestinationRule,
        dr_object: Option<&Value>,
        ctx: &IstioContext,
        new_rs: &Rs,
        all: &[Rs],
    ) -> Result<(), String> {
        let availability: Vec<istio::ReplicaSetAvailability> = all
            .iter()
            .map(|r| istio::ReplicaSetAvailability {
                name: r.name(),
                pod_template_hash: &r.hash,
                spec_replicas: r.spec,
                available_replicas: r.available,
            })
            .collect();
        let delay = istio::DestinationRuleDelayCheck {
            services_in_spec: !canary.canary_service.is_empty()
                || !canary.stable_service.is_empty(),
            skip_canary: self.status.abort,
            replica_sets: &availability,
        };
        let stable_hash = self.status.stable_r_s.clone();
        let next =
            istio::update_destination_rule(dr_object, ctx, &new_rs.hash, &stable_hash, &[], &delay)
                .map_err(|e| e.to_string())?;
        // Argo patches a rule whose subsets carry fields besides name and labels (e.g.
        // `trafficPolicy`) on every reconcile, though the patch changes nothing; only a
        // write that changed the rule counts (and is an event), or the world never settles.
        if let Some(next) = next {
            let written = self
                .write(Object::new(Kind::DestinationRule, next))
                .map_err(|e| e.to_string())?;
            if !written {
                return Ok(());
            }
            self.istio_event(istio::destination_rule_updated_event(
                dr,
                &new_rs.hash,
                &stable_hash,
            ));
        }
        Ok(())
    }

    /// Every referenced VirtualService's routes get `weight` for the canary (Argo's
    /// `SetWeight`); an error is the traffic routing error to report.
    fn set_virtual_service_weights(
        &mut self,
        istio_cfg: &crate::model::rollout::IstioTrafficRouting,
        ctx: &IstioContext,
        weight: i32,
    ) -> Result<(), String> {
        for vs_ref in istio_cfg.virtual_service_list() {
            let (vs_ns, vs_name) = istio::virtual_service_namespace_name(&vs_ref.name, &self.ns());
            let vs = match self.api.get(Kind::VirtualService, &vs_ns, &vs_name) {
                Ok(o) => o.clone(),
                Err(e) => {
                    self.istio_event(istio::virtual_service_not_found_event(&vs_name));
                    return Err(e.to_string());
                }
            };
            let next = istio::set_weight(&vs.value, vs_ref, ctx, weight, &[])
                .map_err(|e| e.to_string())?;
            if let Some(next) = next {
                let written = self
                    .write(Object::new(Kind::VirtualService, next))
                    .map_err(|e| e.to_string())?;
                if written {
                    self.istio_event(istio::set_weight_event(&vs_name, weight));
                }
            }
        }
        Ok(())
    }

    /// Reports a traffic routing error the way Argo does (Warning event, reconcile stops).
    fn traffic_error(&mut self, message: String) -> Result<bool, ApiError> {
        self.event(true, "TrafficRoutingError", message.clone());
        self.outcome.error = Some(message);
        Ok(false)
    }

    fn apply_route_step(
        &mut self,
        istio_cfg: &crate::model::rollout::IstioTrafficRouting,
        ctx: &IstioContext,
        step: &CanaryStep,
        dr: Option<&Value>,
    ) -> Result<Result<(), String>, ApiError> {
        for vs_ref in istio_cfg.virtual_service_list() {
            let (vs_ns, vs_name) = istio::virtual_service_namespace_name(&vs_ref.name, &self.ns());
            let op = if step.set_header_route.is_some() {
                istio::IstioOperation::SetHeaderRoute
            } else {
                istio::IstioOperation::SetMirrorRoute
            };
            let vs = match self.api.get(Kind::VirtualService, &vs_ns, &vs_name) {
                Ok(o) => o.clone(),
                Err(e) => {
                    let message = istio::virtual_service_not_found_error(op, &vs_name)
                        .map(|e| e.to_string())
                        .unwrap_or_else(|| e.to_string());
                    return Ok(Err(message));
                }
            };
            let result = if let Some(h) = &step.set_header_route {
                istio::set_header_route(&vs.value, vs_ref, ctx, h, dr)
                    .map(|v| (v, istio::set_header_route_event(&vs_name, &h.name)))
            } else if let Some(m) = &step.set_mirror_route {
                istio::set_mirror_route(&vs.value, vs_ref, ctx, m, dr)
                    .map(|v| (v, istio::set_mirror_route_event(&vs_name, &m.name)))
            } else {
                continue;
            };
            match result {
                Ok((next, event)) => {
                    if next != vs.value {
                        if let Err(e) = self.api.update(Object::new(Kind::VirtualService, next)) {
                            return Ok(Err(e.to_string()));
                        }
                        self.outcome.changed = true;
                        self.istio_event(event);
                    }
                }
                Err(e) => return Ok(Err(e.to_string())),
            }
        }
        Ok(Ok(()))
    }

    fn remove_managed_routes(
        &mut self,
        istio_cfg: &crate::model::rollout::IstioTrafficRouting,
        ctx: &IstioContext,
    ) -> Result<(), ApiError> {
        for vs_ref in istio_cfg.virtual_service_list() {
            let (vs_ns, vs_name) = istio::virtual_service_namespace_name(&vs_ref.name, &self.ns());
            let Ok(vs) = self.api.get(Kind::VirtualService, &vs_ns, &vs_name) else {
                continue;
            };
            let vs = vs.clone();
            match istio::remove_managed_routes(&vs.value, ctx) {
                Ok(RemoveOutcome::Write(next)) => {
                    if next != vs.value {
                        self.api.update(Object::new(Kind::VirtualService, next))?;
                        self.outcome.changed = true;
                        self.istio_event(istio::removed_managed_routes_event(&vs_name));
                    }
                }
                Ok(RemoveOutcome::Unchanged) => {}
                Ok(RemoveOutcome::StopNoHttp) => break,
                Err(e) => {
                    self.event(true, "TrafficRoutingError", e.to_string());
                }
            }
        }
        Ok(())
    }

    /// Sets `spec.replicas` of a ReplicaSet; true when it wrote.
    fn scale(&mut self, rs: &Rs, replicas: i32) -> Result<bool, ApiError> {
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
    fn reconcile_ephemeral_metadata(
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
            let existing = super::ephemeral::injected(&next.value);
            // A scaled-down ReplicaSet's template is synced; it has no pods to sync.
            let pods: Vec<String> = if rs.spec == 0 {
                Vec::new()
            } else {
                super::replicaset::owned_pod_names(self.api, &next)
            };
            if super::ephemeral::sync_replica_set(&mut next.value, desired) {
                self.api.update(next)?;
                self.outcome.changed = true;
            }
            for name in pods {
                // Decoded one at a time, for this comparison alone.
                let Ok(mut pod) = self.api.get_owned(Kind::Pod, &rs.namespace, &name) else {
                    continue;
                };
                let mut meta = pod.value.get("metadata").cloned().unwrap_or(Value::Null);
                if super::ephemeral::sync(&mut meta, existing.as_ref(), desired) {
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
    fn restart_pods(
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
    fn delays_scale_down_on_abort(&self) -> bool {
        self.status.abort
            && !self.status.stable_r_s.is_empty()
            && self.summary.abort_scale_down_delayed
    }

    /// The canary (new) ReplicaSet. On abort with traffic routing it is held at its size
    /// until the stable ReplicaSet is fully available, then scaled down after
    /// `abortScaleDownDelaySeconds`.
    fn scale_canary(
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
    fn delayed_scale_down(
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
                let patch =
                    json!({"metadata": {"annotations": {SCALE_DOWN_DEADLINE: deadline.rfc3339()}}});
                self.api.patch(
                    Kind::ReplicaSet,
                    &rs.namespace,
                    rs.name(),
                    &Patch::Merge(patch),
                )?;
                self.outcome.changed = true;
                self.wake_at(deadline);
                Ok(true)
            }
        }
    }

    /// ReplicaSets that are neither stable nor current: with traffic routing they stay up
    /// for `scaleDownDelaySeconds` (none with dynamicStableScale); without it they go at once.
    fn scale_down_older(
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
    fn clean_up_old_replica_sets(
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
    fn still_referenced(&self, rs: &Rs) -> bool {
        self.api
            .list(Kind::Service, Some(self.rollout.namespace()), None)
            .iter()
            .any(|svc| {
                svc.annotation(MANAGED_BY) == Some(self.rollout.name())
                    && svc.spec()["selector"][HASH_LABEL].as_str() == Some(rs.hash.as_str())
            })
    }

    /// Records the current runs and applies their effects: Failed or Error abort the
    /// rollout, Inconclusive pauses it (`InconclusiveAnalysisRun`).
    fn apply_analysis(&mut self, d: analysis::Decision) {
        self.status.canary.current_step_analysis_run_status = d.step_run;
        self.status.canary.current_background_analysis_run_status = d.background_run;
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
        }
    }

    /// `completedCurrentCanaryStep` and the pause handling of `pause.go`.
    fn progress_steps(&mut self, steps: &[CanaryStep], at_desired: bool) {
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
                None if self.status.controller_pause => true, // promoted
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

    /// Recomputes counts, phase, message and conditions; writes the status if it changed.
    fn write_status(&mut self) -> Result<(), ApiError> {
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

/// What the status computation needs from the spec (decoded once per reconcile).
#[derive(Debug, Clone, Default)]
struct SpecSummary {
    replicas: i32,
    paused: bool,
    traffic_routed: bool,
    /// `status.selector`: `app=demo`.
    selector: String,
    /// `progressDeadlineSeconds` (default 600) and `progressDeadlineAbort`.
    progress_deadline: Duration,
    progress_deadline_abort: bool,
    /// Traffic-routed, and an abort leaves the canary up for a while: abortScaleDownDelaySeconds
    /// is not 0, and is set explicitly when dynamicStableScale is on.
    abort_scale_down_delayed: bool,
    /// Per step: whether it waits without counting against the deadline (pause, analysis,
    /// experiment: Argo's `isIndefiniteStep`).
    indefinite_steps: Vec<bool>,
}

impl SpecSummary {
    fn of(spec: &RolloutSpec) -> Self {
        SpecSummary {
            replicas: spec.desired_replicas(),
            paused: spec.paused,
            traffic_routed: spec.canary().is_some_and(|c| c.traffic_routing.is_some()),
            selector: spec
                .selector
                .as_ref()
                .map(|sel| {
                    sel.match_labels
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default(),
            progress_deadline: Duration::from_secs(
                spec.progress_deadline_seconds.unwrap_or(600).max(0) as u64,
            ),
            progress_deadline_abort: spec.progress_deadline_abort,
            abort_scale_down_delayed: spec.canary().is_some_and(|c| {
                c.traffic_routing.is_some()
                    && c.abort_scale_down_delay_seconds != Some(0)
                    && !(c.dynamic_stable_scale && c.abort_scale_down_delay_seconds.is_none())
            }),
            indefinite_steps: spec
                .canary()
                .map(|c| {
                    c.steps
                        .iter()
                        .map(|s| {
                            s.pause.is_some() || s.analysis.is_some() || s.experiment.is_some()
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
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
    if !spec.traffic_routed && s.replicas > s.updated_replicas {
        return ("Progressing", "old replicas are pending termination".into());
    }
    if s.stable_r_s != s.current_pod_hash {
        return ("Progressing", "waiting for all steps to complete".into());
    }
    ("Healthy", String::new())
}

/// The Services a canary strategy names, in the order Argo's `getReferencedServices` checks
/// them, each with its field path (`spec.strategy.canary.stableService`…); unset ones left out.
pub fn referenced_services(canary: &CanaryStrategy) -> Vec<(&'static str, &str)> {
    let mut out = vec![
        (
            "spec.strategy.canary.stableService",
            canary.stable_service.as_str(),
        ),
        (
            "spec.strategy.canary.canaryService",
            canary.canary_service.as_str(),
        ),
    ];
    if let Some(pp) = &canary.ping_pong {
        out.push((
            "spec.strategy.canary.pingPong.pingService",
            pp.ping_service.as_str(),
        ));
        out.push((
            "spec.strategy.canary.pingPong.pongService",
            pp.pong_service.as_str(),
        ));
    }
    out.retain(|(_, svc)| !svc.is_empty());
    out
}

/// Argo's error for a referenced Service that does not exist.
pub fn service_not_found(field: &str, svc: &str) -> String {
    format!("{field}: Invalid value: \"{svc}\": service \"{svc}\" not found")
}

/// The managed route names, `None` when `managedRoutes` is absent (Argo re-orders routes only
/// when the field is present).
pub fn managed_routes(canary: &CanaryStrategy) -> Option<Vec<String>> {
    let tr = canary.traffic_routing.as_ref()?;
    tr.managed_routes.as_ref()?;
    Some(tr.managed_route_names())
}

/// Argo's `GetStableAndCanaryServices(rollout, isPingpongPreferred)`: (stable, canary). With
/// pingPong the roles follow `status.canary.stablePingPong` (stable = ping when it is "ping",
/// else pong); Istio prefers canaryService/stableService when either is set, ALB and the
/// ping/pong Service reconcile always take ping/pong.
pub fn stable_and_canary_services(
    canary: &CanaryStrategy,
    stable_ping_pong: &str,
    ping_pong_preferred: bool,
) -> (String, String) {
    if let Some(pp) = &canary.ping_pong {
        let no_other_services =
            canary.stable_service.is_empty() && canary.canary_service.is_empty();
        if ping_pong_preferred || no_other_services {
            return if stable_ping_pong == "ping" {
                (pp.ping_service.clone(), pp.pong_service.clone())
            } else {
                (pp.pong_service.clone(), pp.ping_service.clone())
            };
        }
    }
    (canary.stable_service.clone(), canary.canary_service.clone())
}

/// What the Istio reconciler needs from the Rollout; `services` is (stable, canary) as
/// [`stable_and_canary_services`] resolves them.
pub fn istio_context<'a>(
    name: &'a str,
    canary: &'a CanaryStrategy,
    services: &'a (String, String),
    managed: Option<&'a [String]>,
) -> IstioContext<'a> {
    IstioContext {
        rollout_name: name,
        canary_service: &services.1,
        stable_service: &services.0,
        destination_rule: canary
            .traffic_routing
            .as_ref()
            .and_then(|t| t.istio.as_ref())
            .and_then(|i| i.destination_rule.as_ref()),
        managed_routes: managed,
        steps: &canary.steps,
    }
}

fn step_info(step: &CanaryStep) -> StepInfo {
    StepInfo {
        set_weight: step.set_weight,
        set_canary_scale: step
            .set_canary_scale
            .as_ref()
            .map(|s| replicas::CanaryScale {
                replicas: s.replicas,
                weight: s.weight,
                match_traffic_weight: s.match_traffic_weight,
            }),
    }
}

fn to_int_or_percent(v: &IntOrString) -> replicas::IntOrPercent {
    match v {
        IntOrString::Int(i) => replicas::IntOrPercent::Int(*i as i32),
        IntOrString::String(s) => replicas::IntOrPercent::Str(s.clone()),
    }
}

fn progress_threshold(canary: &CanaryStrategy) -> Option<ReplicaProgressThreshold> {
    let v = canary.replica_progress_threshold.as_ref()?;
    let kind = match v.get("type").and_then(Value::as_str)? {
        "Percent" | "Percentage" => replicas::ProgressType::Percentage,
        "Pod" | "Pods" => replicas::ProgressType::Pods,
        _ => return None,
    };
    Some(ReplicaProgressThreshold {
        kind,
        value: v.get("value").and_then(Value::as_i64)? as i32,
    })
}

/// The latest setWeight at or before `index`, else 0.
fn current_set_weight(steps: &[CanaryStep], index: usize) -> i32 {
    crate::model::vocabulary::latest_set_weight(steps, index, |s| s.set_weight)
}

/// The latest setWeight strictly before `index` (the weight that stays while the canary
/// scales up for the current step), else 0.
fn previous_set_weight(steps: &[CanaryStep], index: usize) -> i32 {
    match index {
        0 => 0,
        i => crate::model::vocabulary::latest_set_weight(steps, i - 1, |s| s.set_weight),
    }
}

fn pause_duration(d: Option<&IntOrString>) -> Option<Duration> {
    d.and_then(|d| duration::from_int_or_string(d).ok())
}

/// When a pause of `d` that started at `start` completes (Argo: once now is after the end).
fn pause_end(start: SimTime, d: Duration) -> SimTime {
    start.after(d).after(Duration::from_millis(1))
}

fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: SimTime,
) {
    let now = now.rfc3339();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status && c.reason == reason && c.message == message => {}
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now.clone();
            }
            c.status = status.into();
            c.reason = reason.into();
            c.message = message.into();
            c.last_update_time = now;
        }
        None => conditions.push(Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: now.clone(),
            last_update_time: now,
        }),
    }
}

fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) {
    conditions.retain(|c| c.type_ != type_);
}

/// The ReplicaSets a Rollout owns (by owner reference).
pub fn owned_replica_sets<'a>(api: &'a ApiServer, rollout: &Object) -> Vec<&'a Object> {
    let uid = rollout.metadata().and_then(|m| m.get("uid"));
    api.list(Kind::ReplicaSet, Some(rollout.namespace()), None)
        .into_iter()
        .filter(|rs| {
            rs.metadata()
                .and_then(|m| m.get("ownerReferences"))
                .and_then(Value::as_array)
                .is_some_and(|refs| refs.iter().any(|r| r.get("uid") == uid))
        })
        .collect()
}

/// Images of a pod template: container name → image.
pub fn template_images(template: &Value) -> BTreeMap<String, String> {
    template["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| {
                    Some((
                        c["name"].as_str()?.to_string(),
                        c["image"].as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Argo's `getReferencedRolloutAnalyses`: the templates the canary's analyses name that
/// `exists(kind, name)` does not find, each with its field path and Argo's message.
pub fn missing_analysis_templates(
    canary: &CanaryStrategy,
    exists: impl Fn(Kind, &str) -> bool,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, analysis) in analysis_refs(canary) {
        for t in &analysis.templates {
            let kind = if t.cluster_scope {
                Kind::ClusterAnalysisTemplate
            } else {
                Kind::AnalysisTemplate
            };
            if !exists(kind, &t.template_name) {
                out.push((
                    path.clone(),
                    format!(
                        "{path}: Invalid value: \"{0}\": {kind} '{0}' not found",
                        t.template_name
                    ),
                ));
            }
        }
    }
    out
}

/// Every analysis a canary names, with the field path Argo reports a missing template at:
/// each `analysis` step, then the background analysis.
pub fn analysis_refs(canary: &CanaryStrategy) -> Vec<(String, analysis::RolloutAnalysis)> {
    let mut out = Vec::new();
    for (i, step) in canary.steps.iter().enumerate() {
        if let Some(a) = step
            .analysis
            .as_ref()
            .and_then(|a| serde_json::from_value(a.clone()).ok())
        {
            out.push((
                format!("spec.strategy.canary.steps[{i}].analysis.templates"),
                a,
            ));
        }
    }
    if let Some(a) = canary
        .analysis
        .as_ref()
        .and_then(|a| serde_json::from_value(a.clone()).ok())
    {
        out.push(("spec.strategy.canary.analysis.templates".to_string(), a));
    }
    out
}
