//! # canarysim-core
//!
//! canarysim's deterministic core: everything that decides what a canary release does and
//! what its traffic shows, on a virtual clock, with no I/O, no wall clock and no terminal.
//! Its `Cargo.toml` names no tokio, hyper, rustls, ratatui, crossterm, clap or indicatif;
//! the `canarysim` crate (the command line, real sockets, the TUI, the testing API) is the
//! edge on top and re-exports these modules under the same paths (`canarysim::model`, …).
//!
//! ## Layout (in data-flow order)
//!
//! * [`model`] — Kubernetes and Istio objects as lossless JSON values with typed views of the
//!   fields canarysim interprets; multi-document YAML loading with `file:line:column` errors.
//! * [`world`] — the simulated cluster:
//!   * [`apiserver`] — the in-process object store: create/get/list/update/patch/delete/
//!     watch, resourceVersion, generation, conflicts, Kubernetes-worded errors; its REST
//!     layer (requests in, answers out; the socket is the edge's).
//!   * [`controller`] — the Argo-Rollouts-like reconciler and the ReplicaSet/Pod lifecycle it
//!     drives; it touches objects only through the apiserver.
//!   * [`event_recorder`] — the controllers' events written as Event objects, as client-go's
//!     recorder writes them (for a world served to kubectl).
//!   * [`analysis`] — Argo's AnalysisRuns on the virtual clock: measurements against a
//!     built-in Prometheus (Istio's request metrics, counted from the simulated traffic;
//!     PromQL), conditions in Argo's expression language, phases and limits.
//!   * [`sim`] — the simulated world: apiserver + controllers on a virtual clock; [`clock`]
//!     — virtual time.
//! * [`dataplane`] — where requests go:
//!   * [`endpoints`] — Services resolved to ready Pods with their role (stable/canary) and
//!     version, as the EndpointSlice controller publishes them; read by both data planes.
//!   * [`mesh`] — the Envoy-like data plane: route tables translated from the Istio objects
//!     (like istiod → xDS) and pushed after a delay; route match, weighted cluster per
//!     request (HTTP) or per connection (TCP/TLS), endpoint load balancing.
//!   * [`kubeproxy`] — the no-mesh path: a Service's endpoint chosen once per connection
//!     (iptables: random; ipvs: round robin).
//! * [`load`] — the traffic: one description of a load (closed/open loop, connections,
//!   keep-alive, HTTP/2, each request), its origin, and the simulated driver that sends it
//!   through the data plane, attributing every answer; response classification and
//!   accounting, shared with the real HTTP client.
//! * [`verdict`] — what the traffic shows:
//!   * [`verify`] — statistics: intervals, goodness of fit, sequential tests, sample sizes,
//!     latency comparison; the verdict on an observed split.
//!   * [`outcome`] — what a run, a comparison or a load produced: the data reports render.
//! * [`scenario`] — the scenario file format, its checked plan, and the runner.
//! * [`rollout_info`] — the `kubectl argo rollouts get rollout` view of a Rollout.
//! * [`managed_routes`] — the routes a Rollout's traffic router manages and the canary's
//!   share each sets.
//! * [`lint`] — static checks of manifests (Argo's validation, references, routes).
//! * [`report`] — renderings (text, JSON).
//! * [`demo`] — the bundled seed 004 cluster (embedded), for the default run, tests and
//!   benchmarks.
//! * [`random`] — named seeded random streams; [`go`] — Go's formatting and parsing where
//!   Argo's messages carry Go's output.
//!
//! The modules of the three layer folders are re-exported at the root, so each keeps its
//! path (`crate::apiserver`, `canarysim::mesh`, …).

pub mod dataplane;
pub mod demo;
pub mod go;
pub mod lint;
pub mod load;
pub mod managed_routes;
pub mod model;
pub mod random;
pub mod report;
pub mod rollout_info;
pub mod scenario;
pub mod verdict;
pub mod world;

pub use dataplane::{endpoints, kubeproxy, mesh};
pub use verdict::{outcome, verify};
pub use world::{analysis, apiserver, clock, controller, event_recorder, sim};
