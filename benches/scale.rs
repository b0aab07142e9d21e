//! The simulation's cost as the cluster grows (issue 31): seed 004's Rollout scaled to 1,000,
//! 10,000 and 100,000 replicas, deployed, updated to the 20 % pause, and a
//! 100,000-request load judged there, as `canarysim run` runs it. Baseline in the same run:
//! the same scenario at the seed's 4 replicas. A load's cost should not grow with the pods
//! it does not reach, and the cluster's only about linearly (targets: 1,000 replicas under
//! 0.3 s, 100,000 under 5 s; their memory is measured with `/usr/bin/time`, README
//! "Performance").
//!
//! `cargo bench --bench scale` prints criterion's figures, then each size's ratio to the
//! baseline (read back from criterion's estimates).

use canarysim::scenario::{self, Disk};
use criterion::{BenchmarkId, Criterion};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

const SIZES: [usize; 4] = [4, 1_000, 10_000, 100_000];

/// Writes the scenario for `replicas` into `dir` and returns its path.
fn write_scenario(dir: &Path, replicas: usize) -> PathBuf {
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let rollout = std::fs::read_to_string(manifests.join("seed-004-rollout.yaml")).unwrap();
    assert!(rollout.contains("\n  replicas: 4\n"));
    let rollout = rollout.replace("\n  replicas: 4\n", &format!("\n  replicas: {replicas}\n"));
    let rollout_file = dir.join(format!("rollout-{replicas}.yaml"));
    std::fs::write(&rollout_file, rollout).unwrap();
    let seed = |name: &str| manifests.join(name).display().to_string();
    let scenario = format!(
        "name: scale-{replicas}
seed: 1
namespace: my-demo
manifests:
  - file: {rollout}
  - file: {services}
  - file: {gateway}
  - file: {virtual_service}
cluster: {{pod_ready_after: 5s, push_delay: 100ms}}
traffic: {{host: rollouts-demo.local, port: 80, connections: 16}}
steps:
  - wait: {{until: healthy, rollout: rollouts-demo, timeout: 2m}}
  - set_image: {{rollout: rollouts-demo, container: rollouts-demo, image: argoproj/rollouts-demo:yellow}}
  - wait: {{until: paused, timeout: 5m}}
  - wait: 1s
  - load: {{requests: 100000}}
  - expect_split: {{canary: 20%, within: 1%, confidence: 99%}}
",
        rollout = rollout_file.display(),
        services = seed("seed-004-services.yaml"),
        gateway = seed("seed-004-gateway.yaml"),
        virtual_service = seed("seed-004-virtualsvc.yaml"),
    );
    let path = dir.join(format!("scale-{replicas}.yaml"));
    std::fs::write(&path, scenario).unwrap();
    path
}

/// Benchmarks each size; returns those criterion measured (a filter may skip some).
fn scale(c: &mut Criterion) -> Vec<usize> {
    let dir = tempfile::tempdir().unwrap();
    let mut measured = std::collections::BTreeSet::new();
    let mut g = c.benchmark_group("scale");
    for replicas in SIZES {
        let plan = scenario::load(&write_scenario(dir.path(), replicas), &Disk).unwrap();
        let report = scenario::run(&plan, None);
        assert!(report.passed, "{replicas} replicas: the 20 % split passes");
        // The largest take seconds per run: criterion's fewest samples, no longer warm-up.
        if replicas >= 10_000 {
            g.sample_size(10).warm_up_time(Duration::from_millis(1));
        }
        g.bench_with_input(BenchmarkId::new("replicas", replicas), &plan, |b, plan| {
            measured.insert(replicas);
            b.iter(|| black_box(scenario::run(plan, None)))
        });
    }
    g.finish();
    measured.into_iter().collect()
}

/// Each measured size's mean over the baseline's, from criterion's `estimates.json` (where
/// criterion writes them: `CRITERION_HOME`, else the target directory's `criterion`).
fn print_ratios(measured: &[usize]) {
    let home = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
                .join("criterion")
        });
    let mean_ns = |replicas: usize| -> Option<f64> {
        let file = home.join(format!("scale/replicas/{replicas}/new/estimates.json"));
        let estimates: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(file).ok()?).ok()?;
        estimates["mean"]["point_estimate"].as_f64()
    };
    // Estimates of sizes not measured in this run would be an earlier run's.
    if !measured.contains(&SIZES[0]) {
        println!(
            "\nscale: no ratios (the {}-replica baseline was not measured)",
            SIZES[0]
        );
        return;
    }
    let Some(baseline) = mean_ns(SIZES[0]) else {
        return;
    };
    println!(
        "\nscale: mean per run, and its ratio to {} replicas",
        SIZES[0]
    );
    for &replicas in measured {
        if let Some(mean) = mean_ns(replicas) {
            println!(
                "  {replicas:>7} replicas: {:>10.3} ms  {:>8.1}×",
                mean / 1e6,
                mean / baseline
            );
        }
    }
}

fn main() {
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(10))
        .configure_from_args();
    let measured = scale(&mut c);
    c.final_summary();
    print_ratios(&measured);
}
