//! What the TUI shows: the scenario list and the run view, as plain data. `update` changes
//! it, `render` draws it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::snapshot::Snapshot;

/// One scenario in the list.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub path: PathBuf,
    pub name: String,
    /// The description's first line (or why the file cannot be loaded).
    pub description: String,
    /// The last run's result here: passed, and its wall time.
    pub last: Option<(bool, std::time::Duration)>,
}

/// Speeds the `+` and `−` keys step through, in virtual seconds per wall second.
pub const SPEEDS: [f64; 9] = [1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0];

/// One point of the share chart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChartPoint {
    pub t: f64,
    pub set: f64,
    pub router: Option<f64>,
    pub observed: Option<f64>,
}

/// A running scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct RunState {
    pub path: PathBuf,
    pub snapshot: Option<Snapshot>,
    /// Steps run one after another (space) or held.
    pub running: bool,
    pub speed: f64,
    /// Show what the same rollout gives without a mesh (ready-pod ratio).
    pub no_mesh: bool,
    /// The canary share over time: set weight, router, observed loads.
    pub chart: Vec<ChartPoint>,
    /// p99 latency (ms) per version, one value per load.
    pub latency: BTreeMap<String, Vec<f64>>,
    /// Error rate (percent) per version, one value per load.
    pub errors: BTreeMap<String, Vec<f64>>,
    /// Loads seen, to add each one's figures once.
    pub loads_seen: usize,
}

impl RunState {
    pub fn new(path: PathBuf, speed: f64) -> RunState {
        RunState {
            path,
            snapshot: None,
            running: false,
            speed,
            no_mesh: false,
            chart: Vec::new(),
            latency: BTreeMap::new(),
            errors: BTreeMap::new(),
            loads_seen: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    List,
    Run,
}

/// The whole TUI state.
#[derive(Debug, Clone, PartialEq)]
pub struct App {
    pub screen: Screen,
    pub entries: Vec<Entry>,
    pub selected: usize,
    /// `/` filter on names and descriptions; `filtering` while typing it.
    pub filter: String,
    pub filtering: bool,
    pub run: Option<RunState>,
    pub help: bool,
    /// A one-line message (saved to…, cannot start…).
    pub status: String,
    pub quit: bool,
    /// Scenarios run on real loopback sockets (`canarysim tui --live`).
    pub live: bool,
}

impl App {
    pub fn new(entries: Vec<Entry>) -> App {
        App {
            screen: Screen::List,
            entries,
            selected: 0,
            filter: String::new(),
            filtering: false,
            run: None,
            help: false,
            status: String::new(),
            quit: false,
            live: false,
        }
    }

    /// The entries the filter lets through, with their indices.
    pub fn visible(&self) -> Vec<(usize, &Entry)> {
        let needle = self.filter.to_lowercase();
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| {
                needle.is_empty()
                    || e.name.to_lowercase().contains(&needle)
                    || e.description.to_lowercase().contains(&needle)
            })
            .collect()
    }
}
