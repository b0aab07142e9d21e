//! A real pod on loopback: a small hyper server (HTTP/1.1 and h2c) answering every request
//! with its version in the `x-version` header and a JSON body, after a set latency, with a
//! set error rate. `canarysim backend` runs one; the tests stand them behind real gateways;
//! live mode will run one per ready pod.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// Where it also answers over TLS (see [`start_with_tls`]).
    pub tls_address: Option<SocketAddr>,
    state: Arc<Pod>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl RunningPod {
    /// Requests this pod has received and how many it answers with an error, shadow copies
    /// (a mirror's, whose authority ends in `-shadow`) aside: the pods' view of a load.
    pub fn received(&self) -> (u64, u64) {
        (
            self.state.received.load(Ordering::Relaxed),
            self.state.errors.load(Ordering::Relaxed),
        )
    }

    /// Stops listening and drops every open connection (requests in flight are lost).
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for RunningPod {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Starts a pod on `bind` (port 0: one the system picks) on the current tokio runtime.
pub async fn start(spec: PodSpec, bind: SocketAddr) -> std::io::Result<RunningPod> {
    start_with_tls(spec, bind, None).await
}

/// Starts a pod that also answers over TLS with `tls`, on a second port of `bind`'s address
/// (what a TLS-passthrough route reaches).
pub async fn start_with_tls(
    spec: PodSpec,
    bind: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<RunningPod> {
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
        received: AtomicU64::new(0),
        errors: AtomicU64::new(0),
    });
    let handler = |state: Arc<Pod>| {
        move || {
            let state = state.clone();
            move |req: hyper::Request<hyper::body::Incoming>| {
                let state = state.clone();
                let shadow = req
                    .headers()
                    .get(hyper::header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .is_some_and(|h| h.ends_with("-shadow"));
                async move { state.answer(shadow).await }
            }
        }
    };
    let mut tasks = vec![spawn_server(listener, None, handler(state.clone()))];
    let mut tls_address = None;
    if let Some(config) = tls {
        let listener = TcpListener::bind(SocketAddr::new(bind.ip(), 0)).await?;
        tls_address = Some(listener.local_addr()?);
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        tasks.push(spawn_server(
            listener,
            Some(acceptor),
            handler(state.clone()),
        ));
    }
    Ok(RunningPod {
        address,
        tls_address,
        state,
        tasks,
    })
}

/// Serves HTTP/1.1 and h2c on `listener` until the returned task is aborted; aborting it
/// drops every connection (as a killed process would). Each connection gets its own
/// handler from `per_connection` (a proxy may keep what the connection chose).
/// With `tls`, each connection first completes a TLS handshake (HTTP/1.1 or h2 by ALPN).
pub(crate) fn spawn_server<M, F, Fut, B>(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
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
    spawn_acceptor(listener, move |stream| {
        let handle = per_connection();
        let tls = tls.clone();
        async move {
            let service = service_fn(move |req| {
                let answer = handle(req);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(crate::serving::HEADER_READ_TIMEOUT);
            let _ = match tls {
                None => {
                    builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                }
                Some(acceptor) => {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                }
            };
        }
    })
}

/// Accepts connections on `listener` (no Nagle delay) and serves each with `serve` until
/// the returned task is aborted; aborting it drops every connection.
pub(crate) fn spawn_acceptor<S, Fut>(listener: TcpListener, serve: S) -> tokio::task::JoinHandle<()>
where
    S: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        // Connections live in this set: aborting the server drops them all.
        let mut connections = tokio::task::JoinSet::new();
        let mut backoff = crate::serving::AcceptBackoff::default();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else {
                        backoff.wait().await;
                        continue;
                    };
                    backoff.reset();
                    let _ = stream.set_nodelay(true);
                    connections.spawn(serve(stream));
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
    received: AtomicU64,
    errors: AtomicU64,
}

impl Pod {
    async fn answer(&self, shadow: bool) -> hyper::Response<Full<Bytes>> {
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
        if !shadow {
            self.received.fetch_add(1, Ordering::Relaxed);
            self.errors.fetch_add(u64::from(failed), Ordering::Relaxed);
        }
        // The model never answers in under 1 µs; a pod set to answer at once does not sleep.
        // tokio's timer wheel ticks in milliseconds and rounds up (a 1 ms latency answered
        // in 2.2 ms); an OS high-resolution timer (timerfd on Linux) keeps it within about 0.1-0.2 ms.
        if model.latency_us > 0 || model.jitter_us > 0 {
            precise_sleep(Duration::from_micros(latency_us)).await;
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

/// A server configuration with a fresh self-signed certificate for `names` (HTTP/2 and
/// HTTP/1.1 by ALPN): what live mode's pods answer TLS with. Clients skip verification.
pub fn self_signed_tls(names: &[&str]) -> Result<Arc<rustls::ServerConfig>, String> {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let certified = rcgen::generate_simple_self_signed(names).map_err(|e| e.to_string())?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
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

/// The last stretch of a [`precise_sleep`] is spent yielding rather than asleep: a CPU
/// that idled for milliseconds takes a few hundred microseconds to wake on a virtual
/// machine, more the longer it idled. A twentieth of the sleep, between these bounds.
const SPIN_TAIL: (Duration, Duration) = (Duration::from_micros(300), Duration::from_millis(1));

/// Sleeps `d` to within a few tens of microseconds: an OS high-resolution timer (tokio's
/// wheel ticks in milliseconds and rounds up: 1 ms answered in 2.2 ms) until the tail,
/// then yields until the instant.
pub async fn precise_sleep(d: Duration) {
    let deadline = std::time::Instant::now() + d;
    let tail = (d / 20).clamp(SPIN_TAIL.0, SPIN_TAIL.1);
    if d > tail {
        tokio_hrtime::sleep_until(deadline - tail).await;
    }
    while std::time::Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
}
