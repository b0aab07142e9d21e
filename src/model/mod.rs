//! Kubernetes and Istio objects: lossless values, typed views, YAML loading.

pub mod duration;
pub mod istio;
pub mod object;
pub mod rollout;
pub mod support;
pub mod vocabulary;
pub mod yaml;

pub use object::{Kind, Object, ObjectKey};
pub use yaml::{LoadError, Location, Manifest, SourceMap};

/// Read access to a cluster's objects by kind, ordered by namespace and name: all the data
/// plane needs (the in-process API server is one; a plain snapshot, [`ObjectSet`], another).
pub trait Objects {
    fn objects(&self, kind: Kind) -> Vec<&Object>;

    /// One object by kind, namespace and name.
    fn object(&self, kind: Kind, namespace: &str, name: &str) -> Option<&Object> {
        self.objects(kind)
            .into_iter()
            .find(|o| o.namespace() == namespace && o.name() == name)
    }
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
