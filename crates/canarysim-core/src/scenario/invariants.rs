//! Invariants checked after every event (SCENARIOS.md): every route's weights lie in 0..100
//! and sum to 100; every destination with weight above 0 has a ready endpoint. (The third,
//! no 503 "no healthy upstream", is checked by load steps.)
//!
//! The endpoint check covers destinations a rollout manages (their Service or
//! DestinationRule carries Argo's managed-by annotation): before the first deploy is
//! available nothing has pods, and that is the user's starting point, not the rollout's doing.

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

use crate::apiserver::ApiServer;
use crate::model::object::string_map;
use crate::model::{Kind, Object};

/// The invariants that do not hold right now, one message each.
pub fn violations(api: &ApiServer) -> Vec<String> {
    let mut out = Vec::new();
    for vs in api.list(Kind::VirtualService, None, None) {
        // Routes repeat destinations (thousands of copies, in a hostile VirtualService):
        // each is looked up once.
        let mut endpoints: HashMap<(&str, &str), Option<usize>> = HashMap::new();
        for section in ["http", "tls", "tcp"] {
            let Some(routes) = vs.spec().get(section).and_then(Value::as_array) else {
                continue;
            };
            for (i, route) in routes.iter().enumerate() {
                let Some(dests) = route.get("route").and_then(Value::as_array) else {
                    continue;
                };
                let label = match route.get("name").and_then(Value::as_str) {
                    Some(n) if section == "http" => format!("{section}/{n}"),
                    _ => format!("{section}/{i}"),
                };
                let weights: Vec<i64> = dests
                    .iter()
                    .map(|d| {
                        d.get("weight")
                            .and_then(Value::as_i64)
                            .unwrap_or(if dests.len() == 1 { 100 } else { 0 })
                    })
                    .collect();
                let sum: i64 = weights.iter().sum();
                if weights.iter().any(|w| !(0..=100).contains(w)) || (dests.len() > 1 && sum != 100)
                {
                    out.push(format!(
                        "VirtualService {} {label}: weights {weights:?} do not sum to 100{}",
                        vs.name(),
                        promote_full_overshoot(api, vs, &weights).unwrap_or_default()
                    ));
                }
                for (d, w) in dests.iter().zip(&weights) {
                    if *w <= 0 {
                        continue;
                    }
                    let host = d["destination"]["host"].as_str().unwrap_or("");
                    let subset = d["destination"]["subset"].as_str().unwrap_or("");
                    let ready = *endpoints
                        .entry((host, subset))
                        .or_insert_with(|| ready_endpoints(api, vs, host, subset));
                    if let Some(0) = ready {
                        out.push(format!(
                            "VirtualService {} {label}: destination {host}{} has weight {w} but no ready endpoint",
                            vs.name(),
                            if subset.is_empty() { String::new() } else { format!("/{subset}") }
                        ));
                    }
                }
            }
        }
    }
    out
}

/// Why Argo itself wrote a weight above 100, when it did: on `promote --full` with
/// `dynamicStableScale` the canary weighs 100 × its available pods / `spec.replicas`
/// (`rollout/trafficrouting.go`), above 100 while a `setCanaryScale` of more pods than
/// `spec.replicas` is scaled back. Argo rewrites weights only once the stable has the pods
/// for its share, so the overshoot may outlast the promotion itself.
fn promote_full_overshoot(api: &ApiServer, vs: &Object, weights: &[i64]) -> Option<String> {
    use crate::model::rollout::RolloutSpec;
    if weights.iter().all(|w| *w <= 100) {
        return None;
    }
    api.list(Kind::Rollout, None, None).into_iter().find_map(|ro| {
        let spec: RolloutSpec = ro.spec_as().ok()?;
        let canary = spec.strategy.canary.as_ref()?;
        let routes_vs = canary
            .traffic_routing
            .as_ref()?
            .istio
            .as_ref()?
            .virtual_service_list()
            .into_iter()
            .any(|r| {
                crate::controller::istio::virtual_service_namespace_name(&r.name, ro.namespace())
                    == (vs.namespace().to_string(), vs.name().to_string())
            });
        (routes_vs && canary.dynamic_stable_scale).then(|| {
            format!(
                " (Argo's promote --full with dynamicStableScale: the canary weighs 100 × its available pods / spec.replicas ({}), above 100 while a setCanaryScale larger than spec.replicas is scaled back)",
                ro.spec()["replicas"].as_i64().unwrap_or(1)
            )
        })
    })
}

/// Ready pods behind a destination, or None when the host is no Service of the cluster
/// (external hosts are not checked).
fn ready_endpoints(api: &ApiServer, vs: &Object, host: &str, subset: &str) -> Option<usize> {
    let mut parts = host.split('.');
    let short = parts.next().unwrap_or("");
    let ns = parts
        .next()
        .filter(|p| !p.is_empty())
        .unwrap_or(vs.namespace());
    let svc = api.get(Kind::Service, ns, short).ok()?;
    let managed = |o: &Object| {
        o.annotation(crate::controller::rollout::MANAGED_BY)
            .is_some()
    };
    let mut selector: BTreeMap<String, String> = string_map(svc.spec().get("selector"));
    if selector.is_empty() || (subset.is_empty() && !managed(svc)) {
        return None;
    }
    if !subset.is_empty() {
        let dr = api
            .list(Kind::DestinationRule, Some(ns), None)
            .into_iter()
            .find(|dr| {
                let h = dr.spec()["host"].as_str().unwrap_or("");
                h.split('.').next() == Some(short)
            })?;
        if !managed(dr) {
            return None;
        }
        let sub = dr.spec()["subsets"]
            .as_array()?
            .iter()
            .find(|s| s["name"] == subset)?;
        selector.extend(string_map(sub.get("labels")));
    }
    Some(
        api.pod_facts(Some(ns), Some(&selector))
            .into_iter()
            .filter(|(_, pod)| pod.ready)
            .count(),
    )
}
