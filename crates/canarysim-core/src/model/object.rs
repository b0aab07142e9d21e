//! Kubernetes objects as lossless JSON values.
//!
//! canarysim stores every object as the JSON value the user wrote (key order kept), and reads
//! the parts it interprets through typed views. That is how Argo Rollouts treats Istio objects
//! (unstructured), and it is what guarantees that fields canarysim does not know survive every
//! patch.

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

pub use super::stored_kind::StoredKind;

/// The kinds canarysim simulates, and the kinds it only stores ([`StoredKind`]: a
/// ConfigMap, an HPA, a CRD's object). A typo in `kind` is refused, never stored
/// ([`super::stored_kind::resolve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Rollout,
    Service,
    VirtualService,
    DestinationRule,
    Gateway,
    ReplicaSet,
    Pod,
    /// Argo's analysis and experiment kinds: stored (a scenario may carry them beside its
    /// Rollout) but not evaluated; see [`crate::model::support`].
    AnalysisTemplate,
    ClusterAnalysisTemplate,
    AnalysisRun,
    Experiment,
    /// Kept as written and served, but not acted upon.
    Stored(StoredKind),
}

impl Kind {
    /// The kinds canarysim simulates.
    pub const SIMULATED: [Kind; 11] = [
        Kind::Rollout,
        Kind::Service,
        Kind::VirtualService,
        Kind::DestinationRule,
        Kind::Gateway,
        Kind::ReplicaSet,
        Kind::Pod,
        Kind::AnalysisTemplate,
        Kind::ClusterAnalysisTemplate,
        Kind::AnalysisRun,
        Kind::Experiment,
    ];

    /// The `kind:` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Rollout => "Rollout",
            Kind::Service => "Service",
            Kind::VirtualService => "VirtualService",
            Kind::DestinationRule => "DestinationRule",
            Kind::Gateway => "Gateway",
            Kind::ReplicaSet => "ReplicaSet",
            Kind::Pod => "Pod",
            Kind::AnalysisTemplate => "AnalysisTemplate",
            Kind::ClusterAnalysisTemplate => "ClusterAnalysisTemplate",
            Kind::AnalysisRun => "AnalysisRun",
            Kind::Experiment => "Experiment",
            Kind::Stored(s) => s.info().kind,
        }
    }

    /// The simulated kind named `kind`.
    pub fn parse(kind: &str) -> Option<Kind> {
        Kind::SIMULATED.into_iter().find(|k| k.as_str() == kind)
    }

    /// Whether canarysim only stores objects of this kind.
    pub fn is_stored_only(self) -> bool {
        matches!(self, Kind::Stored(_))
    }

    /// API group ("" for the core group).
    pub fn group(self) -> &'static str {
        match self {
            Kind::Rollout
            | Kind::AnalysisTemplate
            | Kind::ClusterAnalysisTemplate
            | Kind::AnalysisRun
            | Kind::Experiment => "argoproj.io",
            Kind::Service | Kind::Pod => "",
            Kind::VirtualService | Kind::DestinationRule | Kind::Gateway => "networking.istio.io",
            Kind::ReplicaSet => "apps",
            Kind::Stored(s) => s.info().group,
        }
    }

    /// apiVersions accepted for this kind.
    pub(crate) fn accepts_api_version(self, api_version: &str) -> bool {
        match self {
            Kind::Rollout
            | Kind::AnalysisTemplate
            | Kind::ClusterAnalysisTemplate
            | Kind::AnalysisRun
            | Kind::Experiment => api_version == "argoproj.io/v1alpha1",
            Kind::Service | Kind::Pod => api_version == "v1",
            Kind::ReplicaSet => api_version == "apps/v1",
            Kind::VirtualService | Kind::DestinationRule | Kind::Gateway => matches!(
                api_version,
                "networking.istio.io/v1alpha3"
                    | "networking.istio.io/v1beta1"
                    | "networking.istio.io/v1"
            ),
            Kind::Stored(s) => {
                let info = s.info();
                let version = match api_version.split_once('/') {
                    Some((group, version)) if group == info.group => version,
                    None if info.group.is_empty() => api_version,
                    _ => return false,
                };
                // A kind nothing describes is served at any version written.
                info.guessed || info.versions.contains(&version)
            }
        }
    }

    /// The apiVersion canarysim writes for objects it creates.
    pub(crate) fn default_api_version(self) -> String {
        let text = match self {
            Kind::Rollout
            | Kind::AnalysisTemplate
            | Kind::ClusterAnalysisTemplate
            | Kind::AnalysisRun
            | Kind::Experiment => "argoproj.io/v1alpha1",
            Kind::Service | Kind::Pod => "v1",
            Kind::ReplicaSet => "apps/v1",
            Kind::VirtualService | Kind::DestinationRule | Kind::Gateway => {
                "networking.istio.io/v1"
            }
            Kind::Stored(s) => {
                let info = s.info();
                let version = info.versions.first().copied().unwrap_or("v1");
                return match info.group {
                    "" => version.to_string(),
                    group => format!("{group}/{version}"),
                };
            }
        };
        text.to_string()
    }

    /// Whether objects of this kind live in a namespace (ClusterAnalysisTemplates do not).
    pub(crate) fn namespaced(self) -> bool {
        match self {
            Kind::ClusterAnalysisTemplate => false,
            Kind::Stored(s) => s.info().namespaced,
            _ => true,
        }
    }

    /// Lower-case plural resource name, as in REST paths.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Rollout => "rollouts",
            Kind::Service => "services",
            Kind::VirtualService => "virtualservices",
            Kind::DestinationRule => "destinationrules",
            Kind::Gateway => "gateways",
            Kind::ReplicaSet => "replicasets",
            Kind::Pod => "pods",
            Kind::AnalysisTemplate => "analysistemplates",
            Kind::ClusterAnalysisTemplate => "clusteranalysistemplates",
            Kind::AnalysisRun => "analysisruns",
            Kind::Experiment => "experiments",
            Kind::Stored(s) => s.info().plural,
        }
    }

    /// `virtualservices.networking.istio.io`, `services`: the name Kubernetes uses in errors.
    pub fn qualified_resource(self) -> String {
        if self.group().is_empty() {
            self.plural().to_string()
        } else {
            format!("{}.{}", self.plural(), self.group())
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Identity of an object in the store.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(kind: Kind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectKey {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// `namespace/name`, or `name` for a cluster-scoped object.
    pub fn path(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}

/// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.path())
    }
}

/// A Kubernetes object: the full JSON value plus its kind. Accessors never panic; a missing
/// field reads as empty.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub kind: Kind,
    pub value: Value,
}

impl Object {
    /// Wraps a value whose `kind` is known to be `kind`.
    pub fn new(kind: Kind, value: Value) -> Self {
        Object { kind, value }
    }

    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(self.kind, self.namespace(), self.name())
    }

    pub fn metadata(&self) -> Option<&Map<String, Value>> {
        self.value.get("metadata").and_then(Value::as_object)
    }

    /// `metadata`, created if missing.
    pub(crate) fn metadata_mut(&mut self) -> &mut Map<String, Value> {
        ensure_object(object_entry(&mut self.value, "metadata"))
    }

    pub fn name(&self) -> &str {
        self.meta_str("name")
    }

    pub fn namespace(&self) -> &str {
        self.meta_str("namespace")
    }

    pub fn uid(&self) -> &str {
        self.meta_str("uid")
    }

    pub fn resource_version(&self) -> &str {
        self.meta_str("resourceVersion")
    }

    pub fn generation(&self) -> i64 {
        self.metadata()
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }

    pub(crate) fn creation_timestamp(&self) -> &str {
        self.meta_str("creationTimestamp")
    }

    fn meta_str(&self, field: &str) -> &str {
        self.metadata()
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub fn labels(&self) -> BTreeMap<String, String> {
        string_map(self.metadata().and_then(|m| m.get("labels")))
    }

    pub fn annotations(&self) -> BTreeMap<String, String> {
        string_map(self.metadata().and_then(|m| m.get("annotations")))
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata()
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
    }

    pub fn spec(&self) -> &Value {
        self.value.get("spec").unwrap_or(&Value::Null)
    }

    pub fn status(&self) -> &Value {
        self.value.get("status").unwrap_or(&Value::Null)
    }

    /// Decodes a typed view of `spec` (fields the view does not know are ignored, not lost:
    /// the object itself is never rebuilt from the view).
    pub fn spec_as<T: serde::de::DeserializeOwned + Default>(
        &self,
    ) -> Result<T, serde_json::Error> {
        match self.value.get("spec") {
            None | Some(Value::Null) => Ok(T::default()),
            Some(v) => T::deserialize(v),
        }
    }

    /// Decodes a typed view of `status`.
    pub fn status_as<T: serde::de::DeserializeOwned + Default>(
        &self,
    ) -> Result<T, serde_json::Error> {
        match self.value.get("status") {
            None | Some(Value::Null) => Ok(T::default()),
            Some(v) => T::deserialize(v),
        }
    }
}

/// Reads a `{string: string}` map, skipping non-string values.
pub(crate) fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `labels` satisfies an equality selector (every selector pair present).
pub(crate) fn selector_matches(
    selector: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// `value[key]`, inserting `{}` when `value` is an object without that key. A non-object
/// `value` is replaced by an object first.
pub(crate) fn object_entry<'a>(value: &'a mut Value, key: &str) -> &'a mut Value {
    ensure_object(value)
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()))
}

/// Turns `value` into an object if it is not one, and returns the map.
pub(crate) fn ensure_object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn qualified_resource_names_match_kubernetes_wording() {
        assert_eq!(
            Kind::VirtualService.qualified_resource(),
            "virtualservices.networking.istio.io"
        );
        assert_eq!(Kind::Service.qualified_resource(), "services");
        assert_eq!(Kind::ReplicaSet.qualified_resource(), "replicasets.apps");
        assert_eq!(Kind::Rollout.qualified_resource(), "rollouts.argoproj.io");
    }

    #[test]
    fn a_cluster_scoped_key_is_named_without_a_namespace() {
        let scoped = ObjectKey::new(Kind::Gateway, "istio-system", "public-gateway");
        assert_eq!(scoped.to_string(), "Gateway istio-system/public-gateway");
        let cluster = ObjectKey::new(Kind::ClusterAnalysisTemplate, "", "success-rate");
        assert_eq!(cluster.to_string(), "ClusterAnalysisTemplate success-rate");
    }

    #[test]
    fn accessors_read_missing_fields_as_empty() {
        let o = Object::new(Kind::Service, json!({"kind": "Service"}));
        assert_eq!(o.name(), "");
        assert!(o.labels().is_empty());
        assert_eq!(o.spec(), &Value::Null);
    }

    #[test]
    fn selector_requires_every_pair() {
        let sel: BTreeMap<_, _> = [("app".to_string(), "a".to_string())].into();
        let mut labels = sel.clone();
        assert!(selector_matches(&sel, &labels));
        labels.insert("app".into(), "b".into());
        assert!(!selector_matches(&sel, &labels));
    }
}
