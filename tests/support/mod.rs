//! Helpers shared by the suites that run real programs.

pub mod envoy;
