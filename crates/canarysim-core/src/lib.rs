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
//! * [`apiserver`] — the in-process object store: create/get/list/update/patch/delete/watch,
//!   resourceVersion, generation, conflicts, Kubernetes-worded errors; its REST layer
//!   (requests in, answers out; the socket is the edge's).
//! * [`controller`] — the Argo-Rollouts-like reconciler and the ReplicaSet/Pod lifecycle it
//!   drives; it touches objects only through the apiserver.
//! * [`sim`] — the simulated world: apiserver + controllers on a virtual clock.
//! * [`endpoints`] — Services resolved to ready Pods with their role (stable/canary) and
//!   version, as the EndpointSlice controller publishes them; read by both data planes.
//! * [`mesh`] — the Envoy-like data plane: route tables translated from the Istio objects
//!   (like istiod → xDS) and pushed after a delay; route match, weighted cluster per request
//!   (HTTP) or per connection (TCP/TLS), endpoint load balancing.
//! * [`kubeproxy`] — the no-mesh path: a Service's endpoint chosen once per connection
//!   (iptables: random; ipvs: round robin).
//! * [`load`] — workloads (closed/open loop, connections, keep-alive, HTTP/2, origin) and
//!   the simulated driver that sends them through the data plane, attributing every answer;
//!   response classification and accounting, shared with the real HTTP client.
//! * [`analysis`] — Argo's AnalysisRuns on the virtual clock: measurements against a
//!   built-in Prometheus (Istio's request metrics, counted from the simulated traffic;
//!   PromQL), conditions in Argo's expression language, phases and limits.
//! * [`verify`] — statistics: intervals, goodness of fit, sequential tests, sample sizes,
//!   latency comparison; the verdict on an observed split.
//! * [`scenario`] — the scenario file format, its checked plan, and the runner.
//! * [`outcome`] — what a run, a comparison or a load produced: the data reports render.
//! * [`rollout_info`] — the `kubectl argo rollouts get rollout` view of a Rollout.
//! * [`lint`] — static checks of manifests (Argo's validation, references, routes).
//! * [`report`] — renderings (text, JSON).
//! * [`demo`] — the bundled seed 004 cluster (embedded), for the default run, tests and
//!   benchmarks.
//! * [`random`] — named seeded random streams; [`clock`] — virtual time; [`go`] — Go's
//!   formatting and parsing where Argo's messages carry Go's output.

pub mod analysis;
pub mod apiserver;
pub mod clock;
pub mod controller;
pub mod demo;
pub mod endpoints;
pub mod go;
pub mod kubeproxy;
pub mod lint;
pub mod load;
pub mod mesh;
pub mod model;
pub mod outcome;
pub mod random;
pub mod report;
pub mod rollout_info;
pub mod scenario;
pub mod sim;
pub mod verify;
