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
//! endpoints or an unknown host → 502 (the connection was refused).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rand_pcg::Pcg64Mcg;

use crate::kubeproxy::{ProxyMode, ProxyState, ServiceProxy};
use crate::mesh::{LbPolicy, LbState, Origin, Protocol, RequestMeta, RouteError, RouteTable};

type Body = BoxBody<Bytes, hyper::Error>;

/// The header by which a caller says where it sends from.
pub const ORIGIN_HEADER: &str = "x-canarysim-origin";
/// The calling pod's namespace and labels (`sourceNamespace`, `sourceLabels` matches):
/// `namespace` and `k=v,k=v`.
pub const SOURCE_NAMESPACE_HEADER: &str = "x-canarysim-source-namespace";
pub const SOURCE_LABELS_HEADER: &str = "x-canarysim-source-labels";

/// What the router serves: a table, the Services as kube-proxy sees them, and where each
/// pod listens.
struct Published {
    table: Option<Arc<RouteTable>>,
    services: Arc<ServiceProxy>,
    addresses: BTreeMap<String, SocketAddr>,
}

/// Per-table picking state: the load balancers' positions and the random streams.
struct Picking {
    lb: LbState,
    router: Pcg64Mcg,
    balancer: Pcg64Mcg,
    kube_proxy: ProxyState,
}

struct State {
    namespace: String,
    published: RwLock<Arc<Published>>,
    picking: Mutex<Picking>,
    /// The proxies' load-balancing default and kube-proxy's mode (the scenario's `cluster`).
    data_plane: Mutex<(LbPolicy, ProxyMode)>,
    client: Client<HttpConnector, Body>,
}

/// A client connection's kube-proxy choice: the pod it was sent to, for as long as it lives.
#[derive(Default)]
struct Pinned(Mutex<Option<String>>);

/// The running router.
pub struct Router {
    address: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Router {
    /// Listens on 127.0.0.1 (a port the system picks); callers in `namespace`.
    pub async fn start(namespace: &str, seed: u64) -> std::io::Result<Router> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let address = listener.local_addr()?;
        let state = Arc::new(State {
            namespace: namespace.to_string(),
            published: RwLock::new(Arc::new(Published {
                table: None,
                services: Arc::new(ServiceProxy::default()),
                addresses: BTreeMap::new(),
            })),
            picking: Mutex::new(Picking {
                lb: LbState::default(),
                router: crate::random::stream(seed, "live/router"),
                balancer: crate::random::stream(seed, "live/balancer"),
                kube_proxy: ProxyState::default(),
            }),
            data_plane: Mutex::new((LbPolicy::RoundRobin, ProxyMode::Iptables)),
            client: Client::builder(TokioExecutor::new()).build_http(),
        });
        let serving = state.clone();
        let task = crate::pod_server::spawn_server(listener, move || {
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
        })
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
    pub fn publish(
        &self,
        table: Option<RouteTable>,
        services: ServiceProxy,
        addresses: BTreeMap<String, SocketAddr>,
    ) {
        let next = Arc::new(Published {
            table: table.map(Arc::new),
            services: Arc::new(services),
            addresses,
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
    pub fn update(&self, services: ServiceProxy, addresses: BTreeMap<String, SocketAddr>) {
        let mut published = self
            .state
            .published
            .write()
            .unwrap_or_else(|p| p.into_inner());
        *published = Arc::new(Published {
            table: published.table.clone(),
            services: Arc::new(services),
            addresses,
        });
    }

    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        self.task.abort();
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
        let host = req
            .headers()
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| req.uri().authority().map(|a| a.as_str()))
            .unwrap_or("")
            .to_string();
        let path = req
            .uri()
            .path_and_query()
            .map_or("/".to_string(), |p| p.as_str().to_string());
        let origin = req
            .headers()
            .get(ORIGIN_HEADER)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
            .to_string();
        let pod = if origin == "plain" {
            match self.kube_proxy(&published, &host, pinned) {
                Some(pod) => pod,
                None => return reply(502, "connection refused (no ready endpoint)"),
            }
        } else {
            let Some(table) = &published.table else {
                return reply(503, "no route table yet");
            };
            match self.route(table, &req, &host, &path, &origin) {
                Ok(pod) => pod,
                Err(status) => {
                    return match status {
                        503 => reply(503, "no healthy upstream"),
                        _ => reply(404, "no route"),
                    };
                }
            }
        };
        let Some(address) = published.addresses.get(&pod) else {
            // The table still lists a pod that no longer listens: the connection fails.
            if origin == "plain" {
                *pinned.0.lock().unwrap_or_else(|p| p.into_inner()) = None;
                return reply(502, "connection refused");
            }
            return reply(
                503,
                "upstream connect error or disconnect/reset before headers",
            );
        };
        let (mut parts, body) = req.into_parts();
        for h in [ORIGIN_HEADER, SOURCE_NAMESPACE_HEADER, SOURCE_LABELS_HEADER] {
            parts.headers.remove(h);
        }
        // Upstream the router speaks HTTP/1.1 (as a sidecar does to a plain pod); an HTTP/2
        // caller's authority becomes the Host header.
        parts.version = hyper::Version::HTTP_11;
        if !parts.headers.contains_key(hyper::header::HOST) {
            if let Ok(value) = hyper::header::HeaderValue::from_str(&host) {
                parts.headers.insert(hyper::header::HOST, value);
            }
        }
        parts.uri = match format!("http://{address}{path}").parse() {
            Ok(uri) => uri,
            Err(_) => return reply(400, "bad request path"),
        };
        let forwarded = hyper::Request::from_parts(parts, body.boxed());
        match self.client.request(forwarded).await {
            Ok(response) => response.map(|b| b.boxed()),
            Err(_) => reply(
                503,
                "upstream connect error or disconnect/reset before headers",
            ),
        }
    }
}

impl State {
    /// The pod a request goes to through the mesh or a gateway; Err: 404 or 503.
    fn route(
        &self,
        table: &RouteTable,
        req: &hyper::Request<hyper::body::Incoming>,
        host: &str,
        path: &str,
        origin: &str,
    ) -> Result<String, u16> {
        let method = req.method().as_str();
        let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
        let namespace = header(SOURCE_NAMESPACE_HEADER).unwrap_or(&self.namespace);
        let source_labels: Vec<(&str, &str)> = header(SOURCE_LABELS_HEADER)
            .into_iter()
            .flat_map(|l| l.split(','))
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let headers: Vec<(&str, &str)> = req
            .headers()
            .iter()
            .filter(|(k, _)| !k.as_str().starts_with("x-canarysim-"))
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)))
            .collect();
        let gateway = match origin.strip_prefix("gateway ") {
            Some(g) => Some(g.to_string()),
            None if origin == "mesh" => None,
            None => table.gateway_for(host, namespace).map(str::to_string),
        };
        let meta = RequestMeta {
            origin: match &gateway {
                Some(g) => Origin::Gateway(g),
                None => Origin::Mesh,
            },
            protocol: Protocol::Http,
            namespace,
            host,
            port: 80,
            path,
            method,
            headers: &headers,
            sni: None,
            source_labels: &source_labels,
        };
        let lb = self.data_plane.lock().unwrap_or_else(|p| p.into_inner()).0;
        let endpoint = match table.route(&meta) {
            Ok(choice) => {
                let mut p = self.picking.lock().unwrap_or_else(|p| p.into_inner());
                let Picking {
                    lb: state,
                    router,
                    balancer,
                    ..
                } = &mut *p;
                choice
                    .pick_upstream(table, lb, router, balancer, state)
                    .ok_or(503u16)?
            }
            Err(RouteError::NoHealthyUpstream { .. }) => return Err(503),
            Err(_) => return Err(404),
        };
        table.endpoint(endpoint).map(|e| e.pod.clone()).ok_or(503)
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
