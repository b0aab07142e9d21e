//! The `get rollout` query: what Argo's kubectl plugin gathers in its `info` package — the
//! Rollout, its ReplicaSets and Pods, their roles (stable, canary, ping, pong), ages and the
//! set and actual weights — as plain data ([`RolloutView`]) that the text renderer
//! (`report::rollout_view`), the JSON report and the TUI draw.

use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::apiserver::{ApiError, ApiServer};
use crate::clock::SimTime;
use crate::controller::replicaset::{HASH_LABEL, owned_pod_names};
use crate::controller::rollout::{
    REVISION, SCALE_DOWN_DEADLINE, owned_replica_sets, template_images,
};
use crate::model::rollout::{RolloutSpec, RolloutStatus};
use crate::model::{Kind, Object};

// Long: `kubectl argo rollouts get rollout`'s view field by field, in the order the plugin builds
// it.
/// The view of rollout `ns/name` at `now`.
pub fn view(api: &ApiServer, ns: &str, name: &str, now: SimTime) -> Result<RolloutView, ApiError> {
    let rollout = api.get(Kind::Rollout, ns, name)?;
    let spec: RolloutSpec = rollout.spec_as().unwrap_or_default();
    let status: RolloutStatus = rollout.status_as().unwrap_or_default();
    let steps = spec.canary().map(|c| c.steps.clone()).unwrap_or_default();
    let traffic_routed = spec.canary().is_some_and(|c| c.traffic_routing.is_some());

    let set_weight = set_weight(&spec, &status);
    let mut replica_sets: Vec<&Object> = owned_replica_sets(api, rollout);
    replica_sets.sort_by_key(|rs| std::cmp::Reverse(revision(rs)));

    let blue_green = spec.is_blue_green();
    let hash_of = |rs: &Object| rs.labels().get(HASH_LABEL).cloned().unwrap_or_default();
    let is_stable = |rs: &Object| hash_of(rs) == status.stable_r_s;
    let is_canary =
        |rs: &Object| !blue_green && hash_of(rs) == status.current_pod_hash && !is_stable(rs);
    // The plugin's replicaset_info: with pingPong the stable ReplicaSet is ping when
    // stablePingPong is "ping", the canary the other one; with blue-green the ReplicaSet
    // each Service selects is active or preview.
    let uses_ping_pong = spec.canary().is_some_and(|c| c.ping_pong.is_some());
    let stable_is_ping = status.canary.stable_ping_pong == "ping";
    let service_tag = |rs: &Object| -> Option<&'static str> {
        if blue_green {
            let hash = hash_of(rs);
            return if hash == status.blue_green.active_selector {
                Some("active")
            } else if hash == status.blue_green.preview_selector {
                Some("preview")
            } else {
                None
            };
        }
        let ping = if !uses_ping_pong {
            return None;
        } else if is_stable(rs) {
            stable_is_ping
        } else if is_canary(rs) {
            !stable_is_ping
        } else {
            return None;
        };
        Some(if ping { "ping" } else { "pong" })
    };
    let get = |rs: &Object, k: &str| rs.status().get(k).and_then(Value::as_i64).unwrap_or(0) as i32;

    let last_step = status
        .current_step_index
        .is_none_or(|i| i as usize >= steps.len());
    let actual_weight = if last_step && !steps.is_empty() {
        max_traffic_weight(&spec)
    } else if status.available_replicas == 0 {
        0
    } else if traffic_routed {
        status
            .canary
            .weights
            .as_ref()
            .map(|w| w.canary.weight)
            .unwrap_or(set_weight)
    } else {
        replica_sets
            .iter()
            .filter(|rs| is_canary(rs))
            .map(|rs| get(rs, "availableReplicas") * 100 / status.available_replicas)
            .next()
            .unwrap_or(0)
    };

    // Images of the ReplicaSets that have pods, tagged stable / canary.
    let mut images: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rs in &replica_sets {
        if get(rs, "replicas") == 0 && rs.spec()["replicas"].as_i64().unwrap_or(0) == 0 {
            continue;
        }
        for image in template_images(&rs.spec()["template"]).into_values() {
            let tags = images.entry(image).or_default();
            let service_tag = service_tag(rs);
            for (tag, yes) in [
                ("canary", is_canary(rs)),
                ("stable", is_stable(rs)),
                ("active", service_tag == Some("active")),
                ("preview", service_tag == Some("preview")),
                ("ping", service_tag == Some("ping")),
                ("pong", service_tag == Some("pong")),
            ] {
                if yes && !tags.iter().any(|t| t == tag) {
                    tags.push(tag.to_string());
                }
            }
        }
    }

    let mut revisions: Vec<RevisionView> = Vec::new();
    for rs in &replica_sets {
        let spec_replicas = rs.spec()["replicas"].as_i64().unwrap_or(1) as i32;
        let pods: Vec<PodView> = if spec_replicas == 0 && get(rs, "replicas") == 0 {
            Vec::new()
        } else {
            // Read through the pods' facts (a workload may have thousands).
            owned_pod_names(api, rs)
                .iter()
                .filter_map(|name| Some((name, api.pod(rs.namespace(), name)?)))
                .map(|(name, facts)| pod_view(name, facts, now))
                .collect()
        };
        let rs_status = if spec_replicas == 0 && pods.is_empty() {
            "ScaledDown"
        } else if get(rs, "availableReplicas") >= spec_replicas {
            "Healthy"
        } else {
            "Progressing"
        };
        let delay = rs
            .annotation(SCALE_DOWN_DEADLINE)
            .and_then(SimTime::parse_rfc3339)
            .filter(|_| spec_replicas > 0)
            .map(|deadline| {
                if deadline > now {
                    ScaleDownDelay::Remaining(deadline.since(now))
                } else {
                    ScaleDownDelay::Passed
                }
            });
        let view = ReplicaSetView {
            name: rs.name().to_string(),
            status: rs_status.to_string(),
            age: age(rs, now),
            stable: is_stable(rs),
            canary: is_canary(rs),
            service_tag: service_tag(rs),
            scale_down_delay: delay,
            pods,
        };
        let rev = revision(rs);
        match revisions.iter_mut().find(|r| r.revision == rev) {
            Some(r) => r.replica_sets.push(view),
            None => revisions.push(RevisionView {
                revision: rev,
                replica_sets: vec![view],
                analysis_runs: Vec::new(),
            }),
        }
    }
    // AnalysisRuns under the revision they were created for, oldest first.
    let runs = crate::controller::rollout_analysis::owned_runs(api, rollout);
    for run in &runs {
        let rev = revision(run);
        let counts = |key: &str| -> i64 {
            run.value["status"]["metricResults"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| r[key].as_i64().unwrap_or(0))
                .sum()
        };
        let view = AnalysisRunView {
            name: run.name().to_string(),
            status: run.value["status"]["phase"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            age: age(run, now),
            successful: counts("successful"),
            failed: counts("failed"),
            inconclusive: counts("inconclusive"),
            error: counts("error"),
        };
        match revisions.iter_mut().find(|r| r.revision == rev) {
            Some(r) => r.analysis_runs.push(view),
            None => revisions.push(RevisionView {
                revision: rev,
                replica_sets: Vec::new(),
                analysis_runs: vec![view],
            }),
        }
    }

    Ok(RolloutView {
        name: name.to_string(),
        namespace: ns.to_string(),
        status: if status.phase.is_empty() {
            "Progressing".into()
        } else {
            status.phase.clone()
        },
        message: status.message.clone(),
        blue_green,
        step: status
            .current_step_index
            .filter(|_| !steps.is_empty())
            .map(|i| (i as u32, steps.len() as u32)),
        set_weight,
        actual_weight,
        images: images
            .into_iter()
            .map(|(image, tags)| ImageView { image, tags })
            .collect(),
        desired: spec.desired_replicas(),
        current: status.replicas,
        updated: status.updated_replicas,
        ready: status.ready_replicas,
        available: status.available_replicas,
        age: age(rollout, now),
        revisions,
    })
}

/// The share of a Service's ready endpoints (the serving pods its selector picks) that
/// run the pod template `hash`: what kube-proxy's per-connection pick sends there. None
/// when the Service is missing or has no ready endpoint (a Service without a selector has
/// none kube-proxy would pick from).
pub fn endpoint_share(api: &ApiServer, ns: &str, service: &str, hash: &str) -> Option<f64> {
    let svc = api.get(Kind::Service, ns, service).ok()?;
    let selector = crate::model::object::string_map(svc.spec().get("selector"));
    if selector.is_empty() {
        return None;
    }
    let ready: Vec<bool> = api
        .pod_facts(Some(ns), Some(&selector))
        .into_iter()
        .filter(|(_, pod)| pod.serving)
        .map(|(_, pod)| {
            !hash.is_empty() && pod.labels.get(HASH_LABEL).map(String::as_str) == Some(hash)
        })
        .collect();
    let on_hash = ready.iter().filter(|on| **on).count();
    (!ready.is_empty()).then(|| on_hash as f64 / ready.len() as f64)
}

/// The plugin's SetWeight: 100 when fully promoted or past the last step, 0 when aborted,
/// else the latest setWeight at or before the current step.
pub fn set_weight(spec: &RolloutSpec, status: &RolloutStatus) -> i32 {
    let steps = spec.canary().map(|c| c.steps.as_slice()).unwrap_or(&[]);
    if status.abort {
        return 0;
    }
    if status.stable_r_s.is_empty() || status.stable_r_s == status.current_pod_hash {
        return max_traffic_weight(spec);
    }
    match status.current_step_index {
        Some(i) if (i as usize) < steps.len() => {
            crate::model::vocabulary::latest_set_weight(steps, i as usize, |s| s.set_weight)
        }
        _ => max_traffic_weight(spec),
    }
}

/// `weightutil.MaxTrafficWeight` of the Rollout (100 for blue-green).
fn max_traffic_weight(spec: &RolloutSpec) -> i32 {
    spec.canary().map_or(100, |c| c.max_traffic_weight())
}

/// Where a canary rollout stands, read from the Rollout alone: what `canarysim watch`
/// follows between its loads.
#[derive(Debug, Clone, PartialEq)]
pub struct Standing {
    /// `status.phase` and `status.message`.
    pub phase: String,
    pub message: String,
    /// `status.currentStepIndex`, and how many steps there are.
    pub step: Option<usize>,
    pub steps: usize,
    /// The weight the current step sets (Argo's `GetCurrentSetWeight`).
    pub set_weight: i32,
    /// The weight in force before the last `setWeight` at or before the current step (0
    /// at the first): what the data plane moves away from.
    pub previous_set_weight: i32,
    /// The weight the last step that holds (a pause, an analysis) held, else
    /// `previous_set_weight`: what the data plane moves away from at the completion (a
    /// `setWeight` after it passes at once, so the data plane may not have taken it).
    pub last_held_weight: i32,
    /// What a weight is one of (`maxTrafficWeight`, default 100).
    pub max_traffic_weight: i32,
    pub aborted: bool,
    /// An update in progress: the current template's pods are not the stable ones.
    pub updating: bool,
    /// The current step holds the weight for a while: a pause or an inline analysis.
    pub holding: bool,
    /// The indices of every such step, and the weight in force at each.
    pub held_steps: Vec<(usize, i32)>,
    /// `status.currentPodHash`: which update this is.
    pub current_hash: String,
    /// What the current template's pods answer with as their version: its first
    /// container's image tag (None: no inline template, e.g. a `workloadRef`).
    pub version: Option<String>,
}

impl Standing {
    /// The share, in percent of all the traffic, a weight in Argo's units means (of
    /// `maxTrafficWeight`).
    pub fn share_meant(&self, weight: i32) -> f64 {
        f64::from(weight) * 100.0 / f64::from(self.max_traffic_weight.max(1))
    }

    pub fn of(rollout: &Object) -> Standing {
        let spec: RolloutSpec = rollout.spec_as().unwrap_or_default();
        let status: RolloutStatus = rollout.status_as().unwrap_or_default();
        let steps = spec.canary().map(|c| c.steps.as_slice()).unwrap_or(&[]);
        let step = status.current_step_index.map(|i| i.max(0) as usize);
        let holds =
            |s: &crate::model::rollout::CanaryStep| s.pause.is_some() || s.analysis.is_some();
        let holding = step.and_then(|i| steps.get(i)).is_some_and(holds);
        let latest =
            |i: usize| crate::model::vocabulary::latest_set_weight(steps, i, |s| s.set_weight);
        let held_steps: Vec<(usize, i32)> = (0..steps.len())
            .filter(|&i| holds(&steps[i]))
            .map(|i| (i, latest(i)))
            .collect();
        let last_set = step.and_then(|i| {
            (0..=i.min(steps.len().saturating_sub(1)))
                .rev()
                .find(|&j| steps.get(j).is_some_and(|s| s.set_weight.is_some()))
        });
        let previous_set_weight = match last_set {
            Some(j) if j > 0 => latest(j - 1),
            _ => 0,
        };
        let version = rollout.spec()["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .map(|image| crate::model::vocabulary::image_version(image).to_string());
        Standing {
            phase: status.phase.clone(),
            message: status.message.clone(),
            step,
            steps: steps.len(),
            set_weight: set_weight(&spec, &status),
            previous_set_weight,
            last_held_weight: held_steps
                .last()
                .map_or(previous_set_weight, |&(_, weight)| weight),
            max_traffic_weight: max_traffic_weight(&spec),
            aborted: status.abort,
            updating: !status.stable_r_s.is_empty()
                && !status.current_pod_hash.is_empty()
                && status.stable_r_s != status.current_pod_hash,
            holding,
            held_steps,
            current_hash: status.current_pod_hash.clone(),
            version,
        }
    }
}

fn revision(rs: &Object) -> i64 {
    rs.annotation(REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn age(o: &Object, now: SimTime) -> std::time::Duration {
    SimTime::parse_rfc3339(o.creation_timestamp())
        .map(|t| now.since(t))
        .unwrap_or_default()
}

fn pod_view(name: &str, pod: &crate::apiserver::PodFacts, now: SimTime) -> PodView {
    PodView {
        name: name.to_string(),
        status: pod.status_text.to_string(),
        age: SimTime::parse_rfc3339(&pod.creation_timestamp)
            .map(|t| now.since(t))
            .unwrap_or_default(),
        ready: (
            pod.ready_containers,
            pod.container_statuses.unwrap_or(0) as u32,
        ),
        restarts: pod.restarts,
    }
}

/// Data for one `get rollout` screen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RolloutView {
    /// Rollout name (`Name:` and the `⟳` tree row).
    pub name: String,
    /// Rollout namespace.
    pub namespace: String,
    /// Status string, e.g. `Healthy`, `Progressing`, `Paused`, `Degraded`;
    /// the icon is derived with [`rollout_icon`](crate::report::rollout_view::rollout_icon).
    pub status: String,
    /// `Message:` line; omitted when empty (e.g. `CanaryPauseStep`).
    pub message: String,
    /// `Strategy: BlueGreen`, without the canary's step and weight lines.
    pub blue_green: bool,
    /// Current step index and number of steps, shown as `index/len`; `None`
    /// leaves the `Step:` value blank as the plugin does.
    pub step: Option<(u32, u32)>,
    /// Desired canary weight of the current step.
    pub set_weight: i32,
    /// Weight actually applied.
    pub actual_weight: i32,
    /// Images with their tags; rendered sorted by image name.
    pub images: Vec<ImageView>,
    /// `spec.replicas`.
    pub desired: i32,
    /// `status.replicas`.
    pub current: i32,
    /// `status.updatedReplicas`.
    pub updated: i32,
    /// `status.readyReplicas`.
    pub ready: i32,
    /// `status.availableReplicas`.
    pub available: i32,
    /// Time since the Rollout was created.
    pub age: Duration,
    /// Revisions; rendered newest (highest number) first.
    pub revisions: Vec<RevisionView>,
}

/// One entry of the `Images:` block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageView {
    /// Image reference, e.g. `argoproj/rollouts-demo:blue`.
    pub image: String,
    /// Tags shown in parentheses, in the given order (`canary`, `stable`, ...).
    pub tags: Vec<String>,
}

/// A `# revision:N` node and its ReplicaSets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RevisionView {
    /// Revision number.
    pub revision: i64,
    /// ReplicaSets of this revision, in display order.
    pub replica_sets: Vec<ReplicaSetView>,
    /// AnalysisRuns created for this revision, oldest first (after the ReplicaSets).
    pub analysis_runs: Vec<AnalysisRunView>,
}

/// An `α` AnalysisRun row: phase, age and the measurement counts summed over its metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnalysisRunView {
    pub name: String,
    /// `Successful`, `Failed`, `Error`, `Inconclusive`, `Running`, `Pending` or empty.
    pub status: String,
    pub age: Duration,
    pub successful: i64,
    pub failed: i64,
    pub inconclusive: i64,
    pub error: i64,
}

/// A `⧉` ReplicaSet row and its pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaSetView {
    /// ReplicaSet name.
    pub name: String,
    /// Status string: `Healthy`, `Progressing`, `ScaledDown` or
    /// `ReplicaFailure`; the icon is derived with [`replica_set_icon`](crate::report::rollout_view::replica_set_icon).
    pub status: String,
    /// Time since the ReplicaSet was created.
    pub age: Duration,
    /// Adds the `stable` INFO tag (and colours the name green).
    pub stable: bool,
    /// Adds the `canary` INFO tag (and colours the name yellow).
    pub canary: bool,
    /// Which Service selects this ReplicaSet, shown after stable/canary: `ping` or `pong`
    /// with pingPong, `active` or `preview` with blue-green.
    pub service_tag: Option<&'static str>,
    /// Adds `delay:<remaining>` or `delay:passed` to INFO.
    pub scale_down_delay: Option<ScaleDownDelay>,
    /// Pods, in display order (the plugin sorts oldest first, then by name).
    pub pods: Vec<PodView>,
}

/// State of a ReplicaSet's scale-down deadline annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleDownDelay {
    /// Deadline not reached yet; time left until it.
    Remaining(Duration),
    /// Deadline is in the past.
    Passed,
}

/// A `□` Pod row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodView {
    /// Pod name.
    pub name: String,
    /// Status/reason string, e.g. `Running`, `Pending`, `CrashLoopBackOff`;
    /// the icon is derived with [`pod_icon`](crate::report::rollout_view::pod_icon).
    pub status: String,
    /// Time since the Pod was created.
    pub age: Duration,
    /// Ready and total containers, shown as `ready:r/t`.
    pub ready: (u32, u32),
    /// Container restarts; shown as `,restarts:n` only when non-zero.
    pub restarts: u32,
}
