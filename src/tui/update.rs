//! The TUI's logic, pure: a message (a key, a snapshot from the session) changes the state
//! and says what the outside world should do ([`Command`]). No terminal, no thread, no
//! clock: tests drive it directly.

use std::path::PathBuf;

use super::session::{Action, Control};
use super::snapshot::Snapshot;
use super::state::{App, ChartPoint, RunState, SPEEDS, Screen};

/// A key, as the TUI understands it (the terminal file maps crossterm's events to these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Enter,
    Esc,
    Up,
    Down,
    Backspace,
    CtrlC,
}

/// What happens to the TUI.
#[derive(Debug, Clone, PartialEq)]
pub enum Msg {
    Key(Key),
    Snapshot(Box<Snapshot>),
    /// The recorded scenario was written (or why not).
    Saved(Result<PathBuf, String>),
    /// A session could not start.
    StartFailed(String),
    /// The running scenario finished after this much wall time.
    Finished(bool, std::time::Duration),
}

/// What the outside world should do after an update.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Start a session on this scenario (held before its first step); live: on real
    /// sockets.
    Start(PathBuf, bool),
    /// Tell the running session.
    Session(Control),
    /// End the session (back to the list).
    StopSession,
    Quit,
}

/// Applies one message; returns what to do.
pub fn update(app: &mut App, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::Key(Key::CtrlC) => {
            app.quit = true;
            vec![Command::StopSession, Command::Quit]
        }
        Msg::Key(key) if app.help => {
            if matches!(key, Key::Char('?') | Key::Esc | Key::Char('q')) {
                app.help = false;
            }
            Vec::new()
        }
        Msg::Key(key) => match app.screen {
            Screen::List => list_key(app, key),
            Screen::Run => run_key(app, key),
        },
        Msg::Snapshot(s) => {
            if let Some(run) = &mut app.run {
                absorb(run, *s);
            }
            Vec::new()
        }
        Msg::Saved(Ok(path)) => {
            app.status = format!("saved {}", path.display());
            Vec::new()
        }
        Msg::Saved(Err(e)) | Msg::StartFailed(e) => {
            app.status = e;
            if app.run.as_ref().is_some_and(|r| r.snapshot.is_none()) {
                app.run = None;
                app.screen = Screen::List;
            }
            Vec::new()
        }
        Msg::Finished(passed, wall) => {
            if let Some(run) = &app.run {
                if let Some(e) = app.entries.iter_mut().find(|e| e.path == run.path) {
                    e.last = Some((passed, wall));
                }
            }
            Vec::new()
        }
    }
}

fn list_key(app: &mut App, key: Key) -> Vec<Command> {
    if app.filtering {
        match key {
            Key::Char(c) => app.filter.push(c),
            Key::Backspace => {
                app.filter.pop();
            }
            Key::Enter | Key::Esc => app.filtering = false,
            _ => {}
        }
        app.selected = 0;
        return Vec::new();
    }
    let visible = app.visible().len();
    match key {
        Key::Char('q') => {
            app.quit = true;
            vec![Command::Quit]
        }
        Key::Char('?') => {
            app.help = true;
            Vec::new()
        }
        Key::Char('/') => {
            app.filtering = true;
            Vec::new()
        }
        Key::Esc => {
            app.filter.clear();
            Vec::new()
        }
        Key::Up | Key::Char('k') => {
            app.selected = app.selected.saturating_sub(1);
            Vec::new()
        }
        Key::Down | Key::Char('j') => {
            if app.selected + 1 < visible {
                app.selected += 1;
            }
            Vec::new()
        }
        Key::Enter => {
            let Some((_, entry)) = app.visible().get(app.selected).copied() else {
                return Vec::new();
            };
            let path = entry.path.clone();
            app.run = Some(RunState::new(path.clone(), SPEEDS[3]));
            app.screen = Screen::Run;
            app.status.clear();
            vec![Command::Start(path, app.live)]
        }
        _ => Vec::new(),
    }
}

fn run_key(app: &mut App, key: Key) -> Vec<Command> {
    let Some(run) = &mut app.run else {
        app.screen = Screen::List;
        return Vec::new();
    };
    let act = |a| vec![Command::Session(Control::Act(a))];
    match key {
        Key::Char('q') | Key::Esc => {
            app.run = None;
            app.screen = Screen::List;
            vec![Command::StopSession]
        }
        Key::Char('?') => {
            app.help = true;
            Vec::new()
        }
        Key::Char(' ') => {
            run.running = !run.running;
            vec![Command::Session(Control::Run(run.running))]
        }
        Key::Char('n') => {
            run.running = false;
            vec![
                Command::Session(Control::Run(false)),
                Command::Session(Control::NextStep),
            ]
        }
        Key::Char('p') => act(Action::Promote { full: false }),
        Key::Char('P') => act(Action::Promote { full: true }),
        Key::Char('a') => act(Action::Abort),
        Key::Char('r') => act(Action::Retry),
        Key::Char('+') | Key::Char('=') => {
            run.speed = next_speed(run.speed, true);
            vec![Command::Session(Control::Speed(run.speed))]
        }
        Key::Char('-') => {
            run.speed = next_speed(run.speed, false);
            vec![Command::Session(Control::Speed(run.speed))]
        }
        Key::Char('c') => {
            run.no_mesh = !run.no_mesh;
            Vec::new()
        }
        Key::Char('s') => vec![Command::Session(Control::Save)],
        _ => Vec::new(),
    }
}

fn next_speed(speed: f64, up: bool) -> f64 {
    if up {
        SPEEDS
            .iter()
            .copied()
            .find(|s| *s > speed)
            .unwrap_or(SPEEDS[SPEEDS.len() - 1])
    } else {
        SPEEDS
            .iter()
            .rev()
            .copied()
            .find(|s| *s < speed)
            .unwrap_or(SPEEDS[0])
    }
}

/// Takes a snapshot in: the chart and the per-version history grow.
fn absorb(run: &mut RunState, s: Snapshot) {
    let set = s.weights.first().map_or(0.0, |w| w.set);
    let router = s.weights.first().and_then(|w| w.router);
    let loads = s.verdicts.iter().filter(|v| v.contains(" load: ")).count();
    let new_load = loads > run.loads_seen;
    if new_load {
        run.loads_seen = loads;
        for v in &s.versions {
            let key = format!("{} {}", v.role, v.version);
            run.latency.entry(key.clone()).or_default().push(v.p99_ms);
            run.errors.entry(key).or_default().push(v.error_rate);
        }
    }
    let point = ChartPoint {
        t: s.time_s,
        set,
        router,
        observed: if new_load {
            s.observed.map(|o| o.0)
        } else {
            None
        },
    };
    let level = |p: &ChartPoint| (p.set, p.router, p.observed.is_none());
    match run.chart.as_mut_slice() {
        // The same instant again: keep one point (an observation, once, wins).
        [.., last] if last.t == point.t => {
            last.set = point.set;
            last.router = point.router;
            last.observed = point.observed.or(last.observed);
        }
        // A level that goes on (a snapshot every frame while the clock runs): its last
        // point moves on, so the chart keeps its history rather than a point per frame.
        [.., before, last] if level(before) == level(last) && level(last) == level(&point) => {
            last.t = point.t;
        }
        _ => run.chart.push(point),
    }
    if run.chart.len() > 2000 {
        run.chart.drain(..run.chart.len() - 2000);
    }
    if s.finished.is_some() {
        run.running = false;
    }
    run.snapshot = Some(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: f64, set: f64, observed: Option<f64>) -> Snapshot {
        Snapshot {
            scenario: "s".into(),
            time: format!("t+{t}s"),
            time_s: t,
            steps: Vec::new(),
            pause_left: None,
            rollout: None,
            weights: vec![super::super::snapshot::RouteWeights {
                route: "vs http/0".into(),
                object: super::super::snapshot::WeightedBy::VirtualService,
                set,
                virtual_service: Some(set),
                router: Some(set),
            }],
            observed: observed.map(|o| (o, o, o)),
            observed_per_connection: false,
            no_mesh: None,
            versions: Vec::new(),
            violations: Vec::new(),
            events: Vec::new(),
            // Each observation comes with one more load verdict.
            verdicts: observed
                .map(|_| vec!["step 1 load: 1 sent".to_string()])
                .unwrap_or_default(),
            finished: None,
            live: None,
        }
    }

    #[test]
    fn a_level_that_goes_on_keeps_two_points_not_one_a_frame() {
        let mut run = RunState::new("s.yaml".into(), 10.0);
        // A frame every 0.25 s: 20 % for 10 s, an observation, then 40 %.
        for i in 0..40 {
            absorb(&mut run, at(f64::from(i) * 0.25, 20.0, None));
        }
        absorb(&mut run, at(10.0, 20.0, Some(19.8)));
        absorb(&mut run, at(10.25, 20.0, None));
        absorb(&mut run, at(10.5, 40.0, None));
        absorb(&mut run, at(10.75, 40.0, None));
        absorb(&mut run, at(11.0, 40.0, None));
        let points: Vec<(f64, f64, Option<f64>)> =
            run.chart.iter().map(|p| (p.t, p.set, p.observed)).collect();
        assert_eq!(
            points,
            [
                (0.0, 20.0, None),
                (9.75, 20.0, None),
                (10.0, 20.0, Some(19.8)),
                (10.25, 20.0, None),
                (10.5, 40.0, None),
                (11.0, 40.0, None),
            ]
        );
    }
}
