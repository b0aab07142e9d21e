//! The routes a canary Rollout's traffic router manages — Istio VirtualService routes, the
//! Gateway API plugin's route rules, the NGINX canary Ingresses Argo writes — and the share
//! of each that its object gives the
//! canary Service: the "VirtualService" weight of the TUI's weight rows, and the weight
//! `canarysim watch` verifies at a real gateway. Read from whatever holds the objects (the
//! simulated store, or copies fetched from a cluster).

use serde_json::Value;

use crate::controller::gateway_api::PluginConfig;
use crate::model::ingress::{CanaryAnnotations, IngressSpec, ingress_kind};
use crate::model::rollout::NginxTrafficRouting;
use crate::model::{Kind, Object, ObjectKey};

/// What sets a managed route's weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouterObject {
    VirtualService,
    GatewayApiRoute,
    /// The canary Ingress Argo writes for a stable Ingress (`trafficRouting.nginx`).
    CanaryIngress,
}

/// One managed route and the canary's share its object sets.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteWeight {
    /// The object that holds the route (for NGINX the stable Ingress, whose location the
    /// canary Ingress's weight splits).
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
    /// The canary's weight as the controller writes it, in the step's units (a `setWeight`
    /// of `maxTrafficWeight`): what says the object has taken the step's weight.
    pub written: Option<f64>,
    /// The share one unit of weight is, in percent (100 over the total the router draws
    /// from): turns a step's set weight into the share it makes. None when the weights add
    /// up to nothing.
    pub percent_per_weight: Option<f64>,
    /// How the written weight becomes the share, where they differ (weights that do not
    /// add up to 100, an NGINX `canary-weight-total`).
    pub detail: Option<String>,
}

impl RouteWeight {
    /// A route's weights: the canary's `to_canary` of `total`.
    fn of_total(
        object: ObjectKey,
        by: RouterObject,
        route: String,
        label: String,
        (to_canary, total): (i64, i64),
    ) -> RouteWeight {
        let per_weight = (total > 0).then(|| 100.0 / total as f64);
        let detail = (total > 0 && total != 100).then(|| {
            format!("the route's weights add up to {total}: the canary's {to_canary} is its share of them")
        });
        RouteWeight {
            object,
            by,
            route,
            label,
            canary_percent: per_weight.map(|p| to_canary as f64 * p),
            written: Some(to_canary as f64),
            percent_per_weight: per_weight,
            detail,
        }
    }
}

/// The objects the rollout's traffic router writes weights to: its VirtualServices, the
/// routes the Gateway API plugin names (routes found by label selector are not read), then
/// the canary Ingresses of its stable Ingresses.
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
    keys.extend(
        canary_ingress_keys(rollout)
            .into_iter()
            .map(|(key, ..)| key),
    );
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
            let total: i64 = weights.values().sum();
            out.push(RouteWeight::of_total(
                key.clone(),
                RouterObject::VirtualService,
                route.clone(),
                format!("{} {route}", key.name),
                (to_canary, total),
            ));
        }
    }
    out.extend(gateway_api_weights(rollout, canary_service, &get));
    out.extend(canary_ingress_weights(rollout, &get));
    out
}

/// `trafficRouting.nginx`: the canary Ingress Argo writes for each stable Ingress, with the
/// stable Ingress and the annotations' prefix.
fn canary_ingress_keys(rollout: &Object) -> Vec<(ObjectKey, ObjectKey, String)> {
    let nginx = &rollout.spec()["strategy"]["canary"]["trafficRouting"]["nginx"];
    let Ok(config) = serde_json::from_value::<NginxTrafficRouting>(nginx.clone()) else {
        return Vec::new();
    };
    config
        .stable_ingress_list()
        .into_iter()
        .filter(|stable| !stable.is_empty())
        .map(|stable| {
            let name = crate::controller::nginx::canary_ingress_name(rollout.name(), stable);
            let key = ObjectKey::new(ingress_kind(), rollout.namespace(), name);
            let stable = ObjectKey::new(ingress_kind(), rollout.namespace(), stable);
            (key, stable, config.prefix().to_string())
        })
        .collect()
}

/// Each canary Ingress's `canary-weight`, and the share it states: of
/// `canary-weight-total`. ingress-nginx draws that share only when the total is above 100
/// (`balancer.lua`), else of 100, and the detail says so: a load judged against the share
/// the object states then fails, as the canary gets less than the rollout set.
/// The route is the weighted one of the stable Ingress's first path to the stable Service,
/// where the route table holds it.
fn canary_ingress_weights<'a>(
    rollout: &Object,
    get: &impl Fn(&ObjectKey) -> Option<&'a Object>,
) -> Vec<RouteWeight> {
    let stable_service = rollout.spec()["strategy"]["canary"]["stableService"]
        .as_str()
        .unwrap_or("");
    let mut out = Vec::new();
    for (key, stable, prefix) in canary_ingress_keys(rollout) {
        let Some(ingress) = get(&key) else { continue };
        let path = get(&stable)
            .and_then(|o| o.spec_as::<IngressSpec>().ok())
            .and_then(|spec| {
                spec.paths()
                    .find(|p| p.service.is_some_and(|s| s.name == stable_service))
                    .map(|p| p.label)
            })
            .unwrap_or_default();
        let Ok(canary) = CanaryAnnotations::parse(&ingress.annotations(), &prefix) else {
            continue;
        };
        // The share the object states; ingress-nginx draws it, but for a total below 100.
        let (to_canary, total) = canary.weight_share();
        let (weight, weight_total) = (canary.weight, canary.weight_total);
        let stated_total = weight_total.max(1) as f64;
        let percent = (weight as f64 * 100.0 / stated_total).clamp(0.0, 100.0);
        let detail = match weight_total {
            100 => None,
            ..=100 => Some(format!(
                "canary-weight {weight} of canary-weight-total {weight_total} ({percent:.1} %), but ingress-nginx draws {to_canary} of {total} ({:.1} %): it uses the total only above 100",
                f64::from(to_canary) * 100.0 / f64::from(total)
            )),
            _ => Some(format!(
                "canary-weight {weight} of canary-weight-total {weight_total}: ingress-nginx draws {to_canary} of {total}"
            )),
        };
        out.push(RouteWeight {
            label: format!("Ingress {}", key.name),
            object: stable,
            by: RouterObject::CanaryIngress,
            route: format!("{path} canary-weight"),
            canary_percent: Some(percent),
            written: Some(weight as f64),
            percent_per_weight: Some(100.0 / stated_total),
            detail,
        });
    }
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
            out.push(RouteWeight::of_total(
                key.clone(),
                RouterObject::GatewayApiRoute,
                label.clone(),
                format!("{} {} {label}", managed.kind.kind(), managed.name),
                (to_canary, total),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rollout(traffic_routing: serde_json::Value) -> Object {
        Object::new(
            Kind::Rollout,
            json!({"metadata": {"name": "shop", "namespace": "web"},
                   "spec": {"strategy": {"canary": {
                       "canaryService": "shop-canary",
                       "stableService": "shop-stable",
                       "trafficRouting": traffic_routing}}}}),
        )
    }

    fn canary_ingress(weight: &str, total: &str) -> Object {
        Object::new(
            ingress_kind(),
            json!({"metadata": {"name": "shop-public-canary", "namespace": "web",
                   "annotations": {
                       "nginx.ingress.kubernetes.io/canary": "true",
                       "nginx.ingress.kubernetes.io/canary-weight": weight,
                       "nginx.ingress.kubernetes.io/canary-weight-total": total}}}),
        )
    }

    fn stable_ingress() -> Object {
        let path = |name: &str| json!({"path": "/", "backend": {"service": {"name": name}}});
        Object::new(
            ingress_kind(),
            json!({"metadata": {"name": "public", "namespace": "web"},
                   "spec": {"rules": [{"http": {"paths": [path("static")]}},
                                      {"http": {"paths": [path("static"), path("shop-stable")]}}]}}),
        )
    }

    /// The canary Ingress's weight as Argo writes it (of `maxTrafficWeight`), and the share
    /// it states: 5 of 10 is 50 %, which the detail says ingress-nginx does not draw. The
    /// route is the stable Ingress's first path to the stable Service.
    #[test]
    fn an_nginx_canary_weight_is_read_as_ingress_nginx_draws_it() {
        for (weight, total, percent, per_weight) in [
            ("20", "100", 20.0, 1.0),
            ("50", "1000", 5.0, 0.1),
            ("5", "10", 50.0, 10.0),
        ] {
            let ro = rollout(json!({"nginx": {"stableIngress": "public"}}));
            assert_eq!(
                managed_objects(&ro),
                [ObjectKey::new(ingress_kind(), "web", "shop-public-canary")]
            );
            let (canary, stable) = (canary_ingress(weight, total), stable_ingress());
            let weights = canary_weights(&ro, |k| {
                Some(if k.name == "public" { &stable } else { &canary })
            });
            let w = &weights[0];
            assert_eq!(w.label, "Ingress shop-public-canary");
            assert_eq!(w.object.name, "public");
            assert_eq!(w.route, "rules[1].http.paths[1] canary-weight");
            assert_eq!(w.canary_percent, Some(percent), "{w:?}");
            assert_eq!(w.written, weight.parse().ok(), "{w:?}");
            assert_eq!(w.percent_per_weight, Some(per_weight), "{w:?}");
            assert_eq!(w.detail.is_some(), total != "100", "{w:?}");
            if total == "10" {
                let detail = w.detail.as_deref().unwrap_or_default();
                assert!(detail.contains("draws 5 of 100 (5.0 %)"), "{detail}");
            }
        }
    }

    /// A VirtualService route whose weights add up to 1000 (`maxTrafficWeight: 1000`):
    /// the canary's 20 is 2 % of the requests.
    #[test]
    fn a_route_weight_is_a_share_of_the_routes_total() {
        let ro =
            rollout(json!({"istio": {"virtualService": {"name": "vs", "routes": ["primary"]}}}));
        let vs = Object::new(
            Kind::VirtualService,
            json!({"metadata": {"name": "vs", "namespace": "web"},
                   "spec": {"http": [{"name": "primary", "route": [
                       {"destination": {"host": "shop-stable"}, "weight": 980},
                       {"destination": {"host": "shop-canary"}, "weight": 20}]}]}}),
        );
        let weights = canary_weights(&ro, |_| Some(&vs));
        let w = &weights[0];
        assert_eq!(
            (w.canary_percent, w.written, w.percent_per_weight),
            (Some(2.0), Some(20.0), Some(0.1)),
            "{w:?}"
        );
        assert!(
            w.detail
                .as_ref()
                .is_some_and(|d| d.contains("add up to 1000"))
        );
    }
}
