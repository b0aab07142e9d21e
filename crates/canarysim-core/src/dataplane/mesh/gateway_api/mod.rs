//! The Gateway API's Gateways and HTTPRoutes in the route table, as an Envoy-based
//! implementation (Istio, Envoy Gateway, Contour, kgateway) programs them
//! (`apis/v1/httproute_types.go`, `gateway_types.go`):
//!
//! * a Gateway is a proxy with one server per listener (port, hostname); a route attaches
//!   through `parentRefs` (a Gateway, narrowed by `sectionName` and `port`) to the HTTP and
//!   HTTPS listeners whose `allowedRoutes` admit its namespace (`Same` by default), for the
//!   hostnames its own and the listener's have in common;
//! * a `parentRef` to a Service (GAMMA) routes the mesh's requests for that Service;
//! * a rule's backendRefs split by weight, each its proportion of the rule's sum (default 1;
//!   0 sends nothing); a backendRef that does not resolve (no such Service, another
//!   namespace without a ReferenceGrant, a kind other than Service) keeps its share and
//!   answers it 500, as implementations do (a Service without ready endpoints: 503);
//! * across every route on a listener and host, matches are tried in the spec's precedence:
//!   an exact path, then the longest prefix, a method, more header matches, more query
//!   matches, then the oldest route, then `namespace/name`, then rule and match order.
//!
//! Odd objects never fail the translation: they are skipped and a note says why.

mod status;

use std::cmp::Reverse;

pub(crate) use status::StatusBook;
use status::{Acceptance, controller_of};
pub(crate) use status::{StatusWrite, stamp_transitions};

use super::matcher::{HostPattern, MatchError, StrMatcher};
use super::table::{ClusterId, GatewayName, VirtualHost};
use super::table::{
    HttpMatch, HttpRouteEntry, L4Match, L4RouteEntry, Listener, RouteSource, WeightedClusters,
};
use super::translate::{Builder, MESH};
use crate::endpoints::CLUSTER_DOMAIN_SUFFIX;
use crate::model::gateway_api::{
    self, BackendRef, GatewayListener, GatewaySpec, GrpcRouteSpec, HttpRouteMatch, HttpRouteSpec,
    L4RouteSpec, NamedMatch, ParentRef, ReferenceGrantSpec,
};
use crate::model::istio::{Destination, PortSelector};
use crate::model::{Object, ObjectKey};

/// A Gateway API Gateway as the route table has it: its proxy and its listeners.
pub(super) struct GatewayApiGateway {
    key: ObjectKey,
    namespace: String,
    name: String,
    /// The implementation its class names (`controllerName` in its routes' status).
    controller: String,
    /// Index of its proxy in the table.
    proxy: usize,
    listeners: Vec<GatewayListener>,
}

/// Where a route attaches: a proxy, a host on it, and the listener's port (None: the mesh).
#[derive(Clone, PartialEq)]
struct Attachment {
    proxy: usize,
    host: HostPattern,
    port: Option<u32>,
}

/// The spec's precedence among matches on one host: smaller sorts first.
type Precedence = (
    u8,
    Reverse<usize>,
    bool,
    Reverse<usize>,
    Reverse<usize>,
    String,
    String,
    usize,
    usize,
);

/// The routes for one host on one proxy, each with its precedence, before sorting.
struct HostRoutes {
    proxy: usize,
    host: HostPattern,
    entries: Vec<(Precedence, HttpRouteEntry)>,
}

impl Builder<'_> {
    /// A proxy for every Gateway API Gateway, with a server per listener.
    pub(super) fn gateway_api_gateways(&mut self) -> Vec<GatewayApiGateway> {
        let mut out = Vec::new();
        for gw in self.api.objects(gateway_api::kind("Gateway")) {
            let key = gw.key();
            let spec: GatewaySpec = match gw.spec_as() {
                Ok(s) => s,
                Err(e) => {
                    self.note(&key, format!("spec cannot be read ({e}); skipped"));
                    continue;
                }
            };
            let taken = self.listeners.iter().any(|l| {
                l.gateway
                    .as_ref()
                    .is_some_and(|g| g.is(gw.name(), gw.namespace()))
            });
            if taken {
                self.note(
                    &key,
                    "an Istio Gateway has the same namespace and name; this Gateway is skipped",
                );
                continue;
            }
            let mut ports: Vec<u32> = spec.listeners.iter().map(|l| l.port).collect();
            ports.sort_unstable();
            ports.dedup();
            // Plain HTTP first: a request that names no port is a plain one.
            let lowest = |protocol: &str| {
                let listeners = spec.listeners.iter().filter(|l| l.protocol == protocol);
                listeners.map(|l| l.port).min()
            };
            let http_port = lowest("HTTP").or_else(|| lowest("HTTPS"));
            let servers = spec
                .listeners
                .iter()
                .map(|l| {
                    let host = l
                        .hostname
                        .as_deref()
                        .map_or(HostPattern::Any, HostPattern::server_name);
                    (Some(l.port), Box::from([host]))
                })
                .collect();
            self.status
                .gateway(gw, &spec.gateway_class_name, &spec.listeners);
            out.push(GatewayApiGateway {
                key: gw.key(),
                namespace: gw.namespace().to_string(),
                name: gw.name().to_string(),
                controller: controller_of(self.api, &spec.gateway_class_name),
                proxy: self.listeners.len(),
                listeners: spec.listeners,
            });
            self.listeners.push(Listener {
                gateway: Some(GatewayName::new(gw.namespace(), gw.name())),
                ports: ports.into(),
                http_port,
                servers,
                ..Listener::default()
            });
        }
        out
    }

    /// Installs every HTTPRoute and GRPCRoute on the proxies it attaches to; whether there
    /// was any.
    pub(super) fn http_routes(&mut self, gateways: &[GatewayApiGateway]) -> bool {
        let mut routes = self.api.objects(gateway_api::kind("HTTPRoute"));
        routes.extend(self.api.objects(gateway_api::kind("GRPCRoute")));
        let any = !routes.is_empty();
        let mut hosts: Vec<HostRoutes> = Vec::new();
        for route in routes {
            for (attachment, precedence, entry) in self.http_route_entries(route, gateways) {
                let Attachment { proxy, host, port } = attachment;
                let mut entry = entry;
                for m in entry.matches.iter_mut() {
                    m.port = port;
                }
                match hosts
                    .iter_mut()
                    .find(|h| h.proxy == proxy && h.host == host)
                {
                    Some(h) => h.entries.push((precedence, entry)),
                    None => hosts.push(HostRoutes {
                        proxy,
                        host,
                        entries: vec![(precedence, entry)],
                    }),
                }
            }
        }
        for HostRoutes {
            proxy,
            host,
            mut entries,
        } in hosts
        {
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let routes: Vec<HttpRouteEntry> = entries.into_iter().map(|(_, e)| e).collect();
            let listener = &mut self.listeners[proxy];
            match listener.http.iter_mut().find(|v| v.host == host) {
                Some(v) => {
                    // A VirtualService covers the host already (the mesh, GAMMA): Istio
                    // keeps the VirtualService's routes first.
                    let key = routes[0].source.virtual_service.clone();
                    v.routes.extend(routes);
                    if let Some(key) = key {
                        self.note(
                            &key,
                            format!(
                                "host {} also has VirtualService routes; they are tried first",
                                host.text()
                            ),
                        );
                    }
                }
                None => listener.http.push(VirtualHost { host, routes }),
            }
        }
        any
    }

    /// One route's entries: each match of each rule, on each host it attaches to.
    fn http_route_entries(
        &mut self,
        route: &Object,
        gateways: &[GatewayApiGateway],
    ) -> Vec<(Attachment, Precedence, HttpRouteEntry)> {
        let key = route.key();
        let ns = route.namespace().to_string();
        let kind = route.kind.as_str();
        // A GRPCRoute is routed as the HTTPRoute of its paths (`/service/method`).
        let spec = if kind == "GRPCRoute" {
            route
                .spec_as::<GrpcRouteSpec>()
                .map(GrpcRouteSpec::into_http)
        } else {
            route.spec_as::<HttpRouteSpec>()
        };
        let spec = match spec {
            Ok(s) => s,
            Err(e) => {
                self.note(&key, format!("spec cannot be read ({e}); skipped"));
                return Vec::new();
            }
        };
        self.status.route(route);
        let mut attachments: Vec<Attachment> = Vec::new();
        for (index, parent) in spec.parent_refs.iter().enumerate() {
            for a in self.attach(route, index, &spec.hostnames, parent, gateways) {
                if !attachments.contains(&a) {
                    attachments.push(a);
                }
            }
        }
        if attachments.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (i, rule) in spec.rules.iter().enumerate() {
            let label = match &rule.name {
                Some(n) if !n.is_empty() => format!("rules/{n}"),
                _ => format!("rules/{i}"),
            };
            let filters = &route.spec()["rules"][i]["filters"];
            if let Some(types) = filters.as_array().filter(|f| !f.is_empty()) {
                let names: Vec<&str> = types.iter().filter_map(|f| f["type"].as_str()).collect();
                self.note(
                    &key,
                    format!(
                        "{label}: filters ({}) are not simulated; the rule routes as if it had none",
                        names.join(", ")
                    ),
                );
            }
            let clusters = self.backends(&key, &ns, &rule.backend_refs, &label);
            let default_match = [HttpRouteMatch::default()];
            let matches = if rule.matches.is_empty() {
                &default_match[..]
            } else {
                &rule.matches[..]
            };
            for (j, m) in matches.iter().enumerate() {
                let compiled = match compile_match(m) {
                    Ok(c) => c,
                    Err(e) => {
                        self.note(&key, format!("{label}: matches[{j}]: {e}; never matches"));
                        continue;
                    }
                };
                let precedence = precedence(m, route, i, j);
                for a in &attachments {
                    out.push((
                        a.clone(),
                        precedence.clone(),
                        HttpRouteEntry {
                            matches: Box::new([compiled.clone()]),
                            clusters: clusters.clone(),
                            mirrors: Box::new([]),
                            policy: super::policy::DEFAULT_POLICY,
                            source: RouteSource {
                                virtual_service: Some(key.clone()),
                                route: label.clone(),
                            },
                            sticky: None,
                        },
                    ));
                }
            }
        }
        out
    }

    /// The proxies and hosts parentRef `index` of `route` attaches it to (none: noted
    /// why), recorded for the route's and the Gateway's status.
    fn attach(
        &mut self,
        route: &Object,
        index: usize,
        hostnames: &[String],
        parent: &ParentRef,
        gateways: &[GatewayApiGateway],
    ) -> Vec<Attachment> {
        let key = &route.key();
        let kind = route.kind.as_str();
        let ns = key.namespace.as_str();
        let parent_ns = parent.namespace.as_deref().unwrap_or(ns);
        if parent.is_service() && matches!(kind, "TCPRoute" | "TLSRoute") {
            self.note(
                key,
                format!(
                    "parentRef Service {}: a {kind} on a Service (GAMMA) is not simulated; not attached there",
                    parent.name
                ),
            );
            return Vec::new();
        }
        if parent.is_service() {
            // GAMMA: the mesh routes requests for the Service itself.
            self.status.parent(route, index, None, Ok(()));
            let fqdn = format!("{}.{parent_ns}{CLUSTER_DOMAIN_SUFFIX}", parent.name);
            return vec![Attachment {
                proxy: MESH,
                host: HostPattern::exact(fqdn),
                port: parent.port,
            }];
        }
        if !parent.is_gateway() {
            self.note(
                key,
                format!(
                    "parentRef {}: only Gateways and Services are simulated as parents; not attached there",
                    parent.name
                ),
            );
            return Vec::new();
        }
        let Some(gw) = gateways
            .iter()
            .find(|g| g.name == parent.name && g.namespace == parent_ns)
        else {
            // No implementation owns a Gateway that does not exist: no status for it.
            self.note(
                key,
                format!(
                    "parentRef Gateway {parent_ns}/{} does not exist; no routes are installed for it",
                    parent.name
                ),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut refused: Vec<(&'static str, String)> = Vec::new();
        for l in &gw.listeners {
            if parent.section_name.as_ref().is_some_and(|s| *s != l.name)
                || parent.port.is_some_and(|p| p != l.port)
            {
                continue;
            }
            match self.listener_admits(key, kind, hostnames, gw, l) {
                Ok(hosts) => {
                    self.status.attached(key, &gw.key, &l.name);
                    out.extend(hosts.into_iter().map(|host| Attachment {
                        proxy: gw.proxy,
                        host,
                        port: Some(l.port),
                    }));
                }
                Err(why) => refused.push(why),
            }
        }
        let acceptance: Acceptance = if !out.is_empty() {
            Ok(())
        } else if refused.is_empty() {
            Err((
                "NoMatchingParent",
                "no listener matches its sectionName and port".to_string(),
            ))
        } else {
            // Hostnames only when that is every listener's reason, as the spec orders them.
            let reason = if refused
                .iter()
                .all(|(r, _)| *r == "NoMatchingListenerHostname")
            {
                "NoMatchingListenerHostname"
            } else {
                "NotAllowedByListeners"
            };
            let words: Vec<&str> = refused.iter().map(|(_, w)| w.as_str()).collect();
            Err((reason, words.join("; ")))
        };
        if let Err((_, why)) = &acceptance {
            self.note(
                key,
                format!(
                    "not accepted by Gateway {}/{}: {why}",
                    gw.namespace, gw.name
                ),
            );
        }
        let controller = gw.controller.clone();
        self.status
            .parent(route, index, Some(&controller), acceptance);
        out
    }

    /// The hosts listener `l` of `gw` takes a route of `kind` for, or the spec's reason
    /// (and words) why it takes none.
    fn listener_admits(
        &mut self,
        key: &ObjectKey,
        kind: &str,
        hostnames: &[String],
        gw: &GatewayApiGateway,
        l: &GatewayListener,
    ) -> Result<Vec<HostPattern>, (&'static str, String)> {
        let protocols: &[&str] = match kind {
            "TCPRoute" => &["TCP"],
            "TLSRoute" => &["TLS"],
            _ => &["HTTP", "HTTPS"],
        };
        if !protocols.contains(&l.protocol.as_str()) {
            return Err((
                "NotAllowedByListeners",
                format!("listener {:?} is {}", l.name, l.protocol),
            ));
        }
        let from = l
            .allowed_routes
            .namespaces
            .from
            .as_deref()
            .unwrap_or("Same");
        if from == "Selector" {
            self.note(
                key,
                format!(
                    "listener {:?} of Gateway {}/{} admits namespaces by label: not simulated, every namespace is admitted",
                    l.name, gw.namespace, gw.name
                ),
            );
        }
        if !l.allowed_routes.admits(kind) {
            return Err((
                "NotAllowedByListeners",
                format!("listener {:?} admits other route kinds only", l.name),
            ));
        }
        if from == "Same" && gw.namespace != key.namespace {
            return Err((
                "NotAllowedByListeners",
                format!(
                    "listener {:?} admits routes of namespace {} only",
                    l.name, gw.namespace
                ),
            ));
        }
        let hosts = intersect(hostnames, l.hostname.as_deref());
        if hosts.is_empty() {
            return Err((
                "NoMatchingListenerHostname",
                format!("listener {:?} has no hostname in common", l.name),
            ));
        }
        Ok(hosts)
    }

    /// A rule's weighted split. Backends that do not resolve keep their share with a
    /// cluster that has no endpoints; a rule without weight anywhere answers every request
    /// that way too.
    fn backends(
        &mut self,
        key: &ObjectKey,
        ns: &str,
        refs: &[BackendRef],
        label: &str,
    ) -> WeightedClusters {
        let mut entries = Vec::new();
        for b in refs {
            let weight = u32::try_from(b.weight().clamp(0, gateway_api::MAX_WEIGHT)).unwrap_or(0);
            if weight == 0 {
                continue;
            }
            entries.push((self.backend(key, ns, b, label), weight));
        }
        let in_turns = self.options.gateway_api_split == super::GatewayApiSplit::RoundRobin;
        let split = WeightedClusters::new(entries).map(|s| if in_turns { s.in_turns() } else { s });
        split.unwrap_or_else(|| {
            self.note(
                key,
                format!("{label}: no backendRef has a weight above 0; every request is answered 500, as implementations do"),
            );
            WeightedClusters::single(self.unresolved(format!("{label} of {key}")))
        })
    }

    /// The cluster of one backendRef.
    fn backend(&mut self, key: &ObjectKey, ns: &str, b: &BackendRef, label: &str) -> ClusterId {
        let target_ns = b.namespace.as_deref().unwrap_or(ns);
        let unresolved = if !b.is_service() {
            Some((
                "InvalidKind",
                format!(
                    "{} {:?} is not a Service",
                    b.kind.as_deref().unwrap_or("Service"),
                    b.name
                ),
            ))
        } else if target_ns != ns && !self.granted(key.kind.as_str(), ns, target_ns, &b.name) {
            Some((
                "RefNotPermitted",
                format!(
                    "Service {target_ns}/{} is in another namespace and no ReferenceGrant there admits {}s of {ns}",
                    b.name,
                    key.kind.as_str()
                ),
            ))
        } else if self.catalog.find(target_ns, &b.name).is_none() {
            Some((
                "BackendNotFound",
                format!("Service {target_ns}/{} does not exist", b.name),
            ))
        } else {
            None
        };
        if let Some((reason, why)) = unresolved {
            self.note(
                key,
                format!("{label}: backendRef {why} ({reason}); its share is answered 500, as implementations do"),
            );
            self.status
                .unresolved(key, reason, format!("{label}: backendRef {why}"));
            return self.unresolved(format!("{target_ns}/{}", b.name));
        }
        let destination = Destination {
            host: format!("{}.{target_ns}{CLUSTER_DOMAIN_SUFFIX}", b.name),
            subset: String::new(),
            port: b.port.map(|number| PortSelector { number }),
        };
        self.destination(key, ns, &destination, None, label)
    }

    /// A cluster without endpoints for a backend that does not resolve.
    fn unresolved(&mut self, what: String) -> ClusterId {
        let name = format!("unresolved|{what}");
        if let Some(id) = self.cluster_ids.get(&name) {
            return *id;
        }
        let id = self.add_cluster(name, what, 0, String::new(), Vec::new(), None);
        self.mark_unresolved(id);
        id
    }

    /// Whether a ReferenceGrant in `target_ns` admits routes of `kind` in `from_ns` to
    /// Service `name`.
    fn granted(&self, kind: &str, from_ns: &str, target_ns: &str, name: &str) -> bool {
        self.api
            .objects(gateway_api::kind("ReferenceGrant"))
            .into_iter()
            .filter(|g| g.namespace() == target_ns)
            .filter_map(|g| g.spec_as::<ReferenceGrantSpec>().ok())
            .any(|g| {
                g.from.iter().any(|f| {
                    f.group == gateway_api::GROUP && f.kind == kind && f.namespace == from_ns
                }) && g.to.iter().any(|t| {
                    t.group.is_empty()
                        && t.kind == "Service"
                        && t.name.as_deref().is_none_or(|n| n == name)
                })
            })
    }
}

impl Builder<'_> {
    /// Installs every TCPRoute and TLSRoute on the Gateway listeners of their protocol
    /// that accept them; each connection takes one backend of a rule (a TLSRoute's by the
    /// ClientHello's server name). Whether there was any.
    pub(super) fn l4_routes(&mut self, gateways: &[GatewayApiGateway]) -> bool {
        let mut any = false;
        for (kind, tls) in [("TCPRoute", false), ("TLSRoute", true)] {
            for route in self.api.objects(gateway_api::kind(kind)) {
                any = true;
                let key = route.key();
                let spec: L4RouteSpec = match route.spec_as() {
                    Ok(s) => s,
                    Err(e) => {
                        self.note(&key, format!("spec cannot be read ({e}); skipped"));
                        continue;
                    }
                };
                // A TCPRoute has no hostnames: it takes what reaches its listener.
                let hostnames = if tls { &spec.hostnames[..] } else { &[] };
                self.status.route(route);
                let mut attachments: Vec<Attachment> = Vec::new();
                for (index, parent) in spec.parent_refs.iter().enumerate() {
                    for a in self.attach(route, index, hostnames, parent, gateways) {
                        if a.proxy != MESH && !attachments.contains(&a) {
                            attachments.push(a);
                        }
                    }
                }
                if attachments.is_empty() {
                    continue;
                }
                let ns = key.namespace.clone();
                for (i, rule) in spec.rules.iter().enumerate() {
                    let label = match &rule.name {
                        Some(n) if !n.is_empty() => format!("rules/{n}"),
                        _ => format!("rules/{i}"),
                    };
                    let clusters = self.backends(&key, &ns, &rule.backend_refs, &label);
                    for a in &attachments {
                        let sni: Box<[HostPattern]> = match &a.host {
                            HostPattern::Any => Box::new([]),
                            host if tls => Box::new([host.clone()]),
                            _ => Box::new([]),
                        };
                        let entry = L4RouteEntry {
                            matches: Box::new([L4Match {
                                port: a.port,
                                sni,
                                ..L4Match::default()
                            }]),
                            clusters: clusters.clone(),
                            source: RouteSource {
                                virtual_service: Some(key.clone()),
                                route: label.clone(),
                            },
                        };
                        let listener = &mut self.listeners[a.proxy];
                        let vhosts = if tls {
                            &mut listener.tls
                        } else {
                            &mut listener.tcp
                        };
                        match vhosts.iter_mut().find(|v| v.host == a.host) {
                            Some(v) => v.routes.push(entry),
                            None => vhosts.push(VirtualHost {
                                host: a.host.clone(),
                                routes: vec![entry],
                            }),
                        }
                    }
                }
            }
        }
        any
    }
}

/// The hosts a route serves on a listener: its hostnames that the listener's accepts
/// (narrowed to the more specific of the two), or the listener's when the route names none.
fn intersect(route: &[String], listener: Option<&str>) -> Vec<HostPattern> {
    let listener = listener.map(HostPattern::server_name);
    if route.is_empty() {
        return vec![listener.unwrap_or(HostPattern::Any)];
    }
    let mut out = Vec::new();
    for h in route {
        let h = HostPattern::server_name(h);
        let host = match &listener {
            None | Some(HostPattern::Any) => Some(h),
            Some(l) => narrower(&h, l),
        };
        if let Some(host) = host.filter(|host| !out.contains(host)) {
            out.push(host);
        }
    }
    out
}

/// The more specific of two hostnames when one includes the other.
fn narrower(a: &HostPattern, b: &HostPattern) -> Option<HostPattern> {
    let includes = |wide: &HostPattern, narrow: &HostPattern| match narrow {
        HostPattern::Exact { fqdn, .. } => wide.matches(fqdn, ""),
        HostPattern::Suffix(s) => matches!(wide, HostPattern::Suffix(w) if s.ends_with(w.as_str())),
        HostPattern::Any => matches!(wide, HostPattern::Any),
    };
    if includes(b, a) {
        Some(a.clone())
    } else if includes(a, b) {
        Some(b.clone())
    } else {
        None
    }
}

/// The spec's precedence of one match (see the module notes).
fn precedence(m: &HttpRouteMatch, route: &Object, rule: usize, index: usize) -> Precedence {
    let (rank, length) = match &m.path {
        None => (1, 1),
        Some(p) => {
            let value = p.value.as_deref().unwrap_or("/").len();
            match p.kind.as_deref().unwrap_or("PathPrefix") {
                "Exact" => (0, value),
                "PathPrefix" => (1, value),
                _ => (2, value),
            }
        }
    };
    (
        rank,
        Reverse(length),
        m.method.is_none(),
        Reverse(m.headers.len()),
        Reverse(m.query_params.len()),
        route.creation_timestamp().to_string(),
        format!("{}/{}", route.namespace(), route.name()),
        rule,
        index,
    )
}

fn compile_match(m: &HttpRouteMatch) -> Result<HttpMatch, MatchError> {
    let uri = match &m.path {
        None => StrMatcher::path_prefix("/"),
        Some(p) => {
            let value = p.value.as_deref().unwrap_or("/");
            match p.kind.as_deref().unwrap_or("PathPrefix") {
                "Exact" => StrMatcher::Exact(value.to_string()),
                "RegularExpression" => regex(value)?,
                _ => StrMatcher::path_prefix(value),
            }
        }
    };
    let named = |list: &[NamedMatch], lower: bool| {
        let mut seen = Vec::new();
        list.iter()
            // Only the first entry for a name counts (header names case-insensitively).
            .filter(|n| {
                let key = if lower {
                    n.name.to_ascii_lowercase()
                } else {
                    n.name.clone()
                };
                let first = !seen.contains(&key);
                seen.push(key);
                first
            })
            .map(|n| {
                let name = if lower {
                    n.name.to_ascii_lowercase()
                } else {
                    n.name.clone()
                };
                let matcher = match n.kind.as_deref() {
                    Some("RegularExpression") => regex(&n.value)?,
                    _ => StrMatcher::Exact(n.value.clone()),
                };
                Ok((name, matcher))
            })
            .collect::<Result<Box<[_]>, MatchError>>()
    };
    Ok(HttpMatch {
        uri: Some(uri),
        method: m.method.clone().map(StrMatcher::Exact),
        headers: named(&m.headers, true)?,
        query_params: named(&m.query_params, false)?,
        ..HttpMatch::default()
    })
}

fn regex(pattern: &str) -> Result<StrMatcher, MatchError> {
    StrMatcher::compile(&crate::model::rollout::StringMatch {
        regex: Some(pattern.to_string()),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests;
