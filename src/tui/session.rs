//! A scenario running apart from the draw loop: a thread owns the plan's runner, paces the
//! world on a wall clock at the chosen speed ([`super::pace`]), applies the keys' actions
//! (promote, abort, retry: the calls a scenario step makes), records them, and sends a
//! [`Snapshot`] of the world as of the paced time at each frame. Nothing here touches the
//! terminal.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

use super::pace::{FRAME, Frame, Pace, SystemClock, Waited, WallClock, frame};
use super::record::{Recorded, recorded_scenario};
use super::snapshot::{RunFacts, Snapshot, StepLine, StepState, split_line};
use crate::clock::SimTime;
use crate::scenario::plan::StepKind;
use crate::scenario::{Files, Plan, Runner};
use crate::sim::World;

/// What the draw loop asks of the session.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// Run the steps one after another (true) or hold between and within them (false).
    Run(bool),
    /// Run the next step, then hold (held inside a step: finish that one, then hold).
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
    /// first step, paced on the machine's clock.
    ///
    /// `live`: the world also runs on real loopback sockets (pods, the router), as
    /// `canarysim run --live` runs it; load steps are sent as real requests.
    pub fn start(
        path: &Path,
        files: &'static (dyn Files + Sync),
        speed: f64,
        live: bool,
    ) -> Result<Session, String> {
        Session::start_with_clock(path, files, speed, live, Arc::new(SystemClock::new()))
    }

    /// [`Session::start`], paced on `clock` (tests pass one they move themselves).
    pub fn start_with_clock(
        path: &Path,
        files: &'static (dyn Files + Sync),
        speed: f64,
        live: bool,
        clock: Arc<dyn WallClock>,
    ) -> Result<Session, String> {
        let plan = crate::scenario::load(path, files).map_err(|e| e.to_string())?;
        let (controls, control_rx) = mpsc::channel();
        let (report_tx, reports) = mpsc::channel();
        let source = files.read(path).ok();
        let file = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("canarysim-session".into())
            .spawn(move || {
                let io = Io {
                    clock,
                    controls: control_rx,
                    reports: report_tx,
                    file,
                    source,
                };
                drive(&plan, io, speed, live);
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
    stop: bool,
    save: bool,
    /// How wall time maps to the world's time.
    pace: Pace,
    /// The world's time and store version at the last snapshot sent: a frame sends one
    /// only when the world moved on since.
    published: Option<(SimTime, u64)>,
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
            stop: false,
            save: false,
            pace: Pace::new(Duration::ZERO, SimTime::ZERO, speed),
            published: None,
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

/// The session thread's ends: its clock, the channels, the scenario file (for saving).
struct Io {
    clock: Arc<dyn WallClock>,
    controls: Receiver<Control>,
    reports: Sender<Report>,
    file: PathBuf,
    source: Option<String>,
}

/// What the step loop and the hook inside steps share, on the session's thread.
struct Ctx<'p> {
    plan: &'p Plan,
    io: Io,
    /// The rollout the keys act on.
    rollout: Option<String>,
    shared: RefCell<Shared>,
    facts: RefCell<Facts>,
    /// Live mode: the world's real side.
    real: Option<Rc<RefCell<crate::live::Live>>>,
}

impl Ctx<'_> {
    /// Takes every control waiting, without waiting.
    fn take_controls(&self) {
        loop {
            match self.io.controls.try_recv() {
                Ok(c) => self.apply(c),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.shared.borrow_mut().stop = true;
                    return;
                }
            }
        }
    }

    /// Waits for a control until `deadline` on the session's clock, and applies it.
    fn wait(&self, deadline: Duration) {
        match self.io.clock.wait(&self.io.controls, deadline) {
            Waited::Control(c) => self.apply(c),
            Waited::Deadline => {}
            Waited::Disconnected => self.shared.borrow_mut().stop = true,
        }
    }

    fn apply(&self, c: Control) {
        let mut s = self.shared.borrow_mut();
        match c {
            Control::Run(on) => s.running = on,
            Control::NextStep => s.queued_steps += 1,
            Control::Act(a) => s.pending.push(a),
            Control::Speed(x) => {
                let wall = self.io.clock.now();
                s.pace.set_speed(wall, x);
            }
            Control::Save => s.save = true,
            Control::Stop => s.stop = true,
        }
    }

    /// Writes the recorded scenario when the `s` key asked for it.
    fn save_if_asked(&self) {
        let s = &mut *self.shared.borrow_mut();
        if !std::mem::take(&mut s.save) {
            return;
        }
        let written = match &self.io.source {
            Some(text) => recorded_scenario(&self.io.file, text, self.plan, s.done, &s.recorded),
            None => Err("the scenario is not a file on disk".to_string()),
        };
        let _ = self.io.reports.send(Report::Saved(written));
    }

    /// Live mode: the real side follows the world.
    fn sync(&self, world: &World) {
        if let Some(real) = &self.real {
            real.borrow_mut().sync(world);
        }
    }

    /// Sends the snapshot of the world now.
    fn publish(&self, world: &World) {
        let mut s = self.shared.borrow_mut();
        s.published = Some((world.now(), world.api.resource_version()));
        let snapshot = snapshot(self.plan, world, &s, &self.facts.borrow());
        let _ = self.io.reports.send(Report::Snapshot(Box::new(snapshot)));
    }
}

/// The session thread: steps, pacing, actions, snapshots.
fn drive(plan: &Plan, io: Io, speed: f64, live: bool) {
    let mut runner = Runner::new(plan, None);
    let rollout = plan_rollout(&runner.world, &plan.namespace);
    let mut shared = Shared::new(speed);
    let real = if live {
        match start_live(plan, &mut runner, speed) {
            Ok((real, address)) => {
                shared.live_address = Some(address);
                Some(real)
            }
            Err(e) => {
                let _ = io.reports.send(Report::Failed(e));
                return;
            }
        }
    } else {
        None
    };
    let ctx = Rc::new(Ctx {
        plan,
        io,
        rollout,
        shared: RefCell::new(shared),
        facts: RefCell::new(Facts::default()),
        real,
    });
    {
        let ctx = ctx.clone();
        runner.on_wait(move |world| within_step(&ctx, world));
    }
    ctx.publish(&runner.world);
    loop {
        ctx.take_controls();
        let (stop, go, pending) = {
            let mut s = ctx.shared.borrow_mut();
            let go = s.running || s.queued_steps > 0;
            s.stepping = !s.running && go;
            if s.stepping {
                s.queued_steps -= 1;
            }
            (s.stop, go, std::mem::take(&mut s.pending))
        };
        if stop {
            return;
        }
        ctx.save_if_asked();
        for action in pending {
            let Some(name) = &ctx.rollout else { continue };
            let report = runner.act(action.step(name), action.verb()).clone();
            ctx.sync(&runner.world);
            let mut s = ctx.shared.borrow_mut();
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
            ctx.publish(&runner.world);
        }
        let finished = ctx.facts.borrow().finished.is_some();
        if go && !finished {
            {
                let now = runner.world.now();
                let wall = ctx.io.clock.now();
                let mut s = ctx.shared.borrow_mut();
                s.step_started_ms = now.as_duration().as_millis() as u64;
                // Each step counts from its start: time spent computing between steps (a
                // load's requests) is not made up for by rushing the next wait.
                s.pace.rebase(wall, now);
            }
            let Some(report) = runner.step().cloned() else {
                continue;
            };
            ctx.sync(&runner.world);
            after_step(
                &runner,
                &report,
                &mut ctx.shared.borrow_mut(),
                &mut ctx.facts.borrow_mut(),
            );
            ctx.publish(&runner.world);
        } else {
            // Held: wait for a key.
            ctx.wait(ctx.io.clock.now() + FRAME);
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

/// After each instant at which a step's wait goes on (the world settled there, its events
/// applied): show the world frame by frame as of the paced time, its clock moved short of
/// the next instant, until that instant's time comes; take the keys' actions at the frame
/// they arrive (the same calls as a step); hold while paused. True after an action (the
/// runner checks the wait's condition, then calls again), false when the clock may move
/// on to the next instant.
fn within_step(ctx: &Ctx<'_>, world: &mut World) -> bool {
    ctx.sync(world);
    loop {
        ctx.take_controls();
        let wall = ctx.io.clock.now();
        let held = {
            let mut s = ctx.shared.borrow_mut();
            if s.stop {
                return false;
            }
            // `n` while held inside a step: this step runs to its end, then holds.
            if !s.running && !s.stepping && s.queued_steps > 0 {
                s.queued_steps -= 1;
                s.stepping = true;
            }
            !s.running && !s.stepping
        };
        let deadline = if held {
            wall + FRAME
        } else {
            // None: not inside an advance, so there is nothing to pace here.
            let Some(next) = world.next_instant().filter(|next| *next > world.now()) else {
                return false;
            };
            let pace = ctx.shared.borrow().pace;
            match frame(&pace, wall, next) {
                Frame::Reach => return false,
                Frame::Show { at, until } => {
                    // An error is the runner's own advance's to report.
                    if world.move_clock(at).is_err() {
                        return false;
                    }
                    until
                }
            }
        };
        ctx.save_if_asked();
        if act_within_step(ctx, world) {
            ctx.publish(world);
            return true;
        }
        let stamp = (world.now(), world.api.resource_version());
        if ctx.shared.borrow().published != Some(stamp) {
            ctx.publish(world);
        }
        ctx.wait(deadline);
        if held {
            // The clock stood still while held: it counts on from here.
            let wall = ctx.io.clock.now();
            ctx.shared.borrow_mut().pace.rebase(wall, world.now());
        }
    }
}

/// The keys' actions waiting, taken on the world now and recorded inside the current step;
/// whether there were any.
fn act_within_step(ctx: &Ctx<'_>, world: &mut World) -> bool {
    let pending = std::mem::take(&mut ctx.shared.borrow_mut().pending);
    if pending.is_empty() {
        return false;
    }
    for action in pending {
        let Some(name) = ctx.rollout.as_deref() else {
            continue;
        };
        let ns = &ctx.plan.namespace;
        let done = match action {
            Action::Promote { full } => world.promote(ns, name, full),
            Action::Abort => world.abort(ns, name),
            Action::Retry => world.retry(ns, name),
        };
        let at_ms = world.now().as_duration().as_millis() as u64;
        let mut s = ctx.shared.borrow_mut();
        let (after_steps, started) = (s.done, s.step_started_ms);
        s.recorded.push(Recorded {
            after_steps,
            at_ms,
            step_started_ms: Some(started),
            action,
            rollout: name.to_string(),
        });
        s.step_events.push((
            at_ms,
            format!(
                "{} {} {name}: {}",
                world.now(),
                action.verb(),
                if done.is_ok() { "ok" } else { "failed" }
            ),
        ));
    }
    ctx.sync(world);
    true
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
    runner.load_with("live (tui)", move |world, workload, streams| {
        crate::live::real_load(world, &mut loading.borrow_mut(), &pacer, workload, streams)
    });
    Ok((live, address))
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
