//! The bundled seed: Argo Rollouts' Istio getting-started demo with 4 replicas (seed 004),
//! embedded in the binary. It is what `canarysim run` plays with no argument, and a cluster
//! at a known stage for tests, benchmarks and experiments.

use std::path::Path;
use std::time::Duration;

use crate::model::yaml::load_str;
use crate::model::{Kind, Manifest};
use crate::scenario::{Embedded, Files};
use crate::sim::{ClusterConfig, World};

/// The bundled scenario: `canarysim run` with no path runs it from the binary itself.
pub const DEFAULT_SCENARIO: &str = "scenarios/seed-004-walkthrough.yaml";

/// Files compiled into the binary, by their repository path.
pub const EMBEDDED: Embedded = Embedded(&[
    (
        DEFAULT_SCENARIO,
        include_str!("../../../scenarios/seed-004-walkthrough.yaml"),
    ),
    (
        "scenarios/manifests/seed-004-rollout.yaml",
        include_str!("../../../scenarios/manifests/seed-004-rollout.yaml"),
    ),
    (
        "scenarios/manifests/seed-004-rollout-update.yaml",
        include_str!("../../../scenarios/manifests/seed-004-rollout-update.yaml"),
    ),
    (
        "scenarios/manifests/seed-004-services.yaml",
        include_str!("../../../scenarios/manifests/seed-004-services.yaml"),
    ),
    (
        "scenarios/manifests/seed-004-gateway.yaml",
        include_str!("../../../scenarios/manifests/seed-004-gateway.yaml"),
    ),
    (
        "scenarios/manifests/seed-004-virtualsvc.yaml",
        include_str!("../../../scenarios/manifests/seed-004-virtualsvc.yaml"),
    ),
]);

/// The seed's namespace and rollout.
pub const NAMESPACE: &str = "my-demo";
pub const ROLLOUT: &str = "rollouts-demo";

/// The first deploy: Rollout (blue), Services, Gateway, VirtualService.
pub const DEPLOY: [&str; 4] = [
    "seed-004-rollout.yaml",
    "seed-004-services.yaml",
    "seed-004-gateway.yaml",
    "seed-004-virtualsvc.yaml",
];

/// `k apply -f example/rollout-update.yaml`: the same Rollout with the yellow image.
pub const UPDATE: &str = "seed-004-rollout-update.yaml";

/// The embedded manifest files named (e.g. [`DEPLOY`]), in order, in [`NAMESPACE`].
pub fn manifests(files: &[&str]) -> Vec<Manifest> {
    files
        .iter()
        .flat_map(|f| {
            let path = format!("scenarios/manifests/{f}");
            let text = EMBEDDED
                .read(Path::new(&path))
                .unwrap_or_else(|_| panic!("{path} is embedded"));
            load_str(&path, &text, NAMESPACE).expect("the bundled manifests are valid")
        })
        .collect()
}

/// The first deploy, healthy (4 blue pods), 30 s after it was applied.
pub fn deployed(seed: u64) -> World {
    let mut world = World::new(ClusterConfig::default(), seed);
    world
        .apply(&manifests(&DEPLOY))
        .expect("the bundled seed applies");
    world
        .advance(Duration::from_secs(30))
        .expect("the bundled seed settles");
    world
}

/// The update paused at step 1/9 (VirtualService 80/20), 30 s after it was applied: the
/// 80/20 route table is in force.
pub fn paused_at_20(seed: u64) -> World {
    let mut world = deployed(seed);
    world
        .apply(&manifests(&[UPDATE]))
        .expect("the bundled update applies");
    world
        .advance(Duration::from_secs(30))
        .expect("the bundled seed settles");
    debug_assert_eq!(
        world
            .api
            .get(Kind::Rollout, NAMESPACE, ROLLOUT)
            .map(|r| r.status()["phase"].clone())
            .ok(),
        Some(serde_json::Value::from("Paused"))
    );
    world
}
