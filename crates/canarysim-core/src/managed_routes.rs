//! The routes a canary Rollout's traffic router manages — Istio VirtualService routes, the
//! Gateway API plugin's route rules — and the share of each that its object gives the
//! canary Service: the "VirtualService" weight of the TUI's weight rows, and the weight
//! `canarysim watch` verifies at a real gateway. Read from whatever holds the objects (the
//! simulated store, or copies fetched from a cluster).

use serde_json::Value;

use crate::controller::gateway_api::PluginConfig;
use crate::model::{Kind, Object, ObjectKey};

/// What sets a managed route's weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouterObject {
    VirtualService,
    GatewayApiRoute,
}

/// One managed route and the canary's share its object sets.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteWeight {
    /// The object that holds the route.
    pub object: ObjectKey,
    pub by: RouterObject,
    /// The route within it, as the route table names it: `http/primary`, `http/0`,
    /// `rules/0`, `rules/canary`.
    pub route: String,
    /// `rollouts-demo-vsvc http/primary`, `HTTPRoute web rules/0`.
    pub label: String,
    /// The canary Service's (or subset's) share of the route's weights, in percent; None
    /// when its weights add up to nothing.
    pub canary_percent: Option<f64>,
}

/// The objects the rollout's traffic router writes weights to: its VirtualServices, then
/// the routes the Gateway API plugin names (routes found by label selector are not read).
pub fn managed_objects(rollout: &Object) -> Vec<ObjectKey> {
    let mut keys: Vec<ObjectKey> = virtual_service_refs(rollout)
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    let canary = &rollout.spec()["strategy"]["canary"];
    if let Some(config) =
        PluginConfig::of(canary["trafficRouting"].get("plugins"), rollout.namespace())
    {
        for managed in &config.routes {
            let kind = crate::model::gateway_api::kind(managed.kind.kind());
            keys.push(ObjectKey::new(
                kind,
                config.namespace.clone(),
                managed.name.clone(),
            ));
        }
    }
    keys
}

/// Every managed route of the rollout whose object `get` finds, with the canary's share.
pub fn canary_weights<'a>(
    rollout: &Object,
    get: impl Fn(&ObjectKey) -> Option<&'a Object>,
) -> Vec<RouteWeight> {
    let canary = &rollout.spec()["strategy"]["canary"];
    let canary_service = canary["canaryService"].as_str().unwrap_or("");
    let canary_subset = canary["trafficRouting"]["istio"]["destinationRule"]["canarySubsetName"]
        .as_str()
        .unwrap_or("");
    let mut out = Vec::new();
    for (key, mut routes) in virtual_service_refs(rollout) {
        let Some(vs) = get(&key) else { continue };
        if routes.is_empty() {
            routes.push("http/0".to_string());
        }
        for route in routes {
            let Some(weights) = crate::scenario::expect::route_weights(vs.spec(), &route) else {
                continue;
            };
            let to_canary: i64 = weights
                .iter()
                .filter(|(dest, _)| {
                    let (host, subset) = dest.split_once('/').unwrap_or((dest.as_str(), ""));
                    (!canary_subset.is_empty() && subset == canary_subset)
                        || (!canary_service.is_empty() && short_host(host) == canary_service)
                })
                .map(|(_, w)| *w)
                .sum();
            out.push(RouteWeight {
                label: format!("{} {route}", key.name),
                object: key.clone(),
                by: RouterObject::VirtualService,
                route,
                canary_percent: Some(to_canary as f64),
            });
        }
    }
    out.extend(gateway_api_weights(rollout, canary_service, &get));
    out
}

/// A destination host's Service name (`svc`, `svc.ns`, `svc.ns.svc.cluster.local`).
fn short_host(host: &str) -> &str {
    host.split('.').next().unwrap_or(host)
}

/// `trafficRouting.istio.virtualService(s)`: each VirtualService (`name` or `name.namespace`,
/// as Argo reads it) with the HTTP routes named (none: the only one).
fn virtual_service_refs(rollout: &Object) -> Vec<(ObjectKey, Vec<String>)> {
    let istio = &rollout.spec()["strategy"]["canary"]["trafficRouting"]["istio"];
    let mut refs = Vec::new();
    let mut add = |vs: &Value| {
        let Some(name) = vs["name"].as_str() else {
            return;
        };
        let (name, namespace) = name.split_once('.').unwrap_or((name, rollout.namespace()));
        let routes = vs["routes"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter_map(|x| x.as_str().map(|n| format!("http/{n}")))
                    .collect()
            })
            .unwrap_or_default();
        refs.push((
            ObjectKey::new(Kind::VirtualService, namespace, name),
            routes,
        ));
    };
    add(&istio["virtualService"]);
    for vs in istio["virtualServices"].as_array().into_iter().flatten() {
        add(vs);
    }
    refs
}

/// The rules of the plugin's routes that forward to the canary Service beside another
/// backend: the canary's share of the rule's weights (default 1 each).
fn gateway_api_weights<'a>(
    rollout: &Object,
    canary_service: &str,
    get: &impl Fn(&ObjectKey) -> Option<&'a Object>,
) -> Vec<RouteWeight> {
    let plugins = rollout.spec()["strategy"]["canary"]["trafficRouting"].get("plugins");
    let Some(config) = PluginConfig::of(plugins, rollout.namespace()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for managed in &config.routes {
        let kind = crate::model::gateway_api::kind(managed.kind.kind());
        let key = ObjectKey::new(kind, config.namespace.clone(), managed.name.clone());
        let Some(route) = get(&key) else { continue };
        let rules = route.spec()["rules"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (i, rule) in rules.iter().enumerate() {
            let backends = rule["backendRefs"].as_array().cloned().unwrap_or_default();
            let weight = |b: &Value| b["weight"].as_i64().unwrap_or(1).max(0);
            let total: i64 = backends.iter().map(weight).sum();
            let to_canary: i64 = backends
                .iter()
                .filter(|b| b["name"].as_str() == Some(canary_service))
                .map(weight)
                .sum();
            // Only the rules the plugin weighs: the canary Service beside another backend.
            if backends.len() < 2 || !backends.iter().any(|b| b["name"] == canary_service) {
                continue;
            }
            let label = match rule["name"].as_str() {
                Some(n) if !n.is_empty() => format!("rules/{n}"),
                _ => format!("rules/{i}"),
            };
            out.push(RouteWeight {
                label: format!("{} {} {label}", managed.kind.kind(), managed.name),
                object: key.clone(),
                by: RouterObject::GatewayApiRoute,
                route: label,
                canary_percent: (total > 0).then(|| to_canary as f64 * 100.0 / total as f64),
            });
        }
    }
    out
}
