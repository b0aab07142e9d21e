//! The router's hot path on seed 004's shape (gateway, 80/20 host-level split, 4 + 1 pods):
//! route + weighted pick + endpoint, and the pick alone. Target: ≥ 50 M requests/s per core
//! for the whole request path.

use canarysim::apiserver::ApiServer;
use canarysim::mesh::{self, LbPolicy, LbState, Origin, RequestMeta};
use canarysim::model::{Kind, Object};
use canarysim::random::stream;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::hint::black_box;

fn create(api: &mut ApiServer, kind: Kind, value: Value) {
    api.create(Object::new(kind, value)).unwrap();
}

fn store() -> ApiServer {
    let mut api = ApiServer::new();
    for (hash, image, n) in [("s1", "demo:blue", 4), ("c1", "demo:yellow", 1)] {
        for i in 0..n {
            create(
                &mut api,
                Kind::Pod,
                json!({"metadata": {"name": format!("demo-{hash}-{i}"), "namespace": "ns",
                                    "labels": {"app": "demo", "rollouts-pod-template-hash": hash}},
                       "spec": {"containers": [{"name": "app", "image": image}]},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            );
        }
        create(
            &mut api,
            Kind::Service,
            json!({"metadata": {"name": format!("demo-{hash}"), "namespace": "ns"},
                   "spec": {"selector": {"app": "demo", "rollouts-pod-template-hash": hash},
                            "ports": [{"port": 80}]}}),
        );
    }
    create(
        &mut api,
        Kind::Gateway,
        json!({"metadata": {"name": "gw", "namespace": "ns"},
               "spec": {"servers": [{"port": {"number": 80}, "hosts": ["*"]}]}}),
    );
    create(
        &mut api,
        Kind::VirtualService,
        json!({"metadata": {"name": "vs", "namespace": "ns"},
               "spec": {"hosts": ["demo.local"], "gateways": ["gw"], "http": [{"name": "primary",
                        "route": [{"destination": {"host": "demo-s1"}, "weight": 80},
                                  {"destination": {"host": "demo-c1"}, "weight": 20}]}]}}),
    );
    api
}

fn router(c: &mut Criterion) {
    let table = mesh::translate(&store());
    let req = RequestMeta {
        origin: Origin::Gateway("ns/gw"),
        host: "demo.local",
        namespace: "ns",
        ..RequestMeta::default()
    };
    let mut rng = stream(1, "bench");
    let mut lb = LbState::new(&table);
    let choice = table.route(&req).unwrap();

    let mut g = c.benchmark_group("router");
    g.throughput(Throughput::Elements(1));
    g.bench_function("serve (route + pick + endpoint)", |b| {
        b.iter(|| {
            table
                .serve(black_box(&req), LbPolicy::RoundRobin, &mut rng, &mut lb)
                .unwrap()
        })
    });
    g.bench_function("route", |b| {
        b.iter(|| table.route(black_box(&req)).unwrap().scope)
    });
    g.bench_function("pick", |b| b.iter(|| choice.clusters.pick(&mut rng)));
    // A load step sends one request shape: route once per pushed table, then per request
    // only the weighted pick and the endpoint choice.
    g.bench_function("pick + endpoint (route cached)", |b| {
        b.iter(|| {
            let c = choice.clusters.pick(&mut rng);
            table
                .cluster(c)
                .and_then(|c| c.pick_endpoint(LbPolicy::RoundRobin, &mut rng, &mut lb))
        })
    });
    g.finish();
}

criterion_group!(benches, router);
criterion_main!(benches);
