//! The simulated cluster: the apiserver, the rollout controller and the ReplicaSet/Pod
//! lifecycle on one virtual clock.
//!
//! Time moves only when asked ([`World::advance`]). At each instant the controllers are
//! reconciled until nothing changes (level-triggered, like informer-driven controllers that
//! react to their own writes); then the clock jumps to the next instant at which something
//! happens by itself (a pod turns ready, a pause ends, a scale-down deadline passes).

use rand_pcg::Pcg64Mcg;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::apiserver::{ApiError, ApiServer};
use crate::clock::SimTime;
use crate::controller::actions;
use crate::controller::replicaset::{self, PodLifecycle, min_time};
use crate::controller::rollout::{self, Event, Settings};
use crate::mesh::{self, Mesh};
use crate::model::{Kind, Manifest, Object, ObjectKey};

/// Reconcile rounds allowed at one instant before the world reports that the controllers do
/// not settle (a bug, never expected).
const MAX_ROUNDS: usize = 1000;

/// Instants one step may stop the clock at, by default (see [`World::allow_instants`];
/// `canarysim run --instant-budget` changes it). The
/// bundled scenarios' busiest step stops at 25; an instant costs a fraction of a millisecond,
/// so a step that would stop at millions of them (a deadline that fires every minute through
/// a wait of years) fails in seconds rather than running for hours.
pub const DEFAULT_INSTANT_BUDGET: u64 = 10_000;

/// Knobs of the simulated cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub pods: PodLifecycle,
    pub controller: Settings,
    /// How long a configuration change takes to reach the proxies (Istio's debounce).
    pub push_delay: Duration,
    /// The Istio release whose admission webhook validates VirtualService writes.
    pub istio_weight_rules: crate::apiserver::admission::IstioWeightRules,
    /// Keep the API server's watch log (only watches read it: `serve --api`).
    pub watch_log: bool,
    /// Write the controllers' events as Event objects (`kubectl get events` reads them
    /// from `serve --api`; a run reads [`World::events`]).
    pub record_events: bool,
    /// Instants one step may stop the clock at ([`DEFAULT_INSTANT_BUDGET`]).
    pub instant_budget: u64,
    /// What the translation of routes cannot read from the objects (how the Gateway API's
    /// implementation splits).
    pub routes: mesh::TranslateOptions,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            pods: PodLifecycle::default(),
            controller: Settings::default(),
            push_delay: mesh::DEFAULT_PUSH_DELAY,
            istio_weight_rules: Default::default(),
            watch_log: false,
            record_events: false,
            instant_budget: DEFAULT_INSTANT_BUDGET,
            routes: mesh::TranslateOptions::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Api(#[from] ApiError),
    /// At the instant, who keeps writing what.
    #[error("controllers did not settle at {0} after {MAX_ROUNDS} rounds: {1}")]
    Unsettled(SimTime, String),
    /// A step's clock stopped at more instants than it may ([`DEFAULT_INSTANT_BUDGET`]).
    #[error(
        "this step stopped the clock at {instants} instants and reached only {at}, {reached} into the step ({who}); a step this busy is not played event by event: shorten its timeout or duration (or raise it: `canarysim run --instant-budget N`)"
    )]
    TooBusy {
        instants: u64,
        at: SimTime,
        reached: String,
        who: String,
    },
    #[error("{0}")]
    Action(String),
    #[error(transparent)]
    Load(#[from] crate::load::LoadError),
}

/// The whole simulated cluster.
#[derive(Debug, Clone)]
pub struct World {
    pub api: ApiServer,
    pub config: ClusterConfig,
    now: SimTime,
    rng: Pcg64Mcg,
    /// Every event the controllers emitted, in order.
    pub events: Vec<Event>,
    /// The error each rollout's last reconcile reported (absent: none).
    pub errors: BTreeMap<ObjectKey, String>,
    /// Instant at which a controller asked to be woken, if any.
    wake: Option<SimTime>,
    /// While [`World::advance_until`] runs: the end it advances to (see
    /// [`World::next_instant`]).
    horizon: Option<SimTime>,
    /// ReplicaSets whose pods need no walk until they or their pods change or they wake.
    settled_replica_sets: replicaset::Settled,
    /// The route tables the proxies receive, each after the push delay (like istiod → xDS).
    pub mesh: Mesh,
    /// Fingerprint of what istiod watches (networking config and endpoints) at the last push.
    pushed: Option<u64>,
    /// The serving pods' part of the last fingerprint, and the pods' version it was taken
    /// at ([`ApiServer::kind_changed_at`]): unchanged pods are not walked again.
    serving_pods: Option<(u64, u64)>,
    /// Writes [`World::events`] as Event objects when `config.record_events`.
    recorder: crate::world::event_recorder::Recorder,
    /// The ReplicaSet controller's events not yet written (kept only when
    /// `config.record_events`: a run does not report them).
    replica_set_events: Vec<Event>,
    /// Instants the clock may still stop at in the current step ([`World::allow_instants`]).
    instants_left: u64,
    /// When the current step began.
    step_began: SimTime,
    /// Every distinct note of the route tables translated so far (what the translation
    /// skipped or could not honour), in the order first seen.
    pub route_notes: Vec<crate::endpoints::Note>,
    /// The built-in Prometheus: Istio's request metrics from the simulated traffic.
    pub metrics: crate::analysis::Prometheus,
    /// Per metric name, the values its measurements return when its provider is not the
    /// built-in Prometheus (`cluster.analysis_results`).
    pub scripted_results: BTreeMap<String, Vec<serde_json::Value>>,
}

impl World {
    /// An empty cluster. `seed` drives every random choice (pod names).
    pub fn new(config: ClusterConfig, seed: u64) -> Self {
        let mut api = ApiServer::new();
        api.istio_weight_rules = config.istio_weight_rules;
        api.set_keep_log(config.watch_log);
        let instants_left = config.instant_budget;
        World {
            api,
            config,
            now: SimTime::ZERO,
            rng: crate::random::stream(seed, "pods"),
            events: Vec::new(),
            replica_set_events: Vec::new(),
            errors: BTreeMap::new(),
            wake: None,
            horizon: None,
            settled_replica_sets: Default::default(),
            mesh: Mesh::new(),
            pushed: None,
            serving_pods: None,
            recorder: Default::default(),
            instants_left,
            step_began: SimTime::ZERO,
            route_notes: Vec::new(),
            metrics: crate::analysis::Prometheus::new(seed),
            scripted_results: BTreeMap::new(),
        }
    }

    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Creates or replaces objects, like `kubectl apply` (spec and metadata from the file;
    /// server-set fields and status kept), then lets the controllers react.
    pub fn apply(&mut self, manifests: &[Manifest]) -> Result<(), SimError> {
        for m in manifests {
            self.apply_object(m.object.clone())?;
        }
        self.settle()
    }

    fn apply_object(&mut self, object: Object) -> Result<(), ApiError> {
        let key = object.key();
        match self.api.get(key.kind, &key.namespace, &key.name) {
            Err(_) => {
                self.api.create(object)?;
            }
            Ok(current) => {
                let mut next = object;
                if let Some(status) = current.value.get("status") {
                    next.value["status"] = status.clone();
                }
                next.value["metadata"]["resourceVersion"] =
                    serde_json::Value::String(current.resource_version().to_string());
                self.api.update(next)?;
            }
        }
        Ok(())
    }

    /// Runs a load through the simulated data plane while the world moves on: the load
    /// sends an epoch's requests, the world advances to the next instant something changes
    /// (a pod turning ready, a pause ending, a route table taking effect), and so on until
    /// the load's last answer.
    pub fn run_load(
        &mut self,
        workload: &crate::load::Workload,
        backends: &crate::load::Backends,
        lb: mesh::LbPolicy,
        proxy_mode: crate::kubeproxy::ProxyMode,
        streams: &mut crate::load::Streams,
    ) -> Result<crate::load::LoadResult, SimError> {
        self.settle()?;
        let run = crate::load::LoadRun::start(self, workload, backends, lb, proxy_mode)?;
        self.drive_load(run, streams)
    }

    /// Drives a started load to its end (see [`World::run_load`]).
    pub(crate) fn drive_load(
        &mut self,
        mut run: crate::load::LoadRun,
        streams: &mut crate::load::Streams,
    ) -> Result<crate::load::LoadResult, SimError> {
        if let Some(last_answer) = self.drive_epochs(&mut run, streams, |_| false)? {
            if last_answer > self.now {
                self.advance_until(last_answer, |_| false)?;
            }
        }
        Ok(run.finish(self.now))
    }

    /// Sends `run`'s epochs, moving the clock between them, until the load has sent all
    /// it will (Some(the instant its last answer arrives)) or `done` holds (None).
    fn drive_epochs(
        &mut self,
        run: &mut crate::load::LoadRun,
        streams: &mut crate::load::Streams,
        mut done: impl FnMut(&mut World) -> bool,
    ) -> Result<Option<SimTime>, SimError> {
        loop {
            match run.epoch(self, streams)? {
                crate::load::Progress::AdvanceTo(t) => {
                    if self.advance_until(t, &mut done)? {
                        return Ok(None);
                    }
                }
                crate::load::Progress::Finished(last_answer) => return Ok(Some(last_answer)),
            }
        }
    }

    /// Advances to `end` (or until `done` holds) while `workload` (an open loop, its
    /// amount ignored) sends requests the whole time: background traffic, so that metrics
    /// have requests to count while a scenario waits. Returns whether `done` held.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn advance_with_traffic(
        &mut self,
        end: SimTime,
        mut done: impl FnMut(&mut World) -> bool,
        workload: &crate::load::Workload,
        backends: &crate::load::Backends,
        lb: mesh::LbPolicy,
        proxy_mode: crate::kubeproxy::ProxyMode,
        streams: &mut crate::load::Streams,
    ) -> Result<bool, SimError> {
        self.settle()?;
        let held = done(self);
        if held || end <= self.now {
            return Ok(held);
        }
        let mut workload = workload.clone();
        workload.amount = crate::load::Amount::Duration(end.since(self.now));
        let mut run = crate::load::LoadRun::start(self, &workload, backends, lb, proxy_mode)?;
        match self.drive_epochs(&mut run, streams, &mut done)? {
            None => Ok(true),
            Some(_) => self.advance_until(end, done),
        }
    }

    /// Reconciles every controller until nothing changes at the current instant.
    pub fn settle(&mut self) -> Result<(), SimError> {
        self.api.set_time(self.now);
        for _ in 0..MAX_ROUNDS {
            let (changed, wake) = self.round()?;
            if !changed {
                if self.config.record_events {
                    self.recorder.record(&mut self.api, &self.events);
                    self.recorder
                        .record_replica_set_events(&mut self.api, &self.replica_set_events);
                    self.replica_set_events.clear();
                    self.recorder.expire(&mut self.api, self.now);
                }
                self.push_routes();
                self.api.forget_decoded();
                self.wake =
                    min_time(wake, self.mesh.next_change(self.now)).filter(|t| *t > self.now);
                return Ok(());
            }
        }
        let who = self.who_keeps_writing()?;
        Err(SimError::Unsettled(self.now, who))
    }

    /// One more round, watched: the objects whose resourceVersion it moves, so that an
    /// unsettled world names what keeps changing rather than only that something does.
    fn who_keeps_writing(&mut self) -> Result<String, SimError> {
        let before = self.resource_versions();
        self.round()?;
        Ok(match self.written_since(&before) {
            None => "each round wrote, yet no object changed (a controller counts a write the API server did not store)".into(),
            Some(objects) => format!("each round writes {objects} again"),
        })
    }

    /// Every simulated object's resourceVersion.
    fn resource_versions(&self) -> BTreeMap<ObjectKey, String> {
        Kind::SIMULATED
            .iter()
            .flat_map(|k| self.api.list(*k, None, None))
            .map(|o| (o.key(), o.resource_version().to_string()))
            .collect()
    }

    /// The objects written since `before` was taken, named (the first five), or None.
    fn written_since(&self, before: &BTreeMap<ObjectKey, String>) -> Option<String> {
        let written: Vec<String> = self
            .resource_versions()
            .into_iter()
            .filter(|(key, rv)| before.get(key) != Some(rv))
            .map(|(key, _)| format!("{} {}/{}", key.kind, key.namespace, key.name))
            .collect();
        match written.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            many => Some(format!(
                "{}{}",
                many[..many.len().min(5)].join(", "),
                if many.len() > 5 {
                    format!(" and {} more", many.len() - 5)
                } else {
                    String::new()
                }
            )),
        }
    }

    /// A new step begins: its clock may stop at `config.instant_budget` instants.
    pub fn allow_instants(&mut self) {
        self.instants_left = self.config.instant_budget;
        self.step_began = self.now;
    }

    /// Moves the clock to `t` and settles there, counting the instant against the step's
    /// allowance; the last one allowed is watched, to name what keeps the clock busy.
    fn stop_at(&mut self, t: SimTime) -> Result<(), SimError> {
        if self.instants_left > 0 {
            self.instants_left -= 1;
            self.now = t;
            return self.settle();
        }
        let before = self.resource_versions();
        self.now = t;
        self.settle()?;
        let mut who = match self.written_since(&before) {
            Some(objects) => format!("the last instant wrote {objects}"),
            None => "the last instant wrote no object".into(),
        };
        if let Some(e) = self.events.last().filter(|e| e.time >= self.step_began) {
            who.push_str(&format!(
                "; the last event: {} {} at {}",
                e.object, e.reason, e.time
            ));
        }
        Err(SimError::TooBusy {
            instants: self.config.instant_budget,
            at: self.now,
            reached: crate::model::duration::format(self.now.since(self.step_began)),
            who,
        })
    }

    /// One more reconcile of every controller at the current instant, as [`World::settle`]
    /// runs them; true when a controller says it wrote. Once the world has settled this must
    /// write nothing: a controller writes an object again only when what it reads changed
    /// (else the world never settles; the bundled scenarios' suite checks it).
    pub fn reconcile_round(&mut self) -> Result<bool, SimError> {
        self.api.set_time(self.now);
        let (changed, _) = self.round()?;
        self.api.forget_decoded();
        Ok(changed)
    }

    /// The rollouts', AnalysisRuns' and ReplicaSets' controllers once each: whether any
    /// wrote, and the earliest instant one asked to be woken at.
    fn round(&mut self) -> Result<(bool, Option<SimTime>), SimError> {
        let mut wake = None;
        let mut changed = false;
        let rollouts: Vec<ObjectKey> = self
            .api
            .list(Kind::Rollout, None, None)
            .iter()
            .map(|o| o.key())
            .collect();
        for key in rollouts {
            let outcome = rollout::reconcile(
                &mut self.api,
                self.now,
                &key.namespace,
                &key.name,
                &self.config.controller,
                &mut self.events,
            )?;
            changed |= outcome.changed;
            wake = min_time(wake, outcome.wake);
            match outcome.error {
                Some(e) => {
                    self.errors.insert(key, e);
                }
                None if !outcome.changed => {
                    self.errors.remove(&key);
                }
                None => {}
            }
        }
        let providers = crate::analysis::Providers {
            prometheus: &self.metrics,
            scripted: &self.scripted_results,
        };
        let (runs_changed, runs_wake) = crate::controller::analysis_run::reconcile_all(
            &mut self.api,
            self.now,
            &providers,
            &mut self.events,
        )?;
        changed |= runs_changed;
        wake = min_time(wake, runs_wake);
        let (rs_changed, rs_wake) = replicaset::reconcile_all(
            &mut self.api,
            self.now,
            &self.config.pods,
            &mut self.rng,
            &mut self.settled_replica_sets,
            self.config
                .record_events
                .then_some(&mut self.replica_set_events),
        )?;
        changed |= rs_changed;
        wake = min_time(wake, rs_wake);
        Ok((changed, wake))
    }

    /// istiod: when the store changed, a new route table reaches the proxies `push_delay`
    /// later (rapid changes are debounced into one push).
    fn push_routes(&mut self) {
        let fingerprint = self.mesh_inputs();
        if self.pushed == Some(fingerprint) {
            return;
        }
        self.pushed = Some(fingerprint);
        let mut table = mesh::translate_with(&self.api, self.config.routes);
        for note in table.notes() {
            if !self.route_notes.contains(note) {
                self.route_notes.push(note.clone());
            }
        }
        let status = table.take_gateway_api_status();
        if self.write_gateway_api_status(status) {
            // Status is not what the proxies see: its writes must not cause another push.
            self.pushed = Some(self.mesh_inputs());
        }
        // ingress-nginx's Lua workers re-read the backends every second
        // (`BACKENDS_SYNC_INTERVAL` in balancer.lua): at worst that long.
        let delay = if table.has_ingress_proxy() {
            self.config
                .push_delay
                .max(mesh::ingress_nginx::BACKENDS_SYNC_INTERVAL)
        } else {
            self.config.push_delay
        };
        self.mesh.push(table, self.now, delay);
        self.mesh.prune(self.now);
    }

    /// The Gateway API implementation writes its objects' status (when it differs from the
    /// stored one), as the table it programs says. Whether anything was written.
    fn write_gateway_api_status(&mut self, writes: Vec<mesh::StatusWrite>) -> bool {
        let now = self.now.rfc3339();
        let mut wrote = false;
        for mut w in writes {
            let Ok(current) = self.api.get(w.key.kind, &w.key.namespace, &w.key.name) else {
                continue;
            };
            mesh::stamp_transitions(&mut w.status, current.status(), &now);
            // A route no programmed parent names: written only to clear entries of before.
            let no_parents =
                |s: &serde_json::Value| s["parents"].as_array().is_none_or(Vec::is_empty);
            let is_route = crate::model::gateway_api::route_kind(w.key.kind).is_some();
            let nothing_to_clear =
                is_route && no_parents(&w.status) && no_parents(current.status());
            if *current.status() == w.status || nothing_to_clear {
                continue;
            }
            let mut next = current.clone();
            crate::model::object::ensure_object(&mut next.value).insert("status".into(), w.status);
            // A conflict cannot happen: nothing wrote between the read and this write.
            wrote |= self.api.update_status(next).is_ok();
        }
        wrote
    }

    /// A fingerprint of what istiod reacts to: VirtualServices, DestinationRules, Gateways
    /// (Istio's and the Gateway API's), HTTPRoutes, ReferenceGrants, Ingresses and
    /// IngressClasses (ingress-nginx's) and Services as written, and the Pods that serve (ready, with their labels). Rollout and ReplicaSet writes, and
    /// pods that are not ready yet, change nothing the proxies see.
    fn mesh_inputs(&mut self) -> u64 {
        use std::hash::{Hash, Hasher};
        let pods_version = self.api.kind_changed_at(Kind::Pod);
        let serving_pods = match self.serving_pods {
            Some((version, hash)) if version == pods_version => hash,
            _ => {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                for (key, pod) in self.api.pod_facts(None, None) {
                    if pod.serving {
                        (&key.namespace, &key.name, pod.labels.as_ref()).hash(&mut h);
                    }
                }
                let hash = h.finish();
                self.serving_pods = Some((pods_version, hash));
                hash
            }
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        serving_pods.hash(&mut h);
        let gateway_api =
            crate::model::gateway_api::SIMULATED_KINDS.map(crate::model::gateway_api::kind);
        // GatewayClasses: their status and the controller named in their routes' status.
        let classes = crate::model::gateway_api::kind("GatewayClass");
        for kind in [
            Kind::VirtualService,
            Kind::DestinationRule,
            Kind::Gateway,
            Kind::Service,
            classes,
            // ingress-nginx's: a canary Ingress's weight is all Argo writes at a setWeight.
            crate::model::ingress::ingress_kind(),
            crate::model::ingress::ingress_class_kind(),
        ]
        .into_iter()
        .chain(gateway_api)
        {
            for o in self.api.list(kind, None, None) {
                (kind, o.namespace(), o.name(), o.resource_version()).hash(&mut h);
            }
        }
        // Role attribution (stable/canary) follows the rollouts' hashes.
        for ro in self.api.list(Kind::Rollout, None, None) {
            (
                ro.status()["stableRS"].as_str(),
                ro.status()["currentPodHash"].as_str(),
            )
                .hash(&mut h);
        }
        h.finish()
    }

    /// The next instant at which something happens by itself.
    pub fn next_wake(&self) -> Option<SimTime> {
        self.wake
    }

    /// Advances the clock by `d`, stopping at every instant where something happens.
    pub fn advance(&mut self, d: Duration) -> Result<(), SimError> {
        let end = self.now.after(d);
        self.advance_until(end, |_| false)?;
        Ok(())
    }

    /// Inside an advance (from a `done` check): the instant the clock moves to next, the next
    /// wake or the advance's end, whichever comes first. None outside an advance.
    pub fn next_instant(&self) -> Option<SimTime> {
        let end = self.horizon?;
        Some(self.wake.map_or(end, |wake| wake.min(end)))
    }

    /// Inside an advance: moves the clock to `t`, later than now and short of
    /// [`World::next_instant`], and settles there as a `wait` ending at `t` would. Nothing is
    /// due before the next instant, so only the time changes; a wall-clock pacer shows the
    /// world between instants this way, and a key's action then happens at `t`. Returns
    /// whether the clock moved (false for any other `t`).
    pub fn move_clock(&mut self, t: SimTime) -> Result<bool, SimError> {
        match self.next_instant() {
            Some(next) if self.now < t && t < next => {
                self.now = t;
                self.settle()?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Advances until `done(self)` holds (checked after every settled instant) or `end` is
    /// reached. Returns whether `done` held.
    pub fn advance_until(
        &mut self,
        end: SimTime,
        done: impl FnMut(&mut World) -> bool,
    ) -> Result<bool, SimError> {
        // Nested advances (a load's epochs inside a wait) each bound the clock by their end.
        let outer = self.horizon.replace(end);
        let result = self.advance_within(end, done);
        self.horizon = outer;
        result
    }

    fn advance_within(
        &mut self,
        end: SimTime,
        mut done: impl FnMut(&mut World) -> bool,
    ) -> Result<bool, SimError> {
        self.settle()?;
        loop {
            if done(self) {
                return Ok(true);
            }
            match self.wake {
                Some(t) if t <= end => self.stop_at(t)?,
                _ => {
                    self.stop_at(end)?;
                    return Ok(done(self));
                }
            }
        }
    }

    // --- kubectl argo rollouts ------------------------------------------------------------

    pub fn promote(&mut self, ns: &str, name: &str, full: bool) -> Result<(), SimError> {
        actions::promote(&mut self.api, ns, name, full)?;
        self.settle()
    }

    pub fn abort(&mut self, ns: &str, name: &str) -> Result<(), SimError> {
        actions::abort(&mut self.api, ns, name)?;
        self.settle()
    }

    pub fn retry(&mut self, ns: &str, name: &str) -> Result<(), SimError> {
        actions::retry(&mut self.api, ns, name)?;
        self.settle()
    }

    /// `kubectl argo rollouts undo`; returns what the plugin prints.
    pub fn undo(&mut self, ns: &str, name: &str, to_revision: i64) -> Result<String, SimError> {
        let printed = actions::undo(&mut self.api, ns, name, to_revision)
            .map_err(|e| SimError::Action(e.to_string()))?;
        self.settle()?;
        Ok(printed)
    }

    /// `kubectl argo rollouts restart [--in D]`.
    pub fn restart(&mut self, ns: &str, name: &str, delay: Duration) -> Result<(), SimError> {
        let at = self.now.after(delay);
        actions::restart(&mut self.api, ns, name, at)?;
        self.settle()
    }

    pub fn set_paused(&mut self, ns: &str, name: &str, paused: bool) -> Result<(), SimError> {
        actions::set_paused(&mut self.api, ns, name, paused)?;
        self.settle()
    }

    pub fn set_image(
        &mut self,
        ns: &str,
        name: &str,
        container: &str,
        image: &str,
    ) -> Result<(), SimError> {
        actions::set_image(&mut self.api, ns, name, container, image).map_err(|e| match e {
            actions::SetImageError::Api(a) => SimError::Api(a),
            other => SimError::Action(other.to_string()),
        })?;
        self.settle()
    }

    /// Crashes `count` pods of the rollout's stable or canary ReplicaSet.
    pub fn fail_pods(
        &mut self,
        ns: &str,
        name: &str,
        canary: bool,
        count: usize,
    ) -> Result<usize, SimError> {
        let rollout = self.api.get(Kind::Rollout, ns, name)?;
        let status = &rollout.value["status"];
        let hash = if canary {
            status["currentPodHash"].as_str()
        } else {
            status["stableRS"].as_str()
        }
        .unwrap_or("")
        .to_string();
        let rs = self
            .api
            .list(Kind::ReplicaSet, Some(ns), None)
            .into_iter()
            .find(|rs| rs.labels().get(replicaset::HASH_LABEL) == Some(&hash))
            .cloned();
        let removed = match rs {
            Some(rs) => replicaset::fail_pods(&mut self.api, &rs, count)?,
            None => 0,
        };
        self.settle()?;
        Ok(removed)
    }
}

impl crate::load::Cluster for World {
    fn now(&self) -> SimTime {
        World::now(self)
    }

    fn next_wake(&self) -> Option<SimTime> {
        World::next_wake(self)
    }

    fn api(&self) -> &ApiServer {
        &self.api
    }

    fn mesh(&self) -> &Mesh {
        &self.mesh
    }

    fn mesh_mut(&mut self) -> &mut Mesh {
        &mut self.mesh
    }

    fn observe(&mut self, traffic: &crate::load::EpochTraffic) {
        self.metrics.record(&self.api, traffic);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_between_instants_only_inside_an_advance() {
        let ms = SimTime::from_millis;
        let mut world = World::new(ClusterConfig::default(), 1);
        // Outside an advance there is no next instant to stop short of.
        assert_eq!(world.next_instant(), None);
        assert!(!world.move_clock(ms(40)).unwrap());
        let mut seen = Vec::new();
        world
            .advance_until(ms(10_000), |w| {
                seen.push((w.now(), w.next_instant()));
                if w.now() == SimTime::ZERO {
                    // The first route table reaches the proxies after the push delay.
                    assert_eq!(w.next_instant(), Some(ms(100)));
                    assert!(w.move_clock(ms(40)).unwrap());
                    // Not back, not onto the next instant, not past it.
                    for t in [20, 40, 100, 200] {
                        assert!(!w.move_clock(ms(t)).unwrap(), "{t} ms");
                    }
                    assert_eq!(w.now(), ms(40));
                }
                false
            })
            .unwrap();
        // The next instant came as before; then nothing until the advance's end.
        assert_eq!(
            seen,
            [
                (ms(0), Some(ms(100))),
                (ms(100), Some(ms(10_000))),
                (ms(10_000), Some(ms(10_000)))
            ]
        );
        assert_eq!(world.next_instant(), None, "the advance is over");
    }

    #[test]
    fn an_unsettled_world_names_what_each_round_writes() {
        let mut world = World::new(ClusterConfig::default(), 1);
        let manifests = crate::model::yaml::load_str(
            "rollout.yaml",
            include_str!("../../../../scenarios/manifests/seed-004-rollout.yaml"),
            "demo",
        )
        .unwrap();
        // Stored behind the controllers' backs: the next round has work to do.
        for m in manifests {
            world.api.create(m.object).unwrap();
        }
        let who = world.who_keeps_writing().unwrap();
        assert!(who.starts_with("each round writes "), "{who}");
        assert!(who.contains("Rollout demo/rollouts-demo"), "{who}");
        // Once settled, a round writes nothing, and says so.
        world.settle().unwrap();
        let who = world.who_keeps_writing().unwrap();
        assert!(who.contains("no object changed"), "{who}");
    }
}
