//! Tests of the parent module.
use super::*;
use serde_json::json;

/// The rollout of seed 004 (rollouts-demo, Istio host-level split).
fn seed() -> Value {
    json!({
        "replicas": 4,
        "strategy": {
            "canary": {
                "canaryService": "rollouts-demo-canary",
                "stableService": "rollouts-demo-stable",
                "trafficRouting": {
                    "istio": {
                        "virtualService": {"name": "rollouts-demo-vsvc", "routes": ["primary"]}
                    }
                },
                "steps": [
                    {"setWeight": 20},
                    {"pause": {}},
                    {"setWeight": 40},
                    {"pause": {"duration": "1m"}},
                    {"setWeight": 60},
                    {"pause": {"duration": "1m"}},
                    {"setWeight": 80},
                    {"pause": {"duration": "1m"}},
                    {"setWeight": 100}
                ]
            }
        },
        "revisionHistoryLimit": 2,
        "selector": {"matchLabels": {"app": "rollouts-demo"}},
        "template": {
            "metadata": {"labels": {"app": "rollouts-demo"}},
            "spec": {
                "containers": [{
                    "name": "rollouts-demo",
                    "image": "argoproj/rollouts-demo:blue",
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                    "resources": {"requests": {"memory": "32Mi", "cpu": "5m"}}
                }]
            }
        }
    })
}

/// Seed with `f` applied to `spec.strategy.canary`.
fn seed_canary(f: impl FnOnce(&mut Value)) -> Value {
    let mut spec = seed();
    f(&mut spec["strategy"]["canary"]);
    spec
}

fn errors(spec: &Value) -> Vec<String> {
    let typed: RolloutSpec = serde_json::from_value(spec.clone()).expect("typed spec");
    validate_rollout(spec, &typed)
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn first(spec: &Value) -> FieldError {
    let typed: RolloutSpec = serde_json::from_value(spec.clone()).expect("typed spec");
    first_validation_error(spec, &typed).expect("an error")
}

fn steps(s: Value) -> impl FnOnce(&mut Value) {
    move |c| c["steps"] = s
}

#[test]
fn seed_rollout_is_valid() {
    assert_eq!(errors(&seed()), Vec::<String>::new());
    let typed: RolloutSpec = serde_json::from_value(seed()).unwrap();
    assert!(first_validation_error(&seed(), &typed).is_none());
}

#[test]
fn subset_level_split_without_services_is_valid() {
    let spec = seed_canary(|c| {
        c.as_object_mut().unwrap().remove("canaryService");
        c.as_object_mut().unwrap().remove("stableService");
        c["trafficRouting"]["istio"]["destinationRule"] = json!({
            "name": "rollouts-demo-destrule",
            "canarySubsetName": "canary",
            "stableSubsetName": "stable"
        });
    });
    assert_eq!(errors(&spec), Vec::<String>::new());
}

#[test]
fn istio_with_ping_pong_needs_no_services() {
    let spec = seed_canary(|c| {
        c.as_object_mut().unwrap().remove("canaryService");
        c.as_object_mut().unwrap().remove("stableService");
        c["pingPong"] = json!({"pingService": "ping", "pongService": "pong"});
    });
    assert_eq!(errors(&spec), Vec::<String>::new());
}

#[test]
fn canary_and_stable_services_required_for_host_level_istio() {
    let spec = seed_canary(|c| {
        c.as_object_mut().unwrap().remove("canaryService");
        c.as_object_mut().unwrap().remove("stableService");
    });
    assert_eq!(
        errors(&spec),
        vec![
            "spec.strategy.stableService: Invalid value: \"\": Canary service and Stable service must to be set to use Traffic Routing",
            "spec.strategy.canaryService: Invalid value: \"\": Canary service and Stable service must to be set to use Traffic Routing",
        ]
    );
    assert_eq!(
        first(&spec).pointer(),
        "/spec/strategy/canary/stableService"
    );
}

#[test]
fn same_service_for_stable_and_canary() {
    let spec = seed_canary(|c| c["canaryService"] = json!("rollouts-demo-stable"));
    assert_eq!(
        first(&spec).to_string(),
        "spec.strategy.stableService: Invalid value: \"rollouts-demo-stable\": This rollout uses the same service for the stable and canary services, but two different services are required."
    );
}

#[test]
fn set_weight_out_of_range() {
    let spec = seed_canary(steps(json!([{"setWeight": 120}])));
    let err = first(&spec);
    assert_eq!(
        err.to_string(),
        "spec.strategy.steps[0].setWeight: Invalid value: 120: SetWeight needs to be between 0 and 100"
    );
    assert_eq!(err.pointer(), "/spec/strategy/canary/steps/0/setWeight");
    let spec = seed_canary(steps(json!([{"setWeight": -1}])));
    assert_eq!(
        first(&spec).to_string(),
        "spec.strategy.steps[0].setWeight: Invalid value: -1: SetWeight needs to be between 0 and 100"
    );
}

#[test]
fn max_traffic_weight_rejected_with_istio_but_raises_the_set_weight_limit() {
    let spec = seed_canary(|c| {
        c["trafficRouting"]["maxTrafficWeight"] = json!(1000);
        c["steps"] = json!([{"setWeight": 200}, {"setWeight": 1001}]);
    });
    assert_eq!(
        errors(&spec),
        vec![
            "spec.strategy.trafficRouting.maxTrafficWeight: Invalid value: 1000: Canary maxTrafficWeight in traffic routing only supported in Nginx and Plugins",
            "spec.strategy.steps[1].setWeight: Invalid value: 1001: SetWeight needs to be between 0 and 1000",
        ]
    );
}

#[test]
fn max_traffic_weight_allowed_with_nginx_or_plugins() {
    for router in [
        json!({"nginx": {"stableIngress": "ing"}}),
        json!({"plugins": {"argoproj-labs/gatewayAPI": {}}}),
    ] {
        let spec = seed_canary(|c| {
            let mut tr = router;
            tr["maxTrafficWeight"] = json!(1000);
            c["trafficRouting"] = tr;
        });
        assert!(
            !errors(&spec).iter().any(|e| e.contains("maxTrafficWeight")),
            "{:?}",
            errors(&spec)
        );
    }
}

#[test]
fn max_surge_and_max_unavailable_both_zero() {
    // Upstream TestInvalidMaxSurgeMaxUnavailable: ints, "0" and "0%" all count as zero.
    let cases = [
        (json!(0), json!(0), "0"),
        (json!("0"), json!(0), "\"0\""),
        (json!("0%"), json!(0), "\"0%\""),
        (json!(0), json!("0"), "0"),
        (json!(0), json!("0%"), "0"),
        (json!("0"), json!("0"), "\"0\""),
        (json!("0%"), json!("0%"), "\"0%\""),
    ];
    for (surge, unavailable, shown) in cases {
        let spec = seed_canary(|c| {
            c["maxSurge"] = surge;
            c["maxUnavailable"] = unavailable;
        });
        let err = first(&spec);
        assert_eq!(
            err.to_string(),
            format!(
                "spec.strategy.maxSurge: Invalid value: {shown}: MaxSurge and MaxUnavailable both can not be zero"
            )
        );
        assert_eq!(err.pointer(), "/spec/strategy/canary/maxSurge");
    }
    // The default for the other one is "25".
    let spec = seed_canary(|c| c["maxSurge"] = json!(0));
    assert_eq!(errors(&spec), Vec::<String>::new());
}

fn header_route_step(name: &str, value: Value) -> Value {
    json!({"setHeaderRoute": {"name": name, "match": [{"headerName": "agent", "headerValue": value}]}})
}

#[test]
fn header_route_needs_managed_routes() {
    let spec = seed_canary(steps(json!([header_route_step(
        "h",
        json!({"exact": "chrome"})
    )])));
    let err = first(&spec);
    assert_eq!(
        err.to_string(),
        "spec.strategy.trafficRouting.managedRoutes: Required value: Rollout has missing field 'spec.strategy.canary.trafficRouting.managedRoutes'"
    );
    assert_eq!(
        err.pointer(),
        "/spec/strategy/canary/trafficRouting/managedRoutes"
    );
    let rollout = json!({"spec": spec});
    assert_eq!(
        err.existing_pointer(&rollout),
        "/spec/strategy/canary/trafficRouting"
    );
}

#[test]
fn step_route_must_be_a_managed_route() {
    let spec = seed_canary(|c| {
        c["trafficRouting"]["managedRoutes"] = json!([{"name": "not-in-steps"}]);
        c["steps"] = json!([header_route_step("h", json!({"exact": "chrome"}))]);
    });
    assert_eq!(
        first(&spec).to_string(),
        "spec.strategy.steps[0].setHeaderRoute: Invalid value: \"h\": Steps define a route that does not exist in spec.strategy.canary.trafficRouting.managedRoutes"
    );
    let spec = seed_canary(|c| {
        c["trafficRouting"]["managedRoutes"] = json!([{"name": "not-in-steps"}]);
        c["steps"] =
            json!([{"setMirrorRoute": {"name": "m", "match": [{"method": {"exact": "GET"}}]}}]);
    });
    assert_eq!(
        first(&spec).to_string(),
        "spec.strategy.steps[0].setMirrorRoute: Invalid value: \"m\": Steps define a route that does not exist in spec.strategy.canary.trafficRouting.managedRoutes"
    );
}

#[test]
fn valid_header_and_mirror_routes() {
    let spec = seed_canary(|c| {
        c["trafficRouting"]["managedRoutes"] = json!([{"name": "h"}, {"name": "m"}]);
        c["steps"] = json!([
            header_route_step("h", json!({"regex": "chrome(.*)"})),
            {"setMirrorRoute": {"name": "m", "percentage": 35,
                "match": [{"method": {"exact": "GET"}, "path": {"prefix": "/"}}]}},
            {"setHeaderRoute": {"name": "h"}},
            {"setMirrorRoute": {"name": "m"}}
        ]);
    });
    assert_eq!(errors(&spec), Vec::<String>::new());
}

#[test]
fn string_match_with_two_values() {
    let spec = seed_canary(|c| {
        c["trafficRouting"]["managedRoutes"] = json!([{"name": "h"}]);
        c["steps"] = json!([header_route_step(
            "h",
            json!({"exact": "chrome", "regex": "chrome(.*)"})
        )]);
    });
    let err = first(&spec);
    assert_eq!(
        err.to_string(),
        "spec.strategy.steps[0].setHeaderRoute.match[0]: Invalid value: {\"exact\":\"chrome\",\"regex\":\"chrome(.*)\"}: StringMatch match value must have exactly one of the following: exact, regex, prefix"
    );
    assert_eq!(
        err.pointer(),
        "/spec/strategy/canary/steps/0/setHeaderRoute/match/0"
    );
}

#[test]
fn string_match_without_value() {
    let spec = seed_canary(|c| {
        c["trafficRouting"]["managedRoutes"] = json!([{"name": "h"}]);
        c["steps"] = json!([{"setHeaderRoute": {"name": "h", "match": [{"headerName": "agent"}]}}]);
    });
    assert_eq!(
        errors(&spec),
        vec![
            "spec.strategy.steps[0].setHeaderRoute.match[0]: Invalid value: null: StringMatch value missed, match value must have one of the following: exact, regex, prefix"
        ]
    );
    // Mirror match with an empty method: reported twice, as upstream checks method twice.
    let spec = seed_canary(|c| {
        c["trafficRouting"]["managedRoutes"] = json!([{"name": "m"}]);
        c["steps"] = json!([{"setMirrorRoute": {"name": "m", "match": [{"method": {}}]}}]);
    });
    let msg = "spec.strategy.steps[0].setMirrorRoute.match[0]: Invalid value: {}: StringMatch value missed, match value must have one of the following: exact, regex, prefix";
    assert_eq!(errors(&spec), vec![msg, msg]);
}

#[test]
fn header_route_requires_a_supported_router() {
    let spec = seed_canary(|c| {
        c.as_object_mut().unwrap().remove("trafficRouting");
        c["steps"] = json!([header_route_step("h", json!({"exact": "chrome"}))]);
    });
    assert_eq!(
        first(&spec).to_string(),
        "spec.strategy.steps[0].setHeaderRoute: Invalid value: {\"name\":\"h\",\"match\":[{\"headerName\":\"agent\",\"headerValue\":{\"exact\":\"chrome\"}}]}: SetHeaderRoute requires TrafficRouting, supports Istio and ALB and Apisix"
    );
    // Nginx is not a header router.
    let spec = seed_canary(|c| {
        c["trafficRouting"] =
            json!({"nginx": {"stableIngress": "ing"}, "managedRoutes": [{"name": "h"}]});
        c["steps"] = json!([header_route_step("h", json!({"exact": "chrome"}))]);
    });
    assert!(
        first(&spec)
            .to_string()
            .ends_with("SetHeaderRoute requires TrafficRouting, supports Istio and ALB and Apisix")
    );
}

#[test]
fn mirror_route_requires_istio_or_plugins() {
    // Upstream "using SetMirrorRoute step without the traffic routing".
    let spec = seed_canary(|c| {
        c.as_object_mut().unwrap().remove("trafficRouting");
        c["steps"] = json!([{"setMirrorRoute": {"name": "test-mirror-1"}}]);
    });
    assert_eq!(
        first(&spec).to_string(),
        "spec.strategy.steps[0].setMirrorRoute: Invalid value: {\"name\":\"test-mirror-1\"}: SetMirrorRoute requires TrafficRouting, supports Istio and Plugins"
    );
    let spec = seed_canary(|c| {
        c["trafficRouting"] = json!({"plugins": {"p": {}}, "managedRoutes": [{"name": "m"}]});
        c["steps"] = json!([{"setMirrorRoute": {"name": "m"}}]);
    });
    assert_eq!(errors(&spec), Vec::<String>::new());
}

#[test]
fn alb_header_route_accepts_exact_only() {
    let spec = seed_canary(|c| {
        c["trafficRouting"] = json!({"alb": {"ingress": "ing", "rootService": "root"}, "managedRoutes": [{"name": "h"}]});
        c["steps"] = json!([header_route_step("h", json!({"prefix": "chrome"}))]);
    });
    assert_eq!(
        first(&spec).to_string(),
        "spec.strategy.steps[0].setHeaderRoute.match[0]: Invalid value: {\"prefix\":\"chrome\"}: SetHeaderRoute match value invalid. ALB supports 'exact' value only"
    );
}

#[test]
fn set_canary_scale_requires_traffic_routing() {
    let spec = seed_canary(|c| {
        c.as_object_mut().unwrap().remove("trafficRouting");
        c["steps"] = json!([{"setCanaryScale": {"replicas": 1}}]);
    });
    let err = first(&spec);
    assert_eq!(
        err.to_string(),
        "spec.strategy.trafficRouting: Required value: SetCanaryScale requires TrafficRouting to be set"
    );
    assert_eq!(err.pointer(), "/spec/strategy/canary/trafficRouting");
    // Both weight and replicas: upstream does not object.
    let spec = seed_canary(steps(
        json!([{"setCanaryScale": {"weight": 20, "replicas": 3}}]),
    ));
    assert_eq!(errors(&spec), Vec::<String>::new());
}

#[test]
fn dynamic_stable_scale_needs_traffic_routing() {
    let spec = seed_canary(|c| {
        c.as_object_mut().unwrap().remove("trafficRouting");
        c["dynamicStableScale"] = json!(true);
    });
    assert_eq!(
        first(&spec).to_string(),
        "spec.strategy.dynamicStableScale: Invalid value: true: Canary dynamicStableScale can only be used with traffic routing"
    );
}

#[test]
fn dynamic_stable_scale_excludes_scale_down_delay() {
    let spec = seed_canary(|c| {
        c["dynamicStableScale"] = json!(true);
        c["scaleDownDelaySeconds"] = json!(60);
    });
    assert_eq!(
        first(&spec).to_string(),
        "spec.strategy.dynamicStableScale: Invalid value: true: Canary dynamicStableScale cannot be used with scaleDownDelaySeconds"
    );
}

#[test]
fn scale_down_delay_needs_traffic_routing() {
    let spec = seed_canary(|c| {
        c.as_object_mut().unwrap().remove("trafficRouting");
        c["scaleDownDelaySeconds"] = json!(60);
    });
    assert_eq!(
        first(&spec).to_string(),
        "spec.strategy.scaleDownDelaySeconds: Invalid value: 60: Canary scaleDownDelaySeconds can only be used with traffic routing"
    );
}

#[test]
fn empty_step() {
    let spec = seed_canary(steps(json!([{"setWeight": 10}, {}])));
    let err = first(&spec);
    assert_eq!(
        err.to_string(),
        "spec.strategy.steps[1]: Invalid value: \"step.Experiment: true step.Pause: true step.SetWeight: true step.Analysis: true step.SetCanaryScale: true step.SetHeaderRoute: true step.SetMirrorRoute: true step.Plugin: true\": Step must have one of the following set: experiment, setWeight, setCanaryScale, plugin or pause"
    );
    assert_eq!(err.pointer(), "/spec/strategy/canary/steps/1");
    // A plugin step alone is a step.
    let spec = seed_canary(steps(json!([{"plugin": {"name": "p"}}])));
    assert_eq!(errors(&spec), Vec::<String>::new());
}

#[test]
fn step_with_two_types() {
    let spec = seed_canary(steps(json!([{"setWeight": 10, "pause": {"duration": 1}}])));
    assert_eq!(
        errors(&spec),
        vec![
            "spec.strategy.steps[0]: Invalid value: \"step.Experiment: false step.Pause: true step.SetWeight: true step.Analysis: false\": Step must have one of the following set: experiment, setWeight, setCanaryScale, plugin or pause"
        ]
    );
    // setWeight + setCanaryScale is not counted upstream.
    let spec = seed_canary(steps(
        json!([{"setWeight": 10, "setCanaryScale": {"weight": 10}}]),
    ));
    assert_eq!(errors(&spec), Vec::<String>::new());
}

#[test]
fn pause_duration_must_not_be_negative_or_junk() {
    for (duration, shown) in [
        (json!(-1), "-1"),
        (json!("soon"), "-1"),
        (json!("-5s"), "-5"),
        (json!(""), "-1"),
    ] {
        let spec = seed_canary(steps(json!([{"pause": {"duration": duration}}])));
        let err = first(&spec);
        assert_eq!(
            err.to_string(),
            format!(
                "spec.strategy.steps[0].pause.duration: Invalid value: {shown}: Duration needs to be greater than 0"
            )
        );
        assert_eq!(
            err.pointer(),
            "/spec/strategy/canary/steps/0/pause/duration"
        );
    }
    for ok in [
        json!(0),
        json!("0"),
        json!("30"),
        json!("1h30m"),
        json!("1.5s"),
        json!("300ms"),
    ] {
        let spec = seed_canary(steps(json!([{"pause": {"duration": ok}}])));
        assert_eq!(errors(&spec), Vec::<String>::new());
    }
}

#[test]
fn virtual_service_config_is_checked_after_the_spec() {
    let spec = seed_canary(|c| c["trafficRouting"]["istio"] = json!({}));
    assert_eq!(errors(&spec), Vec::<String>::new());
    let err = first(&spec);
    assert_eq!(
        err.to_string(),
        "spec.strategy.canary.trafficRouting.istio: Internal error: either VirtualService or VirtualServices must be configured"
    );
    assert_eq!(err.pointer(), "/spec/strategy/canary/trafficRouting/istio");
    let spec = seed_canary(|c| {
        c["trafficRouting"]["istio"]["virtualServices"] = json!([{"name": "a"}]);
    });
    assert_eq!(first(&spec).kind, ErrorKind::Internal);
    let spec = seed_canary(|c| {
        c["trafficRouting"]["istio"] =
            json!({"virtualServices": [{"name": "a", "routes": ["r"]}, {"name": "b"}]});
    });
    let typed: RolloutSpec = serde_json::from_value(spec.clone()).unwrap();
    assert!(first_validation_error(&spec, &typed).is_none());
}

#[test]
fn selector_rules() {
    let mut spec = seed();
    spec.as_object_mut().unwrap().remove("selector");
    assert_eq!(
        errors(&spec),
        vec![
            "spec.selector: Required value: Rollout has missing field '.spec.selector'",
            "spec.template.metadata.labels: Invalid value: {\"app\":\"rollouts-demo\"}: `selector` does not match template `labels`",
        ]
    );

    let mut spec = seed();
    spec["selector"] = json!({});
    assert_eq!(
        errors(&spec),
        vec!["spec.selector: Invalid value: {}: empty selector is invalid for deployment"]
    );

    let mut spec = seed();
    spec["template"]["metadata"]["labels"] = json!({"app": "other", "tier": "web"});
    let err = first(&spec);
    assert_eq!(
        err.to_string(),
        "spec.template.metadata.labels: Invalid value: {\"app\":\"other\",\"tier\":\"web\"}: `selector` does not match template `labels`"
    );
    assert_eq!(err.pointer(), "/spec/template/metadata/labels");

    let mut spec = seed();
    spec["selector"] = json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["rollouts-demo", "x"]}]});
    assert_eq!(errors(&spec), Vec::<String>::new());

    let mut spec = seed();
    spec["selector"] =
        json!({"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["x"]}]});
    assert_eq!(
        errors(&spec),
        vec![
            "spec.selector.matchExpressions[0].operator: Invalid value: \"Equals\": not a valid selector operator",
            "spec.selector: Invalid value: {\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"Equals\",\"values\":[\"x\"]}]}: invalid label selector",
        ]
    );
}

#[test]
fn replicas_min_ready_and_progress_deadline() {
    let mut spec = seed();
    spec["replicas"] = json!(-1);
    assert_eq!(
        first(&spec).to_string(),
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
    let mut spec = seed();
    spec["minReadySeconds"] = json!(-5);
    assert_eq!(
        first(&spec).to_string(),
        "spec.minReadySeconds: Invalid value: -5: must be greater than or equal to 0"
    );
    let mut spec = seed();
    spec["minReadySeconds"] = json!(601);
    assert_eq!(
        first(&spec).to_string(),
        "spec.progressDeadlineSeconds: Invalid value: 600: must be greater than minReadySeconds"
    );
    let mut spec = seed();
    spec["minReadySeconds"] = json!(601);
    spec["progressDeadlineSeconds"] = json!(700);
    assert_eq!(errors(&spec), Vec::<String>::new());
}

#[test]
fn exactly_one_strategy() {
    let mut spec = seed();
    spec["strategy"] = json!({});
    let err = first(&spec);
    assert_eq!(
        err.to_string(),
        "spec.strategy.strategy: Required value: Rollout has missing field '.spec.strategy.canary or .spec.strategy.blueGreen'"
    );
    assert_eq!(err.pointer(), "/spec/strategy");
    let mut spec = seed();
    spec["strategy"]["blueGreen"] = json!({"activeService": "a", "previewService": "p"});
    assert_eq!(
        first(&spec).to_string(),
        "spec.strategy.strategy: Invalid value: \"blueGreen: true canary: true\": Multiple Strategies can not be listed"
    );
}

#[test]
fn pod_template_containers() {
    let mut spec = seed();
    spec["template"]["spec"]["containers"] = json!([]);
    assert_eq!(
        errors(&spec),
        vec!["spec.template.spec.containers: Required value"]
    );
    let mut spec = seed();
    spec["template"]["spec"]["containers"] = json!([{"name": "Demo"}]);
    assert_eq!(
        errors(&spec),
        vec![
            "spec.template.spec.containers[0].name: Invalid value: \"Demo\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            "spec.template.spec.containers[0].image: Required value",
        ]
    );
    let mut spec = seed();
    spec["template"]["spec"]["restartPolicy"] = json!("Never");
    assert_eq!(
        errors(&spec),
        vec![
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
        ]
    );
}

#[test]
fn analysis_args_must_reference_supported_metadata() {
    // Upstream "invalid metadata references in analysis step".
    let spec = seed_canary(steps(json!([{"analysis": {"args": [
        {"name": "metadata.labels['app']", "valueFrom": {"fieldRef": {"fieldPath": "metadata.label['app']"}}},
        {"name": "value-key", "value": "hardcoded-value"}
    ]}}])));
    assert_eq!(
        errors(&spec),
        vec![
            "spec.strategy.steps[0].analyses: Invalid value: [{\"name\":\"metadata.labels['app']\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"metadata.label['app']\"}}},{\"name\":\"value-key\",\"value\":\"hardcoded-value\"}]: Analyses arguments must refer to valid object metadata supported by downwardAPI"
        ]
    );
    let spec = seed_canary(steps(json!([{"analysis": {"args": [
        {"name": "a", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "b", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ]}}])));
    assert_eq!(errors(&spec), Vec::<String>::new());
}

#[test]
fn experiment_weights_need_a_weighted_router() {
    let exp =
        json!([{"experiment": {"templates": [{"name": "t", "specRef": "canary", "weight": 20}]}}]);
    let spec = seed_canary(steps(exp.clone()));
    assert_eq!(errors(&spec), Vec::<String>::new());
    let spec = seed_canary(|c| {
        c.as_object_mut().unwrap().remove("trafficRouting");
        c["steps"] = exp;
    });
    assert_eq!(
        errors(&spec),
        vec![
            "spec.strategy.steps[0].experiment.templates[0].weight: Invalid value: 20: Experiment template weight cannot be set unless TrafficRouting is enabled"
        ]
    );
}

#[test]
fn ping_pong_rules() {
    let spec = seed_canary(|c| {
        c["pingPong"] = json!({"pingService": "ping", "pongService": "ping"});
    });
    assert_eq!(
        errors(&spec),
        vec![
            "spec.strategy.pingPong.pingService: Invalid value: \"ping\": This rollout uses the same service for the ping and pong services, but two different services are required."
        ]
    );
    let spec = seed_canary(|c| {
        c["pingPong"] = json!({"pingService": "ping", "pongService": "pong"});
        c["trafficRouting"] = json!({"nginx": {"stableIngress": "ing"}});
    });
    assert_eq!(
        first(&spec).to_string(),
        "spec.strategy.trafficRouting.alb: Invalid value: null: Ping-pong feature works with the ALB and Istio traffic routers only"
    );
}

#[test]
fn anti_affinity() {
    let spec = seed_canary(|c| c["antiAffinity"] = json!({}));
    assert_eq!(
        errors(&spec),
        vec![
            "spec.strategy.antiAffinity: Invalid value: \"antiAffinity.PreferredDuringSchedulingIgnoredDuringExecution: false antiAffinity.RequiredDuringSchedulingIgnoredDuringExecution: false\": AntiAffinity must have exactly one strategy listed"
        ]
    );
    let spec = seed_canary(|c| {
        c["antiAffinity"] =
            json!({"preferredDuringSchedulingIgnoredDuringExecution": {"weight": 101}})
    });
    let err = first(&spec);
    assert_eq!(
        err.to_string(),
        "spec.strategy.antiAffinity.weight: Invalid value: 101: AntiAffinity weight must be between 1-100"
    );
    assert_eq!(
        err.pointer(),
        "/spec/strategy/canary/antiAffinity/preferredDuringSchedulingIgnoredDuringExecution/weight"
    );
}

#[test]
fn invalid_spec_condition_message() {
    let spec = seed_canary(steps(json!([{"setWeight": 120}])));
    assert_eq!(
        invalid_spec_message("rollouts-demo", &first(&spec)),
        "The Rollout \"rollouts-demo\" is invalid: spec.strategy.steps[0].setWeight: Invalid value: 120: SetWeight needs to be between 0 and 100"
    );
}

#[test]
fn go_renderings() {
    assert_eq!(
        crate::go::quote("a\"b\\c\n\u{1}é"),
        "\"a\\\"b\\\\c\\n\\x01é\""
    );
    assert_eq!(
        crate::go::json(&json!({"k": "<a&b>\u{2028}\u{1}"})),
        "{\"k\":\"\\u003ca\\u0026b\\u003e\\u2028\\u0001\"}"
    );
}

#[test]
fn label_syntax_messages() {
    assert_eq!(
        qualified_name_errors("-key"),
        vec![
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        ]
    );
    assert!(is_qualified_name("app.kubernetes.io/name"));
    assert!(label_value_errors("").is_empty());
    assert_eq!(label_value_errors("-v").len(), 1);
}
