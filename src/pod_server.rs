//! A real pod on loopback: a small hyper server (HTTP/1.1 and h2c) answering every request
//! with its version in the `x-version` header and a JSON body, after a set latency, with a
//! set error rate. `canarysim backend` runs one; the tests stand them behind real gateways;
//! live mode will run one per ready pod.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rand::RngCore;
use rand_pcg::Pcg64Mcg;
use tokio::net::TcpListener;

use crate::load::BackendModel;

/// How a pod answers.
#[derive(Debug, Clone)]
pub struct PodSpec {
    /// The version it reports (`x-version` and the body's `version`).
    pub version: String,
    /// The pod's name (`x-pod` and the body's `pod`).
    pub pod: String,
    /// Its `pod-template-hash`, when it has one (the body's `pod-template-hash`).
    pub hash: Option<String>,
    /// Latency, jitter and errors, as the simulation models them (`cluster.backends`).
    pub model: BackendModel,
    /// Seed of the error and jitter draws.
    pub seed: u64,
}

impl PodSpec {
    /// Answers 200 at once.
    pub fn new(version: &str) -> PodSpec {
        PodSpec {
            version: version.to_string(),
            pod: format!("backend-{version}"),
            hash: None,
            model: BackendModel::new(Duration::ZERO, Duration::ZERO, 0.0),
            seed: 1,
        }
    }

    /// With this latency, error rate and error status.
    pub fn answering(mut self, latency: Duration, error_rate: f64, error_status: u16) -> Self {
        self.model = BackendModel::new(latency, Duration::ZERO, error_rate);
        self.model.error_status = error_status;
        self
    }
}

/// A pod serving on a loopback port; dropping it (or [`RunningPod::stop`]) closes the
/// listener and every connection, as a killed pod does.
pub struct RunningPod {
    pub address: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl RunningPod {
    /// Stops listening and drops every open connection (requests in flight are lost).
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for RunningPod {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a pod on `bind` (port 0: one the system picks) on the current tokio runtime.
pub async fn start(spec: PodSpec, bind: SocketAddr) -> std::io::Result<RunningPod> {
    let listener = TcpListener::bind(bind).await?;
    let address = listener.local_addr()?;
    let mut body = serde_json::json!({"version": spec.version, "pod": spec.pod});
    if let Some(hash) = &spec.hash {
        body["pod-template-hash"] = serde_json::Value::String(hash.clone());
    }
    let body = Bytes::from(body.to_string() + "\n");
    let state = Arc::new(Pod {
        rng: Mutex::new(crate::random::stream(spec.seed, &spec.pod)),
        spec,
        body,
    });
    let task = spawn_server(listener, move || {
        let state = state.clone();
        move |_req| {
            let state = state.clone();
            async move { state.answer().await }
        }
    });
    Ok(RunningPod { address, task })
}

/// Serves HTTP/1.1 and h2c on `listener` until the returned task is aborted; aborting it
/// drops every connection (as a killed process would). Each connection gets its own
/// handler from `per_connection` (a proxy may keep what the connection chose).
pub(crate) fn spawn_server<M, F, Fut, B>(
    listener: TcpListener,
    per_connection: M,
) -> tokio::task::JoinHandle<()>
where
    M: Fn() -> F + Send + 'static,
    F: Fn(hyper::Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = hyper::Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    tokio::spawn(async move {
        // Connections live in this set: aborting the server drops them all.
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let _ = stream.set_nodelay(true);
                    let handle = per_connection();
                    connections.spawn(async move {
                        let service = service_fn(move |req| {
                            let answer = handle(req);
                            async move { Ok::<_, Infallible>(answer.await) }
                        });
                        let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    })
}

struct Pod {
    spec: PodSpec,
    body: Bytes,
    rng: Mutex<Pcg64Mcg>,
}

impl Pod {
    async fn answer(&self) -> hyper::Response<Full<Bytes>> {
        let model = self.spec.model;
        let draw = if model.deterministic() {
            0
        } else {
            self.rng
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .next_u64()
        };
        let (latency_us, failed) = model.answer(draw);
        // The model never answers in under 1 µs; a pod set to answer at once does not sleep
        // (the timer would round it up to a millisecond).
        if model.latency_us > 0 || model.jitter_us > 0 {
            tokio::time::sleep(Duration::from_micros(latency_us)).await;
        }
        let status = if failed { model.error_status } else { 200 };
        hyper::Response::builder()
            .status(status)
            .header("x-version", self.spec.version.as_str())
            .header("x-pod", self.spec.pod.as_str())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(self.body.clone()))
            .expect("a fixed, valid response")
    }
}

/// `canarysim backend`: serves until Ctrl-C (or SIGTERM), printing the address first.
pub fn serve_until_interrupted(spec: PodSpec, bind: SocketAddr) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let pod = start(spec.clone(), bind).await?;
        println!(
            "backend {} (pod {}) listening on http://{}",
            spec.version, spec.pod, pod.address
        );
        use std::io::Write;
        let _ = std::io::stdout().flush();
        shutdown_signal().await;
        pod.stop();
        Ok(())
    })
}

/// Ctrl-C or SIGTERM.
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
