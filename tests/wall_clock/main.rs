//! What meets the wall clock and real loopback sockets: live mode, the API server on its socket,
//! socket faults, the TUI's session. `.ci/busy-tests` runs these beside four CPU hogs.
//!
//! One test binary per area (issue 27: one link each, not one per file).

#[path = "../support/mod.rs"]
mod support;

mod api_server;
// A real cluster's clients (kube-rs) come with the default `cluster` feature.
#[cfg(feature = "cluster")]
mod cluster;
#[cfg(feature = "cluster")]
mod forbidding_proxy;
#[cfg(feature = "cluster")]
mod kube_client;
mod live;
mod socket_faults;
mod tui;
