//! The Kubernetes and Argo Rollouts vocabulary every layer shares: label and annotation keys
//! (as Argo spells them in `pkg/apis/rollouts/v1alpha1`), pod readiness, and the set weight
//! a canary step index stands for. Defined once here so that the data plane and the reports
//! read objects without depending on the controller.

use serde_json::Value;

use super::Object;

/// Label that ties Pods and ReplicaSets to a pod template (`DefaultRolloutUniqueLabelKey`).
pub const HASH_LABEL: &str = "rollouts-pod-template-hash";
/// Annotation on Services and DestinationRules that a rollout manages
/// (`ManagedByRolloutsKey`).
pub const MANAGED_BY: &str = "argo-rollouts.argoproj.io/managed-by-rollouts";
/// A ReplicaSet's revision (`RevisionAnnotation`).
pub const REVISION: &str = "rollout.argoproj.io/revision";
/// When an old ReplicaSet is scaled down (`DefaultReplicaSetScaleDownDeadlineAnnotationKey`).
pub const SCALE_DOWN_DEADLINE: &str = "scale-down-deadline";

/// Whether the Pod's `Ready` condition is true.
pub fn pod_is_ready(pod: &Object) -> bool {
    ready_condition(pod.status()).is_some()
}

/// A Pod status's `Ready` condition when it is `True`.
pub(crate) fn ready_condition(status: &Value) -> Option<&Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Ready and not being deleted (no `deletionTimestamp`): an endpoint.
pub(crate) fn pod_is_serving(pod: &Object) -> bool {
    pod_is_ready(pod)
        && pod
            .metadata()
            .and_then(|m| m.get("deletionTimestamp"))
            .is_none_or(Value::is_null)
}

/// The latest `setWeight` among the steps up to and including `index` (the core of Argo's
/// `GetCurrentSetWeight`), else 0; `weight` reads a step's setWeight.
pub(crate) fn latest_set_weight<T>(
    steps: &[T],
    index: usize,
    weight: impl Fn(&T) -> Option<i32>,
) -> i32 {
    steps
        .iter()
        .take(index.saturating_add(1))
        .rev()
        .find_map(weight)
        .unwrap_or(0)
}

/// `argoproj/rollouts-demo:yellow` → `yellow`; `registry:5000/app` → `latest`;
/// `app@sha256:…` → the digest.
pub fn image_version(image: &str) -> &str {
    if let Some((_, digest)) = image.split_once('@') {
        return digest;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) if !tag.is_empty() => tag,
        _ => "latest",
    }
}
