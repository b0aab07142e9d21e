//! Workloads and what they produce.
//!
//! A [`Traffic`] says how clients send: closed loop (each connection sends its next request
//! when the previous answer arrives) or open loop (a constant or Poisson rate), over N
//! connections, keep-alive or one request per connection, HTTP/1.1 or HTTP/2, and each
//! request's method, host, path and headers. It is the one description of a load, simulated
//! or real: a [`Workload`] is a Traffic with its amount and its origin in the cluster
//! (ingress gateway, in-mesh sidecar, or a plain pod without sidecar), and the real client's
//! `HttpLoad` a Traffic sent to a target over real sockets. Pods answer per
//! the scenario's [`Backends`] model. Every answer is attributed to the pod that gave it, its
//! role (stable/canary) and its version; the [`LoadResult`] holds the counts the verdict is
//! computed from. The load generator decides nothing: `verify` judges.
//!
//! [`LoadRun`] drives a workload through the simulated data plane on the virtual clock; the
//! caller moves the clock between its epochs. The real HTTP client (`canarysim::load::http`)
//! lives in the `canarysim` crate and shares [`classify`] and [`tally`].

mod backend;
pub mod classify;
mod simulate;
pub mod tally;
pub mod tally_record;

pub use backend::{BackendModel, Backends};
pub use simulate::{
    LoadRun, Path as DataPath, Progress, Streams, caller_labels, data_path, meets_session_affinity,
};

use std::time::Duration;

use crate::endpoints::Role;
use crate::mesh::Protocol;
use crate::verify::LatencyRecorder;
pub use crate::verify::SplitUnit;

/// Why a simulated load could not run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("sequential test: {0}")]
    SequentialTest(String),
    #[error("no route table has reached the proxies yet")]
    NoRouteTable,
}

/// The cluster a simulated load runs against: its objects, its proxies' route tables (with
/// the instant each took effect) and its clock. The load reads it; whoever drives the load
/// moves the clock between epochs ([`Progress`]), so that the rollout and its push delays
/// play out while requests flow. The simulation's `World` is one, and the load knows
/// nothing else of it.
pub trait Cluster {
    fn now(&self) -> crate::clock::SimTime;
    /// When something will next change by itself (a pod turning ready, a pause ending, a
    /// table push), if anything will.
    fn next_wake(&self) -> Option<crate::clock::SimTime>;
    fn api(&self) -> &crate::apiserver::ApiServer;
    fn mesh(&self) -> &crate::mesh::Mesh;
    /// The proxies' tables with their load-balancer state (round-robin positions).
    fn mesh_mut(&mut self) -> &mut crate::mesh::Mesh;
    /// Hears what each epoch of an HTTP load through the mesh did at the pods (the
    /// simulation's built-in metrics count it, as the sidecars' telemetry would).
    fn observe(&mut self, _traffic: &EpochTraffic) {}
}

/// What one epoch of a simulated HTTP load did at the pods: the route's weighted
/// destinations and each pod's answers (every attempt, as the pods saw them).
#[derive(Debug, Clone)]
pub struct EpochTraffic {
    pub start: crate::clock::SimTime,
    pub end: crate::clock::SimTime,
    /// `namespace/name` of the gateway the requests entered through (always with its
    /// namespace); None: a sidecar's.
    pub gateway: Option<String>,
    /// The calling pod's labels (a sidecar's caller).
    pub source_labels: Vec<(String, String)>,
    pub destinations: Vec<TrafficDestination>,
    /// Indexed by the epoch's endpoint ids (what [`TrafficDestination::endpoints`] holds).
    pub pods: Vec<PodTraffic>,
}

/// One weighted destination of the route in force: a Service host, maybe a subset.
#[derive(Debug, Clone)]
pub struct TrafficDestination {
    pub host: String,
    pub subset: String,
    pub weight: u32,
    pub endpoints: Vec<u32>,
}

/// One pod's answers in an epoch, and how it answers (for latency buckets).
#[derive(Debug, Clone)]
pub struct PodTraffic {
    pub namespace: String,
    pub pod: String,
    pub answers: u64,
    pub errors: u64,
    pub error_status: u16,
    pub latency_us: u64,
    pub jitter_us: u64,
}

/// How much to send.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    Requests(u64),
    Duration(Duration),
}

/// When requests are sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// Each connection sends its next request when the previous response arrives.
    Closed,
    /// Requests arrive at a constant rate (per second), spread over the connections.
    Constant(f64),
    /// Requests arrive as a Poisson process of this rate (per second).
    Poisson(f64),
}

impl Arrival {
    /// The open loop's rate (per second); None for a closed loop.
    pub fn rate(self) -> Option<f64> {
        match self {
            Arrival::Closed => None,
            Arrival::Constant(rate) | Arrival::Poisson(rate) => Some(rate),
        }
    }
}

/// A Poisson process's next gap, exponential with mean `mean`, from one draw of `rng`. The
/// simulated and the real load draw their gaps here, from the same stream
/// ([`Streams::arrivals`]), so a live run sends at the instants the simulation would.
pub fn exponential_gap(rng: &mut impl rand::RngCore, mean: f64) -> f64 {
    let u = ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    -mean * u.ln()
}

/// Where requests come from (SCENARIOS.md `origin`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OriginChoice {
    /// Through the gateway the VirtualService serving the host is bound to; else in-mesh; and
    /// when no VirtualService exists at all, from plain pods (no mesh).
    Auto,
    /// Through this ingress gateway (`ns/name` or `name`); None: the one serving the host.
    Gateway(Option<String>),
    Mesh,
    Plain,
}

/// What a load sends and how, simulated or over real sockets: its pace, its connections and
/// each request. A scenario's load step and `canarysim load`'s command line both resolve to
/// one; a live run sends its simulated load's own.
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    pub arrival: Arrival,
    pub connections: u32,
    pub keepalive: bool,
    pub http2: bool,
    pub method: String,
    /// The Host header, which routes match (empty, for a real load: the target's).
    pub host: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The TLS server name (None: the host).
    pub sni: Option<String>,
    /// Stop as soon as a sequential test decides (the amount is then the most to send).
    pub stop: Option<StopRule>,
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic {
            arrival: Arrival::Closed,
            connections: 16,
            keepalive: true,
            http2: false,
            method: "GET".into(),
            host: String::new(),
            path: "/".into(),
            headers: Vec::new(),
            sni: None,
            stop: None,
        }
    }
}

/// One load step, resolved: its traffic, how much of it, and where in the cluster it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub amount: Amount,
    pub traffic: Traffic,
    pub origin: OriginChoice,
    pub protocol: Protocol,
    /// The callers' namespace (short host names resolve in it).
    pub namespace: String,
    pub port: u32,
    /// The calling pod's labels, for `sourceLabels` matches (in the mesh).
    pub source_labels: Vec<(String, String)>,
}

/// A sequential test on one version's share; the load stops when it decides.
#[derive(Debug, Clone, PartialEq)]
pub struct StopRule {
    /// `stable`, `canary` or an image tag.
    pub key: String,
    pub share: f64,
    pub test: StopTest,
}

/// Which sequential test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StopTest {
    /// A scenario's `until_decided`: is the share `share`, or off by `delta`? (Wald's
    /// two-sided SPRT: `matches` or `differs`.)
    Sprt { delta: f64, alpha: f64, beta: f64 },
    /// `canarysim load --until-decided`: the verdict's own question, is the share inside
    /// `share ± within` or outside it, at `confidence` ([`crate::verify::BandSprt`]: `pass`
    /// or `fail`).
    Verdict { within: f64, confidence: f64 },
}

/// A running sequential test.
#[derive(Debug, Clone)]
pub enum SequentialTest {
    Sprt(crate::verify::TwoSidedSprt),
    Verdict(crate::verify::BandSprt),
}

impl StopRule {
    /// The test, ready for its first draw.
    pub fn start(&self) -> Result<SequentialTest, crate::verify::SprtError> {
        Ok(match self.test {
            StopTest::Sprt { delta, alpha, beta } => SequentialTest::Sprt(
                crate::verify::TwoSidedSprt::new(self.share, delta, alpha, beta)?,
            ),
            StopTest::Verdict { within, confidence } => SequentialTest::Verdict(
                crate::verify::BandSprt::new(self.share, within, confidence)?,
            ),
        })
    }
}

impl SequentialTest {
    /// Feeds `n` draws, `k` of them the rule's version; the decision's word once decided.
    pub fn observe_many(&mut self, k: u64, n: u64) -> Option<&'static str> {
        use crate::verify::{Outcome, SplitCheck};
        match self {
            SequentialTest::Sprt(t) => match t.observe_many(k, n) {
                SplitCheck::Continue => None,
                SplitCheck::Matches => Some("matches"),
                SplitCheck::Differs => Some("differs"),
            },
            SequentialTest::Verdict(t) => match t.observe_many(k, n) {
                Outcome::Inconclusive => None,
                decided => Some(decided.as_str()),
            },
        }
    }

    /// Draws seen.
    pub fn samples(&self) -> u64 {
        match self {
            SequentialTest::Sprt(t) => t.samples(),
            SequentialTest::Verdict(t) => t.samples(),
        }
    }

    /// The word for a load that ran out before the test decided.
    pub fn undecided(&self) -> &'static str {
        match self {
            SequentialTest::Sprt(_) => "undecided",
            SequentialTest::Verdict(_) => "inconclusive",
        }
    }
}

/// What the sequential test decided, and after how many draws.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Sequential {
    /// A scenario's `until_decided`: `matches`, `differs`, `undecided` (the load ran out
    /// first), or `not applicable` (the split is made per connection: requests are not
    /// independent draws). `canarysim load --until-decided`: `pass`, `fail`, or
    /// `inconclusive` (the load ran out first).
    pub decision: String,
    /// Draws the test saw until it decided (all of them when it did not).
    pub after: u64,
    /// What a draw was: each request, or each connection's first answer.
    pub unit: SplitUnit,
    /// The most the load would have sent.
    pub planned: Option<u64>,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            amount: Amount::Requests(1000),
            traffic: Traffic::default(),
            origin: OriginChoice::Auto,
            protocol: Protocol::Http,
            namespace: "default".into(),
            port: 80,
            source_labels: Vec::new(),
        }
    }
}

/// The most simulated requests one load step sends unless the user raises it
/// (`canarysim run --request-budget`): seconds of simulation on one core (measured: 10
/// million requests in 0.04 s on the fast path, in 0.37 s with retries, timeouts and faults).
pub(crate) const DEFAULT_REQUEST_BUDGET: u64 = 100_000_000;

impl Workload {
    /// Requests in flight at once: one per connection, or `H2_STREAMS` per connection for
    /// a closed loop over HTTP/2.
    pub(crate) fn workers(&self) -> u32 {
        match (self.traffic.arrival, self.traffic.http2) {
            (Arrival::Closed, true) => self.traffic.connections.max(1) * simulate::H2_STREAMS,
            _ => self.traffic.connections.max(1),
        }
    }

    /// How many requests this load will send, estimated before it starts: what fits in its
    /// duration (or in the 24 h cap on a load's scenario time), at most the count it asks
    /// for. An open loop sends rate × time; a closed loop the requests in flight at once ×
    /// time / `mean_answer_us` (the quickest mean answer among the pods that may serve it;
    /// retries and timeouts are not foreseen).
    pub(crate) fn estimated_requests(&self, mean_answer_us: u64) -> u64 {
        let fits = |time: Duration| self.requests_in(time, mean_answer_us);
        match self.amount {
            Amount::Requests(n) => n.min(fits(simulate::MAX_LOAD_TIME)),
            Amount::Duration(d) => fits(d.min(simulate::MAX_LOAD_TIME)),
        }
    }

    /// About how many requests this workload sends in `time` (saturating): rate × time for
    /// an open loop; for a closed loop, the requests in flight × time / the mean answer.
    pub(crate) fn requests_in(&self, time: Duration, mean_answer_us: u64) -> u64 {
        match self.traffic.arrival {
            Arrival::Constant(rate) | Arrival::Poisson(rate) => {
                (rate * time.as_secs_f64()).ceil() as u64
            }
            Arrival::Closed => {
                let per_answer = mean_answer_us.max(1) as f64 / 1e6;
                (f64::from(self.workers()) * time.as_secs_f64() / per_answer).ceil() as u64
            }
        }
    }
}

/// What the clients saw from one version (role + image tag): one type for the simulated,
/// live and real-gateway loads, which the reports and the verdicts read.
#[derive(Debug, Clone)]
pub struct ArmStats {
    /// Stable or canary where the load's world is known; [`Role::Other`] at a real gateway,
    /// whose answers carry only a version.
    pub role: Role,
    /// Image tag, e.g. `yellow` (at a real gateway: what the classifier read).
    pub version: String,
    /// Responses from this version's pods (any status).
    pub responses: u64,
    /// 5xx answers from this version's pods.
    pub errors: u64,
    /// Requests that failed (reset, timeout) on a connection this version had answered on
    /// last: lost by this version as far as the client can tell (real loads only).
    pub lost: u64,
    /// Connections whose destination was chosen to be this version (per-connection split),
    /// or, at a real gateway, whose first classified answer came from it.
    pub connections: u64,
    /// Clients whose first request (their draw) was sent to this version, answered or not
    /// (a split pinned by a session cookie).
    pub clients: u64,
    /// Shadow requests mirrored to this version (not part of the split).
    pub mirrored: u64,
    /// Response latency, microseconds, from the intended start.
    pub latency: LatencyRecorder,
    /// Latencies below [`BIN_LIMIT_US`] counted per microsecond while the load runs, then
    /// added to `latency` (the same histogram, without a histogram update per request).
    pub(crate) bins: Vec<u64>,
}

/// Latencies below this many microseconds are binned exactly before they reach the histogram.
pub(crate) const BIN_LIMIT_US: u64 = 1 << 16;

impl ArmStats {
    /// A version nothing has been counted for yet.
    pub fn new(role: Role, version: String) -> Self {
        ArmStats {
            role,
            version,
            responses: 0,
            errors: 0,
            lost: 0,
            connections: 0,
            clients: 0,
            mirrored: 0,
            latency: LatencyRecorder::new(),
            bins: Vec::new(),
        }
    }

    /// Adds what `other` counted (the same version, seen by another worker or pod).
    pub fn merge(&mut self, other: &ArmStats) {
        self.responses += other.responses;
        self.errors += other.errors;
        self.lost += other.lost;
        self.connections += other.connections;
        self.clients += other.clients;
        self.mirrored += other.mirrored;
        self.latency.merge(&other.latency);
        if self.bins.len() < other.bins.len() {
            self.bins.resize(other.bins.len(), 0);
        }
        for (mine, theirs) in self.bins.iter_mut().zip(&other.bins) {
            *mine += theirs;
        }
    }

    /// This version's draws in the unit of randomisation: its answers, the connections
    /// that chose it, or the clients that drew it.
    pub fn draws(&self, unit: SplitUnit) -> u64 {
        match unit {
            SplitUnit::Request => self.responses,
            SplitUnit::Connection => self.connections,
            SplitUnit::Client => self.clients,
        }
    }

    /// Whether a share key names this version: `stable` / `canary` by role, anything else
    /// by image tag.
    pub fn matches(&self, key: &str) -> bool {
        match key {
            "stable" => self.role == Role::Stable,
            "canary" => self.role == Role::Canary,
            tag => self.version == tag,
        }
    }

    /// Records one latency.
    #[inline(always)]
    pub(crate) fn record_latency(&mut self, us: u64) {
        if us < BIN_LIMIT_US {
            let i = us as usize;
            if i >= self.bins.len() {
                self.bins.resize(i + 1, 0);
            }
            self.bins[i] += 1;
        } else {
            self.latency.record(us);
        }
    }

    /// Records `count` answers of the same latency.
    pub(crate) fn record_latency_n(&mut self, us: u64, count: u64) {
        if us < BIN_LIMIT_US {
            let i = us as usize;
            if i >= self.bins.len() {
                self.bins.resize(i + 1, 0);
            }
            self.bins[i] += count;
        } else {
            self.latency.record_n(us, count);
        }
    }

    /// Moves the binned latencies into the histogram.
    pub(crate) fn flush_latencies(&mut self) {
        for (us, count) in self.bins.iter().enumerate() {
            if *count > 0 {
                self.latency.record_n(us as u64, *count);
            }
        }
        self.bins.clear();
    }
}

/// The split verdict on `arms` (of `answered` answers, drawn in `unit`) against `expected`
/// shares (name, fraction): a name's draws are those of the arms `names` says it names; the
/// versions no name lists form one remaining arm, `(rest)`. Simulated, live and real-gateway
/// loads are judged by this one reading. Returns the arms' names and expected shares in the
/// verdict's order.
pub fn judge_split(
    arms: &[ArmStats],
    unit: SplitUnit,
    answered: u64,
    expected: &[(String, f64)],
    names: impl Fn(&ArmStats, &str) -> bool,
    within: f64,
    confidence: f64,
) -> (Vec<(String, f64)>, crate::verify::SplitVerdict) {
    let effective_n: u64 = arms.iter().map(|a| a.draws(unit)).sum();
    let mut listed_names = Vec::new();
    let mut draws = Vec::new();
    let mut requests = Vec::new();
    let mut shares = Vec::new();
    for (name, share) in expected {
        let (k, n) = arms
            .iter()
            .filter(|a| names(a, name))
            .fold((0, 0), |(k, n), a| (k + a.draws(unit), n + a.responses));
        listed_names.push(name.clone());
        draws.push(k);
        requests.push(n);
        shares.push(*share);
    }
    let listed: u64 = draws.iter().sum();
    let listed_share: f64 = shares.iter().sum();
    if listed < effective_n || listed_share < 1.0 - 1e-9 {
        listed_names.push("(rest)".to_string());
        draws.push(effective_n.saturating_sub(listed));
        requests.push(answered.saturating_sub(requests.iter().sum()));
        shares.push((1.0 - listed_share).max(0.0));
    }
    let verdict =
        crate::verify::split_verdict(&draws, unit, &requests, &shares, within, confidence);
    (listed_names.into_iter().zip(shares).collect(), verdict)
}

/// What one pod answered.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PodStats {
    pub pod: String,
    pub role: Role,
    pub version: String,
    pub responses: u64,
    pub errors: u64,
}

/// Everything a load step observed.
#[derive(Debug, Clone)]
pub struct LoadResult {
    pub sent: u64,
    /// Answered by a pod (any status).
    pub answered: u64,
    /// No pod answered: 404 no route, 503 no healthy upstream, 500 for a backendRef that
    /// does not resolve, or the connection was refused.
    pub not_found: u64,
    pub no_healthy_upstream: u64,
    pub unresolved_backend: u64,
    pub refused: u64,
    /// 503 from the proxy whose connection to a pod failed: the pod went away before the
    /// route table that drops it took effect (push delay).
    pub upstream_failed: u64,
    /// Answered by the proxy's fault filter (`fault.abort`), without calling a pod.
    pub fault_aborted: u64,
    /// Answered 504 by the proxy: the route timeout fired (counted in the version's answers
    /// and errors, since the request was routed to it).
    pub timed_out: u64,
    /// Attempts after the first (retries): each reached a pod, so the pods' view
    /// ([`LoadResult::pods`]) counts them while the client's view (`arms`) does not.
    pub retries: u64,
    pub arms: Vec<ArmStats>,
    /// Every answering pod, by name: the pods' view (every attempt, retries included).
    pub pods: Vec<PodStats>,
    pub unit: SplitUnit,
    pub connections_opened: u64,
    /// Per client ([`SplitUnit::Client`]): the clients whose requests were sent to two
    /// versions.
    pub clients_switched: u64,
    /// What the router did: `gateway my-demo/rollouts-demo-gateway`, `mesh`, `kube-proxy`.
    pub path: String,
    /// The sequential test's outcome, when the workload had a stop rule.
    pub sequential: Option<Sequential>,
    /// The split the data plane's configuration implies, per role: the VirtualService
    /// weights (or, through kube-proxy, the ratio of ready pods) of each route table in
    /// force, weighted by the requests sent while it was in force (push delays included),
    /// or by the connections opened, or the clients that drew, per connection or client.
    pub configured: Vec<(Role, f64)>,
    /// A limit that stopped the load before it sent what it was asked for, in words
    /// ("stopped at the 24 h cap … after N requests; asked for M"); None when none did.
    pub capped: Option<String>,
    pub started: crate::clock::SimTime,
    pub ended: crate::clock::SimTime,
}

impl LoadResult {
    /// Requests that got no answer from a pod.
    pub fn failed(&self) -> u64 {
        self.not_found
            + self.no_healthy_upstream
            + self.unresolved_backend
            + self.refused
            + self.upstream_failed
            + self.fault_aborted
    }

    /// Answers and connections of the arms a share key names: `stable` / `canary` group by
    /// role, anything else is an image tag.
    pub fn count(&self, key: &str) -> (u64, u64) {
        self.arms
            .iter()
            .filter(|a| a.matches(key))
            .fold((0, 0), |(r, c), a| (r + a.responses, c + a.connections))
    }

    /// The invariant every run checks: every request sent was answered or failed.
    pub fn balanced(&self) -> bool {
        self.sent == self.answered + self.failed()
            && self.answered == self.arms.iter().map(|a| a.responses).sum::<u64>()
            // Pods answer each request at most once per attempt.
            && self.pods.iter().map(|p| p.responses).sum::<u64>() <= self.answered + self.retries
    }
}
