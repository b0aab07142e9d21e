//! The simulated load driver: requests as values through the simulated data plane, on the
//! virtual clock.
//!
//! Time is cut into epochs during which the data plane does not change (no controller
//! event, no route table taking effect). Within an epoch the route is matched once for the
//! workload's request shape; then each request costs a weighted pick, an endpoint pick, one
//! draw for the answer (error and jitter) and a few counter increments. Between epochs the
//! world advances, so a rollout and its push delays play out while the load runs.
//!
//! Connections persist across epochs: a keep-alive connection (kube-proxy) or a TCP/TLS
//! connection (mesh) keeps the pod it was given until that pod goes away.

use rand::RngCore;
use rand_pcg::Pcg64Mcg;
use std::collections::HashMap;

use std::time::Duration;

use super::backend::BackendModel;
use super::{
    Amount, ArmStats, Arrival, Backends, LoadResult, OriginChoice, Sequential, SplitUnit, Workload,
};
use super::{Cluster, LoadError};
use crate::clock::SimTime;
use crate::endpoints::{Endpoint, Role};
use crate::kubeproxy::{ProxyMode, ProxyState, ServiceProxy};
use crate::mesh::{LbPolicy, NoUpstream, Origin, Protocol, RequestMeta, RouteError};
use crate::model::Kind;

/// A load given as a request count stops after this much virtual time at the latest.
pub(crate) const MAX_LOAD_TIME: Duration = Duration::from_secs(24 * 3600);

/// Closed-loop HTTP/2: concurrent streams per connection.
pub(crate) const H2_STREAMS: u32 = 10;

/// Closed loop: connections take turns in slices of this much virtual time, so that a count
/// of requests is spread over the connections as real concurrent clients spread it.
const SLICE_US: u64 = 5_000;

/// Time a failed request (no route, no healthy upstream, refused) takes to come back.
const FAILURE_US: u64 = 100;

/// Which data plane a load goes through, decided when it starts (see [`data_path`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Path {
    /// Through this ingress gateway (`namespace/name`).
    Gateway(String),
    /// From a sidecar in the mesh.
    Mesh,
    /// From a pod without a sidecar, through kube-proxy (per connection).
    KubeProxy,
}

/// The data plane `w` goes through in `world` as it is now, as the scenario's `origin`
/// decides it (live mode routes its real requests the same way).
pub fn data_path(world: &impl Cluster, w: &Workload) -> Path {
    choose_path(world, w)
}

/// Whether `w`'s requests meet a route with session affinity in the table in force now
/// (ingress-nginx's `affinity: cookie`): what live mode, without cookies, cannot serve.
pub fn meets_session_affinity(world: &impl Cluster, w: &Workload) -> bool {
    let path = choose_path(world, w);
    let Some(table) = world.mesh().table_at(world.now()) else {
        return false;
    };
    let labels = caller_labels(world, &path, w);
    let (headers, labels) = (str_pairs(&w.traffic.headers), str_pairs(&labels));
    table
        .route(&request_meta(&path, w, &headers, &labels))
        .is_ok_and(|choice| choice.sticky.is_some())
}

/// Name-value pairs as the borrowed pairs a [`RequestMeta`] holds.
fn str_pairs(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// The request every worker of `workload` sends along `path`, as the routes match it (its
/// shape does not change during the load).
fn request_meta<'a>(
    path: &'a Path,
    workload: &'a Workload,
    headers: &'a [(&'a str, &'a str)],
    source_labels: &'a [(&'a str, &'a str)],
) -> RequestMeta<'a> {
    RequestMeta {
        source_labels,
        origin: match path {
            Path::Gateway(g) => Origin::Gateway(g.as_str()),
            Path::Mesh => Origin::Mesh,
            Path::KubeProxy => Origin::Plain,
        },
        protocol: workload.protocol,
        namespace: &workload.namespace,
        host: &workload.traffic.host,
        port: workload.port,
        path: &workload.traffic.path,
        method: &workload.traffic.method,
        headers,
        sni: workload.traffic.sni.as_deref(),
    }
}

/// Per-endpoint facts for one epoch, indexed by the epoch's endpoint ids.
struct EpochEndpoints {
    arm: Vec<u16>,
    model: Vec<BackendModel>,
    pod: Vec<String>,
    by_pod: HashMap<String, u32>,
    /// The pod still exists and serves. A route table that has not caught up yet may still
    /// list a pod that crashed: the proxy's connection to it fails (503, Envoy's `UF`).
    alive: Vec<bool>,
}

/// The random streams of one load, one per consumer (the router's weighted picks and mirror
/// samples, the load balancers' endpoint picks, the backends' answers, the arrivals, the
/// proxy policy's fault samples and back-off), so that one consumer drawing more (a retry,
/// a Poisson gap) does not shift what the others draw.
pub struct Streams {
    pub router: Pcg64Mcg,
    pub balancer: Pcg64Mcg,
    pub backends: Pcg64Mcg,
    pub arrivals: Pcg64Mcg,
    pub policy: Pcg64Mcg,
}

impl Streams {
    /// The streams of the load called `label` under `seed`.
    pub fn new(seed: u64, label: &str) -> Streams {
        let stream = |consumer: &str| crate::random::stream(seed, &format!("{label}/{consumer}"));
        Streams {
            router: stream("router"),
            balancer: stream("balancer"),
            backends: stream("backends"),
            arrivals: stream("arrivals"),
            policy: stream("policy"),
        }
    }
}

/// A client connection (or, for HTTP/2 closed loop, a stream's connection). It is also a
/// client with a cookie jar, which outlives the connection (reconnects keep it).
#[derive(Debug, Clone, Default)]
struct Conn {
    /// The pod this connection is pinned to (per-connection split), by name and by the
    /// current epoch's endpoint index.
    pinned: Option<(String, u32)>,
    /// The session cookies an ingress-nginx sticky backend set.
    jar: crate::mesh::CookieJar,
    /// The arm of the host this client's first request through a sticky route was sent to
    /// (answered or not): its draw of the weight in force then (its cookie keeps it there,
    /// unless the canary does not pin: `affinity-canary-behavior: legacy`).
    first_arm: Option<u16>,
    /// The arm its last such request was sent to.
    last_arm: Option<u16>,
    /// Whether such requests were sent to two versions.
    switched: bool,
}

/// What a load asks of whoever drives it after an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Move the cluster's clock to this instant (with whatever happens on the way), then
    /// call [`LoadRun::epoch`] again.
    AdvanceTo(SimTime),
    /// Everything is sent: the last answer arrives at this instant. Move the clock there if
    /// it is later than now, then call [`LoadRun::finish`].
    Finished(SimTime),
}

/// One load in progress. The load only reads the cluster and sends requests through the
/// data plane in force; whoever drives it (the simulation's runner, later the live one)
/// moves the clock between epochs:
///
/// ```text
/// let mut run = LoadRun::start(&cluster, &workload, &backends, lb, mode)?;
/// loop {
///     match run.epoch(&mut cluster, &mut streams)? {
///         Progress::AdvanceTo(t) => cluster.advance_to(t),
///         Progress::Finished(t) => { cluster.advance_to(t.max(now)); break }
///     }
/// }
/// let result = run.finish(cluster.now());
/// ```
pub struct LoadRun<'w> {
    workload: &'w Workload,
    backends: &'w Backends,
    lb: LbPolicy,
    proxy_mode: ProxyMode,
    allow_fast: bool,
    path: Path,
    started: SimTime,
    end_us: u64,
    /// The most requests to send (lowered when the sequential test decides).
    limit: u64,
    unit: SplitUnit,
    /// Without keep-alive (and without HTTP/2, which multiplexes) every request opens a
    /// connection of its own.
    reuse: bool,
    state: Driver,
    /// Closed loop: when each worker is free next (µs since the load started).
    free_at: Vec<u64>,
    streams_per_conn: usize,
    /// Open loop: the next arrival and the running arrival count.
    next_arrival_us: u64,
    arrivals: u64,
    proxy_state: ProxyState,
    /// The sequential test: it sees each slice's answers and may end the load early.
    sprt: Option<(super::SequentialTest, String, (u64, u64))>,
    decided: Option<(String, u64)>,
    /// The split the tables in force imply, weighted by the draws (requests, or connections
    /// opened) each epoch carried.
    configured: Vec<(Role, f64)>,
    /// The same, each epoch weighted by the clients that drew in it (a split per client).
    configured_per_client: Vec<(Role, f64)>,
    /// The calling pod's labels (sourceLabels matches).
    caller_labels: Vec<(String, String)>,
}

impl<'w> LoadRun<'w> {
    /// Plans `workload` against the cluster as it is now (settle it first).
    pub fn start(
        cluster: &impl Cluster,
        workload: &'w Workload,
        backends: &'w Backends,
        lb: LbPolicy,
        proxy_mode: ProxyMode,
    ) -> Result<LoadRun<'w>, LoadError> {
        let started = cluster.now();
        let path = choose_path(cluster, workload);
        let end = match workload.amount {
            Amount::Duration(d) => started.after(d),
            Amount::Requests(_) => started.after(MAX_LOAD_TIME),
        };
        let limit = match workload.amount {
            Amount::Requests(n) => n,
            Amount::Duration(_) => u64::MAX,
        };
        let unit = match (&path, workload.protocol) {
            (Path::KubeProxy, _) | (_, Protocol::Tls | Protocol::Tcp) => SplitUnit::Connection,
            _ => SplitUnit::Request,
        };
        let state = Driver {
            conns: vec![Conn::default(); workload.traffic.connections.max(1) as usize],
            ..Driver::default()
        };
        let workers = workload.workers() as usize;
        let streams_per_conn = (workers / state.conns.len()).max(1);
        let sprt = match (&workload.traffic.stop, unit) {
            (Some(rule), SplitUnit::Request) => Some((
                rule.start()
                    .map_err(|e| LoadError::SequentialTest(e.to_string()))?,
                rule.key.clone(),
                (0u64, 0u64),
            )),
            _ => None,
        };
        Ok(LoadRun {
            workload,
            backends,
            lb,
            proxy_mode,
            allow_fast: true,
            caller_labels: caller_labels(cluster, &path, workload),
            path,
            started,
            end_us: end.since(started).as_micros() as u64,
            limit,
            unit,
            reuse: workload.traffic.keepalive || workload.traffic.http2,
            state,
            free_at: vec![0u64; workers],
            streams_per_conn,
            next_arrival_us: 0,
            arrivals: 0,
            proxy_state: ProxyState::default(),
            sprt,
            decided: None,
            configured: Vec::new(),
            configured_per_client: Vec::new(),
        })
    }

    /// Sends every request through the general path only (to check the fast loops agree).
    #[cfg(test)]
    fn without_fast_loops(mut self) -> Self {
        self.allow_fast = false;
        self
    }

    // Long: the simulated load's hot loop over one epoch; split, its per-request state would travel
    // through many arguments.
    /// Sends the requests of one epoch (until the cluster's next change by itself, or the
    /// load's end) through the data plane in force now.
    pub fn epoch(
        &mut self,
        cluster: &mut impl Cluster,
        rng: &mut Streams,
    ) -> Result<Progress, LoadError> {
        let now = cluster.now();
        // The load's clock ticks in whole microseconds; the world's in nanoseconds. An epoch
        // ends at the first tick at or after the world's next wake, and spans at least one
        // tick: a wake between two ticks (a 1 ns wait, a 500 ns push delay) must not hold
        // the load where it is, asking again and again to advance to where it already is.
        let now_us = now.since(self.started).as_micros() as u64;
        let epoch_end_us = cluster
            .next_wake()
            .map(|t| ceil_micros(t.since(self.started)))
            .unwrap_or(u64::MAX)
            .max(now_us.saturating_add(1))
            .min(self.end_us);
        let workload = self.workload;
        let per_connection = self.unit == SplitUnit::Connection;
        // The request every worker sends (its shape does not change during the load).
        let headers = str_pairs(&workload.traffic.headers);
        let source_labels = str_pairs(&self.caller_labels);
        let meta = request_meta(&self.path, workload, &headers, &source_labels);
        // The data plane in force for this epoch.
        let proxy;
        let mut service = None;
        let ep_info;
        match &self.path {
            Path::KubeProxy => {
                proxy = ServiceProxy::from_objects(cluster.api());
                ep_info = endpoint_facts(cluster, self.backends, &mut self.state.arms, |i| {
                    proxy.endpoint(crate::endpoints::EndpointId(i))
                });
                service = proxy.resolve(&workload.traffic.host, &workload.namespace);
            }
            Path::Gateway(_) | Path::Mesh => {
                proxy = ServiceProxy::default();
                let Some(table) = cluster.mesh().table_at(now) else {
                    return Err(LoadError::NoRouteTable);
                };
                ep_info = endpoint_facts(cluster, self.backends, &mut self.state.arms, |i| {
                    table.endpoint(crate::endpoints::EndpointId(i))
                });
            }
        }
        reattach_connections(&mut self.state.conns, &ep_info);
        self.state.ep_responses = vec![0; ep_info.model.len()];
        self.state.ep_errors = vec![0; ep_info.model.len()];
        let epoch_shares = match &self.path {
            Path::KubeProxy => kube_proxy_shares(&proxy, service),
            Path::Gateway(_) | Path::Mesh => {
                route_shares(cluster.mesh().table_at(now).expect("checked above"), &meta)
            }
        };
        let mut ctx = Ctx {
            unit_per_connection: per_connection,
            reuse: self.reuse,
            ep: &ep_info,
            proxy: &proxy,
            proxy_mode: self.proxy_mode,
            proxy_state: &mut self.proxy_state,
            service,
            lb: self.lb,
            allow_fast: self.allow_fast,
            sprt: self.sprt.as_mut(),
            decided: &mut self.decided,
            headers: &headers,
            path: &workload.traffic.path,
        };
        let sent_before = self.state.result_sent;
        let opened_before = self.state.connections_opened;
        let drawn_before = self.state.clients_drawn;
        // The in-mesh router's table and its route for this request shape (none for kube-proxy).
        let (mesh_state, route) = match &self.path {
            Path::KubeProxy => (None, None),
            Path::Gateway(_) | Path::Mesh => {
                let (table, lb_state) = cluster.mesh_mut().at_mut(now).expect("checked above");
                let route = table.route(&meta);
                (Some((table, lb_state)), Some(route))
            }
        };
        // The route's destinations, for the traffic record (HTTP through the mesh only: the
        // sidecars' request metrics).
        let destinations: Option<Vec<crate::load::TrafficDestination>> = match (&mesh_state, &route)
        {
            (Some((table, _)), Some(Ok(choice))) if workload.protocol == Protocol::Http => Some(
                choice
                    .clusters
                    .iter()
                    .filter_map(|(id, weight)| {
                        let c = table.cluster(id)?;
                        Some(crate::load::TrafficDestination {
                            host: c.host().to_string(),
                            subset: c.subset().to_string(),
                            weight,
                            endpoints: c.endpoints().iter().map(|e| e.0).collect(),
                        })
                    })
                    .collect(),
            ),
            _ => None,
        };
        run_epoch(
            &mut self.state,
            &mut ctx,
            mesh_state,
            route,
            workload,
            rng,
            &mut self.free_at,
            self.streams_per_conn,
            &mut self.next_arrival_us,
            &mut self.arrivals,
            epoch_end_us,
            &mut self.limit,
        );
        if let Some(destinations) = destinations {
            let traffic = self.traffic(cluster, now, epoch_end_us, destinations, &ep_info);
            cluster.observe(&traffic);
        }
        fold_pods(&mut self.state, &ep_info);
        // Per request, each request drew from this epoch's tables; per connection, only the
        // connections opened in it did (a kept-alive one stays where it was sent before).
        let carried = if per_connection {
            (self.state.connections_opened - opened_before) as f64
        } else {
            (self.state.result_sent - sent_before) as f64
        };
        let drawn = (self.state.clients_drawn - drawn_before) as f64;
        add_weighted(&mut self.configured_per_client, epoch_shares.clone(), drawn);
        add_weighted(&mut self.configured, epoch_shares, carried);
        if self.state.result_sent < self.limit && epoch_end_us < self.end_us {
            return Ok(Progress::AdvanceTo(
                self.started.after(Duration::from_micros(epoch_end_us)),
            ));
        }
        // The load ends when its last answer arrives (closed loop) or at its duration.
        let last_us = match workload.traffic.arrival {
            Arrival::Closed => self.free_at.iter().copied().max().unwrap_or(0),
            _ => self.next_arrival_us,
        };
        Ok(Progress::Finished(
            self.started
                .after(Duration::from_micros(last_us.min(self.end_us))),
        ))
    }

    /// The epoch's traffic record: what each endpoint answered between `now` and the
    /// epoch's end (or the load's last request, if sooner).
    fn traffic(
        &self,
        cluster: &impl Cluster,
        now: SimTime,
        epoch_end_us: u64,
        destinations: Vec<crate::load::TrafficDestination>,
        ep: &EpochEndpoints,
    ) -> crate::load::EpochTraffic {
        let last_us = match self.workload.traffic.arrival {
            Arrival::Closed => self.free_at.iter().copied().max().unwrap_or(0),
            _ => self.next_arrival_us,
        };
        let end = self
            .started
            .after(Duration::from_micros(last_us.min(epoch_end_us)))
            .max(now);
        let table = cluster.mesh().table_at(now);
        let pods = (0..ep.pod.len())
            .map(|e| {
                let model = ep.model[e];
                crate::load::PodTraffic {
                    namespace: table
                        .and_then(|t| t.endpoint(crate::endpoints::EndpointId(e as u32)))
                        .map(|ep| ep.namespace.clone())
                        .unwrap_or_default(),
                    pod: ep.pod[e].clone(),
                    answers: self.state.ep_responses[e],
                    errors: self.state.ep_errors[e],
                    error_status: model.error_status,
                    latency_us: model.latency_us,
                    jitter_us: model.jitter_us,
                }
            })
            .collect();
        crate::load::EpochTraffic {
            start: now,
            end,
            gateway: match &self.path {
                // Named by the load step, maybe without its namespace: the load's.
                Path::Gateway(g) if !g.contains('/') => {
                    Some(format!("{}/{g}", self.workload.namespace))
                }
                Path::Gateway(g) => Some(g.clone()),
                _ => None,
            },
            source_labels: self.caller_labels.clone(),
            destinations,
            pods,
        }
    }

    /// What the load observed, once [`Progress::Finished`] came and the clock was moved to
    /// its instant; `now` is the cluster's clock.
    pub fn finish(self, now: SimTime) -> LoadResult {
        let per_connection = self.unit == SplitUnit::Connection;
        let mut state = self.state;
        // Through a location with session affinity a client's requests follow its cookie:
        // the client is the draw, counted by the version its first request there was sent
        // to, answered or not (a draw of the weight in force then), and the configured split
        // is weighted alike.
        let (unit, clients_switched, configured) = if state.sticky_requests > 0 {
            for c in &state.conns {
                if let Some(arm) = c.first_arm {
                    state.arms[arm as usize].clients += 1;
                }
            }
            let switched = state.conns.iter().filter(|c| c.switched).count() as u64;
            (SplitUnit::Client, switched, self.configured_per_client)
        } else {
            (self.unit, 0, self.configured)
        };
        let sequential = self.workload.traffic.stop.as_ref().map(|_| {
            sequential_outcome(self.workload, self.decided.as_ref(), unit, state.answered)
        });

        // A request count the load did not reach, with no sequential decision to explain
        // it: the virtual-time cap stopped it, and the report says so.
        let capped = match self.workload.amount {
            Amount::Requests(n) if state.result_sent < n && self.decided.is_none() => {
                Some(format!(
                    "stopped at the {} h cap on a load's scenario time after {} requests; asked for {n}",
                    MAX_LOAD_TIME.as_secs() / 3600,
                    state.result_sent
                ))
            }
            _ => None,
        };
        // Per-request keep-alive (or HTTP/2) connections are opened once and carry the whole
        // load; the request loops do not count them one by one.
        let connections_opened = if self.reuse && !per_connection {
            state
                .connections_opened
                .max(state.result_sent.min(state.conns.len() as u64))
        } else {
            state.connections_opened
        };
        LoadResult {
            capped,
            sent: state.result_sent,
            answered: state.answered,
            not_found: state.not_found,
            no_healthy_upstream: state.no_healthy_upstream,
            unresolved_backend: state.unresolved_backend,
            refused: state.refused,
            upstream_failed: state.upstream_failed,
            fault_aborted: state.fault_aborted,
            timed_out: state.timed_out,
            retries: state.retries,
            pods: state.pods.into_values().collect(),
            arms: reported_arms(state.arms),
            unit,
            connections_opened,
            clients_switched,
            configured: shares_by_role(configured.into_iter()),
            sequential,
            path: path_name(&self.path, self.proxy_mode),
            started: self.started,
            ended: now.max(self.started),
        }
    }
}

/// The versions that took part, stable first, then canary, then the rest.
fn reported_arms(mut arms: Vec<ArmStats>) -> Vec<ArmStats> {
    for a in &mut arms {
        a.flush_latencies();
    }
    let mut arms: Vec<ArmStats> = arms
        .into_iter()
        .filter(|a| a.responses + a.connections + a.clients + a.mirrored > 0)
        .collect();
    arms.sort_by(|a, b| a.role.cmp(&b.role).then_with(|| a.version.cmp(&b.version)));
    arms
}

/// What the sequential test decided (or why it could not).
fn sequential_outcome(
    workload: &Workload,
    decided: Option<&(String, u64)>,
    unit: SplitUnit,
    answered: u64,
) -> Sequential {
    let planned = match workload.amount {
        Amount::Requests(n) => Some(n),
        Amount::Duration(_) => None,
    };
    let per_request = unit == SplitUnit::Request;
    let (decision, after) = match (decided, per_request) {
        (_, false) => (
            format!("not applicable: the split is made per {}", unit.noun()),
            answered,
        ),
        (Some((decision, after)), true) => (decision.clone(), *after),
        (None, true) => (
            match workload.traffic.stop.as_ref().map(|r| r.test) {
                Some(super::StopTest::Verdict { .. }) => "inconclusive",
                _ => "undecided",
            }
            .to_string(),
            answered,
        ),
    };
    Sequential {
        decision,
        after,
        unit,
        planned,
    }
}

/// How the report names the data plane a load went through.
fn path_name(path: &Path, proxy_mode: ProxyMode) -> String {
    match path {
        Path::Gateway(g) => format!("gateway {g}"),
        Path::Mesh => "mesh (sidecar)".into(),
        Path::KubeProxy => format!(
            "kube-proxy ({})",
            match proxy_mode {
                ProxyMode::Iptables => "iptables",
                ProxyMode::Ipvs => "ipvs",
            }
        ),
    }
}

#[derive(Default)]
struct Driver {
    arms: Vec<ArmStats>,
    result_sent: u64,
    answered: u64,
    not_found: u64,
    no_healthy_upstream: u64,
    unresolved_backend: u64,
    refused: u64,
    upstream_failed: u64,
    fault_aborted: u64,
    timed_out: u64,
    retries: u64,
    connections_opened: u64,
    conns: Vec<Conn>,
    /// Requests routed through a location with session affinity: the split is per client.
    sticky_requests: u64,
    /// Clients with a first pick through such a location (their draw).
    clients_drawn: u64,
    /// The current worker's clock (µs since the load started), for outlier ejections.
    now_us: u64,
    /// The proxy's outlier-detection record per pod.
    health: HashMap<String, crate::mesh::policy::HostHealth>,
    /// Scratch space for the hosts one request tried (see [`http_request`]).
    tried: Vec<u32>,
    /// This epoch's answers and 5xx per endpoint, folded into `pods` when it ends.
    ep_responses: Vec<u64>,
    ep_errors: Vec<u64>,
    pods: std::collections::BTreeMap<String, super::PodStats>,
}

struct Ctx<'a> {
    unit_per_connection: bool,
    reuse: bool,
    ep: &'a EpochEndpoints,
    proxy: &'a ServiceProxy,
    proxy_mode: ProxyMode,
    proxy_state: &'a mut ProxyState,
    service: Option<crate::endpoints::ServiceId>,
    lb: LbPolicy,
    allow_fast: bool,
    /// The sequential test, its version key, and the (matching, answered) counts it has seen.
    sprt: Option<&'a mut (super::SequentialTest, String, (u64, u64))>,
    decided: &'a mut Option<(String, u64)>,
    /// The requests' headers and path (consistent-hash keys).
    headers: &'a [(&'a str, &'a str)],
    path: &'a str,
}

/// The in-mesh router state of an epoch: the table and its load-balancer state.
type MeshState<'t> = (&'t crate::mesh::RouteTable, &'t mut crate::mesh::LbState);

/// Feeds the answers since the last check to the sequential test. Some(the new request
/// limit) when it has just decided: the load stops there.
fn sequential_check(d: &Driver, ctx: &mut Ctx) -> Option<u64> {
    // Requests pinned to their client's version are no independent draws: the test would
    // decide on far too little evidence.
    if ctx.decided.is_some() || d.sticky_requests > 0 {
        return None;
    }
    let (sprt, key, seen) = ctx.sprt.as_deref_mut()?;
    let matching: u64 = d
        .arms
        .iter()
        .filter(|a| a.matches(key))
        .map(|a| a.responses)
        .sum();
    let (k, n) = (matching - seen.0, d.answered - seen.1);
    *seen = (matching, d.answered);
    let decision = sprt.observe_many(k, n)?;
    *ctx.decided = Some((decision.to_string(), d.answered));
    Some(d.result_sent)
}

/// The closed loop's scaffold: the workers take turns in slices of [`SLICE_US`] of virtual
/// time, each sending requests until its clock passes the slice end. `request(state, worker,
/// now)` sends one and returns how long it kept the worker, or None once the load has sent
/// all it may; `slice_end(state)` runs after each slice and ends the load with false.
#[inline(always)]
fn take_turns<S>(
    state: &mut S,
    free_at: &mut [u64],
    epoch_end_us: u64,
    mut request: impl FnMut(&mut S, usize, u64) -> Option<u64>,
    mut slice_end: impl FnMut(&mut S) -> bool,
) {
    let mut end = free_at
        .iter()
        .copied()
        .min()
        .unwrap_or(0)
        .saturating_add(SLICE_US)
        .min(epoch_end_us);
    loop {
        for (worker, t) in free_at.iter_mut().enumerate() {
            let mut now = *t;
            while now < end {
                match request(state, worker, now) {
                    Some(busy) => now += busy,
                    None => {
                        *t = now;
                        slice_end(state);
                        return;
                    }
                }
            }
            *t = now;
        }
        if !slice_end(state) || end >= epoch_end_us {
            return;
        }
        end = end.saturating_add(SLICE_US).min(epoch_end_us);
    }
}

/// [`fast_mesh_epoch`] when every endpoint of the split is alive and deterministic: per
/// request only the weighted draw, the round-robin step, one counter and the clock.
#[allow(clippy::too_many_arguments)]
fn deterministic_loop(
    d: &mut Driver,
    ctx: &Ctx,
    cursor: &mut crate::mesh::RoundRobinCursor,
    rng: &mut Streams,
    free_at: &mut [u64],
    epoch_end_us: u64,
    limit: u64,
) {
    // (latency, answers) per endpoint, side by side: one bounds check, one cache line.
    let mut per_endpoint: Vec<(u64, u64)> = ctx
        .ep
        .model
        .iter()
        .map(|m| (m.latency_us.max(1), 0))
        .collect();
    let mut sent = d.result_sent;
    take_turns(
        &mut (),
        free_at,
        epoch_end_us,
        |_, _, _| {
            if sent >= limit {
                return None;
            }
            sent += 1;
            // Every cluster has endpoints here (checked by the caller).
            let e = cursor.next(&mut rng.router).map_or(0, |e| e.0 as usize);
            let slot = &mut per_endpoint[e];
            slot.1 += 1;
            Some(slot.0)
        },
        |_| true,
    );
    let new = sent - d.result_sent;
    if !ctx.reuse {
        d.connections_opened += new;
    }
    d.result_sent = sent;
    d.answered += new;
    for (e, (latency, n)) in per_endpoint.into_iter().enumerate() {
        if n == 0 {
            continue;
        }
        let arm = &mut d.arms[ctx.ep.arm[e] as usize];
        arm.responses += n;
        arm.record_latency_n(latency, n);
        d.ep_responses[e] += n;
    }
}

// Long: the fast path's hot loop, kept beside the state it updates per request.
/// The common case in a tight loop: HTTP through the mesh, closed loop, round robin, no
/// mirror. It draws exactly as [`one_request_timed`] does (one draw for a split of two or
/// more, one for a non-deterministic answer), so a seed gives the same result either way.
/// Returns false when the case does not apply.
#[allow(clippy::too_many_arguments)]
fn fast_mesh_epoch(
    d: &mut Driver,
    ctx: &Ctx,
    mesh: &mut Option<MeshState>,
    route: &Option<Result<crate::mesh::RouteChoice, RouteError>>,
    w: &Workload,
    rng: &mut Streams,
    free_at: &mut [u64],
    epoch_end_us: u64,
    limit: u64,
) -> bool {
    let (Some((table, lb_state)), Some(Ok(choice))) = (mesh.as_mut(), route) else {
        return false;
    };
    if ctx.unit_per_connection
        || choice.sticky.is_some()
        || w.traffic.stop.is_some()
        || w.traffic.arrival != Arrival::Closed
        || !choice.mirrors.is_empty()
        || ctx.lb != LbPolicy::RoundRobin
    {
        return false;
    }
    for (cluster, _) in choice.clusters.iter() {
        if table.cluster(cluster).is_some_and(|c| {
            // Ejections and hash keys depend on each request, and an unresolved backend
            // answers 500, not 503: the general path keeps them.
            c.outlier_detection().is_some() || c.consistent_hash().is_some() || c.is_unresolved()
        }) {
            return false;
        }
    }
    let Some(mut cursor) = choice.round_robin_cursor(table, ctx.lb, lb_state) else {
        return false;
    };
    // The route's retries, timeout or fault could change an outcome: the general path.
    let policy = choice.policy;
    let can_fail_retriably = cursor.endpoints().any(|e| {
        let e = e.0 as usize;
        let model = ctx.ep.model[e];
        !ctx.ep.alive[e]
            || (model.error_threshold > 0 && policy.retry.on.status(model.error_status))
    });
    if !policy.is_inert(can_fail_retriably) {
        return false;
    }
    // Every endpoint of the split alive and answering the same way every time: the leanest
    // loop (same draws, same results).
    let simple = !cursor.has_empty_cluster()
        && cursor.endpoints().all(|e| {
            let e = e.0 as usize;
            ctx.ep.alive[e] && ctx.ep.model[e].deterministic()
        });
    if simple {
        deterministic_loop(d, ctx, &mut cursor, rng, free_at, epoch_end_us, limit);
        cursor.finish(lb_state);
        return true;
    }
    let new_connection = !ctx.reuse;
    // Counts per endpoint in local arrays: consecutive requests go to different endpoints,
    // so the increments do not wait on each other; they are folded into the versions' stats
    // at the end. A deterministic answer needs no per-request latency record at all.
    let n_eps = ctx.ep.model.len();
    let mut ep_responses = vec![0u64; n_eps];
    let mut ep_errors = vec![0u64; n_eps];
    let (mut sent, mut answered, mut failed, mut dead) = (d.result_sent, 0u64, 0u64, 0u64);
    take_turns(
        &mut (),
        free_at,
        epoch_end_us,
        |_, _, _| {
            if sent >= limit {
                return None;
            }
            sent += 1;
            let Some(e) = cursor.next(&mut rng.router) else {
                failed += 1;
                return Some(FAILURE_US);
            };
            let e = e.0 as usize;
            if !ctx.ep.alive[e] {
                dead += 1;
                return Some(FAILURE_US);
            }
            let model = ctx.ep.model[e];
            answered += 1;
            ep_responses[e] += 1;
            Some(if model.deterministic() {
                model.latency_us.max(1)
            } else {
                let (latency, error) = model.answer(rng.backends.next_u64());
                ep_errors[e] += error as u64;
                d.arms[ctx.ep.arm[e] as usize].record_latency(latency);
                latency
            })
        },
        |_| true,
    );
    d.connections_opened += if new_connection {
        sent - d.result_sent
    } else {
        0
    };
    d.result_sent = sent;
    d.answered += answered;
    d.no_healthy_upstream += failed;
    d.upstream_failed += dead;
    for e in 0..n_eps {
        if ep_responses[e] == 0 {
            continue;
        }
        let model = ctx.ep.model[e];
        let arm = &mut d.arms[ctx.ep.arm[e] as usize];
        arm.responses += ep_responses[e];
        arm.errors += ep_errors[e];
        if model.deterministic() {
            arm.record_latency_n(model.latency_us.max(1), ep_responses[e]);
        }
        d.ep_responses[e] += ep_responses[e];
        d.ep_errors[e] += ep_errors[e];
    }
    cursor.finish(lb_state);
    true
}

#[allow(clippy::too_many_arguments)]
fn run_epoch(
    d: &mut Driver,
    ctx: &mut Ctx,
    mut mesh: Option<MeshState>,
    route: Option<Result<crate::mesh::RouteChoice, RouteError>>,
    w: &Workload,
    rng: &mut Streams,
    free_at: &mut [u64],
    streams_per_conn: usize,
    next_arrival_us: &mut u64,
    arrivals: &mut u64,
    epoch_end_us: u64,
    limit_ref: &mut u64,
) {
    let limit = *limit_ref;
    if ctx.allow_fast
        && fast_mesh_epoch(
            d,
            ctx,
            &mut mesh,
            &route,
            w,
            rng,
            free_at,
            epoch_end_us,
            limit,
        )
    {
        return;
    }
    match w.traffic.arrival {
        Arrival::Closed => {
            // Connections take turns in short slices of virtual time; the sequential test
            // looks after each slice.
            let mut shared = (d, ctx, limit_ref);
            take_turns(
                &mut shared,
                free_at,
                epoch_end_us,
                |(d, ctx, limit), worker, now| {
                    if d.result_sent >= **limit {
                        return None;
                    }
                    d.now_us = now;
                    let conn = worker / streams_per_conn;
                    Some(one_request(d, ctx, &mut mesh, &route, conn, rng))
                },
                |(d, ctx, limit)| {
                    if let Some(limit_now) = sequential_check(d, ctx) {
                        **limit = limit_now;
                    }
                    d.result_sent < **limit
                },
            );
        }
        Arrival::Constant(rate) | Arrival::Poisson(rate) => {
            let mean_gap = 1e6 / rate.max(1e-9);
            let conns = d.conns.len();
            while *next_arrival_us < epoch_end_us && d.result_sent < *limit_ref {
                if d.result_sent % 1000 == 0 {
                    if let Some(limit_now) = sequential_check(d, ctx) {
                        *limit_ref = limit_now;
                        break;
                    }
                }
                let conn = (*arrivals % conns as u64) as usize;
                *arrivals += 1;
                // HTTP/1.1 serialises requests on a connection; the wait counts in the
                // latency (measured from the intended start: no coordinated omission).
                let arrival = *next_arrival_us;
                let start = if w.traffic.http2 {
                    arrival
                } else {
                    free_at[conn % free_at.len()].max(arrival)
                };
                d.now_us = start;
                let service =
                    one_request_timed(d, ctx, &mut mesh, &route, conn, rng, start - arrival);
                if !w.traffic.http2 {
                    free_at[conn % free_at.len()] = start + service;
                }
                let gap = match w.traffic.arrival {
                    Arrival::Poisson(_) => super::exponential_gap(&mut rng.arrivals, mean_gap),
                    _ => mean_gap,
                };
                *next_arrival_us = arrival + gap.max(1.0) as u64;
            }
        }
    }
}

fn one_request(
    d: &mut Driver,
    ctx: &mut Ctx,
    mesh: &mut Option<MeshState>,
    route: &Option<Result<crate::mesh::RouteChoice, RouteError>>,
    conn: usize,
    rng: &mut Streams,
) -> u64 {
    one_request_timed(d, ctx, mesh, route, conn, rng, 0)
}

/// Sends one request on connection `conn` (which waited `queued_us` for it); returns the
/// time it kept the worker busy (its service time).
#[inline]
fn one_request_timed(
    d: &mut Driver,
    ctx: &mut Ctx,
    mesh: &mut Option<MeshState>,
    route: &Option<Result<crate::mesh::RouteChoice, RouteError>>,
    conn: usize,
    rng: &mut Streams,
    queued_us: u64,
) -> u64 {
    d.result_sent += 1;
    // The endpoint: the connection's pinned one, or a per-request pick.
    let endpoint: Option<u32> = if ctx.unit_per_connection {
        let c = &mut d.conns[conn];
        if !ctx.reuse {
            c.pinned = None;
        }
        if c.pinned.is_none() {
            d.connections_opened += 1;
            let mut no_upstream = None;
            let picked = match mesh {
                None => ctx
                    .service
                    .and_then(|s| {
                        ctx.proxy.pick_endpoint(
                            s,
                            ctx.proxy_mode,
                            &mut rng.balancer,
                            ctx.proxy_state,
                        )
                    })
                    .map(|e| e.0),
                Some((table, lb_state)) => match route {
                    Some(Ok(choice)) => {
                        match choice.pick_upstream(
                            table,
                            ctx.lb,
                            &mut rng.router,
                            &mut rng.balancer,
                            lb_state,
                        ) {
                            Ok(e) => Some(e.0),
                            Err(why) => {
                                no_upstream = Some(why);
                                None
                            }
                        }
                    }
                    _ => None,
                },
            };
            match picked {
                Some(e) => {
                    c.pinned = Some((ctx.ep.pod[e as usize].clone(), e));
                    let arm = ctx.ep.arm[e as usize] as usize;
                    d.arms[arm].connections += 1;
                }
                None => {
                    match (mesh.is_some(), route) {
                        (true, Some(Err(RouteError::NoRoute | RouteError::UnknownGateway))) => {
                            d.not_found += 1
                        }
                        (true, Some(Ok(_))) if no_upstream == Some(NoUpstream::Unresolved) => {
                            d.unresolved_backend += 1
                        }
                        (true, Some(Ok(_))) => d.no_healthy_upstream += 1,
                        _ => d.refused += 1,
                    }
                    return FAILURE_US;
                }
            }
        }
        c.pinned.as_ref().map(|(_, e)| *e)
    } else {
        if !ctx.reuse {
            d.connections_opened += 1;
        }
        let (table, lb_state) = mesh.as_mut().expect("per-request splits are the mesh's");
        match route {
            Some(Ok(choice)) => {
                return http_request(d, ctx, table, lb_state, choice, rng, conn, queued_us);
            }
            Some(Err(RouteError::NoHealthyUpstream { .. })) => {
                d.no_healthy_upstream += 1;
                return FAILURE_US;
            }
            Some(Err(RouteError::NoListener | RouteError::NotInMesh)) => {
                d.refused += 1;
                return FAILURE_US;
            }
            _ => {
                d.not_found += 1;
                return FAILURE_US;
            }
        }
    };
    let Some(e) = endpoint else {
        d.refused += 1;
        return FAILURE_US;
    };
    let e = e as usize;
    if !ctx.ep.alive[e] {
        d.upstream_failed += 1;
        return FAILURE_US;
    }
    let model = ctx.ep.model[e];
    let draw = if model.deterministic() {
        0
    } else {
        rng.backends.next_u64()
    };
    let (latency, error) = model.answer(draw);
    d.ep_responses[e] += 1;
    d.ep_errors[e] += error as u64;
    let arm = &mut d.arms[ctx.ep.arm[e] as usize];
    arm.responses += 1;
    arm.errors += error as u64;
    arm.record_latency(latency + queued_us);
    d.answered += 1;
    latency
}

// Long: Envoy's router for one request (fault, then the retry loop with its timeout), in Envoy's
// order.
/// One HTTP request through an in-mesh route: the weighted pick of a cluster, then the
/// route's policy (fault, retries to other hosts, timeout) around the attempts. Pods count
/// every attempt (the pods' view); the version's arm counts the client's final answer.
#[allow(clippy::too_many_arguments)]
fn http_request(
    d: &mut Driver,
    ctx: &Ctx,
    table: &crate::mesh::RouteTable,
    lb_state: &mut crate::mesh::LbState,
    choice: &crate::mesh::RouteChoice,
    rng: &mut Streams,
    conn: usize,
    queued_us: u64,
) -> u64 {
    use crate::mesh::policy::{Attempt, ClientOutcome};
    let cluster = match choice.sticky {
        None => choice.pick_cluster(table, &mut rng.router).1,
        Some(sticky) => {
            // balancer.lua: a client's cookie before any rule; the backend chosen sets it.
            d.sticky_requests += 1;
            let jar = &mut d.conns[conn].jar;
            let id = match sticky.pinned(jar) {
                Some(id) => id,
                None => choice.pick_cluster(table, &mut rng.router).0,
            };
            sticky.remember(id, jar);
            table.cluster(id)
        }
    };
    // The hosts this request tried, in a buffer kept across requests (no allocation each).
    let mut tried = std::mem::take(&mut d.tried);
    tried.clear();
    let outlier = cluster.and_then(|c| c.outlier_detection()).copied();
    let hosts: &[crate::endpoints::EndpointId] = cluster.map_or(&[], |c| c.endpoints());
    let hash_key = cluster
        .and_then(|c| c.consistent_hash())
        .and_then(|h| h.key(ctx.headers, ctx.path));
    let Streams {
        router,
        balancer,
        backends,
        policy,
        ..
    } = rng;
    let (outcome, counts) = choice.policy.serve(policy, |n| {
        let now = d.now_us;
        let ejected = |d: &Driver, e: u32| {
            outlier.is_some()
                && d.health
                    .get(&ctx.ep.pod[e as usize])
                    .is_some_and(|h| h.is_ejected(now))
        };
        if outlier.is_some() && hosts.iter().all(|h| ejected(d, h.0)) {
            // Every host ejected: no healthy upstream (Istio's minHealthPercent 0: no panic).
            return Attempt::NoEndpoint;
        }
        let is_ejected = |e: u32| ejected(d, e);
        let score = |e: u32| {
            crate::mesh::policy::rendezvous_score(hash_key.unwrap_or(0), &ctx.ep.pod[e as usize])
        };
        let pick = crate::mesh::HostPick {
            tried: &tried,
            ejected: &is_ejected,
            hash_score: hash_key.map(|_| &score as &dyn Fn(u32) -> u64),
            retry: n > 0,
        };
        let Some(e) = cluster.and_then(|c| c.pick_host(ctx.lb, balancer, lb_state, &pick)) else {
            return Attempt::NoEndpoint;
        };
        if n == 0 {
            choice.shadows(table, ctx.lb, router, balancer, lb_state, |_, shadow| {
                if let Some(me) = shadow {
                    d.arms[ctx.ep.arm[me.0 as usize] as usize].mirrored += 1;
                }
            });
        }
        tried.push(e);
        let e = e as usize;
        let attempt = if !ctx.ep.alive[e] {
            Attempt::ConnectFailure
        } else {
            let model = ctx.ep.model[e];
            let draw = if model.deterministic() {
                0
            } else {
                backends.next_u64()
            };
            let (latency_us, error) = model.answer(draw);
            d.ep_responses[e] += 1;
            d.ep_errors[e] += error as u64;
            Attempt::Answered {
                status: if error { model.error_status } else { 200 },
                latency_us,
            }
        };
        if let Some(od) = &outlier {
            let status = match attempt {
                Attempt::Answered { status, .. } => Some(status),
                _ => None,
            };
            let out = hosts.iter().filter(|h| ejected(d, h.0)).count();
            d.health.entry(ctx.ep.pod[e].clone()).or_default().record(
                od,
                status,
                now,
                out,
                hosts.len(),
            );
        }
        attempt
    });
    d.retries += u64::from(counts.retries);
    let last_arm = tried.last().map(|&e| ctx.ep.arm[e as usize] as usize);
    if choice.sticky.is_some() {
        // A client counts at its pick (the first host its cookie's backend offered), not
        // at an answer: a client every one of whose requests failed was still sent there.
        if let Some(&first) = tried.first() {
            count_client(
                &mut d.conns[conn],
                &mut d.clients_drawn,
                ctx.ep.arm[first as usize],
            );
        }
    }
    d.tried = tried;
    let (status, latency) = match outcome {
        ClientOutcome::Answered { status, latency_us } => (status, latency_us),
        ClientOutcome::TimedOut { latency_us } => {
            d.timed_out += 1;
            (504, latency_us)
        }
        ClientOutcome::FaultAborted { latency_us, .. } => {
            d.fault_aborted += 1;
            return latency_us.max(FAILURE_US);
        }
        ClientOutcome::NoEndpoint if cluster.is_some_and(|c| c.is_unresolved()) => {
            d.unresolved_backend += 1;
            return FAILURE_US;
        }
        ClientOutcome::NoEndpoint => {
            d.no_healthy_upstream += 1;
            return FAILURE_US;
        }
        ClientOutcome::ConnectFailure { .. } => {
            d.upstream_failed += 1;
            return FAILURE_US;
        }
    };
    let Some(arm) = last_arm else {
        d.no_healthy_upstream += 1;
        return FAILURE_US;
    };
    let arm = &mut d.arms[arm];
    arm.responses += 1;
    arm.errors += u64::from(status >= 500);
    arm.record_latency(latency + queued_us);
    d.answered += 1;
    latency
}

/// Counts a sticky request's pick for its client: the first pick is the client's draw.
fn count_client(client: &mut Conn, clients_drawn: &mut u64, arm: u16) {
    if client.first_arm.is_none() {
        client.first_arm = Some(arm);
        *clients_drawn += 1;
    }
    client.switched |= client.last_arm.is_some_and(|last| last != arm);
    client.last_arm = Some(arm);
}

/// Arm index, backend model and pod name for every endpoint of an epoch's table.
fn endpoint_facts<'t>(
    world: &impl Cluster,
    backends: &Backends,
    arms: &mut Vec<ArmStats>,
    endpoint: impl Fn(u32) -> Option<&'t Endpoint>,
) -> EpochEndpoints {
    let mut out = EpochEndpoints {
        arm: Vec::new(),
        model: Vec::new(),
        pod: Vec::new(),
        by_pod: HashMap::new(),
        alive: Vec::new(),
    };
    let mut i = 0u32;
    while let Some(ep) = endpoint(i) {
        let arm = arm_index(arms, ep.role, &ep.version);
        let pod = world.api().pod(&ep.namespace, &ep.pod);
        out.alive.push(pod.is_some_and(|p| p.serving));
        let image = pod
            .and_then(|p| p.image.as_deref())
            .unwrap_or_default()
            .to_string();
        out.arm.push(arm);
        out.model.push(backends.for_image(&image));
        out.pod.push(ep.pod.clone());
        out.by_pod.insert(ep.pod.clone(), i);
        i += 1;
    }
    out
}

/// Adds an epoch's per-endpoint answers to the per-pod totals.
fn fold_pods(d: &mut Driver, ep: &EpochEndpoints) {
    for (e, responses) in d.ep_responses.iter().enumerate() {
        if *responses == 0 {
            continue;
        }
        let arm = &d.arms[ep.arm[e] as usize];
        let pod = d
            .pods
            .entry(ep.pod[e].clone())
            .or_insert_with(|| super::PodStats {
                pod: ep.pod[e].clone(),
                role: arm.role,
                version: arm.version.clone(),
                responses: 0,
                errors: 0,
            });
        pod.responses += responses;
        pod.errors += d.ep_errors[e];
    }
}

/// The caller's pod labels (`sourceLabels`): the gateway pods' (its selector) through a
/// gateway, the load's `source.labels` from a sidecar.
/// The calling pod's labels for `sourceLabels` matches: through a gateway, the gateway's
/// selector labels; in the mesh, the load's `source.labels`.
pub fn caller_labels(
    world: &impl Cluster,
    path: &Path,
    workload: &Workload,
) -> Vec<(String, String)> {
    match path {
        Path::Gateway(g) => {
            let (gw_ns, gw_name) = g.split_once('/').unwrap_or((&workload.namespace, g));
            world
                .api()
                .get(Kind::Gateway, gw_ns, gw_name)
                .ok()
                .and_then(|o| o.spec()["selector"].as_object().cloned())
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| v.as_str().map(|v| (k, v.to_string())))
                .collect()
        }
        _ => workload.source_labels.clone(),
    }
}

/// Re-attaches pinned connections to this epoch's endpoints (by pod name); a connection
/// whose pod went away is reset and reconnects on its next request.
fn reattach_connections(conns: &mut [Conn], ep: &EpochEndpoints) {
    for c in conns {
        if let Some((pod, idx)) = &mut c.pinned {
            match ep.by_pod.get(pod.as_str()) {
                Some(i) => *idx = *i,
                None => c.pinned = None,
            }
        }
    }
}

/// The split kube-proxy implies for a Service: its ready pods' roles, one share each.
fn kube_proxy_shares(
    proxy: &ServiceProxy,
    service: Option<crate::endpoints::ServiceId>,
) -> Vec<(Role, f64)> {
    let eps = service
        .and_then(|s| proxy.service(s))
        .map(|s| s.endpoints.clone())
        .unwrap_or_default();
    let roles: Vec<Role> = eps
        .iter()
        .filter_map(|e| proxy.endpoint(*e))
        .map(|e| e.role)
        .collect();
    shares_by_role(roles.iter().map(|r| (*r, 1.0)))
}

/// The split a route table implies for this request: each cluster's weight spread over its
/// endpoints, added up per role (none when the request has no route).
fn route_shares(table: &crate::mesh::RouteTable, meta: &RequestMeta) -> Vec<(Role, f64)> {
    let Ok(choice) = table.route(meta) else {
        return Vec::new();
    };
    shares_by_role(table.role_shares(choice.clusters).into_iter())
}

/// Adds an epoch's shares, weighted by the draws it carried, to the running totals.
fn add_weighted(totals: &mut Vec<(Role, f64)>, shares: Vec<(Role, f64)>, weight: f64) {
    for (role, share) in shares {
        match totals.iter_mut().find(|(r, _)| *r == role) {
            Some((_, s)) => *s += share * weight,
            None => totals.push((role, share * weight)),
        }
    }
}

/// Adds up (role, share) parts into one share per role, in role order.
fn shares_by_role(parts: impl Iterator<Item = (Role, f64)>) -> Vec<(Role, f64)> {
    let mut out: Vec<(Role, f64)> = Vec::new();
    for (role, share) in parts {
        match out.iter_mut().find(|(r, _)| *r == role) {
            Some((_, s)) => *s += share,
            None => out.push((role, share)),
        }
    }
    let total: f64 = out.iter().map(|(_, s)| s).sum();
    if total > 0.0 {
        for (_, s) in &mut out {
            *s /= total;
        }
    }
    out.sort_by_key(|(r, _)| *r);
    out
}

fn arm_index(arms: &mut Vec<ArmStats>, role: Role, version: &str) -> u16 {
    if let Some(i) = arms
        .iter()
        .position(|a| a.role == role && a.version == version)
    {
        return i as u16;
    }
    arms.push(ArmStats::new(role, version.to_string()));
    (arms.len() - 1) as u16
}

/// Origin `auto`: the gateway serving the host; in-mesh when no gateway serves it; plain
/// (kube-proxy) when there is no VirtualService at all.
fn choose_path(world: &impl Cluster, w: &Workload) -> Path {
    let table = world.mesh().table_at(world.now());
    match &w.origin {
        OriginChoice::Plain => Path::KubeProxy,
        OriginChoice::Mesh => Path::Mesh,
        OriginChoice::Gateway(Some(g)) => Path::Gateway(g.clone()),
        OriginChoice::Gateway(None) => {
            match table.and_then(|t| t.gateway_for_load(&w.traffic.host, &w.namespace, w.protocol))
            {
                Some(g) => Path::Gateway(g.to_string()),
                None => Path::Mesh,
            }
        }
        OriginChoice::Auto => match table {
            Some(t) if t.has_virtual_services() => {
                match t.gateway_for_load(&w.traffic.host, &w.namespace, w.protocol) {
                    Some(g) => Path::Gateway(g.to_string()),
                    None => Path::Mesh,
                }
            }
            _ => Path::KubeProxy,
        },
    }
}

/// `d` in whole microseconds, rounded up.
fn ceil_micros(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{Amount, Traffic};
    use crate::sim::World;

    /// The seed's update, stopped right as the weight is written, so that a load spans a
    /// table push.
    fn paused_world() -> World {
        let mut w = crate::demo::deployed(1);
        w.apply(&crate::demo::manifests(&[crate::demo::UPDATE]))
            .unwrap();
        w.advance(Duration::from_secs(5)).unwrap();
        w
    }

    fn summary(r: &LoadResult) -> Vec<(String, u64, u64, u64)> {
        r.arms
            .iter()
            .map(|a| {
                (
                    a.version.clone(),
                    a.responses,
                    a.errors,
                    a.latency.summary().p99,
                )
            })
            .collect()
    }

    #[test]
    fn the_fast_loop_and_the_general_path_agree_request_for_request() {
        // With a canary that jitters and fails (the general fast loop), and with every pod
        // answering the same way (the deterministic loop).
        let mut noisy = Backends::default();
        noisy.by_image.insert(
            "argoproj/rollouts-demo:yellow".into(),
            BackendModel::new(Duration::from_millis(3), Duration::from_millis(1), 0.1),
        );
        let mut steady = Backends::default();
        steady.by_image.insert(
            "argoproj/rollouts-demo:yellow".into(),
            BackendModel::new(Duration::from_millis(2), Duration::ZERO, 0.0),
        );
        for (backends, keepalive, noisy_run) in [
            (&noisy, true, true),
            (&noisy, false, true),
            (&steady, true, false),
            (&steady, false, false),
        ] {
            let w = Workload {
                amount: Amount::Requests(50_000),
                namespace: "my-demo".into(),
                traffic: Traffic {
                    host: "rollouts-demo.local".into(),
                    keepalive,
                    ..Traffic::default()
                },
                ..Workload::default()
            };
            let run = |fast: bool| {
                let mut world = paused_world();
                let mut rng = Streams::new(9, "load");
                world.settle().unwrap();
                let mut run = LoadRun::start(
                    &world,
                    &w,
                    backends,
                    LbPolicy::RoundRobin,
                    ProxyMode::Iptables,
                )
                .unwrap();
                if !fast {
                    run = run.without_fast_loops();
                }
                let r = world.drive_load(run, &mut rng).unwrap();
                (
                    summary(&r),
                    r.sent,
                    r.connections_opened,
                    r.ended,
                    world.now(),
                )
            };
            let (fast, slow) = (run(true), run(false));
            assert_eq!(fast, slow);
            assert!(
                fast.0
                    .iter()
                    .any(|a| a.0 == "yellow" && a.1 > 5_000 && (a.2 > 500) == noisy_run),
                "{:?}",
                fast.0
            );
        }
    }

    #[test]
    fn a_consistent_hash_keeps_a_key_on_one_pod_while_the_version_is_picked_per_request() {
        let mut world = paused_world();
        world
            .apply(
                &crate::model::yaml::load_str(
                    "test.yaml",
                    r#"
apiVersion: networking.istio.io/v1beta1
kind: DestinationRule
metadata: {name: stable-by-user, namespace: my-demo}
spec:
  host: rollouts-demo-stable
  trafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x-user}}}
"#,
                    "my-demo",
                )
                .unwrap(),
            )
            .unwrap();
        world.advance(Duration::from_secs(1)).unwrap();
        let load = |world: &mut World, headers: Vec<(String, String)>| {
            let w = Workload {
                amount: Amount::Requests(20_000),
                namespace: "my-demo".into(),
                traffic: Traffic {
                    host: "rollouts-demo.local".into(),
                    headers,
                    ..Traffic::default()
                },
                ..Workload::default()
            };
            let mut rng = Streams::new(5, "load");
            world
                .run_load(
                    &w,
                    &Backends::default(),
                    LbPolicy::RoundRobin,
                    ProxyMode::Iptables,
                    &mut rng,
                )
                .unwrap()
        };
        let stable_pods = |r: &LoadResult| {
            r.pods
                .iter()
                .filter(|p| p.role == crate::endpoints::Role::Stable && p.responses > 0)
                .count()
        };
        let canary_share = |r: &LoadResult| r.count("canary").0 as f64 / r.answered as f64;
        let keyed = load(&mut world, vec![("x-user".into(), "alice".into())]);
        assert_eq!(stable_pods(&keyed), 1, "{:?}", keyed.pods);
        assert!(
            (canary_share(&keyed) - 0.2).abs() < 0.02,
            "{}",
            canary_share(&keyed)
        );
        let unkeyed = load(&mut world, Vec::new());
        assert_eq!(
            stable_pods(&unkeyed),
            4,
            "no key: round robin over every stable pod"
        );
        assert!((canary_share(&unkeyed) - 0.2).abs() < 0.02);
    }
}
