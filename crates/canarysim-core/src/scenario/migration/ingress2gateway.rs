//! The Gateway and HTTPRoutes ingress2gateway writes for the Ingresses ingress-nginx serves
//! (`pkg/i2gw/providers/ingressnginx`, `pkg/i2gw/providers/common`), as far as a canary
//! depends on it:
//!
//! * one Gateway per namespace and class, named after the class, with an HTTP listener on
//!   port 80 per host;
//! * one HTTPRoute per namespace, class and host (`<first Ingress>-<host>`), a rule per
//!   path (`Prefix` and `ImplementationSpecific` become `PathPrefix`) forwarding to every
//!   Ingress's backend on that path;
//! * `canary.go`: the canary backend weighs `canary-weight` and the other
//!   `canary-weight-total − canary-weight`, the total being used **even at or below 100**
//!   (ingress-nginx uses it only above); a weight above the total is capped;
//!   `canary-by-header` adds a rule matching the header's exact value
//!   (`canary-by-header-value`, else `always`) to the canary and, without a value, one
//!   matching `never` to the other backend; a header canary without a weight leaves the
//!   weighted rule to the other backend alone; `canary-by-header-pattern` and
//!   `canary-by-cookie` are dropped with a warning.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::model::gateway_api;
use crate::model::ingress::{DEFAULT_ANNOTATION_PREFIX, IngressSpec, ingress_kind};
use crate::model::{Object, Objects};

/// What ingress2gateway writes, and what it warned about; with errors it writes nothing.
pub struct Converted {
    pub objects: Vec<Object>,
    pub warnings: Vec<String>,
    pub errors: Vec<String>,
}

/// One backend of a path, and the Ingress it came from.
struct PathBackend {
    service: String,
    port: Option<u32>,
    canary: Option<BTreeMap<String, String>>,
}

/// A rule group: the paths of one namespace, class and host.
#[derive(Default)]
struct Group {
    route_name: String,
    host: String,
    /// (path, Gateway API path type) → backends, in order of first appearance.
    paths: Vec<((String, &'static str), Vec<PathBackend>)>,
}

/// The Gateway API objects for the Ingresses of `api` that ingress-nginx serves.
pub fn convert(api: &dyn Objects) -> Converted {
    let mut groups: BTreeMap<(String, String, String), Group> = BTreeMap::new();
    let mut warnings = Vec::new();
    for ingress in api.objects(ingress_kind()) {
        let Ok(spec) = ingress.spec_as::<IngressSpec>() else {
            continue;
        };
        // `--ingress-nginx-ingress-class` (default nginx): the class name first, else the
        // annotation; an Ingress of none is not read.
        if class_of(ingress, &spec).as_deref() != Some(crate::model::ingress::DEFAULT_CLASS) {
            continue;
        }
        let annotations = ingress.annotations();
        let is_canary = annotations
            .get(&format!("{DEFAULT_ANNOTATION_PREFIX}/canary"))
            .is_some_and(|v| v == "true");
        for dropped in ["canary-by-header-pattern", "canary-by-cookie"] {
            let key = format!("{DEFAULT_ANNOTATION_PREFIX}/{dropped}");
            if is_canary && annotations.get(&key).is_some_and(|v| !v.is_empty()) {
                warnings.push(format!(
                    "ingress {}/{} uses unsupported annotation {key}",
                    ingress.namespace(),
                    ingress.name()
                ));
            }
        }
        let class = crate::model::ingress::DEFAULT_CLASS.to_string();
        for p in spec.paths() {
            let Some(service) = p.service else { continue };
            let key = (
                ingress.namespace().to_string(),
                class.clone(),
                p.host.to_string(),
            );
            let group = groups.entry(key).or_insert_with(|| Group {
                route_name: format!("{}-{}", ingress.name(), name_from_host(p.host)),
                host: p.host.to_string(),
                paths: Vec::new(),
            });
            let path_type = if p.path_type == "Exact" {
                "Exact"
            } else {
                "PathPrefix"
            };
            let location = (p.path.to_string(), path_type);
            let backend = PathBackend {
                service: service.name.clone(),
                port: service.port.number,
                canary: is_canary.then(|| annotations.clone()),
            };
            match group.paths.iter_mut().find(|(l, _)| *l == location) {
                Some((_, backends)) => backends.push(backend),
                None => group.paths.push((location, vec![backend])),
            }
        }
    }
    // `getCanaryInfo`: at most one canary and one other backend per rule with a canary;
    // any error and ingress2gateway writes nothing.
    let mut errors = Vec::new();
    for ((ns, _, host), group) in &groups {
        for ((path, _), backends) in &group.paths {
            let canaries = backends.iter().filter(|b| b.canary.is_some()).count();
            let others = backends.len() - canaries;
            if canaries > 1 || (canaries == 1 && others > 1) {
                errors.push(format!(
                    "{ns} host {host:?} path {path:?}: {canaries} canary and {others} other backends; at most one of each is allowed per rule when using canary"
                ));
            } else if canaries == 1 && others == 0 {
                errors.push(format!(
                    "{ns} host {host:?} path {path:?}: canary backend without non-canary backend"
                ));
            }
        }
    }
    if !errors.is_empty() {
        return Converted {
            objects: Vec::new(),
            warnings,
            errors,
        };
    }
    let mut objects = Vec::new();
    let mut gateways: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for ((ns, class, host), group) in &groups {
        gateways
            .entry((ns.clone(), class.clone()))
            .or_default()
            .push(host.clone());
        objects.push(http_route(ns, class, group));
    }
    for ((ns, class), hosts) in gateways {
        objects.insert(0, gateway(&ns, &class, &hosts));
    }
    Converted {
        objects,
        warnings,
        errors,
    }
}

/// The Ingress's class as ingress2gateway reads it (`GetIngressClass`): None for none.
fn class_of(ingress: &Object, spec: &IngressSpec) -> Option<String> {
    spec.ingress_class_name.clone().or_else(|| {
        ingress
            .annotations()
            .get(crate::model::ingress::CLASS_ANNOTATION)
            .cloned()
    })
}

/// `common.NameFromHost`.
fn name_from_host(host: &str) -> String {
    if host.is_empty() || host == "*" {
        return "all-hosts".into();
    }
    let mut out = String::new();
    for c in host.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_start_matches('-').to_string()
}

fn gateway(ns: &str, class: &str, hosts: &[String]) -> Object {
    let listeners: Vec<Value> = hosts
        .iter()
        .map(|h| {
            let mut l = json!({"name": format!("{}-http", name_from_host(h)), "port": 80, "protocol": "HTTP"});
            if !h.is_empty() {
                l["hostname"] = json!(h);
            }
            l
        })
        .collect();
    Object::new(
        gateway_api::kind("Gateway"),
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": class, "namespace": ns},
            "spec": {"gatewayClassName": class, "listeners": listeners},
        }),
    )
}

fn http_route(ns: &str, class: &str, group: &Group) -> Object {
    let mut rules = Vec::new();
    let mut header_rules = Vec::new();
    for ((path, path_type), backends) in &group.paths {
        let matches = json!([{"path": {"type": path_type, "value": path}}]);
        let backend_ref = |b: &PathBackend| {
            let mut r = json!({"name": b.service});
            if let Some(port) = b.port {
                r["port"] = json!(port);
            }
            r
        };
        let canary = backends.iter().find(|b| b.canary.is_some());
        let primary = backends.iter().find(|b| b.canary.is_none());
        let (Some(canary), Some(primary)) = (canary, primary) else {
            let refs: Vec<Value> = backends.iter().map(backend_ref).collect();
            rules.push(json!({"matches": matches, "backendRefs": refs}));
            continue;
        };
        let config = CanaryConfig::of(canary.canary.as_ref().expect("found by it"));
        let (mut canary_ref, mut primary_ref) = (backend_ref(canary), backend_ref(primary));
        if config.weight.is_some() || config.header.is_none() {
            let weight = config.weight.unwrap_or(0);
            canary_ref["weight"] = json!(weight);
            primary_ref["weight"] = json!(config.total - weight);
            rules.push(json!({"matches": matches, "backendRefs": [primary_ref, canary_ref]}));
        } else {
            rules.push(json!({"matches": matches, "backendRefs": [primary_ref]}));
        }
        if let Some(header) = &config.header {
            let header_rule = |value: &str, to: &PathBackend| {
                json!({
                    "matches": [{"path": {"type": path_type, "value": path},
                                 "headers": [{"name": header, "value": value}]}],
                    "backendRefs": [backend_ref(to)],
                })
            };
            match &config.header_value {
                Some(v) => header_rules.push(header_rule(v, canary)),
                None => {
                    header_rules.push(header_rule("always", canary));
                    header_rules.push(header_rule("never", primary));
                }
            }
        }
    }
    rules.extend(header_rules);
    let mut spec = json!({"parentRefs": [{"name": class}], "rules": rules});
    if !group.host.is_empty() {
        spec["hostnames"] = json!([group.host]);
    }
    Object::new(
        gateway_api::kind("HTTPRoute"),
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": group.route_name, "namespace": ns},
            "spec": spec,
        }),
    )
}

/// `parseCanaryConfig`.
struct CanaryConfig {
    /// None: no (valid, non-negative) `canary-weight`.
    weight: Option<i64>,
    total: i64,
    header: Option<String>,
    header_value: Option<String>,
}

impl CanaryConfig {
    fn of(annotations: &BTreeMap<String, String>) -> CanaryConfig {
        let get = |name: &str| {
            annotations
                .get(&format!("{DEFAULT_ANNOTATION_PREFIX}/{name}"))
                .filter(|v| !v.is_empty())
        };
        let total = get("canary-weight-total")
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|t| *t > 0)
            .unwrap_or(100);
        let weight = get("canary-weight")
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|w| *w >= 0)
            .map(|w| w.min(total));
        CanaryConfig {
            weight,
            total,
            header: get("canary-by-header").cloned(),
            header_value: get("canary-by-header-value").cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ObjectSet;

    fn ingress(name: &str, annotations: Value, service: &str) -> Object {
        Object::new(
            ingress_kind(),
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                   "metadata": {"name": name, "namespace": "demo", "annotations": annotations},
                   "spec": {"ingressClassName": "nginx", "rules": [{"host": "demo.example.com",
                     "http": {"paths": [{"path": "/", "pathType": "Prefix",
                       "backend": {"service": {"name": service, "port": {"number": 80}}}}]}}]}}),
        )
    }

    fn converted(canary: Value) -> Converted {
        convert(&ObjectSet::new(vec![
            ingress("stable", json!({}), "demo-stable"),
            ingress("stable-canary", canary, "demo-canary"),
        ]))
    }

    fn a(pairs: &[(&str, &str)]) -> Value {
        let mut v = json!({"nginx.ingress.kubernetes.io/canary": "true"});
        for (k, val) in pairs {
            v[format!("nginx.ingress.kubernetes.io/{k}")] = json!(val);
        }
        v
    }

    #[test]
    fn the_weight_total_is_used_even_at_or_below_one_hundred() {
        let c = converted(a(&[("canary-weight", "5"), ("canary-weight-total", "10")]));
        let route = &c.objects[1].value;
        assert_eq!(c.objects[0].value["kind"], "Gateway");
        assert_eq!(c.objects[0].value["metadata"]["name"], "nginx");
        assert_eq!(route["metadata"]["name"], "stable-demo-example-com");
        assert_eq!(route["spec"]["hostnames"], json!(["demo.example.com"]));
        let refs = &route["spec"]["rules"][0]["backendRefs"];
        assert_eq!(
            refs[0],
            json!({"name": "demo-stable", "port": 80, "weight": 5})
        );
        assert_eq!(
            refs[1],
            json!({"name": "demo-canary", "port": 80, "weight": 5})
        );
    }

    #[test]
    fn a_header_canary_adds_exact_rules_and_pattern_and_cookie_are_dropped() {
        let c = converted(a(&[
            ("canary-by-header", "X-Canary"),
            ("canary-by-header-pattern", "^beta"),
            ("canary-by-cookie", "c"),
        ]));
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        let rules = c.objects[1].value["spec"]["rules"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(rules.len(), 3);
        assert_eq!(
            rules[0]["backendRefs"],
            json!([{"name": "demo-stable", "port": 80}])
        );
        assert_eq!(rules[1]["matches"][0]["headers"][0]["value"], "always");
        assert_eq!(rules[1]["backendRefs"][0]["name"], "demo-canary");
        assert_eq!(rules[2]["matches"][0]["headers"][0]["value"], "never");
        assert_eq!(rules[2]["backendRefs"][0]["name"], "demo-stable");
    }

    #[test]
    fn hosts_become_names_as_ingress2gateway_writes_them() {
        assert_eq!(name_from_host("*.example.com"), "example-com");
        assert_eq!(name_from_host(""), "all-hosts");
        assert_eq!(name_from_host("a.b-c"), "a-b-c");
    }
}
