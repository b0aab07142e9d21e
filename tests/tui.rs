//! The TUI without a terminal: `update` driven with keys, screens rendered into ratatui's
//! `TestBackend` and compared with committed snapshots (insta), and a session driven by
//! its controls as the keys drive it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use canarysim::scenario::{self, Disk};
use canarysim::tui::session::{Action, Control, Report, Session, snapshots_of};
use canarysim::tui::snapshot::{Snapshot, StepState};
use canarysim::tui::state::Screen;
use canarysim::tui::{App, Command, Entry, Key, Msg, update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

mod support;

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
    let plan = scenario::load(&scenario_path("seed-004-walkthrough.yaml"), &Disk).unwrap();
    let mut app = App::new(vec![Entry {
        path: PathBuf::from("scenarios/seed-004-walkthrough.yaml"),
        name: plan.name.clone(),
        description: String::new(),
        last: None,
    }]);
    let commands = update(&mut app, Msg::Key(Key::Enter));
    assert_eq!(
        commands,
        [Command::Start(
            PathBuf::from("scenarios/seed-004-walkthrough.yaml"),
            false
        )]
    );
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
    assert_eq!(aborted.weights[0].virtual_service, 0.0);
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

#[test]
fn a_saved_run_replays_to_the_same_result() {
    // A copy of the walkthrough beside its manifests (the saved file goes beside it).
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
    assert_eq!(paused.weights[0].virtual_service, 20.0);
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
