//! The in-process API server: an object store with Kubernetes semantics.
//!
//! create / get / list / update / update_status / patch (JSON merge patch, JSON patch) /
//! delete, and a watch log. Every write bumps a store-wide `resourceVersion`; `generation`
//! counts changes outside `metadata` and `status`; a write carrying a stale resourceVersion
//! fails with 409 Conflict; errors are worded as Kubernetes words them, because users compare
//! them with what `kubectl` prints.
//!
//! Pods are kept compactly (their JSON serialized, and [`PodFacts`]): a workload may have
//! 100,000 of them.
//!
//! It knows nothing about rollouts: controllers are clients of it. Its HTTP face
//! (`canarysim serve --api`) is `canarysim::apiserver::http`, in the `canarysim` crate.

pub mod admission;
mod compact;
pub mod discovery;
pub mod rest;
pub mod selector;
pub mod strategic;
pub mod table;

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::clock::SimTime;
use crate::model::object::selector_matches;
use crate::model::{Kind, Object, ObjectKey};
use admission::IstioWeightRules;
pub use compact::PodFacts;
use compact::{Interner, Stored};

/// Errors as the Kubernetes API returns them (the Display text is the `message` field).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 404
    #[error("{} \"{name}\" not found", kind.qualified_resource())]
    NotFound { kind: Kind, name: String },
    /// 409 on create
    #[error("{} \"{name}\" already exists", kind.qualified_resource())]
    AlreadyExists { kind: Kind, name: String },
    /// 409 on a stale resourceVersion
    #[error(
        "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
        kind.qualified_resource()
    )]
    Conflict { kind: Kind, name: String },
    /// 422
    #[error("{} \"{name}\" is invalid: {message}", kind.qualified_resource())]
    Invalid {
        kind: Kind,
        name: String,
        message: String,
    },
    /// A validating admission webhook refused the write.
    #[error("admission webhook \"{webhook}\" denied the request: {message}")]
    Denied {
        webhook: &'static str,
        message: String,
    },
    /// 413: the object is over etcd's request limit ([`MAX_OBJECT_BYTES`]).
    #[error("etcdserver: request is too large")]
    TooLarge,
}

/// etcd's default `--max-request-bytes` (1.5 MiB): a larger object is refused with
/// "etcdserver: request is too large", which the API server answers with 413. Measured as
/// compact JSON (custom resources are stored so; built-in kinds as protobuf, a little smaller).
/// Without it a controller that grows an object on every write (Argo's `orderRoutes` repeats
/// N routes of one name N times) would grow it here until memory ran out.
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

impl crate::model::Objects for ApiServer {
    fn objects(&self, kind: Kind) -> Vec<&Object> {
        self.list(kind, None, None)
    }

    fn object(&self, kind: Kind, namespace: &str, name: &str) -> Option<&Object> {
        self.get(kind, namespace, name).ok()
    }

    fn serving_pods(&self) -> Vec<crate::model::ServingPod<'_>> {
        self.pod_facts(None, None)
            .into_iter()
            .filter(|(_, pod)| pod.serving)
            .map(|(key, pod)| crate::model::ServingPod {
                namespace: &key.namespace,
                name: &key.name,
                labels: pod.labels.clone(),
                image: pod.image.as_deref(),
            })
            .collect()
    }
}

/// The cluster's validating webhooks (`admission`), as an API error.
fn admit(kind: Kind, object: &Value, rules: IstioWeightRules) -> Result<(), ApiError> {
    admission::admit(kind, object, rules).map_err(|d| ApiError::Denied {
        webhook: d.webhook,
        message: d.message,
    })
}

/// Whether `object` as compact JSON is at most [`MAX_OBJECT_BYTES`].
fn fits_in_etcd(object: &Value) -> bool {
    json_size_up_to(object, MAX_OBJECT_BYTES).is_some()
}

/// The size of `value` as compact JSON, if at most `limit`; the count stops past the limit,
/// so a huge value costs no more than a legal one.
pub(crate) fn json_size_up_to(value: &Value, limit: usize) -> Option<usize> {
    struct Counter(usize, usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            if self.0 > self.1 {
                return Err(std::io::ErrorKind::FileTooLarge.into());
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0, limit);
    serde_json::to_writer(&mut counter, value).ok()?;
    Some(counter.0)
}

impl ApiError {
    /// The HTTP status code Kubernetes answers with.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound { .. } => 404,
            ApiError::AlreadyExists { .. } | ApiError::Conflict { .. } => 409,
            ApiError::Invalid { .. } => 422,
            // The API server's default for a webhook denial that carries no code.
            ApiError::Denied { .. } => 403,
            ApiError::TooLarge => 413,
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, ApiError::NotFound { .. })
    }

    fn not_found(kind: Kind, name: &str) -> ApiError {
        ApiError::NotFound {
            kind,
            name: name.to_string(),
        }
    }
}

/// A patch body, as `kubectl patch --type merge|json` sends it.
#[derive(Debug, Clone, PartialEq)]
pub enum Patch {
    /// RFC 7386 JSON merge patch.
    Merge(Value),
    /// RFC 6902 JSON patch (a list of operations).
    Json(Value),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One entry of the watch log: the object as it was after the write.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    pub event_type: EventType,
    pub resource_version: u64,
    pub time: SimTime,
    pub object: Object,
}

/// The watch log, with each event's size (about, as JSON) for compaction by bytes.
#[derive(Debug, Default, Clone)]
struct WatchLog {
    events: Vec<WatchEvent>,
    sizes: Vec<usize>,
    bytes: usize,
}

impl WatchLog {
    fn push(&mut self, event: WatchEvent) {
        let size = json_size(&event.object.value);
        self.bytes += size;
        self.sizes.push(size);
        self.events.push(event);
    }

    /// Drops the oldest events beyond the bounds; the newest dropped resourceVersion.
    fn compact(&mut self, keep: usize, keep_bytes: usize) -> Option<u64> {
        let mut drop = self.events.len().saturating_sub(keep);
        let mut bytes = self.bytes - self.sizes[..drop].iter().sum::<usize>();
        while bytes > keep_bytes && drop + 1 < self.events.len() {
            bytes -= self.sizes[drop];
            drop += 1;
        }
        if drop == 0 {
            return None;
        }
        let newest = self.events[drop - 1].resource_version;
        self.events.drain(..drop);
        self.sizes.drain(..drop);
        self.bytes = bytes;
        Some(newest)
    }
}

/// About how many bytes `v` takes as JSON (strings and keys by length, punctuation by
/// count): cheap enough to run on every stored write.
fn json_size(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|i| json_size(i) + 1).sum::<usize>(),
        Value::Object(m) => {
            2 + m
                .iter()
                .map(|(k, v)| k.len() + 4 + json_size(v))
                .sum::<usize>()
        }
    }
}

/// The store. Single-threaded by design: the simulation is a sequence of events.
#[derive(Debug, Default, Clone)]
pub struct ApiServer {
    objects: BTreeMap<ObjectKey, Stored>,
    /// Label sets, images and owner lists the compact Pods share.
    interner: Interner,
    /// The interner's size after its last pruning.
    interned_after_prune: usize,
    /// Objects by the uid of each owner their `metadata.ownerReferences` name (what a
    /// controller lists its children by; a workload may have thousands of pods).
    owned: BTreeMap<String, std::collections::BTreeSet<ObjectKey>>,
    /// Per owner uid, the resourceVersion of the last write (create, update, delete) to an
    /// object naming it: a controller may skip an owner whose children have not changed.
    children_changed: BTreeMap<String, u64>,
    /// Per kind, the resourceVersion of the last write to an object of it.
    kind_changed: BTreeMap<Kind, u64>,
    resource_version: u64,
    uid_counter: u64,
    now: SimTime,
    log: WatchLog,
    /// The newest resourceVersion dropped from the log by [`ApiServer::compact_log`].
    compacted: u64,
    /// Keep the watch log (on by default; the simulated world turns it off, `serve --api`
    /// on: only watches read it). See [`ApiServer::set_keep_log`].
    keep_log: bool,
    /// Which istiod validates VirtualService writes.
    pub istio_weight_rules: IstioWeightRules,
}

impl ApiServer {
    pub fn new() -> Self {
        ApiServer {
            keep_log: true,
            ..Default::default()
        }
    }

    /// Turns the watch log on or off. While it is off, nothing before the current
    /// resourceVersion can be watched ([`ApiServer::watchable_since`]).
    pub fn set_keep_log(&mut self, on: bool) {
        if on && !self.keep_log {
            self.compacted = self.resource_version;
        }
        self.keep_log = on;
    }

    /// Sets the time stamped on creations and watch events.
    pub fn set_time(&mut self, now: SimTime) {
        self.now = now;
    }

    pub fn now(&self) -> SimTime {
        self.now
    }

    /// The latest resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    pub fn get(&self, kind: Kind, namespace: &str, name: &str) -> Result<&Object, ApiError> {
        self.stored(kind, namespace, name).map(Stored::object)
    }

    fn stored(&self, kind: Kind, namespace: &str, name: &str) -> Result<&Stored, ApiError> {
        self.objects
            .get(&ObjectKey::new(kind, namespace, name))
            .ok_or_else(|| ApiError::not_found(kind, name))
    }

    /// The stored objects of `kind` (in `namespace` if given), ordered by namespace and name.
    fn of_kind(
        &self,
        kind: Kind,
        namespace: Option<&str>,
    ) -> impl Iterator<Item = (&ObjectKey, &Stored)> {
        // A namespace is a range of the store, not a filter over every namespace's objects.
        self.objects
            .range(ObjectKey::new(kind, namespace.unwrap_or(""), "")..)
            .take_while(move |(k, _)| {
                k.kind == kind && namespace.is_none_or(|ns| k.namespace == ns)
            })
    }

    /// Objects of `kind` (in `namespace` if given) whose labels match `selector` (if given),
    /// ordered by namespace and name.
    pub fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        selector: Option<&BTreeMap<String, String>>,
    ) -> Vec<&Object> {
        self.of_kind(kind, namespace)
            .filter(|(_, o)| selector.is_none_or(|s| o.labels_match(s)))
            .map(|(_, o)| o.object())
            .collect()
    }

    /// Whether the object exists (a Pod is not decoded).
    pub fn contains(&self, kind: Kind, namespace: &str, name: &str) -> bool {
        self.objects
            .contains_key(&ObjectKey::new(kind, namespace, name))
    }

    /// The facts of the Pods in `namespace` (all if None) whose labels match `selector`
    /// (if given), ordered by namespace and name, without decoding them.
    pub fn pod_facts(
        &self,
        namespace: Option<&str>,
        selector: Option<&BTreeMap<String, String>>,
    ) -> Vec<(&ObjectKey, &PodFacts)> {
        // The pods of one ReplicaSet share their interned labels: each distinct label set is
        // matched once (100,000 pods are a handful of label sets).
        let mut matched: Vec<(*const BTreeMap<String, String>, bool)> = Vec::new();
        let mut matches = |labels: &Arc<BTreeMap<String, String>>| {
            let Some(selector) = selector else {
                return true;
            };
            let at = Arc::as_ptr(labels);
            if let Some((_, m)) = matched.iter().find(|(p, _)| *p == at) {
                return *m;
            }
            let m = selector_matches(selector, labels);
            if matched.len() < 64 {
                matched.push((at, m));
            }
            m
        };
        self.of_kind(Kind::Pod, namespace)
            .filter_map(|(k, o)| Some((k, o.facts()?)))
            .filter(|(_, f)| matches(&f.labels))
            .collect()
    }

    /// [`ApiServer::get`], answering with a copy: a Pod is decoded for the caller alone
    /// and not kept (a walk over thousands of pods decodes one at a time).
    pub(crate) fn get_owned(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Object, ApiError> {
        self.stored(kind, namespace, name).map(Stored::to_object)
    }

    /// How many Pods in `namespace` name `owner_uid` among their owners.
    pub(crate) fn owned_pod_count(&self, namespace: &str, owner_uid: &str) -> usize {
        self.owned_keys(Kind::Pod, namespace, owner_uid).count()
    }

    /// The keys of the objects of `kind` in `namespace` that name `owner_uid` among their
    /// owners, ordered by name.
    fn owned_keys(
        &self,
        kind: Kind,
        namespace: &str,
        owner_uid: &str,
    ) -> impl Iterator<Item = &ObjectKey> {
        self.owned
            .get(owner_uid)
            .into_iter()
            .flatten()
            .filter(move |k| k.kind == kind && k.namespace == namespace)
    }

    /// One Pod's facts, without decoding it.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&PodFacts> {
        self.objects
            .get(&ObjectKey::new(Kind::Pod, namespace, name))?
            .facts()
    }

    /// The facts of the Pods in `namespace` that name `owner_uid` among their owners,
    /// ordered by name, without decoding them.
    pub(crate) fn owned_pod_facts(
        &self,
        namespace: &str,
        owner_uid: &str,
    ) -> Vec<(&ObjectKey, &PodFacts)> {
        self.owned_keys(Kind::Pod, namespace, owner_uid)
            .filter_map(|k| Some((k, self.objects.get(k)?.facts()?)))
            .collect()
    }

    /// Drops the JSON values decoded from compact Pods since the last call (they are
    /// decoded again when read): the world calls it once the instant is settled.
    pub(crate) fn forget_decoded(&mut self) {
        let pods = self.objects.range_mut(ObjectKey::new(Kind::Pod, "", "")..);
        for (_, stored) in pods.take_while(|(k, _)| k.kind == Kind::Pod) {
            stored.forget_decoded();
        }
        // What deleted pods shared is forgotten once the interner has doubled.
        if self.interner.len() > 2 * self.interned_after_prune.max(64) {
            self.interner.prune();
            self.interned_after_prune = self.interner.len();
        }
    }

    /// Creates an object; server-set metadata (uid, resourceVersion, generation,
    /// creationTimestamp) is filled in, and namespace defaults to "default" (cluster-scoped
    /// kinds have none).
    pub fn create(&mut self, object: Object) -> Result<Object, ApiError> {
        let key = self.create_keyed(object)?;
        Ok(self.objects[&key].object().clone())
    }

    /// [`ApiServer::create`], answering with the new object's key rather than a copy.
    pub(crate) fn create_keyed(&mut self, mut object: Object) -> Result<ObjectKey, ApiError> {
        if !object.kind.namespaced() {
            object.metadata_mut().remove("namespace");
        } else if object.namespace().is_empty() {
            object
                .metadata_mut()
                .insert("namespace".into(), Value::String("default".into()));
        }
        let key = object.key();
        if key.name.is_empty() {
            return Err(ApiError::Invalid {
                kind: key.kind,
                name: String::new(),
                message: "metadata.name: Required value: name or generateName is required".into(),
            });
        }
        if self.objects.contains_key(&key) {
            return Err(ApiError::AlreadyExists {
                kind: key.kind,
                name: key.name,
            });
        }
        admit(key.kind, &object.value, self.istio_weight_rules)?;
        self.uid_counter += 1;
        let uid = format!("00000000-0000-4000-8000-{:012x}", self.uid_counter);
        let now = self.now.rfc3339();
        let api_version = object
            .value
            .get("apiVersion")
            .and_then(Value::as_str)
            .map_or_else(|| object.kind.default_api_version(), str::to_string);
        {
            let v = crate::model::object::ensure_object(&mut object.value);
            v.insert("apiVersion".into(), Value::String(api_version));
            v.insert("kind".into(), Value::String(key.kind.as_str().into()));
        }
        let meta = object.metadata_mut();
        meta.insert("uid".into(), Value::String(uid));
        meta.insert("generation".into(), Value::from(1));
        meta.insert("creationTimestamp".into(), Value::String(now));
        self.check_size(&mut object)?;
        Ok(self.store(key, object, EventType::Added))
    }

    /// Replaces an object (spec, metadata and status). A non-empty resourceVersion must
    /// match the stored one.
    pub fn update(&mut self, object: Object) -> Result<Object, ApiError> {
        self.replace(object, false)
    }

    /// Replaces only `status` (the status subresource): the rest of the stored object stays.
    pub(crate) fn update_status(&mut self, object: Object) -> Result<Object, ApiError> {
        self.replace(object, true)
    }

    fn replace(&mut self, object: Object, status_only: bool) -> Result<Object, ApiError> {
        let key = object.key();
        let current = self.get(key.kind, &key.namespace, &key.name)?;
        let rv = object.resource_version();
        if !rv.is_empty() && rv != current.resource_version() {
            return Err(ApiError::Conflict {
                kind: key.kind,
                name: key.name,
            });
        }
        let mut next = if status_only {
            let mut next = current.clone();
            let status = object.value.get("status").cloned();
            let map = crate::model::object::ensure_object(&mut next.value);
            match status {
                Some(s) => {
                    map.insert("status".into(), s);
                }
                None => {
                    map.remove("status");
                }
            }
            next
        } else {
            let mut next = object;
            // Server-owned metadata cannot be changed by a client.
            let cur_meta = current.metadata().cloned().unwrap_or_default();
            let meta = next.metadata_mut();
            for field in ["uid", "creationTimestamp", "generation"] {
                match cur_meta.get(field) {
                    Some(v) => meta.insert(field.into(), v.clone()),
                    None => meta.remove(field),
                };
            }
            next
        };
        if !status_only {
            admit(key.kind, &next.value, self.istio_weight_rules)?;
            // A controller's route write meets the CRDs' rules, as a client's does (the
            // plugin's negative stable weight after an unclamped promote-full, say).
            if let Some(route) = crate::model::gateway_api::route_kind(key.kind) {
                let mut invalid = Vec::new();
                crate::model::gateway_api::validate_route(route, &next.value["spec"], &mut invalid);
                if !invalid.is_empty() {
                    let messages: Vec<&str> = invalid.iter().map(|i| i.message.as_str()).collect();
                    return Err(ApiError::Invalid {
                        kind: key.kind,
                        name: key.name,
                        // As the API server words one cause, or several.
                        message: match messages.as_slice() {
                            [one] => one.to_string(),
                            all => format!("[{}]", all.join(", ")),
                        },
                    });
                }
            }
        }
        if next.value == current.value {
            // Kubernetes does not bump resourceVersion for a no-op write.
            return Ok(current.clone());
        }
        if spec_changed(&current.value, &next.value) {
            let generation = current.generation() + 1;
            next.metadata_mut()
                .insert("generation".into(), Value::from(generation));
        }
        self.check_size(&mut next)?;
        let key = self.store(key, next, EventType::Modified);
        Ok(self.objects[&key].object().clone())
    }

    /// Applies a patch to the stored object. A resourceVersion inside the patch is checked
    /// like an update's.
    pub fn patch(
        &mut self,
        kind: Kind,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<Object, ApiError> {
        let current = self.get(kind, namespace, name)?;
        let mut value = current.value.clone();
        let invalid = |message: String| ApiError::Invalid {
            kind,
            name: name.to_string(),
            message,
        };
        match patch {
            Patch::Merge(p) => json_patch::merge(&mut value, p),
            Patch::Json(p) => apply_json_patch(&mut value, p).map_err(invalid)?,
        }
        let mut next = Object::new(kind, value);
        if next.name() != name || next.namespace() != namespace {
            return Err(invalid(
                "metadata.name and metadata.namespace cannot be changed by a patch".into(),
            ));
        }
        if next.resource_version().is_empty() {
            next.metadata_mut().insert(
                "resourceVersion".into(),
                Value::String(current.resource_version().to_string()),
            );
        }
        self.update(next)
    }

    pub(crate) fn delete(
        &mut self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Object, ApiError> {
        self.remove(kind, namespace, name).map(Stored::into_object)
    }

    /// [`ApiServer::delete`], answering nothing: a Pod is not decoded (a ReplicaSet scaled
    /// down by thousands).
    pub(crate) fn delete_quietly(
        &mut self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        self.remove(kind, namespace, name).map(drop)
    }

    fn remove(&mut self, kind: Kind, namespace: &str, name: &str) -> Result<Stored, ApiError> {
        let key = ObjectKey::new(kind, namespace, name);
        self.index_owners(&key, None, self.resource_version + 1);
        let stored = self
            .objects
            .remove(&key)
            .ok_or_else(|| ApiError::not_found(kind, name))?;
        self.resource_version += 1;
        self.kind_changed.insert(kind, self.resource_version);
        if !self.keep_log {
            self.compacted = self.resource_version;
        } else {
            self.log.push(WatchEvent {
                event_type: EventType::Deleted,
                resource_version: self.resource_version,
                time: self.now,
                object: stored.to_object(),
            });
        }
        Ok(stored)
    }

    /// Drops the oldest watch events until at most `keep` remain holding at most
    /// `keep_bytes` (about, as JSON; the newest stays unless `keep` is 0), as etcd compacts its
    /// history: a watch from before them can no longer be served
    /// ([`ApiServer::watchable_since`]). Bytes too, since a thousand 2.5 MB writes are
    /// under any count bound.
    pub fn compact_log(&mut self, keep: usize, keep_bytes: usize) {
        if let Some(newest_dropped) = self.log.compact(keep, keep_bytes) {
            self.compacted = newest_dropped;
        }
    }

    /// The watch log's size, about, as JSON.
    pub fn log_bytes(&self) -> usize {
        self.log.bytes
    }

    /// Whether every event after `since` is still in the log.
    pub fn watchable_since(&self, since: u64) -> bool {
        since >= self.compacted
    }

    /// The oldest resourceVersion a watch can start from.
    pub(crate) fn oldest_watchable(&self) -> u64 {
        self.compacted
    }

    /// Deletes an object and, as Kubernetes' garbage collector does, every object it owns
    /// (by `metadata.ownerReferences[].uid`), theirs in turn. Returns the object named.
    pub(crate) fn delete_cascading(
        &mut self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Object, ApiError> {
        let deleted = self.delete(kind, namespace, name)?;
        let mut owners = vec![deleted.value["metadata"]["uid"].clone()];
        while let Some(uid) = owners.pop() {
            if uid.is_null() {
                continue;
            }
            let owned: Vec<ObjectKey> = uid
                .as_str()
                .and_then(|u| self.owned.get(u))
                .into_iter()
                .flatten()
                .cloned()
                .collect();
            for key in owned {
                let gone = self.delete(key.kind, &key.namespace, &key.name)?;
                owners.push(gone.value["metadata"]["uid"].clone());
            }
        }
        Ok(deleted)
    }

    /// Watch events with a resourceVersion greater than `since` (0 = the whole history).
    pub fn events_since(&self, since: u64) -> &[WatchEvent] {
        let start = self
            .log
            .events
            .partition_point(|e| e.resource_version <= since);
        &self.log.events[start..]
    }

    /// etcd's limit on `object` as it will be stored: with the resourceVersion it will get.
    fn check_size(&self, object: &mut Object) -> Result<(), ApiError> {
        object.metadata_mut().insert(
            "resourceVersion".into(),
            Value::String((self.resource_version + 1).to_string()),
        );
        if fits_in_etcd(&object.value) {
            Ok(())
        } else {
            Err(ApiError::TooLarge)
        }
    }

    fn store(&mut self, key: ObjectKey, mut object: Object, event_type: EventType) -> ObjectKey {
        self.resource_version += 1;
        self.kind_changed.insert(key.kind, self.resource_version);
        object.metadata_mut().insert(
            "resourceVersion".into(),
            Value::String(self.resource_version.to_string()),
        );
        if !self.keep_log {
            self.compacted = self.resource_version;
        } else {
            self.log.push(WatchEvent {
                event_type,
                resource_version: self.resource_version,
                time: self.now,
                object: object.clone(),
            });
        }
        let owners = compact::owner_uids(&object);
        self.index_owners(&key, Some(owners), self.resource_version);
        let stored = Stored::new(object, &mut self.interner);
        self.objects.insert(key.clone(), stored);
        key
    }

    /// Updates the owner index for `key` as it becomes `next` (None: deleted) at
    /// resourceVersion `version`.
    fn index_owners(&mut self, key: &ObjectKey, next: Option<Vec<String>>, version: u64) {
        let before = self
            .objects
            .get(key)
            .map(Stored::owner_uids)
            .unwrap_or_default();
        let after = next.unwrap_or_default();
        for uid in before.iter().chain(&after) {
            match self.children_changed.get_mut(uid) {
                Some(at) => *at = version,
                None => {
                    self.children_changed.insert(uid.clone(), version);
                }
            }
        }
        if before == after {
            return;
        }
        for uid in before {
            if let Some(set) = self.owned.get_mut(&uid) {
                set.remove(key);
                if set.is_empty() {
                    self.owned.remove(&uid);
                }
            }
        }
        for uid in after {
            self.owned.entry(uid).or_default().insert(key.clone());
        }
    }

    /// The resourceVersion of the last write to an object of `kind` (0: none yet).
    /// Unchanged, every object of the kind is as it was.
    /// The kinds of every object ever stored.
    pub fn kinds(&self) -> impl Iterator<Item = Kind> + '_ {
        self.kind_changed.keys().copied()
    }

    pub(crate) fn kind_changed_at(&self, kind: Kind) -> u64 {
        self.kind_changed.get(&kind).copied().unwrap_or(0)
    }

    /// Writes `status` into the stored object in place, as [`ApiServer::update_status`]
    /// with the stored resourceVersion would, without copying the object (a kubelet
    /// marking thousands of pods Ready). Returns whether anything changed.
    pub(crate) fn set_status(
        &mut self,
        kind: Kind,
        namespace: &str,
        name: &str,
        status: Value,
    ) -> Result<bool, ApiError> {
        // One lookup: the object is taken out of its slot for the write and put back.
        let slot = self
            .objects
            .get_mut(&ObjectKey::new(kind, namespace, name))
            .ok_or_else(|| ApiError::not_found(kind, name))?;
        let version = self.resource_version + 1;
        // A Pod stored serialized is written without decoding it.
        let status_json = serde_json::to_vec(&status).unwrap_or_default();
        let spliced = match slot.status_is(&status, &status_json) {
            Some(true) => return Ok(false),
            Some(false) => slot.splice_status(&status, &status_json, version, &mut self.interner),
            None => false,
        };
        // The object for the watch log, when it is kept.
        let logged = if spliced {
            self.keep_log.then(|| slot.to_object())
        } else {
            if slot.object().value.get("status") == Some(&status) {
                return Ok(false);
            }
            let taken = std::mem::replace(slot, Stored::Whole(Object::new(kind, Value::Null)));
            let mut object = taken.into_object();
            let map = crate::model::object::ensure_object(&mut object.value);
            map.insert("status".into(), status);
            object
                .metadata_mut()
                .insert("resourceVersion".into(), Value::String(version.to_string()));
            let logged = self.keep_log.then(|| object.clone());
            *slot = Stored::new(object, &mut self.interner);
            logged
        };
        let owners = slot.owner_uids();
        self.resource_version = version;
        self.kind_changed.insert(kind, version);
        for uid in owners {
            self.children_changed.insert(uid, version);
        }
        match logged {
            None => self.compacted = version,
            Some(object) => self.log.push(WatchEvent {
                event_type: EventType::Modified,
                resource_version: version,
                time: self.now,
                object,
            }),
        }
        Ok(true)
    }

    /// The resourceVersion of the last write to an object naming `owner_uid` among its
    /// owners (0: none yet). Unchanged, the owner's children are as they were.
    pub(crate) fn children_changed_at(&self, owner_uid: &str) -> u64 {
        self.children_changed.get(owner_uid).copied().unwrap_or(0)
    }

    /// Objects of `kind` in `namespace` that name `owner_uid` among their owners, ordered by
    /// name.
    pub fn owned_by(&self, kind: Kind, namespace: &str, owner_uid: &str) -> Vec<&Object> {
        self.owned_keys(kind, namespace, owner_uid)
            .filter_map(|k| self.objects.get(k))
            .map(Stored::object)
            .collect()
    }
}

/// Applies an RFC 6902 JSON patch to `value`, or says why it cannot. The caller patches a
/// copy and drops it on error, so json-patch's undo is not used: its `move` removes the
/// source before adding it, and undoing after an `add` that then fails panics.
pub(crate) fn apply_json_patch(value: &mut Value, patch: &Value) -> Result<(), String> {
    let ops: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(|e| format!("invalid JSON patch: {e}"))?;
    json_patch::patch_unsafe(value, &ops)
        .map_err(|e| format!("the JSON patch cannot be applied: {e}"))
}

/// Whether anything outside `metadata` and `status` differs (what bumps `generation`).
fn spec_changed(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| k.as_str() != "metadata" && k.as_str() != "status")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    strip(a) != strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vs(name: &str) -> Object {
        Object::new(
            Kind::VirtualService,
            json!({
                "apiVersion": "networking.istio.io/v1alpha3",
                "kind": "VirtualService",
                "metadata": {"name": name, "namespace": "demo"},
                "spec": {"http": [{"name": "primary", "retries": {"attempts": 3},
                    "route": [{"destination": {"host": "stable"}, "weight": 100},
                              {"destination": {"host": "canary"}, "weight": 0}]}]}
            }),
        )
    }

    #[test]
    fn the_watch_log_is_compacted_by_bytes_as_well_as_by_count() {
        let mut api = ApiServer::new();
        let mut object = vs("big");
        object.value["spec"]["blob"] = json!("x".repeat(1 << 20));
        api.create(object.clone()).unwrap();
        for i in 0..20u8 {
            let letter = char::from(b'a' + i);
            object.value["spec"]["blob"] = json!(letter.to_string().repeat(1 << 20));
            object.metadata_mut().remove("resourceVersion");
            api.update(object.clone()).unwrap();
        }
        assert!(api.log_bytes() > 20 << 20, "{}", api.log_bytes());
        api.compact_log(10_000, 5 << 20);
        assert!(api.log_bytes() <= 5 << 20, "{}", api.log_bytes());
        assert_eq!(
            api.events_since(0).len(),
            4,
            "four 1 MiB events fit in 5 MiB"
        );
        assert!(!api.watchable_since(1) && api.watchable_since(api.oldest_watchable()));
        // The newest event stays, however large.
        api.compact_log(10_000, 1);
        assert_eq!(api.events_since(0).len(), 1);
    }

    #[test]
    fn an_object_over_etcds_limit_is_refused_as_kubernetes_refuses_it() {
        let mut api = ApiServer::new();
        let mut object = vs("big");
        let created = api.create(object.clone()).unwrap();
        // Grown to just under the limit, then one byte past it, by create, update and patch.
        let size = |o: &Object| serde_json::to_vec(&o.value).unwrap().len();
        let room = MAX_OBJECT_BYTES - size(&created) - r#","blob":"""#.len();
        object.value["spec"]["blob"] = json!("x".repeat(room));
        assert_eq!(size(&api.update(object.clone()).unwrap()), MAX_OBJECT_BYTES);
        object.value["spec"]["blob"] = json!("x".repeat(room + 1));
        let err = api.update(object.clone()).unwrap_err();
        assert_eq!(err.to_string(), "etcdserver: request is too large");
        assert_eq!(err.code(), 413);
        let patch = Patch::Merge(json!({"spec": {"blob": "x".repeat(room + 1)}}));
        let err = api
            .patch(Kind::VirtualService, "demo", "big", &patch)
            .unwrap_err();
        assert!(matches!(err, ApiError::TooLarge), "{err}");
        object.metadata_mut().insert("name".into(), json!("bigger"));
        assert!(matches!(api.create(object), Err(ApiError::TooLarge)));
        // The refused writes left the stored object as it was.
        let stored = api.get(Kind::VirtualService, "demo", "big").unwrap();
        assert_eq!(stored.value["spec"]["blob"].as_str().unwrap().len(), room);
    }

    #[test]
    fn not_found_is_worded_as_kubernetes_words_it() {
        let api = ApiServer::new();
        let err = api.get(Kind::VirtualService, "demo", "x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "virtualservices.networking.istio.io \"x\" not found"
        );
        assert_eq!(err.code(), 404);
    }

    #[test]
    fn create_sets_server_metadata_and_rejects_duplicates() {
        let mut api = ApiServer::new();
        let o = api.create(vs("a")).unwrap();
        assert_eq!(o.resource_version(), "1");
        assert_eq!(o.generation(), 1);
        assert_eq!(o.creation_timestamp(), "2026-01-01T00:00:00Z");
        let err = api.create(vs("a")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "virtualservices.networking.istio.io \"a\" already exists"
        );
    }

    /// A Pod as users and the kubelet write it, with what canarysim does not read: key
    /// order, floats, large integers, unicode and nulls must come back as written.
    fn odd_pod() -> Object {
        Object::new(
            Kind::Pod,
            json!({
                "kind": "Pod", "apiVersion": "v1",
                "metadata": {"name": "p", "namespace": "demo", "labels": {"z": "1", "app": "web"},
                    "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "u-1"}],
                    "x-unknown": {"b": 1.5, "a": 18446744073709551615u64, "c": -7, "d": null}},
                "spec": {"containers": [{"name": "app", "image": "demo:été"}], "weird": [1, "two", 3.25]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [{"ready": true, "restartCount": 2,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
            }),
        )
    }

    #[test]
    fn a_compact_pod_reads_back_exactly_and_its_facts_agree_with_its_json() {
        let mut api = ApiServer::new();
        let written = api.create(odd_pod()).unwrap();
        let mut expected = odd_pod();
        for (field, value) in [
            ("uid", written.uid()),
            ("generation", "1"),
            ("creationTimestamp", written.creation_timestamp()),
            ("resourceVersion", "1"),
        ] {
            let v = if field == "generation" {
                json!(1)
            } else {
                json!(value)
            };
            expected.metadata_mut().insert(field.into(), v);
        }
        assert_eq!(written, expected, "key order and every value kept");
        api.forget_decoded();
        assert_eq!(api.get(Kind::Pod, "demo", "p").unwrap(), &expected);
        assert_eq!(
            serde_json::to_string(&api.get(Kind::Pod, "demo", "p").unwrap().value).unwrap(),
            serde_json::to_string(&expected.value).unwrap()
        );
        let facts = api.pod("demo", "p").unwrap();
        assert!(facts.ready && facts.serving);
        assert_eq!(facts.labels.as_ref(), &expected.labels());
        assert_eq!(facts.image.as_deref(), Some("demo:été"));
        assert_eq!(&*facts.owners, ["u-1".to_string()]);
        assert_eq!(&*facts.status_text, "CrashLoopBackOff");
        assert_eq!((facts.ready_containers, facts.restarts), (1, 2));
        assert_eq!(api.owned_pod_count("demo", "u-1"), 1);

        // A status write is seen by the facts, the JSON and the version.
        let pending =
            json!({"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]});
        assert!(
            api.set_status(Kind::Pod, "demo", "p", pending.clone())
                .unwrap()
        );
        assert!(
            !api.set_status(Kind::Pod, "demo", "p", pending.clone())
                .unwrap(),
            "no-op"
        );
        let facts = api.pod("demo", "p").unwrap();
        assert!(!facts.ready && !facts.serving);
        assert_eq!(&*facts.status_text, "Pending");
        let pod = api.get(Kind::Pod, "demo", "p").unwrap();
        assert_eq!(pod.status(), &pending);
        assert_eq!(pod.resource_version(), "2");
        assert_eq!(
            pod.value["metadata"]["x-unknown"],
            expected.value["metadata"]["x-unknown"]
        );
        // Written in place (not decoded), the JSON is the one a whole write gives, byte for
        // byte; the same status with its keys in another order is no change.
        let mut whole = expected.clone();
        whole.value["status"] = pending.clone();
        whole
            .metadata_mut()
            .insert("resourceVersion".into(), json!("2"));
        api.forget_decoded();
        assert_eq!(
            serde_json::to_string(&api.get(Kind::Pod, "demo", "p").unwrap().value).unwrap(),
            serde_json::to_string(&whole.value).unwrap()
        );
        let reordered =
            json!({"conditions": [{"status": "False", "type": "Ready"}], "phase": "Pending"});
        assert!(!api.set_status(Kind::Pod, "demo", "p", reordered).unwrap());
        // Deleted quietly, it is gone from the facts and the owner index.
        api.delete_quietly(Kind::Pod, "demo", "p").unwrap();
        assert!(api.pod("demo", "p").is_none());
        assert_eq!(api.owned_pod_count("demo", "u-1"), 0);
    }

    #[test]
    fn a_status_written_before_the_metadata_is_replaced_in_place_too() {
        let mut api = ApiServer::new();
        let pod = Object::new(
            Kind::Pod,
            json!({"status": {"phase": "Pending"}, "kind": "Pod", "apiVersion": "v1",
                   "metadata": {"name": "p", "namespace": "demo"}, "spec": {}}),
        );
        api.create(pod).unwrap();
        api.forget_decoded();
        let running = json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}]});
        assert!(
            api.set_status(Kind::Pod, "demo", "p", running.clone())
                .unwrap()
        );
        let facts = api.pod("demo", "p").unwrap();
        assert!(facts.ready && facts.serving);
        assert_eq!(&*facts.status_text, "Running");
        assert_eq!(
            facts.ready_since,
            SimTime::parse_rfc3339("2026-01-01T00:00:05Z")
        );
        let read = api.get(Kind::Pod, "demo", "p").unwrap();
        let keys: Vec<&String> = read.value.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["status", "kind", "apiVersion", "metadata", "spec"]);
        assert_eq!(read.status(), &running);
        assert_eq!(read.resource_version(), "2");
    }

    #[test]
    fn stale_resource_version_conflicts() {
        let mut api = ApiServer::new();
        let first = api.create(vs("a")).unwrap();
        let mut second = first.clone();
        second.value["spec"]["http"][0]["route"][0]["weight"] = json!(80);
        second.value["spec"]["http"][0]["route"][1]["weight"] = json!(20);
        let written = api.update(second).unwrap();
        assert_eq!(written.generation(), 2);
        let mut stale = first;
        stale.value["spec"]["hosts"] = json!(["x"]);
        let err = api.update(stale).unwrap_err();
        assert_eq!(err.code(), 409);
        assert!(err.to_string().starts_with(
            "Operation cannot be fulfilled on virtualservices.networking.istio.io \"a\": the object has been modified"
        ));
    }

    #[test]
    fn merge_patch_keeps_fields_it_does_not_name() {
        let mut api = ApiServer::new();
        api.create(vs("a")).unwrap();
        let o = api
            .patch(
                Kind::VirtualService,
                "demo",
                "a",
                &Patch::Merge(json!({"metadata": {"annotations": {"x": "y"}}})),
            )
            .unwrap();
        assert_eq!(o.annotation("x"), Some("y"));
        assert_eq!(o.spec()["http"][0]["retries"]["attempts"], 3);
        assert_eq!(o.generation(), 1, "metadata-only change keeps generation");
    }

    #[test]
    fn json_patch_replaces_a_weight_and_bumps_generation() {
        let mut api = ApiServer::new();
        api.create(vs("a")).unwrap();
        let o = api
            .patch(
                Kind::VirtualService,
                "demo",
                "a",
                &Patch::Json(json!([
                    {"op": "replace", "path": "/spec/http/0/route/0/weight", "value": 80},
                    {"op": "replace", "path": "/spec/http/0/route/1/weight", "value": 20}
                ])),
            )
            .unwrap();
        assert_eq!(o.spec()["http"][0]["route"][1]["weight"], 20);
        assert_eq!(o.generation(), 2);
        let err = api
            .patch(
                Kind::VirtualService,
                "demo",
                "a",
                &Patch::Json(
                    json!([{"op": "test", "path": "/spec/http/0/name", "value": "other"}]),
                ),
            )
            .unwrap_err();
        assert_eq!(err.code(), 422);
        // A move whose source is removed before its target turns out not to exist.
        let err = api
            .patch(
                Kind::VirtualService,
                "demo",
                "a",
                &Patch::Json(json!([
                    {"op": "replace", "path": "/spec/http/0/route/0/weight", "value": 70},
                    {"op": "move", "from": "/spec", "path": "/no such/key"}
                ])),
            )
            .unwrap_err();
        assert_eq!(err.code(), 422);
        let kept = api.get(Kind::VirtualService, "demo", "a").unwrap();
        assert_eq!(kept.spec()["http"][0]["route"][0]["weight"], 80);
    }

    #[test]
    fn status_update_leaves_spec_and_generation_alone() {
        let mut api = ApiServer::new();
        let o = api.create(vs("a")).unwrap();
        let mut with_status = o.clone();
        with_status.value["status"] = json!({"x": 1});
        with_status.value["spec"] = json!({});
        let w = api.update_status(with_status).unwrap();
        assert_eq!(w.status()["x"], 1);
        assert_eq!(w.spec()["http"][0]["name"], "primary");
        assert_eq!(w.generation(), 1);
    }

    #[test]
    fn noop_update_writes_nothing() {
        let mut api = ApiServer::new();
        let o = api.create(vs("a")).unwrap();
        let again = api.update(o.clone()).unwrap();
        assert_eq!(again.resource_version(), "1");
        assert_eq!(api.events_since(0).len(), 1);
    }

    #[test]
    fn list_filters_by_namespace_and_labels_and_watch_replays_history() {
        let mut api = ApiServer::new();
        let mut a = vs("a");
        a.metadata_mut()
            .insert("labels".into(), json!({"app": "x"}));
        api.create(a).unwrap();
        api.create(vs("b")).unwrap();
        let sel: BTreeMap<_, _> = [("app".to_string(), "x".to_string())].into();
        let names: Vec<_> = api
            .list(Kind::VirtualService, Some("demo"), Some(&sel))
            .iter()
            .map(|o| o.name().to_string())
            .collect();
        assert_eq!(names, ["a"]);
        assert!(
            api.list(Kind::VirtualService, Some("other"), None)
                .is_empty()
        );
        api.delete(Kind::VirtualService, "demo", "b").unwrap();
        let types: Vec<_> = api.events_since(1).iter().map(|e| e.event_type).collect();
        assert_eq!(types, [EventType::Added, EventType::Deleted]);
    }
}
