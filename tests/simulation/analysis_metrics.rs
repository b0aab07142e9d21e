//! The built-in Prometheus as a query sees it: a simulated load through the seed's ingress
//! gateway at setWeight 20 feeds Istio's request metrics, with Istio's labels, and PromQL
//! over them gives the split, the error rate and the latency the backends were given.

use canarysim::analysis::promql::{self, QueryValue};
use canarysim::kubeproxy::ProxyMode;
use canarysim::load::{Amount, Arrival, BackendModel, Backends, Streams, Traffic, Workload};
use canarysim::mesh::LbPolicy;
use canarysim::model::Manifest;
use canarysim::sim::{ClusterConfig, World};
use std::path::Path;
use std::time::Duration;

const NS: &str = "my-demo";

fn world() -> World {
    world_with_seed(1)
}

fn world_with_seed(seed: u64) -> World {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let mut manifests: Vec<Manifest> = Vec::new();
    for f in [
        "seed-004-rollout.yaml",
        "seed-004-services.yaml",
        "seed-004-gateway.yaml",
        "seed-004-virtualsvc.yaml",
    ] {
        let text = std::fs::read_to_string(dir.join(f)).expect("manifest");
        manifests.extend(canarysim::model::yaml::load_str(f, &text, NS).expect("parses"));
    }
    let mut w = World::new(ClusterConfig::default(), seed);
    w.apply(&manifests).expect("applies");
    w.advance(Duration::from_secs(30)).expect("settles");
    w.set_image(
        NS,
        "rollouts-demo",
        "rollouts-demo",
        "argoproj/rollouts-demo:yellow",
    )
    .expect("set image");
    // setWeight 20, then the indefinite pause.
    w.advance(Duration::from_secs(30)).expect("advances");
    w
}

fn vector(w: &World, q: &str) -> Vec<(String, f64)> {
    let at = w.now().as_duration().as_millis() as i64;
    match promql::query(&w.metrics.at(w.now()), q, at).expect("evaluates") {
        QueryValue::Vector(v) => v
            .into_iter()
            .map(|(l, x)| (l.values().cloned().collect::<Vec<_>>().join(","), x))
            .collect(),
        other => panic!("not a vector: {other:?}"),
    }
}

#[test]
fn a_load_through_the_gateway_shows_in_istios_metrics() {
    let mut w = world();
    let mut backends = Backends::default();
    backends.by_image.insert(
        "argoproj/rollouts-demo:yellow".into(),
        BackendModel::new(Duration::from_millis(40), Duration::ZERO, 0.1),
    );
    let workload = Workload {
        amount: Amount::Duration(Duration::from_secs(300)),
        namespace: NS.into(),
        traffic: Traffic {
            arrival: Arrival::Constant(100.0),
            host: "rollouts-demo.local".into(),
            ..Traffic::default()
        },
        ..Workload::default()
    };
    let mut streams = Streams::new(7, "metrics-test");
    w.run_load(
        &workload,
        &backends,
        LbPolicy::RoundRobin,
        ProxyMode::Iptables,
        &mut streams,
    )
    .expect("load runs");

    // Requests per workload over the load's 5 minutes: 30,000 in all, about 20 % to the
    // canary ReplicaSet (Argo's pods belong to their ReplicaSet: its name is the workload).
    let by_workload = vector(
        &w,
        r#"sum by (destination_workload) (increase(istio_requests_total{reporter="destination"}[5m]))"#,
    );
    let names: Vec<&str> = by_workload.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["rollouts-demo-5cf4fb69f8", "rollouts-demo-76c569d8b"]
    );
    let total: f64 = by_workload.iter().map(|(_, x)| x).sum();
    let canary = by_workload[0].1 / total;
    assert!((29_000.0..=31_000.0).contains(&total), "{total}");
    assert!((0.19..=0.21).contains(&canary), "{canary}");

    // The canary Service's success rate, as Argo's documented query asks it: about 0.9.
    let success = vector(
        &w,
        r#"sum(rate(istio_requests_total{reporter="source",destination_service=~"rollouts-demo-canary.my-demo.svc.cluster.local",response_code!~"5.*"}[5m])) / sum(rate(istio_requests_total{reporter="source",destination_service=~"rollouts-demo-canary.my-demo.svc.cluster.local"}[5m]))"#,
    );
    assert!((0.88..=0.92).contains(&success[0].1), "{success:?}");

    // The canary's p99 from the duration histogram: every answer takes 40 ms, in the
    // (25, 50] bucket; the interpolated 99th percentile is 25 + 25 × 0.99 = 49.75.
    let p99 = vector(
        &w,
        r#"histogram_quantile(0.99, sum by (le) (rate(istio_request_duration_milliseconds_bucket{reporter="destination",destination_service="rollouts-demo-canary.my-demo.svc.cluster.local"}[5m])))"#,
    );
    assert!((p99[0].1 - 49.75).abs() < 1e-6, "{p99:?}");

    // Through the gateway, the source is the ingress gateway workload.
    let sources = vector(
        &w,
        r#"count by (source_workload, reporter) (istio_requests_total)"#,
    );
    assert!(
        sources
            .iter()
            .any(|(l, _)| l == "source,istio-ingressgateway"),
        "{sources:?}"
    );
}

#[test]
fn a_scrape_windows_success_rate_varies_as_a_binomial_count() {
    // 100 requests a second, 20 % to a canary failing 10 %: the last 15 s (irate's two
    // scrapes) hold about 300 canary requests, whose success rate has a binomial SD of
    // sqrt(0.1 × 0.9 / 300) = 0.0173. Across seeds, the built-in Prometheus must show that
    // spread (a count spread evenly over its epoch would show the epoch's average).
    let mut rates = Vec::new();
    for seed in 1..=200 {
        let mut w = world_with_seed(seed);
        let mut backends = Backends::default();
        backends.by_image.insert(
            "argoproj/rollouts-demo:yellow".into(),
            BackendModel::new(Duration::from_millis(1), Duration::ZERO, 0.1),
        );
        let workload = Workload {
            amount: Amount::Duration(Duration::from_secs(60)),
            namespace: NS.into(),
            traffic: Traffic {
                arrival: Arrival::Constant(100.0),
                host: "rollouts-demo.local".into(),
                ..Traffic::default()
            },
            ..Workload::default()
        };
        let mut streams = Streams::new(seed, "window-test");
        w.run_load(
            &workload,
            &backends,
            LbPolicy::RoundRobin,
            ProxyMode::Iptables,
            &mut streams,
        )
        .expect("load runs");
        let canary = r#"reporter="source",destination_service="rollouts-demo-canary.my-demo.svc.cluster.local""#;
        let success = vector(
            &w,
            &format!(
                r#"sum(irate(istio_requests_total{{{canary},response_code!~"5.*"}}[1m])) / sum(irate(istio_requests_total{{{canary}}}[1m]))"#
            ),
        );
        rates.push(success[0].1);
    }
    let n = rates.len() as f64;
    let mean = rates.iter().sum::<f64>() / n;
    let sd = (rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let binomial = (0.1 * 0.9 / 300.0f64).sqrt();
    println!("mean {mean:.4}, SD {sd:.4}, binomial {binomial:.4}");
    assert!((0.88..=0.92).contains(&mean), "mean {mean}");
    assert!(
        (sd / binomial - 1.0).abs() <= 0.25,
        "SD {sd:.4} against the binomial {binomial:.4}"
    );
}

/// Through a Gateway API Gateway the source is the deployment Istio makes for it,
/// `<gateway>-<class>` in the Gateway's namespace, not the shared `istio-ingressgateway`.
#[test]
fn through_a_gateway_api_gateway_the_source_is_its_own_deployment() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let mut manifests: Vec<Manifest> = Vec::new();
    for f in ["gateway-api-routes.yaml", "gateway-api-rollout.yaml"] {
        let text = std::fs::read_to_string(dir.join(f)).expect("manifest");
        manifests.extend(canarysim::model::yaml::load_str(f, &text, "default").expect("parses"));
    }
    let mut w = World::new(ClusterConfig::default(), 1);
    w.apply(&manifests).expect("applies");
    w.advance(Duration::from_secs(30)).expect("settles");
    let workload = Workload {
        amount: Amount::Requests(2_000),
        namespace: "default".into(),
        port: 8080,
        traffic: Traffic {
            host: "demo.example.com".into(),
            ..Traffic::default()
        },
        ..Workload::default()
    };
    let mut streams = Streams::new(7, "metrics-test");
    let result = w
        .run_load(
            &workload,
            &Backends::default(),
            LbPolicy::RoundRobin,
            ProxyMode::Iptables,
            &mut streams,
        )
        .expect("load runs");
    assert_eq!(result.path, "gateway default/istio-gateway");
    let sources = vector(
        &w,
        r#"count by (source_workload, source_workload_namespace) (istio_requests_total{reporter="source"})"#,
    );
    let names: Vec<&str> = sources.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(names, ["istio-gateway-istio,default"]);
}

/// A 60-second load at 100 requests per second through the gateway, seeded.
fn short_load(w: &mut World, seed: u64) {
    let mut backends = Backends::default();
    backends.by_image.insert(
        "argoproj/rollouts-demo:yellow".into(),
        BackendModel::new(Duration::from_millis(40), Duration::from_millis(10), 0.1),
    );
    let workload = Workload {
        amount: Amount::Duration(Duration::from_secs(60)),
        namespace: NS.into(),
        traffic: Traffic {
            arrival: Arrival::Constant(100.0),
            host: "rollouts-demo.local".into(),
            ..Traffic::default()
        },
        ..Workload::default()
    };
    let mut streams = Streams::new(seed, "metrics-test");
    w.run_load(
        &workload,
        &backends,
        LbPolicy::RoundRobin,
        ProxyMode::Iptables,
        &mut streams,
    )
    .expect("load runs");
}

#[test]
fn series_written_at_the_first_query_are_those_a_query_after_every_load_sees() {
    // The epochs are written as series only when a query comes (issue 31: a load nobody
    // queries costs no series per pod); written late or early, in order, they are the same.
    let query = r#"sum by (destination_workload, response_code, le) (istio_request_duration_milliseconds_bucket)"#;
    let mut eager = world();
    short_load(&mut eager, 1);
    let first = vector(&eager, query);
    short_load(&mut eager, 2);
    let mut lazy = world();
    short_load(&mut lazy, 1);
    short_load(&mut lazy, 2);
    assert!(!first.is_empty());
    assert_eq!(vector(&eager, query), vector(&lazy, query));
    assert_ne!(vector(&lazy, query), first, "the second load counted");
}
