//! HTTPRoutes on Gateways and on Services, routed: weights, precedence, hostnames,
//! attachment and backends that do not resolve.

use serde_json::{Value, json};
use std::collections::BTreeMap;

use super::super::*;
use crate::apiserver::ApiServer;
use crate::endpoints::Role;
use crate::endpoints::fixtures::*;
use crate::model::gateway_api;
use crate::random::stream;

const NS: &str = "demo";
const V1: &str = "gateway.networking.k8s.io/v1";

/// Two stable and two canary pods behind `reviews-stable` and `reviews-canary` (port 80),
/// and Gateway `demo/gw` with an HTTP listener on port 80 for every host.
fn store() -> ApiServer {
    store_with(json!([{"name": "http", "port": 80, "protocol": "HTTP"}]))
}

/// [`store`] with Gateway `demo/gw`'s listeners given.
fn store_with(listeners: Value) -> ApiServer {
    let mut api = ApiServer::new();
    rollout(&mut api, NS, "reviews", "reviews", "s1", "c1");
    pods(&mut api, NS, "reviews", "s1", "reviews:blue", 2);
    pods(&mut api, NS, "reviews", "c1", "reviews:yellow", 2);
    service(&mut api, NS, "reviews", json!({"app": "reviews"}));
    service(
        &mut api,
        NS,
        "reviews-stable",
        json!({"app": "reviews", "rollouts-pod-template-hash": "s1"}),
    );
    service(
        &mut api,
        NS,
        "reviews-canary",
        json!({"app": "reviews", "rollouts-pod-template-hash": "c1"}),
    );
    gateway(&mut api, NS, listeners);
    api
}

fn gateway(api: &mut ApiServer, ns: &str, listeners: Value) {
    create(
        api,
        gateway_api::kind("Gateway"),
        json!({"apiVersion": V1, "kind": "Gateway",
               "metadata": {"name": "gw", "namespace": ns},
               "spec": {"gatewayClassName": "istio", "listeners": listeners}}),
    );
}

fn route(api: &mut ApiServer, ns: &str, name: &str, spec: Value) {
    create(
        api,
        gateway_api::kind("HTTPRoute"),
        json!({"apiVersion": V1, "kind": "HTTPRoute",
               "metadata": {"name": name, "namespace": ns}, "spec": spec}),
    );
}

/// The stable and canary Services with these weights (None: the weight left out).
fn backends(stable: Option<i64>, canary: Option<i64>) -> Value {
    let backend = |name: &str, weight: Option<i64>| match weight {
        Some(w) => json!({"name": name, "port": 80, "weight": w}),
        None => json!({"name": name, "port": 80}),
    };
    json!([
        backend("reviews-stable", stable),
        backend("reviews-canary", canary)
    ])
}

fn at_gateway(host: &'static str, path: &'static str) -> RequestMeta<'static> {
    RequestMeta {
        origin: Origin::Gateway("demo/gw"),
        host,
        path,
        namespace: NS,
        ..RequestMeta::default()
    }
}

/// Serves `n` requests: the roles that answered, and how many were answered 500 for a
/// backendRef that does not resolve.
fn roles(table: &RouteTable, r: &RequestMeta, n: usize) -> (BTreeMap<Role, usize>, usize) {
    let mut rng = stream(7, "router");
    let mut state = LbState::new(table);
    let mut out = BTreeMap::new();
    let mut unresolved = 0;
    for _ in 0..n {
        match table.serve(r, LbPolicy::RoundRobin, &mut rng, &mut state) {
            Ok(s) => {
                *out.entry(table.endpoint(s.endpoint).unwrap().role)
                    .or_default() += 1
            }
            Err(e @ RouteError::UnresolvedBackend { .. }) => {
                assert_eq!(e.status(), 500);
                unresolved += 1
            }
            Err(e) => panic!("{e}"),
        }
    }
    (out, unresolved)
}

fn canary_percent(table: &RouteTable, r: &RequestMeta, n: usize) -> f64 {
    let (counts, _) = roles(table, r, n);
    counts.get(&Role::Canary).copied().unwrap_or(0) as f64 * 100.0 / n as f64
}

fn notes(table: &RouteTable) -> Vec<String> {
    table.notes().iter().map(ToString::to_string).collect()
}

fn source(table: &RouteTable, r: &RequestMeta) -> String {
    table.route(r).unwrap().source.to_string()
}

#[test]
fn the_plugins_weights_split_requests_through_the_gateway() {
    let mut api = store();
    route(
        &mut api,
        NS,
        "argo-rollouts-http-route",
        json!({"parentRefs": [{"name": "gw"}],
               "rules": [{"backendRefs": backends(Some(80), Some(20))}]}),
    );
    let table = translate(&api);
    assert!(table.notes().is_empty(), "{:?}", notes(&table));
    let r = at_gateway("demo.example.com", "/");
    let canary = canary_percent(&table, &r, 100_000);
    assert!((canary - 20.0).abs() < 0.5, "canary share {canary}");
    assert_eq!(
        source(&table, &r),
        "HTTPRoute demo/argo-rollouts-http-route rules/0"
    );
    assert_eq!(table.gateway_for("demo.example.com", NS), Some("demo/gw"));
    assert!(
        table.has_virtual_services(),
        "routes make the gateway the default origin"
    );
}

#[test]
fn weights_left_out_are_one_each_so_the_split_is_even() {
    // argo-rollouts#4569: the plugin never wrote the weights, the route keeps its defaults.
    let mut api = store();
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": backends(None, None)}]}),
    );
    let canary = canary_percent(&translate(&api), &at_gateway("any", "/"), 100_000);
    assert!((canary - 50.0).abs() < 0.5, "canary share {canary}");
}

#[test]
fn weights_are_proportions_of_their_sum_and_zero_sends_nothing() {
    let mut api = store();
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw"}],
               "rules": [{"backendRefs": backends(Some(300_000), Some(100_000))}]}),
    );
    let canary = canary_percent(&translate(&api), &at_gateway("any", "/"), 100_000);
    assert!((canary - 25.0).abs() < 0.5, "canary share {canary}");

    let mut api = store();
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": backends(Some(1), Some(0))}]}),
    );
    assert_eq!(
        canary_percent(&translate(&api), &at_gateway("any", "/"), 1_000),
        0.0
    );
}

#[test]
fn an_exact_path_beats_a_longer_prefix_which_beats_a_shorter_one_across_routes() {
    let mut api = store();
    let only = |name: &str| json!([{"name": name, "port": 80}]);
    route(
        &mut api,
        NS,
        "a-everything",
        json!({"parentRefs": [{"name": "gw"}],
               "rules": [{"backendRefs": only("reviews-stable")}]}),
    );
    route(
        &mut api,
        NS,
        "b-api",
        json!({"parentRefs": [{"name": "gw"}],
               "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/api/"}}],
                          "backendRefs": only("reviews-canary")},
                         {"matches": [{"path": {"type": "Exact", "value": "/api/v1"}}],
                          "backendRefs": only("reviews")}]}),
    );
    let table = translate(&api);
    let at = |path| source(&table, &at_gateway("h", path));
    assert_eq!(at("/api/v1"), "HTTPRoute demo/b-api rules/1");
    assert_eq!(at("/api/v1/x"), "HTTPRoute demo/b-api rules/0");
    assert_eq!(
        at("/api"),
        "HTTPRoute demo/b-api rules/0",
        "the trailing / is ignored"
    );
    assert_eq!(at("/api?x=1"), "HTTPRoute demo/b-api rules/0");
    assert_eq!(
        at("/apix"),
        "HTTPRoute demo/a-everything rules/0",
        "prefixes match whole segments"
    );
    assert_eq!(at("/"), "HTTPRoute demo/a-everything rules/0");
}

#[test]
fn a_header_match_sends_its_requests_to_the_canary_and_the_rest_by_weight() {
    let mut api = store();
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw"}],
               "rules": [{"backendRefs": backends(Some(90), Some(10))},
                         {"name": "canary-header",
                          "matches": [{"headers": [{"name": "X-Canary", "value": "yes"}]}],
                          "backendRefs": [{"name": "reviews-canary", "port": 80}]}]}),
    );
    let table = translate(&api);
    let headers = [("x-canary", "yes")];
    let with_header = RequestMeta {
        headers: &headers,
        ..at_gateway("h", "/")
    };
    assert_eq!(canary_percent(&table, &with_header, 1_000), 100.0);
    let plain = canary_percent(&table, &at_gateway("h", "/"), 100_000);
    assert!((plain - 10.0).abs() < 0.5, "canary share {plain}");
    let wrong = [("x-canary", "no")];
    let other = RequestMeta {
        headers: &wrong,
        ..at_gateway("h", "/")
    };
    assert_eq!(source(&table, &other), "HTTPRoute demo/r rules/0");
}

#[test]
fn a_backend_that_does_not_resolve_keeps_its_share_answered_500() {
    let mut api = store();
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw"}],
               "rules": [{"backendRefs": [{"name": "reviews-stable", "port": 80, "weight": 70},
                                          {"name": "missing", "port": 80, "weight": 30}]}]}),
    );
    let table = translate(&api);
    let (counts, unresolved) = roles(&table, &at_gateway("h", "/"), 100_000);
    assert!(
        (unresolved as f64 / 1_000.0 - 30.0).abs() < 0.5,
        "{unresolved}"
    );
    assert_eq!(counts.get(&Role::Canary), None);
    assert_eq!(
        notes(&table),
        [
            "HTTPRoute demo/r: rules/0: backendRef Service demo/missing does not exist (BackendNotFound); its share is answered 500, as implementations do"
        ]
    );
}

#[test]
fn a_service_in_another_namespace_needs_a_reference_grant() {
    let mut api = store();
    service(&mut api, "other", "shared", json!({"app": "shared"}));
    pods(&mut api, "other", "shared", "x1", "shared:1", 1);
    let spec = json!({"parentRefs": [{"name": "gw"}],
                      "rules": [{"backendRefs": [{"name": "shared", "namespace": "other", "port": 80}]}]});
    route(&mut api, NS, "r", spec);
    let (_, unresolved) = roles(&translate(&api), &at_gateway("h", "/"), 100);
    assert_eq!(unresolved, 100);
    create(
        &mut api,
        gateway_api::kind("ReferenceGrant"),
        json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
               "metadata": {"name": "g", "namespace": "other"},
               "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": NS}],
                        "to": [{"group": "", "kind": "Service"}]}}),
    );
    let (counts, unresolved) = roles(&translate(&api), &at_gateway("h", "/"), 100);
    assert_eq!((counts.values().sum::<usize>(), unresolved), (100, 0));
}

#[test]
fn a_route_serves_the_hostnames_it_shares_with_the_listener() {
    let mut api = ApiServer::new();
    service(&mut api, NS, "reviews", json!({"app": "reviews"}));
    pods(&mut api, NS, "reviews", "s1", "reviews:blue", 1);
    gateway(
        &mut api,
        NS,
        json!([{"name": "web", "port": 80, "protocol": "HTTP", "hostname": "*.example.com"}]),
    );
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw", "sectionName": "web"}],
               "hostnames": ["shop.example.com", "example.org"],
               "rules": [{"backendRefs": [{"name": "reviews", "port": 80}]}]}),
    );
    let table = translate(&api);
    assert!(table.route(&at_gateway("shop.example.com", "/")).is_ok());
    assert_eq!(
        table.route(&at_gateway("other.example.com", "/")).err(),
        Some(RouteError::NoRoute)
    );
    assert_eq!(
        table.route(&at_gateway("example.org", "/")).err(),
        Some(RouteError::NoRoute),
        "the listener does not accept the host"
    );
}

#[test]
fn a_route_of_another_namespace_is_not_accepted_by_a_listener_for_its_own() {
    let mut api = store();
    service(&mut api, "team", "reviews", json!({"app": "reviews"}));
    route(
        &mut api,
        "team",
        "r",
        json!({"parentRefs": [{"name": "gw", "namespace": NS}],
               "rules": [{"backendRefs": [{"name": "reviews", "port": 80}]}]}),
    );
    let table = translate(&api);
    assert_eq!(
        notes(&table),
        [
            "HTTPRoute team/r: not accepted by Gateway demo/gw: listener \"http\" admits routes of namespace demo only"
        ]
    );
    assert_eq!(table.gateway_for("h", NS), None);
}

#[test]
fn a_route_on_a_service_splits_the_meshs_requests_for_it() {
    // GAMMA: the parent is the Service the callers address.
    let mut api = store();
    route(
        &mut api,
        NS,
        "east-west",
        json!({"parentRefs": [{"group": "", "kind": "Service", "name": "reviews", "port": 80}],
               "rules": [{"backendRefs": backends(Some(70), Some(30))}]}),
    );
    let table = translate(&api);
    let r = RequestMeta {
        host: "reviews",
        namespace: NS,
        ..RequestMeta::default()
    };
    let canary = canary_percent(&table, &r, 100_000);
    assert!((canary - 30.0).abs() < 0.5, "canary share {canary}");
    assert_eq!(source(&table, &r), "HTTPRoute demo/east-west rules/0");
}

fn options() -> envoy::EnvoyOptions<'static> {
    envoy::EnvoyOptions {
        listen_address: "127.0.0.1".into(),
        ports: BTreeMap::new(),
        default_port: 8080,
        admin_port: 0,
        l4_port: &|_, _| 0,
        pod_address: &|_| None,
        lb: LbPolicy::RoundRobin,
    }
}

#[test]
fn a_gateway_listing_a_tls_port_first_serves_http_on_its_http_listeners_port() {
    let mut api = store_with(json!([{"name": "tls", "port": 443, "protocol": "TLS"},
               {"name": "http", "port": 8080, "protocol": "HTTP"}]));
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw", "sectionName": "http"}],
               "rules": [{"backendRefs": backends(Some(80), Some(20))}]}),
    );
    let table = translate(&api);
    assert_eq!(table.gateway_http_port("gw", NS), Some(8080));
    let (config, _) = envoy::bootstrap(&table, &options());
    let listener = &config["static_resources"]["listeners"][0];
    assert_eq!(listener["name"], "demo/gw 8080");
    let routes = &listener["filter_chains"][0]["filters"][0]["typed_config"]["route_config"]["virtual_hosts"]
        [0]["routes"];
    assert_eq!(routes.as_array().map(Vec::len), Some(1), "{routes}");
}

#[test]
fn envoy_is_given_segment_prefixes_as_separated_prefixes() {
    let mut api = store();
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw"}],
               "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/api/"}}],
                          "backendRefs": backends(Some(80), Some(20))},
                         {"backendRefs": backends(Some(80), Some(20))}]}),
    );
    let table = translate(&api);
    let (config, omitted) = envoy::bootstrap(&table, &options());
    assert_eq!(omitted, Vec::<String>::new());
    let routes = &config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        ["route_config"]["virtual_hosts"][0]["routes"];
    assert_eq!(routes[0]["match"], json!({"path_separated_prefix": "/api"}));
    assert_eq!(routes[1]["match"], json!({"prefix": "/"}));
}

#[test]
fn taken_in_turns_the_split_is_exact_over_each_period_and_spread_within_it() {
    let mut api = store();
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw"}],
               "rules": [{"backendRefs": backends(Some(80), Some(20))}]}),
    );
    let options = TranslateOptions {
        gateway_api_split: GatewayApiSplit::RoundRobin,
    };
    let table = translate_with(&api, options);
    let r = at_gateway("h", "/");
    let split = table.route(&r).unwrap().clusters;
    assert!(split.is_in_turns());
    let canary = table
        .clusters()
        .iter()
        .find(|c| c.host().starts_with("reviews-canary"))
        .unwrap()
        .id();
    let mut rng = stream(7, "router");
    let picks: Vec<bool> = (0..1_000).map(|_| split.pick(&mut rng) == canary).collect();
    // Exactly one in five, every five requests: no draw, so no sampling noise.
    for five in picks.chunks(5) {
        assert_eq!(five.iter().filter(|c| **c).count(), 1, "{five:?}");
    }
    assert!(!translate(&api).route(&r).unwrap().clusters.is_in_turns());
}

#[test]
fn weights_in_turns_are_reduced_by_their_common_divisor_and_scaled_past_the_period() {
    let mut api = store();
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw"}],
               "rules": [{"backendRefs": backends(Some(999_999), Some(333_333))}]}),
    );
    let options = TranslateOptions {
        gateway_api_split: GatewayApiSplit::RoundRobin,
    };
    let table = translate_with(&api, options);
    let canary = canary_percent(&table, &at_gateway("h", "/"), 4_000);
    assert_eq!(canary, 25.0, "3:1, exactly, over whole periods");

    // 70,001 : 30,000 has no common divisor and a period past 65,536: scaled to
    // 45,875 : 19,660, a share off by less than 1 / 65,536.
    let mut api = store();
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw"}],
               "rules": [{"backendRefs": backends(Some(70_001), Some(30_000))}]}),
    );
    let table = translate_with(&api, options);
    let (counts, _) = roles(&table, &at_gateway("h", "/"), 65_535);
    assert_eq!(counts[&Role::Canary], 19_660);
}

#[test]
fn a_listener_for_other_route_kinds_does_not_take_an_httproute() {
    let mut api = ApiServer::new();
    service(&mut api, NS, "reviews", json!({"app": "reviews"}));
    gateway(
        &mut api,
        NS,
        json!([{"name": "grpc", "port": 80, "protocol": "HTTP",
                "allowedRoutes": {"kinds": [{"kind": "GRPCRoute"}]}}]),
    );
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "reviews", "port": 80}]}]}),
    );
    assert_eq!(
        notes(&translate(&api)),
        [
            "HTTPRoute demo/r: not accepted by Gateway demo/gw: listener \"grpc\" admits other route kinds only"
        ]
    );
}

#[test]
fn a_header_named_twice_in_a_match_counts_once_the_first() {
    let mut api = store();
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw"}],
               "rules": [{"matches": [{"headers": [{"name": "X-Canary", "value": "yes"},
                                                   {"name": "x-canary", "value": "no"}]}],
                          "backendRefs": [{"name": "reviews-canary", "port": 80}]}]}),
    );
    let table = translate(&api);
    let headers = [("x-canary", "yes")];
    let r = RequestMeta {
        headers: &headers,
        ..at_gateway("h", "/")
    };
    assert_eq!(source(&table, &r), "HTTPRoute demo/r rules/0");
}

#[test]
fn a_grpc_route_matches_its_service_and_method_as_paths() {
    let mut api = store();
    create(
        &mut api,
        gateway_api::kind("GRPCRoute"),
        json!({"apiVersion": V1, "kind": "GRPCRoute", "metadata": {"name": "g", "namespace": NS},
               "spec": {"parentRefs": [{"name": "gw"}],
                        "rules": [{"matches": [{"method": {"service": "shop.Cart", "method": "Add"}}],
                                   "backendRefs": [{"name": "reviews-canary", "port": 80}]},
                                  {"matches": [{"method": {"service": "shop.Cart"}}],
                                   "backendRefs": backends(Some(80), Some(20))}]}}),
    );
    let table = translate(&api);
    assert!(table.notes().is_empty(), "{:?}", notes(&table));
    let at = |path| source(&table, &at_gateway("h", path));
    assert_eq!(at("/shop.Cart/Add"), "GRPCRoute demo/g rules/0");
    assert_eq!(at("/shop.Cart/Remove"), "GRPCRoute demo/g rules/1");
    assert_eq!(
        table.route(&at_gateway("h", "/shop.Orders/Add")).err(),
        Some(RouteError::NoRoute)
    );
    let canary = canary_percent(&table, &at_gateway("h", "/shop.Cart/Remove"), 100_000);
    assert!((canary - 20.0).abs() < 0.5, "canary share {canary}");
}

#[test]
fn tcp_and_tls_routes_take_their_listeners_connections() {
    let mut api = store_with(json!([{"name": "tcp", "port": 9000, "protocol": "TCP"},
               {"name": "tls", "port": 443, "protocol": "TLS", "hostname": "*.example.com"}]));
    for (kind, name, extra) in [
        ("TCPRoute", "t", json!({})),
        ("TLSRoute", "s", json!({"hostnames": ["shop.example.com"]})),
    ] {
        let mut spec = json!({"parentRefs": [{"name": "gw"}],
                              "rules": [{"backendRefs": backends(Some(70), Some(30))}]});
        if let Some(h) = extra.get("hostnames") {
            spec["hostnames"] = h.clone();
        }
        create(
            &mut api,
            gateway_api::kind(kind),
            json!({"apiVersion": "gateway.networking.k8s.io/v1alpha2", "kind": kind,
                   "metadata": {"name": name, "namespace": NS}, "spec": spec}),
        );
    }
    let table = translate(&api);
    let notes = notes(&table);
    // Each route is refused by the other protocol's listener, and noted only if no
    // listener took it.
    assert!(notes.is_empty(), "{notes:?}");
    let tcp = RequestMeta {
        protocol: Protocol::Tcp,
        port: 9000,
        ..at_gateway("anything", "/")
    };
    let choice = table.route(&tcp).unwrap();
    assert_eq!(choice.scope, Scope::PerConnection);
    assert_eq!(choice.source.to_string(), "TCPRoute demo/t rules/0");
    let tls = RequestMeta {
        protocol: Protocol::Tls,
        port: 443,
        sni: Some("shop.example.com"),
        ..at_gateway("shop.example.com", "/")
    };
    assert_eq!(
        table.route(&tls).unwrap().source.to_string(),
        "TLSRoute demo/s rules/0"
    );
    let other = RequestMeta {
        sni: Some("other.example.com"),
        ..tls
    };
    assert_eq!(table.route(&other).err(), Some(RouteError::NoRoute));
    let canary = canary_percent(&table, &tcp, 100_000);
    assert!((canary - 30.0).abs() < 0.5, "canary share {canary}");
}

/// Condition `t` of a status entry (a route's parent, a listener): `status reason`.
fn condition(entry: &Value, t: &str) -> String {
    let c = entry["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .unwrap_or_else(|| panic!("no {t} condition in {entry}"));
    format!(
        "{} {}",
        c["status"].as_str().unwrap(),
        c["reason"].as_str().unwrap()
    )
}

/// Each parentRef's `Accepted` and the route's `ResolvedRefs`, with the spec's reasons.
#[test]
fn a_routes_status_says_per_parent_whether_it_was_accepted_and_why_not() {
    let mut api = store_with(
        json!([{"name": "web", "port": 80, "protocol": "HTTP", "hostname": "*.example.com"},
               {"name": "tcp", "port": 9000, "protocol": "TCP"}]),
    );
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw", "sectionName": "web"},
                              {"name": "gw", "sectionName": "tcp"},
                              {"name": "gw", "sectionName": "absent"},
                              {"name": "reviews", "group": "", "kind": "Service", "port": 80},
                              {"name": "no-such-gateway"}],
               "hostnames": ["shop.example.com"],
               "rules": [{"backendRefs": [{"name": "reviews-stable", "port": 80},
                                          {"name": "shared", "namespace": "other", "port": 80}]}]}),
    );
    route(
        &mut api,
        NS,
        "elsewhere",
        json!({"parentRefs": [{"name": "gw", "sectionName": "web"}],
               "hostnames": ["example.org"],
               "rules": [{"backendRefs": backends(None, None)}]}),
    );
    let mut table = translate(&api);
    let writes = table.take_gateway_api_status();
    assert!(table.take_gateway_api_status().is_empty(), "taken once");
    let status_of = |name: &str| {
        let w = writes
            .iter()
            .find(|w| w.key.name == name && w.key.kind != gateway_api::kind("Gateway"));
        w.unwrap_or_else(|| panic!("no status for {name}"))
            .status
            .clone()
    };
    let r = status_of("r");
    let parents = r["parents"].as_array().unwrap();
    // The Gateway that does not exist is nobody's to report on.
    assert_eq!(parents.len(), 4, "{r}");
    assert_eq!(condition(&parents[0], "Accepted"), "True Accepted");
    assert_eq!(
        condition(&parents[1], "Accepted"),
        "False NotAllowedByListeners"
    );
    assert_eq!(condition(&parents[2], "Accepted"), "False NoMatchingParent");
    assert_eq!(parents[3]["controllerName"], "istio.io/mesh-controller");
    assert_eq!(
        parents[3]["parentRef"],
        json!({"group": "", "kind": "Service", "name": "reviews", "port": 80})
    );
    assert_eq!(parents[0]["controllerName"], "istio.io/gateway-controller");
    for p in parents {
        assert_eq!(condition(p, "ResolvedRefs"), "False RefNotPermitted");
    }
    let elsewhere = status_of("elsewhere");
    assert_eq!(
        condition(&elsewhere["parents"][0], "Accepted"),
        "False NoMatchingListenerHostname"
    );
    assert_eq!(
        condition(&elsewhere["parents"][0], "ResolvedRefs"),
        "True ResolvedRefs"
    );
    let gw = writes
        .iter()
        .find(|w| w.key.kind == gateway_api::kind("Gateway"))
        .unwrap();
    let listeners = &gw.status["listeners"];
    assert_eq!(listeners[0]["attachedRoutes"], 1, "{listeners}");
    assert_eq!(listeners[1]["attachedRoutes"], 0);
    assert_eq!(
        listeners[1]["supportedKinds"],
        json!([{"group": gateway_api::GROUP, "kind": "TCPRoute"}])
    );
}

/// A route whose two parentRefs select the same listener is one attached route; a listener
/// whose allowedRoutes.kinds leave its protocol nothing says `InvalidRouteKinds`.
#[test]
fn a_listener_counts_each_route_once_and_says_when_its_kinds_leave_nothing() {
    let mut api = store_with(json!([{"name": "http", "port": 80, "protocol": "HTTP"},
               {"name": "odd", "port": 81, "protocol": "HTTP",
                "allowedRoutes": {"kinds": [{"kind": "TCPRoute"}]}},
               {"name": "udp", "port": 53, "protocol": "UDP"}]));
    route(
        &mut api,
        NS,
        "r",
        json!({"parentRefs": [{"name": "gw"}, {"name": "gw", "sectionName": "http"}],
               "rules": [{"backendRefs": backends(Some(80), Some(20))}]}),
    );
    let mut table = translate(&api);
    let writes = table.take_gateway_api_status();
    let gw = writes
        .iter()
        .find(|w| w.key.kind == gateway_api::kind("Gateway"))
        .unwrap();
    let listeners = &gw.status["listeners"];
    assert_eq!(listeners[0]["attachedRoutes"], 1, "{listeners}");
    assert_eq!(
        condition(&listeners[1], "ResolvedRefs"),
        "False InvalidRouteKinds"
    );
    assert_eq!(condition(&listeners[1], "Accepted"), "True Accepted");
    assert_eq!(
        condition(&listeners[2], "Accepted"),
        "False UnsupportedProtocol"
    );
    assert_eq!(condition(&listeners[2], "Programmed"), "False Invalid");
}

/// A ReferenceGrant from GRPCRoutes admits a GRPCRoute's backend in its namespace; one
/// from HTTPRoutes does not.
#[test]
fn a_reference_grant_admits_the_route_kind_it_names() {
    let mut api = store();
    service(&mut api, "other", "shared", json!({"app": "shared"}));
    pods(&mut api, "other", "shared", "x1", "shared:1", 1);
    create(
        &mut api,
        gateway_api::kind("GRPCRoute"),
        json!({"apiVersion": V1, "kind": "GRPCRoute", "metadata": {"name": "g", "namespace": NS},
               "spec": {"parentRefs": [{"name": "gw"}],
                        "rules": [{"backendRefs": [{"name": "shared", "namespace": "other", "port": 80}]}]}}),
    );
    let grant = |api: &mut ApiServer, kind: &str| {
        create(
            api,
            gateway_api::kind("ReferenceGrant"),
            json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
                   "metadata": {"name": kind.to_lowercase(), "namespace": "other"},
                   "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": kind, "namespace": NS}],
                            "to": [{"group": "", "kind": "Service"}]}}),
        )
    };
    grant(&mut api, "HTTPRoute");
    let (_, unresolved) = roles(&translate(&api), &at_gateway("h", "/"), 100);
    assert_eq!(unresolved, 100);
    grant(&mut api, "GRPCRoute");
    let (counts, unresolved) = roles(&translate(&api), &at_gateway("h", "/"), 100);
    assert_eq!((counts.values().sum::<usize>(), unresolved), (100, 0));
}
