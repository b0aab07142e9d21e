//! Suites that need real tools (nginx, HAProxy, Envoy, kubectl, tmux) or a quiet machine: every
//! test is `#[ignore]`d in `cargo test`, and `.ci/run` runs each module with the flags it needs.
//!
//! One test binary per area (issue 27: one link each, not one per file).

#[path = "../support/mod.rs"]
mod support;

mod envoy_differential;
mod kubectl;
mod live_walkthrough;
mod real_gateways;
mod tui_tmux;
