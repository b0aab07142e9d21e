//! A load's shards run by workers elsewhere (pods of an Indexed Job) and gathered by one
//! coordinator (`canarysim load coordinate --expect-workers N`), over plain HTTP:
//!
//! * `POST /ready/I`: worker I is ready; the answer is held until all N are, so that the
//!   shards send together (a shard sent alone would meet a gateway without the others' load);
//! * `POST /result/I` with worker I's result file (`load --out`'s JSON): kept once it parses
//!   as shard I. When all N have delivered, the coordinator judges them as `load merge` does.
//!
//! The worker's side (`load URL --shard I/N --coordinator URL`): [`wait_for_go`] before the
//! load, [`deliver`] after it.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};

use crate::load::result_file::ResultFile;

/// The largest result file a worker may send (a file is a few KB per version).
const MAX_RESULT: usize = 16 << 20;

/// What the workers have said so far.
#[derive(Default)]
struct Gathered {
    ready: std::collections::BTreeSet<u32>,
    results: BTreeMap<u32, ResultFile>,
}

struct Coordinator {
    workers: u32,
    /// Connections open now: the coordinator ends once the last answer has gone out.
    open: std::sync::atomic::AtomicUsize,
    gathered: Mutex<Gathered>,
    /// Sent `true` once every worker is ready.
    go: tokio::sync::watch::Sender<bool>,
    /// Woken at each result; the last one ends the wait.
    delivered: tokio::sync::Notify,
}

/// Waits (at most `timeout`) for `workers` workers to be ready, released them together,
/// and returns their result files by shard index, named `worker I`. On timeout: what
/// arrived, and how many were missing.
pub fn coordinate(
    listener: std::net::TcpListener,
    workers: u32,
    timeout: Duration,
) -> Result<Vec<(String, ResultFile)>, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the coordinator's runtime: {e}"))?;
    runtime.block_on(async move {
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("cannot listen: {e}"))?;
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| format!("cannot listen: {e}"))?;
        let coordinator = Arc::new(Coordinator {
            workers,
            gathered: Mutex::new(Gathered::default()),
            go: tokio::sync::watch::channel(false).0,
            delivered: tokio::sync::Notify::new(),
            open: std::sync::atomic::AtomicUsize::new(0),
        });
        let serving = coordinator.clone();
        let server = crate::pod_server::spawn_server(listener, None, move || {
            let coordinator = serving.clone();
            let connection = Arc::new(OpenConnection::new(coordinator.clone()));
            move |req| {
                let (coordinator, _connection) = (coordinator.clone(), connection.clone());
                async move { coordinator.answer(req).await }
            }
        });
        let all_in = async {
            loop {
                let waiting = coordinator.delivered.notified();
                if coordinator.results().len() as u32 >= workers {
                    break;
                }
                waiting.await;
            }
        };
        let finished = tokio::time::timeout(timeout, all_in).await;
        // The last answers are on their way out: each worker closes its connection once it
        // has read its answer (a bounded wait: a worker may also hang).
        let closed = async {
            while coordinator.open.load(Ordering::SeqCst) > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        if finished.is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(10), closed).await;
        }
        server.abort();
        let results = coordinator.results();
        if finished.is_err() {
            let missing: Vec<String> = (0..workers)
                .filter(|i| !results.iter().any(|(j, _)| j == i))
                .map(|i| i.to_string())
                .collect();
            return Err(format!(
                "{} of {workers} workers delivered within {}; missing: {}",
                results.len(),
                humantime::format_duration(timeout),
                missing.join(", ")
            ));
        }
        Ok(results
            .into_iter()
            .map(|(i, file)| (format!("worker {i}"), file))
            .collect())
    })
}

impl Coordinator {
    fn results(&self) -> Vec<(u32, ResultFile)> {
        let gathered = self.gathered.lock().unwrap_or_else(|p| p.into_inner());
        gathered
            .results
            .iter()
            .map(|(i, f)| (*i, f.clone()))
            .collect()
    }

    async fn answer(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<Full<Bytes>> {
        let path = req.uri().path().to_string();
        let index = |prefix: &str| {
            path.strip_prefix(prefix)
                .and_then(|i| i.parse::<u32>().ok())
                .filter(|i| *i < self.workers)
        };
        if req.method() != hyper::Method::POST {
            return text(405, "POST /ready/I or /result/I\n");
        }
        if let Some(i) = index("/ready/") {
            return self.ready(i).await;
        }
        let Some(i) = index("/result/") else {
            return text(
                404,
                "POST /ready/I or /result/I, I below the number of workers\n",
            );
        };
        let body = match Limited::new(req.into_body(), MAX_RESULT).collect().await {
            Ok(body) => body.to_bytes(),
            Err(e) => return text(400, &format!("cannot read the result file: {e}\n")),
        };
        let name = format!("worker {i}");
        let file = match ResultFile::parse(&name, &String::from_utf8_lossy(&body)) {
            Ok(file) => file,
            Err(e) => return text(400, &format!("{e}\n")),
        };
        if file.shard.map(|s| (s.index, s.count)) != Some((i, self.workers)) {
            return text(
                400,
                &format!("{name}: the file is not shard {i}/{}\n", self.workers),
            );
        }
        self.gathered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .results
            .insert(i, file);
        self.delivered.notify_one();
        text(200, "kept\n")
    }

    /// Holds worker `i`'s answer until every worker is ready.
    async fn ready(&self, i: u32) -> hyper::Response<Full<Bytes>> {
        let all = {
            let mut gathered = self.gathered.lock().unwrap_or_else(|p| p.into_inner());
            gathered.ready.insert(i);
            gathered.ready.len() as u32 >= self.workers
        };
        if all {
            let _ = self.go.send(true);
        }
        let mut go = self.go.subscribe();
        match go.wait_for(|go| *go).await {
            Ok(_) => text(200, "go\n"),
            Err(_) => text(503, "the coordinator stopped\n"),
        }
    }
}

/// Counts a connection open while its handler lives.
struct OpenConnection(Arc<Coordinator>);

impl OpenConnection {
    fn new(coordinator: Arc<Coordinator>) -> OpenConnection {
        coordinator.open.fetch_add(1, Ordering::SeqCst);
        OpenConnection(coordinator)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

fn text(status: u16, body: &str) -> hyper::Response<Full<Bytes>> {
    hyper::Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "text/plain")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("a fixed, valid response")
}

/// Worker `shard`: tells the coordinator at `url` it is ready and waits (at most
/// `timeout`) until every worker is.
pub fn wait_for_go(url: &str, shard: u32, timeout: Duration) -> Result<(), String> {
    post(url, &format!("/ready/{shard}"), Bytes::new(), timeout).map(|_| ())
}

/// Sends worker `shard`'s result file to the coordinator at `url`.
pub fn deliver(url: &str, shard: u32, file: &ResultFile) -> Result<(), String> {
    let body = serde_json::to_vec(file).map_err(|e| e.to_string())?;
    post(
        url,
        &format!("/result/{shard}"),
        Bytes::from(body),
        Duration::from_secs(60),
    )
    .map(|_| ())
}

/// POSTs `body` to `url` + `path` (plain HTTP: the coordinator is a Service in the cluster);
/// the answer's text if it is a 200, else what went wrong.
fn post(url: &str, path: &str, body: Bytes, timeout: Duration) -> Result<String, String> {
    let base = url.trim_end_matches('/');
    let uri: hyper::Uri = format!("{base}{path}")
        .parse()
        .map_err(|e| format!("--coordinator {url:?}: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!("--coordinator {url:?}: expected http://HOST:PORT"));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<Full<Bytes>>();
        let request = hyper::Request::post(uri.clone())
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        let answer = tokio::time::timeout(timeout, async {
            let response = client.request(request).await.map_err(|e| e.to_string())?;
            let status = response.status();
            let text = response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok::<_, String>((status, String::from_utf8_lossy(&text).into_owned()))
        })
        .await
        .map_err(|_| {
            format!(
                "the coordinator at {uri} did not answer within {}",
                humantime::format_duration(timeout)
            )
        })?
        .map_err(|e| format!("cannot reach the coordinator at {uri}: {e}"))?;
        match answer {
            (status, text) if status == hyper::StatusCode::OK => Ok(text),
            (status, text) => Err(format!(
                "the coordinator at {uri} answered {status}: {}",
                text.trim()
            )),
        }
    })
}
