//! Pods stored compactly. A workload of 100,000 replicas is 100,000 Pods, and a Pod as a
//! JSON value takes about 8 KB (each map entry 112 bytes, each key its own allocation).
//! The store keeps a Pod as its serialized JSON (about 700 bytes) and the few facts the
//! controllers and the data plane read at every instant ([`PodFacts`]); the JSON value is
//! decoded when a client reads the Pod, kept until [`super::ApiServer::forget_decoded`], and
//! round-trips exactly (key order and numbers kept).

use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use crate::model::{Kind, Object};

/// What the controllers and the data plane read of a Pod at every instant, read from its
/// JSON when it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct PodFacts {
    pub creation_timestamp: Box<str>,
    /// `Ready` condition `True`.
    pub ready: bool,
    /// Has a `deletionTimestamp`.
    pub deleting: bool,
    /// Ready and not being deleted: an endpoint.
    pub serving: bool,
    /// Length of `status.containerStatuses`, if it is a list.
    pub container_statuses: Option<usize>,
    pub labels: Arc<BTreeMap<String, String>>,
    /// The first container's image, as the spec names it.
    pub image: Option<Arc<str>>,
    /// When the `Ready` condition turned `True` (its `lastTransitionTime`), if it did.
    pub ready_since: Option<crate::clock::SimTime>,
    /// Every container's image, in order.
    pub images: Arc<[String]>,
    /// The uids of the owners `metadata.ownerReferences` names.
    pub owners: Arc<[String]>,
    /// The name of the first owner reference.
    pub first_owner_name: Option<Arc<str>>,
    /// As kubectl's STATUS column: a waiting container's reason, else the phase, else
    /// `Pending`.
    pub status_text: Arc<str>,
    /// Containers ready, of `container_statuses`.
    pub ready_containers: u32,
    /// Container restarts, summed.
    pub restarts: u32,
}

/// Interned label sets, texts (images, status texts, owner names) and string lists (owner
/// uids, images): the pods of one ReplicaSet share them.
#[derive(Debug, Clone, Default)]
pub(super) struct Interner {
    labels: HashSet<Arc<BTreeMap<String, String>>>,
    texts: HashSet<Arc<str>>,
    lists: HashSet<Arc<[String]>>,
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

    fn text(&mut self, text: &str) -> Arc<str> {
        if let Some(shared) = self.texts.get(text) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(text);
        self.texts.insert(shared.clone());
        shared
    }

    fn list(&mut self, list: Vec<String>) -> Arc<[String]> {
        if let Some(shared) = self.lists.get(list.as_slice()) {
            return shared.clone();
        }
        let shared: Arc<[String]> = Arc::from(list);
        self.lists.insert(shared.clone());
        shared
    }

    /// Forgets what no stored pod shares any more.
    pub(super) fn prune(&mut self) {
        self.labels.retain(|l| Arc::strong_count(l) > 1);
        self.texts.retain(|t| Arc::strong_count(t) > 1);
        self.lists.retain(|l| Arc::strong_count(l) > 1);
    }

    pub(super) fn len(&self) -> usize {
        self.labels.len() + self.texts.len() + self.lists.len()
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
    /// Ready for at least `min_ready` at `now` (Kubernetes' `IsPodAvailable`).
    pub(crate) fn is_available(
        &self,
        min_ready: std::time::Duration,
        now: crate::clock::SimTime,
    ) -> bool {
        self.ready_since
            .is_some_and(|since| now >= since.after(min_ready))
    }

    fn of(pod: &Object, interner: &mut Interner) -> PodFacts {
        let deleting = pod
            .metadata()
            .and_then(|m| m.get("deletionTimestamp"))
            .is_some_and(|v| !v.is_null());
        let mut facts = PodFacts {
            ready_since: None,
            status_text: interner.text("Pending"),
            ready_containers: 0,
            restarts: 0,
            creation_timestamp: pod.creation_timestamp().into(),
            ready: false,
            deleting,
            serving: false,
            container_statuses: None,
            labels: interner.labels(pod.labels()),
            image: pod.spec()["containers"][0]["image"]
                .as_str()
                .map(|i| interner.text(i)),
            images: interner.list(
                pod.spec()["containers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["image"].as_str().map(str::to_string))
                    .collect(),
            ),
            owners: interner.list(owner_uids(pod)),
            first_owner_name: pod.value["metadata"]["ownerReferences"][0]["name"]
                .as_str()
                .map(|n| interner.text(n)),
        };
        facts.read_status(pod.status(), interner);
        facts
    }

    /// Reads the facts that come from the Pod's `status` (a status write changes only these).
    fn read_status(&mut self, status: &Value, interner: &mut Interner) {
        let ready_condition = crate::model::vocabulary::ready_condition(status);
        let ready = ready_condition.is_some();
        let statuses = status["containerStatuses"].as_array();
        let container_statuses = statuses.map(Vec::len);
        let statuses = statuses.map(Vec::as_slice).unwrap_or_default();
        let waiting = statuses
            .iter()
            .filter_map(|c| c["state"]["waiting"]["reason"].as_str())
            .next_back();
        let status_text = waiting
            .or_else(|| status["phase"].as_str())
            .unwrap_or("Pending");
        self.ready_since = ready_condition
            .and_then(|c| c["lastTransitionTime"].as_str())
            .and_then(crate::clock::SimTime::parse_rfc3339);
        self.status_text = interner.text(status_text);
        self.ready_containers = statuses.iter().filter(|c| c["ready"] == true).count() as u32;
        // Wrapping, as a release build summed them before (a count is Kubernetes' int32).
        self.restarts = statuses
            .iter()
            .map(|c| c["restartCount"].as_u64().unwrap_or(0) as u32)
            .fold(0, u32::wrapping_add);
        self.ready = ready;
        self.serving = ready && !self.deleting;
        self.container_statuses = container_statuses;
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
    body: PodBody,
    pub(super) facts: PodFacts,
    decoded: OnceLock<Object>,
}

/// A Pod's JSON: serialized, unless it nests deeper than serde_json reads back (it refuses
/// 128 levels; a JSON patch may build more), in which case it is kept as it is.
#[derive(Debug, Clone)]
enum PodBody {
    Serialized(Serialized),
    Whole(Box<Object>),
}

/// Nesting (objects and arrays) past which a Pod is kept whole: below serde_json's limit
/// of 128 for reading.
const MAX_SERIALIZED_DEPTH: usize = 100;

/// Whether `value` nests objects and arrays more than `levels` deep (the walk stops there).
fn nests_deeper(value: &Value, levels: usize) -> bool {
    match value {
        Value::Object(m) if !m.is_empty() => {
            levels == 0 || m.values().any(|c| nests_deeper(c, levels - 1))
        }
        Value::Array(a) if !a.is_empty() => {
            levels == 0 || a.iter().any(|c| nests_deeper(c, levels - 1))
        }
        _ => false,
    }
}

/// A Pod's JSON, and where its `status` and `metadata.resourceVersion` values lie in it: a
/// status write (a kubelet marking a pod Ready) replaces those two without decoding the
/// rest.
#[derive(Debug, Clone)]
struct Serialized {
    json: Box<[u8]>,
    status: Span,
    resource_version: Span,
}

/// A byte range of a Pod's JSON, in 8 bytes (a Pod is at most etcd's 1.5 MB): a store of
/// 100,000 Pods keeps two per Pod.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    /// No such value in the JSON.
    const NONE: Span = Span {
        start: u32::MAX,
        end: u32::MAX,
    };

    fn of(range: Range<usize>) -> Span {
        match (u32::try_from(range.start), u32::try_from(range.end)) {
            (Ok(start), Ok(end)) if end != u32::MAX => Span { start, end },
            _ => Span::NONE,
        }
    }

    fn range(self) -> Option<Range<usize>> {
        (self != Span::NONE).then_some(self.start as usize..self.end as usize)
    }
}

fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Serializing a string or a Value into a Vec cannot fail (map keys are strings).
    let _ = serde_json::to_writer(out, value);
}

/// Writes `value` and returns where it lies.
fn write_spanned(out: &mut Vec<u8>, value: &Value) -> Span {
    let start = out.len();
    write_json(out, value);
    Span::of(start..out.len())
}

/// Writes `map` as serde_json does (compact, in its order), each value by `write_value`.
fn write_map(
    out: &mut Vec<u8>,
    map: &serde_json::Map<String, Value>,
    mut write_value: impl FnMut(&mut Vec<u8>, &str, &Value),
) {
    out.push(b'{');
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json(out, key);
        out.push(b':');
        write_value(out, key, value);
    }
    out.push(b'}');
}

impl Serialized {
    /// `serde_json::to_vec(value)` byte for byte, noting where the two values lie.
    fn new(value: &Value) -> Serialized {
        let mut json = Vec::with_capacity(1024);
        let (mut status, mut resource_version) = (Span::NONE, Span::NONE);
        match value {
            Value::Object(top) => {
                write_map(&mut json, top, |json, key, value| match (key, value) {
                    ("metadata", Value::Object(metadata)) => {
                        write_map(json, metadata, |json, field, value| {
                            let at = write_spanned(json, value);
                            if field == "resourceVersion" {
                                resource_version = at;
                            }
                        })
                    }
                    _ => {
                        let at = write_spanned(json, value);
                        if key == "status" {
                            status = at;
                        }
                    }
                })
            }
            _ => write_json(&mut json, value),
        }
        Serialized {
            json: json.into_boxed_slice(),
            status,
            resource_version,
        }
    }

    /// The JSON with its status and resourceVersion replaced by these (serialized), or None
    /// when it lacks either.
    fn with_status(&self, status: &[u8], resource_version: &[u8]) -> Option<Serialized> {
        let (at_status, at_version) = (self.status.range()?, self.resource_version.range()?);
        let mut parts = [(at_status, status), (at_version, resource_version)];
        parts.sort_by_key(|(at, _)| at.start);
        let mut json = Vec::with_capacity(self.json.len() + status.len() + resource_version.len());
        let mut placed = [Span::NONE; 2];
        let mut from = 0;
        for (i, (at, text)) in parts.iter().enumerate() {
            json.extend_from_slice(&self.json[from..at.start]);
            let start = json.len();
            json.extend_from_slice(text);
            placed[i] = Span::of(start..json.len());
            from = at.end;
        }
        json.extend_from_slice(&self.json[from..]);
        // The two values keep their order.
        let (status_at, version_at) = if self.status.start < self.resource_version.start {
            (placed[0], placed[1])
        } else {
            (placed[1], placed[0])
        };
        Some(Serialized {
            status: status_at,
            resource_version: version_at,
            json: json.into_boxed_slice(),
        })
    }
}

fn decode(json: &[u8]) -> Object {
    // The bytes are a Value serialized here, no deeper than serde_json reads.
    Object::new(
        Kind::Pod,
        serde_json::from_slice(json).unwrap_or(Value::Null),
    )
}

impl Stored {
    pub(super) fn new(object: Object, interner: &mut Interner) -> Stored {
        if object.kind != Kind::Pod {
            return Stored::Whole(object);
        }
        let facts = PodFacts::of(&object, interner);
        let body = if nests_deeper(&object.value, MAX_SERIALIZED_DEPTH) {
            PodBody::Whole(Box::new(object))
        } else {
            PodBody::Serialized(Serialized::new(&object.value))
        };
        Stored::Pod(CompactPod {
            body,
            facts,
            decoded: OnceLock::new(),
        })
    }

    /// The object's JSON value (a Pod's is decoded on first read).
    pub(super) fn object(&self) -> &Object {
        match self {
            Stored::Whole(o) => o,
            Stored::Pod(p) => match &p.body {
                PodBody::Whole(o) => o,
                PodBody::Serialized(body) => p.decoded.get_or_init(|| decode(&body.json)),
            },
        }
    }

    /// A copy of the object's JSON value; a Pod not decoded yet is decoded for the caller
    /// alone.
    pub(super) fn to_object(&self) -> Object {
        match self {
            Stored::Whole(o) => o.clone(),
            Stored::Pod(p) => match (&p.body, p.decoded.get()) {
                (PodBody::Whole(o), _) => o.as_ref().clone(),
                (PodBody::Serialized(_), Some(o)) => o.clone(),
                (PodBody::Serialized(body), None) => decode(&body.json),
            },
        }
    }

    pub(super) fn into_object(self) -> Object {
        match self {
            Stored::Whole(o) => o,
            Stored::Pod(p) => match (p.body, p.decoded.into_inner()) {
                (PodBody::Whole(o), _) => *o,
                (PodBody::Serialized(_), Some(o)) => o,
                (PodBody::Serialized(body), None) => decode(&body.json),
            },
        }
    }

    /// For a Pod stored serialized, whether its status is `status` (serialized:
    /// `status_json`), read without decoding the rest; None for any other object.
    pub(super) fn status_is(&self, status: &Value, status_json: &[u8]) -> Option<bool> {
        let Stored::Pod(CompactPod {
            body: PodBody::Serialized(body),
            ..
        }) = self
        else {
            return None;
        };
        let stored = &body.json[body.status.range()?];
        // Equal values may differ in key order, which their bytes show.
        Some(
            stored == status_json
                || serde_json::from_slice::<Value>(stored).is_ok_and(|s| &s == status),
        )
    }

    /// Writes a serialized Pod's status and resourceVersion in place, without decoding it
    /// (as [`Stored::status_is`] allows). Returns whether it could.
    pub(super) fn splice_status(
        &mut self,
        status: &Value,
        status_json: &[u8],
        version: u64,
        interner: &mut Interner,
    ) -> bool {
        let Stored::Pod(pod) = self else {
            return false;
        };
        let PodBody::Serialized(body) = &pod.body else {
            return false;
        };
        // The status sits one level below the Pod: as deep as `Stored::new` allows there.
        if nests_deeper(status, MAX_SERIALIZED_DEPTH - 1) {
            return false;
        }
        let mut version_json = Vec::new();
        write_json(&mut version_json, &version.to_string());
        let Some(next) = body.with_status(status_json, &version_json) else {
            return false;
        };
        pod.body = PodBody::Serialized(next);
        pod.decoded.take();
        pod.facts.read_status(status, interner);
        true
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_nested_deeper_than_serde_json_reads_back_is_kept_whole() {
        let mut deep = json!("leaf");
        for _ in 0..150 {
            deep = json!({ "x": deep });
        }
        let pod = Object::new(
            Kind::Pod,
            json!({"kind": "Pod", "metadata": {"name": "p", "deep": deep}}),
        );
        let mut interner = Interner::default();
        let stored = Stored::new(pod.clone(), &mut interner);
        assert!(matches!(&stored, Stored::Pod(p) if matches!(p.body, PodBody::Whole(_))));
        assert_eq!(stored.object(), &pod);
        assert_eq!(stored.into_object(), pod);
        // Shallow pods are serialized, and read back exactly (floats included).
        let shallow = Object::new(
            Kind::Pod,
            json!({"kind": "Pod", "metadata": {"name": "p", "x": 117.63331139400017}}),
        );
        let stored = Stored::new(shallow.clone(), &mut interner);
        assert!(matches!(&stored, Stored::Pod(p) if matches!(p.body, PodBody::Serialized(_))));
        assert_eq!(stored.to_object(), shallow);
        assert!(!nests_deeper(&json!({"a": {"b": [1]}}), 3));
        assert!(nests_deeper(&json!({"a": {"b": [1]}}), 2));
    }

    #[test]
    fn a_status_nested_too_deep_is_not_spliced_in() {
        let pod = Object::new(
            Kind::Pod,
            json!({"kind": "Pod", "metadata": {"name": "p", "resourceVersion": "1"}, "status": {}}),
        );
        let mut interner = Interner::default();
        let mut stored = Stored::new(pod, &mut interner);
        let mut deep = json!("leaf");
        for _ in 0..MAX_SERIALIZED_DEPTH {
            deep = json!({ "x": deep });
        }
        let status = json!({ "phase": "Running", "deep": deep });
        let status_json = serde_json::to_vec(&status).unwrap();
        // Spliced, the Pod would nest deeper than `Stored::new` lets a stored object nest.
        assert!(!stored.splice_status(&status, &status_json, 2, &mut interner));
        let shallow = json!({"phase": "Running"});
        let shallow_json = serde_json::to_vec(&shallow).unwrap();
        assert!(stored.splice_status(&shallow, &shallow_json, 2, &mut interner));
        assert_eq!(stored.object().status(), &shallow);
        assert_eq!(stored.object().value["metadata"]["resourceVersion"], "2");
    }
}
