//! Typed view of an Argo Rollout (argoproj.io/v1alpha1): the fields the canary + Istio path
//! interprets, named as in `pkg/apis/rollouts/v1alpha1/types.go`.
//!
//! Spec views are read-only: the stored object stays the user's JSON. The status is owned by
//! the controller and is written back from [`RolloutStatus`].

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// `int` or `string`, as Kubernetes' `intstr.IntOrString`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IntOrString {
    Int(i64),
    String(String),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    pub replicas: Option<i32>,
    #[serde(default)]
    pub paused: bool,
    #[serde(default)]
    pub template: Value,
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub min_ready_seconds: i32,
    #[serde(default)]
    pub strategy: Strategy,
    pub revision_history_limit: Option<i32>,
    pub progress_deadline_seconds: Option<i32>,
    #[serde(default)]
    pub progress_deadline_abort: bool,
    /// `kubectl argo rollouts restart`: pods created before this instant are restarted.
    pub restart_at: Option<String>,
}

impl RolloutSpec {
    /// `spec.replicas`, nil → 1.
    pub(crate) fn desired_replicas(&self) -> i32 {
        self.replicas.unwrap_or(1)
    }

    pub fn canary(&self) -> Option<&CanaryStrategy> {
        self.strategy.canary.as_ref()
    }

    /// Whether the rollout plays the blue-green strategy: `blueGreen` given and `canary` not
    /// (with both, Argo refuses the spec and canarysim plays the canary).
    pub fn is_blue_green(&self) -> bool {
        self.canary().is_none() && self.strategy.blue_green.is_some()
    }

    /// `spec.strategy.blueGreen`, typed; an error when a field has the wrong type.
    pub fn blue_green(&self) -> Option<Result<BlueGreenStrategy, String>> {
        let raw = self.strategy.blue_green.as_ref()?;
        Some(serde_json::from_value(raw.clone()).map_err(|e| e.to_string()))
    }
}

/// `spec.strategy.blueGreen`: two Services, the active one switched to the new ReplicaSet at
/// promotion (Argo's `BlueGreenStrategy`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlueGreenStrategy {
    #[serde(default)]
    pub active_service: String,
    #[serde(default)]
    pub preview_service: String,
    /// nil counts as true.
    pub auto_promotion_enabled: Option<bool>,
    #[serde(default)]
    pub auto_promotion_seconds: i32,
    pub preview_replica_count: Option<i32>,
    pub scale_down_delay_seconds: Option<i32>,
    pub scale_down_delay_revision_limit: Option<i32>,
    pub abort_scale_down_delay_seconds: Option<i32>,
    pub pre_promotion_analysis: Option<Value>,
    pub post_promotion_analysis: Option<Value>,
}

impl BlueGreenStrategy {
    /// Argo's `needsBlueGreenControllerPause`: the controller pauses before the switch when
    /// auto-promotion is off, or delayed.
    pub fn controller_pauses(&self) -> bool {
        self.auto_promotion_enabled == Some(false) || self.auto_promotion_seconds > 0
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Strategy {
    pub canary: Option<CanaryStrategy>,
    pub blue_green: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStrategy {
    #[serde(default)]
    pub canary_service: String,
    #[serde(default)]
    pub stable_service: String,
    pub ping_pong: Option<PingPong>,
    #[serde(default)]
    pub steps: Vec<CanaryStep>,
    pub max_surge: Option<IntOrString>,
    pub max_unavailable: Option<IntOrString>,
    #[serde(default)]
    pub dynamic_stable_scale: bool,
    pub abort_scale_down_delay_seconds: Option<i32>,
    pub scale_down_delay_seconds: Option<i32>,
    pub scale_down_delay_revision_limit: Option<i32>,
    pub min_pods_per_replica_set: Option<i32>,
    pub replica_progress_threshold: Option<Value>,
    pub traffic_routing: Option<TrafficRouting>,
    pub analysis: Option<Value>,
    pub canary_metadata: Option<PodTemplateMetadata>,
    pub stable_metadata: Option<PodTemplateMetadata>,
}

impl CanaryStrategy {
    /// `weightutil.MaxTrafficWeight`: what a weight is one of (100 unless the traffic
    /// routing's `maxTrafficWeight` says otherwise), and the weight of all the traffic.
    pub fn max_traffic_weight(&self) -> i32 {
        self.traffic_routing
            .as_ref()
            .and_then(|t| t.max_traffic_weight)
            .unwrap_or(100)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PingPong {
    #[serde(default)]
    pub ping_service: String,
    #[serde(default)]
    pub pong_service: String,
}

/// One canary step. Exactly one field should be set (validation checks that).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStep {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_weight: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause: Option<RolloutPause>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiment: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_canary_scale: Option<SetCanaryScale>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_header_route: Option<SetHeaderRoute>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_mirror_route: Option<SetMirrorRoute>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<Value>,
}

impl CanaryStep {
    /// Short description used in events and the text report (`setWeight: 20`, `pause: 1m`).
    pub fn describe(&self) -> String {
        if let Some(w) = self.set_weight {
            format!("setWeight: {w}")
        } else if let Some(p) = &self.pause {
            match &p.duration {
                None => "pause: {}".to_string(),
                Some(IntOrString::Int(s)) => format!("pause: {s}s"),
                Some(IntOrString::String(s)) => format!("pause: {s}"),
            }
        } else if let Some(s) = &self.set_canary_scale {
            if let Some(r) = s.replicas {
                format!("setCanaryScale: replicas {r}")
            } else if let Some(w) = s.weight {
                format!("setCanaryScale: weight {w}")
            } else {
                "setCanaryScale: matchTrafficWeight".to_string()
            }
        } else if let Some(h) = &self.set_header_route {
            format!("setHeaderRoute: {}", h.name)
        } else if let Some(m) = &self.set_mirror_route {
            format!("setMirrorRoute: {}", m.name)
        } else if self.experiment.is_some() {
            "experiment".to_string()
        } else if self.analysis.is_some() {
            "analysis".to_string()
        } else if self.plugin.is_some() {
            "plugin".to_string()
        } else {
            "empty step".to_string()
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPause {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<IntOrString>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SetCanaryScale {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub match_traffic_weight: bool,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SetHeaderRoute {
    #[serde(default)]
    pub name: String,
    /// Absent (or null): the step removes the route. Present, even empty: the step creates
    /// it (an empty list matches every request, as in Argo).
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<HeaderRoutingMatch>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HeaderRoutingMatch {
    #[serde(default)]
    pub header_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header_value: Option<StringMatch>,
}

/// One of exact / prefix / regex (validation enforces exactly one).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct StringMatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

impl StringMatch {
    /// As Go's `encoding/json` writes Argo's `StringMatch`: fields in the order exact,
    /// prefix, regex, empty ones omitted.
    pub(crate) fn to_go_json(&self) -> Value {
        let mut o = serde_json::Map::new();
        for (k, v) in [
            ("exact", &self.exact),
            ("prefix", &self.prefix),
            ("regex", &self.regex),
        ] {
            if let Some(s) = v.as_deref().filter(|s| !s.is_empty()) {
                o.insert(k.to_string(), Value::String(s.to_string()));
            }
        }
        Value::Object(o)
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SetMirrorRoute {
    #[serde(default)]
    pub name: String,
    /// Absent (or null): the step removes the route; present, even empty: creates it.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<RouteMatch>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage: Option<i32>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteMatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<StringMatch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<StringMatch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, StringMatch>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrafficRouting {
    pub max_traffic_weight: Option<i32>,
    pub managed_routes: Option<Vec<ManagedRoute>>,
    pub istio: Option<IstioTrafficRouting>,
    pub nginx: Option<NginxTrafficRouting>,
    pub alb: Option<Value>,
    pub smi: Option<Value>,
    pub ambassador: Option<Value>,
    pub appmesh: Option<Value>,
    pub traefik: Option<Value>,
    pub apisix: Option<Value>,
    pub plugins: Option<Value>,
}

impl TrafficRouting {
    /// Names in `managedRoutes`, in precedence order.
    pub(crate) fn managed_route_names(&self) -> Vec<String> {
        self.managed_routes
            .iter()
            .flatten()
            .map(|r| r.name.clone())
            .collect()
    }
}

/// `trafficRouting.nginx`: the Ingresses whose canary copies Argo writes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NginxTrafficRouting {
    #[serde(default)]
    pub stable_ingress: String,
    pub stable_ingresses: Option<Vec<String>>,
    #[serde(default)]
    pub annotation_prefix: String,
    #[serde(default)]
    pub additional_ingress_annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub canary_ingress_annotations: BTreeMap<String, String>,
}

impl NginxTrafficRouting {
    /// The stable Ingresses, as `SetWeight` visits them: `stableIngresses` when set, else
    /// `stableIngress`.
    pub fn stable_ingress_list(&self) -> Vec<&str> {
        match &self.stable_ingresses {
            Some(list) => list.iter().map(String::as_str).collect(),
            None => vec![self.stable_ingress.as_str()],
        }
    }

    /// The annotations' prefix (`annotationPrefix`, default ingress-nginx's).
    pub fn prefix(&self) -> &str {
        if self.annotation_prefix.is_empty() {
            crate::model::ingress::DEFAULT_ANNOTATION_PREFIX
        } else {
            &self.annotation_prefix
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ManagedRoute {
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IstioTrafficRouting {
    pub virtual_service: Option<IstioVirtualService>,
    pub virtual_services: Option<Vec<IstioVirtualService>>,
    pub destination_rule: Option<IstioDestinationRule>,
}

impl IstioTrafficRouting {
    /// `virtualService` or `virtualServices`, as one list (Argo's `MultipleVirtualServiceConfigured`).
    pub(crate) fn virtual_service_list(&self) -> Vec<&IstioVirtualService> {
        match (&self.virtual_service, &self.virtual_services) {
            (Some(vs), _) => vec![vs],
            (None, Some(list)) => list.iter().collect(),
            (None, None) => Vec::new(),
        }
    }

    /// The field path validation errors name.
    pub(crate) fn virtual_service_field(&self) -> &'static str {
        if self.virtual_services.is_some() && self.virtual_service.is_none() {
            "spec.strategy.canary.trafficRouting.istio.virtualServices.name"
        } else {
            "spec.strategy.canary.trafficRouting.istio.virtualService.name"
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IstioVirtualService {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub routes: Vec<String>,
    #[serde(default)]
    pub tls_routes: Vec<TlsRoute>,
    #[serde(default)]
    pub tcp_routes: Vec<TcpRoute>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsRoute {
    #[serde(default)]
    pub port: i64,
    #[serde(default)]
    pub sni_hosts: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TcpRoute {
    #[serde(default)]
    pub port: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IstioDestinationRule {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub canary_subset_name: String,
    #[serde(default)]
    pub stable_subset_name: String,
    #[serde(default)]
    pub additional_subset_names: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// Status (controller-owned, read and written whole).

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pause_conditions: Vec<PauseCondition>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub controller_pause: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aborted_at: Option<String>,
    /// The `spec.restartAt` whose restart has finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_pod_hash: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_step_hash: String,
    #[serde(default)]
    pub replicas: i32,
    #[serde(default)]
    pub updated_replicas: i32,
    #[serde(default)]
    pub ready_replicas: i32,
    #[serde(default)]
    pub available_replicas: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_step_index: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub observed_generation: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub canary: CanaryStatus,
    #[serde(default, skip_serializing_if = "BlueGreenStatus::is_empty")]
    pub blue_green: BlueGreenStatus,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stable_r_s: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub promote_full: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selector: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PauseCondition {
    pub reason: String,
    pub start_time: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub last_transition_time: String,
    #[serde(default)]
    pub last_update_time: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weights: Option<TrafficWeights>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stable_ping_pong: String,
    /// The AnalysisRun of the current `analysis` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step_analysis_run_status: Option<AnalysisRunRef>,
    /// The background AnalysisRun (`strategy.canary.analysis`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_background_analysis_run_status: Option<AnalysisRunRef>,
}

/// `status.blueGreen`: the pod-template-hash each Service selects, as last read, and the
/// promotion analyses' runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BlueGreenStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub active_selector: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub preview_selector: String,
    /// Past the pause with `previewReplicaCount`: the new ReplicaSet may scale to full size.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scale_up_preview_check_point: bool,
    /// The AnalysisRun of `prePromotionAnalysis` (kept after promotion, as Argo keeps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_promotion_analysis_run_status: Option<AnalysisRunRef>,
    /// The AnalysisRun of `postPromotionAnalysis`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_promotion_analysis_run_status: Option<AnalysisRunRef>,
}

impl BlueGreenStatus {
    pub fn is_empty(&self) -> bool {
        *self == BlueGreenStatus::default()
    }
}

/// `RolloutAnalysisRunStatus`: a run's name, phase and message as the rollout records them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AnalysisRunRef {
    pub name: String,
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrafficWeights {
    pub canary: WeightDestination,
    pub stable: WeightDestination,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional: Vec<WeightDestination>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WeightDestination {
    pub weight: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_template_hash: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn header_route_match_reads_the_match_key() {
        let step: CanaryStep = serde_json::from_value(json!({
            "setHeaderRoute": {"name": "h", "match": [{"headerName": "x", "headerValue": {"exact": "1"}}]}
        }))
        .unwrap();
        let h = step.set_header_route.unwrap();
        let m = h.matches.unwrap();
        assert_eq!(m[0].header_name, "x");
        assert_eq!(
            m[0].header_value.as_ref().unwrap().exact.as_deref(),
            Some("1")
        );
        // An absent match and an empty one differ: removal vs. a catch-all route.
        let absent: SetHeaderRoute = serde_json::from_value(json!({"name": "h"})).unwrap();
        let empty: SetHeaderRoute =
            serde_json::from_value(json!({"name": "h", "match": []})).unwrap();
        assert_eq!((absent.matches, empty.matches), (None, Some(vec![])));
    }

    #[test]
    fn stable_rs_is_spelled_as_argo_spells_it() {
        let st = RolloutStatus {
            stable_r_s: "abc".into(),
            ..Default::default()
        };
        let v = serde_json::to_value(&st).unwrap();
        assert_eq!(v["stableRS"], "abc");
    }
}

/// `PodTemplateMetadata`: what to put on a role's pods.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodTemplateMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}
