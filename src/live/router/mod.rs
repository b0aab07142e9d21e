//! The live router: a hyper reverse proxy on 127.0.0.1 that routes each request with the
//! route table in force (`mesh::RouteTable::route`, then `RouteChoice::pick_upstream`, as
//! the simulated load picks) and forwards it to the chosen pod's real server.
//!
//! Where a request comes from is the data plane that routes it, as in the simulation
//! (`load::data_path`): the header `x-canarysim-origin` says `gateway NAMESPACE/NAME`, `mesh`
//! or `plain` (a pod without sidecar: kube-proxy picks a ready endpoint of the Service once
//! per connection). Without it, a request for a host the ingress gateway serves enters
//! through that gateway, any other from the mesh, as `origin: auto` does. No route → 404;
//! no healthy upstream → 503 `no healthy upstream`; a pod that stopped listening before the
//! table dropped it → 503 (Envoy's `UF`); through kube-proxy, a Service without ready
//! endpoints or an unknown host → 502 (the connection was refused). On a matched route the
//! route's policy runs around the upstream call ([`attempts`]); the router counts what it
//! did, as Envoy's stats do ([`RouterStats`]).

mod attempts;
mod l4;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rand_pcg::Pcg64Mcg;

use crate::kubeproxy::{ProxyMode, ProxyState, ServiceProxy};
use crate::mesh::{
    LbPolicy, LbState, Origin, Protocol, RequestMeta, RouteChoice, RouteError, RouteTable,
};

pub use attempts::UPSTREAM_HEADER;

type Body = BoxBody<Bytes, hyper::Error>;
type Upstream = Client<HttpConnector, Body>;

/// The largest request body the router buffers (it keeps each body for retries and
/// mirrors); a larger one gets 413.
const MAX_BODY: usize = 4 << 20;

/// The header by which a caller says where it sends from.
pub const ORIGIN_HEADER: &str = "x-canarysim-origin";
/// The calling pod's namespace and labels (`sourceNamespace`, `sourceLabels` matches):
/// `namespace` and `k=v,k=v`.
pub const SOURCE_NAMESPACE_HEADER: &str = "x-canarysim-source-namespace";
pub const SOURCE_LABELS_HEADER: &str = "x-canarysim-source-labels";
/// The gateway port the request stands for (a Gateway API listener on 8080, say): the
/// router listens on one port for every gateway. Without it, the gateway's first port.
pub const PORT_HEADER: &str = "x-canarysim-port";

/// What the router serves: a table, the Services as kube-proxy sees them, and where each
/// pod listens.
struct Published {
    table: Option<Arc<RouteTable>>,
    services: Arc<ServiceProxy>,
    addresses: BTreeMap<String, SocketAddr>,
    /// Where each pod answers TLS (what a TLS connection passes through to).
    tls_addresses: BTreeMap<String, SocketAddr>,
}

/// Where the ready pods listen, by name.
#[derive(Debug, Clone, Default)]
pub struct PodAddresses {
    pub plain: BTreeMap<String, SocketAddr>,
    pub tls: BTreeMap<String, SocketAddr>,
}

/// Per-table picking state: the load balancers' positions and the random streams.
struct Picking {
    lb: LbState,
    router: Pcg64Mcg,
    balancer: Pcg64Mcg,
    /// Faults and retry back-off.
    policy: Pcg64Mcg,
    kube_proxy: ProxyState,
}

/// What the router did beyond forwarding, counted since it started (Envoy's
/// `upstream_rq_retry`, `upstream_rq_timeout`, the fault filter's `aborts_injected`…).
#[derive(Default)]
struct RouterStats {
    retries: AtomicU64,
    timed_out: AtomicU64,
    fault_aborted: AtomicU64,
    /// Requests whose last attempt could not connect.
    upstream_failed: AtomicU64,
    no_healthy_upstream: AtomicU64,
    /// 500s for a Gateway API backendRef that does not resolve.
    unresolved_backend: AtomicU64,
    not_found: AtomicU64,
    /// Shadow requests sent, by pod.
    mirrored: Mutex<BTreeMap<String, u64>>,
}

/// A reading of the router's counters; [`RouterCounts::since`] gives a load's share.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouterCounts {
    pub retries: u64,
    pub timed_out: u64,
    pub fault_aborted: u64,
    pub upstream_failed: u64,
    pub no_healthy_upstream: u64,
    pub unresolved_backend: u64,
    pub not_found: u64,
    pub mirrored: BTreeMap<String, u64>,
}

impl RouterCounts {
    /// What was counted after `earlier`.
    pub fn since(&self, earlier: &RouterCounts) -> RouterCounts {
        RouterCounts {
            retries: self.retries - earlier.retries,
            timed_out: self.timed_out - earlier.timed_out,
            fault_aborted: self.fault_aborted - earlier.fault_aborted,
            upstream_failed: self.upstream_failed - earlier.upstream_failed,
            no_healthy_upstream: self.no_healthy_upstream - earlier.no_healthy_upstream,
            unresolved_backend: self.unresolved_backend - earlier.unresolved_backend,
            not_found: self.not_found - earlier.not_found,
            mirrored: self
                .mirrored
                .iter()
                .map(|(pod, n)| (pod.clone(), n - earlier.mirrored.get(pod).unwrap_or(&0)))
                .filter(|(_, n)| *n > 0)
                .collect(),
        }
    }
}

struct State {
    namespace: String,
    published: RwLock<Arc<Published>>,
    picking: Mutex<Picking>,
    /// The proxies' load-balancing default and kube-proxy's mode (the scenario's `cluster`).
    data_plane: Mutex<(LbPolicy, ProxyMode)>,
    client: Upstream,
    stats: RouterStats,
    outliers: attempts::Outliers,
}

/// A client connection's kube-proxy choice: the pod it was sent to, for as long as it lives.
#[derive(Default)]
struct Pinned(Mutex<Option<String>>);

/// A listener standing for one gateway TLS/TCP port: where it listens, and its task.
type L4Listener = (SocketAddr, tokio::task::JoinHandle<()>);

/// The running router.
pub struct Router {
    address: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
    runtime: tokio::runtime::Handle,
    /// The gateways' TLS/TCP ports: (gateway, port) → the listener standing for it.
    l4: Mutex<BTreeMap<(String, u32), L4Listener>>,
}

impl Router {
    /// Listens on 127.0.0.1 (a port the system picks); callers in `namespace`.
    pub async fn start(namespace: &str, seed: u64) -> std::io::Result<Router> {
        Router::start_at(([127, 0, 0, 1], 0).into(), namespace, seed).await
    }

    /// Listens on `bind`: a router restarted where its predecessor listened (clients
    /// reconnect to the address they know).
    pub async fn start_at(bind: SocketAddr, namespace: &str, seed: u64) -> std::io::Result<Router> {
        let listener = tokio::net::TcpListener::bind(bind).await?;
        let address = listener.local_addr()?;
        let state = Arc::new(State {
            namespace: namespace.to_string(),
            published: RwLock::new(Arc::new(Published {
                table: None,
                services: Arc::new(ServiceProxy::default()),
                addresses: BTreeMap::new(),
                tls_addresses: BTreeMap::new(),
            })),
            picking: Mutex::new(Picking {
                lb: LbState::default(),
                router: crate::random::stream(seed, "live/router"),
                balancer: crate::random::stream(seed, "live/balancer"),
                policy: crate::random::stream(seed, "live/policy"),
                kube_proxy: ProxyState::default(),
            }),
            data_plane: Mutex::new((LbPolicy::RoundRobin, ProxyMode::Iptables)),
            client: Client::builder(TokioExecutor::new()).build_http(),
            stats: RouterStats::default(),
            outliers: attempts::Outliers::new(),
        });
        let serving = state.clone();
        let task = crate::pod_server::spawn_server(listener, None, move || {
            let state = serving.clone();
            let pinned = Arc::new(Pinned::default());
            move |req| {
                let (state, pinned) = (state.clone(), pinned.clone());
                async move { state.serve(req, &pinned).await }
            }
        });
        Ok(Router {
            address,
            state,
            task,
            runtime: tokio::runtime::Handle::current(),
            l4: Mutex::new(BTreeMap::new()),
        })
    }

    /// The listener standing for a gateway's TLS/TCP port, once a table has routes on it.
    pub fn l4_address(&self, gateway: &str, port: u32) -> Option<SocketAddr> {
        let l4 = self.l4.lock().unwrap_or_else(|p| p.into_inner());
        l4.get(&(gateway.to_string(), port)).map(|(a, _)| *a)
    }

    /// Every TLS/TCP listener: gateway, the gateway's port, and where it listens.
    pub fn l4_listeners(&self) -> Vec<(String, u32, SocketAddr)> {
        let l4 = self.l4.lock().unwrap_or_else(|p| p.into_inner());
        l4.iter()
            .map(|((g, p), (a, _))| (g.clone(), *p, *a))
            .collect()
    }

    /// Opens a listener for each gateway TLS/TCP port of `table` not served yet (a port
    /// stays open once opened; with no route left on it, connections are closed).
    fn open_l4_ports(&self, table: &RouteTable) {
        let mut l4 = self.l4.lock().unwrap_or_else(|p| p.into_inner());
        for (gateway, port, tls) in table.l4_ports() {
            let key = (gateway.clone(), port);
            if l4.contains_key(&key) {
                continue;
            }
            let _entered = self.runtime.enter();
            let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .and_then(tokio::net::TcpListener::from_std);
            let Ok(listener) = listener else { continue };
            let Ok(address) = listener.local_addr() else {
                continue;
            };
            let task = l4::spawn_listener(self.state.clone(), listener, gateway, port, tls);
            l4.insert(key, (address, task));
        }
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The proxies' load-balancing default and kube-proxy's mode.
    pub fn set_data_plane(&self, lb: LbPolicy, mode: ProxyMode) {
        *self
            .state
            .data_plane
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = (lb, mode);
    }

    /// Swaps in a new table (its load balancers start afresh, as Envoy's do on a push), with
    /// the Services and the pods' addresses of now.
    pub fn publish(&self, table: Option<RouteTable>, services: ServiceProxy, pods: PodAddresses) {
        if let Some(table) = &table {
            self.open_l4_ports(table);
        }
        let next = Arc::new(Published {
            table: table.map(Arc::new),
            services: Arc::new(services),
            addresses: pods.plain,
            tls_addresses: pods.tls,
        });
        *self
            .state
            .published
            .write()
            .unwrap_or_else(|p| p.into_inner()) = next;
        self.state
            .picking
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .lb = LbState::default();
    }

    /// The same table, with the Services and the pods' addresses of now (kube-proxy and
    /// the pods follow the cluster at once; the table waits for its push).
    pub fn update(&self, services: ServiceProxy, pods: PodAddresses) {
        let mut published = self
            .state
            .published
            .write()
            .unwrap_or_else(|p| p.into_inner());
        *published = Arc::new(Published {
            table: published.table.clone(),
            services: Arc::new(services),
            addresses: pods.plain,
            tls_addresses: pods.tls,
        });
    }

    /// The router's counters now.
    pub fn counts(&self) -> RouterCounts {
        let s = &self.state.stats;
        let read = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RouterCounts {
            retries: read(&s.retries),
            timed_out: read(&s.timed_out),
            fault_aborted: read(&s.fault_aborted),
            upstream_failed: read(&s.upstream_failed),
            no_healthy_upstream: read(&s.no_healthy_upstream),
            unresolved_backend: read(&s.unresolved_backend),
            not_found: read(&s.not_found),
            mirrored: s.mirrored.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }

    pub fn stop(&self) {
        self.task.abort();
        for (_, task) in self.l4.lock().unwrap_or_else(|p| p.into_inner()).values() {
            task.abort();
        }
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        self.stop();
    }
}

fn reply(status: u16, text: &str) -> hyper::Response<Body> {
    hyper::Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "text/plain")
        .body(
            Full::new(Bytes::from(text.to_string()))
                .map_err(|never| match never {})
                .boxed(),
        )
        .expect("a fixed, valid response")
}

impl State {
    async fn serve(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
        pinned: &Pinned,
    ) -> hyper::Response<Body> {
        let published = self
            .published
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (parts, body) = req.into_parts();
        let host = parts
            .headers
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| parts.uri.authority().map(|a| a.as_str()))
            .unwrap_or("")
            .to_string();
        let path = parts
            .uri
            .path_and_query()
            .map_or("/".to_string(), |p| p.as_str().to_string());
        let origin = parts
            .headers
            .get(ORIGIN_HEADER)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => return reply(413, "request body too large or cut short"),
        };
        let mut headers = parts.headers.clone();
        for h in [
            ORIGIN_HEADER,
            SOURCE_NAMESPACE_HEADER,
            SOURCE_LABELS_HEADER,
            PORT_HEADER,
        ] {
            headers.remove(h);
        }
        let request = attempts::Outgoing {
            method: parts.method.clone(),
            path: path.clone(),
            host: host.clone(),
            headers,
            body,
        };
        if origin == "plain" {
            return self.through_kube_proxy(&published, request, pinned).await;
        }
        let Some(table) = &published.table else {
            return reply(503, "no route table yet");
        };
        match self.route(table, &parts, &host, &path, &origin) {
            Ok(choice) => self.serve_route(&published, table, &choice, request).await,
            Err(RouteError::NoHealthyUpstream { .. }) => {
                self.stats
                    .no_healthy_upstream
                    .fetch_add(1, Ordering::Relaxed);
                reply(503, "no healthy upstream")
            }
            Err(_) => {
                self.stats.not_found.fetch_add(1, Ordering::Relaxed);
                reply(404, "no route")
            }
        }
    }

    /// A caller without a sidecar: kube-proxy sends the connection to one ready pod, and
    /// nothing retries.
    async fn through_kube_proxy(
        &self,
        published: &Published,
        request: attempts::Outgoing,
        pinned: &Pinned,
    ) -> hyper::Response<Body> {
        let Some(pod) = self.kube_proxy(published, &request.host, pinned) else {
            return reply(502, "connection refused (no ready endpoint)");
        };
        let answer = match published.addresses.get(&pod) {
            Some(&address) => self.call(address, &request).await,
            None => None,
        };
        match answer {
            Some(answer) => attempts::with_upstream(
                answer.map(|b| Full::new(b).map_err(|never| match never {}).boxed()),
                Some(&pod),
            ),
            None => {
                // The pod has gone: the connection breaks, the next one picks afresh.
                *pinned.0.lock().unwrap_or_else(|p| p.into_inner()) = None;
                reply(502, "connection refused")
            }
        }
    }
}

impl State {
    /// The route a request takes through the mesh or a gateway.
    fn route<'t>(
        &self,
        table: &'t RouteTable,
        parts: &hyper::http::request::Parts,
        host: &str,
        path: &str,
        origin: &str,
    ) -> Result<RouteChoice<'t>, RouteError> {
        let method = parts.method.as_str();
        let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
        let namespace = header(SOURCE_NAMESPACE_HEADER).unwrap_or(&self.namespace);
        let source_labels: Vec<(&str, &str)> = header(SOURCE_LABELS_HEADER)
            .into_iter()
            .flat_map(|l| l.split(','))
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let headers: Vec<(&str, &str)> = parts
            .headers
            .iter()
            .filter(|(k, _)| !k.as_str().starts_with("x-canarysim-"))
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)))
            .collect();
        let gateway = match origin.strip_prefix("gateway ") {
            Some(g) => Some(g.to_string()),
            None if origin == "mesh" => None,
            None => table.gateway_for(host, namespace).map(str::to_string),
        };
        let port = header(PORT_HEADER)
            .and_then(|p| p.parse().ok())
            .or_else(|| {
                let g = gateway.as_deref()?;
                table.gateway_http_port(g, namespace)
            })
            .unwrap_or(80);
        let meta = RequestMeta {
            origin: match &gateway {
                Some(g) => Origin::Gateway(g),
                None => Origin::Mesh,
            },
            protocol: Protocol::Http,
            namespace,
            host,
            port,
            path,
            method,
            headers: &headers,
            sni: None,
            source_labels: &source_labels,
        };
        table.route(&meta)
    }

    /// kube-proxy: the pod this connection was sent to, or a new pick among the Service's
    /// ready endpoints (None: unknown host or no ready endpoint, the connection is refused).
    fn kube_proxy(&self, published: &Published, host: &str, pinned: &Pinned) -> Option<String> {
        let mut pinned = pinned.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pod) = pinned.as_ref() {
            return Some(pod.clone());
        }
        let services = &published.services;
        let service = services.resolve(host, &self.namespace)?;
        let mode = self.data_plane.lock().unwrap_or_else(|p| p.into_inner()).1;
        let mut p = self.picking.lock().unwrap_or_else(|p| p.into_inner());
        let Picking {
            balancer,
            kube_proxy,
            ..
        } = &mut *p;
        let endpoint = services.pick_endpoint(service, mode, balancer, kube_proxy)?;
        let pod = services.endpoint(endpoint)?.pod.clone();
        *pinned = Some(pod.clone());
        Some(pod)
    }
}
