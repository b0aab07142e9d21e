//! The API server on a socket (`canarysim serve --api`): hyper on 127.0.0.1, a port the
//! system picks. This file only moves bytes: requests are read into [`rest::Call`]s and
//! handed to the thread that owns the simulated world, which answers them one at a time
//! against the store ([`Endpoint::answer_pending`]), so concurrent writers are serialised
//! and a stale resourceVersion always gets its 409. Watches stay open as chunked JSON
//! streams; [`Endpoint::forward`] sends them every stored change in order.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::mpsc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, combinators::BoxBody};
use hyper::body::{Body, Frame};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::sync::{mpsc as async_mpsc, oneshot};

use super::ApiServer;
use super::rest::{self, Call, Reply, Watch};

type ResponseBody = BoxBody<Bytes, Infallible>;

/// What the socket side hands the world's thread.
enum Exchange {
    Call {
        call: Call,
        summary: String,
        reply: oneshot::Sender<Reply>,
    },
    Watch {
        watch: Watch,
        events: async_mpsc::UnboundedSender<Value>,
        started: oneshot::Sender<Result<(), Reply>>,
    },
}

struct Watcher {
    watch: Watch,
    events: async_mpsc::UnboundedSender<Value>,
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
    /// Listens on 127.0.0.1, on a port the system picks.
    pub fn start() -> std::io::Result<Endpoint> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("api-server")
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0)))?;
        let address = listener.local_addr()?;
        let (sender, exchanges) = mpsc::channel();
        runtime.spawn(accept(listener, sender));
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
                            for event in initial {
                                let _ = events.send(event);
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
                        let _ = w.events.send(json);
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

async fn accept(listener: tokio::net::TcpListener, exchanges: mpsc::Sender<Exchange>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let exchanges = exchanges.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let exchanges = exchanges.clone();
                async move { Ok::<_, Infallible>(handle(request, exchanges).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(
    request: hyper::Request<hyper::body::Incoming>,
    exchanges: mpsc::Sender<Exchange>,
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
            format!(
                "the request body is larger than {} bytes, or was cut off",
                rest::MAX_BODY
            ),
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
            let (events, receiver) = async_mpsc::unbounded_channel();
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
                        events: receiver,
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
/// passes, or the server stops.
struct EventStream {
    events: async_mpsc::UnboundedReceiver<Value>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for EventStream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(deadline) = &mut this.deadline {
            if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
        }
        match this.events.poll_recv(cx) {
            Poll::Ready(Some(event)) => {
                let mut line = serde_json::to_vec(&event).unwrap_or_default();
                line.push(b'\n');
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(line)))))
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
