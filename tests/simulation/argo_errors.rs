//! Argo's error messages (ARGO-BEHAVIOR.md §7), each triggered through the running controller
//! the way a user would meet it: a small cluster, a broken manifest, and the error the
//! controller reports for the rollout (the InvalidSpec condition or a TrafficRoutingError).

use canarysim::model::yaml::load_str;
use canarysim::model::{Kind, ObjectKey};
use canarysim::sim::{ClusterConfig, World};
use std::time::Duration;

const BASE: &str = r#"
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: demo}
spec:
  replicas: 2
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec: {containers: [{name: app, image: "demo:1"}]}
  strategy:
    canary:
      canaryService: demo-canary
      stableService: demo-stable
      trafficRouting:
        istio:
          virtualService: {name: demo-vsvc, routes: [primary]}
      steps: [{setWeight: 50}, {pause: {}}]
---
{apiVersion: v1, kind: Service, metadata: {name: demo-stable}, spec: {selector: {app: demo}}}
---
{apiVersion: v1, kind: Service, metadata: {name: demo-canary}, spec: {selector: {app: demo}}}
---
apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata: {name: demo-vsvc}
spec:
  hosts: [demo]
  http:
  - name: primary
    route:
    - {destination: {host: demo-stable}, weight: 100}
    - {destination: {host: demo-canary}, weight: 0}
"#;

const INVALID: &str = "The Rollout \"demo\" is invalid: ";
const VS_FIELD: &str =
    "spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: \"demo-vsvc\": ";

/// Applies `yaml`, lets the first deploy settle, rolls out `demo:2`, and returns the error the
/// controller reports for the rollout (if any).
fn error_for(yaml: &str) -> Option<String> {
    let manifests = load_str("test.yaml", yaml, "ns").expect("test manifests parse");
    let mut world = World::new(ClusterConfig::default(), 1);
    world.apply(&manifests).unwrap();
    world.advance(Duration::from_secs(30)).unwrap();
    if world.api.get(Kind::Rollout, "ns", "demo").unwrap().status()["phase"] != "Degraded" {
        world.set_image("ns", "demo", "app", "demo:2").unwrap();
        world.advance(Duration::from_secs(30)).unwrap();
    }
    world
        .errors
        .get(&ObjectKey::new(Kind::Rollout, "ns", "demo"))
        .cloned()
}

fn assert_error(yaml: &str, want: &str) {
    let got = error_for(yaml);
    assert_eq!(got.as_deref(), Some(want));
}

#[test]
fn the_base_rollout_reports_no_error() {
    assert_eq!(error_for(BASE), None);
}

#[test]
fn missing_virtual_service() {
    let yaml = BASE.replace(
        "metadata: {name: demo-vsvc}\n",
        "metadata: {name: other-vsvc}\n",
    );
    assert_error(
        &yaml,
        &format!("{INVALID}{VS_FIELD}virtualservices.networking.istio.io \"demo-vsvc\" not found"),
    );
}

#[test]
fn listed_http_route_absent() {
    let yaml = BASE.replace("routes: [primary]", "routes: [nope]");
    assert_error(
        &yaml,
        &format!(
            "{INVALID}{VS_FIELD}Istio VirtualService has invalid HTTP routes. Error: HTTP Route 'nope' is not found in the defined Virtual Service."
        ),
    );
}

#[test]
fn more_than_one_http_route_without_route_names() {
    let yaml = BASE.replace(", routes: [primary]", "").replace(
        "  - name: primary\n",
        "  - name: other\n    route: [{destination: {host: demo-stable}}]\n  - name: primary\n",
    );
    assert_error(
        &yaml,
        &format!(
            "{INVALID}{VS_FIELD}Istio VirtualService has invalid HTTP routes. Error: spec.http[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.routes"
        ),
    );
}

#[test]
fn canary_service_missing_from_the_route() {
    let yaml = BASE.replace(
        "{destination: {host: demo-canary}, weight: 0}",
        "{destination: {host: demo-preview}, weight: 0}",
    );
    assert_error(
        &yaml,
        &format!(
            "{INVALID}{VS_FIELD}Istio VirtualService has invalid HTTP routes. Error: Canary Service 'demo-canary' not found in route"
        ),
    );
}

#[test]
fn stable_service_missing_from_the_route() {
    let yaml = BASE.replace(
        "{destination: {host: demo-stable}, weight: 100}",
        "{destination: {host: demo-old}, weight: 100}",
    );
    assert_error(
        &yaml,
        &format!(
            "{INVALID}{VS_FIELD}Istio VirtualService has invalid HTTP routes. Error: Stable Service 'demo-stable' not found in route"
        ),
    );
}

fn with_tls(tls: &str, rollout_tls: &str) -> String {
    BASE.replace(
        "routes: [primary]}",
        &format!("routes: [primary], {rollout_tls}}}"),
    )
    .replace("  http:\n", &format!("  tls:\n{tls}  http:\n"))
}

const TLS_ROUTE: &str = "  - match: [{port: 443, sniHosts: [a.example.com]}]\n    route: [{destination: {host: demo-stable}, weight: 100}, {destination: {host: demo-canary}, weight: 0}]\n";

#[test]
fn tls_route_entry_matching_nothing() {
    let yaml = with_tls(
        TLS_ROUTE,
        "tlsRoutes: [{port: 443, sniHosts: [a.example.com, b.example.com]}]",
    );
    assert_error(
        &yaml,
        &format!(
            "{INVALID}{VS_FIELD}Istio VirtualService has invalid TLS routes. Error: No matching TLS routes found in the defined Virtual Service."
        ),
    );
}

#[test]
fn more_than_one_tls_route_without_tls_routes() {
    let yaml = with_tls(&format!("{TLS_ROUTE}{TLS_ROUTE}"), "tlsRoutes: []");
    assert_error(
        &yaml,
        &format!(
            "{INVALID}{VS_FIELD}Istio VirtualService has invalid TLS routes. Error: spec.tls[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.tlsRoutes"
        ),
    );
}

const TCP_ROUTE: &str = "  - match: [{port: 8020}]\n    route: [{destination: {host: demo-stable}, weight: 100}, {destination: {host: demo-canary}, weight: 0}]\n";

#[test]
fn tcp_route_entry_matching_nothing() {
    let yaml = BASE
        .replace(
            "routes: [primary]}",
            "routes: [primary], tcpRoutes: [{port: 9000}]}",
        )
        .replace("  http:\n", &format!("  tcp:\n{TCP_ROUTE}  http:\n"));
    assert_error(
        &yaml,
        &format!(
            "{INVALID}{VS_FIELD}Istio VirtualService has invalid TCP routes. Error: No matching TCP routes found in the defined Virtual Service."
        ),
    );
}

#[test]
fn more_than_one_tcp_route_without_tcp_routes() {
    let yaml = BASE.replace(
        "  http:\n",
        &format!("  tcp:\n{TCP_ROUTE}{TCP_ROUTE}  http:\n"),
    );
    assert_error(
        &yaml,
        &format!(
            "{INVALID}{VS_FIELD}Istio VirtualService has invalid TCP routes. Error: spec.tcp[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.tcpRoutes"
        ),
    );
}

#[test]
fn malformed_http_entry_is_an_invalid_cast() {
    let yaml = BASE.replace(
        "  http:\n  - name: primary\n",
        "  http:\n  - \"not a route\"\n  - name: primary\n",
    );
    let got = error_for(&yaml).unwrap();
    assert!(got.starts_with(&format!("{INVALID}{VS_FIELD}")), "{got}");
    assert!(got.contains("HTTP routes"), "{got}");
}

#[test]
fn no_http_tls_or_tcp_routes_at_all() {
    let yaml = BASE.replace("  http:\n  - name: primary\n    route:\n    - {destination: {host: demo-stable}, weight: 100}\n    - {destination: {host: demo-canary}, weight: 0}\n", "  gateways: [mesh]\n");
    assert_error(
        &yaml,
        &format!(
            "{INVALID}{VS_FIELD}Unable to get any of the HTTP, TCP or TLS routes for the Istio VirtualService"
        ),
    );
}

const SUBSET: &str = r#"
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: demo}
spec:
  replicas: 2
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec: {containers: [{name: app, image: "demo:1"}]}
  strategy:
    canary:
      trafficRouting:
        istio:
          virtualService: {name: demo-vsvc}
          destinationRule: {name: demo-dr, canarySubsetName: canary, stableSubsetName: stable}
      steps: [{setWeight: 50}, {pause: {}}]
---
{apiVersion: v1, kind: Service, metadata: {name: demo}, spec: {selector: {app: demo}}}
---
apiVersion: networking.istio.io/v1beta1
kind: DestinationRule
metadata: {name: demo-dr}
spec:
  host: demo
  subsets: [{name: canary, labels: {app: demo}}, {name: stable, labels: {app: demo}}]
---
apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata: {name: demo-vsvc}
spec:
  hosts: [demo]
  http:
  - route:
    - {destination: {host: demo, subset: stable}, weight: 100}
    - {destination: {host: demo, subset: canary}, weight: 0}
"#;

#[test]
fn subset_level_base_reports_no_error() {
    assert_eq!(error_for(SUBSET), None);
}

#[test]
fn canary_subset_missing_from_the_route() {
    let yaml = SUBSET.replace(
        "{host: demo, subset: canary}",
        "{host: demo, subset: preview}",
    );
    assert_error(
        &yaml,
        &format!(
            "{INVALID}{VS_FIELD}Istio VirtualService has invalid HTTP routes. Error: Canary DestinationRule subset 'canary' not found in route"
        ),
    );
}

#[test]
fn stable_subset_missing_from_the_route() {
    let yaml = SUBSET.replace("{host: demo, subset: stable}", "{host: demo, subset: old}");
    assert_error(
        &yaml,
        &format!(
            "{INVALID}{VS_FIELD}Istio VirtualService has invalid HTTP routes. Error: Stable DestinationRule subset 'stable' not found in route"
        ),
    );
}

#[test]
fn missing_destination_rule() {
    let yaml = SUBSET.replace("metadata: {name: demo-dr}", "metadata: {name: other-dr}");
    assert_error(
        &yaml,
        &format!(
            "{INVALID}spec.strategy.canary.trafficRouting.istio.destinationRule.name: Invalid value: \"demo-dr\": destinationrules.networking.istio.io \"demo-dr\" not found"
        ),
    );
}

#[test]
fn destination_rule_switch_waits_for_the_canary_replicaset() {
    // Pods take 5 s to turn ready: until then the DestinationRule switch is delayed.
    let manifests = load_str("test.yaml", SUBSET, "ns").unwrap();
    let mut world = World::new(ClusterConfig::default(), 1);
    world.apply(&manifests).unwrap();
    world.advance(Duration::from_secs(30)).unwrap();
    world.set_image("ns", "demo", "app", "demo:2").unwrap();
    world.advance(Duration::from_secs(1)).unwrap();
    let err = world
        .errors
        .get(&ObjectKey::new(Kind::Rollout, "ns", "demo"))
        .cloned()
        .unwrap_or_default();
    assert!(
        err.starts_with("delaying destination rule switch: ReplicaSet demo-")
            && err.ends_with(" not fully available"),
        "{err}"
    );
    assert!(
        world
            .events
            .iter()
            .any(|e| e.warning && e.reason == "TrafficRoutingError" && e.message == err)
    );
    // Once the canary pod is ready, the switch happens and the error clears.
    world.advance(Duration::from_secs(10)).unwrap();
    assert_eq!(
        world
            .errors
            .get(&ObjectKey::new(Kind::Rollout, "ns", "demo")),
        None
    );
}

#[test]
fn spec_validation_set_weight_out_of_range() {
    let yaml = BASE.replace("{setWeight: 50}", "{setWeight: 150}");
    assert_error(
        &yaml,
        &format!(
            "{INVALID}spec.strategy.steps[0].setWeight: Invalid value: 150: SetWeight needs to be between 0 and 100"
        ),
    );
}

#[test]
fn spec_validation_same_service_for_stable_and_canary() {
    let yaml = BASE.replace("canaryService: demo-canary", "canaryService: demo-stable");
    let got = error_for(&yaml).unwrap();
    assert!(got.starts_with(INVALID), "{got}");
    assert!(got.ends_with("This rollout uses the same service for the stable and canary services, but two different services are required."), "{got}");
}

#[test]
fn spec_validation_services_required_for_host_level_istio() {
    let yaml = BASE.replace("      canaryService: demo-canary\n", "");
    let got = error_for(&yaml).unwrap();
    assert!(
        got.ends_with("Canary service and Stable service must to be set to use Traffic Routing"),
        "{got}"
    );
}

#[test]
fn spec_validation_max_traffic_weight_is_rejected_with_istio() {
    let yaml = BASE.replace(
        "      trafficRouting:\n",
        "      trafficRouting:\n        maxTrafficWeight: 1000\n",
    );
    let got = error_for(&yaml).unwrap();
    assert!(
        got.ends_with(
            "Canary maxTrafficWeight in traffic routing only supported in Nginx and Plugins"
        ),
        "{got}"
    );
}

#[test]
fn spec_validation_header_route_requires_managed_routes() {
    let yaml = BASE.replace(
        "{setWeight: 50}",
        "{setHeaderRoute: {name: h, match: [{headerName: x, headerValue: {exact: y}}]}}",
    );
    let got = error_for(&yaml).unwrap();
    assert!(
        got.ends_with(
            "Rollout has missing field 'spec.strategy.canary.trafficRouting.managedRoutes'"
        ),
        "{got}"
    );
}

#[test]
fn spec_validation_step_route_not_in_managed_routes() {
    let yaml = BASE
        .replace(
            "      trafficRouting:\n",
            "      trafficRouting:\n        managedRoutes: [{name: other}]\n",
        )
        .replace(
            "{setWeight: 50}",
            "{setHeaderRoute: {name: h, match: [{headerName: x, headerValue: {exact: y}}]}}",
        );
    let got = error_for(&yaml).unwrap();
    assert!(got.ends_with("Steps define a route that does not exist in spec.strategy.canary.trafficRouting.managedRoutes"), "{got}");
}

#[test]
fn spec_validation_string_match_needs_exactly_one() {
    let yaml = BASE
        .replace("      trafficRouting:\n", "      trafficRouting:\n        managedRoutes: [{name: h}]\n")
        .replace("{setWeight: 50}", "{setHeaderRoute: {name: h, match: [{headerName: x, headerValue: {exact: y, prefix: z}}]}}");
    let got = error_for(&yaml).unwrap();
    assert!(
        got.ends_with(
            "StringMatch match value must have exactly one of the following: exact, regex, prefix"
        ),
        "{got}"
    );
}

#[test]
fn spec_validation_both_surge_and_unavailable_zero() {
    let yaml = BASE.replace(
        "      canaryService: demo-canary\n",
        "      canaryService: demo-canary\n      maxSurge: 0\n      maxUnavailable: 0\n",
    );
    let got = error_for(&yaml).unwrap();
    assert!(
        got.ends_with("MaxSurge and MaxUnavailable both can not be zero"),
        "{got}"
    );
}

#[test]
fn header_route_on_a_virtual_service_without_http_is_wrapped_as_argo_wraps_it() {
    let yaml = BASE
        .replace("routes: [primary]}", "tcpRoutes: [{port: 8020}]}")
        .replace("  http:\n  - name: primary\n    route:\n    - {destination: {host: demo-stable}, weight: 100}\n    - {destination: {host: demo-canary}, weight: 0}\n", &format!("  tcp:\n{TCP_ROUTE}"))
        .replace("      trafficRouting:\n", "      trafficRouting:\n        managedRoutes: [{name: h}]\n")
        .replace("steps: [{setWeight: 50}, {pause: {}}]", "steps: [{setHeaderRoute: {name: h, match: [{headerName: x, headerValue: {exact: y}}]}}, {pause: {}}]");
    let got = error_for(&yaml).unwrap();
    assert!(
        got.starts_with("[SetHeaderRoute] failed to reconcile header routes:")
            && got.ends_with("spec.http not found"),
        "{got}"
    );
}
