//! Kubernetes and Istio objects: lossless values, typed views, YAML loading.

pub mod duration;
pub mod gateway_api;
pub mod ingress;
pub mod istio;
pub mod kube_validation;
pub mod object;
pub mod rollout;
pub mod stored_kind;
pub mod support;
pub mod typed;
pub mod vocabulary;
pub mod words;
pub mod yaml;

pub use object::{Kind, Object, ObjectKey};
pub use yaml::{LoadError, Location, Manifest, SourceMap};

/// Read access to a cluster's objects by kind, ordered by namespace and name: all the data
/// plane needs (the in-process API server is one; a plain snapshot, [`ObjectSet`], another).
pub trait Objects {
    fn objects(&self, kind: Kind) -> Vec<&Object>;

    /// The Pods that serve traffic (Ready, not being deleted), ordered by namespace and
    /// name. A store that keeps facts about its Pods answers without decoding them.
    fn serving_pods(&self) -> Vec<ServingPod<'_>> {
        self.objects(Kind::Pod)
            .into_iter()
            .filter(|p| vocabulary::pod_is_serving(p))
            .map(|p| ServingPod {
                namespace: p.namespace(),
                name: p.name(),
                labels: std::sync::Arc::new(p.labels()),
                image: p.spec()["containers"][0]["image"].as_str(),
            })
            .collect()
    }

    /// One object by kind, namespace and name.
    fn object(&self, kind: Kind, namespace: &str, name: &str) -> Option<&Object> {
        self.objects(kind)
            .into_iter()
            .find(|o| o.namespace() == namespace && o.name() == name)
    }
}

/// What the data plane reads of a serving Pod.
#[derive(Debug, Clone)]
pub struct ServingPod<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// Shared: the pods of one ReplicaSet have the same labels.
    pub labels: std::sync::Arc<std::collections::BTreeMap<String, String>>,
    /// The first container's image, as the spec names it.
    pub image: Option<&'a str>,
}

/// A plain set of objects (for a data plane built without an API server).
#[derive(Debug, Clone, Default)]
pub struct ObjectSet {
    objects: Vec<Object>,
}

impl ObjectSet {
    pub fn new(mut objects: Vec<Object>) -> ObjectSet {
        objects.sort_by_key(Object::key);
        ObjectSet { objects }
    }
}

impl Objects for ObjectSet {
    fn objects(&self, kind: Kind) -> Vec<&Object> {
        self.objects.iter().filter(|o| o.kind == kind).collect()
    }
}
