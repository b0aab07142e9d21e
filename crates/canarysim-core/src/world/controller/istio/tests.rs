//! Tests of the parent module.
use super::*;
use crate::model::rollout::{HeaderRoutingMatch, PingPong, StringMatch};
use serde_json::json;

// ---- helpers -------------------------------------------------------------------------

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn vref(name: &str, routes: &[&str]) -> IstioVirtualService {
    IstioVirtualService {
        name: name.into(),
        routes: strings(routes),
        ..Default::default()
    }
}

fn tls(port: i64, sni: &[&str]) -> TlsRoute {
    TlsRoute {
        port,
        sni_hosts: strings(sni),
    }
}

fn tcp(port: i64) -> TcpRoute {
    TcpRoute { port }
}

fn host_ctx() -> IstioContext<'static> {
    IstioContext {
        rollout_name: "rollout",
        canary_service: "canary",
        stable_service: "stable",
        destination_rule: None,
        managed_routes: None,
        steps: &[],
    }
}

fn dr_spec(canary: &str, stable: &str, additional: &[&str]) -> IstioDestinationRule {
    IstioDestinationRule {
        name: "istio-destrule".into(),
        canary_subset_name: canary.into(),
        stable_subset_name: stable.into(),
        additional_subset_names: strings(additional),
    }
}

fn subset_ctx(dr: &IstioDestinationRule) -> IstioContext<'_> {
    IstioContext {
        canary_service: "",
        stable_service: "",
        destination_rule: Some(dr),
        ..host_ctx()
    }
}

fn wd(name: &str, weight: i32, hash: &str) -> WeightDestination {
    WeightDestination {
        weight,
        service_name: name.into(),
        pod_template_hash: hash.into(),
    }
}

/// Exact comparison, key order included.
#[track_caller]
fn assert_json(actual: &Value, expected: &Value) {
    assert_eq!(
        serde_json::to_string_pretty(actual).unwrap(),
        serde_json::to_string_pretty(expected).unwrap()
    );
}

fn d(host: &str, weight: i64) -> Value {
    json!({"destination": {"host": host}, "weight": weight})
}

fn ds(host: &str, subset: &str, weight: i64) -> Value {
    json!({"destination": {"host": host, "subset": subset}, "weight": weight})
}

fn sc() -> Value {
    json!([d("stable", 100), d("canary", 0)])
}

fn vs(spec: Value) -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "VirtualService",
        "metadata": {"name": "vsvc", "namespace": "default"},
        "spec": spec
    })
}

fn base_spec() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("gateways".into(), json!(["istio-rollout-gateway"]));
    m.insert("hosts".into(), json!(["istio-rollout.dev.argoproj.io"]));
    m
}

fn vs_with(sections: &[(&str, Value)]) -> Value {
    let mut spec = base_spec();
    for (k, v) in sections {
        spec.insert(k.to_string(), v.clone());
    }
    vs(Value::Object(spec))
}

fn http2() -> Value {
    json!([{"name": "primary", "route": sc()}, {"name": "secondary", "route": sc()}])
}

fn l4_2() -> Value {
    json!([
        {"match": [{"port": 3000}], "route": sc()},
        {"match": [{"port": 3001}], "route": sc()}
    ])
}

fn regular_vsvc() -> Value {
    vs_with(&[("http", http2())])
}

fn regular_tls_vsvc() -> Value {
    vs_with(&[("tls", l4_2())])
}

fn regular_tcp_vsvc() -> Value {
    vs_with(&[("tcp", l4_2())])
}

fn regular_mixed_vsvc() -> Value {
    vs_with(&[("http", http2()), ("tls", l4_2()), ("tcp", l4_2())])
}

fn single_route_vsvc() -> Value {
    vs_with(&[("http", json!([{"route": sc()}]))])
}

fn single_route_subset_vsvc() -> Value {
    vs_with(&[(
        "http",
        json!([{"route": [
            ds("rollout-service", "stable-subset", 100),
            ds("rollout-service", "canary-subset", 0)
        ]}]),
    )])
}

fn regular_vsvc_with_extra() -> Value {
    let retries = json!({
        "attempts": 3,
        "perTryTimeout": "10s",
        "retryOn": "gateway-error,connect-failure,refused-stream"
    });
    let route = json!([
        {"destination": {"host": "stable", "port": {"number": 8443}}, "weight": 100},
        {"destination": {"host": "canary", "port": {"number": 8443}}, "weight": 0}
    ]);
    vs_with(&[(
        "http",
        json!([
            {"name": "primary", "retries": retries, "route": route},
            {"name": "secondary", "retries": retries, "corsPolicy": {
                "allowOrigins": [{"exact": "https://example.com"}],
                "allowMethods": ["POST", "GET"],
                "allowCredentials": false,
                "allowHeaders": ["X-Foo-Bar"],
                "maxAge": "24h"
            }, "route": route}
        ]),
    )])
}

/// Weight of the first destination with this exact host (0 when absent), like Argo's
/// `checkDestination`.
#[track_caller]
fn weight(v: &Value, section: &str, route: usize, host: &str) -> i64 {
    let dests = v["spec"][section][route]["route"].as_array().unwrap();
    let dest = dests
        .iter()
        .find(|d| d["destination"]["host"] == host)
        .unwrap_or_else(|| panic!("Service '{host}' not found within hosts of routes."));
    dest["weight"].as_i64().unwrap_or(0)
}

fn names(v: &Value) -> Vec<String> {
    v["spec"]["http"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap_or("").to_string())
        .collect()
}

#[track_caller]
fn set(v: &Value, r: &IstioVirtualService, ctx: &IstioContext, w: i32) -> Value {
    set_weight(v, r, ctx, w, &[]).unwrap().expect("a write")
}

#[track_caller]
fn set_err(v: &Value, r: &IstioVirtualService, ctx: &IstioContext, w: i32) -> String {
    set_weight(v, r, ctx, w, &[]).unwrap_err().to_string()
}

fn header_step(name: &str, header: &str, value: StringMatch) -> SetHeaderRoute {
    SetHeaderRoute {
        name: name.into(),
        matches: Some(vec![HeaderRoutingMatch {
            header_name: header.into(),
            header_value: Some(value),
        }]),
    }
}

fn exact(s: &str) -> StringMatch {
    StringMatch {
        exact: Some(s.into()),
        ..Default::default()
    }
}

fn mirror_step(name: &str, method: &str, percentage: Option<i32>) -> SetMirrorRoute {
    SetMirrorRoute {
        name: name.into(),
        matches: Some(vec![RouteMatch {
            method: Some(exact(method)),
            ..Default::default()
        }]),
        percentage,
    }
}

// ---- seed 003 ------------------------------------------------------------------------

fn seed_vs(name: &str, port: u32, http_route: &str, sni: Value) -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "VirtualService",
        "metadata": {"name": name},
        "spec": {
            "gateways": ["rollouts-demo-gateway"],
            "hosts": [format!("{name}.local")],
            "http": [{
                "name": http_route,
                "route": [
                    {"destination": {"host": "rollouts-demo-stable", "port": {"number": port}}, "weight": 100},
                    {"destination": {"host": "rollouts-demo-canary", "port": {"number": port}}, "weight": 0}
                ]
            }],
            "tls": [{
                "match": [{"port": 443, "sniHosts": sni}],
                "route": [
                    {"destination": {"host": "rollouts-demo-stable"}, "weight": 100},
                    {"destination": {"host": "rollouts-demo-canary"}, "weight": 0}
                ]
            }],
            "tcp": [{
                "match": [{"port": 8020}],
                "route": [
                    {"destination": {"host": "rollouts-demo-stable"}, "weight": 100},
                    {"destination": {"host": "rollouts-demo-canary"}, "weight": 0}
                ]
            }]
        }
    })
}

fn seed_vsvc1() -> Value {
    seed_vs(
        "rollouts-demo-vsvc1",
        15372,
        "http-primary",
        json!(["reviews.bookinfo.com", "localhost"]),
    )
}

fn seed_vsvc2() -> Value {
    seed_vs(
        "rollouts-demo-vsvc2",
        15373,
        "http-secondary",
        json!(["reviews.bookinfo.com"]),
    )
}

fn seed_refs() -> Vec<IstioVirtualService> {
    let sni = tls(443, &["reviews.bookinfo.com", "localhost"]);
    vec![
        IstioVirtualService {
            name: "rollouts-demo-vsvc1".into(),
            routes: strings(&["http-primary"]),
            tls_routes: vec![sni.clone()],
            tcp_routes: vec![],
        },
        IstioVirtualService {
            name: "rollouts-demo-vsvc2".into(),
            routes: strings(&["http-secondary"]),
            tls_routes: vec![sni],
            tcp_routes: vec![tcp(8020)],
        },
    ]
}

fn seed_ctx() -> IstioContext<'static> {
    IstioContext {
        rollout_name: "rollouts-demo",
        canary_service: "rollouts-demo-canary",
        stable_service: "rollouts-demo-stable",
        ..host_ctx()
    }
}

/// The seed VirtualService with every http/tls/tcp route at stable/canary weights.
fn seed_weighted(name: &str, port: u32, http_route: &str, sni: Value, s: i64, c: i64) -> Value {
    let mut v = seed_vs(name, port, http_route, sni);
    for section in ["http", "tls", "tcp"] {
        v["spec"][section][0]["route"][0]["weight"] = json!(s);
        v["spec"][section][0]["route"][1]["weight"] = json!(c);
    }
    v
}

#[test]
fn seed003_vsvc1_at_weight_20_splits_http_tls_and_tcp() {
    let out = set(&seed_vsvc1(), &seed_refs()[0], &seed_ctx(), 20);
    let expected = json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "VirtualService",
        "metadata": {"name": "rollouts-demo-vsvc1"},
        "spec": {
            "gateways": ["rollouts-demo-gateway"],
            "hosts": ["rollouts-demo-vsvc1.local"],
            "http": [{
                "name": "http-primary",
                "route": [
                    {"destination": {"host": "rollouts-demo-stable", "port": {"number": 15372}}, "weight": 80},
                    {"destination": {"host": "rollouts-demo-canary", "port": {"number": 15372}}, "weight": 20}
                ]
            }],
            "tls": [{
                "match": [{"port": 443, "sniHosts": ["reviews.bookinfo.com", "localhost"]}],
                "route": [
                    {"destination": {"host": "rollouts-demo-stable"}, "weight": 80},
                    {"destination": {"host": "rollouts-demo-canary"}, "weight": 20}
                ]
            }],
            "tcp": [{
                "match": [{"port": 8020}],
                "route": [
                    {"destination": {"host": "rollouts-demo-stable"}, "weight": 80},
                    {"destination": {"host": "rollouts-demo-canary"}, "weight": 20}
                ]
            }]
        }
    });
    assert_json(&out, &expected);
    assert_eq!(
        set_weight_event("rollouts-demo-vsvc1", 20).message,
        "VirtualService `rollouts-demo-vsvc1` set to desiredWeight '20'"
    );
    // Second reconcile at the same weight: no write.
    assert_eq!(
        set_weight(&out, &seed_refs()[0], &seed_ctx(), 20, &[]),
        Ok(None)
    );
}

#[test]
fn seed003_vsvc2_sni_hosts_do_not_match_the_rollout() {
    // The seed's vsvc2 TLS route matches only reviews.bookinfo.com while the rollout lists
    // reviews.bookinfo.com + localhost: Argo finds no TLS route. SetWeight fails after
    // vsvc1 was written, and the referenced-resource check marks the Rollout invalid.
    let refs = seed_refs();
    assert!(
        set_weight(&seed_vsvc1(), &refs[0], &seed_ctx(), 20, &[])
            .unwrap()
            .is_some()
    );
    assert_eq!(
        set_err(&seed_vsvc2(), &refs[1], &seed_ctx(), 20),
        "No matching TLS routes found in the defined Virtual Service."
    );
    let istio = IstioTrafficRouting {
        virtual_services: Some(refs.clone()),
        ..Default::default()
    };
    assert_eq!(
        validate_virtual_service(
            Some(&seed_vsvc2()),
            &refs[1],
            istio.virtual_service_field(),
            &seed_ctx()
        )
        .unwrap_err(),
        "spec.strategy.canary.trafficRouting.istio.virtualServices.name: Invalid value: \"rollouts-demo-vsvc2\": Istio VirtualService has invalid TLS routes. Error: No matching TLS routes found in the defined Virtual Service."
    );
    assert_eq!(
        validate_virtual_service(
            Some(&seed_vsvc1()),
            &refs[0],
            istio.virtual_service_field(),
            &seed_ctx()
        ),
        Ok(())
    );
}

#[test]
fn seed003_vsvc2_with_both_sni_hosts_at_weight_20() {
    let sni = json!(["reviews.bookinfo.com", "localhost"]);
    let input = seed_vs("rollouts-demo-vsvc2", 15373, "http-secondary", sni.clone());
    let out = set(&input, &seed_refs()[1], &seed_ctx(), 20);
    let expected = seed_weighted("rollouts-demo-vsvc2", 15373, "http-secondary", sni, 80, 20);
    assert_json(&out, &expected);
}

// ---- subset-level split (seed 003 "Subset-level Traffic Splitting") ------------------

fn seed_destination_rule() -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "DestinationRule",
        "metadata": {"name": "rollout-destrule"},
        "spec": {
            "host": "rollout-example",
            "trafficPolicy": {"loadBalancer": {"simple": "LEAST_CONN"}},
            "subsets": [
                {"name": "canary", "labels": {"app": "rollout-example"}},
                {"name": "legacy", "labels": {"app": "rollout-example", "v": "1"}},
                {"name": "stable", "labels": {"app": "rollout-example"},
                 "trafficPolicy": {"connectionPool": {"tcp": {"maxConnections": 100}}}}
            ]
        }
    })
}

fn seed_dr_spec() -> IstioDestinationRule {
    IstioDestinationRule {
        name: "rollout-destrule".into(),
        canary_subset_name: "canary".into(),
        stable_subset_name: "stable".into(),
        additional_subset_names: vec![],
    }
}

#[test]
fn subset_level_destination_rule_gets_hash_labels() {
    let spec = seed_dr_spec();
    let ctx = IstioContext {
        rollout_name: "rollout-example",
        ..subset_ctx(&spec)
    };
    let out = update_destination_rule(
        Some(&seed_destination_rule()),
        &ctx,
        "canaryhash",
        "stablehash",
        &[],
        &DestinationRuleDelayCheck::DISABLED,
    )
    .unwrap()
    .unwrap();
    // Other labels and subset fields are kept, the unlisted subset is dropped, the
    // managed-by annotation is added; the Service is not touched (not even an input).
    let expected = json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "DestinationRule",
        "metadata": {
            "name": "rollout-destrule",
            "annotations": {"argo-rollouts.argoproj.io/managed-by-rollouts": "rollout-example"}
        },
        "spec": {
            "host": "rollout-example",
            "trafficPolicy": {"loadBalancer": {"simple": "LEAST_CONN"}},
            "subsets": [
                {"name": "canary", "labels": {"app": "rollout-example", "rollouts-pod-template-hash": "canaryhash"}},
                {"name": "stable", "labels": {"app": "rollout-example", "rollouts-pod-template-hash": "stablehash"},
                 "trafficPolicy": {"connectionPool": {"tcp": {"maxConnections": 100}}}}
            ]
        }
    });
    assert_json(&out, &expected);
    assert_eq!(
        destination_rule_updated_event(&spec, "canaryhash", "stablehash").message,
        "DestinationRule rollout-destrule subset updated (canary: canaryhash, stable: stablehash)"
    );
}

#[test]
fn subset_level_virtual_service_at_weight_20() {
    let spec = seed_dr_spec();
    let ctx = subset_ctx(&spec);
    let input = json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "VirtualService",
        "metadata": {"name": "rollout-vsvc"},
        "spec": {
            "gateways": ["istio-rollout-gateway"],
            "hosts": ["istio-rollout.dev.argoproj.io"],
            "http": [{"name": "primary", "route": [
                ds("rollout-example", "stable", 100),
                ds("rollout-example", "canary", 0)
            ]}]
        }
    });
    let out = set(&input, &vref("rollout-vsvc", &["primary"]), &ctx, 20);
    let mut expected = input.clone();
    expected["spec"]["http"][0]["route"] = json!([
        ds("rollout-example", "stable", 80),
        ds("rollout-example", "canary", 20)
    ]);
    assert_json(&out, &expected);
}

#[test]
fn destination_rule_empty_hash_removes_the_label_leaving_empty_labels() {
    let spec = dr_spec("canary", "stable", &[]);
    let dr = json!({
        "metadata": {"name": "istio-destrule", "annotations": {"argo-rollouts.argoproj.io/managed-by-rollouts": "rollout"}},
        "spec": {"host": "svc", "subsets": [
            {"name": "stable", "labels": {"rollouts-pod-template-hash": "abc"}},
            {"name": "canary", "labels": {"rollouts-pod-template-hash": "def"}}
        ]}
    });
    let out = update_destination_rule(
        Some(&dr),
        &subset_ctx(&spec),
        "",
        "abc",
        &[],
        &DestinationRuleDelayCheck::DISABLED,
    )
    .unwrap()
    .unwrap();
    assert_json(
        &out["spec"]["subsets"],
        &json!([
            {"name": "stable", "labels": {"rollouts-pod-template-hash": "abc"}},
            {"name": "canary", "labels": {}}
        ]),
    );
}

// Upstream TestUpdateHashNoChange.
#[test]
fn destination_rule_already_up_to_date_is_not_written() {
    let spec = dr_spec("canary", "stable", &[]);
    let dr = json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "DestinationRule",
        "metadata": {"name": "istio-destrule", "namespace": "default",
                     "annotations": {"argo-rollouts.argoproj.io/managed-by-rollouts": "rollout"}},
        "spec": {"host": "ratings.prod.svc.cluster.local", "subsets": [
            {"name": "stable", "labels": {"rollouts-pod-template-hash": "def456"}},
            {"name": "canary", "labels": {"rollouts-pod-template-hash": "abc123"}}
        ]}
    });
    assert_eq!(
        update_destination_rule(
            Some(&dr),
            &subset_ctx(&spec),
            "abc123",
            "def456",
            &[],
            &DestinationRuleDelayCheck::DISABLED
        ),
        Ok(None)
    );
    // No destinationRule configured: nothing to do.
    assert_eq!(
        update_destination_rule(
            Some(&dr),
            &host_ctx(),
            "abc123",
            "def456",
            &[],
            &DestinationRuleDelayCheck::DISABLED
        ),
        Ok(None)
    );
}

// Upstream TestUpdateHashAdditionalFieldsWithListers (Argo's JSON has sorted keys; compare
// as values) + the "Extra" comparison quirk: such a rule is rewritten every time.
#[test]
fn destination_rule_with_subset_traffic_policy() {
    let spec = dr_spec("canary", "stable", &[]);
    let dr = json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "DestinationRule",
        "metadata": {"name": "istio-destrule", "namespace": "default"},
        "spec": {
            "host": "ratings.prod.svc.cluster.local",
            "trafficPolicy": {"loadBalancer": {"simple": "LEAST_CONN"}},
            "subsets": [
                {"name": "stable", "labels": {"version": "v3"}},
                {"name": "canary", "trafficPolicy": {"loadBalancer": {"simple": "ROUND_ROBIN"}}}
            ]
        }
    });
    let ctx = subset_ctx(&spec);
    let check = DestinationRuleDelayCheck::DISABLED;
    let out = update_destination_rule(Some(&dr), &ctx, "abc123", "def456", &[], &check)
        .unwrap()
        .unwrap();
    let argo: Value = serde_json::from_str(r#"{"apiVersion":"networking.istio.io/v1alpha3","kind":"DestinationRule","metadata":{"annotations":{"argo-rollouts.argoproj.io/managed-by-rollouts":"rollout"},"name":"istio-destrule","namespace":"default"},"spec":{"host":"ratings.prod.svc.cluster.local","subsets":[{"labels":{"rollouts-pod-template-hash":"def456","version":"v3"},"name":"stable"},{"labels":{"rollouts-pod-template-hash":"abc123"},"name":"canary","trafficPolicy":{"loadBalancer":{"simple":"ROUND_ROBIN"}}}],"trafficPolicy":{"loadBalancer":{"simple":"LEAST_CONN"}}}}"#).unwrap();
    assert_eq!(out, argo);
    let again = update_destination_rule(Some(&out), &ctx, "abc123", "def456", &[], &check)
        .unwrap()
        .unwrap();
    assert_json(&again, &out);
}

// Upstream TestUpdateHashWithListers: a rule without host gets `host: ""`.
#[test]
fn destination_rule_without_host() {
    let spec = dr_spec("canary", "stable", &[]);
    let dr = json!({"metadata": {"name": "istio-destrule"},
                    "spec": {"subsets": [{"name": "stable"}, {"name": "canary"}]}});
    let out = update_destination_rule(
        Some(&dr),
        &subset_ctx(&spec),
        "abc123",
        "def456",
        &[],
        &DestinationRuleDelayCheck::DISABLED,
    )
    .unwrap()
    .unwrap();
    assert_json(
        &out,
        &json!({
            "metadata": {"name": "istio-destrule",
                         "annotations": {"argo-rollouts.argoproj.io/managed-by-rollouts": "rollout"}},
            "spec": {
                "subsets": [
                    {"name": "stable", "labels": {"rollouts-pod-template-hash": "def456"}},
                    {"name": "canary", "labels": {"rollouts-pod-template-hash": "abc123"}}
                ],
                "host": ""
            }
        }),
    );
}

// Upstream TestUpdateHashWithAdditionalDestinations.
#[test]
fn destination_rule_additional_destinations() {
    let spec = dr_spec("canary", "stable", &[]);
    let ctx = subset_ctx(&spec);
    let check = DestinationRuleDelayCheck::DISABLED;
    let dr = json!({"metadata": {"name": "istio-destrule"},
                    "spec": {"host": "h", "subsets": [{"name": "stable"}, {"name": "canary"}]}});
    let one = [wd("exp-svc", 20, "exp-hash")];
    let out = update_destination_rule(Some(&dr), &ctx, "abc123", "def456", &one, &check)
        .unwrap()
        .unwrap();
    assert_json(
        &out["spec"]["subsets"],
        &json!([
            {"name": "stable", "labels": {"rollouts-pod-template-hash": "def456"}},
            {"name": "canary", "labels": {"rollouts-pod-template-hash": "abc123"}},
            {"name": "exp-svc", "labels": {"rollouts-pod-template-hash": "exp-hash"}}
        ]),
    );
    let two = [
        wd("exp-svc", 20, "exp-hash"),
        wd("exp-svc2", 40, "exp-hash2"),
    ];
    let out = update_destination_rule(Some(&out), &ctx, "abc123", "def456", &two, &check)
        .unwrap()
        .unwrap();
    assert_eq!(out["spec"]["subsets"].as_array().unwrap().len(), 4);
    assert_json(
        &out["spec"]["subsets"][3],
        &json!({"name": "exp-svc2", "labels": {"rollouts-pod-template-hash": "exp-hash2"}}),
    );
    // Dropping one experiment drops its subset.
    let out = update_destination_rule(Some(&out), &ctx, "abc123", "def456", &two[1..], &check)
        .unwrap()
        .unwrap();
    let names: Vec<&str> = out["spec"]["subsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["stable", "canary", "exp-svc2"]);
}

#[test]
fn destination_rule_not_found() {
    let spec = dr_spec("canary", "stable", &[]);
    let err = update_destination_rule(
        None,
        &subset_ctx(&spec),
        "abc123",
        "def456",
        &[],
        &DestinationRuleDelayCheck::DISABLED,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "destinationrules.networking.istio.io \"istio-destrule\" not found"
    );
    assert_eq!(
        destination_rule_not_found_event("istio-destrule").message,
        "DestinationRule `istio-destrule` not found"
    );
}

fn rs<'a>(name: &'a str, hash: &'a str, spec: i32, available: i32) -> ReplicaSetAvailability<'a> {
    ReplicaSetAvailability {
        name,
        pod_template_hash: hash,
        spec_replicas: spec,
        available_replicas: available,
    }
}

// Upstream TestUpdateHashNoReadyReplicaSets / TestShouldDelayDestinationRuleUpdate /
// TestUpdateHashAbortScenarios.
#[test]
fn destination_rule_switch_is_delayed_until_traffic_replicasets_are_available() {
    let spec = dr_spec("canary", "stable", &[]);
    let ctx = subset_ctx(&spec);
    let dr = json!({"metadata": {"name": "istio-destrule"},
                    "spec": {"host": "h", "subsets": [{"name": "stable"}, {"name": "canary"}]}});
    let run = |sets: &[ReplicaSetAvailability], canary: &str, services: bool, skip: bool| {
        let check = DestinationRuleDelayCheck {
            services_in_spec: services,
            skip_canary: skip,
            replica_sets: sets,
        };
        update_destination_rule(Some(&dr), &ctx, canary, "stable123", &[], &check)
    };
    let delayed = |n: &str| {
        Err(TrafficRoutingError(format!(
            "delaying destination rule switch: ReplicaSet {n} not fully available"
        )))
    };
    let stable_ok = rs("rs-stable123", "stable123", 1, 1);
    let canary_down = rs("rs-canary456", "canary456", 1, 0);
    let other_down = rs("rs-other789", "other789", 1, 0);
    assert_eq!(
        run(
            &[stable_ok, canary_down, other_down],
            "canary456",
            false,
            false
        ),
        delayed("rs-canary456")
    );
    let canary_ok = rs("rs-canary456", "canary456", 1, 1);
    assert!(
        run(
            &[stable_ok, canary_ok, other_down],
            "canary456",
            false,
            false
        )
        .unwrap()
        .is_some()
    );
    let stable_down = rs("rs-stable123", "stable123", 1, 0);
    assert_eq!(
        run(&[stable_down, canary_ok], "canary456", false, false),
        delayed("rs-stable123")
    );
    // canaryService/stableService set: never delayed.
    assert!(run(&[stable_ok, canary_down], "canary456", true, false).is_ok());
    // A ReplicaSet scaled to 0 is ignored.
    let canary_zero = rs("rs-canary456", "canary456", 0, 0);
    assert!(run(&[stable_ok, canary_zero], "canary456", false, false).is_ok());
    // Abort: the canary is not checked (and its hash is empty).
    assert!(run(&[stable_ok, canary_down, other_down], "", false, true).is_ok());
    // Checked before the DestinationRule is read.
    let check = DestinationRuleDelayCheck {
        services_in_spec: false,
        skip_canary: false,
        replica_sets: &[canary_down],
    };
    assert_eq!(
        update_destination_rule(None, &ctx, "canary456", "s", &[], &check),
        delayed("rs-canary456")
    );
}

#[test]
fn destination_rule_with_malformed_labels() {
    let spec = dr_spec("canary", "stable", &[]);
    let dr = json!({"metadata": {"name": "istio-destrule"},
                    "spec": {"host": "h", "subsets": [{"name": "stable", "labels": {"v": 3}}]}});
    assert_eq!(
        update_destination_rule(
            Some(&dr),
            &subset_ctx(&spec),
            "a",
            "b",
            &[],
            &DestinationRuleDelayCheck::DISABLED
        )
        .unwrap_err()
        .to_string(),
        "json: cannot unmarshal number into Go struct field Subset.spec.subsets.labels of type string"
    );
}

// ---- §7 reconciler messages, one per test --------------------------------------------

#[test]
fn error_http_route_not_found() {
    // Upstream TestReconcileInvalidValidation.
    assert_eq!(
        set_err(
            &regular_vsvc(),
            &vref("vsvc", &["route-not-found"]),
            &host_ctx(),
            0
        ),
        "HTTP Route 'route-not-found' is not found in the defined Virtual Service."
    );
}

#[test]
fn error_no_matching_tls_route() {
    // Upstream TestTlsReconcileInvalidValidation.
    let r = IstioVirtualService {
        tls_routes: vec![tls(1001, &[])],
        ..vref("vsvc", &[])
    };
    assert_eq!(
        set_err(&regular_tls_vsvc(), &r, &host_ctx(), 0),
        "No matching TLS routes found in the defined Virtual Service."
    );
}

#[test]
fn error_no_matching_tcp_route() {
    // Upstream TestTcpReconcileInvalidValidation.
    let r = IstioVirtualService {
        tcp_routes: vec![tcp(1001)],
        ..vref("vsvc", &[])
    };
    assert_eq!(
        set_err(&regular_tcp_vsvc(), &r, &host_ctx(), 0),
        "No matching TCP routes found in the defined Virtual Service."
    );
}

#[test]
fn error_http_routes_ambiguous() {
    // Upstream TestReconcileAmbiguousRoutes.
    assert_eq!(
        set_err(&regular_vsvc(), &vref("vsvc", &[]), &host_ctx(), 0),
        "spec.http[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.routes"
    );
}

#[test]
fn error_tls_routes_ambiguous() {
    // Upstream TestTlsReconcileAmbiguousRoutes.
    assert_eq!(
        set_err(&regular_tls_vsvc(), &vref("vsvc", &[]), &host_ctx(), 0),
        "spec.tls[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.tlsRoutes"
    );
}

#[test]
fn error_tcp_routes_ambiguous() {
    // Upstream TestTcpReconcileAmbiguousRoutes.
    assert_eq!(
        set_err(&regular_tcp_vsvc(), &vref("vsvc", &[]), &host_ctx(), 0),
        "spec.tcp[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.tcpRoutes"
    );
}

#[test]
fn error_canary_service_not_in_route() {
    let ctx = IstioContext {
        canary_service: "not-found-canary",
        ..host_ctx()
    };
    assert_eq!(
        set_err(&regular_vsvc(), &vref("vsvc", &["primary"]), &ctx, 10),
        "Canary Service 'not-found-canary' not found in route"
    );
}

#[test]
fn error_stable_service_not_in_route() {
    let ctx = IstioContext {
        stable_service: "not-found-stable",
        ..host_ctx()
    };
    assert_eq!(
        set_err(&regular_vsvc(), &vref("vsvc", &["primary"]), &ctx, 10),
        "Stable Service 'not-found-stable' not found in route"
    );
}

#[test]
fn error_canary_checked_before_stable() {
    let ctx = IstioContext {
        canary_service: "c2",
        stable_service: "s2",
        ..host_ctx()
    };
    assert_eq!(
        set_err(&regular_vsvc(), &vref("vsvc", &["primary"]), &ctx, 10),
        "Canary Service 'c2' not found in route"
    );
}

#[test]
fn error_canary_subset_not_in_route() {
    // Upstream TestValidateHTTPRoutesSubsets (canary case).
    let spec = dr_spec("doesntexist", "stable-subset", &[]);
    assert_eq!(
        set_err(
            &single_route_subset_vsvc(),
            &vref("vsvc", &[]),
            &subset_ctx(&spec),
            10
        ),
        "Canary DestinationRule subset 'doesntexist' not found in route"
    );
}

#[test]
fn error_stable_subset_not_in_route() {
    let spec = dr_spec("canary-subset", "doesntexist", &[]);
    assert_eq!(
        set_err(
            &single_route_subset_vsvc(),
            &vref("vsvc", &[]),
            &subset_ctx(&spec),
            10
        ),
        "Stable DestinationRule subset 'doesntexist' not found in route"
    );
}

#[test]
fn error_hosts_are_not_checked_in_subset_mode() {
    let spec = dr_spec("canary-subset", "stable-subset", &[]);
    let ctx = IstioContext {
        canary_service: "missing-canary",
        stable_service: "missing-stable",
        ..subset_ctx(&spec)
    };
    assert!(
        set_weight(
            &single_route_subset_vsvc(),
            &vref("vsvc", &[]),
            &ctx,
            10,
            &[]
        )
        .is_ok()
    );
}

#[test]
fn error_virtual_service_not_found() {
    assert_eq!(
        virtual_service_not_found_error(IstioOperation::SetWeight, "vsvc"),
        Some(TrafficRoutingError(
            "virtualservices.networking.istio.io \"vsvc\" not found".into()
        ))
    );
    assert_eq!(
        virtual_service_not_found_error(IstioOperation::SetHeaderRoute, "vsvc")
            .unwrap()
            .to_string(),
        "[SetHeaderRoute] failed to get istio virtual service: virtualservices.networking.istio.io \"vsvc\" not found"
    );
    assert_eq!(
        virtual_service_not_found_error(IstioOperation::SetMirrorRoute, "vsvc")
            .unwrap()
            .to_string(),
        "[SetMirrorRoute] failed to get virtual service: virtualservices.networking.istio.io \"vsvc\" not found"
    );
    assert_eq!(
        virtual_service_not_found_error(IstioOperation::RemoveManagedRoutes, "vsvc"),
        None
    );
    let ev = virtual_service_not_found_event("vsvc");
    assert_eq!(
        (ev.event_type, ev.reason, ev.message.as_str()),
        (
            EventType::Warning,
            "VirtualServiceNotFound",
            "VirtualService `vsvc` not found"
        )
    );
}

#[test]
fn error_invalid_casting() {
    // Upstream TestInvalidPatches.
    let patch = Patch {
        section: Section::Http,
        route_idx: 0,
        dest_idx: 0,
        weight: 10,
        host: String::new(),
        delete: false,
    };
    let cases = [
        (
            json!(["not a map"]),
            "Invalid casting: field 'http[]' is not of type 'map[string]interface'",
        ),
        (
            json!([{"route": "not a []interface"}]),
            "Invalid casting: field 'http[].route' is not of type '[]interface'",
        ),
        (
            json!([{"route": ["destination"]}]),
            "Invalid casting: field 'http[].route[].destination' is not of type 'map[string]interface'",
        ),
    ];
    for (http, msg) in cases {
        let mut obj = json!({"spec": {"http": http}});
        assert_eq!(
            apply_patches(&mut obj, std::slice::from_ref(&patch)),
            Err(TrafficRoutingError(msg.into()))
        );
    }
}

#[test]
fn error_invalid_casting_reached_through_set_weight() {
    // A managed mirror route without `route` is patched (never validated) when an
    // experiment destination has to be appended to it.
    let input = vs_with(&[(
        "http",
        json!([
            {"name": "mirror", "mirror": {"host": "canary"}},
            {"name": "primary", "route": sc()}
        ]),
    )]);
    let managed = strings(&["mirror"]);
    let ctx = IstioContext {
        managed_routes: Some(&managed),
        ..host_ctx()
    };
    assert_eq!(
        set_weight(
            &input,
            &vref("vsvc", &["primary"]),
            &ctx,
            10,
            &[wd("exp", 10, "")]
        )
        .unwrap_err()
        .to_string(),
        "Invalid casting: field 'http[].route' is not of type '[]interface'"
    );
}

#[test]
fn error_header_route_on_virtual_service_without_http() {
    let managed = strings(&["hdr"]);
    let ctx = IstioContext {
        managed_routes: Some(&managed),
        ..host_ctx()
    };
    let r = vref("vsvc", &[]);
    let step = header_step("hdr", "agent", exact("firefox"));
    assert_eq!(
        set_header_route(&regular_tls_vsvc(), &r, &ctx, &step, None)
            .unwrap_err()
            .to_string(),
        "[SetHeaderRoute] failed to reconcile header routes: [reconcileVirtualServiceHeaderRoutes] failed to remove http route from virtual service: spec.http not found"
    );
    let remove = SetHeaderRoute {
        name: "hdr".into(),
        matches: None,
    };
    assert_eq!(
        set_header_route(&regular_tls_vsvc(), &r, &ctx, &remove, None)
            .unwrap_err()
            .to_string(),
        "[SetHeaderRoute] failed to reconcile header routes: [reconcileVirtualServiceHeaderRoutes] failed to remove route from virtual service: spec.http not found"
    );
}

#[test]
fn error_mirror_route_on_virtual_service_without_http() {
    let ctx = host_ctx();
    let r = vref("vsvc", &[]);
    assert_eq!(
        set_mirror_route(
            &regular_tcp_vsvc(),
            &r,
            &ctx,
            &mirror_step("m", "GET", None),
            None
        )
        .unwrap_err()
        .to_string(),
        "[SetMirrorRoute] failed reconcile virtual service for mirror routes: [reconcileVirtualServiceMirrorRoutes] failed to remove http route from virtual service: spec.http not found"
    );
    let remove = SetMirrorRoute {
        name: "m".into(),
        ..Default::default()
    };
    assert_eq!(
        set_mirror_route(&regular_tcp_vsvc(), &r, &ctx, &remove, None)
            .unwrap_err()
            .to_string(),
        "[SetMirrorRoute] failed reconcile virtual service for mirror routes: [reconcileVirtualServiceMirrorRoutes] failed to remove route from virtual service: spec.http not found"
    );
}

#[test]
fn error_header_route_with_missing_destination_rule() {
    let spec = dr_spec("canary", "stable", &[]);
    let step = header_step("hdr", "agent", exact("firefox"));
    assert_eq!(
        set_header_route(
            &regular_vsvc(),
            &vref("vsvc", &[]),
            &subset_ctx(&spec),
            &step,
            None
        )
        .unwrap_err()
        .to_string(),
        "[SetHeaderRoute] failed to reconcile header routes: destinationrules.networking.istio.io \"istio-destrule\" not found"
    );
    assert_eq!(
        set_mirror_route(
            &regular_vsvc(),
            &vref("vsvc", &[]),
            &subset_ctx(&spec),
            &mirror_step("m", "GET", None),
            None
        )
        .unwrap_err()
        .to_string(),
        "[SetMirrorRoute] failed reconcile virtual service for mirror routes: [reconcileVirtualServiceMirrorRoutes] failed to get destination rule host: destinationrules.networking.istio.io \"istio-destrule\" not found"
    );
}

#[test]
fn error_mirror_route_weight_route_not_found() {
    let step = mirror_step("m", "GET", None);
    assert_eq!(
        set_mirror_route(
            &regular_vsvc(),
            &vref("vsvc", &["nope"]),
            &host_ctx(),
            &step,
            None
        )
        .unwrap_err()
        .to_string(),
        "[SetMirrorRoute] failed reconcile virtual service for mirror routes: [reconcileVirtualServiceMirrorRoutes] failed to create mirror route: [createMirrorRoute] failed to get virtual service http route for keeping non-mirror weights set: [getVirtualServiceSetWeightRoute] failed to get routes that need to be patch when set weight is called: HTTP Route 'nope' is not found in the defined Virtual Service."
    );
}

#[test]
fn error_check_order_route_lookup_then_destinations_then_ambiguity() {
    // Destinations of the selected (first) TLS route are checked before the "more than
    // one route" rule.
    let mut input = regular_tls_vsvc();
    input["spec"]["tls"][0]["route"] = json!([d("stable", 100)]);
    assert_eq!(
        set_err(&input, &vref("vsvc", &[]), &host_ctx(), 10),
        "Canary Service 'canary' not found in route"
    );
    // http is checked before tls.
    let mut mixed = regular_mixed_vsvc();
    mixed["spec"]["tls"][0]["route"] = json!([d("stable", 100)]);
    let r = IstioVirtualService {
        tls_routes: vec![tls(3000, &[])],
        ..vref("vsvc", &["missing"])
    };
    assert_eq!(
        set_err(&mixed, &r, &host_ctx(), 10),
        "HTTP Route 'missing' is not found in the defined Virtual Service."
    );
}

#[test]
fn error_malformed_routes_give_go_json_errors() {
    // Upstream TestTlsReconcileInvalidVsvc / TestTcpReconcileInvalidVsvc.
    let r = IstioVirtualService {
        tls_routes: vec![tls(3000, &[])],
        tcp_routes: vec![tcp(3000)],
        ..vref("vsvc", &[])
    };
    assert_eq!(
        set_err(
            &vs_with(&[("tls", json!(["invalid"]))]),
            &r,
            &host_ctx(),
            10
        ),
        "json: cannot unmarshal string into Go value of type istio.VirtualServiceTLSRoute"
    );
    assert_eq!(
        set_err(
            &vs_with(&[("tcp", json!(["invalid"]))]),
            &r,
            &host_ctx(),
            10
        ),
        "json: cannot unmarshal string into Go value of type istio.VirtualServiceTCPRoute"
    );
    let bad_weight = vs_with(&[(
        "http",
        json!([{"name": "primary", "route": [d("stable", 100), {"destination": {"host": "canary"}, "weight": "0"}]}]),
    )]);
    assert_eq!(
        set_err(&bad_weight, &vref("vsvc", &["primary"]), &host_ctx(), 10),
        "json: cannot unmarshal string into Go struct field VirtualServiceRouteDestination.route.weight of type int64"
    );
    let fractional = vs_with(&[(
        "http",
        json!([{"name": "primary", "route": [d("stable", 100), {"destination": {"host": "canary"}, "weight": 0.5}]}]),
    )]);
    assert_eq!(
        set_err(&fractional, &vref("vsvc", &["primary"]), &host_ctx(), 10),
        "json: cannot unmarshal number 0.5 into Go struct field VirtualServiceRouteDestination.route.weight of type int64"
    );
    let bad_port = vs_with(&[(
        "http",
        json!([{"name": "primary", "route": [{"destination": {"host": "stable", "port": {"number": -1}}}]}]),
    )]);
    assert_eq!(
        set_err(&bad_port, &vref("vsvc", &["primary"]), &host_ctx(), 10),
        "json: cannot unmarshal number -1 into Go struct field Port.route.destination.port.number of type uint32"
    );
    let bad_header = vs_with(&[(
        "http",
        json!([{"name": "primary", "match": [{"headers": {"x": "y"}}], "route": sc()}]),
    )]);
    assert_eq!(
        set_err(&bad_header, &vref("vsvc", &["primary"]), &host_ctx(), 10),
        "json: cannot unmarshal string into Go struct field RouteMatch.match.headers of type v1alpha1.StringMatch"
    );
    // An integral float is accepted (Go re-marshals 20.0 as 20).
    let float_weight = vs_with(&[(
        "http",
        json!([{"name": "primary", "route": [d("stable", 100), {"destination": {"host": "canary"}, "weight": 0.0}]}]),
    )]);
    assert!(
        set_weight(
            &float_weight,
            &vref("vsvc", &["primary"]),
            &host_ctx(),
            10,
            &[]
        )
        .is_ok()
    );
}

// ---- §7 referenced-resource validation -----------------------------------------------

const VS_FIELD: &str = "spec.strategy.canary.trafficRouting.istio.virtualService.name";

fn validate(v: Option<&Value>, r: &IstioVirtualService) -> Result<(), String> {
    validate_virtual_service(v, r, VS_FIELD, &host_ctx())
}

#[test]
fn referenced_virtual_service_not_found() {
    assert_eq!(
        validate(None, &vref("vsvc.istio-system", &["primary"])).unwrap_err(),
        "spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: \"vsvc\": virtualservices.networking.istio.io \"vsvc\" not found"
    );
}

#[test]
fn referenced_virtual_service_without_any_routes() {
    assert_eq!(
        validate(Some(&vs_with(&[])), &vref("vsvc", &[])).unwrap_err(),
        "spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: \"vsvc\": Unable to get any of the HTTP, TCP or TLS routes for the Istio VirtualService"
    );
}

#[test]
fn referenced_virtual_service_unable_to_get_http_routes() {
    assert_eq!(
        validate(
            Some(&vs_with(&[("http", json!(["x"]))])),
            &vref("vsvc", &[])
        )
        .unwrap_err(),
        "spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: \"vsvc\": Unable to get HTTP routes for Istio VirtualService"
    );
}

#[test]
fn referenced_virtual_service_unable_to_get_tls_routes() {
    assert_eq!(
        validate(
            Some(&vs_with(&[("tls", json!([{"match": "x"}]))])),
            &vref("vsvc", &[])
        )
        .unwrap_err(),
        "spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: \"vsvc\": Unable to get TLS routes for Istio VirtualService"
    );
}

#[test]
fn referenced_virtual_service_unable_to_get_tcp_routes() {
    assert_eq!(
        validate(Some(&vs_with(&[("tcp", json!([7]))])), &vref("vsvc", &[])).unwrap_err(),
        "spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: \"vsvc\": Unable to get TCP routes for Istio VirtualService"
    );
}

#[test]
fn referenced_virtual_service_invalid_http_routes() {
    assert_eq!(
        validate(Some(&regular_vsvc()), &vref("vsvc", &["x"])).unwrap_err(),
        "spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: \"vsvc\": Istio VirtualService has invalid HTTP routes. Error: HTTP Route 'x' is not found in the defined Virtual Service."
    );
}

#[test]
fn referenced_virtual_service_invalid_tls_routes() {
    assert_eq!(
        validate(Some(&regular_tls_vsvc()), &vref("vsvc", &[])).unwrap_err(),
        "spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: \"vsvc\": Istio VirtualService has invalid TLS routes. Error: spec.tls[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.tlsRoutes"
    );
}

#[test]
fn referenced_virtual_service_invalid_tcp_routes() {
    let r = IstioVirtualService {
        tcp_routes: vec![tcp(9)],
        ..vref("vsvc", &[])
    };
    assert_eq!(
        validate(Some(&regular_tcp_vsvc()), &r).unwrap_err(),
        "spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: \"vsvc\": Istio VirtualService has invalid TCP routes. Error: No matching TCP routes found in the defined Virtual Service."
    );
}

#[test]
fn referenced_virtual_service_first_error_only_and_valid_case() {
    // Both http and tls are invalid: only the http error is reported.
    let r = IstioVirtualService {
        tls_routes: vec![tls(1, &[])],
        ..vref("vsvc", &["x"])
    };
    assert!(
        validate(Some(&regular_mixed_vsvc()), &r)
            .unwrap_err()
            .contains("invalid HTTP routes")
    );
    let ok = IstioVirtualService {
        tls_routes: vec![tls(3000, &[])],
        tcp_routes: vec![tcp(3001)],
        ..vref("vsvc", &["primary"])
    };
    assert_eq!(validate(Some(&regular_mixed_vsvc()), &ok), Ok(()));
}

#[test]
fn referenced_virtual_services_config_internal_error() {
    let msg = "spec.strategy.canary.trafficRouting.istio: Internal error: either VirtualService or VirtualServices must be configured";
    assert_eq!(
        validate_virtual_services_config(&IstioTrafficRouting::default()).unwrap_err(),
        msg
    );
    let both = IstioTrafficRouting {
        virtual_service: Some(vref("a", &[])),
        virtual_services: Some(vec![vref("b", &[])]),
        ..Default::default()
    };
    assert_eq!(validate_virtual_services_config(&both).unwrap_err(), msg);
    let one = IstioTrafficRouting {
        virtual_services: Some(vec![vref("b", &[])]),
        ..Default::default()
    };
    assert_eq!(validate_virtual_services_config(&one), Ok(()));
}

// ---- byte preservation -----------------------------------------------------------------

fn rich_vs() -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1beta1",
        "kind": "VirtualService",
        "metadata": {"name": "rich", "namespace": "default", "labels": {"team": "payments"},
                     "annotations": {"note": "keep me"}},
        "x-top-level-unknown": {"keep": [1, 2.5, "x", null, true]},
        "spec": {
            "hosts": ["rich.example.com"],
            "gateways": ["mesh", "istio-system/gw"],
            "exportTo": ["."],
            "x-spec-unknown": 42,
            "http": [
                {
                    "name": "primary",
                    "match": [{"uri": {"prefix": "/api"}, "headers": {"x-tenant": {"regex": "^a.*"}}}],
                    "timeout": "5s",
                    "retries": {"attempts": 3, "perTryTimeout": "2s", "retryOn": "gateway-error,connect-failure"},
                    "corsPolicy": {"allowOrigins": [{"exact": "https://example.com"}], "allowMethods": ["GET"], "maxAge": "24h"},
                    "fault": {"delay": {"percentage": {"value": 0.1}, "fixedDelay": "5s"}},
                    "headers": {"request": {"set": {"x-env": "prod"}}},
                    "route": [
                        {"destination": {"host": "stable.default.svc.cluster.local", "port": {"number": 8080}},
                         "weight": 100,
                         "headers": {"response": {"add": {"x-version": "stable"}}}},
                        {"destination": {"host": "canary.default.svc.cluster.local", "port": {"number": 8080}},
                         "weight": 0,
                         "headers": {"response": {"add": {"x-version": "canary"}}}}
                    ]
                },
                {
                    "name": "other",
                    "route": [{"destination": {"host": "stable"}, "weight": 50},
                              {"destination": {"host": "canary"}, "weight": 50}]
                }
            ],
            "tls": [{
                "match": [{"port": 443, "sniHosts": ["rich.example.com"], "gateways": ["mesh"]}],
                "route": [{"destination": {"host": "stable", "port": {"number": 443}}, "weight": 100},
                          {"destination": {"host": "canary", "port": {"number": 443}}, "weight": 0}]
            }]
        },
        "status": {"validationMessages": []}
    })
}

#[test]
fn non_weight_bytes_survive_0_20_40_100_0() {
    let orig = rich_vs();
    let r = IstioVirtualService {
        tls_routes: vec![tls(443, &["rich.example.com"])],
        ..vref("rich.default", &["primary"])
    };
    let ctx = host_ctx();
    assert_eq!(set_weight(&orig, &r, &ctx, 0, &[]), Ok(None));
    let orig_text = serde_json::to_string(&orig).unwrap();
    let mut cur = orig.clone();
    for (w, stable) in [(20, 80), (40, 60), (100, 0), (0, 100)] {
        cur = set(&cur, &r, &ctx, w);
        for (section, route) in [("http", 0), ("tls", 0)] {
            let dests = &cur["spec"][section][route]["route"];
            assert_eq!(dests[0]["weight"], json!(stable));
            assert_eq!(dests[1]["weight"], json!(w));
        }
        // The unselected route is never touched.
        assert_eq!(cur["spec"]["http"][1], orig["spec"]["http"][1]);
        let mut restored = cur.clone();
        for section in ["http", "tls"] {
            restored["spec"][section][0]["route"][0]["weight"] = json!(100);
            restored["spec"][section][0]["route"][1]["weight"] = json!(0);
        }
        assert_eq!(serde_json::to_string(&restored).unwrap(), orig_text);
    }
    assert_eq!(serde_json::to_string(&cur).unwrap(), orig_text);
}

// ---- §2 weights, experiments, hosts ------------------------------------------------------

#[test]
fn upstream_http_reconcile_weights_base_case() {
    let r = vref("vsvc", &["primary"]);
    let two_http_one_tls = vs_with(&[
        ("http", http2()),
        ("tls", json!([{"match": [{"port": 3000}], "route": sc()}])),
    ]);
    for input in [regular_vsvc(), two_http_one_tls] {
        let out = set(&input, &r, &host_ctx(), 10);
        assert_eq!(
            (
                weight(&out, "http", 0, "canary"),
                weight(&out, "http", 0, "stable")
            ),
            (10, 90)
        );
        assert_eq!(
            (
                weight(&out, "http", 1, "canary"),
                weight(&out, "http", 1, "stable")
            ),
            (0, 100)
        );
    }
}

#[test]
fn upstream_tls_and_tcp_reconcile_weights_base_case() {
    let r = IstioVirtualService {
        tls_routes: vec![tls(3000, &[])],
        tcp_routes: vec![tcp(3000)],
        ..vref("vsvc", &["primary"])
    };
    for (input, section) in [(regular_tls_vsvc(), "tls"), (regular_tcp_vsvc(), "tcp")] {
        let out = set(&input, &r, &host_ctx(), 30);
        assert_eq!(
            (
                weight(&out, section, 0, "canary"),
                weight(&out, section, 0, "stable")
            ),
            (30, 70)
        );
        assert_eq!(
            (
                weight(&out, section, 1, "canary"),
                weight(&out, section, 1, "stable")
            ),
            (0, 100)
        );
    }
    // Upstream TestReconcileWeightsBaseCase (mixed) and the multiple-VirtualService variant.
    let out = set(&regular_mixed_vsvc(), &r, &host_ctx(), 20);
    for section in ["http", "tls", "tcp"] {
        assert_eq!(weight(&out, section, 0, "canary"), 20);
        assert_eq!(weight(&out, section, 0, "stable"), 80);
        assert_eq!(weight(&out, section, 1, "canary"), 0);
    }
    let secondary = IstioVirtualService {
        routes: strings(&["secondary"]),
        ..r.clone()
    };
    let out = set(&regular_mixed_vsvc(), &secondary, &host_ctx(), 20);
    assert_eq!(weight(&out, "http", 0, "canary"), 0);
    assert_eq!(weight(&out, "http", 1, "canary"), 20);
    assert_eq!(weight(&out, "tls", 0, "canary"), 20);
}

fn regular_tls_sni_vsvc() -> Value {
    vs_with(&[(
        "tls",
        json!([
            {"match": [{"sniHosts": ["foo.bar.com", "bar.foo.com"]}, {"sniHosts": ["localhost"]}], "route": sc()},
            {"match": [{"port": 3001, "sniHosts": ["localhost"]}], "route": sc()}
        ]),
    )])
}

#[test]
fn upstream_tls_sni_selection() {
    // SNI hosts of all match entries form one set; no port means port 0.
    let by_sni = IstioVirtualService {
        tls_routes: vec![tls(0, &["foo.bar.com", "bar.foo.com", "localhost"])],
        ..vref("vsvc", &[])
    };
    let out = set(&regular_tls_sni_vsvc(), &by_sni, &host_ctx(), 30);
    assert_eq!(weight(&out, "tls", 0, "canary"), 30);
    assert_eq!(weight(&out, "tls", 1, "canary"), 0);
    let by_port_and_sni = IstioVirtualService {
        tls_routes: vec![tls(3001, &["localhost"])],
        ..vref("vsvc", &[])
    };
    let out = set(&regular_tls_sni_vsvc(), &by_port_and_sni, &host_ctx(), 30);
    assert_eq!(weight(&out, "tls", 0, "canary"), 0);
    assert_eq!(weight(&out, "tls", 1, "canary"), 30);
    // A subset of the hosts is not a match.
    let partial = IstioVirtualService {
        tls_routes: vec![tls(0, &["foo.bar.com"])],
        ..vref("vsvc", &[])
    };
    assert_eq!(
        set_err(&regular_tls_sni_vsvc(), &partial, &host_ctx(), 30),
        NO_TLS_ROUTE
    );
}

#[test]
fn tls_route_with_two_ports_never_matches_and_all_matching_routes_are_selected() {
    let input = vs_with(&[(
        "tcp",
        json!([
            {"match": [{"port": 3000}, {"port": 3001}], "route": sc()},
            {"match": [{"port": 3001}], "route": sc()},
            {"match": [{"port": 3001, "gateways": ["mesh"]}], "route": sc()}
        ]),
    )]);
    let r = IstioVirtualService {
        tcp_routes: vec![tcp(3001)],
        ..vref("vsvc", &[])
    };
    let out = set(&input, &r, &host_ctx(), 30);
    assert_eq!(weight(&out, "tcp", 0, "canary"), 0);
    assert_eq!(weight(&out, "tcp", 1, "canary"), 30);
    assert_eq!(weight(&out, "tcp", 2, "canary"), 30);
    let r3000 = IstioVirtualService {
        tcp_routes: vec![tcp(3000)],
        ..vref("vsvc", &[])
    };
    assert_eq!(set_err(&input, &r3000, &host_ctx(), 30), NO_TCP_ROUTE);
}

#[test]
fn unlisted_single_tls_route_is_patched_and_missing_sections_are_skipped() {
    // §3: named http routes plus one tls route, rollout lists only http routes.
    let input = vs_with(&[
        ("http", http2()),
        ("tls", json!([{"match": [{"port": 3000}], "route": sc()}])),
    ]);
    let out = set(&input, &vref("vsvc", &["primary"]), &host_ctx(), 20);
    assert_eq!(weight(&out, "tls", 0, "canary"), 20);
    // Two tls routes: error.
    let two = vs_with(&[("http", http2()), ("tls", l4_2())]);
    assert_eq!(
        set_err(&two, &vref("vsvc", &["primary"]), &host_ctx(), 20),
        TLS_AMBIGUOUS
    );
    // The rollout lists tls/tcp routes the VirtualService does not have: skipped.
    let r = IstioVirtualService {
        tls_routes: vec![tls(443, &["x"])],
        tcp_routes: vec![tcp(1)],
        ..vref("vsvc", &["primary"])
    };
    let out = set(&regular_vsvc(), &r, &host_ctx(), 20);
    assert_eq!(weight(&out, "http", 0, "canary"), 20);
}

#[test]
fn upstream_reconcile_no_changes() {
    let tls3001 = IstioVirtualService {
        tls_routes: vec![tls(3001, &[])],
        tcp_routes: vec![tcp(3001)],
        ..vref("vsvc", &["primary"])
    };
    for input in [regular_vsvc(), regular_tls_vsvc(), regular_tcp_vsvc()] {
        assert_eq!(set_weight(&input, &tls3001, &host_ctx(), 0, &[]), Ok(None));
    }
}

#[test]
fn upstream_ping_pong_base_case() {
    let pp = PingPong {
        ping_service: "ping".into(),
        pong_service: "pong".into(),
    };
    // stablePingPong == "ping": stable = ping, canary = pong (resolved by the caller).
    let ctx = IstioContext {
        canary_service: &pp.pong_service,
        stable_service: &pp.ping_service,
        ..host_ctx()
    };
    let mut input = regular_mixed_vsvc();
    let text = serde_json::to_string(&input)
        .unwrap()
        .replace("\"stable\"", "\"ping\"")
        .replace("\"canary\"", "\"pong\"");
    input = serde_json::from_str(&text).unwrap();
    let r = IstioVirtualService {
        tls_routes: vec![tls(3000, &[])],
        tcp_routes: vec![tcp(3000)],
        ..vref("vsvc", &["primary"])
    };
    let out = set(&input, &r, &ctx, 20);
    for section in ["http", "tls", "tcp"] {
        assert_eq!(weight(&out, section, 0, "ping"), 80);
        assert_eq!(weight(&out, section, 0, "pong"), 20);
        assert_eq!(weight(&out, section, 1, "ping"), 100);
    }
}

#[test]
fn upstream_inferred_single_route() {
    let none = vref("vsvc", &[]);
    let out = set(&single_route_vsvc(), &none, &host_ctx(), 10);
    assert_eq!(
        (
            weight(&out, "http", 0, "stable"),
            weight(&out, "http", 0, "canary")
        ),
        (90, 10)
    );
    let mixed = vs_with(&[
        ("http", json!([{"route": sc()}])),
        ("tls", json!([{"match": [{"port": 3000}], "route": sc()}])),
        ("tcp", json!([{"match": [{"port": 3000}], "route": sc()}])),
    ]);
    let out = set(&mixed, &none, &host_ctx(), 10);
    for section in ["http", "tls", "tcp"] {
        assert_eq!(weight(&out, section, 0, "stable"), 90);
        assert_eq!(weight(&out, section, 0, "canary"), 10);
    }
    // A single *named* route is used too when routes are omitted.
    let named = vs_with(&[("http", json!([{"name": "primary", "route": sc()}]))]);
    assert_eq!(
        weight(&set(&named, &none, &host_ctx(), 10), "http", 0, "canary"),
        10
    );
}

#[test]
fn upstream_get_http_route_indexes_to_patch() {
    let route = |n: &str| VsHttpRoute {
        name: n.into(),
        ..Default::default()
    };
    assert_eq!(
        http_route_indexes(&[], &[route("foo"), route("")]),
        Ok(vec![1])
    );
    assert_eq!(
        http_route_indexes(&strings(&["foo", "bar"]), &[route("foo"), route("bar")]),
        Ok(vec![0, 1])
    );
    assert_eq!(http_route_indexes(&[], &[route("foo")]), Ok(vec![0]));
    assert_eq!(
        http_route_indexes(&[], &[route("foo"), route("bar")]),
        Ok(vec![])
    );
    assert_eq!(
        http_route_indexes(&strings(&["bar"]), &[route("foo")]),
        Err("HTTP Route 'bar' is not found in the defined Virtual Service.".into())
    );
}

#[test]
fn host_matching_uses_the_short_name_only() {
    let input = vs_with(&[(
        "http",
        json!([{"name": "primary", "route": [
            d("stable.ns.svc.cluster.local", 100),
            d("canary.other-ns.svc.cluster.local", 0),
            d("canary.ns", 0),
            d(".canary", 7)
        ]}]),
    )]);
    let out = set(&input, &vref("vsvc", &["primary"]), &host_ctx(), 25);
    // Hosts are never rewritten; a host starting with "." is ignored entirely.
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([
            d("stable.ns.svc.cluster.local", 75),
            d("canary.other-ns.svc.cluster.local", 25),
            d("canary.ns", 25),
            d(".canary", 7)
        ]),
    );
    // canary-v2 is not canary.
    let v2 = vs_with(&[(
        "http",
        json!([{"name": "primary", "route": [d("stable", 100), d("canary-v2", 0)]}]),
    )]);
    assert_eq!(
        set_err(&v2, &vref("vsvc", &["primary"]), &host_ctx(), 25),
        "Canary Service 'canary' not found in route"
    );
}

#[test]
fn canary_match_wins_over_stable_and_desired_above_100_clamps_stable() {
    let spec = dr_spec("canary", "stable", &[]);
    // This destination is the stable host but the canary subset: canary weight.
    let ctx = IstioContext {
        stable_service: "svc",
        ..subset_ctx(&spec)
    };
    let input = vs_with(&[(
        "http",
        json!([{"name": "p", "route": [ds("svc", "stable", 100), ds("svc", "canary", 0)]}]),
    )]);
    let out = set(&input, &vref("vsvc", &["p"]), &ctx, 30);
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([ds("svc", "stable", 70), ds("svc", "canary", 30)]),
    );
    let out = set(
        &regular_vsvc(),
        &vref("vsvc", &["primary"]),
        &host_ctx(),
        120,
    );
    assert_eq!(
        (
            weight(&out, "http", 0, "stable"),
            weight(&out, "http", 0, "canary")
        ),
        (0, 120)
    );
}

#[test]
fn upstream_host_split_experiment_step() {
    let r = vref("vsvc", &["primary"]);
    let exp = [wd("exp-svc", 20, "")];
    let out = set_weight(&regular_vsvc(), &r, &host_ctx(), 10, &exp)
        .unwrap()
        .unwrap();
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([d("stable", 70), d("canary", 10), d("exp-svc", 20)]),
    );
    // Changing the experiment weight writes again; dropping it deletes the destination.
    let exp10 = [wd("exp-svc", 10, "")];
    let out = set_weight(&out, &r, &host_ctx(), 10, &exp10)
        .unwrap()
        .unwrap();
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([d("stable", 80), d("canary", 10), d("exp-svc", 10)]),
    );
    let out = set(&out, &r, &host_ctx(), 10);
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([d("stable", 90), d("canary", 10)]),
    );
    assert_json(&out["spec"]["http"][1], &regular_vsvc()["spec"]["http"][1]);
}

#[test]
fn upstream_multiple_experiment_destinations_removed() {
    let r = vref("vsvc", &["primary"]);
    let exps = [wd("exp-canary", 20, ""), wd("exp-baseline", 20, "")];
    let out = set_weight(&regular_vsvc(), &r, &host_ctx(), 10, &exps)
        .unwrap()
        .unwrap();
    // Appended sorted by service name.
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([
            d("stable", 50),
            d("canary", 10),
            d("exp-baseline", 20),
            d("exp-canary", 20)
        ]),
    );
    let out = set(&out, &r, &host_ctx(), 10);
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([d("stable", 90), d("canary", 10)]),
    );
}

#[test]
fn unknown_destinations_nonzero_deleted_zero_kept_and_experiments_past_100() {
    let input = vs_with(&[(
        "http",
        json!([{"name": "p", "route": [d("other", 0), d("stable", 100), d("ghost", 5), d("canary", 0)]}]),
    )]);
    let out = set(&input, &vref("vsvc", &["p"]), &host_ctx(), 10);
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([d("other", 0), d("stable", 90), d("canary", 10)]),
    );
    let exps = [wd("a", 60, ""), wd("b", 50, "")];
    let out = set_weight(
        &regular_vsvc(),
        &vref("vsvc", &["primary"]),
        &host_ctx(),
        10,
        &exps,
    )
    .unwrap()
    .unwrap();
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([d("stable", 0), d("canary", 10), d("a", 60), d("b", 50)]),
    );
    // An empty additional destination is a no-op (upstream TestSingleTlsRouteReconcile).
    assert_eq!(
        set_weight(
            &regular_vsvc(),
            &vref("vsvc", &["primary"]),
            &host_ctx(),
            0,
            &[WeightDestination::default()]
        ),
        Ok(None)
    );
    // An experiment's FQDN destination is matched by short name and kept in place.
    let fqdn = vs_with(&[(
        "http",
        json!([{"name": "p", "route": [d("stable", 80), d("canary", 10), d("exp.ns.svc.cluster.local", 5)]}]),
    )]);
    let out = set_weight(
        &fqdn,
        &vref("vsvc", &["p"]),
        &host_ctx(),
        10,
        &[wd("exp", 10, "")],
    )
    .unwrap()
    .unwrap();
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([
            d("stable", 80),
            d("canary", 10),
            d("exp.ns.svc.cluster.local", 10)
        ]),
    );
}

#[test]
fn upstream_additional_subset_names_keep_their_weight() {
    // Upstream TestHttpReconcileMultipleDestRule.
    let spec = dr_spec("canary", "stable", &["stable-subset"]);
    let input = vs_with(&[(
        "http",
        json!([{"route": [
            ds("rollout-service", "stable", 100),
            ds("rollout-service", "canary", 0),
            ds("additional-service", "stable-subset", 20)
        ]}]),
    )]);
    let out = set(&input, &vref("vsvc", &[]), &subset_ctx(&spec), 10);
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([
            ds("rollout-service", "stable", 70),
            ds("rollout-service", "canary", 10),
            ds("additional-service", "stable-subset", 20)
        ]),
    );
    // Without additionalSubsetNames the foreign subset is removed (upstream invalidVsvc).
    let plain = dr_spec("canary", "stable", &[]);
    let out = set(&input, &vref("vsvc", &[]), &subset_ctx(&plain), 10);
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([
            ds("rollout-service", "stable", 90),
            ds("rollout-service", "canary", 10)
        ]),
    );
}

#[test]
fn route_listed_twice_gives_the_same_result() {
    let input = vs_with(&[(
        "http",
        json!([{"name": "p", "route": [d("stable", 90), d("canary", 0), d("x", 10)]}]),
    )]);
    let out = set_weight(
        &input,
        &vref("vsvc", &["p", "p"]),
        &host_ctx(),
        10,
        &[wd("exp", 5, "")],
    )
    .unwrap()
    .unwrap();
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([d("stable", 85), d("canary", 10), d("exp", 5)]),
    );
}

#[test]
fn set_weight_orders_managed_routes_first() {
    let input = vs_with(&[(
        "http",
        json!([{"name": "primary", "route": sc()}, {"name": "hdr", "route": [d("canary", 100)]}]),
    )]);
    let managed = strings(&["hdr"]);
    let ctx = IstioContext {
        managed_routes: Some(&managed),
        ..host_ctx()
    };
    let out = set(&input, &vref("vsvc", &["primary"]), &ctx, 10);
    assert_eq!(names(&out), ["hdr", "primary"]);
    // Without managedRoutes nothing is re-ordered.
    let out = set(&input, &vref("vsvc", &["primary"]), &host_ctx(), 10);
    assert_eq!(names(&out), ["primary", "hdr"]);
    // A non-array http with a patched tls section fails the ordering step.
    let broken = vs_with(&[
        ("http", json!("invalid")),
        ("tls", json!([{"route": sc()}])),
    ]);
    assert_eq!(
        set_err(&broken, &vref("vsvc", &[]), &host_ctx(), 10),
        "[SetWeight] failed to order routes: [orderRoutes] failed to get virtual service http routes: .spec.http accessor error: invalid is of the type string, expected []interface{}"
    );
}

#[test]
fn single_named_route_is_no_longer_selected_once_a_managed_route_exists() {
    // §6 quirk: routes omitted, one named weight route + a managed header route → nothing
    // is unnamed, so SetWeight silently changes nothing.
    let input = vs_with(&[(
        "http",
        json!([{"name": "hdr", "route": [d("canary", 100)]}, {"name": "primary", "route": sc()}]),
    )]);
    let managed = strings(&["hdr"]);
    let ctx = IstioContext {
        managed_routes: Some(&managed),
        ..host_ctx()
    };
    assert_eq!(
        set_weight(&input, &vref("vsvc", &[]), &ctx, 30, &[]),
        Ok(None)
    );
}

// ---- §4 names ----------------------------------------------------------------------------

#[test]
fn virtual_service_reference_resolution() {
    let cases = [
        ("vs", ("default", "vs")),
        ("vs.istio", ("istio", "vs")),
        ("a.b.istio", ("istio", "a.b")),
        ("test.ns.cluster.local", ("ns", "test")),
        ("test.ns.svc.cluster.local", ("svc", "test.ns")),
    ];
    for (reference, (ns, name)) in cases {
        assert_eq!(
            virtual_service_namespace_name(reference, "default"),
            (ns.to_string(), name.to_string()),
            "{reference}"
        );
    }
}

// ---- §6 header routes ----------------------------------------------------------------------

fn managed_ctx(managed: &[String]) -> IstioContext<'_> {
    IstioContext {
        managed_routes: Some(managed),
        ..host_ctx()
    }
}

#[test]
fn upstream_header_route_host_based_added_then_removed() {
    let managed = strings(&["test-header-route"]);
    let ctx = managed_ctx(&managed);
    let r = vref("vsvc", &["primary"]);
    let step = header_step("test-header-route", "agent", exact("firefox"));
    let out = set_header_route(&regular_vsvc(), &r, &ctx, &step, None).unwrap();
    let mut expected = regular_vsvc();
    let http = expected["spec"]["http"].as_array_mut().unwrap();
    http.insert(
        0,
        json!({
            "name": "test-header-route",
            "match": [{"headers": {"agent": {"exact": "firefox"}}}],
            "route": [{"destination": {"host": "canary"}, "weight": 100}]
        }),
    );
    assert_json(&out, &expected);
    assert_eq!(
        set_header_route_event("vsvc", "test-header-route").message,
        "VirtualService `vsvc` set headerRoute 'test-header-route'"
    );
    let remove = SetHeaderRoute {
        name: "test-header-route".into(),
        matches: None,
    };
    let out = set_header_route(&out, &r, &ctx, &remove, None).unwrap();
    assert_json(&out, &regular_vsvc());
}

#[test]
fn an_empty_header_match_creates_a_catch_all_route_to_the_canary() {
    // `match: []` is not `match` absent: Argo creates the route, and a route without
    // conditions matches every request.
    let managed = strings(&["everyone"]);
    let ctx = managed_ctx(&managed);
    let r = vref("vsvc", &["primary"]);
    let step = SetHeaderRoute {
        name: "everyone".into(),
        matches: Some(vec![]),
    };
    let out = set_header_route(&regular_vsvc(), &r, &ctx, &step, None).unwrap();
    let first = &out["spec"]["http"][0];
    assert_eq!(first["name"], "everyone");
    assert_eq!(
        first["route"],
        json!([{"destination": {"host": "canary"}, "weight": 100}])
    );
    assert!(
        first
            .get("match")
            .is_none_or(|m| m.as_array().is_some_and(Vec::is_empty)),
        "{first}"
    );
}

#[test]
fn upstream_header_route_subset_based() {
    let spec = dr_spec("canary-subset", "stable-subset", &[]);
    let managed = strings(&["test-header-route"]);
    let ctx = IstioContext {
        managed_routes: Some(&managed),
        ..subset_ctx(&spec)
    };
    let dr = json!({"metadata": {"name": "istio-destrule"},
                    "spec": {"host": "rollout-service", "subsets": [{"name": "stable-subset"}, {"name": "canary-subset"}]}});
    let step = header_step(
        "test-header-route",
        "agent",
        StringMatch {
            regex: Some("firefox".into()),
            ..Default::default()
        },
    );
    let out = set_header_route(
        &single_route_subset_vsvc(),
        &vref("vsvc", &[]),
        &ctx,
        &step,
        Some(&dr),
    )
    .unwrap();
    assert_json(
        &out["spec"]["http"][0],
        &json!({
            "name": "test-header-route",
            "match": [{"headers": {"agent": {"regex": "firefox"}}}],
            "route": [{"destination": {"host": "rollout-service", "subset": "canary-subset"}, "weight": 100}]
        }),
    );
    assert_eq!(names(&out), ["test-header-route", ""]);
}

#[test]
fn upstream_header_route_with_extra_fields_uses_the_weight_route_port() {
    let managed = strings(&["test-header-route"]);
    let ctx = managed_ctx(&managed);
    let r = vref("vsvc", &["primary"]);
    let step = header_step("test-header-route", "agent", exact("firefox"));
    let out = set_header_route(&regular_vsvc_with_extra(), &r, &ctx, &step, None).unwrap();
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([{"destination": {"host": "canary", "port": {"number": 8443}}, "weight": 100}]),
    );
    assert_json(
        &out["spec"]["http"][1],
        &regular_vsvc_with_extra()["spec"]["http"][0],
    );
    assert_json(
        &out["spec"]["http"][2],
        &regular_vsvc_with_extra()["spec"]["http"][1],
    );
    // RemoveManagedRoutes restores the original object.
    match remove_managed_routes(&out, &ctx).unwrap() {
        RemoveOutcome::Write(v) => assert_json(&v, &regular_vsvc_with_extra()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn upstream_header_route_avoids_duplicates_and_follows_managed_order() {
    let managed = strings(&["h2", "h1"]);
    let ctx = managed_ctx(&managed);
    let r = vref("vsvc", &["primary"]);
    let h1 = header_step(
        "h1",
        "browser",
        StringMatch {
            prefix: Some("Firefox".into()),
            ..Default::default()
        },
    );
    let out = set_header_route(&regular_vsvc(), &r, &ctx, &h1, None).unwrap();
    let out = set_header_route(&out, &r, &ctx, &h1, None).unwrap();
    assert_eq!(names(&out), ["h1", "primary", "secondary"]);
    let out = set_header_route(&out, &r, &ctx, &header_step("h2", "x", exact("1")), None).unwrap();
    assert_eq!(names(&out), ["h2", "h1", "primary", "secondary"]);
    // Without managedRoutes the new route is simply appended.
    let out = set_header_route(&regular_vsvc(), &r, &host_ctx(), &h1, None).unwrap();
    assert_eq!(names(&out), ["primary", "secondary", "h1"]);
}

#[test]
fn ordering_duplicates_unnamed_routes() {
    // §6 quirk: N unnamed routes are each emitted N times.
    let input = vs_with(&[(
        "http",
        json!([{"route": sc(), "match": [{"uri": {"prefix": "/a"}}]}, {"route": sc()}]),
    )]);
    let managed = strings(&["hdr"]);
    let out = set_header_route(
        &input,
        &vref("vsvc", &[]),
        &managed_ctx(&managed),
        &header_step("hdr", "x", exact("1")),
        None,
    )
    .unwrap();
    let http = out["spec"]["http"].as_array().unwrap();
    assert_eq!(names(&out), ["hdr", "", "", "", ""]);
    assert_eq!(http[1], input["spec"]["http"][0]);
    assert_eq!(http[2], input["spec"]["http"][1]);
    assert_eq!(http[3], input["spec"]["http"][0]);
    assert_eq!(http[4], input["spec"]["http"][1]);
}

#[test]
fn removing_the_only_http_route_drops_spec_http() {
    let input = vs_with(&[(
        "http",
        json!([{"name": "hdr", "route": [d("canary", 100)]}]),
    )]);
    let remove = SetHeaderRoute {
        name: "hdr".into(),
        matches: None,
    };
    let out = set_header_route(&input, &vref("vsvc", &[]), &host_ctx(), &remove, None).unwrap();
    assert_json(&out, &vs_with(&[]));
}

// ---- §6 mirror routes ----------------------------------------------------------------------

#[test]
fn upstream_mirror_route_added_removed_and_cleaned_up() {
    let managed = strings(&["test-mirror-1", "test-mirror-2"]);
    let ctx = managed_ctx(&managed);
    let r = vref("vsvc", &["primary"]);
    let m1 = mirror_step("test-mirror-1", "GET", None);
    let out = set_mirror_route(&regular_vsvc(), &r, &ctx, &m1, None).unwrap();
    // The copy of the weight route drops the zero weight.
    assert_json(
        &out["spec"]["http"][0],
        &json!({
            "name": "test-mirror-1",
            "match": [{"method": {"exact": "GET"}}],
            "route": [{"destination": {"host": "stable"}, "weight": 100}, {"destination": {"host": "canary"}}],
            "mirror": {"host": "canary"},
            "mirrorPercentage": {"value": 100}
        }),
    );
    assert_eq!(names(&out), ["test-mirror-1", "primary", "secondary"]);
    assert_eq!(
        set_mirror_route_event("vsvc", "test-mirror-1").message,
        "VirtualService `vsvc` set mirrorRoute 'test-mirror-1'"
    );
    let delete = SetMirrorRoute {
        name: "test-mirror-1".into(),
        ..Default::default()
    };
    let out = set_mirror_route(&out, &r, &ctx, &delete, None).unwrap();
    assert_json(&out, &regular_vsvc());
    let out = set_mirror_route(&out, &r, &ctx, &m1, None).unwrap();
    let out = set_mirror_route(
        &out,
        &r,
        &ctx,
        &mirror_step("test-mirror-2", "GET", Some(90)),
        None,
    )
    .unwrap();
    assert_eq!(
        names(&out),
        ["test-mirror-1", "test-mirror-2", "primary", "secondary"]
    );
    assert_eq!(
        out["spec"]["http"][1]["mirrorPercentage"],
        json!({"value": 90})
    );
    match remove_managed_routes(&out, &ctx).unwrap() {
        RemoveOutcome::Write(v) => assert_json(&v, &regular_vsvc()),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        removed_managed_routes_event("vsvc").message,
        "VirtualService `vsvc` removed all managed routes."
    );
}

#[test]
fn upstream_mirror_route_with_extra_fields() {
    let managed = strings(&["test-mirror-1"]);
    let ctx = managed_ctx(&managed);
    let mut input = regular_vsvc_with_extra();
    // Per-destination keys Argo's typed struct does not know are not copied.
    input["spec"]["http"][0]["route"][0]["headers"] = json!({"request": {"set": {"a": "b"}}});
    let out = set_mirror_route(
        &input,
        &vref("vsvc", &["primary"]),
        &ctx,
        &mirror_step("test-mirror-1", "GET", None),
        None,
    )
    .unwrap();
    assert_json(
        &out["spec"]["http"][0]["route"],
        &json!([
            {"destination": {"host": "stable", "port": {"number": 8443}}, "weight": 100},
            {"destination": {"host": "canary", "port": {"number": 8443}}}
        ]),
    );
    assert_json(
        &out["spec"]["http"][0]["mirror"],
        &json!({"host": "canary", "port": {"number": 8443}}),
    );
    assert_json(&out["spec"]["http"][1], &input["spec"]["http"][0]);
    assert_json(&out["spec"]["http"][2], &input["spec"]["http"][1]);
}

#[test]
fn upstream_mirror_route_order_and_set_weight() {
    let managed = strings(&["test-mirror-2", "test-mirror-3", "test-mirror-1"]);
    let ctx = managed_ctx(&managed);
    let r = vref("vsvc", &["primary", "secondary"]);
    let mut out = regular_vsvc();
    for (name, method, pct) in [
        ("test-mirror-1", "GET", None),
        ("test-mirror-2", "POST", Some(90)),
        ("test-mirror-3", "GET", Some(90)),
    ] {
        out = set_mirror_route(&out, &r, &ctx, &mirror_step(name, method, pct), None).unwrap();
    }
    let out = set(&out, &r, &ctx, 40);
    assert_eq!(
        names(&out),
        [
            "test-mirror-2",
            "test-mirror-3",
            "test-mirror-1",
            "primary",
            "secondary"
        ]
    );
    for i in 0..5 {
        assert_eq!(
            (
                weight(&out, "http", i, "canary"),
                weight(&out, "http", i, "stable")
            ),
            (40, 60),
            "route {i}"
        );
    }
    let delete = SetMirrorRoute {
        name: "test-mirror-3".into(),
        ..Default::default()
    };
    let out = set_mirror_route(&out, &r, &ctx, &delete, None).unwrap();
    assert_eq!(
        names(&out),
        ["test-mirror-2", "test-mirror-1", "primary", "secondary"]
    );
    match remove_managed_routes(&out, &ctx).unwrap() {
        RemoveOutcome::Write(v) => assert_eq!(names(&v), ["primary", "secondary"]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn upstream_mirror_route_order_single_route_no_name() {
    let managed = strings(&["test-mirror-2", "test-mirror-3", "test-mirror-1"]);
    let ctx = managed_ctx(&managed);
    let r = vref("vsvc", &[]);
    let mut out = set(&single_route_vsvc(), &r, &ctx, 30);
    for (name, method, pct) in [
        ("test-mirror-1", "GET", None),
        ("test-mirror-2", "POST", Some(90)),
        ("test-mirror-3", "GET", Some(90)),
    ] {
        out = set_mirror_route(&out, &r, &ctx, &mirror_step(name, method, pct), None).unwrap();
    }
    assert_eq!(
        names(&out),
        ["test-mirror-2", "test-mirror-3", "test-mirror-1", ""]
    );
    assert_json(
        &out["spec"]["http"][3]["route"],
        &json!([d("stable", 70), d("canary", 30)]),
    );
    assert_eq!(weight(&out, "http", 0, "canary"), 30);
    let out = set(&out, &r, &ctx, 40);
    assert_eq!(
        (
            weight(&out, "http", 0, "canary"),
            weight(&out, "http", 1, "stable")
        ),
        (40, 60)
    );
    // §3 quirk: with mirror routes present the unnamed weight route is not re-weighted.
    assert_json(
        &out["spec"]["http"][3]["route"],
        &json!([d("stable", 70), d("canary", 30)]),
    );
    let delete = SetMirrorRoute {
        name: "test-mirror-3".into(),
        ..Default::default()
    };
    let out = set_mirror_route(&out, &r, &ctx, &delete, None).unwrap();
    assert_eq!(names(&out), ["test-mirror-2", "test-mirror-1", ""]);
    match remove_managed_routes(&out, &ctx).unwrap() {
        RemoveOutcome::Write(v) => assert_eq!(names(&v), [""]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn upstream_mirror_route_subset() {
    let spec = dr_spec("canary-subset", "stable-subset", &[]);
    let managed = strings(&["test-mirror-1"]);
    let ctx = IstioContext {
        managed_routes: Some(&managed),
        ..subset_ctx(&spec)
    };
    let dr = json!({"metadata": {"name": "istio-destrule"},
                    "spec": {"host": "rollout-service", "subsets": [{"name": "stable-subset"}, {"name": "canary-subset"}]}});
    let out = set_mirror_route(
        &single_route_subset_vsvc(),
        &vref("vsvc", &[]),
        &ctx,
        &mirror_step("test-mirror-1", "GET", None),
        Some(&dr),
    )
    .unwrap();
    assert_json(
        &out["spec"]["http"][0],
        &json!({
            "name": "test-mirror-1",
            "match": [{"method": {"exact": "GET"}}],
            "route": [
                {"destination": {"host": "rollout-service", "subset": "stable-subset"}, "weight": 100},
                {"destination": {"host": "rollout-service", "subset": "canary-subset"}}
            ],
            "mirror": {"host": "rollout-service", "subset": "canary-subset"},
            "mirrorPercentage": {"value": 100}
        }),
    );
    assert_json(
        &out["spec"]["http"][1],
        &single_route_subset_vsvc()["spec"]["http"][0],
    );
    match remove_managed_routes(&out, &ctx).unwrap() {
        RemoveOutcome::Write(v) => assert_json(&v, &single_route_subset_vsvc()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn mirror_route_match_fields() {
    let step = SetMirrorRoute {
        name: "m".into(),
        matches: Some(vec![RouteMatch {
            method: Some(exact("POST")),
            path: Some(StringMatch {
                prefix: Some("/api".into()),
                ..Default::default()
            }),
            headers: Some(BTreeMap::from([
                ("x-b".to_string(), exact("2")),
                ("x-a".to_string(), exact("1")),
            ])),
        }]),
        percentage: Some(0),
    };
    let out = set_mirror_route(
        &regular_vsvc(),
        &vref("vsvc", &["primary"]),
        &host_ctx(),
        &step,
        None,
    )
    .unwrap();
    assert_json(
        &out["spec"]["http"][0]["match"],
        &json!([{"method": {"exact": "POST"}, "uri": {"prefix": "/api"}, "headers": {"x-a": {"exact": "1"}, "x-b": {"exact": "2"}}}]),
    );
    assert_eq!(
        out["spec"]["http"][0]["mirrorPercentage"],
        json!({"value": 0})
    );
}

// ---- §6 RemoveManagedRoutes ----------------------------------------------------------------

fn header_steps(names: &[&str]) -> Vec<CanaryStep> {
    names
        .iter()
        .map(|n| CanaryStep {
            set_header_route: Some(header_step(n, "x-test", exact("test"))),
            ..Default::default()
        })
        .collect()
}

#[test]
fn upstream_remove_managed_routes_with_header_routes() {
    let steps = {
        let mut s = header_steps(&["test-header-1", "test-header-2"]);
        s.insert(
            0,
            CanaryStep {
                set_weight: Some(20),
                ..Default::default()
            },
        );
        s
    };
    let managed = strings(&["managed-route-1"]);
    let ctx = IstioContext {
        managed_routes: Some(&managed),
        steps: &steps,
        ..host_ctx()
    };
    let user = json!({"name": "user-defined-route", "match": [{"uri": {"prefix": "/api"}}], "route": [d("stable", 100)]});
    let primary = json!({"name": "primary", "route": [d("stable", 50), d("canary", 50)]});
    let input = vs(json!({"http": [
        {"name": "test-header-1", "match": [{"headers": {"x-test": {"exact": "test"}}}], "route": [d("canary", 100)]},
        {"name": "test-header-2", "match": [{"headers": {"x-version": {"prefix": "v2"}}}], "route": [d("canary", 100)]},
        {"name": "managed-route-1", "route": [d("stable", 50), d("canary", 50)]},
        primary.clone(),
        user.clone()
    ]}));
    assert_eq!(
        remove_managed_routes(&input, &ctx).unwrap(),
        RemoveOutcome::Write(vs(json!({"http": [primary, user]})))
    );
}

#[test]
fn upstream_remove_managed_routes_step_routes_without_managed_routes() {
    let primary = json!({"name": "primary", "route": [d("stable", 100)]});
    let steps = header_steps(&["test-header-1"]);
    let ctx = IstioContext {
        steps: &steps,
        ..host_ctx()
    };
    let input = vs(json!({"http": [
        {"name": "test-header-1", "match": [{"headers": {"x-test": {"exact": "test"}}}], "route": [d("canary", 100)]},
        primary.clone()
    ]}));
    assert_eq!(
        remove_managed_routes(&input, &ctx).unwrap(),
        RemoveOutcome::Write(vs(json!({"http": [primary.clone()]})))
    );
    // Mirror step variant.
    let steps = vec![CanaryStep {
        set_mirror_route: Some(mirror_step("test-mirror-1", "GET", None)),
        ..Default::default()
    }];
    let ctx = IstioContext {
        steps: &steps,
        ..host_ctx()
    };
    let input = vs(json!({"http": [
        {"name": "test-mirror-1", "match": [{"method": {"exact": "GET"}}], "route": [d("stable", 100)], "mirror": {"host": "canary"}},
        primary.clone()
    ]}));
    assert_eq!(
        remove_managed_routes(&input, &ctx).unwrap(),
        RemoveOutcome::Write(vs(json!({"http": [primary.clone()]})))
    );
    // §6: with such steps Argo writes even when nothing was removed.
    let plain = vs(json!({"http": [primary]}));
    assert_eq!(
        remove_managed_routes(&plain, &ctx).unwrap(),
        RemoveOutcome::Write(plain.clone())
    );
}

#[test]
fn upstream_remove_managed_routes_no_write_cases() {
    // No managed routes and no step routes.
    assert_eq!(
        remove_managed_routes(&regular_vsvc(), &host_ctx()).unwrap(),
        RemoveOutcome::Unchanged
    );
    // Managed routes that are not in this VirtualService.
    let managed = strings(&["absent"]);
    assert_eq!(
        remove_managed_routes(&regular_vsvc(), &managed_ctx(&managed)).unwrap(),
        RemoveOutcome::Unchanged
    );
    // Step routes but an http entry that is not an object: the removal fails silently.
    let steps = vec![
        CanaryStep {
            set_header_route: Some(SetHeaderRoute {
                name: "header-route".into(),
                matches: None,
            }),
            ..Default::default()
        },
        CanaryStep {
            set_mirror_route: Some(SetMirrorRoute {
                name: "mirror-route".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
    ];
    let ctx = IstioContext {
        steps: &steps,
        ..host_ctx()
    };
    let invalid = vs(json!({"http": ["not-a-route"]}));
    assert_eq!(
        remove_managed_routes(&invalid, &ctx).unwrap(),
        RemoveOutcome::Unchanged
    );
    // No spec.http: Argo returns early (later VirtualServices are skipped).
    assert_eq!(
        remove_managed_routes(&regular_tls_vsvc(), &managed_ctx(&managed)).unwrap(),
        RemoveOutcome::StopNoHttp
    );
}

#[test]
fn upstream_remove_managed_routes_errors() {
    assert_eq!(
        remove_managed_routes(&vs(json!({"http": "invalid"})), &host_ctx())
            .unwrap_err()
            .to_string(),
        "[RemoveManagedRoutes] failed to get http routes from virtual service: .spec.http accessor error: invalid is of the type string, expected []interface{}"
    );
    let managed = strings(&["primary"]);
    assert_eq!(
        remove_managed_routes(
            &vs(json!({"http": ["not-a-route"]})),
            &managed_ctx(&managed)
        )
        .unwrap_err()
        .to_string(),
        "[RemoveManagedRoutes] failed to split managed and non-managed routes: [splitManagedRoutesAndNonManagedRoutes] failed to unmarsharl http route interface: json: cannot unmarshal string into Go value of type map[string]interface {}"
    );
}

#[test]
fn remove_managed_routes_can_empty_spec_http() {
    let managed = strings(&["hdr"]);
    let input = vs(json!({"hosts": ["h"], "http": [{"name": "hdr", "route": [d("canary", 100)]}]}));
    assert_eq!(
        remove_managed_routes(&input, &managed_ctx(&managed)).unwrap(),
        RemoveOutcome::Write(vs(json!({"hosts": ["h"]})))
    );
}

// ---- multiple VirtualServices, Go formatting ---------------------------------------------

#[test]
fn upstream_multiple_virtual_services() {
    // TestMultipleVirtualServiceReconcileUpdateVirtualServices / ...NoChanges /
    // ...InferredSingleRoute: each VirtualService is handled (and written) on its own.
    let vsvc1 = {
        let mut v = regular_vsvc();
        v["metadata"]["name"] = json!("vsvc1");
        v
    };
    let vsvc2 = vs_with(&[("http", json!([{"name": "blue-green", "route": sc()}]))]);
    let refs = [
        vref("vsvc1", &["primary", "secondary"]),
        vref("vsvc2", &["blue-green"]),
    ];
    for (v, r) in [(&vsvc1, &refs[0]), (&vsvc2, &refs[1])] {
        assert_eq!(set_weight(v, r, &host_ctx(), 0, &[]), Ok(None));
        let out = set(v, r, &host_ctx(), 10);
        assert_eq!(weight(&out, "http", 0, "canary"), 10);
    }
    let out = set(&vsvc1, &refs[0], &host_ctx(), 10);
    assert_eq!(weight(&out, "http", 1, "canary"), 10);
    let unnamed = single_route_vsvc();
    let out = set(&unnamed, &vref("vsvc2", &[]), &host_ctx(), 10);
    assert_eq!(
        (
            weight(&out, "http", 0, "stable"),
            weight(&out, "http", 0, "canary")
        ),
        (90, 10)
    );
}

#[test]
fn go_formatting_helpers() {
    assert_eq!(go_fmt_float(1e6), "1e+06");
    assert_eq!(go_fmt_float(123456.0), "123456");
    assert_eq!(go_fmt_float(0.5), "0.5");
    assert_eq!(go_fmt_float(1e-5), "1e-05");
    assert_eq!(go_json_float(1e21), "1e+21");
    assert_eq!(go_json_float(1.5e-7), "1.5e-7");
    assert_eq!(go_json_float(20.5), "20.5");
    assert_eq!(crate::go::quote("a\"b\\c\n"), r#""a\"b\\c\n""#);
    assert_eq!(
        nested_slice(
            &json!({"spec": {"http": {"b": [1, "x"], "a": 1.5}}}),
            "http"
        )
        .unwrap_err(),
        ".spec.http accessor error: map[a:1.5 b:[1 x]] is of the type map[string]interface {}, expected []interface{}"
    );
    assert_eq!(
        nested_slice(&json!({"spec": "s"}), "http").unwrap_err(),
        ".spec.http accessor error: s is of the type string, expected map[string]interface{}"
    );
    assert_eq!(
        nested_slice(&json!({"spec": {"http": null}}), "http").unwrap_err(),
        ".spec.http accessor error: <nil> is of the type <nil>, expected []interface{}"
    );
    assert_eq!(nested_slice(&json!({"spec": null}), "http"), Ok(None));
}
