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
