//! Argo Rollouts' NGINX traffic router: a pure port of what it writes. The rollout
//! reconciler reads the Ingresses, calls these functions and writes what they return.
//!
//! What mirrors what (paths in argo-rollouts):
//! * [`canary_ingress_name`] — `utils/ingress/ingress.go`: `GetCanaryIngressName`
//!   (`<rollout>-<stableIngress>` cut to 253 − 7 characters, then `-canary`);
//! * [`canary_ingress`] — `rollout/trafficrouting/nginx/nginx.go`: `buildCanaryIngress`
//!   (only the rules with a path to the stable Service, those paths sent to the canary
//!   Service; TLS, `ingressClassName` and the `kubernetes.io/ingress.class` annotation kept;
//!   `additionalIngressAnnotations` under the prefix, `canaryIngressAnnotations` as written,
//!   then `canary`, `canary-weight` and, with `maxTrafficWeight`, `canary-weight-total`;
//!   owned by the Rollout);
//! * [`patched`] — `SetWeightPerIngress`'s patch: the annotations Argo wants over those
//!   already there (`getDesiredAnnotations`), no labels, and the spec's fields as built
//!   (`BuildIngressPatch` with annotations, labels and spec: a merge patch of typed objects,
//!   so a field the Ingress type does not define is left alone);
//! * the events and errors of `SetWeightPerIngress`, word for word.
//!
//! `SetHeaderRoute`, `SetMirrorRoute`, `RemoveManagedRoutes`, `UpdateHash` do nothing and
//! `VerifyWeight` answers nothing (Argo's validation refuses header and mirror steps with
//! NGINX).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::model::ingress::{CLASS_ANNOTATION, IngressSpec};
use crate::model::rollout::NginxTrafficRouting;

/// `CanaryIngressSuffix`.
const CANARY_INGRESS_SUFFIX: &str = "-canary";

/// Kubernetes' longest object name.
const MAX_NAME: usize = 253;

/// The spec fields of `networkingv1.IngressSpec` (what the typed patch can touch).
const SPEC_FIELDS: [&str; 4] = ["defaultBackend", "ingressClassName", "rules", "tls"];

/// `GetCanaryIngressName`.
pub fn canary_ingress_name(rollout: &str, stable_ingress: &str) -> String {
    if stable_ingress.is_empty() {
        return String::new();
    }
    let mut prefix = format!("{rollout}-{stable_ingress}");
    // Go cuts bytes; names are ASCII.
    prefix.truncate(MAX_NAME - CANARY_INGRESS_SUFFIX.len());
    format!("{prefix}{CANARY_INGRESS_SUFFIX}")
}

/// What the canary Ingress is built for.
pub struct CanaryFor<'a> {
    pub config: &'a NginxTrafficRouting,
    pub stable_service: &'a str,
    pub canary_service: &'a str,
    pub max_traffic_weight: Option<i32>,
    /// The Rollout's controller reference (`metav1.NewControllerRef`).
    pub owner: Value,
}

/// What Go prints when the controller dereferences a nil pointer: a stable Ingress rule
/// without `http`, or a path without a Service backend, makes `buildCanaryIngress` (and
/// the reference validation) panic. The controller recovers, logs it and requeues the
/// rollout, which never progresses.
pub const NIL_POINTER_PANIC: &str =
    "runtime error: invalid memory address or nil pointer dereference";

/// Where Argo's NGINX code would dereference a nil pointer in `stable`'s rules, if it would:
/// `rules[i].http` absent, or `rules[i].http.paths[j].backend.service` absent.
pub fn nil_pointer_in(stable_spec: &Value) -> Option<String> {
    for (i, rule) in stable_spec["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(paths) = rule.get("http").filter(|h| !h.is_null()) else {
            return Some(format!("rules[{i}].http"));
        };
        for (j, path) in paths["paths"].as_array().into_iter().flatten().enumerate() {
            if path["backend"]["service"].is_null() {
                return Some(format!("rules[{i}].http.paths[{j}].backend.service"));
            }
        }
    }
    None
}

/// `buildCanaryIngress`: the canary Ingress named `name` for `stable` at `weight`; Err is
/// the message Argo returns ([`NIL_POINTER_PANIC`] for a rule its code cannot read).
pub fn canary_ingress(
    stable: &Value,
    namespace: &str,
    name: &str,
    weight: i32,
    cfg: &CanaryFor,
) -> Result<Value, String> {
    let spec = &stable["spec"];
    if nil_pointer_in(spec).is_some() {
        return Err(NIL_POINTER_PANIC.to_string());
    }
    let mut rules = Vec::new();
    for rule in spec["rules"].as_array().into_iter().flatten() {
        let mut rule = rule.clone();
        let mut uses_stable = false;
        let paths = rule
            .pointer_mut("/http/paths")
            .and_then(Value::as_array_mut);
        for path in paths.into_iter().flatten() {
            let service = path.pointer_mut("/backend/service/name");
            if let Some(service) = service.filter(|s| *s == cfg.stable_service) {
                *service = Value::from(cfg.canary_service);
                uses_stable = true;
            }
        }
        if uses_stable {
            rules.push(rule);
        }
    }
    if rules.is_empty() {
        // Argo names `stableIngress` here, even for an Ingress of `stableIngresses`.
        return Err(no_rules_message(
            &cfg.config.stable_ingress,
            cfg.stable_service,
        ));
    }
    let mut canary_spec = Map::new();
    canary_spec.insert("rules".into(), Value::Array(rules));
    for key in ["tls", "ingressClassName"] {
        if let Some(v) = spec.get(key).filter(|v| !v.is_null()) {
            canary_spec.insert(key.into(), v.clone());
        }
    }
    let prefix = cfg.config.prefix();
    let mut annotations = BTreeMap::new();
    if let Some(class) = stable["metadata"]["annotations"][CLASS_ANNOTATION].as_str() {
        annotations.insert(CLASS_ANNOTATION.to_string(), class.to_string());
    }
    for (k, v) in &cfg.config.additional_ingress_annotations {
        let key = if k.starts_with(prefix) {
            k.clone()
        } else {
            format!("{prefix}/{k}")
        };
        annotations.insert(key, v.clone());
    }
    for (k, v) in &cfg.config.canary_ingress_annotations {
        annotations.insert(k.clone(), v.clone());
    }
    annotations.insert(format!("{prefix}/canary"), "true".into());
    annotations.insert(format!("{prefix}/canary-weight"), weight.to_string());
    if let Some(total) = cfg.max_traffic_weight {
        annotations.insert(format!("{prefix}/canary-weight-total"), total.to_string());
    }
    Ok(json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": annotations,
            "ownerReferences": [cfg.owner],
        },
        "spec": canary_spec,
    }))
}

/// The canary Ingress after Argo's patch towards `desired`, or None when the patch would
/// change nothing ("No changes to canary ingress - skipping patch").
pub fn patched(current: &Value, desired: &Value) -> Option<Value> {
    let mut next = current.clone();
    let mut annotations = desired["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    if let Some(existing) = current["metadata"]["annotations"].as_object() {
        for (k, v) in existing {
            annotations.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("annotations".into(), Value::Object(annotations));
        meta.remove("labels");
    }
    if !next["spec"].is_object() {
        next["spec"] = json!({});
    }
    let spec = next["spec"].as_object_mut().expect("made an object above");
    for key in SPEC_FIELDS {
        match desired["spec"].get(key) {
            Some(v) => spec.insert(key.into(), v.clone()),
            None => spec.remove(key),
        };
    }
    (next != *current).then_some(next)
}

/// `metav1.IsControlledBy`: whether the Ingress's controller reference is the Rollout's.
pub fn controlled_by(ingress: &Value, rollout_uid: &str) -> bool {
    ingress["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["controller"] == true && r["uid"].as_str() == Some(rollout_uid))
}

/// What Argo checks of the stable Ingresses before it reconciles (the rollout is
/// `InvalidSpec` otherwise), the first problem as (JSON pointer, message):
/// `ValidateRolloutNginxIngressesConfig` (one of `stableIngress` / `stableIngresses`),
/// `getReferencedNginxIngresses` (each stored; `ingress` looks one up), `ValidateIngress`
/// (each with a path to the stable Service).
pub fn stable_ingresses_error(
    cfg: &NginxTrafficRouting,
    stable_service: &str,
    ingress: impl Fn(&str) -> Option<IngressSpec>,
) -> Option<(String, String)> {
    let (at, pointer) = (
        "spec.strategy.canary.trafficRouting.nginx",
        "/spec/strategy/canary/trafficRouting/nginx",
    );
    let (single, multiple) = (
        !cfg.stable_ingress.is_empty(),
        cfg.stable_ingresses.is_some(),
    );
    if single == multiple {
        let which = if single { "Both" } else { "Neither" };
        return Some((
            pointer.to_string(),
            format!(
                "{at}: Internal error: Either StableIngress or StableIngresses must be configured. {which} are configured."
            ),
        ));
    }
    let field = if multiple {
        "stableIngresses"
    } else {
        "stableIngress"
    };
    let pointer = format!("{pointer}/{field}");
    let mut found = Vec::new();
    for name in cfg.stable_ingress_list() {
        let Some(spec) = ingress(name) else {
            // `handleCacheError` names the field as Argo's code spells it, and
            // `field.Invalid` prints a list as Go's %#v does.
            let message = if multiple {
                let list: Vec<String> = cfg
                    .stable_ingress_list()
                    .iter()
                    .map(|n| format!("{n:?}"))
                    .collect();
                format!(
                    "{at}.StableIngresses: Invalid value: []string{{{}}}: {}",
                    list.join(", "),
                    not_found(name)
                )
            } else {
                format!(
                    "{at}.stableIngress: Invalid value: {name:?}: {}",
                    not_found(name)
                )
            };
            return Some((pointer, message));
        };
        found.push((name, spec));
    }
    for (name, spec) in found {
        if spec.paths().any(|p| p.service.is_none()) {
            // `hasIngressRuleWithService` reads `path.Backend.Service.Name`.
            return Some((pointer, NIL_POINTER_PANIC.to_string()));
        }
        if !spec.rule_services().any(|s| s == stable_service) {
            let value = if multiple { name } else { &cfg.stable_ingress };
            return Some((
                pointer,
                format!(
                    "{at}.{field}: Invalid value: {value:?}: {}",
                    no_rules_message(name, stable_service)
                ),
            ));
        }
    }
    None
}

/// `CreatingCanaryIngress`.
pub fn creating_event(name: &str, weight: i32) -> String {
    format!("Creating canary ingress `{name}` with weight `{weight}`")
}

/// `PatchingCanaryIngress`.
pub fn patching_event(name: &str, weight: i32) -> String {
    format!("Updating Ingress `{name}` to desiredWeight '{weight}'")
}

/// The stable Ingress is missing.
pub fn stable_ingress_error(name: &str) -> String {
    format!(
        "error retrieving stableIngress `{name}` from cache: {}",
        not_found(name)
    )
}

/// The canary Ingress exists but another object controls it.
pub fn controlled_by_other_error(name: &str) -> String {
    format!("canary ingress `{name}` controlled by different object")
}

/// A lister's not-found error for an Ingress.
pub fn not_found(name: &str) -> String {
    format!("ingress.networking.k8s.io \"{name}\" not found")
}

/// `ingress `X` has no rules using service S backend` (the build and the validation).
pub fn no_rules_message(ingress: &str, service: &str) -> String {
    format!("ingress `{ingress}` has no rules using service {service} backend")
}

#[cfg(test)]
mod tests;
