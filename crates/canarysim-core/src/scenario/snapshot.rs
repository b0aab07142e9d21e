//! `canarysim snapshot`: objects read from a cluster turned back into the manifests a user
//! would apply — what the API server and Argo Rollouts' controller wrote is taken out, so
//! that the simulated controller writes it again as the scenario replays — and, for a
//! Rollout in the middle of an update, the Rollout as it was before it (its stable
//! ReplicaSet's template), which the scenario deploys before applying the Rollout as it
//! stands. Pure: the cluster is read by the edge (`canarysim::cluster`).

use serde_json::{Map, Value};

use crate::model::vocabulary::HASH_LABEL;
use crate::model::{Kind, Object};

/// The annotation Argo puts on the Services it manages.
const MANAGED_BY: &str = "argo-rollouts.argoproj.io/managed-by-rollouts";

/// Metadata the API server and controllers own.
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "ownerReferences",
    "finalizers",
];

/// Annotations clients and controllers write.
const WRITTEN_ANNOTATIONS: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    "rollout.argoproj.io/revision",
    "rollout.argoproj.io/workload-generation",
    MANAGED_BY,
];

/// Service fields the API server fills in.
const SERVICE_DEFAULTS: &[&str] = &[
    "clusterIP",
    "clusterIPs",
    "ipFamilies",
    "ipFamilyPolicy",
    "internalTrafficPolicy",
];

/// The object as its author would have applied it: no status, no server metadata, and for
/// what Argo manages (its Services' selectors, its DestinationRule subsets' labels), not
/// what Argo wrote into it.
pub fn as_applied(object: &Object) -> Value {
    let mut value = object.value.clone();
    let Some(map) = value.as_object_mut() else {
        return value;
    };
    map.remove("status");
    if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in SERVER_METADATA {
            meta.remove(*key);
        }
        strip_map(meta, "annotations", WRITTEN_ANNOTATIONS);
    }
    let spec = map.get_mut("spec").and_then(Value::as_object_mut);
    match (object.kind, spec) {
        (Kind::Service, Some(spec)) => {
            for key in SERVICE_DEFAULTS {
                // `clusterIP: None` is what makes a Service headless: the author's.
                if *key != "clusterIP" || spec.get(*key) != Some(&Value::from("None")) {
                    spec.remove(*key);
                }
            }
            if spec.get("sessionAffinity").and_then(Value::as_str) == Some("None") {
                spec.remove("sessionAffinity");
            }
            strip_map(spec, "selector", &[HASH_LABEL]);
        }
        (Kind::DestinationRule, Some(spec)) => {
            for subset in spec
                .get_mut("subsets")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(subset) = subset.as_object_mut() {
                    strip_map(subset, "labels", &[HASH_LABEL]);
                }
            }
        }
        _ => {}
    }
    value
}

/// A VirtualService without the header and mirror routes Argo inserted into its `http`
/// list for the Rollouts' `trafficRouting.managedRoutes` (named after them): the replayed
/// controller inserts them again at the steps that set them.
pub fn without_managed_routes(mut vs: Value, managed: &[String]) -> Value {
    if let Some(http) = vs["spec"].get_mut("http").and_then(Value::as_array_mut) {
        http.retain(|route| {
            route["name"]
                .as_str()
                .is_none_or(|name| !managed.iter().any(|m| m == name))
        });
    }
    vs
}

/// Whether `object` is a canary Ingress Argo wrote for a Rollout (its controller reference
/// is one of `rollout_uids`): the replayed controller writes it again.
pub fn is_argo_canary_ingress(object: &Object, rollout_uids: &[String]) -> bool {
    object.kind == crate::model::ingress::ingress_kind()
        && rollout_uids
            .iter()
            .any(|uid| crate::world::controller::nginx::controlled_by(&object.value, uid))
}

/// The names of a Rollout's `trafficRouting.managedRoutes`.
pub fn managed_route_names(rollout: &Object) -> Vec<String> {
    rollout.spec()["strategy"]["canary"]["trafficRouting"]["managedRoutes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .collect()
}

/// The ClusterAnalysisTemplates a Rollout names (`clusterScope: true`), in its background
/// analysis, its steps, and blue-green's pre- and post-promotion analyses.
pub fn cluster_templates(rollout: &Object) -> Vec<String> {
    let strategy = &rollout.spec()["strategy"];
    let canary = &strategy["canary"];
    let lists = [
        &canary["analysis"]["templates"],
        &strategy["blueGreen"]["prePromotionAnalysis"]["templates"],
        &strategy["blueGreen"]["postPromotionAnalysis"]["templates"],
    ];
    let steps = canary["steps"].as_array().into_iter().flatten();
    let mut names: Vec<String> = lists
        .into_iter()
        .chain(steps.map(|s| &s["analysis"]["templates"]))
        .filter_map(Value::as_array)
        .flatten()
        .filter(|t| t["clusterScope"] == true)
        .filter_map(|t| t["templateName"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The Rollout as it was before the update in progress: its template taken from the stable
/// ReplicaSet (without the hash label the ReplicaSet adds). None when no update is in
/// progress or the stable ReplicaSet is not among `replica_sets`.
pub fn before_update(rollout: &Object, replica_sets: &[Object]) -> Option<Value> {
    let status = rollout.status();
    let stable = status["stableRS"].as_str().filter(|s| !s.is_empty())?;
    if status["currentPodHash"].as_str() == Some(stable) {
        return None;
    }
    let rs = replica_sets
        .iter()
        .find(|rs| rs.labels().get(HASH_LABEL).map(String::as_str) == Some(stable))?;
    let mut template = rs.spec()["template"].clone();
    if let Some(labels) = template["metadata"]
        .get_mut("labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(HASH_LABEL);
    }
    let mut value = as_applied(rollout);
    value["spec"]["template"] = template;
    Some(value)
}

/// `key`'s entries named in `names` removed from the map at `field`, and the map removed
/// when that leaves it empty.
fn strip_map(parent: &mut Map<String, Value>, field: &str, names: &[&str]) {
    let Some(map) = parent.get_mut(field).and_then(Value::as_object_mut) else {
        return;
    };
    for name in names {
        map.remove(*name);
    }
    if map.is_empty() {
        parent.remove(field);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(kind: Kind, value: Value) -> Object {
        Object::new(kind, value)
    }

    #[test]
    fn a_service_loses_what_the_server_and_argo_wrote_and_keeps_the_rest() {
        let service = object(
            Kind::Service,
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "canary", "uid": "u", "resourceVersion": "7",
                             "annotations": {MANAGED_BY: "demo", "team": "web"}},
                "spec": {"clusterIP": "10.0.0.1", "sessionAffinity": "None",
                         "selector": {"app": "demo", HASH_LABEL: "abc"},
                         "ports": [{"port": 80}], "x-own": 1},
                "status": {"loadBalancer": {}}
            }),
        );
        assert_eq!(
            as_applied(&service),
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "canary", "annotations": {"team": "web"}},
                "spec": {"selector": {"app": "demo"}, "ports": [{"port": 80}], "x-own": 1}
            })
        );
    }

    #[test]
    fn argos_managed_routes_and_cluster_templates_are_found_and_a_headless_service_kept() {
        let rollout = object(
            Kind::Rollout,
            json!({"spec": {"strategy": {"canary": {
                "trafficRouting": {"managedRoutes": [{"name": "set-header"}]},
                "analysis": {"templates": [{"templateName": "rate", "clusterScope": true}]},
                "steps": [{"analysis": {"templates": [{"templateName": "smoke"},
                                                      {"templateName": "rate", "clusterScope": true},
                                                      {"templateName": "latency", "clusterScope": true}]}}]
            }}}}),
        );
        assert_eq!(managed_route_names(&rollout), ["set-header"]);
        assert_eq!(cluster_templates(&rollout), ["latency", "rate"]);
        let vs = json!({"spec": {"http": [{"name": "set-header"}, {"name": "primary"}, {}]}});
        assert_eq!(
            without_managed_routes(vs, &managed_route_names(&rollout)),
            json!({"spec": {"http": [{"name": "primary"}, {}]}})
        );
        let headless = object(
            Kind::Service,
            json!({"kind": "Service", "spec": {"clusterIP": "None", "clusterIPs": ["None"]}}),
        );
        assert_eq!(as_applied(&headless)["spec"], json!({"clusterIP": "None"}));
    }

    #[test]
    fn a_rollout_mid_update_is_written_with_its_stable_template() {
        let rollout = object(
            Kind::Rollout,
            json!({
                "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
                "metadata": {"name": "demo", "annotations": {"rollout.argoproj.io/revision": "2"}},
                "spec": {"template": {"metadata": {"labels": {"app": "demo"}},
                                      "spec": {"containers": [{"name": "c", "image": "app:yellow"}]}}},
                "status": {"stableRS": "s1", "currentPodHash": "c2"}
            }),
        );
        let stable = object(
            Kind::ReplicaSet,
            json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "demo-s1", "labels": {HASH_LABEL: "s1"}},
                "spec": {"template": {"metadata": {"labels": {"app": "demo", HASH_LABEL: "s1"}},
                                      "spec": {"containers": [{"name": "c", "image": "app:blue"}]}}}
            }),
        );
        let before = before_update(&rollout, std::slice::from_ref(&stable)).unwrap();
        assert_eq!(
            before["spec"]["template"],
            json!({"metadata": {"labels": {"app": "demo"}},
                   "spec": {"containers": [{"name": "c", "image": "app:blue"}]}})
        );
        assert!(before.get("status").is_none());
        assert!(before["metadata"].get("annotations").is_none());
        assert_eq!(
            before_update(&rollout, &[]),
            None,
            "no stable ReplicaSet read"
        );
        let mut done = rollout.value.clone();
        done["status"]["currentPodHash"] = json!("s1");
        assert_eq!(before_update(&object(Kind::Rollout, done), &[stable]), None);
    }
}
