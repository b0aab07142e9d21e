//! The controllers' events as Kubernetes Event objects, written as client-go's recorder
//! writes them for Argo's controller: what `kubectl get events` and `kubectl describe
//! rollout` show when the world is served (`serve --api`).

use serde_json::{Value, json};
use std::collections::HashMap;

use crate::apiserver::ApiServer;
use crate::clock::SimTime;
use crate::controller::rollout::Event;
use crate::model::{Kind, Object, stored_kind};

/// The component Argo's controller records its events as.
const COMPONENT: &str = "rollouts-controller";

/// The component the ReplicaSet controller records its events as (kube-controller-manager).
const REPLICA_SET_CONTROLLER: &str = "replicaset-controller";

/// How long the API server keeps an Event after its last write (kube-apiserver's
/// `--event-ttl`, default one hour).
pub const EVENT_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// How often expired Events are looked for (each look lists every Event).
const EXPIRY_CHECK: std::time::Duration = std::time::Duration::from_secs(60);

/// Writes the events emitted since the last call; an event equal to one written before
/// (same object, type, reason and message) counts again on that Event, as client-go's
/// correlator aggregates repeats.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    /// How many of the world's events are written.
    written: usize,
    /// How many of the ReplicaSet controller's events were written (they are not kept).
    replica_set_written: usize,
    /// (namespace, object, warning, reason, message) → the Event's name.
    names: HashMap<(String, String, bool, String, String), String>,
    /// When expired Events were last looked for.
    expiry_checked: Option<SimTime>,
}

impl Recorder {
    /// Writes the rollout and analysis controllers' events not yet written.
    pub fn record(&mut self, api: &mut ApiServer, events: &[Event]) {
        let first = self.written.min(events.len());
        self.write(api, &events[first..], first, COMPONENT);
        self.written = events.len();
    }

    /// Writes the ReplicaSet controller's events (each once: the world does not keep them).
    pub fn record_replica_set_events(&mut self, api: &mut ApiServer, events: &[Event]) {
        self.write(
            api,
            events,
            self.replica_set_written,
            REPLICA_SET_CONTROLLER,
        );
        self.replica_set_written += events.len();
    }

    /// Deletes every Event (the controllers' or a client's) last written [`EVENT_TTL`] or
    /// more before `now`, as the API server's TTL does; looked for once a minute of
    /// virtual time at most.
    pub fn expire(&mut self, api: &mut ApiServer, now: SimTime) {
        if self
            .expiry_checked
            .is_some_and(|at| now < at.after(EXPIRY_CHECK))
        {
            return;
        }
        self.expiry_checked = Some(now);
        let Some(event_kind) = stored_kind::known("", "Event").map(Kind::Stored) else {
            return;
        };
        let expired: Vec<(String, String)> = api
            .list(event_kind, None, None)
            .into_iter()
            .filter(|e| {
                let last = e.value["lastTimestamp"]
                    .as_str()
                    .or_else(|| e.value["eventTime"].as_str())
                    .or_else(|| e.metadata()?.get("creationTimestamp")?.as_str());
                last.and_then(SimTime::parse_rfc3339)
                    .is_some_and(|t| now >= t.after(EVENT_TTL))
            })
            .map(|e| (e.namespace().to_string(), e.name().to_string()))
            .collect();
        if expired.is_empty() {
            return;
        }
        for (namespace, name) in &expired {
            let _ = api.delete(event_kind, namespace, name);
        }
        self.names
            .retain(|(namespace, ..), name| !expired.contains(&(namespace.clone(), name.clone())));
    }

    /// `first` numbers the first of `events` in its stream (names stay apart at one instant).
    fn write(&mut self, api: &mut ApiServer, events: &[Event], first: usize, component: &str) {
        let Some(event_kind) = stored_kind::known("", "Event").map(Kind::Stored) else {
            return;
        };
        for (sequence, e) in (first..).zip(events) {
            let key = (
                e.namespace.clone(),
                e.object.clone(),
                e.warning,
                e.reason.clone(),
                e.message.clone(),
            );
            let repeated = self
                .names
                .get(&key)
                .and_then(|name| api.get(event_kind, &e.namespace, name).ok())
                .cloned();
            // An Event is the recorder's own: a write the store refuses (a hostile client
            // deleted or replaced it over HTTP) costs the controllers nothing.
            let _ = match repeated {
                Some(mut stored) => {
                    let count = stored.value["count"].as_i64().unwrap_or(1) + 1;
                    stored.value["count"] = count.into();
                    stored.value["lastTimestamp"] = e.time.rfc3339().into();
                    api.update(stored).map(|_| ())
                }
                None => {
                    let name = event_name(e, sequence);
                    let value = event_value(api, e, &name, component);
                    let created = api.create(Object::new(event_kind, value));
                    // A pod's creation or deletion never repeats: only Argo's events are
                    // remembered to count repeats on.
                    if created.is_ok() && component == COMPONENT {
                        self.names.insert(key, name);
                    }
                    created.map(|_| ())
                }
            };
        }
    }
}

/// `rollouts-demo.18a2b3c4d5e6f708`: the object's name and the time in hexadecimal
/// nanoseconds, as client-go names events (the sequence keeps two at one instant apart).
fn event_name(e: &Event, sequence: usize) -> String {
    let name = e
        .object
        .split_once('/')
        .map_or(e.object.as_str(), |(_, n)| n);
    let nanos = (crate::clock::EPOCH_UNIX_SECS as u128 * 1_000_000_000
        + e.time.as_duration().as_nanos()
        + sequence as u128) as u64;
    format!("{name}.{nanos:x}")
}

fn event_value(api: &ApiServer, e: &Event, name: &str, component: &str) -> Value {
    let (kind, object_name) = e.object.split_once('/').unwrap_or(("", e.object.as_str()));
    let involved = Kind::parse(kind).and_then(|k| api.get(k, &e.namespace, object_name).ok());
    let time = e.time.rfc3339();
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": e.namespace},
        "involvedObject": {
            "apiVersion": Kind::parse(kind).map(|k| k.default_api_version()),
            "kind": kind,
            "name": object_name,
            "namespace": e.namespace,
            "uid": involved.map(|o| o.uid().to_string()),
            "resourceVersion": involved.map(|o| o.resource_version().to_string()),
        },
        "reason": e.reason,
        "message": e.message,
        "type": if e.warning { "Warning" } else { "Normal" },
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": "",
        "firstTimestamp": time,
        "lastTimestamp": time,
        "count": 1,
    })
}
