//! The ReplicaSet controller and the kubelet, as far as a canary needs them: a ReplicaSet keeps
//! `spec.replicas` Pods; a new Pod turns Ready `pod_ready_after` after it is created and
//! Available once it has been Ready for `minReadySeconds`; scaling down removes the Pods
//! Kubernetes would remove first (not ready, then youngest).

use rand::Rng;
use rand_pcg::Pcg64Mcg;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

use crate::apiserver::{ApiError, ApiServer};
use crate::clock::SimTime;
use crate::controller::rollout::Event;
use crate::model::{Kind, Object};

pub use crate::model::vocabulary::HASH_LABEL;

/// Knobs of the simulated kubelet.
#[derive(Debug, Clone)]
pub struct PodLifecycle {
    /// A new Pod turns Ready this long after it is created.
    pub ready_after: Duration,
    /// Whether Pods get an `istio-proxy` sidecar (counted in `ready:2/2`).
    pub sidecar: bool,
    /// Images (full reference or tag) whose Pods never turn Ready.
    pub never_ready: BTreeSet<String>,
    /// Images whose containers crash at start (CrashLoopBackOff): never Ready either.
    pub crash_looping: BTreeSet<String>,
}

impl Default for PodLifecycle {
    fn default() -> Self {
        PodLifecycle {
            ready_after: Duration::from_secs(5),
            sidecar: true,
            never_ready: BTreeSet::new(),
            crash_looping: BTreeSet::new(),
        }
    }
}

impl PodLifecycle {
    /// Whether one of a Pod's containers (their `images`) runs an image whose Pods never
    /// turn Ready.
    fn never_turns_ready(&self, images: &[String]) -> bool {
        Self::runs_any(images, &self.never_ready) || self.crash_loops(images)
    }

    fn crash_loops(&self, images: &[String]) -> bool {
        Self::runs_any(images, &self.crash_looping)
    }

    fn runs_any(pod_images: &[String], images: &BTreeSet<String>) -> bool {
        !images.is_empty()
            && pod_images.iter().any(|image| {
                images.contains(image)
                    || images.contains(crate::model::vocabulary::image_version(image))
            })
    }
}

/// Kubernetes' CrashLoopBackOff: the container crashes as it starts (at `started`); the
/// kubelet restarts it after 10 s, then 20 s, 40 s… capped at 5 min. Restarts done by `now`,
/// and when the next one is due.
pub(crate) fn crash_loop_restarts(started: SimTime, now: SimTime) -> (u32, SimTime) {
    let mut restarts = 0;
    let mut next = started.after(Duration::from_secs(10));
    while next <= now {
        restarts += 1;
        let backoff = (10u64 << restarts.min(5)).min(300);
        next = next.after(Duration::from_secs(backoff));
    }
    (restarts, next)
}

/// Kubernetes' alphabet for generated name suffixes (no vowels, no look-alikes).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// ReplicaSets found settled by their last reconcile: until their next wake, and while
/// neither they nor their pods are written, a reconcile would find the same (a workload
/// of thousands of pods is otherwise walked pod by pod at every instant the world reaches).
#[derive(Debug, Clone, Default)]
pub struct Settled(std::collections::HashMap<String, SettledAt>);

#[derive(Debug, Clone)]
struct SettledAt {
    /// The ReplicaSet's resourceVersion after the reconcile.
    version: String,
    /// [`ApiServer::children_changed_at`] after it.
    children: u64,
    /// When a pod of it next changes state by itself.
    wake: Option<SimTime>,
}

/// One reconcile pass over every ReplicaSet. Returns whether anything was written and the
/// next instant at which a Pod changes state by itself.
pub(crate) fn reconcile_all(
    api: &mut ApiServer,
    now: SimTime,
    lifecycle: &PodLifecycle,
    rng: &mut Pcg64Mcg,
    settled: &mut Settled,
    mut events: Option<&mut Vec<Event>>,
) -> Result<(bool, Option<SimTime>), ApiError> {
    let mut changed = false;
    let mut wake: Option<SimTime> = None;
    let replica_sets: Vec<Object> = api
        .list(Kind::ReplicaSet, None, None)
        .into_iter()
        .filter(|rs| {
            let Some(at) = settled.0.get(rs.uid()) else {
                return true;
            };
            let unchanged = at.version == rs.resource_version()
                && at.children == api.children_changed_at(rs.uid())
                && at.wake.is_none_or(|w| now < w);
            if unchanged {
                wake = min_time(wake, at.wake);
            }
            !unchanged
        })
        .cloned()
        .collect();
    for rs in replica_sets {
        let (c, w) = reconcile_one(api, now, lifecycle, rng, &rs, events.as_deref_mut())?;
        changed |= c;
        wake = min_time(wake, w);
        let uid = rs.uid().to_string();
        let version = api
            .get(Kind::ReplicaSet, rs.namespace(), rs.name())?
            .resource_version()
            .to_string();
        let children = api.children_changed_at(&uid);
        settled.0.insert(
            uid,
            SettledAt {
                version,
                children,
                wake: w,
            },
        );
    }
    Ok((changed, wake))
}

fn reconcile_one(
    api: &mut ApiServer,
    now: SimTime,
    lifecycle: &PodLifecycle,
    rng: &mut Pcg64Mcg,
    rs: &Object,
    events: Option<&mut Vec<Event>>,
) -> Result<(bool, Option<SimTime>), ApiError> {
    let ns = rs.namespace().to_string();
    let want = rs
        .spec()
        .get("replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0) as usize;
    let min_ready = Duration::from_secs(
        rs.spec()
            .get("minReadySeconds")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    );
    let mut changed = false;
    let mut wake = None;

    let (count, scaled) = scale_pods(api, now, lifecycle, rng, rs, want, events)?;
    changed |= scaled;
    // Kubelet: Pods turn Ready after `ready_after`. Only the writes are collected; they
    // are made oldest first. A crash-looping pod is decoded, alone, for its new status.
    let mut ready = 0;
    let mut available = 0;
    // A ready status is built when written: 100,000 of them at once took 150 MB.
    let mut writes: Vec<(SimTime, String, PodStatus)> = Vec::new();
    for (key, facts) in api.owned_pod_facts(&ns, rs.uid()) {
        let created = SimTime::parse_rfc3339(&facts.creation_timestamp).unwrap_or(now);
        if lifecycle.crash_loops(&facts.images) {
            let started = created.after(lifecycle.ready_after);
            if now >= started {
                let (restarts, next) = crash_loop_restarts(started, now);
                let pod = api.get_owned(Kind::Pod, &ns, &key.name)?;
                let status = crash_loop_status(&pod, restarts);
                if pod.status() != &status {
                    writes.push((created, key.name.clone(), PodStatus::Written(status)));
                }
                wake = min_time(wake, Some(next));
            } else {
                wake = min_time(wake, Some(started));
            }
            continue;
        }
        if lifecycle.never_turns_ready(&facts.images) {
            continue;
        }
        let ready_at = created.after(lifecycle.ready_after);
        if !facts.ready {
            if now >= ready_at {
                let containers = facts.container_statuses.unwrap_or(1);
                writes.push((
                    created,
                    key.name.clone(),
                    PodStatus::Ready {
                        containers,
                        at: ready_at,
                    },
                ));
            } else {
                wake = min_time(wake, Some(ready_at));
                continue;
            }
        }
        ready += 1;
        if now >= ready_at.after(min_ready) {
            available += 1;
        } else {
            wake = min_time(wake, Some(ready_at.after(min_ready)));
        }
    }
    writes.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    for (_, name, status) in writes {
        let status = match status {
            PodStatus::Ready { containers, at } => ready_status(containers, at),
            PodStatus::Written(status) => status,
        };
        changed |= api.set_status(Kind::Pod, &ns, &name, status)?;
    }
    // ReplicaSet status.
    let status = json!({
        "replicas": count,
        "fullyLabeledReplicas": count,
        "readyReplicas": ready,
        "availableReplicas": available,
        "observedGeneration": rs.generation(),
    });
    let current = api.get(Kind::ReplicaSet, &ns, rs.name())?;
    if current.status() != &status {
        let mut next = current.clone();
        next.value["status"] = status;
        api.update_status(next)?;
        changed = true;
    }
    Ok((changed, wake))
}

/// A status the kubelet is about to write.
enum PodStatus {
    /// [`ready_status`]'s.
    Ready {
        containers: usize,
        at: SimTime,
    },
    Written(Value),
}

/// Creates or deletes pods until `want` are owned by `rs`: not-ready first, then the
/// youngest go (as the ReplicaSet controller ranks). Returns the count and whether it wrote.
fn scale_pods(
    api: &mut ApiServer,
    now: SimTime,
    lifecycle: &PodLifecycle,
    rng: &mut Pcg64Mcg,
    rs: &Object,
    want: usize,
    mut events: Option<&mut Vec<Event>>,
) -> Result<(usize, bool), ApiError> {
    let ns = rs.namespace().to_string();
    // The controller's events (kube-controller-manager's `replica_set.go` words), when kept.
    let mut record = |reason: &str, message: String| {
        if let Some(events) = events.as_deref_mut() {
            events.push(Event {
                time: now,
                object: format!("ReplicaSet/{}", rs.name()),
                namespace: ns.clone(),
                warning: false,
                reason: reason.to_string(),
                message,
            });
        }
    };
    // The pods are read through their facts, not decoded (a workload may have thousands).
    let mut count = api.owned_pod_count(&ns, rs.uid());
    let mut changed = false;
    while count < want {
        let pod = new_pod(rs, lifecycle, rng, api);
        let name = pod.name().to_string();
        api.create_keyed(pod)?;
        record("SuccessfulCreate", format!("Created pod: {name}"));
        count += 1;
        changed = true;
    }
    if count > want {
        let mut ranked: Vec<(bool, Box<str>, String)> = api
            .owned_pod_facts(&ns, rs.uid())
            .into_iter()
            .map(|(key, pod)| (pod.ready, pod.creation_timestamp.clone(), key.name.clone()))
            .collect();
        ranked.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| b.1.cmp(&a.1))
                .then_with(|| b.2.cmp(&a.2))
        });
        for (_, _, name) in ranked.into_iter().take(count - want) {
            api.delete_quietly(Kind::Pod, &ns, &name)?;
            record("SuccessfulDelete", format!("Deleted pod: {name}"));
            changed = true;
        }
        count = want;
    }
    Ok((count, changed))
}

/// The names of the Pods owned by `rs`, oldest first, read without decoding them.
pub(crate) fn owned_pod_names(api: &ApiServer, rs: &Object) -> Vec<String> {
    let mut pods = api.owned_pod_facts(rs.namespace(), rs.uid());
    pods.sort_by(|a, b| {
        (&a.1.creation_timestamp, &a.0.name).cmp(&(&b.1.creation_timestamp, &b.0.name))
    });
    pods.into_iter().map(|(key, _)| key.name.clone()).collect()
}

fn new_pod(rs: &Object, lifecycle: &PodLifecycle, rng: &mut Pcg64Mcg, api: &ApiServer) -> Object {
    let ns = rs.namespace();
    let name = loop {
        let suffix: String = (0..5)
            .map(|_| NAME_ALPHABET[rng.random_range(0..NAME_ALPHABET.len())] as char)
            .collect();
        let candidate = format!("{}-{suffix}", rs.name());
        if !api.contains(Kind::Pod, ns, &candidate) {
            break candidate;
        }
    };
    let template = rs.spec().get("template").unwrap_or(&Value::Null);
    let mut labels = template["metadata"]["labels"].clone();
    if !labels.is_object() {
        labels = json!({});
    }
    let mut spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
    if lifecycle.sidecar {
        if let Some(containers) = spec.get_mut("containers").and_then(Value::as_array_mut) {
            containers.push(json!({"name": "istio-proxy", "image": "istio/proxyv2"}));
        }
    }
    let containers = spec["containers"].as_array().map(Vec::len).unwrap_or(0);
    Object::new(
        Kind::Pod,
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": labels,
                "annotations": template["metadata"].get("annotations").cloned().unwrap_or_else(|| json!({})),
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs.name(),
                    "uid": rs.metadata().and_then(|m| m.get("uid")).cloned().unwrap_or(Value::Null),
                    "controller": true, "blockOwnerDeletion": true
                }],
            },
            "spec": spec,
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": container_statuses(containers, false),
            }
        }),
    )
}

fn container_statuses(n: usize, ready: bool) -> Value {
    Value::Array(
        (0..n)
            .map(|_| json!({"ready": ready, "restartCount": 0}))
            .collect(),
    )
}

/// A crash-looping Pod's status: Running, not Ready, the app containers waiting in
/// CrashLoopBackOff with their restarts counted (the sidecar runs).
fn crash_loop_status(pod: &Object, restarts: u32) -> Value {
    let containers: Vec<Value> = pod.spec()["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            if c["name"] == "istio-proxy" {
                json!({"ready": true, "restartCount": 0})
            } else {
                json!({"ready": false, "restartCount": restarts,
                       "state": {"waiting": {"reason": "CrashLoopBackOff"}}})
            }
        })
        .collect();
    json!({
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": containers,
    })
}

/// The status of a Pod of `containers` containers once Ready since `at`.
fn ready_status(containers: usize, at: SimTime) -> Value {
    json!({
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": at.rfc3339()}],
        "containerStatuses": container_statuses(containers, true),
    })
}

/// Crashes up to `count` of the ReplicaSet's Pods (deletes them; the ReplicaSet replaces
/// them). Returns how many were removed.
pub fn fail_pods(api: &mut ApiServer, rs: &Object, count: usize) -> Result<usize, ApiError> {
    let doomed: Vec<String> = owned_pod_names(api, rs).into_iter().take(count).collect();
    for name in &doomed {
        api.delete_quietly(Kind::Pod, rs.namespace(), name)?;
    }
    Ok(doomed.len())
}

/// The earlier of two optional instants.
pub(crate) fn min_time(a: Option<SimTime>, b: Option<SimTime>) -> Option<SimTime> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Pods owned by `rs` (matched by owner reference), oldest first.
    fn owned_pods<'a>(api: &'a ApiServer, rs: &Object) -> Vec<&'a Object> {
        let mut pods = api.owned_by(Kind::Pod, rs.namespace(), rs.uid());
        pods.sort_by_cached_key(|p| (p.creation_timestamp(), p.name()));
        pods
    }

    fn rs(replicas: i64) -> Object {
        Object::new(
            Kind::ReplicaSet,
            json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "demo-abc", "namespace": "ns"},
                "spec": {"replicas": replicas, "template": {
                    "metadata": {"labels": {"app": "demo", HASH_LABEL: "abc"}},
                    "spec": {"containers": [{"name": "app", "image": "img:1"}]}}}
            }),
        )
    }

    #[test]
    fn pods_turn_ready_after_the_delay_and_scale_down_removes_youngest() {
        let mut api = ApiServer::new();
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let life = PodLifecycle::default();
        let mut settled = Settled::default();
        api.create(rs(3)).unwrap();
        let mut events = Vec::new();
        let (changed, wake) = reconcile_all(
            &mut api,
            SimTime::ZERO,
            &life,
            &mut rng,
            &mut settled,
            Some(&mut events),
        )
        .unwrap();
        assert!(changed);
        assert_eq!(wake, Some(SimTime::from_secs(5)));
        let rs_now = api.get(Kind::ReplicaSet, "ns", "demo-abc").unwrap().clone();
        assert_eq!(rs_now.status()["replicas"], 3);
        assert_eq!(rs_now.status()["readyReplicas"], 0);
        let pods = owned_pods(&api, &rs_now);
        assert!(
            pods.iter()
                .all(|p| p.name().starts_with("demo-abc-") && p.name().len() == 14)
        );
        assert_eq!(pods[0].labels()[HASH_LABEL], "abc");
        let said: Vec<(&str, &str, String)> = events
            .iter()
            .map(|e| (e.object.as_str(), e.reason.as_str(), e.message.clone()))
            .collect();
        let created: Vec<_> = pods
            .iter()
            .map(|p| {
                (
                    "ReplicaSet/demo-abc",
                    "SuccessfulCreate",
                    format!("Created pod: {}", p.name()),
                )
            })
            .collect();
        assert_eq!(said.len(), 3);
        assert!(created.iter().all(|c| said.contains(c)), "{said:?}");

        api.set_time(SimTime::from_secs(5));
        reconcile_all(
            &mut api,
            SimTime::from_secs(5),
            &life,
            &mut rng,
            &mut settled,
            None,
        )
        .unwrap();
        let rs_now = api.get(Kind::ReplicaSet, "ns", "demo-abc").unwrap().clone();
        assert_eq!(rs_now.status()["availableReplicas"], 3);
        assert_eq!(
            owned_pods(&api, &rs_now)[0].status()["containerStatuses"]
                .as_array()
                .unwrap()
                .len(),
            2
        );

        // Scale to 1: a second reconcile settles.
        let mut smaller = rs_now.clone();
        smaller.value["spec"]["replicas"] = json!(1);
        api.update(smaller).unwrap();
        let mut events = Vec::new();
        reconcile_all(
            &mut api,
            SimTime::from_secs(6),
            &life,
            &mut rng,
            &mut settled,
            Some(&mut events),
        )
        .unwrap();
        let deleted: Vec<&str> = events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(deleted, ["SuccessfulDelete", "SuccessfulDelete"]);
        // A fresh walk (no memo) finds nothing to do either.
        let (changed, _) = reconcile_all(
            &mut api,
            SimTime::from_secs(6),
            &life,
            &mut rng,
            &mut Settled::default(),
            None,
        )
        .unwrap();
        assert!(!changed, "a settled ReplicaSet writes nothing");
        assert_eq!(api.list(Kind::Pod, Some("ns"), None).len(), 1);
    }

    #[test]
    fn a_settled_replica_set_is_walked_again_when_a_pod_of_it_changes_or_it_wakes() {
        let mut api = ApiServer::new();
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let life = PodLifecycle::default();
        let mut settled = Settled::default();
        let mut at = |api: &mut ApiServer, s: u64| {
            api.set_time(SimTime::from_secs(s));
            reconcile_all(
                api,
                SimTime::from_secs(s),
                &life,
                &mut rng,
                &mut settled,
                None,
            )
            .unwrap()
        };
        api.create(rs(2)).unwrap();
        assert_eq!(at(&mut api, 0), (true, Some(SimTime::from_secs(5))));
        // Before its wake it is skipped, and its wake still reported.
        assert_eq!(at(&mut api, 3), (false, Some(SimTime::from_secs(5))));
        // At its wake its pods turn ready.
        assert_eq!(at(&mut api, 5), (true, None));
        let ready = |api: &ApiServer| {
            api.get(Kind::ReplicaSet, "ns", "demo-abc")
                .unwrap()
                .status()["readyReplicas"]
                .clone()
        };
        assert_eq!(ready(&api), 2);
        assert_eq!(at(&mut api, 6), (false, None));
        // A pod deleted by someone else (a crash): the ReplicaSet replaces it.
        let victim = api.list(Kind::Pod, Some("ns"), None)[0].name().to_string();
        api.delete(Kind::Pod, "ns", &victim).unwrap();
        assert_eq!(at(&mut api, 7), (true, Some(SimTime::from_secs(12))));
        assert_eq!(api.list(Kind::Pod, Some("ns"), None).len(), 2);
        assert_eq!(ready(&api), 1);
        // Its spec changed: walked again (scaled to 3).
        let mut bigger = api.get(Kind::ReplicaSet, "ns", "demo-abc").unwrap().clone();
        bigger.value["spec"]["replicas"] = json!(3);
        api.update(bigger).unwrap();
        assert!(at(&mut api, 8).0);
        assert_eq!(api.list(Kind::Pod, Some("ns"), None).len(), 3);
    }

    #[test]
    fn crash_loop_restarts_back_off_as_the_kubelet_does() {
        let start = SimTime::from_secs(100);
        let at = |s: u64| crash_loop_restarts(start, SimTime::from_secs(100 + s));
        assert_eq!(at(9), (0, SimTime::from_secs(110)));
        assert_eq!(at(10), (1, SimTime::from_secs(130)));
        assert_eq!(at(70), (3, SimTime::from_secs(250)));
        // 10, 20, 40, 80, 160, then every 300 s.
        assert_eq!(at(310 + 300).0, 6);
        assert_eq!(at(310 + 600).0, 7);
    }
}
