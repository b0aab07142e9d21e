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

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use serde::Serialize;

use super::{Cluster, ClusterError};
use crate::load::http::HttpLoad;
use crate::managed_routes::{self, RouteWeight};
use crate::model::{Kind, Object, ObjectKey};
use crate::rollout_info::Standing;
use crate::verify::{Outcome, SplitUnit};

mod measure;
mod text;

pub use text::{text_header, text_row};

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
    /// The share the step's set weight means, percent (a `setWeight` of
    /// `maxTrafficWeight`).
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
    /// The update was replaced (`undo`, the stable template applied again) before it
    /// completed.
    RolledBack,
    TimedOut,
    /// The cluster stopped answering (`error` says how).
    Error,
}

/// Everything `watch --format json` prints (`schemas/watch.schema.json`).
#[derive(Debug, Clone, Serialize)]
pub struct WatchReport {
    pub rollout: String,
    pub namespace: String,
    pub url: String,
    pub rows: Vec<StepRow>,
    pub ending: Ending,
    /// Why the watch stopped early (`ending: error`).
    pub error: Option<String>,
}

impl WatchReport {
    /// 0: every step passed and the rollout completed; 1: a step failed; 2: the cluster
    /// stopped answering; 3: otherwise (a step not judged, or the rollout ended without
    /// completing), as `canarysim load`.
    pub fn exit_code(&self) -> u8 {
        let verdicts = || self.rows.iter().filter_map(|r| r.verdict);
        if verdicts().any(|v| v == Outcome::Fail) {
            1
        } else if self.ending == Ending::Error {
            2
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
    #[error("rollout {0}: no router object sets a canary weight canarysim can read: {1}")]
    NoRouter(String, String),
    #[error(
        "rollout {0}: its template names no image (a workloadRef?): say which version the canary answers with, --canary-version VALUE"
    )]
    NoVersion(String),
    /// A load that could not be sent (its step's row says so; the watch goes on).
    #[error("cannot load: {0}")]
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

/// Consecutive failed reads of the cluster (a tick apart, with backoff in between) before
/// the watch gives up.
const MAX_READ_FAILURES: u32 = 40;

/// Follows the rollout until it completes, aborts, degrades or is rolled back. Err only
/// for what is wrong before anything is measured (no such rollout, nothing to read a
/// weight from, no version to count); a cluster that stops answering later ends the report
/// with [`Ending::Error`], its rows kept.
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
    let mut follower = Follower {
        cluster,
        o,
        hooks,
        key: key.clone(),
        rows: Vec::new(),
        started: Instant::now(),
    };
    let reading = follower.read(&first)?;
    if reading.routes.is_empty() {
        return Err(FollowError::NoRouter(
            o.rollout.clone(),
            follower.missing(&first),
        ));
    }
    follower.version(&reading.standing)?;
    let mut wakeups = Wakeups::start(cluster, &key);
    let ending = follower.run(&mut wakeups, &reading);
    wakeups.stop();
    let (ending, error) = match ending {
        Ok(ending) => (ending, None),
        Err(e) => (Ending::Error, Some(e.to_string())),
    };
    Ok(WatchReport {
        rollout: o.rollout.clone(),
        namespace,
        url: o.url.clone(),
        rows: follower.rows,
        ending,
        error,
    })
}

/// A wake-up at each change of the Rollout (kube-rs' `watch_object`: a list, then a watch
/// from its resourceVersion, listing again after 410 Gone), so that a step is seen as soon
/// as it starts; the Rollout itself is read at each wake-up and each tick.
struct Wakeups {
    changed: tokio::sync::watch::Receiver<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Wakeups {
    fn start(cluster: &Cluster, key: &ObjectKey) -> Wakeups {
        let (send, changed) = tokio::sync::watch::channel(());
        let api = cluster.api(Kind::Rollout, &key.namespace);
        let name = key.name.clone();
        let task = cluster.spawn(async move {
            let mut events = watcher::watch_object(api, &name).default_backoff().boxed();
            // Errors are retried with backoff; the loop's reads say what is wrong.
            while events.next().await.is_some() {
                if send.send(()).is_err() {
                    return;
                }
            }
        });
        Wakeups { changed, task }
    }

    /// Waits for the next change, at most `TICK`.
    fn next(&mut self, cluster: &Cluster) {
        let changed = self.changed.changed();
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
    key: ObjectKey,
    rows: Vec<StepRow>,
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
    /// The weight the router object holds, as its controller writes it (the step's units).
    fn written(&self) -> Option<f64> {
        self.routes.first().and_then(|r| r.written)
    }
    /// Whether the router object has taken the step's weight.
    fn holds_set_weight(&self) -> bool {
        self.written() == Some(f64::from(self.standing.set_weight))
    }
    /// The share, in percent, a weight in the step's units makes through the router object
    /// (a `setWeight` of `maxTrafficWeight`: of the total the router draws from).
    fn as_percent(&self, weight: i32) -> f64 {
        let per_weight = self.routes.first().and_then(|r| r.percent_per_weight);
        f64::from(weight) * per_weight.unwrap_or(1.0)
    }
    fn moved(&self, after: &Reading) -> bool {
        self.standing.step != after.standing.step
            || self.standing.current_hash != after.standing.current_hash
            || self.standing.aborted != after.standing.aborted
            || self.router_weight() != after.router_weight()
    }
}

/// The step that holds its weight now, from when, and whether it has its row.
struct Holding {
    key: (String, usize),
    since: Instant,
    reading: Reading,
    reported: bool,
}

/// What the loop knows of the updates it has seen.
#[derive(Default)]
struct Progress {
    /// The pod-template hash of the update followed.
    followed: Option<String>,
    /// An update already aborted or degraded when the watch began: not followed.
    stale: Option<String>,
    waiting_said: bool,
    holding: Option<Holding>,
    /// Steps of the followed update with a lower index are reported, or were over before
    /// the watch began.
    accounted: usize,
    /// The watch read the rollout with no update in progress: every step of the next update
    /// happens while it watches, so a step it misses between two reads gets a row.
    watched_between_updates: bool,
}

impl Follower<'_, '_, '_> {
    // Long: the rollout's life in order: an update starting, each held step, and each way
    // it can end.
    fn run(&mut self, wakeups: &mut Wakeups, first: &Reading) -> Result<Ending, FollowError> {
        let mut p = Progress::default();
        let s = &first.standing;
        if s.updating && (s.aborted || s.phase == "Degraded") {
            p.stale = Some(s.current_hash.clone());
        }
        let mut failures = 0;
        loop {
            if self.o.timeout.is_some_and(|t| self.started.elapsed() > t) {
                self.end_row(None, "timed out: --timeout passed before the rollout ended");
                return Ok(Ending::TimedOut);
            }
            let (rollout, reading) = match self.read_rollout() {
                Ok(read) => {
                    failures = 0;
                    read
                }
                Err(e) if failures < MAX_READ_FAILURES => {
                    failures += 1;
                    (self.hooks.say)(&format!("cannot read the rollout ({failures}): {e}"));
                    wakeups.next(self.cluster);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let s = reading.standing.clone();
            if p.stale.as_deref() == Some(s.current_hash.as_str()) {
                p.watched_between_updates = true;
                self.say_waiting(&mut p, &s, "its last update ended aborted or degraded");
                wakeups.next(self.cluster);
                continue;
            }
            if s.updating && p.followed.as_deref() != Some(s.current_hash.as_str()) {
                self.leave_step(&mut p);
                p.followed = Some(s.current_hash.clone());
                // Joined midway: the steps before this one were over before the watch began.
                p.accounted = match (p.watched_between_updates, s.step) {
                    (false, Some(step)) => step,
                    _ => 0,
                };
                (self.hooks.say)(&format!(
                    "following the update to {} (pod template hash {})",
                    s.version.as_deref().unwrap_or("?"),
                    s.current_hash
                ));
            }
            if s.updating {
                self.passed_unseen(&mut p, &reading, s.step.unwrap_or(0));
            }
            if let Some(ending) = self.ended(&mut p, &rollout, &reading)? {
                return Ok(ending);
            }
            if !s.updating {
                p.watched_between_updates = true;
                self.say_waiting(&mut p, &s, "no update in progress");
            }
            if self.hold(&mut p, &reading)? == Some(Outcome::Fail) && self.o.abort_on_fail {
                self.abort()?;
                return Ok(Ending::AbortedByCanarysim);
            }
            wakeups.next(self.cluster);
        }
    }

    /// How the followed update ended, if it did (its row written).
    fn ended(
        &mut self,
        p: &mut Progress,
        rollout: &Object,
        reading: &Reading,
    ) -> Result<Option<Ending>, FollowError> {
        let s = &reading.standing;
        let Some(followed) = p.followed.clone() else {
            return Ok(None);
        };
        if s.aborted {
            self.leave_step(p);
            self.end_row(Some(reading), &format!("aborted: {}", s.message));
            return Ok(Some(Ending::Aborted));
        }
        if s.phase == "Degraded" {
            self.leave_step(p);
            self.end_row(Some(reading), &format!("degraded: {}", s.message));
            return Ok(Some(Ending::Degraded));
        }
        if s.updating || s.phase != "Healthy" {
            return Ok(None);
        }
        self.leave_step(p);
        if s.current_hash == followed {
            self.passed_unseen(p, reading, s.steps);
            self.measure_completion(rollout)?;
            return Ok(Some(Ending::Completed));
        }
        // `undo`, or the stable template applied again: Argo skips to the end, the stable
        // pods never left.
        let note = format!(
            "rolled back: the update to hash {followed} was replaced by {} before it completed",
            s.current_hash
        );
        self.end_row(Some(reading), &note);
        Ok(Some(Ending::RolledBack))
    }

    /// At a step that holds its weight: its row, once the router object's weight matches
    /// the set weight (or `--settle` has passed). Returns the verdict when it measured.
    fn hold(
        &mut self,
        p: &mut Progress,
        reading: &Reading,
    ) -> Result<Option<Outcome>, FollowError> {
        let s = &reading.standing;
        let key = match (s.updating, s.holding, s.step) {
            (true, true, Some(step)) => Some((s.current_hash.clone(), step)),
            _ => None,
        };
        if p.holding.as_ref().map(|h| &h.key) != key.as_ref() {
            self.leave_step(p);
            p.holding = key.map(|key| Holding {
                key,
                since: Instant::now(),
                reading: reading.clone(),
                reported: false,
            });
        }
        let Some(h) = p.holding.as_mut().filter(|h| !h.reported) else {
            return Ok(None);
        };
        h.reading = reading.clone();
        let steady = reading.holds_set_weight();
        if !steady && h.since.elapsed() <= self.o.settle {
            return Ok(None);
        }
        h.reported = true;
        self.measure_step(reading.clone()).map(Some)
    }

    /// The held step is over: a step left without its row gets one, not judged.
    fn leave_step(&mut self, p: &mut Progress) {
        let Some(h) = p.holding.take().filter(|h| !h.reported) else {
            return;
        };
        let s = &h.reading.standing;
        let router = h
            .reading
            .written()
            .map_or("no weight".to_string(), |w| format!("weight {w}"));
        let note = format!(
            "not measured: the step ended before its router object ({router}) held the set weight ({}) or --settle passed",
            s.set_weight
        );
        let mut row = self.bare_row(Some(&h.reading), &note);
        row.verdict = Some(Outcome::Inconclusive);
        self.emit(row);
    }

    /// Steps that hold a weight, passed between two reads (a pause shorter than a tick, or
    /// than a load): each gets a row, not measured, so that no step passes unreported.
    fn passed_unseen(&mut self, p: &mut Progress, reading: &Reading, now: usize) {
        let from = p.accounted;
        // The step in force now is the held step's to report (`hold`, `leave_step`).
        p.accounted = p.accounted.max(now + 1);
        let held = p.holding.as_ref().map(|h| h.key.1);
        for &(index, weight) in &reading.standing.held_steps {
            if index < from || index >= now || Some(index) == held {
                continue;
            }
            let mut row = self.bare_row(
                Some(reading),
                "not measured: the step began and ended between two reads of the rollout",
            );
            row.step = Some(index);
            row.set_weight = reading.standing.share_meant(weight);
            row.router_weight = None;
            row.verdict = Some(Outcome::Inconclusive);
            self.emit(row);
        }
    }

    fn say_waiting(&self, p: &mut Progress, s: &Standing, why: &str) {
        if !p.waiting_said {
            (self.hooks.say)(&format!(
                "{} is {} ({why}): waiting for an update to start",
                self.o.rollout,
                if s.phase.is_empty() { "new" } else { &s.phase }
            ));
            p.waiting_said = true;
        }
    }

    /// The Rollout and its reading now.
    fn read_rollout(&self) -> Result<(Object, Reading), FollowError> {
        let rollout = self.cluster.get(&self.key)?.ok_or_else(|| {
            FollowError::NotFound(self.o.rollout.clone(), self.key.namespace.clone())
        })?;
        let reading = self.read(&rollout)?;
        Ok((rollout, reading))
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

    /// [`Self::missing`] for the rollout as it is now.
    fn missing_now(&self) -> String {
        match self.cluster.get(&self.key) {
            Ok(Some(rollout)) => self.missing(&rollout),
            Ok(None) => "the rollout is gone".into(),
            Err(e) => e.to_string(),
        }
    }

    /// Which router objects the rollout names and which are missing, for the error.
    fn missing(&self, rollout: &Object) -> String {
        let named = managed_routes::managed_objects(rollout);
        if named.is_empty() {
            return "it names no VirtualService (trafficRouting.istio), no route of the Gateway API plugin and no stable Ingress (trafficRouting.nginx)".into();
        }
        let described: Vec<String> = named
            .iter()
            .map(|k| {
                let found = matches!(self.cluster.get(k), Ok(Some(_)));
                let state = if found {
                    "no weighted route to the canary"
                } else {
                    "not found"
                };
                format!("{} {}/{}: {state}", k.kind.as_str(), k.namespace, k.name)
            })
            .collect();
        described.join("; ")
    }

    fn version(&self, standing: &Standing) -> Result<String, FollowError> {
        self.o
            .canary_version
            .clone()
            .or_else(|| standing.version.clone())
            .ok_or_else(|| FollowError::NoVersion(self.o.rollout.clone()))
    }

    fn emit(&mut self, row: StepRow) {
        (self.hooks.row)(&row);
        self.rows.push(row);
    }

    /// `kubectl argo rollouts abort`: a merge patch of `status.abort` on the status
    /// subresource.
    fn abort(&mut self) -> Result<(), FollowError> {
        self.cluster
            .patch_status(&self.key, serde_json::json!({"status": {"abort": true}}))?;
        let note = format!(
            "--abort-on-fail: aborted {} (the patch `kubectl argo rollouts abort` sends)",
            self.o.rollout
        );
        self.end_row(None, &note);
        Ok(())
    }
}
