//! # canarysim
//!
//! A local simulator and traffic-split verifier for canary releases that use Argo Rollouts
//! with Istio.
//!
//! Two crates. `canarysim-core` is the deterministic core (objects, controllers, data
//! planes, simulated load, statistics, scenarios): no I/O, no wall clock, no terminal, held
//! to that by its `Cargo.toml`. This crate is the edge on top, and re-exports the core's
//! modules under the same paths, so `canarysim::model`, `canarysim::scenario`, … are what
//! they always were.
//!
//! ## Layout
//!
//! The core (re-exported): [`model`]; [`world`] ([`apiserver`], [`controller`],
//! [`event_recorder`], [`analysis`], [`sim`], [`clock`]); [`dataplane`] ([`endpoints`], [`mesh`], [`kubeproxy`]); [`load`];
//! [`verdict`] ([`verify`], [`outcome`]); [`scenario`], [`rollout_info`], [`managed_routes`], [`lint`],
//! [`report`], [`demo`], [`random`], [`go`]; see
//! `canarysim_core` for what each holds. The edge:
//!
//! * [`load::http`] — the real HTTP client of `canarysim load` (tokio + hyper, TLS), reading
//!   bodies as streams; what it sends ([`load::Traffic`]), classification and accounting are
//!   the core's.
//! * [`apiserver::http`] — the API server on a socket (`canarysim serve --api`), for kubectl.
//! * [`load::result_file`] — a load's result file (`load --out`, `--shard I/N`), with
//!   [`load::shape`], how the load was sent.
//! * [`real_load`] — `canarysim load`'s verdict on a real gateway: the unit of randomisation
//!   measured from the connections, the split judged by `verify`; [`real_load::merge`] —
//!   `load merge`: shards judged as the one load of their union, after a test of whether
//!   they saw one split; [`real_load::coordinator`] — `load coordinate` and its workers:
//!   shards released together, their results gathered over HTTP; [`real_load::job`] —
//!   `load job`: the manifests that run them in a cluster (Indexed Job, AnalysisTemplate).
//! * [`cluster`] — a real cluster through kube-rs: `canarysim watch` follows a rollout and
//!   verifies each step at its gateway; `canarysim snapshot` copies it into a scenario.
//! * [`pod_server`] — a real pod on loopback (`canarysim backend`).
//! * [`live`] — the world on real loopback sockets: a pod server per ready pod and a hyper
//!   router serving the route table in force, paced on the wall clock (`canarysim serve`).
//! * [`serving`] — what the servers share: accept back-off, header-read timeout.
//! * [`tui`] — the terminal scenario runner (ratatui + crossterm).
//! * [`testing`] — scenario suites in users' own `cargo test`: one test per scenario file.
//! * [`cli`] — the clap command line; `main.rs` only calls it. [`progress`] — progress bars
//!   on a terminal; [`style`] — colour on a terminal (`--color`, `NO_COLOR`).

pub use canarysim_core::{
    analysis, clock, controller, dataplane, demo, endpoints, event_recorder, go, kubeproxy, lint,
    managed_routes, mesh, model, outcome, random, report, rollout_info, scenario, sim, verdict,
    verify, world,
};

/// The core's workloads and accounting, and the real HTTP client on top of them.
pub mod load {
    pub use canarysim_core::load::*;
    mod body;
    pub mod http;
    pub mod result_file;
    pub mod shape;
}

/// The core's object store, and its HTTP face for kubectl.
pub mod apiserver {
    pub use canarysim_core::apiserver::*;
    pub mod http;
}

pub mod cli;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod live;
pub mod pod_server;
pub mod progress;
pub mod real_load;
pub mod serving;
pub mod style;
pub mod testing;
pub mod tui;
