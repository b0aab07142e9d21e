//! Live mode: the simulated world on real loopback sockets. Every ready pod is a real
//! server ([`crate::pod_server`]) answering per the scenario's `backends`; the router is a
//! real hyper reverse proxy serving the route table that `mesh` computed and that is in
//! force at the world's instant (push delay included), swapped atomically. The world moves
//! on the wall clock, optionally scaled ([`Pacer`]). Nothing here decides a route: the
//! router asks `mesh`, as the simulated load does.

mod router;
mod run;
mod serve;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::clock::SimTime;
use crate::load::Backends;
use crate::model::vocabulary;
use crate::pod_server::{self, PodSpec, RunningPod};
use crate::sim::World;

pub use router::{PodAddresses, Router, RouterCounts, UPSTREAM_HEADER};
pub use run::{real_load, run_live};
pub use serve::{ApiOptions, QUIET_CAP, ServeOptions, serve};

/// The real side of a live world: pod servers and the router, on a runtime of their own.
pub struct Live {
    runtime: tokio::runtime::Runtime,
    router: Router,
    pods: BTreeMap<String, RunningPod>,
    backends: Backends,
    /// What the pods answer TLS with (a self-signed certificate).
    tls: Arc<rustls::ServerConfig>,
    seed: u64,
    /// The instant of the table the router serves (None: none yet).
    published: Option<SimTime>,
    /// What the pods that stopped had received (the pods' view outlives them).
    stopped: BTreeMap<String, (u64, u64)>,
    /// The store's resourceVersion at the last sync.
    synced_version: Option<u64>,
}

/// Why live mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("cannot start the live runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot listen on 127.0.0.1: {0}")]
    Listen(std::io::Error),
    #[error("cannot make the pods' TLS certificate: {0}")]
    Certificate(String),
    #[error("cannot write the kubeconfig {0}: {1}")]
    Kubeconfig(std::path::PathBuf, std::io::Error),
}

impl Live {
    /// Starts the router on 127.0.0.1 (a port the system picks); callers in `namespace`.
    pub fn start(backends: &Backends, namespace: &str, seed: u64) -> Result<Live, LiveError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(LiveError::Runtime)?;
        let router = runtime
            .block_on(Router::start(namespace, seed))
            .map_err(LiveError::Listen)?;
        Ok(Live {
            runtime,
            router,
            pods: BTreeMap::new(),
            backends: backends.clone(),
            tls: pod_server::self_signed_tls(&["localhost"]).map_err(LiveError::Certificate)?,
            seed,
            published: None,
            stopped: BTreeMap::new(),
            synced_version: None,
        })
    }

    /// The proxies' load-balancing default and kube-proxy's mode (the scenario's
    /// `cluster.endpoint_lb` and `cluster.kube_proxy`).
    pub fn set_data_plane(&self, lb: crate::mesh::LbPolicy, mode: crate::kubeproxy::ProxyMode) {
        self.router.set_data_plane(lb, mode);
    }

    /// The router's address.
    pub fn address(&self) -> SocketAddr {
        self.router.address()
    }

    /// Pods listening now, by name.
    pub fn pods(&self) -> impl Iterator<Item = (&str, SocketAddr)> {
        self.pods.iter().map(|(n, p)| (n.as_str(), p.address))
    }

    /// Where each pod answers TLS, by name.
    pub fn tls_pods(&self) -> impl Iterator<Item = (&str, SocketAddr)> {
        self.pods
            .iter()
            .filter_map(|(n, p)| Some((n.as_str(), p.tls_address?)))
    }

    /// The router's listener for a gateway's TLS/TCP port (`namespace/name`, port).
    pub fn l4_address(&self, gateway: &str, port: u32) -> Option<SocketAddr> {
        self.router.l4_address(gateway, port)
    }

    /// Every TLS/TCP listener of the router: gateway, port, address.
    pub fn l4_listeners(&self) -> Vec<(String, u32, SocketAddr)> {
        self.router.l4_listeners()
    }

    /// [`Live::sync`] when the world changed since the last: an object was written, or
    /// another route table came into force (a push lands with no write of its own).
    pub fn sync_if_changed(&mut self, world: &World) -> bool {
        let now = world.now();
        let in_force = world
            .mesh
            .pushes()
            .iter()
            .rev()
            .find(|p| p.effective_at <= now)
            .map(|p| p.effective_at);
        let version = world.api.resource_version();
        if in_force == self.published && Some(version) == self.synced_version {
            return false;
        }
        self.sync(world);
        true
    }

    /// Makes the real side match the world: a server for every ready pod (a pod that is
    /// gone or not ready stops listening, and requests in flight to it fail), and the
    /// route table in force at the world's instant behind the router.
    pub fn sync(&mut self, world: &World) {
        self.synced_version = Some(world.api.resource_version());
        let mut ready: BTreeMap<String, PodSpec> = BTreeMap::new();
        // The pods' facts: this runs whenever the world changes.
        for (key, pod) in world.api.pod_facts(None, None) {
            if !pod.ready {
                continue;
            }
            let image = pod.image.as_deref().unwrap_or("").to_string();
            let name = key.name.clone();
            ready.insert(
                name.clone(),
                PodSpec {
                    version: crate::endpoints::image_version(&image).to_string(),
                    hash: pod.labels.get(vocabulary::HASH_LABEL).cloned(),
                    model: self.backends.for_image(&image),
                    seed: self.seed,
                    pod: name,
                },
            );
        }
        let stopped = &mut self.stopped;
        self.pods.retain(|name, pod| {
            let keep = ready.contains_key(name);
            if !keep {
                let (received, errors) = pod.received();
                let total = stopped.entry(name.clone()).or_default();
                total.0 += received;
                total.1 += errors;
            }
            keep
        });
        for (name, spec) in ready {
            if self.pods.contains_key(&name) {
                continue;
            }
            let started = self.runtime.block_on(pod_server::start_with_tls(
                spec,
                ([127, 0, 0, 1], 0).into(),
                Some(self.tls.clone()),
            ));
            if let Ok(pod) = started {
                self.pods.insert(name, pod);
            }
        }
        let addresses = router::PodAddresses {
            plain: self
                .pods
                .iter()
                .map(|(n, p)| (n.clone(), p.address))
                .collect(),
            tls: self
                .pods
                .iter()
                .filter_map(|(n, p)| Some((n.clone(), p.tls_address?)))
                .collect(),
        };
        let now = world.now();
        let in_force = world
            .mesh
            .pushes()
            .iter()
            .rev()
            .find(|p| p.effective_at <= now);
        let services = crate::kubeproxy::ServiceProxy::from_objects(&world.api);
        match in_force {
            Some(pushed) if self.published != Some(pushed.effective_at) => {
                self.published = Some(pushed.effective_at);
                self.router
                    .publish(Some(pushed.table.clone()), services, addresses);
            }
            _ => self.router.update(services, addresses),
        }
    }

    /// Requests each pod has received so far and how many it answered with an error,
    /// stopped pods included: the pods' view (every attempt, retries included).
    pub fn received(&self) -> BTreeMap<String, (u64, u64)> {
        let mut all = self.stopped.clone();
        for (name, pod) in &self.pods {
            let (received, errors) = pod.received();
            let total = all.entry(name.clone()).or_default();
            total.0 += received;
            total.1 += errors;
        }
        all
    }

    /// The router's counters now (retries, timeouts, faults, mirrors…).
    pub fn router_counts(&self) -> router::RouterCounts {
        self.router.counts()
    }

    /// Runs a future on the live runtime (the real load, in `run --live`).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // Servers stop with their handles; the router's listener with it.
        self.pods.clear();
        self.router.stop();
    }
}

/// Moves a world along the wall clock: at each instant the world reaches, it waits until
/// that much wall time (divided by the time scale) has passed since the anchor, then makes
/// the real side match. With a stop flag set (Ctrl-C), it no longer waits.
pub struct Pacer {
    /// (wall instant, world instant, virtual seconds per wall second) the pace counts from.
    anchor: std::cell::Cell<(Instant, SimTime, f64)>,
    stop: Arc<AtomicBool>,
}

impl Pacer {
    /// `scale`: virtual seconds per wall second (1: real time; 60: a minute a second).
    pub fn new(world: &World, scale: f64, stop: Arc<AtomicBool>) -> Pacer {
        let pacer = Pacer {
            anchor: std::cell::Cell::new((Instant::now(), world.now(), 1.0)),
            stop,
        };
        pacer.rebase(world.now(), scale);
        pacer
    }

    /// Counts from now, at `world_now`, with a new scale (a real load runs at 1: its
    /// requests take the time they take).
    pub fn rebase(&self, world_now: SimTime, scale: f64) {
        let scale = if scale.is_finite() && scale > 0.0 {
            scale
        } else {
            1.0
        };
        self.anchor.set((Instant::now(), world_now, scale));
    }

    pub fn scale(&self) -> f64 {
        self.anchor.get().2
    }

    /// Waits until the wall clock reaches the world's instant, then syncs `live`.
    pub fn reach(&self, world: &World, live: &mut Live) {
        // In short naps, so that a stop is noticed at once.
        while let Some(left) = self.wall_left(world.now()) {
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
        live.sync(world);
    }

    /// How long until the wall clock reaches the world's instant `t` (None: reached, or
    /// stopped).
    pub fn wall_left(&self, t: SimTime) -> Option<Duration> {
        let (wall, sim, scale) = self.anchor.get();
        let virtual_elapsed = t.since(sim);
        let wall_target = wall + Duration::from_secs_f64(virtual_elapsed.as_secs_f64() / scale);
        let left = wall_target.saturating_duration_since(Instant::now());
        (!left.is_zero() && !self.stopped()).then_some(left)
    }

    /// The world's instant that corresponds to the wall clock now.
    pub fn virtual_now(&self) -> SimTime {
        let (wall, sim, scale) = self.anchor.get();
        sim.after(wall.elapsed().mul_f64(scale))
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}
