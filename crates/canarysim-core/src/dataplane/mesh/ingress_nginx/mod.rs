//! Ingresses in the route table, as ingress-nginx serves them: one proxy
//! (`ingress-nginx/ingress-nginx-controller`) with a server per host, a location per path,
//! and canary Ingresses merged as alternative backends
//! (`internal/ingress/controller/controller.go`: `mergeAlternativeBackends`), chosen per
//! request as `rootfs/etc/nginx/lua/balancer.lua`'s `route_to_alternative_balancer` does:
//!
//! * only Ingresses of ingress-nginx's class are served
//!   ([`crate::model::ingress::ClassFilter`]), oldest first; a host and path two Ingresses
//!   both define is the oldest one's;
//! * a canary Ingress (`canary: "true"`) adds its backend to the primary backend of the
//!   location with the same host, path and path type; the alternative belongs to the
//!   primary *backend*, so every location forwarding to that Service takes the canary, and
//!   only the first canary of a backend counts (`alternative_backends[1]`);
//! * per request: the `canary-by-header` header, when present, decides by
//!   `canary-by-header-value` (equal: canary), else `canary-by-header-pattern` (a match:
//!   canary), else `always` / `never`, and any other value falls through; then the
//!   `canary-by-cookie` cookie's `always` / `never`; then a draw
//!   `math.random(weightTotal) <= weight`, the total being `canary-weight-total` only above
//!   100.
//!
//! Not simulated (noted): session affinity (`affinity: cookie`), regex paths
//! (`use-regex`), a default backend's catch-all canary.

use std::collections::BTreeMap;

use regex::Regex;

use super::matcher::{HostPattern, StrMatcher};
use super::table::{
    ClusterId, GatewayName, HttpMatch, HttpRouteEntry, Listener, RequestMeta, RouteSource,
    VirtualHost, WeightedClusters,
};
use super::translate::Builder;
use crate::endpoints::CLUSTER_DOMAIN_SUFFIX;
use crate::model::ingress::{
    CanaryAnnotations, ClassFilter, DEFAULT_ANNOTATION_PREFIX, IngressSpec, ingress_kind,
};
use crate::model::istio::{Destination, PortSelector};
use crate::model::{Object, ObjectKey};

/// The proxy Ingresses are served by: the namespace and name of ingress-nginx's Helm chart.
pub const CONTROLLER_NAMESPACE: &str = "ingress-nginx";
pub const CONTROLLER_NAME: &str = "ingress-nginx-controller";

/// How often ingress-nginx's Lua workers read the backends the controller posted
/// (`BACKENDS_SYNC_INTERVAL`): a change of a canary Ingress takes effect at most this long
/// after it is written.
pub const BACKENDS_SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// A location's canary: the alternative backend and how a request is sent to it.
#[derive(Debug, Clone)]
pub(crate) struct IngressCanary {
    /// The primary and the canary by the weights.
    weighted: WeightedClusters,
    /// The canary alone.
    canary: WeightedClusters,
    header: Option<HeaderRule>,
    /// `canary-by-cookie`.
    cookie: Option<String>,
}

#[derive(Debug, Clone)]
struct HeaderRule {
    /// Lower case, `_` for `-`, as nginx's `$http_` variables name headers.
    name: String,
    value: String,
    /// `canary-by-header-pattern` (searched, as `ngx.re.match` does); None when empty.
    pattern: Option<Regex>,
    /// The pattern did not compile: ingress-nginx logs it and keeps the primary.
    broken_pattern: bool,
}

/// What `route_to_alternative_balancer` answers for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Alternative {
    Yes,
    No,
    Draw,
}

impl IngressCanary {
    /// The split this request is sent by: the canary alone, the primary alone, or the draw.
    pub(crate) fn clusters_for<'t>(
        &'t self,
        primary: &'t WeightedClusters,
        req: &RequestMeta,
    ) -> &'t WeightedClusters {
        match self.decide(req) {
            Alternative::Yes => &self.canary,
            Alternative::No => primary,
            Alternative::Draw => &self.weighted,
        }
    }

    fn decide(&self, req: &RequestMeta) -> Alternative {
        if let Some(h) = &self.header {
            if let Some(value) = header(req, &h.name) {
                if !h.value.is_empty() {
                    if h.value == value {
                        return Alternative::Yes;
                    }
                } else if h.broken_pattern {
                    return Alternative::No;
                } else if let Some(p) = &h.pattern {
                    if p.is_match(value) {
                        return Alternative::Yes;
                    }
                } else if value == "always" {
                    return Alternative::Yes;
                } else if value == "never" {
                    return Alternative::No;
                }
            }
        }
        if let Some(name) = &self.cookie {
            match cookie(req, name) {
                Some("always") => return Alternative::Yes,
                Some("never") => return Alternative::No,
                _ => {}
            }
        }
        Alternative::Draw
    }
}

/// The request's header as nginx's `$http_<name>` reads it (case and `-`/`_` alike).
fn header<'r>(req: &RequestMeta<'r>, name: &str) -> Option<&'r str> {
    req.headers
        .iter()
        .find(|(k, _)| nginx_variable_name(k) == name)
        .map(|(_, v)| *v)
}

/// Cookie `name` of the request's `Cookie` header, as `$cookie_<name>` reads it.
fn cookie<'r>(req: &RequestMeta<'r>, name: &str) -> Option<&'r str> {
    header(req, "cookie")?
        .split(';')
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn nginx_variable_name(header: &str) -> String {
    header.to_ascii_lowercase().replace('-', "_")
}

/// One location of a primary Ingress.
struct Location {
    host: String,
    path: String,
    path_type: String,
    cluster: ClusterId,
    /// The primary backend (`namespace/service:port`) canaries attach to.
    backend: String,
    source: RouteSource,
}

/// A canary Ingress's alternative for one primary backend.
struct AlternativeBackend {
    cluster: ClusterId,
    policy: CanaryAnnotations,
    key: ObjectKey,
}

impl Builder<'_> {
    /// Installs the Ingresses ingress-nginx serves on its proxy; whether there was one.
    pub(super) fn ingresses(&mut self) -> bool {
        let mut ingresses = self.api.objects(ingress_kind());
        if ingresses.is_empty() {
            return false;
        }
        // The controller's store lists Ingresses oldest first (within a second, in the
        // order this API server created them: its uids count up).
        ingresses.sort_by(|a, b| {
            a.creation_timestamp()
                .cmp(b.creation_timestamp())
                .then_with(|| a.uid().cmp(b.uid()))
                .then_with(|| a.key().cmp(&b.key()))
        });
        let filter = ClassFilter::of(self.api);
        let mut primaries: Vec<Location> = Vec::new();
        let mut canaries: Vec<(&Object, IngressSpec, CanaryAnnotations)> = Vec::new();
        for ingress in ingresses {
            let key = ingress.key();
            let spec: IngressSpec = match ingress.spec_as() {
                Ok(s) => s,
                Err(e) => {
                    self.note(&key, format!("spec cannot be read ({e}); skipped"));
                    continue;
                }
            };
            if let Err(why) = filter.serves(ingress, &spec) {
                self.note(&key, why);
                continue;
            }
            self.note_unsimulated(ingress);
            if spec.default_backend.is_some() {
                self.note(&key, "spec.defaultBackend is not simulated: a request no rule matches is answered 404");
            }
            let canary =
                CanaryAnnotations::parse(&ingress.annotations(), DEFAULT_ANNOTATION_PREFIX)
                    .unwrap_or_else(|e| {
                        self.note(&key, e);
                        CanaryAnnotations::parse(&BTreeMap::new(), DEFAULT_ANNOTATION_PREFIX)
                            .expect("no annotations parse")
                    });
            if canary.enabled {
                canaries.push((ingress, spec, canary));
            } else {
                self.primary_locations(ingress, &spec, &mut primaries);
            }
        }
        let mut alternatives: BTreeMap<String, AlternativeBackend> = BTreeMap::new();
        for (ingress, spec, policy) in canaries {
            self.merge_canary(ingress, &spec, policy, &primaries, &mut alternatives);
        }
        self.install_ingress_proxy(primaries, &alternatives);
        true
    }

    /// Notes the annotations that change routing and are not simulated.
    fn note_unsimulated(&mut self, ingress: &Object) {
        let annotations = ingress.annotations();
        for name in ["affinity", "use-regex", "upstream-hash-by", "load-balance"] {
            let full = format!("{DEFAULT_ANNOTATION_PREFIX}/{name}");
            if let Some(v) = annotations.get(&full) {
                self.note(
                    &ingress.key(),
                    format!("{full}: {v:?} is not simulated; requests are routed as without it"),
                );
            }
        }
    }

    /// The locations of a primary Ingress; a host and path taken by an older one is
    /// skipped.
    fn primary_locations(&mut self, ingress: &Object, spec: &IngressSpec, out: &mut Vec<Location>) {
        let key = ingress.key();
        for p in spec.paths() {
            let label = &p.label;
            let Some(service) = p.service else {
                self.note(
                    &key,
                    format!("{label}: a resource backend is not simulated; skipped"),
                );
                continue;
            };
            if out
                .iter()
                .any(|l| p.same_location(&l.host, &l.path, &l.path_type))
            {
                let (host, path) = (p.host, p.path);
                let why =
                    format!("{label}: host {host:?} path {path:?} is an older Ingress's; skipped");
                self.note(&key, why);
                continue;
            }
            let (cluster, backend) = self.ingress_backend(&key, service, label);
            out.push(Location {
                host: p.host.to_string(),
                path: p.path.to_string(),
                path_type: p.path_type.to_string(),
                cluster,
                backend,
                source: RouteSource {
                    virtual_service: Some(key.clone()),
                    route: p.label.clone(),
                },
            });
        }
    }

    /// The cluster of an Ingress's Service backend, and the backend's name.
    fn ingress_backend(
        &mut self,
        key: &ObjectKey,
        service: &crate::model::ingress::IngressServiceBackend,
        label: &str,
    ) -> (ClusterId, String) {
        let ns = key.namespace.as_str();
        let destination = Destination {
            host: format!("{}.{ns}{CLUSTER_DOMAIN_SUFFIX}", service.name),
            subset: String::new(),
            port: service.port.number.map(|number| PortSelector { number }),
        };
        let port = match (&service.port.number, &service.port.name) {
            (Some(n), _) => n.to_string(),
            (None, Some(name)) => name.clone(),
            (None, None) => String::new(),
        };
        let cluster = self.destination(key, ns, &destination, None, label);
        (cluster, format!("{ns}/{}:{port}", service.name))
    }

    /// `mergeAlternativeBackends` for one canary Ingress.
    fn merge_canary(
        &mut self,
        ingress: &Object,
        spec: &IngressSpec,
        policy: CanaryAnnotations,
        primaries: &[Location],
        alternatives: &mut BTreeMap<String, AlternativeBackend>,
    ) {
        let key = ingress.key();
        for p in spec.paths() {
            let Some(service) = p.service else {
                continue;
            };
            let label = &p.label;
            let location = primaries
                .iter()
                .find(|l| p.same_location(&l.host, &l.path, &l.path_type));
            let Some(primary) = location else {
                let (host, path) = (p.host, p.path);
                self.note(&key, format!("{label}: no Ingress serves host {host:?} path {path:?}; this canary backend is deleted, as ingress-nginx does"));
                continue;
            };
            let (cluster, backend) = self.ingress_backend(&key, service, label);
            if backend == primary.backend {
                // Argo copies a rule whole: its other paths keep their Service.
                self.note(
                    &key,
                    format!(
                        "{label}: path {:?} forwards to Service {} in both this canary Ingress and the primary one: nothing to split there (ingress-nginx: \"alternative upstream … is primary upstream\")",
                        p.path, service.name
                    ),
                );
                continue;
            }
            match alternatives.get(&primary.backend) {
                Some(first) if first.cluster != cluster => self.note(
                    &key,
                    format!(
                        "{label}: backend {} already has the canary of Ingress {}/{}; only the first counts (balancer.lua: alternative_backends[1])",
                        primary.backend, first.key.namespace, first.key.name
                    ),
                ),
                Some(_) => {}
                None => {
                    alternatives.insert(
                        primary.backend.clone(),
                        AlternativeBackend {
                            cluster,
                            policy: policy.clone(),
                            key: key.clone(),
                        },
                    );
                }
            }
        }
    }

    /// The proxy: a server per host, its locations most specific first, each with the
    /// canary of its backend.
    fn install_ingress_proxy(
        &mut self,
        locations: Vec<Location>,
        alternatives: &BTreeMap<String, AlternativeBackend>,
    ) {
        let mut hosts: Vec<VirtualHost<HttpRouteEntry>> = Vec::new();
        for l in locations {
            let host = if l.host.is_empty() {
                HostPattern::Any
            } else {
                HostPattern::server_name(&l.host)
            };
            let canary = alternatives
                .get(&l.backend)
                .map(|alt| Box::new(self.ingress_canary(l.cluster, alt)));
            let entry = HttpRouteEntry {
                matches: Box::new([HttpMatch {
                    uri: Some(path_matcher(&l.path, &l.path_type)),
                    ..HttpMatch::default()
                }]),
                clusters: WeightedClusters::single(l.cluster),
                mirrors: Box::new([]),
                policy: super::policy::DEFAULT_POLICY,
                source: l.source,
                canary,
            };
            match hosts.iter_mut().find(|v| v.host == host) {
                Some(v) => v.routes.push(entry),
                None => hosts.push(VirtualHost {
                    host,
                    routes: vec![entry],
                }),
            }
        }
        for v in &mut hosts {
            // nginx: an exact location first, then the longest prefix.
            v.routes.sort_by_key(|r| {
                let uri = r.matches[0].uri.as_ref();
                let exact = matches!(uri, Some(StrMatcher::Exact(_)));
                let len = match uri {
                    Some(StrMatcher::Exact(p) | StrMatcher::Prefix(p)) => p.len(),
                    Some(StrMatcher::SegmentPrefix(p)) => p.len() + 1,
                    _ => 0,
                };
                (!exact, std::cmp::Reverse(len))
            });
        }
        let servers = hosts
            .iter()
            .map(|v| (None, Box::from([v.host.clone()])))
            .collect();
        self.listeners.push(Listener {
            gateway: Some(GatewayName::new(CONTROLLER_NAMESPACE, CONTROLLER_NAME)),
            ports: Box::new([80, 443]),
            http_port: Some(80),
            servers,
            http: hosts,
            ..Listener::default()
        });
    }

    fn ingress_canary(&mut self, primary: ClusterId, alt: &AlternativeBackend) -> IngressCanary {
        let p = &alt.policy;
        let (weight, total) = p.weight_share();
        let weighted = WeightedClusters::new([(primary, total - weight), (alt.cluster, weight)])
            .unwrap_or_else(|| WeightedClusters::single(primary));
        let header = (!p.header.is_empty()).then(|| {
            let pattern = (!p.header_pattern.is_empty()).then(|| Regex::new(&p.header_pattern));
            let broken_pattern = matches!(pattern, Some(Err(_)));
            if let Some(Err(e)) = &pattern {
                self.note(
                    &alt.key,
                    format!("canary-by-header-pattern {:?} does not compile ({e}); a request with the header goes to the primary", p.header_pattern),
                );
            }
            HeaderRule {
                name: nginx_variable_name(&p.header),
                value: p.header_value.clone(),
                pattern: pattern.and_then(Result::ok),
                broken_pattern,
            }
        });
        IngressCanary {
            weighted,
            canary: WeightedClusters::single(alt.cluster),
            header,
            cookie: (!p.cookie.is_empty()).then(|| p.cookie.clone()),
        }
    }
}

/// An Ingress path as nginx matches it: `Exact` the path itself; `Prefix` the path and
/// whatever continues it after `/`; `ImplementationSpecific` (ingress-nginx without
/// `use-regex`) a plain string prefix.
fn path_matcher(path: &str, path_type: &str) -> StrMatcher {
    match path_type {
        "Exact" => StrMatcher::Exact(path.to_string()),
        "Prefix" => StrMatcher::path_prefix(path),
        _ => StrMatcher::Prefix(path.to_string()),
    }
}

#[cfg(test)]
mod tests;
