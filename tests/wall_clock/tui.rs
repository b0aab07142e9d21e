//! The TUI without a terminal: `update` driven with keys, screens rendered into ratatui's
//! `TestBackend` and compared with committed snapshots (insta), and a session driven by
//! its controls as the keys drive it, on the machine's clock or on one the test moves
//! frame by frame ([`Lockstep`]: what each frame shows does not depend on the machine).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use canarysim::scenario::{self, Disk};
use canarysim::tui::pace::{Waited, WallClock};
use canarysim::tui::session::{Action, Control, Report, Session, snapshots_of};
use canarysim::tui::snapshot::{Snapshot, StepState};
use canarysim::tui::state::Screen;
use canarysim::tui::{App, Command, Entry, Key, Msg, update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::support;

static DISK: Disk = Disk;

fn scenario_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name)
}

fn walkthrough_entries() -> Vec<Entry> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut entries = canarysim::tui::entries(&dir, &Disk);
    // Paths differ between machines; the screens show names only.
    entries.retain(|e| !e.name.is_empty());
    entries
}

/// The screen as text, one line per row.
fn draw(app: &App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|f| canarysim::tui::render::render(app, f))
        .unwrap();
    let buffer = terminal.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..height {
        let mut line = String::new();
        for x in 0..width {
            line.push_str(buffer[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The walkthrough's run view after `steps` steps, from the same snapshots the session
/// sends (run at once, so the screen does not depend on the wall clock).
fn run_view_after(steps: usize) -> App {
    scenario_view_after("seed-004-walkthrough.yaml", steps)
}

/// A bundled scenario's run view after `steps` steps.
fn scenario_view_after(file: &str, steps: usize) -> App {
    let plan = scenario::load(&scenario_path(file), &Disk).unwrap();
    let path = PathBuf::from("scenarios").join(file);
    let mut app = App::new(vec![Entry {
        path: path.clone(),
        name: plan.name.clone(),
        description: String::new(),
        last: None,
    }]);
    let commands = update(&mut app, Msg::Key(Key::Enter));
    assert_eq!(commands, [Command::Start(path, false)]);
    for s in snapshots_of(&plan, steps) {
        update(&mut app, Msg::Snapshot(Box::new(s)));
    }
    app
}

#[test]
fn the_scenario_list_at_80x24_and_120x40() {
    let app = App::new(walkthrough_entries());
    insta::assert_snapshot!("list_80x24", draw(&app, 80, 24));
    insta::assert_snapshot!("list_120x40", draw(&app, 120, 40));
}

#[test]
fn the_filter_narrows_the_list() {
    let mut app = App::new(walkthrough_entries());
    let all = app.visible().len();
    update(&mut app, Msg::Key(Key::Char('/')));
    for c in "mirror".chars() {
        update(&mut app, Msg::Key(Key::Char(c)));
    }
    update(&mut app, Msg::Key(Key::Enter));
    let names: Vec<String> = app.visible().iter().map(|(_, e)| e.name.clone()).collect();
    assert!(all > 10 && names == ["mirror-route"], "{names:?}");
    insta::assert_snapshot!("list_filtered_80x24", draw(&app, 80, 24));
}

#[test]
fn the_run_view_at_the_second_pause_at_80x24_and_120x40() {
    // Step 14: the 40 % pause, its load and split verdict landed.
    let app = run_view_after(14);
    insta::assert_snapshot!("run_80x24", draw(&app, 80, 24));
    insta::assert_snapshot!("run_120x40", draw(&app, 120, 40));
}

#[test]
fn a_gateway_api_rollout_shows_the_httproutes_weight() {
    // gateway-api-plugin.yaml step 7: the 30 % pause, its load and verdict landed.
    let app = scenario_view_after("gateway-api-plugin.yaml", 7);
    insta::assert_snapshot!("gateway_api_run_120x40", draw(&app, 120, 40));
}

#[test]
fn an_nginx_rollout_shows_the_share_its_canary_ingress_states_and_the_one_drawn() {
    // nginx-max-traffic-weight.yaml step 7: setWeight 5 of maxTrafficWeight 10, its load
    // landed: set and canary Ingress 50 %, the router's draw (5 of 100) and the load 5 %.
    let app = scenario_view_after("nginx-max-traffic-weight.yaml", 7);
    insta::assert_snapshot!("nginx_run_120x40", draw(&app, 120, 40));
}

#[test]
fn the_help_over_the_run_view() {
    let mut app = run_view_after(3);
    update(&mut app, Msg::Key(Key::Char('?')));
    assert!(app.help);
    insta::assert_snapshot!("help_80x24", draw(&app, 80, 24));
    update(&mut app, Msg::Key(Key::Char('?')));
    assert!(!app.help);
}

#[test]
fn keys_map_to_the_sessions_controls() {
    let mut app = run_view_after(3);
    assert_eq!(
        update(&mut app, Msg::Key(Key::Char(' '))),
        [Command::Session(Control::Run(true))]
    );
    assert_eq!(
        update(&mut app, Msg::Key(Key::Char('p'))),
        [Command::Session(Control::Act(Action::Promote {
            full: false
        }))]
    );
    assert_eq!(
        update(&mut app, Msg::Key(Key::Char('P'))),
        [Command::Session(Control::Act(Action::Promote {
            full: true
        }))]
    );
    assert_eq!(
        update(&mut app, Msg::Key(Key::Char('a'))),
        [Command::Session(Control::Act(Action::Abort))]
    );
    assert_eq!(
        update(&mut app, Msg::Key(Key::Char('r'))),
        [Command::Session(Control::Act(Action::Retry))]
    );
    let speed = app.run.as_ref().unwrap().speed;
    update(&mut app, Msg::Key(Key::Char('+')));
    assert!(app.run.as_ref().unwrap().speed > speed);
    update(&mut app, Msg::Key(Key::Char('-')));
    update(&mut app, Msg::Key(Key::Char('-')));
    assert!(app.run.as_ref().unwrap().speed < speed);
    update(&mut app, Msg::Key(Key::Char('c')));
    assert!(app.run.as_ref().unwrap().no_mesh);
    assert_eq!(
        update(&mut app, Msg::Key(Key::Char('q'))),
        [Command::StopSession]
    );
    assert_eq!(app.screen, Screen::List);
    assert_eq!(update(&mut app, Msg::Key(Key::Char('q'))), [Command::Quit]);
    assert!(app.quit);
}

/// Drives a session by its controls until `until` holds for a snapshot (bounded).
fn wait_for(session: &Session, mut until: impl FnMut(&Snapshot) -> bool) -> Snapshot {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "the session did not get there in 60 s"
        );
        if let Some(Report::Snapshot(s)) = session.recv_timeout(Duration::from_millis(200)) {
            if until(&s) {
                return *s;
            }
        }
    }
}

fn current_step(s: &Snapshot) -> Option<usize> {
    s.steps
        .iter()
        .find(|l| l.state == StepState::Current)
        .map(|l| l.index)
}

#[test]
fn promote_at_a_pause_advances_the_step_and_abort_sets_the_weights_to_zero() {
    let path = scenario_path("seed-004-walkthrough.yaml");
    let session = Session::start(&path, &DISK, 300.0, false).unwrap();
    // Steps 1–4: healthy, checked, the update applied, paused at 20 %.
    for _ in 0..4 {
        session.send(Control::NextStep);
    }
    let paused = wait_for(&session, |s| current_step(s) == Some(5));
    let view = paused.rollout.clone().unwrap();
    assert_eq!((view.status.as_str(), view.step), ("Paused", Some((1, 9))));
    // p: the rollout leaves the indefinite pause for the next step, setWeight 40.
    session.send(Control::Act(Action::Promote { full: false }));
    let promoted = wait_for(&session, |s| {
        s.rollout.as_ref().is_some_and(|v| v.step == Some((2, 9)))
    });
    assert_eq!(promoted.weights[0].set, 40.0);
    assert_eq!(current_step(&promoted), Some(5), "a key is not a plan step");
    // a: aborted, every weight back to the stable, and the rollout Degraded.
    session.send(Control::Act(Action::Abort));
    let aborted = wait_for(&session, |s| {
        s.rollout.as_ref().is_some_and(|v| v.status == "Degraded")
    });
    assert_eq!(aborted.weights[0].virtual_service, Some(0.0));
    assert!(
        aborted
            .events
            .iter()
            .any(|e| e.contains("abort rollouts-demo: ok"))
    );
    let app = {
        let mut app = App::new(Vec::new());
        app.screen = Screen::Run;
        app.run = Some(canarysim::tui::state::RunState::new(path.clone(), 300.0));
        update(&mut app, Msg::Snapshot(Box::new(aborted)));
        app
    };
    let screen = draw(&app, 120, 40);
    assert!(screen.contains("Degraded"), "{screen}");
}

/// A copy of the walkthrough beside its manifests, in a temporary directory (a saved run
/// goes beside it).
fn walkthrough_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = support::temp_dir();
    let scenarios = dir.path().join("scenarios");
    std::fs::create_dir_all(scenarios.join("manifests")).unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    for entry in std::fs::read_dir(source.join("manifests")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(
            entry.path(),
            scenarios.join("manifests").join(entry.file_name()),
        )
        .unwrap();
    }
    let path = scenarios.join("walk.yaml");
    std::fs::copy(source.join("seed-004-walkthrough.yaml"), &path).unwrap();
    (dir, path)
}

#[test]
fn a_saved_run_replays_to_the_same_result() {
    let (_dir, path) = walkthrough_copy();
    let session = Session::start(&path, &DISK, 300.0, false).unwrap();
    for _ in 0..4 {
        session.send(Control::NextStep);
    }
    wait_for(&session, |s| current_step(s) == Some(5));
    // Promote by key (20 → 40), run two steps (the check fails: the key moved on; then
    // `wait 1s`, during which the canary's new pod turns ready), then abort.
    session.send(Control::Act(Action::Promote { full: false }));
    wait_for(&session, |s| {
        s.rollout.as_ref().is_some_and(|v| v.step == Some((2, 9)))
    });
    session.send(Control::NextStep);
    session.send(Control::NextStep);
    wait_for(&session, |s| current_step(s) == Some(7));
    session.send(Control::Act(Action::Abort));
    let live = wait_for(&session, |s| {
        s.rollout.as_ref().is_some_and(|v| v.status == "Degraded")
    });
    session.send(Control::Save);
    let saved = loop {
        match session.recv_timeout(Duration::from_secs(10)) {
            Some(Report::Saved(r)) => break r.unwrap(),
            Some(_) => continue,
            None => panic!("nothing saved"),
        }
    };
    drop(session);
    let text = std::fs::read_to_string(&saved).unwrap();
    assert!(
        text.contains("promote: rollouts-demo") && text.contains("abort: rollouts-demo"),
        "{text}"
    );
    // Replayed by the plain runner, it ends where the TUI's run ended.
    let plan = scenario::load(&saved, &Disk).unwrap();
    let replay = snapshots_of(&plan, plan.steps.len());
    let last = replay.last().unwrap();
    let (a, b) = (
        last.rollout.as_ref().unwrap(),
        live.rollout.as_ref().unwrap(),
    );
    assert_eq!(
        (a.status.as_str(), a.step, a.set_weight),
        (b.status.as_str(), b.step, b.set_weight)
    );
    assert_eq!(last.weights, live.weights);
    assert_eq!(last.time, live.time);
}

/// One GET through the live router; the version that answered.
fn version_via(address: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(address).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: rollouts-demo.local\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    s.read_to_string(&mut response).ok()?;
    let at = response.find("\"version\":\"")? + "\"version\":\"".len();
    Some(response[at..].split('"').next()?.to_string())
}

#[test]
fn a_live_session_serves_its_world_on_real_sockets_and_closes_them() {
    let path = scenario_path("seed-004-walkthrough.yaml");
    let session = Session::start(&path, &DISK, 300.0, true).unwrap();
    let first = wait_for(&session, |s| s.live.is_some());
    let live = first.live.clone().unwrap();
    let address = live
        .strip_prefix("router http://")
        .and_then(|a| a.split(',').next())
        .unwrap()
        .to_string();
    // Held at the 20 % pause (steps 1–4), at the instant the VirtualService changed: the
    // router has not received the new weights yet (push delay), so blue answers.
    for _ in 0..4 {
        session.send(Control::NextStep);
    }
    let paused = wait_for(&session, |s| current_step(s) == Some(5));
    assert_eq!(paused.weights[0].virtual_service, Some(20.0));
    assert_eq!(version_via(&address).as_deref(), Some("blue"), "{live}");
    // Steps 5 and 6 (`wait 1s`): the push has landed, both versions answer.
    session.send(Control::NextStep);
    session.send(Control::NextStep);
    wait_for(&session, |s| current_step(s) == Some(7));
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        if let Some(v) = version_via(&address) {
            seen.insert(v);
        }
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["blue", "yellow"],
        "both versions answer at 20 %"
    );
    drop(session);
    assert!(
        std::net::TcpStream::connect(&address).is_err(),
        "the router's port is closed once the session ends"
    );
}

// --- The session's clock, owned by the test -------------------------------------------

/// A wall clock that moves only when the test says: each time the session waits, it asks
/// the test how far time goes (to the wait's deadline, or short of it when a key comes
/// first). Every frame is at a wall time the test chose, however busy the machine is.
struct Lockstep {
    now: Mutex<Duration>,
    asks: Mutex<Sender<Duration>>,
    moves: Mutex<Receiver<Duration>>,
}

impl WallClock for Lockstep {
    fn now(&self) -> Duration {
        *self.now.lock().unwrap()
    }

    fn wait(&self, controls: &Receiver<Control>, deadline: Duration) -> Waited {
        loop {
            match controls.try_recv() {
                Ok(c) => return Waited::Control(c),
                Err(TryRecvError::Disconnected) => return Waited::Disconnected,
                Err(TryRecvError::Empty) => {}
            }
            if self.now() >= deadline {
                return Waited::Deadline;
            }
            if self.asks.lock().unwrap().send(deadline).is_err() {
                return Waited::Disconnected;
            }
            let Ok(to) = self.moves.lock().unwrap().recv() else {
                return Waited::Disconnected;
            };
            let mut now = self.now.lock().unwrap();
            *now = (*now).max(to);
        }
    }
}

/// A session on a [`Lockstep`] clock, and the test's hand on that clock.
struct Paced {
    // Dropped first: the session's thread, waiting on the clock, sees the test gone.
    moves: Sender<Duration>,
    asks: Receiver<Duration>,
    clock: Arc<Lockstep>,
    session: Session,
    /// The deadline of the wait the session is in, not answered yet.
    waiting: Option<Duration>,
}

impl Paced {
    fn start(path: &Path, speed: f64) -> Paced {
        let (asks_tx, asks) = mpsc::channel();
        let (moves, moves_rx) = mpsc::channel();
        let clock = Arc::new(Lockstep {
            now: Mutex::new(Duration::ZERO),
            asks: Mutex::new(asks_tx),
            moves: Mutex::new(moves_rx),
        });
        let session = Session::start_with_clock(path, &DISK, speed, false, clock.clone()).unwrap();
        let mut paced = Paced {
            moves,
            asks,
            clock,
            session,
            waiting: None,
        };
        paced.settle();
        paced
    }

    /// Until the session waits (everything it had to do, done and sent); its deadline.
    fn settle(&mut self) -> Duration {
        if let Some(deadline) = self.waiting {
            return deadline;
        }
        // Only a hang guard: nothing here depends on how fast the machine is.
        let deadline = self
            .asks
            .recv_timeout(Duration::from_secs(300))
            .expect("the session waits again");
        self.waiting = Some(deadline);
        deadline
    }

    fn answer(&mut self, to: Duration) {
        self.settle();
        self.waiting = None;
        self.moves.send(to).unwrap();
        self.settle();
    }

    fn wall(&self) -> Duration {
        self.clock.now()
    }

    /// One frame: the wall clock moves to the session's deadline.
    fn frame(&mut self) {
        let deadline = self.settle();
        self.answer(deadline);
    }

    /// A key now: the session takes it without the clock moving.
    fn key(&mut self, control: Control) {
        self.settle();
        self.session.send(control);
        self.answer(self.wall());
    }

    /// The snapshots sent since the last call, oldest first; and the other reports.
    fn drain(&mut self) -> (Vec<Snapshot>, Vec<Report>) {
        self.settle();
        let (mut snapshots, mut others) = (Vec::new(), Vec::new());
        while let Some(report) = self.session.try_recv() {
            match report {
                Report::Snapshot(s) => snapshots.push(*s),
                other => others.push(other),
            }
        }
        (snapshots, others)
    }

    /// Frames until wall time `t`; the snapshots they sent.
    fn run_until(&mut self, t: Duration) -> Vec<Snapshot> {
        let mut seen = Vec::new();
        while self.wall() < t {
            let deadline = self.settle();
            self.answer(deadline.min(t));
            seen.extend(self.drain().0);
        }
        seen
    }

    /// Frames until a snapshot satisfies `until` (at most `frames` frames); the snapshots
    /// sent on the way, the one found last (those after it in its frame are left out).
    fn run_to(&mut self, frames: usize, mut until: impl FnMut(&Snapshot) -> bool) -> Vec<Snapshot> {
        let mut seen = self.drain().0;
        for _ in 0..frames {
            if let Some(at) = seen.iter().position(&mut until) {
                seen.truncate(at + 1);
                return seen;
            }
            self.frame();
            seen.extend(self.drain().0);
        }
        panic!(
            "not reached in {frames} frames; last: {:?}",
            seen.last().map(|s| &s.time)
        );
    }
}

fn rollout_step(s: &Snapshot) -> Option<(u32, u32)> {
    s.rollout.as_ref().and_then(|v| v.step)
}

fn set_weight(s: &Snapshot) -> Option<i32> {
    s.rollout.as_ref().map(|v| v.set_weight)
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// The walkthrough's 40 % pause (`pause: {duration: 1m}`), reached at ×`speed`.
fn at_the_40_percent_pause(speed: f64) -> (Paced, Snapshot) {
    let mut paced = Paced::start(&scenario_path("seed-004-walkthrough.yaml"), speed);
    paced.key(Control::Run(true));
    let seen = paced.run_to(2000, |s| {
        set_weight(s) == Some(40) && s.pause_left.is_some()
    });
    let first = seen.last().unwrap().clone();
    (paced, first)
}

#[test]
fn at_x1_the_header_reads_the_clock_not_the_next_event() {
    let mut paced = Paced::start(&scenario_path("seed-004-walkthrough.yaml"), 1.0);
    paced.key(Control::Run(true));
    // The first event of the run is the pods turning ready at t+5s (pod_ready_after).
    for (wall, header) in [(1.0, "t+1s"), (2.5, "t+2.5s"), (4.975, "t+4.975s")] {
        let frames = paced.run_until(secs(wall));
        let last = frames.last().unwrap();
        assert_eq!(last.time, header, "{wall} s after space");
        assert!(
            frames.iter().all(|s| s.time_s <= wall),
            "a frame ahead of the clock"
        );
        let status = last.rollout.as_ref().map(|v| v.status.as_str());
        assert_eq!(
            status,
            Some("Progressing"),
            "healthy before its pods are ready"
        );
        assert_eq!(current_step(last), Some(1));
    }
    let ready = paced.run_until(secs(5.0));
    assert!(ready.iter().all(|s| s.time == "t+5s"));
    assert!(
        ready
            .iter()
            .any(|s| s.rollout.as_ref().is_some_and(|v| v.status == "Healthy")),
        "healthy once its pods are ready"
    );
    // Steps 2–4 at t+5s: the update applied; paused at 20 % once the canary's pod is ready
    // at t+10s, and not drawn so before.
    let frames = paced.run_until(secs(9.5));
    let last = frames.last().unwrap();
    assert_eq!(last.time, "t+9.5s");
    assert_eq!(current_step(last), Some(4));
    assert!(
        frames
            .iter()
            .all(|s| s.pause_left.is_none()
                && s.rollout.as_ref().is_none_or(|v| v.status != "Paused"))
    );
    let paused = paced.run_until(secs(10.0));
    let last = paused.last().unwrap();
    assert_eq!(last.time, "t+10s");
    assert_eq!(
        last.rollout.as_ref().map(|v| v.status.as_str()),
        Some("Paused")
    );
}

#[test]
fn at_x10_the_40_percent_pause_is_drawn_at_40_and_counts_down() {
    let (mut paced, first) = at_the_40_percent_pause(10.0);
    // The controller resumes the rollout once the minute is over (at t+82.001s).
    let ends = first.time_s + 60.0;
    let frames = paced.run_to(2000, |s| set_weight(s) == Some(60));
    let (during, after) = frames.split_at(frames.len() - 1);
    // Every frame of the pause: SetWeight 40, step 3/9, the VirtualService at 40.
    for s in during {
        assert!(s.time_s <= ends, "{} drawn in the pause", s.time);
        assert_eq!(
            (set_weight(s), rollout_step(s), s.weights[0].virtual_service),
            (Some(40), Some((3, 9)), Some(40.0)),
            "at {}",
            s.time
        );
    }
    // 60 % once the pause is over, not before.
    assert!(after[0].time_s > ends, "60 % drawn at {}", after[0].time_s);
    // The countdown: never up, and through (nearly) every second of the minute.
    let left: Vec<u64> = during
        .iter()
        .filter_map(|s| s.pause_left.as_deref())
        .map(|l| humantime::parse_duration(l).unwrap().as_secs())
        .collect();
    assert!(left.windows(2).all(|w| w[0] >= w[1]), "{left:?}");
    let mut distinct = left.clone();
    distinct.dedup();
    // (A load step moves the clock in one go: 6.25 s of the pause are its 100,000 requests.)
    assert!(distinct.len() >= 50, "{distinct:?}");
    assert!(left[0] >= 59 && left[left.len() - 1] == 0, "{distinct:?}");
    // The header runs frame by frame: at ×10 a 25 ms frame is 250 ms.
    let times: Vec<f64> = during.iter().map(|s| s.time_s).collect();
    let steps_of_a_frame = times
        .windows(2)
        .filter(|w| (w[1] - w[0] - 0.25).abs() < 1e-9)
        .count();
    assert!(steps_of_a_frame > 150, "{times:?}");
}

#[test]
fn a_key_while_a_far_event_is_awaited_acts_in_the_next_frame() {
    let (_dir, path) = walkthrough_copy();
    let mut paced = Paced::start(&path, 10.0);
    paced.key(Control::Run(true));
    // 18 s into the 40 % pause, 42 s before it ends by itself.
    let seen = paced.run_to(2000, |s| {
        set_weight(s) == Some(40) && s.pause_left.as_deref() == Some("42s")
    });
    let before = seen.last().unwrap().clone();
    paced.key(Control::Act(Action::Promote { full: false }));
    let (frames, _) = paced.drain();
    let after = frames.last().expect("a frame after the key");
    // Promoted at the time the key came, not at the pause's end.
    assert_eq!(after.time, before.time);
    assert_eq!(set_weight(after), Some(60));
    let acted = format!("{} promote rollouts-demo: ok", before.time);
    assert!(after.events.contains(&acted), "{:#?}", after.events);
    // `s` mid-wait: the file is written in the same frame.
    paced.key(Control::Save);
    let (_, others) = paced.drain();
    let saved = match others.as_slice() {
        [Report::Saved(Ok(saved))] => saved.clone(),
        other => panic!("{other:?}"),
    };
    let text = std::fs::read_to_string(saved).unwrap();
    assert!(text.contains("promote: rollouts-demo"), "{text}");
}

#[test]
fn a_key_that_meets_a_waits_condition_ends_that_step_at_once() {
    let (dir, _) = walkthrough_copy();
    let path = dir.path().join("scenarios").join("abort-mid-wait.yaml");
    std::fs::write(
        &path,
        "name: abort-mid-wait
seed: 1
namespace: my-demo
manifests:
  - file: manifests/seed-004-rollout.yaml
  - file: manifests/seed-004-services.yaml
  - file: manifests/seed-004-gateway.yaml
  - file: manifests/seed-004-virtualsvc.yaml
cluster: {pod_ready_after: 5s, push_delay: 100ms}
steps:
  - wait: {until: healthy, rollout: rollouts-demo, timeout: 2m}
  - apply: manifests/seed-004-rollout-update.yaml
  # Paused at 20 % from t+10s, indefinitely: nothing happens until the timeout, but a.
  - wait: {until: degraded, rollout: rollouts-demo, timeout: 5m}
  - expect: {phase: Degraded}
",
    )
    .unwrap();
    let mut paced = Paced::start(&path, 10.0);
    paced.key(Control::Run(true));
    let seen = paced.run_to(2000, |s| s.time_s >= 20.0);
    let before = seen.last().unwrap();
    assert_eq!(current_step(before), Some(3));
    paced.key(Control::Act(Action::Abort));
    // The wait ends in the frame the key came, at its time, and the last step runs.
    let (frames, _) = paced.drain();
    let end = frames.last().expect("a frame after the key");
    assert_eq!(end.finished, Some(true), "{:#?}", end.events);
    let ended = format!("{} step 3 wait until Degraded: ok", before.time);
    assert!(end.events.contains(&ended), "{:#?}", end.events);
}

#[test]
fn space_holds_the_clock_mid_wait_and_n_runs_that_step_to_its_end() {
    let (mut paced, _) = at_the_40_percent_pause(10.0);
    let seen = paced.run_to(2000, |s| s.pause_left.as_deref() == Some("30s"));
    let step = current_step(seen.last().unwrap());
    paced.key(Control::Run(false));
    let held = paced
        .drain()
        .0
        .pop()
        .unwrap_or_else(|| seen.last().unwrap().clone());
    // Five seconds held: nothing moves (no frame needs sending; none shows another time).
    let wall = paced.wall();
    let frames = paced.run_until(wall + secs(5.0));
    assert!(
        frames.iter().all(|s| s.time == held.time),
        "held at {}: {:?}",
        held.time,
        frames.iter().map(|s| &s.time).collect::<Vec<_>>()
    );
    // ×1, then n: the step goes on (its pause ends by itself), then the run holds after it.
    // The clock goes on from where it stood 5 s ago, 25 ms a frame.
    paced.key(Control::Speed(1.0));
    paced.key(Control::NextStep);
    paced.frame();
    let resumed = paced.drain().0;
    let first = resumed.first().expect("a frame once resumed");
    assert!(
        (first.time_s - held.time_s - 0.025).abs() < 1e-9,
        "{} after {}",
        first.time,
        held.time
    );
    paced.key(Control::Speed(300.0));
    let next = step.map(|i| i + 1);
    paced.run_to(5000, |s| current_step(s) == next);
    let wall = paced.wall();
    let frames = paced.run_until(wall + secs(5.0));
    assert!(frames.iter().all(|s| current_step(s) == next));
}

#[test]
fn pacing_the_world_frame_by_frame_changes_nothing_it_does() {
    let path = scenario_path("seed-004-walkthrough.yaml");
    let plan = scenario::load(&path, &Disk).unwrap();
    let at_once = snapshots_of(&plan, plan.steps.len());
    let at_once = at_once.last().unwrap();
    // ×2: 50 ms a frame, finer than any of the scenario's delays (the push takes 100 ms):
    // the clock is moved between the instants thousands of times, and a wait's condition
    // still ends it at the instant it holds.
    let mut paced = Paced::start(&path, 2.0);
    paced.key(Control::Run(true));
    let frames = paced.run_to(20_000, |s| s.finished.is_some());
    assert!(frames.len() > 3000, "{} frames", frames.len());
    let paced_end = frames.last().unwrap();
    assert_eq!(paced_end.finished, Some(true));
    assert_eq!(
        (
            &paced_end.time,
            &paced_end.rollout,
            &paced_end.weights,
            &paced_end.events,
            &paced_end.verdicts,
            &paced_end.violations
        ),
        (
            &at_once.time,
            &at_once.rollout,
            &at_once.weights,
            &at_once.events,
            &at_once.verdicts,
            &at_once.violations
        )
    );
}

#[test]
fn a_blue_green_rollout_shows_its_services_in_the_weight_panel() {
    let plan = scenario::load(&scenario_path("blue-green.yaml"), &Disk).unwrap();
    // Steps 1–8: deployed, updated, paused before the switch, loaded through the active
    // Service (its verdict) and through the preview Service.
    let snapshots = snapshots_of(&plan, 8);
    let paused = &snapshots[4];
    let weights: Vec<(String, f64, Option<f64>, Option<f64>)> = paused
        .weights
        .iter()
        .map(|w| (w.route.clone(), w.set, w.virtual_service, w.router))
        .collect();
    assert_eq!(
        weights,
        [
            (
                "Service rollout-bluegreen-active".into(),
                0.0,
                None,
                Some(0.0)
            ),
            (
                "Service rollout-bluegreen-preview".into(),
                100.0,
                None,
                Some(100.0)
            ),
        ]
    );
    let through_preview = snapshots.last().unwrap();
    assert_eq!(through_preview.observed.map(|o| o.0), Some(100.0));
    let mut app = App::new(vec![Entry {
        path: PathBuf::from("scenarios/blue-green.yaml"),
        name: plan.name.clone(),
        description: String::new(),
        last: None,
    }]);
    update(&mut app, Msg::Key(Key::Enter));
    for s in snapshots {
        update(&mut app, Msg::Snapshot(Box::new(s)));
    }
    let screen = draw(&app, 120, 40);
    assert!(screen.contains("new ReplicaSet's share"), "{screen}");
    assert!(
        screen.contains("Service rollout-bluegreen-preview"),
        "{screen}"
    );
    assert!(
        screen.contains("pods    ") && screen.contains(" 100.0 % (ready)"),
        "the preview's ready pods, all new:\n{screen}"
    );
    assert!(
        !screen.contains("vs     "),
        "no VirtualService line:\n{screen}"
    );
}
