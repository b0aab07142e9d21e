//! The plugin's writes on HTTPRoutes, from its `httproute.go` and `labels.go`.

use serde_json::{Value, json};

use super::*;
use crate::model::rollout::HeaderRoutingMatch;

const CTX: PluginContext = PluginContext {
    stable: "argo-rollouts-stable-service",
    canary: "argo-rollouts-canary-service",
    managed: &[],
};

/// The plugin's getting-started route.
fn route() -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "argo-rollouts-http-route", "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "traefik-gateway", "namespace": "default"}],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                "backendRefs": [
                    {"name": "argo-rollouts-stable-service", "kind": "Service", "port": 80},
                    {"name": "argo-rollouts-canary-service", "kind": "Service", "port": 80, "x-unknown": 1}
                ]
            }]
        }
    })
}

fn label() -> (String, String) {
    (IN_PROGRESS_LABEL.0.into(), IN_PROGRESS_LABEL.1.into())
}

#[test]
fn the_config_names_its_routes_and_defaults_the_namespace_to_the_rollouts() {
    let plugins = json!({PLUGIN: {"httpRoutes": [{"name": "a"}, {"name": "b", "useHeaderRoutes": true}],
                                  "httpRoute": "c", "tcpRoute": "t",
                                  "grpcRouteSelector": {"matchLabels": {"app": "g"}}}});
    let c = PluginConfig::of(Some(&plugins), "shop").unwrap();
    assert_eq!(c.namespace, "shop");
    let names: Vec<(RouteKind, &str, bool)> = c
        .routes
        .iter()
        .map(|r| (r.kind, r.name.as_str(), r.use_header_routes))
        .collect();
    assert_eq!(
        names,
        [
            (RouteKind::Http, "a", false),
            (RouteKind::Http, "b", true),
            (RouteKind::Http, "c", true),
            (RouteKind::Tcp, "t", true)
        ]
    );
    let labels = [("app".to_string(), "g".to_string())].into_iter().collect();
    assert_eq!(c.selectors, [(RouteKind::Grpc, labels)]);
    assert_eq!(c.in_progress_label, Some(label()));

    let none =
        json!({PLUGIN: {"namespace": "edge", "disableInProgressLabel": true, "grpcRoutes": []}});
    let c = PluginConfig::of(Some(&none), "shop").unwrap();
    assert_eq!(
        (c.namespace.as_str(), c.routes.len(), c.in_progress_label),
        ("edge", 0, None),
        "an empty list names no route"
    );
    assert_eq!(
        PluginConfig::of(Some(&json!({"other/plugin": {}})), "shop"),
        None
    );
}

#[test]
fn set_weight_writes_both_backends_and_labels_the_route_in_progress() {
    let next = set_weight(&route(), RouteKind::Http, &CTX, 20, Some(&label()))
        .unwrap()
        .unwrap();
    let backends = &next["spec"]["rules"][0]["backendRefs"];
    assert_eq!(backends[0]["weight"], 80);
    assert_eq!(backends[1]["weight"], 20);
    assert_eq!(
        backends[1]["x-unknown"], 1,
        "fields the plugin does not know survive"
    );
    assert_eq!(
        next["metadata"]["labels"],
        json!({"rollouts.argoproj.io/gatewayapi-canary": "in-progress"})
    );
    assert_eq!(
        set_weight(&next, RouteKind::Http, &CTX, 20, Some(&label())).unwrap(),
        None,
        "nothing to write twice"
    );
    let done = set_weight(&next, RouteKind::Http, &CTX, 0, Some(&label()))
        .unwrap()
        .unwrap();
    assert_eq!(
        done["metadata"]["labels"],
        json!({}),
        "weight 0 removes the label"
    );
    assert_eq!(done["spec"]["rules"][0]["backendRefs"][0]["weight"], 100);
}

#[test]
fn set_weight_fails_when_either_service_is_missing_from_every_rule() {
    let mut r = route();
    r["spec"]["rules"][0]["backendRefs"][1]["name"] = json!("other");
    assert_eq!(
        set_weight(&r, RouteKind::Http, &CTX, 20, None),
        Err("backendRef was not found in httpRoute".to_string())
    );
}

#[test]
fn set_weight_writes_every_rule_naming_a_service_but_skips_canary_only_rules() {
    let mut r = route();
    let rules = r["spec"]["rules"].as_array_mut().unwrap();
    rules.push(json!({"backendRefs": [{"name": "argo-rollouts-stable-service", "port": 80}]}));
    rules.push(json!({"name": "pinned", "backendRefs": [{"name": "argo-rollouts-canary-service", "port": 80}]}));
    let next = set_weight(&r, RouteKind::Http, &CTX, 30, None)
        .unwrap()
        .unwrap();
    let rules = &next["spec"]["rules"];
    assert_eq!(
        rules[1]["backendRefs"][0]["weight"], 70,
        "a stable-only rule gets the rest"
    );
    assert_eq!(
        rules[2]["backendRefs"][0].get("weight"),
        None,
        "a canary-only rule is the plugin's own"
    );
}

fn header_step(name: &str, value: StringMatch) -> SetHeaderRoute {
    SetHeaderRoute {
        name: name.into(),
        matches: Some(vec![HeaderRoutingMatch {
            header_name: "X-Canary".into(),
            header_value: Some(value),
        }]),
    }
}

#[test]
fn a_header_route_is_a_canary_only_rule_per_source_rule_appended_after_them() {
    let mut r = route();
    let second = json!({"matches": [{"path": {"type": "Exact", "value": "/api"}, "method": "GET"}],
                        "backendRefs": [{"name": "argo-rollouts-stable-service", "port": 80},
                                        {"name": "argo-rollouts-canary-service", "port": 8080}]});
    r["spec"]["rules"].as_array_mut().unwrap().push(second);
    let step = header_step(
        "canary-header",
        StringMatch {
            prefix: Some("yes".into()),
            ..StringMatch::default()
        },
    );
    let managed = ["canary-header".to_string()];
    let ctx = PluginContext {
        managed: &managed,
        ..CTX
    };
    let next = set_header_route(&r, &ctx, &step).unwrap().unwrap();
    let rules = next["spec"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 4);
    let header = json!({"name": "X-Canary", "type": "RegularExpression", "value": "yes.*"});
    assert_eq!(
        rules[2],
        json!({"name": "canary-header",
               "matches": [{"path": {"type": "PathPrefix", "value": "/"}, "headers": [header]}],
               "backendRefs": [{"group": "", "kind": "Service", "name": "argo-rollouts-canary-service", "port": 80}]})
    );
    assert_eq!(rules[3]["name"], "canary-header-1");
    assert_eq!(
        rules[3]["matches"][0],
        json!({"path": {"type": "Exact", "value": "/api"}, "headers": [header], "method": "GET"})
    );
    assert_eq!(rules[3]["backendRefs"][0]["port"], 8080);
    assert_eq!(
        set_header_route(&next, &ctx, &step).unwrap(),
        None,
        "an upsert"
    );

    // The weights never touch the header rules; removing them restores the route.
    let weighted = set_weight(&next, RouteKind::Http, &ctx, 40, None)
        .unwrap()
        .unwrap();
    assert_eq!(
        weighted["spec"]["rules"][2]["backendRefs"][0].get("weight"),
        None
    );
    let removed = remove_managed_routes(&weighted, &ctx).unwrap();
    assert_eq!(removed["spec"]["rules"].as_array().unwrap().len(), 2);
    assert_eq!(remove_managed_routes(&removed, &ctx), None);
}

#[test]
fn tcp_and_tls_routes_get_both_weights_and_their_own_error() {
    let mut r = route();
    r["kind"] = json!("TCPRoute");
    // A canary-only rule is no header rule in a TCPRoute: it is written too.
    r["spec"]["rules"]
        .as_array_mut()
        .unwrap()
        .push(json!({"backendRefs": [{"name": "argo-rollouts-canary-service", "port": 80}]}));
    let next = set_weight(&r, RouteKind::Tcp, &CTX, 25, None)
        .unwrap()
        .unwrap();
    assert_eq!(next["spec"]["rules"][0]["backendRefs"][0]["weight"], 75);
    assert_eq!(next["spec"]["rules"][1]["backendRefs"][0]["weight"], 25);
    let mut gone = route();
    gone["spec"]["rules"][0]["backendRefs"][0]["name"] = json!("other");
    for (kind, error) in [
        (RouteKind::Tcp, "backendRef list was not found in tcpRoute"),
        (RouteKind::Tls, "backendRef list was not found in tlsRoute"),
        (RouteKind::Grpc, "backendRef was not found in grpcRoute"),
    ] {
        assert_eq!(
            set_weight(&gone, kind, &CTX, 25, None),
            Err(error.to_string())
        );
    }
}

#[test]
fn a_grpc_header_rule_keeps_the_method_match_first() {
    let r = json!({"metadata": {"name": "g"}, "spec": {"rules": [{
        "matches": [{"method": {"service": "shop.Cart", "method": "Add"}}],
        "backendRefs": [{"name": "argo-rollouts-stable-service", "port": 80},
                        {"name": "argo-rollouts-canary-service", "port": 80}]}]}});
    let step = header_step(
        "h",
        StringMatch {
            exact: Some("1".into()),
            ..StringMatch::default()
        },
    );
    let next = set_header_route(&r, &CTX, &step).unwrap().unwrap();
    let m = &next["spec"]["rules"][1]["matches"][0];
    assert_eq!(
        serde_json::to_string(m).unwrap(),
        r#"{"method":{"service":"shop.Cart","method":"Add"},"headers":[{"name":"X-Canary","type":"Exact","value":"1"}]}"#
    );
}

#[test]
fn a_header_value_without_exact_prefix_or_regex_is_the_plugins_error() {
    let step = header_step("h", StringMatch::default());
    assert_eq!(
        set_header_route(&route(), &CTX, &step),
        Err("invalid header match type".to_string())
    );
    let removal = SetHeaderRoute {
        name: "h".into(),
        matches: None,
    };
    assert_eq!(set_header_route(&route(), &CTX, &removal), Ok(None));
    // `match: []` reaches the plugin as no match at all (gob sends no empty list).
    let mut r = route();
    r["spec"]["rules"].as_array_mut().unwrap().push(
        json!({"name": "h", "backendRefs": [{"name": "argo-rollouts-canary-service", "port": 80}]}),
    );
    let empty = SetHeaderRoute {
        name: "h".into(),
        matches: Some(Vec::new()),
    };
    let managed = ["h".to_string()];
    let ctx = PluginContext {
        managed: &managed,
        ..CTX
    };
    let next = set_header_route(&r, &ctx, &empty).unwrap().unwrap();
    assert_eq!(next["spec"]["rules"].as_array().unwrap().len(), 1);
}
