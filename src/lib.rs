//! # canarysim
//!
//! A local simulator and traffic-split verifier for canary releases that use Argo Rollouts
//! with Istio.
//!
//! ## Layout (in data-flow order)
//!
//! * [`model`] — Kubernetes and Istio objects as lossless JSON values with typed views of the
//!   fields canarysim interprets; multi-document YAML loading with `file:line:column` errors.
//! * [`apiserver`] — the in-process object store: create/get/list/update/patch/delete/watch,
//!   resourceVersion, generation, conflicts, Kubernetes-worded errors.
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
//!   the real HTTP client of `canarysim load` (`load::http`, tokio + hyper) with response
//!   classification and accounting.
//! * [`pod_server`] — a real pod on loopback (`canarysim backend`).
//! * [`live`] — the world on real loopback sockets: a pod server per ready pod and a hyper
//!   router serving the route table in force, paced on the wall clock (`canarysim serve`).
//! * [`analysis`] — Argo's AnalysisRuns on the virtual clock: measurements against a
//!   built-in Prometheus (Istio's request metrics, counted from the simulated traffic;
//!   PromQL), conditions in Argo's expression language, phases and limits.
//! * [`verify`] — statistics: intervals, goodness of fit, sequential tests, sample sizes,
//!   latency comparison; the verdict on an observed split.
//! * [`gateway`] — `canarysim load`'s verdict on a real gateway: the unit of randomisation
//!   measured from the connections, the split judged by `verify`.
//! * [`scenario`] — the scenario file format, its checked plan, and the runner.
//! * [`lint`] — static checks of manifests (Argo's validation, references, routes).
//! * [`report`] — renderings (the `kubectl argo rollouts get rollout` view, text, JSON).
//! * [`testing`] — scenario suites in users' own `cargo test`: one test per scenario file.
//! * [`cli`] — the clap command line; `main.rs` only calls it. [`progress`] — progress bars
//!   on a terminal; [`style`] — colour on a terminal (`--color`, `NO_COLOR`).
//! * [`seed`] — the bundled seed 004 cluster (embedded), for the default run, tests and
//!   benchmarks.
//! * [`random`] — named seeded random streams; [`clock`] — virtual time.

pub mod analysis;
pub mod apiserver;
pub mod cli;
pub mod clock;
pub mod controller;
pub mod endpoints;
pub mod gateway;
pub mod go;
pub mod kubeproxy;
pub mod lint;
pub mod live;
pub mod load;
pub mod mesh;
pub mod model;
pub mod outcome;
pub mod pod_server;
pub mod progress;
pub mod random;
pub mod report;
pub mod rollout_info;
pub mod scenario;
pub mod seed;
pub mod serving;
pub mod sim;
pub mod style;
pub mod testing;
pub mod tui;
pub mod verify;
