//! The data plane and the verdict, through the same load path scenarios use: does the
//! observed split match the set weight, and what happens without a mesh?

use canarysim::endpoints::Role;
use canarysim::kubeproxy::ProxyMode;
use canarysim::load::{self, Amount, Backends, LoadResult, OriginChoice, SplitUnit, Workload};
use canarysim::mesh::LbPolicy;
use canarysim::model::Kind;
use canarysim::model::yaml::load_str;
use canarysim::random::stream;
use canarysim::seed;
use canarysim::sim::{ClusterConfig, World};
use canarysim::verify;
use std::time::Duration;

const NS: &str = "my-demo";

/// Seed 004 paused at step 1/9 (VirtualService 80/20), long enough for the push to land.
fn paused_at_20() -> World {
    seed::paused_at_20(1)
}

fn gateway_load(requests: u64) -> Workload {
    Workload {
        amount: Amount::Requests(requests),
        namespace: NS.into(),
        host: "rollouts-demo.local".into(),
        ..Workload::default()
    }
}

fn run(world: &mut World, w: &Workload, seed: u64) -> LoadResult {
    let mut rng = stream(seed, "load");
    load::simulate(
        world,
        w,
        &Backends::default(),
        LbPolicy::RoundRobin,
        ProxyMode::Iptables,
        &mut rng,
    )
    .unwrap()
}

fn canary(r: &LoadResult) -> u64 {
    r.arms
        .iter()
        .filter(|a| a.role == Role::Canary)
        .map(|a| a.responses)
        .sum()
}

#[test]
fn mesh_80_20_over_100000_requests_is_20_percent_within_one_point_at_99_9() {
    let mut world = paused_at_20();
    let r = run(&mut world, &gateway_load(100_000), 1);
    assert!(r.balanced(), "sent = answered + failed");
    assert_eq!((r.sent, r.answered, r.failed()), (100_000, 100_000, 0));
    assert_eq!(r.unit, SplitUnit::Request);
    assert_eq!(canary(&r), 19_927, "exact for seed 1");
    let ci = verify::wilson(canary(&r), r.answered, 0.999);
    assert!(ci.lo <= 0.20 && 0.20 <= ci.hi, "{ci:?}");
    assert!(ci.lo >= 0.19 && ci.hi <= 0.21, "{ci:?}");
}

#[test]
fn the_95_percent_interval_covers_the_true_weight_in_94_to_96_percent_of_1000_seeds() {
    let world = paused_at_20();
    let mut covered = 0;
    for seed in 0..1000 {
        let mut w = world.clone();
        let r = run(&mut w, &gateway_load(10_000), seed);
        let ci = verify::wilson(canary(&r), r.answered, 0.95);
        covered += (ci.lo <= 0.20 && 0.20 <= ci.hi) as u32;
    }
    eprintln!("95 % Wilson interval covered 20 % in {covered} of 1000 seeds");
    assert!(
        (940..=960).contains(&covered),
        "covered in {covered} of 1000 runs"
    );
}

#[test]
fn a_weight_change_reaches_the_router_one_push_delay_after_it_is_written() {
    let mut w = seed::deployed(1);
    w.apply(&seed::manifests(&[seed::UPDATE])).unwrap();
    // Stop at the instant the controller writes weight 20 (the canary pod turns ready).
    let end = w.now().after(Duration::from_secs(60));
    let vs_weight = |w: &World| {
        w.api
            .get(Kind::VirtualService, NS, "rollouts-demo-vsvc")
            .unwrap()
            .spec()["http"][0]["route"][1]["weight"]
            .as_i64()
            .unwrap()
    };
    assert!(w.advance_until(end, |w| vs_weight(w) == 20).unwrap());
    let written = w.now();
    // Requests in the 100 ms after the write still follow the old weights (0 % canary)...
    let before = Workload {
        amount: Amount::Duration(Duration::from_millis(99)),
        ..gateway_load(0)
    };
    let r = run(&mut w, &before, 1);
    assert!(r.sent > 1000, "{}", r.sent);
    assert_eq!(
        canary(&r),
        0,
        "nothing reaches the canary before {written} + 100ms"
    );
    assert_eq!(r.configured, vec![(Role::Stable, 1.0)]);
    // ... and from then on the new ones.
    w.advance_until(written.after(Duration::from_millis(100)), |_| false)
        .unwrap();
    let r = run(&mut w, &gateway_load(50_000), 2);
    let share = canary(&r) as f64 / r.answered as f64;
    assert!((share - 0.20).abs() < 0.01, "{share}");
}

/// The seed rollout without traffic routing and with a Service selecting every pod: at
/// setWeight 20 there are 4 stable pods and 1 canary pod behind it.
fn no_mesh() -> World {
    let yaml = r#"
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: rollouts-demo}
spec:
  replicas: 4
  selector: {matchLabels: {app: rollouts-demo}}
  template:
    metadata: {labels: {app: rollouts-demo}}
    spec: {containers: [{name: rollouts-demo, image: "argoproj/rollouts-demo:blue"}]}
  strategy:
    canary:
      steps: [{setWeight: 20}, {pause: {}}]
---
{apiVersion: v1, kind: Service, metadata: {name: rollouts-demo}, spec: {selector: {app: rollouts-demo}, ports: [{port: 80}]}}
"#;
    let mut w = World::new(ClusterConfig::default(), 1);
    w.apply(&load_str("no-mesh.yaml", yaml, NS).unwrap())
        .unwrap();
    w.advance(Duration::from_secs(30)).unwrap();
    w.set_image(
        NS,
        "rollouts-demo",
        "rollouts-demo",
        "argoproj/rollouts-demo:yellow",
    )
    .unwrap();
    w.advance(Duration::from_secs(30)).unwrap();
    assert_eq!(
        w.api.list(Kind::Pod, Some(NS), None).len(),
        5,
        "4 stable + 1 canary"
    );
    w
}

fn plain_load(requests: u64, keepalive: bool) -> Workload {
    Workload {
        amount: Amount::Requests(requests),
        connections: 20,
        keepalive,
        origin: OriginChoice::Plain,
        namespace: NS.into(),
        host: "rollouts-demo".into(),
        ..Workload::default()
    }
}

#[test]
fn without_a_mesh_keepalive_connections_pin_clients_and_the_share_spreads_widely() {
    let world = no_mesh();
    let mut shares = Vec::new();
    for seed in 0..20 {
        let mut w = world.clone();
        let r = run(&mut w, &plain_load(100_000, true), seed);
        assert_eq!(r.unit, SplitUnit::Connection);
        assert_eq!(r.connections_opened, 20);
        let share = canary(&r) as f64 / r.answered as f64;
        shares.push(share);
        // The verdict is honest about its unit: 20 draws, not 100,000.
        let v = verify::split_verdict(
            &[r.answered - canary(&r), canary(&r)],
            verify::SplitUnit::Connection,
            r.connections_opened,
            &[0.8, 0.2],
            1.0,
            0.99,
        );
        assert_eq!(v.effective_n, 20);
        assert!(!v.passes, "20 connections cannot show ±1 point");
        assert!(
            v.explanation.contains("per connection"),
            "{}",
            v.explanation
        );
    }
    let (lo, hi) = shares
        .iter()
        .fold((1.0f64, 0.0f64), |(lo, hi), s| (lo.min(*s), hi.max(*s)));
    eprintln!(
        "canary share over 20 seeds: {:.1} % .. {:.1} %",
        lo * 100.0,
        hi * 100.0
    );
    // Real iptables rules measured on loopback gave 2.3 %–50.9 % for this setup.
    assert!(lo <= 0.10 && hi >= 0.35, "canary shares {lo:.3}..{hi:.3}");
}

#[test]
fn without_keepalive_each_request_is_a_connection_and_the_share_converges_to_the_pod_ratio() {
    let mut w = no_mesh();
    let r = run(&mut w, &plain_load(100_000, false), 3);
    assert_eq!(r.connections_opened, 100_000);
    let share = canary(&r) as f64 / r.answered as f64;
    assert!((share - 0.20).abs() < 0.01, "{share}");
    assert_eq!(r.configured, vec![(Role::Stable, 0.8), (Role::Canary, 0.2)]);
}
