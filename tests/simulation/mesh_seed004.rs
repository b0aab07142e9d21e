//! Seed 004 through the data plane: the controller sets weight 20 on the VirtualService; does
//! 20 % of the traffic entering through the gateway reach the canary, when, and what do
//! in-mesh and sidecar-less callers see?

use canarysim::clock::SimTime;
use canarysim::endpoints::Role;
use canarysim::kubeproxy::{ProxyMode, ProxyState, ServiceProxy};
use canarysim::mesh::{
    self, DEFAULT_PUSH_DELAY, LbPolicy, LbState, Mesh, Origin, RequestMeta, RouteError, RouteTable,
};
use canarysim::model::{Kind, Manifest};
use canarysim::random::stream;
use canarysim::sim::{ClusterConfig, World};
use std::collections::BTreeMap;
use std::time::Duration;

const NS: &str = "my-demo";
const GATEWAY: &str = "my-demo/rollouts-demo-gateway";
const HOST: &str = "rollouts-demo.local";

fn manifests(files: &[&str]) -> Vec<Manifest> {
    canarysim::demo::manifests(files)
}

fn phase(world: &World) -> String {
    let r = world.api.get(Kind::Rollout, NS, "rollouts-demo").unwrap();
    r.status()["phase"].as_str().unwrap_or("").to_string()
}

/// Deploys seed 004, updates the image, and advances to the first pause, pushing a new
/// route table at every instant the store changed. Returns the world and the mesh.
fn paused_at_twenty() -> (World, Mesh) {
    let mut world = World::new(
        ClusterConfig {
            // These tests read the object history.
            watch_log: true,
            ..ClusterConfig::default()
        },
        1,
    );
    world
        .apply(&manifests(&[
            "seed-004-rollout.yaml",
            "seed-004-services.yaml",
            "seed-004-gateway.yaml",
            "seed-004-virtualsvc.yaml",
        ]))
        .unwrap();
    world.advance(Duration::from_secs(60)).unwrap();
    let mut mesh = Mesh::new();
    mesh.push(mesh::translate(&world.api), world.now(), DEFAULT_PUSH_DELAY);
    let mut pushed_rv = world.api.resource_version();

    world
        .apply(&manifests(&["seed-004-rollout-update.yaml"]))
        .unwrap();
    let end = world.now().after(Duration::from_secs(120));
    let paused = world
        .advance_until(end, |w| {
            // istiod reacts to changes only: an unchanged store pushes nothing.
            if w.api.resource_version() != pushed_rv {
                mesh.push(mesh::translate(&w.api), w.now(), DEFAULT_PUSH_DELAY);
                pushed_rv = w.api.resource_version();
            }
            phase(w) == "Paused"
        })
        .unwrap();
    assert!(paused, "rollout did not pause: {}", phase(&world));
    (world, mesh)
}

/// Requests through `origin` to `host`, counted by (role, version).
fn split(
    table: &RouteTable,
    origin: Origin,
    host: &str,
    n: usize,
) -> BTreeMap<(Role, String), usize> {
    let req = RequestMeta {
        origin,
        host,
        namespace: NS,
        ..RequestMeta::default()
    };
    let mut rng = stream(1, "router");
    let mut lb = LbState::new(table);
    let mut out = BTreeMap::new();
    for _ in 0..n {
        let s = table
            .serve(&req, LbPolicy::RoundRobin, &mut rng, &mut lb)
            .unwrap();
        let e = table.endpoint(s.endpoint).unwrap();
        *out.entry((e.role, e.version.clone())).or_default() += 1;
    }
    out
}

fn canary_percent(counts: &BTreeMap<(Role, String), usize>) -> f64 {
    let total: usize = counts.values().sum();
    let canary: usize = counts
        .iter()
        .filter(|((role, _), _)| *role == Role::Canary)
        .map(|(_, n)| n)
        .sum();
    canary as f64 * 100.0 / total as f64
}

/// When the controller wrote weight 20 into the VirtualService.
fn weight_written_at(world: &World) -> SimTime {
    world
        .api
        .events_since(0)
        .iter()
        .find(|e| {
            e.object.kind == Kind::VirtualService
                && e.object.spec()["http"][0]["route"][1]["weight"] == 20
        })
        .map(|e| e.time)
        .expect("the controller wrote weight 20")
}

#[test]
fn twenty_percent_of_gateway_traffic_reaches_the_yellow_canary() {
    let (world, mesh) = paused_at_twenty();
    // The rollout pauses at the instant it writes weight 20: the router has not seen it yet.
    let now = mesh.table_at(world.now()).unwrap();
    let counts = split(now, Origin::Gateway(GATEWAY), HOST, 1000);
    assert_eq!(canary_percent(&counts), 0.0, "{counts:?}");

    let table = mesh
        .table_at(world.now().after(DEFAULT_PUSH_DELAY))
        .unwrap();
    assert!(
        table.notes().is_empty(),
        "{:?}",
        table
            .notes()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    let counts = split(table, Origin::Gateway(GATEWAY), HOST, 100_000);
    let canary = canary_percent(&counts);
    assert!(
        (canary - 20.0).abs() < 0.5,
        "canary share {canary}: {counts:?}"
    );
    let versions: Vec<&(Role, String)> = counts.keys().collect();
    assert_eq!(
        versions,
        [
            &(Role::Stable, "blue".to_string()),
            &(Role::Canary, "yellow".to_string())
        ]
    );
}

#[test]
fn the_new_weights_reach_the_router_one_push_delay_after_the_write() {
    let (world, mesh) = paused_at_twenty();
    let written = weight_written_at(&world);
    let just_before =
        SimTime(written.as_duration() + DEFAULT_PUSH_DELAY - Duration::from_millis(1));
    let at = written.after(DEFAULT_PUSH_DELAY);
    let before = split(
        mesh.table_at(just_before).unwrap(),
        Origin::Gateway(GATEWAY),
        HOST,
        10_000,
    );
    assert_eq!(canary_percent(&before), 0.0, "old weights: {before:?}");
    let after = split(
        mesh.table_at(at).unwrap(),
        Origin::Gateway(GATEWAY),
        HOST,
        10_000,
    );
    assert!((canary_percent(&after) - 20.0).abs() < 1.5, "{after:?}");
}

#[test]
fn callers_inside_the_mesh_and_without_a_sidecar_bypass_the_gateway_split() {
    let (world, mesh) = paused_at_twenty();
    let table = mesh
        .table_at(world.now().after(DEFAULT_PUSH_DELAY))
        .unwrap();
    // The VirtualService is bound to the gateway only, and its host is not a Service.
    let inside = RequestMeta {
        host: HOST,
        namespace: NS,
        ..RequestMeta::default()
    };
    assert_eq!(table.route(&inside).unwrap_err(), RouteError::NoRoute);
    // In-mesh callers of the canary Service reach its one pod, per request.
    let counts = split(table, Origin::Mesh, "rollouts-demo-canary", 100);
    assert_eq!(counts[&(Role::Canary, "yellow".to_string())], 100);

    // Without a sidecar, kube-proxy picks per connection among the Service's pods.
    let proxy = ServiceProxy::from_objects(&world.api);
    let stable = proxy.resolve("rollouts-demo-stable", NS).unwrap();
    let mut rng = stream(1, "kube-proxy");
    let mut state = ProxyState::default();
    let pods: std::collections::BTreeSet<String> = (0..8)
        .map(|_| {
            let e = proxy
                .pick_endpoint(stable, ProxyMode::Ipvs, &mut rng, &mut state)
                .unwrap();
            let e = proxy.endpoint(e).unwrap();
            assert_eq!((e.role, e.version.as_str()), (Role::Stable, "blue"));
            e.pod.clone()
        })
        .collect();
    assert_eq!(pods.len(), 4, "ipvs cycles through the four stable pods");
}

/// The data plane reads plain objects: the seed's route table built from a snapshot of the
/// store's objects (no API server) routes exactly as the one built from the store.
#[test]
fn the_route_table_from_a_plain_object_set_routes_as_from_the_store() {
    use canarysim::model::{Kind, ObjectSet, Objects};
    let world = canarysim::demo::paused_at_20(1);
    let kinds = [
        Kind::Service,
        Kind::Pod,
        Kind::Rollout,
        Kind::VirtualService,
        Kind::DestinationRule,
        Kind::Gateway,
    ];
    let snapshot = ObjectSet::new(
        kinds
            .iter()
            .flat_map(|k| world.api.objects(*k).into_iter().cloned())
            .collect(),
    );
    let from_store = canarysim::mesh::translate(&world.api);
    let from_snapshot = canarysim::mesh::translate(&snapshot);
    assert_eq!(format!("{from_store:?}"), format!("{from_snapshot:?}"));
    assert!(!from_snapshot.clusters().is_empty());
}
