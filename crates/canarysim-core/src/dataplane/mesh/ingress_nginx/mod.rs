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
//!   100. Each decision is a route of its own, tried in that order before the location's
//!   weighted route, so the router, the simulated loads and the Envoy export all route
//!   alike.
//!
//! * session affinity (`affinity: cookie`) pins a client to the backend its cookie names,
//!   before any of the above: the primary's, else the canary's when the canary Ingress does
//!   not say `affinity-canary-behavior: legacy` (`mergeAlternativeBackend` then copies the
//!   primary's affinity to it); see [`Stickiness`].
//!
//! * a host where some location's Ingress says `use-regex: "true"` (or a `rewrite-target`)
//!   has only regex locations (`enforceRegexModifier`): each path is `~* "^path"`, tried
//!   longest first, the first match winning.
//!
//! Not simulated (noted): a default backend's catch-all canary.

use std::collections::BTreeMap;
use std::sync::Arc;

use regex::Regex;

use super::matcher::{HostPattern, StrMatcher};
use super::table::{
    ClusterId, GatewayName, HttpMatch, HttpRouteEntry, Listener, RouteSource, Stickiness,
    StickyBackend, VirtualHost, WeightedClusters,
};
use super::translate::Builder;
use crate::endpoints::CLUSTER_DOMAIN_SUFFIX;
use crate::model::ingress::{
    CanaryAnnotations, ClassFilter, DEFAULT_ANNOTATION_PREFIX, IngressSpec, SessionAffinity,
    ingress_kind, makes_regex_location,
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

/// Where a decision of `route_to_alternative_balancer` sends the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Canary,
    Primary,
}

/// A header condition under which balancer.lua decides without the draw, and where to.
struct Rule {
    /// `canary-by-header`, `canary-by-cookie`: for the route's name.
    why: String,
    header: String,
    matcher: StrMatcher,
    to: Decision,
}

/// balancer.lua's decisions before the draw, in its order.
fn rules(policy: &CanaryAnnotations) -> (Vec<Rule>, Option<String>) {
    let mut rules = Vec::new();
    let mut broken = None;
    if !policy.header.is_empty() {
        let header = policy.header.to_ascii_lowercase();
        let rule = |matcher, to, what: &str| Rule {
            why: format!("canary-by-header {what}"),
            header: header.clone(),
            matcher,
            to,
        };
        if !policy.header_value.is_empty() {
            let v = policy.header_value.clone();
            rules.push(rule(StrMatcher::Exact(v.clone()), Decision::Canary, &v));
        } else if !policy.header_pattern.is_empty() {
            // `ngx.re.match` searches; a route's regex matches the whole value (anchored,
            // as Envoy's full match: the export strips the anchors).
            match Regex::new(&format!(
                "^(?:(?s:.*?)(?:{})(?s:.*))$",
                policy.header_pattern
            )) {
                Ok(r) => rules.push(rule(StrMatcher::Regex(r), Decision::Canary, "pattern")),
                Err(e) => {
                    // ingress-nginx logs the error and keeps the primary.
                    broken = Some(format!(
                        "canary-by-header-pattern {:?} does not compile ({e}); a request with the header goes to the primary",
                        policy.header_pattern
                    ));
                    rules.push(rule(StrMatcher::Any, Decision::Primary, "pattern"));
                }
            }
        } else {
            rules.push(rule(
                StrMatcher::Exact("always".into()),
                Decision::Canary,
                "always",
            ));
            rules.push(rule(
                StrMatcher::Exact("never".into()),
                Decision::Primary,
                "never",
            ));
        }
    }
    if !policy.cookie.is_empty() {
        for (value, to) in [("always", Decision::Canary), ("never", Decision::Primary)] {
            let cookie = regex::escape(&policy.cookie);
            let r = Regex::new(&format!("^(?:(?:.*;\\s*)?{cookie}={value}(?:;.*)?)$"))
                .expect("an escaped name and a word");
            rules.push(Rule {
                why: format!("canary-by-cookie {value}"),
                header: "cookie".into(),
                matcher: StrMatcher::Regex(r),
                to,
            });
        }
    }
    (rules, broken)
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
    /// Its Ingress makes it a regex location (`use-regex`, `rewrite-target`).
    regex: bool,
    /// Its place among the primary locations as the controller meets them (a regex
    /// host's locations of equal paths keep it).
    order: usize,
}

/// No traffic shaping: weight 0, no header, no cookie.
fn no_shaping() -> CanaryAnnotations {
    CanaryAnnotations::parse(&BTreeMap::new(), DEFAULT_ANNOTATION_PREFIX).expect("none parse")
}

/// The first Ingress that names an upstream, and the traffic shaping it gives it (None: it
/// is no canary Ingress, and the upstream has none).
struct FirstNamed {
    key: ObjectKey,
    policy: Option<CanaryAnnotations>,
}

/// An upstream's session affinity, as `getBackendServers` gathers it from the Ingresses
/// that name it (not for an upstream a canary Ingress named first: it serves no location):
/// the first affinity and mode given decide them, the last cookie affinity names the
/// cookie, and each cookie affinity's host and path are where the cookie is set.
#[derive(Default)]
struct UpstreamAffinity {
    kind: Option<String>,
    mode: Option<String>,
    cookie: Option<String>,
    /// (host, path) of each path of an Ingress with `affinity: cookie`.
    locations: std::collections::BTreeSet<(String, String)>,
}

/// A path of a served Ingress: the upstream it forwards to, its host and path.
struct ServedPath {
    upstream: String,
    host: String,
    path: String,
}

impl UpstreamAffinity {
    /// Gathers them in the controller's order, from each served Ingress's affinity and
    /// paths.
    fn gather<'a>(
        served: impl Iterator<Item = (&'a SessionAffinity, &'a [ServedPath])>,
        upstreams: &BTreeMap<String, FirstNamed>,
    ) -> BTreeMap<String, UpstreamAffinity> {
        let mut out: BTreeMap<String, UpstreamAffinity> = BTreeMap::new();
        for (affinity, paths) in served {
            for ServedPath {
                upstream,
                host,
                path,
            } in paths
            {
                // `ups.NoServer`: the upstream a canary Ingress named first.
                if upstreams.get(upstream).is_none_or(|f| f.policy.is_some()) {
                    continue;
                }
                let a = out.entry(upstream.clone()).or_default();
                if a.kind.is_none() && !affinity.kind.is_empty() {
                    a.kind = Some(affinity.kind.clone());
                }
                if a.mode.is_none() && !affinity.mode.is_empty() {
                    a.mode = Some(affinity.mode.clone());
                }
                if affinity.is_sticky() {
                    a.cookie = Some(affinity.cookie.clone());
                    a.locations.insert((host.clone(), path.clone()));
                }
            }
        }
        out
    }

    /// `backend` on `l` as its sticky balancer pins it, if its affinity is a cookie one.
    fn pinning(&self, l: &Location, cluster: ClusterId, backend: &str) -> Option<StickyBackend> {
        (self.kind.as_deref() == Some("cookie")).then(|| StickyBackend {
            cluster,
            backend: backend.into(),
            cookie: self
                .cookie
                .as_deref()
                .unwrap_or(crate::model::ingress::DEFAULT_AFFINITY_COOKIE)
                .into(),
            persistent: self.mode.as_deref() == Some("persistent"),
            sets_cookie: self.locations.contains(&(l.host.clone(), l.path.clone())),
        })
    }
}

/// What a canary Ingress is merged with: its own settings, the upstreams' first Ingresses,
/// the primary locations.
struct Merging<'a> {
    own: &'a CanaryAnnotations,
    /// `affinity-canary-behavior: legacy` on the canary Ingress.
    legacy_affinity: bool,
    upstreams: &'a BTreeMap<String, FirstNamed>,
    primaries: &'a [Location],
}

/// A canary Ingress's alternative for one primary backend.
struct AlternativeBackend {
    cluster: ClusterId,
    /// Its upstream's name (`namespace/service:port`).
    backend: String,
    policy: CanaryAnnotations,
    key: ObjectKey,
    /// Its canary Ingress says `affinity-canary-behavior: legacy`: not pinned.
    legacy_affinity: bool,
}

impl Builder<'_> {
    /// Installs the Ingresses ingress-nginx serves on its proxy; whether there was one.
    pub(super) fn ingresses(&mut self) -> bool {
        let mut ingresses = self.api.objects(ingress_kind());
        if ingresses.is_empty() {
            return false;
        }
        // The controller's store lists Ingresses oldest first, and those of the same second
        // by `namespace/name` descending (store.go, `ListIngresses`).
        ingresses.sort_by(|a, b| {
            a.creation_timestamp()
                .cmp(b.creation_timestamp())
                .then_with(|| b.key().cmp(&a.key()))
        });
        let filter = ClassFilter::of(self.api);
        // `createUpstreams` makes each upstream once, for the first Ingress that names it:
        // only a canary one gives it traffic shaping.
        let mut upstreams: BTreeMap<String, FirstNamed> = BTreeMap::new();
        let mut primaries: Vec<Location> = Vec::new();
        // Each served Ingress's affinity and paths, in order.
        let mut served: Vec<(SessionAffinity, Vec<ServedPath>)> = Vec::new();
        let mut canaries: Vec<(&Object, IngressSpec, CanaryAnnotations, bool)> = Vec::new();
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
            for why in spec.paths().filter_map(|p| p.strict_validation_error()) {
                self.note(&key, why);
            }
            if spec.default_backend.is_some() {
                self.note(&key, "spec.defaultBackend is not simulated: a request no rule matches is answered 404");
            }
            let mut dropped = Vec::new();
            let annotations = ingress.annotations();
            let parsed = CanaryAnnotations::parse_noting(
                &annotations,
                DEFAULT_ANNOTATION_PREFIX,
                &mut dropped,
            );
            let affinity = SessionAffinity::parse_noting(
                &annotations,
                DEFAULT_ANNOTATION_PREFIX,
                &mut dropped,
            );
            for why in dropped {
                self.note(&key, why);
            }
            let canary = parsed.unwrap_or_else(|e| {
                self.note(&key, e);
                no_shaping()
            });
            let mut paths = Vec::new();
            for p in spec.paths() {
                let Some(service) = p.service else { continue };
                let upstream = backend_name(key.namespace.as_str(), service);
                upstreams
                    .entry(upstream.clone())
                    .or_insert_with(|| FirstNamed {
                        key: key.clone(),
                        policy: canary.enabled.then(|| canary.clone()),
                    });
                paths.push(ServedPath {
                    upstream,
                    host: p.host.to_string(),
                    path: p.path.to_string(),
                });
            }
            let legacy_affinity = affinity.legacy_canary;
            served.push((affinity, paths));
            if canary.enabled {
                canaries.push((ingress, spec, canary, legacy_affinity));
            } else {
                self.primary_locations(ingress, &spec, &mut primaries);
            }
        }
        let affinities = UpstreamAffinity::gather(
            served.iter().map(|(a, paths)| (a, paths.as_slice())),
            &upstreams,
        );
        let mut alternatives: BTreeMap<String, AlternativeBackend> = BTreeMap::new();
        for (ingress, spec, own, legacy_affinity) in canaries {
            let merging = Merging {
                own: &own,
                legacy_affinity,
                upstreams: &upstreams,
                primaries: &primaries,
            };
            self.merge_canary(ingress, &spec, &merging, &mut alternatives);
        }
        self.install_ingress_proxy(primaries, &alternatives, &affinities);
        true
    }

    /// Notes the annotations that change routing and are not simulated.
    fn note_unsimulated(&mut self, ingress: &Object) {
        let annotations = ingress.annotations();
        for name in ["upstream-hash-by", "load-balance", "default-backend"] {
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
        let annotations = ingress.annotations();
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
                regex: makes_regex_location(&annotations, DEFAULT_ANNOTATION_PREFIX, p.path),
                order: out.len(),
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
        let cluster = self.destination(key, ns, &destination, None, label);
        (cluster, backend_name(ns, service))
    }

    /// `mergeAlternativeBackends` for one canary Ingress.
    fn merge_canary(
        &mut self,
        ingress: &Object,
        spec: &IngressSpec,
        merging: &Merging,
        alternatives: &mut BTreeMap<String, AlternativeBackend>,
    ) {
        let key = ingress.key();
        for p in spec.paths() {
            let Some(service) = p.service else {
                continue;
            };
            let label = &p.label;
            let location = merging
                .primaries
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
            // The traffic shaping is the upstream's: its first Ingress's.
            let Some(first) = merging.upstreams.get(&backend) else {
                continue; // every served path's upstream is listed
            };
            let policy = first.policy.clone().unwrap_or_else(no_shaping);
            if first.key != key {
                let why = match &first.policy {
                    None => format!(
                        "its canary settings are never read: Service {} was first named by Ingress {}/{}, which is no canary Ingress, so its backend has no traffic shaping and no request is sent to it as a canary (kubernetes/ingress-nginx#9458)",
                        service.name, first.key.namespace, first.key.name
                    ),
                    Some(p) if p != merging.own => format!(
                        "its canary settings are ignored: backend {} takes those of Ingress {}/{}, the first to name it (the controller creates each upstream once)",
                        service.name, first.key.namespace, first.key.name
                    ),
                    Some(_) => String::new(),
                };
                if !why.is_empty() {
                    self.note(&key, format!("{label}: {why}"));
                }
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
                            backend,
                            policy: policy.clone(),
                            key: key.clone(),
                            legacy_affinity: merging.legacy_affinity,
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
        mut locations: Vec<Location>,
        alternatives: &BTreeMap<String, AlternativeBackend>,
        affinities: &BTreeMap<String, UpstreamAffinity>,
    ) {
        // nginx: an exact location first, then the longest prefix.
        locations.sort_by_key(|l| {
            let exact = l.path_type == "Exact";
            (
                !exact,
                std::cmp::Reverse(l.path.trim_end_matches('/').len()),
            )
        });
        let regex_hosts: std::collections::BTreeSet<String> = locations
            .iter()
            .filter(|l| l.regex)
            .map(|l| l.host.clone())
            .collect();
        if !regex_hosts.is_empty() {
            // A regex host's locations are tried in the controller's order, the longest path
            // first (then the greater), the first match winning; hosts keep their order.
            let mut host_rank: BTreeMap<String, usize> = BTreeMap::new();
            for l in &locations {
                let next = host_rank.len();
                host_rank.entry(l.host.clone()).or_insert(next);
            }
            locations.sort_by(|a, b| {
                let by_host = host_rank[&a.host].cmp(&host_rank[&b.host]);
                if by_host.is_ne() || !regex_hosts.contains(&a.host) {
                    return by_host;
                }
                b.path
                    .len()
                    .cmp(&a.path.len())
                    .then_with(|| b.path.cmp(&a.path))
                    .then_with(|| a.order.cmp(&b.order))
            });
        }
        let mut hosts: Vec<VirtualHost<HttpRouteEntry>> = Vec::new();
        for l in locations {
            let host = if l.host.is_empty() {
                HostPattern::Any
            } else {
                HostPattern::server_name(&l.host)
            };
            let regex = regex_hosts.contains(&l.host);
            let entries = self.location_routes(&l, regex, alternatives.get(&l.backend), affinities);
            match hosts.iter_mut().find(|v| v.host == host) {
                Some(v) => v.routes.extend(entries),
                None => hosts.push(VirtualHost {
                    host,
                    routes: entries,
                }),
            }
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

    /// A location's routes: with a canary, balancer.lua's decisions before the draw, each a
    /// route to the canary or the primary, then the draw; else the primary.
    fn location_routes(
        &mut self,
        l: &Location,
        regex_host: bool,
        alt: Option<&AlternativeBackend>,
        affinities: &BTreeMap<String, UpstreamAffinity>,
    ) -> Vec<HttpRouteEntry> {
        let path = match regex_host {
            true => regex_location(&l.path).unwrap_or_else(|e| {
                let why = format!(
                    "{}: path {:?} does not compile as canarysim's regular expression ({e}); matched as a prefix",
                    l.source.route, l.path
                );
                if let Some(key) = &l.source.virtual_service {
                    self.note(key, why);
                }
                path_matcher(&l.path, &l.path_type)
            }),
            false => path_matcher(&l.path, &l.path_type),
        };
        // A backend without endpoints has no balancer (balancer.lua's sync drops it):
        // without the alternative's every request stays on the primary, and without the
        // primary's none reaches the alternative (`get_balancer` returns nil first: 503).
        let alt = alt.filter(|a| self.has_endpoints(a.cluster) && self.has_endpoints(l.cluster));
        let sticky = stickiness(l, alt, affinities).map(Arc::new);
        let entry =
            |matcher: HttpMatch, clusters: WeightedClusters, route: String| HttpRouteEntry {
                matches: Box::new([matcher]),
                clusters,
                mirrors: Box::new([]),
                policy: super::policy::INGRESS_NGINX_POLICY,
                source: RouteSource {
                    virtual_service: l.source.virtual_service.clone(),
                    route,
                },
                sticky: sticky.clone(),
            };
        let on_path = || HttpMatch {
            uri: Some(path.clone()),
            ..HttpMatch::default()
        };
        let label = &l.source.route;
        let Some(alt) = alt else {
            return vec![entry(
                on_path(),
                WeightedClusters::single(l.cluster),
                label.clone(),
            )];
        };
        let (rules, broken) = rules(&alt.policy);
        if let Some(why) = broken {
            self.note(&alt.key, why);
        }
        let mut out: Vec<HttpRouteEntry> = rules
            .into_iter()
            .map(|r| {
                let target = match r.to {
                    Decision::Canary => alt.cluster,
                    Decision::Primary => l.cluster,
                };
                let mut m = on_path();
                m.headers = Box::new([(r.header, r.matcher)]);
                entry(
                    m,
                    WeightedClusters::single(target),
                    format!("{label} {}", r.why),
                )
            })
            .collect();
        let (weight, total) = alt.policy.weight_share();
        let weighted = WeightedClusters::new([(l.cluster, total - weight), (alt.cluster, weight)])
            .unwrap_or_else(|| WeightedClusters::single(l.cluster));
        out.push(entry(on_path(), weighted, format!("{label} canary-weight")));
        out
    }
}

/// The session affinity of a location: its primary backend's, and its canary's, which
/// `mergeAlternativeBackend` makes a copy of the primary's (none when the primary has
/// none), unless the canary Ingress asks for the legacy behaviour: then the canary's
/// upstream keeps its own. (An alternative merged into several primaries takes the last
/// one's affinity upstream; here each location's own primary's: they differ only when
/// those primaries' affinities do.)
fn stickiness(
    l: &Location,
    alt: Option<&AlternativeBackend>,
    affinities: &BTreeMap<String, UpstreamAffinity>,
) -> Option<Stickiness> {
    let own = affinities.get(&l.backend);
    let primary = own.and_then(|a| a.pinning(l, l.cluster, &l.backend));
    let canary = alt.and_then(|alt| {
        let affinity = if alt.legacy_affinity {
            affinities.get(&alt.backend)
        } else {
            own
        };
        affinity.and_then(|a| a.pinning(l, alt.cluster, &alt.backend))
    });
    // Where no backend sets its cookie, a client gets none here: a load, which keeps to one
    // host and path, is drawn per request as without affinity.
    let sticky = Stickiness { primary, canary };
    let sets_cookie = sticky.backends().any(|b| b.sets_cookie);
    sets_cookie.then_some(sticky)
}

/// The upstream ingress-nginx makes of a Service backend (`namespace/service:port`).
fn backend_name(ns: &str, service: &crate::model::ingress::IngressServiceBackend) -> String {
    let port = match (&service.port.number, &service.port.name) {
        (Some(n), _) => n.to_string(),
        (None, Some(name)) => name.clone(),
        (None, None) => String::new(),
    };
    format!("{ns}/{}:{port}", service.name)
}

/// An Ingress path as nginx matches it (`internal/ingress/controller/location.go`): `Exact`
/// the path itself; `Prefix` a location for the path with a `/` added, and one for the path
/// exactly (`/foo`: `/foo` and `/foo/…`; `/foo/`: `/foo/` and what follows it, not `/foo`).
fn path_matcher(path: &str, path_type: &str) -> StrMatcher {
    match path_type {
        "Exact" => StrMatcher::Exact(path.to_string()),
        _ if path.ends_with('/') && path != "/" => StrMatcher::Prefix(path.to_string()),
        _ => StrMatcher::path_prefix(path),
    }
}

/// A location of a regex host, `~* "^path"`: case-insensitive, anchored at the start only
/// (a route's regex matches the whole path, as Envoy's full match: the export strips the
/// outer anchors).
fn regex_location(path: &str) -> Result<StrMatcher, regex::Error> {
    // nginx searches `^path`: in `/a|/b` only the first branch is anchored.
    Regex::new(&format!("^(?:(?s:.*?)(?i:^{path})(?s:.*))$")).map(StrMatcher::Regex)
}

#[cfg(test)]
mod tests;
