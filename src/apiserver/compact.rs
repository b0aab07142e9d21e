//! Pods stored compactly. A workload of 100,000 replicas is 100,000 Pods, and a Pod as a
//! JSON value takes about 8 KB (each map entry 112 bytes, each key its own allocation).
//! The store keeps a Pod as its serialized JSON (about 700 bytes) and the few facts the
//! controllers and the data plane read at every instant ([`PodFacts`]); the JSON value is
//! decoded when a client reads the Pod, kept until [`super::ApiServer::forget_decoded`], and
//! round-trips exactly (key order and numbers kept).

use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, OnceLock};

use crate::model::vocabulary::pod_is_ready;
use crate::model::{Kind, Object};

/// What the controllers and the data plane read of a Pod at every instant, read from its
/// JSON when it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct PodFacts {
    pub creation_timestamp: Box<str>,
    /// `Ready` condition `True`.
    pub ready: bool,
    /// Ready and not being deleted (no `deletionTimestamp`): an endpoint.
    pub serving: bool,
    /// Length of `status.containerStatuses`, if it is a list.
    pub container_statuses: Option<usize>,
    pub labels: Arc<BTreeMap<String, String>>,
    /// The first container's image, as the spec names it.
    pub image: Option<Arc<str>>,
    /// The uids of the owners `metadata.ownerReferences` names.
    pub owners: Arc<[String]>,
    /// As kubectl's STATUS column: a waiting container's reason, else the phase, else
    /// `Pending`.
    pub status_text: Arc<str>,
    /// Containers ready, of `container_statuses`.
    pub ready_containers: u32,
    /// Container restarts, summed.
    pub restarts: u32,
}

/// Interned label sets, images and owner lists: the pods of one ReplicaSet share them.
#[derive(Debug, Clone, Default)]
pub(super) struct Interner {
    labels: HashSet<Arc<BTreeMap<String, String>>>,
    /// Images and status texts.
    images: HashSet<Arc<str>>,
    owners: HashSet<Arc<[String]>>,
}

impl Interner {
    fn labels(&mut self, labels: BTreeMap<String, String>) -> Arc<BTreeMap<String, String>> {
        if let Some(shared) = self.labels.get(&labels) {
            return shared.clone();
        }
        let shared = Arc::new(labels);
        self.labels.insert(shared.clone());
        shared
    }

    fn image(&mut self, image: &str) -> Arc<str> {
        if let Some(shared) = self.images.get(image) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(image);
        self.images.insert(shared.clone());
        shared
    }

    fn owners(&mut self, owners: Vec<String>) -> Arc<[String]> {
        if let Some(shared) = self.owners.get(owners.as_slice()) {
            return shared.clone();
        }
        let shared: Arc<[String]> = Arc::from(owners);
        self.owners.insert(shared.clone());
        shared
    }
}

/// The uids of the owners an object names.
pub(super) fn owner_uids(object: &Object) -> Vec<String> {
    object.value["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str().map(str::to_string))
        .collect()
}

impl PodFacts {
    fn of(pod: &Object, interner: &mut Interner) -> PodFacts {
        let ready = pod_is_ready(pod);
        let deleting = pod
            .metadata()
            .and_then(|m| m.get("deletionTimestamp"))
            .is_some_and(|v| !v.is_null());
        let statuses = pod.status()["containerStatuses"].as_array();
        let statuses = statuses.map(Vec::as_slice).unwrap_or_default();
        let waiting = statuses
            .iter()
            .filter_map(|c| c["state"]["waiting"]["reason"].as_str())
            .next_back();
        let status_text = waiting
            .or_else(|| pod.status()["phase"].as_str())
            .unwrap_or("Pending");
        PodFacts {
            status_text: interner.image(status_text),
            ready_containers: statuses.iter().filter(|c| c["ready"] == true).count() as u32,
            restarts: statuses
                .iter()
                .map(|c| c["restartCount"].as_u64().unwrap_or(0) as u32)
                .sum(),
            creation_timestamp: pod.creation_timestamp().into(),
            ready,
            serving: ready && !deleting,
            container_statuses: pod.status()["containerStatuses"].as_array().map(Vec::len),
            labels: interner.labels(pod.labels()),
            image: pod.spec()["containers"][0]["image"]
                .as_str()
                .map(|i| interner.image(i)),
            owners: interner.owners(owner_uids(pod)),
        }
    }
}

/// An object in the store: a Pod compactly, anything else as its JSON value.
#[derive(Debug, Clone)]
pub(super) enum Stored {
    Whole(Object),
    Pod(CompactPod),
}

#[derive(Debug, Clone)]
pub(super) struct CompactPod {
    json: Box<[u8]>,
    pub(super) facts: PodFacts,
    decoded: OnceLock<Object>,
}

impl CompactPod {
    fn decode(&self) -> Object {
        // The bytes are a Value this module serialized: they always decode.
        Object::new(
            Kind::Pod,
            serde_json::from_slice(&self.json).unwrap_or(Value::Null),
        )
    }
}

impl Stored {
    pub(super) fn new(object: Object, interner: &mut Interner) -> Stored {
        if object.kind != Kind::Pod {
            return Stored::Whole(object);
        }
        let facts = PodFacts::of(&object, interner);
        // Serializing a Value cannot fail (its map keys are strings).
        let json = serde_json::to_vec(&object.value).unwrap_or_default();
        Stored::Pod(CompactPod {
            json: json.into_boxed_slice(),
            facts,
            decoded: OnceLock::new(),
        })
    }

    /// The object's JSON value (a Pod's is decoded on first read).
    pub(super) fn object(&self) -> &Object {
        match self {
            Stored::Whole(o) => o,
            Stored::Pod(p) => p.decoded.get_or_init(|| p.decode()),
        }
    }

    /// A copy of the object's JSON value; a Pod not decoded yet is decoded for the caller
    /// alone.
    pub(super) fn to_object(&self) -> Object {
        match self {
            Stored::Whole(o) => o.clone(),
            Stored::Pod(p) => match p.decoded.get() {
                Some(o) => o.clone(),
                None => p.decode(),
            },
        }
    }

    pub(super) fn into_object(self) -> Object {
        match self {
            Stored::Whole(o) => o,
            Stored::Pod(p) => match p.decoded.into_inner() {
                Some(o) => o,
                None => Object::new(
                    Kind::Pod,
                    serde_json::from_slice(&p.json).unwrap_or(Value::Null),
                ),
            },
        }
    }

    pub(super) fn owner_uids(&self) -> Vec<String> {
        match self {
            Stored::Whole(o) => owner_uids(o),
            Stored::Pod(p) => p.facts.owners.to_vec(),
        }
    }

    /// Whether the object's labels match `selector`, without decoding a Pod.
    pub(super) fn labels_match(&self, selector: &BTreeMap<String, String>) -> bool {
        match self {
            Stored::Whole(o) => crate::model::object::selector_matches(selector, &o.labels()),
            Stored::Pod(p) => {
                crate::model::object::selector_matches(selector, p.facts.labels.as_ref())
            }
        }
    }

    pub(super) fn facts(&self) -> Option<&PodFacts> {
        match self {
            Stored::Whole(_) => None,
            Stored::Pod(p) => Some(&p.facts),
        }
    }

    /// Drops a Pod's decoded JSON value (it is decoded again when read).
    pub(super) fn forget_decoded(&mut self) {
        if let Stored::Pod(p) = self {
            p.decoded.take();
        }
    }
}
