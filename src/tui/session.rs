//! A scenario running apart from the draw loop: a thread owns the plan's runner, paces the
//! world on the wall clock at the chosen speed, applies the keys' actions (promote, abort,
//! retry: the calls a scenario step makes), records them, and sends a [`Snapshot`] at the
//! instants it reaches. Nothing here touches the terminal.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

use super::record::{Recorded, recorded_scenario};
use super::snapshot::{RunFacts, Snapshot, StepLine, StepState, split_line};
use crate::scenario::plan::StepKind;
use crate::scenario::{Files, Plan, Runner};
use crate::sim::World;

/// What the draw loop asks of the session.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// Run the steps one after another (true) or hold between and within them (false).
    Run(bool),
    /// Run the next step, then hold.
    NextStep,
    Act(Action),
    /// Virtual seconds per wall second.
    Speed(f64),
    /// Write what was run, actions included, as a scenario file.
    Save,
    Stop,
}

/// A key's action on the rollout, as `kubectl argo rollouts` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Promote { full: bool },
    Abort,
    Retry,
}

impl Action {
    pub fn step(self, rollout: &str) -> StepKind {
        match self {
            Action::Promote { full } => StepKind::Promote {
                rollout: rollout.to_string(),
                full,
            },
            Action::Abort => StepKind::Abort(rollout.to_string()),
            Action::Retry => StepKind::Retry(rollout.to_string()),
        }
    }

    pub fn verb(self) -> &'static str {
        match self {
            Action::Promote { .. } => "promote",
            Action::Abort => "abort",
            Action::Retry => "retry",
        }
    }
}

/// What the session tells the draw loop.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    Snapshot(Box<Snapshot>),
    /// Where the recorded scenario was written, or why not.
    Saved(Result<PathBuf, String>),
    /// The session could not start (live mode could not listen).
    Failed(String),
}

/// The running session; dropping it stops the thread.
pub struct Session {
    controls: Sender<Control>,
    reports: Receiver<Report>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Session {
    /// Loads the scenario (a clear error when it cannot) and starts it, held before its
    /// first step.
    ///
    /// `live`: the world also runs on real loopback sockets (pods, the router), as
    /// `canarysim run --live` runs it; load steps are sent as real requests.
    pub fn start(
        path: &Path,
        files: &'static (dyn Files + Sync),
        speed: f64,
        live: bool,
    ) -> Result<Session, String> {
        let plan = crate::scenario::load(path, files).map_err(|e| e.to_string())?;
        let (controls, control_rx) = mpsc::channel();
        let (report_tx, reports) = mpsc::channel();
        let source = files.read(path).ok();
        let file = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("canarysim-session".into())
            .spawn(move || {
                drive(&plan, &file, source, (speed, live), control_rx, &report_tx);
            })
            .map_err(|e| e.to_string())?;
        Ok(Session {
            controls,
            reports,
            thread: Some(thread),
        })
    }

    pub fn send(&self, control: Control) {
        let _ = self.controls.send(control);
    }

    /// The next report, if one is waiting.
    pub fn try_recv(&self) -> Option<Report> {
        self.reports.try_recv().ok()
    }

    /// Waits up to `timeout` for a report.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Report> {
        self.reports.recv_timeout(timeout).ok()
    }
}

impl Drop for Session {
    /// Stops the session and waits for it (its sockets closed) up to 2 s; a live load in
    /// flight finishes on its own thread rather than freeze the screen.
    fn drop(&mut self) {
        let _ = self.controls.send(Control::Stop);
        if let Some(t) = self.thread.take() {
            let deadline = Instant::now() + Duration::from_secs(2);
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

/// What the hook and the step loop share.
struct Shared {
    running: bool,
    /// Steps asked for with `n`, to run before holding again.
    queued_steps: usize,
    /// The step running now was asked for with `n` (it runs through while held).
    stepping: bool,
    speed: f64,
    stop: bool,
    save: bool,
    /// The wall instant and virtual time the pacing counts from.
    anchor: (Instant, f64),
    last_snapshot: Option<Instant>,
    /// Actions taken, for the recorded scenario.
    recorded: Vec<Recorded>,
    /// Step results, verdicts and actions, as event lines with their virtual time (ms).
    step_events: Vec<(u64, String)>,
    /// Plan steps finished (their results, in order), and the virtual time the current one
    /// started (ms).
    done: usize,
    results: Vec<bool>,
    step_started_ms: u64,
    /// Actions to take in the step loop (between steps).
    pending: Vec<Action>,
    /// Live mode: where the router listens.
    live_address: Option<String>,
}

impl Shared {
    fn new(speed: f64) -> Shared {
        Shared {
            running: false,
            queued_steps: 0,
            stepping: false,
            speed,
            stop: false,
            save: false,
            anchor: (Instant::now(), 0.0),
            last_snapshot: None,
            recorded: Vec::new(),
            step_events: Vec::new(),
            done: 0,
            results: Vec::new(),
            step_started_ms: 0,
            pending: Vec::new(),
            live_address: None,
        }
    }
}

/// The session thread: steps, pacing, actions, snapshots.
fn drive(
    plan: &Plan,
    file: &Path,
    source: Option<String>,
    (speed, live): (f64, bool),
    controls: Receiver<Control>,
    reports: &Sender<Report>,
) {
    let controls = Rc::new(controls);
    let shared = Rc::new(RefCell::new(Shared::new(speed)));
    let facts = Rc::new(RefCell::new(Facts::default()));
    let mut runner = Runner::new(plan, None);
    let rollout = plan_rollout(&runner.world, &plan.namespace);
    let real = if live {
        match start_live(plan, &mut runner, speed) {
            Ok((real, address)) => {
                shared.borrow_mut().live_address = Some(address);
                Some(real)
            }
            Err(e) => {
                let _ = reports.send(Report::Failed(e));
                return;
            }
        }
    } else {
        None
    };
    {
        let real = real.clone();
        let (shared, facts, controls, reports) = (
            shared.clone(),
            facts.clone(),
            controls.clone(),
            reports.clone(),
        );
        let rollout = rollout.clone();
        runner.on_instant(move |world| {
            within_step(
                world,
                plan,
                &shared,
                &facts.borrow(),
                &controls,
                &reports,
                rollout.as_deref(),
            );
            if let Some(real) = &real {
                real.borrow_mut().sync(world);
            }
        });
    }
    publish(plan, &runner.world, &shared, &facts, reports);
    loop {
        take_controls(&mut shared.borrow_mut(), &controls);
        let (stop, save, go, pending) = {
            let mut s = shared.borrow_mut();
            let go = s.running || s.queued_steps > 0;
            s.stepping = !s.running && go;
            if s.stepping {
                s.queued_steps -= 1;
            }
            (
                s.stop,
                std::mem::take(&mut s.save),
                go,
                std::mem::take(&mut s.pending),
            )
        };
        if stop {
            return;
        }
        if save {
            let s = shared.borrow();
            let written = match &source {
                Some(text) => recorded_scenario(file, text, plan, s.done, &s.recorded),
                None => Err("the scenario is not a file on disk".to_string()),
            };
            let _ = reports.send(Report::Saved(written));
        }
        for action in pending {
            let Some(name) = &rollout else { continue };
            let report = runner.act(action.step(name), action.verb()).clone();
            if let Some(real) = &real {
                real.borrow_mut().sync(&runner.world);
            }
            let mut s = shared.borrow_mut();
            let after_steps = s.done;
            s.recorded.push(Recorded {
                after_steps,
                at_ms: report.time_ms,
                step_started_ms: None,
                action,
                rollout: name.clone(),
            });
            s.step_events.push((
                report.time_ms,
                format!(
                    "{} {}: {}",
                    report.time,
                    report.summary,
                    if report.passed { "ok" } else { "failed" }
                ),
            ));
            drop(s);
            publish(plan, &runner.world, &shared, &facts, reports);
        }
        let finished = facts.borrow().finished.is_some();
        if go && !finished {
            {
                let mut s = shared.borrow_mut();
                s.step_started_ms = runner.world.now().as_duration().as_millis() as u64;
                s.anchor = (
                    Instant::now(),
                    runner.world.now().as_duration().as_secs_f64(),
                );
            }
            let Some(report) = runner.step().cloned() else {
                continue;
            };
            if let Some(real) = &real {
                real.borrow_mut().sync(&runner.world);
            }
            after_step(
                &runner,
                &report,
                &mut shared.borrow_mut(),
                &mut facts.borrow_mut(),
            );
            publish(plan, &runner.world, &shared, &facts, reports);
        } else {
            // Held: wait for a key.
            match controls.recv_timeout(Duration::from_millis(50)) {
                Ok(c) => apply_control(&mut shared.borrow_mut(), c),
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

/// Books a finished step: its result, its load's figures, its verdict, the violations.
fn after_step(runner: &Runner, report: &crate::outcome::StepReport, s: &mut Shared, f: &mut Facts) {
    s.done += 1;
    s.results.push(report.passed);
    let at = report.time_ms;
    s.step_events.push((
        at,
        format!(
            "{} step {} {}: {}",
            report.time,
            report.index,
            report.summary,
            if report.passed { "ok" } else { "FAILED" }
        ),
    ));
    if let Some(load) = &report.load {
        let line = format!(
            "step {} load: {} sent, {} answered, {}",
            report.index, load.sent, load.answered, load.path
        );
        s.step_events.push((at, format!("{} {line}", report.time)));
        f.verdicts.push(line);
        f.last_load = Some(load.clone());
    }
    if let Some(v) = &report.split {
        let line = split_line(report.index, v);
        s.step_events.push((at, format!("{} {line}", report.time)));
        f.verdicts.push(line);
    }
    f.violations = runner
        .violations()
        .iter()
        .map(|v| format!("{} {}", v.time, v.message))
        .collect();
    if s.done == runner.plan().steps.len() {
        f.finished = Some(runner.finish().passed);
        s.running = false;
    }
}

/// The snapshot after each of the plan's first `steps` steps, run at once (no pacing): the
/// same figures the TUI shows, for tests and for rendering a run without a terminal.
pub fn snapshots_of(plan: &Plan, steps: usize) -> Vec<Snapshot> {
    let mut runner = Runner::new(plan, None);
    let mut s = Shared::new(1.0);
    let mut f = Facts::default();
    let mut out = vec![snapshot(plan, &runner.world, &s, &f)];
    for _ in 0..steps {
        let Some(report) = runner.step().cloned() else {
            break;
        };
        after_step(&runner, &report, &mut s, &mut f);
        out.push(snapshot(plan, &runner.world, &s, &f));
    }
    out
}

/// What the session learned from finished steps.
#[derive(Default)]
struct Facts {
    last_load: Option<crate::outcome::LoadReport>,
    verdicts: Vec<String>,
    violations: Vec<String>,
    finished: Option<bool>,
}

/// At an instant inside a step: take the keys' actions on the world at once (the same
/// calls as a step), wait for the wall clock at the chosen speed (holding while paused),
/// and send a snapshot now and then.
fn within_step(
    world: &mut World,
    plan: &Plan,
    shared: &RefCell<Shared>,
    facts: &Facts,
    controls: &Receiver<Control>,
    reports: &Sender<Report>,
    rollout: Option<&str>,
) {
    loop {
        take_controls(&mut shared.borrow_mut(), controls);
        let pending = std::mem::take(&mut shared.borrow_mut().pending);
        for action in pending {
            let Some(name) = rollout else { continue };
            let ns = &plan.namespace;
            let done = match action {
                Action::Promote { full } => world.promote(ns, name, full),
                Action::Abort => world.abort(ns, name),
                Action::Retry => world.retry(ns, name),
            };
            let mut s = shared.borrow_mut();
            let (after_steps, started) = (s.done, s.step_started_ms);
            s.recorded.push(Recorded {
                after_steps,
                at_ms: world.now().as_duration().as_millis() as u64,
                step_started_ms: Some(started),
                action,
                rollout: name.to_string(),
            });
            s.step_events.push((
                world.now().as_duration().as_millis() as u64,
                format!(
                    "{} {} {name}: {}",
                    world.now(),
                    action.verb(),
                    if done.is_ok() { "ok" } else { "failed" }
                ),
            ));
        }
        let s = shared.borrow();
        if s.stop {
            return;
        }
        let virtual_now = world.now().as_duration().as_secs_f64();
        let due =
            s.anchor.0 + Duration::from_secs_f64(((virtual_now - s.anchor.1) / s.speed).max(0.0));
        let held = !s.running && !s.stepping;
        let snapshot_due = s
            .last_snapshot
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(50));
        drop(s);
        if snapshot_due {
            shared.borrow_mut().last_snapshot = Some(Instant::now());
            send_snapshot(plan, world, &shared.borrow(), facts, reports);
        }
        let now = Instant::now();
        if held {
            // Paused inside a step: the clock stands still until space or n.
            std::thread::sleep(Duration::from_millis(20));
            let mut s = shared.borrow_mut();
            s.anchor = (Instant::now(), virtual_now);
            continue;
        }
        if due <= now {
            return;
        }
        std::thread::sleep((due - now).min(Duration::from_millis(20)));
    }
}

/// Sends the snapshot of now, from the step loop.
fn publish(
    plan: &Plan,
    world: &World,
    shared: &RefCell<Shared>,
    facts: &RefCell<Facts>,
    reports: &Sender<Report>,
) {
    send_snapshot(plan, world, &shared.borrow(), &facts.borrow(), reports);
}

fn send_snapshot(plan: &Plan, world: &World, s: &Shared, f: &Facts, reports: &Sender<Report>) {
    let _ = reports.send(Report::Snapshot(Box::new(snapshot(plan, world, s, f))));
}

fn snapshot(plan: &Plan, world: &World, s: &Shared, f: &Facts) -> Snapshot {
    let mut snapshot = Snapshot::take(
        world,
        RunFacts {
            scenario: &plan.name,
            namespace: &plan.namespace,
            steps: step_lines(plan, &s.results),
            last_load: f.last_load.as_ref(),
            verdicts: f.verdicts.clone(),
            violations: f.violations.clone(),
            step_events: &s.step_events,
            finished: f.finished,
        },
    );
    snapshot.live = s.live_address.clone();
    snapshot
}

/// The world on real sockets: pods and the router up, load steps sent as real requests.
/// Returns the live side and the router's address (with the gateways' TLS/TCP listeners).
fn start_live(
    plan: &Plan,
    runner: &mut Runner<'_>,
    speed: f64,
) -> Result<(Rc<RefCell<crate::live::Live>>, String), String> {
    let mut live = crate::live::Live::start(&plan.backends, &plan.namespace, plan.seed)
        .map_err(|e| e.to_string())?;
    let (lb, mode) = plan.data_plane();
    live.set_data_plane(lb, mode);
    live.sync(&runner.world);
    let mut address = format!("router http://{}", live.address());
    for (gateway, port, at) in live.l4_listeners() {
        address.push_str(&format!(", {gateway} port {port} on {at}"));
    }
    let live = Rc::new(RefCell::new(live));
    let pacer = crate::live::Pacer::new(
        &runner.world,
        speed,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let loading = live.clone();
    runner.load_with("live (tui)", move |world, workload| {
        crate::live::real_load(world, &mut loading.borrow_mut(), &pacer, workload)
    });
    Ok((live, address))
}

fn take_controls(s: &mut Shared, controls: &Receiver<Control>) {
    loop {
        match controls.try_recv() {
            Ok(c) => apply_control(s, c),
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => {
                s.stop = true;
                return;
            }
        }
    }
}

fn apply_control(s: &mut Shared, c: Control) {
    match c {
        Control::Run(on) => s.running = on,
        Control::NextStep => s.queued_steps += 1,
        Control::Act(a) => s.pending.push(a),
        Control::Speed(x) if x > 0.0 => s.speed = x,
        Control::Speed(_) => {}
        Control::Save => s.save = true,
        Control::Stop => s.stop = true,
    }
}

/// The plan's steps, the first ones finished with these results.
fn step_lines(plan: &Plan, results: &[bool]) -> Vec<StepLine> {
    plan.steps
        .iter()
        .enumerate()
        .map(|(i, step)| StepLine {
            index: step.index,
            summary: step.summary(),
            state: match results.get(i) {
                Some(&passed) => StepState::Done { passed },
                None if i == results.len() => StepState::Current,
                None => StepState::Next,
            },
        })
        .collect()
}

/// The rollout the keys act on: the scenario's first.
fn plan_rollout(world: &World, ns: &str) -> Option<String> {
    world
        .api
        .list(crate::model::Kind::Rollout, Some(ns), None)
        .first()
        .map(|r| r.name().to_string())
}
