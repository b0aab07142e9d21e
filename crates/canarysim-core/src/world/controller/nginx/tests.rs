//! Cases after argo-rollouts' `rollout/trafficrouting/nginx/nginx_test.go` and
//! `utils/ingress/ingress_test.go`.

use serde_json::json;

use super::*;

fn stable() -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": "stable-ingress",
            "annotations": {
                "kubernetes.io/ingress.class": "nginx",
                "nginx.ingress.kubernetes.io/rewrite-target": "/"
            }
        },
        "spec": {
            "ingressClassName": "nginx",
            "tls": [{"hosts": ["fakehost.example.com"], "secretName": "tls"}],
            "rules": [
                {"host": "fakehost.example.com", "http": {"paths": [
                    {"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": "stable-service", "port": {"number": 80}}}}
                ]}},
                {"host": "other.example.com", "http": {"paths": [
                    {"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": "other-service", "port": {"number": 80}}}}
                ]}}
            ]
        }
    })
}

fn config(extra: Value) -> NginxTrafficRouting {
    let mut v = json!({"stableIngress": "stable-ingress"});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    serde_json::from_value(v).unwrap()
}

fn build(cfg: &NginxTrafficRouting, max: Option<i32>, weight: i32) -> Result<Value, String> {
    canary_ingress(
        &stable(),
        "default",
        "rollout-stable-ingress-canary",
        weight,
        &CanaryFor {
            config: cfg,
            stable_service: "stable-service",
            canary_service: "canary-service",
            max_traffic_weight: max,
            owner: json!({"kind": "Rollout", "name": "rollout", "uid": "u1", "controller": true}),
        },
    )
}

#[test]
fn the_canary_ingress_is_named_after_the_rollout_and_the_stable_ingress() {
    assert_eq!(
        canary_ingress_name("rollout", "stable-ingress"),
        "rollout-stable-ingress-canary"
    );
    let long = "a".repeat(300);
    let name = canary_ingress_name(&long, "ing");
    assert_eq!(name.len(), 253);
    assert!(name.ends_with("-canary"));
    assert_eq!(canary_ingress_name("rollout", ""), "");
}

#[test]
fn only_rules_to_the_stable_service_are_copied_and_sent_to_the_canary() {
    let c = build(&config(json!({})), None, 10).unwrap();
    let rules = c["spec"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1, "{c:#}");
    assert_eq!(rules[0]["host"], "fakehost.example.com");
    assert_eq!(
        rules[0]["http"]["paths"][0]["backend"]["service"]["name"],
        "canary-service"
    );
    assert_eq!(c["spec"]["tls"], stable()["spec"]["tls"]);
    assert_eq!(c["spec"]["ingressClassName"], "nginx");
    let a = &c["metadata"]["annotations"];
    assert_eq!(a["kubernetes.io/ingress.class"], "nginx");
    assert_eq!(a["nginx.ingress.kubernetes.io/canary"], "true");
    assert_eq!(a["nginx.ingress.kubernetes.io/canary-weight"], "10");
    // "no other annotations matter": the stable's rewrite-target is not copied.
    assert!(
        a.get("nginx.ingress.kubernetes.io/rewrite-target")
            .is_none()
    );
    assert!(
        a.get("nginx.ingress.kubernetes.io/canary-weight-total")
            .is_none()
    );
    assert_eq!(c["metadata"]["ownerReferences"][0]["uid"], "u1");
}

#[test]
fn annotations_take_the_prefix_and_the_weight_total() {
    let cfg = config(json!({
        "annotationPrefix": "custom.nginx.ingress.kubernetes.io",
        "additionalIngressAnnotations": {"canary-by-header": "X-Canary", "canary-weight": "99"},
        "canaryIngressAnnotations": {"my-org/team": "a"}
    }));
    let c = build(&cfg, Some(1000), 5).unwrap();
    let a = &c["metadata"]["annotations"];
    assert_eq!(
        a["custom.nginx.ingress.kubernetes.io/canary-by-header"],
        "X-Canary"
    );
    // canary and canary-weight are written last: they win.
    assert_eq!(a["custom.nginx.ingress.kubernetes.io/canary-weight"], "5");
    assert_eq!(
        a["custom.nginx.ingress.kubernetes.io/canary-weight-total"],
        "1000"
    );
    assert_eq!(a["my-org/team"], "a");
}

#[test]
fn a_stable_ingress_without_the_stable_service_is_an_error() {
    let mut cfg = config(json!({}));
    let e = canary_ingress(
        &stable(),
        "default",
        "n",
        10,
        &CanaryFor {
            config: &cfg,
            stable_service: "missing-service",
            canary_service: "canary-service",
            max_traffic_weight: None,
            owner: json!({}),
        },
    )
    .unwrap_err();
    assert_eq!(
        e,
        "ingress `stable-ingress` has no rules using service missing-service backend"
    );
    cfg.stable_ingress.clear();
    assert!(build(&cfg, None, 1).is_ok());
}

#[test]
fn the_patch_keeps_foreign_annotations_and_unknown_fields_and_drops_labels() {
    let desired = build(&config(json!({})), None, 20).unwrap();
    let mut current = build(&config(json!({})), None, 10).unwrap();
    current["metadata"]["annotations"]["rancher.io/managed"] = json!("yes");
    current["metadata"]["labels"] = json!({"team": "a"});
    current["metadata"]["resourceVersion"] = json!("7");
    current["spec"]["defaultBackend"] = json!({"service": {"name": "x"}});
    current["spec"]["x-unknown"] = json!(1);
    let next = patched(&current, &desired).unwrap();
    let a = &next["metadata"]["annotations"];
    assert_eq!(a["nginx.ingress.kubernetes.io/canary-weight"], "20");
    assert_eq!(a["rancher.io/managed"], "yes");
    assert!(next["metadata"].get("labels").is_none());
    assert_eq!(next["metadata"]["resourceVersion"], "7");
    assert!(next["spec"].get("defaultBackend").is_none());
    assert_eq!(next["spec"]["x-unknown"], 1);
    assert_eq!(
        patched(&next, &desired),
        None,
        "a second patch changes nothing"
    );
}

#[test]
fn control_is_by_the_controller_reference_uid() {
    let c = build(&config(json!({})), None, 1).unwrap();
    assert!(controlled_by(&c, "u1"));
    assert!(!controlled_by(&c, "u2"));
    assert!(!controlled_by(&stable(), "u1"));
}
