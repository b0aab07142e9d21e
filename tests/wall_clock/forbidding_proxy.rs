//! A proxy in front of `serve --api` that answers 403 where a cluster would answer a role
//! without the permission (the served API has no RBAC): `snapshot` under a role limited to
//! its namespace.

use std::path::{Path, PathBuf};

use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};

/// Answers 403, as the API server's authorizer does, to every request whose path (with a
/// `/` added, the query left out) contains one of `forbidden`, such as `/pods/` or
/// `/namespaces/istio-system/`; passes the rest on; stops when dropped.
pub(crate) struct ForbiddingProxy {
    _runtime: tokio::runtime::Runtime,
    /// The served API's kubeconfig with the proxy as its server.
    pub(crate) kubeconfig: PathBuf,
}

type Body = BoxBody<Bytes, hyper::Error>;

impl ForbiddingProxy {
    pub(crate) fn start(
        served_kubeconfig: &Path,
        forbidden: &'static [&'static str],
        kubeconfig: PathBuf,
    ) -> ForbiddingProxy {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let text = std::fs::read_to_string(served_kubeconfig).unwrap();
        let upstream = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("server: "))
            .expect("the kubeconfig's server")
            .to_string();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let address = listener.local_addr().unwrap();
        std::fs::write(
            &kubeconfig,
            text.replace(&upstream, &format!("http://{address}")),
        )
        .unwrap();
        runtime.spawn(async move {
            let client =
                hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                    .build_http::<Incoming>();
            while let Ok((stream, _)) = listener.accept().await {
                let (client, upstream) = (client.clone(), upstream.clone());
                let service = hyper::service::service_fn(move |request| {
                    let (client, upstream) = (client.clone(), upstream.clone());
                    async move { answer(request, &client, &upstream, forbidden).await }
                });
                tokio::spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        ForbiddingProxy {
            _runtime: runtime,
            kubeconfig,
        }
    }
}

/// A 403 Status for a forbidden path, else the upstream's answer.
async fn answer(
    mut request: hyper::Request<Incoming>,
    client: &hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Incoming,
    >,
    upstream: &str,
    forbidden: &[&str],
) -> Result<hyper::Response<Body>, hyper_util::client::legacy::Error> {
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let segments = format!("{}/", request.uri().path());
    if forbidden.iter().any(|f| segments.contains(f)) {
        let status = serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "reason": "Forbidden",
            "code": 403,
            "message": format!("{path} is forbidden: the role may not read it"),
        });
        let body = Full::new(Bytes::from(status.to_string()))
            .map_err(|never| match never {})
            .boxed();
        return Ok(hyper::Response::builder()
            .status(403)
            .header("content-type", "application/json")
            .body(body)
            .unwrap());
    }
    *request.uri_mut() = format!("{upstream}{path}").parse().unwrap();
    let response = client.request(request).await?;
    Ok(response.map(BodyExt::boxed))
}
