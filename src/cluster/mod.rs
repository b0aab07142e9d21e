//! A real cluster, or `canarysim serve --api` standing in for one: the kube-rs client,
//! configured as kubectl configures itself (`--kubeconfig`, `KUBECONFIG`, `~/.kube/config`,
//! then the in-cluster service account; `--context`; the context's namespace), and what
//! canarysim does with it: [`follow`] verifies each step of a real rollout at the real
//! gateway (`canarysim watch`), [`snapshot`] copies a namespace's rollout into a scenario
//! (`canarysim snapshot`).
//!
//! Read-only: the one write anywhere is `watch --abort-on-fail`'s abort patch, the patch
//! `kubectl argo rollouts abort` sends. Secrets are never read.

pub mod follow;
pub mod snapshot;

use std::path::PathBuf;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::model::{Kind, Object, ObjectKey};

/// Where the cluster is, as kubectl's flags say it.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// `--kubeconfig` (None: `KUBECONFIG`, `~/.kube/config`, then in-cluster).
    pub kubeconfig: Option<PathBuf>,
    /// `--context` (None: the current context).
    pub context: Option<String>,
    /// `-n` (None: the context's namespace, else `default`).
    pub namespace: Option<String>,
}

/// Why the cluster cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot read kubeconfig {0}: {1}")]
    Kubeconfig(PathBuf, String),
    #[error("no cluster configuration: {0}")]
    Config(String),
    #[error("{0}")]
    Api(String),
    #[error("cannot start the client's runtime: {0}")]
    Runtime(std::io::Error),
}

/// One object as [`Cluster::get_if_allowed`] reads it.
#[derive(Debug)]
pub enum Lookup {
    Found(Object),
    Missing,
    Forbidden,
}

/// A connected client, its namespace, and the runtime its requests run on (one worker, so a
/// watch keeps reading while the caller's thread sends a load).
pub struct Cluster {
    runtime: tokio::runtime::Runtime,
    client: kube::Client,
    namespace: String,
}

impl Cluster {
    pub fn connect(options: &ClusterOptions) -> Result<Cluster, ClusterError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(ClusterError::Runtime)?;
        let config = runtime.block_on(config(options))?;
        let namespace = options
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = {
            let _entered = runtime.enter();
            kube::Client::try_from(config).map_err(|e| ClusterError::Config(e.to_string()))?
        };
        Ok(Cluster {
            runtime,
            client,
            namespace,
        })
    }

    /// The namespace `-n` or the context names.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// One object (None: not found).
    pub fn get(&self, key: &ObjectKey) -> Result<Option<Object>, ClusterError> {
        self.get_served(key)
            .map_err(|e| api_error(key.kind, &key.path(), e))
    }

    fn get_served(&self, key: &ObjectKey) -> Result<Option<Object>, kube::Error> {
        let api = self.api(key.kind, &key.namespace);
        let found = self.runtime.block_on(api.get_opt(&key.name))?;
        Ok(found.map(|d| object(key.kind, &d)))
    }

    /// [`Self::get`], or [`Lookup::Forbidden`] when the caller may not read the object (403:
    /// a role limited to its own namespace reading a Gateway in `istio-system`).
    pub fn get_if_allowed(&self, key: &ObjectKey) -> Result<Lookup, ClusterError> {
        match self.get_served(key) {
            Ok(Some(found)) => Ok(Lookup::Found(found)),
            Ok(None) => Ok(Lookup::Missing),
            Err(kube::Error::Api(e)) if e.code == 403 => Ok(Lookup::Forbidden),
            Err(e) => Err(api_error(key.kind, &key.path(), e)),
        }
    }

    /// Every object of a kind in a namespace; none when the cluster does not serve the
    /// kind (no Istio, no Gateway API CRDs: 404).
    pub fn list(&self, kind: Kind, namespace: &str) -> Result<Vec<Object>, ClusterError> {
        self.list_served(kind, namespace)
            .map_err(|e| api_error(kind, "", e))
    }

    fn list_served(&self, kind: Kind, namespace: &str) -> Result<Vec<Object>, kube::Error> {
        let api = self.api(kind, namespace);
        match self.runtime.block_on(api.list(&ListParams::default())) {
            Ok(list) => Ok(list.items.iter().map(|d| object(kind, d)).collect()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// [`Self::list`], or None when the caller may not list the kind (403: a role limited
    /// to some kinds, or to its namespace for a cluster-scoped kind).
    pub fn list_if_allowed(
        &self,
        kind: Kind,
        namespace: &str,
    ) -> Result<Option<Vec<Object>>, ClusterError> {
        match self.list_served(kind, namespace) {
            Ok(found) => Ok(Some(found)),
            Err(kube::Error::Api(e)) if e.code == 403 => Ok(None),
            Err(e) => Err(api_error(kind, "", e)),
        }
    }

    /// A merge patch on an object's status subresource.
    pub fn patch_status(
        &self,
        key: &ObjectKey,
        patch: serde_json::Value,
    ) -> Result<(), ClusterError> {
        let api = self.api(key.kind, &key.namespace);
        let params = kube::api::PatchParams::default();
        self.runtime
            .block_on(api.patch_status(&key.name, &params, &kube::api::Patch::Merge(patch)))
            .map_err(|e| api_error(key.kind, &key.path(), e))?;
        Ok(())
    }

    /// The dynamic API of a kind, at the version clusters serve most widely (the namespace
    /// is not used for a cluster-scoped kind).
    fn api(&self, kind: Kind, namespace: &str) -> Api<DynamicObject> {
        let (group, version) = (kind.group(), served_version(kind));
        let gvk = GroupVersionKind::gvk(group, version, kind.as_str());
        let resource = ApiResource::from_gvk_with_plural(&gvk, kind.plural());
        let cluster_scoped = match kind {
            Kind::ClusterAnalysisTemplate => true,
            Kind::Stored(s) => !s.info().namespaced,
            _ => false,
        };
        match cluster_scoped {
            true => Api::all_with(self.client.clone(), &resource),
            false => Api::namespaced_with(self.client.clone(), namespace, &resource),
        }
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    fn spawn<F>(&self, f: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime.spawn(f)
    }
}

/// kubectl's order: an explicit kubeconfig (with its context), else `KUBECONFIG` or
/// `~/.kube/config`, else the pod's service account.
async fn config(options: &ClusterOptions) -> Result<kube::Config, ClusterError> {
    let wanted = KubeConfigOptions {
        context: options.context.clone(),
        ..KubeConfigOptions::default()
    };
    match (&options.kubeconfig, &options.context) {
        (Some(path), _) => {
            let file = Kubeconfig::read_from(path)
                .map_err(|e| ClusterError::Kubeconfig(path.clone(), e.to_string()))?;
            kube::Config::from_custom_kubeconfig(file, &wanted)
                .await
                .map_err(|e| ClusterError::Kubeconfig(path.clone(), e.to_string()))
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&wanted)
            .await
            .map_err(|e| ClusterError::Config(e.to_string())),
        (None, None) => kube::Config::infer()
            .await
            .map_err(|e| ClusterError::Config(e.to_string())),
    }
}

/// The version asked for: Argo's v1alpha1, Istio's v1beta1 (served since Istio 1.5), the
/// Gateway API's preferred one, Kubernetes' own.
fn served_version(kind: Kind) -> &'static str {
    match kind {
        Kind::Rollout
        | Kind::AnalysisTemplate
        | Kind::ClusterAnalysisTemplate
        | Kind::AnalysisRun
        | Kind::Experiment => "v1alpha1",
        Kind::VirtualService | Kind::DestinationRule | Kind::Gateway => "v1beta1",
        Kind::Service | Kind::Pod | Kind::ReplicaSet => "v1",
        Kind::Stored(s) => s.info().versions.first().copied().unwrap_or("v1"),
    }
}

fn object(kind: Kind, dynamic: &DynamicObject) -> Object {
    Object::new(kind, serde_json::to_value(dynamic).unwrap_or_default())
}

/// The error of a request for one object (`path`: `namespace/name`), or for a list (`""`).
fn api_error(kind: Kind, path: &str, e: kube::Error) -> ClusterError {
    let what = match path {
        "" => kind.plural().to_string(),
        path => format!("{} {path}", kind.as_str()),
    };
    ClusterError::Api(format!("{what}: {e}"))
}
