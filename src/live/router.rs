//! The live router: a hyper reverse proxy on 127.0.0.1 that routes each request with the
//! route table in force (`mesh::RouteTable::route`, then `RouteChoice::pick_upstream`, as
//! the simulated load picks) and forwards it to the chosen pod's real server. A request
//! for a host the ingress gateway serves enters through that gateway, any other from the
//! mesh, as a scenario's `origin: auto` does. No route → 404; no healthy upstream → 503
//! `no healthy upstream`; a pod that stopped listening before the table dropped it → 503
//! (Envoy's `UF`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rand_pcg::Pcg64Mcg;

use crate::mesh::{LbPolicy, LbState, Origin, Protocol, RequestMeta, RouteError, RouteTable};

type Body = BoxBody<Bytes, hyper::Error>;

/// What the router serves: a table and where each of its pods listens.
struct Published {
    table: Option<Arc<RouteTable>>,
    addresses: BTreeMap<String, SocketAddr>,
}

/// Per-table picking state: the load balancers' positions and the random streams.
struct Picking {
    lb: LbState,
    router: Pcg64Mcg,
    balancer: Pcg64Mcg,
}

struct State {
    namespace: String,
    published: RwLock<Arc<Published>>,
    picking: Mutex<Picking>,
    client: Client<HttpConnector, Body>,
}

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
                addresses: BTreeMap::new(),
            })),
            picking: Mutex::new(Picking {
                lb: LbState::default(),
                router: crate::random::stream(seed, "live/router"),
                balancer: crate::random::stream(seed, "live/balancer"),
            }),
            client: Client::builder(TokioExecutor::new()).build_http(),
        });
        let serving = state.clone();
        let task = crate::pod_server::spawn_server(listener, move |req| {
            let state = serving.clone();
            async move { state.serve(req).await }
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

    /// Swaps in a new table (its load balancers start afresh, as Envoy's do on a push).
    pub fn publish(
        &self,
        table: Option<crate::mesh::RouteTable>,
        addresses: BTreeMap<String, SocketAddr>,
    ) {
        let next = Arc::new(Published {
            table: table.map(Arc::new),
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

    /// The same table, with the pods' current addresses (a pod started or stopped).
    pub fn update_addresses(&self, addresses: BTreeMap<String, SocketAddr>) {
        let mut published = self
            .state
            .published
            .write()
            .unwrap_or_else(|p| p.into_inner());
        if published.addresses != addresses {
            *published = Arc::new(Published {
                table: published.table.clone(),
                addresses,
            });
        }
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
    async fn serve(&self, req: hyper::Request<hyper::body::Incoming>) -> hyper::Response<Body> {
        let published = self
            .published
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(table) = &published.table else {
            return reply(503, "no route table yet");
        };
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
        let method = req.method().as_str().to_string();
        let headers: Vec<(String, String)> = req
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect();
        let header_refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let gateway = table
            .gateway_for(&host, &self.namespace)
            .map(str::to_string);
        let meta = RequestMeta {
            origin: match &gateway {
                Some(g) => Origin::Gateway(g),
                None => Origin::Mesh,
            },
            protocol: Protocol::Http,
            namespace: &self.namespace,
            host: &host,
            port: 80,
            path: &path,
            method: &method,
            headers: &header_refs,
            sni: None,
            source_labels: &[],
        };
        let picked = match table.route(&meta) {
            Ok(choice) => {
                let mut p = self.picking.lock().unwrap_or_else(|p| p.into_inner());
                let Picking {
                    lb,
                    router,
                    balancer,
                } = &mut *p;
                choice
                    .pick_upstream(table, LbPolicy::RoundRobin, router, balancer, lb)
                    .ok_or(503)
            }
            Err(RouteError::NoHealthyUpstream { .. }) => Err(503),
            Err(_) => Err(404),
        };
        let endpoint = match picked {
            Ok(e) => e,
            Err(503) => return reply(503, "no healthy upstream"),
            Err(_) => return reply(404, "no route"),
        };
        let Some(pod) = table.endpoint(endpoint).map(|e| e.pod.clone()) else {
            return reply(503, "no healthy upstream");
        };
        let Some(address) = published.addresses.get(&pod) else {
            // The table still lists a pod that no longer listens: the connection fails.
            return reply(
                503,
                "upstream connect error or disconnect/reset before headers",
            );
        };
        let (mut parts, body) = req.into_parts();
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
