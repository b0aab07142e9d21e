//! Controller behaviours a user sees with `kubectl argo rollouts`, each on the seed rollout.

use canarysim::model::{Kind, Manifest, Object};
use canarysim::sim::{ClusterConfig, World};
use std::path::Path;
use std::time::Duration;

const NS: &str = "my-demo";
const RO: &str = "rollouts-demo";

fn manifests(rollout_patch: impl Fn(String) -> String) -> Vec<Manifest> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let mut out = Vec::new();
    for f in [
        "seed-004-rollout.yaml",
        "seed-004-services.yaml",
        "seed-004-gateway.yaml",
        "seed-004-virtualsvc.yaml",
    ] {
        let text = rollout_patch(std::fs::read_to_string(dir.join(f)).unwrap());
        out.extend(canarysim::model::yaml::load_str(f, &text, NS).unwrap());
    }
    out
}

fn world(rollout_patch: impl Fn(String) -> String) -> World {
    let mut w = World::new(ClusterConfig::default(), 1);
    w.apply(&manifests(rollout_patch)).unwrap();
    w.advance(Duration::from_secs(30)).unwrap();
    w
}

fn status(w: &World, field: &str) -> serde_json::Value {
    w.api.get(Kind::Rollout, NS, RO).unwrap().status()[field].clone()
}

fn canary_weight(w: &World) -> i64 {
    let vs = w
        .api
        .get(Kind::VirtualService, NS, "rollouts-demo-vsvc")
        .unwrap();
    vs.spec()["http"][0]["route"][1]["weight"].as_i64().unwrap()
}

fn rs_replicas(w: &World, hash: &str) -> i64 {
    let rs = w
        .api
        .get(Kind::ReplicaSet, NS, &format!("{RO}-{hash}"))
        .unwrap();
    rs.spec()["replicas"].as_i64().unwrap()
}

#[test]
fn the_weight_shift_waits_until_the_canary_pod_is_available() {
    let mut w = world(|s| s);
    w.set_image(NS, RO, "rollouts-demo", "argoproj/rollouts-demo:yellow")
        .unwrap();
    assert_eq!(
        rs_replicas(&w, "5cf4fb69f8"),
        1,
        "the canary is scaled up first"
    );
    assert_eq!(
        canary_weight(&w),
        0,
        "no traffic before the canary pod is ready"
    );
    w.advance(Duration::from_millis(4_999)).unwrap();
    assert_eq!(canary_weight(&w), 0);
    w.advance(Duration::from_millis(1)).unwrap();
    assert_eq!(
        canary_weight(&w),
        20,
        "20 % once the pod turned ready (5 s)"
    );
}

#[test]
fn spec_paused_holds_every_step_until_resumed() {
    let mut w = world(|s| s);
    w.set_paused(NS, RO, true).unwrap();
    w.set_image(NS, RO, "rollouts-demo", "argoproj/rollouts-demo:yellow")
        .unwrap();
    w.advance(Duration::from_secs(60)).unwrap();
    assert_eq!(status(&w, "phase"), "Paused");
    assert_eq!(status(&w, "message"), "manually paused");
    assert_eq!(
        status(&w, "currentStepIndex"),
        0,
        "no step completes while paused"
    );
    // `kubectl argo rollouts promote` also unpauses.
    w.promote(NS, RO, false).unwrap();
    w.advance(Duration::from_secs(30)).unwrap();
    assert_eq!(
        w.api.get(Kind::Rollout, NS, RO).unwrap().spec()["paused"],
        false
    );
    assert_ne!(status(&w, "currentStepIndex"), 0);
}

#[test]
fn scale_down_delay_seconds_sets_how_long_the_old_stable_stays_up() {
    let mut w = world(|s| {
        s.replace(
            "      canaryService:",
            "      scaleDownDelaySeconds: 10\n      canaryService:",
        )
    });
    w.set_image(NS, RO, "rollouts-demo", "argoproj/rollouts-demo:yellow")
        .unwrap();
    w.promote(NS, RO, true).unwrap();
    let end = w.now().after(Duration::from_secs(60));
    assert!(
        w.advance_until(end, |w| status(w, "phase") == "Healthy")
            .unwrap()
    );
    let promoted_at = w.now();
    assert_eq!(rs_replicas(&w, "76c569d8b"), 4);
    w.advance(Duration::from_secs(9)).unwrap();
    assert_eq!(rs_replicas(&w, "76c569d8b"), 4);
    w.advance(Duration::from_secs(1)).unwrap();
    assert_eq!(
        rs_replicas(&w, "76c569d8b"),
        0,
        "scaled down 10 s after promotion ({promoted_at})"
    );
}

#[test]
fn abort_scale_down_delay_seconds_sets_how_long_the_aborted_canary_stays_up() {
    let mut w = world(|s| {
        s.replace(
            "      canaryService:",
            "      abortScaleDownDelaySeconds: 5\n      canaryService:",
        )
    });
    w.set_image(NS, RO, "rollouts-demo", "argoproj/rollouts-demo:yellow")
        .unwrap();
    w.advance(Duration::from_secs(10)).unwrap();
    assert_eq!(canary_weight(&w), 20);
    w.abort(NS, RO).unwrap();
    assert_eq!(canary_weight(&w), 0, "traffic returns to stable at once");
    assert_eq!(
        rs_replicas(&w, "5cf4fb69f8"),
        1,
        "the canary stays up for the delay"
    );
    w.advance(Duration::from_secs(5)).unwrap();
    assert_eq!(rs_replicas(&w, "5cf4fb69f8"), 0);
    assert_eq!(status(&w, "phase"), "Degraded");
    let conditions = status(&w, "conditions");
    let progressing = conditions
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Progressing")
        .unwrap();
    assert_eq!(progressing["reason"], "RolloutAborted");
    assert_eq!(
        progressing["message"],
        "Rollout aborted update to revision 2"
    );
    assert!(status(&w, "abortedAt").is_string());
}

#[test]
fn status_records_the_weights_hashes_and_pause_condition() {
    let mut w = world(|s| s);
    w.set_image(NS, RO, "rollouts-demo", "argoproj/rollouts-demo:yellow")
        .unwrap();
    w.advance(Duration::from_secs(10)).unwrap();
    assert_eq!(status(&w, "currentPodHash"), "5cf4fb69f8");
    assert_eq!(status(&w, "stableRS"), "76c569d8b");
    assert_eq!(status(&w, "currentStepIndex"), 1);
    assert_eq!(status(&w, "controllerPause"), true);
    let pause = &status(&w, "pauseConditions")[0];
    assert_eq!(pause["reason"], "CanaryPauseStep");
    assert_eq!(pause["startTime"], "2026-01-01T00:00:35Z");
    let weights = status(&w, "canary")["weights"].clone();
    assert_eq!(weights["canary"]["weight"], 20);
    assert_eq!(weights["canary"]["podTemplateHash"], "5cf4fb69f8");
    assert_eq!(weights["canary"]["serviceName"], "rollouts-demo-canary");
    assert_eq!(weights["stable"]["weight"], 80);
    assert_eq!(weights["stable"]["podTemplateHash"], "76c569d8b");
    assert_eq!(status(&w, "selector"), "app=rollouts-demo");
}

fn replica_set_count(w: &World) -> usize {
    w.api.list(Kind::ReplicaSet, Some(NS), None).len()
}

/// Promotes one new image after another: with `revisionHistoryLimit: 1` only one ReplicaSet
/// beside the stable one is kept, the oldest scaled-down ones are deleted (Argo's
/// `cleanupRollouts`); the seed's limit of 2 keeps two.
#[test]
fn revision_history_limit_deletes_the_oldest_scaled_down_replica_sets() {
    for (limit, kept_old) in [(1, 1), (2, 2)] {
        let mut w = world(|s| {
            s.replace(
                "revisionHistoryLimit: 2",
                &format!("revisionHistoryLimit: {limit}"),
            )
        });
        for colour in ["yellow", "red", "green", "purple"] {
            w.set_image(
                NS,
                RO,
                "rollouts-demo",
                &format!("argoproj/rollouts-demo:{colour}"),
            )
            .unwrap();
            w.promote(NS, RO, true).unwrap();
            // scaleDownDelaySeconds (30 s) and pod readiness pass.
            w.advance(Duration::from_secs(120)).unwrap();
            assert_eq!(status(&w, "phase"), "Healthy", "{colour}");
        }
        assert_eq!(replica_set_count(&w), 1 + kept_old, "limit {limit}");
        let oldest_kept = w
            .api
            .list(Kind::ReplicaSet, Some(NS), None)
            .iter()
            .filter_map(|rs| {
                rs.annotation("rollout.argoproj.io/revision")?
                    .parse::<i64>()
                    .ok()
            })
            .min()
            .unwrap();
        assert_eq!(
            oldest_kept,
            5 - kept_old as i64,
            "limit {limit}: the newest are kept"
        );
    }
}

/// Pause durations follow Go's rules at run time as in validation (Argo's
/// `DurationSeconds()`): `.5m` is 30 s, `"+90s"` 90 s, and `1500ms` truncates to 1 s.
#[test]
fn pause_durations_end_as_go_parses_them() {
    let mut w = world(|s| {
        let mut durations = [".5m", "\"+90s\"", "1500ms"].into_iter();
        s.lines()
            .map(|l| match l.contains("pause: {duration: 1m}") {
                true => l.replace("1m}", &format!("{}}}", durations.next().unwrap())),
                false => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    w.set_image(NS, RO, "rollouts-demo", "argoproj/rollouts-demo:yellow")
        .unwrap();
    w.advance(Duration::from_secs(30)).unwrap();
    w.promote(NS, RO, false).unwrap();
    // Time spent at each step index, in 100 ms ticks.
    let mut ticks_at = std::collections::BTreeMap::<i64, u32>::new();
    for _ in 0..6_000 {
        let step = status(&w, "currentStepIndex").as_i64().unwrap();
        *ticks_at.entry(step).or_default() += 1;
        if step >= 9 {
            break;
        }
        w.advance(Duration::from_millis(100)).unwrap();
    }
    // A pause completes once now is after its end: within one tick after it.
    let lasted = |step: i64, secs: u32| {
        let ticks = ticks_at[&step];
        assert!(
            ticks == secs * 10 + 1,
            "step {step}: {ticks} ticks of 100 ms, want {secs} s: {ticks_at:?}"
        );
    };
    lasted(3, 30); // .5m
    lasted(5, 90); // "+90s"
    lasted(7, 1); // 1500ms
}

/// Old ReplicaSets scaled up at once (`scaleDownDelaySeconds`, still running) with their
/// pods: the number of old ReplicaSets with pods, once each promotion has settled.
fn scaled_up_old(w: &World) -> usize {
    let current = status(w, "currentPodHash");
    w.api
        .list(Kind::ReplicaSet, Some(NS), None)
        .iter()
        .filter(|rs| {
            rs.spec()["replicas"].as_i64().unwrap_or(0) > 0
                && rs
                    .labels()
                    .get("rollouts-pod-template-hash")
                    .map(String::as_str)
                    != current.as_str()
        })
        .count()
}

/// `scaleDownDelayRevisionLimit`: of the old ReplicaSets waiting for their scale-down delay,
/// only that many (the newest) stay up; the rest go at once (Argo's scaleDownDelayHelper).
#[test]
fn scale_down_delay_revision_limit_caps_the_old_replica_sets_kept_up() {
    for (limit, kept) in [(None, 3), (Some(1), 1), (Some(0), 0)] {
        let mut w = world(|s| {
            let s = s.replace(
                "      canaryService:",
                "      scaleDownDelaySeconds: 600\n      canaryService:",
            );
            match limit {
                Some(l) => s.replace(
                    "      canaryService:",
                    &format!("      scaleDownDelayRevisionLimit: {l}\n      canaryService:"),
                ),
                None => s,
            }
        });
        for colour in ["yellow", "red", "green"] {
            w.set_image(
                NS,
                RO,
                "rollouts-demo",
                &format!("argoproj/rollouts-demo:{colour}"),
            )
            .unwrap();
            w.promote(NS, RO, true).unwrap();
            w.advance(Duration::from_secs(60)).unwrap();
            assert_eq!(status(&w, "phase"), "Healthy", "{colour}");
        }
        assert_eq!(scaled_up_old(&w), kept, "limit {limit:?}");
    }
}

/// An update interrupted by another (V1 → V2, then V3 before V2 is promoted): once nothing
/// references the V2 ReplicaSet (the canary Service and the weights moved to V3, whose pod
/// is ready after 5 s), it is scaled down at once, not after scaleDownDelaySeconds (30 s).
#[test]
fn an_interrupted_update_scales_the_intermediate_replica_set_down_at_once() {
    let mut w = world(|s| s);
    w.set_image(NS, RO, "rollouts-demo", "argoproj/rollouts-demo:yellow")
        .unwrap();
    w.advance(Duration::from_secs(20)).unwrap();
    assert_eq!(rs_replicas(&w, "5cf4fb69f8"), 1, "the yellow canary pod");
    w.set_image(NS, RO, "rollouts-demo", "argoproj/rollouts-demo:red")
        .unwrap();
    w.advance(Duration::from_secs(2)).unwrap();
    assert_eq!(
        rs_replicas(&w, "5cf4fb69f8"),
        1,
        "still the canary Service's"
    );
    w.advance(Duration::from_secs(10)).unwrap();
    assert_eq!(rs_replicas(&w, "5cf4fb69f8"), 0);
    assert_eq!(rs_replicas(&w, "76c569d8b"), 4, "stable stays");
}

#[test]
fn promote_full_clears_an_abort_and_promotes() {
    // Argo's controller removes the abort when promoting in full (found by the property
    // tests: the rollout had stayed Degraded with its canary up).
    let mut w = world(|s| s);
    w.set_image(NS, RO, "rollouts-demo", "argoproj/rollouts-demo:yellow")
        .unwrap();
    w.advance(Duration::from_secs(10)).unwrap();
    w.abort(NS, RO).unwrap();
    w.advance(Duration::from_secs(5)).unwrap();
    assert_eq!(status(&w, "phase"), "Degraded");
    assert_eq!(canary_weight(&w), 0);
    w.promote(NS, RO, true).unwrap();
    w.advance(Duration::from_secs(120)).unwrap();
    assert_eq!(status(&w, "abort"), serde_json::Value::Null);
    assert_eq!(status(&w, "phase"), "Healthy");
    assert_eq!(
        status(&w, "stableRS"),
        "5cf4fb69f8",
        "yellow is the stable now"
    );
    assert_eq!(rs_replicas(&w, "5cf4fb69f8"), 4);
}

/// The Event kind a served world stores.
fn event_kind() -> Kind {
    Kind::Stored(canarysim::model::stored_kind::known("", "Event").unwrap())
}

/// The seed walkthrough's plan.
fn walkthrough_plan() -> canarysim::scenario::Plan {
    use canarysim::scenario::{Disk, load};
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/seed-004-walkthrough.yaml");
    load(&path, &Disk).unwrap()
}

/// A plan played to its end in a served world (Events stored as objects).
fn served_to_the_end(plan: &canarysim::scenario::Plan) -> canarysim::scenario::Runner<'_> {
    let mut served = canarysim::scenario::Runner::with_watch_log(plan, None, true);
    while served.step().is_some() {}
    served
}

/// Served (`serve --api`), the controllers' events are Event objects as client-go's recorder
/// writes Argo's: about the rollout (its uid), from `rollouts-controller`, a repeat counted
/// on the first; the ReplicaSet controller's beside them; a plain run keeps Argo's in memory
/// only.
#[test]
fn served_events_are_event_objects_and_a_repeat_counts_on_the_first() {
    let plan = walkthrough_plan();
    let served = served_to_the_end(&plan);
    let world = &served.world;
    let (stored, replica_set): (Vec<&Object>, Vec<&Object>) = world
        .api
        .list(event_kind(), Some(NS), None)
        .into_iter()
        .partition(|e| e.value["source"]["component"] == "rollouts-controller");
    let uid = world
        .api
        .get(Kind::Rollout, NS, RO)
        .unwrap()
        .uid()
        .to_string();
    let paused: Vec<_> = world
        .events
        .iter()
        .filter(|e| e.reason == "RolloutPaused")
        .collect();
    assert!(paused.len() > 1, "the walkthrough pauses more than once");
    let paused_objects: Vec<_> = stored
        .iter()
        .filter(|e| e.value["reason"] == "RolloutPaused")
        .collect();
    assert_eq!(paused_objects.len(), 1, "one Event, counted");
    assert_eq!(paused_objects[0].value["count"], paused.len());
    assert_ne!(
        paused_objects[0].value["firstTimestamp"],
        paused_objects[0].value["lastTimestamp"]
    );
    let mut distinct: Vec<_> = world
        .events
        .iter()
        .map(|e| (&e.object, &e.reason, &e.message, e.warning))
        .collect();
    distinct.sort();
    distinct.dedup();
    assert_eq!(stored.len(), distinct.len());
    for e in &stored {
        let v = &e.value;
        assert_eq!(v["involvedObject"]["uid"], uid.as_str(), "{v}");
        assert_eq!(
            v["involvedObject"]["apiVersion"], "argoproj.io/v1alpha1",
            "{v}"
        );
        assert_eq!(v["source"]["component"], "rollouts-controller", "{v}");
        assert!(e.name().starts_with("rollouts-demo."), "{v}");
    }

    // The ReplicaSet controller's: a pod created or deleted, about its ReplicaSet, in
    // kube-controller-manager's words.
    let pods: Vec<String> = world
        .api
        .list(Kind::Pod, Some(NS), None)
        .iter()
        .map(|p| p.name().to_string())
        .collect();
    let said = |prefix: &str| -> Vec<String> {
        replica_set
            .iter()
            .filter_map(|e| e.value["message"].as_str()?.strip_prefix(prefix))
            .map(str::to_string)
            .collect()
    };
    let (created, deleted) = (said("Created pod: "), said("Deleted pod: "));
    assert!(
        pods.iter().all(|p| created.contains(p)),
        "{pods:?} {created:?}"
    );
    assert!(!deleted.is_empty(), "the old ReplicaSet is scaled down");
    assert!(
        deleted
            .iter()
            .all(|p| !pods.contains(p) && created.contains(p))
    );
    assert_eq!(created.len() + deleted.len(), replica_set.len());
    for e in &replica_set {
        let v = &e.value;
        assert_eq!(v["source"]["component"], "replicaset-controller", "{v}");
        let owner = v["involvedObject"]["name"].as_str().unwrap();
        let rs = world.api.get(Kind::ReplicaSet, NS, owner).unwrap();
        assert_eq!(v["involvedObject"]["uid"], rs.uid(), "{v}");
        assert_eq!(v["involvedObject"]["apiVersion"], "apps/v1", "{v}");
        let pod = v["message"].as_str().unwrap().rsplit(' ').next().unwrap();
        assert!(pod.starts_with(&format!("{owner}-")), "{v}");
    }

    let mut plain = canarysim::scenario::Runner::new(&plan, None);
    while plain.step().is_some() {}
    assert_eq!(plain.world.events.len(), world.events.len());
    assert!(plain.world.api.list(event_kind(), None, None).is_empty());
}

/// The API server keeps an Event an hour after its last write (`--event-ttl`): served
/// worlds drop them then, as a cluster does, so that pod churn does not grow the store.
#[test]
fn served_events_expire_an_hour_after_their_last_write() {
    let plan = walkthrough_plan();
    let mut served = served_to_the_end(&plan);
    let world = &mut served.world;
    let written = world.api.list(event_kind(), None, None).len();
    assert!(written > 10, "{written}");
    let last = |w: &World| {
        w.api
            .list(event_kind(), None, None)
            .iter()
            .filter_map(|e| e.value["lastTimestamp"].as_str().map(str::to_string))
            .max()
            .unwrap()
    };
    let newest = last(world);
    // Just under an hour after the newest write, a restart writes new events; nothing the
    // hour has not passed for goes.
    world.advance(Duration::from_secs(3000)).unwrap();
    world.restart(NS, RO, Duration::ZERO).unwrap();
    world.advance(Duration::from_secs(599)).unwrap();
    let kept = world.api.list(event_kind(), None, None);
    assert!(kept.len() > 1, "{}", kept.len());
    assert!(
        kept.iter()
            .all(|e| e.value["lastTimestamp"].as_str().unwrap() >= newest.as_str()),
        "only the writes of the last hour remain"
    );
    assert!(kept.len() < written, "{} of {written}", kept.len());
    world.advance(Duration::from_secs(3600)).unwrap();
    assert!(
        world.api.list(event_kind(), None, None).is_empty(),
        "an hour after the restart's events, none is left"
    );
}
