//! Service endpoints, as Kubernetes' EndpointSlice controller derives them: every Service's
//! selector resolved to its ready Pods, each Pod labelled with its role in the rollout
//! (stable / canary / other) and its version (the image tag).
//!
//! Both data planes read this catalog — the mesh (istiod builds Envoy clusters from the same
//! EndpointSlices) and kube-proxy — so it lives beside them rather than inside either.
//! It is built once per configuration change; lookups at request time neither allocate nor
//! hash strings.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use crate::model::Objects;
use crate::model::istio::{ServicePort, ServiceSpec};
use crate::model::object::{selector_matches, string_map};
use crate::model::vocabulary::HASH_LABEL;
use crate::model::{Kind, Object, ObjectKey};

/// Kubernetes' cluster domain: Services are `<name>.<namespace>.svc.cluster.local`.
pub(crate) const CLUSTER_DOMAIN_SUFFIX: &str = ".svc.cluster.local";

/// Index of an endpoint in the [`Catalog`] it came from (and in the route table or service
/// proxy built from that catalog).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EndpointId(pub u32);

/// Index of a Service in a [`Catalog`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceId(pub u32);

/// A Pod's part in a rollout, derived from the Rollout's `status.stableRS` and
/// `status.currentPodHash` against the Pod's `rollouts-pod-template-hash` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Stable,
    Canary,
    /// Not owned by a rollout, or an older revision on its way out.
    Other,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Stable => "stable",
            Role::Canary => "canary",
            Role::Other => "other",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One ready Pod that can receive traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub namespace: String,
    pub pod: String,
    pub role: Role,
    /// The tag of the Pod's first container image (`yellow` for `argoproj/rollouts-demo:yellow`).
    pub version: String,
    /// Shared with the other pods of its ReplicaSet.
    pub labels: std::sync::Arc<BTreeMap<String, String>>,
}

/// A Service and its ready endpoints.
#[derive(Debug, Clone)]
pub struct ServiceEndpoints {
    pub namespace: String,
    pub name: String,
    /// `<name>.<namespace>.svc.cluster.local`
    pub fqdn: String,
    pub ports: Vec<ServicePort>,
    /// Ready Pods that the selector matches, ordered by Pod name. A Service without a
    /// selector has none (Kubernetes leaves its endpoints to the user).
    pub endpoints: Vec<EndpointId>,
}

/// Something odd in the objects that was skipped rather than failing the build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub object: ObjectKey,
    pub message: String,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.object, self.message)
    }
}

/// Ready endpoints of every Service in the store.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    endpoints: Vec<Endpoint>,
    /// Ordered by (namespace, name), as the store lists them: lookups binary-search.
    services: Vec<ServiceEndpoints>,
    notes: Vec<Note>,
}

impl Catalog {
    /// Reads Pods, Services and Rollout statuses.
    pub fn from_objects(api: &dyn Objects) -> Catalog {
        let mut notes = Vec::new();
        let rollouts: Vec<RolloutHashes> = api
            .objects(Kind::Rollout)
            .into_iter()
            .map(RolloutHashes::of)
            .collect();
        let endpoints: Vec<Endpoint> = api
            .serving_pods()
            .into_iter()
            .map(|p| Endpoint {
                namespace: p.namespace.to_string(),
                pod: p.name.to_string(),
                role: role_of(p.namespace, &p.labels, &rollouts),
                version: p.image.map(image_version).unwrap_or("").to_string(),
                labels: p.labels,
            })
            .collect();
        let mut services = Vec::new();
        for svc in api.objects(Kind::Service) {
            let spec: ServiceSpec = match svc.spec_as() {
                Ok(s) => s,
                Err(e) => {
                    notes.push(Note {
                        object: svc.key(),
                        message: format!("spec cannot be read ({e}); the Service is skipped"),
                    });
                    continue;
                }
            };
            let ns = svc.namespace();
            let ids = if spec.selector.is_empty() {
                Vec::new()
            } else {
                select(&endpoints, ns, &spec.selector)
            };
            services.push(ServiceEndpoints {
                namespace: ns.to_string(),
                name: svc.name().to_string(),
                fqdn: format!("{}.{ns}{CLUSTER_DOMAIN_SUFFIX}", svc.name()),
                ports: spec.ports,
                endpoints: ids,
            });
        }
        Catalog {
            endpoints,
            services,
            notes,
        }
    }

    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    pub fn endpoint(&self, id: EndpointId) -> Option<&Endpoint> {
        self.endpoints.get(id.0 as usize)
    }

    pub fn services(&self) -> &[ServiceEndpoints] {
        &self.services
    }

    pub fn service(&self, id: ServiceId) -> Option<&ServiceEndpoints> {
        self.services.get(id.0 as usize)
    }

    /// Objects that were skipped while building the catalog.
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// The Service `name` in `namespace`.
    pub fn find(&self, namespace: &str, name: &str) -> Option<ServiceId> {
        self.services
            .binary_search_by(|s| {
                cmp_ci(&s.namespace, namespace).then_with(|| cmp_ci(&s.name, name))
            })
            .ok()
            .map(|i| ServiceId(i as u32))
    }

    /// Resolves a host name as cluster DNS would for a caller in `caller_namespace`:
    /// `svc`, `svc.ns`, `svc.ns.svc` and `svc.ns.svc.cluster.local` (an optional `:port` is
    /// ignored). No allocation.
    pub fn resolve(&self, host: &str, caller_namespace: &str) -> Option<ServiceId> {
        let (name, ns) = split_service_host(strip_port(host), caller_namespace)?;
        self.find(ns, name)
    }

    /// Endpoints in `namespace` whose labels satisfy `selector`.
    pub fn select(&self, namespace: &str, selector: &BTreeMap<String, String>) -> Vec<EndpointId> {
        select(&self.endpoints, namespace, selector)
    }

    /// Gives up the endpoint list (for tables that own their endpoints).
    pub fn into_parts(self) -> (Vec<Endpoint>, Vec<ServiceEndpoints>, Vec<Note>) {
        (self.endpoints, self.services, self.notes)
    }
}

fn select(
    endpoints: &[Endpoint],
    namespace: &str,
    selector: &BTreeMap<String, String>,
) -> Vec<EndpointId> {
    endpoints
        .iter()
        .enumerate()
        .filter(|(_, e)| e.namespace == namespace && selector_matches(selector, &e.labels))
        .map(|(i, _)| EndpointId(i as u32))
        .collect()
}

/// Whether a Pod receives Service traffic: Ready and not being deleted.
pub fn is_serving(pod: &Object) -> bool {
    crate::model::vocabulary::pod_is_serving(pod)
}

/// The Pod's first container image, as its spec names it.
pub fn pod_image(pod: &Object) -> Option<&str> {
    pod.spec()["containers"][0]["image"].as_str()
}

/// The tag of the Pod's first container image; `latest` when the image names none.
pub fn pod_version(pod: &Object) -> &str {
    pod_image(pod).map(image_version).unwrap_or("")
}

pub use crate::model::vocabulary::image_version;

/// What role a Pod with these labels has, from the rollouts in its namespace.
fn role_of(ns: &str, labels: &BTreeMap<String, String>, rollouts: &[RolloutHashes]) -> Role {
    let Some(hash) = labels.get(HASH_LABEL) else {
        return Role::Other;
    };
    for r in rollouts
        .iter()
        .filter(|r| r.namespace == ns && selector_matches(&r.selector, labels))
    {
        if !r.stable.is_empty() && *hash == r.stable {
            return Role::Stable;
        }
        if !r.current.is_empty() && *hash == r.current {
            return Role::Canary;
        }
    }
    Role::Other
}

/// The parts of a Rollout that tell stable from canary Pods.
struct RolloutHashes {
    namespace: String,
    selector: BTreeMap<String, String>,
    stable: String,
    current: String,
}

impl RolloutHashes {
    fn of(r: &Object) -> RolloutHashes {
        let status = r.status();
        RolloutHashes {
            namespace: r.namespace().to_string(),
            selector: string_map(r.spec().get("selector").and_then(|s| s.get("matchLabels"))),
            stable: status["stableRS"].as_str().unwrap_or("").to_string(),
            current: status["currentPodHash"].as_str().unwrap_or("").to_string(),
        }
    }
}

/// `host:80` → `host`, `[::1]:80` → `[::1]` (a trailing `:digits` only; a bare IPv6
/// address is left alone).
pub(crate) fn strip_port(host: &str) -> &str {
    // Fast path: a host with a port ends in a digit.
    if !host.ends_with(|c: char| c.is_ascii_digit()) {
        return host;
    }
    match host.rsplit_once(':') {
        Some((h, p))
            if !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (!h.contains(':') || h.ends_with(']')) =>
        {
            h
        }
        _ => host,
    }
}

/// Splits a Kubernetes service host into (name, namespace): `svc` (caller's namespace),
/// `svc.ns`, `svc.ns.svc`, `svc.ns.svc.cluster.local`. None for anything else.
pub(crate) fn split_service_host<'a>(
    host: &'a str,
    caller_namespace: &'a str,
) -> Option<(&'a str, &'a str)> {
    let (name, rest) = match host.split_once('.') {
        None => return Some((host, caller_namespace)),
        Some(x) => x,
    };
    let (ns, tail) = rest.split_once('.').unwrap_or((rest, ""));
    let ok = tail.is_empty()
        || tail.eq_ignore_ascii_case("svc")
        || tail.eq_ignore_ascii_case("svc.cluster.local");
    (ok && !name.is_empty() && !ns.is_empty()).then_some((name, ns))
}

/// Case-insensitive ordering (DNS names); identical to byte order for lowercase names.
fn cmp_ci(a: &str, b: &str) -> Ordering {
    a.bytes()
        .map(|c| c.to_ascii_lowercase())
        .cmp(b.bytes().map(|c| c.to_ascii_lowercase()))
}

/// Builders of small stores for the data-plane tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::HASH_LABEL;
    use crate::apiserver::ApiServer;
    use crate::model::{Kind, Object};
    use serde_json::{Value, json};

    pub fn create(api: &mut ApiServer, kind: Kind, value: Value) {
        api.create(Object::new(kind, value))
            .expect("fixture object is valid");
    }

    /// A Pod with labels and an image, Ready or not.
    pub fn pod(api: &mut ApiServer, ns: &str, name: &str, labels: Value, image: &str, ready: bool) {
        let status = if ready { "True" } else { "False" };
        create(
            api,
            Kind::Pod,
            json!({
                "metadata": {"name": name, "namespace": ns, "labels": labels},
                "spec": {"containers": [{"name": "app", "image": image},
                                        {"name": "istio-proxy", "image": "istio/proxyv2"}]},
                "status": {"conditions": [{"type": "Ready", "status": status}]}
            }),
        );
    }

    /// `count` ready Pods `<prefix>-<i>` of app `app` with the given pod-template-hash and
    /// image.
    pub fn pods(api: &mut ApiServer, ns: &str, app: &str, hash: &str, image: &str, count: usize) {
        for i in 0..count {
            pod(
                api,
                ns,
                &format!("{app}-{hash}-{i}"),
                json!({"app": app, HASH_LABEL: hash}),
                image,
                true,
            );
        }
    }

    pub fn service(api: &mut ApiServer, ns: &str, name: &str, selector: Value) {
        create(
            api,
            Kind::Service,
            json!({
                "metadata": {"name": name, "namespace": ns},
                "spec": {"selector": selector,
                         "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
            }),
        );
    }

    /// A Rollout whose status names the stable and current (canary) hashes.
    pub fn rollout(
        api: &mut ApiServer,
        ns: &str,
        name: &str,
        app: &str,
        stable: &str,
        canary: &str,
    ) {
        create(
            api,
            Kind::Rollout,
            json!({
                "metadata": {"name": name, "namespace": ns},
                "spec": {"selector": {"matchLabels": {"app": app}}},
                "status": {"stableRS": stable, "currentPodHash": canary}
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use crate::apiserver::ApiServer;
    use serde_json::json;

    #[test]
    fn image_tags_are_versions() {
        assert_eq!(image_version("argoproj/rollouts-demo:yellow"), "yellow");
        assert_eq!(image_version("registry:5000/app"), "latest");
        assert_eq!(image_version("registry:5000/app:v2"), "v2");
        assert_eq!(image_version("app@sha256:abc"), "sha256:abc");
    }

    #[test]
    fn service_hosts_resolve_like_cluster_dns() {
        assert_eq!(split_service_host("svc", "me"), Some(("svc", "me")));
        assert_eq!(split_service_host("svc.ns", "me"), Some(("svc", "ns")));
        assert_eq!(split_service_host("svc.ns.svc", "me"), Some(("svc", "ns")));
        assert_eq!(
            split_service_host("svc.ns.svc.cluster.local", "me"),
            Some(("svc", "ns"))
        );
        assert_eq!(
            split_service_host("rollouts-demo.local.example", "me"),
            None
        );
        assert_eq!(strip_port("svc.ns:8080"), "svc.ns");
        assert_eq!(strip_port("svc"), "svc");
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        assert_eq!(strip_port("::1"), "::1");
        assert_eq!(strip_port("10.0.0.1"), "10.0.0.1");
    }

    #[test]
    fn services_select_ready_pods_with_roles_and_versions() {
        let mut api = ApiServer::new();
        rollout(&mut api, "demo", "ro", "app", "aaa", "bbb");
        pods(&mut api, "demo", "app", "aaa", "img:blue", 2);
        pods(&mut api, "demo", "app", "bbb", "img:yellow", 1);
        pods(&mut api, "demo", "app", "ccc", "img:red", 1);
        pod(
            &mut api,
            "demo",
            "not-ready",
            json!({"app": "app"}),
            "img:x",
            false,
        );
        pods(&mut api, "other", "app", "aaa", "img:blue", 1);
        service(&mut api, "demo", "all", json!({"app": "app"}));
        service(&mut api, "demo", "none", json!({}));
        let c = Catalog::from_objects(&api);
        let all = c.service(c.resolve("all", "demo").unwrap()).unwrap();
        assert_eq!(all.fqdn, "all.demo.svc.cluster.local");
        let got: Vec<(&str, Role, &str)> = all
            .endpoints
            .iter()
            .map(|id| {
                let e = c.endpoint(*id).unwrap();
                (e.pod.as_str(), e.role, e.version.as_str())
            })
            .collect();
        assert_eq!(
            got,
            [
                ("app-aaa-0", Role::Stable, "blue"),
                ("app-aaa-1", Role::Stable, "blue"),
                ("app-bbb-0", Role::Canary, "yellow"),
                ("app-ccc-0", Role::Other, "red"),
            ]
        );
        let none = c.service(c.resolve("none.demo.svc.cluster.local:80", "x").unwrap());
        assert!(
            none.unwrap().endpoints.is_empty(),
            "no selector, no endpoints"
        );
        assert_eq!(c.resolve("all", "other"), None);
        assert_eq!(c.resolve("ALL.demo", "other"), c.resolve("all", "demo"));
    }
}
