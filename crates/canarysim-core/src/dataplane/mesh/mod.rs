//! The Envoy-like data plane: route tables translated from the store's Istio objects (like
//! istiod → xDS), pushed to the router after a delay, and the router's hot path.
//!
//! * [`translate`] builds a [`RouteTable`] from VirtualServices, DestinationRules, Services,
//!   Gateways and ready Pods; problems become [`RouteTable::notes`], never errors.
//! * [`RouteTable::route`] matches a [`RequestMeta`] (origin, host, port, path, method,
//!   headers, SNI) to a route; [`WeightedClusters::pick`] chooses the cluster (Envoy's
//!   modulo walk, per request for HTTP, per connection for TCP/TLS);
//!   [`Cluster::pick_endpoint`] chooses the Pod. [`RouteTable::serve`] does all three.
//! * [`Mesh`] holds the pushed tables with the instant each takes effect.
//!
//! Pure: no I/O, no clock, no global RNG. The random source is passed in, so the same
//! functions serve the simulation and, later, a real proxy.

pub mod envoy;
mod gateway_api;
pub(crate) use gateway_api::{StatusWrite, stamp_transitions};
pub mod ingress_nginx;
mod matcher;
pub mod policy;
mod table;
mod translate;

pub use matcher::{HostPattern, StrMatcher};
pub use table::{
    Cluster, ClusterId, CookieJar, HostPick, LbPolicy, LbState, Mirror, NoUpstream, Origin,
    Protocol, RequestMeta, RoundRobinCursor, RouteChoice, RouteError, RouteSource, RouteTable,
    Scope, Served, Stickiness, StickyBackend, WeightedClusters,
};
pub use translate::{GatewayApiSplit, TranslateOptions, translate, translate_with};

use std::time::Duration;

use crate::clock::SimTime;

/// Istio's default debounce: a change reaches the proxies once the configuration has been
/// quiet this long (`PILOT_DEBOUNCE_AFTER`).
pub const DEFAULT_PUSH_DELAY: Duration = Duration::from_millis(100);

/// Istio pushes a burst of changes at the latest this long after its first change, however
/// busy the configuration (`PILOT_DEBOUNCE_MAX`).
pub const DEBOUNCE_MAX: Duration = Duration::from_secs(10);

/// One pushed table and when it takes effect.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// When the last change folded into this table was written.
    pub written_at: SimTime,
    /// From when the router uses it.
    pub effective_at: SimTime,
    /// When the burst of changes that this table ends began (for [`DEBOUNCE_MAX`]).
    burst_start: SimTime,
    pub table: RouteTable,
    /// Load-balancer state that goes with this table (reset with each push, as Envoy
    /// rebuilds a load balancer when the cluster changes).
    pub lb: LbState,
}

/// The router's view of the configuration over time.
///
/// `push(table, written_at, delay)`: the table takes effect at `written_at + delay`. Like
/// istiod's debounce, a push that arrives while the previous one is still waiting replaces
/// it and restarts the wait (up to [`DEBOUNCE_MAX`] after the burst began), so during a burst
/// of writes the router keeps the last table that did take effect.
#[derive(Debug, Clone, Default)]
pub struct Mesh {
    pushes: Vec<Pushed>,
}

impl Mesh {
    pub fn new() -> Mesh {
        Mesh::default()
    }

    /// Queues `table`, written at `written_at`, for `written_at + push_delay`.
    pub fn push(&mut self, table: RouteTable, written_at: SimTime, push_delay: Duration) {
        let effective_at = written_at.after(push_delay);
        let lb = LbState::new(&table);
        if let Some(last) = self.pushes.last_mut() {
            let pending = last.effective_at > written_at;
            if pending && written_at.since(last.burst_start) < DEBOUNCE_MAX {
                last.table = table;
                last.lb = lb;
                last.written_at = written_at;
                last.effective_at = effective_at.min(last.burst_start.after(DEBOUNCE_MAX));
                return;
            }
        }
        let p = Pushed {
            written_at,
            effective_at,
            burst_start: written_at,
            table,
            lb,
        };
        // Pushes normally arrive in time order; keep the list sorted if one does not.
        let at = self
            .pushes
            .partition_point(|q| q.effective_at <= effective_at);
        self.pushes.insert(at, p);
    }

    /// The table in force at `t`: the latest that took effect at or before `t`.
    pub fn table_at(&self, t: SimTime) -> Option<&RouteTable> {
        self.pushed_at(t).map(|p| &self.pushes[p].table)
    }

    /// The table in force at `t` with its load-balancer state.
    pub(crate) fn at_mut(&mut self, t: SimTime) -> Option<(&RouteTable, &mut LbState)> {
        let i = self.pushed_at(t)?;
        let p = &mut self.pushes[i];
        Some((&p.table, &mut p.lb))
    }

    /// The next instant after `t` at which another table takes effect.
    pub(crate) fn next_change(&self, t: SimTime) -> Option<SimTime> {
        self.pushes.iter().map(|p| p.effective_at).find(|e| *e > t)
    }

    /// Every push still kept, oldest first.
    pub fn pushes(&self) -> &[Pushed] {
        &self.pushes
    }

    /// Forgets tables superseded before `t` (the one in force at `t` stays).
    pub(crate) fn prune(&mut self, t: SimTime) {
        if let Some(i) = self.pushed_at(t) {
            self.pushes.drain(..i);
        }
    }

    fn pushed_at(&self, t: SimTime) -> Option<usize> {
        self.pushes
            .partition_point(|p| p.effective_at <= t)
            .checked_sub(1)
    }
}

#[cfg(test)]
mod tests;
