//! The no-mesh path: kube-proxy sends each new connection to a Service's ready endpoint and
//! the connection stays there. `iptables` mode picks uniformly at random (its
//! `statistic --mode random --probability 1/n, 1/(n-1), …` chain is uniform; here it is one
//! draw), `ipvs` mode (default `rr` scheduler) goes round robin.
//!
//! It serves callers without a sidecar (origin `plain`), and everything when no mesh is
//! installed. It knows nothing about weights: a Service's share is its share of endpoints,
//! and with keep-alive or HTTP/2 the per-request split follows the per-connection choice.

use rand::RngCore;

use crate::endpoints::{Catalog, Endpoint, EndpointId, Note, ServiceEndpoints, ServiceId};
use crate::model::Objects;

/// How kube-proxy chooses an endpoint for a new connection (the scenario's
/// `cluster.kube_proxy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProxyMode {
    /// Uniform random over ready endpoints.
    #[default]
    Iptables,
    /// Round robin over ready endpoints, one cursor per Service.
    Ipvs,
}

impl ProxyMode {
    pub fn parse(s: &str) -> Option<ProxyMode> {
        match s {
            "iptables" => Some(ProxyMode::Iptables),
            "ipvs" => Some(ProxyMode::Ipvs),
            _ => None,
        }
    }
}

/// Mutable state of the proxy: ipvs round-robin cursors per Service.
#[derive(Debug, Clone, Default)]
pub struct ProxyState {
    cursors: Vec<u32>,
}

/// Services and their ready endpoints, as kube-proxy programs them.
#[derive(Debug, Clone, Default)]
pub struct ServiceProxy {
    catalog: Catalog,
}

impl ServiceProxy {
    /// Built from the cluster's Services, Pods and Rollout statuses.
    pub fn from_objects(objects: &dyn Objects) -> ServiceProxy {
        ServiceProxy {
            catalog: Catalog::from_objects(objects),
        }
    }

    /// The Service a host names, as cluster DNS resolves it for a caller in
    /// `caller_namespace` (`svc`, `svc.ns`, `svc.ns.svc[.cluster.local]`, optional `:port`).
    pub fn resolve(&self, host: &str, caller_namespace: &str) -> Option<ServiceId> {
        self.catalog.resolve(host, caller_namespace)
    }

    /// The endpoint a new connection to `service` goes to; None when the Service has no
    /// ready endpoint (the connection is refused) or does not exist.
    #[inline]
    pub fn pick_endpoint<R: RngCore + ?Sized>(
        &self,
        service: ServiceId,
        mode: ProxyMode,
        rng: &mut R,
        state: &mut ProxyState,
    ) -> Option<EndpointId> {
        let eps = &self.catalog.service(service)?.endpoints;
        if eps.is_empty() {
            return None;
        }
        let i = match mode {
            ProxyMode::Iptables => (rng.next_u64() % eps.len() as u64) as usize,
            ProxyMode::Ipvs => {
                let s = service.0 as usize;
                if s >= state.cursors.len() {
                    state.cursors.resize(s + 1, 0);
                }
                let c = &mut state.cursors[s];
                let i = *c as usize % eps.len();
                *c = c.wrapping_add(1);
                i
            }
        };
        Some(eps[i])
    }

    pub fn endpoint(&self, id: EndpointId) -> Option<&Endpoint> {
        self.catalog.endpoint(id)
    }

    pub fn service(&self, id: ServiceId) -> Option<&ServiceEndpoints> {
        self.catalog.service(id)
    }

    pub fn services(&self) -> &[ServiceEndpoints] {
        self.catalog.services()
    }

    /// Objects skipped while building.
    pub fn notes(&self) -> &[Note] {
        self.catalog.notes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::ApiServer;
    use crate::endpoints::Role;
    use crate::endpoints::fixtures::*;
    use crate::random::stream;
    use serde_json::json;

    fn store() -> ApiServer {
        let mut api = ApiServer::new();
        rollout(&mut api, "demo", "ro", "app", "stable1", "canary1");
        pods(&mut api, "demo", "app", "stable1", "img:blue", 3);
        pods(&mut api, "demo", "app", "canary1", "img:yellow", 1);
        pod(
            &mut api,
            "demo",
            "app-starting",
            json!({"app": "app"}),
            "img:yellow",
            false,
        );
        service(&mut api, "demo", "app", json!({"app": "app"}));
        service(&mut api, "demo", "empty", json!({"app": "nothing"}));
        api
    }

    #[test]
    fn iptables_spreads_connections_uniformly_over_ready_endpoints() {
        let proxy = ServiceProxy::from_objects(&store());
        let svc = proxy.resolve("app.demo.svc.cluster.local:80", "x").unwrap();
        let mut rng = stream(1, "kube-proxy");
        let mut state = ProxyState::default();
        let mut hits = [0usize; 4];
        let n = 100_000;
        for _ in 0..n {
            let e = proxy
                .pick_endpoint(svc, ProxyMode::Iptables, &mut rng, &mut state)
                .unwrap();
            hits[e.0 as usize] += 1;
        }
        for h in hits {
            let share = h as f64 * 100.0 / n as f64;
            assert!((share - 25.0).abs() < 0.5, "{hits:?}");
        }
        let canary = hits
            .iter()
            .enumerate()
            .filter(|(i, _)| proxy.endpoint(EndpointId(*i as u32)).unwrap().role == Role::Canary)
            .map(|(_, h)| h)
            .sum::<usize>();
        assert!(
            canary > 0,
            "the canary pod gets its pod share, not a weight"
        );
    }

    #[test]
    fn ipvs_goes_round_robin_and_empty_services_refuse() {
        let proxy = ServiceProxy::from_objects(&store());
        let svc = proxy.resolve("app", "demo").unwrap();
        let mut rng = stream(1, "kube-proxy");
        let before = rng.clone();
        let mut state = ProxyState::default();
        let pods: Vec<String> = (0..5)
            .map(|_| {
                let e = proxy
                    .pick_endpoint(svc, ProxyMode::Ipvs, &mut rng, &mut state)
                    .unwrap();
                proxy.endpoint(e).unwrap().pod.clone()
            })
            .collect();
        assert_eq!(
            pods,
            [
                "app-canary1-0",
                "app-stable1-0",
                "app-stable1-1",
                "app-stable1-2",
                "app-canary1-0"
            ]
        );
        assert_eq!(rng, before, "ipvs takes no random draw");
        let empty = proxy.resolve("empty", "demo").unwrap();
        assert_eq!(
            proxy.pick_endpoint(empty, ProxyMode::Iptables, &mut rng, &mut state),
            None
        );
        assert_eq!(proxy.resolve("app", "other"), None);
        assert_eq!(ProxyMode::parse("ipvs"), Some(ProxyMode::Ipvs));
        assert_eq!(ProxyMode::parse("nft"), None);
    }
}
