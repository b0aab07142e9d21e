//! The real load generator behind `canarysim load`: HTTP/1.1 or HTTP/2 (h2 over TLS by
//! ALPN, h2c on plain HTTP) over real sockets with tokio and hyper. Closed loop (each
//! connection sends its next request when the answer arrives) or open loop at a rate, with
//! latency measured from the intended send time so a stalled backend is not hidden. Every
//! request ends in one class of the [`Tally`]; the load decides nothing (`verify` judges).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::body::{self, BODY_PREFIX};
use super::classify::Classifier;
use super::tally::{Connection, Ending, OnConnection, Tally};
use super::{Arrival, SequentialTest, SplitUnit, StopRule, Traffic, exponential_gap};
use rand_pcg::Pcg64Mcg;

/// How long `canarysim load` waits for the first connection before it calls the target
/// unreachable.
pub const REACH_TIMEOUT: Duration = Duration::from_secs(5);

/// `--connect-to HOST:PORT:ADDR:PORT` (curl's meaning): requests for HOST:PORT (an empty
/// HOST or PORT matches any) go to ADDR:PORT; Host header and SNI stay the URL's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectTo {
    pub host: String,
    pub port: Option<u16>,
    pub to_host: String,
    pub to_port: u16,
}

impl std::str::FromStr for ConnectTo {
    type Err = String;

    fn from_str(s: &str) -> Result<ConnectTo, String> {
        let expected = || {
            format!(
                "--connect-to {s:?}: expected HOST:PORT:ADDR:PORT, e.g. demo.local:443:127.0.0.1:8443"
            )
        };
        // ADDR may be a bracketed IPv6 address.
        let (head, to_port) = s.rsplit_once(':').ok_or_else(expected)?;
        let (rest, to_host) = if let Some(h) = head.strip_suffix(']') {
            let (rest, v6) = h.rsplit_once(":[").ok_or_else(expected)?;
            (rest, v6.to_string())
        } else {
            let (rest, h) = head.rsplit_once(':').ok_or_else(expected)?;
            (rest, h.to_string())
        };
        let (host, port) = rest.rsplit_once(':').ok_or_else(expected)?;
        let port = if port.is_empty() {
            None
        } else {
            Some(port.parse().map_err(|_| expected())?)
        };
        Ok(ConnectTo {
            host: host.to_string(),
            port,
            to_host: if to_host.is_empty() {
                host.to_string()
            } else {
                to_host
            },
            to_port: to_port.parse().map_err(|_| expected())?,
        })
    }
}

/// Where connections go: scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub tls: bool,
    pub host: String,
    pub port: u16,
}

/// An `http://` or `https://` URL: where connections go, and the path and query each
/// request asks for.
pub fn parse_url(s: &str) -> Result<(Target, String), String> {
    let uri: hyper::Uri = s
        .parse()
        .map_err(|e| format!("URL {s:?}: {e}; expected e.g. http://127.0.0.1:8080/"))?;
    let tls = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err(format!("URL {s:?}: expected an http:// or https:// URL")),
    };
    let host = uri
        .host()
        .ok_or_else(|| format!("URL {s:?}: no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let target = Target {
        tls,
        port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
        host,
    };
    let path = uri
        .path_and_query()
        .map_or("/".to_string(), |p| p.as_str().to_string());
    Ok((target, path))
}

/// How much a real load sends: a number of requests, a duration, or requests cut at a
/// duration; never neither, so that no load runs unbounded ([`Extent::new`] is the one
/// place that says so). Zero is an extent (a live scenario's `load: {requests: 0}` sends
/// nothing); the command line refuses it for `-n` and `-z` itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    requests: Option<u64>,
    duration: Option<Duration>,
}

impl Extent {
    pub fn new(requests: Option<u64>, duration: Option<Duration>) -> Result<Self, String> {
        if requests.is_none() && duration.is_none() {
            return Err(
                "canarysim load needs -n/--requests N or -z/--duration D (it never runs unbounded)"
                    .into(),
            );
        }
        Ok(Extent { requests, duration })
    }

    /// At most this many requests (None: until the duration ends).
    pub fn requests(self) -> Option<u64> {
        self.requests
    }

    /// At most this long (None: until the requests are sent).
    pub fn duration(self) -> Option<Duration> {
        self.duration
    }
}

/// One real load: the traffic (as a simulated load describes it) sent to a target over
/// real sockets, and what only real sockets need (TLS, timeouts, how answers are classified).
#[derive(Debug, Clone)]
pub struct HttpLoad {
    pub target: Target,
    pub extent: Extent,
    pub traffic: Traffic,
    /// The stream a Poisson process's gaps are drawn from (a live run passes its simulated
    /// load's own, so both send at the same instants).
    pub arrivals: Pcg64Mcg,
    /// Per request, connecting and the whole body included.
    pub timeout: Duration,
    /// At the end of `duration`, requests still in flight are cut there (class
    /// [`Ending::Deadline`]), so that `-z` bounds the load whatever a peer sends. False:
    /// they may run to their timeout (live mode, whose router and pods are canarysim's own
    /// and count what they served).
    pub cut_in_flight: bool,
    pub insecure: bool,
    /// PEM file of the CAs to trust (default: the system's).
    pub cacert: Option<std::path::PathBuf>,
    pub connect_to: Vec<ConnectTo>,
    pub classifier: Classifier,
    /// The classified values that count as the stop rule's version (empty: its key itself;
    /// live mode lists the pods of a role).
    pub stop_counts: Vec<String>,
}

/// Why a real load could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum HttpLoadError {
    #[error("cannot reach {address}: {reason}")]
    Unreachable { address: String, reason: String },
    #[error("--cacert {path}: {reason}")]
    CaCert { path: String, reason: String },
    /// The first request showed that the target speaks another protocol.
    #[error("{address} does not speak what the load offered: offered {offered}; {answered}")]
    ProtocolMismatch {
        address: String,
        offered: String,
        answered: String,
    },
    #[error("{0}")]
    Setup(String),
}

/// What the load saw while running (for a progress display).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub done: u64,
    pub planned: Option<u64>,
    pub elapsed: Duration,
    pub duration: Option<Duration>,
    /// Answers per version so far.
    pub versions: Vec<(String, u64)>,
}

/// A sequential test's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided {
    /// `matches` / `differs` (a scenario's SPRT), `pass` / `fail` (the verdict's test).
    pub decision: &'static str,
    /// Draws the deciding test had seen.
    pub after: u64,
    /// What its draws were.
    pub unit: SplitUnit,
}

/// A finished real load.
#[derive(Debug, Clone)]
pub struct HttpOutcome {
    pub tally: Tally,
    pub elapsed: Duration,
    /// The sequential test's decision, if it decided.
    pub decided: Option<Decided>,
    /// The word for a test that did not decide (`undecided`, `inconclusive`).
    pub undecided: &'static str,
    /// Draws the sequential test saw in the unit in force when the load ended.
    pub sequential_draws: u64,
    /// The address connections went to.
    pub address: String,
    /// The protocol the first connection spoke (`HTTP/2` only if ALPN or `--http2` on
    /// plain HTTP gave it).
    pub protocol: &'static str,
}

impl HttpOutcome {
    /// The sequential test's report: its decision, or the word for none, after how many
    /// draws of which unit.
    pub fn sequential(&self, planned: Option<u64>) -> super::Sequential {
        let (decision, after, unit) = match self.decided {
            Some(d) => (d.decision, d.after, d.unit),
            None => (
                self.undecided,
                self.sequential_draws,
                self.tally.unit_evidence().unit(None),
            ),
        };
        super::Sequential {
            decision: decision.to_string(),
            after,
            unit,
            planned,
        }
    }
}

/// State the workers share: the next request's number, the stop flag, progress counts and
/// the sequential test.
struct Shared {
    next: AtomicU64,
    limit: u64,
    start: Instant,
    deadline: Option<Instant>,
    /// The deadline, when requests in flight are cut there ([`HttpLoad::cut_in_flight`]).
    cut_at: Option<Instant>,
    schedule: Schedule,
    stop: AtomicBool,
    live: Mutex<Live>,
}

/// When requests are meant to start.
enum Schedule {
    /// Each as soon as a connection is free.
    Closed,
    /// Request i at i / rate.
    Even(f64),
    /// At the sums of exponential gaps: the next arrival's offset (µs), under a lock held
    /// while the request's number is taken, so that request i always gets the i-th arrival.
    Poisson(Mutex<PoissonClock>),
}

struct PoissonClock {
    at_us: f64,
    mean_gap_us: f64,
    draws: Pcg64Mcg,
}

impl Schedule {
    fn new(arrival: Arrival, draws: &Pcg64Mcg) -> Schedule {
        match arrival {
            Arrival::Closed => Schedule::Closed,
            Arrival::Constant(rate) => Schedule::Even(rate),
            Arrival::Poisson(rate) => Schedule::Poisson(Mutex::new(PoissonClock {
                at_us: 0.0,
                mean_gap_us: 1e6 / rate,
                draws: draws.clone(),
            })),
        }
    }
}

/// A worker's answers not yet reported to [`Shared`] (reported in batches, so that the
/// workers do not take a lock per request).
#[derive(Default)]
struct Pending {
    done: u64,
    /// Answers per version.
    versions: Vec<(String, u64)>,
    /// Connections' first answers per version: the draws of a per-connection split.
    first_answers: Vec<(String, u64)>,
    /// A connection showed two versions: the gateway picks per request.
    per_request_shown: bool,
}

fn count(counts: &mut Vec<(String, u64)>, version: &str, n: u64) {
    match counts.iter_mut().find(|(name, _)| name == version) {
        Some(slot) => slot.1 += n,
        None => counts.push((version.to_string(), n)),
    }
}

impl Pending {
    /// Notes one request's end and what it told of its connection; true when a batch is due.
    fn add(&mut self, version: Option<&str>, on_connection: OnConnection) -> bool {
        self.done += 1;
        if let Some(v) = version {
            count(&mut self.versions, v, 1);
            match on_connection {
                OnConnection::First => count(&mut self.first_answers, v, 1),
                OnConnection::SecondVersion => self.per_request_shown = true,
                OnConnection::Nothing => {}
            }
        }
        self.done >= REPORT_EVERY
    }
}

/// Answers a worker gathers before it reports them.
const REPORT_EVERY: u64 = 16;

#[derive(Default)]
struct Live {
    done: u64,
    versions: Vec<(String, u64)>,
    watch: Option<Watch>,
    decided: Option<Decided>,
}

/// The sequential test, run on both units: each connection's first answer is a draw of the
/// weight whatever the gateway does, each answer only when the gateway picks per request.
/// So the connections' test decides until a connection shows two versions; the answers'
/// test from then on.
struct Watch {
    /// The classified values that count as the rule's version.
    keys: Vec<String>,
    per_request: SequentialTest,
    per_connection: SequentialTest,
    /// A connection showed two versions (or every request has its own connection).
    per_request_shown: bool,
}

impl Watch {
    fn new(rule: &StopRule, keys: Vec<String>, keepalive: bool) -> Result<Watch, HttpLoadError> {
        let start = || {
            rule.start()
                .map_err(|e| HttpLoadError::Setup(format!("--until-decided: {e}")))
        };
        Ok(Watch {
            keys,
            per_request: start()?,
            per_connection: start()?,
            per_request_shown: !keepalive,
        })
    }

    /// Feeds a batch; the decision once the test of the unit in force decides.
    fn observe(&mut self, pending: &Pending) -> Option<Decided> {
        let tally = |counts: &[(String, u64)]| {
            counts.iter().fold((0, 0), |(k, n), (v, c)| {
                (k + if self.keys.contains(v) { *c } else { 0 }, n + c)
            })
        };
        let (k, n) = tally(&pending.versions);
        let (first_k, first_n) = tally(&pending.first_answers);
        self.per_request_shown |= pending.per_request_shown;
        let by_request = self.per_request.observe_many(k, n);
        let by_connection = self.per_connection.observe_many(first_k, first_n);
        if self.per_request_shown {
            by_request.map(|decision| Decided {
                decision,
                after: self.per_request.samples(),
                unit: SplitUnit::Request,
            })
        } else {
            by_connection.map(|decision| Decided {
                decision,
                after: self.per_connection.samples(),
                unit: SplitUnit::Connection,
            })
        }
    }

    /// Draws seen in the unit in force.
    fn draws(&self) -> u64 {
        if self.per_request_shown {
            self.per_request.samples()
        } else {
            self.per_connection.samples()
        }
    }
}

impl Shared {
    /// The next request to send and when it was meant to start; None: the load is over.
    fn claim(&self) -> Option<Instant> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        let intended = match &self.schedule {
            Schedule::Poisson(clock) => {
                let mut clock = clock.lock().unwrap_or_else(|p| p.into_inner());
                self.take_number()?;
                let at_us = clock.at_us;
                let mean = clock.mean_gap_us;
                clock.at_us += exponential_gap(&mut clock.draws, mean);
                self.after_start(at_us / 1e6)?
            }
            Schedule::Even(rate) => {
                let i = self.take_number()?;
                self.after_start(i as f64 / rate)?
            }
            Schedule::Closed => {
                self.take_number()?;
                Instant::now()
            }
        };
        match self.deadline {
            Some(d) if intended >= d => None,
            _ => Some(intended),
        }
    }

    /// The next request's number; None once the load's count is sent.
    fn take_number(&self) -> Option<u64> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        (i < self.limit).then_some(i)
    }

    /// The instant `seconds` after the start; None past what a clock can hold (a scenario's
    /// rate of 1e-300 per second: no request of it is ever due).
    fn after_start(&self, seconds: f64) -> Option<Instant> {
        Duration::try_from_secs_f64(seconds)
            .ok()
            .and_then(|d| self.start.checked_add(d))
    }

    /// Adds a worker's answers since its last report (see [`Pending`]): the progress counts,
    /// and the sequential test, which may stop the load. A batch is fed to the test at once
    /// (Wald's error bounds hold for any grouping; checking less often costs a few samples).
    fn report(&self, pending: &mut Pending) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.done += pending.done;
        for (v, n) in &pending.versions {
            count(&mut live.versions, v, *n);
        }
        let undecided = live.decided.is_none();
        let decision = match &mut live.watch {
            Some(watch) if undecided => watch.observe(pending),
            _ => None,
        };
        if decision.is_some() {
            live.decided = decision;
            self.stop.store(true, Ordering::Relaxed);
        }
        *pending = Pending::default();
    }

    fn snapshot(&self, load: &HttpLoad) -> Snapshot {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        Snapshot {
            done: live.done,
            planned: load.extent.requests(),
            elapsed: self.start.elapsed(),
            duration: load.extent.duration(),
            versions: live.versions.clone(),
        }
    }
}

// Long: the runtimes, workers and watch set up, run and joined; they share the dialer and the stop
// state.
/// Runs the load on runtimes of its own, one single-threaded runtime per core (so a
/// connection's task and the worker that sends on it share a thread and wake each other
/// without crossing cores); `progress` is called about ten times a second.
pub fn send(load: &HttpLoad, progress: &dyn Fn(&Snapshot)) -> Result<HttpOutcome, HttpLoadError> {
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| HttpLoadError::Setup(format!("cannot start the runtime: {e}")))
    };
    let dialer = Arc::new(Dialer::new(load)?);
    let watch = match &load.traffic.stop {
        Some(rule) => Some(Watch::new(
            rule,
            if load.stop_counts.is_empty() {
                vec![rule.key.clone()]
            } else {
                load.stop_counts.clone()
            },
            load.traffic.keepalive,
        )?),
        None => None,
    };
    let undecided = watch
        .as_ref()
        .map_or("undecided", |w| w.per_request.undecided());
    let start = Instant::now();
    let deadline = load.extent.duration().map(|d| start + d);
    let shared = Arc::new(Shared {
        next: AtomicU64::new(0),
        limit: load.extent.requests().unwrap_or(u64::MAX),
        start,
        deadline,
        cut_at: deadline.filter(|_| load.cut_in_flight),
        schedule: Schedule::new(load.traffic.arrival, &load.arrivals),
        stop: AtomicBool::new(false),
        live: Mutex::new(Live {
            watch,
            ..Live::default()
        }),
    });
    let connections = load.traffic.connections.max(1) as usize;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(connections);
    let runtimes = (0..threads)
        .map(|_| runtime())
        .collect::<Result<Vec<_>, _>>()?;
    // The load's first request is its probe, on the first thread's runtime: an unreachable
    // target or one that speaks another protocol ends the load before it starts, and the
    // probe's connection is one of the load's (an L4 balancer's rotation sees no extra).
    let shared_load = Arc::new(load.clone());
    let (first_tally, probe) = runtimes[0].block_on(first_request(
        shared_load.clone(),
        shared.clone(),
        dialer.clone(),
    ))?;
    let protocol = probe.protocol;
    // The probe's connection goes on in a worker whose tally knows the probe's versions at
    // the same indexes, as the connection refers to them.
    let mut adopted = probe.open.map(|open| (open, Tally::adopting(&first_tally)));
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Result<Tally, String>>();
    for (t, rt) in runtimes.into_iter().enumerate() {
        // Connections dealt out evenly: the first threads take one more.
        let mine = connections / threads + usize::from(t < connections % threads);
        let (load, shared, dialer, done) = (
            shared_load.clone(),
            shared.clone(),
            dialer.clone(),
            done_tx.clone(),
        );
        let mut open = adopted.take();
        std::thread::Builder::new()
            .name(format!("load-{t}"))
            .spawn(move || {
                let tally = rt.block_on(async move {
                    let mut workers = tokio::task::JoinSet::new();
                    for _ in 0..mine {
                        let (open, tally) = match open.take() {
                            Some((open, tally)) => (Some(open), tally),
                            None => (None, Tally::default()),
                        };
                        workers.spawn(worker(
                            load.clone(),
                            shared.clone(),
                            dialer.clone(),
                            open,
                            tally,
                        ));
                    }
                    let mut tally = Tally::default();
                    while let Some(joined) = workers.join_next().await {
                        tally.merge(joined.map_err(|e| format!("a worker failed: {e}"))?);
                    }
                    Ok(tally)
                });
                let _ = done.send(tally);
            })
            .map_err(|e| HttpLoadError::Setup(format!("cannot start a load thread: {e}")))?;
    }
    drop(done_tx);
    let mut tally = first_tally;
    let mut finished = 0;
    while finished < threads {
        match done_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Ok(t)) => {
                tally.merge(t);
                finished += 1;
            }
            Ok(Err(e)) => return Err(HttpLoadError::Setup(e)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                progress(&shared.snapshot(load));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(HttpLoadError::Setup("a load thread ended early".into()));
            }
        }
    }
    let elapsed = start.elapsed();
    progress(&shared.snapshot(load));
    let live = shared.live.lock().unwrap_or_else(|p| p.into_inner());
    Ok(HttpOutcome {
        tally,
        elapsed,
        decided: live.decided,
        undecided,
        sequential_draws: live.watch.as_ref().map_or(0, Watch::draws),
        address: dialer.address_text(),
        protocol,
    })
}

/// What the probe (the load's first request) left: the protocol spoken, and its
/// connection when it may carry more.
struct Probe {
    protocol: &'static str,
    open: Option<(Sender, Connection)>,
}

/// The load's first request, sent before any other: the connection must open within
/// [`REACH_TIMEOUT`] (else the target is unreachable), and the answer must be the protocol
/// offered (else [`HttpLoadError::ProtocolMismatch`], with what was offered and what came
/// back). It is counted as any request.
async fn first_request(
    load: Arc<HttpLoad>,
    shared: Arc<Shared>,
    dialer: Arc<Dialer>,
) -> Result<(Tally, Probe), HttpLoadError> {
    let mut tally = Tally::default();
    let Some(intended) = shared.claim() else {
        return Ok((
            tally,
            Probe {
                protocol: "HTTP/1.1",
                open: None,
            },
        ));
    };
    let sender = tokio::time::timeout(REACH_TIMEOUT, dialer.connect())
        .await
        .map_err(|_| HttpLoadError::Unreachable {
            address: dialer.address_text(),
            reason: format!("no connection within {}s", REACH_TIMEOUT.as_secs()),
        })?
        .map_err(|failed| {
            if failed.other_protocol {
                dialer.mismatch(&failed.reason)
            } else {
                HttpLoadError::Unreachable {
                    address: dialer.address_text(),
                    reason: failed.reason,
                }
            }
        })?;
    let protocol = sender.protocol();
    let mut open = Some((sender, tally.opened()));
    let mut pending = Pending::default();
    match send_one(
        &load,
        &dialer,
        &mut Deadline::new(),
        &mut tally,
        &mut open,
        &mut pending,
        intended,
        shared.cut_at,
    )
    .await
    {
        Sent::Failed(ending, reason) if dialer.is_mismatch(ending) => {
            return Err(dialer.mismatch(&reason));
        }
        _ => {}
    }
    shared.report(&mut pending);
    Ok((tally, Probe { protocol, open }))
}

/// How a request ended, for the probe.
enum Sent {
    Answered,
    Failed(Ending, String),
}

/// A worker's timer for its requests' deadlines: one tokio timer, moved only when it fires
/// before the deadline in force. A request's deadline only moves later (its start plus the
/// timeout, or the load's end), so most requests touch no timer at all, where a timer per
/// request cost its registration and removal each time (issue 31: 6 % of the load's
/// instructions).
struct Deadline {
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Deadline {
    fn new() -> Deadline {
        Deadline {
            timer: Box::pin(tokio::time::sleep_until(Instant::now())),
        }
    }

    /// `work`'s output, or None if `at` came first.
    async fn run<F: Future>(&mut self, at: Instant, work: F) -> Option<F::Output> {
        if self.timer.deadline() > at {
            self.timer.as_mut().reset(at);
        }
        let mut work = std::pin::pin!(work);
        loop {
            tokio::select! {
                biased;
                output = &mut work => return Some(output),
                () = self.timer.as_mut() => {
                    if Instant::now() >= at {
                        return None;
                    }
                    self.timer.as_mut().reset(at);
                }
            }
        }
    }
}

/// When a request is given up, and the class it then ends in: at its timeout, or at the
/// load's end (`cut_at`) if that comes first.
fn give_up_at(timeout: Instant, cut_at: Option<Instant>) -> (Instant, Ending) {
    match cut_at {
        Some(end) if end < timeout => (end, Ending::Deadline),
        _ => (timeout, Ending::Timeout),
    }
}

/// Sends one request on the open connection and counts how it ended; the connection is
/// closed (and counted) when it will carry no more. `intended`: when the request was meant
/// to start; `cut_at`: when the load cuts what is in flight, if it does.
#[allow(clippy::too_many_arguments)] // a worker's state, lent for one request
async fn send_one(
    load: &HttpLoad,
    dialer: &Dialer,
    deadline: &mut Deadline,
    tally: &mut Tally,
    open: &mut Option<(Sender, Connection)>,
    pending: &mut Pending,
    intended: Instant,
    cut_at: Option<Instant>,
) -> Sent {
    let (give_up, ending_then) = give_up_at(Instant::now() + load.timeout, cut_at);
    let Some((sender, conn)) = open.as_mut() else {
        return Sent::Failed(Ending::Reset, "no connection".into());
    };
    let request = dialer.request(matches!(sender, Sender::H2(_)));
    // The body is read to its end (so the connection can carry the next request) but kept
    // only as far as a body classifier reads: a huge or endless body costs time, bounded
    // by the timeout and the load's end, not memory.
    let keep = if load.classifier.reads_body() {
        BODY_PREFIX
    } else {
        0
    };
    let mut body_bytes = 0;
    let answer = deadline
        .run(give_up, async {
            let response = sender.send(request).await?;
            let status = response.status().as_u16();
            let (parts, body) = response.into_parts();
            let body = body::read(body, keep, &mut body_bytes).await?;
            let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
            let version = load
                .classifier
                .version(header, body.bytes(), body.is_whole());
            let closing = header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
            Ok::<_, hyper::Error>((status, version, closing))
        })
        .await;
    tally.body_bytes += body_bytes;
    let latency = micros(intended);
    let (ending, version, keep, sent) = match answer {
        Some(Ok((status, version, closing))) => (
            Ending::Status(status),
            version,
            load.traffic.keepalive && !closing,
            Sent::Answered,
        ),
        Some(Err(e)) => {
            let ending = ending_of(&e);
            (ending, None, false, Sent::Failed(ending, describe(&e)))
        }
        None => (
            ending_then,
            None,
            false,
            Sent::Failed(
                ending_then,
                if ending_then == Ending::Deadline {
                    "cut at the load's end".into()
                } else {
                    "timed out".into()
                },
            ),
        ),
    };
    let on_connection = tally.record(Some(conn), ending, version.as_deref(), latency);
    pending.add(version.as_deref(), on_connection);
    if !keep {
        if let Some((_, c)) = open.take() {
            tally.closed(c);
        }
    }
    sent
}

/// A hyper error with its causes, for a message.
fn describe(e: &hyper::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// One client connection slot: sends requests one after another, reconnecting when the
/// connection ends (or for every request without keep-alive). `open`: the probe's
/// connection, for the slot that carries it on, with `tally` knowing its versions.
async fn worker(
    load: Arc<HttpLoad>,
    shared: Arc<Shared>,
    dialer: Arc<Dialer>,
    mut open: Option<(Sender, Connection)>,
    mut tally: Tally,
) -> Tally {
    let mut pending = Pending::default();
    let mut deadline = Deadline::new();
    while let Some(intended) = shared.claim() {
        // Only an open loop waits (the timer has millisecond granularity: a closed loop
        // must not touch it).
        if intended > Instant::now() {
            tokio::time::sleep_until(intended).await;
        }
        let (give_up, ending_then) = give_up_at(Instant::now() + load.timeout, shared.cut_at);
        // A connection the server has closed since (idle, or `Connection: close` raced with
        // us) is replaced before the request is sent: the request is not lost.
        if let Some((sender, _)) = open.as_mut() {
            if !sender.ready().await {
                if let Some((_, c)) = open.take() {
                    tally.closed(c);
                }
            }
        }
        if open.is_none() {
            let ending = match deadline.run(give_up, dialer.connect()).await {
                Some(Ok(sender)) => {
                    open = Some((sender, tally.opened()));
                    None
                }
                Some(Err(failed)) => Some(failed.ending),
                None => Some(ending_then),
            };
            if let Some(ending) = ending {
                tally.record(None, ending, None, micros(intended));
                if pending.add(None, OnConnection::Nothing) {
                    shared.report(&mut pending);
                }
                continue;
            }
        }
        send_one(
            &load,
            &dialer,
            &mut deadline,
            &mut tally,
            &mut open,
            &mut pending,
            intended,
            shared.cut_at,
        )
        .await;
        if pending.done >= REPORT_EVERY {
            shared.report(&mut pending);
        }
    }
    if let Some((_, c)) = open.take() {
        tally.closed(c);
    }
    shared.report(&mut pending);
    tally
}

fn micros(since: Instant) -> u64 {
    since.elapsed().as_micros() as u64
}

/// How a hyper error ends a request.
fn ending_of(e: &hyper::Error) -> Ending {
    if e.is_timeout() {
        return Ending::Timeout;
    }
    if e.is_parse() || e.is_parse_status() || e.is_user() {
        return Ending::Protocol;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return io_ending(io);
        }
        source = s.source();
    }
    // Closed, canceled, incomplete message, h2 stream reset: the answer never came whole.
    Ending::Reset
}

/// Why a connection could not be made.
struct ConnectFailed {
    ending: Ending,
    reason: String,
    /// The peer answered in another protocol (bytes that are not TLS).
    other_protocol: bool,
}

/// How a failed TLS handshake ends a request: a peer that closed the connection during it
/// (a passthrough with no route for the SNI, a server refusing the name) is a reset; a
/// certificate refused or bytes that are not TLS, a protocol error.
fn tls_ending(e: &std::io::Error) -> Ending {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionReset | ConnectionAborted | UnexpectedEof | BrokenPipe => Ending::Reset,
        TimedOut => Ending::Timeout,
        _ => Ending::Protocol,
    }
}

/// The TLS handshake read a record that is not TLS: the port speaks plain text (an HTTP
/// server answers a ClientHello with an HTTP error).
fn answered_without_tls(e: &std::io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|r| {
            matches!(
                r,
                rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)
            )
        })
}

fn io_ending(e: &std::io::Error) -> Ending {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => Ending::Refused,
        TimedOut => Ending::Timeout,
        InvalidData => Ending::Protocol,
        _ => Ending::Reset,
    }
}

/// A request sender on one connection.
enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

impl Sender {
    fn protocol(&self) -> &'static str {
        match self {
            Sender::H1(_) => "HTTP/1.1",
            Sender::H2(_) => "HTTP/2",
        }
    }

    /// Waits until the connection can take a request; false: it has closed.
    async fn ready(&mut self) -> bool {
        match self {
            Sender::H1(s) => !s.is_closed() && s.ready().await.is_ok(),
            Sender::H2(s) => !s.is_closed() && s.ready().await.is_ok(),
        }
    }

    async fn send(
        &mut self,
        request: hyper::Request<Full<Bytes>>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, hyper::Error> {
        match self {
            Sender::H1(s) => s.send_request(request).await,
            Sender::H2(s) => s.send_request(request).await,
        }
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Opens connections to the target: TCP (to the `--connect-to` address if one matches),
/// TLS with SNI and ALPN, then the HTTP handshake.
struct Dialer {
    address: (String, u16),
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
    http2: bool,
    method: hyper::Method,
    /// Every request's head, parsed once and cloned per request (issue 31: the load
    /// generator's CPU per request). HTTP/2's only with `--http2`; HTTP/1.1's also then,
    /// for a TLS server that does not take h2.
    h1_head: RequestHead,
    h2_head: Option<RequestHead>,
}

/// A request's URI and headers, for HTTP/1.1 or HTTP/2.
struct RequestHead {
    uri: hyper::Uri,
    headers: hyper::HeaderMap,
}

impl RequestHead {
    /// HTTP/2 carries the authority in the URI (:authority); HTTP/1.1 in a Host header.
    fn new(
        traffic: &Traffic,
        scheme: &str,
        authority: &str,
        h2: bool,
    ) -> Result<RequestHead, HttpLoadError> {
        let mut b = hyper::Request::builder();
        if h2 {
            b = b.uri(format!("{scheme}://{authority}{}", traffic.path));
        } else {
            b = b
                .uri(traffic.path.as_str())
                .header(hyper::header::HOST, authority);
            if !traffic.keepalive {
                b = b.header(hyper::header::CONNECTION, "close");
            }
        }
        for (k, v) in &traffic.headers {
            b = b.header(k.as_str(), v.as_str());
        }
        let (parts, ()) = b
            .body(())
            .map_err(|e| HttpLoadError::Setup(format!("request: {e}")))?
            .into_parts();
        Ok(RequestHead {
            uri: parts.uri,
            headers: parts.headers,
        })
    }
}

impl Dialer {
    fn new(load: &HttpLoad) -> Result<Dialer, HttpLoadError> {
        let t = &load.target;
        let address = load
            .connect_to
            .iter()
            .find(|c| (c.host.is_empty() || c.host == t.host) && c.port.is_none_or(|p| p == t.port))
            .map_or((t.host.clone(), t.port), |c| (c.to_host.clone(), c.to_port));
        let tls = if t.tls {
            let name = load.traffic.sni.clone().unwrap_or_else(|| t.host.clone());
            let server_name = rustls::pki_types::ServerName::try_from(name.clone())
                .map_err(|e| HttpLoadError::Setup(format!("server name {name:?}: {e}")))?;
            Some((
                tokio_rustls::TlsConnector::from(Arc::new(tls_config(load)?)),
                server_name,
            ))
        } else {
            None
        };
        let default_port = if t.tls { 443 } else { 80 };
        let method = hyper::Method::from_bytes(load.traffic.method.as_bytes())
            .map_err(|_| HttpLoadError::Setup(format!("method {:?}", load.traffic.method)))?;
        let host = if t.host.contains(':') {
            format!("[{}]", t.host)
        } else {
            t.host.clone()
        };
        let authority = if !load.traffic.host.is_empty() {
            load.traffic.host.clone()
        } else if t.port == default_port {
            host
        } else {
            format!("{host}:{}", t.port)
        };
        let scheme = if t.tls { "https" } else { "http" };
        Ok(Dialer {
            address,
            tls,
            http2: load.traffic.http2,
            method,
            h1_head: RequestHead::new(&load.traffic, scheme, &authority, false)?,
            h2_head: if load.traffic.http2 {
                Some(RequestHead::new(&load.traffic, scheme, &authority, true)?)
            } else {
                None
            },
        })
    }

    /// Whether the probe's failure shows the target speaking another protocol: an answer
    /// that does not parse, or, for HTTP/2 with prior knowledge, a connection closed at
    /// once (an HTTP/1 server refuses the preface).
    fn is_mismatch(&self, ending: Ending) -> bool {
        ending == Ending::Protocol || (ending == Ending::Reset && self.http2 && self.tls.is_none())
    }

    /// The probe's protocol mismatch, in words: what was offered, what came back.
    fn mismatch(&self, reason: &str) -> HttpLoadError {
        let (offered, answered) = match (&self.tls, self.http2) {
            (Some(_), _) if reason.starts_with("TLS:") => (
                "TLS (https://)".to_string(),
                format!(
                    "the TLS handshake failed ({reason}); a plain HTTP port answers so (try http://)"
                ),
            ),
            (Some(_), true) => (
                "HTTP/2 over TLS (ALPN h2)".to_string(),
                format!("the answer was not HTTP/2 ({reason})"),
            ),
            (Some(_), false) => (
                "HTTP/1.1 over TLS".to_string(),
                format!("the answer was not HTTP/1.1 ({reason})"),
            ),
            (None, true) => (
                "HTTP/2 with prior knowledge (h2c, --http2 on http://)".to_string(),
                format!(
                    "the server did not answer in HTTP/2 ({reason}); an HTTP/1-only server does this (drop --http2)"
                ),
            ),
            (None, false) => (
                "HTTP/1.1 in plain text (http://)".to_string(),
                format!(
                    "the answer was not HTTP/1.1 ({reason}); a TLS port (try https://) or an HTTP/2-only server (try --http2) answers so"
                ),
            ),
        };
        HttpLoadError::ProtocolMismatch {
            address: self.address_text(),
            offered,
            answered,
        }
    }

    fn address_text(&self) -> String {
        let (h, p) = &self.address;
        if h.contains(':') {
            format!("[{h}]:{p}")
        } else {
            format!("{h}:{p}")
        }
    }

    /// A new connection, ready to send; or how the attempt ended and why.
    async fn connect(&self) -> Result<Sender, ConnectFailed> {
        let failed = |ending, reason| ConnectFailed {
            ending,
            reason,
            other_protocol: false,
        };
        let tcp = TcpStream::connect((self.address.0.as_str(), self.address.1))
            .await
            .map_err(|e| failed(io_ending(&e), e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let (io, h2): (Box<dyn Io>, bool) = match &self.tls {
            None => (Box::new(tcp), self.http2),
            Some((connector, name)) => {
                let stream =
                    connector
                        .connect(name.clone(), tcp)
                        .await
                        .map_err(|e| ConnectFailed {
                            ending: tls_ending(&e),
                            reason: format!("TLS: {e}"),
                            other_protocol: answered_without_tls(&e),
                        })?;
                let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                (Box::new(stream), h2)
            }
        };
        let io = TokioIo::new(io);
        let handshake_failed = |e: hyper::Error| failed(ending_of(&e), e.to_string());
        if h2 {
            let (sender, conn) = http2::handshake(TokioExecutor::new(), io)
                .await
                .map_err(handshake_failed)?;
            tokio::spawn(conn);
            Ok(Sender::H2(sender))
        } else {
            let (sender, conn) = http1::handshake(io).await.map_err(handshake_failed)?;
            tokio::spawn(conn);
            Ok(Sender::H1(sender))
        }
    }

    fn request(&self, h2: bool) -> hyper::Request<Full<Bytes>> {
        let head = match (h2, &self.h2_head) {
            (true, Some(head)) => head,
            _ => &self.h1_head,
        };
        let mut request = hyper::Request::new(Full::new(Bytes::new()));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = head.uri.clone();
        *request.headers_mut() = head.headers.clone();
        request
    }
}

/// The TLS client configuration: the system's roots or `--cacert`, or none with
/// `--insecure`; ALPN offers h2 only with `--http2`.
fn tls_config(load: &HttpLoad) -> Result<rustls::ClientConfig, HttpLoadError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| HttpLoadError::Setup(format!("TLS: {e}")))?;
    let mut config = if load.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        match &load.cacert {
            Some(path) => {
                use rustls::pki_types::pem::PemObject;
                let fail = |reason: String| HttpLoadError::CaCert {
                    path: path.display().to_string(),
                    reason,
                };
                let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_file_iter(path)
                    .map_err(|e| fail(e.to_string()))?
                    .collect::<Result<_, _>>()
                    .map_err(|e| fail(e.to_string()))?;
                if certs.is_empty() {
                    return Err(fail("no PEM certificate in the file".into()));
                }
                for cert in certs {
                    roots.add(cert).map_err(|e| fail(e.to_string()))?;
                }
            }
            None => {
                for cert in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(cert);
                }
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = if load.traffic.http2 {
        vec![b"h2".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(config)
}

/// `--insecure`: any certificate is accepted (signatures are still checked, so the
/// handshake is real).
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extent_is_never_unbounded_and_zero_is_one() {
        assert!(Extent::new(None, None).is_err());
        // Live mode's `load: {requests: 0}` (capped by its longest load) sends nothing.
        let zero = Extent::new(Some(0), Some(Duration::from_secs(600))).unwrap();
        assert_eq!(
            (zero.requests(), zero.duration()),
            (Some(0), Some(Duration::from_secs(600)))
        );
    }

    /// The send offsets (seconds after the start) a schedule gives, claim by claim.
    fn offsets(arrival: Arrival, limit: u64) -> Vec<f64> {
        let shared = Shared {
            next: AtomicU64::new(0),
            limit,
            start: Instant::now(),
            deadline: None,
            cut_at: None,
            schedule: Schedule::new(arrival, &crate::random::stream(3, "load/0/arrivals")),
            stop: AtomicBool::new(false),
            live: Mutex::default(),
        };
        std::iter::from_fn(|| shared.claim())
            .map(|t| (t - shared.start).as_secs_f64())
            .collect()
    }

    #[test]
    fn an_open_loop_sends_evenly_or_at_a_poisson_processs_instants() {
        let gaps = |at: &[f64]| at.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>();
        let even = offsets(Arrival::Constant(1000.0), 20_001);
        assert_eq!(even.len(), 20_001);
        assert!(gaps(&even).iter().all(|g| (g - 1e-3).abs() < 1e-9));

        let at = offsets(Arrival::Poisson(1000.0), 20_001);
        assert_eq!((at.len(), at[0]), (20_001, 0.0));
        let gaps = gaps(&at);
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<f64>() / n;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n).sqrt();
        // Exponential gaps: the mean is the standard deviation, and P(gap > mean) = 1/e.
        // 20,000 gaps put each within ±3 % (over four standard errors) of 1 ms.
        assert!((mean / 1e-3 - 1.0).abs() < 0.03, "mean gap {mean}");
        assert!(
            (sd / mean - 1.0).abs() < 0.03,
            "sd {sd} against mean {mean}"
        );
        let longer = gaps.iter().filter(|&&g| g > 1e-3).count() as f64 / n;
        assert!((longer - (-1.0f64).exp()).abs() < 0.015, "{longer}");
        // A rate so low that its second request falls past any clock sends the first only.
        assert_eq!(offsets(Arrival::Constant(1e-300), 5), [0.0]);
        assert_eq!(offsets(Arrival::Poisson(1e-300), 5), [0.0]);
        // The gaps are the simulated load's: the same stream, the same draws.
        let mut draws = crate::random::stream(3, "load/0/arrivals");
        let first = exponential_gap(&mut draws, 1000.0) / 1e6;
        assert!((gaps[0] - first).abs() < 1e-9, "{} vs {first}", gaps[0]);
    }

    #[test]
    fn connect_to_reads_curls_form() {
        let c: ConnectTo = "demo.local:443:127.0.0.1:8443".parse().unwrap();
        assert_eq!(
            c,
            ConnectTo {
                host: "demo.local".into(),
                port: Some(443),
                to_host: "127.0.0.1".into(),
                to_port: 8443
            }
        );
        let any: ConnectTo = "::[::1]:9000".parse().unwrap();
        assert_eq!((any.host.as_str(), any.port), ("", None));
        assert_eq!((any.to_host.as_str(), any.to_port), ("::1", 9000));
        for bad in ["demo.local:443", "a:b:c:d", "a:1:b:x"] {
            let e = bad.parse::<ConnectTo>().unwrap_err();
            assert!(e.contains("HOST:PORT:ADDR:PORT"), "{e}");
        }
    }

    #[test]
    fn a_target_is_an_http_or_https_url() {
        let (t, path) = parse_url("https://demo.local/color?x=1").unwrap();
        assert_eq!(
            (t, path.as_str()),
            (
                Target {
                    tls: true,
                    host: "demo.local".into(),
                    port: 443,
                },
                "/color?x=1"
            )
        );
        let (t, path) = parse_url("http://[::1]:8080").unwrap();
        assert_eq!((t.host.as_str(), t.port, path.as_str()), ("::1", 8080, "/"));
        assert!(parse_url("ftp://x/").unwrap_err().contains("http://"));
    }
}
