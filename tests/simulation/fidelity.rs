//! Nothing the user wrote is lost, and the same inputs give the same history, byte for byte.

use canarysim::model::yaml::load_str;
use canarysim::model::{Kind, Manifest};
use canarysim::sim::{ClusterConfig, World};
use serde_json::Value;
use std::time::Duration;

const MANIFESTS: &str = r#"
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: demo
  labels: {team: payments}
  annotations: {notes.example.com/owner: alice}
spec:
  replicas: 4
  revisionHistoryLimit: 3
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}, annotations: {prometheus.io/scrape: "true"}}
    spec:
      containers:
      - name: app
        image: demo:1
        env: [{name: MODE, value: fast}]
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 3}
  strategy:
    canary:
      canaryService: demo-canary
      stableService: demo-stable
      trafficRouting:
        istio:
          virtualService: {name: demo-vsvc, routes: [primary]}
      steps: [{setWeight: 25}, {pause: {duration: 30s}}, {setWeight: 75}, {pause: {duration: 30s}}]
---
{apiVersion: v1, kind: Service, metadata: {name: demo-stable}, spec: {selector: {app: demo}, ports: [{port: 80, targetPort: 8080}]}}
---
{apiVersion: v1, kind: Service, metadata: {name: demo-canary}, spec: {selector: {app: demo}, ports: [{port: 80, targetPort: 8080}]}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: demo-vsvc
  labels: {owner: platform}
spec:
  hosts: [demo.example.com]
  gateways: [mesh]
  x-unknown-top-level: {kept: true}
  http:
  - name: canary-header
    match: [{headers: {x-canary: {exact: "yes"}}}]
    route: [{destination: {host: demo-canary}}]
  - name: primary
    timeout: 3s
    retries: {attempts: 3, perTryTimeout: 1s, retryOn: "5xx,reset"}
    corsPolicy: {allowOrigins: [{exact: "https://example.com"}], allowMethods: [GET]}
    fault: {delay: {percentage: {value: 0.1}, fixedDelay: 5s}}
    headers: {request: {set: {x-route: primary}}}
    route:
    - destination: {host: demo-stable, port: {number: 80}}
      weight: 100
      headers: {response: {add: {x-version: stable}}}
    - destination: {host: demo-canary, port: {number: 80}}
      weight: 0
      headers: {response: {add: {x-version: canary}}}
"#;

fn manifests() -> Vec<Manifest> {
    load_str("fidelity.yaml", MANIFESTS, "shop").unwrap()
}

/// Deploys, rolls out demo:2 to the end, waits out the scale-down delay.
fn full_rollout(seed: u64) -> World {
    let mut world = World::new(
        ClusterConfig {
            // These tests read the object history.
            watch_log: true,
            ..ClusterConfig::default()
        },
        seed,
    );
    world.apply(&manifests()).unwrap();
    world.advance(Duration::from_secs(30)).unwrap();
    world.set_image("shop", "demo", "app", "demo:2").unwrap();
    world.advance(Duration::from_secs(600)).unwrap();
    assert_eq!(
        world
            .api
            .get(Kind::Rollout, "shop", "demo")
            .unwrap()
            .status()["phase"],
        "Healthy"
    );
    world
}

/// The object without what the server and the controller own: server metadata and the
/// weights of the route the rollout manages.
fn user_part(mut v: Value) -> Value {
    for k in ["resourceVersion", "generation", "uid", "creationTimestamp"] {
        v["metadata"].as_object_mut().unwrap().remove(k);
    }
    for d in v["spec"]["http"][1]["route"].as_array_mut().unwrap() {
        d.as_object_mut().unwrap().remove("weight");
    }
    v
}

#[test]
fn a_virtual_service_keeps_every_field_it_was_given_through_a_whole_rollout() {
    let original = user_part(
        manifests()
            .into_iter()
            .find(|m| m.object.kind == Kind::VirtualService)
            .unwrap()
            .object
            .value,
    );
    let world = full_rollout(1);
    let mut writes = 0;
    let mut weights_seen = std::collections::BTreeSet::new();
    for e in world.api.events_since(0) {
        if e.object.kind != Kind::VirtualService {
            continue;
        }
        writes += 1;
        weights_seen.insert(
            e.object.value["spec"]["http"][1]["route"][1]["weight"]
                .as_i64()
                .unwrap(),
        );
        let after = user_part(e.object.value.clone());
        // Byte for byte, key order included.
        assert_eq!(
            serde_json::to_string(&after).unwrap(),
            serde_json::to_string(&original).unwrap(),
            "VirtualService changed at rv {}",
            e.resource_version
        );
    }
    assert_eq!(
        weights_seen.into_iter().collect::<Vec<_>>(),
        [0, 25, 75, 100]
    );
    assert!(
        writes >= 5,
        "the rollout wrote the VirtualService {writes} times"
    );
}

#[test]
fn the_rollout_keeps_its_own_unknown_fields_and_metadata() {
    let world = full_rollout(1);
    let ro = world.api.get(Kind::Rollout, "shop", "demo").unwrap();
    assert_eq!(ro.labels()["team"], "payments");
    assert_eq!(ro.annotation("notes.example.com/owner"), Some("alice"));
    assert_eq!(ro.spec()["revisionHistoryLimit"], 3);
    let rs = world
        .api
        .get(
            Kind::ReplicaSet,
            "shop",
            &format!("demo-{}", ro.status()["stableRS"].as_str().unwrap()),
        )
        .unwrap();
    let container = &rs.spec()["template"]["spec"]["containers"][0];
    assert_eq!(container["readinessProbe"]["periodSeconds"], 3);
    assert_eq!(container["env"][0]["value"], "fast");
    assert_eq!(
        rs.spec()["template"]["metadata"]["annotations"]["prometheus.io/scrape"],
        "true"
    );
}

#[test]
fn the_same_inputs_give_byte_identical_object_histories() {
    let history = |seed| -> String {
        let world = full_rollout(seed);
        world
            .api
            .events_since(0)
            .iter()
            .map(|e| {
                format!(
                    "{} {} {} {}\n",
                    e.resource_version,
                    e.time,
                    e.event_type.as_str(),
                    serde_json::to_string(&e.object.value).unwrap()
                )
            })
            .collect()
    };
    let a = history(7);
    assert!(
        a.lines().count() > 50,
        "a whole rollout writes many objects"
    );
    assert_eq!(a, history(7));
    assert_ne!(a, history(8), "the seed names the pods");
}
