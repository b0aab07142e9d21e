//! The bundled seed walkthrough end to end, as `canarysim run` runs it: deploy, update,
//! three pauses with 100,000 requests each through the gateway, the one-minute pauses and
//! the scale-down delay — about 4 minutes of virtual time. Target: under 100 ms of wall time.
//! Baseline in the same run: loading and checking the scenario alone.

use canarysim::cli::{DEFAULT_SCENARIO, EMBEDDED};
use canarysim::scenario;
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

fn walkthrough(c: &mut Criterion) {
    let plan = scenario::load(Path::new(DEFAULT_SCENARIO), &EMBEDDED).unwrap();
    let report = scenario::run(&plan, None);
    assert!(report.passed);
    let loads = report.steps.iter().filter(|s| s.action == "load").count();
    assert_eq!(loads, 3);
    assert!(
        report.steps.last().unwrap().time_ms >= 180_000,
        "at least 3 minutes of virtual time"
    );

    let mut g = c.benchmark_group("walkthrough");
    g.bench_function("baseline: load and check the scenario", |b| {
        b.iter(|| black_box(scenario::load(Path::new(DEFAULT_SCENARIO), &EMBEDDED).unwrap()))
    });
    g.bench_function("seed 004 end to end, 3 x 100,000 requests", |b| {
        b.iter(|| {
            let r = scenario::run(&plan, None);
            assert!(r.passed);
            black_box(r)
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(10));
    targets = walkthrough
}
criterion_main!(benches);
