//! Runs a [`Plan`] on a simulated [`World`] and records what happened as a [`RunReport`]
//! (plain data: the text, JSON and TUI front ends render it; the runner prints nothing).
//!
//! The runner drives the world one step at a time through [`Runner::step`], so a TUI can
//! show the state between steps; [`run`] does all steps at once.

use std::collections::BTreeSet;

use super::expect;
use super::format::Role;
use super::invariants;
use super::plan::{Plan, PlannedStep, StepKind};
use super::split;
use crate::clock::SimTime;
use crate::controller::replicaset::PodLifecycle;
use crate::load::{self, LoadResult};
use crate::model::support::Warning;
use crate::model::{Kind, ObjectKey};
use crate::outcome::LoadReport;
pub use crate::outcome::{RunReport, StepReport, Violation};
use crate::rollout_info::{self, RolloutView};
use crate::sim::{ClusterConfig, World};
use crate::verify::SplitVerdict;

/// Runs every step.
pub fn run(plan: &Plan, seed: Option<u64>) -> RunReport {
    let mut runner = Runner::new(plan, seed);
    while runner.step().is_some() {}
    runner.finish()
}

/// A run in progress.
pub struct Runner<'p> {
    plan: &'p Plan,
    pub world: World,
    seed: u64,
    next: usize,
    steps: Vec<StepReport>,
    violations: Vec<Violation>,
    active: BTreeSet<String>,
    /// (rollout, step index) pairs already shown, so each pause is shown once.
    shown: BTreeSet<(String, Option<i32>)>,
    setup_error: Option<String>,
    /// The last load step's result, for `expect_split`.
    last_load: Option<LoadResult>,
    /// The plan's warnings, then those the route translation produced so far.
    warnings: Vec<Warning>,
    /// Filled by the step being executed.
    load_report: Option<LoadReport>,
    split_verdict: Option<SplitVerdict>,
    /// Called at every instant the world reaches while a step waits (live mode paces the
    /// world on the wall clock and syncs its real side here).
    on_instant: Option<InstantHook<'p>>,
    /// Called after each instant at which a wait goes on (the TUI paces the world here).
    on_wait: Option<WaitHook<'p>>,
    /// Sends a load step's requests instead of the simulated data plane (live mode).
    load_with: Option<LoadHook<'p>>,
    /// `live (time scale 60)` when the run is not simulated.
    mode: Option<String>,
    /// Waits that carried background traffic so far (each gets its own random stream).
    background_waits: usize,
}

/// See [`Runner::on_instant`].
type InstantHook<'p> = Box<dyn FnMut(&mut World) + 'p>;
/// See [`Runner::on_wait`].
type WaitHook<'p> = Box<dyn FnMut(&mut World) -> bool + 'p>;
/// See [`Runner::load_with`].
type LoadHook<'p> = Box<
    dyn FnMut(&mut World, &load::Workload, &mut load::Streams) -> Result<LoadResult, String> + 'p,
>;

impl<'p> Runner<'p> {
    pub fn new(plan: &'p Plan, seed: Option<u64>) -> Self {
        Runner::with_watch_log(plan, seed, false)
    }

    /// [`Runner::new`], with the API server's watch log kept from the first write (for
    /// watches over HTTP).
    pub fn with_watch_log(plan: &'p Plan, seed: Option<u64>, watch_log: bool) -> Self {
        let seed = seed.unwrap_or(plan.seed);
        let config = ClusterConfig {
            pods: PodLifecycle {
                ready_after: plan.pod_ready_after,
                never_ready: plan.never_ready.clone(),
                crash_looping: plan.crash_looping.clone(),
                ..PodLifecycle::default()
            },
            push_delay: plan.push_delay,
            istio_weight_rules: plan.istio_weight_rules,
            watch_log,
            record_events: watch_log,
            instant_budget: plan.instant_budget,
            routes: crate::mesh::TranslateOptions {
                gateway_api_split: match plan.cluster.gateway_api_split {
                    crate::scenario::format::GatewayApiSplitSpec::Random => {
                        crate::mesh::GatewayApiSplit::Random
                    }
                    crate::scenario::format::GatewayApiSplitSpec::RoundRobin => {
                        crate::mesh::GatewayApiSplit::RoundRobin
                    }
                },
            },
            ..ClusterConfig::default()
        };
        let mut world = World::new(config, seed);
        world.scripted_results = plan.cluster.analysis_results.clone();
        let setup_error = world.apply(&plan.manifests).err().map(|e| e.to_string());
        let mut runner = Runner {
            plan,
            world,
            seed,
            next: 0,
            steps: Vec::new(),
            violations: Vec::new(),
            active: BTreeSet::new(),
            shown: BTreeSet::new(),
            setup_error,
            warnings: plan.warnings.clone(),
            last_load: None,
            load_report: None,
            split_verdict: None,
            on_instant: None,
            on_wait: None,
            load_with: None,
            mode: None,
            background_waits: 0,
        };
        runner.check_invariants();
        runner.collect_route_notes();
        runner
    }

    /// Calls `hook` at every instant the world reaches while a step waits. The hook may act
    /// on the world, as a step would.
    pub fn on_instant(&mut self, hook: impl FnMut(&mut World) + 'p) {
        self.on_instant = Some(Box::new(hook));
    }

    /// Calls `hook` after each instant at which a step's wait goes on (its condition unmet,
    /// its end not reached), before the clock moves to the next instant. The hook may move
    /// the clock short of that instant ([`World::move_clock`]) and act on the world (the
    /// TUI paces the world on the wall clock here, and its keys promote, abort or retry
    /// mid-wait). It returns true to be called again before the clock moves on (after an
    /// action: the wait's condition is checked first, and may hold now), false when the
    /// clock may move to the next instant.
    pub fn on_wait(&mut self, hook: impl FnMut(&mut World) -> bool + 'p) {
        self.on_wait = Some(Box::new(hook));
    }

    /// Sends every load step through `load` (which may move the world's clock while the
    /// requests flow) instead of the simulated data plane; the report names `mode`. It gets
    /// the random streams the simulated load would have drawn from (a Poisson arrival's gaps).
    pub fn load_with(
        &mut self,
        mode: &str,
        load: impl FnMut(&mut World, &load::Workload, &mut load::Streams) -> Result<LoadResult, String>
        + 'p,
    ) {
        self.mode = Some(mode.to_string());
        self.load_with = Some(Box::new(load));
        // What only simulated traffic feeds is said, not silently missing.
        for m in self.plan.all_manifests() {
            if !matches!(
                m.object.kind,
                Kind::AnalysisTemplate | Kind::ClusterAnalysisTemplate | Kind::AnalysisRun
            ) {
                continue;
            }
            let metrics = m.object.spec()["metrics"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for (i, metric) in metrics.iter().enumerate() {
                if metric["provider"]["prometheus"].is_object() {
                    let field = format!("spec.metrics[{i}].provider.prometheus");
                    self.warnings.push(Warning::new(
                        m.locate(&format!("/spec/metrics/{i}/provider/prometheus")),
                        format!("{} \"{}\"", m.object.kind, m.object.name()),
                        field,
                        "in a live run the built-in Prometheus counts no requests (it is fed by simulated traffic): this metric's queries find no data".into(),
                    ));
                }
            }
        }
        if self.plan.background.is_some() {
            self.warnings.push(Warning::new(
                self.plan.background_location.clone(),
                "scenario".into(),
                "traffic.background".into(),
                "flows in simulated runs only: a live run sends the load steps' requests alone"
                    .into(),
            ));
        }
    }

    /// The plan being run.
    pub fn plan(&self) -> &Plan {
        self.plan
    }

    /// Runs the next step; None when all have run.
    pub fn step(&mut self) -> Option<&StepReport> {
        let step = self.plan.steps.get(self.next)?;
        self.next += 1;
        let (passed, detail) = match &self.setup_error {
            Some(e) => (
                false,
                format!("not run: applying the manifests failed: {e}"),
            ),
            None => self.execute(step),
        };
        Some(self.report(step, passed, detail))
    }

    /// Books a step that ran: its result, the route notes it caused, the views of rollouts
    /// it paused, its load and split figures.
    fn report(&mut self, step: &PlannedStep, passed: bool, mut detail: String) -> &StepReport {
        for w in self.collect_route_notes() {
            detail.push_str(&format!("\nwarning: {}", w.text()));
        }
        let views = self.pause_views();
        self.steps.push(StepReport {
            index: step.index,
            action: step.action.to_string(),
            summary: step.summary(),
            time: self.world.now().to_string(),
            time_ms: self.world.now().as_duration().as_millis() as u64,
            passed,
            detail,
            views,
            load: self.load_report.take(),
            split: self.split_verdict.take(),
        });
        self.steps.last().expect("just pushed")
    }

    /// The plan's next step (None: all have run).
    pub fn next_step(&self) -> Option<&'p PlannedStep> {
        self.plan.steps.get(self.next)
    }

    /// The steps run so far, in order (actions taken with [`Runner::act`] among them).
    pub fn reports(&self) -> &[StepReport] {
        &self.steps
    }

    /// The invariant violations found so far.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Runs an action the plan does not hold (a key pressed in the TUI: promote, abort,
    /// retry…) through the same code path as a step, at the world's instant; it is
    /// reported like one, with index 0.
    pub fn act(&mut self, kind: StepKind, action: &'static str) -> &StepReport {
        let step = PlannedStep {
            index: 0,
            action,
            location: crate::model::yaml::Location {
                file: "(interactive)".into(),
                line: 0,
                column: 0,
                template: None,
            },
            kind,
        };
        let (passed, detail) = self.execute(&step);
        self.report(&step, passed, detail)
    }

    /// The report so far (all steps run: the final one).
    pub fn finish(&self) -> RunReport {
        let final_views = self
            .rollout_names()
            .iter()
            .filter_map(|name| {
                rollout_info::view(
                    &self.world.api,
                    &self.plan.namespace,
                    name,
                    self.world.now(),
                )
                .ok()
            })
            .collect();
        RunReport {
            name: self.plan.name.clone(),
            description: self.plan.description.clone(),
            file: self.plan.file.clone(),
            seed: self.seed,
            passed: self.setup_error.is_none()
                && self.steps.iter().all(|s| s.passed)
                && self.next >= self.plan.steps.len(),
            steps: self.steps.clone(),
            violations: self.violations.clone(),
            warnings: self.warnings.clone(),
            final_views,
            mode: self.mode.clone(),
        }
    }

    fn rollout_names(&self) -> Vec<String> {
        self.world
            .api
            .list(Kind::Rollout, Some(&self.plan.namespace), None)
            .iter()
            .map(|o| o.name().to_string())
            .collect()
    }

    /// What the route translation skipped or could not honour (the notes of every route
    /// table pushed so far) becomes warnings, located at the object's manifest. Returns the
    /// new ones.
    fn collect_route_notes(&mut self) -> Vec<Warning> {
        let mut new = Vec::new();
        let manifests = self.plan.all_manifests();
        {
            for note in &self.world.route_notes {
                let location = manifests
                    .iter()
                    .rev()
                    .find(|m| m.object.key() == note.object)
                    .map(|m| m.locate(""))
                    .unwrap_or_else(|| {
                        crate::model::SourceMap::synthetic(&self.plan.file).locate("")
                    });
                let w = Warning::new(
                    location,
                    format!("{} \"{}\"", note.object.kind, note.object.name),
                    String::new(),
                    note.message.clone(),
                );
                if !self.warnings.contains(&w) {
                    self.warnings.push(w.clone());
                    new.push(w);
                }
            }
        }
        new
    }

    /// `expect: {warnings: [...]}`: every warning so far matches one of the substrings, and
    /// every substring matches a warning.
    fn check_warnings(&self, expected: &[String]) -> (Vec<String>, Vec<String>) {
        let mut failures = Vec::new();
        for w in &self.warnings {
            let text = w.to_string();
            if !expected.iter().any(|e| text.contains(e.as_str())) {
                failures.push(format!("warnings: unexpected \"{text}\""));
            }
        }
        for e in expected {
            if !self
                .warnings
                .iter()
                .any(|w| w.to_string().contains(e.as_str()))
            {
                failures.push(format!(
                    "warnings: expected one containing \"{e}\", got none"
                ));
            }
        }
        let checked = vec![format!("warnings: {} as expected", self.warnings.len())];
        (failures, checked)
    }

    /// Records invariants that newly stopped holding.
    fn check_invariants(&mut self) {
        let now: SimTime = self.world.now();
        let current: BTreeSet<String> = invariants::violations(&self.world.api)
            .into_iter()
            .collect();
        for message in current.difference(&self.active) {
            self.violations.push(Violation {
                time: now.to_string(),
                time_ms: now.as_duration().as_millis() as u64,
                message: message.clone(),
            });
        }
        self.active = current;
    }

    /// Advances the clock to `end` (or until `done`), checking invariants at every instant.
    /// `kubectl argo rollouts status`: without `--watch` one line; with it, each distinct
    /// line until Healthy or Degraded (or the timeout). The output and the exit code are the
    /// plugin's; the step passes when the exit code is the one expected.
    fn status_command(
        &mut self,
        ns: &str,
        rollout: &str,
        watch: bool,
        timeout: std::time::Duration,
        expected_exit: i32,
    ) -> Result<String, String> {
        // What the plugin reads at one instant: (status, message, the line it prints).
        let observe = |w: &World| -> (String, String, String) {
            match rollout_info::view(&w.api, ns, rollout, w.now()) {
                Ok(v) => {
                    let text = if v.message.is_empty()
                        || (!watch && (v.status == "Healthy" || v.status == "Degraded"))
                    {
                        v.status.clone()
                    } else {
                        format!("{} - {}", v.status, v.message)
                    };
                    (v.status, v.message, text)
                }
                Err(e) => (String::new(), String::new(), format!("Error: {e}")),
            }
        };
        let settled = |s: &str| s == "Healthy" || s == "Degraded";
        let (mut status, mut message, first) = observe(&self.world);
        let mut printed = vec![first];
        if watch && !settled(&status) {
            let end = self.world.now().after(timeout);
            let mut seen = Vec::new();
            self.advance(end, |w| {
                let observed = observe(w);
                let done = settled(&observed.0);
                seen.push(observed);
                done
            })?;
            for (s, m, text) in seen {
                if printed.last() != Some(&text) {
                    printed.push(text);
                }
                (status, message) = (s, m);
            }
        }
        let error = if status == "Degraded" {
            Some(format!(
                "The rollout is in a degraded state with message: {message}"
            ))
        } else if status != "Healthy" && watch {
            Some("Rollout status watch exceeded timeout".to_string())
        } else {
            None
        };
        let exit = i32::from(error.is_some());
        if let Some(e) = error {
            printed.push(format!("Error: {e}"));
        }
        let detail = format!("{}\nexit {exit}", printed.join("\n"));
        if exit == expected_exit {
            Ok(detail)
        } else {
            Err(format!("{detail} (expected exit {expected_exit})"))
        }
    }

    fn advance(
        &mut self,
        end: SimTime,
        mut done: impl FnMut(&World) -> bool,
    ) -> Result<bool, String> {
        if let Some(traffic) = self.plan.background.as_ref() {
            if self.load_with.is_none() {
                self.check_background_budget(traffic, end)?;
            }
        }
        let mut found = Vec::new();
        let mut active = self.active.clone();
        let (on_instant, on_wait) = (&mut self.on_instant, &mut self.on_wait);
        // `traffic.background` flows while the clock moves (simulated runs only: a live
        // run's requests are real).
        let background = self
            .plan
            .background
            .as_ref()
            .filter(|_| self.load_with.is_none());
        let mut streams = background.map(|_| {
            self.background_waits += 1;
            load::Streams::new(self.seed, &format!("background/{}", self.background_waits))
        });
        let (lb, mode) = self.plan.data_plane();
        let backends = &self.plan.backends;
        let world = &mut self.world;
        let mut book = |w: &World| {
            let current: BTreeSet<String> = invariants::violations(&w.api).into_iter().collect();
            for m in current.difference(&active) {
                found.push(Violation {
                    time: w.now().to_string(),
                    time_ms: w.now().as_duration().as_millis() as u64,
                    message: m.clone(),
                });
            }
            active = current;
        };
        let check = |w: &mut World| {
            book(w);
            // What a hook writes (a key's action) is booked at the time it acted.
            let mut wrote = |w: &mut World, hook: &mut dyn FnMut(&mut World) -> bool| {
                let version = w.api.resource_version();
                let again = hook(w);
                let wrote = w.api.resource_version() != version;
                if wrote {
                    book(w);
                }
                (wrote, again)
            };
            if let Some(hook) = on_instant.as_mut() {
                wrote(w, &mut |w| {
                    hook(w);
                    false
                });
            }
            if done(w) {
                return true;
            }
            // The wait goes on: the pacer may move the clock towards the next instant.
            let Some(pacer) = on_wait.as_mut() else {
                return false;
            };
            loop {
                let (wrote, again) = wrote(w, pacer);
                if wrote && done(w) {
                    return true;
                }
                if !again {
                    return false;
                }
            }
        };
        let result = match (background, streams.as_mut()) {
            (Some(traffic), Some(streams)) => {
                world.advance_with_traffic(end, check, traffic, backends, lb, mode, streams)
            }
            _ => world.advance_until(end, check),
        };
        self.violations.extend(found);
        self.active = active;
        result.map_err(|e| e.to_string())
    }

    // Long: one arm per step kind, as the scenario format lists them.
    fn execute(&mut self, step: &PlannedStep) -> (bool, String) {
        self.world.allow_instants();
        let ns = self.plan.namespace.clone();
        let result: Result<String, String> = match &step.kind {
            StepKind::Apply(m) => self
                .world
                .apply(m)
                .map(|_| "applied".into())
                .map_err(|e| e.to_string()),
            StepKind::SetImage(s) => self
                .world
                .set_image(&ns, &s.rollout, &s.container, &s.image)
                .map(|_| format!("{} image is {}", s.container, s.image))
                .map_err(|e| e.to_string()),
            StepKind::Promote { rollout, full } => self
                .world
                .promote(&ns, rollout, *full)
                .map(|_| "promoted".into())
                .map_err(|e| e.to_string()),
            StepKind::Abort(r) => self
                .world
                .abort(&ns, r)
                .map(|_| "aborted".into())
                .map_err(|e| e.to_string()),
            StepKind::Retry(r) => self
                .world
                .retry(&ns, r)
                .map(|_| "retried".into())
                .map_err(|e| e.to_string()),
            StepKind::Pause(r) => self
                .world
                .set_paused(&ns, r, true)
                .map(|_| format!("rollout '{r}' paused"))
                .map_err(|e| e.to_string()),
            StepKind::Undo {
                rollout,
                to_revision,
            } => self
                .world
                .undo(&ns, rollout, *to_revision)
                .map_err(|e| e.to_string()),
            StepKind::Restart { rollout, delay } => self
                .world
                .restart(&ns, rollout, *delay)
                .map(|_| format!("rollout '{rollout}' restarts"))
                .map_err(|e| e.to_string()),
            StepKind::Status {
                rollout,
                watch,
                timeout,
                exit,
            } => self.status_command(&ns, rollout, *watch, *timeout, *exit),
            StepKind::FailPods(f) => {
                match self
                    .world
                    .fail_pods(&ns, &f.rollout, f.role == Role::Canary, f.count)
                {
                    Ok(n) if n < f.count => {
                        // Clamped, never silent: the scenario asked for pods that do not exist.
                        let role = if f.role == Role::Canary {
                            "canary"
                        } else {
                            "stable"
                        };
                        let message = format!(
                            "asked to crash {} pod(s), but the {role} had {n}: {n} crashed",
                            f.count
                        );
                        self.warnings.push(Warning::new(
                            step.location.clone(),
                            format!("step {}", step.index),
                            "fail_pods.count".into(),
                            message.clone(),
                        ));
                        Ok(message)
                    }
                    Ok(n) => Ok(format!("{n} pod(s) crashed")),
                    Err(e) => Err(e.to_string()),
                }
            }
            StepKind::Wait(d) => {
                let end = self.world.now().after(*d);
                self.advance(end, |_| false).map(|_| format!("now {}", end))
            }
            StepKind::WaitUntil {
                phase,
                rollout,
                timeout,
            } => {
                let name = rollout
                    .clone()
                    .or_else(|| self.rollout_names().into_iter().next())
                    .unwrap_or_default();
                let want = phase.as_status();
                let end = self.world.now().after(*timeout);
                let start = self.world.now();
                let (ns2, name2) = (ns.clone(), name.clone());
                let reached = self.advance(end, move |w| {
                    w.api
                        .get(Kind::Rollout, &ns2, &name2)
                        .map(|r| r.status()["phase"] == want)
                        .unwrap_or(false)
                });
                match reached {
                    Ok(true) => Ok(format!(
                        "{want} after {}",
                        crate::model::duration::format(self.world.now().since(start))
                    )),
                    Ok(false) => Err(format!(
                        "timed out after {}: rollout is {}{}",
                        crate::model::duration::format(*timeout),
                        self.phase_of(&name),
                        self.last_error_of(&name)
                            .map(|e| format!("; the controller's last error: {e}"))
                            .unwrap_or_default()
                    )),
                    Err(e) => Err(e),
                }
            }
            StepKind::Load(w) => self.load(step.index, w),
            StepKind::ExpectSplit(e) => match &self.last_load {
                None => Err("no load step ran before this expect_split".into()),
                Some(result) => {
                    let (passed, detail, verdict) = split::expect_split(result, e);
                    self.split_verdict = Some(verdict);
                    if passed { Ok(detail) } else { Err(detail) }
                }
            },
            StepKind::Expect(e) => {
                let rollout = e.rollout.clone().or_else(|| {
                    let names = self.rollout_names();
                    (names.len() == 1).then(|| names[0].clone())
                });
                let (mut failures, mut checked) = expect::check(
                    &self.world,
                    &ns,
                    rollout.as_deref(),
                    e,
                    self.violations.len(),
                );
                if let Some(expected) = &e.warnings {
                    let (f, c) = self.check_warnings(expected);
                    failures.extend(f);
                    if failures.is_empty() {
                        checked.extend(c);
                    }
                }
                if failures.is_empty() {
                    Ok(checked.join(", "))
                } else {
                    Err(failures.join("\n"))
                }
            }
        };
        self.check_invariants();
        match result {
            Ok(detail) => (true, detail),
            Err(detail) => (false, detail),
        }
    }

    /// Runs a load step through the simulated data plane.
    fn load(&mut self, index: usize, w: &load::Workload) -> Result<String, String> {
        let plan = self.plan;
        let (lb, mode) = plan.data_plane();
        // Each load step has its own stream: adding a step does not shift the others.
        let mut rng = load::Streams::new(self.seed, &format!("load/{index}"));
        self.check_route_section(w)?;
        let result = match self.load_with.as_mut() {
            Some(live) => live(&mut self.world, w, &mut rng)?,
            None => {
                self.check_request_budget(w)?;
                self.world
                    .run_load(w, &plan.backends, lb, mode, &mut rng)
                    .map_err(|e| e.to_string())?
            }
        };
        let now = self.world.now();
        let mut found = Vec::new();
        if result.no_healthy_upstream > 0 {
            found.push(format!(
                "{} request(s) answered 503 \"no healthy upstream\" by the router",
                result.no_healthy_upstream
            ));
        }
        if result.unresolved_backend > 0 {
            found.push(format!(
                "{} request(s) answered 500 by the router: their backendRef does not resolve (or, per connection, rejected)",
                result.unresolved_backend
            ));
        }
        if result.upstream_failed > 0 {
            found.push(format!(
                "{} request(s) answered 503 by the proxy: their pod had gone before the route table dropping it took effect",
                result.upstream_failed
            ));
        }
        if !result.balanced() {
            found.push(format!(
                "sent {} != answered {} + failed {}",
                result.sent,
                result.answered,
                result.failed()
            ));
        }
        for message in found {
            self.violations.push(Violation {
                time: now.to_string(),
                time_ms: now.as_duration().as_millis() as u64,
                message,
            });
        }
        // The figures travel as data (`StepReport::load`); each front end renders them.
        self.load_report = Some(split::load_report(&result));
        self.last_load = Some(result);
        Ok(String::new())
    }

    /// Refuses a load through a gateway that has routes for its host, but none of the
    /// section its protocol is routed by (an HTTP load where the VirtualService bound to the
    /// gateway has only `tcp` or `tls` routes, or the reverse): every request would fail
    /// with "route not found", which reads as a verdict on the split rather than on the
    /// scenario.
    fn check_route_section(&self, w: &load::Workload) -> Result<(), String> {
        use crate::mesh::Protocol;
        let Some(table) = self.world.mesh.table_at(self.world.now()) else {
            return Ok(());
        };
        let gateway = match &w.origin {
            load::OriginChoice::Gateway(Some(g)) => Some(g.as_str()),
            load::OriginChoice::Gateway(None) | load::OriginChoice::Auto
                if table.has_virtual_services() || w.origin != load::OriginChoice::Auto =>
            {
                table.gateway_for_load(&w.traffic.host, &w.namespace, w.protocol)
            }
            _ => None,
        };
        let Some(gateway) = gateway else {
            return Ok(());
        };
        let name = |p: Protocol| match p {
            Protocol::Http => "http",
            Protocol::Tls => "tls",
            Protocol::Tcp => "tcp",
        };
        // The sections `RouteTable::route` reads for this protocol.
        let wanted: &[Protocol] = match w.protocol {
            Protocol::Http => &[Protocol::Http],
            Protocol::Tls => &[Protocol::Tls, Protocol::Tcp],
            Protocol::Tcp => &[Protocol::Tcp],
        };
        let at = |p: Protocol| table.virtual_services_at(gateway, &w.traffic.host, &w.namespace, p);
        if wanted.iter().any(|p| !at(*p).is_empty()) {
            return Ok(());
        }
        let mut others: Vec<String> = Vec::new();
        let mut sections: Vec<&str> = Vec::new();
        for p in [Protocol::Http, Protocol::Tls, Protocol::Tcp] {
            let found = at(p);
            if found.is_empty() || wanted.contains(&p) {
                continue;
            }
            sections.push(name(p));
            for key in found {
                let vs = format!("VirtualService {}/{}", key.namespace, key.name);
                if !others.contains(&vs) {
                    others.push(vs);
                }
            }
        }
        if others.is_empty() {
            // The gateway has nothing for the host at all: no route, as a cluster answers.
            return Ok(());
        }
        let protocol = name(w.protocol);
        let vs = others.join(", ");
        let only = sections.join(" and ");
        let lacks = format!(
            "{vs} routes {} through gateway {gateway} with {only} routes only, no {protocol} route",
            w.traffic.host
        );
        // `gateway_for` prefers HTTP routes; another gateway may have this protocol's.
        let elsewhere = table
            .gateway_serving(&w.traffic.host, &w.namespace, w.protocol)
            .map(|g| format!(", or send it through gateway {g} (`gateway: {g}`), which has one"))
            .unwrap_or_default();
        Err(match w.protocol {
            Protocol::Http => format!(
                "refused: {lacks}: every request of this load would get 404 (route not found); send it with `protocol: {}` (and the route's `port`), or give the VirtualService an http route for the host{elsewhere}",
                sections.last().copied().unwrap_or("tcp")
            ),
            _ => format!(
                "refused: {lacks}: every connection of this load would find no route; send it with `protocol: http`, or give the VirtualService a {protocol} route for the host{elsewhere}"
            ),
        })
    }

    /// Refuses a simulated load estimated above the plan's request budget, before it sends
    /// anything (a closed loop's count depends on how fast the pods answer now).
    fn check_request_budget(&self, w: &load::Workload) -> Result<(), String> {
        let backends = &self.plan.backends;
        let mean_answer_us = self
            .world
            .api
            .pod_facts(None, None)
            .into_iter()
            .filter_map(|(_, pod)| pod.image.as_deref())
            .map(|image| backends.for_image(image).latency_us)
            .min()
            .unwrap_or(backends.default.latency_us);
        let estimate = w.estimated_requests(mean_answer_us);
        let budget = self.plan.request_budget;
        if estimate <= budget {
            return Ok(());
        }
        Err(format!(
            "refused: this load would send about {} simulated requests, more than the request budget of {} per load step; `canarysim run --request-budget {}` raises it",
            estimate, budget, estimate
        ))
    }

    /// Refuses a step whose clock move would carry more background requests than the
    /// plan's request budget, before it sends any: `traffic.background` flows through every
    /// wait, so a long wait (or a wait-until's timeout) at its rate would run for hours.
    fn check_background_budget(
        &self,
        traffic: &load::Workload,
        end: SimTime,
    ) -> Result<(), String> {
        // Background traffic is an open loop (the plan asks for a rate).
        let (load::Arrival::Constant(rate) | load::Arrival::Poisson(rate)) =
            traffic.traffic.arrival
        else {
            return Ok(());
        };
        let time = end.since(self.world.now());
        let estimate = traffic.requests_in(time, 1);
        let budget = self.plan.request_budget;
        if estimate <= budget {
            return Ok(());
        }
        Err(format!(
            "refused: traffic.background at {rate} requests per second would send about {estimate} simulated requests in the {} this step may wait, more than the request budget of {budget} per step; a shorter wait or timeout, a lower rate, or `canarysim run --request-budget {estimate}` raises it",
            crate::model::duration::format(time),
        ))
    }

    fn phase_of(&self, name: &str) -> String {
        self.world
            .api
            .get(Kind::Rollout, &self.plan.namespace, name)
            .ok()
            .and_then(|r| r.status()["phase"].as_str().map(str::to_string))
            .unwrap_or_else(|| "unknown".into())
    }

    /// The error the rollout's last reconcile returned, if it returned one: why a wait did not
    /// end (a write the API server refused, a route not found).
    fn last_error_of(&self, name: &str) -> Option<&str> {
        self.world
            .errors
            .get(&ObjectKey::new(Kind::Rollout, &self.plan.namespace, name))
            .map(String::as_str)
    }

    /// Views of rollouts that are paused at a step not shown before.
    fn pause_views(&mut self) -> Vec<RolloutView> {
        let mut out = Vec::new();
        for name in self.rollout_names() {
            let Ok(ro) = self
                .world
                .api
                .get(Kind::Rollout, &self.plan.namespace, &name)
            else {
                continue;
            };
            if ro.status()["phase"] != "Paused" {
                continue;
            }
            let index = ro.status()["currentStepIndex"].as_i64().map(|i| i as i32);
            if !self.shown.insert((name.clone(), index)) {
                continue;
            }
            if let Ok(v) = rollout_info::view(
                &self.world.api,
                &self.plan.namespace,
                &name,
                self.world.now(),
            ) {
                out.push(v);
            }
        }
        out
    }
}
