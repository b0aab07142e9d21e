//! Properties of the controller and the data plane over random Rollouts (replicas, surge and
//! unavailable budgets, setWeight, pauses and setCanaryScale steps, dynamicStableScale) and
//! random sequences of what users do (images, promote, promote --full, abort, retry, waits,
//! pods crashing):
//! - every route's weights stay in 0..100 and sum to 100 after every event, but for the one
//!   overshoot Argo itself writes (see `promote_full_with_a_larger_canary_scale_overshoots`);
//! - every ReplicaSet asks for 0 to spec.replicas pods (or the setCanaryScale count) at
//!   every instant;
//! - once the world has settled at an instant, one more round of every controller writes
//!   nothing (no controller writes an object again without a change in what it reads);
//! - the run is the same for the same seed;
//! - after `promote --full` every rollout ends Healthy within bounded scenario time, its
//!   replicas as asked, with no weight on a destination without ready endpoints (an abort
//!   before it included: this property found that promote --full did not clear an abort,
//!   as Argo's controller does).
//!
//! The generator is seeded (a fixed proptest seed), so a failure is reproducible.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

use canarysim::cli::{Cli, execute};
use clap::Parser;

use crate::support;

#[derive(Debug, Clone)]
enum Step {
    SetWeight(u32),
    Pause(Option<u32>),
    /// setCanaryScale: a share of the replicas, a pod count, or back to the traffic weight.
    CanaryScaleWeight(u32),
    CanaryScaleReplicas(u32),
    CanaryScaleMatchTraffic,
}

#[derive(Debug, Clone)]
enum Act {
    NewImage,
    Promote,
    PromoteFull,
    Abort,
    Retry,
    Wait(u32),
    /// Pods of the canary (true) or stable ReplicaSet crash.
    FailPods(bool, u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u32..=20).prop_map(|w| Step::SetWeight(w * 5)),
        prop::option::of(0u32..=60).prop_map(Step::Pause),
        (0u32..=10).prop_map(|w| Step::CanaryScaleWeight(w * 10)),
        (0u32..=4).prop_map(Step::CanaryScaleReplicas),
        Just(Step::CanaryScaleMatchTraffic),
    ]
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => Just(Act::NewImage),
        2 => Just(Act::Promote),
        1 => Just(Act::PromoteFull),
        1 => Just(Act::Abort),
        1 => Just(Act::Retry),
        3 => (1u32..=120).prop_map(Act::Wait),
        1 => (any::<bool>(), 1u32..=3).prop_map(|(canary, n)| Act::FailPods(canary, n)),
    ]
}

/// The walkthrough's Service, Gateway and VirtualService with a Rollout of these numbers.
fn scenario(
    replicas: u32,
    (surge, unavailable): (&str, &str),
    dynamic_stable_scale: bool,
    steps: &[Step],
    acts: &[Act],
) -> String {
    let manifests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let m = |f: &str| manifests.join(f).display().to_string();
    let steps: Vec<String> = steps
        .iter()
        .map(|s| match s {
            Step::SetWeight(w) => format!("{{setWeight: {w}}}"),
            Step::Pause(Some(d)) => format!("{{pause: {{duration: {d}s}}}}"),
            Step::Pause(None) => "{pause: {}}".to_string(),
            Step::CanaryScaleWeight(w) => format!("{{setCanaryScale: {{weight: {w}}}}}"),
            Step::CanaryScaleReplicas(n) => format!("{{setCanaryScale: {{replicas: {n}}}}}"),
            Step::CanaryScaleMatchTraffic => "{setCanaryScale: {matchTrafficWeight: true}}".into(),
        })
        .collect();
    let mut image = 1;
    let mut out = Vec::new();
    for a in acts {
        out.push(match a {
            Act::NewImage => {
                image += 1;
                format!(
                    "  - set_image: {{rollout: rollouts-demo, container: rollouts-demo, image: \"demo:{image}\"}}"
                )
            }
            Act::Promote => "  - promote: rollouts-demo".into(),
            Act::PromoteFull => "  - promote: {rollout: rollouts-demo, full: true}".into(),
            Act::Abort => "  - abort: rollouts-demo".into(),
            Act::Retry => "  - retry: rollouts-demo".into(),
            Act::Wait(s) => format!("  - wait: {s}s"),
            Act::FailPods(canary, n) => format!(
                "  - fail_pods: {{rollout: rollouts-demo, role: {}, count: {n}}}",
                if *canary { "canary" } else { "stable" }
            ),
        });
    }
    format!(
        r#"name: property
seed: 11
namespace: my-demo
manifests:
  - file: {services}
  - file: {gateway}
  - file: {vs}
  - inline: |
      apiVersion: argoproj.io/v1alpha1
      kind: Rollout
      metadata: {{name: rollouts-demo}}
      spec:
        replicas: {replicas}
        revisionHistoryLimit: 2
        selector: {{matchLabels: {{app: rollouts-demo}}}}
        template:
          metadata: {{labels: {{app: rollouts-demo}}}}
          spec:
            containers: [{{name: rollouts-demo, image: "demo:1"}}]
        strategy:
          canary:
            canaryService: rollouts-demo-canary
            stableService: rollouts-demo-stable
            maxSurge: {surge}
            maxUnavailable: {unavailable}
            dynamicStableScale: {dynamic_stable_scale}
            trafficRouting:
              istio:
                virtualService: {{name: rollouts-demo-vsvc, routes: [primary]}}
            steps: [{steps}]
steps:
  - wait: {{until: healthy, timeout: 2m}}
{acts}
  - promote: {{rollout: rollouts-demo, full: true}}
  - wait: 10m
"#,
        services = m("seed-004-services.yaml"),
        gateway = m("seed-004-gateway.yaml"),
        vs = m("seed-004-virtualsvc.yaml"),
        steps = steps.join(", "),
        acts = out.join("\n"),
    )
}

/// Runs the scenario through the library and checks, at every instant the world reaches,
/// that one more reconcile round writes nothing and that each ReplicaSet asks for 0..=`most`
/// pods (Argo's bounds with traffic routing: the stable at most spec.replicas, the canary at
/// most that or a setCanaryScale count; a wrap or an underflow would show here). Returns the
/// JSON report and the breaches found; at the end, once Healthy, no weighted destination may
/// lack ready endpoints.
fn run_checking_replicas(path: &std::path::Path, most: i64) -> (serde_json::Value, Vec<String>) {
    use canarysim::model::Kind;
    let plan = canarysim::scenario::load(path, &canarysim::scenario::Disk).unwrap();
    let breaches = std::cell::RefCell::new(Vec::new());
    let report = {
        let mut runner = canarysim::scenario::Runner::new(&plan, None);
        runner.on_instant(|world| {
            // Settled: one more round of every controller writes nothing.
            let mut again = world.clone();
            let version = again.api.resource_version();
            let wrote = again.reconcile_round();
            if !matches!(wrote, Ok(false)) || again.api.resource_version() != version {
                breaches.borrow_mut().push(format!(
                    "{}: one more reconcile round after settling wrote: {wrote:?}",
                    world.now()
                ));
            }
            for rs in world.api.list(Kind::ReplicaSet, None, None) {
                let asked = rs.spec()["replicas"].as_i64().unwrap_or(0);
                if !(0..=most).contains(&asked) {
                    breaches.borrow_mut().push(format!(
                        "{}: ReplicaSet {} asks for {asked} pods (bound 0..={most})",
                        world.now(),
                        rs.name()
                    ));
                }
            }
        });
        while runner.step().is_some() {}
        for v in canarysim::scenario::invariants::violations(&runner.world.api) {
            breaches.borrow_mut().push(format!("at the end: {v}"));
        }
        runner.finish()
    };
    let json = serde_json::from_str(&canarysim::report::json(&report)).unwrap();
    (json, breaches.into_inner())
}

fn run_json(path: &std::path::Path) -> serde_json::Value {
    let (code, out, err) = execute(Cli::parse_from([
        "canarysim",
        "run",
        path.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert!(code <= 1, "the run itself failed ({code}): {err}{out}");
    serde_json::from_str(&out).unwrap()
}

/// 48 cases in `cargo test`; a long run sets `CANARYSIM_PROPTEST_CASES` (and may change
/// the seed with `CANARYSIM_PROPTEST_SEED`).
fn config() -> Config {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    Config {
        cases: env("CANARYSIM_PROPTEST_CASES").map_or(48, |n| n as u32),
        rng_seed: RngSeed::Fixed(env("CANARYSIM_PROPTEST_SEED").unwrap_or(20261125)),
        failure_persistence: None,
        ..Config::default()
    }
}

/// Found by fuzzing (rollout_actions): a canary scaled by `setCanaryScale` to 11 pods, more
/// than `spec.replicas` (7), then `promote --full` with `dynamicStableScale`. Argo weighs the
/// canary by its available pods over spec.replicas (`rollout/trafficrouting.go`): it writes
/// 157 (11 of 7) and 0 for the stable (Istio takes weights relative to their sum). The
/// restart just before leaves the canary 2 of its 7 pods: the rollout is promoted (the canary
/// is now the stable), but Argo rewrites weights only once the stable has the pods for its
/// share, so 157 stays until it is whole again; then stable 100, canary 0. canarysim writes what Argo
/// writes and says why it breaks the invariant.
#[test]
fn promote_full_with_a_larger_canary_scale_overshoots() {
    use canarysim::model::Kind;
    use canarysim::sim::{ClusterConfig, World};
    use std::time::Duration;
    let text = scenario(
        7,
        ("76%", "76%"),
        true,
        &[
            Step::SetWeight(76),
            Step::CanaryScaleReplicas(11),
            Step::Pause(Some(401)),
        ],
        &[],
    );
    let plan = canarysim::scenario::load(
        &support::write_temp("overshoot.yaml", &text),
        &canarysim::scenario::Disk,
    )
    .unwrap();
    let (ns, ro) = ("my-demo", "rollouts-demo");
    let mut world = World::new(ClusterConfig::default(), 1);
    world.apply(&plan.manifests).unwrap();
    world.advance(Duration::from_secs(30)).unwrap();
    let weights = |world: &World| -> Vec<i64> {
        let vs = world
            .api
            .get(Kind::VirtualService, ns, "rollouts-demo-vsvc")
            .unwrap();
        vs.spec()["http"][0]["route"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["weight"].as_i64().unwrap())
            .collect()
    };
    world.set_image(ns, ro, ro, "demo:2").unwrap();
    world.advance(Duration::from_secs(60)).unwrap();
    assert_eq!(weights(&world), [24, 76], "paused at setWeight 76");
    world.restart(ns, ro, Duration::ZERO).unwrap();
    world.advance(Duration::from_secs(1)).unwrap();
    world.promote(ns, ro, true).unwrap();
    assert_eq!(weights(&world), [0, 157]);
    let violations = canarysim::scenario::invariants::violations(&world.api);
    assert!(
        violations.iter().any(|v| v.contains(
            "weights [0, 157] do not sum to 100 (Argo's promote --full with dynamicStableScale: the canary weighs 100 × its available pods / spec.replicas (7)"
        )),
        "{violations:#?}"
    );
    world.advance(Duration::from_secs(60)).unwrap();
    assert_eq!(
        weights(&world),
        [100, 0],
        "promoted, and the new stable is whole"
    );
    assert!(canarysim::scenario::invariants::violations(&world.api).is_empty());
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn weights_stay_whole_runs_repeat_and_every_rollout_settles(
        replicas in 1u32..=6,
        budget in prop_oneof![
            Just(("25%", "25%")), Just(("1", "0")), Just(("0", "1")), Just(("2", "1")), Just(("50%", "0"))
        ],
        dynamic_stable_scale in any::<bool>(),
        steps in prop::collection::vec(step(), 1..=4),
        acts in prop::collection::vec(act(), 1..=8),
    ) {
        let text = scenario(replicas, budget, dynamic_stable_scale, &steps, &acts);
        let path = support::write_temp("property.yaml", &text);
        let most = steps.iter().fold(i64::from(replicas), |most, s| match s {
            Step::CanaryScaleReplicas(n) => most.max(i64::from(*n)),
            _ => most,
        });
        let (first, breaches) = run_checking_replicas(&path, most);
        prop_assert!(breaches.is_empty(), "{breaches:#?}\n{text}");
        // Weights in 0..100 summing to 100, after every event of the run.
        for v in first["violations"].as_array().unwrap() {
            let message = v["message"].as_str().unwrap();
            let argo_overshoot = message.contains("promote --full with dynamicStableScale");
            prop_assert!(!message.contains("do not sum to 100") || argo_overshoot, "{message}\n{text}");
        }
        // The same seed, the same run (and the CLI's run is the library's).
        let again = run_json(&path);
        prop_assert_eq!(&first, &again);
        // Promoted in full and given 10 minutes, the rollout has settled.
        let view = first["final_views"][0].as_str().unwrap();
        let status = view.lines().find(|l| l.starts_with("Status:")).unwrap_or("");
        // `promote --full` clears an abort too (Argo's RemoveAbort), so every run ends Healthy.
        let healthy = status.contains("✔ Healthy");
        prop_assert!(healthy, "{view}\n{text}");
        {
            let desired = format!("Desired:       {replicas}");
            let available = format!("Available:     {replicas}");
            prop_assert!(view.contains(&desired) && view.contains(&available), "{view}");
        }
    }
}
