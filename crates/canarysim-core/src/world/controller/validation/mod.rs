//! Spec validation of a Rollout, ported from Argo Rollouts'
//! `pkg/apis/rollouts/validation/validation.go` (`ValidateRollout` and everything it calls for
//! the canary strategy), plus the one check of `validation_references.go` that needs no
//! referenced object (`ValidateRolloutVirtualServicesConfig`).
//!
//! Errors are rendered exactly like Kubernetes' `field.Error`
//! (`k8s.io/apimachinery/pkg/util/validation/field/errors.go`, v0.34):
//! `<path>: Invalid value: <value>: <detail>`, `<path>: Required value: <detail>`,
//! `<path>: Forbidden: <detail>`, `<path>: Internal error: <detail>`. Bad values are shown as
//! Go does: int32/int64/bool bare, Go strings with `%q`, anything else as Go `encoding/json`
//! output (struct field order, `omitempty`, sorted map keys, `null` for nil pointers).
//!
//! Upstream quirks kept on purpose:
//! * canary field paths are built from `spec.strategy`, not `spec.strategy.canary`
//!   (`spec.strategy.steps[0].setWeight`); [`FieldError::pointer`] still names the real place
//!   (`/spec/strategy/canary/steps/0/setWeight`).
//! * a missing strategy is reported at `spec.strategy.strategy`.
//! * `setMirrorRoute.match[].method` is checked twice and `headers` never.
//! * only setWeight, pause, experiment and analysis count for "more than one step type".
//!
//! Provenance: the checks follow the newest stored `validation.go` (step plugins, Istio
//! ping-pong) plus two later upstream changes: argo-rollouts#4643 (plugins may mirror; message
//! as recorded in ARGO-BEHAVIOR.md §7) and #4740 (plugins may use ping-pong; the condition is
//! ported, the ping-pong message wording after that change is unverified).
//!
//! Pod template validation is a subset of Kubernetes' `ValidatePodTemplateSpecForReplicaSet`
//! (selector/labels match, label syntax, containers present, container name and image,
//! restartPolicy, activeDeadlineSeconds); the rest of `ValidatePodSpec` is not ported.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::model::duration;
use crate::model::kube_validation::{
    dns1123_label_errors, is_qualified_name, label_value_errors, qualified_name_errors,
};
use crate::model::rollout::*;

// ---------------------------------------------------------------------------------------------
// Messages (validation.go constants, same names in SCREAMING_CASE).

/// `MissingFieldMessage`, a format string with one `%s`.
pub(crate) fn missing_field_message(field: &str) -> String {
    format!("Rollout has missing field '{field}'")
}
/// `InvalidSetWeightMessage`, formatted with the max traffic weight (100 unless
/// `maxTrafficWeight` is set).
pub(crate) fn invalid_set_weight_message(max: i32) -> String {
    format!("SetWeight needs to be between 0 and {max}")
}
/// `InvalidCanaryExperimentTemplateWeightWithoutTrafficRouting`.
pub(crate) const INVALID_EXPERIMENT_WEIGHT_WITHOUT_TRAFFIC_ROUTING: &str =
    "Experiment template weight cannot be set unless TrafficRouting is enabled";
/// Inline message for experiment weights with an unsupported router.
pub(crate) const INVALID_EXPERIMENT_WEIGHT_ROUTER: &str = "Experiment template weight is only available for TrafficRouting with SMI, ALB, Istio and Plugins at this time";
/// `InvalidSetCanaryScaleTrafficPolicy`.
pub(crate) const INVALID_SET_CANARY_SCALE_TRAFFIC_POLICY: &str =
    "SetCanaryScale requires TrafficRouting to be set";
/// `InvalidSetHeaderRouteTrafficPolicy`.
pub(crate) const INVALID_SET_HEADER_ROUTE_TRAFFIC_POLICY: &str =
    "SetHeaderRoute requires TrafficRouting, supports Istio and ALB and Apisix";
/// `InvalidSetMirrorRouteTrafficPolicy` (after argo-rollouts#4643, plugins may mirror too).
pub(crate) const INVALID_SET_MIRROR_ROUTE_TRAFFIC_POLICY: &str =
    "SetMirrorRoute requires TrafficRouting, supports Istio and Plugins";
/// `InvalidStringMatchMultipleValuePolicy`.
pub(crate) const INVALID_STRING_MATCH_MULTIPLE_VALUE: &str =
    "StringMatch match value must have exactly one of the following: exact, regex, prefix";
/// `InvalidStringMatchMissedValuePolicy`.
pub(crate) const INVALID_STRING_MATCH_MISSED_VALUE: &str =
    "StringMatch value missed, match value must have one of the following: exact, regex, prefix";
/// `InvalidSetHeaderRouteALBValuePolicy`.
pub(crate) const INVALID_SET_HEADER_ROUTE_ALB_VALUE: &str =
    "SetHeaderRoute match value invalid. ALB supports 'exact' value only";
/// `InvalidDurationMessage`.
pub(crate) const INVALID_DURATION: &str = "Duration needs to be greater than 0";
/// `InvalidMaxSurgeMaxUnavailable`.
pub(crate) const INVALID_MAX_SURGE_MAX_UNAVAILABLE: &str =
    "MaxSurge and MaxUnavailable both can not be zero";
/// `InvalidStepMessage`.
pub(crate) const INVALID_STEP: &str = "Step must have one of the following set: experiment, setWeight, setCanaryScale, plugin or pause";
/// `InvalidStrategyMessage`.
pub(crate) const INVALID_STRATEGY: &str = "Multiple Strategies can not be listed";
/// `DuplicatedServicesBlueGreenMessage`.
pub(crate) const DUPLICATED_SERVICES_BLUE_GREEN: &str = "This rollout uses the same service for the active and preview services, but two different services are required.";
/// `DuplicatedServicesCanaryMessage`.
pub(crate) const DUPLICATED_SERVICES_CANARY: &str = "This rollout uses the same service for the stable and canary services, but two different services are required.";
/// `InvalidAntiAffinityStrategyMessage`.
pub(crate) const INVALID_ANTI_AFFINITY_STRATEGY: &str =
    "AntiAffinity must have exactly one strategy listed";
/// `InvalidAntiAffinityWeightMessage`.
pub(crate) const INVALID_ANTI_AFFINITY_WEIGHT: &str = "AntiAffinity weight must be between 1-100";
/// `ScaleDownLimitLargerThanRevisionLimit`.
pub(crate) const SCALE_DOWN_LIMIT_LARGER_THAN_REVISION_LIMIT: &str =
    "This rollout's revision history limit can not be smaller than the rollout's scale down limit";
/// `InvalidTrafficRoutingMessage`.
pub(crate) const INVALID_TRAFFIC_ROUTING: &str =
    "Canary service and Stable service must to be set to use Traffic Routing";
/// `InvalidAnalysisArgsMessage`.
pub(crate) const INVALID_ANALYSIS_ARGS: &str =
    "Analyses arguments must refer to valid object metadata supported by downwardAPI";
/// `InvalidCanaryScaleDownDelay`.
pub(crate) const INVALID_CANARY_SCALE_DOWN_DELAY: &str =
    "Canary scaleDownDelaySeconds can only be used with traffic routing";
/// `InvalidCanaryDynamicStableScale`.
pub(crate) const INVALID_CANARY_DYNAMIC_STABLE_SCALE: &str =
    "Canary dynamicStableScale can only be used with traffic routing";
/// `InvalidCanaryDynamicStableScaleWithScaleDownDelay`.
pub(crate) const INVALID_CANARY_DYNAMIC_STABLE_SCALE_WITH_SCALE_DOWN_DELAY: &str =
    "Canary dynamicStableScale cannot be used with scaleDownDelaySeconds";
/// `InvalidCanaryMaxWeightOnlySupportInNginxAndPlugins`.
pub(crate) const INVALID_CANARY_MAX_WEIGHT_ONLY_NGINX_AND_PLUGINS: &str =
    "Canary maxTrafficWeight in traffic routing only supported in Nginx and Plugins";
/// `InvalidPingPongProvidedMessage`.
pub(crate) const INVALID_PING_PONG_PROVIDED: &str =
    "Ping service and Pong service must to be set to use Ping-Pong feature";
/// `DuplicatedPingPongServicesMessage`.
pub(crate) const DUPLICATED_PING_PONG_SERVICES: &str = "This rollout uses the same service for the ping and pong services, but two different services are required.";
/// `MissedAlbRootServiceMessage`.
pub(crate) const MISSED_ALB_ROOT_SERVICE: &str =
    "Root service field is required for the configuration with ALB and ping-pong feature enabled";
/// `PingPongWithRouterOnlyMessage`. Wording as last seen upstream (before argo-rollouts#4740
/// also admitted plugins); see the module notes.
pub(crate) const PING_PONG_WITH_ROUTER_ONLY: &str =
    "Ping-pong feature works with the ALB and Istio traffic routers only";
/// `InvalideStepRouteNameNotFoundInManagedRoutes`.
pub(crate) const STEP_ROUTE_NOT_IN_MANAGED_ROUTES: &str =
    "Steps define a route that does not exist in spec.strategy.canary.trafficRouting.managedRoutes";
/// `ValidateRolloutVirtualServicesConfig`'s error string.
pub(crate) const VIRTUAL_SERVICES_CONFIG: &str =
    "either VirtualService or VirtualServices must be configured";

/// Kubernetes' `IsNegativeErrorMsg` (`ValidateNonnegativeField`).
const IS_NEGATIVE: &str = "must be greater than or equal to 0";

// ---------------------------------------------------------------------------------------------
// field.Error

/// The `field.ErrorType`s this module produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `FieldValueInvalid`: rendered with its value.
    Invalid,
    /// `FieldValueRequired`: no value.
    Required,
    /// `FieldValueForbidden`: no value.
    Forbidden,
    /// `InternalError`: no value.
    Internal,
    /// `FieldValueNotSupported`: rendered with its value.
    NotSupported,
    /// `FieldValueDuplicate`: rendered with its value.
    Duplicate,
}

impl ErrorKind {
    /// `ErrorType.String()`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Invalid => "Invalid value",
            ErrorKind::Required => "Required value",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::Internal => "Internal error",
            ErrorKind::NotSupported => "Unsupported value",
            ErrorKind::Duplicate => "Duplicate value",
        }
    }

    /// Whether `ErrorBody` prints the bad value for this type.
    fn shows_value(self) -> bool {
        matches!(
            self,
            ErrorKind::Invalid | ErrorKind::NotSupported | ErrorKind::Duplicate
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One validation error, as Kubernetes' `field.Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path as Argo prints it, e.g. `spec.strategy.steps[0].setWeight`.
    pub path: String,
    /// The error type.
    pub kind: ErrorKind,
    /// The bad value, already rendered as Go renders it (`120`, `"svc"`, `{"exact":"a"}`);
    /// `None` for kinds that print no value.
    pub value: Option<String>,
    /// The detail message.
    pub detail: String,
    /// JSON pointer (from the Rollout object root) of the offending field.
    pointer: String,
}

impl FieldError {
    fn new(kind: ErrorKind, at: &FieldPath, value: Option<String>, detail: String) -> Self {
        FieldError {
            path: at.display.clone(),
            kind,
            value,
            detail,
            pointer: at.pointer.clone(),
        }
    }

    fn invalid(at: &FieldPath, value: String, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, at, Some(value), detail.into())
    }

    fn required(at: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Required, at, None, detail.into())
    }

    fn forbidden(at: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, at, None, detail.into())
    }

    fn internal(at: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, at, None, detail.into())
    }

    fn not_supported(at: &FieldPath, value: String, supported: &[&str]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| crate::go::quote(s)).collect();
        let detail = if quoted.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(ErrorKind::NotSupported, at, Some(value), detail)
    }

    fn duplicate(at: &FieldPath, value: String) -> Self {
        Self::new(ErrorKind::Duplicate, at, Some(value), String::new())
    }

    /// `ErrorBody()`: the message without the field path.
    pub fn body(&self) -> String {
        let mut s = self.kind.as_str().to_string();
        if self.kind.shows_value() {
            if let Some(v) = &self.value {
                s.push_str(": ");
                s.push_str(v);
            }
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// JSON pointer of the offending field from the Rollout object root, e.g.
    /// `/spec/strategy/canary/steps/0/setWeight` for display path
    /// `spec.strategy.steps[0].setWeight`. For a missing field (Required errors) it names where
    /// the field would go; see [`FieldError::existing_pointer`].
    pub fn pointer(&self) -> String {
        self.pointer.clone()
    }

    /// The longest prefix of [`FieldError::pointer`] that exists in `rollout` (the whole Rollout
    /// object), so a missing field can still be reported at its parent's line.
    pub fn existing_pointer(&self, rollout: &Value) -> String {
        let mut best = String::new();
        let mut current = rollout;
        let mut so_far = String::new();
        for raw in self.pointer.split('/').skip(1) {
            let token = raw.replace("~1", "/").replace("~0", "~");
            let next = match current {
                Value::Object(m) => m.get(&token),
                Value::Array(a) => token.parse::<usize>().ok().and_then(|i| a.get(i)),
                _ => None,
            };
            match next {
                Some(v) => {
                    so_far.push('/');
                    so_far.push_str(raw);
                    best.clone_from(&so_far);
                    current = v;
                }
                None => break,
            }
        }
        best
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.body())
    }
}

impl std::error::Error for FieldError {}

/// The `InvalidSpec` condition message the controller sets for the first error
/// (`rollout/controller.go` `createInvalidRolloutCondition`).
pub fn invalid_spec_message(rollout_name: &str, err: &FieldError) -> String {
    format!("The Rollout \"{rollout_name}\" is invalid: {err}")
}

/// A `field.Path` with its printed form and the JSON pointer of the real field (they differ
/// where Argo builds canary paths from `spec.strategy`).
#[derive(Debug, Clone)]
struct FieldPath {
    display: String,
    pointer: String,
}

impl FieldPath {
    fn new(display: &str, pointer: &str) -> Self {
        FieldPath {
            display: display.to_string(),
            pointer: pointer.to_string(),
        }
    }

    fn child(&self, name: &str) -> Self {
        self.child_as(name, name)
    }

    /// A child printed as `display` whose real key in the document is `key`.
    fn child_as(&self, display: &str, key: &str) -> Self {
        FieldPath {
            display: if self.display.is_empty() {
                display.to_string()
            } else {
                format!("{}.{display}", self.display)
            },
            pointer: format!(
                "{}/{}",
                self.pointer,
                key.replace('~', "~0").replace('/', "~1")
            ),
        }
    }

    fn index(&self, i: usize) -> Self {
        FieldPath {
            display: format!("{}[{i}]", self.display),
            pointer: format!("{}/{i}", self.pointer),
        }
    }

    /// Same printed path, different pointer (for paths naming no real field).
    fn pointing_at(&self, other: &FieldPath) -> Self {
        FieldPath {
            display: self.display.clone(),
            pointer: other.pointer.clone(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points

/// `ValidateRollout`: every spec error, in Argo's order. The controller reports only the first
/// one (see [`invalid_spec_message`]).
///
/// `spec_json` is the Rollout's `spec` as stored; it supplies fields the typed view does not
/// carry (`progressDeadlineSeconds`, `workloadRef`, `antiAffinity`, experiment/analysis
/// details). `spec` must be the typed view of the same JSON.
pub fn validate_rollout(spec_json: &Value, spec: &RolloutSpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let root = FieldPath::new("spec", "/spec");
    let replicas = spec.desired_replicas();
    nonnegative(&mut errs, i64::from(replicas), &root.child("replicas"));

    let has_workload_ref = field(spec_json, "workloadRef").is_some();
    let selector_path = root.child("selector");
    if !has_workload_ref {
        match &spec.selector {
            None => errs.push(FieldError::required(
                &selector_path,
                missing_field_message(".spec.selector"),
            )),
            Some(sel) => {
                validate_label_selector(&mut errs, sel, &selector_path);
                if sel.match_labels.len() + sel.match_expressions.len() == 0 {
                    errs.push(FieldError::invalid(
                        &selector_path,
                        crate::go::json(&label_selector_json(sel)),
                        "empty selector is invalid for deployment",
                    ));
                }
            }
        }
    }

    // The lint path (`TemplateResolvedFromRef == false`): a workloadRef rollout must not also
    // carry a template.
    if has_workload_ref && !empty_template(&spec.template) {
        errs.push(FieldError::internal(
            &root.child("template"),
            "template must be empty for workload reference rollout",
        ));
    }

    match label_selector_as_selector(spec.selector.as_ref()) {
        Err(()) => {
            let value = spec
                .selector
                .as_ref()
                .map_or(Value::Null, label_selector_json);
            errs.push(FieldError::invalid(
                &selector_path,
                crate::go::json(&value),
                "invalid label selector",
            ));
        }
        Ok(selector) => {
            if !has_workload_ref {
                validate_pod_template_for_replica_set(
                    &mut errs,
                    &spec.template,
                    &selector,
                    &root.child("template"),
                );
            }
        }
    }

    nonnegative(
        &mut errs,
        i64::from(spec.min_ready_seconds),
        &root.child("minReadySeconds"),
    );
    let revision_history_limit = spec.revision_history_limit.unwrap_or(10);
    nonnegative(
        &mut errs,
        i64::from(revision_history_limit),
        &root.child("revisionHistoryLimit"),
    );
    let progress_deadline = field(spec_json, "progressDeadlineSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(600);
    let pds_path = root.child("progressDeadlineSeconds");
    nonnegative(&mut errs, progress_deadline, &pds_path);
    if progress_deadline <= i64::from(spec.min_ready_seconds) {
        errs.push(FieldError::invalid(
            &pds_path,
            progress_deadline.to_string(),
            "must be greater than minReadySeconds",
        ));
    }

    validate_strategy(&mut errs, spec_json, spec, revision_history_limit);
    errs
}

/// `ValidateRolloutVirtualServicesConfig` (`validation_references.go`): with Istio routing,
/// exactly one of `virtualService` / `virtualServices` must be set. Upstream runs it while
/// collecting referenced resources, i.e. only when [`validate_rollout`] found nothing and
/// after the referenced Services, AnalysisTemplates and Ingresses were checked.
pub fn validate_virtual_services_config(spec: &RolloutSpec) -> Option<FieldError> {
    let istio = spec.canary()?.traffic_routing.as_ref()?.istio.as_ref()?;
    // `MultipleVirtualServiceConfigured` is `VirtualServices != nil`: an empty list counts.
    let bad = if istio.virtual_services.is_some() {
        istio.virtual_service.is_some()
    } else {
        istio.virtual_service.is_none()
    };
    let at = FieldPath::new(
        "spec.strategy.canary.trafficRouting.istio",
        "/spec/strategy/canary/trafficRouting/istio",
    );
    bad.then(|| FieldError::internal(&at, VIRTUAL_SERVICES_CONFIG))
}

/// The error the controller would put in the `InvalidSpec` condition, as far as it can be
/// known without the cluster: the first spec error, else the VirtualService configuration
/// error. Checks of referenced objects (Services, VirtualService routes) belong to the caller.
pub fn first_validation_error(spec_json: &Value, spec: &RolloutSpec) -> Option<FieldError> {
    validate_rollout(spec_json, spec)
        .into_iter()
        .next()
        .or_else(|| validate_virtual_services_config(spec))
}

// ---------------------------------------------------------------------------------------------
// Strategy

fn validate_strategy(
    errs: &mut Vec<FieldError>,
    spec_json: &Value,
    spec: &RolloutSpec,
    revision_history_limit: i32,
) {
    let strategy = FieldPath::new("spec.strategy", "/spec/strategy");
    // `fldPath.Child("strategy")` on a path that already is spec.strategy.
    let doubled = strategy.child("strategy").pointing_at(&strategy);
    match (&spec.strategy.blue_green, &spec.strategy.canary) {
        (None, None) => errs.push(FieldError::required(
            &doubled,
            missing_field_message(".spec.strategy.canary or .spec.strategy.blueGreen"),
        )),
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            &doubled,
            crate::go::quote("blueGreen: true canary: true"),
            INVALID_STRATEGY,
        )),
        (Some(bg), None) => validate_blue_green(errs, bg, revision_history_limit),
        (None, Some(canary)) => {
            let canary_json = spec_json
                .get("strategy")
                .and_then(|s| s.get("canary"))
                .unwrap_or(&Value::Null);
            validate_canary(errs, canary, canary_json);
        }
    }
}

fn validate_blue_green(errs: &mut Vec<FieldError>, bg: &Value, revision_history_limit: i32) {
    // Paths start at spec.strategy here too.
    let base = FieldPath::new("spec.strategy", "/spec/strategy/blueGreen");
    let active = str_field(bg, "activeService");
    if active == str_field(bg, "previewService") {
        errs.push(FieldError::invalid(
            &base.child("activeService"),
            crate::go::quote(active),
            DUPLICATED_SERVICES_BLUE_GREEN,
        ));
    }
    if let Some(limit) = field(bg, "scaleDownDelayRevisionLimit").and_then(Value::as_i64) {
        if i64::from(revision_history_limit) < limit {
            errs.push(FieldError::invalid(
                &base.child("scaleDownDelayRevisionLimit"),
                limit.to_string(),
                SCALE_DOWN_LIMIT_LARGER_THAN_REVISION_LIMIT,
            ));
        }
    }
    validate_anti_affinity(errs, field(bg, "antiAffinity"), &base.child("antiAffinity"));
}

/// `requireCanaryStableServices`.
fn require_canary_stable_services(c: &CanaryStrategy) -> bool {
    let Some(tr) = &c.traffic_routing else {
        return false;
    };
    let no_ping_pong = c.ping_pong.is_none();
    (tr.alb.is_some() && no_ping_pong)
        || tr
            .istio
            .as_ref()
            .is_some_and(|i| i.destination_rule.is_none() && no_ping_pong)
        || tr.smi.is_some()
        || tr.apisix.is_some()
        || tr.ambassador.is_some()
        || tr.nginx.is_some()
        || tr.appmesh.is_some()
        || tr.traefik.is_some()
}

/// `len(trafficRouting.Plugins)` (a map in Go).
fn plugin_count(tr: &TrafficRouting) -> usize {
    match &tr.plugins {
        Some(Value::Object(m)) => m.len(),
        _ => 0,
    }
}

// Long: Argo's `ValidateRolloutStrategyCanary`, check by check in its order, so that the first
// error reported is Argo's.
/// `ValidateRolloutStrategyCanary`.
fn validate_canary(errs: &mut Vec<FieldError>, c: &CanaryStrategy, canary_json: &Value) {
    // Upstream passes spec.strategy, not spec.strategy.canary, as the parent path.
    let base = FieldPath::new("spec.strategy", "/spec/strategy/canary");
    let tr = c.traffic_routing.as_ref();

    invalid_max_surge_max_unavailable(errs, c, &base.child("maxSurge"));
    if !c.canary_service.is_empty()
        && !c.stable_service.is_empty()
        && c.canary_service == c.stable_service
    {
        errs.push(FieldError::invalid(
            &base.child("stableService"),
            crate::go::quote(&c.stable_service),
            DUPLICATED_SERVICES_CANARY,
        ));
    }
    if let Some(pp) = &c.ping_pong {
        if let Some(tr) = tr {
            if tr.alb.is_none() && tr.istio.is_none() && plugin_count(tr) == 0 {
                errs.push(FieldError::invalid(
                    &base.child("trafficRouting").child("alb"),
                    "null".to_string(),
                    PING_PONG_WITH_ROUTER_ONLY,
                ));
            }
        }
        let pp_path = base.child("pingPong");
        if pp.ping_service.is_empty() {
            errs.push(FieldError::invalid(
                &pp_path.child("pingService"),
                crate::go::quote(&pp.ping_service),
                INVALID_PING_PONG_PROVIDED,
            ));
        }
        if pp.pong_service.is_empty() {
            errs.push(FieldError::invalid(
                &pp_path.child("pongService"),
                crate::go::quote(&pp.pong_service),
                INVALID_PING_PONG_PROVIDED,
            ));
        }
        if pp.ping_service == pp.pong_service {
            errs.push(FieldError::invalid(
                &pp_path.child("pingService"),
                crate::go::quote(&pp.ping_service),
                DUPLICATED_PING_PONG_SERVICES,
            ));
        }
        if let Some(alb) = tr.and_then(|t| t.alb.as_ref()) {
            let root_service = str_field(alb, "rootService");
            if root_service.is_empty() {
                errs.push(FieldError::invalid(
                    &base
                        .child("trafficRouting")
                        .child("alb")
                        .child("rootService"),
                    crate::go::quote(root_service),
                    MISSED_ALB_ROOT_SERVICE,
                ));
            }
        }
    }
    if require_canary_stable_services(c) {
        if c.stable_service.is_empty() {
            errs.push(FieldError::invalid(
                &base.child("stableService"),
                crate::go::quote(&c.stable_service),
                INVALID_TRAFFIC_ROUTING,
            ));
        }
        if c.canary_service.is_empty() {
            errs.push(FieldError::invalid(
                &base.child("canaryService"),
                crate::go::quote(&c.canary_service),
                INVALID_TRAFFIC_ROUTING,
            ));
        }
    }

    match tr {
        None => {
            if let Some(delay) = c.scale_down_delay_seconds {
                errs.push(FieldError::invalid(
                    &base.child("scaleDownDelaySeconds"),
                    delay.to_string(),
                    INVALID_CANARY_SCALE_DOWN_DELAY,
                ));
            }
            if c.dynamic_stable_scale {
                errs.push(FieldError::invalid(
                    &base.child("dynamicStableScale"),
                    "true".to_string(),
                    INVALID_CANARY_DYNAMIC_STABLE_SCALE,
                ));
            }
        }
        Some(tr) => {
            if c.scale_down_delay_seconds.is_some() && c.dynamic_stable_scale {
                errs.push(FieldError::invalid(
                    &base.child("dynamicStableScale"),
                    "true".to_string(),
                    INVALID_CANARY_DYNAMIC_STABLE_SCALE_WITH_SCALE_DOWN_DELAY,
                ));
            }
            if let Some(max) = tr.max_traffic_weight {
                if tr.nginx.is_none() && plugin_count(tr) == 0 {
                    errs.push(FieldError::invalid(
                        &base.child("trafficRouting").child("maxTrafficWeight"),
                        max.to_string(),
                        INVALID_CANARY_MAX_WEIGHT_ONLY_NGINX_AND_PLUGINS,
                    ));
                }
            }
        }
    }

    // `weightutil.MaxTrafficWeight`.
    let max_weight = tr.and_then(|t| t.max_traffic_weight).unwrap_or(100);
    let steps_json = canary_json.get("steps").and_then(Value::as_array);
    for (i, step) in c.steps.iter().enumerate() {
        let step_json = steps_json.and_then(|s| s.get(i)).unwrap_or(&Value::Null);
        validate_step(errs, c, step, step_json, i, max_weight, &base);
    }

    validate_anti_affinity(
        errs,
        field(canary_json, "antiAffinity"),
        &base.child("antiAffinity"),
    );
}

// Long: the per-step half of `ValidateRolloutStrategyCanary`, each step kind's checks in upstream's
// order.
fn validate_step(
    errs: &mut Vec<FieldError>,
    c: &CanaryStrategy,
    step: &CanaryStep,
    step_json: &Value,
    i: usize,
    max_weight: i32,
    base: &FieldPath,
) {
    let tr = c.traffic_routing.as_ref();
    let step_path = base.child("steps").index(i);
    has_multiple_steps_type(errs, step, &step_path);
    if step.experiment.is_none()
        && step.pause.is_none()
        && step.set_weight.is_none()
        && step.analysis.is_none()
        && step.set_canary_scale.is_none()
        && step.set_header_route.is_none()
        && step.set_mirror_route.is_none()
        && step.plugin.is_none()
    {
        // Every flag is `== nil`, so all print true.
        let value = "step.Experiment: true step.Pause: true step.SetWeight: true step.Analysis: true step.SetCanaryScale: true step.SetHeaderRoute: true step.SetMirrorRoute: true step.Plugin: true";
        errs.push(FieldError::invalid(
            &step_path,
            crate::go::quote(value),
            INVALID_STEP,
        ));
    }

    if let Some(w) = step.set_weight {
        if w < 0 || w > max_weight {
            errs.push(FieldError::invalid(
                &step_path.child("setWeight"),
                w.to_string(),
                invalid_set_weight_message(max_weight),
            ));
        }
    }
    if let Some(pause) = &step.pause {
        let secs = duration::pause_seconds(pause.duration.as_ref());
        if secs < 0 {
            errs.push(FieldError::invalid(
                &step_path.child("pause").child("duration"),
                secs.to_string(),
                INVALID_DURATION,
            ));
        }
    }
    if step.set_canary_scale.is_some() && tr.is_none() {
        errs.push(FieldError::required(
            &base.child("trafficRouting"),
            INVALID_SET_CANARY_SCALE_TRAFFIC_POLICY,
        ));
    }

    if let Some(h) = &step.set_header_route {
        let at = step_path.child("setHeaderRoute");
        let supported = tr.filter(|t| {
            t.istio.is_some() || t.alb.is_some() || t.apisix.is_some() || plugin_count(t) > 0
        });
        match supported {
            None => errs.push(FieldError::invalid(
                &at,
                crate::go::json(&set_header_route_json(h)),
                INVALID_SET_HEADER_ROUTE_TRAFFIC_POLICY,
            )),
            Some(t) => {
                for (j, m) in h.matches.iter().flatten().enumerate() {
                    let match_path = at.child("match").index(j);
                    if t.alb.is_some() {
                        has_alb_invalid_values(errs, m.header_value.as_ref(), &match_path);
                    } else {
                        has_multiple_match_values(errs, m.header_value.as_ref(), &match_path);
                    }
                }
            }
        }
    }

    if let Some(mirror) = &step.set_mirror_route {
        let at = step_path.child("setMirrorRoute");
        if !tr.is_some_and(|t| t.istio.is_some() || plugin_count(t) > 0) {
            errs.push(FieldError::invalid(
                &at,
                crate::go::json(&set_mirror_route_json(mirror)),
                INVALID_SET_MIRROR_ROUTE_TRAFFIC_POLICY,
            ));
        }
        for (j, m) in mirror.matches.iter().flatten().enumerate() {
            let match_path = at.child("match").index(j);
            // Upstream checks method, path, then method again; headers are never checked.
            if let Some(method) = &m.method {
                has_multiple_match_values(errs, Some(method), &match_path);
            }
            if let Some(path) = &m.path {
                has_multiple_match_values(errs, Some(path), &match_path);
            }
            if let Some(method) = &m.method {
                has_multiple_match_values(errs, Some(method), &match_path);
            }
        }
    }

    if let Some(tr) = tr {
        if (step.set_header_route.is_some() || step.set_mirror_route.is_some())
            && tr.managed_routes.is_none()
        {
            errs.push(FieldError::required(
                &base.child("trafficRouting").child("managedRoutes"),
                missing_field_message("spec.strategy.canary.trafficRouting.managedRoutes"),
            ));
        }
        if let Some(managed) = &tr.managed_routes {
            if let Some(h) = &step.set_header_route {
                route_in_managed_routes(errs, &step_path.child("setHeaderRoute"), &h.name, managed);
            }
            if let Some(m) = &step.set_mirror_route {
                route_in_managed_routes(errs, &step_path.child("setMirrorRoute"), &m.name, managed);
            }
        }
    }

    validate_experiment_and_analysis(errs, tr, step_json, &step_path);
}

fn route_in_managed_routes(
    errs: &mut Vec<FieldError>,
    at: &FieldPath,
    name: &str,
    managed: &[ManagedRoute],
) {
    if !managed.iter().any(|r| r.name == name) {
        errs.push(FieldError::invalid(
            at,
            crate::go::quote(name),
            STEP_ROUTE_NOT_IN_MANAGED_ROUTES,
        ));
    }
}

/// Experiment template weights and analysis-argument field references of one step.
fn validate_experiment_and_analysis(
    errs: &mut Vec<FieldError>,
    tr: Option<&TrafficRouting>,
    step_json: &Value,
    step_path: &FieldPath,
) {
    let mut args: Vec<&Value> = Vec::new();
    if let Some(exp) = field(step_json, "experiment") {
        let templates = field(exp, "templates").and_then(Value::as_array);
        for (j, t) in templates.into_iter().flatten().enumerate() {
            let Some(weight) = field(t, "weight") else {
                continue;
            };
            let at = step_path
                .child("experiment")
                .child("templates")
                .index(j)
                .child("weight");
            let detail = match tr {
                None => Some(INVALID_EXPERIMENT_WEIGHT_WITHOUT_TRAFFIC_ROUTING),
                Some(t)
                    if t.alb.is_none()
                        && t.smi.is_none()
                        && t.istio.is_none()
                        && plugin_count(t) == 0 =>
                {
                    Some(INVALID_EXPERIMENT_WEIGHT_ROUTER)
                }
                Some(_) => None,
            };
            if let Some(detail) = detail {
                errs.push(FieldError::invalid(&at, weight.to_string(), detail));
            }
        }
        let analyses = field(exp, "analyses").and_then(Value::as_array);
        for a in analyses.into_iter().flatten() {
            args.extend(
                field(a, "args")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten(),
            );
        }
    }
    if let Some(analysis) = field(step_json, "analysis") {
        args.extend(
            field(analysis, "args")
                .and_then(Value::as_array)
                .into_iter()
                .flatten(),
        );
    }

    // No such field exists; point at the step itself.
    let at = step_path.child("analyses").pointing_at(step_path);
    let rendered = || {
        crate::go::json(&Value::Array(
            args.iter().map(|a| analysis_arg_json(a)).collect(),
        ))
    };
    for arg in &args {
        let Some(path) = field(arg, "valueFrom")
            .and_then(|v| field(v, "fieldRef"))
            .map(|f| str_field(f, "fieldPath"))
        else {
            continue;
        };
        if path.starts_with("metadata") && !field_path_supported(path) {
            errs.push(FieldError::invalid(&at, rendered(), INVALID_ANALYSIS_ARGS));
        }
    }
}

/// Whether `fieldpath.ExtractFieldPathAsString` accepts this path on a Rollout.
fn field_path_supported(path: &str) -> bool {
    if let Some(inner) = path.strip_suffix("']") {
        if let Some((head, key)) = inner.split_once("['") {
            if !head.is_empty() {
                return match head {
                    "metadata.annotations" => is_qualified_name(&key.to_lowercase()),
                    "metadata.labels" => is_qualified_name(key),
                    _ => false,
                };
            }
        }
    }
    matches!(
        path,
        "metadata.annotations"
            | "metadata.labels"
            | "metadata.name"
            | "metadata.namespace"
            | "metadata.uid"
    )
}

/// `hasMultipleStepsType`: only these four count.
fn has_multiple_steps_type(errs: &mut Vec<FieldError>, s: &CanaryStep, at: &FieldPath) {
    let set = [
        s.set_weight.is_some(),
        s.pause.is_some(),
        s.experiment.is_some(),
        s.analysis.is_some(),
    ];
    if set.iter().filter(|b| **b).count() > 1 {
        let value = format!(
            "step.Experiment: {} step.Pause: {} step.SetWeight: {} step.Analysis: {}",
            s.experiment.is_some(),
            s.pause.is_some(),
            s.set_weight.is_some(),
            s.analysis.is_some()
        );
        errs.push(FieldError::invalid(
            at,
            crate::go::quote(&value),
            INVALID_STEP,
        ));
    }
}

fn non_empty(s: &Option<String>) -> bool {
    s.as_deref().is_some_and(|v| !v.is_empty())
}

/// `hasMultipleMatchValues`.
fn has_multiple_match_values(errs: &mut Vec<FieldError>, m: Option<&StringMatch>, at: &FieldPath) {
    let Some(m) = m else {
        errs.push(FieldError::invalid(
            at,
            "null".to_string(),
            INVALID_STRING_MATCH_MISSED_VALUE,
        ));
        return;
    };
    let count = [
        non_empty(&m.exact),
        non_empty(&m.regex),
        non_empty(&m.prefix),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    let value = crate::go::json(&m.to_go_json());
    if count > 1 {
        errs.push(FieldError::invalid(
            at,
            value,
            INVALID_STRING_MATCH_MULTIPLE_VALUE,
        ));
    } else if count == 0 {
        errs.push(FieldError::invalid(
            at,
            value,
            INVALID_STRING_MATCH_MISSED_VALUE,
        ));
    }
}

/// `hasALBInvalidValues`.
fn has_alb_invalid_values(errs: &mut Vec<FieldError>, m: Option<&StringMatch>, at: &FieldPath) {
    match m {
        None => errs.push(FieldError::invalid(
            at,
            "null".to_string(),
            INVALID_STRING_MATCH_MISSED_VALUE,
        )),
        Some(m) if !non_empty(&m.exact) || non_empty(&m.regex) || non_empty(&m.prefix) => errs
            .push(FieldError::invalid(
                at,
                crate::go::json(&m.to_go_json()),
                INVALID_SET_HEADER_ROUTE_ALB_VALUE,
            )),
        Some(_) => {}
    }
}

/// `ValidateRolloutStrategyAntiAffinity`.
fn validate_anti_affinity(errs: &mut Vec<FieldError>, aa: Option<&Value>, at: &FieldPath) {
    let Some(aa) = aa else {
        return;
    };
    let preferred = field(aa, "preferredDuringSchedulingIgnoredDuringExecution");
    let required = field(aa, "requiredDuringSchedulingIgnoredDuringExecution");
    if preferred.is_some() == required.is_some() {
        let value = format!(
            "antiAffinity.PreferredDuringSchedulingIgnoredDuringExecution: {} antiAffinity.RequiredDuringSchedulingIgnoredDuringExecution: {}",
            preferred.is_some(),
            required.is_some()
        );
        errs.push(FieldError::invalid(
            at,
            crate::go::quote(&value),
            INVALID_ANTI_AFFINITY_STRATEGY,
        ));
    }
    if let Some(p) = preferred {
        let weight = field(p, "weight").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=100).contains(&weight) {
            let real = FieldPath::new(
                "",
                &format!(
                    "{}/preferredDuringSchedulingIgnoredDuringExecution",
                    at.pointer
                ),
            );
            errs.push(FieldError::invalid(
                &at.child("weight").pointing_at(&real.child("weight")),
                weight.to_string(),
                INVALID_ANTI_AFFINITY_WEIGHT,
            ));
        }
    }
}

/// `invalidMaxSurgeMaxUnavailable`.
fn invalid_max_surge_max_unavailable(
    errs: &mut Vec<FieldError>,
    c: &CanaryStrategy,
    at: &FieldPath,
) {
    let default = IntOrString::String("25".to_string());
    let surge = c.max_surge.as_ref().unwrap_or(&default);
    let unavailable = c.max_unavailable.as_ref().unwrap_or(&default);
    if int_or_percent_value(surge) == 0 && int_or_percent_value(unavailable) == 0 {
        // Both zero means maxSurge was set explicitly (the default is 25), so upstream's
        // dereference of it cannot fail.
        let value = match surge {
            IntOrString::Int(i) => i.to_string(),
            IntOrString::String(s) => crate::go::json(&Value::String(s.clone())),
        };
        errs.push(FieldError::invalid(
            at,
            value,
            INVALID_MAX_SURGE_MAX_UNAVAILABLE,
        ));
    }
}

/// `getIntOrPercentValue`: `"N%"` → N, any other string → `strconv.Atoi` (0 on junk).
fn int_or_percent_value(v: &IntOrString) -> i64 {
    match v {
        IntOrString::Int(i) => *i,
        IntOrString::String(s) => match s.strip_suffix('%') {
            Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                crate::go::atoi(digits).unwrap_or_else(|e| e.value())
            }
            _ => crate::go::atoi(s).unwrap_or_else(|e| e.value()),
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Selector and pod template (apimachinery metav1 + k8s apps/core validation, subset)

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Debug)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

/// `labels.Selector` as built by `LabelSelectorAsSelector`.
#[derive(Debug)]
enum Selector {
    /// nil selector: matches nothing, and is not "empty".
    Nothing,
    /// `{}`: matches everything, and is "empty".
    Everything,
    Requirements(Vec<Requirement>),
}

impl Selector {
    fn is_empty(&self) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::Everything => true,
            Selector::Requirements(r) => r.is_empty(),
        }
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::Everything => true,
            Selector::Requirements(reqs) => reqs.iter().all(|r| {
                let v = labels.get(&r.key);
                match r.op {
                    Op::In => v.is_some_and(|v| r.values.contains(v)),
                    Op::NotIn => v.is_none_or(|v| !r.values.contains(v)),
                    Op::Exists => v.is_some(),
                    Op::DoesNotExist => v.is_none(),
                }
            }),
        }
    }
}

/// `(key, operator, values)` of one `matchExpressions` entry.
fn expression_parts(e: &Value) -> (&str, &str, Vec<String>) {
    let values = field(e, "values")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    (str_field(e, "key"), str_field(e, "operator"), values)
}

/// `metav1.LabelSelectorAsSelector`; `Err` carries no text because Argo replaces it with
/// "invalid label selector".
fn label_selector_as_selector(sel: Option<&LabelSelector>) -> Result<Selector, ()> {
    let Some(sel) = sel else {
        return Ok(Selector::Nothing);
    };
    if sel.match_labels.len() + sel.match_expressions.len() == 0 {
        return Ok(Selector::Everything);
    }
    let mut reqs = Vec::new();
    for (k, v) in &sel.match_labels {
        if !is_qualified_name(k) || !label_value_errors(v).is_empty() {
            return Err(());
        }
        reqs.push(Requirement {
            key: k.clone(),
            op: Op::In,
            values: vec![v.clone()],
        });
    }
    for e in &sel.match_expressions {
        let (key, op, values) = expression_parts(e);
        let op = match op {
            "In" => Op::In,
            "NotIn" => Op::NotIn,
            "Exists" => Op::Exists,
            "DoesNotExist" => Op::DoesNotExist,
            _ => return Err(()),
        };
        let count_ok = match op {
            Op::In | Op::NotIn => !values.is_empty(),
            Op::Exists | Op::DoesNotExist => values.is_empty(),
        };
        if !is_qualified_name(key)
            || !count_ok
            || values.iter().any(|v| !label_value_errors(v).is_empty())
        {
            return Err(());
        }
        reqs.push(Requirement {
            key: key.to_string(),
            op,
            values,
        });
    }
    Ok(Selector::Requirements(reqs))
}

/// `unversionedvalidation.ValidateLabelSelector`.
fn validate_label_selector(errs: &mut Vec<FieldError>, sel: &LabelSelector, at: &FieldPath) {
    validate_labels(errs, &sel.match_labels, &at.child("matchLabels"));
    for (i, e) in sel.match_expressions.iter().enumerate() {
        let p = at.child("matchExpressions").index(i);
        let (key, op, values) = expression_parts(e);
        match op {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        &p.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        &p.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            _ => errs.push(FieldError::invalid(
                &p.child("operator"),
                crate::go::quote(op),
                "not a valid selector operator",
            )),
        }
        for msg in qualified_name_errors(key) {
            errs.push(FieldError::invalid(
                &p.child("key"),
                crate::go::quote(key),
                msg,
            ));
        }
        for (j, v) in values.iter().enumerate() {
            for msg in label_value_errors(v) {
                errs.push(FieldError::invalid(
                    &p.child("values").index(j),
                    crate::go::quote(v),
                    msg,
                ));
            }
        }
    }
}

/// `unversionedvalidation.ValidateLabels` (Go iterates the map randomly; this goes by key).
fn validate_labels(errs: &mut Vec<FieldError>, labels: &BTreeMap<String, String>, at: &FieldPath) {
    for (k, v) in labels {
        for msg in qualified_name_errors(k) {
            errs.push(FieldError::invalid(at, crate::go::quote(k), msg));
        }
        for msg in label_value_errors(v) {
            errs.push(FieldError::invalid(at, crate::go::quote(v), msg));
        }
    }
}

/// `RolloutSpec.EmptyTemplate()`: no template labels and no annotations.
fn empty_template(template: &Value) -> bool {
    let meta = field(template, "metadata");
    let non_empty = |key| {
        meta.and_then(|m| field(m, key))
            .and_then(Value::as_object)
            .is_some_and(|o| !o.is_empty())
    };
    !non_empty("labels") && !non_empty("annotations")
}

/// A string map read leniently (non-string values are skipped).
fn string_map(v: Option<&Value>) -> Option<BTreeMap<String, String>> {
    v.and_then(Value::as_object).map(|o| {
        o.iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
            .collect()
    })
}

/// Subset of `ValidatePodTemplateSpecForReplicaSet` (k8s `pkg/apis/apps/validation`), run on
/// the template after `SetObjectDefaults_PodTemplate` (so an unset restartPolicy is Always).
fn validate_pod_template_for_replica_set(
    errs: &mut Vec<FieldError>,
    template: &Value,
    selector: &Selector,
    at: &FieldPath,
) {
    let labels_json = field(template, "metadata").and_then(|m| field(m, "labels"));
    let labels = string_map(labels_json);
    if !selector.is_empty() && !selector.matches(&labels.clone().unwrap_or_default()) {
        let value = labels.as_ref().map_or(Value::Null, |l| {
            Value::Object(
                l.iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            )
        });
        errs.push(FieldError::invalid(
            &at.child("metadata").child("labels"),
            crate::go::json(&value),
            "`selector` does not match template `labels`",
        ));
    }

    // ValidatePodTemplateSpec: labels are reported at template.labels.
    if let Some(labels) = &labels {
        let p = at
            .child("labels")
            .pointing_at(&at.child("metadata").child("labels"));
        validate_labels(errs, labels, &p);
    }
    let spec = field(template, "spec");
    let spec_path = at.child("spec");
    let containers_path = spec_path.child("containers");
    let containers = spec
        .and_then(|s| field(s, "containers"))
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty());
    match containers {
        None => errs.push(FieldError::required(&containers_path, "")),
        Some(containers) => {
            let mut names = BTreeSet::new();
            for (i, c) in containers.iter().enumerate() {
                let p = containers_path.index(i);
                let name = str_field(c, "name");
                if name.is_empty() {
                    errs.push(FieldError::required(&p.child("name"), ""));
                } else {
                    for msg in dns1123_label_errors(name) {
                        errs.push(FieldError::invalid(
                            &p.child("name"),
                            crate::go::quote(name),
                            msg,
                        ));
                    }
                }
                if str_field(c, "image").is_empty() {
                    errs.push(FieldError::required(&p.child("image"), ""));
                }
                if !names.insert(name) {
                    errs.push(FieldError::duplicate(
                        &p.child("name"),
                        crate::go::quote(name),
                    ));
                }
            }
        }
    }

    let restart = spec
        .and_then(|s| field(s, "restartPolicy"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("Always");
    if restart != "Always" {
        errs.push(FieldError::not_supported(
            &spec_path.child("restartPolicy"),
            crate::go::quote(restart),
            &["Always"],
        ));
    }
    if spec
        .and_then(|s| field(s, "activeDeadlineSeconds"))
        .is_some()
    {
        errs.push(FieldError::forbidden(
            &spec_path.child("activeDeadlineSeconds"),
            "activeDeadlineSeconds in ReplicaSet is not Supported",
        ));
    }
}

/// `nonnegative`: `apivalidation.ValidateNonnegativeField`.
fn nonnegative(errs: &mut Vec<FieldError>, value: i64, at: &FieldPath) {
    if value < 0 {
        errs.push(FieldError::invalid(at, value.to_string(), IS_NEGATIVE));
    }
}

// ---------------------------------------------------------------------------------------------
// Go renderings of bad values

/// A non-null member of a JSON object.
fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|v| !v.is_null())
}

/// A string member, "" when absent (Go's zero value).
fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `SetHeaderRoute` as Go marshals it.
fn set_header_route_json(h: &SetHeaderRoute) -> Value {
    let mut o = Map::new();
    if !h.name.is_empty() {
        o.insert("name".into(), Value::String(h.name.clone()));
    }
    if let Some(matches) = h.matches.as_ref().filter(|m| !m.is_empty()) {
        let matches = matches
            .iter()
            .map(|m| {
                let mut mo = Map::new();
                mo.insert("headerName".into(), Value::String(m.header_name.clone()));
                mo.insert(
                    "headerValue".into(),
                    m.header_value
                        .as_ref()
                        .map_or(Value::Null, StringMatch::to_go_json),
                );
                Value::Object(mo)
            })
            .collect();
        o.insert("match".into(), Value::Array(matches));
    }
    Value::Object(o)
}

/// `SetMirrorRoute` as Go marshals it.
fn set_mirror_route_json(m: &SetMirrorRoute) -> Value {
    let mut o = Map::new();
    o.insert("name".into(), Value::String(m.name.clone()));
    if let Some(matches) = m.matches.as_ref().filter(|m| !m.is_empty()) {
        let matches = matches
            .iter()
            .map(|r| {
                let mut ro = Map::new();
                if let Some(method) = &r.method {
                    ro.insert("method".into(), method.to_go_json());
                }
                if let Some(path) = &r.path {
                    ro.insert("path".into(), path.to_go_json());
                }
                if let Some(headers) = r.headers.as_ref().filter(|h| !h.is_empty()) {
                    let h = headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.to_go_json()))
                        .collect();
                    ro.insert("headers".into(), Value::Object(h));
                }
                Value::Object(ro)
            })
            .collect();
        o.insert("match".into(), Value::Array(matches));
    }
    if let Some(p) = m.percentage {
        o.insert("percentage".into(), Value::from(p));
    }
    Value::Object(o)
}

/// `metav1.LabelSelector` as Go marshals it (sorted matchLabels, omitempty everywhere).
fn label_selector_json(s: &LabelSelector) -> Value {
    let mut o = Map::new();
    if !s.match_labels.is_empty() {
        let labels = s
            .match_labels
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        o.insert("matchLabels".into(), Value::Object(labels));
    }
    if !s.match_expressions.is_empty() {
        let exprs = s
            .match_expressions
            .iter()
            .map(|e| {
                let (key, op, values) = expression_parts(e);
                let mut eo = Map::new();
                eo.insert("key".into(), Value::String(key.to_string()));
                eo.insert("operator".into(), Value::String(op.to_string()));
                if !values.is_empty() {
                    eo.insert(
                        "values".into(),
                        Value::Array(values.into_iter().map(Value::String).collect()),
                    );
                }
                Value::Object(eo)
            })
            .collect();
        o.insert("matchExpressions".into(), Value::Array(exprs));
    }
    Value::Object(o)
}

/// `AnalysisRunArgument` as Go marshals it.
fn analysis_arg_json(arg: &Value) -> Value {
    let mut o = Map::new();
    o.insert(
        "name".into(),
        Value::String(str_field(arg, "name").to_string()),
    );
    let value = str_field(arg, "value");
    if !value.is_empty() {
        o.insert("value".into(), Value::String(value.to_string()));
    }
    if let Some(from) = field(arg, "valueFrom") {
        let mut fo = Map::new();
        if let Some(h) = field(from, "podTemplateHashValue") {
            fo.insert(
                "podTemplateHashValue".into(),
                Value::String(h.as_str().unwrap_or("").to_string()),
            );
        }
        if let Some(r) = field(from, "fieldRef") {
            let mut ro = Map::new();
            ro.insert(
                "fieldPath".into(),
                Value::String(str_field(r, "fieldPath").to_string()),
            );
            fo.insert("fieldRef".into(), Value::Object(ro));
        }
        o.insert("valueFrom".into(), Value::Object(fo));
    }
    Value::Object(o)
}

// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests;
