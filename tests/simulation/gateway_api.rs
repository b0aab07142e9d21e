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
/// rollout, the route keeps its default weights, and half the requests find no upstream.
#[test]
fn a_route_without_the_canary_service_stops_the_rollout_and_loses_half_the_requests() {
    let report = run_scenario(&fixture("backend-not-in-route.yaml"), None).unwrap();
    assert!(report.steps.iter().all(|s| s.passed), "{:#?}", report.steps);
    let load = report.steps.iter().find_map(|s| s.load.as_ref()).unwrap();
    let lost = load.no_healthy_upstream as f64 / load.sent as f64;
    assert!((lost - 0.5).abs() < 0.02, "share without upstream: {lost}");
    assert_eq!(load.sent, load.answered + load.no_healthy_upstream);
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
