//! The built-in Prometheus: Istio's standard request metrics, counted from the simulated
//! traffic on the virtual clock and scraped every [`SCRAPE_INTERVAL_MS`].
//!
//! Each epoch of a simulated HTTP load through the mesh ([`EpochTraffic`]) adds, per pod
//! and response code, to `istio_requests_total` and to the
//! `istio_request_duration_milliseconds` histogram, once as the client's sidecar reports it
//! (`reporter="source"`) and once as the pod's (`reporter="destination"`), with Istio's
//! labels. Each request has its own instant within its epoch: an epoch's answers are
//! dealt to the scrape windows it spans at random (multinomially, by each window's share
//! of the epoch), so the increase a scrape window sees varies as a real one does — a 15 s
//! window's success rate has the binomial spread of the requests in it, not the epoch's
//! average. Within one window they are spread evenly (no scrape falls inside it).
//!
//! What canarysim counts differs from a real mesh in two ways, documented in docs/analysis.md: both
//! reporters count every attempt a pod answered (Envoy's client side reports the final
//! answer after retries, and the proxy's own 503/504s), and the latency buckets hold the
//! backends' latency model (the share of answers below each bound), not each request's.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use rand::Rng;
use rand_distr::{Binomial, Distribution};
use rand_pcg::Pcg64Mcg;

use super::promql::{Labels, Series, SeriesSource};
use crate::apiserver::ApiServer;
use crate::clock::SimTime;
use crate::load::EpochTraffic;

/// Prometheus' scrape interval in Istio's sample add-on configuration.
pub const SCRAPE_INTERVAL_MS: i64 = 15_000;

/// Istio's default bucket bounds for request durations, in milliseconds.
pub(crate) const DURATION_BUCKETS_MS: [f64; 19] = [
    0.5, 1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0,
    60000.0, 300000.0, 600000.0, 1800000.0, 3600000.0,
];

/// How far back a query's samples are generated: a range selector longer than this (or a
/// lookback) sees nothing older.
const HISTORY_MS: i64 = 6 * 3600 * 1000;

/// A counter, as a step function of time: each epoch's requests are evenly spaced over
/// the epoch (request k of n at start + (k + ½)·span/n), so a scrape sees whole requests and
/// a slow trickle shows as the steps a real counter makes.
#[derive(Debug, Clone, Default)]
struct Counter {
    /// In time order, not overlapping.
    increments: Vec<Increment>,
}

#[derive(Debug, Clone, Copy)]
struct Increment {
    start: i64,
    end: i64,
    amount: f64,
    /// The counter's value before this increment.
    before: f64,
}

impl Counter {
    /// Adds `amount` requests, evenly spaced over [start, end]. Requests of the same epoch
    /// from several pods (one source series) join one increment.
    fn add(&mut self, start: i64, end: i64, amount: f64) {
        if let Some(last) = self.increments.last_mut() {
            if last.start == start && last.end == end {
                last.amount += amount;
                return;
            }
        }
        let (last_end, before) = self
            .increments
            .last()
            .map(|i| (i.end, i.before + i.amount))
            .unwrap_or((start, 0.0));
        let start = start.max(last_end);
        let end = end.max(start);
        self.increments.push(Increment {
            start,
            end,
            amount,
            before,
        });
    }

    /// The value at `t`; None before the first request.
    fn at(&self, t: i64) -> Option<f64> {
        if t < self.first_time()? {
            return None;
        }
        let i = self.increments.partition_point(|x| x.start <= t);
        let inc = self.increments[i.checked_sub(1)?];
        if t >= inc.end || inc.end == inc.start {
            return Some(inc.before + inc.amount);
        }
        let span = (inc.end - inc.start) as f64;
        let sent = ((t - inc.start) as f64 * inc.amount / span + 0.5)
            .floor()
            .clamp(0.0, inc.amount);
        Some(inc.before + sent)
    }

    /// When the first request was counted (the series exists from then on).
    fn first_time(&self) -> Option<i64> {
        let first = self.increments.first()?;
        let span = (first.end - first.start) as f64;
        Some(first.start + (span / (2.0 * first.amount.max(1.0))) as i64)
    }
}

/// Every counter series, by name and labels. Written lazily: an epoch is kept as counted
/// (its pods' labels as they were then) and becomes series at the first query after it, in
/// the order counted, so the random draws and the series are those an eager write makes —
/// and a load whose metrics nobody queries costs no series per pod (issue 31).
#[derive(Debug, Clone)]
pub struct Prometheus {
    written: RefCell<Written>,
}

#[derive(Debug, Clone)]
struct Written {
    series: BTreeMap<String, BTreeMap<Labels, Counter>>,
    /// Where in its epoch each request falls (the scenario's seed, a stream of its own).
    rng: Pcg64Mcg,
    /// Epochs counted, not yet written as series.
    pending: Vec<Counted>,
}

/// An epoch as counted: the traffic, its caller's labels, and each pod's labels at the time
/// (None: no answers, or the pod was gone).
#[derive(Debug, Clone)]
struct Counted {
    traffic: EpochTraffic,
    source: Labels,
    destinations: Vec<Option<Arc<Labels>>>,
}

/// A part of an epoch inside one scrape window: [start, end] and its share of the epoch.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: i64,
    end: i64,
    share: f64,
}

/// The parts of [start, end] between scrape instants (one part when none falls inside).
fn pieces(start: i64, end: i64) -> Vec<Piece> {
    let span = (end - start) as f64;
    let mut cuts = vec![start];
    let mut t = (start.div_euclid(SCRAPE_INTERVAL_MS) + 1) * SCRAPE_INTERVAL_MS;
    while t < end {
        cuts.push(t);
        t += SCRAPE_INTERVAL_MS;
    }
    cuts.push(end.max(start));
    cuts.windows(2)
        .map(|w| Piece {
            start: w[0],
            end: w[1],
            share: if span > 0.0 {
                (w[1] - w[0]) as f64 / span
            } else {
                1.0
            },
        })
        .collect()
}

/// The route's destinations that hold each endpoint, each weighted by its share of the
/// endpoint's requests (its weight spread over its endpoints), in the route's order: one
/// pass over the destinations, not one per pod.
fn holders_by_endpoint(
    traffic: &EpochTraffic,
) -> std::collections::HashMap<u32, Vec<(usize, f64)>> {
    let mut holders_of: std::collections::HashMap<u32, Vec<(usize, f64)>> =
        std::collections::HashMap::new();
    for (d, dest) in traffic.destinations.iter().enumerate() {
        for &e in &dest.endpoints {
            let holders = holders_of.entry(e).or_default();
            // An endpoint listed twice in one destination counts once.
            if holders.last().is_none_or(|(last, _)| *last != d) {
                holders.push((d, f64::from(dest.weight) / dest.endpoints.len() as f64));
            }
        }
    }
    holders_of
}

/// Deals `n` requests to the pieces at random, each falling in a piece with its share
/// (a multinomial draw, as binomials of what is left).
fn deal(rng: &mut impl Rng, n: u64, pieces: &[Piece]) -> Vec<u64> {
    let mut dealt = vec![0; pieces.len()];
    let mut left = n;
    let mut mass = 1.0;
    for (slot, p) in dealt.iter_mut().zip(pieces) {
        if left == 0 {
            break;
        }
        let here = (p.share / mass).clamp(0.0, 1.0);
        let k = if here >= 1.0 {
            left
        } else {
            Binomial::new(left, here).map_or(left, |b| b.sample(rng))
        };
        *slot = k;
        left -= k;
        mass -= p.share;
    }
    // Float leftovers (shares summing a hair under 1) go to the last piece.
    if let Some(last) = dealt.last_mut() {
        *last += left;
    }
    dealt
}

impl Prometheus {
    /// An empty Prometheus; `seed` places the requests within their epochs.
    pub fn new(seed: u64) -> Self {
        Prometheus {
            written: RefCell::new(Written {
                series: BTreeMap::new(),
                rng: crate::random::stream(seed, "prometheus"),
                pending: Vec::new(),
            }),
        }
    }

    /// Counts an epoch of traffic. `api` gives the pods' labels and owners at that time.
    pub fn record(&mut self, api: &ApiServer, traffic: &EpochTraffic) {
        // The labels depend on the pod's labels and owner, which the pods of a ReplicaSet
        // share (interned): 100,000 pods share a handful of label sets, each made once.
        type Shared<'a> = (
            &'a str,
            *const BTreeMap<String, String>,
            Option<*const str>,
            Arc<Labels>,
        );
        let mut made: Vec<Shared> = Vec::new();
        let destinations = traffic
            .pods
            .iter()
            .map(|pod| {
                // The pod's facts, not its JSON: every pod with traffic, at every epoch.
                let facts = api
                    .pod(&pod.namespace, &pod.pod)
                    .filter(|_| pod.answers > 0)?;
                let key = (
                    pod.namespace.as_str(),
                    Arc::as_ptr(&facts.labels),
                    facts.first_owner_name.as_ref().map(Arc::as_ptr),
                );
                if facts.first_owner_name.is_some() {
                    if let Some((.., labels)) =
                        made.iter().find(|(ns, l, o, _)| (*ns, *l, *o) == key)
                    {
                        return Some(labels.clone());
                    }
                }
                let labels = Arc::new(destination_labels(&pod.namespace, &pod.pod, facts));
                if facts.first_owner_name.is_some() && made.len() < 64 {
                    made.push((key.0, key.1, key.2, labels.clone()));
                }
                Some(labels)
            })
            .collect();
        let counted = Counted {
            traffic: traffic.clone(),
            source: source_labels(api, traffic),
            destinations,
        };
        self.written.get_mut().pending.push(counted);
    }
}

impl Written {
    /// Writes the epochs counted since the last query, in order.
    fn catch_up(&mut self) {
        for counted in std::mem::take(&mut self.pending) {
            self.write(&counted);
        }
    }

    fn write(&mut self, counted: &Counted) {
        let (traffic, source) = (&counted.traffic, &counted.source);
        let pieces = pieces(ms(traffic.start), ms(traffic.end));
        let holders_of = holders_by_endpoint(traffic);
        for (e, pod) in traffic.pods.iter().enumerate() {
            if pod.answers == 0 {
                continue;
            }
            // Each answer's instant: the successes and the errors dealt to the windows.
            let oks = deal(&mut self.rng, pod.answers - pod.errors, &pieces);
            let errors = deal(&mut self.rng, pod.errors, &pieces);
            let holders: Vec<(&crate::load::TrafficDestination, f64)> = holders_of
                .get(&(e as u32))
                .into_iter()
                .flatten()
                .map(|&(d, w)| (&traffic.destinations[d], w))
                .collect();
            let total: f64 = holders.iter().map(|(_, w)| w).sum();
            if holders.is_empty() || total <= 0.0 {
                continue;
            }
            let Some(destination) = &counted.destinations[e] else {
                continue;
            };
            for ((piece, ok), error) in pieces.iter().zip(oks).zip(errors) {
                if ok + error == 0 {
                    continue;
                }
                let (start, end) = (piece.start, piece.end);
                for (dest, w) in &holders {
                    let share = w / total;
                    let (service_name, service_ns) = service_of(&dest.host);
                    for reporter in ["source", "destination"] {
                        let mut labels = source.clone();
                        labels.extend(destination.iter().map(|(k, v)| (k.clone(), v.clone())));
                        labels.insert("reporter".into(), reporter.into());
                        if reporter == "destination" {
                            // The scrape target: the reporting pod (Prometheus' relabelling
                            // of Istio's pod scrapes adds it).
                            labels.insert("namespace".into(), pod.namespace.clone());
                            labels.insert("pod".into(), pod.pod.clone());
                        }
                        labels.insert("destination_service".into(), dest.host.clone());
                        labels.insert("destination_service_name".into(), service_name.into());
                        labels.insert("destination_service_namespace".into(), service_ns.into());
                        labels.insert(
                            "connection_security_policy".into(),
                            if reporter == "destination" {
                                "mutual_tls"
                            } else {
                                "unknown"
                            }
                            .into(),
                        );
                        let ok = ok as f64 * share;
                        let errors = error as f64 * share;
                        for (code, count) in [
                            ("200".to_string(), ok),
                            (pod.error_status.to_string(), errors),
                        ] {
                            if count <= 0.0 {
                                continue;
                            }
                            let mut l = labels.clone();
                            l.insert("response_code".into(), code);
                            l.insert("response_flags".into(), "-".into());
                            self.add("istio_requests_total", l.clone(), start, end, count);
                            let mean_ms = pod.latency_us.max(1) as f64 / 1000.0;
                            self.add(
                                "istio_request_duration_milliseconds_sum",
                                l.clone(),
                                start,
                                end,
                                count * mean_ms,
                            );
                            self.add(
                                "istio_request_duration_milliseconds_count",
                                l.clone(),
                                start,
                                end,
                                count,
                            );
                            for bound in DURATION_BUCKETS_MS {
                                let mut b = l.clone();
                                b.insert("le".into(), format_bound(bound));
                                let share = share_at_or_below(pod.latency_us, pod.jitter_us, bound);
                                self.add(
                                    "istio_request_duration_milliseconds_bucket",
                                    b,
                                    start,
                                    end,
                                    count * share,
                                );
                            }
                            let mut b = l;
                            b.insert("le".into(), "+Inf".into());
                            self.add(
                                "istio_request_duration_milliseconds_bucket",
                                b,
                                start,
                                end,
                                count,
                            );
                        }
                    }
                }
            }
        }
    }

    fn add(&mut self, name: &str, mut labels: Labels, start: i64, end: i64, amount: f64) {
        labels.insert("__name__".into(), name.into());
        self.series
            .entry(name.to_string())
            .or_default()
            .entry(labels)
            .or_default()
            .add(start, end, amount);
    }
}

impl Prometheus {
    /// The series as Prometheus holds them at `now`: one sample per scrape, from the first
    /// scrape after a series began until `now` (the epochs counted so far written first).
    pub fn at(&self, now: SimTime) -> Scraped<'_> {
        self.written.borrow_mut().catch_up();
        Scraped {
            series: std::cell::Ref::map(self.written.borrow(), |w| &w.series),
            now_ms: ms(now),
        }
    }
}

/// [`Prometheus`] seen at an instant (what a query at that instant can read).
pub struct Scraped<'p> {
    series: std::cell::Ref<'p, BTreeMap<String, BTreeMap<Labels, Counter>>>,
    now_ms: i64,
}

impl SeriesSource for Scraped<'_> {
    fn series(&self, metric: &str) -> Vec<Series> {
        let Some(all) = self.series.get(metric) else {
            return Vec::new();
        };
        let oldest = self.now_ms - HISTORY_MS;
        all.iter()
            .filter_map(|(labels, counter)| {
                let first = counter.first_time()?;
                // The first scrape at or after the series began.
                let mut t = first.max(oldest).div_euclid(SCRAPE_INTERVAL_MS) * SCRAPE_INTERVAL_MS;
                if t < first {
                    t += SCRAPE_INTERVAL_MS;
                }
                let mut samples = Vec::new();
                while t <= self.now_ms {
                    if let Some(v) = counter.at(t) {
                        samples.push((t, v));
                    }
                    t += SCRAPE_INTERVAL_MS;
                }
                (!samples.is_empty()).then(|| Series {
                    labels: labels.clone(),
                    samples,
                })
            })
            .collect()
    }
}

fn ms(t: SimTime) -> i64 {
    t.as_duration().as_millis() as i64
}

/// Prometheus' rendering of a bucket bound (`0.5`, `1`, `3.6e+06`).
fn format_bound(b: f64) -> String {
    if b >= 1e6 {
        let exp = b.log10().floor() as i32;
        let mantissa = b / 10f64.powi(exp);
        format!("{mantissa}e+{exp:02}")
    } else {
        format!("{b}")
    }
}

/// The share of answers at or below `bound_ms` when latency is uniform on the whole
/// microseconds of [latency − jitter, latency + jitter] (at least 1 µs), as the backend
/// model draws it.
fn share_at_or_below(latency_us: u64, jitter_us: u64, bound_ms: f64) -> f64 {
    let bound_us = (bound_ms * 1000.0).floor() as i64;
    let lo = (latency_us as i64 - jitter_us as i64).max(1);
    let hi = (latency_us as i64 + jitter_us as i64).max(1);
    if bound_us < lo {
        0.0
    } else if bound_us >= hi {
        1.0
    } else {
        // Values lo..=bound out of lo..=hi; the clamp to 1 µs folds the low tail onto 1.
        let span = (2 * jitter_us + 1) as f64;
        let below_one = (1 - (latency_us as i64 - jitter_us as i64)).max(0) as f64;
        ((bound_us - lo + 1) as f64 + below_one) / span
    }
}

/// `reporter`-independent labels of the caller: the ingress gateway's workload, or the
/// calling pod's app. An Istio Gateway is served by the shared `istio-ingressgateway`; a
/// Gateway API Gateway by the deployment Istio makes for it, `<name>-<class>` in its own
/// namespace.
fn source_labels(api: &ApiServer, traffic: &EpochTraffic) -> Labels {
    let mut l = Labels::new();
    let gateway_api = traffic.gateway.as_deref().and_then(|g| {
        let (ns, name) = g.split_once('/')?;
        // An Istio Gateway of the same name is the one routed (the route table's rule).
        if api.contains(crate::model::Kind::Gateway, ns, name) {
            return None;
        }
        let gw = api
            .get(crate::model::gateway_api::kind("Gateway"), ns, name)
            .ok()?;
        let class = gw.spec()["gatewayClassName"].as_str().unwrap_or("istio");
        Some((format!("{name}-{class}"), ns.to_string()))
    });
    let (workload, namespace) = match (&traffic.gateway, gateway_api) {
        (_, Some(deployment)) => deployment,
        (Some(_), None) => (
            "istio-ingressgateway".to_string(),
            "istio-system".to_string(),
        ),
        (None, None) => (
            traffic
                .source_labels
                .iter()
                .find(|(k, _)| k == "app")
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| "unknown".into()),
            "unknown".to_string(),
        ),
    };
    l.insert("source_workload".into(), workload.clone());
    l.insert("source_workload_namespace".into(), namespace);
    l.insert("source_app".into(), workload.clone());
    l.insert("source_canonical_service".into(), workload);
    l.insert("request_protocol".into(), "http".into());
    l
}

/// Istio's destination labels from the pod: the workload is the owning ReplicaSet's name
/// (Istio strips a `pod-template-hash` suffix, which Argo's ReplicaSets do not carry: a
/// Rollout's workloads are its ReplicaSets, `rollouts-demo-687d76d795`), app and version
/// from the `app` and `version` labels, the canonical service and revision as Istio
/// derives them.
fn destination_labels(namespace: &str, name: &str, pod: &crate::apiserver::PodFacts) -> Labels {
    let labels = &pod.labels;
    let owner = pod.first_owner_name.as_deref().unwrap_or(name).to_string();
    let workload = match labels.get("pod-template-hash") {
        Some(h) => owner
            .strip_suffix(&format!("-{h}"))
            .map(str::to_string)
            .unwrap_or(owner),
        None => owner,
    };
    let get = |k: &str| labels.get(k).map(|v| v.to_string());
    let canonical_service = get("service.istio.io/canonical-name")
        .or_else(|| get("app.kubernetes.io/name"))
        .or_else(|| get("app"))
        .unwrap_or_else(|| workload.clone());
    let canonical_revision = get("service.istio.io/canonical-revision")
        .or_else(|| get("app.kubernetes.io/version"))
        .or_else(|| get("version"))
        .unwrap_or_else(|| "latest".into());
    let mut l = Labels::new();
    l.insert("destination_workload".into(), workload);
    l.insert(
        "destination_workload_namespace".into(),
        namespace.to_string(),
    );
    l.insert(
        "destination_app".into(),
        get("app").unwrap_or_else(|| "unknown".into()),
    );
    l.insert(
        "destination_version".into(),
        get("version").unwrap_or_else(|| "unknown".into()),
    );
    l.insert("destination_canonical_service".into(), canonical_service);
    l.insert("destination_canonical_revision".into(), canonical_revision);
    l
}

/// (name, namespace) of a Service host `name.namespace.svc.cluster.local`.
fn service_of(host: &str) -> (&str, &str) {
    let mut parts = host.split('.');
    let name = parts.next().unwrap_or(host);
    let ns = parts.next().unwrap_or("");
    (name, ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_steps_through_an_epoch_and_holds_between_epochs() {
        let mut c = Counter::default();
        // 600 requests in a minute: one every 100 ms, the first at 50 ms.
        c.add(0, 60_000, 600.0);
        c.add(120_000, 180_000, 60.0);
        assert_eq!(c.at(49), None);
        assert_eq!(c.at(50), Some(1.0));
        assert_eq!(c.at(30_000), Some(300.0));
        assert_eq!(c.at(90_000), Some(600.0));
        // 60 in the next minute, one a second from 120.5 s: 30 by 150 s.
        assert_eq!(c.at(150_000), Some(630.0));
        assert_eq!(c.at(999_000), Some(660.0));
        // Another pod's requests in the same epoch join it.
        c.add(120_000, 180_000, 60.0);
        assert_eq!(c.at(150_000), Some(660.0));
        assert_eq!(c.at(999_000), Some(720.0));
        // A trickle: 2 requests in 10 minutes, at 2.5 min and 7.5 min; flat in between.
        let mut t = Counter::default();
        t.add(0, 600_000, 2.0);
        assert_eq!(t.at(100_000), None);
        assert_eq!(t.at(200_000), Some(1.0));
        assert_eq!(t.at(400_000), Some(1.0));
        assert_eq!(t.at(500_000), Some(2.0));
    }

    #[test]
    fn latency_shares_follow_the_uniform_model() {
        // 5 ms ± 2 ms: 4001 equally likely microsecond values from 3000 to 7000.
        assert_eq!(share_at_or_below(5_000, 2_000, 1.0), 0.0);
        assert_eq!(share_at_or_below(5_000, 2_000, 10.0), 1.0);
        // At or below 5 ms: 3000..=5000, 2001 values.
        assert!((share_at_or_below(5_000, 2_000, 5.0) - 2001.0 / 4001.0).abs() < 1e-12);
        // No jitter: a step at the latency.
        assert_eq!(share_at_or_below(1_000, 0, 0.5), 0.0);
        assert_eq!(share_at_or_below(1_000, 0, 1.0), 1.0);
    }

    #[test]
    fn bucket_bounds_are_written_as_prometheus_writes_them() {
        assert_eq!(format_bound(0.5), "0.5");
        assert_eq!(format_bound(250.0), "250");
        assert_eq!(format_bound(600000.0), "600000");
        assert_eq!(format_bound(1800000.0), "1.8e+06");
        assert_eq!(format_bound(3600000.0), "3.6e+06");
    }
}
