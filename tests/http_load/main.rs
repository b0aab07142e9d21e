//! `canarysim load` against real servers on loopback. A binary of its own: its memory tests read
//! the process's peak RSS, which other suites' threads would move.
//!
//! One test binary per area (issue 27: one link each, not one per file).

#[path = "../support/mod.rs"]
mod support;

mod http_load;
mod shards;
