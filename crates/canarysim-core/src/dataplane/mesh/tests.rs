//! Translation and routing tests over small stores: objects in, counted picks out.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::apiserver::ApiServer;
use crate::clock::SimTime;
use crate::endpoints::Role;
use crate::endpoints::fixtures::*;
use crate::model::Kind;
use crate::random::stream;

const NS: &str = "demo";

/// Two stable (blue) and two canary (yellow) pods of app `reviews`; Services `reviews`
/// (both), `reviews-stable`, `reviews-canary`; Gateway `demo/gw` on port 80;
/// DestinationRule `reviews` with subsets `stable` and `canary`.
fn store() -> ApiServer {
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
    create(
        &mut api,
        Kind::Gateway,
        json!({"metadata": {"name": "gw", "namespace": NS},
               "spec": {"selector": {"istio": "ingressgateway"},
                        "servers": [{"port": {"number": 80, "name": "http", "protocol": "HTTP"},
                                     "hosts": ["*"]}]}}),
    );
    create(
        &mut api,
        Kind::DestinationRule,
        json!({"metadata": {"name": "reviews", "namespace": NS},
               "spec": {"host": "reviews",
                        "subsets": [{"name": "stable", "labels": {"rollouts-pod-template-hash": "s1"}},
                                    {"name": "canary", "labels": {"rollouts-pod-template-hash": "c1"}}]}}),
    );
    api
}

fn vs(api: &mut ApiServer, name: &str, spec: Value) {
    create(
        api,
        Kind::VirtualService,
        json!({"metadata": {"name": name, "namespace": NS}, "spec": spec}),
    );
}

/// A host-level 80/20 split between the stable and canary Services.
fn split(stable: i64, canary: i64) -> Value {
    json!([{"destination": {"host": "reviews-stable"}, "weight": stable},
           {"destination": {"host": "reviews-canary"}, "weight": canary}])
}

fn req(origin: Origin<'static>, host: &'static str) -> RequestMeta<'static> {
    RequestMeta {
        origin,
        host,
        namespace: NS,
        ..RequestMeta::default()
    }
}

/// Serves `n` requests and counts the roles of the endpoints that answered.
fn roles(table: &RouteTable, r: &RequestMeta, n: usize, seed: u64) -> BTreeMap<Role, usize> {
    let mut rng = stream(seed, "router");
    let mut state = LbState::new(table);
    let mut out = BTreeMap::new();
    for _ in 0..n {
        let s = table
            .serve(r, LbPolicy::RoundRobin, &mut rng, &mut state)
            .unwrap();
        *out.entry(table.endpoint(s.endpoint).unwrap().role)
            .or_default() += 1;
    }
    out
}

fn share(counts: &BTreeMap<Role, usize>, role: Role) -> f64 {
    let total: usize = counts.values().sum();
    counts.get(&role).copied().unwrap_or(0) as f64 * 100.0 / total as f64
}

fn source(table: &RouteTable, r: &RequestMeta) -> String {
    table.route(r).unwrap().source.to_string()
}

fn notes(table: &RouteTable) -> Vec<String> {
    table.notes().iter().map(ToString::to_string).collect()
}

#[test]
fn eighty_twenty_through_the_gateway_gives_twenty_percent_canary() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["rollouts-demo.local"], "gateways": ["gw"],
               "http": [{"name": "primary", "route": split(80, 20)}]}),
    );
    let table = translate(&api);
    assert!(table.notes().is_empty(), "{:?}", notes(&table));
    let r = req(Origin::Gateway("demo/gw"), "rollouts-demo.local");
    let counts = roles(&table, &r, 100_000, 1);
    let canary = share(&counts, Role::Canary);
    assert!((canary - 20.0).abs() < 0.5, "canary share {canary}");
    assert_eq!(counts[&Role::Canary], 20_112, "exact count for seed 1");
    let names: Vec<&str> = table.clusters().iter().map(Cluster::name).collect();
    assert!(names.contains(&"outbound|80||reviews-canary.demo.svc.cluster.local"));
    assert_eq!(
        source(&table, &r),
        "VirtualService demo/vs http/primary",
        "routes report where they came from"
    );
    // The same gateway by short name (resolved in the request's namespace).
    assert!(
        table
            .route(&req(Origin::Gateway("gw"), "rollouts-demo.local"))
            .is_ok()
    );
}

#[test]
fn hosts_match_by_short_name_fqdn_and_wildcard() {
    let mut api = store();
    vs(
        &mut api,
        "short",
        json!({"hosts": ["reviews"], "http": [{"route": split(100, 0)}]}),
    );
    vs(
        &mut api,
        "wild",
        json!({"hosts": ["*.example.com"], "gateways": ["gw"],
               "http": [{"route": [{"destination": {"host": "reviews-canary"}}]}]}),
    );
    vs(
        &mut api,
        "any",
        json!({"hosts": ["*"], "gateways": ["demo/gw"],
               "http": [{"route": [{"destination": {"host": "reviews-stable.demo.svc.cluster.local"}}]}]}),
    );
    let table = translate(&api);
    let from = |host: &'static str, ns: &'static str| {
        let r = RequestMeta {
            namespace: ns,
            ..req(Origin::Mesh, host)
        };
        table.route(&r).map(|c| c.source.to_string())
    };
    let short = Ok("VirtualService demo/short http/0".to_string());
    assert_eq!(from("reviews", NS), short);
    assert_eq!(from("reviews:80", NS), short);
    assert_eq!(from("reviews.demo", "other"), short);
    assert_eq!(from("reviews.demo.svc.cluster.local", "other"), short);
    // From another namespace, `reviews` is another Service: none exists there.
    assert_eq!(from("reviews", "other"), Err(RouteError::NoRoute));

    let gw = |host: &'static str| table.route(&req(Origin::Gateway("gw"), host)).unwrap();
    // Exact beats nothing here; a suffix wildcard beats `*`.
    assert_eq!(
        gw("shop.example.com").source.to_string(),
        "VirtualService demo/wild http/0"
    );
    assert_eq!(
        gw("example.org").source.to_string(),
        "VirtualService demo/any http/0"
    );
    let canary = table
        .cluster(gw("a.b.example.com").clusters.pick(&mut stream(1, "x")))
        .unwrap();
    assert_eq!(
        canary.name(),
        "outbound|80||reviews-canary.demo.svc.cluster.local"
    );
}

/// Issue 25: a VirtualService with only `tcp` (or `tls`) routes is bound to its gateway as
/// much as an HTTP one: `origin: gateway`/`auto` enters there (it went through the mesh and
/// found no route), while a gateway with HTTP routes for the host still comes first.
#[test]
fn a_gateway_with_only_tcp_or_tls_routes_for_a_host_serves_it() {
    let mut api = store();
    create(
        &mut api,
        Kind::Gateway,
        json!({"metadata": {"name": "edge", "namespace": NS},
               "spec": {"selector": {"istio": "ingressgateway"},
                        "servers": [{"port": {"number": 5432, "name": "tcp", "protocol": "TCP"},
                                     "hosts": ["*"]},
                                    {"port": {"number": 443, "name": "tls", "protocol": "TLS"},
                                     "tls": {"mode": "PASSTHROUGH"}, "hosts": ["*"]}]}}),
    );
    vs(
        &mut api,
        "db",
        json!({"hosts": ["db.example.com"], "gateways": ["edge"],
               "tcp": [{"match": [{"port": 5432}], "route": split(80, 20)}]}),
    );
    vs(
        &mut api,
        "secure",
        json!({"hosts": ["secure.example.com"], "gateways": ["edge"],
               "tls": [{"match": [{"port": 443, "sniHosts": ["secure.example.com"]}],
                        "route": split(80, 20)}]}),
    );
    let table = translate(&api);
    assert_eq!(table.gateway_for("db.example.com", NS), Some("demo/edge"));
    assert_eq!(
        table.gateway_for("secure.example.com:443", NS),
        Some("demo/edge")
    );
    assert_eq!(
        table.gateway_serving("db.example.com", NS, Protocol::Http),
        None
    );
    assert_eq!(
        table.gateway_serving("db.example.com", NS, Protocol::Tcp),
        Some("demo/edge")
    );
    // A TLS connection is routed by tls, then tcp routes.
    assert_eq!(
        table.gateway_serving("db.example.com", NS, Protocol::Tls),
        Some("demo/edge")
    );
    let named = |section| -> Vec<String> {
        table
            .virtual_services_at("edge", "db.example.com:5432", NS, section)
            .iter()
            .map(|k| k.to_string())
            .collect()
    };
    assert_eq!(named(Protocol::Tcp), ["VirtualService demo/db"]);
    assert!(named(Protocol::Http).is_empty() && named(Protocol::Tls).is_empty());

    // Through that gateway a TCP connection takes the tcp route, per connection.
    let choice = table
        .route(&RequestMeta {
            protocol: Protocol::Tcp,
            port: 5432,
            ..req(Origin::Gateway("demo/edge"), "db.example.com")
        })
        .unwrap();
    assert_eq!(choice.source.to_string(), "VirtualService demo/db tcp/0");
    assert_eq!(choice.scope, Scope::PerConnection);

    // A host with HTTP routes at one gateway and TCP routes at another: HTTP's comes first.
    vs(
        &mut api,
        "reviews-web",
        json!({"hosts": ["reviews.example.com"], "gateways": ["gw"],
               "http": [{"route": split(80, 20)}]}),
    );
    vs(
        &mut api,
        "reviews-tcp",
        json!({"hosts": ["reviews.example.com"], "gateways": ["edge"],
               "tcp": [{"match": [{"port": 5432}], "route": split(80, 20)}]}),
    );
    let table = translate(&api);
    assert_eq!(
        table.gateway_for("reviews.example.com", NS),
        Some("demo/gw")
    );
    assert_eq!(
        table.gateway_serving("reviews.example.com", NS, Protocol::Tcp),
        Some("demo/edge")
    );
}

#[test]
fn a_virtual_service_bound_to_a_gateway_does_not_steer_mesh_traffic() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["reviews"], "gateways": ["gw"],
               "http": [{"route": [{"destination": {"host": "reviews", "subset": "stable"}, "weight": 90},
                                   {"destination": {"host": "reviews", "subset": "canary"}, "weight": 10}]}]}),
    );
    let table = translate(&api);
    let through_gateway = roles(&table, &req(Origin::Gateway("gw"), "reviews"), 100_000, 2);
    assert!((share(&through_gateway, Role::Canary) - 10.0).abs() < 0.5);

    // In the mesh the VirtualService does not apply: the Service's default route balances
    // every request over all four pods (round robin: exactly half are canary).
    let r = req(Origin::Mesh, "reviews");
    assert_eq!(
        source(&table, &r),
        "default reviews.demo.svc.cluster.local:80"
    );
    let in_mesh = roles(&table, &r, 1000, 2);
    assert_eq!(in_mesh[&Role::Canary], 500);
    assert_eq!(in_mesh[&Role::Stable], 500);

    // `origin: auto` goes through the gateway the VirtualService is bound to.
    assert_eq!(table.gateway_for("reviews:80", NS), Some("demo/gw"));
    assert_eq!(table.gateway_for("reviews-stable", NS), None);

    // Listing `mesh` as well brings sidecars under the VirtualService.
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["reviews"], "gateways": ["gw", "mesh"],
               "http": [{"route": [{"destination": {"host": "reviews", "subset": "stable"}, "weight": 90},
                                   {"destination": {"host": "reviews", "subset": "canary"}, "weight": 10}]}]}),
    );
    let table = translate(&api);
    let in_mesh = roles(&table, &r, 100_000, 2);
    assert!((share(&in_mesh, Role::Canary) - 10.0).abs() < 0.5);
}

#[test]
fn plain_callers_and_unknown_gateways_are_not_routed_by_the_mesh() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["reviews"], "gateways": ["gw", "missing"], "http": [{"route": split(80, 20)}]}),
    );
    let table = translate(&api);
    assert_eq!(
        table.route(&req(Origin::Plain, "reviews")).unwrap_err(),
        RouteError::NotInMesh
    );
    let err = table
        .route(&req(Origin::Gateway("nope"), "reviews"))
        .unwrap_err();
    assert_eq!((err, err.status()), (RouteError::UnknownGateway, 404));
    let wrong_port = RequestMeta {
        port: 8080,
        ..req(Origin::Gateway("gw"), "reviews")
    };
    assert_eq!(
        table.route(&wrong_port).unwrap_err(),
        RouteError::NoListener
    );
    assert_eq!(
        notes(&table),
        [
            "VirtualService demo/vs: gateway \"missing\" does not exist; no routes are installed for it"
        ]
    );
    assert_eq!(table.gateways().collect::<Vec<_>>(), ["demo/gw"]);
}

#[test]
fn header_uri_and_method_matches_first_match_wins() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["reviews"], "http": [
            {"name": "header", "match": [{"headers": {"X-Canary": {"exact": "yes"}}}],
             "route": [{"destination": {"host": "reviews-canary"}}]},
            {"name": "api-post", "match": [{"uri": {"prefix": "/api"}, "method": {"exact": "POST"}},
                                           {"uri": {"regex": "/v[0-9]+/.*"}}],
             "route": [{"destination": {"host": "reviews-canary"}}]},
            {"name": "exact", "match": [{"uri": {"exact": "/health"}, "port": 80}],
             "route": [{"destination": {"host": "reviews-stable"}}]},
            {"name": "rest", "route": split(100, 0)}
        ]}),
    );
    let table = translate(&api);
    let base = req(Origin::Mesh, "reviews");
    let route = |r: RequestMeta| table.route(&r).unwrap().source.route.clone();
    let with_header = [("x-canary", "yes")];
    let wrong_value = [("x-canary", "no")];
    // The header route is first, so it wins even when a later route would match too.
    assert_eq!(
        route(RequestMeta {
            headers: &with_header,
            path: "/api/x",
            method: "POST",
            ..base
        }),
        "http/header"
    );
    assert_eq!(
        route(RequestMeta {
            headers: &wrong_value,
            ..base
        }),
        "http/rest"
    );
    // Conditions of one match entry AND: /api needs POST.
    assert_eq!(
        route(RequestMeta {
            path: "/api/x",
            method: "POST",
            ..base
        }),
        "http/api-post"
    );
    assert_eq!(
        route(RequestMeta {
            path: "/api/x",
            ..base
        }),
        "http/rest"
    );
    // Match entries OR: the regex alone suffices; it matches the whole path, not the query.
    assert_eq!(
        route(RequestMeta {
            path: "/v2/items?q=1",
            ..base
        }),
        "http/api-post"
    );
    assert_eq!(
        route(RequestMeta {
            path: "/x/v2/items",
            ..base
        }),
        "http/rest"
    );
    assert_eq!(
        route(RequestMeta {
            path: "/health?full=1",
            ..base
        }),
        "http/exact"
    );
    assert_eq!(
        route(RequestMeta {
            path: "/healthz",
            ..base
        }),
        "http/rest"
    );
}

#[test]
fn a_host_with_routes_but_no_match_is_a_404() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["rollouts-demo.local"], "gateways": ["gw"], "http": [
            {"match": [{"uri": {"prefix": "/api"}}], "route": split(80, 20)}]}),
    );
    let table = translate(&api);
    let r = req(Origin::Gateway("gw"), "rollouts-demo.local");
    let err = table.route(&RequestMeta { path: "/web", ..r }).unwrap_err();
    assert_eq!((err, err.status()), (RouteError::NoRoute, 404));
    let err = table
        .route(&req(Origin::Gateway("gw"), "unknown.local"))
        .unwrap_err();
    assert_eq!(err, RouteError::NoRoute);
    // Gateways have no default routes for Services.
    let err = table
        .route(&req(Origin::Gateway("gw"), "reviews"))
        .unwrap_err();
    assert_eq!(err, RouteError::NoRoute);
}

#[test]
fn single_and_zero_weight_destinations() {
    let mut api = store();
    vs(
        &mut api,
        "lone",
        json!({"hosts": ["lone.local"], "gateways": ["gw"],
               "http": [{"route": [{"destination": {"host": "reviews-canary"}, "weight": 0}]}]}),
    );
    vs(
        &mut api,
        "zero",
        json!({"hosts": ["zero.local"], "gateways": ["gw"], "http": [{"route": split(100, 0)}]}),
    );
    let table = translate(&api);
    assert!(table.notes().is_empty(), "{:?}", notes(&table));
    let lone = table
        .route(&req(Origin::Gateway("gw"), "lone.local"))
        .unwrap();
    assert_eq!(
        lone.clusters.len(),
        1,
        "a lone destination takes everything"
    );
    let counts = roles(&table, &req(Origin::Gateway("gw"), "lone.local"), 100, 1);
    assert_eq!(counts[&Role::Canary], 100);
    let zero = table
        .route(&req(Origin::Gateway("gw"), "zero.local"))
        .unwrap();
    assert_eq!(zero.clusters.len(), 1, "zero weights are dropped");
    let counts = roles(&table, &req(Origin::Gateway("gw"), "zero.local"), 100, 1);
    assert_eq!(counts.get(&Role::Canary), None);
}

#[test]
fn weights_not_summing_to_100_are_kept_and_noted() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["reviews"], "http": [{"name": "primary", "route": split(60, 20)}]}),
    );
    let table = translate(&api);
    assert_eq!(
        notes(&table),
        [
            "VirtualService demo/vs: http/primary: weights sum to 80, not 100; Istio 1.15 and later take them as relative (earlier releases refuse them)",
        ]
    );
    let counts = roles(&table, &req(Origin::Mesh, "reviews"), 100_000, 3);
    assert!(
        (share(&counts, Role::Canary) - 25.0).abs() < 0.5,
        "20 of 80"
    );
    // All weights 0 never reaches the router: istiod's webhook refuses the write.
    let refused = api.create(crate::model::Object::new(
        crate::model::Kind::VirtualService,
        json!({"metadata": {"name": "none", "namespace": "demo"},
               "spec": {"hosts": ["other.local"], "http": [{"route": split(0, 0)}]}}),
    ));
    assert_eq!(
        refused.unwrap_err().to_string(),
        "admission webhook \"validation.istio.io\" denied the request: configuration is invalid: total destination weight = 0"
    );
}

#[test]
fn subsets_narrow_a_service_by_destination_rule_labels() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["reviews"], "http": [{"route": [
            {"destination": {"host": "reviews", "subset": "stable"}, "weight": 80},
            {"destination": {"host": "reviews.demo.svc.cluster.local", "subset": "canary"}, "weight": 20}]}]}),
    );
    let table = translate(&api);
    let pods = |name: &str| -> Vec<String> {
        let c = table.cluster_named(name).unwrap();
        c.endpoints()
            .iter()
            .map(|e| table.endpoint(*e).unwrap().pod.clone())
            .collect()
    };
    assert_eq!(
        pods("outbound|80|stable|reviews.demo.svc.cluster.local"),
        ["reviews-s1-0", "reviews-s1-1"]
    );
    assert_eq!(
        pods("outbound|80|canary|reviews.demo.svc.cluster.local"),
        ["reviews-c1-0", "reviews-c1-1"]
    );
    let versions: Vec<&str> = table
        .endpoints()
        .iter()
        .map(|e| e.version.as_str())
        .collect();
    assert_eq!(versions, ["yellow", "yellow", "blue", "blue"]);
}

#[test]
fn an_empty_cluster_answers_no_healthy_upstream() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["reviews"], "http": [{"route": [
            {"destination": {"host": "reviews", "subset": "stable"}, "weight": 50},
            {"destination": {"host": "reviews", "subset": "missing"}, "weight": 50}]}]}),
    );
    let table = translate(&api);
    assert_eq!(
        notes(&table),
        [
            "VirtualService demo/vs: http/0: subset \"missing\" is not defined in DestinationRule demo/reviews; its cluster has no endpoints"
        ]
    );
    let mut rng = stream(1, "router");
    let mut state = LbState::new(&table);
    let r = req(Origin::Mesh, "reviews");
    let (mut ok, mut unhealthy) = (0, 0);
    for _ in 0..1000 {
        match table.serve(&r, LbPolicy::RoundRobin, &mut rng, &mut state) {
            Ok(_) => ok += 1,
            Err(e @ RouteError::NoHealthyUpstream { cluster }) => {
                assert_eq!(e.status(), 503);
                assert_eq!(e.to_string(), "no healthy upstream");
                assert!(table.cluster(cluster).unwrap().endpoints().is_empty());
                unhealthy += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!((450..550).contains(&unhealthy), "{ok} / {unhealthy}");
}

#[test]
fn not_ready_pods_are_not_endpoints() {
    let mut api = store();
    pod(
        &mut api,
        NS,
        "reviews-c1-starting",
        json!({"app": "reviews", "rollouts-pod-template-hash": "c1"}),
        "reviews:yellow",
        false,
    );
    let table = translate(&api);
    let c = table
        .cluster_named("outbound|80||reviews-canary.demo.svc.cluster.local")
        .unwrap();
    assert_eq!(c.endpoints().len(), 2);
}

#[test]
fn mirrors_are_counted_apart_from_the_split() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["reviews"], "http": [{"route": [{"destination": {"host": "reviews-stable"}}],
               "mirror": {"host": "reviews-canary"}, "mirrorPercentage": {"value": 25.0}}]}),
    );
    let table = translate(&api);
    let mut rng = stream(1, "router");
    let mut state = LbState::new(&table);
    let r = req(Origin::Mesh, "reviews");
    let canary = table
        .cluster_named("outbound|80||reviews-canary.demo.svc.cluster.local")
        .unwrap()
        .id();
    let (mut primary_canary, mut mirrored) = (0, 0);
    for _ in 0..100_000 {
        let s = table
            .serve(&r, LbPolicy::RoundRobin, &mut rng, &mut state)
            .unwrap();
        if table.endpoint(s.endpoint).unwrap().role == Role::Canary {
            primary_canary += 1;
        }
        for (c, e) in s.mirrors {
            assert_eq!(c, canary);
            assert_eq!(table.endpoint(e.unwrap()).unwrap().role, Role::Canary);
            mirrored += 1;
        }
    }
    assert_eq!(primary_canary, 0, "a mirror is a shadow, never a response");
    assert!((24_500..25_500).contains(&mirrored), "{mirrored}");
    let m = table.route(&r).unwrap().mirrors[0];
    assert_eq!(m.percent(), 25.0);
}

#[test]
fn a_mirrors_list_samples_each_mirror_on_its_own() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["reviews"], "http": [{"route": [{"destination": {"host": "reviews-stable"}}],
               "mirrors": [{"destination": {"host": "reviews-canary"}, "percentage": {"value": 10.0}},
                           {"destination": {"host": "reviews-stable"}}]}]}),
    );
    let table = translate(&api);
    let mut rng = stream(2, "router");
    let mut state = LbState::new(&table);
    let r = req(Origin::Mesh, "reviews");
    let (mut to_canary, mut to_stable, mut both) = (0, 0, 0);
    for _ in 0..100_000 {
        let s = table
            .serve(&r, LbPolicy::RoundRobin, &mut rng, &mut state)
            .unwrap();
        let roles: Vec<Role> = s
            .mirrors
            .iter()
            .map(|(_, e)| table.endpoint(e.unwrap()).unwrap().role)
            .collect();
        to_canary += roles.iter().filter(|r| **r == Role::Canary).count();
        to_stable += roles.iter().filter(|r| **r == Role::Stable).count();
        both += usize::from(roles.len() == 2);
    }
    assert!((9_500..10_500).contains(&to_canary), "{to_canary}");
    assert_eq!(to_stable, 100_000, "no percentage: every request");
    assert_eq!(both, to_canary);
}

#[test]
fn tls_routes_match_sni_and_tcp_routes_match_port_per_connection() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["reviews"],
               "tls": [{"match": [{"port": 443, "sniHosts": ["canary.example.com"]}],
                        "route": [{"destination": {"host": "reviews-canary", "port": {"number": 443}}}]},
                       {"match": [{"port": 443, "sniHosts": ["*.example.com"]}],
                        "route": [{"destination": {"host": "reviews-stable", "port": {"number": 443}}, "weight": 80},
                                  {"destination": {"host": "reviews-canary", "port": {"number": 443}}, "weight": 20}]}],
               "tcp": [{"match": [{"port": 9000}],
                        "route": [{"destination": {"host": "reviews-stable"}, "weight": 50},
                                  {"destination": {"host": "reviews-canary"}, "weight": 50}]}]}),
    );
    let table = translate(&api);
    let conn = |protocol, port, sni| RequestMeta {
        protocol,
        port,
        sni,
        ..req(Origin::Mesh, "reviews")
    };
    let canary_only = table
        .route(&conn(Protocol::Tls, 443, Some("canary.example.com")))
        .unwrap();
    assert_eq!(canary_only.source.route, "tls/0");
    assert_eq!(canary_only.scope, Scope::PerConnection);
    assert_eq!(
        table
            .cluster(canary_only.clusters.pick(&mut stream(1, "x")))
            .unwrap()
            .name(),
        "outbound|443||reviews-canary.demo.svc.cluster.local"
    );
    let shop = conn(Protocol::Tls, 443, Some("shop.example.com"));
    assert_eq!(table.route(&shop).unwrap().source.route, "tls/1");
    let counts = roles(&table, &shop, 100_000, 4);
    assert!((share(&counts, Role::Canary) - 20.0).abs() < 0.5);
    // No TLS route for this SNI: the TCP route on the port would apply, there is none on
    // 443, so the Service's default route takes the connection (port 443 is not a Service
    // port: nothing).
    assert_eq!(
        table
            .route(&conn(Protocol::Tls, 443, Some("other.org")))
            .unwrap_err(),
        RouteError::NoRoute
    );
    let tcp = table.route(&conn(Protocol::Tcp, 9000, None)).unwrap();
    assert_eq!(
        (tcp.source.route.as_str(), tcp.scope),
        ("tcp/0", Scope::PerConnection)
    );
    // HTTP to the same host finds no http routes in this VirtualService: the Service's
    // default route, per request.
    let http = table.route(&req(Origin::Mesh, "reviews")).unwrap();
    assert_eq!(http.scope, Scope::PerRequest);
    assert_eq!(http.source.virtual_service, None);
}

#[test]
fn a_gateway_routes_a_connection_by_sni_alone_as_its_filter_chains_do() {
    let mut api = store();
    let tls_and_tcp = |sni: Value, stable: i64| {
        json!({"hosts": ["reviews"], "gateways": ["tlsgw"],
               "tls": [{"match": [{"port": 443, "sniHosts": sni}],
                        "route": [{"destination": {"host": "reviews-stable"}, "weight": stable},
                                  {"destination": {"host": "reviews-canary"}, "weight": 100 - stable}]}],
               "tcp": [{"match": [{"port": 8020}],
                        "route": [{"destination": {"host": "reviews-stable"}}]}]})
    };
    create(
        &mut api,
        Kind::Gateway,
        json!({"metadata": {"name": "tlsgw", "namespace": NS},
               "spec": {"selector": {"istio": "ingressgateway"},
                        "servers": [{"port": {"number": 443, "name": "tls", "protocol": "TLS"},
                                     "tls": {"mode": "PASSTHROUGH"}, "hosts": ["*"]},
                                    {"port": {"number": 8020, "name": "tcp", "protocol": "TCP"},
                                     "hosts": ["*"]}]}}),
    );
    // `localhost` is a server name as written, not a short Service name.
    vs(
        &mut api,
        "a",
        tls_and_tcp(json!(["localhost", "*.example.com"]), 80),
    );
    vs(&mut api, "b", tls_and_tcp(json!(["localhost"]), 0));
    let table = translate(&api);
    let mut ports = table.l4_ports();
    ports.sort();
    assert_eq!(
        ports,
        [
            ("demo/tlsgw".to_string(), 443, true),
            ("demo/tlsgw".to_string(), 8020, false)
        ]
    );
    let by_sni = |sni| {
        table
            .route_connection("demo/tlsgw", 443, sni)
            .map(|c| c.source.to_string())
    };
    // Both VirtualServices name `localhost`: the first one wins, as the export keeps it.
    let first = by_sni(Some("localhost")).unwrap();
    assert!(first.contains("VirtualService demo/a"), "{first}");
    assert!(by_sni(Some("shop.example.com")).unwrap().contains("demo/a"));
    // No TLS route names the server and no TCP route listens on 443: no route.
    assert_eq!(by_sni(Some("other.org")).unwrap_err(), RouteError::NoRoute);
    assert_eq!(by_sni(None).unwrap_err(), RouteError::NoRoute);
    // A TCP port routes any connection, TLS or not.
    let tcp = table
        .route_connection("demo/tlsgw", 8020, Some("anything"))
        .unwrap();
    assert_eq!(
        (tcp.source.route.as_str(), tcp.scope),
        ("tcp/0", Scope::PerConnection)
    );
    assert_eq!(
        table.route_connection("demo/other", 443, None).unwrap_err(),
        RouteError::UnknownGateway
    );
    assert_eq!(
        table
            .route_connection("demo/tlsgw", 9443, None)
            .unwrap_err(),
        RouteError::NoListener,
        "the Gateway opens no such port"
    );
    // The simulated load's view agrees: a TLS request through the gateway by SNI.
    let through_gateway = RequestMeta {
        protocol: Protocol::Tls,
        port: 443,
        sni: Some("localhost"),
        ..req(Origin::Gateway("tlsgw"), "reviews")
    };
    let counts = roles(&table, &through_gateway, 100_000, 9);
    assert!(
        (share(&counts, Role::Canary) - 20.0).abs() < 0.5,
        "{counts:?}"
    );
}

#[test]
fn sidecars_keep_the_oldest_virtual_service_and_gateways_merge() {
    let mut api = store();
    vs(
        &mut api,
        "a",
        json!({"hosts": ["reviews"], "gateways": ["gw", "mesh"], "http": [
            {"match": [{"uri": {"prefix": "/a"}}], "route": split(100, 0)}]}),
    );
    vs(
        &mut api,
        "b",
        json!({"hosts": ["reviews"], "gateways": ["gw", "mesh"], "http": [
            {"match": [{"uri": {"prefix": "/b"}}], "route": split(0, 100)}]}),
    );
    let table = translate(&api);
    let at = |origin, path| {
        table
            .route(&RequestMeta {
                path,
                ..req(origin, "reviews")
            })
            .map(|c| c.source.to_string())
    };
    assert_eq!(
        at(Origin::Gateway("gw"), "/b").unwrap(),
        "VirtualService demo/b http/0"
    );
    assert_eq!(
        at(Origin::Mesh, "/a").unwrap(),
        "VirtualService demo/a http/0"
    );
    assert_eq!(at(Origin::Mesh, "/b"), Err(RouteError::NoRoute));
    assert_eq!(
        notes(&table),
        [
            "VirtualService demo/b: host reviews.demo.svc.cluster.local already has http routes from an older VirtualService; sidecars do not merge them, so these are ignored"
        ]
    );
}

#[test]
fn match_level_gateways_narrow_a_route() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["reviews"], "gateways": ["gw", "mesh"], "http": [
            {"name": "edge", "match": [{"gateways": ["gw"]}], "route": split(0, 100)},
            {"name": "rest", "route": split(100, 0)}]}),
    );
    let table = translate(&api);
    assert_eq!(
        source(&table, &req(Origin::Gateway("gw"), "reviews")),
        "VirtualService demo/vs http/edge"
    );
    assert_eq!(
        source(&table, &req(Origin::Mesh, "reviews")),
        "VirtualService demo/vs http/rest"
    );
}

#[test]
fn odd_objects_are_skipped_with_a_note() {
    let mut api = store();
    vs(
        &mut api,
        "bad-regex",
        json!({"hosts": ["reviews"], "http": [
            {"match": [{"uri": {"regex": "("}}], "route": split(0, 100)},
            {"match": [{"scheme": {"exact": "https"}}], "redirect": {"uri": "/x"}, "route": split(100, 0)}]}),
    );
    vs(
        &mut api,
        "wild-mesh",
        json!({"hosts": ["*"], "http": [{"route": split(100, 0)}]}),
    );
    vs(&mut api, "not-a-spec", json!({"hosts": "reviews"}));
    vs(
        &mut api,
        "unknown-host",
        json!({"hosts": ["x.local"], "http": [{"route": [{"destination": {"host": "nowhere"}}]}]}),
    );
    let table = translate(&api);
    let n = notes(&table);
    let expect = [
        "VirtualService demo/bad-regex: http/0: match[0] never matches: regex \"(\" does not compile",
        "VirtualService demo/not-a-spec: spec cannot be read",
        "VirtualService demo/unknown-host: http/0: destination host nowhere.demo.svc.cluster.local is not a Service in the store; its cluster has no endpoints",
        "VirtualService demo/wild-mesh: wildcard host * is not allowed for virtual services bound to the mesh; ignored for sidecars",
    ];
    for e in expect {
        assert!(
            n.iter().any(|x| x.starts_with(e)),
            "missing {e:?} in {n:#?}"
        );
    }
    assert_eq!(n.len(), expect.len(), "{n:#?}");
    // The bad-regex route never matches, nor does the next one: a condition canarysim cannot
    // evaluate (scheme here) must not match every request. (The field policy warns.)
    // Left with no route, the host falls back to the Service's default route.
    assert_eq!(
        source(&table, &req(Origin::Mesh, "reviews")),
        "default reviews.demo.svc.cluster.local:80"
    );
    let err = table
        .serve(
            &req(Origin::Mesh, "x.local"),
            LbPolicy::RoundRobin,
            &mut stream(1, "r"),
            &mut LbState::new(&table),
        )
        .unwrap_err();
    assert_eq!(err.status(), 503);
}

#[test]
fn destination_rule_load_balancer_overrides_the_default_policy() {
    let mut api = ApiServer::new();
    pods(&mut api, NS, "app", "h", "app:v1", 3);
    service(&mut api, NS, "app", json!({"app": "app"}));
    create(
        &mut api,
        Kind::DestinationRule,
        json!({"metadata": {"name": "app", "namespace": NS},
               "spec": {"host": "app.demo.svc.cluster.local",
                        "trafficPolicy": {"loadBalancer": {"simple": "RANDOM"}},
                        "subsets": [{"name": "rr", "labels": {"app": "app"},
                                     "trafficPolicy": {"loadBalancer": {"simple": "ROUND_ROBIN"}}}]}}),
    );
    let table = translate(&api);
    let default = table
        .cluster_named("outbound|80||app.demo.svc.cluster.local")
        .unwrap();
    assert_eq!(default.lb_override(), Some(LbPolicy::Random));
    let mut state = LbState::new(&table);
    let mut rng = stream(1, "router");
    let picks: Vec<u32> = (0..6)
        .map(|_| {
            default
                .pick_endpoint(LbPolicy::RoundRobin, &mut rng, &mut state)
                .unwrap()
                .0
        })
        .collect();
    assert_ne!(
        picks,
        [0, 1, 2, 0, 1, 2],
        "the DestinationRule asked for random"
    );
}

#[test]
fn push_delay_keeps_the_old_weights_until_the_new_table_takes_effect() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["rollouts-demo.local"], "gateways": ["gw"],
               "http": [{"name": "primary", "route": split(100, 0)}]}),
    );
    let mut mesh = Mesh::new();
    mesh.push(translate(&api), SimTime::ZERO, DEFAULT_PUSH_DELAY);
    assert!(
        mesh.table_at(SimTime::from_millis(99)).is_none(),
        "nothing pushed yet"
    );

    // The controller writes 80/20 at t = 10 s.
    let mut obj = api.get(Kind::VirtualService, NS, "vs").unwrap().clone();
    obj.value["spec"]["http"][0]["route"] = split(80, 20);
    api.update(obj).unwrap();
    let written = SimTime::from_secs(10);
    mesh.push(translate(&api), written, DEFAULT_PUSH_DELAY);

    let r = req(Origin::Gateway("gw"), "rollouts-demo.local");
    let canary_share = |t: SimTime| {
        let table = mesh.table_at(t).unwrap();
        share(&roles(table, &r, 10_000, 5), Role::Canary)
    };
    assert_eq!(
        canary_share(SimTime::from_millis(10_099)),
        0.0,
        "old weights"
    );
    assert!(
        (canary_share(SimTime::from_millis(10_100)) - 20.0).abs() < 1.0,
        "new weights"
    );
    assert_eq!(
        mesh.next_change(SimTime::from_secs(5)),
        Some(SimTime::from_millis(10_100))
    );
    assert_eq!(mesh.next_change(SimTime::from_secs(11)), None);
    let (table, lb) = mesh.at_mut(SimTime::from_secs(11)).unwrap();
    assert!(
        table
            .serve(&r, LbPolicy::RoundRobin, &mut stream(1, "r"), lb)
            .is_ok()
    );
    mesh.prune(SimTime::from_secs(11));
    assert_eq!(mesh.pushes().len(), 1);
}

#[test]
fn writes_inside_the_debounce_window_are_pushed_together() {
    let table = |w: i64| {
        let mut api = store();
        vs(
            &mut api,
            "vs",
            json!({"hosts": ["reviews"], "http": [{"route": split(100 - w, w)}]}),
        );
        translate(&api)
    };
    let weight = |mesh: &Mesh, ms: u64| {
        mesh.table_at(SimTime::from_millis(ms)).map(|t| {
            let c = t.route(&req(Origin::Mesh, "reviews")).unwrap().clusters;
            c.iter().map(|(_, w)| w).last().unwrap()
        })
    };
    let mut mesh = Mesh::new();
    let delay = Duration::from_millis(100);
    mesh.push(table(0), SimTime::ZERO, delay);
    mesh.push(table(20), SimTime::from_millis(1000), delay);
    // A second write 50 ms later restarts the quiet period: 20 never reaches the router.
    mesh.push(table(40), SimTime::from_millis(1050), delay);
    assert_eq!(weight(&mesh, 1120), Some(100), "still the old table");
    assert_eq!(weight(&mesh, 1150), Some(40));
    assert_eq!(mesh.pushes().len(), 2);
}

#[test]
fn a_gateway_serves_only_the_hosts_its_servers_accept() {
    let mut api = store();
    create(
        &mut api,
        Kind::Gateway,
        json!({"metadata": {"name": "public", "namespace": NS},
               "spec": {"servers": [{"port": {"number": 80}, "hosts": ["*.example.com"]},
                                    {"port": {"number": 8080}, "hosts": ["other/admin.local"]}]}}),
    );
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["shop.example.com", "rollouts-demo.local", "admin.local"],
               "gateways": ["public"],
               "http": [{"route": split(80, 20)}]}),
    );
    let table = translate(&api);
    let at = |host: &'static str, port: u32| {
        table.route(&RequestMeta {
            port,
            ..req(Origin::Gateway("public"), host)
        })
    };
    assert!(at("shop.example.com", 80).is_ok());
    // The VirtualService names it, but no server on port 80 accepts it: Envoy has no
    // virtual host for it at this gateway.
    assert_eq!(
        at("rollouts-demo.local", 80).unwrap_err(),
        RouteError::NoRoute
    );
    assert_eq!(
        at("shop.example.com", 8080).unwrap_err(),
        RouteError::NoRoute
    );
    assert!(at("admin.local", 8080).is_ok());
    assert!(
        notes(&table)
            .iter()
            .any(|n| n.contains("namespace restriction \"other\" is not simulated")),
        "{:?}",
        notes(&table)
    );
}

/// The issue's probe: a route meant for some callers only (by `sourceLabels`) before the
/// 80/20 default. Were the unevaluated condition ignored, every request would take the first
/// route (100 % canary); it never matches instead, so requests get the 80/20 split — and
/// likewise for tls/tcp conditions on callers.
#[test]
fn unevaluable_conditions_never_match() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["reviews"], "http": [
            {"name": "by-scheme", "match": [{"scheme": {"exact": "http"}}], "route": split(0, 100)},
            {"name": "default", "route": split(80, 20)}],
               "tcp": [
            {"match": [{"sourceSubnet": "10.0.0.0/8"}], "route": split(0, 100)},
            {"match": [{"port": 9000}], "route": split(80, 20)}]}),
    );
    let table = translate(&api);
    let r = req(Origin::Mesh, "reviews");
    assert_eq!(source(&table, &r), "VirtualService demo/vs http/default");
    let canary = share(&roles(&table, &r, 20_000, 4), Role::Canary);
    assert!((canary - 20.0).abs() < 1.5, "canary share {canary}");
    let tcp = RequestMeta {
        protocol: Protocol::Tcp,
        port: 9000,
        ..req(Origin::Mesh, "reviews")
    };
    assert_eq!(source(&table, &tcp), "VirtualService demo/vs tcp/1");
}

#[test]
fn source_query_and_absent_header_conditions() {
    let mut api = store();
    vs(
        &mut api,
        "vs",
        json!({"hosts": ["reviews"], "http": [
            {"name": "from-frontend", "match": [{"sourceLabels": {"app": "frontend"}, "sourceNamespace": "demo"}], "route": split(0, 100)},
            {"name": "by-query", "match": [{"queryParams": {"v": {"exact": "2"}}, "uri": {"prefix": "/"}}], "route": split(0, 100)},
            {"name": "not-tester", "match": [{"withoutHeaders": {"x-tester": {"exact": "1"}}}], "route": split(100, 0)},
            {"name": "default", "route": split(80, 20)}],
               "tcp": [
            {"match": [{"sourceLabels": {"app": "frontend"}}], "route": split(0, 100)},
            {"match": [{"port": 9000}], "route": split(80, 20)}]}),
    );
    let table = translate(&api);
    let frontend = [("app", "frontend"), ("version", "v1")];
    let from_frontend = RequestMeta {
        source_labels: &frontend,
        ..req(Origin::Mesh, "reviews")
    };
    assert_eq!(
        source(&table, &from_frontend),
        "VirtualService demo/vs http/from-frontend"
    );
    let other_namespace = RequestMeta {
        namespace: "other",
        host: "reviews.demo",
        ..from_frontend
    };
    assert_ne!(
        source(&table, &other_namespace),
        "VirtualService demo/vs http/from-frontend"
    );
    let query = RequestMeta {
        path: "/api?x=1&v=2",
        ..req(Origin::Mesh, "reviews")
    };
    assert_eq!(
        source(&table, &query),
        "VirtualService demo/vs http/by-query"
    );
    let wrong_query = RequestMeta {
        path: "/api?v=3",
        ..req(Origin::Mesh, "reviews")
    };
    // No x-tester header: withoutHeaders holds.
    assert_eq!(
        source(&table, &wrong_query),
        "VirtualService demo/vs http/not-tester"
    );
    let tester = [("X-Tester", "1")];
    let as_tester = RequestMeta {
        headers: &tester,
        ..req(Origin::Mesh, "reviews")
    };
    assert_eq!(
        source(&table, &as_tester),
        "VirtualService demo/vs http/default"
    );
    let tcp = RequestMeta {
        protocol: Protocol::Tcp,
        port: 9000,
        ..req(Origin::Mesh, "reviews")
    };
    assert_eq!(source(&table, &tcp), "VirtualService demo/vs tcp/1");
    let tcp_frontend = RequestMeta {
        source_labels: &frontend,
        ..tcp
    };
    assert_eq!(
        source(&table, &tcp_frontend),
        "VirtualService demo/vs tcp/0"
    );
}

#[test]
fn delegated_routes_join_the_root_match_with_the_child_match() {
    let mut api = store();
    vs(
        &mut api,
        "root",
        json!({"hosts": ["reviews"], "http": [
            {"name": "api", "match": [{"uri": {"prefix": "/api"}}], "delegate": {"name": "child"}}]}),
    );
    vs(
        &mut api,
        "child",
        json!({"http": [
            {"name": "v2", "match": [{"headers": {"x-v": {"exact": "2"}}}], "route": split(0, 100)},
            {"name": "rest", "route": split(100, 0)}]}),
    );
    let table = translate(&api);
    assert!(notes(&table).is_empty(), "{:?}", notes(&table));
    let v2 = [("x-v", "2")];
    let api_v2 = RequestMeta {
        path: "/api/x",
        headers: &v2,
        ..req(Origin::Mesh, "reviews")
    };
    assert_eq!(
        source(&table, &api_v2),
        "VirtualService demo/root http/api → demo/child http/v2"
    );
    let api_other = RequestMeta {
        path: "/api/x",
        ..req(Origin::Mesh, "reviews")
    };
    assert_eq!(
        source(&table, &api_other),
        "VirtualService demo/root http/api → demo/child http/rest"
    );
    // Outside the root's match the child's routes do not apply: the host's virtual host has
    // no matching route, a 404 as in Envoy.
    let outside = RequestMeta {
        path: "/web",
        headers: &v2,
        ..req(Origin::Mesh, "reviews")
    };
    assert_eq!(table.route(&outside).unwrap_err(), RouteError::NoRoute);
}

#[test]
fn an_istio_gateways_http_port_is_its_first_plain_http_server_else_its_https_one() {
    let mut api = store();
    let gateway = |api: &mut ApiServer, name: &str, servers: Value| {
        create(
            api,
            Kind::Gateway,
            json!({"metadata": {"name": name, "namespace": NS}, "spec": {"servers": servers}}),
        )
    };
    gateway(
        &mut api,
        "passthrough",
        json!([{"port": {"number": 443, "protocol": "HTTPS"}, "hosts": ["*"],
                "tls": {"mode": "PASSTHROUGH"}},
               {"port": {"number": 8080, "protocol": "HTTP"}, "hosts": ["*"]}]),
    );
    gateway(
        &mut api,
        "terminating",
        json!([{"port": {"number": 443, "protocol": "HTTPS"}, "hosts": ["*"],
                "tls": {"mode": "SIMPLE"}},
               {"port": {"number": 8080, "protocol": "HTTP"}, "hosts": ["*"]}]),
    );
    gateway(
        &mut api,
        "https-only",
        json!([{"port": {"number": 8443, "protocol": "HTTPS"}, "hosts": ["*"],
                "tls": {"mode": "SIMPLE"}},
               {"port": {"number": 5432, "protocol": "TCP"}, "hosts": ["*"]}]),
    );
    gateway(
        &mut api,
        "tcp-only",
        json!([{"port": {"number": 5432, "protocol": "TCP"}, "hosts": ["*"]}]),
    );
    let table = translate(&api);
    assert_eq!(table.gateway_http_port("passthrough", NS), Some(8080));
    assert_eq!(table.gateway_http_port("terminating", NS), Some(8080));
    assert_eq!(table.gateway_http_port("https-only", NS), Some(8443));
    // No HTTP server: a request that names no port stands for the first one, as before.
    assert_eq!(table.gateway_http_port("tcp-only", NS), Some(5432));
    assert_eq!(table.gateway_http_port("absent", NS), None);
}
