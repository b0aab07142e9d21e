//! The API server on a socket (`canarysim serve --api`): hyper on 127.0.0.1, a port the
//! system picks. This file only moves bytes: requests are read into [`rest::Call`]s and
//! handed to the thread that owns the simulated world, which answers them one at a time
//! against the store ([`Endpoint::answer_pending`]), so concurrent writers are serialised
//! and a stale resourceVersion always gets its 409. Watches stay open as chunked JSON
//! streams; [`Endpoint::forward`] sends them every stored change in order.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, combinators::BoxBody};
use hyper::body::{Body, Frame};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::sync::{mpsc as async_mpsc, oneshot};

use super::ApiServer;
use super::rest::{self, Call, Reply, Watch};

type ResponseBody = BoxBody<Bytes, Infallible>;

/// What a peer may hold of the server, as kube-apiserver bounds it.
#[derive(Debug, Clone, Copy)]
pub struct PeerLimits {
    /// A connection that has not sent a whole request head this long after it opened, or
    /// after its last answer, is closed: slowloris and idle keep-alive connections alike.
    pub header_read_timeout: Duration,
    /// A watcher whose unread events pass this many bytes is closed with a 410 event
    /// (Kubernetes closes a watcher too slow for its buffer; the client lists again).
    pub watch_buffer_bytes: usize,
}

impl Default for PeerLimits {
    fn default() -> Self {
        PeerLimits {
            // kube-apiserver's ReadHeaderTimeout.
            header_read_timeout: Duration::from_secs(32),
            watch_buffer_bytes: 64 << 20,
        }
    }
}

/// What the socket side hands the world's thread.
enum Exchange {
    Call {
        call: Call,
        summary: String,
        reply: oneshot::Sender<Reply>,
    },
    Watch {
        watch: Watch,
        events: EventSender,
        started: oneshot::Sender<Result<(), Reply>>,
    },
}

struct Watcher {
    watch: Watch,
    events: EventSender,
}

/// Events on their way to one watch's response: the bytes not yet read, and whether the
/// watcher fell behind by more than it may.
#[derive(Default)]
struct Backlog {
    bytes: AtomicUsize,
    overflowed: AtomicBool,
}

/// The world's side of a watch: sends events as JSON lines, counting what is unread.
struct EventSender {
    lines: async_mpsc::UnboundedSender<Bytes>,
    backlog: Arc<Backlog>,
    limit: usize,
}

impl EventSender {
    /// Queues `event`; false once the watcher is too far behind (it is then closed).
    fn send(&self, event: &Value) -> bool {
        if self.backlog.overflowed.load(Ordering::Relaxed) {
            return false;
        }
        let mut line = serde_json::to_vec(event).unwrap_or_default();
        line.push(b'\n');
        let queued = self.backlog.bytes.fetch_add(line.len(), Ordering::Relaxed) + line.len();
        if queued > self.limit {
            self.backlog.overflowed.store(true, Ordering::Relaxed);
            // Wakes the stream, which then ends with the 410.
            let _ = self.lines.send(Bytes::new());
            return false;
        }
        self.lines.send(Bytes::from(line)).is_ok()
    }

    fn is_closed(&self) -> bool {
        self.lines.is_closed() || self.backlog.overflowed.load(Ordering::Relaxed)
    }
}

/// The listening API server. Dropping it closes the port and ends every watch.
pub struct Endpoint {
    runtime: Option<tokio::runtime::Runtime>,
    address: SocketAddr,
    exchanges: mpsc::Receiver<Exchange>,
    watchers: Vec<Watcher>,
    /// The newest resourceVersion every watcher has been sent.
    forwarded: u64,
}

impl Endpoint {
    /// Listens on 127.0.0.1, on a port the system picks, with kube-apiserver's limits.
    pub fn start() -> std::io::Result<Endpoint> {
        Self::start_with(PeerLimits::default())
    }

    /// [`Endpoint::start`] with other limits (tests shorten them).
    pub fn start_with(limits: PeerLimits) -> std::io::Result<Endpoint> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("api-server")
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0)))?;
        let address = listener.local_addr()?;
        let (sender, exchanges) = mpsc::channel();
        runtime.spawn(accept(listener, sender, limits));
        Ok(Endpoint {
            runtime: Some(runtime),
            address,
            exchanges,
            watchers: Vec::new(),
            forwarded: 0,
        })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Waits up to `wait` for a request, then answers the requests waiting, in order of
    /// arrival, up to and including the first write, so that the caller reconciles before
    /// any later request is answered (a read after a write sees what the controllers made
    /// of it). Returns a line for that write (`PATCH .../rollouts/rollouts-demo/status →
    /// 200`), for the caller to reconcile and to print.
    pub fn answer_pending(&mut self, store: &mut ApiServer, wait: Duration) -> Vec<String> {
        let mut writes = Vec::new();
        let mut next = self.exchanges.recv_timeout(wait).ok();
        while let Some(exchange) = next {
            match exchange {
                Exchange::Call {
                    call,
                    summary,
                    reply,
                } => {
                    let answer = rest::execute(store, call);
                    if answer.wrote {
                        writes.push(format!("{summary} → {}", answer.code));
                    }
                    let wrote = answer.wrote;
                    let _ = reply.send(answer);
                    if wrote {
                        break;
                    }
                }
                Exchange::Watch {
                    watch,
                    events,
                    started,
                } => {
                    // Earlier changes go to the earlier watchers first, so none is sent twice.
                    self.forward(store);
                    match watch.start(store) {
                        Ok(initial) => {
                            for event in &initial {
                                events.send(event);
                            }
                            let _ = started.send(Ok(()));
                            self.watchers.push(Watcher { watch, events });
                        }
                        Err(reply) => {
                            let _ = started.send(Err(reply));
                        }
                    }
                }
            }
            next = self.exchanges.try_recv().ok();
        }
        writes
    }

    /// Sends every open watch the changes stored since the last call, in order.
    pub fn forward(&mut self, store: &ApiServer) {
        self.watchers.retain(|w| !w.events.is_closed());
        if self.forwarded < store.resource_version() {
            for event in store.events_since(self.forwarded) {
                for w in &self.watchers {
                    if let Some(json) = w.watch.render(event, store) {
                        w.events.send(&json);
                    }
                }
            }
        }
        self.forwarded = store.resource_version();
    }

    /// Open watches (for tests and the status line).
    pub fn watch_count(&self) -> usize {
        self.watchers
            .iter()
            .filter(|w| !w.events.is_closed())
            .count()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.watchers.clear();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

/// A kubeconfig whose current context is this server, with `namespace` as its default.
pub fn kubeconfig(address: SocketAddr, namespace: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: canarysim
  cluster:
    server: http://{address}
contexts:
- name: canarysim
  context:
    cluster: canarysim
    user: canarysim
    namespace: {namespace}
current-context: canarysim
users:
- name: canarysim
  user: {{}}
"
    )
}

/// Connections that have not sent a request yet, oldest first: the first to go when the
/// process runs out of descriptors, so that a client with a request gets one.
#[derive(Default)]
struct Unheard {
    next: u64,
    connections: std::collections::BTreeMap<u64, tokio::task::AbortHandle>,
}

type SharedUnheard = Arc<std::sync::Mutex<Unheard>>;

fn heard(unheard: &SharedUnheard, id: u64) {
    unheard
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .connections
        .remove(&id);
}

async fn accept(
    listener: tokio::net::TcpListener,
    exchanges: mpsc::Sender<Exchange>,
    limits: PeerLimits,
) {
    let mut backoff = crate::serving::AcceptBackoff::default();
    let unheard: SharedUnheard = Arc::default();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                backoff.reset();
                stream
            }
            Err(_) => {
                // Out of descriptors (EMFILE): close the oldest connection that never sent
                // a request and accept again; with none, wait (retrying at once spins).
                let oldest = {
                    let mut u = unheard.lock().unwrap_or_else(|p| p.into_inner());
                    u.connections.pop_first()
                };
                match oldest {
                    Some((_, connection)) => connection.abort(),
                    None => backoff.wait().await,
                }
                continue;
            }
        };
        let exchanges = exchanges.clone();
        // Held until the connection is registered: it cannot leave the registry before.
        let mut u = unheard.lock().unwrap_or_else(|p| p.into_inner());
        u.next += 1;
        let id = u.next;
        let registry = unheard.clone();
        let task = tokio::spawn(async move {
            let on_request = registry.clone();
            let service = hyper::service::service_fn(move |request| {
                heard(&on_request, id);
                let exchanges = exchanges.clone();
                async move { Ok::<_, Infallible>(handle(request, exchanges, limits).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            heard(&registry, id);
        });
        u.connections.insert(id, task.abort_handle());
    }
}

async fn handle(
    request: hyper::Request<hyper::body::Incoming>,
    exchanges: mpsc::Sender<Exchange>,
    limits: PeerLimits,
) -> hyper::Response<ResponseBody> {
    let (parts, body) = request.into_parts();
    let header = |name: hyper::header::HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let (content_type, accept) = (header(CONTENT_TYPE), header(hyper::header::ACCEPT));
    let too_large = || {
        respond(Reply::failure(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {}", rest::MAX_BODY),
        ))
    };
    // A declared length over the limit is refused before any of the body is read.
    let declared: Option<usize> = header(hyper::header::CONTENT_LENGTH).parse().ok();
    if declared.is_some_and(|n| n > rest::MAX_BODY) {
        return too_large();
    }
    let body = match Limited::new(body, rest::MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return too_large(),
    };
    let method = parts.method.as_str().to_string();
    let path = parts.uri.path().to_string();
    let call = rest::parse(&rest::Request {
        method: &method,
        path: &path,
        query: parts.uri.query().unwrap_or(""),
        content_type: &content_type,
        accept: &accept,
        body: &body,
    });
    let gone = || {
        Reply::failure(
            503,
            "ServiceUnavailable",
            "the simulated cluster is shutting down",
        )
    };
    match call {
        Call::Answer(reply) => respond(reply),
        Call::Watch(watch) => {
            let timeout = watch.timeout;
            let (lines, receiver) = async_mpsc::unbounded_channel();
            let backlog = Arc::new(Backlog::default());
            let events = EventSender {
                lines,
                backlog: backlog.clone(),
                limit: limits.watch_buffer_bytes,
            };
            let (started, start) = oneshot::channel();
            if exchanges
                .send(Exchange::Watch {
                    watch,
                    events,
                    started,
                })
                .is_err()
            {
                return respond(gone());
            }
            match start.await {
                Ok(Ok(())) => {
                    let stream = EventStream {
                        lines: receiver,
                        backlog,
                        limit: limits.watch_buffer_bytes,
                        ended: false,
                        deadline: timeout.map(|t| Box::pin(tokio::time::sleep(t))),
                    };
                    let mut response = hyper::Response::new(stream.boxed());
                    response
                        .headers_mut()
                        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                    response
                }
                Ok(Err(reply)) => respond(reply),
                Err(_) => respond(gone()),
            }
        }
        call => {
            let (reply, answer) = oneshot::channel();
            let summary = format!("{method} {path}");
            if exchanges
                .send(Exchange::Call {
                    call,
                    summary,
                    reply,
                })
                .is_err()
            {
                return respond(gone());
            }
            respond(answer.await.unwrap_or_else(|_| gone()))
        }
    }
}

fn respond(reply: Reply) -> hyper::Response<ResponseBody> {
    let mut body = serde_json::to_vec(&reply.body).unwrap_or_default();
    body.push(b'\n');
    let mut response = hyper::Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() =
        hyper::StatusCode::from_u16(reply.code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for warning in &reply.warnings {
        if let Ok(value) = HeaderValue::from_str(&warning_header(warning)) {
            headers.append(hyper::header::WARNING, value);
        }
    }
    response
}

/// `299 - "text"`, the form kubectl prints as `Warning: text`; quotes and backslashes
/// escaped, anything but printable ASCII replaced.
fn warning_header(text: &str) -> String {
    let mut out = String::from("299 - \"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push('"');
    out
}

/// A watch's response body: one JSON event per line, until the client leaves, the timeout
/// passes, the server stops, or the client falls too far behind (a last ERROR event, 410).
struct EventStream {
    lines: async_mpsc::UnboundedReceiver<Bytes>,
    backlog: Arc<Backlog>,
    limit: usize,
    ended: bool,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl EventStream {
    /// What Kubernetes sends a watch that can no longer be served from where it is.
    fn too_slow(&self) -> Bytes {
        let status = serde_json::json!({
            "type": "ERROR",
            "object": {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "reason": "Expired", "code": 410,
                "message": format!(
                    "the watch fell more than {} bytes of events behind: list again and watch from there",
                    self.limit
                ),
            }
        });
        let mut line = serde_json::to_vec(&status).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }
}

impl Body for EventStream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        if let Some(deadline) = &mut this.deadline {
            if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
        }
        if this.backlog.overflowed.load(Ordering::Relaxed) {
            // What was queued is dropped with the watcher, as Kubernetes drops it.
            this.ended = true;
            this.lines.close();
            return Poll::Ready(Some(Ok(Frame::data(this.too_slow()))));
        }
        match this.lines.poll_recv(cx) {
            Poll::Ready(Some(line)) if line.is_empty() => {
                // The overflow's wake-up (sent after the flag): end with the 410.
                this.ended = true;
                this.lines.close();
                Poll::Ready(Some(Ok(Frame::data(this.too_slow()))))
            }
            Poll::Ready(Some(line)) => {
                this.backlog.bytes.fetch_sub(line.len(), Ordering::Relaxed);
                Poll::Ready(Some(Ok(Frame::data(line))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_quoted_for_the_header() {
        assert_eq!(warning_header("a \"b\" ≥ c"), "299 - \"a \\\"b\\\" ? c\"");
    }
}
