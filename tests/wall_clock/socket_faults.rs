//! Faults on real sockets (issue 15): canarysim's live router serving the seed walkthrough's
//! route table in front of real pods on loopback, loaded by `canarysim load`, while one pod
//! resets every connection, one stalls past the client's timeout, one is killed mid-load,
//! or the router itself is restarted. Every request ends in exactly one class (sent = the
//! sum of the classes = the count asked for), and nothing wedges: each load is bounded in
//! count and time, and a watchdog fails the test if one does not come back.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use canarysim::cli::{Cli, execute};
use canarysim::kubeproxy::ServiceProxy;
use canarysim::live::{PodAddresses, Router};
use canarysim::mesh::RouteTable;
use canarysim::model::{Kind, vocabulary};
use canarysim::pod_server::{self, PodSpec, RunningPod};
use clap::Parser;
use tokio::io::AsyncReadExt;

use crate::support;
use support::accounted;

const HOST: &str = "rollouts-demo.local";
/// How long a load may take before the test calls it wedged (a hang detector, not a timing
/// assertion: every load here is bounded well below it).
const WEDGED: Duration = Duration::from_secs(120);

/// The walkthrough's cluster once blue is healthy: its route table, its Services and its
/// ready pods' names (4 blue pods, all traffic to the stable).
fn healthy_walkthrough() -> (RouteTable, ServiceProxy, Vec<String>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/seed-004-walkthrough.yaml");
    let plan = canarysim::scenario::load(&path, &canarysim::scenario::Disk).unwrap();
    let mut runner = canarysim::scenario::Runner::new(&plan, None);
    runner.step();
    let world = &runner.world;
    // The last table pushed (healthy is reached before its push delay has passed).
    let table = world.mesh.pushes().last().unwrap().table.clone();
    let services = ServiceProxy::from_objects(&world.api);
    let pods = world
        .api
        .list(Kind::Pod, None, None)
        .into_iter()
        .filter(|p| vocabulary::pod_is_ready(p))
        .map(|p| p.name().to_string())
        .collect();
    (table, services, pods)
}

/// How a stand-in pod misbehaves.
#[derive(Clone, Copy)]
enum Fault {
    /// Reads the request, then resets the connection (RST, no answer).
    ResetConnections,
    /// Reads the request and never answers (the connection stays open).
    Stall,
}

/// A misbehaving pod on 127.0.0.1 (a port the system picks), served until the runtime ends.
fn misbehaving(rt: &tokio::runtime::Runtime, fault: Fault) -> SocketAddr {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    rt.spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let _ = stream.read(&mut buffer).await;
                match fault {
                    Fault::ResetConnections => {
                        let _ = stream.set_zero_linger();
                        drop(stream);
                    }
                    Fault::Stall => {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        drop(stream);
                    }
                }
            });
        }
    });
    address
}

/// The walkthrough's router in front of 4 pods: real blue pods answering in `latency`,
/// but for `first` (the first pod's stand-in, when given).
struct Front {
    rt: tokio::runtime::Runtime,
    router: Router,
    table: RouteTable,
    services: ServiceProxy,
    addresses: BTreeMap<String, SocketAddr>,
    pods: BTreeMap<String, RunningPod>,
}

impl Front {
    fn start(latency: Duration, first: Option<Fault>) -> Front {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (table, services, names) = healthy_walkthrough();
        assert_eq!(names.len(), 4, "{names:?}");
        let mut addresses = BTreeMap::new();
        let mut pods = BTreeMap::new();
        for (i, name) in names.iter().enumerate() {
            let address = match first {
                Some(fault) if i == 0 => misbehaving(&rt, fault),
                _ => {
                    let mut spec = PodSpec::new("blue").answering(latency, 0.0, 500);
                    spec.pod = name.clone();
                    let pod = rt
                        .block_on(pod_server::start(spec, "127.0.0.1:0".parse().unwrap()))
                        .unwrap();
                    let address = pod.address;
                    pods.insert(name.clone(), pod);
                    address
                }
            };
            addresses.insert(name.clone(), address);
        }
        let router = rt.block_on(Router::start("my-demo", 1)).unwrap();
        let front = Front {
            rt,
            router,
            table,
            services,
            addresses,
            pods,
        };
        front.publish(&front.router);
        front
    }

    fn publish(&self, router: &Router) {
        router.publish(
            Some(self.table.clone()),
            self.services.clone(),
            PodAddresses {
                plain: self.addresses.clone(),
                tls: BTreeMap::new(),
            },
        );
    }

    /// Requests the real pods received.
    fn received(&self) -> u64 {
        self.pods.values().map(|p| p.received().0).sum()
    }
}

/// `canarysim load` through the router on a thread of its own; the JSON report, or a
/// failure if it has not come back by [`WEDGED`].
fn load_through(router: SocketAddr, args: &[&str]) -> mpsc::Receiver<serde_json::Value> {
    let mut argv: Vec<String> = [
        "canarysim",
        "load",
        "--quiet",
        "--format",
        "json",
        "--host",
        HOST,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.push(format!("http://{router}/"));
    argv.extend(args.iter().map(|s| s.to_string()));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (code, out, err) = execute(Cli::parse_from(argv));
        assert!(code <= 1, "{code}: {out}{err}");
        let _ = tx.send(serde_json::from_str(&out).unwrap());
    });
    rx
}

fn finished(rx: mpsc::Receiver<serde_json::Value>) -> serde_json::Value {
    rx.recv_timeout(WEDGED).expect("the load wedged")
}

fn class(classes: &BTreeMap<String, u64>, name: &str) -> u64 {
    classes.get(name).copied().unwrap_or(0)
}

#[test]
fn a_pod_that_resets_every_connection_is_retried_elsewhere_and_every_request_counted() {
    let front = Front::start(Duration::ZERO, Some(Fault::ResetConnections));
    let before = front.router.counts();
    let report = finished(load_through(
        front.router.address(),
        &["-n", "2000", "-c", "4"],
    ));
    let classes = accounted(&report);
    assert_eq!(report["sent"], 2000, "{report}");
    let counts = front.router.counts().since(&before);
    // Round robin sends a quarter of first attempts to the resetting pod; Istio's default
    // policy retries each on another host.
    assert!(counts.retries >= 250, "{counts:?}");
    // What the retries could not save is the router's 503, counted by both sides.
    assert_eq!(class(&classes, "503"), counts.upstream_failed, "{report}");
    assert_eq!(
        class(&classes, "2xx") + class(&classes, "503"),
        2000,
        "{report}"
    );
    assert_eq!(front.received(), class(&classes, "2xx"), "{report}");
}

#[test]
fn a_pod_that_stalls_past_the_timeout_costs_timeouts_only_and_nothing_wedges() {
    let front = Front::start(Duration::ZERO, Some(Fault::Stall));
    let report = finished(load_through(
        front.router.address(),
        &["-n", "200", "-c", "4", "-t", "200ms"],
    ));
    let classes = accounted(&report);
    assert_eq!(report["sent"], 200, "{report}");
    // Istio sets no route timeout: the router waits on the stalled pod and the client's
    // timeout ends those requests. The other three pods answer the rest.
    let timeouts = class(&classes, "timeout");
    assert!(timeouts >= 1, "{report}");
    assert_eq!(class(&classes, "2xx") + timeouts, 200, "{report}");
    // Every 2xx came from a real pod; a real pod's answer may only be late on a loaded
    // machine, never lost from the count.
    let received = front.received();
    assert!(
        (class(&classes, "2xx")..=200).contains(&received),
        "{received}: {report}"
    );
    // The router still serves once the load is over (the stalled pod still stalls).
    let again = finished(load_through(
        front.router.address(),
        &["-n", "8", "-c", "1", "-t", "200ms"],
    ));
    let classes = accounted(&again);
    assert!(class(&classes, "2xx") >= 1, "{again}");
    assert_eq!(
        class(&classes, "2xx") + class(&classes, "timeout"),
        8,
        "{again}"
    );
}

#[test]
fn a_pod_killed_mid_load_loses_no_request_from_the_count() {
    let mut front = Front::start(Duration::from_millis(5), None);
    let before = front.router.counts();
    // Bounded by count (the duration is a watchdog): the kill waits for the victim to
    // have served, not for a time.
    let rx = load_through(
        front.router.address(),
        &["-n", "4000", "-z", "300s", "-c", "4", "-t", "1s"],
    );
    let victim = front.pods.keys().next().unwrap().clone();
    wait_for(|| front.pods[&victim].received().0 >= 5);
    // Killed while the table still lists it: requests in flight to it and the next ones
    // sent to it fail at the router, which retries them on another pod.
    let killed = front.pods.remove(&victim).unwrap();
    let received_by_victim = killed.received().0;
    killed.stop();
    let report = finished(rx);
    let classes = accounted(&report);
    let counts = front.router.counts().since(&before);
    assert!(counts.retries >= 1, "the kill forced retries: {counts:?}");
    assert!(received_by_victim > 0, "the victim had served");
    // Answered, or in flight when -z ran out (at most one per connection).
    assert!(class(&classes, "deadline") <= 4, "{report}");
    assert_eq!(
        class(&classes, "2xx") + class(&classes, "503") + class(&classes, "deadline"),
        report["sent"].as_u64().unwrap(),
        "{report}"
    );
    assert_eq!(class(&classes, "503"), counts.upstream_failed, "{report}");
}

#[test]
fn the_router_restarted_mid_load_costs_refused_connections_and_serves_again() {
    let front = Front::start(Duration::from_millis(2), None);
    let address = front.router.address();
    // Bounded by count (the duration is a watchdog): the stop waits for answers, and the
    // restart follows at once, so most of the requests come after it.
    let rx = load_through(
        address,
        &["-n", "5000", "-z", "300s", "-c", "4", "-t", "1s"],
    );
    wait_for(|| front.received() >= 20);
    front.router.stop();
    let served_before_restart = front.received();
    // The new router listens where the old one did (its listener may take a moment to go).
    let restarted = (0..50)
        .find_map(|_| {
            let r = front
                .rt
                .block_on(Router::start_at(address, "my-demo", 1))
                .ok();
            if r.is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            r
        })
        .expect("the router restarts on its address");
    front.publish(&restarted);
    let report = finished(rx);
    let classes = accounted(&report);
    let down = class(&classes, "refused") + class(&classes, "reset");
    assert!(down >= 1, "requests met the router down: {report}");
    assert!(
        front.received() > served_before_restart,
        "the restarted router served: {report}"
    );
    // Every answer came from a pod (a pod may also have answered what the stop cut off).
    assert!(class(&classes, "2xx") <= front.received(), "{report}");
    restarted.stop();
}

/// Polls `done` until it holds (a watchdog of two minutes, not a deadline to race).
fn wait_for(done: impl Fn() -> bool) {
    let watchdog = std::time::Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(std::time::Instant::now() < watchdog, "never happened");
        std::thread::sleep(Duration::from_millis(5));
    }
}
