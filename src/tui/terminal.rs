//! The one file that touches the terminal (crossterm, through ratatui's re-export): raw
//! mode and the alternate screen, restored on exit, on Ctrl-C and on panic; keys read on a
//! thread of their own; the draw loop, which never waits on the simulation.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{execute, terminal};

use super::session::{Report, Session};
use super::state::App;
use super::update::{Command, Key, Msg, update};

/// Runs the TUI until the user quits; the terminal is restored however it ends.
pub fn run_until_quit(
    mut app: App,
    files: &'static (dyn crate::scenario::Files + Sync),
) -> std::io::Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(std::io::Error::other(
            "needs a terminal on stdin and stdout (`canarysim run` plays the same scenarios without one)",
        ));
    }
    install_panic_hook();
    let mut terminal = ratatui::try_init()?;
    let outcome = event_loop(&mut terminal, &mut app, files);
    ratatui::restore();
    outcome
}

/// A panic restores the terminal before its message is printed.
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(std::io::stdout(), terminal::LeaveAlternateScreen);
        previous(info);
    }));
}

fn key_of(code: KeyCode, modifiers: KeyModifiers) -> Option<Key> {
    Some(match code {
        KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => Key::CtrlC,
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::Backspace => Key::Backspace,
        _ => return None,
    })
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    app: &mut App,
    files: &'static (dyn crate::scenario::Files + Sync),
) -> std::io::Result<()> {
    // Keys arrive on their own thread, so a busy simulation never delays them.
    let (keys, key_rx) = mpsc::channel();
    std::thread::spawn(move || {
        loop {
            match event::read() {
                Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                    if let Some(key) = key_of(k.code, k.modifiers) {
                        if keys.send(key).is_err() {
                            return;
                        }
                    }
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    });
    let mut session: Option<(Session, Instant)> = None;
    loop {
        terminal.draw(|frame| super::render::render(app, frame))?;
        let mut messages: Vec<Msg> = Vec::new();
        if let Ok(key) = key_rx.recv_timeout(Duration::from_millis(40)) {
            messages.push(Msg::Key(key));
        }
        while let Ok(key) = key_rx.try_recv() {
            messages.push(Msg::Key(key));
        }
        if let Some((s, started)) = &session {
            // Only the newest snapshot matters for drawing; take every one for the chart.
            while let Some(report) = s.try_recv() {
                match report {
                    Report::Snapshot(snap) => {
                        let finished = snap.finished;
                        messages.push(Msg::Snapshot(snap));
                        if let Some(passed) = finished {
                            messages.push(Msg::Finished(passed, started.elapsed()));
                        }
                    }
                    Report::Saved(r) => messages.push(Msg::Saved(r)),
                    Report::Failed(e) => messages.push(Msg::StartFailed(e)),
                }
            }
        }
        for msg in messages {
            for command in update(app, msg) {
                match command {
                    Command::Start(path, live) => {
                        let speed = app.run.as_ref().map_or(10.0, |r| r.speed);
                        match Session::start(&path, files, speed, live) {
                            Ok(s) => session = Some((s, Instant::now())),
                            Err(e) => {
                                update(app, Msg::StartFailed(e));
                            }
                        }
                    }
                    Command::Session(control) => {
                        if let Some((s, _)) = &session {
                            s.send(control);
                        }
                    }
                    Command::StopSession => session = None,
                    Command::Quit => {}
                }
            }
        }
        if app.quit {
            return Ok(());
        }
    }
}
