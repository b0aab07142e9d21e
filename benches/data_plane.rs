//! Simulated requests per second on one core through the whole path a request takes in a
//! load step — weighted pick (the route is matched once per request shape and route table),
//! endpoint pick, response model, attribution, latency histogram record — against a bare
//! loop measured in the same run: one RNG draw and one counter increment per request.
//!
//! Target: ≥ 50 million requests/s and ≥ 30 % of the bare loop.

use canarysim::demo;
use canarysim::kubeproxy::ProxyMode;
use canarysim::load::{Amount, Backends, OriginChoice, Traffic, Workload};
use canarysim::mesh::LbPolicy;
use canarysim::random::stream;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use rand::RngCore;
use std::hint::black_box;
use std::time::Duration;

const NS: &str = demo::NAMESPACE;
const REQUESTS: u64 = 1_000_000;

fn data_plane(c: &mut Criterion) {
    let world = demo::paused_at_20(1);
    let mut g = c.benchmark_group("requests");
    g.throughput(Throughput::Elements(REQUESTS));
    g.bench_function(
        "baseline: bare loop (one RNG draw + one counter increment)",
        |b| {
            let mut rng = stream(1, "bench");
            let mut counts = [0u64; 2];
            b.iter(|| {
                for _ in 0..REQUESTS {
                    let x = rng.next_u64();
                    counts[(x >> 63) as usize] += 1;
                }
                black_box(&counts);
            })
        },
    );
    for (name, origin, keepalive) in [
        ("gateway, 80/20 per request", OriginChoice::Auto, true),
        (
            "kube-proxy, keep-alive (per connection)",
            OriginChoice::Plain,
            true,
        ),
    ] {
        let workload = Workload {
            amount: Amount::Requests(REQUESTS),
            namespace: NS.into(),
            traffic: Traffic {
                host: if origin == OriginChoice::Plain {
                    "rollouts-demo-stable"
                } else {
                    "rollouts-demo.local"
                }
                .into(),
                keepalive,
                ..Traffic::default()
            },
            origin,
            ..Workload::default()
        };
        g.bench_function(name, |b| {
            b.iter_batched(
                || world.clone(),
                |mut w| {
                    let mut rng = canarysim::load::Streams::new(1, "load");
                    let r = w
                        .run_load(
                            &workload,
                            &Backends::default(),
                            LbPolicy::RoundRobin,
                            ProxyMode::Iptables,
                            &mut rng,
                        )
                        .unwrap();
                    assert_eq!(r.sent, REQUESTS);
                    black_box(r)
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(8));
    targets = data_plane
}
criterion_main!(benches);
