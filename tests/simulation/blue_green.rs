//! The blue-green strategy, case by case after Argo's own tests (`rollout/bluegreen_test.go`,
//! named at each test): the preview and active Services, the pause, auto-promotion, the
//! scale-down delay and its revision limit, abort.

use canarysim::model::{Kind, Manifest};
use canarysim::sim::{ClusterConfig, World};
use serde_json::Value;
use std::time::Duration;

const NS: &str = "default";
const RO: &str = "foo";

/// A blue-green Rollout `foo` with 2 replicas and Services `active` and `preview`;
/// `strategy` is added under `blueGreen`.
fn world(strategy: &str) -> World {
    let text = format!(
        r#"
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {{name: foo}}
spec:
  replicas: 2
  selector: {{matchLabels: {{foo: bar}}}}
  template:
    metadata: {{labels: {{foo: bar}}}}
    spec: {{containers: [{{name: app, image: "demo:1"}}]}}
  strategy:
    blueGreen:
      activeService: active
      previewService: preview
{strategy}
---
{{apiVersion: v1, kind: Service, metadata: {{name: active}}, spec: {{selector: {{foo: bar}}, ports: [{{port: 80}}]}}}}
---
{{apiVersion: v1, kind: Service, metadata: {{name: preview}}, spec: {{selector: {{foo: bar}}, ports: [{{port: 80}}]}}}}
"#
    );
    let manifests: Vec<Manifest> = canarysim::model::yaml::load_str("bg.yaml", &text, NS).unwrap();
    let mut w = World::new(ClusterConfig::default(), 1);
    w.apply(&manifests).unwrap();
    w.advance(Duration::from_secs(30)).unwrap();
    assert_eq!(status(&w)["phase"], "Healthy", "{}", status(&w));
    w
}

fn status(w: &World) -> Value {
    w.api.get(Kind::Rollout, NS, RO).unwrap().status().clone()
}

fn selector(w: &World, service: &str) -> String {
    let svc = w.api.get(Kind::Service, NS, service).unwrap();
    svc.spec()["selector"]["rollouts-pod-template-hash"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// `(hash, spec.replicas, has a scale-down deadline)` of every ReplicaSet, by revision.
fn replica_sets(w: &World) -> Vec<(String, i64, bool)> {
    let mut out: Vec<(i64, String, i64, bool)> = w
        .api
        .list(Kind::ReplicaSet, Some(NS), None)
        .iter()
        .map(|rs| {
            let revision = rs
                .annotation("rollout.argoproj.io/revision")
                .and_then(|r| r.parse().ok())
                .unwrap_or(0);
            (
                revision,
                rs.labels()["rollouts-pod-template-hash"].clone(),
                rs.spec()["replicas"].as_i64().unwrap(),
                rs.annotation("scale-down-deadline").is_some(),
            )
        })
        .collect();
    out.sort();
    out.into_iter().map(|(_, h, r, d)| (h, r, d)).collect()
}

fn hashes(w: &World) -> (String, String) {
    let s = status(w);
    (
        s["stableRS"].as_str().unwrap().to_string(),
        s["currentPodHash"].as_str().unwrap().to_string(),
    )
}

fn update(w: &mut World, image: &str) {
    w.set_image(NS, RO, "app", image).unwrap();
}

/// TestBlueGreenCreatesReplicaSet, TestBlueGreenSetPreviewService, PauseWhenAutoPromotionEnabledIsFalse,
/// ContinueAfterUnpaused, TestBlueGreenAddScaleDownDelayToPreviousActiveReplicaSet.
#[test]
fn the_new_stack_is_previewed_at_full_size_and_switched_to_when_promoted() {
    let mut w = world("      autoPromotionEnabled: false");
    let (old, _) = hashes(&w);
    assert_eq!(
        selector(&w, "active"),
        old,
        "the first deploy is switched to at once"
    );
    assert_eq!(selector(&w, "preview"), old);
    update(&mut w, "demo:2");
    let (_, new) = hashes(&w);
    assert_ne!(new, old);
    assert_eq!(
        replica_sets(&w),
        [(old.clone(), 2, false), (new.clone(), 2, false)],
        "the new ReplicaSet is created at full size"
    );
    assert_eq!(
        selector(&w, "preview"),
        new,
        "preview follows the new ReplicaSet at once"
    );
    w.advance(Duration::from_secs(10)).unwrap();
    let s = status(&w);
    assert_eq!(s["phase"], "Paused");
    assert_eq!(s["message"], "BlueGreenPause");
    assert_eq!(s["pauseConditions"][0]["reason"], "BlueGreenPause");
    assert_eq!(s["controllerPause"], true);
    assert_eq!(s["blueGreen"]["activeSelector"], old.as_str());
    assert_eq!(s["blueGreen"]["previewSelector"], new.as_str());
    // The status counts and selector follow the active ReplicaSet.
    assert_eq!(
        s["selector"],
        format!("foo=bar,rollouts-pod-template-hash={old}")
    );
    assert_eq!(s["replicas"], 4);
    assert_eq!(s["availableReplicas"], 2);
    // Paused however long it waits.
    w.advance(Duration::from_secs(3600)).unwrap();
    assert_eq!(selector(&w, "active"), old);
    w.promote(NS, RO, false).unwrap();
    w.advance(Duration::from_millis(1)).unwrap();
    let s = status(&w);
    assert_eq!(
        selector(&w, "active"),
        new,
        "promote switches the active Service"
    );
    assert_eq!(s["phase"], "Healthy", "{s}");
    assert_eq!(s["stableRS"], new.as_str());
    assert!(s.get("pauseConditions").is_none(), "{s}");
    assert_eq!(
        replica_sets(&w),
        [(old.clone(), 2, true), (new.clone(), 2, false)],
        "the old ReplicaSet keeps its pods, with a scale-down deadline"
    );
    w.advance(Duration::from_secs(29)).unwrap();
    assert_eq!(replica_sets(&w)[0].1, 2);
    w.advance(Duration::from_secs(1)).unwrap();
    assert_eq!(
        replica_sets(&w),
        [(old, 0, false), (new, 2, false)],
        "scaled down scaleDownDelaySeconds (default 30 s) after the switch"
    );
}

/// NoPauseWhenAutoPromotionEnabledIsNotSet.
#[test]
fn without_a_gate_the_active_service_switches_once_the_new_pods_are_available() {
    let mut w = world("      scaleDownDelaySeconds: 5");
    let (old, _) = hashes(&w);
    update(&mut w, "demo:2");
    let (_, new) = hashes(&w);
    w.advance(Duration::from_millis(4_999)).unwrap();
    assert_eq!(
        selector(&w, "active"),
        old,
        "not before the new pods are available"
    );
    assert_eq!(status(&w)["message"], "active service cutover pending");
    w.advance(Duration::from_millis(1)).unwrap();
    assert_eq!(selector(&w, "active"), new);
    assert_eq!(status(&w)["phase"], "Healthy");
    assert!(status(&w).get("pauseConditions").is_none());
    w.advance(Duration::from_secs(5)).unwrap();
    assert_eq!(
        replica_sets(&w)[0],
        (old, 0, false),
        "scaleDownDelaySeconds: 5"
    );
}

/// NoAutoPromoteBeforeDelayTimePasses, AutoPromoteAfterDelayTimePasses,
/// NoAutoPromoteAfterDelayTimePassesIfUserPaused.
#[test]
fn auto_promotion_seconds_promotes_after_the_delay_unless_paused_by_hand() {
    let mut w = world("      autoPromotionSeconds: 10");
    let (old, _) = hashes(&w);
    update(&mut w, "demo:2");
    let (_, new) = hashes(&w);
    w.advance(Duration::from_secs(5)).unwrap();
    assert_eq!(status(&w)["message"], "BlueGreenPause");
    w.advance(Duration::from_secs(10)).unwrap();
    assert_eq!(selector(&w, "active"), old, "not at the delay");
    w.advance(Duration::from_millis(1)).unwrap();
    assert_eq!(selector(&w, "active"), new, "just after it");
    assert_eq!(status(&w)["phase"], "Healthy");

    // The same, paused by hand during the delay: nothing happens after it.
    update(&mut w, "demo:3");
    w.advance(Duration::from_secs(5)).unwrap();
    assert_eq!(status(&w)["message"], "BlueGreenPause");
    w.set_paused(NS, RO, true).unwrap();
    w.advance(Duration::from_secs(60)).unwrap();
    assert_eq!(selector(&w, "active"), new);
    assert_eq!(status(&w)["message"], "manually paused");
}

/// TestPreviewReplicaCountHandleScaleUpPreviewCheckPoint (TrueAfterMeetingMinAvailable,
/// FalseAfterActiveServiceSwitch), TestBlueGreenRolloutIgnoringScalingUsePreviewRSCount.
#[test]
fn preview_replica_count_scales_the_new_stack_up_only_when_promoted() {
    let mut w = world("      autoPromotionEnabled: false\n      previewReplicaCount: 1");
    let (old, _) = hashes(&w);
    update(&mut w, "demo:2");
    let (_, new) = hashes(&w);
    w.advance(Duration::from_secs(10)).unwrap();
    assert_eq!(
        replica_sets(&w),
        [(old.clone(), 2, false), (new.clone(), 1, false)]
    );
    assert_eq!(status(&w)["message"], "BlueGreenPause");
    w.promote(NS, RO, false).unwrap();
    w.advance(Duration::from_millis(1)).unwrap();
    let s = status(&w);
    assert_eq!(s["blueGreen"]["scaleUpPreviewCheckPoint"], true, "{s}");
    assert_eq!(replica_sets(&w)[1], (new.clone(), 2, false), "full size");
    assert_eq!(
        selector(&w, "active"),
        old,
        "not switched before the pods are available"
    );
    w.advance(Duration::from_secs(5)).unwrap();
    let s = status(&w);
    assert_eq!(selector(&w, "active"), new);
    assert_eq!(s["phase"], "Healthy");
    assert!(
        s["blueGreen"].get("scaleUpPreviewCheckPoint").is_none(),
        "the checkpoint is reset at promotion: {s}"
    );
}

/// TestBlueGreenScaleDownLimit: beyond scaleDownDelayRevisionLimit old ReplicaSets go at once.
#[test]
fn scale_down_delay_revision_limit_keeps_only_the_newest_old_stacks() {
    let mut w = world("      scaleDownDelayRevisionLimit: 1");
    update(&mut w, "demo:2");
    w.advance(Duration::from_secs(6)).unwrap();
    update(&mut w, "demo:3");
    w.advance(Duration::from_secs(6)).unwrap();
    let sets = replica_sets(&w);
    assert_eq!(sets.len(), 3);
    assert_eq!(sets[0].1, 0, "revision 1 is past the limit: {sets:?}");
    assert_eq!(
        (sets[1].1, sets[1].2),
        (2, true),
        "revision 2 waits: {sets:?}"
    );
    assert_eq!(selector(&w, "active"), sets[2].0);
}

/// TestBlueGreenAbort: the active Service goes back to (here: stays on) the stable
/// ReplicaSet, the rollout is Degraded, and the aborted stack is scaled down
/// abortScaleDownDelaySeconds later.
#[test]
fn abort_keeps_the_active_service_on_stable_and_scales_the_new_stack_down_later() {
    let mut w = world("      autoPromotionEnabled: false\n      abortScaleDownDelaySeconds: 10");
    let (old, _) = hashes(&w);
    update(&mut w, "demo:2");
    let (_, new) = hashes(&w);
    w.advance(Duration::from_secs(10)).unwrap();
    w.abort(NS, RO).unwrap();
    w.advance(Duration::from_millis(1)).unwrap();
    let s = status(&w);
    assert_eq!(s["phase"], "Degraded");
    assert_eq!(
        s["message"],
        "RolloutAborted: Rollout aborted update to revision 2"
    );
    assert_eq!(selector(&w, "active"), old);
    assert_eq!(replica_sets(&w)[1], (new.clone(), 2, true));
    w.advance(Duration::from_secs(10)).unwrap();
    assert_eq!(replica_sets(&w)[1].1, 0, "{:?}", replica_sets(&w));
    assert_eq!(selector(&w, "active"), old);
}

/// A missing active Service is an invalid spec, in Argo's words.
#[test]
fn a_missing_active_service_is_an_invalid_spec() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: foo}
spec:
  selector: {matchLabels: {foo: bar}}
  template:
    metadata: {labels: {foo: bar}}
    spec: {containers: [{name: app, image: "demo:1"}]}
  strategy: {blueGreen: {activeService: nowhere}}
"#;
    let manifests = canarysim::model::yaml::load_str("bg.yaml", text, NS).unwrap();
    let mut w = World::new(ClusterConfig::default(), 1);
    w.apply(&manifests).unwrap();
    w.advance(Duration::from_secs(1)).unwrap();
    let s = status(&w);
    assert_eq!(s["phase"], "Degraded");
    assert_eq!(
        s["message"],
        "InvalidSpec: The Rollout \"foo\" is invalid: spec.strategy.blueGreen.activeService: Invalid value: \"nowhere\": service \"nowhere\" not found"
    );
}
