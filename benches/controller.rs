//! Reconciles per second for the seed rollout (seed 004, paused at step 1/9), against a
//! baseline measured in the same run: reading the Rollout and decoding its spec and status,
//! the least any reconcile does. Also the whole walkthrough on the virtual clock.

use canarysim::clock::SimTime;
use canarysim::controller::rollout::{self, Settings};
use canarysim::demo;
use canarysim::model::Kind;
use canarysim::model::rollout::{RolloutSpec, RolloutStatus};
use criterion::{Criterion, Throughput, black_box, criterion_group, criterion_main};
use std::time::Duration;

const NS: &str = "my-demo";

fn reconcile(c: &mut Criterion) {
    let world = demo::paused_at_20(1);
    let mut api = world.api.clone();
    api.set_keep_log(false);
    let now = world.now();
    let settings = Settings::default();

    let mut g = c.benchmark_group("reconcile");
    g.throughput(Throughput::Elements(1));
    g.bench_function("baseline: get + decode rollout", |b| {
        b.iter(|| {
            let ro = api.get(Kind::Rollout, NS, "rollouts-demo").unwrap();
            let spec: RolloutSpec = ro.spec_as().unwrap();
            let status: RolloutStatus = ro.status_as().unwrap();
            black_box((spec, status))
        })
    });
    g.bench_function("seed rollout, paused at step 1/9", |b| {
        let mut events = Vec::new();
        b.iter(|| {
            events.clear();
            let out =
                rollout::reconcile(&mut api, now, NS, "rollouts-demo", &settings, &mut events)
                    .unwrap();
            assert!(!out.changed, "a settled rollout writes nothing");
            black_box(out)
        })
    });
    g.finish();

    let mut g = c.benchmark_group("walkthrough");
    g.sample_size(20);
    g.bench_function("seed 004, deploy to promoted (5m of virtual time)", |b| {
        b.iter(|| {
            let mut w = demo::paused_at_20(1);
            w.promote(NS, "rollouts-demo", false).unwrap();
            w.advance(Duration::from_secs(600)).unwrap();
            black_box(w.now() > SimTime::ZERO)
        })
    });
    g.finish();
}

/// A Rollout of `replicas` pods deployed, then a new image rolled through a setWeight 50
/// step to Healthy (what `/tmp`-style scale runs do, without the scenario runner).
fn roll_out(replicas: usize) -> usize {
    use canarysim::sim::{ClusterConfig, World};
    let manifest = format!(
        "apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {{name: demo}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: demo}}}}
  template:
    metadata: {{labels: {{app: demo}}}}
    spec:
      containers: [{{name: app, image: \"demo:1\"}}]
  strategy: {{canary: {{steps: [{{setWeight: 50}}]}}}}
"
    );
    let manifests = canarysim::model::yaml::load_str("scale.yaml", &manifest, "ns").unwrap();
    let mut w = World::new(ClusterConfig::default(), 1);
    w.apply(&manifests).unwrap();
    w.advance(Duration::from_secs(60)).unwrap();
    w.set_image("ns", "demo", "*", "demo:2").unwrap();
    w.advance(Duration::from_secs(600)).unwrap();
    w.api.list(Kind::Pod, None, None).len()
}

/// Time per pod at 1,000 and 10,000 replicas against 100 (same run): 1.0 means the cost
/// grows linearly with the pods.
fn scale(c: &mut Criterion) {
    let mut g = c.benchmark_group("scale");
    g.sample_size(10);
    for replicas in [100, 1000, 10_000] {
        g.throughput(Throughput::Elements(replicas as u64));
        g.bench_function(
            format!("{replicas} replicas, deploy + canary to Healthy"),
            |b| b.iter(|| assert_eq!(roll_out(black_box(replicas)), replicas)),
        );
    }
    g.finish();
}

criterion_group!(benches, reconcile, scale);
criterion_main!(benches);
