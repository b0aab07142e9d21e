//! `canarysim tui [DIR|FILE]`: watch a rollout and its traffic together, and act on it.
//!
//! * [`state`]: what is shown (the scenario list, the run view), as plain data;
//! * [`mod@update`]: the logic, pure: a key or a snapshot in, a new state and commands out;
//! * [`render`]: the state drawn into a ratatui frame;
//! * [`session`]: the scenario on a thread of its own (the same runner as `canarysim run`),
//!   paced on the wall clock, taking the keys' actions, sending [`snapshot::Snapshot`]s;
//! * [`pace`]: how wall time maps to the world's time, frame by frame (the clock
//!   injectable, for tests);
//! * [`record`]: what was done, saved as a scenario file that replays it;
//! * `terminal`: the only file that touches the terminal.

pub mod pace;
pub mod record;
pub mod render;
pub mod session;
pub mod snapshot;
pub mod state;
mod terminal;
pub mod update;

use std::path::Path;

pub use state::{App, Entry};
pub use update::{Command, Key, Msg, update};

/// The scenarios of a directory (its YAML files but manifests, sorted, as `run DIR` takes
/// them), or the one file.
pub fn entries(path: &Path, files: &dyn crate::scenario::Files) -> Vec<Entry> {
    let paths = if path.is_dir() {
        crate::scenario::discover::scenarios_in(path, false)
            .map(|(run, _)| run)
            .unwrap_or_default()
    } else {
        vec![path.to_path_buf()]
    };
    paths
        .into_iter()
        .map(|p| match crate::scenario::load(&p, files) {
            Ok(plan) => Entry {
                name: plan.name.clone(),
                description: plan.description.lines().next().unwrap_or("").to_string(),
                path: p,
                last: None,
            },
            Err(e) => Entry {
                name: p
                    .file_name()
                    .map_or(String::new(), |n| n.to_string_lossy().into_owned()),
                description: format!("cannot be loaded: {e}"),
                path: p,
                last: None,
            },
        })
        .collect()
}

/// Runs the TUI on `entries` until the user quits; `live`: each scenario on real loopback
/// sockets.
pub fn run(
    live: bool,
    entries: Vec<Entry>,
    files: &'static (dyn crate::scenario::Files + Sync),
) -> std::io::Result<()> {
    let mut app = App::new(entries);
    app.live = live;
    terminal::run_until_quit(app, files)
}
