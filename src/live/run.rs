//! `canarysim run FILE --live`: the same runner, controller and route tables, with the world
//! paced on the wall clock and every load step sent as real requests (the client of
//! `canarysim load`) through the live router to the pods' real servers.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::{Live, LiveError, Pacer};
use crate::endpoints::Role;
use crate::load::http::{Extent, HttpLoad, Target};
use crate::load::{Amount, ArmStats, DataPath, LoadResult, PodStats, Streams, Workload};
use crate::mesh::Protocol;
use crate::scenario::{Plan, RunReport, Runner};
use crate::sim::World;
use crate::verify::SplitUnit;

/// A live load that asks for a request count stops after this much wall time at the most.
const MAX_LIVE_LOAD: Duration = Duration::from_secs(600);

/// Runs the scenario live; the report names the mode.
pub fn run_live(plan: &Plan, seed: Option<u64>, time_scale: f64) -> Result<RunReport, LiveError> {
    let mut runner = Runner::new(plan, seed);
    let live = Live::start(&plan.backends, &plan.namespace, seed.unwrap_or(plan.seed))?;
    let (lb, mode) = plan.data_plane();
    live.set_data_plane(lb, mode);
    let live = Rc::new(RefCell::new(live));
    live.borrow_mut().sync(&runner.world);
    let pacer = Rc::new(Pacer::new(
        &runner.world,
        time_scale,
        Arc::new(AtomicBool::new(false)),
    ));
    let (paced, pacer_for_waits) = (live.clone(), pacer.clone());
    runner.on_instant(move |w| pacer_for_waits.reach(w, &mut paced.borrow_mut()));
    let loading = live.clone();
    runner.load_with(
        &format!("live (time scale {time_scale})"),
        move |world, workload, streams| {
            real_load(world, &mut loading.borrow_mut(), &pacer, workload, streams)
        },
    );
    while runner.step().is_some() {}
    Ok(runner.finish())
}

/// Sends a load step's requests through the router while the world keeps moving on the
/// wall clock (at 1×, whatever the time scale); the answers are attributed to the pods the
/// router names. `run --live` and the TUI's live sessions send their loads so.
pub fn real_load(
    world: &mut World,
    live: &mut Live,
    pacer: &Pacer,
    w: &Workload,
    streams: &mut Streams,
) -> Result<LoadResult, String> {
    world.settle().map_err(|e| e.to_string())?;
    live.sync(world);
    let started = world.now();
    // The live router and load keep no cookies: a sticky split would be judged per request.
    if crate::load::meets_session_affinity(&*world, w) {
        return Err("this load goes through an Ingress with session affinity (nginx.ingress.kubernetes.io/affinity: cookie), which canarysim simulates but does not serve live: run the scenario without --live".into());
    }
    // While real requests flow, the world moves at the wall clock's own pace: a load takes
    // the time it takes, and the rollout must not race ahead of it.
    let scale = pacer.scale();
    pacer.rebase(started, 1.0);
    // The data plane the simulation would send this load through, told to the router.
    let path = crate::load::data_path(&*world, w);
    let load = http_load_for(world, live, w, &path, &streams.arrivals)?;
    let (router_before, pods_before) = (live.router_counts(), live.received());
    // The load runs on threads of its own; this thread keeps the world on the wall clock
    // (pods turning ready, tables taking effect) until it is done.
    let sending = std::thread::spawn(move || crate::load::http::send(&load, &|_| {}));
    // The world catches up with the wall clock, its real side following each instant.
    let mut catch_up = |world: &mut World| -> Result<(), String> {
        let target = pacer.virtual_now();
        if target > world.now() {
            world
                .advance_until(target, |w| {
                    live.sync(w);
                    false
                })
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    while !sending.is_finished() {
        catch_up(world)?;
        std::thread::sleep(Duration::from_millis(5));
    }
    let outcome = sending
        .join()
        .map_err(|_| "the live load failed".to_string())?
        .map_err(|e| e.to_string())?;
    catch_up(world)?;
    pacer.rebase(world.now(), scale);
    let router = live.router_counts().since(&router_before);
    let mut received = live.received();
    for (pod, (n, errors)) in &mut received {
        let (n0, e0) = pods_before.get(pod).copied().unwrap_or_default();
        *n -= n0;
        *errors -= e0;
    }
    let seen = Seen {
        outcome: &outcome,
        router: &router,
        received: &received,
    };
    Ok(result(world, &seen, started, w, &path))
}

/// The real load that carries workload `w` through the router as the simulation would
/// send it along `path`: where it enters, who the caller is, which port and classifier.
fn http_load_for(
    world: &World,
    live: &Live,
    w: &Workload,
    path: &DataPath,
    arrivals: &rand_pcg::Pcg64Mcg,
) -> Result<HttpLoad, String> {
    let origin = match path {
        DataPath::Gateway(g) => format!("gateway {g}"),
        DataPath::Mesh => "mesh".to_string(),
        DataPath::KubeProxy => "plain".to_string(),
    };
    let labels: Vec<String> = crate::load::caller_labels(world, path, w)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    // The simulated load's own traffic, with what the router needs to know of its caller
    // (what the simulation knows of it without asking).
    let mut traffic = w.traffic.clone();
    let headers = &mut traffic.headers;
    headers.push((super::router::ORIGIN_HEADER.to_string(), origin));
    headers.push((super::router::PORT_HEADER.to_string(), w.port.to_string()));
    headers.push((
        super::router::SOURCE_NAMESPACE_HEADER.to_string(),
        w.namespace.clone(),
    ));
    if !labels.is_empty() {
        headers.push((
            super::router::SOURCE_LABELS_HEADER.to_string(),
            labels.join(","),
        ));
    }
    let (requests, duration) = match w.amount {
        Amount::Requests(n) => (Some(n), Some(MAX_LIVE_LOAD)),
        Amount::Duration(d) => (None, Some(d)),
    };
    // HTTP goes to the router's HTTP port; TLS and TCP to the listener standing for the
    // gateway's port, which routes each connection by what it shows (SNI) and passes it on.
    let port = match (w.protocol, path) {
        (Protocol::Http, _) => live.address().port(),
        (_, DataPath::Gateway(g)) => live
            .l4_address(g, w.port)
            .ok_or_else(|| format!("gateway {g} has no TLS or TCP route on port {}", w.port))?
            .port(),
        _ => {
            return Err(
                "live mode serves TLS and TCP routes at gateways only; this load goes through the mesh"
                    .to_string(),
            );
        }
    };
    traffic.connections = traffic.connections.max(1);
    // HTTP/2 multiplexes over its connections, keep-alive or not (as simulated).
    traffic.keepalive |= traffic.http2;
    // The router listens on 127.0.0.1; TLS still names the host the routes are for.
    traffic.sni = traffic.sni.or_else(|| Some(traffic.host.clone()));
    // Answers are classified by pod: the pods the rule's key names count for it.
    let stop_counts = match &traffic.stop {
        Some(rule) => pods_named_by(world, &rule.key),
        None => Vec::new(),
    };
    Ok(HttpLoad {
        target: Target {
            tls: w.protocol == Protocol::Tls,
            host: "127.0.0.1".into(),
            port,
        },
        extent: Extent::new(requests, duration)?,
        traffic,
        arrivals: arrivals.clone(),
        timeout: Duration::from_secs(10),
        // The router and pods count what they served: a request is let finish.
        cut_in_flight: false,
        // The pods' certificate is self-signed; the split, not the identity, is on trial.
        insecure: true,
        cacert: None,
        connect_to: Vec::new(),
        // Over HTTP the router names the pod each answer came from, its own 504s after a
        // try included; a TLS or TCP connection passes through, and the pod names itself.
        classifier: crate::load::classify::Classifier::Header(
            match w.protocol {
                Protocol::Http => super::UPSTREAM_HEADER,
                Protocol::Tls | Protocol::Tcp => "x-pod",
            }
            .into(),
        ),
        stop_counts,
    })
}

/// What a live load saw: the client's tally, the router's counters and the pods' own counts.
struct Seen<'a> {
    outcome: &'a crate::load::http::HttpOutcome,
    router: &'a super::RouterCounts,
    received: &'a BTreeMap<String, (u64, u64)>,
}

/// The pods a share key names (`stable`, `canary`, or an image tag), as the table in force
/// knows them.
fn pods_named_by(world: &World, key: &str) -> Vec<String> {
    let Some(table) = world.mesh.table_at(world.now()) else {
        return Vec::new();
    };
    table
        .endpoints()
        .iter()
        .filter(|e| match key {
            "stable" => e.role == Role::Stable,
            "canary" => e.role == Role::Canary,
            tag => e.version == tag,
        })
        .map(|e| e.pod.clone())
        .collect()
}

/// The real load's tally as the runner's [`LoadResult`]: each answering pod's role and
/// version as the route tables of the load's time knew them; what the router did, from its
/// counters; the pods' view, from the pods.
fn result(
    world: &World,
    seen: &Seen,
    started: crate::clock::SimTime,
    w: &Workload,
    path: &DataPath,
) -> LoadResult {
    let mut roles: BTreeMap<String, (Role, String)> = BTreeMap::new();
    for pushed in world.mesh.pushes() {
        for e in pushed.table.endpoints() {
            roles.insert(e.pod.clone(), (e.role, e.version.clone()));
        }
    }
    let (outcome, t) = (seen.outcome, &seen.outcome.tally);
    let role_of = |pod: &str| {
        roles
            .get(pod)
            .cloned()
            .unwrap_or((Role::Other, pod.to_string()))
    };
    let mut arms: Vec<ArmStats> = Vec::new();
    fn arm_for(arms: &mut Vec<ArmStats>, role: Role, version: String) -> &mut ArmStats {
        match arms
            .iter()
            .position(|a| a.role == role && a.version == version)
        {
            Some(i) => &mut arms[i],
            None => {
                arms.push(ArmStats::new(role, version));
                arms.last_mut().expect("just pushed")
            }
        }
    }
    // The router names the pod that answered: its pods' counts, added up per version.
    for v in &t.versions {
        let (role, version) = role_of(&v.version);
        arm_for(&mut arms, role, version).merge(v);
    }
    for (pod, n) in &seen.router.mirrored {
        let (role, version) = role_of(pod);
        arm_for(&mut arms, role, version).mirrored += n;
    }
    let pods = seen
        .received
        .iter()
        .filter(|(_, (n, _))| *n > 0)
        .map(|(pod, &(responses, errors))| {
            let (role, version) = role_of(pod);
            PodStats {
                pod: pod.clone(),
                role,
                version,
                responses,
                errors,
            }
        })
        .collect();
    arms.sort_by_key(|a| match a.role {
        Role::Stable => 0,
        Role::Canary => 1,
        Role::Other => 2,
    });
    let classified = t.classified();
    let r = seen.router;
    let through = match path {
        DataPath::Gateway(g) => format!("gateway {g}"),
        DataPath::Mesh => "mesh (sidecar)".to_string(),
        DataPath::KubeProxy => "kube-proxy".to_string(),
    };
    LoadResult {
        sent: t.sent,
        answered: classified,
        not_found: r.not_found,
        no_healthy_upstream: r.no_healthy_upstream,
        unresolved_backend: r.unresolved_backend,
        // What the router did not answer: kube-proxy's refusals, the client's own failures.
        refused: t.sent.saturating_sub(
            classified
                + r.not_found
                + r.no_healthy_upstream
                + r.unresolved_backend
                + r.upstream_failed
                + r.fault_aborted,
        ),
        upstream_failed: r.upstream_failed,
        fault_aborted: r.fault_aborted,
        timed_out: r.timed_out,
        retries: r.retries,
        arms,
        pods,
        unit: match (path, w.protocol) {
            (DataPath::KubeProxy, _) | (_, Protocol::Tls | Protocol::Tcp) => SplitUnit::Connection,
            _ => SplitUnit::Request,
        },
        connections_opened: t.connections,
        clients_switched: 0,
        path: format!(
            "{through}, live router at {} (real sockets)",
            outcome.address
        ),
        sequential: w.traffic.stop.as_ref().map(|_| {
            outcome.sequential(match w.amount {
                Amount::Requests(n) => Some(n),
                Amount::Duration(_) => None,
            })
        }),
        configured: Vec::new(),
        capped: match w.amount {
            Amount::Requests(n) if t.sent < n && outcome.decided.is_none() => Some(format!(
                "stopped at the {} min cap on a live load after {} requests; asked for {n}",
                MAX_LIVE_LOAD.as_secs() / 60,
                t.sent
            )),
            _ => None,
        },
        started,
        ended: world.now(),
    }
}
