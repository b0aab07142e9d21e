//! `canarysim envoy-config`: the route table in force as an Envoy bootstrap, checked for the
//! figures Envoy will act on (the hermetic part; `tests/real_tools/envoy_differential.rs` feeds it to a
//! real Envoy).

use canarysim::cli::{Cli, execute};
use clap::Parser;
use serde_json::Value;

fn export(args: &[&str]) -> (u8, Value, String) {
    let mut argv = vec!["canarysim", "envoy-config"];
    argv.extend_from_slice(args);
    let (code, out, err) = execute(Cli::parse_from(argv));
    (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
}

#[test]
fn the_walkthrough_at_20_percent_exports_an_80_20_split_to_istios_clusters() {
    let (code, config, err) = export(&["--at-step", "7", "--port", "18080"]);
    assert_eq!(code, 0, "{err}");
    let listeners = config["static_resources"]["listeners"].as_array().unwrap();
    assert_eq!(listeners.len(), 1);
    assert_eq!(
        listeners[0]["address"]["socket_address"]["port_value"],
        18080
    );
    let hcm = &listeners[0]["filter_chains"][0]["filters"][0]["typed_config"];
    let vhost = &hcm["route_config"]["virtual_hosts"][0];
    assert_eq!(vhost["domains"][0], "rollouts-demo.local");
    let route = &vhost["routes"][0]["route"];
    let split: Vec<(String, u64)> = route["weighted_clusters"]["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["weight"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        split,
        [
            (
                "outbound|80||rollouts-demo-stable.my-demo.svc.cluster.local".to_string(),
                80
            ),
            (
                "outbound|80||rollouts-demo-canary.my-demo.svc.cluster.local".to_string(),
                20
            )
        ]
    );
    // Istio turns Envoy's default 15 s route timeout off and retries as it does by default.
    assert_eq!(route["timeout"], "0s");
    assert_eq!(route["retry_policy"]["num_retries"], 2);
    // 4 stable pods and 1 canary pod, at placeholder addresses.
    let endpoints = |i: usize| {
        config["static_resources"]["clusters"][i]["load_assignment"]["endpoints"][0]["lb_endpoints"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!((endpoints(0), endpoints(1)), (4, 1));
}

#[test]
fn tls_and_tcp_routes_get_listeners_of_their_own() {
    // Seed 003's Gateway opens only port 80: its VirtualServices' TLS (443) and TCP (8020)
    // routes get no listener there, as Istio installs none.
    let (code, config, err) = export(&["scenarios/seed-003-multi-vs.yaml"]);
    assert_eq!(code, 0, "{err}");
    let names: Vec<&str> = config["static_resources"]["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["rollouts-demo/rollouts-demo-gateway 80"]);
    // With a Gateway that opens 443 (TLS passthrough) and 8020 (TCP), they do.
    let (code, config, err) = export(&["scenarios/tls-and-tcp-routes.yaml"]);
    assert_eq!(code, 0, "{err}");
    let listeners = config["static_resources"]["listeners"].as_array().unwrap();
    let names: Vec<&str> = listeners
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "rollouts-demo/rollouts-demo-gateway 80",
            "rollouts-demo/rollouts-demo-gateway 443",
            "rollouts-demo/rollouts-demo-gateway 8020"
        ]
    );
    let tls = &listeners[1];
    assert_eq!(
        tls["listener_filters"][0]["name"],
        "envoy.filters.listener.tls_inspector"
    );
    assert!(
        tls["filter_chains"][0]["filter_chain_match"]["server_names"]
            .as_array()
            .unwrap()
            .contains(&Value::from("reviews.bookinfo.com"))
    );
    let tcp_proxy = &listeners[2]["filter_chains"][0]["filters"][0];
    assert_eq!(tcp_proxy["name"], "envoy.filters.network.tcp_proxy");
}

#[test]
fn a_step_past_the_end_is_refused() {
    let (code, _, err) = export(&["--at-step", "99"]);
    assert_eq!(code, 2);
    assert!(err.contains("--at-step 99"), "{err}");
}

#[test]
fn step_0_exports_the_initial_state_once_its_routes_reached_the_proxies() {
    // The manifests' routes land after the push delay; step 0 is that state (all to
    // stable), not the instant before it, when no table had reached the proxies yet.
    let (code, config, err) = export(&["--at-step", "0"]);
    assert_eq!(code, 0, "{err}");
    let hcm = &config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"];
    let route = &hcm["route_config"]["virtual_hosts"][0]["routes"][0]["route"];
    assert_eq!(
        route["cluster"], "outbound|80||rollouts-demo-stable.my-demo.svc.cluster.local",
        "{route}"
    );
}
