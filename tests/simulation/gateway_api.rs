//! Gateway API rollouts end to end: the plugin's writes on the HTTPRoute at each step and
//! what requests through the Gateway's listener see, on a case held out from the bundled
//! scenarios (the plugin's Envoy Gateway example).

use canarysim::testing::{check_scenario, run_scenario};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gateway-api")
        .join(name)
}

/// Steps 20, 50 and 100: at each pause the HTTPRoute's backendRef weights are the plugin's
/// writes and 100,000 requests split as set (99 % interval within 1 point); after
/// promotion the route is back to 100/0 without the in-progress label.
#[test]
fn the_held_out_envoy_gateway_rollout_routes_as_the_plugin_writes() {
    if let Err(e) = check_scenario(&fixture("envoy-gateway-held-out.yaml")) {
        panic!("{e}");
    }
    let report = run_scenario(&fixture("envoy-gateway-held-out.yaml"), None).unwrap();
    let loads: Vec<_> = report
        .steps
        .iter()
        .filter_map(|s| s.load.as_ref())
        .collect();
    assert_eq!(loads.len(), 3);
    for load in loads {
        assert_eq!(load.path, "gateway default/eg");
        assert_eq!((load.sent, load.answered), (100_000, 100_000));
    }
}

/// A route that does not forward to the canary Service: the plugin's error stops the
/// rollout, the route keeps its default weights, and half the requests are answered 500
/// (their backendRef does not resolve), not the 503 of a Service without endpoints.
#[test]
fn a_route_without_the_canary_service_stops_the_rollout_and_loses_half_the_requests() {
    let report = run_scenario(&fixture("backend-not-in-route.yaml"), None).unwrap();
    assert!(report.steps.iter().all(|s| s.passed), "{:#?}", report.steps);
    let load = report.steps.iter().find_map(|s| s.load.as_ref()).unwrap();
    let lost = load.unresolved_backend as f64 / load.sent as f64;
    assert!((lost - 0.5).abs() < 0.02, "share answered 500: {lost}");
    assert_eq!(load.no_healthy_upstream, 0);
    assert_eq!(load.sent, load.answered + load.unresolved_backend);
}

/// A route write the CRDs refuse is refused whoever writes it: the plugin's negative stable
/// weight (after an unclamped promote-full) gets the API server's 422, as in a cluster.
#[test]
fn a_route_write_the_crds_refuse_is_refused_for_controllers_too() {
    let text = std::fs::read_to_string(fixture("envoy-gateway.yaml")).unwrap();
    let manifests =
        canarysim::model::yaml::load_str("envoy-gateway.yaml", &text, "default").unwrap();
    let mut world = canarysim::sim::World::new(canarysim::sim::ClusterConfig::default(), 1);
    world.apply(&manifests).unwrap();
    let kind = canarysim::model::gateway_api::kind("HTTPRoute");
    let mut route = world
        .api
        .get(kind, "default", "argo-rollouts-http-route")
        .unwrap()
        .clone();
    route.value["spec"]["rules"][0]["backendRefs"][0]["weight"] = (-20).into();
    route.value["spec"]["rules"][0]["backendRefs"][1]["weight"] = 120.into();
    let err = world.api.update(route).unwrap_err();
    assert_eq!(
        err.to_string(),
        "httproutes.gateway.networking.k8s.io \"argo-rollouts-http-route\" is invalid: spec.rules[0].backendRefs[0].weight: Invalid value: -20: spec.rules[0].backendRefs[0].weight in body should be greater than or equal to 0"
    );
}

/// The plugin's Envoy Gateway example (its text, and the world 30 s after applying it).
fn envoy_gateway_world() -> (String, canarysim::sim::World) {
    let text = std::fs::read_to_string(fixture("envoy-gateway.yaml")).unwrap();
    let manifests =
        canarysim::model::yaml::load_str("envoy-gateway.yaml", &text, "default").unwrap();
    let mut world = canarysim::sim::World::new(canarysim::sim::ClusterConfig::default(), 1);
    world.apply(&manifests).unwrap();
    world.advance(std::time::Duration::from_secs(30)).unwrap();
    (text, world)
}

/// The implementation's status on the objects it programs: the class and the Gateway
/// accepted and programmed, the listener counting the route, the route accepted by its
/// parent with every backendRef resolved; a backendRef renamed to a Service that does not
/// exist turns `ResolvedRefs` to `BackendNotFound` with a new transition time and the new
/// generation, the unchanged `Accepted` keeps its own.
#[test]
fn the_implementation_writes_status_on_the_class_the_gateway_and_the_route() {
    use canarysim::model::gateway_api::kind;
    use std::time::Duration;
    let (text, mut world) = envoy_gateway_world();
    let status = |world: &canarysim::sim::World, k: &str, ns: &str, name: &str| {
        world.api.get(kind(k), ns, name).unwrap().status().clone()
    };
    let condition = |status: &serde_json::Value, t: &str| {
        let c = status["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == t).cloned())
            .unwrap_or_else(|| panic!("no {t} condition in {status}"));
        (
            c["status"].as_str().unwrap().to_string(),
            c["reason"].as_str().unwrap().to_string(),
        )
    };
    let class = status(&world, "GatewayClass", "", "eg");
    assert_eq!(
        condition(&class, "Accepted"),
        ("True".into(), "Accepted".into())
    );
    let gateway = status(&world, "Gateway", "default", "eg");
    assert_eq!(
        condition(&gateway, "Programmed"),
        ("True".into(), "Programmed".into())
    );
    let listener = &gateway["listeners"][0];
    assert_eq!(listener["attachedRoutes"], 1, "{listener}");
    assert_eq!(listener["supportedKinds"][0]["kind"], "HTTPRoute");
    let route = status(&world, "HTTPRoute", "default", "argo-rollouts-http-route");
    let parent = &route["parents"][0];
    assert_eq!(
        parent["controllerName"],
        "gateway.envoyproxy.io/gatewayclass-controller"
    );
    assert_eq!(parent["parentRef"]["name"], "eg");
    assert_eq!(parent["parentRef"]["kind"], "Gateway");
    assert_eq!(
        condition(parent, "Accepted"),
        ("True".into(), "Accepted".into())
    );
    assert_eq!(
        condition(parent, "ResolvedRefs"),
        ("True".into(), "ResolvedRefs".into())
    );
    let accepted_at = parent["conditions"][0]["lastTransitionTime"].clone();
    assert!(accepted_at.is_string(), "{parent}");

    world.advance(Duration::from_secs(60)).unwrap();
    let route_doc = text
        .split("\n---")
        .find(|d| d.contains("kind: HTTPRoute"))
        .unwrap()
        .replace("argo-rollouts-canary-service", "no-such-service");
    let edited = canarysim::model::yaml::load_str("route.yaml", &route_doc, "default").unwrap();
    world.apply(&edited).unwrap();
    world.advance(Duration::from_secs(5)).unwrap();
    let generation = world
        .api
        .get(kind("HTTPRoute"), "default", "argo-rollouts-http-route")
        .unwrap()
        .generation();
    assert!(generation > 1);
    let route = status(&world, "HTTPRoute", "default", "argo-rollouts-http-route");
    let parent = &route["parents"][0];
    assert_eq!(
        condition(parent, "ResolvedRefs"),
        ("False".into(), "BackendNotFound".into())
    );
    assert_eq!(parent["conditions"][1]["observedGeneration"], generation);
    assert_eq!(parent["conditions"][0]["lastTransitionTime"], accepted_at);
    assert_ne!(parent["conditions"][1]["lastTransitionTime"], accepted_at);
}

/// A route that loses its last programmed parent (its parentRef renamed to a Gateway that
/// does not exist) has the entries written before cleared, not left saying `Accepted`.
#[test]
fn a_routes_status_is_cleared_when_it_loses_its_last_parent() {
    use canarysim::model::gateway_api::kind;
    use std::time::Duration;
    let (text, mut world) = envoy_gateway_world();
    let parents = |world: &canarysim::sim::World| {
        let route = world
            .api
            .get(kind("HTTPRoute"), "default", "argo-rollouts-http-route")
            .unwrap();
        route.status()["parents"].as_array().map_or(0, Vec::len)
    };
    assert_eq!(parents(&world), 1);
    let route_doc = text
        .split("\n---")
        .find(|d| d.contains("kind: HTTPRoute"))
        .unwrap()
        .replace("    - name: eg\n", "    - name: no-such-gateway\n");
    assert!(route_doc.contains("no-such-gateway"), "the fixture changed");
    let edited = canarysim::model::yaml::load_str("route.yaml", &route_doc, "default").unwrap();
    world.apply(&edited).unwrap();
    world.advance(Duration::from_secs(5)).unwrap();
    assert_eq!(parents(&world), 0);
}

/// A TCPRoute's backendRef that does not resolve: its share of connections is rejected and
/// counted as such (the class of the HTTP 500), not as "no healthy upstream".
#[test]
fn a_tcp_routes_unresolved_backend_rejects_its_share_of_connections() {
    use canarysim::load::{Amount, Streams, Workload};
    use canarysim::mesh::{LbPolicy, Protocol};
    use std::time::Duration;
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/gateway-api-grpc-tcp-tls-routes.yaml");
    let plan = canarysim::scenario::load(&path, &canarysim::scenario::Disk).unwrap();
    let mut manifests = plan.manifests.clone();
    let tcp = manifests
        .iter_mut()
        .find(|m| m.object.kind == canarysim::model::gateway_api::kind("TCPRoute"))
        .unwrap();
    let backends = tcp.object.value["spec"]["rules"][0]["backendRefs"]
        .as_array_mut()
        .unwrap();
    // The plugin writes the stable Service 100 (the canary 0) once deployed; this one keeps
    // its own 100: half the connections.
    backends.push(serde_json::json!({"name": "gone", "port": 80, "weight": 100}));
    let mut world = canarysim::sim::World::new(canarysim::sim::ClusterConfig::default(), 1);
    world.apply(&manifests).unwrap();
    world.advance(Duration::from_secs(60)).unwrap();
    let workload = Workload {
        amount: Amount::Requests(4_000),
        namespace: plan.namespace.clone(),
        protocol: Protocol::Tcp,
        port: 9000,
        traffic: canarysim::load::Traffic {
            host: "cart.shop.example".into(),
            keepalive: false,
            ..canarysim::load::Traffic::default()
        },
        ..Workload::default()
    };
    let mut streams = Streams::new(3, "tcp-unresolved");
    let r = world
        .run_load(
            &workload,
            &plan.backends,
            LbPolicy::RoundRobin,
            canarysim::kubeproxy::ProxyMode::Iptables,
            &mut streams,
        )
        .unwrap();
    assert_eq!(r.no_healthy_upstream, 0, "{r:?}");
    let rejected = r.unresolved_backend as f64 / r.sent as f64;
    assert!((rejected - 0.5).abs() < 0.05, "rejected share {rejected}");
    assert_eq!(r.sent, r.answered + r.unresolved_backend);
}
