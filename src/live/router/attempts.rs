//! One request on a matched HTTP route, on the wall clock: the route's policy (fault, then
//! attempts retried with back-off to other hosts, per-try and route timeouts), decided by
//! `mesh::policy` as the simulated load decides it; outlier detection per host, as one
//! proxy keeps it; and the route's mirrors, sent as fire-and-forget shadow requests.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{Body, Picking, Published, State, reply};
use crate::endpoints::EndpointId;
use crate::mesh::policy::{Attempt, HostHealth, HttpPolicy};
use crate::mesh::{HostPick, RouteChoice, RouteTable};

/// The header on the router's answers that names the pod the last attempt went to, so a
/// client can attribute a proxy's 504 (a timeout) as the simulation does: to that pod.
pub const UPSTREAM_HEADER: &str = "x-canarysim-upstream";

/// What a request carries to each attempt and each shadow.
pub(super) struct Outgoing {
    pub method: hyper::Method,
    pub path: String,
    pub host: String,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

/// One proxy's outlier detector: each host's record, on the router's own clock.
pub(super) struct Outliers {
    started: Instant,
    health: Mutex<HashMap<String, HostHealth>>,
}

impl Outliers {
    pub fn new() -> Outliers {
        Outliers {
            started: Instant::now(),
            health: Mutex::new(HashMap::new()),
        }
    }

    fn now_us(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }
}

/// How one attempt ended, with the pod's answer when there was one.
struct Tried {
    attempt: Attempt,
    answer: Option<hyper::Response<Bytes>>,
}

impl State {
    /// Serves a request on its matched route: the fault filter, the attempts within the
    /// route timeout, and the answer the client gets.
    pub(super) async fn serve_route(
        &self,
        published: &Published,
        table: &RouteTable,
        choice: &RouteChoice<'_>,
        request: Outgoing,
    ) -> hyper::Response<Body> {
        let policy = *choice.policy;
        let (delay_us, abort) = {
            let mut p = self.picking.lock().unwrap_or_else(|p| p.into_inner());
            policy.draw_fault(&mut p.policy)
        };
        if delay_us > 0 {
            // A high-resolution timer: tokio's rounds up to the next millisecond.
            tokio_hrtime::sleep(Duration::from_micros(delay_us)).await;
        }
        if let Some(status) = abort {
            self.stats.fault_aborted.fetch_add(1, Ordering::Relaxed);
            return reply(status, "fault filter abort");
        }
        // The hosts this request tried, readable after the route timeout dropped the attempts.
        let tried = Mutex::new(Vec::new());
        let attempts = self.attempts(published, table, choice, &policy, &request, &tried);
        let ending = match policy.timeout_us {
            Some(t) => tokio::time::timeout(Duration::from_micros(t), attempts).await,
            None => Ok(attempts.await),
        };
        match ending {
            Ok(response) => response,
            Err(_) => {
                self.stats.timed_out.fetch_add(1, Ordering::Relaxed);
                let last = tried
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .last()
                    .cloned();
                with_upstream(reply(504, "upstream request timeout"), last.as_deref())
            }
        }
    }

    /// The attempts: each one's host picked as Envoy picks it (another host on a retry,
    /// ejected hosts skipped), retried while the policy says so.
    async fn attempts(
        &self,
        published: &Published,
        table: &RouteTable,
        choice: &RouteChoice<'_>,
        policy: &HttpPolicy,
        request: &Outgoing,
        tried: &Mutex<Vec<String>>,
    ) -> hyper::Response<Body> {
        let lb = self.data_plane.lock().unwrap_or_else(|p| p.into_inner()).0;
        let cluster = {
            let mut p = self.picking.lock().unwrap_or_else(|p| p.into_inner());
            choice.pick_cluster(table, &mut p.router).1
        };
        let hosts = cluster.map_or(&[][..], |c| c.endpoints());
        let outlier = cluster.and_then(|c| c.outlier_detection()).copied();
        let pod_of = |e: u32| table.endpoint(EndpointId(e)).map_or("", |e| e.pod.as_str());
        let headers: Vec<(&str, &str)> = request
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)))
            .collect();
        let hash_key = cluster
            .and_then(|c| c.consistent_hash())
            .and_then(|h| h.key(&headers, &request.path));
        let mut tried_ids: Vec<u32> = Vec::new();
        let mut n = 0u32;
        loop {
            let picked = {
                let now = self.outliers.now_us();
                let health = self
                    .outliers
                    .health
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                let ejected = |e: u32| {
                    outlier.is_some() && health.get(pod_of(e)).is_some_and(|h| h.is_ejected(now))
                };
                let score = |e: u32| {
                    crate::mesh::policy::rendezvous_score(hash_key.unwrap_or(0), pod_of(e))
                };
                let mut p = self.picking.lock().unwrap_or_else(|p| p.into_inner());
                let Picking {
                    lb: lb_state,
                    balancer,
                    ..
                } = &mut *p;
                let pick = HostPick {
                    tried: &tried_ids,
                    ejected: &ejected,
                    hash_score: hash_key.map(|_| &score as &dyn Fn(u32) -> u64),
                    retry: n > 0,
                };
                let all_out = outlier.is_some() && hosts.iter().all(|h| ejected(h.0));
                match cluster {
                    Some(c) if !all_out => c.pick_host(lb, balancer, lb_state, &pick),
                    _ => None,
                }
            };
            let Some(e) = picked else {
                if cluster.is_some_and(|c| c.is_unresolved()) {
                    // As Envoy Gateway and Istio program a backendRef that does not resolve.
                    self.stats
                        .unresolved_backend
                        .fetch_add(1, Ordering::Relaxed);
                    return reply(500, "backend not resolved");
                }
                self.stats
                    .no_healthy_upstream
                    .fetch_add(1, Ordering::Relaxed);
                return reply(503, "no healthy upstream");
            };
            if n == 0 {
                self.shadow(published, table, choice, lb, request);
            }
            tried_ids.push(e);
            let pod = pod_of(e).to_string();
            tried
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(pod.clone());
            let done = self.attempt(published, &pod, policy, request).await;
            if let Some(od) = &outlier {
                let status = match done.attempt {
                    Attempt::Answered { status, .. } => Some(status),
                    Attempt::PerTryTimeout => Some(504),
                    _ => None,
                };
                let now = self.outliers.now_us();
                let mut health = self
                    .outliers
                    .health
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                let out = hosts
                    .iter()
                    .filter(|h| health.get(pod_of(h.0)).is_some_and(|h| h.is_ejected(now)))
                    .count();
                health
                    .entry(pod.clone())
                    .or_default()
                    .record(od, status, now, out, hosts.len());
            }
            if !policy.retries_on(&done.attempt) || n >= policy.retry.attempts {
                return self.final_answer(done, &pod);
            }
            n += 1;
            self.stats.retries.fetch_add(1, Ordering::Relaxed);
            let backoff = {
                let mut p = self.picking.lock().unwrap_or_else(|p| p.into_inner());
                HttpPolicy::backoff_us(n, &mut p.policy)
            };
            tokio_hrtime::sleep(Duration::from_micros(backoff)).await;
        }
    }

    /// One attempt to `pod`, within the per-try timeout; the pod's whole answer is read.
    async fn attempt(
        &self,
        published: &Published,
        pod: &str,
        policy: &HttpPolicy,
        request: &Outgoing,
    ) -> Tried {
        let connect_failure = Tried {
            attempt: Attempt::ConnectFailure,
            answer: None,
        };
        // The table still lists a pod that no longer listens: the connection fails.
        let Some(&address) = published.addresses.get(pod) else {
            return connect_failure;
        };
        let started = Instant::now();
        let call = self.call(address, request);
        let answer = match policy.retry.per_try_timeout_us {
            Some(t) => match tokio::time::timeout(Duration::from_micros(t), call).await {
                Ok(answer) => answer,
                Err(_) => {
                    return Tried {
                        attempt: Attempt::PerTryTimeout,
                        answer: None,
                    };
                }
            },
            None => call.await,
        };
        match answer {
            Some(answer) => Tried {
                attempt: Attempt::Answered {
                    status: answer.status().as_u16(),
                    latency_us: started.elapsed().as_micros() as u64,
                },
                answer: Some(answer),
            },
            None => connect_failure,
        }
    }

    /// What the client gets when no more attempts follow.
    fn final_answer(&self, done: Tried, pod: &str) -> hyper::Response<Body> {
        match (done.attempt, done.answer) {
            (_, Some(answer)) => with_upstream(
                answer.map(|b| {
                    http_body_util::BodyExt::boxed(http_body_util::BodyExt::map_err(
                        http_body_util::Full::new(b),
                        |never| match never {},
                    ))
                }),
                Some(pod),
            ),
            (Attempt::PerTryTimeout, None) => {
                with_upstream(reply(504, "upstream request timeout"), Some(pod))
            }
            _ => {
                self.stats.upstream_failed.fetch_add(1, Ordering::Relaxed);
                reply(
                    503,
                    "upstream connect error or disconnect/reset before headers",
                )
            }
        }
    }

    /// The route's mirrors: each sampled on its own, sent to its cluster's pick with
    /// `-shadow` appended to the authority (as Envoy does), its answer discarded.
    fn shadow(
        &self,
        published: &Published,
        table: &RouteTable,
        choice: &RouteChoice<'_>,
        lb: crate::mesh::LbPolicy,
        request: &Outgoing,
    ) {
        let mut targets = Vec::new();
        {
            let mut p = self.picking.lock().unwrap_or_else(|p| p.into_inner());
            let Picking {
                lb: lb_state,
                router,
                balancer,
                ..
            } = &mut *p;
            choice.shadows(table, lb, router, balancer, lb_state, |_, endpoint| {
                if let Some(e) = endpoint.and_then(|e| table.endpoint(e)) {
                    targets.push(e.pod.clone());
                }
            });
        }
        for pod in targets {
            let Some(&address) = published.addresses.get(&pod) else {
                continue;
            };
            *self
                .stats
                .mirrored
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(pod)
                .or_default() += 1;
            let shadow = Outgoing {
                method: request.method.clone(),
                path: request.path.clone(),
                host: format!("{}-shadow", request.host),
                headers: request.headers.clone(),
                body: request.body.clone(),
            };
            let client = self.client.clone();
            tokio::spawn(async move {
                let _ = send(&client, address, &shadow).await;
            });
        }
    }

    /// One HTTP/1.1 call to a pod; None: the connection failed.
    pub(super) async fn call(
        &self,
        address: std::net::SocketAddr,
        request: &Outgoing,
    ) -> Option<hyper::Response<Bytes>> {
        send(&self.client, address, request).await
    }
}

/// Sends `request` to `address` and reads the whole answer; None: the connection failed.
async fn send(
    client: &super::Upstream,
    address: std::net::SocketAddr,
    request: &Outgoing,
) -> Option<hyper::Response<Bytes>> {
    use http_body_util::BodyExt;
    let mut builder = hyper::Request::builder()
        .method(request.method.clone())
        .version(hyper::Version::HTTP_11)
        .uri(format!("http://{address}{}", request.path));
    for (k, v) in &request.headers {
        if k != hyper::header::HOST {
            builder = builder.header(k, v);
        }
    }
    let forwarded = builder
        .header(hyper::header::HOST, request.host.as_str())
        .body(
            http_body_util::Full::new(request.body.clone())
                .map_err(|never| match never {})
                .boxed(),
        )
        .ok()?;
    let response = client.request(forwarded).await.ok()?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.ok()?.to_bytes();
    Some(hyper::Response::from_parts(parts, body))
}

/// Names the pod the request last went to (None: it went nowhere).
pub(super) fn with_upstream(
    mut response: hyper::Response<Body>,
    pod: Option<&str>,
) -> hyper::Response<Body> {
    if let Some(value) = pod.and_then(|p| hyper::header::HeaderValue::from_str(p).ok()) {
        response.headers_mut().insert(UPSTREAM_HEADER, value);
    }
    response
}
