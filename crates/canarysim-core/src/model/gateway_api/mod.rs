//! The Gateway API (`gateway.networking.k8s.io`): its kinds as canarysim knows them, typed
//! read-only views of the parts it routes by (Gateway listeners, HTTPRoute rules, matches
//! and backendRefs, ReferenceGrants), and what its API server refuses in a route
//! (`validation.rs`). Field names and defaults follow `apis/v1` (standard channel).

mod validation;

use serde::Deserialize;

use super::object::Kind;
use super::stored_kind::{self, StoredKind};

pub(crate) use validation::validate_route;

/// The Gateway API traffic router plugin's name in a Rollout's `trafficRouting.plugins`.
pub const PLUGIN: &str = "argoproj-labs/gatewayAPI";

/// The Gateway API's group.
pub(crate) const GROUP: &str = "gateway.networking.k8s.io";

/// The route kinds whose rules forward to `backendRefs`.
const ROUTE_KINDS: [&str; 4] = ["HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute"];

/// The kinds the simulated cluster acts on: Gateways and routes are routed by, and
/// ReferenceGrants decide whether a backendRef to another namespace resolves.
pub(crate) const SIMULATED_KINDS: [&str; 6] = [
    "Gateway",
    "HTTPRoute",
    "GRPCRoute",
    "TCPRoute",
    "TLSRoute",
    "ReferenceGrant",
];

/// The most a backendRef's weight may be (`BackendRef.Weight`).
pub(crate) const MAX_WEIGHT: i64 = 1_000_000;

/// The Gateway API route kind `kind` is, if it is one.
pub(crate) fn route_kind(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::Stored(s) if s.info().group == GROUP => {
            ROUTE_KINDS.into_iter().find(|k| *k == s.info().kind)
        }
        _ => None,
    }
}

/// The Gateway API kind named `kind` (one of the described ones).
pub fn kind(kind: &str) -> Kind {
    Kind::Stored(stored(kind))
}

fn stored(kind: &str) -> StoredKind {
    stored_kind::known(GROUP, kind).expect("a described Gateway API kind")
}

/// Whether objects of `kind` are routed by (not only stored).
pub(crate) fn is_simulated(kind: StoredKind) -> bool {
    kind.info().group == GROUP && SIMULATED_KINDS.contains(&kind.info().kind)
}

/// `Gateway.spec`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GatewaySpec {
    #[serde(default)]
    pub gateway_class_name: String,
    #[serde(default)]
    pub listeners: Vec<GatewayListener>,
}

/// One listener of a Gateway: where it accepts which routes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GatewayListener {
    #[serde(default)]
    pub name: String,
    /// None: every host.
    pub hostname: Option<String>,
    #[serde(default)]
    pub port: u32,
    /// `HTTP`, `HTTPS`, `TLS`, `TCP`, `UDP` (or an implementation's own).
    #[serde(default)]
    pub protocol: String,
    #[serde(default)]
    pub allowed_routes: AllowedRoutes,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct AllowedRoutes {
    #[serde(default)]
    pub namespaces: RouteNamespaces,
    /// Empty: the kinds the listener's protocol takes (HTTPRoute for HTTP and HTTPS).
    #[serde(default)]
    pub kinds: Vec<RouteGroupKind>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct RouteGroupKind {
    pub group: Option<String>,
    #[serde(default)]
    pub kind: String,
}

impl AllowedRoutes {
    /// Whether the listener takes routes of `kind` (its protocol permitting).
    pub fn admits(&self, kind: &str) -> bool {
        self.kinds.is_empty()
            || self
                .kinds
                .iter()
                .any(|k| k.group.as_deref().unwrap_or(GROUP) == GROUP && k.kind == kind)
    }
}

/// `allowedRoutes.namespaces`: `Same` (the default), `All`, or `Selector`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct RouteNamespaces {
    pub from: Option<String>,
}

/// `HTTPRoute.spec`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HttpRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentRef>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<HttpRouteRule>,
}

/// A route's parent: a Gateway (the default kind), a listener of it, or a Service (GAMMA).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ParentRef {
    pub group: Option<String>,
    pub kind: Option<String>,
    /// None: the route's namespace.
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: String,
    pub section_name: Option<String>,
    pub port: Option<u32>,
}

impl ParentRef {
    /// A Gateway of the Gateway API (group and kind defaulted as the API server does).
    pub fn is_gateway(&self) -> bool {
        self.group.as_deref().unwrap_or(GROUP) == GROUP
            && self.kind.as_deref().unwrap_or("Gateway") == "Gateway"
    }

    /// A Service: GAMMA's east-west routing, applied by the mesh's sidecars.
    pub fn is_service(&self) -> bool {
        self.group.as_deref() == Some("") && self.kind.as_deref() == Some("Service")
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HttpRouteRule {
    pub name: Option<String>,
    /// Empty: one match of every path (`PathPrefix /`).
    #[serde(default)]
    pub matches: Vec<HttpRouteMatch>,
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HttpRouteMatch {
    /// None: `PathPrefix /`.
    pub path: Option<PathMatch>,
    #[serde(default)]
    pub headers: Vec<NamedMatch>,
    #[serde(default)]
    pub query_params: Vec<NamedMatch>,
    pub method: Option<String>,
}

/// `HTTPPathMatch`: type `Exact`, `PathPrefix` (the default) or `RegularExpression`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct PathMatch {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub value: Option<String>,
}

/// A header or query parameter match: type `Exact` (the default) or `RegularExpression`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct NamedMatch {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

/// `HTTPBackendRef`: a Service (the default kind) in the route's namespace unless another
/// is named, with a weight (default 1) relative to the rule's other backends.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct BackendRef {
    pub group: Option<String>,
    pub kind: Option<String>,
    #[serde(default)]
    pub name: String,
    pub namespace: Option<String>,
    pub port: Option<u32>,
    pub weight: Option<i64>,
}

impl BackendRef {
    /// A core Service (the defaults).
    pub fn is_service(&self) -> bool {
        self.group.as_deref().unwrap_or("").is_empty()
            && self.kind.as_deref().unwrap_or("Service") == "Service"
    }

    /// The weight as the data plane reads it: default 1.
    pub fn weight(&self) -> i64 {
        self.weight.unwrap_or(1)
    }
}

/// `GRPCRoute.spec`: as an HTTPRoute's, its matches by gRPC method.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GrpcRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentRef>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<GrpcRouteRule>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GrpcRouteRule {
    pub name: Option<String>,
    #[serde(default)]
    pub matches: Vec<GrpcRouteMatch>,
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct GrpcRouteMatch {
    pub method: Option<GrpcMethodMatch>,
    #[serde(default)]
    pub headers: Vec<NamedMatch>,
}

/// `GRPCMethodMatch`: type `Exact` (the default) or `RegularExpression`; a service, a
/// method, or both.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct GrpcMethodMatch {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub service: Option<String>,
    pub method: Option<String>,
}

impl GrpcRouteSpec {
    /// The same route as an HTTPRoute matching gRPC's paths (`/service/method`): what an
    /// Envoy-based implementation programs.
    pub fn into_http(self) -> HttpRouteSpec {
        let path = |m: &GrpcMethodMatch| {
            let (service, method) = (m.service.as_deref(), m.method.as_deref());
            let (kind, value) = match m.kind.as_deref().unwrap_or("Exact") {
                "RegularExpression" => (
                    "RegularExpression",
                    format!(
                        "/{}/{}",
                        service.unwrap_or("[^/]+"),
                        method.unwrap_or("[^/]+")
                    ),
                ),
                _ => match (service, method) {
                    (Some(s), Some(m)) => ("Exact", format!("/{s}/{m}")),
                    (Some(s), None) => ("PathPrefix", format!("/{s}")),
                    (None, Some(m)) => {
                        ("RegularExpression", format!("/[^/]+/{}", regex::escape(m)))
                    }
                    (None, None) => return None,
                },
            };
            Some(PathMatch {
                kind: Some(kind.to_string()),
                value: Some(value),
            })
        };
        HttpRouteSpec {
            parent_refs: self.parent_refs,
            hostnames: self.hostnames,
            rules: self
                .rules
                .into_iter()
                .map(|r| HttpRouteRule {
                    name: r.name,
                    matches: r
                        .matches
                        .into_iter()
                        .map(|m| HttpRouteMatch {
                            path: m.method.as_ref().and_then(path),
                            headers: m.headers,
                            query_params: Vec::new(),
                            method: None,
                        })
                        .collect(),
                    backend_refs: r.backend_refs,
                })
                .collect(),
        }
    }
}

/// `TCPRoute.spec` and `TLSRoute.spec` (experimental channel, v1alpha2): parents, for TLS
/// the server names, and rules of backends chosen per connection.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct L4RouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentRef>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<L4RouteRule>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct L4RouteRule {
    pub name: Option<String>,
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}

/// `ReferenceGrant.spec`: which kinds in which namespaces may refer to objects here.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ReferenceGrantSpec {
    #[serde(default)]
    pub from: Vec<GrantFrom>,
    #[serde(default)]
    pub to: Vec<GrantTo>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct GrantFrom {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub namespace: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct GrantTo {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    pub name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_gateway_api_route_kinds_are_routes() {
        assert_eq!(route_kind(kind("HTTPRoute")), Some("HTTPRoute"));
        assert_eq!(route_kind(kind("TLSRoute")), Some("TLSRoute"));
        assert_eq!(route_kind(kind("Gateway")), None);
        assert_eq!(route_kind(Kind::VirtualService), None);
    }

    #[test]
    fn gateways_routes_and_grants_are_simulated_the_other_kinds_stored() {
        for k in SIMULATED_KINDS {
            assert!(is_simulated(stored(k)), "{k}");
        }
        assert!(!is_simulated(stored("GatewayClass")));
    }
}
