//! The rollout reconciler: Argo Rollouts' canary path, one level-triggered, idempotent
//! reconcile at a time. It reads and writes only through the apiserver. One file per
//! upstream file: `canary.rs` (`rollout/canary.go`), `service.rs` (`service.go`),
//! `traffic_routing.rs` (`trafficrouting.go`), `replica_sets.rs` (`replicaset.go`,
//! `ephemeralmetadata.go`, `restart.go`), `steps.rs` (`pause.go`, the analysis side of
//! `canary.go`), `status.rs` (`sync.go`'s status); this file holds the reconcile itself
//! and the helpers they share.
//!
//! Order inside one reconcile, as upstream: validation → ReplicaSet discovery / template
//! change → Services → traffic routing (header/mirror step, DestinationRule, VirtualService
//! weights) → scaling (stable, canary, older) → step progress and full promotion → status.

mod blue_green;
mod canary;
mod replica_sets;
mod service;
mod status;
mod steps;
mod traffic_routing;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

use super::gateway_api;
use super::hash::{self, GoJsonFlavor};
use super::istio::{self, IstioContext, RemoveOutcome};
use super::nginx;
use super::replicas::{self, ReplicaProgressThreshold, RsCounts, StepInfo};
use super::replicaset::{HASH_LABEL, min_time};
use super::rollout_analysis;
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
    /// The object's namespace.
    pub namespace: String,
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
            namespace: self.rollout.namespace().to_string(),
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

    /// The pod-template-hash of the current template (`ComputeHash` with the collision count).
    fn template_hash(&self, spec: &RolloutSpec) -> String {
        hash::pod_template_hash(
            &spec.template,
            self.status.collision_count,
            self.settings.hash_flavor,
        )
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
        let blue_green = match spec.blue_green() {
            Some(Ok(bg)) if spec.is_blue_green() => Some(bg),
            Some(Err(e)) => {
                return self.invalid_spec(format!("spec.strategy.blueGreen: Invalid value: {e}"));
            }
            _ => None,
        };
        let canary = spec.canary().cloned();
        if canary.is_none() && blue_green.is_none() {
            return self.invalid_spec(
                "spec.strategy: Invalid value: canarysim simulates the canary and blue-green strategies only"
                    .to_string(),
            );
        }
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
        let missing = match (&canary, &blue_green) {
            (Some(canary), _) => self.referenced_resources_error(&spec, canary),
            (None, Some(bg)) => self.blue_green_references_error(bg),
            (None, None) => None,
        };
        if let Some(message) = missing {
            if message == nginx::NIL_POINTER_PANIC {
                // Argo's controller panics, recovers and requeues: nothing is written.
                self.outcome.error = Some(message);
                return Ok(());
            }
            return self.invalid_spec(message);
        }
        remove_condition(&mut self.status.conditions, "InvalidSpec");
        match (canary, blue_green) {
            (Some(canary), _) => self.canary(&spec, &canary),
            (None, Some(bg)) => self.blue_green(&spec, &bg),
            (None, None) => Ok(()),
        }
    }

    /// `getRolloutReferencedResources` for blue-green: the active Service and, when named,
    /// the preview one must exist, then the promotion analyses' templates.
    fn blue_green_references_error(
        &self,
        bg: &crate::model::rollout::BlueGreenStrategy,
    ) -> Option<String> {
        let ns = self.rollout.namespace();
        if let Some((field, svc)) = blue_green_services(bg)
            .into_iter()
            .find(|(_, svc)| self.api.get(Kind::Service, ns, svc).is_err())
        {
            return Some(service_not_found(field, svc));
        }
        let missing = missing_analysis_templates(blue_green_analysis_refs(bg), |kind, name| {
            self.template_exists(kind, name)
        });
        missing.into_iter().next().map(|(_, message)| message)
    }

    /// Whether an AnalysisTemplate (in the rollout's namespace) or a ClusterAnalysisTemplate
    /// is stored.
    fn template_exists(&self, kind: Kind, name: &str) -> bool {
        let ns = if kind == Kind::ClusterAnalysisTemplate {
            ""
        } else {
            self.rollout.namespace()
        };
        self.api.get(kind, ns, name).is_ok()
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
        let missing = missing_analysis_templates(analysis_refs(canary), |kind, name| {
            self.template_exists(kind, name)
        });
        if let Some((_, message)) = missing.into_iter().next() {
            return Some(message);
        }
        if let Some(message) = self.nginx_references_error(canary) {
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
}

impl Reconciler<'_> {
    /// The NGINX part of `getRolloutReferencedResources` and `ValidateIngress`.
    fn nginx_references_error(&self, canary: &CanaryStrategy) -> Option<String> {
        let cfg = canary.traffic_routing.as_ref()?.nginx.as_ref()?;
        let ns = self.rollout.namespace();
        let kind = crate::model::ingress::ingress_kind();
        nginx::stable_ingresses_error(cfg, &canary.stable_service, |name| {
            let ingress = self.api.get(kind, ns, name).ok()?;
            Some(ingress.spec_as().unwrap_or_default())
        })
        .map(|(_, message)| message)
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
    /// The blue-green strategy (phase and counts follow the active ReplicaSet).
    blue_green: bool,
    /// Blue-green with `postPromotionAnalysis`: after the switch the rollout waits for it.
    post_promotion_analysis: bool,
}

impl SpecSummary {
    fn of(spec: &RolloutSpec) -> Self {
        let blue_green = spec
            .blue_green()
            .filter(|_| spec.is_blue_green())
            .and_then(Result::ok);
        let blue_green = blue_green.as_ref();
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
            }) || blue_green
                .is_some_and(|b| b.abort_scale_down_delay_seconds != Some(0)),
            blue_green: blue_green.is_some(),
            post_promotion_analysis: blue_green
                .is_some_and(|b| b.post_promotion_analysis.is_some()),
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

/// The Services a canary strategy names, in the order Argo's `getReferencedServices` checks
/// them, each with its field path (`spec.strategy.canary.stableService`…); unset ones left out.
pub(crate) fn referenced_services(canary: &CanaryStrategy) -> Vec<(&'static str, &str)> {
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

/// The Services a blue-green strategy names, each with its field path: the active one
/// always (it is required), the preview one when set.
pub(crate) fn blue_green_services(
    bg: &crate::model::rollout::BlueGreenStrategy,
) -> Vec<(&'static str, &str)> {
    let mut out = vec![(
        "spec.strategy.blueGreen.activeService",
        bg.active_service.as_str(),
    )];
    if !bg.preview_service.is_empty() {
        out.push((
            "spec.strategy.blueGreen.previewService",
            bg.preview_service.as_str(),
        ));
    }
    out
}

/// Argo's error for a referenced Service that does not exist.
pub(crate) fn service_not_found(field: &str, svc: &str) -> String {
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
pub(crate) fn stable_and_canary_services(
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
pub(crate) fn istio_context<'a>(
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
pub(crate) fn owned_replica_sets<'a>(api: &'a ApiServer, rollout: &Object) -> Vec<&'a Object> {
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
pub(crate) fn template_images(template: &Value) -> BTreeMap<String, String> {
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

/// Argo's `getReferencedRolloutAnalyses`: the templates the analyses name (from
/// [`analysis_refs`] or [`blue_green_analysis_refs`]) that `exists(kind, name)` does not
/// find, each with its field path and Argo's message.
pub(crate) fn missing_analysis_templates(
    refs: Vec<(String, rollout_analysis::RolloutAnalysis)>,
    exists: impl Fn(Kind, &str) -> bool,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, analysis) in refs {
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
pub(crate) fn analysis_refs(
    canary: &CanaryStrategy,
) -> Vec<(String, rollout_analysis::RolloutAnalysis)> {
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

/// A blue-green rollout's pre- and post-promotion analyses, with their field paths.
pub(crate) fn blue_green_analysis_refs(
    bg: &crate::model::rollout::BlueGreenStrategy,
) -> Vec<(String, rollout_analysis::RolloutAnalysis)> {
    [
        ("prePromotionAnalysis", &bg.pre_promotion_analysis),
        ("postPromotionAnalysis", &bg.post_promotion_analysis),
    ]
    .into_iter()
    .filter_map(|(field, analysis)| {
        let a = serde_json::from_value(analysis.clone()?).ok()?;
        Some((format!("spec.strategy.blueGreen.{field}.templates"), a))
    })
    .collect()
}
