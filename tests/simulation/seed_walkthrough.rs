//! Seed 004: the k3d + Istio walkthrough (4 replicas, steps 20 / pause ∞ / 40 / 1m / 60 / 1m /
//! 80 / 1m / 100), checked against the figures the seed shows at every step.

use canarysim::model::Kind;
use canarysim::report::rollout_view;
use canarysim::rollout_info;
use canarysim::sim::World;
use std::time::Duration;

const NS: &str = "my-demo";
const RO: &str = "rollouts-demo";

fn manifests(files: &[&str]) -> Vec<canarysim::model::Manifest> {
    canarysim::demo::manifests(files)
}

/// The first deploy, a minute after it was applied.
fn deployed() -> World {
    let mut world = canarysim::demo::deployed(1);
    world.advance(Duration::from_secs(30)).unwrap();
    world
}

fn view(world: &World) -> rollout_view::RolloutView {
    rollout_info::view(&world.api, NS, RO, world.now()).unwrap()
}

fn weights(world: &World) -> (i64, i64) {
    let vs = world
        .api
        .get(Kind::VirtualService, NS, "rollouts-demo-vsvc")
        .unwrap();
    let route = &vs.spec()["http"][0]["route"];
    (
        route[0]["weight"].as_i64().unwrap(),
        route[1]["weight"].as_i64().unwrap(),
    )
}

fn selector_hash(world: &World, svc: &str) -> String {
    let s = world.api.get(Kind::Service, NS, svc).unwrap();
    s.spec()["selector"]["rollouts-pod-template-hash"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn phase(world: &World) -> String {
    let r = world.api.get(Kind::Rollout, NS, RO).unwrap();
    r.status()["phase"].as_str().unwrap_or("").to_string()
}

fn wait_for_phase(world: &mut World, want: &str, limit: Duration) {
    let end = world.now().after(limit);
    let ok = world.advance_until(end, |w| phase(w) == want).unwrap();
    assert!(
        ok,
        "rollout did not reach {want} within {limit:?}: {}",
        phase(world)
    );
}

#[test]
fn initial_deploy_is_healthy_with_four_stable_pods() {
    let world = deployed();
    let v = view(&world);
    assert_eq!(v.status, "Healthy");
    assert_eq!(v.step, Some((9, 9)));
    assert_eq!((v.set_weight, v.actual_weight), (100, 100));
    assert_eq!(
        (v.desired, v.current, v.updated, v.ready, v.available),
        (4, 4, 4, 4, 4)
    );
    assert_eq!(
        v.revisions[0].replica_sets[0].name,
        "rollouts-demo-76c569d8b"
    );
    assert_eq!(selector_hash(&world, "rollouts-demo-stable"), "76c569d8b");
    assert_eq!(selector_hash(&world, "rollouts-demo-canary"), "76c569d8b");
    assert_eq!(weights(&world), (100, 0));
}

#[test]
fn walkthrough_reproduces_the_seed_figures() {
    let mut world = deployed();
    world
        .apply(&manifests(&["seed-004-rollout-update.yaml"]))
        .unwrap();
    wait_for_phase(&mut world, "Paused", Duration::from_secs(120));

    // Step 1/9: SetWeight 20, ActualWeight 20, Desired 4, Current 5, Updated 1, Ready 5, Available 5.
    let v = view(&world);
    assert_eq!(v.message, "CanaryPauseStep");
    assert_eq!(v.step, Some((1, 9)));
    assert_eq!((v.set_weight, v.actual_weight), (20, 20));
    assert_eq!(
        (v.desired, v.current, v.updated, v.ready, v.available),
        (4, 5, 1, 5, 5)
    );
    assert_eq!(selector_hash(&world, "rollouts-demo-canary"), "5cf4fb69f8");
    assert_eq!(selector_hash(&world, "rollouts-demo-stable"), "76c569d8b");
    assert_eq!(weights(&world), (80, 20));
    let text = rollout_view::render(&v, false);
    assert!(
        text.contains("argoproj/rollouts-demo:yellow (canary)"),
        "{text}"
    );

    // Promote: Step 3/9, SetWeight 40, Current 6, Updated 2, VirtualService 60/40.
    world.promote(NS, RO, false).unwrap();
    wait_for_phase(&mut world, "Paused", Duration::from_secs(120));
    let v = view(&world);
    assert_eq!(v.step, Some((3, 9)));
    assert_eq!((v.set_weight, v.actual_weight), (40, 40));
    assert_eq!((v.current, v.updated, v.ready, v.available), (6, 2, 6, 6));
    assert_eq!(weights(&world), (60, 40));

    // The one-minute pauses run by themselves to the end.
    wait_for_phase(&mut world, "Healthy", Duration::from_secs(600));
    let v = view(&world);
    assert_eq!(v.step, Some((9, 9)));
    assert_eq!((v.set_weight, v.actual_weight), (100, 100));
    assert_eq!(weights(&world), (100, 0), "back to stable 100 / canary 0");
    assert_eq!(selector_hash(&world, "rollouts-demo-stable"), "5cf4fb69f8");
    assert_eq!(selector_hash(&world, "rollouts-demo-canary"), "5cf4fb69f8");
    assert_eq!(
        (v.current, v.updated),
        (8, 4),
        "old pods wait for the scale-down delay"
    );
    let old = &v.revisions[1].replica_sets[0];
    assert!(matches!(
        old.scale_down_delay,
        Some(rollout_view::ScaleDownDelay::Remaining(_))
    ));

    // After the 30 s scale-down delay, 4 pods remain.
    world.advance(Duration::from_secs(31)).unwrap();
    let v = view(&world);
    assert_eq!((v.current, v.updated, v.ready, v.available), (4, 4, 4, 4));
    assert_eq!(v.revisions[1].replica_sets[0].status, "ScaledDown");
    assert_eq!(world.api.list(Kind::Pod, Some(NS), None).len(), 4);
}
