//! The simulated world: controllers, data planes, statistics, scenarios, lint, schemas, hostile
//! inputs and the layering. No socket and no wall clock.
//!
//! One test binary per area (issue 27: one link each, not one per file).

#[path = "../support/mod.rs"]
mod support;

mod analysis_metrics;
mod architecture;
mod argo_errors;
mod blue_green;
mod bounds;
mod bundled_scenarios;
mod controller_behaviour;
mod data_plane;
mod envoy_config;
mod error_words;
mod fidelity;
mod gateway_api;
mod held_out_regressions;
mod hostile_inputs;
mod invalid_input;
mod lint;
mod mesh_seed004;
mod nginx;
mod properties;
mod report_schema;
mod scenario_schema;
mod seed_walkthrough;
