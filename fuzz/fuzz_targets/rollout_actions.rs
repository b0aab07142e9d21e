//! The controllers under what users do, structure-aware: a Rollout of any replicas, surge
//! and unavailable budgets, steps (setWeight, pauses, setCanaryScale) and dynamicStableScale,
//! behind the seed walkthrough's Services, Gateway and VirtualService, then any sequence of
//! new images, promote, promote --full, abort, retry, pause/resume, undo, restart, crashing
//! pods and waits, applied through the simulation's own calls. Random bytes as YAML seldom
//! make a valid Rollout; this reaches the controllers every time. After every action: no
//! panic, every route's weights in 0..=100 summing to 100 (but for Argo's own overshoot on
//! promote --full with dynamicStableScale, which the invariant's message explains), and
//! every ReplicaSet asking for 0 to max(spec.replicas, setCanaryScale replicas) pods.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use canarysim::model::{Kind, Manifest};
use canarysim::sim::{ClusterConfig, World};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

const NS: &str = "my-demo";
const NAME: &str = "rollouts-demo";

#[derive(Arbitrary, Debug)]
enum Budget {
    Count(u8),
    Percent(u8),
}

#[derive(Arbitrary, Debug)]
enum Step {
    SetWeight(u8),
    Pause(Option<u16>),
    CanaryScaleWeight(u8),
    CanaryScaleReplicas(u8),
    CanaryScaleMatchTraffic,
}

#[derive(Arbitrary, Debug)]
enum Action {
    NewImage,
    Promote,
    PromoteFull,
    Abort,
    Retry,
    Pause(bool),
    Undo(u8),
    Restart,
    FailPods(bool, u8),
    Wait(u16),
}

#[derive(Arbitrary, Debug)]
struct Input {
    replicas: u8,
    surge: Budget,
    unavailable: Budget,
    dynamic_stable_scale: bool,
    steps: Vec<Step>,
    actions: Vec<Action>,
}

fn budget(b: &Budget) -> serde_json::Value {
    match b {
        Budget::Count(n) => serde_json::json!(n % 4),
        Budget::Percent(p) => serde_json::json!(format!("{}%", p % 101)),
    }
}

/// The walkthrough's Services, Gateway and VirtualService, read once.
fn walkthrough() -> &'static Vec<Manifest> {
    static MANIFESTS: OnceLock<Vec<Manifest>> = OnceLock::new();
    MANIFESTS.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/manifests");
        [
            "seed-004-services.yaml",
            "seed-004-gateway.yaml",
            "seed-004-virtualsvc.yaml",
        ]
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(dir.join(f)).unwrap();
            canarysim::model::yaml::load_str(f, &text, NS).unwrap()
        })
        .collect()
    })
}

fn check(world: &World, most: i64, after: &str) {
    for v in canarysim::scenario::invariants::violations(&world.api) {
        // Argo's own overshoot on promote --full with dynamicStableScale is explained, not a bug.
        let argo_overshoot = v.contains("promote --full with dynamicStableScale");
        assert!(
            !v.contains("do not sum to 100") || argo_overshoot,
            "after {after}: {v}"
        );
    }
    for rs in world.api.list(Kind::ReplicaSet, Some(NS), None) {
        let asked = rs.spec()["replicas"].as_i64().unwrap_or(0);
        assert!(
            (0..=most).contains(&asked),
            "after {after}: ReplicaSet {} asks for {asked} (bound 0..={most})",
            rs.name()
        );
    }
}

fuzz_target!(|input: Input| {
    let replicas = i64::from(input.replicas % 13);
    let mut most = replicas;
    let steps: Vec<serde_json::Value> = input
        .steps
        .iter()
        .take(8)
        .map(|s| match s {
            Step::SetWeight(w) => serde_json::json!({"setWeight": w % 101}),
            Step::Pause(None) => serde_json::json!({"pause": {}}),
            Step::Pause(Some(d)) => {
                serde_json::json!({"pause": {"duration": format!("{}s", d % 600)}})
            }
            Step::CanaryScaleWeight(w) => {
                serde_json::json!({"setCanaryScale": {"weight": w % 101}})
            }
            Step::CanaryScaleReplicas(n) => {
                most = most.max(i64::from(n % 13));
                serde_json::json!({"setCanaryScale": {"replicas": n % 13}})
            }
            Step::CanaryScaleMatchTraffic => {
                serde_json::json!({"setCanaryScale": {"matchTrafficWeight": true}})
            }
        })
        .collect();
    let rollout = serde_json::json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": NAME},
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": 2,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {"containers": [{"name": NAME, "image": "demo:1"}]}
            },
            "strategy": {"canary": {
                "canaryService": "rollouts-demo-canary",
                "stableService": "rollouts-demo-stable",
                "maxSurge": budget(&input.surge),
                "maxUnavailable": budget(&input.unavailable),
                "dynamicStableScale": input.dynamic_stable_scale,
                "trafficRouting": {"istio": {"virtualService": {"name": "rollouts-demo-vsvc", "routes": ["primary"]}}},
                "steps": steps
            }}
        }
    });
    let Ok(mut manifests) =
        canarysim::model::yaml::load_str("rollout.yaml", &rollout.to_string(), NS)
    else {
        return;
    };
    manifests.extend(walkthrough().iter().cloned());
    let mut world = World::new(ClusterConfig::default(), 1);
    if world.apply(&manifests).is_err() {
        return;
    }
    let _ = world.advance(Duration::from_secs(30));
    check(&world, most, "deploying");
    let mut image = 1;
    for action in input.actions.iter().take(12) {
        let _ = match action {
            Action::NewImage => {
                image += 1;
                world.set_image(NS, NAME, NAME, &format!("demo:{image}"))
            }
            Action::Promote => world.promote(NS, NAME, false),
            Action::PromoteFull => world.promote(NS, NAME, true),
            Action::Abort => world.abort(NS, NAME),
            Action::Retry => world.retry(NS, NAME),
            Action::Pause(paused) => world.set_paused(NS, NAME, *paused),
            Action::Undo(to) => world.undo(NS, NAME, i64::from(to % 4)).map(|_| ()),
            Action::Restart => world.restart(NS, NAME, Duration::ZERO),
            Action::FailPods(canary, n) => world
                .fail_pods(NS, NAME, *canary, usize::from(n % 4))
                .map(|_| ()),
            Action::Wait(s) => world.advance(Duration::from_secs(u64::from(s % 600))),
        };
        check(&world, most, &format!("{action:?}"));
        let _ = world.advance(Duration::from_secs(1));
        check(&world, most, &format!("{action:?} and a second"));
    }
});
