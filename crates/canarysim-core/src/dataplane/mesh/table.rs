//! The route table (what istiod pushes to every proxy) and the hot path over it:
//! [`RouteTable::route`] finds the route for a request, [`WeightedClusters::pick`] chooses a
//! cluster, [`Cluster::pick_endpoint`] chooses a Pod. Everything was resolved and validated
//! when the table was built, so none of them allocates, hashes a string or compiles a regex,
//! and `pick` cannot fail.

use rand::RngCore;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::matcher::{HostPattern, StrMatcher, request_host};
use crate::endpoints::{Endpoint, EndpointId, Note};
use crate::model::ObjectKey;

/// Index of a cluster in its [`RouteTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterId(pub u32);

/// Endpoint choice inside one cluster (the scenario's `cluster.endpoint_lb`; a
/// DestinationRule's `trafficPolicy.loadBalancer.simple` overrides it per cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LbPolicy {
    /// Envoy's ROUND_ROBIN over equally weighted hosts: a per-cluster cursor.
    #[default]
    RoundRobin,
    /// Envoy's RANDOM: one draw modulo the host count.
    Random,
    /// Envoy's LEAST_REQUEST with equal weights: power of two random choices, the host with
    /// fewer active requests wins (ties keep the first).
    LeastRequest,
}

impl LbPolicy {
    /// Accepts the scenario spelling (`round_robin`) and Istio's (`ROUND_ROBIN`;
    /// `LEAST_CONN` is Istio's deprecated alias of `LEAST_REQUEST`).
    pub fn parse(s: &str) -> Option<LbPolicy> {
        match s.to_ascii_lowercase().as_str() {
            "round_robin" => Some(LbPolicy::RoundRobin),
            "random" => Some(LbPolicy::Random),
            "least_request" | "least_conn" => Some(LbPolicy::LeastRequest),
            _ => None,
        }
    }
}

/// Where a request comes from: that decides which configuration applies to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin<'a> {
    /// Through an ingress gateway: the Gateway object as `namespace/name`, or `name` in the
    /// request's namespace.
    Gateway(&'a str),
    /// From a sidecar inside the mesh.
    Mesh,
    /// From a Pod without a sidecar: no mesh configuration applies (see `kubeproxy`).
    Plain,
}

/// The protocol a VirtualService route section handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `http` routes; a destination is chosen per request.
    Http,
    /// `tls` routes (then `tcp`); a destination is chosen per connection.
    Tls,
    /// `tcp` routes; a destination is chosen per connection.
    Tcp,
}

/// How long a choice holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// HTTP: every request is routed and balanced on its own.
    PerRequest,
    /// TCP/TLS: the cluster and endpoint are chosen when the connection opens and kept.
    PerConnection,
}

/// What the router knows about a request (or, for TCP/TLS, a new connection). Borrowed
/// slices so that a load generator can reuse one buffer.
#[derive(Debug, Clone, Copy)]
pub struct RequestMeta<'a> {
    pub origin: Origin<'a>,
    pub protocol: Protocol,
    /// The caller's namespace: short host names (`reviews`) resolve in it.
    pub namespace: &'a str,
    /// Authority / Host header, optionally with `:port`; for TLS without one, the SNI is used.
    pub host: &'a str,
    pub port: u32,
    /// Path with optional query string.
    pub path: &'a str,
    pub method: &'a str,
    /// Request headers; names compare case-insensitively.
    pub headers: &'a [(&'a str, &'a str)],
    /// TLS server name.
    pub sni: Option<&'a str>,
    /// The caller's pod labels (`sourceLabels`): the load's `source.labels` in the mesh,
    /// the gateway's selector labels through a gateway.
    pub source_labels: &'a [(&'a str, &'a str)],
}

impl Default for RequestMeta<'_> {
    /// `GET /` on port 80 over HTTP from inside the mesh, namespace `default`.
    fn default() -> Self {
        RequestMeta {
            origin: Origin::Mesh,
            protocol: Protocol::Http,
            namespace: "default",
            host: "",
            port: 80,
            path: "/",
            method: "GET",
            headers: &[],
            sni: None,
            source_labels: &[],
        }
    }
}

/// Why a route's pick found no upstream to send to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoUpstream {
    /// The cluster has no ready endpoint (503 "no healthy upstream"; a connection reset).
    NoHealthy,
    /// A Gateway API backendRef that does not resolve (500; a connection rejected).
    Unresolved,
}

/// Why a request was not routed. Carries no strings: the error path must not allocate either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// Envoy's `NR`: no virtual host or no route matched (404).
    #[error("route not found")]
    NoRoute,
    /// Envoy's `UH`: the chosen cluster has no ready endpoint (503, body "no healthy upstream").
    #[error("no healthy upstream")]
    NoHealthyUpstream { cluster: ClusterId },
    /// The chosen backendRef does not resolve (a Gateway API route): implementations answer
    /// 500 without calling anything.
    #[error("backend not resolved")]
    UnresolvedBackend { cluster: ClusterId },
    /// The origin names a gateway that does not exist in the table.
    #[error("no such gateway")]
    UnknownGateway,
    /// The gateway has no server on the request's port (the connection is refused).
    #[error("gateway has no server on this port")]
    NoListener,
    /// A plain (sidecar-less) caller goes through kube-proxy, not through the mesh.
    #[error("the caller has no sidecar; route it with kubeproxy")]
    NotInMesh,
}

impl RouteError {
    /// The HTTP status a client sees (0: no HTTP response, the connection fails).
    pub fn status(self) -> u16 {
        match self {
            RouteError::NoRoute | RouteError::UnknownGateway => 404,
            RouteError::NoHealthyUpstream { .. } => 503,
            RouteError::UnresolvedBackend { .. } => 500,
            RouteError::NoListener | RouteError::NotInMesh => 0,
        }
    }
}

/// The route section a choice came from, for reports: `VirtualService ns/name http/primary`,
/// or a Service's default route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSource {
    /// None for a Service's default route (no VirtualService covers the host).
    pub virtual_service: Option<ObjectKey>,
    /// `http/primary`, `http/0`, `tls/0`, `tcp/0`, or `default` for a Service's default route.
    pub route: String,
}

impl fmt::Display for RouteSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.virtual_service {
            Some(vs) => write!(f, "{vs} {}", self.route),
            None => write!(f, "{}", self.route),
        }
    }
}

/// A weighted split, validated when built: at least one cluster, total weight above zero.
#[derive(Debug, Clone)]
pub struct WeightedClusters {
    entries: Box<[WeightedEntry]>,
    total: u64,
    /// Lemire's multiplier for an exact `x % total` on 32-bit `x` by two multiplications,
    /// when the total fits in 32 bits (always, for Istio's weights summing to 100).
    modulo32: Option<u64>,
    /// A smooth weighted round robin instead of a draw (Traefik, NGINX Gateway Fabric).
    rotation: Option<Arc<Rotation>>,
}

/// A smooth weighted round robin (nginx's: each turn every entry gains its weight, the
/// richest is chosen and pays the total), precomputed over one period and walked by a
/// cursor shared by every clone of the split, as one balancer per route is.
#[derive(Debug)]
struct Rotation {
    /// Entry indexes over one period (the weights divided by their greatest common divisor).
    order: Box<[u16]>,
    cursor: AtomicUsize,
}

/// The longest period precomputed: weights whose reduced sum is larger are scaled down to
/// it (a share moves by less than 1 / 65,536).
const MAX_ROTATION: u64 = 65_536;

impl Rotation {
    fn new(weights: &[u32]) -> Option<Rotation> {
        if weights.len() < 2 || weights.len() > usize::from(u16::MAX) {
            return None;
        }
        let gcd = weights.iter().fold(0u64, |g, w| gcd(g, u64::from(*w)));
        let mut reduced: Vec<u64> = weights.iter().map(|w| u64::from(*w) / gcd.max(1)).collect();
        let total: u64 = reduced.iter().sum();
        if total > MAX_ROTATION {
            for w in &mut reduced {
                *w = (*w * MAX_ROTATION / total).max(u64::from(*w > 0));
            }
        }
        let total: i64 = reduced.iter().sum::<u64>() as i64;
        let mut current = vec![0i64; reduced.len()];
        let mut order = Vec::with_capacity(total as usize);
        for _ in 0..total {
            for (c, w) in current.iter_mut().zip(&reduced) {
                *c += *w as i64;
            }
            let best = (0..current.len()).max_by_key(|&i| (current[i], std::cmp::Reverse(i)))?;
            current[best] -= total;
            order.push(best as u16);
        }
        Some(Rotation {
            order: order.into(),
            cursor: AtomicUsize::new(0),
        })
    }

    #[inline]
    fn next(&self) -> usize {
        let turn = self.cursor.fetch_add(1, Ordering::Relaxed);
        usize::from(self.order[turn % self.order.len()])
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// `a % d` for 32-bit values, given `m = u64::MAX / d + 1` (wrapping): exact for every `a`
/// and non-zero `d` (Lemire, Kaser, Kurz, "Faster Remainder by Direct Computation", 2019).
#[inline(always)]
fn fastmod_u32(a: u32, m: u64, d: u32) -> u32 {
    let low = m.wrapping_mul(u64::from(a));
    ((u128::from(low) * u128::from(d)) >> 64) as u32
}

#[derive(Debug, Clone, Copy)]
struct WeightedEntry {
    cluster: ClusterId,
    weight: u32,
    /// Cumulative weight up to and including this entry.
    end: u64,
}

impl WeightedClusters {
    /// None when no entry has a weight above zero (zero-weight entries are dropped, as Istio
    /// drops them).
    pub fn new(entries: impl IntoIterator<Item = (ClusterId, u32)>) -> Option<WeightedClusters> {
        let mut total = 0u64;
        let entries: Box<[WeightedEntry]> = entries
            .into_iter()
            .filter(|(_, w)| *w > 0)
            .map(|(cluster, weight)| {
                total += u64::from(weight);
                WeightedEntry {
                    cluster,
                    weight,
                    end: total,
                }
            })
            .collect();
        (total > 0).then_some(WeightedClusters {
            entries,
            total,
            modulo32: modulo32(total),
            rotation: None,
        })
    }

    /// The same split taken in turns (a smooth weighted round robin) instead of by draws.
    pub fn in_turns(mut self) -> WeightedClusters {
        let weights: Vec<u32> = self.entries.iter().map(|e| e.weight).collect();
        self.rotation = Rotation::new(&weights).map(Arc::new);
        self
    }

    /// Whether the split is taken in turns rather than drawn.
    pub fn is_in_turns(&self) -> bool {
        self.rotation.is_some()
    }

    /// One cluster taking everything (Istio emits a plain `cluster` action then).
    pub fn single(cluster: ClusterId) -> WeightedClusters {
        WeightedClusters {
            entries: Box::new([WeightedEntry {
                cluster,
                weight: 100,
                end: 100,
            }]),
            total: 100,
            modulo32: modulo32(100),
            rotation: None,
        }
    }

    /// Envoy's weighted-cluster choice: a random value modulo the total weight, then the
    /// walk over cumulative weights. A single cluster takes no draw (Istio rewrites a
    /// one-entry split to a plain cluster action). The random value is 32 bits (Envoy draws
    /// 64): for a total of 100 the modulo bias is below 3·10⁻⁸ either way, and the remainder
    /// of a 32-bit value is an exact two-multiply computation instead of a division. A split
    /// taken in turns ([`WeightedClusters::in_turns`]) takes the next turn instead.
    #[inline]
    pub fn pick<R: RngCore + ?Sized>(&self, rng: &mut R) -> ClusterId {
        if self.entries.len() == 1 {
            return self.entries[0].cluster;
        }
        self.entries[self.index_for(rng)].cluster
    }

    /// The index into [`WeightedClusters::iter`] that [`WeightedClusters::pick`] chooses
    /// with the next draw of `rng` (for a split of two or more). The walk counts the
    /// cumulative weights at or below the value, without a branch on the random outcome.
    #[inline(always)]
    pub(crate) fn index_for<R: RngCore + ?Sized>(&self, rng: &mut R) -> usize {
        if let Some(r) = &self.rotation {
            return r.next();
        }
        let v = match self.modulo32 {
            Some(m) => u64::from(fastmod_u32(rng.next_u32(), m, self.total as u32)),
            None => rng.next_u64() % self.total,
        };
        match &*self.entries {
            // Stable + canary: one comparison.
            [first, _] => (v >= first.end) as usize,
            entries => entries.iter().map(|e| (v >= e.end) as usize).sum(),
        }
    }

    /// (cluster, weight) in route order.
    pub fn iter(&self) -> impl Iterator<Item = (ClusterId, u32)> + '_ {
        self.entries.iter().map(|e| (e.cluster, e.weight))
    }

    /// Sum of the weights (100 when the VirtualService is valid).
    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Never: a split has at least one cluster by construction.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The share of `cluster` in this split (0 when absent).
    pub fn share(&self, cluster: ClusterId) -> f64 {
        let w: u64 = self
            .entries
            .iter()
            .filter(|e| e.cluster == cluster)
            .map(|e| u64::from(e.weight))
            .sum();
        w as f64 / self.total as f64
    }
}

/// The 32-bit remainder multiplier for `total`, when it fits.
fn modulo32(total: u64) -> Option<u64> {
    u32::try_from(total)
        .ok()
        .filter(|d| *d > 0)
        .map(|d| (u64::MAX / u64::from(d)).wrapping_add(1))
}

/// A shadow copy of the request, sent to `cluster` for a fraction of requests; its response
/// is discarded, so it never counts in the split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mirror {
    pub cluster: ClusterId,
    /// Fraction per million, as Istio hands `mirrorPercentage` to Envoy.
    pub per_million: u32,
}

impl Mirror {
    /// Whether this request is mirrored (no draw when the fraction is 100 %).
    #[inline]
    pub fn sample<R: RngCore + ?Sized>(&self, rng: &mut R) -> bool {
        self.per_million >= 1_000_000 || rng.next_u64() % 1_000_000 < u64::from(self.per_million)
    }

    pub fn percent(&self) -> f64 {
        f64::from(self.per_million) / 10_000.0
    }
}

/// An Envoy cluster: `outbound|<port>|<subset>|<host>` and its ready endpoints.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub(crate) id: ClusterId,
    pub(crate) name: String,
    pub(crate) host: String,
    pub(crate) port: u32,
    pub(crate) subset: String,
    pub(crate) endpoints: Box<[EndpointId]>,
    pub(crate) lb: Option<LbPolicy>,
    /// The DestinationRule's `outlierDetection` for this cluster.
    pub(crate) outlier: Option<super::policy::OutlierDetection>,
    /// The DestinationRule's `loadBalancer.consistentHash` for this cluster.
    pub(crate) hash: Option<super::policy::HashOn>,
    /// A Gateway API backendRef that does not resolve: implementations answer its share
    /// 500, not the 503 of a Service without ready endpoints.
    pub(crate) unresolved: bool,
}

impl Cluster {
    pub fn id(&self) -> ClusterId {
        self.id
    }

    /// Whether this cluster stands for a backendRef that does not resolve (answered 500).
    pub fn is_unresolved(&self) -> bool {
        self.unresolved
    }

    pub fn outlier_detection(&self) -> Option<&super::policy::OutlierDetection> {
        self.outlier.as_ref()
    }

    pub fn consistent_hash(&self) -> Option<&super::policy::HashOn> {
        self.hash.as_ref()
    }

    /// `outbound|80|canary|reviews.bookinfo.svc.cluster.local`
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn port(&self) -> u32 {
        self.port
    }

    /// Empty when the destination names no subset.
    pub fn subset(&self) -> &str {
        &self.subset
    }

    pub fn endpoints(&self) -> &[EndpointId] {
        &self.endpoints
    }

    /// The DestinationRule's load-balancer policy, when it sets one.
    pub fn lb_override(&self) -> Option<LbPolicy> {
        self.lb
    }

    /// Chooses a ready endpoint with the cluster's policy (or `lb` when the
    /// DestinationRule sets none). None: no healthy upstream.
    #[inline]
    pub fn pick_endpoint<R: RngCore + ?Sized>(
        &self,
        lb: LbPolicy,
        rng: &mut R,
        state: &mut LbState,
    ) -> Option<EndpointId> {
        let eps = &self.endpoints;
        let n = eps.len();
        match n {
            0 => return None,
            1 => return Some(eps[0]),
            _ => {}
        }
        match self.lb.unwrap_or(lb) {
            LbPolicy::RoundRobin => {
                // The cursor wraps by comparison: the same sequence as `cursor % n`.
                let cursor = state.cursor(self.id);
                let mut i = *cursor as usize;
                if i >= n {
                    i %= n;
                }
                *cursor = if i + 1 == n { 0 } else { (i + 1) as u32 };
                Some(eps[i])
            }
            LbPolicy::Random => Some(eps[(rng.next_u64() % n as u64) as usize]),
            LbPolicy::LeastRequest => {
                let a = eps[(rng.next_u64() % n as u64) as usize];
                let b = eps[(rng.next_u64() % n as u64) as usize];
                Some(if state.active(b) < state.active(a) {
                    b
                } else {
                    a
                })
            }
        }
    }
}

/// What constrains one attempt's host beyond the load balancer (see [`Cluster::pick_host`]).
pub struct HostPick<'a> {
    /// Endpoints this request has tried already.
    pub tried: &'a [u32],
    /// Whether outlier detection has ejected an endpoint.
    pub ejected: &'a dyn Fn(u32) -> bool,
    /// With a consistent hash: each endpoint's score for this request's key (rendezvous
    /// over the pods' names, [`super::policy::rendezvous_score`]).
    pub hash_score: Option<&'a dyn Fn(u32) -> u64>,
    /// Whether this is a retry (Envoy's previous_hosts predicate re-picks up to 5 times).
    pub retry: bool,
}

impl Cluster {
    /// One attempt's host, as Envoy picks it: with a consistent hash, the key's host by
    /// rendezvous over the pods' names among hosts not ejected (and, on a retry where there
    /// is another, not tried yet); otherwise the load balancer's pick, re-picked to skip
    /// ejected hosts and (on a retry, up to 5 times) tried ones, else any host not ejected.
    /// None: no host is left.
    pub fn pick_host<R: RngCore + ?Sized>(
        &self,
        lb: LbPolicy,
        balancer: &mut R,
        state: &mut LbState,
        pick: &HostPick<'_>,
    ) -> Option<u32> {
        let hosts = &self.endpoints;
        let ejected = pick.ejected;
        if let Some(score) = pick.hash_score {
            let best = |avoid_tried: bool| {
                hosts
                    .iter()
                    .map(|h| h.0)
                    .filter(|&h| !(ejected(h) || (avoid_tried && pick.tried.contains(&h))))
                    .max_by_key(|&h| score(h))
            };
            return best(true).or_else(|| best(false));
        }
        let tries = if pick.retry { 5 } else { 1 }
            + if self.outlier.is_some() {
                hosts.len()
            } else {
                0
            };
        let mut picked = None;
        for _ in 0..tries {
            let Some(e) = self.pick_endpoint(lb, balancer, state) else {
                break;
            };
            if ejected(e.0) {
                continue;
            }
            picked = Some(e.0);
            if !pick.tried.contains(&e.0) {
                break;
            }
        }
        picked.or_else(|| hosts.iter().map(|h| h.0).find(|&h| !ejected(h)))
    }
}

/// Mutable load-balancer state beside one route table: round-robin cursors per cluster and
/// active-request counts per endpoint. Sized for its table; it grows rather than panics
/// when handed ids from a bigger one.
#[derive(Debug, Clone, Default)]
pub struct LbState {
    cursors: Vec<u32>,
    active: Vec<u32>,
}

impl LbState {
    pub fn new(table: &RouteTable) -> LbState {
        LbState {
            cursors: vec![0; table.clusters.len()],
            active: vec![0; table.endpoints.len()],
        }
    }

    /// The round-robin position of cluster `c` (for drivers that run the same choice in a
    /// loop of their own and hand the position back with [`LbState::set_round_robin`]).
    pub(crate) fn round_robin(&self, c: ClusterId) -> u32 {
        self.cursors.get(c.0 as usize).copied().unwrap_or(0)
    }

    pub(crate) fn set_round_robin(&mut self, c: ClusterId, position: u32) {
        *self.cursor(c) = position;
    }

    #[inline]
    fn cursor(&mut self, c: ClusterId) -> &mut u32 {
        let i = c.0 as usize;
        if i >= self.cursors.len() {
            self.cursors.resize(i + 1, 0);
        }
        &mut self.cursors[i]
    }

    /// Requests in flight to `e` (what least_request compares).
    #[inline]
    pub(crate) fn active(&self, e: EndpointId) -> u32 {
        self.active.get(e.0 as usize).copied().unwrap_or(0)
    }

    /// A request to `e` started.
    pub fn start(&mut self, e: EndpointId) {
        let i = e.0 as usize;
        if i >= self.active.len() {
            self.active.resize(i + 1, 0);
        }
        self.active[i] += 1;
    }

    /// A request to `e` finished.
    pub fn finish(&mut self, e: EndpointId) {
        if let Some(a) = self.active.get_mut(e.0 as usize) {
            *a = a.saturating_sub(1);
        }
    }
}

/// An HTTP route: its match conditions (OR of ANDs; none = everything), split and mirror.
#[derive(Debug, Clone)]
pub(crate) struct HttpRouteEntry {
    pub matches: Box<[HttpMatch]>,
    pub clusters: WeightedClusters,
    pub mirrors: Box<[Mirror]>,
    pub policy: super::policy::HttpPolicy,
    pub source: RouteSource,
    /// Session affinity before the route's own choice (ingress-nginx), shared by the
    /// routes of one location.
    pub sticky: Option<Arc<Stickiness>>,
}

/// ingress-nginx's session affinity on one location (`affinity: cookie`), as balancer.lua
/// applies it before any canary rule: a client whose cookie names the primary backend stays
/// there; else one whose cookie names the canary backend, when that one is pinned too, goes
/// there; else the routes decide, and the backend they choose, if pinned, sets the cookie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stickiness {
    /// The primary backend, if its balancer is sticky.
    pub primary: Option<StickyBackend>,
    /// The location's canary backend, if it is in force and its balancer is sticky.
    pub canary: Option<StickyBackend>,
}

/// A backend whose balancer is sticky (`balancer/sticky.lua`): its cluster in this table,
/// its name (the cookie's value names it, so it outlives a table), its cookie's name, and
/// when it sets the cookie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StickyBackend {
    pub cluster: ClusterId,
    pub backend: Arc<str>,
    pub cookie: Arc<str>,
    /// `affinity-mode: persistent`: a cookie it cannot place (another backend's) is
    /// replaced. `balanced` (the default) hashes any cookie to one of its pods and leaves
    /// the cookie as it is.
    pub persistent: bool,
    /// Whether this location is one the affinity was asked for (`should_set_cookie`): only
    /// there is the cookie set.
    pub sets_cookie: bool,
}

/// A client's cookies: per cookie name, the backend it pins the client to.
pub type CookieJar = Vec<(Arc<str>, Arc<str>)>;

impl Stickiness {
    /// The sticky backends, the primary first.
    pub fn backends(&self) -> impl Iterator<Item = &StickyBackend> {
        [&self.primary, &self.canary].into_iter().flatten()
    }

    /// The cluster a client holding `jar` is pinned to, if any (balancer.lua's
    /// `is_affinitized`: the primary first, then the canary).
    pub fn pinned(&self, jar: &CookieJar) -> Option<ClusterId> {
        let holds = |b: &StickyBackend| {
            jar.iter()
                .any(|(cookie, backend)| *cookie == b.cookie && *backend == b.backend)
        };
        self.backends().find(|b| holds(b)).map(|b| b.cluster)
    }

    /// After a request went to `cluster`: its sticky balancer sets its cookie when the
    /// client has none of that name (`balance`: no upstream found from the cookie), or, in
    /// persistent mode, one naming another backend.
    pub fn remember(&self, cluster: ClusterId, jar: &mut CookieJar) {
        let Some(b) = self
            .backends()
            .find(|b| b.cluster == cluster && b.sets_cookie)
        else {
            return;
        };
        match jar.iter_mut().find(|(cookie, _)| *cookie == b.cookie) {
            Some((_, backend)) if *backend == b.backend || !b.persistent => {}
            Some((_, backend)) => *backend = b.backend.clone(),
            None => jar.push((b.cookie.clone(), b.backend.clone())),
        }
    }
}

/// One `match` entry: every condition given must hold.
#[derive(Debug, Clone, Default)]
pub(crate) struct HttpMatch {
    pub uri: Option<StrMatcher>,
    pub method: Option<StrMatcher>,
    pub authority: Option<StrMatcher>,
    /// Lower-case names.
    pub headers: Box<[(String, StrMatcher)]>,
    /// `withoutHeaders`: none of these may match (an absent header does not match).
    pub without_headers: Box<[(String, StrMatcher)]>,
    /// `queryParams`: each parameter present and matching.
    pub query_params: Box<[(String, StrMatcher)]>,
    pub source: SourceMatch,
    pub port: Option<u32>,
    /// A delegating root route's match, which must hold as well.
    pub also: Option<Box<HttpMatch>>,
}

/// `sourceLabels` and `sourceNamespace`: which callers a match entry applies to.
#[derive(Debug, Clone, Default)]
pub(crate) struct SourceMatch {
    pub labels: Box<[(String, String)]>,
    pub namespace: Option<String>,
}

impl SourceMatch {
    fn matches(&self, req: &RequestMeta) -> bool {
        self.namespace.as_ref().is_none_or(|ns| ns == req.namespace)
            && self
                .labels
                .iter()
                .all(|(k, v)| req.source_labels.iter().any(|(rk, rv)| rk == k && rv == v))
    }
}

/// The value of query parameter `name` in `path` (the first occurrence).
fn query_param<'p>(path: &'p str, name: &str) -> Option<&'p str> {
    let (_, query) = path.split_once('?')?;
    query
        .split('&')
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

impl HttpMatch {
    fn matches(&self, req: &RequestMeta) -> bool {
        if self.port.is_some_and(|p| p != req.port) {
            return false;
        }
        if !self.source.matches(req) || self.also.as_ref().is_some_and(|m| !m.matches(req)) {
            return false;
        }
        let header = |name: &str| {
            req.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| *v)
        };
        if self
            .without_headers
            .iter()
            .any(|(name, m)| header(name).is_some_and(|v| m.matches(v)))
        {
            return false;
        }
        if !self
            .query_params
            .iter()
            .all(|(name, m)| query_param(req.path, name).is_some_and(|v| m.matches(v)))
        {
            return false;
        }
        if let Some(m) = &self.uri {
            // Envoy compares exact, regex and separated-prefix paths without the query
            // string, prefixes with it.
            let ok = match m {
                StrMatcher::Prefix(_) => m.matches(req.path),
                _ => m.matches(req.path.split_once('?').map_or(req.path, |(p, _)| p)),
            };
            if !ok {
                return false;
            }
        }
        if self.method.as_ref().is_some_and(|m| !m.matches(req.method)) {
            return false;
        }
        if self
            .authority
            .as_ref()
            .is_some_and(|m| !m.matches(req.host))
        {
            return false;
        }
        self.headers.iter().all(|(name, m)| {
            req.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .is_some_and(|(_, v)| m.matches(v))
        })
    }
}

/// A TLS or TCP route: port (and for TLS, SNI) conditions, and a split chosen per connection.
#[derive(Debug, Clone)]
pub(crate) struct L4RouteEntry {
    pub matches: Box<[L4Match]>,
    pub clusters: WeightedClusters,
    pub source: RouteSource,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct L4Match {
    pub port: Option<u32>,
    pub source: SourceMatch,
    /// TLS `sniHosts` (empty: any SNI).
    pub sni: Box<[HostPattern]>,
}

impl L4Match {
    fn matches(&self, req: &RequestMeta, tls: bool) -> bool {
        if self.port.is_some_and(|p| p != req.port) || !self.source.matches(req) {
            return false;
        }
        if !tls || self.sni.is_empty() {
            return true;
        }
        let sni = req.sni.unwrap_or("");
        self.sni.iter().any(|p| p.matches(sni, ""))
    }
}

impl L4RouteEntry {
    /// The ports this route listens on (a match without a port: the gateway's first).
    pub fn ports(&self, default_port: u32) -> Vec<u32> {
        if self.matches.is_empty() {
            return vec![default_port];
        }
        self.matches
            .iter()
            .map(|m| m.port.unwrap_or(default_port))
            .collect()
    }
}

/// Routes for one host pattern.
#[derive(Debug, Clone)]
pub(crate) struct VirtualHost<R> {
    pub host: HostPattern,
    pub routes: Vec<R>,
}

/// A Service's default route on one of its ports (no VirtualService covers its host).
#[derive(Debug, Clone)]
pub(crate) struct DefaultRoute {
    pub port: u32,
    pub clusters: WeightedClusters,
    pub source: RouteSource,
}

/// A Gateway's name, with its `namespace/name` form kept for a one-compare lookup.
#[derive(Debug, Clone)]
pub(crate) struct GatewayName {
    pub namespace: String,
    pub name: String,
    /// `namespace/name`
    pub full: String,
}

impl GatewayName {
    pub fn new(namespace: &str, name: &str) -> GatewayName {
        GatewayName {
            namespace: namespace.to_string(),
            name: name.to_string(),
            full: format!("{namespace}/{name}"),
        }
    }

    /// `namespace/name`, or `name` written in `ns`.
    #[inline]
    pub fn is(&self, reference: &str, ns: &str) -> bool {
        reference == self.full || (reference == self.name && ns == self.namespace)
    }
}

/// A gateway server: its port (None: unspecified) and the hosts it accepts.
pub(crate) type GatewayServer = (Option<u32>, Box<[HostPattern]>);

/// One proxy's configuration: the mesh's sidecars, or one ingress gateway.
#[derive(Debug, Clone, Default)]
pub(crate) struct Listener {
    /// The Gateway; None for the mesh.
    pub gateway: Option<GatewayName>,
    /// Ports the gateway's servers listen on (empty: any).
    pub ports: Box<[u32]>,
    /// The lowest port of a server that takes HTTP (None: no HTTP server, or no gateway).
    pub http_port: Option<u32>,
    /// The gateway's servers: port (None: unspecified) and the hosts they accept; a request
    /// for a host no server on its port accepts finds no virtual host (404), as in Envoy.
    pub servers: Box<[GatewayServer]>,
    /// Ordered most specific first (exact, longest suffix, `*`).
    pub http: Vec<VirtualHost<HttpRouteEntry>>,
    pub tls: Vec<VirtualHost<L4RouteEntry>>,
    pub tcp: Vec<VirtualHost<L4RouteEntry>>,
    /// Services' default routes (mesh only), after every VirtualService host.
    pub defaults: Vec<VirtualHost<DefaultRoute>>,
}

impl Listener {
    /// The port HTTP routes are served on: the HTTP server's, else the first port; a Gateway
    /// that lists a TLS port before its HTTP one must not take HTTP on the TLS port.
    pub(crate) fn http_port(&self) -> Option<u32> {
        self.http_port.or_else(|| self.ports.first().copied())
    }

    /// The port of a gateway's TLS/TCP route that names none: the gateway's first, else 443.
    pub(crate) fn l4_default_port(&self) -> u32 {
        self.ports.first().copied().unwrap_or(443)
    }

    /// Whether a gateway's servers open `port` (a gateway without a Gateway object: any).
    pub(crate) fn listens_on(&self, port: u32) -> bool {
        self.ports.is_empty() || self.ports.contains(&port)
    }

    /// Whether this proxy has routes for `host` in the sections a `protocol` request or
    /// connection is routed by (TLS: `tls`, then `tcp`).
    fn serves(&self, host: &str, ns: &str, protocol: Protocol) -> bool {
        match protocol {
            Protocol::Http => find_vhost(&self.http, host, ns).is_some(),
            Protocol::Tls => {
                find_vhost(&self.tls, host, ns).is_some()
                    || find_vhost(&self.tcp, host, ns).is_some()
            }
            Protocol::Tcp => find_vhost(&self.tcp, host, ns).is_some(),
        }
    }
}

/// A route's split with each cluster's round-robin position, for many requests in a row: the
/// weighted pick of a cluster, then its next endpoint — exactly what
/// [`WeightedClusters::pick`] and [`Cluster::pick_endpoint`] do under ROUND_ROBIN, without a
/// lookup per request. [`RoundRobinCursor::finish`] hands the positions back to the
/// [`LbState`], so the next pick continues where this one stopped.
pub struct RoundRobinCursor<'t> {
    clusters: &'t WeightedClusters,
    entries: Vec<(ClusterId, &'t [EndpointId], u32)>,
}

impl<'t> RoundRobinCursor<'t> {
    /// None when a cluster of the route is missing or balances by another policy than
    /// round robin (`lb` is the proxy's default). Made by [`RouteChoice::round_robin_cursor`].
    fn new(
        table: &'t RouteTable,
        choice: &RouteChoice<'t>,
        lb: LbPolicy,
        state: &LbState,
    ) -> Option<RoundRobinCursor<'t>> {
        let mut entries = Vec::new();
        for (cluster, _) in choice.clusters.iter() {
            let c = table.cluster(cluster)?;
            if c.lb.unwrap_or(lb) != LbPolicy::RoundRobin {
                return None;
            }
            let eps = c.endpoints();
            let n = eps.len() as u32;
            let pos = if n == 0 {
                0
            } else {
                state.round_robin(cluster) % n
            };
            entries.push((cluster, eps, pos));
        }
        Some(RoundRobinCursor {
            clusters: choice.clusters,
            entries,
        })
    }

    /// Every endpoint the split can reach.
    pub fn endpoints(&self) -> impl Iterator<Item = EndpointId> + '_ {
        self.entries
            .iter()
            .flat_map(|(_, eps, _)| eps.iter().copied())
    }

    /// Whether some cluster of the split has no endpoint (its picks are 503s).
    pub(crate) fn has_empty_cluster(&self) -> bool {
        self.entries.iter().any(|(_, eps, _)| eps.is_empty())
    }

    /// The next request's endpoint (None: the picked cluster has none).
    #[inline(always)]
    pub fn next<R: RngCore + ?Sized>(&mut self, rng: &mut R) -> Option<EndpointId> {
        let i = if self.entries.len() == 1 {
            0
        } else {
            self.clusters.index_for(rng)
        };
        let (_, eps, pos) = &mut self.entries[i];
        if eps.is_empty() {
            return None;
        }
        let e = eps[*pos as usize];
        *pos += 1;
        if *pos as usize == eps.len() {
            *pos = 0;
        }
        Some(e)
    }

    /// Hands the positions back to the load balancer's state.
    pub fn finish(self, state: &mut LbState) {
        for (cluster, _, pos) in self.entries {
            state.set_round_robin(cluster, pos);
        }
    }
}

/// The route chosen for a request: a split to pick from, and maybe a mirror.
#[derive(Debug, Clone, Copy)]
pub struct RouteChoice<'t> {
    pub clusters: &'t WeightedClusters,
    /// Session affinity before the weighted pick (ingress-nginx's `affinity: cookie`).
    pub sticky: Option<&'t Stickiness>,
    /// The route's mirrors (`mirror` and `mirrors`), each sampled on its own.
    pub mirrors: &'t [Mirror],
    /// Retries, timeout and fault around the upstream call (none for TCP/TLS).
    pub policy: &'t super::policy::HttpPolicy,
    pub scope: Scope,
    pub source: &'t RouteSource,
}

/// The data plane's interface to a matched route: the single picks a request or a
/// connection makes, and the batch form for many requests in a row. Every caller (the
/// router's [`RouteTable::serve`], the simulated load's general and fast paths) picks
/// through these, so they draw alike.
impl<'t> RouteChoice<'t> {
    /// The weighted pick of a cluster (one draw for a split of two or more), with the
    /// cluster itself (None: not in the table; no upstream).
    pub fn pick_cluster<R: RngCore + ?Sized>(
        &self,
        table: &'t RouteTable,
        router: &mut R,
    ) -> (ClusterId, Option<&'t Cluster>) {
        let id = self.clusters.pick(router);
        (id, table.cluster(id))
    }

    /// The upstream of a request or connection: the weighted pick of a cluster (from
    /// `router`), then its load balancer's pick (from `balancer`); or why there is none.
    pub fn pick_upstream<R: RngCore + ?Sized, B: RngCore + ?Sized>(
        &self,
        table: &'t RouteTable,
        lb: LbPolicy,
        router: &mut R,
        balancer: &mut B,
        state: &mut LbState,
    ) -> Result<EndpointId, NoUpstream> {
        let (_, cluster) = self.pick_cluster(table, router);
        match cluster {
            Some(c) if c.is_unresolved() => Err(NoUpstream::Unresolved),
            Some(c) => c
                .pick_endpoint(lb, balancer, state)
                .ok_or(NoUpstream::NoHealthy),
            None => Err(NoUpstream::NoHealthy),
        }
    }

    /// The shadow copies of a request that has an upstream (Envoy sends none otherwise):
    /// each mirror sampled on its own (from `router`), its endpoint picked (from
    /// `balancer`; None: the shadow found no healthy upstream and is dropped).
    pub fn shadows<R: RngCore + ?Sized, B: RngCore + ?Sized>(
        &self,
        table: &'t RouteTable,
        lb: LbPolicy,
        router: &mut R,
        balancer: &mut B,
        state: &mut LbState,
        mut shadow: impl FnMut(ClusterId, Option<EndpointId>),
    ) {
        for m in self.mirrors {
            if m.sample(router) {
                let endpoint = table
                    .cluster(m.cluster)
                    .and_then(|c| c.pick_endpoint(lb, balancer, state));
                shadow(m.cluster, endpoint);
            }
        }
    }

    /// The batch form of [`RouteChoice::pick_upstream`] under round robin (None when a
    /// cluster is missing or balances otherwise).
    pub(crate) fn round_robin_cursor(
        &self,
        table: &'t RouteTable,
        lb: LbPolicy,
        state: &LbState,
    ) -> Option<RoundRobinCursor<'t>> {
        RoundRobinCursor::new(table, self, lb, state)
    }
}

/// The whole outcome of one request (or connection) through the router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub cluster: ClusterId,
    pub endpoint: EndpointId,
    pub scope: Scope,
    /// The mirrored copies of this request: cluster and endpoint of each (None: the shadow
    /// found no healthy upstream; Envoy drops it silently).
    pub mirrors: Vec<(ClusterId, Option<EndpointId>)>,
}

/// What istiod would push: every proxy's routes, the clusters and their endpoints.
#[derive(Debug, Clone, Default)]
pub struct RouteTable {
    /// Index 0 is the mesh; gateways follow, ordered by namespace and name.
    pub(crate) listeners: Vec<Listener>,
    pub(crate) clusters: Vec<Cluster>,
    pub(crate) endpoints: Vec<Endpoint>,
    pub(crate) notes: Vec<Note>,
    /// Whether any VirtualService was seen (without one, nothing mesh-specific happens).
    pub(crate) has_virtual_services: bool,
    /// The Gateway API objects' status as the implementation writes it, until taken.
    pub(crate) gateway_api_status: Vec<super::gateway_api::StatusWrite>,
}

impl RouteTable {
    /// Finds the route for a request. No allocation; linear scans over the (few) gateways,
    /// virtual hosts and routes. The result depends only on the request's metadata, so a
    /// load step that repeats one request shape can route once per table and then call
    /// only [`WeightedClusters::pick`] and [`Cluster::pick_endpoint`] per request.
    pub fn route<'t>(&'t self, req: &RequestMeta) -> Result<RouteChoice<'t>, RouteError> {
        let listener = match req.origin {
            Origin::Plain => return Err(RouteError::NotInMesh),
            Origin::Mesh => self.listeners.first().ok_or(RouteError::NoRoute)?,
            Origin::Gateway(name) => {
                let l = self
                    .gateway_listener(name, req.namespace)
                    .ok_or(RouteError::UnknownGateway)?;
                if !l.ports.is_empty() && !l.ports.contains(&req.port) {
                    return Err(RouteError::NoListener);
                }
                // A TLS server accepts by the ClientHello's server name, as Envoy's filter
                // chains do; HTTP and TCP by the host.
                let host = match (req.protocol, req.sni) {
                    (Protocol::Tls, Some(sni)) => sni,
                    _ => request_host(req.host),
                };
                let host = if host.is_empty() {
                    req.sni.unwrap_or("")
                } else {
                    host
                };
                let accepted = l.servers.iter().any(|(port, hosts)| {
                    port.is_none_or(|p| p == req.port)
                        && hosts.iter().any(|h| h.matches(host, req.namespace))
                });
                if !accepted {
                    return Err(RouteError::NoRoute);
                }
                l
            }
        };
        let mut host = request_host(req.host);
        if host.is_empty() {
            host = req.sni.unwrap_or("");
        }
        let ns = req.namespace;
        match req.protocol {
            Protocol::Http => {
                if let Some(vh) = find_vhost(&listener.http, host, ns) {
                    // A matched virtual host without a matching route is a 404, as in Envoy.
                    return vh
                        .routes
                        .iter()
                        .find(|r| r.matches.is_empty() || r.matches.iter().any(|m| m.matches(req)))
                        .map(|r| RouteChoice {
                            clusters: &r.clusters,
                            sticky: r.sticky.as_deref(),
                            mirrors: &r.mirrors,
                            policy: &r.policy,
                            scope: Scope::PerRequest,
                            source: &r.source,
                        })
                        .ok_or(RouteError::NoRoute);
                }
            }
            Protocol::Tls | Protocol::Tcp => {
                let tls = req.protocol == Protocol::Tls;
                let sections: &[&[VirtualHost<L4RouteEntry>]] = if tls {
                    &[&listener.tls, &listener.tcp]
                } else {
                    &[&listener.tcp]
                };
                for vhosts in sections {
                    let found = find_vhost(vhosts, host, ns).and_then(|vh| {
                        vh.routes.iter().find(|r| {
                            r.matches.is_empty() || r.matches.iter().any(|m| m.matches(req, tls))
                        })
                    });
                    if let Some(r) = found {
                        return Ok(RouteChoice {
                            clusters: &r.clusters,
                            sticky: None,
                            mirrors: &[],
                            policy: &super::policy::NO_POLICY,
                            scope: Scope::PerConnection,
                            source: &r.source,
                        });
                    }
                }
            }
        }
        let scope = match req.protocol {
            Protocol::Http => Scope::PerRequest,
            _ => Scope::PerConnection,
        };
        find_vhost(&listener.defaults, host, ns)
            .and_then(|vh| vh.routes.iter().find(|r| r.port == req.port))
            .map(|r| RouteChoice {
                clusters: &r.clusters,
                sticky: None,
                mirrors: &[],
                policy: match req.protocol {
                    Protocol::Http => &super::policy::DEFAULT_POLICY,
                    _ => &super::policy::NO_POLICY,
                },
                scope,
                source: &r.source,
            })
            .ok_or(RouteError::NoRoute)
    }

    /// The full request path: route, weighted cluster, endpoint, and the mirror if sampled.
    /// One RNG draw for a split of two or more, plus what the endpoint policy draws.
    #[inline]
    pub fn serve<R: RngCore + ?Sized>(
        &self,
        req: &RequestMeta,
        lb: LbPolicy,
        rng: &mut R,
        state: &mut LbState,
    ) -> Result<Served, RouteError> {
        let choice = self.route(req)?;
        let (cluster, c) = choice.pick_cluster(self, rng);
        if c.is_some_and(Cluster::is_unresolved) {
            return Err(RouteError::UnresolvedBackend { cluster });
        }
        let endpoint = c
            .and_then(|c| c.pick_endpoint(lb, rng, state))
            .ok_or(RouteError::NoHealthyUpstream { cluster })?;
        // Envoy sends the shadow only once the primary request has an upstream.
        let mut mirrors = Vec::new();
        for m in choice.mirrors {
            if m.sample(rng) {
                mirrors.push((
                    m.cluster,
                    self.cluster(m.cluster)
                        .and_then(|c| c.pick_endpoint(lb, rng, state)),
                ));
            }
        }
        Ok(Served {
            cluster,
            endpoint,
            scope: choice.scope,
            mirrors,
        })
    }

    pub fn cluster(&self, id: ClusterId) -> Option<&Cluster> {
        self.clusters.get(id.0 as usize)
    }

    pub fn clusters(&self) -> &[Cluster] {
        &self.clusters
    }

    /// The cluster with this Envoy name.
    pub fn cluster_named(&self, name: &str) -> Option<&Cluster> {
        self.clusters.iter().find(|c| c.name == name)
    }

    pub fn endpoint(&self, id: EndpointId) -> Option<&Endpoint> {
        self.endpoints.get(id.0 as usize)
    }

    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// Validation notes: objects or fields skipped, weights that do not sum to 100, missing
    /// subsets, gateways or Services.
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// Whether the store held any VirtualService.
    pub(crate) fn has_virtual_services(&self) -> bool {
        self.has_virtual_services
    }

    /// Whether ingress-nginx's proxy serves Ingresses here.
    pub fn has_ingress_proxy(&self) -> bool {
        self.listeners.iter().any(|l| {
            l.gateway.as_ref().is_some_and(|g| {
                g.is(
                    super::ingress_nginx::CONTROLLER_NAME,
                    super::ingress_nginx::CONTROLLER_NAMESPACE,
                )
            })
        })
    }

    /// Gateways with a configuration, as `namespace/name`.
    pub fn gateways(&self) -> impl Iterator<Item = String> + '_ {
        self.listeners
            .iter()
            .filter_map(|l| l.gateway.as_ref().map(|g| g.full.clone()))
    }

    /// The gateway (`namespace/name`) whose VirtualServices serve `host`, if any: what the
    /// scenario's `origin: gateway` and `auto` send traffic through (else it comes from the
    /// mesh). A gateway with HTTP routes for the host comes first, then one with only TLS or
    /// TCP routes for it (a TCP-only VirtualService is still bound to its gateway: its
    /// traffic enters there, not through the mesh). Gateways are tried in namespace/name
    /// order.
    pub fn gateway_for(&self, host: &str, caller_ns: &str) -> Option<&str> {
        self.gateway_serving(host, caller_ns, Protocol::Http)
            .or_else(|| self.gateway_serving(host, caller_ns, Protocol::Tls))
    }

    /// The gateway a load of `protocol` for `host` enters through: the first with routes of
    /// its protocol's sections for the host, else [`RouteTable::gateway_for`]'s (whose
    /// routes for the host are of another section: the runner refuses such a load, naming
    /// what is missing).
    pub(crate) fn gateway_for_load(
        &self,
        host: &str,
        caller_ns: &str,
        protocol: Protocol,
    ) -> Option<&str> {
        self.gateway_serving(host, caller_ns, protocol)
            .or_else(|| self.gateway_for(host, caller_ns))
    }

    /// The first gateway (namespace/name order) with routes of `protocol`'s sections for
    /// `host` ([`RouteTable::route`]'s: a TLS connection takes a `tls` route, then a `tcp`
    /// one).
    pub(crate) fn gateway_serving(
        &self,
        host: &str,
        caller_ns: &str,
        protocol: Protocol,
    ) -> Option<&str> {
        let host = request_host(host);
        self.listeners
            .iter()
            .filter(|l| l.gateway.is_some() && l.serves(host, caller_ns, protocol))
            .find_map(|l| l.gateway.as_ref().map(|g| g.full.as_str()))
    }

    /// The VirtualServices whose `section` routes (`http`, `tls` or `tcp`) serve `host` at
    /// `gateway` (`namespace/name`, or `name` in `caller_ns`), in route order, each once:
    /// to name what a gateway has for a host when a load's protocol finds nothing there.
    pub(crate) fn virtual_services_at(
        &self,
        gateway: &str,
        host: &str,
        caller_ns: &str,
        section: Protocol,
    ) -> Vec<&ObjectKey> {
        let host = request_host(host);
        let Some(l) = self.gateway_listener(gateway, caller_ns) else {
            return Vec::new();
        };
        let sources: Vec<&RouteSource> = match section {
            Protocol::Http => find_vhost(&l.http, host, caller_ns)
                .map(|vh| vh.routes.iter().map(|r| &r.source).collect()),
            Protocol::Tls => find_vhost(&l.tls, host, caller_ns)
                .map(|vh| vh.routes.iter().map(|r| &r.source).collect()),
            Protocol::Tcp => find_vhost(&l.tcp, host, caller_ns)
                .map(|vh| vh.routes.iter().map(|r| &r.source).collect()),
        }
        .unwrap_or_default();
        let mut out: Vec<&ObjectKey> = Vec::new();
        for key in sources
            .into_iter()
            .filter_map(|s| s.virtual_service.as_ref())
        {
            if !out.contains(&key) {
                out.push(key);
            }
        }
        out
    }

    /// The split of a VirtualService's route (`http/primary`, `tls/0`…) as the first
    /// proxy that has it would pick: the gateways' and the mesh's copies carry the same
    /// weights. None: no proxy has the route.
    pub fn route_split(
        &self,
        virtual_service: &ObjectKey,
        route: &str,
    ) -> Option<&WeightedClusters> {
        let from = |source: &RouteSource| {
            source.virtual_service.as_ref() == Some(virtual_service) && source.route == route
        };
        self.listeners.iter().find_map(|l| {
            l.http
                .iter()
                .flat_map(|vh| &vh.routes)
                .find(|r| from(&r.source))
                .map(|r| &r.clusters)
                .or_else(|| {
                    l.tls
                        .iter()
                        .chain(&l.tcp)
                        .flat_map(|vh| &vh.routes)
                        .find(|r| from(&r.source))
                        .map(|r| &r.clusters)
                })
        })
    }

    /// What share of a split each role's pods get: a cluster's weight spread evenly over
    /// its endpoints (an empty cluster gives its weight to no role).
    pub fn role_shares(&self, split: &WeightedClusters) -> Vec<(crate::endpoints::Role, f64)> {
        let total = split.total() as f64;
        let mut shares: Vec<(crate::endpoints::Role, f64)> = Vec::new();
        for (cluster, weight) in split.iter() {
            let eps = self.cluster(cluster).map(|c| c.endpoints()).unwrap_or(&[]);
            for e in eps {
                if let Some(ep) = self.endpoint(*e) {
                    let part = weight as f64 / total / eps.len() as f64;
                    match shares.iter_mut().find(|(r, _)| *r == ep.role) {
                        Some((_, s)) => *s += part,
                        None => shares.push((ep.role, part)),
                    }
                }
            }
        }
        shares
    }

    /// Where the gateways' TLS and TCP routes listen: (gateway `namespace/name`, port,
    /// whether a TLS route is on it), as `envoy-config` exports the listeners.
    pub fn l4_ports(&self) -> Vec<(String, u32, bool)> {
        let mut ports: Vec<(String, u32, bool)> = Vec::new();
        for l in &self.listeners {
            let Some(gateway) = &l.gateway else { continue };
            for (tls, vhosts) in [(true, &l.tls), (false, &l.tcp)] {
                for r in vhosts.iter().flat_map(|vh| &vh.routes) {
                    for port in r.ports(l.l4_default_port()) {
                        if !l.listens_on(port) {
                            continue;
                        }
                        match ports
                            .iter_mut()
                            .find(|(g, p, _)| *g == gateway.full && *p == port)
                        {
                            Some(entry) => entry.2 |= tls,
                            None => ports.push((gateway.full.clone(), port, tls)),
                        }
                    }
                }
            }
        }
        ports
    }

    /// The route of a connection to a gateway's TLS/TCP port, chosen as Envoy's filter
    /// chains choose it from what the connection shows (no Host): a TLS route whose SNI
    /// names match the ClientHello's wins; else the first route on the port without a
    /// condition (a TCP route, or a TLS route for `*`). Among equal conditions the first
    /// route wins, as in the exported config.
    pub fn route_connection(
        &self,
        gateway: &str,
        port: u32,
        sni: Option<&str>,
    ) -> Result<RouteChoice<'_>, RouteError> {
        let l = self
            .listeners
            .iter()
            .find(|l| l.gateway.as_ref().is_some_and(|g| g.full == gateway))
            .ok_or(RouteError::UnknownGateway)?;
        if !l.listens_on(port) {
            return Err(RouteError::NoListener);
        }
        let default_port = l.l4_default_port();
        let on_port = |r: &&L4RouteEntry| r.ports(default_port).contains(&port);
        // A TLS route's SNI names: its matches' sniHosts, else its virtual host.
        let names = |vh: &VirtualHost<L4RouteEntry>, r: &L4RouteEntry| -> Vec<HostPattern> {
            let listed: Vec<HostPattern> = r
                .matches
                .iter()
                .filter(|m| m.port.unwrap_or(default_port) == port)
                .flat_map(|m| m.sni.iter().cloned())
                .collect();
            if listed.is_empty() {
                vec![vh.host.clone()]
            } else {
                listed
            }
        };
        let is_any = |n: &Vec<HostPattern>| n.iter().any(|h| matches!(h, HostPattern::Any));
        let by_sni = sni.and_then(|sni| {
            l.tls.iter().find_map(|vh| {
                vh.routes.iter().filter(on_port).find(|r| {
                    let n = names(vh, r);
                    !is_any(&n) && n.iter().any(|h| h.matches(sni, ""))
                })
            })
        });
        let unconditional = || {
            l.tls
                .iter()
                .find_map(|vh| {
                    vh.routes
                        .iter()
                        .filter(on_port)
                        .find(|r| is_any(&names(vh, r)))
                })
                .or_else(|| {
                    l.tcp
                        .iter()
                        .find_map(|vh| vh.routes.iter().find(|r| on_port(r)))
                })
        };
        by_sni
            .or_else(unconditional)
            .map(|r| RouteChoice {
                clusters: &r.clusters,
                sticky: None,
                mirrors: &[],
                policy: &super::policy::NO_POLICY,
                scope: Scope::PerConnection,
                source: &r.source,
            })
            .ok_or(RouteError::NoRoute)
    }

    /// Where a Gateway API route's rules are installed at gateways, in table order (gateways
    /// by namespace and name, hosts most specific first): each host as written (`*` for
    /// every host) and the listener's port. Empty: it attaches to no Gateway.
    pub fn gateway_attachments(&self, route: &ObjectKey) -> Vec<(String, Option<u32>)> {
        let mut out: Vec<(String, Option<u32>)> = Vec::new();
        for l in self.listeners.iter().filter(|l| l.gateway.is_some()) {
            for vh in &l.http {
                let installed = vh
                    .routes
                    .iter()
                    .filter(|r| r.source.virtual_service.as_ref() == Some(route));
                for r in installed {
                    let at = (vh.host.text(), r.matches.first().and_then(|m| m.port));
                    if !out.contains(&at) {
                        out.push(at);
                    }
                }
            }
        }
        out
    }

    /// The status the implementation writes on the Gateway API objects this table was
    /// translated from (taken once: the world writes it; a pushed table holds none).
    pub(crate) fn take_gateway_api_status(&mut self) -> Vec<super::gateway_api::StatusWrite> {
        std::mem::take(&mut self.gateway_api_status)
    }

    /// The port an HTTP request to a gateway (`namespace/name`, or `name` in `caller_ns`)
    /// stands for when it names none: its HTTP server's, else its first port (None: an
    /// Istio Gateway without servers, or no such gateway).
    pub fn gateway_http_port(&self, name: &str, caller_ns: &str) -> Option<u32> {
        self.gateway_listener(name, caller_ns)
            .and_then(Listener::http_port)
    }

    fn gateway_listener(&self, name: &str, caller_ns: &str) -> Option<&Listener> {
        self.listeners
            .iter()
            .find(|l| l.gateway.as_ref().is_some_and(|g| g.is(name, caller_ns)))
    }
}

fn find_vhost<'t, R>(
    vhosts: &'t [VirtualHost<R>],
    host: &str,
    ns: &str,
) -> Option<&'t VirtualHost<R>> {
    vhosts.iter().find(|vh| vh.host.matches(host, ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::stream;

    #[test]
    fn the_32_bit_remainder_is_exact() {
        let mut rng = stream(1, "fastmod");
        for d in [
            1u32,
            2,
            3,
            7,
            10,
            99,
            100,
            101,
            1000,
            65_537,
            u32::MAX - 1,
            u32::MAX,
        ] {
            let m = modulo32(u64::from(d)).unwrap();
            for a in [0, 1, d - 1, d, d.wrapping_add(1), u32::MAX, u32::MAX - 1] {
                assert_eq!(fastmod_u32(a, m, d), a % d, "{a} % {d}");
            }
            for _ in 0..20_000 {
                let a = rng.next_u32();
                assert_eq!(fastmod_u32(a, m, d), a % d, "{a} % {d}");
            }
        }
    }

    #[test]
    fn pick_follows_envoys_modulo_walk() {
        // Envoy: value % total, then [0, w1) → first, [w1, w1 + w2) → second.
        struct Fixed(u64);
        impl RngCore for Fixed {
            fn next_u32(&mut self) -> u32 {
                self.0 as u32
            }
            fn next_u64(&mut self) -> u64 {
                self.0
            }
            fn fill_bytes(&mut self, _: &mut [u8]) {}
        }
        let w = WeightedClusters::new([(ClusterId(7), 80), (ClusterId(9), 20)]).unwrap();
        assert_eq!(w.pick(&mut Fixed(79)), ClusterId(7));
        assert_eq!(w.pick(&mut Fixed(80)), ClusterId(9));
        assert_eq!(w.pick(&mut Fixed(199)), ClusterId(9));
        assert_eq!(w.pick(&mut Fixed(200)), ClusterId(7));
        assert_eq!(w.total(), 100);
    }

    #[test]
    fn an_eighty_twenty_split_gives_twenty_percent_over_many_picks() {
        let w = WeightedClusters::new([(ClusterId(0), 80), (ClusterId(1), 20)]).unwrap();
        let mut rng = stream(1, "router");
        let n = 100_000;
        let canary = (0..n).filter(|_| w.pick(&mut rng) == ClusterId(1)).count();
        let share = canary as f64 * 100.0 / n as f64;
        assert!((share - 20.0).abs() < 0.5, "canary share {share}");
        assert_eq!(canary, 20_112, "exact count for seed 1");
    }

    #[test]
    fn zero_weights_are_dropped_and_a_lone_cluster_takes_no_draw() {
        assert!(WeightedClusters::new([(ClusterId(0), 0)]).is_none());
        let w = WeightedClusters::new([(ClusterId(0), 0), (ClusterId(1), 100)]).unwrap();
        assert_eq!(w.len(), 1);
        let mut rng = stream(1, "router");
        let before = rng.clone();
        assert_eq!(w.pick(&mut rng), ClusterId(1));
        assert_eq!(rng, before, "no RNG draw for a single cluster");
    }

    #[test]
    fn round_robin_cycles_endpoints_exactly() {
        let c = Cluster {
            id: ClusterId(0),
            name: "c".into(),
            host: "h".into(),
            port: 80,
            subset: String::new(),
            endpoints: (0..3).map(EndpointId).collect(),
            lb: None,
            outlier: None,
            hash: None,
            unresolved: false,
        };
        let mut state = LbState::default();
        let mut rng = stream(1, "router");
        let got: Vec<u32> = (0..7)
            .map(|_| {
                c.pick_endpoint(LbPolicy::RoundRobin, &mut rng, &mut state)
                    .unwrap()
                    .0
            })
            .collect();
        assert_eq!(got, [0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn least_request_prefers_the_idle_endpoint() {
        let c = Cluster {
            id: ClusterId(0),
            name: "c".into(),
            host: "h".into(),
            port: 80,
            subset: String::new(),
            endpoints: (0..2).map(EndpointId).collect(),
            lb: None,
            outlier: None,
            hash: None,
            unresolved: false,
        };
        let mut state = LbState::default();
        for _ in 0..5 {
            state.start(EndpointId(0));
        }
        let mut rng = stream(3, "router");
        let mut hits = [0u32; 2];
        for _ in 0..1000 {
            let e = c
                .pick_endpoint(LbPolicy::LeastRequest, &mut rng, &mut state)
                .unwrap();
            hits[e.0 as usize] += 1;
        }
        // The busy endpoint wins only when both draws land on it: about a quarter.
        assert!((200..300).contains(&hits[0]), "{hits:?}");
        let mut rng = stream(3, "router");
        let r: Vec<u32> = (0..1000)
            .map(|_| {
                c.pick_endpoint(LbPolicy::Random, &mut rng, &mut state)
                    .unwrap()
                    .0
            })
            .collect();
        let ones = r.iter().filter(|&&x| x == 1).count();
        assert!((450..550).contains(&ones), "random is uniform: {ones}");
    }

    #[test]
    fn mirror_fraction_is_per_million() {
        let m = Mirror {
            cluster: ClusterId(0),
            per_million: 250_000,
        };
        let mut rng = stream(1, "mirror");
        let n = (0..100_000).filter(|_| m.sample(&mut rng)).count();
        assert!((24_500..25_500).contains(&n), "{n}");
        assert_eq!(m.percent(), 25.0);
    }
}
