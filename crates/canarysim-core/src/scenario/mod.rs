//! Scenarios: the file format (`shared/SCENARIOS.md`), loading it into a checked [`Plan`],
//! and the runner that plays it on a simulated cluster.

pub mod check;
pub mod compare;
pub mod discover;
pub mod expect;
pub mod format;
pub mod init;
pub mod invariants;
pub mod migration;
pub mod plan;
pub mod runner;
pub mod snapshot;
pub mod split;

pub use plan::{Disk, Embedded, Files, Plan, ScenarioError, load, load_runnable, parse};
pub use runner::{RunReport, Runner, StepReport, run};
