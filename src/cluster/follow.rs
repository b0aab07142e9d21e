//! `canarysim watch ROLLOUT --url URL`: follows a real rollout and, at each step that holds
//! its weight (a pause, an inline analysis), verifies at the real gateway that the share
//! reaching the canary is the share the router object (VirtualService route, HTTPRoute
//! rule) sets: it waits for the change to reach the data plane (the observed share moves
//! toward the new weight, bounded by `--settle`), sends the load, judges it as `canarysim
//! load` does, and reports one row per step. Ends when the rollout completes (a last load
//! checks that every request reaches the new version), aborts or degrades.
//!
//! A row is never judged against a weight that changed under it: when the router object's
//! weight or the step moved during the load, the row says so and is not judged.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use serde::Serialize;

use super::{Cluster, ClusterError};
use crate::load::http::{Extent, HttpLoad};
use crate::managed_routes::{self, RouteWeight};
use crate::model::{Kind, Object, ObjectKey};
use crate::real_load::Expectations;
use crate::rollout_info::Standing;
use crate::verify::{Outcome, SplitUnit};

/// What `watch` follows and how it measures.
#[derive(Debug, Clone)]
pub struct FollowOptions {
    pub rollout: String,
    /// The load sent at each step (its extent is set per load).
    pub load: HttpLoad,
    /// The URL the load goes to, as the user wrote it.
    pub url: String,
    pub requests: u64,
    /// Points either side of the router's weight.
    pub within: f64,
    pub confidence: f64,
    /// The longest wait for a new weight to reach the data plane.
    pub settle: Duration,
    /// The version value the canary's answers carry (None: its image tag).
    pub canary_version: Option<String>,
    /// Patch the rollout's abort when a step fails.
    pub abort_on_fail: bool,
    /// Give up (as inconclusive) after this long (None: follow until the rollout ends).
    pub timeout: Option<Duration>,
    /// No progress bar.
    pub quiet: bool,
}

/// One step's measurement, or the rollout's end.
#[derive(Debug, Clone, Serialize)]
pub struct StepRow {
    /// When the row was printed (UTC, RFC 3339).
    pub time: String,
    /// `status.currentStepIndex`, as `kubectl argo rollouts get rollout` shows it (None:
    /// the end of the rollout).
    pub step: Option<usize>,
    pub steps: usize,
    pub phase: String,
    /// The step's set weight, percent.
    pub set_weight: f64,
    /// The canary's share the router object sets (the first managed route), percent.
    pub router_weight: Option<f64>,
    /// The route it is read from, e.g. `rollouts-demo-vsvc http/primary`.
    pub route: String,
    /// The version value judged.
    pub version: String,
    /// Its expected share, percent.
    pub expected: Option<f64>,
    /// Its observed share in the unit of randomisation, percent, with the verdict's
    /// interval.
    pub observed: Option<f64>,
    pub interval: Option<[f64; 2]>,
    pub unit: Option<SplitUnit>,
    /// Independent draws behind the interval; requests sent.
    pub effective_n: u64,
    pub sent: u64,
    /// Seconds spent waiting for the data plane to follow the router object.
    pub settle_seconds: f64,
    pub verdict: Option<Outcome>,
    /// Why a row is not judged, what would decide it, or how the rollout ended.
    pub note: String,
}

/// How the watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    Completed,
    Aborted,
    Degraded,
    /// `--abort-on-fail` aborted it.
    AbortedByCanarysim,
    TimedOut,
}

/// Everything `watch --format json` prints (`schemas/watch.schema.json`).
#[derive(Debug, Clone, Serialize)]
pub struct WatchReport {
    pub rollout: String,
    pub namespace: String,
    pub url: String,
    pub rows: Vec<StepRow>,
    pub ending: Ending,
}

impl WatchReport {
    /// 0: every step passed and the rollout completed; 1: a step failed; 3: otherwise
    /// (inconclusive, or the rollout ended without completing), as `canarysim load`.
    pub fn exit_code(&self) -> u8 {
        let verdicts = || self.rows.iter().filter_map(|r| r.verdict);
        if verdicts().any(|v| v == Outcome::Fail) {
            1
        } else if self.ending != Ending::Completed || verdicts().any(|v| v != Outcome::Pass) {
            crate::real_load::INCONCLUSIVE_EXIT
        } else {
            0
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("rollout {0} not found in namespace {1}")]
    NotFound(String, String),
    #[error(
        "rollout {0}: no router canarysim reads (trafficRouting.istio or the Gateway API plugin); nothing sets a weight to verify"
    )]
    NoRouter(String),
    #[error(
        "rollout {0}: its template names no image (a workloadRef?): say which version the canary answers with, --canary-version VALUE"
    )]
    NoVersion(String),
    #[error("cannot load {0}")]
    Load(String),
}

/// What the caller is told as the watch goes: rows for stdout, progress for stderr.
pub struct Hooks<'a> {
    pub row: &'a mut dyn FnMut(&StepRow),
    pub say: &'a dyn Fn(&str),
}

/// The completion's load, each request its own connection: a few thousand decide 100 %.
const COMPLETION_REQUESTS: u64 = 5_000;

/// How often the rollout and its router objects are read again without an event.
const TICK: Duration = Duration::from_millis(250);

/// Follows the rollout until it completes, aborts or degrades.
pub fn follow(
    cluster: &Cluster,
    o: &FollowOptions,
    hooks: Hooks,
) -> Result<WatchReport, FollowError> {
    let namespace = cluster.namespace().to_string();
    let key = ObjectKey::new(Kind::Rollout, namespace.clone(), o.rollout.clone());
    let first = cluster
        .get(&key)?
        .ok_or_else(|| FollowError::NotFound(o.rollout.clone(), namespace.clone()))?;
    if managed_routes::managed_objects(&first).is_empty() {
        return Err(FollowError::NoRouter(o.rollout.clone()));
    }
    let mut watch = RolloutWatch::start(cluster, &key, first);
    let mut follower = Follower {
        cluster,
        o,
        hooks,
        rows: Vec::new(),
        measured: BTreeSet::new(),
        last_weight: None,
        started: Instant::now(),
    };
    let ending = follower.run(&mut watch);
    watch.stop();
    let ending = ending?;
    Ok(WatchReport {
        rollout: o.rollout.clone(),
        namespace,
        url: o.url.clone(),
        rows: follower.rows,
        ending,
    })
}

/// The Rollout as a watch last delivered it (kube-rs' `watch_object`: a list, then a watch
/// from its resourceVersion, listing again after 410 Gone), read on the client's runtime.
struct RolloutWatch {
    latest: tokio::sync::watch::Receiver<Option<Object>>,
    task: tokio::task::JoinHandle<()>,
}

impl RolloutWatch {
    fn start(cluster: &Cluster, key: &ObjectKey, first: Object) -> RolloutWatch {
        let (send, latest) = tokio::sync::watch::channel(Some(first));
        let api = cluster.api(Kind::Rollout, &key.namespace);
        let name = key.name.clone();
        let task = cluster.spawn(async move {
            let mut events = watcher::watch_object(api, &name).default_backoff().boxed();
            while let Some(event) = events.next().await {
                // Errors are retried with backoff; the last good state stands meanwhile.
                if let Ok(found) = event {
                    let rollout = found.map(|d| super::object(Kind::Rollout, &d));
                    if send.send(rollout).is_err() {
                        return;
                    }
                }
            }
        });
        RolloutWatch { latest, task }
    }

    /// The Rollout now (None: deleted).
    fn now(&self) -> Option<Object> {
        self.latest.borrow().clone()
    }

    /// Waits for the next change, at most `TICK`.
    fn next(&mut self, cluster: &Cluster) {
        let changed = self.latest.changed();
        let _ = cluster.block_on(async { tokio::time::timeout(TICK, changed).await });
    }

    fn stop(self) {
        self.task.abort();
    }
}

struct Follower<'c, 'o, 'h> {
    cluster: &'c Cluster,
    o: &'o FollowOptions,
    hooks: Hooks<'h>,
    rows: Vec<StepRow>,
    /// Steps measured: (pod template hash, step index).
    measured: BTreeSet<(String, usize)>,
    /// The router weight of the last load (the data plane moves away from it).
    last_weight: Option<f64>,
    started: Instant,
}

/// A step's weights as read before its load: to compare with after it.
#[derive(Debug, Clone, PartialEq)]
struct Reading {
    standing: Standing,
    routes: Vec<RouteWeight>,
}

impl Reading {
    fn router_weight(&self) -> Option<f64> {
        self.routes.first().and_then(|r| r.canary_percent)
    }
    fn moved(&self, after: &Reading) -> bool {
        self.standing.step != after.standing.step
            || self.standing.current_hash != after.standing.current_hash
            || self.standing.aborted != after.standing.aborted
            || self.router_weight() != after.router_weight()
    }
}

impl Follower<'_, '_, '_> {
    fn run(&mut self, watch: &mut RolloutWatch) -> Result<Ending, FollowError> {
        let mut seen_update = false;
        let mut waiting_said = false;
        let mut holding_since: Option<((String, usize), Instant)> = None;
        loop {
            if self.o.timeout.is_some_and(|t| self.started.elapsed() > t) {
                self.end_row(None, "timed out: --timeout passed before the rollout ended");
                return Ok(Ending::TimedOut);
            }
            let Some(rollout) = watch.now() else {
                return Err(FollowError::NotFound(
                    self.o.rollout.clone(),
                    self.cluster.namespace().to_string(),
                ));
            };
            let reading = self.read(&rollout)?;
            let s = &reading.standing;
            if s.aborted {
                let note = format!("aborted: {}", s.message);
                self.end_row(Some(&reading), &note);
                return Ok(Ending::Aborted);
            }
            if s.phase == "Degraded" {
                let note = format!("degraded: {}", s.message);
                self.end_row(Some(&reading), &note);
                return Ok(Ending::Degraded);
            }
            if s.updating {
                seen_update = true;
            } else if seen_update && s.phase == "Healthy" {
                self.measure_completion(watch, &rollout)?;
                return Ok(Ending::Completed);
            } else if !waiting_said {
                (self.hooks.say)(&format!(
                    "{} is {} with no update in progress: waiting for one to start",
                    self.o.rollout,
                    if s.phase.is_empty() { "new" } else { &s.phase }
                ));
                waiting_said = true;
            }
            if let (true, true, Some(step)) = (s.updating, s.holding, s.step) {
                let key = (s.current_hash.clone(), step);
                if !self.measured.contains(&key) {
                    let since = match &holding_since {
                        Some((k, t)) if *k == key => *t,
                        _ => {
                            holding_since = Some((key.clone(), Instant::now()));
                            Instant::now()
                        }
                    };
                    // The router object follows the rollout's status within a reconcile;
                    // a weight that never matches is measured as it stands after --settle.
                    let steady = reading.router_weight() == Some(f64::from(s.set_weight));
                    if steady || since.elapsed() > self.o.settle {
                        if self.measure_step(watch, reading)? == Outcome::Fail
                            && self.o.abort_on_fail
                        {
                            self.abort()?;
                            return Ok(Ending::AbortedByCanarysim);
                        }
                        self.measured.insert(key);
                        continue;
                    }
                }
            }
            watch.next(self.cluster);
        }
    }

    /// The Rollout's standing and its managed routes' weights, as the cluster has them.
    fn read(&self, rollout: &Object) -> Result<Reading, FollowError> {
        let mut objects = Vec::new();
        for key in managed_routes::managed_objects(rollout) {
            if let Some(found) = self.cluster.get(&key)? {
                objects.push((key, found));
            }
        }
        let get = |key: &ObjectKey| objects.iter().find(|(k, _)| k == key).map(|(_, o)| o);
        Ok(Reading {
            standing: Standing::of(rollout),
            routes: managed_routes::canary_weights(rollout, get),
        })
    }

    fn version(&self, standing: &Standing) -> Result<String, FollowError> {
        self.o
            .canary_version
            .clone()
            .or_else(|| standing.version.clone())
            .ok_or_else(|| FollowError::NoVersion(self.o.rollout.clone()))
    }

    /// Settles, loads and judges one step; the row is reported.
    fn measure_step(
        &mut self,
        watch: &RolloutWatch,
        before: Reading,
    ) -> Result<Outcome, FollowError> {
        let version = self.version(&before.standing)?;
        let weight = before.router_weight().unwrap_or(0.0);
        let settled = self.settle(&version, weight)?;
        let measured = self.load(&version, weight)?;
        let after = match watch.now() {
            Some(now) => Some(self.read(&now)?),
            None => None,
        };
        let moved = after.as_ref().is_none_or(|a| before.moved(a));
        let mut row = self.row(&before, &version, Some(weight), settled, &measured);
        if moved {
            row.verdict = Some(Outcome::Inconclusive);
            row.note = "not judged: the rollout or its router object changed during the load; a smaller -n, or a longer pause, would decide".into();
        } else if before.router_weight() != Some(f64::from(before.standing.set_weight)) {
            row.note = format!(
                "the router object sets {weight} %, not the step's {} %: the load is judged against the router object",
                before.standing.set_weight
            );
        }
        self.last_weight = Some(weight);
        let outcome = row.verdict.unwrap_or(Outcome::Inconclusive);
        self.emit(row);
        Ok(outcome)
    }

    /// After the promotion every request should reach the new version.
    fn measure_completion(
        &mut self,
        watch: &RolloutWatch,
        rollout: &Object,
    ) -> Result<(), FollowError> {
        let reading = self.read(rollout)?;
        let version = self.version(&reading.standing)?;
        let settled = self.settle(&version, 100.0)?;
        let measured = self.load(&version, 100.0)?;
        let mut row = self.row(&reading, &version, None, settled, &measured);
        row.step = None;
        row.expected = Some(100.0);
        row.note = format!("completed: every request should reach {version}");
        if watch.now().is_some_and(|now| Standing::of(&now).updating) {
            row.verdict = Some(Outcome::Inconclusive);
            row.note = "not judged: a new update started during the load".into();
        }
        self.emit(row);
        Ok(())
    }

    /// Waits until a probe's share of `version` is nearer `weight` than the weight of the
    /// previous load (the data plane has taken the change), at most `--settle`. Returns
    /// the seconds waited.
    fn settle(&self, version: &str, weight: f64) -> Result<f64, FollowError> {
        let start = Instant::now();
        let Some(previous) = self.last_weight.filter(|w| *w != weight) else {
            return Ok(0.0);
        };
        let probe = (self.o.requests / 50).clamp(100, 1000);
        loop {
            let mut load = self.o.load.clone();
            load.extent = Extent::new(Some(probe), None).map_err(FollowError::Load)?;
            let outcome = crate::load::http::send(&load, &|_| {})
                .map_err(|e| FollowError::Load(e.to_string()))?;
            let t = &outcome.tally;
            let classified = t.classified().max(1);
            let share = t
                .versions
                .iter()
                .filter(|v| v.version == version)
                .map(|v| v.responses)
                .sum::<u64>() as f64
                * 100.0
                / classified as f64;
            if (share - weight).abs() < (share - previous).abs() {
                return Ok(start.elapsed().as_secs_f64());
            }
            if start.elapsed() > self.o.settle {
                (self.hooks.say)(&format!(
                    "the data plane still gives {version} {share:.1} % after --settle {}: measuring anyway",
                    humantime::format_duration(self.o.settle)
                ));
                return Ok(start.elapsed().as_secs_f64());
            }
            std::thread::sleep(TICK);
        }
    }

    /// The load of one step, judged against `version` at `weight` percent. It stops as
    /// soon as the sequential test decides (`load --until-decided`), at most `--requests`.
    /// Each request on a connection of its own when every answer should come from one
    /// version: one version on kept-alive connections cannot tell a gateway that picks per
    /// connection, so its few connections would be the only draws.
    fn load(
        &self,
        version: &str,
        weight: f64,
    ) -> Result<crate::outcome::HttpLoadReport, FollowError> {
        let mut load = self.o.load.clone();
        let requests = if weight >= 100.0 {
            load.traffic.keepalive = false;
            self.o.requests.min(COMPLETION_REQUESTS)
        } else {
            self.o.requests
        };
        load.extent = Extent::new(Some(requests), None).map_err(FollowError::Load)?;
        load.traffic.stop = Some(crate::load::StopRule {
            key: version.to_string(),
            share: weight / 100.0,
            test: crate::load::StopTest::Verdict {
                within: self.o.within / 100.0,
                confidence: self.o.confidence,
            },
        });
        (self.hooks.say)(&format!(
            "sending up to {requests} requests to {}, expecting {version} at {weight} %",
            self.o.url
        ));
        let progress = crate::progress::LoadProgress::new(self.o.quiet, Some(requests), None);
        let outcome = crate::load::http::send(&load, &|s| progress.update(s));
        progress.finish();
        let outcome = outcome.map_err(|e| FollowError::Load(e.to_string()))?;
        let expect = Expectations {
            shares: vec![(version.to_string(), weight / 100.0)],
            within: self.o.within,
            confidence: self.o.confidence,
        };
        Ok(crate::real_load::judge(
            &self.o.url,
            &load,
            &outcome,
            Some(&expect),
            None,
        ))
    }

    fn row(
        &self,
        reading: &Reading,
        version: &str,
        router_weight: Option<f64>,
        settled: f64,
        report: &crate::outcome::HttpLoadReport,
    ) -> StepRow {
        let s = &reading.standing;
        let arm = report.verdict.as_ref().and_then(|v| v.split.arms.first());
        StepRow {
            time: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            step: s.step,
            steps: s.steps,
            phase: s.phase.clone(),
            set_weight: f64::from(s.set_weight),
            router_weight,
            route: reading
                .routes
                .first()
                .map(|r| r.label.clone())
                .unwrap_or_default(),
            version: version.to_string(),
            expected: arm.map(|a| a.expected_share * 100.0),
            observed: arm.map(|a| a.observed_share * 100.0),
            interval: arm.map(|a| [a.interval.lo * 100.0, a.interval.hi * 100.0]),
            unit: Some(report.unit),
            effective_n: report.effective_n,
            sent: report.sent,
            settle_seconds: settled,
            verdict: report.verdict.as_ref().map(|v| v.outcome),
            note: report
                .verdict
                .as_ref()
                .map(|v| v.advice.clone())
                .unwrap_or_default(),
        }
    }

    /// The row that ends the watch without a load.
    fn end_row(&mut self, reading: Option<&Reading>, note: &str) {
        let s = reading.map(|r| r.standing.clone());
        let row = StepRow {
            time: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            step: s.as_ref().and_then(|s| s.step),
            steps: s.as_ref().map_or(0, |s| s.steps),
            phase: s.as_ref().map(|s| s.phase.clone()).unwrap_or_default(),
            set_weight: s.as_ref().map_or(0.0, |s| f64::from(s.set_weight)),
            router_weight: reading.and_then(Reading::router_weight),
            route: reading
                .and_then(|r| r.routes.first())
                .map(|r| r.label.clone())
                .unwrap_or_default(),
            version: String::new(),
            expected: None,
            observed: None,
            interval: None,
            unit: None,
            effective_n: 0,
            sent: 0,
            settle_seconds: 0.0,
            verdict: None,
            note: note.to_string(),
        };
        self.emit(row);
    }

    fn emit(&mut self, row: StepRow) {
        (self.hooks.row)(&row);
        self.rows.push(row);
    }

    /// `kubectl argo rollouts abort`: a merge patch of `status.abort` on the status
    /// subresource.
    fn abort(&mut self) -> Result<(), FollowError> {
        let key = ObjectKey::new(
            Kind::Rollout,
            self.cluster.namespace().to_string(),
            self.o.rollout.clone(),
        );
        self.cluster
            .patch_status(&key, serde_json::json!({"status": {"abort": true}}))?;
        let note = format!(
            "--abort-on-fail: aborted {} (the patch `kubectl argo rollouts abort` sends)",
            self.o.rollout
        );
        self.end_row(None, &note);
        Ok(())
    }
}

/// The text table's header (rows follow as they are measured).
pub fn text_header(rollout: &str, namespace: &str, url: &str) -> String {
    format!(
        "watch rollout {rollout} in {namespace}, verified at {url}\n{:<20} {:>5} {:>5} {:>7} {:<10} {:>8} {:<16} {:<12} {:<12} NOTE\n",
        "TIME", "STEP", "SET", "ROUTER", "VERSION", "SHARE %", "INTERVAL", "DRAWS", "VERDICT"
    )
}

/// One row of the text table.
pub fn text_row(row: &StepRow) -> String {
    let step = row
        .step
        .map_or("end".to_string(), |i| format!("{i}/{}", row.steps));
    let number = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let observed = row.observed.map_or("-".to_string(), |v| format!("{v:.2}"));
    let interval = row
        .interval
        .map_or("-".to_string(), |[lo, hi]| format!("[{lo:.2}, {hi:.2}]"));
    let draws = match row.unit {
        Some(SplitUnit::Request) => format!("{} req", row.effective_n),
        Some(SplitUnit::Connection) => format!("{} conn", row.effective_n),
        None => "-".to_string(),
    };
    let verdict = match row.verdict {
        Some(Outcome::Pass) => "pass",
        Some(Outcome::Fail) => "FAIL",
        Some(Outcome::Inconclusive) => "cannot tell",
        None => "-",
    };
    format!(
        "{:<20} {step:>5} {:>5} {:>7} {:<10} {observed:>8} {interval:<16} {draws:<12} {verdict:<12} {}\n",
        row.time,
        number(Some(row.set_weight)),
        number(row.router_weight),
        if row.version.is_empty() {
            "-"
        } else {
            &row.version
        },
        row.note
    )
}
