//! The blue-green strategy, case by case after Argo's own tests (`rollout/bluegreen_test.go`
//! and the blue-green half of `rollout/analysis_test.go`, named at each test): the preview
//! and active Services, the pause, auto-promotion, the scale-down delay and its revision
//! limit, abort, and the pre- and post-promotion analyses.

use canarysim::model::{Kind, Manifest};
use canarysim::sim::{ClusterConfig, World};
use serde_json::Value;
use std::time::Duration;

const NS: &str = "default";
const RO: &str = "foo";

/// A blue-green Rollout `foo` with 2 replicas and Services `active` and `preview`;
/// `strategy` is added under `blueGreen`.
fn world(strategy: &str) -> World {
    world_with(strategy, "", &[])
}

/// [`world`] with more manifests and scripted analysis results (metric name, results).
fn world_with(strategy: &str, more: &str, results: &[(&str, &[&str])]) -> World {
    let text = manifests(strategy, more);
    let manifests: Vec<Manifest> = canarysim::model::yaml::load_str("bg.yaml", &text, NS).unwrap();
    let mut w = World::new(ClusterConfig::default(), 1);
    for (metric, values) in results {
        let values = values.iter().map(|v| Value::from(*v)).collect();
        w.scripted_results.insert(metric.to_string(), values);
    }
    w.apply(&manifests).unwrap();
    w.advance(Duration::from_secs(30)).unwrap();
    assert_eq!(status(&w)["phase"], "Healthy", "{}", status(&w));
    w
}

/// The Rollout and its two Services, then `more`.
fn manifests(strategy: &str, more: &str) -> String {
    format!(
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
{more}"#
    )
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

/// AnalysisTemplates `pre` and `post`, each one job metric of the same name measured twice,
/// 10 s apart (a run lasts 10 s); with `failureLimit: 0` one failed job fails the run.
const TEMPLATES: &str = r#"---
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: pre}
spec:
  metrics:
  - {name: pre, interval: 10s, count: 2, provider: {job: {spec: {template: {spec: {containers: [{name: c, image: smoke}], restartPolicy: Never}}}}}}
---
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: post}
spec:
  metrics:
  - {name: post, interval: 10s, count: 2, provider: {job: {spec: {template: {spec: {containers: [{name: c, image: smoke}], restartPolicy: Never}}}}}}
"#;

const PRE: &str = "      prePromotionAnalysis: {templates: [{templateName: pre}]}";
const POST: &str = "      postPromotionAnalysis: {templates: [{templateName: post}]}";

/// The run the rollout records under `status.blueGreen.<field>`: (name, phase).
fn promotion_run(w: &World, field: &str) -> Option<(String, String)> {
    let recorded = status(w)["blueGreen"][field]["name"].as_str()?.to_string();
    let run = w.api.get(Kind::AnalysisRun, NS, &recorded).ok()?;
    let phase = run.status()["phase"].as_str().unwrap_or("").to_string();
    Some((recorded, phase))
}

/// The rollout's events with this reason.
fn events(w: &World, reason: &str) -> Vec<String> {
    w.events
        .iter()
        .filter(|e| e.reason == reason && e.object == format!("Rollout/{RO}"))
        .map(|e| e.message.clone())
        .collect()
}

/// TestDoNotCreatePrePromotionAnalysisRunOnNewRollout, TestCreatePrePromotionAnalysisRun,
/// TestDoNotCreatePrePromotionAnalysisRunOnNotReadyReplicaSet,
/// TestRolloutPrePromotionAnalysisSwitchServiceAfterSuccess,
/// TestDoNotCreatePrePromotionAnalysisAfterPromotionRollout.
#[test]
fn pre_promotion_analysis_runs_before_the_pause_and_the_switch_waits_for_it() {
    let strategy = format!("      autoPromotionEnabled: false\n{PRE}");
    let mut w = world_with(&strategy, TEMPLATES, &[("pre", &["Successful"])]);
    let runs = |w: &World| w.api.list(Kind::AnalysisRun, Some(NS), None).len();
    assert_eq!(runs(&w), 0, "no analysis on the first deploy");
    let (old, _) = hashes(&w);
    update(&mut w, "demo:2");
    let (_, new) = hashes(&w);
    w.advance(Duration::from_millis(4_999)).unwrap();
    assert_eq!(runs(&w), 0, "not before the new pods are available");
    w.advance(Duration::from_millis(1)).unwrap();
    let name = format!("foo-{new}-2-pre");
    assert_eq!(
        promotion_run(&w, "prePromotionAnalysisRunStatus"),
        Some((name.clone(), "Running".into()))
    );
    let run = w.api.get(Kind::AnalysisRun, NS, &name).unwrap();
    assert_eq!(run.labels()["rollout-type"], "PrePromotion");
    assert_eq!(run.labels()["rollouts-pod-template-hash"], new.as_str());
    let s = status(&w);
    assert_eq!(
        (s["phase"].as_str(), s["message"].as_str()),
        (Some("Progressing"), Some("active service cutover pending")),
        "no pause while the analysis runs: {s}"
    );
    w.advance(Duration::from_millis(9_999)).unwrap();
    assert!(status(&w).get("pauseConditions").is_none());
    w.advance(Duration::from_millis(1)).unwrap();
    let s = status(&w);
    assert_eq!(
        s["blueGreen"]["prePromotionAnalysisRunStatus"]["status"], "Successful",
        "{s}"
    );
    assert_eq!(s["message"], "BlueGreenPause", "paused once it succeeded");
    assert_eq!(selector(&w, "active"), old);
    w.promote(NS, RO, false).unwrap();
    w.advance(Duration::from_millis(1)).unwrap();
    let s = status(&w);
    assert_eq!(selector(&w, "active"), new);
    assert_eq!(s["phase"], "Healthy", "{s}");
    assert_eq!(
        s["blueGreen"]["prePromotionAnalysisRunStatus"]["name"],
        name.as_str(),
        "kept after promotion"
    );
    assert_eq!(runs(&w), 1, "no second run after the switch");
    assert_eq!(
        events(&w, "AnalysisRunSuccessful"),
        [format!(
            "PrePromotion Analysis Run '{name}' Status New: 'Successful' Previous: 'Running'"
        )]
    );
}

/// TestRolloutPrePromotionAnalysisHonorAutoPromotionSeconds: the delay counts from the end
/// of the analysis, when the pause begins.
#[test]
fn auto_promotion_seconds_count_from_the_end_of_the_pre_promotion_analysis() {
    let strategy = format!("      autoPromotionSeconds: 20\n{PRE}");
    let mut w = world_with(&strategy, TEMPLATES, &[("pre", &["Successful"])]);
    let (old, _) = hashes(&w);
    update(&mut w, "demo:2");
    let (_, new) = hashes(&w);
    // Pods available at 5 s, analysis over at 15 s, switch just after 35 s.
    w.advance(Duration::from_secs(35)).unwrap();
    assert_eq!(selector(&w, "active"), old);
    assert_eq!(status(&w)["message"], "BlueGreenPause");
    w.advance(Duration::from_millis(1)).unwrap();
    assert_eq!(selector(&w, "active"), new);
    assert_eq!(status(&w)["phase"], "Healthy");
}

/// TestAbortRolloutOnErrorPrePromotionAnalysis, with a failed run: the rollout aborts with
/// Argo's message and the active Service never leaves the stable ReplicaSet.
#[test]
fn a_failed_pre_promotion_analysis_aborts_before_the_switch() {
    let mut w = world_with(PRE, TEMPLATES, &[("pre", &["Successful", "Failed"])]);
    let (old, _) = hashes(&w);
    update(&mut w, "demo:2");
    let (_, new) = hashes(&w);
    w.advance(Duration::from_secs(16)).unwrap();
    let s = status(&w);
    assert_eq!(s["phase"], "Degraded", "{s}");
    assert_eq!(
        s["message"],
        "RolloutAborted: Rollout aborted update to revision 2: Blue/green pre-promotion analysis phase error/failed: Metric \"pre\" assessed Failed due to failed (1) > failureLimit (0)"
    );
    assert_eq!(selector(&w, "active"), old, "never switched");
    assert_eq!(
        events(&w, "AnalysisRunFailed"),
        [format!(
            "PrePromotion Analysis Run 'foo-{new}-2-pre' Status New: 'Failed' Previous: 'Running'"
        )]
    );
    w.advance(Duration::from_secs(30)).unwrap();
    let sets = replica_sets(&w);
    assert_eq!(
        (sets[0].1, &sets[1].0, sets[1].1),
        (2, &new, 0),
        "the new stack goes abortScaleDownDelaySeconds (30 s) later: {sets:?}"
    );
    assert_eq!(selector(&w, "active"), old);
}

/// TestRolloutPrePromotionAnalysisBecomesInconclusive,
/// TestRolloutPrePromotionAnalysisDoNothingOnInconclusiveAnalysis: an inconclusive run
/// pauses the rollout; promoting it starts a new run.
#[test]
fn an_inconclusive_pre_promotion_analysis_pauses_and_a_promote_runs_it_again() {
    let mut w = world_with(PRE, TEMPLATES, &[("pre", &["Inconclusive"])]);
    let (old, _) = hashes(&w);
    update(&mut w, "demo:2");
    let (_, new) = hashes(&w);
    w.advance(Duration::from_secs(20)).unwrap();
    let s = status(&w);
    assert_eq!(
        (s["phase"].as_str(), s["message"].as_str()),
        (Some("Paused"), Some("InconclusiveAnalysisRun")),
        "{s}"
    );
    assert_eq!(selector(&w, "active"), old);
    w.advance(Duration::from_secs(600)).unwrap();
    assert_eq!(selector(&w, "active"), old, "paused however long it waits");
    // The next run's first measurement succeeds.
    w.scripted_results
        .insert("pre".into(), vec![Value::from("Successful")]);
    w.promote(NS, RO, false).unwrap();
    w.advance(Duration::from_millis(1)).unwrap();
    let (second, phase) = promotion_run(&w, "prePromotionAnalysisRunStatus").unwrap();
    assert_eq!(
        (second.as_str(), phase.as_str()),
        (format!("foo-{new}-2-pre.1").as_str(), "Running")
    );
    w.advance(Duration::from_secs(10)).unwrap();
    assert_eq!(selector(&w, "active"), new);
    assert_eq!(status(&w)["phase"], "Healthy");
}

/// TestCreatePostPromotionAnalysisRun, TestRolloutPostPromotionAnalysisSuccess: after the
/// switch the rollout waits for the post-promotion run, and only then is the new
/// ReplicaSet stable and the old one scaled down.
#[test]
fn post_promotion_analysis_runs_after_the_switch_and_completes_the_update() {
    let mut w = world_with(POST, TEMPLATES, &[("post", &["Successful"])]);
    let (old, _) = hashes(&w);
    update(&mut w, "demo:2");
    let (_, new) = hashes(&w);
    w.advance(Duration::from_secs(5)).unwrap();
    assert_eq!(selector(&w, "active"), new, "switched without a pause");
    w.advance(Duration::from_millis(1)).unwrap();
    let name = format!("foo-{new}-2-post");
    assert_eq!(
        promotion_run(&w, "postPromotionAnalysisRunStatus"),
        Some((name.clone(), "Running".into()))
    );
    let s = status(&w);
    assert_eq!(s["message"], "waiting for analysis to complete", "{s}");
    assert_eq!(s["stableRS"], old.as_str());
    // Without scaleDownDelaySeconds the old stack stays while the analysis runs.
    w.advance(Duration::from_secs(9)).unwrap();
    assert_eq!(replica_sets(&w)[0], (old.clone(), 2, false));
    w.advance(Duration::from_secs(1)).unwrap();
    let s = status(&w);
    assert_eq!(s["phase"], "Healthy", "{s}");
    assert_eq!(s["stableRS"], new.as_str());
    assert_eq!(
        events(&w, "RolloutCompleted").last().unwrap(),
        "Rollout completed update to revision 2: Completed blue-green update"
    );
    w.advance(Duration::from_secs(30)).unwrap();
    assert_eq!(replica_sets(&w)[0], (old, 0, false), "then the usual 30 s");
}

/// TestAbortRolloutOnErrorPostPromotionAnalysis, with a failed run: the active Service goes
/// back to the stable ReplicaSet.
#[test]
fn a_failed_post_promotion_analysis_switches_the_active_service_back() {
    let mut w = world_with(POST, TEMPLATES, &[("post", &["Failed"])]);
    let (old, _) = hashes(&w);
    update(&mut w, "demo:2");
    let (_, new) = hashes(&w);
    w.advance(Duration::from_secs(6)).unwrap();
    assert_eq!(selector(&w, "active"), old, "switched back");
    let s = status(&w);
    assert_eq!(
        s["message"],
        "RolloutAborted: Rollout aborted update to revision 2: Blue/green post-promotion analysis phase error/failed: Metric \"post\" assessed Failed due to failed (1) > failureLimit (0)"
    );
    assert_eq!(s["stableRS"], old.as_str());
    assert_eq!(selector(&w, "preview"), new);
}

/// A template the promotion analysis names must exist (`getReferencedRolloutAnalyses`).
#[test]
fn a_missing_promotion_analysis_template_is_an_invalid_spec() {
    let text = manifests(&POST.replace("post}", "absent}"), "");
    let mut w = World::new(ClusterConfig::default(), 1);
    w.apply(&canarysim::model::yaml::load_str("bg.yaml", &text, NS).unwrap())
        .unwrap();
    w.advance(Duration::from_secs(1)).unwrap();
    assert_eq!(
        status(&w)["message"],
        "InvalidSpec: The Rollout \"foo\" is invalid: spec.strategy.blueGreen.postPromotionAnalysis.templates: Invalid value: \"absent\": AnalysisTemplate 'absent' not found"
    );
}

/// TestDoNotCreatePrePromotionAnalysisRunWithEmptyTemplates,
/// TestDoNotCreatePostPromotionAnalysisRunWithEmptyTemplates: no template, no run. As in
/// Argo's code, the analysis is still configured, so what waits for its success waits on:
/// the switch (pre-promotion), the completion (post-promotion).
#[test]
fn promotion_analyses_without_templates_create_no_run_and_hold_their_gate() {
    let mut w = world("      prePromotionAnalysis: {templates: []}");
    let (old, _) = hashes(&w);
    update(&mut w, "demo:2");
    w.advance(Duration::from_secs(60)).unwrap();
    assert!(w.api.list(Kind::AnalysisRun, Some(NS), None).is_empty());
    assert_eq!(selector(&w, "active"), old);
    assert_eq!(status(&w)["message"], "active service cutover pending");

    let mut w = world("      postPromotionAnalysis: {templates: []}");
    let (old, _) = hashes(&w);
    update(&mut w, "demo:2");
    let (_, new) = hashes(&w);
    w.advance(Duration::from_secs(60)).unwrap();
    assert!(w.api.list(Kind::AnalysisRun, Some(NS), None).is_empty());
    assert_eq!(selector(&w, "active"), new);
    let s = status(&w);
    assert_eq!(s["message"], "waiting for analysis to complete");
    assert_eq!(s["stableRS"], old.as_str());
}

/// A retry after a failed pre-promotion run starts a new one, named with Argo's collision
/// counter; a promote by hand is seen by one reconcile (`controllerPause` goes with the
/// pause condition).
#[test]
fn a_retry_after_a_failed_pre_promotion_analysis_runs_it_again() {
    let strategy = format!("      autoPromotionEnabled: false\n{PRE}");
    let mut w = world_with(&strategy, TEMPLATES, &[("pre", &["Failed"])]);
    update(&mut w, "demo:2");
    let (_, new) = hashes(&w);
    w.advance(Duration::from_secs(6)).unwrap();
    assert_eq!(status(&w)["phase"], "Degraded");
    w.scripted_results
        .insert("pre".into(), vec![Value::from("Successful")]);
    w.retry(NS, RO).unwrap();
    w.advance(Duration::from_millis(1)).unwrap();
    assert_eq!(
        promotion_run(&w, "prePromotionAnalysisRunStatus"),
        Some((format!("foo-{new}-2-pre.1"), "Running".into()))
    );
    w.advance(Duration::from_secs(10)).unwrap();
    let s = status(&w);
    assert_eq!(s["message"], "BlueGreenPause", "{s}");
    assert_eq!(s["controllerPause"], true);
    w.promote(NS, RO, false).unwrap();
    w.advance(Duration::from_millis(1)).unwrap();
    let s = status(&w);
    assert_eq!(selector(&w, "active"), new);
    assert!(
        s.get("controllerPause").is_none(),
        "cleared with the pause: {s}"
    );
}

/// scaleDownOldReplicaSetsForBlueGreen: without scaleDownDelaySeconds, a ReplicaSet older
/// than the stable one keeps its pods past its deadline while the post-promotion run
/// measures, and goes when the run has succeeded.
#[test]
fn older_stacks_wait_for_the_post_promotion_analysis_without_a_scale_down_delay() {
    let mut w = world_with(POST, TEMPLATES, &[("post", &["Successful"])]);
    let (first, _) = hashes(&w);
    update(&mut w, "demo:2");
    w.advance(Duration::from_secs(16)).unwrap();
    let (stable, second) = hashes(&w);
    assert_eq!(stable, second, "revision 2 is promoted after its run");
    // Revision 1's deadline is 30 s after that promotion; revision 3's run spans it.
    w.advance(Duration::from_secs(19)).unwrap();
    update(&mut w, "demo:3");
    let (_, third) = hashes(&w);
    w.advance(Duration::from_secs(11)).unwrap();
    assert_eq!(selector(&w, "active"), third);
    let sets = replica_sets(&w);
    assert_eq!(
        (&sets[0].0, sets[0].1),
        (&first, 2),
        "past its deadline, kept while the run measures: {sets:?}"
    );
    w.advance(Duration::from_secs(5)).unwrap();
    assert_eq!(status(&w)["stableRS"], third.as_str());
    let sets = replica_sets(&w);
    assert_eq!((&sets[0].0, sets[0].1), (&first, 0), "{sets:?}");
    assert_eq!(sets[1].1, 2, "revision 2 waits its own 30 s: {sets:?}");
}
