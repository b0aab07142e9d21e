//! Translation of the store's Istio objects into a [`RouteTable`], as istiod turns
//! VirtualServices, DestinationRules, Services, Gateways and endpoints into Envoy routes and
//! clusters. Odd objects never fail the translation: they are skipped and a note says why.
//!
//! What Istio does, and so what this does:
//! * a VirtualService without `gateways` applies to the mesh (sidecars) only; one listing
//!   gateways applies to those gateways, and to the mesh only if it also lists `mesh`;
//!   a `match` entry's own `gateways` narrows it further;
//! * a short host (`reviews`) means `reviews.<namespace of the VirtualService>.svc.cluster.local`,
//!   for `hosts` and for destination hosts alike; `*` is refused for the mesh;
//! * several VirtualServices for one host merge on a gateway (routes appended in creation
//!   order) but not on sidecars (the oldest wins);
//! * zero-weight destinations are dropped; a lone destination takes everything; weights that
//!   do not sum to 100 are kept as written (Envoy uses their sum) and noted;
//! * destinations become clusters `outbound|<port>|<subset>|<fqdn>` whose endpoints are the
//!   Service's ready Pods, narrowed by the DestinationRule subset's labels;
//! * every Service also gets a default route on each of its ports for sidecars, used when no
//!   VirtualService covers the host.

use serde_json::Value;
use std::collections::BTreeMap;

use super::matcher::{HostPattern, StrMatcher};
use super::table::{
    Cluster, ClusterId, DefaultRoute, GatewayName, HttpMatch, HttpRouteEntry, L4Match,
    L4RouteEntry, LbPolicy, Listener, Mirror, RouteSource, RouteTable, VirtualHost,
    WeightedClusters,
};
use crate::endpoints::{CLUSTER_DOMAIN_SUFFIX, Catalog, EndpointId, Note, ServiceId};
use crate::model::Objects;
use crate::model::istio::{
    Destination, DestinationRuleSpec, GatewaySpec, HttpMatchRequest, RouteDestination,
    VirtualServiceSpec,
};
use crate::model::object::selector_matches;
use crate::model::{Kind, Object, ObjectKey};

/// Index of the mesh (sidecars) listener in a table.
pub(super) const MESH: usize = 0;

/// Match conditions evaluated per section. An entry with any other condition (scheme,
/// destinationSubnets, sourceSubnet…) never matches — it must not match every request — and
/// the field policy warns about it. (`ignoreUriCase` is read as false, and `statPrefix` only
/// names statistics.)
const HTTP_MATCH_EVALUATED: &[&str] = &[
    "name",
    "uri",
    "method",
    "authority",
    "headers",
    "withoutHeaders",
    "queryParams",
    "sourceLabels",
    "sourceNamespace",
    "port",
    "gateways",
    "ignoreUriCase",
    "statPrefix",
];
const TLS_MATCH_EVALUATED: &[&str] = &[
    "sniHosts",
    "port",
    "gateways",
    "sourceLabels",
    "sourceNamespace",
];
const TCP_MATCH_EVALUATED: &[&str] = &["port", "gateways", "sourceLabels", "sourceNamespace"];

fn source_match(
    labels: &BTreeMap<String, String>,
    namespace: &Option<String>,
) -> super::table::SourceMatch {
    super::table::SourceMatch {
        labels: labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        namespace: namespace.clone(),
    }
}

/// One tls or tcp match entry, as the L4 translation reads it (tcp has no SNI).
struct L4MatchEntry<'m> {
    port: Option<u32>,
    sni: &'m [String],
    source_labels: &'m BTreeMap<String, String>,
    source_namespace: &'m Option<String>,
    gateways: &'m [String],
}

impl<'m> L4MatchEntry<'m> {
    fn tls(m: &'m crate::model::istio::TlsMatchAttributes) -> Self {
        L4MatchEntry {
            port: m.port,
            sni: &m.sni_hosts,
            source_labels: &m.source_labels,
            source_namespace: &m.source_namespace,
            gateways: &m.gateways,
        }
    }

    fn tcp(m: &'m crate::model::istio::L4MatchAttributes) -> Self {
        L4MatchEntry {
            port: m.port,
            sni: &[],
            source_labels: &m.source_labels,
            source_namespace: &m.source_namespace,
            gateways: &m.gateways,
        }
    }
}

/// An L4 match entry and the listeners (gateways) it is narrowed to, if any.
type L4MatchFor = (L4Match, Option<Vec<usize>>);

/// Whether every condition of one raw match entry is one canarysim evaluates.
fn evaluable(raw_match: &Value, evaluated: &[&str]) -> bool {
    raw_match
        .as_object()
        .is_none_or(|o| o.keys().all(|k| evaluated.contains(&k.as_str())))
}

/// How the implementation behind the Gateway API's Gateways splits a rule between its
/// backends (Istio's own routes are always Envoy's draws).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GatewayApiSplit {
    /// A draw per request, as Envoy-based implementations (Istio, Envoy Gateway, Contour,
    /// kgateway) do.
    #[default]
    Random,
    /// A smooth weighted round robin shared by the route's requests, as Traefik and NGINX
    /// Gateway Fabric do.
    RoundRobin,
}

/// What the translation cannot read from the objects: the implementation's choices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TranslateOptions {
    pub gateway_api_split: GatewayApiSplit,
}

/// Builds the route table for the store's current objects.
pub fn translate(api: &dyn Objects) -> RouteTable {
    translate_with(api, TranslateOptions::default())
}

/// [`translate`] with the implementation's choices.
pub fn translate_with(api: &dyn Objects, options: TranslateOptions) -> RouteTable {
    let mut b = Builder::new(api);
    b.options = options;
    b.gateways();
    let gateway_api = b.gateway_api_gateways();
    b.destination_rules();
    let mut vss = api.objects(Kind::VirtualService);
    // Istio resolves conflicts in favour of the oldest object.
    vss.sort_by(|a, b| {
        a.creation_timestamp()
            .cmp(b.creation_timestamp())
            .then_with(|| a.key().cmp(&b.key()))
    });
    let has_vs = !vss.is_empty();
    for vs in vss {
        b.virtual_service(vs);
    }
    let has_http_routes = b.http_routes(&gateway_api);
    let has_l4_routes = b.l4_routes(&gateway_api);
    let has_ingresses = b.ingresses();
    b.service_defaults();
    b.finish(has_vs || has_http_routes || has_l4_routes || has_ingresses)
}

struct DrInfo {
    key: ObjectKey,
    host: HostPattern,
    lb: Option<LbPolicy>,
    outlier: Option<super::policy::OutlierDetection>,
    hash: Option<super::policy::HashOn>,
    subsets: Vec<SubsetInfo>,
}

struct SubsetInfo {
    name: String,
    labels: BTreeMap<String, String>,
    lb: Option<LbPolicy>,
    outlier: Option<super::policy::OutlierDetection>,
    hash: Option<super::policy::HashOn>,
}

/// An HTTP route compiled once per VirtualService; installed per listener.
struct CompiledHttp {
    /// Each match entry with the listeners it is limited to (None: all the VS's listeners).
    matches: Vec<(HttpMatch, Option<Vec<usize>>)>,
    /// The route had match entries (so an empty `matches` after filtering means "never").
    had_matches: bool,
    clusters: WeightedClusters,
    mirrors: Box<[Mirror]>,
    policy: super::policy::HttpPolicy,
    source: RouteSource,
}

struct CompiledL4 {
    matches: Vec<(L4Match, Option<Vec<usize>>)>,
    had_matches: bool,
    clusters: WeightedClusters,
    source: RouteSource,
}

pub(super) struct Builder<'a> {
    pub(super) api: &'a dyn Objects,
    pub(super) catalog: Catalog,
    pub(super) listeners: Vec<Listener>,
    clusters: Vec<Cluster>,
    pub(super) cluster_ids: BTreeMap<String, ClusterId>,
    drs: Vec<DrInfo>,
    notes: Vec<Note>,
    pub(super) options: TranslateOptions,
    /// What the Gateway API objects' status will say.
    pub(super) status: super::gateway_api::StatusBook,
}

impl<'a> Builder<'a> {
    fn new(api: &'a dyn Objects) -> Self {
        let catalog = Catalog::from_objects(api);
        let notes = catalog.notes().to_vec();
        Builder {
            api,
            catalog,
            listeners: vec![Listener::default()],
            clusters: Vec::new(),
            cluster_ids: BTreeMap::new(),
            drs: Vec::new(),
            notes,
            options: TranslateOptions::default(),
            status: Default::default(),
        }
    }

    pub(super) fn note(&mut self, object: &ObjectKey, message: impl Into<String>) {
        self.notes.push(Note {
            object: object.clone(),
            message: message.into(),
        });
    }

    fn gateways(&mut self) {
        for gw in self.api.objects(Kind::Gateway) {
            let spec: GatewaySpec = match gw.spec_as() {
                Ok(s) => s,
                Err(e) => {
                    self.note(&gw.key(), format!("spec cannot be read ({e}); skipped"));
                    continue;
                }
            };
            let mut ports: Vec<u32> = spec
                .servers
                .iter()
                .filter_map(|s| s["port"]["number"].as_u64())
                .filter_map(|p| u32::try_from(p).ok())
                .collect();
            ports.sort_unstable();
            ports.dedup();
            // Plain HTTP first, then HTTPS: a request that names no port is a plain one.
            let http_port = spec
                .servers
                .iter()
                .filter_map(|s| {
                    let port = u32::try_from(s["port"]["number"].as_u64()?).ok()?;
                    Some((http_rank(s)?, port))
                })
                .min()
                .map(|(_, port)| port);
            let mut servers = Vec::new();
            for server in &spec.servers {
                let port = server["port"]["number"]
                    .as_u64()
                    .and_then(|p| u32::try_from(p).ok());
                let mut hosts = Vec::new();
                for h in server["hosts"].as_array().into_iter().flatten() {
                    let Some(h) = h.as_str() else { continue };
                    // `namespace/host`: which namespaces' VirtualServices may bind. Only
                    // the host part is simulated; say so when the restriction could matter.
                    let host = match h.split_once('/') {
                        Some((ns, host)) => {
                            if ns != "*" {
                                self.note(
                                    &gw.key(),
                                    format!(
                                        "server host {h:?}: the namespace restriction {ns:?} is \
                                         not simulated; VirtualServices of every namespace bind"
                                    ),
                                );
                            }
                            host
                        }
                        None => h,
                    };
                    hosts.push(HostPattern::parse(host, gw.namespace()));
                }
                servers.push((port, hosts.into_boxed_slice()));
            }
            self.listeners.push(Listener {
                gateway: Some(GatewayName::new(gw.namespace(), gw.name())),
                ports: ports.into(),
                http_port,
                servers: servers.into(),
                ..Listener::default()
            });
        }
    }

    fn destination_rules(&mut self) {
        for dr in self.api.objects(Kind::DestinationRule) {
            let key = dr.key();
            let spec: DestinationRuleSpec = match dr.spec_as() {
                Ok(s) => s,
                Err(e) => {
                    self.note(&key, format!("spec cannot be read ({e}); skipped"));
                    continue;
                }
            };
            let lb = self.lb_policy(&key, spec.traffic_policy.as_ref(), "trafficPolicy");
            let outlier =
                self.outlier_detection(&key, &dr.spec()["trafficPolicy"], "trafficPolicy");
            let hash = self.consistent_hash(&key, &dr.spec()["trafficPolicy"], "trafficPolicy");
            let raw_subsets = dr.spec()["subsets"].as_array().cloned().unwrap_or_default();
            let subsets = spec
                .subsets
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let policy = raw_subsets.get(i).and_then(|r| r.get("trafficPolicy"));
                    let where_ = format!("subsets[{i}].trafficPolicy");
                    SubsetInfo {
                        name: s.name.clone(),
                        labels: s.labels.clone(),
                        lb: self.lb_policy(&key, policy, &where_),
                        outlier: policy.and_then(|p| self.outlier_detection(&key, p, &where_)),
                        hash: policy.and_then(|p| self.consistent_hash(&key, p, &where_)),
                    }
                })
                .collect();
            self.drs.push(DrInfo {
                host: HostPattern::parse(&spec.host, dr.namespace()),
                key,
                lb,
                outlier,
                hash,
                subsets,
            });
        }
    }

    /// `trafficPolicy.outlierDetection`, noting what is not simulated.
    fn outlier_detection(
        &mut self,
        key: &ObjectKey,
        policy: &Value,
        where_: &str,
    ) -> Option<super::policy::OutlierDetection> {
        let mut notes = Vec::new();
        let od =
            super::policy::OutlierDetection::from_value(&policy["outlierDetection"], &mut notes);
        for n in notes {
            self.note(key, format!("{where_}.{n}"));
        }
        od
    }

    /// `trafficPolicy.loadBalancer.consistentHash`, noting what is not simulated.
    fn consistent_hash(
        &mut self,
        key: &ObjectKey,
        policy: &Value,
        where_: &str,
    ) -> Option<super::policy::HashOn> {
        let v = policy["loadBalancer"].get("consistentHash")?;
        let mut notes = Vec::new();
        let on = super::policy::HashOn::from_value(v, &mut notes);
        for n in notes {
            self.note(key, format!("{where_}.loadBalancer.{n}"));
        }
        on
    }

    /// The outlier detection and consistent hash that apply to a cluster: the subset's,
    /// else the rule's.
    fn cluster_policy_for(
        &self,
        fqdn: &str,
        subset: &str,
        vs_ns: &str,
        svc_ns: &str,
    ) -> (
        Option<super::policy::OutlierDetection>,
        Option<super::policy::HashOn>,
    ) {
        let Some(i) = self.destination_rule(fqdn, vs_ns, svc_ns) else {
            return (None, None);
        };
        let d = &self.drs[i];
        let s = d
            .subsets
            .iter()
            .find(|s| !subset.is_empty() && s.name == subset);
        (
            s.and_then(|s| s.outlier).or(d.outlier),
            s.and_then(|s| s.hash.clone()).or_else(|| d.hash.clone()),
        )
    }

    /// `trafficPolicy.loadBalancer.simple`, noting what is not simulated.
    fn lb_policy(
        &mut self,
        key: &ObjectKey,
        policy: Option<&Value>,
        where_: &str,
    ) -> Option<LbPolicy> {
        let lb = policy?.get("loadBalancer")?;
        if lb.get("consistentHash").is_some() {
            // Chosen per request by `consistent_hash`; no simple policy applies.
            return None;
        }
        let simple = lb.get("simple")?.as_str().unwrap_or("");
        let parsed = LbPolicy::parse(simple);
        if parsed.is_none() && simple != "UNSPECIFIED" {
            self.note(
                key,
                format!("{where_}.loadBalancer.simple {simple:?} is not simulated; the default policy is used"),
            );
        }
        parsed
    }

    /// The listener for a gateway reference written in a VirtualService in `ns`.
    fn gateway_ref(&self, reference: &str, ns: &str) -> Option<usize> {
        if reference == "mesh" {
            return Some(MESH);
        }
        self.listeners
            .iter()
            .position(|l| l.gateway.as_ref().is_some_and(|g| g.is(reference, ns)))
    }

    // Long: istiod's translation of one VirtualService (http, tls and tcp routes) in one pass over
    // its fields.
    fn virtual_service(&mut self, vs: &Object) {
        let key = vs.key();
        let ns = vs.namespace().to_string();
        let spec: VirtualServiceSpec = match vs.spec_as() {
            Ok(s) => s,
            Err(e) => {
                self.note(&key, format!("spec cannot be read ({e}); skipped"));
                return;
            }
        };
        if spec.hosts.is_empty() {
            // A VirtualService without hosts is a delegate: it serves through the root
            // routes that name it (`delegated_routes`).
            return;
        }
        let mut bound = Vec::new();
        if spec.gateways.is_empty() {
            bound.push(MESH);
        }
        for g in &spec.gateways {
            match self.gateway_ref(g, &ns) {
                Some(l) if !bound.contains(&l) => bound.push(l),
                Some(_) => {}
                None => self.note(
                    &key,
                    format!("gateway {g:?} does not exist; no routes are installed for it"),
                ),
            }
        }
        let hosts: Vec<HostPattern> = spec
            .hosts
            .iter()
            .map(|h| HostPattern::parse(h, &ns))
            .collect();

        let http: Vec<CompiledHttp> = spec
            .http
            .iter()
            .enumerate()
            .flat_map(|(i, r)| {
                let label = if r.name.is_empty() {
                    format!("http/{i}")
                } else {
                    format!("http/{}", r.name)
                };
                let raw = &vs.spec()["http"][i];
                if raw.get("delegate").is_some_and(Value::is_object) {
                    return self.delegated_routes(&key, &ns, r, raw, &label);
                }
                self.http_route(&key, &ns, r, raw, label)
                    .into_iter()
                    .collect()
            })
            .collect();
        let tls_entries: Vec<(Vec<L4MatchEntry>, &[RouteDestination])> = spec
            .tls
            .iter()
            .map(|r| {
                (
                    r.matches.iter().map(L4MatchEntry::tls).collect(),
                    &r.route[..],
                )
            })
            .collect();
        let tcp_entries: Vec<(Vec<L4MatchEntry>, &[RouteDestination])> = spec
            .tcp
            .iter()
            .map(|r| {
                (
                    r.matches.iter().map(L4MatchEntry::tcp).collect(),
                    &r.route[..],
                )
            })
            .collect();
        let tls = self.l4_section(vs, &key, &ns, "tls", &tls_entries, TLS_MATCH_EVALUATED);
        let tcp = self.l4_section(vs, &key, &ns, "tcp", &tcp_entries, TCP_MATCH_EVALUATED);

        for &l in &bound {
            let http_routes: Vec<HttpRouteEntry> = http
                .iter()
                .filter_map(|r| {
                    let matches = for_listener(&r.matches, r.had_matches, l)?;
                    Some(HttpRouteEntry {
                        matches,
                        clusters: r.clusters.clone(),
                        mirrors: r.mirrors.clone(),
                        policy: r.policy,
                        source: r.source.clone(),
                        sticky: None,
                    })
                })
                .collect();
            let l4 = |routes: &[CompiledL4]| -> Vec<L4RouteEntry> {
                routes
                    .iter()
                    .filter_map(|r| {
                        let matches = for_listener(&r.matches, r.had_matches, l)?;
                        Some(L4RouteEntry {
                            matches,
                            clusters: r.clusters.clone(),
                            source: r.source.clone(),
                        })
                    })
                    .collect()
            };
            let tls_routes = l4(&tls);
            let tcp_routes = l4(&tcp);
            for host in &hosts {
                if l == MESH && *host == HostPattern::Any {
                    self.note(
                        &key,
                        "wildcard host * is not allowed for virtual services bound to the mesh; ignored for sidecars",
                    );
                    continue;
                }
                let listener = &mut self.listeners[l];
                let mut conflicts = Vec::new();
                if !install(&mut listener.http, host, &http_routes, l == MESH) {
                    conflicts.push("http");
                }
                if !install(&mut listener.tls, host, &tls_routes, l == MESH) {
                    conflicts.push("tls");
                }
                if !install(&mut listener.tcp, host, &tcp_routes, l == MESH) {
                    conflicts.push("tcp");
                }
                for c in conflicts {
                    self.note(
                        &key,
                        format!(
                            "host {} already has {c} routes from an older VirtualService; sidecars do not merge them, so these are ignored",
                            host.text()
                        ),
                    );
                }
            }
        }
    }

    /// Listeners a match entry is limited to (None: not limited).
    fn match_gateways(
        &mut self,
        gateways: &[String],
        ns: &str,
        key: &ObjectKey,
    ) -> Option<Vec<usize>> {
        if gateways.is_empty() {
            return None;
        }
        let mut out = Vec::new();
        for g in gateways {
            match self.gateway_ref(g, ns) {
                Some(l) => out.push(l),
                None => self.note(key, format!("match gateway {g:?} does not exist")),
            }
        }
        Some(out)
    }

    fn http_route(
        &mut self,
        key: &ObjectKey,
        ns: &str,
        r: &crate::model::istio::HttpRoute,
        raw: &Value,
        label: String,
    ) -> Option<CompiledHttp> {
        let matches = self.http_matches(key, ns, r, raw, &label);
        let port = single_port(r.matches.iter().map(|m| m.port));
        let clusters = self.split(key, ns, &r.route, port, &label)?;
        // Istio: no percentage means 100 %; Envoy gets a fraction per million.
        let per_million = |p: &Option<crate::model::istio::Percent>| {
            p.as_ref().map_or(1_000_000.0, |p| {
                (p.value * 10_000.0).round().clamp(0.0, 1_000_000.0)
            }) as u32
        };
        let mut mirrors = Vec::new();
        let listed = r
            .mirror
            .iter()
            .map(|d| (d, per_million(&r.mirror_percentage)))
            .chain(
                r.mirrors
                    .iter()
                    .map(|m| (&m.destination, per_million(&m.percentage))),
            );
        for (d, per_million) in listed.collect::<Vec<_>>() {
            if per_million > 0 {
                mirrors.push(Mirror {
                    cluster: self.destination(key, ns, d, port, &label),
                    per_million,
                });
            }
        }
        let mut policy_notes = Vec::new();
        let policy = super::policy::HttpPolicy::from_route(raw, &mut policy_notes);
        for n in policy_notes {
            self.note(key, format!("{label}: {n}"));
        }
        Some(CompiledHttp {
            had_matches: !r.matches.is_empty(),
            matches,
            clusters,
            mirrors: mirrors.into(),
            policy,
            source: RouteSource {
                virtual_service: Some(key.clone()),
                route: label,
            },
        })
    }

    /// An http route's match entries, compiled, each with the listeners it is narrowed to;
    /// an entry with a condition canarysim does not evaluate, or that does not compile (with
    /// a note), is dropped — it never matches.
    fn http_matches(
        &mut self,
        key: &ObjectKey,
        ns: &str,
        r: &crate::model::istio::HttpRoute,
        raw: &Value,
        label: &str,
    ) -> Vec<(HttpMatch, Option<Vec<usize>>)> {
        let mut matches = Vec::new();
        for (j, m) in r.matches.iter().enumerate() {
            if !evaluable(&raw["match"][j], HTTP_MATCH_EVALUATED) {
                continue;
            }
            match compile_match(m) {
                Ok(hm) => {
                    let gws = self.match_gateways(&m.gateways, ns, key);
                    matches.push((hm, gws));
                }
                Err(e) => self.note(key, format!("{label}: match[{j}] never matches: {e}")),
            }
        }
        matches
    }

    /// Istio's delegation: a root route's `delegate` names a VirtualService (without hosts)
    /// whose http routes take its place, each child match joined (AND) with each root match;
    /// the child's destinations, in its namespace, and its retries, timeout and fault apply.
    fn delegated_routes(
        &mut self,
        key: &ObjectKey,
        ns: &str,
        root: &crate::model::istio::HttpRoute,
        raw: &Value,
        label: &str,
    ) -> Vec<CompiledHttp> {
        let delegate = &raw["delegate"];
        let child_name = delegate["name"].as_str().unwrap_or("");
        let child_ns = delegate["namespace"].as_str().unwrap_or(ns).to_string();
        let Some(child) = self
            .api
            .object(Kind::VirtualService, &child_ns, child_name)
            .cloned()
        else {
            self.note(
                key,
                format!(
                    "{label}: delegate {child_ns}/{child_name} does not exist; the route is skipped"
                ),
            );
            return Vec::new();
        };
        let child_key = child.key();
        let child_spec: VirtualServiceSpec = match child.spec_as() {
            Ok(s) => s,
            Err(e) => {
                self.note(&child_key, format!("spec cannot be read ({e}); skipped"));
                return Vec::new();
            }
        };
        // The root route's own match entries (with their gateway narrowing).
        let root_matches = self.http_matches(key, ns, root, raw, label);
        let root_had = !root.matches.is_empty();
        let mut out = Vec::new();
        for (j, r) in child_spec.http.iter().enumerate() {
            let child_raw = &child.spec()["http"][j];
            let child_label = format!(
                "{label} → {child_ns}/{child_name} {}",
                if r.name.is_empty() {
                    format!("http/{j}")
                } else {
                    format!("http/{}", r.name)
                }
            );
            if child_raw.get("delegate").is_some() {
                self.note(
                    &child_key,
                    format!("{child_label}: Istio delegates one level only; the route is skipped"),
                );
                continue;
            }
            let Some(mut compiled) =
                self.http_route(&child_key, &child_ns, r, child_raw, child_label)
            else {
                continue;
            };
            if root_had {
                let child_matches = std::mem::take(&mut compiled.matches);
                compiled.matches = if compiled.had_matches {
                    root_matches
                        .iter()
                        .flat_map(|(rm, gws)| {
                            child_matches.iter().map(move |(cm, _)| {
                                let mut joined = cm.clone();
                                joined.also = Some(Box::new(rm.clone()));
                                (joined, gws.clone())
                            })
                        })
                        .collect()
                } else {
                    root_matches.clone()
                };
                compiled.had_matches = true;
            } else {
                // Gateway narrowing belongs to the root; the child's `gateways` do not apply.
                for (_, gws) in &mut compiled.matches {
                    *gws = None;
                }
            }
            compiled.source.virtual_service = Some(key.clone());
            out.push(compiled);
        }
        out
    }

    /// The tls or tcp routes of a VirtualService, each match entry compiled (or dropped when
    /// it names a condition canarysim does not evaluate).
    fn l4_section(
        &mut self,
        vs: &Object,
        key: &ObjectKey,
        ns: &str,
        section: &str,
        routes: &[(Vec<L4MatchEntry>, &[RouteDestination])],
        evaluated: &[&str],
    ) -> Vec<CompiledL4> {
        let mut out = Vec::new();
        for (i, (entries, destinations)) in routes.iter().enumerate() {
            let raw = &vs.spec()[section][i]["match"];
            let matches = entries
                .iter()
                .enumerate()
                .filter(|(j, _)| evaluable(&raw[*j], evaluated))
                .map(|(_, m)| {
                    let l4 = L4Match {
                        port: m.port,
                        source: source_match(m.source_labels, m.source_namespace),
                        sni: m.sni.iter().map(|h| HostPattern::server_name(h)).collect(),
                    };
                    (l4, self.match_gateways(m.gateways, ns, key))
                })
                .collect();
            let ports = entries.iter().map(|m| m.port);
            let had_matches = !entries.is_empty();
            out.extend(self.l4_route(
                key,
                ns,
                destinations,
                (matches, had_matches),
                ports,
                format!("{section}/{i}"),
            ));
        }
        out
    }

    fn l4_route(
        &mut self,
        key: &ObjectKey,
        ns: &str,
        route: &[RouteDestination],
        // The evaluable match entries, and whether the route had any entry at all.
        (matches, had_matches): (Vec<L4MatchFor>, bool),
        ports: impl Iterator<Item = Option<u32>>,
        label: String,
    ) -> Option<CompiledL4> {
        let port = single_port(ports);
        let clusters = self.split(key, ns, route, port, &label)?;
        Some(CompiledL4 {
            had_matches,
            matches,
            clusters,
            source: RouteSource {
                virtual_service: Some(key.clone()),
                route: label,
            },
        })
    }

    /// The weighted split of a route's destinations, as Istio writes it for Envoy.
    fn split(
        &mut self,
        key: &ObjectKey,
        ns: &str,
        dests: &[RouteDestination],
        port: Option<u32>,
        label: &str,
    ) -> Option<WeightedClusters> {
        match dests {
            [] => {
                self.note(
                    key,
                    format!("{label}: no destination; the route is skipped"),
                );
                None
            }
            // A lone destination takes everything, whatever its weight says.
            [only] => Some(WeightedClusters::single(self.destination(
                key,
                ns,
                &only.destination,
                port,
                label,
            ))),
            _ => {
                let mut sum: i64 = 0;
                let mut entries = Vec::new();
                for d in dests {
                    let mut w = d.weight.unwrap_or(0);
                    if w < 0 {
                        self.note(
                            key,
                            format!(
                                "{label}: destination {} has negative weight {w}; treated as 0",
                                d.destination.host
                            ),
                        );
                        w = 0;
                    }
                    let w = u32::try_from(w).unwrap_or(u32::MAX);
                    sum += i64::from(w);
                    if w > 0 {
                        entries.push((self.destination(key, ns, &d.destination, port, label), w));
                    }
                }
                if sum != 100 {
                    self.note(
                        key,
                        format!("{label}: weights sum to {sum}, not 100; Istio 1.15 and later take them as relative (earlier releases refuse them)"),
                    );
                }
                let split = WeightedClusters::new(entries);
                if split.is_none() {
                    self.note(
                        key,
                        format!("{label}: every destination has weight 0; the route is skipped"),
                    );
                }
                split
            }
        }
    }

    /// The cluster a destination names, created on first use.
    pub(super) fn destination(
        &mut self,
        key: &ObjectKey,
        ns: &str,
        d: &Destination,
        match_port: Option<u32>,
        label: &str,
    ) -> ClusterId {
        let host = d.host.trim().to_ascii_lowercase();
        let fqdn = if host.contains('.') {
            host
        } else {
            format!("{host}.{ns}{CLUSTER_DOMAIN_SUFFIX}")
        };
        let svc = self.service_by_fqdn(&fqdn);
        let ports: Vec<u32> = svc
            .and_then(|s| self.catalog.service(s))
            .map(|s| s.ports.iter().map(|p| p.port).collect())
            .unwrap_or_default();
        // Istio takes the destination's port, else the Service's only port, else the port
        // of the listener the route serves (here: the port every match entry names).
        let written = d.port.as_ref().map(|p| p.number).filter(|p| *p > 0);
        let port = match (written, ports.as_slice(), match_port) {
            (Some(p), _, _) | (None, &[p], _) | (None, _, Some(p)) => p,
            (None, &[first, ..], None) => {
                self.note(
                    key,
                    format!("{label}: destination {fqdn} names no port and the Service has several; port {first} assumed"),
                );
                first
            }
            (None, [], None) => 0,
        };
        let name = format!("outbound|{port}|{}|{fqdn}", d.subset);
        if let Some(id) = self.cluster_ids.get(&name) {
            return *id;
        }
        let (endpoints, lb) = match svc {
            None => {
                self.note(
                    key,
                    format!("{label}: destination host {fqdn} is not a Service in the store; its cluster has no endpoints"),
                );
                (Vec::new(), None)
            }
            Some(s) => self.cluster_endpoints(key, s, &d.subset, ns, label),
        };
        let svc_ns = svc
            .and_then(|s| self.catalog.service(s))
            .map(|s| s.namespace.clone())
            .unwrap_or_default();
        let (outlier, hash) = self.cluster_policy_for(&fqdn, &d.subset, ns, &svc_ns);
        let id = self.add_cluster(name, fqdn, port, d.subset.clone(), endpoints, lb);
        self.clusters[id.0 as usize].outlier = outlier;
        self.clusters[id.0 as usize].hash = hash;
        id
    }

    pub(super) fn add_cluster(
        &mut self,
        name: String,
        host: String,
        port: u32,
        subset: String,
        endpoints: Vec<EndpointId>,
        lb: Option<LbPolicy>,
    ) -> ClusterId {
        let id = ClusterId(self.clusters.len() as u32);
        self.cluster_ids.insert(name.clone(), id);
        self.clusters.push(Cluster {
            id,
            name,
            host,
            port,
            subset,
            endpoints: endpoints.into(),
            lb,
            outlier: None,
            hash: None,
            unresolved: false,
        });
        id
    }

    /// Whether cluster `id` has an endpoint (a ready pod) to send to.
    pub(super) fn has_endpoints(&self, id: ClusterId) -> bool {
        !self.clusters[id.0 as usize].endpoints.is_empty()
    }

    /// Marks cluster `id` as a backendRef that does not resolve.
    pub(super) fn mark_unresolved(&mut self, id: ClusterId) {
        self.clusters[id.0 as usize].unresolved = true;
    }

    /// The Service's endpoints, narrowed by the subset's labels, and the policy that applies.
    fn cluster_endpoints(
        &mut self,
        key: &ObjectKey,
        svc: ServiceId,
        subset: &str,
        vs_ns: &str,
        label: &str,
    ) -> (Vec<EndpointId>, Option<LbPolicy>) {
        let Some(s) = self.catalog.service(svc) else {
            return (Vec::new(), None);
        };
        let all = s.endpoints.clone();
        let fqdn = s.fqdn.clone();
        let svc_ns = s.namespace.clone();
        let dr = self.destination_rule(&fqdn, vs_ns, &svc_ns);
        if subset.is_empty() {
            return (all, dr.and_then(|i| self.drs[i].lb));
        }
        let found = dr.and_then(|i| {
            let d = &self.drs[i];
            d.subsets
                .iter()
                .find(|s| s.name == subset)
                .map(|s| (s, d.lb))
        });
        match found {
            Some((s, dr_lb)) => {
                let eps = all
                    .into_iter()
                    .filter(|e| {
                        self.catalog
                            .endpoint(*e)
                            .is_some_and(|e| selector_matches(&s.labels, &e.labels))
                    })
                    .collect();
                (eps, s.lb.or(dr_lb))
            }
            None => {
                let msg = match dr {
                    Some(i) => format!(
                        "{label}: subset {subset:?} is not defined in {}; its cluster has no endpoints",
                        self.drs[i].key
                    ),
                    None => format!(
                        "{label}: no DestinationRule defines subset {subset:?} for {fqdn}; its cluster has no endpoints"
                    ),
                };
                self.note(key, msg);
                (Vec::new(), None)
            }
        }
    }

    /// The DestinationRule for a host: Istio looks in the client's namespace, then the
    /// Service's, then elsewhere; an exact host beats a wildcard.
    fn destination_rule(&self, fqdn: &str, client_ns: &str, svc_ns: &str) -> Option<usize> {
        self.drs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.host.matches(fqdn, ""))
            .min_by_key(|(_, d)| {
                let ns_rank = if d.key.namespace == client_ns {
                    0
                } else if d.key.namespace == svc_ns {
                    1
                } else {
                    2
                };
                (ns_rank, d.host.specificity())
            })
            .map(|(i, _)| i)
    }

    fn service_by_fqdn(&self, fqdn: &str) -> Option<ServiceId> {
        let rest = fqdn.strip_suffix(CLUSTER_DOMAIN_SUFFIX)?;
        let (name, ns) = rest.split_once('.')?;
        self.catalog.find(ns, name)
    }

    /// Sidecars route a host no VirtualService covers to the Service itself: one cluster per
    /// port, every ready endpoint, balanced per request.
    fn service_defaults(&mut self) {
        let services: Vec<(ServiceId, ObjectKey, String, Vec<u32>)> = self
            .catalog
            .services()
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    ServiceId(i as u32),
                    ObjectKey::new(Kind::Service, &s.namespace, &s.name),
                    s.fqdn.clone(),
                    s.ports.iter().map(|p| p.port).collect(),
                )
            })
            .collect();
        for (svc, key, fqdn, ports) in services {
            let mut routes = Vec::new();
            for port in ports {
                let name = format!("outbound|{port}||{fqdn}");
                let id = match self.cluster_ids.get(&name) {
                    Some(id) => *id,
                    None => {
                        let (eps, lb) =
                            self.cluster_endpoints(&key, svc, "", &key.namespace, "default");
                        self.add_cluster(name, fqdn.clone(), port, String::new(), eps, lb)
                    }
                };
                routes.push(DefaultRoute {
                    port,
                    clusters: WeightedClusters::single(id),
                    source: RouteSource {
                        virtual_service: None,
                        route: format!("default {fqdn}:{port}"),
                    },
                });
            }
            if !routes.is_empty() {
                self.listeners[MESH].defaults.push(VirtualHost {
                    host: HostPattern::exact(fqdn),
                    routes,
                });
            }
        }
    }

    fn finish(mut self, has_virtual_services: bool) -> RouteTable {
        for l in &mut self.listeners {
            // Envoy's virtual-host precedence: exact, longest suffix, `*` (stable: creation order).
            l.http.sort_by_key(|v| v.host.specificity());
            l.tls.sort_by_key(|v| v.host.specificity());
            l.tcp.sort_by_key(|v| v.host.specificity());
        }
        let (endpoints, _, _) = self.catalog.into_parts();
        RouteTable {
            listeners: self.listeners,
            clusters: self.clusters,
            endpoints,
            notes: self.notes,
            has_virtual_services,
            gateway_api_status: self.status.into_writes(self.api),
        }
    }
}

/// The match entries that apply on listener `l`; None when the route does not apply there.
fn for_listener<M: Clone>(
    matches: &[(M, Option<Vec<usize>>)],
    had_matches: bool,
    l: usize,
) -> Option<Box<[M]>> {
    let kept: Box<[M]> = matches
        .iter()
        .filter(|(_, gws)| gws.as_ref().is_none_or(|g| g.contains(&l)))
        .map(|(m, _)| m.clone())
        .collect();
    // A route whose every match entry was dropped (other gateways, bad regex) never matches.
    (!had_matches || !kept.is_empty()).then_some(kept)
}

/// Adds routes for `host`; false when sidecars would refuse them (the host is taken).
fn install<R: Clone>(
    vhosts: &mut Vec<VirtualHost<R>>,
    host: &HostPattern,
    routes: &[R],
    mesh: bool,
) -> bool {
    if routes.is_empty() {
        return true;
    }
    match vhosts.iter_mut().find(|v| v.host == *host) {
        Some(_) if mesh => false,
        Some(v) => {
            v.routes.extend_from_slice(routes);
            true
        }
        None => {
            vhosts.push(VirtualHost {
                host: host.clone(),
                routes: routes.to_vec(),
            });
            true
        }
    }
}

/// Whether an Istio Gateway server takes HTTP, plain (0: HTTP, HTTP2, GRPC) or HTTPS
/// terminated at the gateway (1); None for the rest (a passthrough server hands the bytes
/// on as TLS).
fn http_rank(server: &Value) -> Option<u8> {
    let protocol = server["port"]["protocol"].as_str().unwrap_or("");
    let passthrough = matches!(
        server["tls"]["mode"].as_str(),
        Some("PASSTHROUGH" | "AUTO_PASSTHROUGH")
    );
    match protocol.to_ascii_uppercase().as_str() {
        "HTTP" | "HTTP2" | "GRPC" => Some(0),
        "HTTPS" if !passthrough => Some(1),
        _ => None,
    }
}

/// The port every match entry names, if they all name the same one.
fn single_port(ports: impl Iterator<Item = Option<u32>>) -> Option<u32> {
    let mut found = None;
    for p in ports {
        match (p, found) {
            (None, _) => return None,
            (Some(p), None) => found = Some(p),
            (Some(p), Some(q)) if p != q => return None,
            _ => {}
        }
    }
    found
}

fn compile_match(m: &HttpMatchRequest) -> Result<HttpMatch, super::matcher::MatchError> {
    let opt = |s: &Option<crate::model::rollout::StringMatch>| {
        s.as_ref().map(StrMatcher::compile).transpose()
    };
    let named = |map: &BTreeMap<String, crate::model::rollout::StringMatch>, lower: bool| {
        map.iter()
            .map(|(k, v)| {
                let name = if lower {
                    k.to_ascii_lowercase()
                } else {
                    k.clone()
                };
                StrMatcher::compile(v).map(|c| (name, c))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(HttpMatch {
        uri: opt(&m.uri)?,
        method: opt(&m.method)?,
        authority: opt(&m.authority)?,
        headers: named(&m.headers, true)?.into(),
        without_headers: named(&m.without_headers, true)?.into(),
        query_params: named(&m.query_params, false)?.into(),
        source: source_match(&m.source_labels, &m.source_namespace),
        port: m.port,
        also: None,
    })
}
